"""Hostile and awkward inputs at the entry points (files, certificates, precision, size).

Each test builds its input by hand and states what softrank must say: one line on stderr,
exit 2 for input it refuses, exit 1 for a certificate that does not hold, never a traceback
and never a large allocation.
"""

import io
import json
import struct
import zipfile

import numpy as np
import pytest

from softrank.checker import (MalformedCertificate, TrivialCertificate, UpperWitness,
                              load_certificate, matrix_hash, save_certificate)
from softrank.errors import InvalidArgumentError, InvalidOperatorError
from softrank.harness.cli import main
from softrank.operators import Operator
from softrank.operator_files import load_operator, save_operator


def _new():
    """The names this change adds (imported per test, so that each test fails alone on a
    softrank without them)."""
    from softrank.certifiers.bracket import BASE_MEMORY, memory_estimate
    from softrank.checker.arrays import MAX_MEMBERS, read_arrays
    from softrank.errors import InvalidFileError
    from softrank.operator_files import renormalize_rows

    return dict(BASE_MEMORY=BASE_MEMORY, memory_estimate=memory_estimate,
                MAX_MEMBERS=MAX_MEMBERS, read_arrays=read_arrays,
                InvalidFileError=InvalidFileError, renormalize_rows=renormalize_rows)


def _uniform(m=4, n=6):
    return np.full((m, n), 1.0 / n)


def _err(capsys):
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


def _npy_header(shape, descr="<f8", fortran=False):
    d = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape!r}, }}"
    pad = 64 - (10 + len(d) + 1) % 64
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d) + pad + 1) + (d + " " * pad + "\n").encode()


# ------------------------------------------------------------------ item 4: files


def test_npy_header_claiming_1e12_entries_is_refused_before_allocating(tmp_path, capsys):
    f = tmp_path / "huge.npy"
    f.write_bytes(_npy_header((1000000, 1000000)) + b"\0" * 64)
    assert main(["bracket", str(f), "--eps", "0.25"]) == 2
    err = _err(capsys)
    assert "huge.npy" in err and "(1000000, 1000000)" in err and "7.28 TiB" in err, err


def test_npy_header_that_does_not_match_the_data_is_refused(tmp_path, capsys):
    f = tmp_path / "short.npy"
    f.write_bytes(_npy_header((4, 4)) + b"\0" * 8)  # 8 of the 128 bytes announced
    assert main(["bracket", str(f), "--eps", "0.25"]) == 2
    assert "announces 128 bytes of data" in _err(capsys)


@pytest.mark.parametrize("content", [b"PK\x03\x04" + b"garbage" * 10, b"PK\x05\x06" + b"\0" * 3,
                                     b"not an array at all", b""])
def test_corrupt_archive_or_unknown_file_is_one_line(tmp_path, capsys, content):
    f = tmp_path / "bad.npz"
    f.write_bytes(content)
    assert main(["bracket", str(f), "--eps", "0.25"]) == 2
    err = _err(capsys)
    assert "bad.npz" in err and ("not a readable .npz" in err or "neither" in err), err


def test_zip_bomb_member_is_refused_by_its_declared_size(tmp_path, capsys):
    read_arrays, InvalidFileError = [_new()[n] for n in ('read_arrays', 'InvalidFileError')]
    f = tmp_path / "bomb.npz"
    b = io.BytesIO()
    np.lib.format.write_array(b, _uniform(2, 2))
    with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("A.npy", b.getvalue() + b"\0" * (64 * 2**20))  # 64 MiB of zeros, ~64 KiB
    assert f.stat().st_size < 2**20
    assert main(["bracket", str(f), "--eps", "0.25"]) == 2
    assert "announces 32 bytes of data" in _err(capsys)
    # and above the bound the archive is refused from its directory alone
    with pytest.raises(InvalidFileError, match="announces 64 MiB uncompressed"):
        read_arrays(f, "file", max_bytes=2**20)


def test_object_array_for_Q_is_refused(tmp_path, capsys):
    f = tmp_path / "obj.npz"
    np.savez(f, A=_uniform(2, 2), Q=np.array([[1, None], [2, 3]], dtype=object),
             K=np.ones((2, 2)), beta=1.0)
    assert main(["bracket", str(f), "--eps", "0.25"]) == 2
    assert "array 'Q': dtype '|O' is not allowed" in _err(capsys)


@pytest.mark.parametrize("layer, msg", [(np.float64(2.5), "layer: expected a scalar integer"),
                                        (np.array("two"), "layer: expected a scalar integer"),
                                        (np.array([1, 2]), "layer: expected a scalar integer"),
                                        (np.int64(-7), "layer: expected >= 0")])
def test_non_integer_layer_is_refused(tmp_path, capsys, layer, msg):
    f = tmp_path / "op.npz"
    np.savez(f, A=_uniform(2, 2), layer=layer)
    assert main(["bracket", str(f), "--eps", "0.25"]) == 2
    assert msg in _err(capsys)


def test_provenance_fields_are_typed(tmp_path):
    f = tmp_path / "op.npz"
    np.savez(f, A=_uniform(2, 2), provenance=np.array(json.dumps({"family": 3})))
    with pytest.raises(InvalidOperatorError, match="provenance family: expected a string"):
        load_operator(f)
    np.savez(f, A=_uniform(2, 2), provenance=np.array(json.dumps({"layer": 1.5})))
    with pytest.raises(InvalidOperatorError, match="provenance layer: expected an integer"):
        load_operator(f)


def test_reader_round_trips_what_numpy_writes(tmp_path):
    read_arrays = _new()['read_arrays']
    arrays = {"c": np.arange(12.0).reshape(3, 4), "f": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
              "i": np.arange(5, dtype=np.int32), "s": np.array("{}"), "b": np.array([True, False]),
              "e": np.zeros((0, 3)), "big": np.arange(4, dtype=">f8")}
    for save in (np.savez, np.savez_compressed):
        save(tmp_path / "x.npz", **arrays)
        got = read_arrays(tmp_path / "x.npz", max_bytes=2**20)
        assert set(got) == set(arrays)
        for k, v in arrays.items():
            assert got[k].shape == v.shape and np.array_equal(got[k], v), k
    np.save(tmp_path / "x.npy", arrays["f"])
    assert np.array_equal(read_arrays(tmp_path / "x.npy", max_bytes=2**20), arrays["f"])


def test_reader_refuses_structured_void_and_too_many_members(tmp_path):
    MAX_MEMBERS, read_arrays, InvalidFileError = [
        _new()[n] for n in ("MAX_MEMBERS", "read_arrays", "InvalidFileError")]
    np.save(tmp_path / "s.npy", np.zeros(3, dtype=[("a", "<f8"), ("b", "<i4")]))
    with pytest.raises(InvalidFileError, match="not allowed"):
        read_arrays(tmp_path / "s.npy", max_bytes=2**20)
    np.save(tmp_path / "v.npy", np.zeros(3, dtype="V2"))
    with pytest.raises(InvalidFileError, match="bfloat16 has no numpy dtype"):
        read_arrays(tmp_path / "v.npy", max_bytes=2**20)
    np.savez(tmp_path / "m.npz", **{f"a{i}": np.zeros(1) for i in range(MAX_MEMBERS + 1)})
    with pytest.raises(InvalidFileError, match=f"{MAX_MEMBERS + 1} members"):
        read_arrays(tmp_path / "m.npz", max_bytes=2**20)
    with zipfile.ZipFile(tmp_path / "t.npz", "w") as z:
        z.writestr("A.txt", "hello")
    with pytest.raises(InvalidFileError, match="member 'A.txt' is not a .npy array"):
        read_arrays(tmp_path / "t.npz", max_bytes=2**20)


# ------------------------------------------------------------------ item 11: a certificate


def test_bracket_of_a_certificate_file_is_refused(tmp_path, capsys):
    A = _uniform()
    f = save_certificate(tmp_path / "c.npz", TrivialCertificate(0.25, "t"), A)
    assert main(["bracket", str(f), "--eps", "0.25"]) == 2
    err = _err(capsys)
    assert "is a softrank certificate, not an operator" in err and "softrank verify" in err


# ------------------------------------------------------------------ item 5: verify


def _rewrite(path, out, A=None, **header):
    """Copy a certificate file with A replaced and header fields changed; the hash follows A."""
    with np.load(path) as z:
        data = {k: z[k] for k in z.files}
    h = json.loads(str(data["header"]))
    if A is not None:
        data["A"] = A
        h["operator_hash"] = matrix_hash(A)
    h.update(header)
    data["header"] = np.array(json.dumps(h))
    np.savez(out, **data)
    return out


@pytest.fixture
def trivial_cert(tmp_path):
    return save_certificate(tmp_path / "ok.npz", TrivialCertificate(0.25, "trivial"), _uniform())


def test_verify_names_the_hash_it_verified_against(trivial_cert, capsys):
    assert main(["verify", str(trivial_cert)]) == 0
    out = capsys.readouterr().out
    assert f"for the matrix of hash {matrix_hash(_uniform())}" in out, out


@pytest.mark.parametrize("A, msg", [
    (10 * _uniform(), "rows must sum to 1"),
    (np.array([[1.5, -0.5, 0.0], [0.2, 0.3, 0.5]]), "entries must be >= 0, A[0, 1] = -0.5"),
    (np.array([[np.nan, 1.0]]), "entries must be finite"),
])
def test_verify_validates_the_matrix_as_bracket_does(trivial_cert, tmp_path, capsys, A, msg):
    f = _rewrite(trivial_cert, tmp_path / "bad.npz", A=A, shape=list(A.shape))
    assert main(["verify", str(f)]) == 1
    out = capsys.readouterr().out
    assert msg in out and "0 of 1 certificates hold" in out, out


@pytest.mark.parametrize("field, value, msg", [
    ("eps", 2.0, "eps 2.0 is not a number with 0 < eps < 1"),
    ("eps", "0.25", "eps '0.25' is not a number"),
    ("rank", "1", "rank '1' is not an integer"),
    ("rank", 12.7, "rank 12.7 is not an integer"),
    ("rank", True, "rank True is not an integer"),
    ("shape", [5, 6], "shape [5, 6] differs from the shape [4, 6] of A"),
    ("shape", "4x6", "shape '4x6' differs"),
    ("format", 2, "format 2 is not 1"),
    ("method", 7, "method 7 is not a string"),
    ("extra", 1, "unknown fields ['extra']"),
    ("operator_hash", "XYZ", "operator_hash 'XYZ' is not 16"),
])
def test_verify_checks_every_header_field(trivial_cert, tmp_path, capsys, field, value, msg):
    f = _rewrite(trivial_cert, tmp_path / "bad.npz", **{field: value})
    assert main(["verify", str(f)]) == 1
    out = capsys.readouterr().out
    assert msg in out, out


def test_verify_matrix_option_is_validated(trivial_cert, tmp_path, capsys):
    f = tmp_path / "m.npy"
    np.save(f, 10 * _uniform())
    assert main(["verify", str(trivial_cert), "--matrix", str(f)]) == 2
    assert "--matrix" in _err(capsys)


def test_load_certificate_respects_the_memory_bound(tmp_path):
    A = _uniform(40, 50)
    f = save_certificate(tmp_path / "u.npz", UpperWitness(0.5, A, np.eye(50)), A)
    with pytest.raises(MalformedCertificate, match="above the limit"):
        load_certificate(f, max_bytes=20000)
    assert load_certificate(f)[0].rank == 50


# ------------------------------------------------------------------ item 6: precision


def _float32_attention(seed=0, m=8, n=8):
    rng = np.random.default_rng(seed)
    L = rng.standard_normal((m, n)).astype(np.float32)
    E = np.exp(L - L.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)  # float32 softmax, as PyTorch saves it


def test_float32_attention_names_the_option(tmp_path, capsys):
    f = tmp_path / "a32.npy"
    A = _float32_attention()
    assert np.abs(A.astype(np.float64).sum(axis=1) - 1).max() > 1e-9  # the premise
    np.save(f, A)
    assert main(["bracket", str(f), "--eps", "0.25"]) == 2
    assert "--renormalize" in _err(capsys)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_renormalize_brackets_the_renormalised_matrix_and_says_so(tmp_path, capsys, dtype):
    f = tmp_path / "a.npy"
    A = _float32_attention().astype(dtype)
    np.save(f, A)
    assert main(["bracket", str(f), "--eps", "0.25", "--renormalize", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    s = A.astype(np.float64).sum(axis=1)
    B = A.astype(np.float64) / s[:, None]
    assert out[0]["renormalized"] == {"dtype": np.dtype(dtype).name,
                                      "delta": float(np.abs(s - 1).max())}
    assert out[0]["hash"] == matrix_hash(B)
    assert out[0]["lower"] <= out[0]["upper"]


def test_renormalize_rows_moves_each_row_by_its_sum_defect():
    renormalize_rows = _new()['renormalize_rows']
    A = np.array([[0.25, 0.25, 0.5000001], [0.5, 0.4999999, 0.0]])
    B, delta = renormalize_rows(A)
    assert np.allclose(B.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    # ||a - a / s||_1 = |s - 1| for a nonnegative row with sum s
    assert delta == pytest.approx(1e-7, rel=1e-6)
    assert np.abs(A - B).sum(axis=1).max() == pytest.approx(delta, rel=1e-6)
    with pytest.raises(InvalidOperatorError, match="row 0 sums to 0.0"):
        renormalize_rows(np.array([[0.0, 0.0], [0.5, 0.5]]))
    with pytest.raises(InvalidOperatorError, match=">= 0"):
        renormalize_rows(np.array([[1.5, -0.5]]))


def test_renormalize_is_refused_for_a_file_with_factors(tmp_path):
    rng = np.random.default_rng(1)
    op = Operator.from_factors(rng.standard_normal((3, 2)), rng.standard_normal((4, 2)), 1.0)
    save_operator(tmp_path / "op.npz", op)
    with pytest.raises(InvalidOperatorError, match="renormalize applies to a matrix without"):
        load_operator(tmp_path / "op.npz", renormalize=True)


# ------------------------------------------------------------------ item 7: memory


def test_memory_estimate_formula():
    BASE_MEMORY, memory_estimate = [_new()[n] for n in ('BASE_MEMORY', 'memory_estimate')]
    # hand-worked: 272 MiB + 42 bytes x 128 x 128 x 128 = 272 MiB + 84 MiB
    assert memory_estimate(128, 128) == 356 * 2**20
    assert memory_estimate(10, 800) == BASE_MEMORY + 42 * 10 * 800 * 10
    assert memory_estimate(384, 384) == 272 * 2**20 + 42 * 384**3
    # past min(m, N) = 384 the growth is m N only: 42 x 512 x 512 x 384 bytes = 4032 MiB
    assert memory_estimate(512, 512) == (272 + 4032) * 2**20
    # past 4 GiB + 224 bytes per entry (512 x 512: 4,152 MiB, above 4,032) it grows as m N
    assert memory_estimate(800, 800) == (272 + 4096) * 2**20 + 224 * 800 * 800  # 4.40 GiB
    assert memory_estimate(4096, 4096) == (272 + 4096 + 3584) * 2**20  # 224 x 16 Mi = 3.5 GiB


def test_bracket_refuses_above_max_memory_before_any_work(tmp_path, capsys):
    f = tmp_path / "A.npy"
    np.save(f, _uniform(128, 128))
    assert main(["bracket", str(f), "--eps", "0.25", "--max-memory", "150MiB"]) == 2
    err = _err(capsys)
    assert "128 x 128" in err and "356 MiB" in err and "--max-memory 150 MiB" in err, err


def test_max_memory_bounds_the_file_read(tmp_path, capsys):
    f = tmp_path / "A.npy"
    np.save(f, _uniform(600, 600))  # 2.7 MiB of data
    assert main(["bracket", str(f), "--eps", "0.25", "--max-memory", "2MiB"]) == 2
    assert "above the limit of 2 MiB" in _err(capsys)


@pytest.mark.parametrize("value", ["lots", "-1GiB", "12XB", "0", "0.5KiB"])
def test_max_memory_values(value, capsys):
    with pytest.raises(SystemExit) as e:
        main(["bracket", "x.npy", "--eps", "0.25", "--max-memory", value])
    assert e.value.code == 2
    assert "--max-memory" in capsys.readouterr().err


def _audit_refused(tmp_path, capsys, matrices: dict, workers: str, max_memory: str) -> str:
    """``softrank audit`` of a panel of uniform matrices (name: shape), refused before any
    work: exit 2 and no ledger. Returns stderr."""
    for name, shape in matrices.items():
        np.save(tmp_path / f"{name}.npy", _uniform(*shape))
    (tmp_path / "p.toml").write_text("".join(f'[[matrix]]\npath = "{name}.npy"\n'
                                             for name in matrices))
    out = tmp_path / "out"
    assert main(["audit", "--panel", str(tmp_path / "p.toml"), "--out", str(out), "--quiet",
                 "--workers", workers, "--max-memory", max_memory, "--eps", "0.25"]) == 2
    assert not (out / "ledger.sqlite").exists()
    return _err(capsys)


def test_audit_refuses_a_panel_above_max_memory_naming_the_operator(tmp_path, capsys):
    err = _audit_refused(tmp_path, capsys, {"small": (8, 8), "big": (128, 128)}, "2", "700MiB")
    # two workers: 2 x (272 MiB + 42 x 128^3 bytes) = 712 MiB for the big operator, above
    # 700 MiB; 2 x (272 MiB + 42 x 8^3 bytes), about 544 MiB, for the small one, below it
    assert "'matrix-big'" in err and "'matrix-small'" not in err
    assert "x 2 workers" in err and "712 MiB" in err, err


def test_audit_checks_the_operator_with_the_largest_estimate(tmp_path, capsys):
    # 300 x 300: 272 MiB + 42 x 300^3 bytes = 1.32 GiB; 200 x 720: 272 MiB + 42 x 200 x
    # 720 x 200 bytes = 1.39 GiB. Past the searches' 4 GiB: 600 x 600, 272 MiB + 4 GiB +
    # 224 x 600^2 bytes = 4.34 GiB; 384 x 1200, with more entries, 4.36 GiB, though
    # 600^3 > 384^2 x 1200
    BASE_MEMORY, memory_estimate = [_new()[n] for n in ('BASE_MEMORY', 'memory_estimate')]
    assert memory_estimate(300, 300) == BASE_MEMORY + 42 * 300**3
    assert memory_estimate(200, 720) == BASE_MEMORY + 42 * 200 * 720 * 200
    err = _audit_refused(tmp_path, capsys, {"square": (300, 300), "long": (200, 720)}, "1",
                         "1.35GiB")
    assert "'matrix-long'" in err and "200 x 720" in err and "1.39 GiB" in err, err
    assert memory_estimate(600, 600) == BASE_MEMORY + 4 * 2**30 + 224 * 600 * 600
    assert memory_estimate(384, 1200) == BASE_MEMORY + 4 * 2**30 + 224 * 384 * 1200
    err = _audit_refused(tmp_path, capsys, {"square": (600, 600), "long": (384, 1200)}, "1",
                         "4.35GiB")
    assert "'matrix-long'" in err and "384 x 1200" in err and "4.36 GiB" in err, err


def test_memory_estimate_refuses_bad_sizes():
    memory_estimate = _new()["memory_estimate"]
    for m, N in ((-5, 10), (0, 10), (10, 0), (2.5, 10)):
        with pytest.raises(InvalidArgumentError):
            memory_estimate(m, N)


def test_header_strings_cannot_forge_verify_lines(trivial_cert, tmp_path, capsys):
    f = _rewrite(trivial_cert, tmp_path / "forge.npz",
                 method="x) -- PASS\nok   real.npz: r_eps >= 4 at eps 0.9 (subspace")
    assert main(["verify", str(f)]) == 1
    out = capsys.readouterr().out
    assert [ln[:4] for ln in out.splitlines()] == ["FAIL", "0 of"], out
    assert "holds a control character" in out
    # a JSON object with a key given twice is malformed, not "the last one wins"
    with np.load(trivial_cert) as z:
        data = {k: z[k] for k in z.files}
    data["header"] = np.array(str(data["header"])[:-1] + ', "eps": 0.5}')
    np.savez(tmp_path / "dup.npz", **data)
    assert main(["verify", str(tmp_path / "dup.npz")]) == 1
    assert "repeated keys ['eps']" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["bracket", "x.npy", "--eps", "1.0"],
                                  ["bracket", "x.npy", "--eps", "0.2", "--max-memory", "0"],
                                  ["audit", "--eps", "nan"], ["diff", "a"]])
def test_option_errors_are_one_line(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = _err(capsys)
    assert err.startswith(f"softrank {argv[0]}: error: ") and "usage" not in err, err


def test_renormalize_is_not_rescaling(tmp_path, capsys):
    np.save(tmp_path / "ten.npy", 10 * _uniform())
    assert main(["bracket", str(tmp_path / "ten.npy"), "--eps", "0.1", "--renormalize"]) == 2
    assert "not for rescaling another matrix" in _err(capsys)


def test_extended_precision_is_not_rounded_silently(tmp_path, capsys):
    np.save(tmp_path / "ld.npy", np.full((3, 3), np.longdouble(1) / 3))
    assert main(["bracket", str(tmp_path / "ld.npy"), "--eps", "0.25"]) == 2
    assert "extended precision" in _err(capsys)


def test_verify_matrix_with_renormalize_matches_bracket(tmp_path, capsys):
    f = tmp_path / "a32.npy"
    np.save(f, _float32_attention())
    d = tmp_path / "certs"
    assert main(["bracket", str(f), "--eps", "0.25", "--renormalize",
                 "--save-certificates", str(d)]) == 0
    capsys.readouterr()
    assert main(["verify", str(d), "--matrix", str(f)]) == 2  # the given matrix: refused
    assert "--renormalize" in _err(capsys)
    assert main(["verify", str(d), "--matrix", str(f), "--renormalize"]) == 0
    assert "(--matrix)" in capsys.readouterr().out


def test_subnormal_eps_is_refused_in_one_line(tmp_path, capsys):
    f = tmp_path / "A.npy"
    np.save(f, _uniform())
    assert main(["bracket", str(f), "--eps", "5e-324"]) == 2
    assert "expected a normal float64 >= 2.2250738585072014e-308" in _err(capsys)


def test_positions_must_match_the_matrix(tmp_path):
    np.savez(tmp_path / "op.npz", A=_uniform(4, 6), query_positions=np.arange(3))
    with pytest.raises(InvalidOperatorError, match="query_positions: 3 positions for the 4 queries"):
        load_operator(tmp_path / "op.npz")


def test_zero_size_dtype_is_refused(tmp_path, capsys):
    f = tmp_path / "u0.npy"
    f.write_bytes(_npy_header((2,), descr="<U0"))
    assert main(["bracket", str(f), "--eps", "0.25"]) == 2
    assert "dtype '<U0' has no size" in _err(capsys)

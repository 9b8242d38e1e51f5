"""Fuzzing every loader and CLI value: the ``fuzz`` tier.

Targets: bare ``.npy`` matrices, operator ``.npz`` files, certificate ``.npz`` files (through
``softrank verify``), panel TOML files, and the CLI's values (``--eps``, ``--max-memory``,
``--cell-timeout``, ``--workers``, ...). Inputs are drawn by hypothesis: structured ones (real
arrays of every dtype and shape, JSON headers and provenance with values of every type, TOML
tables with keys that exist and keys that do not) and byte-level mutations of valid files
(flips, truncations, insertions).

For every input the only outcomes allowed are a result or an error of softrank's error family
(:class:`softrank.errors.SoftrankError`; for ``verify`` an exit status with one line per
file) whose message is one line; any other exception fails. Every call runs under
``tracemalloc`` and may not allocate more than :data:`ALLOC_BOUND` bytes at its peak, with
file data bounded by :data:`MAX_BYTES`; and no file may appear in the working directory.

``make test`` runs each target for a bounded, derandomized number of examples
(:data:`SHORT_EXAMPLES`). ``make fuzz`` sets ``SOFTRANK_FUZZ_SECONDS`` and each target draws
fresh random examples until that many seconds have passed; the number of inputs each target
saw is printed at the end of the session and written to ``fuzz-stats.json``.
"""

from __future__ import annotations

import io
import json
import math
import os
import time
import tracemalloc
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from softrank.errors import SoftrankError

pytestmark = pytest.mark.fuzz

#: Largest data a fuzzed file may hold (bytes) -- the loaders' ``max_bytes``.
MAX_BYTES = 256 * 2**10
#: Largest peak of traced allocations allowed for one input (bytes).
ALLOC_BOUND = 24 * 2**20
#: Examples per target in the short run (``make test``).
SHORT_EXAMPLES = 60
#: Seconds per target in the long run (``SOFTRANK_FUZZ_SECONDS``; unset: the short run).
LONG_SECONDS = float(os.environ.get("SOFTRANK_FUZZ_SECONDS", "0") or 0)

#: Inputs each target saw in this session (printed by tests/conftest.py, written to
#: fuzz-stats.json).
COUNTS: dict[str, int] = {}


def _drive(name, test):
    """Run a hypothesis test: once with SHORT_EXAMPLES derandomized examples, or (long run)
    again and again with fresh random examples until LONG_SECONDS have passed."""
    COUNTS.setdefault(name, 0)
    common = dict(deadline=None, database=None, print_blob=True,
                  suppress_health_check=list(HealthCheck))
    if LONG_SECONDS <= 0:
        settings(max_examples=SHORT_EXAMPLES, derandomize=True, **common)(test)()
        return
    end = time.monotonic() + LONG_SECONDS
    test = settings(max_examples=200, derandomize=False, **common)(test)
    while time.monotonic() < end:
        test()


def _outcome(name, fn, cwd):
    """Call ``fn()``; allowed: a result, or a SoftrankError with a one-line message. Also
    checks the allocation bound and that nothing was written to ``cwd``."""
    COUNTS[name] = COUNTS.get(name, 0) + 1
    before = set(os.listdir(cwd))
    tracemalloc.start()
    try:
        result, error = fn(), None
    except SoftrankError as exc:
        result, error = None, exc
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak <= ALLOC_BOUND, f"{name}: allocated {peak} bytes at the peak (> {ALLOC_BOUND})"
    after = set(os.listdir(cwd))
    assert after == before, f"{name}: files appeared: {sorted(after - before)}"
    if error is not None:
        msg = str(error)
        assert msg and "\n" not in msg and "\r" not in msg, f"{name}: not one line: {msg!r}"
    return result, error


# ------------------------------------------------------------------ strategies

_DTYPES = ["<f8", ">f8", "<f4", "<f2", "<i8", "<i4", "<u1", "|b1", "<U3", "<c16", "|O",
           "|V2", "<M8[s]", "|S4"]


def _array(dtype: str, shape, data):
    if dtype == "|O":
        return np.array([None, 1, "x"], dtype=object)
    dt = np.dtype(dtype)
    n = math.prod(shape)
    raw = data.draw(st.binary(min_size=n * dt.itemsize, max_size=n * dt.itemsize))
    if dt.kind == "U":
        return np.array(["ab", "c"] * (n // 2) + ["x"] * (n % 2), dtype=dt).reshape(shape)
    return np.frombuffer(raw, dtype=dt).reshape(shape).copy() if n else np.zeros(shape, dt)


@st.composite
def arrays(draw, plausible_attention=True):
    """An array of any dtype (objects included), any rank up to 3, small shapes; often a
    row-stochastic matrix (float64 or reduced precision), sometimes one with a defect."""
    kind = draw(st.sampled_from(["attention", "attention", "any"] if plausible_attention
                                else ["any"]))
    if kind == "attention":
        m, n = draw(st.integers(1, 12)), draw(st.integers(1, 12))
        x = np.array(draw(st.lists(st.floats(0, 10, allow_nan=False), min_size=m * n,
                                   max_size=m * n))).reshape(m, n) + 1e-3
        A = x / x.sum(axis=1, keepdims=True)
        defect = draw(st.sampled_from(["none", "none", "neg", "nan", "scale", "f32", "f16"]))
        if defect == "neg":
            A[0, 0] = -A[0, 0] - 0.1
        elif defect == "nan":
            A[-1, -1] = np.nan
        elif defect == "scale":
            A = A * 10
        elif defect == "f32":
            A = A.astype(np.float32)
        elif defect == "f16":
            A = A.astype(np.float16)
        return A
    dtype = draw(st.sampled_from(_DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=3)))
    return _array(dtype, shape, draw(st.data()))


def _mutate(raw: bytes, draw) -> bytes:
    """A few byte-level mutations of a file: flips, truncation, insertion, header edits."""
    b = bytearray(raw)
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "insert", "digit", "none"]))
        if not b:
            break
        i = draw(st.integers(0, len(b) - 1))
        if op == "flip":
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del b[i:]
        elif op == "insert":
            b[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif op == "digit":  # shapes and sizes in headers are decimal digits: make them big
            j = bytes(b).find(b"(", i)
            if j >= 0:
                b[j + 1:j + 1] = draw(st.sampled_from([b"9999999", b"1000000, 1000000", b"-3",
                                                       b"0"]))
    return bytes(b)


def _npy_bytes(a) -> bytes:
    f = io.BytesIO()
    np.lib.format.write_array(f, a, allow_pickle=True)
    return f.getvalue()


def _npz_bytes(members: dict, compressed: bool) -> bytes:
    f = io.BytesIO()
    with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED) as z:
        for k, v in members.items():
            z.writestr(f"{k}.npy", v if isinstance(v, bytes) else _npy_bytes(v))
    return f.getvalue()


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3),
    max_leaves=6)


# ------------------------------------------------------------------ targets


def test_fuzz_npy_matrix(tmp_path, monkeypatch):
    """softrank's reading of a bare .npy (``softrank bracket FILE``)."""
    from softrank.operator_files import load_operator

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "in" / "m.npy"
    path.parent.mkdir()

    @given(a=arrays(), data=st.data())
    def run(a, data):
        raw = _npy_bytes(a)
        if data.draw(st.booleans()):
            raw = _mutate(raw, data.draw)
        path.write_bytes(raw)
        renorm = data.draw(st.booleans())
        op, err = _outcome("npy", lambda: load_operator(path, "file", max_bytes=MAX_BYTES,
                                                        renormalize=renorm), tmp_path)
        if op is not None:
            assert np.isfinite(op.A).all() and (op.A >= 0).all()
            assert np.abs(op.A.sum(axis=1) - 1).max() <= 1e-9

    _drive("npy", run)


_OPERATOR_FIELDS = ["A", "Q", "K", "beta", "layer", "head", "query_positions", "key_positions",
                    "provenance", "header", "other"]


def test_fuzz_operator_npz(tmp_path, monkeypatch):
    """Operator files (``softrank bracket FILE.npz``, ``[[matrix]]`` panels)."""
    from softrank.operators import Operator
    from softrank.operator_files import load_operator, save_operator

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "in" / "op.npz"
    path.parent.mkdir()

    @given(data=st.data())
    def run(data):
        draw = data.draw
        if draw(st.booleans()):  # start from a real operator file and damage it
            rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
            m, n, d = draw(st.integers(1, 8)), draw(st.integers(1, 8)), draw(st.integers(1, 4))
            op = Operator.from_factors(rng.standard_normal((m, d)), rng.standard_normal((n, d)),
                                       draw(st.floats(0.01, 10)), family="fz", layer=1, head=2)
            save_operator(path, op)
            with np.load(path) as z:
                members = {k: z[k] for k in z.files}
            for k in draw(st.lists(st.sampled_from(_OPERATOR_FIELDS), max_size=3)):
                choice = draw(st.sampled_from(["drop", "array", "json"]))
                if choice == "drop":
                    members.pop(k, None)
                elif choice == "array":
                    members[k] = draw(arrays(plausible_attention=k == "A"))
                else:
                    members[k] = np.array(json.dumps(draw(_json_values)))
        else:
            keys = draw(st.lists(st.sampled_from(_OPERATOR_FIELDS), max_size=6, unique=True))
            members = {k: (np.array(json.dumps(draw(st.dictionaries(
                st.sampled_from(["family", "source", "layer", "head", "seed", "hash",
                                 "operator_id", "block", "x"]), _json_values, max_size=4))))
                           if k == "provenance" and draw(st.booleans())
                           else draw(arrays(plausible_attention=k == "A"))) for k in keys}
        raw = _npz_bytes(members, draw(st.booleans()))
        if draw(st.booleans()):
            raw = _mutate(raw, draw)
        path.write_bytes(raw)
        _outcome("operator-npz", lambda: load_operator(path, "file", max_bytes=MAX_BYTES),
                 tmp_path)

    _drive("operator-npz", run)


def _valid_certificates():
    """A matrix and one certificate of each kind on it (valid or not: the fuzzer damages
    them anyway)."""
    from softrank.checker import (DecodedInverseCertificate, FrobeniusCertificate,
                                  KeyGroupCertificate, SubspaceCertificate, TrivialCertificate,
                                  UpperWitness)

    A = np.kron(np.eye(3), np.full((2, 2), 0.5))
    return A, [UpperWitness(0.25, A.copy(), np.eye(6)), TrivialCertificate(0.25, "t"),
               FrobeniusCertificate(0.1, np.arange(6), 2),
               KeyGroupCertificate(0.1, np.array([0, 2, 4]),
                                   (np.array([0, 1]), np.array([2, 3]), np.array([4, 5]))),
               DecodedInverseCertificate(0.1, np.eye(3, 6), np.eye(6, 3)),
               SubspaceCertificate(0.1, np.array([0, 2]), np.eye(6, 2), np.zeros((6, 6)),
                                   np.zeros((6, 6)))]


_HEADER_FIELDS = ["format", "kind", "eps", "rank", "method", "operator_hash", "shape",
                  "producer", "refutes", "extra"]


def test_fuzz_certificate_verify(tmp_path, monkeypatch):
    """Certificate files through ``softrank verify``: exit 0, 1 or 2, one line per file."""
    from softrank.checker import save_certificate
    from softrank.harness.cli import main

    monkeypatch.chdir(tmp_path)
    A, certs = _valid_certificates()
    src = tmp_path / "src"
    src.mkdir()
    base = []
    for i, c in enumerate(certs):
        p = save_certificate(src / f"c{i}.npz", c, A)
        with np.load(p) as z:
            base.append({k: z[k] for k in z.files})
    path = tmp_path / "in" / "c.npz"
    path.parent.mkdir()

    @given(data=st.data())
    def run(data):
        draw = data.draw
        members = dict(draw(st.sampled_from(base)))
        header = json.loads(str(members["header"]))
        for k in draw(st.lists(st.sampled_from(_HEADER_FIELDS), max_size=3)):
            if draw(st.booleans()):
                header.pop(k, None)
            else:
                header[k] = draw(_json_values)
        members["header"] = np.array(json.dumps(header))
        for k in draw(st.lists(st.sampled_from(sorted(members) + ["U", "W", "rows", "L"]),
                               max_size=2)):
            members[k] = draw(arrays(plausible_attention=k == "A"))
        raw = _npz_bytes(members, draw(st.booleans()))
        if draw(st.booleans()):
            raw = _mutate(raw, draw)
        path.write_bytes(raw)

        def verify():
            import contextlib

            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = main(["verify", str(path), "--max-memory", "1MiB"])
            return rc, out.getvalue(), err.getvalue()

        (rc, out, err), _ = _outcome("certificate", verify, tmp_path)
        assert rc in (0, 1), (rc, out, err)
        lines = out.splitlines()
        assert len(lines) == 2 and lines[-1].endswith("1 certificates hold"), out
        assert (rc == 0) == lines[0].startswith("ok"), out

    _drive("certificate", run)


_TOML_KEYS = {
    None: ["eps", "name", "minilm", "synthetic", "matrix", "heads", "certifier", "other"],
    "minilm": ["widths", "layers", "heads", "sources_per_head", "x"],
    "synthetic": ["family", "m", "N", "n", "d", "k", "delta", "beta", "seed", "temperature",
                  "c", "x"],
    "matrix": ["path", "family", "x"],
    "heads": ["checkpoint", "sources", "widths", "layers", "heads", "family"],
    "certifier": ["spec", "path"],
}
_toml_scalars = (st.integers(-2**40, 2**40) | st.floats(allow_nan=True, allow_infinity=True)
                 | st.booleans() | st.text(max_size=10)
                 | st.sampled_from(["gaussian_head", "grid", "planted", "m.npy", "../x.npy",
                                    "a\nb", "x|y", "examples.my_construction:MyConstruction",
                                    "minilm", 0.25, 4096, 10**9]))


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if v != v else ("inf" if v == math.inf else "-inf" if v == -math.inf
                                     else repr(v))
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(v)  # a basic string: JSON escapes are TOML escapes


@st.composite
def toml_panels(draw):
    lines = []
    for key in draw(st.lists(st.sampled_from(["eps", "name", "other"]), max_size=2, unique=True)):
        val = (draw(st.lists(st.floats(-1, 2), max_size=3)) if key == "eps"
               else draw(_toml_scalars))
        lines.append(f"{key} = {_toml_value(val)}")
    for table in draw(st.lists(st.sampled_from(["minilm", "synthetic", "matrix", "heads",
                                                "certifier"]), max_size=3)):
        lines.append(f"[[{table}]]")
        for k in draw(st.lists(st.sampled_from(_TOML_KEYS[table]), max_size=4, unique=True)):
            v = draw(_toml_scalars | st.lists(st.integers(-3, 600), max_size=3))
            lines.append(f"{k} = {_toml_value(v)}")
    text = "\n".join(lines) + "\n"
    if draw(st.booleans()):
        text = _mutate(text.encode(), draw).decode("utf-8", "replace")
    return text


def test_fuzz_panel_toml(tmp_path, monkeypatch):
    """Panel files (``softrank audit --panel FILE``): parsed, then their synthetic and
    [[matrix]] operators made (MiniLM and checkpoint heads are only parsed)."""
    from softrank.harness.panels import build_panel, materialize

    monkeypatch.chdir(tmp_path)
    d = tmp_path / "in"
    d.mkdir()
    np.save(d / "m.npy", np.full((3, 4), 0.25))
    path = d / "p.toml"

    @given(text=toml_panels())
    def run(text):
        path.write_text(text)

        def load():
            panel = build_panel(str(path))
            cheap = [s for s in panel.specs if s["kind"] in ("synthetic", "matrix")]
            return panel, materialize(cheap)

        _outcome("panel", load, tmp_path)

    _drive("panel", run)


_CLI_OPTIONS = [("--eps", "bracket"), ("--max-memory", "bracket"), ("--cell-timeout", "audit"),
                ("--workers", "audit"), ("--seed", "audit"), ("--study-boot", "audit"),
                ("--attacks", "audit"), ("--allow-worse", "diff"), ("--limit", "diff")]


def test_fuzz_cli_values(tmp_path, monkeypatch):
    """The CLI's parsing of option values: a value is taken or refused with exit 2."""
    import contextlib

    from softrank.harness.cli import build_parser

    monkeypatch.chdir(tmp_path)
    value = (st.text(max_size=12) | st.floats(allow_nan=True).map(repr)
             | st.integers(-10**20, 10**20).map(str)
             | st.sampled_from(["1e-12", "0.9999999999999", "1", "0", "-0", "nan", "inf",
                                "0x10", "1_000", "4GiB", "512 MiB", "1e400", "٣"]))

    @given(opt=st.sampled_from(_CLI_OPTIONS), v=value)
    def run(opt, v):
        flag, cmd = opt
        argv = {"bracket": ["bracket", "x.npy", "--eps", "0.25"],
                "audit": ["audit"], "diff": ["diff", "a", "b"]}[cmd]
        argv = [a for a in argv if not (flag == "--eps" and a in ("--eps", "0.25"))]

        def parse():
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err):
                    return build_parser().parse_args(argv + [f"{flag}={v}"])
            except SystemExit as exc:
                text = err.getvalue().strip().splitlines()
                assert exc.code == 2 and text and flag in text[-1], (exc.code, text)
                return None

        args, _ = _outcome("cli", parse, tmp_path)
        if args is not None and flag == "--eps":
            assert all(0 < e < 1 for e in args.eps)
        if args is not None and flag == "--max-memory":
            assert 2**20 <= args.max_memory <= 2**60

    _drive("cli", run)

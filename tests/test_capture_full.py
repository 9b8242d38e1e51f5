"""Full causal and sliding-window heads of tiny decoders (docs/theory/heads.md#full-heads).

``capture(..., full=True)`` takes every token as query and key and keeps the model's own
mask. Each operator is compared, entry by entry and without renormalising, with the
probabilities of an unpadded eager forward pass this test runs itself; its mask with
``causal_mask(T)`` or ``causal_mask(T, window=W)``, the layers that slide read from the
checkpoint's ``config.json`` (``layer_types``); ``A`` with an independent float64 masked
softmax of ``beta Q K^T``. ``initializer_range`` 0.5 makes the rows peaked, so a mask that
forgot the window or let a query see a later key is far outside 1e-5.
"""

import json

import numpy as np
import pytest

from conftest import require_extra

pytestmark = pytest.mark.models("torch", "transformers")
require_extra("models", "torch", "transformers")

import torch  # noqa: E402

from softrank.errors import CheckpointError, InvalidArgumentError  # noqa: E402
from softrank.generators.capture import attention as cap  # noqa: E402 (the capture's module)
from softrank.generators.capture import (  # noqa: E402
    Source,
    capture,
    load_checkpoint,
    read_sources,
)
from softrank.generators.tiny import save_tiny_checkpoint  # noqa: E402
from softrank.harness.cli import main  # noqa: E402
from softrank.operators import causal_mask  # noqa: E402
from softrank.operator_files import load_operator, save_operator  # noqa: E402

WINDOW = 8  # the tiny Qwen2's sliding window: inputs of 40 tokens slide
T = 40
DECODERS = ("gpt2", "qwen2", "qwen2-sw", "llama")


@pytest.fixture(scope="module")
def ckdirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt-full")
    dirs = {f: save_tiny_checkpoint(f, root / f) for f in ("gpt2", "qwen2", "llama", "bert")}
    dirs["qwen2-sw"] = save_tiny_checkpoint("qwen2", root / "qwen2-sw", sliding_window=WINDOW)
    return dirs


@pytest.fixture(scope="module")
def checkpoints(ckdirs):
    return {f: load_checkpoint(d) for f, d in ckdirs.items()}


@pytest.fixture(scope="module")
def texts():
    return {s.name: s.data for s in read_sources(["stdlib:json", "stdlib:csv"])}


def _expected_masks(ckdir, n_layers, length):
    """Per layer, the mask the config declares: causal, or a window on the sliding layers."""
    cfg = json.loads((ckdir / "config.json").read_text())
    types = cfg.get("layer_types") or ["full_attention"] * n_layers
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window") else None
    return [causal_mask(length, window=window) if t == "sliding_attention" else causal_mask(length)
            for t in types]


def _eager(ck, ids):
    """The model's own eager probabilities on one unpadded sequence: per layer (H, T, T)."""
    model = ck.model
    model.set_attn_implementation("eager")
    with torch.no_grad():
        att = model(input_ids=torch.tensor([ids]), output_attentions=True).attentions
    return [a[0].double().numpy() for a in att]


def _masked_softmax(Q, K, beta, M):
    L = np.where(M, beta * np.einsum("id,jd->ij", Q, K), -np.inf)
    E = np.exp(L - L.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("family", DECODERS)
def test_full_heads_equal_eager_attention(checkpoints, ckdirs, texts, family):
    ck = checkpoints[family]
    ops = capture(ck, [Source(n, "text", t) for n, t in texts.items()], width=T, full=True,
                  batch_size=2)
    assert len(ops) == 2 * ck.n_layers * ck.n_heads
    masks = _expected_masks(ckdirs[family], ck.n_layers, T)
    if family == "qwen2-sw":
        assert [mask_layer.sum(axis=1).max() for mask_layer in masks] == [T, WINDOW]
    att = {n: _eager(ck, ck.tokenizer(t, truncation=True, max_length=T)["input_ids"])
           for n, t in texts.items()}
    above = np.triu_indices(T, 1)
    worst = 0.0
    for op in ops:
        M = masks[op.layer]
        assert op.shape == (T, T) and op.block == f"full:0-{T}" and op.meta["full"] is True
        assert op.operator_id == f"{family.split('-')[0]}-full{T}-L{op.layer}H{op.head}-{op.source}"
        assert op.meta["query_positions"] == op.meta["key_positions"] == list(range(T))
        assert np.array_equal(op.mask, M)
        sliding = not np.array_equal(M, causal_mask(T))
        assert op.provenance()["mask"] == (f"window:{WINDOW}" if sliding else "causal")
        assert np.all(op.A[above] == 0) and np.all(op.A[~M] == 0)
        P = att[op.source][op.layer][op.head]
        assert np.all(P[~M] <= 1e-30)  # the model hides the same keys
        d = float(np.abs(op.A - P).max())  # every entry, not renormalised
        assert d <= 1e-5, (op.operator_id, d)
        assert op.meta["eager_max_abs_diff"] <= 1e-5
        worst = max(worst, d)
        assert np.abs(op.A - _masked_softmax(op.Q, op.K, op.beta, M)).max() <= 1e-12
    assert worst > 0  # float32 model vs float64 operator: a real comparison took place


def test_sliding_layer_differs_from_causal(checkpoints):
    # the window changes the operator: layer 1 of qwen2-sw is not its causal softmax
    (op,) = capture(checkpoints["qwen2-sw"], read_sources("stdlib:json"), width=T, full=True,
                    layers=[1], heads=[0])
    causal = _masked_softmax(op.Q, op.K, op.beta, causal_mask(T))
    assert np.abs(op.A - causal).max() > 1e-3


def test_forgotten_window_is_caught(checkpoints, monkeypatch):
    # a capture that read every mask as plain causal fails the eager check on the sliding layer
    monkeypatch.setattr(cap, "_allowed", lambda mask, b, n, layer: causal_mask(n))
    capture(checkpoints["qwen2-sw"], read_sources("stdlib:json"), width=T, full=True,
            layers=[0], heads=[0])  # layer 0 is causal: still right
    with pytest.raises(CheckpointError, match="eager attention"):
        capture(checkpoints["qwen2-sw"], read_sources("stdlib:json"), width=T, full=True,
                layers=[1], heads=[0])


def test_padded_batch_keeps_each_source_to_its_own_tokens(checkpoints, tmp_path):
    ck = checkpoints["qwen2-sw"]
    rng = np.random.default_rng(0)
    lengths = {"short": 21, "long": 34}
    ids = {n: rng.integers(0, ck.model.config.vocab_size, n_tok) for n, n_tok in lengths.items()}
    srcs = [Source(n, "ids", x) for n, x in ids.items()]
    together = capture(ck, srcs, full=True, batch_size=2)  # "short" is padded to 34
    alone = capture(ck, srcs, full=True, batch_size=1)
    assert [op.operator_id for op in together] == [op.operator_id for op in alone]
    for a, b in zip(together, alone):
        n = lengths[a.source]
        assert a.shape == (n, n) and a.block == f"full:0-{n}"
        assert np.array_equal(a.mask, b.mask)
        assert np.array_equal(a.mask, causal_mask(n, window=WINDOW) if a.layer == 1
                              else causal_mask(n))
        assert np.abs(a.A - b.A).max() <= 1e-5
        P = _eager(ck, ids[a.source].tolist())[a.layer][a.head]
        assert np.abs(a.A - P).max() <= 1e-5


def test_files_round_trip_with_the_mask(checkpoints, tmp_path):
    ops = capture(checkpoints["qwen2-sw"], read_sources("stdlib:csv"), width=24, full=True,
                  heads=[2])
    for op in ops:
        f = tmp_path / f"{op.operator_id}.npz"
        save_operator(f, op)
        back = load_operator(f)
        assert back.operator_id == op.operator_id and back.block == "full:0-24"
        assert np.array_equal(back.mask, op.mask) and np.array_equal(back.A, op.A)
        assert back.provenance()["mask"] == ("causal" if op.layer == 0 else f"window:{WINDOW}")
        assert back.meta["full"] is True


def test_full_with_explicit_positions_is_refused(checkpoints):
    with pytest.raises(InvalidArgumentError, match="full, key_positions, query_positions"):
        capture(checkpoints["gpt2"], read_sources("stdlib:json"), full=True,
                key_positions=range(4), query_positions=range(4))
    with pytest.raises(InvalidArgumentError, match="^full:"):
        capture(checkpoints["gpt2"], read_sources("stdlib:json"), full=1)


def test_bidirectional_full_is_the_native_operator_without_mask(checkpoints):
    ck = checkpoints["bert"]
    srcs = read_sources("stdlib:json")
    full = capture(ck, srcs, width=16, full=True, layers=[1])
    native = capture(ck, srcs, width=16, layers=[1])
    for f, n in zip(full, native):
        assert f.mask is None and f.provenance().get("mask") is None
        assert f.block == "full:0-16" and f.operator_id == f"bert-full16-L1H{f.head}-json"
        assert n.block == "native:0-16"
        assert np.array_equal(f.A, n.A)


def test_heads_cli_full(ckdirs, tmp_path, capsys):
    out = tmp_path / "ops"
    assert main(["heads", str(ckdirs["qwen2-sw"]), "--source", "stdlib:json", "--full",
                 "--width", "24", "--heads", "1", "--out", str(out)]) == 0
    line = capsys.readouterr().out
    assert "2 full operators" in line and "masks causal, window:8" in line
    files = sorted(out.glob("*.npz"))
    assert [f.name for f in files] == [f"qwen2-full24-L{l}H1-json.npz" for l in (0, 1)]
    for f in files:
        op = load_operator(f)
        assert np.array_equal(op.mask, causal_mask(24, window=WINDOW if op.layer else None))
        assert op.meta["eager_max_abs_diff"] <= 1e-5


def test_heads_cli_refuses_full_with_keys(ckdirs, tmp_path, capsys):
    args = ["heads", str(ckdirs["gpt2"]), "--source", "stdlib:json", "--full", "--keys", "0:4",
            "--queries", "0:4", "--out", str(tmp_path / "ops")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--full" in err and "--keys" in err and "--queries" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "ops").exists()


def test_tiny_sliding_window_arguments(tmp_path, capsys):
    with pytest.raises(InvalidArgumentError, match="^sliding_window:.*'gpt2'"):
        save_tiny_checkpoint("gpt2", tmp_path / "g", sliding_window=8)
    with pytest.raises(InvalidArgumentError, match="^sliding_window: expected an integer"):
        save_tiny_checkpoint("qwen2", tmp_path / "q", sliding_window=0)
    assert not (tmp_path / "g").exists() and not (tmp_path / "q").exists()
    assert main(["tiny-checkpoint", "llama", str(tmp_path / "l"), "--sliding-window", "8"]) == 2
    err = capsys.readouterr().err
    assert "--sliding-window" in err and "'llama'" in err
    assert main(["tiny-checkpoint", "qwen2", str(tmp_path / "q"), "--sliding-window", "6"]) == 0
    cfg = json.loads((tmp_path / "q" / "config.json").read_text())
    assert cfg["use_sliding_window"] is True and cfg["sliding_window"] == 6
    assert cfg["layer_types"] == ["full_attention", "sliding_attention"]


@pytest.mark.parametrize("family", ["gpt2", "qwen2"])
def test_whole_heads_past_512_tokens_with_max_positions(tmp_path, family):
    # the long panel's lengths: a tiny decoder with 1,100 positions gives whole causal
    # heads of 1,024 tokens, checked by the capture against its own eager forward pass
    d = save_tiny_checkpoint(family, tmp_path / family, max_positions=1100)
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["n_positions" if family == "gpt2" else "max_position_embeddings"] == 1100
    tok = json.loads((d / "tokenizer_config.json").read_text())
    assert tok["model_max_length"] == 1100
    ck = load_checkpoint(d)
    (op,) = capture(ck, read_sources("stdlib:argparse"), width=1024, full=True, layers=[1],
                    heads=[2])
    assert op.shape == (1024, 1024) and np.array_equal(op.mask, causal_mask(1024))
    assert op.meta["eager_max_abs_diff"] <= 1e-5
    assert np.abs(op.A - _masked_softmax(op.Q, op.K, op.beta, causal_mask(1024))).max() <= 1e-12


def test_tiny_max_positions_arguments(tmp_path, capsys):
    with pytest.raises(InvalidArgumentError, match="^max_positions: 'vit' has one position"):
        save_tiny_checkpoint("vit", tmp_path / "v", max_positions=1024)
    with pytest.raises(InvalidArgumentError, match="^max_positions: expected an integer"):
        save_tiny_checkpoint("gpt2", tmp_path / "g", max_positions=1)
    with pytest.raises(InvalidArgumentError, match="^sliding_window: expected an integer"):
        save_tiny_checkpoint("qwen2", tmp_path / "q", max_positions=64, sliding_window=65)
    assert not any(tmp_path.iterdir())  # refused before anything is written
    assert main(["tiny-checkpoint", "vit", str(tmp_path / "v"), "--max-positions", "600"]) == 2
    err = capsys.readouterr().err
    assert "--max-positions" in err and "'vit'" in err
    assert main(["tiny-checkpoint", "llama", str(tmp_path / "l"), "--max-positions", "2048"]) == 0
    assert "2048 positions" in capsys.readouterr().out
    cfg = json.loads((tmp_path / "l" / "config.json").read_text())
    assert cfg["max_position_embeddings"] == 2048

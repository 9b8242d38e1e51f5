"""Head capture across families on tiny random-initialised checkpoints (docs/theory/operators.md, docs/theory/heads.md).

Every captured operator is compared with probabilities this test computes itself from the
model's eager forward pass (``output_attentions=True``), restricted to the operator's query
and key positions and renormalised; and ``A`` with an independent float64 softmax of
``beta Q K^T``. ``initializer_range`` 0.5 makes the logits large, so a capture that loses the
rotary embedding or maps a query head to the wrong key head is far outside 1e-5.
"""

import json
import math

import numpy as np
import pytest

from conftest import require_extra

# tiny random checkpoints: torch and transformers, not the MiniLM checkpoint
pytestmark = pytest.mark.models("torch", "transformers")
require_extra("models", "torch", "transformers")

import torch  # noqa: E402

from softrank.errors import CheckpointError, InvalidArgumentError  # noqa: E402
from softrank.generators.capture import attention as cap  # noqa: E402 (the capture's module)
from softrank.generators.capture import (  # noqa: E402
    Source,
    capture,
    key_head,
    load_checkpoint,
    read_sources,
)
from softrank.generators.tiny import save_tiny_checkpoint  # noqa: E402
from softrank.harness.cli import main  # noqa: E402
from softrank.operator_files import load_operator  # noqa: E402

TEXT_FAMILIES = ("bert", "gpt2", "qwen2", "llama")
D_HEAD = 8  # tiny configs: hidden 32, 4 heads


@pytest.fixture(scope="module")
def ckdirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    return {f: save_tiny_checkpoint(f, root / f) for f in TEXT_FAMILIES + ("vit",)}


@pytest.fixture(scope="module")
def checkpoints(ckdirs):
    return {f: load_checkpoint(d) for f, d in ckdirs.items()}


def _softmax(Q, K, beta):
    L = beta * np.einsum("id,jd->ij", Q, K)
    E = np.exp(L - L.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def _eager_block(ck, inputs, b, layer, head, qp, kp):
    """The model's own eager probabilities on (qp, kp), renormalised over kp."""
    model = ck.model
    model.set_attn_implementation("eager")
    with torch.no_grad():
        att = model(**inputs, output_attentions=True).attentions
    P = att[layer][b, head].double().numpy()[np.ix_(qp, kp)]
    return P / P.sum(axis=1, keepdims=True)


def _text_inputs(ck, texts, length):
    ids = [ck.tokenizer(t, add_special_tokens=True, truncation=True, max_length=length)["input_ids"]
           for t in texts]
    inputs = {"input_ids": torch.tensor(ids)}
    return inputs


@pytest.fixture(scope="module")
def texts():
    return [s.data for s in read_sources(["stdlib:json", "stdlib:csv"])]


@pytest.mark.parametrize("family", TEXT_FAMILIES)
def test_text_families_match_eager_attention(checkpoints, texts, family):
    ck = checkpoints[family]
    w = 16
    ops = capture(ck, [Source("json", "text", texts[0]), Source("csv", "text", texts[1])],
                  width=w)
    assert len(ops) == 2 * ck.n_layers * ck.n_heads
    causal = family != "bert"
    qp = np.arange(w, 2 * w) if causal else np.arange(w)
    kp = np.arange(w)
    inputs = _text_inputs(ck, texts, 2 * w if causal else w)  # unpadded, independent of softrank
    worst = 0.0
    for op in ops:
        b = 0 if op.source == "json" else 1
        assert op.shape == (w, w) and op.Q.shape == (w, D_HEAD) and op.K.shape == (w, D_HEAD)
        assert op.beta == pytest.approx(1 / math.sqrt(D_HEAD), rel=1e-15)
        assert op.meta["query_positions"] == qp.tolist()
        assert op.meta["key_positions"] == kp.tolist()
        assert op.block == (f"keys:0-{w},queries:{w}-{2 * w}" if causal else f"native:0-{w}")
        ref = _eager_block(ck, inputs, b, op.layer, op.head, qp, kp)
        d = np.abs(op.A - ref).max()
        worst = max(worst, d)
        assert d <= 1e-5, (op.operator_id, d)
        assert np.abs(op.A - _softmax(op.Q, op.K, op.beta)).max() <= 1e-9
    assert worst > 0  # float32 model vs float64 operator: a real comparison took place


def test_vit_images_match_eager_attention(checkpoints, tmp_path):
    ck = checkpoints["vit"]
    rng = np.random.default_rng(0)
    np.save(tmp_path / "pix.npy", 255 * rng.random((3, 40, 48)))
    from PIL import Image

    Image.fromarray(rng.integers(0, 255, (30, 30, 3), dtype=np.uint8)).save(tmp_path / "im.png")
    srcs = read_sources(["skimage:astronaut", str(tmp_path / "pix.npy"), str(tmp_path / "im.png")])
    assert [s.kind for s in srcs] == ["image"] * 3
    ops = capture(ck, srcs, batch_size=2)
    T = 17  # CLS + (32 / 8)^2 patches
    pv = ck.image_processor([s.data for s in srcs], return_tensors="pt")["pixel_values"]
    for op in ops:
        assert op.shape == (T, T) and op.block == f"native:0-{T}"
        b = [s.name for s in srcs].index(op.source)
        ref = _eager_block(ck, {"pixel_values": pv}, b, op.layer, op.head,
                           np.arange(T), np.arange(T))
        assert np.abs(op.A - ref).max() <= 1e-5
    with pytest.raises(InvalidArgumentError, match="width"):
        capture(ck, srcs[:1], width=16)
    with pytest.raises(InvalidArgumentError, match="takes images"):
        capture(ck, [Source("t", "text", "some text")])


def test_grouped_query_heads_interleave(checkpoints):
    ck = checkpoints["qwen2"]
    assert (ck.n_heads, ck.n_kv_heads) == (4, 2)
    assert [key_head(h, 4, 2) for h in range(4)] == [0, 0, 1, 1]
    ops = capture(ck, read_sources("stdlib:json"), width=16, layers=[1])
    assert [op.meta["key_head"] for op in ops] == [0, 0, 1, 1]


def test_tiled_key_heads_are_caught(checkpoints, monkeypatch):
    # tiling (h % H_kv) instead of interleaving (h // (H / H_kv)) the key heads
    monkeypatch.setattr(cap, "key_head", lambda h, n, nkv: h % nkv)
    with pytest.raises(CheckpointError, match="eager attention"):
        capture(checkpoints["qwen2"], read_sources("stdlib:json"), width=16)


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_dropped_rotary_embedding_is_caught(checkpoints, monkeypatch, family):
    import importlib

    modeling = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    real_run = cap._run_capture

    def capture_without_rotary(ck, batch):  # the capture pass only; eager stays correct
        with monkeypatch.context() as m:
            m.setattr(modeling, "apply_rotary_pos_emb", lambda q, k, *a, **kw: (q, k))
            return real_run(ck, batch)

    monkeypatch.setattr(cap, "_run_capture", capture_without_rotary)
    with pytest.raises(CheckpointError, match="eager attention"):
        capture(checkpoints[family], read_sources("stdlib:json"), width=16)


@pytest.mark.parametrize("family", ["bert", "gpt2", "qwen2"])
def test_padded_batches_equal_single_sequences(checkpoints, family, tmp_path):
    ck = checkpoints[family]
    rng = np.random.default_rng(1)
    vocab = int(ck.model.config.vocab_size)
    srcs = []
    for i, n in enumerate((24, 37, 50)):
        np.save(tmp_path / f"ids{i}.npy", rng.integers(5, vocab, n))
        srcs.append(str(tmp_path / f"ids{i}.npy"))
    srcs = read_sources(srcs)
    batched = capture(ck, srcs, batch_size=3)  # right padding to 50 tokens
    single = capture(ck, srcs, batch_size=1)
    assert [o.operator_id for o in batched] == [o.operator_id for o in single]
    for a, b in zip(batched, single):
        assert a.shape == b.shape
        assert np.abs(a.A - b.A).max() <= 1e-6
    # whole inputs: native w = T, causal w = T // 2
    sizes = {o.source: o.shape[0] for o in batched}
    assert sizes == ({"ids0": 24, "ids1": 37, "ids2": 50} if family == "bert"
                     else {"ids0": 12, "ids1": 18, "ids2": 25})


def test_causal_block_must_be_visible(checkpoints):
    ck = checkpoints["gpt2"]
    src = read_sources("stdlib:json")
    ops = capture(ck, src, key_positions=range(0, 10), query_positions=range(30, 40), layers=[0],
                  heads=[0])
    assert ops[0].block == "keys:0-10,queries:30-40"
    with pytest.raises(CheckpointError, match="masks some keys"):
        capture(ck, src, key_positions=range(10, 20), query_positions=range(0, 10))
    with pytest.raises(InvalidArgumentError, match="width"):
        capture(ck, [Source("short", "text", "a few words only")], width=64)


def test_gpt2_per_layer_scaling_is_beta(tmp_path):
    from transformers import GPT2Config, GPT2Model

    d = save_tiny_checkpoint("gpt2", tmp_path / "g")
    cfg = json.loads((d / "config.json").read_text())
    cfg["scale_attn_by_inverse_layer_idx"] = True
    torch.manual_seed(0)
    GPT2Model(GPT2Config(**cfg)).save_pretrained(tmp_path / "g2", safe_serialization=True)
    for f in d.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "vocab", "merges")):
            (tmp_path / "g2" / f.name).write_bytes(f.read_bytes())
    ck = load_checkpoint(tmp_path / "g2")
    ops = capture(ck, read_sources("stdlib:json"), width=8, heads=[0])
    assert [op.beta for op in ops] == pytest.approx(
        [1 / math.sqrt(D_HEAD) / (l + 1) for l in range(ck.n_layers)], rel=1e-15)


def test_load_checkpoint_errors_name_the_directory(tmp_path, ckdirs):
    with pytest.raises(CheckpointError, match="not an existing directory"):
        load_checkpoint(tmp_path / "missing")
    (tmp_path / "t5").mkdir()
    (tmp_path / "t5" / "config.json").write_text('{"model_type": "t5"}')
    with pytest.raises(CheckpointError, match="'t5' is not supported") as info:
        load_checkpoint(tmp_path / "t5")
    assert str(tmp_path / "t5") in str(info.value)
    pk = tmp_path / "pickled"
    pk.mkdir()
    for f in ckdirs["bert"].iterdir():
        if not f.name.endswith(".safetensors"):
            (pk / f.name).write_bytes(f.read_bytes())
    (pk / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(CheckpointError, match="only pickle weights pytorch_model.bin") as info:
        load_checkpoint(pk)
    assert str(pk) in str(info.value)
    nt = tmp_path / "notok"
    nt.mkdir()
    for f in ckdirs["gpt2"].iterdir():
        if f.name in ("config.json", "model.safetensors"):
            (nt / f.name).write_bytes(f.read_bytes())
    # no tokenizer: loads for token ids; text is refused, naming the checkpoint
    ck = load_checkpoint(nt)
    assert ck.tokenizer is None
    with pytest.raises(CheckpointError, match="has no tokenizer") as info:
        capture(ck, read_sources("stdlib:json"), width=8)
    assert str(nt) in str(info.value)


def test_bad_pixels_and_token_ids_are_refused(tmp_path, checkpoints):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "unit.npy", rng.random((3, 8, 8)))  # [0, 1]: would be read as ~black
    with pytest.raises(InvalidArgumentError, match="as if already scaled"):
        read_sources(str(tmp_path / "unit.npy"))
    np.save(tmp_path / "neg.npy", -rng.random((3, 8, 8)) * 1000)
    with pytest.raises(InvalidArgumentError, match=r"expected values in \[0, 255\]"):
        read_sources(str(tmp_path / "neg.npy"))
    np.save(tmp_path / "cplx.npy", np.ones((3, 8, 8), dtype=complex))
    with pytest.raises(InvalidArgumentError, match="real pixels"):
        read_sources(str(tmp_path / "cplx.npy"))
    np.save(tmp_path / "empty.npy", np.zeros(0, dtype=np.int64))
    with pytest.raises(InvalidArgumentError, match="gives 0 tokens"):
        capture(checkpoints["gpt2"], read_sources(str(tmp_path / "empty.npy")))
    vocab = int(checkpoints["gpt2"].model.config.vocab_size)
    np.save(tmp_path / "oov.npy", np.array([1, 2, vocab]))
    with pytest.raises(InvalidArgumentError, match="outside the model's vocabulary"):
        capture(checkpoints["gpt2"], read_sources(str(tmp_path / "oov.npy")))
    src = read_sources("stdlib:json")
    with pytest.raises(InvalidArgumentError, match="beyond the model's 512 positions"):
        capture(checkpoints["gpt2"], src, key_positions=range(8), query_positions=range(600, 610))
    with pytest.raises(InvalidArgumentError, match="^family"):
        capture(checkpoints["bert"], src, width=8, family="../escape")
    with pytest.raises(InvalidArgumentError, match="heads: 1 is given twice"):
        capture(checkpoints["bert"], src, width=8, heads=[1, 1])


def test_missing_weights_are_refused(ckdirs, tmp_path):
    # transformers initialises missing weights at random (and only logs it)
    from safetensors.numpy import load_file, save_file

    d = tmp_path / "holed"
    d.mkdir()
    for f in ckdirs["qwen2"].iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    w = load_file(str(d / "model.safetensors"))
    w = {k: v for k, v in w.items() if not k.startswith("layers.1.self_attn.k_proj")}
    save_file(w, str(d / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="missing or of the wrong shape.*k_proj") as info:
        load_checkpoint(d)
    assert str(d) in str(info.value)


def test_explicit_blocks_get_their_own_ids(checkpoints):
    ck, src = checkpoints["gpt2"], read_sources("stdlib:json")
    a = capture(ck, src, width=8, layers=[0], heads=[0])
    b = capture(ck, src, key_positions=range(8), query_positions=range(100, 108), layers=[0],
                heads=[0])
    assert a[0].operator_id == "gpt2-w8-L0H0-json"
    assert b[0].operator_id == "gpt2-wk0-8q100-108-L0H0-json"


def test_audit_refuses_repeated_operator_ids(ckdirs, tmp_path, capsys):
    panel = tmp_path / "dup.toml"
    panel.write_text(f"""
eps = [0.5]
[[heads]]
checkpoint = "{ckdirs['gpt2']}"
sources = ["stdlib:json"]
widths = [8]
layers = [0]
heads = [0]
[[heads]]
checkpoint = "{ckdirs['gpt2']}"
sources = ["stdlib:json"]
widths = [8]
layers = [0]
heads = [0]
""")
    capsys.readouterr()
    assert main(["audit", "--panel", str(panel), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert "ids repeat (gpt2-w8-L0H0-json)" in capsys.readouterr().err


def test_read_sources_errors(tmp_path):
    with pytest.raises(InvalidArgumentError, match="^source: .*nowhere"):
        read_sources(str(tmp_path / "nowhere.txt"))
    np.save(tmp_path / "bad.npy", np.zeros((2, 3)))
    with pytest.raises(InvalidArgumentError, match="token ids or"):
        read_sources(str(tmp_path / "bad.npy"))
    with pytest.raises(InvalidArgumentError, match="bundled"):
        read_sources("skimage:brain")  # needs a download: refused, never fetched
    with pytest.raises(InvalidArgumentError, match="none of the 64"):
        read_sources("stdlib:no_such_module")
    (tmp_path / "a.txt").write_text("alpha beta")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("gamma")
    with pytest.raises(InvalidArgumentError, match="names repeat"):
        read_sources([str(tmp_path / "a.txt"), str(tmp_path / "sub")])


def test_heads_cli_writes_operator_files_bracket_reads(ckdirs, tmp_path, capsys):
    out = tmp_path / "ops"
    assert main(["heads", str(ckdirs["qwen2"]), "--source", "stdlib:json", "--width", "12",
                 "--layers", "1", "--out", str(out)]) == 0
    files = sorted(out.glob("*.npz"))
    assert [f.name for f in files] == [f"qwen2-w12-L1H{h}-json.npz" for h in range(4)]
    with np.load(files[3]) as z:
        assert int(z["layer"]) == 1 and int(z["head"]) == 3
        assert z["query_positions"].tolist() == list(range(12, 24))
        assert z["key_positions"].tolist() == list(range(12))
        assert np.abs(z["A"] - _softmax(z["Q"], z["K"], float(z["beta"]))).max() <= 1e-9
        prov = json.loads(str(z["provenance"]))
    assert prov["model_type"] == "qwen2" and prov["key_head"] == 1 and prov["source"] == "json"
    assert prov["eager_max_abs_diff"] <= 1e-5
    op = load_operator(files[3])
    assert op.layer == 1 and op.head == 3 and op.operator_id == "qwen2-w12-L1H3-json"
    capsys.readouterr()
    assert main(["bracket", str(files[3]), "--eps", "0.25", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    g = res[0]["geometry"]
    assert g["Gamma"] == pytest.approx(op.beta * g["rho_Q"] * g["rho_K"])
    assert g["rho_Q"] == pytest.approx(np.linalg.norm(op.Q, axis=1).max())
    assert len(g["sv_K"]) == D_HEAD
    assert 1 <= res[0]["lower"] <= res[0]["upper"] <= 12


def test_tampered_operator_file_is_rejected(ckdirs, tmp_path):
    out = tmp_path / "ops"
    assert main(["heads", str(ckdirs["bert"]), "--source", "stdlib:csv", "--width", "8",
                 "--layers", "0", "--heads", "0", "--out", str(out)]) == 0
    (f,) = out.glob("*.npz")
    with np.load(f) as z:
        d = dict(z)
    d["Q"] = d["Q"] * 1.01  # factors no longer give A
    np.savez(tmp_path / "bad.npz", **d)
    assert main(["bracket", str(tmp_path / "bad.npz"), "--eps", "0.25"]) == 2


def test_panel_audit_over_several_families(ckdirs, tmp_path):
    panel = tmp_path / "families.toml"
    panel.write_text(f"""
eps = [0.25]

[[heads]]
checkpoint = "{ckdirs['gpt2']}"
sources = ["stdlib:json"]
widths = [8]
layers = [1]
heads = [0, 1]

[[heads]]
checkpoint = "{ckdirs['qwen2']}"
family = "qwen2-tiny"
sources = ["stdlib:csv"]
widths = [8]
layers = [0]
heads = [3]

[[heads]]
checkpoint = "{ckdirs['vit']}"
sources = ["skimage:coffee"]
layers = [1]
heads = [2]
""")
    out = tmp_path / "report"
    assert main(["audit", "--panel", str(panel), "--out", str(out), "--quiet", "--workers", "1",
                 "--attacks", "none"]) == 0
    import csv

    rows = list(csv.DictReader(open(out / "brackets.csv")))
    assert [r["operator_id"] for r in rows] == [
        "gpt2-w8-L1H0-json", "gpt2-w8-L1H1-json", "qwen2-tiny-w8-L0H3-csv",
        "vit-w17-L1H2-skimage-coffee"]
    for r in rows:
        assert float(r["Gamma"]) == pytest.approx(
            float(r["rho_Q"]) * float(r["rho_K"]) / math.sqrt(D_HEAD), rel=1e-9)
        assert len(r["sv_Q"].split()) == D_HEAD
        assert r["verdict"] in ("open", "resolved")
    assert {r["checkpoint"] for r in rows} == {"gpt2", "qwen2", "vit"}
    report = (out / "report.md").read_text()
    assert "median native Gamma" in report
    for group in ("gpt2-w8", "qwen2-tiny-w8", "vit-w17"):
        assert f"| {group} |" in report
    summary = json.loads((out / "summary.json").read_text())
    g = summary["families"]["gpt2-w8"]["0.25"]["median_Gamma"]
    gammas = [float(r["Gamma"]) for r in rows if r["operator_id"].startswith("gpt2-")]
    assert g == pytest.approx(float(np.median(gammas)), rel=1e-3)


@pytest.mark.parametrize("family", TEXT_FAMILIES + ("vit",))
def test_heads_cli_runs_on_every_family(ckdirs, tmp_path, family, capsys):
    out = tmp_path / family
    src = "skimage:chelsea" if family == "vit" else "stdlib:csv"
    width = [] if family == "vit" else ["--width", "10"]
    assert main(["heads", str(ckdirs[family]), "--source", src, *width, "--heads", "1",
                 "--out", str(out)]) == 0
    files = sorted(out.glob("*.npz"))
    assert len(files) == 2  # 2 layers x 1 head
    for f in files:
        op = load_operator(f)
        assert op.head == 1 and op.meta["eager_max_abs_diff"] <= 1e-5
        assert np.abs(op.A - _softmax(op.Q, op.K, op.beta)).max() <= 1e-9
        n = 17 if family == "vit" else 10
        assert op.shape == (n, n)

"""Tiny offline checkpoints (docs/theory/heads.md): every family loads with the Auto classes from safetensors,
has the specified sizes, runs with eager attention, tokenises real text; same seed, same bytes;
argument validation."""

import json
import logging
import subprocess
import sys

import numpy as np
import pytest

from softrank.errors import InvalidArgumentError
from softrank.generators.text import stdlib_sources
from softrank.generators.tiny import FAMILIES, save_tiny_checkpoint

from conftest import require_extra

pytestmark = pytest.mark.models("torch", "transformers", "tokenizers")
require_extra("models", "torch", "transformers", "tokenizers")

import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

TEXT_FAMILIES = ("bert", "gpt2", "qwen2", "llama")
MODEL_CLASSES = {
    "bert": "BertModel",
    "gpt2": "GPT2Model",
    "qwen2": "Qwen2Model",
    "llama": "LlamaModel",
    "vit": "ViTModel",
}
WIDTH = 40  # text forward passes: a docstring truncated to 40 tokens
VIT_TOKENS = 17  # CLS + (32 / 8)^2 patches


class _Records(logging.Handler):
    """Collects WARNING+ records of the transformers logger (it does not propagate)."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def transformers_warnings():
    handler = _Records()
    logger = transformers.utils.logging.get_logger("transformers")
    logger.addHandler(handler)
    yield handler.messages
    logger.removeHandler(handler)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, transformers_warnings):
    root = tmp_path_factory.mktemp("tiny")
    return {f: save_tiny_checkpoint(f, root / f) for f in FAMILIES}


@pytest.fixture(scope="module")
def argparse_text():
    return dict(stdlib_sources(60))["argparse"]


def _load_model(path):
    return transformers.AutoModel.from_pretrained(
        path, local_files_only=True, use_safetensors=True, attn_implementation="eager"
    )


def _load_tokenizer(path):
    return transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)


def _inputs(family, path, text):
    if family == "vit":
        processor = transformers.AutoImageProcessor.from_pretrained(path, local_files_only=True)
        image = np.random.default_rng(0).integers(0, 256, size=(3, 32, 32), dtype=np.uint8)
        return processor(image, return_tensors="pt")
    tokenizer = _load_tokenizer(path)
    return tokenizer(text, truncation=True, max_length=WIDTH, return_tensors="pt")


def _weights(path):
    from safetensors.torch import load_file

    return load_file(path / "model.safetensors")


# ------------------------------------------------------------------------- files, config


@pytest.mark.parametrize("family", FAMILIES)
def test_files_written(checkpoints, family):
    names = {p.name for p in checkpoints[family].iterdir()}
    assert {"config.json", "model.safetensors"} <= names
    assert not any(n.endswith((".bin", ".pt", ".pth", ".pkl")) for n in names)
    if family == "vit":
        assert "preprocessor_config.json" in names
        assert "tokenizer.json" not in names
    else:
        assert {"tokenizer.json", "tokenizer_config.json"} <= names


@pytest.mark.parametrize("family", FAMILIES)
def test_loads_with_specified_sizes(checkpoints, family):
    model = _load_model(checkpoints[family])
    assert type(model).__name__ == MODEL_CLASSES[family]
    assert model.dtype == torch.float32
    cfg = model.config
    assert cfg.hidden_size == 32
    assert cfg.num_hidden_layers == 2
    assert cfg.num_attention_heads == 4
    assert cfg.hidden_size // cfg.num_attention_heads == 8
    assert cfg.initializer_range == 0.5
    if family == "gpt2":
        assert cfg.n_inner == 64 and cfg.n_positions == 512
    else:
        assert cfg.intermediate_size == 64
    if family in ("bert", "qwen2", "llama"):
        assert cfg.max_position_embeddings == 512
    if family in ("qwen2", "llama"):
        assert cfg.num_key_value_heads == 2
        attn = model.layers[0].self_attn
        assert tuple(attn.q_proj.weight.shape) == (32, 32)
        assert tuple(attn.k_proj.weight.shape) == (16, 32)  # 2 key heads of dim 8
        assert tuple(attn.v_proj.weight.shape) == (16, 32)
    if family == "vit":
        assert (cfg.image_size, cfg.patch_size, cfg.num_channels) == (32, 8, 3)
        processor = transformers.AutoImageProcessor.from_pretrained(
            checkpoints[family], local_files_only=True
        )
        assert dict(processor.size) == {"height": 32, "width": 32}
        saved = json.loads((checkpoints[family] / "preprocessor_config.json").read_text())
        assert saved["image_processor_type"] == "ViTImageProcessor"


@pytest.mark.parametrize("family", TEXT_FAMILIES)
def test_vocab_and_special_token_ids_consistent(checkpoints, family):
    path = checkpoints[family]
    cfg = transformers.AutoConfig.from_pretrained(path, local_files_only=True)
    tokenizer = _load_tokenizer(path)
    assert cfg.vocab_size == len(tokenizer)
    assert 500 <= cfg.vocab_size <= 1000
    vocab = tokenizer.get_vocab()
    if family == "bert":
        for i, tok in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]):
            assert vocab[tok] == i
        assert cfg.pad_token_id == tokenizer.pad_token_id == 0
        return
    for role in ("bos", "eos", "pad"):
        token = getattr(tokenizer, f"{role}_token")
        assert token is not None and token in vocab, role
        assert getattr(cfg, f"{role}_token_id") == getattr(tokenizer, f"{role}_token_id"), role
        assert 0 <= getattr(cfg, f"{role}_token_id") < cfg.vocab_size


# ------------------------------------------------------------------------------- forward


@pytest.mark.parametrize("family", FAMILIES)
def test_forward_returns_attentions(checkpoints, family, argparse_text):
    path = checkpoints[family]
    model = _load_model(path)
    inputs = _inputs(family, path, argparse_text)
    width = VIT_TOKENS if family == "vit" else WIDTH
    if family == "vit":
        assert tuple(inputs["pixel_values"].shape) == (1, 3, 32, 32)
    else:
        assert tuple(inputs["input_ids"].shape) == (1, WIDTH)
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    assert len(out.attentions) == 2
    for att in out.attentions:
        assert tuple(att.shape) == (1, 4, width, width)
        assert torch.isfinite(att).all()
        assert torch.allclose(att.sum(-1), torch.ones(1, 4, width), atol=1e-5)
    # initializer_range 0.5: peaked rows (uniform: 1/width; causal uniform: about 0.1)
    row_max = torch.stack([a.max(-1).values for a in out.attentions]).mean()
    assert row_max > 0.3


# ----------------------------------------------------------------------------- tokenizers


@pytest.mark.parametrize("family", TEXT_FAMILIES)
def test_tokenizer_real_text(checkpoints, family, argparse_text):
    path = checkpoints[family]
    tokenizer = _load_tokenizer(path)
    cfg = transformers.AutoConfig.from_pretrained(path, local_files_only=True)
    ids = tokenizer(argparse_text, verbose=False)["input_ids"]
    assert len(ids) >= 300
    assert all(0 <= i < cfg.vocab_size for i in ids)
    plain = tokenizer(argparse_text, add_special_tokens=False, verbose=False)["input_ids"]
    if family == "bert":
        assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
        assert ids[1:-1] == plain
        assert tokenizer.unk_token_id not in plain[:50]  # trained on this very text
    else:
        assert ids == plain  # nothing added around the text
        assert ids[0] not in tokenizer.all_special_ids
        assert ids[-1] not in tokenizer.all_special_ids
        # byte-level: decoding gives the text back
        assert tokenizer.decode(ids) == argparse_text


@pytest.mark.parametrize("family", TEXT_FAMILIES)
def test_loaded_tokenizer_matches_tokenizer_json(checkpoints, family, argparse_text):
    """AutoTokenizer may pick a model-specific class that rebuilds the pipeline from the
    vocabulary (bert, qwen2): it must still tokenise exactly as tokenizer.json says."""
    path = checkpoints[family]
    raw = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
    loaded = _load_tokenizer(path)
    assert loaded(argparse_text, verbose=False)["input_ids"] == raw.encode(argparse_text).ids


# ------------------------------------------------------------------------ reproducibility


def test_same_seed_same_bytes_different_seed_different_weights(checkpoints, tmp_path):
    for family in FAMILIES:
        again = save_tiny_checkpoint(family, tmp_path / "again" / family)
        for name in sorted(p.name for p in checkpoints[family].iterdir()):
            assert (again / name).read_bytes() == (checkpoints[family] / name).read_bytes(), (
                family,
                name,
            )
        other = save_tiny_checkpoint(family, tmp_path / "other" / family, seed=1)
        w0, w1 = _weights(checkpoints[family]), _weights(other)
        assert w0.keys() == w1.keys()
        random_init = [k for k in w0 if w0[k].dim() == 2]
        assert random_init and all(not torch.equal(w0[k], w1[k]) for k in random_init), family
        if family != "vit":
            assert (other / "tokenizer.json").read_bytes() == (
                checkpoints[family] / "tokenizer.json"
            ).read_bytes()


def test_global_torch_rng_untouched(tmp_path):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    save_tiny_checkpoint("vit", tmp_path / "vit", seed=7)
    assert torch.equal(torch.rand(3), expected)


def test_initializer_range_is_used(checkpoints, tmp_path):
    small = save_tiny_checkpoint("llama", tmp_path / "small", initializer_range=0.02)
    assert _load_model(small).config.initializer_range == 0.02
    key = "layers.0.self_attn.q_proj.weight"
    assert 0.01 < float(_weights(small)[key].std()) < 0.03
    assert 0.35 < float(_weights(checkpoints["llama"])[key].std()) < 0.65


def test_no_transformers_warnings(checkpoints, argparse_text, transformers_warnings):
    """Saving (module fixture), loading and running every family logs no warning, e.g. no
    special-token id outside the vocabulary, no torchvision fallback."""
    for family in FAMILIES:
        path = checkpoints[family]
        model = _load_model(path)
        with torch.no_grad():
            model(**_inputs(family, path, argparse_text), output_attentions=True)
    assert transformers_warnings == []


# ---------------------------------------------------------------------------- validation


@pytest.mark.parametrize("family", ["foo", "BERT", "", None, 3])
def test_bad_family(tmp_path, family):
    with pytest.raises(InvalidArgumentError) as info:
        save_tiny_checkpoint(family, tmp_path / "x")
    message = str(info.value)
    assert message.startswith("family:")
    assert repr(family) in message
    assert all(repr(f) in message for f in FAMILIES)
    assert not (tmp_path / "x").exists()


def test_non_empty_directory(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(InvalidArgumentError) as info:
        save_tiny_checkpoint("gpt2", tmp_path)
    assert str(info.value).startswith("directory:")
    assert str(tmp_path) in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_directory_is_a_file(tmp_path):
    target = tmp_path / "file"
    target.write_text("")
    with pytest.raises(InvalidArgumentError, match="^directory:"):
        save_tiny_checkpoint("bert", target)


def test_empty_existing_directory_and_parents(tmp_path):
    (tmp_path / "empty").mkdir()
    assert save_tiny_checkpoint("vit", tmp_path / "empty") == tmp_path / "empty"
    nested = save_tiny_checkpoint("vit", str(tmp_path / "a" / "b"))
    assert (nested / "config.json").is_file()


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"seed": -1}, "seed"),
        ({"seed": 1.0}, "seed"),
        ({"seed": True}, "seed"),
        ({"initializer_range": 0.0}, "initializer_range"),
        ({"initializer_range": float("nan")}, "initializer_range"),
        ({"initializer_range": "0.5"}, "initializer_range"),
    ],
)
def test_bad_seed_and_initializer_range(tmp_path, kwargs, name):
    with pytest.raises(InvalidArgumentError, match=f"^{name}:"):
        save_tiny_checkpoint("gpt2", tmp_path / "x", **kwargs)
    assert not (tmp_path / "x").exists()


def test_import_is_light():
    code = (
        "import sys, softrank.generators.tiny; "
        "heavy = {'torch', 'transformers', 'tokenizers'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

"""Tiny random-initialised Hugging Face checkpoints, built offline (docs/theory/heads.md).

Tests of head capture need real transformers architectures, but no download: this module
writes a complete checkpoint directory (config, safetensors weights and a tokenizer or image
processor) for a few model families, with 2 layers of 4 heads of dimension 8 and a large
``initializer_range`` (0.5 by default). Large random weights give large attention logits, so
peaked, far-from-uniform attention rows: an error in capturing attention (a missing rotary
embedding, a wrong query-to-key head map under grouped-query attention, a forgotten scale)
changes the captured probabilities visibly instead of hiding under near-uniform rows.

Text tokenizers are trained with the ``tokenizers`` library on the standard-library docstrings
of :func:`softrank.generators.text.stdlib_sources`, real English text every machine has.

torch, transformers and tokenizers are imported inside the function: importing this module is
light.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

from ..errors import InvalidArgumentError
from ..validation import check_int, check_positive

__all__ = [
    "FAMILIES",
    "HIDDEN_SIZE",
    "NUM_LAYERS",
    "NUM_HEADS",
    "NUM_KV_HEADS",
    "INTERMEDIATE_SIZE",
    "MAX_POSITIONS",
    "MAX_POSITIONS_LIMIT",
    "VOCAB_SIZE",
    "TOKENIZER_SOURCES",
    "IMAGE_SIZE",
    "PATCH_SIZE",
    "NUM_CHANNELS",
    "SLIDING_WINDOW_FAMILIES",
    "SLIDING_LAYERS_FROM",
    "save_tiny_checkpoint",
]

#: Supported families (base models: BertModel, GPT2Model, Qwen2Model, LlamaModel, ViTModel).
FAMILIES: tuple[str, ...] = ("bert", "gpt2", "qwen2", "llama", "vit")

HIDDEN_SIZE = 32
NUM_LAYERS = 2
NUM_HEADS = 4  # head dimension HIDDEN_SIZE // NUM_HEADS = 8
NUM_KV_HEADS = 2  # qwen2, llama: grouped-query attention, 2 query heads per key/value head
INTERMEDIATE_SIZE = 64
MAX_POSITIONS = 512  # text families: the default of ``max_positions``

#: The largest ``max_positions`` accepted: the longest heads softrank brackets are 4,096
#: tokens, and users' run to 32,768.
MAX_POSITIONS_LIMIT = 32768

#: Target vocabulary size of the trained text tokenizers (special tokens included).
VOCAB_SIZE = 1000
#: Number of standard-library docstring sources the tokenizers are trained on.
TOKENIZER_SOURCES = 60

#: Families whose config has a sliding window (``save_tiny_checkpoint(..., sliding_window=W)``).
SLIDING_WINDOW_FAMILIES: tuple[str, ...] = ("qwen2",)
#: With a sliding window, layers ``>= SLIDING_LAYERS_FROM`` slide (Qwen2's ``max_window_layers``):
#: layer 0 is full causal attention, layer 1 a sliding window.
SLIDING_LAYERS_FROM = 1

IMAGE_SIZE = 32
PATCH_SIZE = 8  # vit: (32 / 8)^2 = 16 patches + CLS = 17 tokens
NUM_CHANNELS = 3

# Special tokens of the byte-level BPE families: (tokens in id order, bos, eos, pad).
_BYTE_LEVEL_SPECIALS: dict[str, tuple[tuple[str, ...], str, str, str]] = {
    "gpt2": (("<|endoftext|>",), "<|endoftext|>", "<|endoftext|>", "<|endoftext|>"),
    "qwen2": (
        ("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
        "<|endoftext|>",
        "<|endoftext|>",
        "<|endoftext|>",
    ),
    "llama": (
        ("<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>"),
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|finetune_right_pad_id|>",
    ),
}
_BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _check_arguments(
    family: Any, directory: Any, seed: Any, initializer_range: Any, sliding_window: Any = None,
    max_positions: Any = None,
) -> pathlib.Path:
    if not isinstance(family, str) or family not in FAMILIES:
        allowed = ", ".join(repr(f) for f in FAMILIES)
        raise InvalidArgumentError(f"family: expected one of {allowed}, got {family!r}")
    check_int(seed, "seed", 0, 2**63 - 1)
    check_positive(initializer_range, "initializer_range")
    if sliding_window is not None:
        if family not in SLIDING_WINDOW_FAMILIES:
            raise InvalidArgumentError(
                f"sliding_window: {family!r} has no sliding window (families with one: "
                f"{', '.join(repr(f) for f in SLIDING_WINDOW_FAMILIES)}), got {sliding_window!r}"
            )
    if max_positions is not None:
        if family == "vit":
            raise InvalidArgumentError(
                f"max_positions: 'vit' has one position per patch ({IMAGE_SIZE // PATCH_SIZE}^2 "
                f"+ 1), set by its image size, got {max_positions!r}"
            )
        check_int(max_positions, "max_positions", 2, MAX_POSITIONS_LIMIT)
    if sliding_window is not None:
        check_int(sliding_window, "sliding_window", 1, max_positions or MAX_POSITIONS)
    if not isinstance(directory, (str, os.PathLike)):
        raise InvalidArgumentError(
            f"directory: expected a str or os.PathLike, got {type(directory).__name__}"
        )
    path = pathlib.Path(directory)
    if path.exists():
        if not path.is_dir():
            raise InvalidArgumentError(f"directory: {str(path)!r} exists and is not a directory")
        if any(path.iterdir()):
            raise InvalidArgumentError(
                f"directory: expected a new or empty directory, {str(path)!r} is not empty"
            )
    return path


def _corpus() -> list[str]:
    from .text import stdlib_sources

    return [text for _, text in stdlib_sources(TOKENIZER_SOURCES)]


# Continuation characters (inside a word) are trained as private-use characters, plane 16.
_CONTINUATION_OFFSET = 0x100000


def _bert_tokenizer(max_positions: int = MAX_POSITIONS) -> Any:
    """WordPiece tokenizer in BERT's pipeline; ``tokenizer(text)`` gives ``[CLS] ... [SEP]``.

    The ``tokenizers`` WordPiece trainer is not deterministic: it names continuation pieces
    (``##x``) in hash-map order, and those ids break ties between equally frequent merges. So
    the vocabulary is trained with the BPE trainer, whose ids are deterministic when every
    character is in its initial alphabet (sorted by code point): each word of the normalised,
    pre-tokenised corpus is fed with its non-initial characters mapped to private-use code
    points, and a learned token starting with such a character becomes ``##`` + its unmapped
    text. The vocabulary is the WordPiece one (special tokens, characters, ``##`` characters,
    then merges in order); WordPiece encodes by greedy longest match, so merges are not kept.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertTokenizerFast

    # the normalizer and pre-tokenizer BertTokenizerFast builds around a vocabulary
    normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()

    def plain(c: str) -> bool:
        return ord(c) < 0xFFFE and not 0xE000 <= ord(c) <= 0xF8FF

    words = []
    for text in _corpus():
        for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)):
            if len(word) > 100 or not all(plain(c) for c in word):
                continue  # [UNK] for WordPiece anyway
            words.append(word[0] + "".join(chr(_CONTINUATION_OFFSET + ord(c)) for c in word[1:]))
    alphabet = sorted(set("".join(words)))

    tok = Tokenizer(models.BPE())  # no normalizer, no pre-tokenizer: one word per sequence
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=list(_BERT_SPECIALS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(words, trainer=trainer)

    def unmap(token: str) -> str:
        if token in _BERT_SPECIALS:
            return token
        head = "##" if ord(token[0]) >= _CONTINUATION_OFFSET else ""
        return head + "".join(
            chr(ord(c) - _CONTINUATION_OFFSET) if ord(c) >= _CONTINUATION_OFFSET else c
            for c in token
        )

    vocab = {unmap(token): i for token, i in tok.get_vocab().items()}
    # BertTokenizerFast builds the WordPiece pipeline around the vocabulary (as it does when
    # loading the checkpoint) and adds the [CLS] $A [SEP] post-processor.
    return BertTokenizerFast(
        vocab=vocab,
        do_lower_case=True,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
        model_max_length=max_positions,
    )


def _byte_level_tokenizer(family: str, max_positions: int = MAX_POSITIONS) -> Any:
    """Byte-level BPE (every byte encodable); no special tokens added around text.

    qwen2 is trained in ``Qwen2Tokenizer``'s own pipeline (NFC, its split regex, then byte-level)
    and wrapped in that class, because ``AutoTokenizer`` always loads a qwen2 checkpoint with
    ``Qwen2Tokenizer``, which rebuilds the pipeline from the vocabulary and merges. gpt2 and
    llama use the plain GPT-2 byte-level pipeline and load as the ``tokenizer.json`` says.
    """
    import json

    import transformers
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import processors, trainers

    specials, bos, eos, pad = _BYTE_LEVEL_SPECIALS[family]
    tok = Tokenizer(models.BPE())
    if family == "qwen2":
        from transformers.models.qwen2 import tokenization_qwen2

        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(
                    Regex(tokenization_qwen2.PRETOKENIZE_REGEX), behavior="isolated", invert=False
                ),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.decoder = decoders.ByteLevel()
    # With all 256 byte characters in the initial alphabet, every id the trainer assigns (and so
    # every tie-break between equally frequent merges) is deterministic.
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=list(specials),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    kwargs: dict[str, Any] = {
        "bos_token": bos,
        "eos_token": eos,
        "pad_token": pad,
        "model_max_length": max_positions,
    }
    extra = [t for t in specials if t not in (bos, eos, pad)]
    if extra:
        kwargs["extra_special_tokens"] = extra
    if family == "qwen2":
        merges = json.loads(tok.to_str())["model"]["merges"]
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]
        return transformers.Qwen2Tokenizer(
            vocab=tok.get_vocab(), merges=merges, unk_token=None, **kwargs
        )
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=None, **kwargs)


def _token_ids(tokenizer: Any) -> dict[str, int]:
    ids = {
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    return {k: int(v) for k, v in ids.items() if v is not None}


def _config(
    family: str, initializer_range: float, tokenizer: Any, sliding_window: int | None = None,
    max_positions: int = MAX_POSITIONS,
) -> Any:
    import transformers

    common = {"initializer_range": float(initializer_range), "dtype": "float32"}
    if family == "vit":
        return transformers.ViTConfig(
            hidden_size=HIDDEN_SIZE,
            num_hidden_layers=NUM_LAYERS,
            num_attention_heads=NUM_HEADS,
            intermediate_size=INTERMEDIATE_SIZE,
            image_size=IMAGE_SIZE,
            patch_size=PATCH_SIZE,
            num_channels=NUM_CHANNELS,
            **common,
        )
    common["vocab_size"] = len(tokenizer)
    if family == "bert":
        return transformers.BertConfig(
            hidden_size=HIDDEN_SIZE,
            num_hidden_layers=NUM_LAYERS,
            num_attention_heads=NUM_HEADS,
            intermediate_size=INTERMEDIATE_SIZE,
            max_position_embeddings=max_positions,
            pad_token_id=int(tokenizer.pad_token_id),
            **common,
        )
    ids = _token_ids(tokenizer)
    if family == "gpt2":
        return transformers.GPT2Config(
            n_embd=HIDDEN_SIZE,
            n_layer=NUM_LAYERS,
            n_head=NUM_HEADS,
            n_inner=INTERMEDIATE_SIZE,
            n_positions=max_positions,
            **ids,
            **common,
        )
    cls = transformers.Qwen2Config if family == "qwen2" else transformers.LlamaConfig
    if sliding_window is not None:
        # Qwen2Config: layers i >= max_window_layers slide (config.layer_types); layer 0
        # keeps full causal attention, so one tiny model has both kinds of layer
        common.update(use_sliding_window=True, sliding_window=int(sliding_window),
                      max_window_layers=SLIDING_LAYERS_FROM)
    return cls(
        hidden_size=HIDDEN_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_KV_HEADS,
        intermediate_size=INTERMEDIATE_SIZE,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        **ids,
        **common,
    )


_MODEL_CLASSES = {
    "bert": "BertModel",
    "gpt2": "GPT2Model",
    "qwen2": "Qwen2Model",
    "llama": "LlamaModel",
    "vit": "ViTModel",
}


def save_tiny_checkpoint(
    family: str,
    directory: str | os.PathLike,
    *,
    seed: int = 0,
    initializer_range: float = 0.5,
    sliding_window: int | None = None,
    max_positions: int | None = None,
) -> pathlib.Path:
    """Write a tiny random-initialised, offline-loadable Hugging Face checkpoint (docs/theory/heads.md).

    Tests run on tiny random-initialised configurations with ``initializer_range`` around 0.5:
    the large weights give large attention logits and peaked rows, so a capture error (a missing
    rotary embedding, a wrong query-to-key head map, a wrong scale) is visible in the
    probabilities rather than hidden in near-uniform rows. Nothing is downloaded.

    Every family has ``hidden_size`` 32, 2 layers, 4 attention heads of dimension 8 and
    ``intermediate_size`` 64, and writes the base model (no task head):

    ========  ==============  ==================================================================
    family    class           specifics
    ========  ==============  ==================================================================
    bert      ``BertModel``   WordPiece tokenizer, lower-cased; ``tokenizer(text)`` gives
                              ``[CLS] ... [SEP]``; special tokens ``[PAD] [UNK] [CLS] [SEP]
                              [MASK]`` (ids 0-4); ``max_position_embeddings`` 512
    gpt2      ``GPT2Model``   byte-level BPE; bos = eos = pad = ``<|endoftext|>``;
                              ``n_positions`` 512
    qwen2     ``Qwen2Model``  byte-level BPE; bos = eos = pad = ``<|endoftext|>`` (plus
                              ``<|im_start|> <|im_end|>``); 2 key/value heads (grouped-query
                              attention, 2 query heads per key head); rotary; 512 positions
    llama     ``LlamaModel``  byte-level BPE; bos ``<|begin_of_text|>``, eos ``<|end_of_text|>``,
                              pad ``<|finetune_right_pad_id|>``; 2 key/value heads; rotary;
                              512 positions
    vit       ``ViTModel``    ``ViTImageProcessor`` resizing to 32 x 32; ``image_size`` 32,
                              ``patch_size`` 8, 3 channels: 17 tokens (CLS + 16 patches)
    ========  ==============  ==================================================================

    Text tokenizers are trained (deterministically) on the first 60 standard-library docstring
    sources of :func:`softrank.generators.text.stdlib_sources`, with a vocabulary of 1000
    (special tokens included, ``config.vocab_size`` equal to it). The byte-level tokenizers add
    no token around the text; the config's ``bos/eos/pad_token_id`` are the tokenizer's.

    Parameters
    ----------
    family : {"bert", "gpt2", "qwen2", "llama", "vit"}
    directory : str or os.PathLike
        Where to write; created (with parents) if missing, else it must be an empty directory.
    seed : int, default 0
        ``torch.manual_seed(seed)`` before the model is constructed (in a forked RNG state, so
        the caller's global torch RNG is untouched). Same seed, same bytes (for the same
        Python minor version and torch/transformers/tokenizers versions).
    initializer_range : float, default 0.5
        Standard deviation of the random weight initialisation, ``> 0``.
    sliding_window : int, optional
        ``qwen2`` only (:data:`SLIDING_WINDOW_FAMILIES`): a sliding window of ``W`` keys
        (``use_sliding_window=True``, ``sliding_window=W``, ``max_window_layers=1``), so layer
        0 attends causally and layer 1 only to the last ``W`` positions (query ``i`` sees keys
        ``i - W < j <= i``; ``config.layer_types`` is ``["full_attention",
        "sliding_attention"]``). A small ``W`` (e.g. 8) makes inputs of a few dozen tokens
        slide. Default: no window.
    max_positions : int, optional
        Text families: the longest input, in tokens (``max_position_embeddings``,
        ``n_positions`` and the tokenizer's ``model_max_length``), in ``[2, 32768]``; default
        512. Whole heads of 1,024 to 4,096 tokens (the ``long`` heads of
        docs/benchmarks.md) need it above 512. ``bert`` and ``gpt2`` learn a table of
        positions, drawn with the other weights: another value gives them other weights
        (bert's embeddings, most of gpt2's), for the same seed; the rotary ``qwen2`` and
        ``llama`` have no such table and keep the same weights.

    Returns
    -------
    path : pathlib.Path
        ``directory``, holding ``config.json``, ``model.safetensors`` (float32; no pickle
        ``.bin``) and, for text families, ``tokenizer.json`` and ``tokenizer_config.json``,
        for ``vit`` ``preprocessor_config.json``. Loads with ``AutoModel.from_pretrained(path,
        local_files_only=True, use_safetensors=True)`` and ``AutoTokenizer`` /
        ``AutoImageProcessor.from_pretrained(path, local_files_only=True)``.

    Raises
    ------
    InvalidArgumentError
        If ``family`` is not one of the families; if ``directory`` is not a path, exists as a
        file or is a non-empty directory; if ``seed`` is not an int in ``[0, 2**63)``; if
        ``initializer_range`` is not a finite number ``> 0``; if ``sliding_window`` is given
        for a family without one or is not an int in ``[1, max_positions]``; if
        ``max_positions`` is given for ``vit`` or is not an int in ``[2, 32768]``. Checked
        before anything is written.
    """
    path = _check_arguments(family, directory, seed, initializer_range, sliding_window,
                            max_positions)
    positions = MAX_POSITIONS if max_positions is None else int(max_positions)

    import torch
    import transformers

    tokenizer = None
    processor = None
    if family == "vit":
        # The PIL backend needs no torchvision; the saved preprocessor_config.json is the same
        # (``image_processor_type`` "ViTImageProcessor") as with the torchvision backend.
        # (``transformers.ViTImageProcessor`` without torchvision warns and falls back to it).
        processor = transformers.ViTImageProcessorPil(
            size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
        )
    elif family == "bert":
        tokenizer = _bert_tokenizer(positions)
    else:
        tokenizer = _byte_level_tokenizer(family, positions)

    config = _config(family, initializer_range, tokenizer, sliding_window, positions)
    model_cls = getattr(transformers, _MODEL_CLASSES[family])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
    model = model.to(torch.float32).eval()

    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidArgumentError(f"directory: cannot create {str(path)!r} ({exc})") from exc
    # transformers 5 writes safetensors only (it has no `safe_serialization` switch any more)
    progress = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()  # no "Writing model shards" bar
    try:
        model.save_pretrained(path)
    finally:
        if progress:
            transformers.utils.logging.enable_progress_bar()
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
    if processor is not None:
        processor.save_pretrained(path)
    return path

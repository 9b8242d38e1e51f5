"""The capture itself (docs/theory/heads.md): the function registered in transformers'
``AttentionInterface`` that records every layer's queries, keys and mask, the forward passes
over batches of sources, the operators built from them, and their check against the
model's own eager attention (see the package's docstring)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import CheckpointError, InvalidArgumentError
from ...ids import check_id_part
from ...operators import Operator
from ...validation import check_indices, check_int

from .checkpoints import TOKENIZER_FILES, Checkpoint, key_head
from .sources import Source

__all__ = ["CAPTURE_NAME", "capture", "eager_attentions_of"]

CAPTURE_NAME = "softrank_capture"


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
    return (f"checkpoint {where!r} has no tokenizer ({' or '.join(TOKENIZER_FILES)}), which "
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
               name: str, full: bool = False):
    if full:  # the whole sequence: the first `width` tokens (the input is truncated to them)
        p = np.arange(T)
        if p.size < 2:
            raise InvalidArgumentError(f"source: {name!r} has {T} tokens; a full operator "
                                       "needs at least 2")
        return p, p
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
            batch_size: int = 8, verify: bool = True, atol: float = 1e-5,
            full: bool = False) -> list[Operator]:
    """Operators of every (source, layer, head) (docs/theory/operators.md, docs/theory/heads.md); see the module docstring.

    Parameters
    ----------
    ck : Checkpoint
        From :func:`~softrank.generators.capture.checkpoints.load_checkpoint`.
    sources : sequence of Source
        Text or token ids (text families), images (``vit``).
    width : int, optional
        Block width ``w``: native operators take the first ``w`` tokens (the text is
        tokenised and truncated to ``w``, special tokens kept); causal models take keys
        ``[0, w)`` and queries ``[w, 2w)`` of the first ``2w`` tokens. None: the whole
        sequence (native) or ``w = T // 2`` (causal). With ``full``: the first ``w`` tokens
        (None: the whole input). ``vit``: the sequence is fixed by the image size
        (``1 + patches``); ``width`` must be None or that length.
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
    full : bool
        Whole heads (docs/theory/heads.md, *Full heads*): queries = keys = all ``T`` tokens
        of each source (its own tokens only, never padding), ``A (T, T) =
        softmax_rows(beta Q K^T, mask)`` with ``mask (T, T)`` the model's own mask of that
        layer for that source (causal for GPT-2, Llama, Qwen2; causal with a window of ``W``
        keys on the sliding layers of a config with a sliding window; whatever the model
        builds otherwise, read from its additive mask, never assumed). An all-visible mask
        (bidirectional models: BERT, ViT) is no mask: their full operator is the native
        whole-sequence operator, ``mask`` None. ``block`` is ``"full:0-T"``, the id
        ``{family}-full{T}-L{l}H{h}-{source}``, ``meta["full"]`` True; the mask's kind
        (:func:`~softrank.operators.mask_kind`: ``"causal"``, ``"window:W"``) is in
        :meth:`Operator.provenance`. Not with ``key_positions``/``query_positions``.

    Returns
    -------
    list of Operator
        Source-major, then layer, then head. Each has ``A (m, N)``, ``Q (m, d)``,
        ``K (N, d)`` float64, ``beta``, ``layer``, ``head``, ``block``, ``mask`` (``full``
        only; else None) and ``meta`` with ``query_positions``, ``key_positions``,
        ``width``, ``checkpoint`` (directory name), ``checkpoint_dir``, ``model_type`` and
        ``key_head``; the native geometry is :meth:`Operator.native_geometry`.

    Raises
    ------
    InvalidArgumentError
        Bad ``width``, ``layers``, ``heads``, positions, or a source too short or of the
        wrong kind, token ids outside the vocabulary, or a ``family`` or source name that
        :func:`softrank.ids.check_id_part` refuses (messages name the argument and the
        source); ``full`` with ``key_positions`` or ``query_positions``.
    CheckpointError
        If a text source is given and the checkpoint has no tokenizer (token ids need none),
        if a block's queries may not attend all its keys (causal order, sliding window,
        padding; not checked with ``full``, which keeps the mask), the mask carries
        position terms, a causal model passes no mask (``full``), the model's attention
        calls do not match its config, or (``verify``) an operator differs from the model's
        attention by more than ``atol``.
    """
    if not sources:
        raise InvalidArgumentError("sources: expected at least one source, got none")
    if not isinstance(full, bool):
        raise InvalidArgumentError(f"full: expected True or False, got {full!r}")
    if full and (key_positions is not None or query_positions is not None):
        raise InvalidArgumentError(
            "full, key_positions, query_positions: a full operator takes every position as "
            "query and key; give full=True or explicit positions, not both")
    batch_size = check_int(batch_size, "batch_size", 1)
    cap = ck.max_positions
    if width is not None:
        width = check_int(width, "width", 2)
        need = 2 * width if ck.causal and not full else width
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
        length = 2 * width if ck.causal and not full else width
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
            kp, qp = _positions(ck, T, width, key_positions, query_positions, src.name, full)
            # ids name the block: w for the default blocks, the spans for explicit ones
            w_label = (f"k{_span(kp)}q{_span(qp)}" if key_positions is not None
                       else str(width if width is not None else len(kp)))
            if full:  # the whole sequence, with the model's mask
                block, id_block = f"full:0-{len(kp)}", f"full{len(kp)}"
            elif ck.causal is False and key_positions is None:
                block, id_block = f"native:0-{len(kp)}", f"w{w_label}"
            else:
                block, id_block = f"keys:{_span(kp)},queries:{_span(qp)}", f"w{w_label}"
            for l in ls:
                r = rec[l]
                if full and ck.causal and r["mask"] is None:
                    raise CheckpointError(
                        f"model: layer {l} of a causal model passed no attention mask; the "
                        "full operator's mask cannot be read")
                allowed = _allowed(r["mask"], b, r["query"].shape[2], l)
                sub = allowed[np.ix_(qp, kp)]
                if full:
                    mask = None if sub.all() else sub  # the model's own; all-visible: none
                elif not sub.all():
                    raise CheckpointError(
                        f"model: layer {l} masks some keys of the block (queries "
                        f"{int(qp.min())}..{int(qp.max())}, keys {int(kp.min())}..{int(kp.max())}) "
                        f"for source {src.name!r}; every query must see every key (docs/theory/operators.md)")
                else:
                    mask = None
                scaling = r["scaling"] if r["scaling"] is not None else r["query"].shape[-1] ** -0.5
                for h in hs:
                    kh = key_head(h, ck.n_heads, ck.n_kv_heads)
                    Q = r["query"][b, h][qp].astype(np.float64)
                    K = r["key"][b, kh][kp].astype(np.float64)
                    op = Operator.from_factors(
                        Q, K, beta=float(scaling), mask=mask, family=fam, source=src.name,
                        layer=l, head=h, block=block,
                        meta={"width": len(kp), "checkpoint": ck.name,
                              "model_type": ck.model_type, "key_head": kh,
                              "checkpoint_dir": str(ck.path.resolve()) if str(ck.path) else "",
                              "source_sha256": src_hash[src.name], **versions,
                              **({"full": True} if full else {}),
                              "query_positions": qp.tolist(), "key_positions": kp.tolist()},
                        operator_id=f"{fam}-{id_block}-L{l}H{h}-{src.name}")
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
    """Max |model probabilities on the block, renormalised over its keys - A|.

    A full operator (``meta["full"]``) is compared with the model's probabilities as they
    are, not renormalised: every entry, those its mask hides (0 in both) included, and a row
    of the model that gave mass to a key outside the operator (padding) would show as a
    row of ``A`` with more mass than the model's."""
    qp = np.asarray(op.meta["query_positions"])
    kp = np.asarray(op.meta["key_positions"])
    P = att[op.layer][b, op.head][np.ix_(qp, kp)]
    if not op.meta.get("full"):
        P = P / P.sum(axis=1, keepdims=True)
    return float(np.abs(P - op.A).max())

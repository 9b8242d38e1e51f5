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
model's attention; full heads keep the mask instead, below), and the mask may hold nothing
but 0 and the masked value.

**Blocks.** Bidirectional models (BERT, ViT) give native operators: queries = keys = all
``w`` tokens. Causal models give common-prefix blocks: keys ``[0, w)``, queries ``[w, 2w)``
by default (``key_positions``/``query_positions`` set them), so every query sees the same
keys (docs/theory/operators.md). Sequences of different lengths are batched with right padding, an explicit
attention mask and ``position_ids = 0 .. T-1`` per sequence, so padding never moves a
token's position (rotary models) and no real token attends a pad.

**Full heads.** ``capture(..., full=True)`` takes every one of a source's own ``T`` tokens
(the first ``width``, if given) as query and key, and keeps the model's mask of that layer
for that sequence as the operator's ``mask``: ``A = softmax_rows(beta Q K^T, mask)``,
exactly 0 on the keys the model hides (causal order; the window of a sliding layer, as
``config.layer_types`` assigns them; anything else the model's additive mask says). The
mask is read from the model, never assumed; padding keys lie outside ``[0, T)`` and are
never part of the operator. For bidirectional models the mask hides nothing and the full
operator is the native one without a mask.

**Verification.** :func:`capture` (``verify=True``, the default) runs every batch a second
time with eager attention and ``output_attentions=True`` and compares each operator with the
model's own probabilities on its query and key positions, renormalised over the block's
keys (full heads: as they are, every entry, masked ones included); a difference above
``atol`` (1e-5) is an error, so a capture that lost the rotary
embedding or mapped a query head to the wrong key head cannot pass silently.

Loading is offline (``local_files_only=True``) and safetensors-only; torch and transformers
are imported inside the functions, so importing this module is light.

The package: :mod:`.checkpoints` (loading, families, the key head), :mod:`.sources` (the
inputs) and :mod:`.attention` (the hook, the forward passes, the operators and their check
against eager attention); every public name is re-exported here.
"""

from __future__ import annotations

from .attention import CAPTURE_NAME, capture, eager_attentions_of
from .checkpoints import (FAMILIES, Checkpoint, key_head, load_checkpoint, minilm_checkpoint_dir,
                          resolve_checkpoint)
from .sources import SKIMAGE_IMAGES, Source, read_sources

__all__ = [
    "minilm_checkpoint_dir",
    "eager_attentions_of",
    "FAMILIES", "Checkpoint", "Source", "load_checkpoint", "resolve_checkpoint", "read_sources",
    "capture",
    "key_head", "CAPTURE_NAME", "SKIMAGE_IMAGES",
]

"""The built-in panels' operator specs (:mod:`softrank.harness.panels` builds the panels
from them): MiniLM heads at the widths of the ``default``, ``wide`` and ``paper`` panels,
the synthetic operators of the ``quick``, ``default``, ``causal`` and ``paper`` panels, and
the long synthetic heads and tiny decoders of the ``long`` panel. A spec is a small dict that
:func:`softrank.harness.panels.materialize` turns into an operator."""

from __future__ import annotations

__all__ = ["minilm_specs", "wide_specs", "paper_specs", "long_specs", "synthetic_specs",
           "causal_specs", "N_SOURCES",
           "SHORT_SOURCES", "PAPER_WIDTHS", "PAPER_SOURCES_PER_HEAD", "PAPER_GRID_SCALES",
           "LONG_WIDTHS", "LONG_EPS", "LONG_CELL_TIMEOUT", "LONG_DECODERS",
           "LONG_DECODER_WIDTHS", "LONG_DECODER_SOURCE", "LONG_DECODER_HEAD"]

#: Sources (standard-library modules) the MiniLM specs rotate over.
N_SOURCES = 64

#: Indices (into :func:`~softrank.generators.text.stdlib_sources` of 64) of the sources with
#: fewer than 512 MiniLM WordPiece tokens, ``[CLS]`` and ``[SEP]`` included, on CPython 3.11:
#: codeop (475), copy (424), dis (494), hmac (380), runpy (379). A width-512 head needs 512
#: tokens, so :func:`wide_specs` passes over them (tests/test_heads.py counts them again).
SHORT_SOURCES = frozenset({9, 14, 18, 30, 58})

#: Widths of the ``paper`` panel's MiniLM heads (:func:`paper_specs`): the seed paper's
#: block-width study ran common-prefix blocks of widths 64 to 512; the panel takes the same
#: number of heads at each.
PAPER_WIDTHS = (64, 128, 256, 512)

#: Sources per (width, layer, head) in the ``paper`` panel: 72 heads x 11 = 792 per width.
PAPER_SOURCES_PER_HEAD = 11

#: The grid scale ``c`` (``beta = c (n - 1)^2``) of the ``paper`` panel's synthetic seed
#: ``seed + j``, for ``j`` = 0..4: grids have no seed, so each seed's grids take another
#: scale (``c = 1`` is the ``default`` panel's) and their ids ``grid-dD-nN-cC`` stay distinct.
PAPER_GRID_SCALES = (1.0, 0.5, 2.0, 0.25, 4.0)

#: Widths (queries = keys) of the ``long`` panel's synthetic heads (:func:`long_specs`).
LONG_WIDTHS = (1024, 2048, 4096)

#: The tiny decoders whose whole causal heads the ``long`` panel brackets (:func:`long_specs`):
#: random-initialised checkpoints that :func:`softrank.generators.tiny.save_tiny_checkpoint`
#: writes offline (``gpt2`` learns its positions, ``llama`` rotates them and shares each key
#: head between two query heads), so that real architectures' causal heads are bracketed at
#: these lengths without a download.
LONG_DECODERS = ("gpt2", "llama")

#: Widths of the tiny decoders' heads: the first ``n`` tokens of :data:`LONG_DECODER_SOURCE`,
#: whole causal heads (``n`` queries by ``n`` keys). One checkpoint per family serves both,
#: written with ``max_positions`` the largest.
LONG_DECODER_WIDTHS = (1024, 2048)

#: The tiny decoders' input: the ``json`` package's sources (2,717 tokens under the tiny
#: ``gpt2`` tokenizer, more than the widest head needs).
LONG_DECODER_SOURCE = "stdlib:json"

#: ``(layer, head)`` of the tiny decoders bracketed: head 0 of layer 1, the last of their 2.
LONG_DECODER_HEAD = (1, 0)

#: The ``long`` panel's tolerance: the one its targets are stated at (a cell of 4,096 tokens
#: takes tens of minutes on 2 cores; ``softrank audit --eps`` asks for others).
LONG_EPS = (0.25,)

#: The ``long`` panel's time limit per cell, in seconds (``softrank audit --cell-timeout``
#: overrides it): 540 s, so that a cell of 2,048 tokens ends within 10 minutes on 2 cores with
#: the checked ends reached by then (docs/benchmarks.md, "The long panel").
LONG_CELL_TIMEOUT = 540.0


def minilm_specs(widths, layers, heads, sources_per_head: int, seed: int) -> list[dict]:
    """Operator specs of MiniLM heads: every (width, layer, head) with ``sources_per_head``
    stdlib sources each, the source chosen by a fixed rotation of ``seed`` (so that heads of
    one layer see different sources); the built-in panels and ``softrank study`` use it.

    Returns
    -------
    list of dict
        ``{"kind": "minilm", "width", "layer", "head", "source_index"}`` in the order of the
        loops (width, layer, head, source); materialised by
        :func:`softrank.harness.panels.materialize`.
    """
    specs = []
    for w_i, w in enumerate(widths):
        for l in layers:
            for h in heads:
                for s in range(sources_per_head):
                    idx = (12 * l + h + 32 * w_i + 7 * s + seed) % N_SOURCES
                    specs.append({"kind": "minilm", "width": int(w), "layer": int(l),
                                  "head": int(h), "source_index": int(idx)})
    return specs


def wide_specs(seed: int = 0) -> list[dict]:
    """Operator specs of the ``wide`` panel: MiniLM heads at widths 256 and 512, one per layer
    at each width: layer ``l`` gets head ``(7 l + seed) mod 12`` at width 256 and head
    ``(7 l + 6 + seed) mod 12`` at width 512, so the 12 heads are each used once. The source
    of each follows the rotation of :func:`minilm_specs` (``12 l + h + 32 w_i + seed`` mod 64),
    moved on to the next source past :data:`SHORT_SOURCES` at width 512.

    Returns
    -------
    list of dict
        12 ``{"kind": "minilm", "width", "layer", "head", "source_index"}``, width 256 first.
    """
    specs = []
    for w_i, w in enumerate((256, 512)):
        for l in range(6):
            h = (7 * l + 6 * w_i + seed) % 12
            idx = (12 * l + h + 32 * w_i + seed) % N_SOURCES
            while w > 256 and idx in SHORT_SOURCES:
                idx = (idx + 1) % N_SOURCES
            specs.append({"kind": "minilm", "width": w, "layer": l, "head": h,
                          "source_index": idx})
    return specs


def paper_specs(seed: int = 0) -> list[dict]:
    """Operator specs of the ``paper`` panel: the seed paper's size, 3,343 operators.

    * MiniLM heads, 3,168: every (layer, head) of the 6 x 12 at each width of
      :data:`PAPER_WIDTHS` (64, 128, 256, 512) with :data:`PAPER_SOURCES_PER_HEAD` (11)
      sources, 792 per width. Source ``s`` (0..10) of head ``h`` of layer ``l`` at the
      ``w_i``-th width is entry ``(12 l + h + 32 w_i + 7 s + seed) mod n`` of the pool of
      sources long enough for the width: at widths 64 to 256 all 64 (the rotation of
      :func:`minilm_specs`, so ``s = 0`` at widths 64 and 128 gives the ``default``
      panel's heads), at width 512 the ``n = 59`` outside :data:`SHORT_SOURCES`, in index
      order. As 7 is invertible mod 64 and mod 59, the 11 sources of a head are distinct,
      and the heads of a layer see different sources at each ``s``.
    * Synthetic operators, 175: the ``default`` panel's 35 (grids, sphere and ball
      supports, Gaussian heads, planted instances) at the seeds ``seed + j``, ``j`` = 0..4,
      the grids at scale ``c = PAPER_GRID_SCALES[j]`` (1, 0.5, 2, 0.25, 4).

    Every operator id is distinct: ``minilm-wW-LlHh-SOURCE`` by its (width, layer, head,
    source), the synthetic ids by their seed (``-sS``; the Gaussian and planted ones carry
    ``seed + j + i`` beside their temperature or rank ``i`` names) or grid scale (``-cC``).

    Parameters
    ----------
    seed : int, >= 0
        Rotation of the sources and first seed of the synthetic operators.

    Returns
    -------
    list of dict
        3,343 specs: the MiniLM heads in the order (width, layer, head, source), then the
        synthetic operators seed by seed; materialised by
        :func:`softrank.harness.panels.materialize`.
    """
    specs = minilm_specs(PAPER_WIDTHS[:3], range(6), range(12), PAPER_SOURCES_PER_HEAD, seed)
    w_i, w = len(PAPER_WIDTHS) - 1, PAPER_WIDTHS[-1]
    pool = [i for i in range(N_SOURCES) if i not in SHORT_SOURCES]
    for layer in range(6):
        for h in range(12):
            for s in range(PAPER_SOURCES_PER_HEAD):
                idx = pool[(12 * layer + h + 32 * w_i + 7 * s + seed) % len(pool)]
                specs.append({"kind": "minilm", "width": w, "layer": layer, "head": h,
                              "source_index": idx})
    for j, c in enumerate(PAPER_GRID_SCALES):
        for s in synthetic_specs(seed + j, quick=False):
            specs.append({**s, "c": c} if s["family"] == "grid" else s)
    return specs


def synthetic_specs(seed: int, quick: bool) -> list[dict]:
    """The synthetic operators of the ``default`` panel (35: grids, sphere and ball
    supports, Gaussian heads, planted instances; docs/theory/families.md) or, with
    ``quick``, of the ``quick`` panel (6), at ``seed``."""
    S = []
    if quick:
        S += [{"family": "grid", "d": 1, "n": 32}, {"family": "grid", "d": 2, "n": 6},
              {"family": "sphere", "d": 3, "beta": 16.0, "m": 48, "N": 48, "seed": seed},
              {"family": "gaussian_head", "m": 48, "N": 48, "seed": seed},
              {"family": "planted", "m": 48, "N": 48, "k": 4, "delta": 0.04, "seed": seed},
              {"family": "planted_blocks", "m": 48, "N": 48, "k": 6, "delta": 0.05, "seed": seed}]
        return [{"kind": "synthetic", **s} for s in S]
    S += [{"family": "grid", "d": 1, "n": n} for n in (32, 64, 128)]
    S += [{"family": "grid", "d": 2, "n": n} for n in (6, 8, 11)]
    S += [{"family": "grid", "d": 3, "n": n} for n in (4, 5)]
    for fam in ("sphere", "ball"):
        for d in (2, 3, 4):
            for beta in (4.0, 16.0, 64.0):
                S.append({"family": fam, "d": d, "beta": beta, "m": 64, "N": 64, "seed": seed})
    S += [{"family": "gaussian_head", "m": 64, "N": 64, "d": 32, "temperature": t, "seed": seed + i}
          for i, t in enumerate((1.0, 2.0, 4.0))]
    S += [{"family": "planted", "m": 64, "N": 64, "k": k, "delta": 0.04, "seed": seed + k}
          for k in (2, 4, 8, 16)]
    S += [{"family": "planted_blocks", "m": 64, "N": 64, "k": k, "delta": 0.04, "seed": seed + k}
          for k in (4, 16)]
    return [{"kind": "synthetic", **s} for s in S]


def causal_specs(seed: int) -> list[dict]:
    """The ``causal`` panel: causal Gaussian heads (``d = 32``, three temperatures; ``d = 8``
    at temperatures 0.25 and 0.5, smooth enough for feature maps of ``exp`` to reach eps), a sliding-window one and planted causal instances (planted
    causal rank 2, 4, 8 at delta 0.04; planted plain and causal rank 4, 8), at widths 64 and
    128."""
    S = []
    for n in (64, 128):
        S += [{"family": "gaussian_head", "m": n, "N": n, "d": 32, "temperature": t,
               "seed": seed + i, "causal": True} for i, t in enumerate((1.0, 2.0, 4.0))]
        S.append({"family": "gaussian_head", "m": n, "N": n, "d": 32, "temperature": 2.0,
                  "seed": seed, "causal": True, "window": 16})
        # a smooth low-dimensional head, where feature maps of exp can reach eps
        S += [{"family": "gaussian_head", "m": n, "N": n, "d": 8, "temperature": t,
               "seed": seed, "causal": True} for t in (0.25, 0.5)]
        S += [{"family": "planted_causal", "N": n, "k": k, "delta": 0.04, "seed": seed + k}
              for k in (2, 4, 8)]
        S += [{"family": "planted_segments", "N": n, "k": k, "delta": 0.04, "seed": seed + k}
              for k in (4, 8)]
    return [{"kind": "synthetic", **s} for s in S]


def long_specs(seed: int = 0) -> list[dict]:
    """Operator specs of the ``long`` panel: heads at the lengths users run.

    At each width ``n`` of :data:`LONG_WIDTHS` (1,024, 2,048 and 4,096 tokens, ``m = N =
    n``): a Gaussian head (``d = 32``, temperature 2, ``seed``), the same head causal, a
    planted instance of rank 16 (``delta = 0.04``, seed ``seed + 16``: its ``r_eps`` is at
    most 16 at every ``eps >= 0.04``, so no sound lower end exceeds 16 there) and a sphere
    support (``d = 3``, ``beta = 16``, ``seed``). Then, at each width of
    :data:`LONG_DECODER_WIDTHS` (1,024 and 2,048), the whole causal head
    :data:`LONG_DECODER_HEAD` of each tiny decoder of :data:`LONG_DECODERS` (``gpt2``,
    ``llama``; random-initialised with ``seed``, ``max_positions`` 2,048) on the first ``n``
    tokens of :data:`LONG_DECODER_SOURCE`.

    The Gaussian and sphere generators' ids do not name the size (``gaussian-d32-t2-s0``), so
    each spec carries its id with the width: ``gaussian-d32-t2-s0-n1024``,
    ``gaussian-d32-t2-s0-causal1024`` (the generator's own), ``planted-1024x1024-k16-d0.04-s16``
    (the generator's own), ``sphere-d3-b16-s0-n1024``. The decoders' ids are the capture's,
    with the family ``tiny-FAMILY-sSEED``: ``tiny-gpt2-s0-full1024-L1H0-json``.

    Returns
    -------
    list of dict
        16 specs, width by width: 12 ``{"kind": "synthetic", "family", ...}`` and 4
        ``{"kind": "tiny", "family", "seed", "max_positions", "source", "width", "layer",
        "head"}`` (:func:`softrank.harness.panels.materialize` writes each checkpoint once,
        in a temporary directory, and captures its heads).
    """
    S = []
    layer, head = LONG_DECODER_HEAD
    for n in sorted(set(LONG_WIDTHS) | set(LONG_DECODER_WIDTHS)):
        if n in LONG_WIDTHS:
            S += [{"kind": "synthetic", **s} for s in (
                {"family": "gaussian_head", "m": n, "N": n, "d": 32, "temperature": 2.0,
                 "seed": seed, "id": f"gaussian-d32-t2-s{seed}-n{n}"},
                {"family": "gaussian_head", "m": n, "N": n, "d": 32, "temperature": 2.0,
                 "seed": seed, "causal": True},
                {"family": "planted", "m": n, "N": n, "k": 16, "delta": 0.04,
                 "seed": seed + 16},
                {"family": "sphere", "d": 3, "beta": 16.0, "m": n, "N": n, "seed": seed,
                 "id": f"sphere-d3-b16-s{seed}-n{n}"})]
        if n in LONG_DECODER_WIDTHS:
            S += [{"kind": "tiny", "family": f, "seed": seed,
                   "max_positions": max(LONG_DECODER_WIDTHS), "source": LONG_DECODER_SOURCE,
                   "width": n, "layer": layer, "head": head} for f in LONG_DECODERS]
    return S

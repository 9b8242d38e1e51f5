"""The causal study (docs/theory/causal.md, docs/theory/studies.md#causal-heads): on the same
decoder heads, three ranks side by side -- ``r_eps`` of the full causal head, its causal rank
``r^c_eps`` and ``r_eps`` of the seed paper's common-prefix block -- by model, layer and width.

For a head of ``N`` tokens with factors ``Q``, ``K``, ``beta`` and the model's mask:

* **full**: the whole masked head ``A`` (``N x N``), bracketed by :func:`softrank.bracket`;
* **causal**: its causal rank ``r^c_eps`` (also for a sliding-window head: how many
  features of causal linear attention reproduce its band), bracketed by
  :func:`softrank.certifiers.causal.causal_bracket` with the full bracket's witness handed in;
* **block**: the common-prefix block of the same tokens, queries ``[N/2, N)`` attending keys
  ``[0, N/2)`` only (``softmax(beta Q_[N/2,N) K_[0,N/2)^T)``, the operator ``softrank heads``
  captures at width ``N/2``), bracketed by :func:`softrank.bracket`; empty for a
  sliding-window head whose window hides keys of the block (the model never computes it).

Heads come from decoder checkpoints captured whole (``softrank heads --full``) and from
causal Gaussian heads. Every end is a checked certificate; the table reports medians.
"""

from __future__ import annotations

import csv
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..errors import InvalidArgumentError
from ..operators import Operator, mask_kind

__all__ = ["study_row", "run_causal_study", "write_causal", "synthetic_causal_heads",
           "decoder_heads", "CAUSAL_COLUMNS"]

CAUSAL_COLUMNS = ("model", "source", "layer", "head", "width", "mask", "eps",
                  "full_lower", "full_upper", "causal_rank", "causal_lower", "causal_upper",
                  "block_lower", "block_upper", "constructions", "seconds")


def _block(op: Operator) -> Operator | None:
    """The common-prefix block of a head with factors: queries ``[N/2, N)``, keys
    ``[0, N/2)``, softmax over those keys; None when the mask hides some of them."""
    N = op.shape[0]
    w = N // 2
    if op.Q is None or w < 2:
        return None
    if op.mask is not None and not op.mask[w:2 * w, :w].all():
        return None
    return Operator.from_factors(op.Q[w:2 * w], op.K[:w], op.beta, family=op.family,
                                 source=op.source, layer=op.layer, head=op.head,
                                 block=f"keys:0-{w},queries:{w}-{2 * w}",
                                 operator_id=f"{op.operator_id}-block{w}")


def study_row(op: Operator, eps: float, effort: str = "fast", model: str = "") -> dict:
    """The three brackets of one causal head at ``eps`` (see the module docstring).

    Parameters
    ----------
    op : Operator
        A causal head (square, ``A`` zero above the diagonal), with its factors for the block.
    eps : float
    effort : {"full", "fast"}
    model : str
        The label of the row (default: the operator's family).

    Returns
    -------
    dict
        The :data:`CAUSAL_COLUMNS`; ends of a bracket that is not ``open``/``resolved`` are
        empty.

    Raises
    ------
    InvalidArgumentError
        If ``op`` is not a causal head.
    """
    from ..certifiers.bracket import bracket
    from ..certifiers.causal import causal_bracket

    t0 = time.perf_counter()
    kind = mask_kind(op.mask)
    rank = "causal"  # also for a sliding-window head: how many features replace its band
    full = bracket(op, [eps], effort=effort)[0]
    cb = causal_bracket(op, [eps], rank=rank, effort=effort,
                        witnesses=[full.upper_witness] if full.upper_witness is not None else [])[0]
    blk = _block(op)
    bb = bracket(blk, [eps], effort=effort)[0] if blk is not None else None
    ends = lambda b: ("", "") if b is None or not b.bounded else (b.lower, b.upper)  # noqa: E731
    cons = {r.name: r.rank for r in cb.diagnostics.methods
            if r.origin == "reference" and r.status == "ok"}
    return {"model": model or op.family, "source": op.source, "layer": op.layer,
            "head": op.head, "width": op.shape[0], "mask": kind, "eps": eps,
            "full_lower": ends(full)[0], "full_upper": ends(full)[1], "causal_rank": rank,
            "causal_lower": ends(cb)[0], "causal_upper": ends(cb)[1],
            "block_lower": ends(bb)[0], "block_upper": ends(bb)[1],
            "constructions": " ".join(f"{k}={v}" for k, v in sorted(cons.items())),
            "seconds": round(time.perf_counter() - t0, 3)}


def _row_job(args):
    op, eps, effort, model = args
    return study_row(op, eps, effort, model)


def run_causal_study(heads, eps: float, effort: str = "fast", workers: int = 1,
                     progress=None) -> list[dict]:
    """:func:`study_row` for every ``(model, operator)`` of ``heads``, on ``workers``
    processes; rows in the order given."""
    jobs = [(op, eps, effort, model) for model, op in heads]
    if workers <= 1:
        rows = []
        for j in jobs:
            rows.append(_row_job(j))
            if progress:
                progress(rows[-1])
        return rows
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    # spawned, as the audit's workers: a forked child cannot use CUDA once the parent has
    # touched it (the reweighted solves may run on a GPU, README "GPU")
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as ex:
        rows = []
        for r in ex.map(_row_job, jobs):
            rows.append(r)
            if progress:
                progress(r)
        return rows


def synthetic_causal_heads(widths, seed: int = 0) -> list[tuple[str, Operator]]:
    """Causal Gaussian heads at each width: ``d = 32`` at temperatures 1, 2, 4 and ``d = 8``
    at 0.5 (the ``causal`` panel's), labelled ``gaussian-d{d}-t{t}``."""
    from ..generators.synthetic import gaussian_head

    out = []
    for n in widths:
        for i, (d, t) in enumerate(((32, 1.0), (32, 2.0), (32, 4.0), (8, 0.5))):
            out.append((f"gaussian-d{d}-t{t:g}",
                        gaussian_head(n, n, d, t, seed=seed + i, causal=True)))
    return out


def decoder_heads(checkpoints, widths, source: str = "stdlib:json", layers=None,
                  heads=None) -> list[tuple[str, Operator]]:
    """Whole causal heads (:func:`softrank.generators.capture.capture` with ``full=True``)
    of each checkpoint directory at each width (the first ``width`` tokens of ``source``),
    labelled by the directory's name; each checked against the model's eager attention."""
    from ..generators.capture import capture, read_sources, resolve_checkpoint

    srcs = read_sources([source])[:1]
    out = []
    for d in checkpoints:
        ck, family = resolve_checkpoint(d)
        if not ck.causal:
            raise InvalidArgumentError(f"checkpoint: {str(d)!r} is not a decoder (its attention "
                                       "is not causal)")
        for w in widths:
            for op in capture(ck, srcs, width=w, layers=layers, heads=heads, family=family,
                              full=True):
                out.append((Path(d).name, op))
    return out


def _median(v):
    v = [float(x) for x in v if x != ""]
    return f"{np.median(v):g}" if v else "-"


def write_causal(rows: list[dict], out: Path) -> list[Path]:
    """``causal.csv`` (one row per head), ``causal.md`` (medians by model, layer and width)
    and ``causal.png`` (the three brackets per head) in ``out``; returns the paths."""
    out = Path(out)
    p_csv = out / "causal.csv"
    with open(p_csv, "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(CAUSAL_COLUMNS))
        wr.writeheader()
        wr.writerows(rows)
    by = defaultdict(list)
    for r in rows:
        by[(r["model"], r["width"], r["layer"])].append(r)
    eps_text = ", ".join(sorted({f"{float(r['eps']):g}" for r in rows}))
    lines = ["# The causal study", "",
             f"Three ranks of the same decoder heads at eps {eps_text}: `r_eps` of the full "
             "causal head, its causal rank and `r_eps` of the common-prefix block (queries `[N/2, N)` over keys "
             "`[0, N/2)`, the seed paper's operator). Medians of the certified ends "
             "`[lower, upper]` per model, width `N` (tokens) and layer; every end is a checked "
             "certificate (docs/theory/causal.md).", "",
             "| model | width N | layer | heads | mask | full r_eps | causal rank | block r_eps "
             "(N/2) | s/head |", "|---|---|---|---|---|---|---|---|---|"]
    for (model, w, layer), rs in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                      str(kv[0][2]))):
        masks = ", ".join(sorted({r["mask"] for r in rs}))
        lines.append(
            f"| {model} | {w} | {layer if layer is not None else '-'} | {len(rs)} | {masks} | "
            f"[{_median(r['full_lower'] for r in rs)}, {_median(r['full_upper'] for r in rs)}] | "
            f"[{_median(r['causal_lower'] for r in rs)}, "
            f"{_median(r['causal_upper'] for r in rs)}] | "
            f"[{_median(r['block_lower'] for r in rs)}, {_median(r['block_upper'] for r in rs)}]"
            f" | {_median(r['seconds'] for r in rs)} |")
    lines += ["", "![causal.png](causal.png)", "",
              "`causal.csv` has one row per head, with the causal reference constructions' "
              "checked ranks (`constructions`).", ""]
    p_md = out / "causal.md"
    p_md.write_text("\n".join(lines))
    p_png = out / "causal.png"
    _plot(rows, p_png)
    return [p_csv, p_md, p_png]


def _plot(rows, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted({r["model"] for r in rows})
    widths = sorted({int(r["width"]) for r in rows})
    fig, axes = plt.subplots(len(widths), 1, figsize=(max(7.0, 0.22 * len(rows) / max(len(widths), 1) + 3), 3.0 * len(widths)),
                             squeeze=False, constrained_layout=True)
    for ax, w in zip(axes[:, 0], widths):
        sel = [r for r in rows if int(r["width"]) == w]
        sel.sort(key=lambda r: (models.index(r["model"]), str(r["layer"]), str(r["head"])))
        for x, r in enumerate(sel):
            for dx, lo, up, col in ((-0.2, r["full_lower"], r["full_upper"], "0.55"),
                                    (0.0, r["causal_lower"], r["causal_upper"], "C0"),
                                    (0.2, r["block_lower"], r["block_upper"], "C1")):
                if lo == "" or up == "":
                    continue
                lo, up = max(int(lo), 1), max(int(up), 1)
                ax.plot([x + dx] * 2, [lo, up], color=col, lw=2.5, solid_capstyle="butt")
                ax.scatter([x + dx] * 2, [lo, up], marker="_", s=30, color=col)
        ax.set_yscale("log")
        ax.set_ylabel(f"rank (N = {w})", fontsize=8)
        ax.set_xticks(range(len(sel)))
        ax.set_xticklabels([r["model"] + (f" L{r['layer']}H{r['head']}"
                                           if r["layer"] not in (None, "") else "")
                            for r in sel], rotation=80, fontsize=5)
    from matplotlib.lines import Line2D

    fig.legend([Line2D([], [], color=c, lw=3) for c in ("0.55", "C0", "C1")],
               ["full causal head, r_eps", "its causal rank r^c_eps",
                "common-prefix block (N/2 x N/2), r_eps"], fontsize=7, loc="outside lower center",
               ncol=3)
    fig.suptitle("Three ranks of the same decoder heads (certified brackets; log scale, "
                 "0 drawn at 1)", fontsize=9)
    fig.savefig(path, dpi=110)
    plt.close(fig)

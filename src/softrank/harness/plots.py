"""The audit report's plots (PNG, matplotlib's Agg backend): MiniLM heads by layer and head,
the families' resolved shares and ratios, and the constructions against the certified lower
ends. Each function writes one file into ``out`` and returns its name; the report
(:mod:`softrank.harness.report`) decides what is plotted. :func:`plot_frontier` draws the
band of ``softrank frontier``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..audit.record import read_cells

__all__ = ["plot_minilm", "plot_families", "plot_constructions", "plot_causal", "plot_frontier",
           "plot_frontier_families"]


def plot_minilm(rows, eps, out: Path) -> list[str]:
    """Lower end, upper end and their ratio by layer and head, one PNG per MiniLM width at
    ``eps`` (``rows`` read with :func:`softrank.audit.record.read_cell`); returns the files'
    names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_cells(rows)
    files = []
    widths = sorted({int(r["n"]) for r in rows if r["family"] == "minilm"})
    for w in widths:
        sel = [r for r in rows if r["family"] == "minilm" and int(r["n"]) == w
               and abs(r["eps"] - eps) < 1e-12 and r["layer"] != ""
               and r["verdict"] != "error"]  # (an error cell has no ends: left blank)
        if not sel:
            continue
        L = np.full((6, 12), np.nan)
        U = np.full((6, 12), np.nan)
        for r in sel:
            L[int(r["layer"]), int(r["head"])] = r["lower"]
            U[int(r["layer"]), int(r["head"])] = r["upper"]
        fig, axes = plt.subplots(1, 3, figsize=(15, 3.6), constrained_layout=True)
        vmax = np.nanmax(U) if np.isfinite(U).any() else 1
        R = U / L
        for ax, M, title, fmt, kw in (
            (axes[0], L, "lower (certified)", "{:.0f}", dict(vmin=0, vmax=vmax, cmap="viridis")),
            (axes[1], U, "upper (witness)", "{:.0f}", dict(vmin=0, vmax=vmax, cmap="viridis")),
            (axes[2], R, "upper / lower", "{:.1f}",
             dict(vmin=1, vmax=max(2.0, float(np.nanmax(R))), cmap="magma_r")),
        ):
            im = ax.imshow(M, aspect="auto", **kw)
            ax.set_title(f"{title}, width {w}, eps {eps:g}")
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
            ax.set_xticks(range(12))
            ax.set_yticks(range(6))
            for (i, j), v in np.ndenumerate(M):
                if np.isfinite(v):
                    r, g, b, _ = im.cmap(im.norm(v))
                    ink = "k" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "w"
                    ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=7, color=ink)
            fig.colorbar(im, ax=ax, shrink=0.85)
        name = f"minilm_w{w}_eps{eps:g}.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        files.append(name)
    return files


def plot_families(summary, out: Path) -> str:
    """Resolved share and median upper/lower by family group and tolerance (from the
    summary); returns the file's name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fams = list(summary["families"])
    eps = [f"{e:g}" for e in summary["eps"]]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4), constrained_layout=True)
    x = np.arange(len(fams))
    wbar = 0.8 / max(len(eps), 1)
    for t, e in enumerate(eps):
        res = [summary["families"][f].get(e, {}).get("resolved_pct", np.nan) for f in fams]
        rat = [summary["families"][f].get(e, {}).get("median_ratio") or np.nan for f in fams]
        for ax, vals, fmt in ((axes[0], res, "{:.0f}"), (axes[1], rat, "{:.1f}")):
            bars = ax.bar(x + t * wbar, vals, wbar, label=f"eps {e}")
            for bar, v in zip(bars, vals):  # a 0 % bar is a value, not missing data
                if np.isfinite(v):
                    ax.annotate(fmt.format(v), (bar.get_x() + bar.get_width() / 2, v),
                                ha="center", va="bottom", fontsize=6)
        if e == "0.25":  # the paper's BERT-native figure, only where it compares
            xs = [x[i] + t * wbar for i, f in enumerate(fams) if f.startswith("minilm")]
            if xs:
                bert = summary["paper"]["resolved_at_0.25"]["BERT native"]
                axes[0].scatter(xs, [100 * bert] * len(xs),
                                marker="_", s=300, color="k", zorder=3,
                                label="paper: BERT native, eps 0.25")
    axes[1].axhspan(2.6, 3.8, color="0.85", zorder=0, label="paper: 2.6-3.8 by family")
    for ax, title in ((axes[0], "resolved %"), (axes[1], "median upper / lower")):
        ax.set_xticks(x + wbar * (len(eps) - 1) / 2)
        ax.set_xticklabels(fams, rotation=35, ha="right", fontsize=8)
        ax.set_title(title)
        ax.legend(fontsize=7)
    name = "families.png"
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


#: One colour per origin in the Constructions plot: a user's construction stands out.
_ORIGIN_COLOUR = {"builtin": "C0", "reference": "C1", "third-party": "C3"}


def plot_constructions(points: dict, out: Path) -> str | None:
    """Each construction's checked rank against the cell's certified lower end (log-log), one
    panel per construction on shared axes: its own cells in its origin's colour (marker
    area grows with the number of cells at the same point), every construction's in light
    grey behind, and the diagonal ``rank = lower`` that no sound witness lies below.

    One panel each, not one scatter of every construction: with a dozen constructions on
    one axis (15 on the default panel) the markers hid each other and the legend hid the
    data.

    Parameters
    ----------
    points : dict
        ``{construction: (origin, origin label, [(certified lower end, checked rank), ...])}``
        in the order the constructions ran; origin is ``builtin``, ``reference`` or
        ``third-party``.
    out : pathlib.Path
        Directory the PNG is written to.

    Returns
    -------
    str or None
        The file's name, or None when no construction has a point."""
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    pts = {n: v for n, (_, _, v) in points.items() if v}
    if not pts:
        return None
    every = np.array([p for v in pts.values() for p in v], dtype=float)
    hi = max(1.0, float(every.max()))
    ncols = min(4, len(pts))
    nrows = math.ceil(len(pts) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.9 * ncols + 0.7, 2.6 * nrows + 0.9),
                             sharex=True, sharey=True, squeeze=False, constrained_layout=True)
    for ax, (n, v) in zip(axes.flat, pts.items()):
        origin, label = points[n][:2]
        at, count = np.unique(np.array(v, dtype=float), axis=0, return_counts=True)
        x, y = at.T
        ax.scatter(every[:, 0], every[:, 1], s=5, color="0.85", linewidths=0, zorder=1)
        ax.scatter(x, y, s=9 * np.sqrt(count) + 5, color=_ORIGIN_COLOUR.get(origin, "C2"),
                   alpha=0.75, linewidths=0, zorder=2)
        ax.plot([1, hi], [1, hi], "k--", lw=0.8, zorder=3)
        ax.set_title(f"{n} ({label}): {len(v)} "
                     f"cell{'' if len(v) == 1 else 's'}", fontsize=8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):  # ranks read off as 1 2 5 10 20 50, not powers
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_locator(NullLocator())
        ax.tick_params(labelsize=7)
    for i in range(len(pts), nrows * ncols):  # empty panels of the last row
        axes.flat[i].set_visible(False)
        axes.flat[i - ncols].tick_params(labelbottom=True)  # the x labels go to the one above
    fig.supxlabel("certified lower end of the cell", fontsize=9)
    fig.supylabel("construction's checked rank", fontsize=9)
    fig.suptitle("Constructions against the certified lower end (every cell, every eps; "
                 "dashed: rank = certified lower; grey: every construction)", fontsize=9)
    name = "constructions.png"
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def plot_causal(rows, out: Path) -> str | None:
    """Per cell of a causal head: the bracket of ``r_eps`` (grey) beside the bracket of the
    causal rank (blue), and the causal constructions' checked ranks (markers), one panel per
    tolerance, the operators along x grouped by family; log-scale ranks.

    Parameters
    ----------
    rows : list of dict
        The audit's cells (read with :func:`softrank.audit.record.read_cell`); those with a
        ``rank`` of ``causal`` or ``window:W`` and both ends of both brackets are plotted.
    out : pathlib.Path

    Returns
    -------
    str or None
        The file's name (``causal_rank.png``), or None when no cell has both brackets.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_cells(rows)
    sel = [r for r in rows if r.get("rank", "") not in ("", "plain")
           and not r["rank"].startswith("plain") and r.get("rank_upper") is not None
           and r["lower"] is not None and r["upper"] is not None]
    if not sel:
        return None
    eps_list = sorted({r["eps"] for r in sel})
    ops = sorted({(r["family"], r["operator_id"]) for r in sel})
    x_of = {op: i for i, (_, op) in enumerate(ops)}
    fig, axes = plt.subplots(len(eps_list), 1, figsize=(max(6.0, 0.32 * len(ops) + 2), 2.8 * len(eps_list)),
                             squeeze=False, constrained_layout=True, sharex=True)
    marks = {}
    for ax, e in zip(axes[:, 0], eps_list):
        for r in (r for r in sel if abs(r["eps"] - e) < 1e-12):
            x = x_of[r["operator_id"]]
            for dx, lo, up, col in ((-0.12, r["lower"], r["upper"], "0.55"),
                                    (0.12, r["rank_lower"] or 0, r["rank_upper"], "C0")):
                # a rank of 0 is drawn at 1 (log scale); a resolved bracket as one tick
                lo, up = max(lo, 1), max(up, 1)
                ax.plot([x + dx, x + dx], [lo, up], color=col, lw=3, solid_capstyle="butt")
                ax.scatter([x + dx, x + dx], [lo, up], marker="_", s=60, color=col, zorder=2)
            ranks = r.get("rank_constructions")
            for name, k in (ranks.as_dict() if ranks is not None else {}).items():
                if k is not None:
                    m = marks.setdefault(name, "o^sDv<>"[len(marks) % 7])
                    ax.scatter([x + 0.3], [max(k, 1)], marker=m, s=14, color="C3", zorder=3,
                               label=name)
        ax.set_yscale("log")
        ax.set_ylabel(f"rank, eps {e:g}", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[-1, 0].set_xticks(range(len(ops)))
    axes[-1, 0].set_xticklabels([op for _, op in ops], rotation=70, ha="right", fontsize=6)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    from matplotlib.lines import Line2D

    extra = [Line2D([], [], color="0.55", lw=3), Line2D([], [], color="C0", lw=3)]
    axes[0, 0].legend(extra + list(uniq.values()),
                      ["r_eps bracket", f"{sel[0]['rank']} rank bracket"] + list(uniq),
                      fontsize=6, loc="upper left", ncol=2)
    fig.suptitle("Brackets of r_eps (grey) and of the causal rank (blue) per causal head\n"
                 "markers: the causal constructions' checked ranks (log scale; 0 drawn at 1)",
                 fontsize=9)
    name = "causal_rank.png"
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def _score(v) -> str:
    """A frontier score for a legend: ``-`` for none, ``inf`` as such."""
    return "-" if v is None else "inf" if np.isinf(v) else f"{v:.3g}x"


def plot_frontier(fr, label: str, path: Path) -> Path:
    """The band ``lower < e_k <= upper`` of a :class:`softrank.certifiers.frontier.Frontier`
    against the rank ``k`` (log-scale error where every upper end is positive, cut at 10),
    its constructions' curves with their scores in the legend, the brackets' tolerances as
    horizontal lines; written to ``path`` (PNG), which is returned."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = np.array([p.rank for p in fr.points])
    lo = np.array([p.lower for p in fr.points])
    up = np.array([p.upper for p in fr.points])
    fig, ax = plt.subplots(figsize=(10, 4.4), constrained_layout=True)
    ax.fill_between(k, lo, up, step="mid", alpha=0.3, color="tab:blue",
                    label="certified band: lower < e_k <= upper")
    ax.step(k, up, where="mid", color="tab:blue", lw=1.2, label="upper (checked witness)")
    ax.step(k, lo, where="mid", color="tab:red", lw=1.2, label="lower (checked certificate)")
    for br in fr.brackets:
        ax.axhline(br.eps, color="grey", lw=0.6, ls=":")
        ax.text(k[-1], br.eps, f" eps {br.eps:g}: [{br.lower}, {br.upper}]", fontsize=7,
                va="bottom", ha="right", color="grey")
    top = 1.5
    markers = "os^vD<>p*h"
    for i, c in enumerate(getattr(fr, "curves", [])):
        if not c.errors:
            continue
        ks = sorted(c.errors)
        es = np.array([c.errors[j] for j in ks])
        top = max(top, min(10.0, float(es.max()) * 1.2))
        ax.plot(ks, np.where(es > 0, es, np.nan), marker=markers[i % len(markers)], ms=3,
                lw=0.9, color=("tab:green", "tab:orange", "tab:purple", "tab:brown", "tab:pink",
                               "tab:olive", "tab:cyan", "tab:gray")[i % 8],
                label=f"{c.name}" + (f" ({_score(c.excess_error)} error, "
                                     f"{_score(c.excess_rank)} rank)"
                                     if c.excess_error is not None else ""))
    if (up > 0).all() and np.isfinite(up).all():
        ax.set_yscale("log")
        pos = np.concatenate([up, lo[lo > 0]])
        ax.set_ylim(max(float(pos.min()) / 2, 1e-17), top)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("rank k")
    ax.set_ylabel("max-row-l1 error  e_k = min ||A - B||_inf")
    ax.set_title(f"rank-error frontier of {label}", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_frontier_families(families: dict, out: Path) -> str | None:
    """``frontier.png``: one panel per family, the median band ``lower < e_k <= upper`` of
    its operators against the rank (log scales) and each construction's median checked
    error, from the report's frontier summary; returns the file's name (None without
    families)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not families:
        return None

    def arr(v):
        return np.array([np.nan if x is None else np.inf if x == "inf" else x for x in v],
                        dtype=float)

    n = len(families)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False,
                             constrained_layout=True)
    markers = "os^vD<>p*h"
    colors = ("tab:green", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive",
              "tab:cyan", "tab:gray")

    def pos(v):  # a log axis shows no 0 (a full-rank point): left out
        return np.where(v > 0, v, np.nan)

    for ax, (g, f) in zip(axes.flat, families.items()):
        k = np.array(f["ranks"], dtype=float)
        lo, up = pos(arr(f["median_lower"])), pos(arr(f["median_upper"]))
        ax.fill_between(k, lo, up, alpha=0.3, color="tab:blue", label="band (medians)")
        ax.plot(k, up, color="tab:blue", lw=1.0, label="upper")
        ax.plot(k, lo, color="tab:red", lw=1.0, label="lower")
        for i, (name, v) in enumerate(f["curves"].items()):
            ax.plot(k, pos(np.minimum(arr(v), 10.0)), marker=markers[i % len(markers)], ms=3,
                    lw=0.8, color=colors[i % len(colors)], label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{g} ({f['operators']} operators)", fontsize=9)
        ax.set_xlabel("rank k")
        ax.set_ylabel("max-row-l1 error")
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6, loc="lower left")
    name = "frontier.png"
    fig.savefig(out / name, dpi=100)
    plt.close(fig)
    return name

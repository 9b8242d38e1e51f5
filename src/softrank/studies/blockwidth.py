"""Block-width study (docs/theory/studies.md#block-width): how fixed rank budgets fare as the block widens.

For learned heads captured at several widths ``w`` (native blocks for MiniLM/BERT/ViT,
common-prefix blocks for causal checkpoints), a budget ``B`` is **shown feasible** for an
operator when its certified upper end is ``<= B`` (a rank-``B`` witness exists), **shown
infeasible** when its lower end is ``> B`` (a certificate proves no rank-``B`` matrix is
within ``eps``), and **unresolved** otherwise. The study reports the three shares per width
and budget from an audit's cells (:func:`budget_shares`), so it runs on any audit output
(``brackets.csv``), including a ``[[heads]]`` panel of the user's own checkpoints.
"""

from __future__ import annotations

from collections import defaultdict

from ..errors import InvalidArgumentError
from ..validation import check_int

__all__ = ["budget_shares", "write_block_width", "DEFAULT_BUDGETS"]

DEFAULT_BUDGETS = (8, 16, 32)


def budget_shares(rows: list[dict], budgets=DEFAULT_BUDGETS, eps: float | None = None) -> list[dict]:
    """Shares of operators shown feasible / infeasible / unresolved per (family, width, eps,
    budget).

    Parameters
    ----------
    rows : list of dict
        Audit cells (``brackets.csv`` rows): ``family``, ``n`` (the block width: keys),
        ``eps``, ``lower``, ``upper``, ``verdict``, ``checkpoint``. Only learned heads
        (rows with a ``checkpoint``) are used; cells with verdict ``error``/``unsound`` are
        counted as unresolved.
    budgets : sequence of int >= 1
    eps : float, optional
        Keep only this tolerance.

    Returns
    -------
    list of dict: family, width, eps, budget, operators, feasible, infeasible, unresolved
        (counts) and the same as percentages (``*_pct``).
    """
    budgets = list(budgets)
    if not budgets:
        raise InvalidArgumentError(f"budgets: expected integers >= 1, got {budgets!r}")
    budgets = [check_int(b, "budgets", 1) for b in budgets]
    groups = defaultdict(list)
    for r in rows:
        if not r.get("checkpoint"):
            continue
        e = float(r["eps"])
        if eps is not None and e != eps:
            continue
        groups[(r["family"], int(r["n"]), e)].append(r)
    out = []
    for (fam, w, e), cells in sorted(groups.items()):
        n = len(cells)
        for B in budgets:
            ok = [c for c in cells if c["verdict"] in ("open", "resolved")]
            feas = sum(int(c["upper"]) <= B for c in ok)
            infeas = sum(int(c["lower"]) > B for c in ok)
            out.append({"family": fam, "width": w, "eps": e, "budget": B, "operators": n,
                        "feasible": feas, "infeasible": infeas,
                        "unresolved": n - feas - infeas,
                        "feasible_pct": round(100.0 * feas / n, 1),
                        "infeasible_pct": round(100.0 * infeas / n, 1),
                        "unresolved_pct": round(100.0 * (n - feas - infeas) / n, 1)})
    return out


def write_block_width(shares: list[dict], out) -> list:
    """``blockwidth.csv``, ``blockwidth.md`` and ``blockwidth.png`` (stacked shares per width,
    one panel per budget and family/eps). Returns the paths."""
    import csv
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if not shares:
        raise InvalidArgumentError("shares: no learned-head cells to summarise (the study uses "
                                   "rows with a checkpoint)")
    cols = list(shares[0])
    with open(out / "blockwidth.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(shares)
    lines = ["# Block-width study", "",
             "Share of operators for which a rank budget is shown feasible (upper <= budget), "
             "shown infeasible (lower > budget) or left unresolved, per block width.", "",
             "| family | eps | width | operators | budget | feasible | infeasible | unresolved |",
             "|---|---|---|---|---|---|---|---|"]
    for s in shares:
        lines.append(f"| {s['family']} | {s['eps']:g} | {s['width']} | {s['operators']} | "
                     f"{s['budget']} | {s['feasible_pct']} % | {s['infeasible_pct']} % | "
                     f"{s['unresolved_pct']} % |")
    trivial = sorted({(s["width"], s["budget"]) for s in shares if s["budget"] >= s["width"]})
    if trivial:
        lines += ["", "Budgets at or above the width are feasible by definition (rank <= width): "
                  + ", ".join(f"budget {b} at width {w}" for w, b in trivial) + "."]
    (out / "blockwidth.md").write_text("\n".join(lines) + "\n")
    keys = sorted({(s["family"], s["eps"], s["budget"]) for s in shares})
    fig, axes = plt.subplots(1, len(keys), figsize=(3.0 * len(keys), 3.0), squeeze=False)
    for ax, (fam, e, B) in zip(axes[0], keys):
        sel = sorted((s for s in shares if (s["family"], s["eps"], s["budget"]) == (fam, e, B)),
                     key=lambda s: s["width"])
        x = np.arange(len(sel))
        f = np.array([s["feasible_pct"] for s in sel])
        i = np.array([s["infeasible_pct"] for s in sel])
        u = np.array([s["unresolved_pct"] for s in sel])
        ax.bar(x, f, color="tab:green", label="feasible")
        ax.bar(x, u, bottom=f, color="lightgrey", label="unresolved")
        ax.bar(x, i, bottom=f + u, color="tab:red", label="infeasible")
        ax.set_xticks(x, [str(s["width"]) for s in sel], fontsize=8)
        ax.set_xlabel("block width", fontsize=8)
        ax.set_title(f"{fam}, eps {e:g}, budget {B}", fontsize=8)
        ax.set_ylim(0, 100)
    axes[0][0].set_ylabel("% of operators", fontsize=8)
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "blockwidth.png", dpi=110)
    plt.close(fig)
    return [out / "blockwidth.csv", out / "blockwidth.md", out / "blockwidth.png"]

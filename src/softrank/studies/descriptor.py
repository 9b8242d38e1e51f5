"""Intrinsic descriptor against certified brackets (docs/theory/geometry.md): does ``q`` (or ``kappa``) order
operators like their brackets?

For each group of operators (learned heads: one group per family and width; synthetic
families: one group each) and tolerance, the Spearman rank correlation of ``log q`` with the
upper end and with the lower end, and of ``kappa`` with the upper end, with 95 % intervals
from a cluster bootstrap (clusters: the operator's source for learned heads, the operator
itself otherwise). The descriptor columns ``int_r, int_tau, int_kappa, int_logq`` come from
:func:`softrank.geometry.intrinsic_descriptor`, which every audit cell carries. The seed
paper never extracted this descriptor on learned heads; its summary expects the agreement
to be heterogeneous across families.
"""

from __future__ import annotations

import numpy as np

from ..ids import group_key
from ..errors import InvalidArgumentError
from ..validation import check_int

__all__ = ["descriptor_correlations", "write_descriptor"]

PAIRS = (("int_logq", "upper"), ("int_logq", "lower"), ("int_kappa", "upper"))
MIN_OPERATORS = 6


def _spearman(x, y) -> float:
    from scipy.stats import spearmanr

    if np.unique(x).size < 2 or np.unique(y).size < 2:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def descriptor_correlations(rows: list[dict], n_boot: int = 1000, seed: int = 0,
                            min_operators: int = MIN_OPERATORS) -> list[dict]:
    """Spearman correlations of the descriptor with the brackets, per group and eps.

    Parameters
    ----------
    rows : audit cells (``brackets.csv`` rows) with the ``int_*`` columns
    n_boot : int >= 100, cluster-bootstrap resamples
    min_operators : groups with fewer usable cells are left out

    Returns
    -------
    list of dict: group, eps, operators, clusters, and per pair ``rho_<x>_<y>`` with
    ``lo_<x>_<y>``, ``hi_<x>_<y>`` (NaN where a resample or the data has no spread).

    Raises
    ------
    InvalidArgumentError
        Naming ``n_boot`` or ``rows`` (no cell carries the descriptor).
    """
    check_int(n_boot, "n_boot", 100)
    groups: dict = {}
    for r in rows:
        if r["verdict"] not in ("open", "resolved") or r.get("int_logq", "") in ("", None):
            continue
        try:
            vals = [float(r[k]) for k in ("int_logq", "int_kappa", "eps")]
            int(r["lower"]), int(r["upper"])
        except (ValueError, TypeError, KeyError) as exc:
            raise InvalidArgumentError(f"rows: operator {r.get('operator_id')!r} has a malformed "
                                       f"field ({type(exc).__name__}: {exc})") from None
        if not np.isfinite(vals).all():
            continue
        groups.setdefault((group_key(r), vals[2]), []).append(r)
    if not groups:
        raise InvalidArgumentError("rows: no bracketed cell carries the intrinsic descriptor "
                                   "(int_logq): it needs a common positive support, which "
                                   "masked (causal) heads lack, or an audit of softrank >= "
                                   "this version")
    rng = np.random.default_rng(seed)
    out = []
    for (g, e), rs in sorted(groups.items()):
        if len(rs) < min_operators:
            continue
        cl = np.array([r["source"] if r.get("checkpoint") else r["operator_id"] for r in rs])
        ucl = np.unique(cl)
        members = [np.flatnonzero(cl == c) for c in ucl]
        row = {"group": g, "eps": e, "operators": len(rs), "clusters": int(ucl.size)}
        data = {k: np.array([float(r[k]) for r in rs]) for k in ("int_logq", "int_kappa",
                                                                "upper", "lower")}
        draws = [np.concatenate([members[i] for i in rng.integers(0, ucl.size, ucl.size)])
                 for _ in range(n_boot)]
        for x, y in PAIRS:
            key = f"{x.removeprefix('int_')}_{y}"
            row[f"rho_{key}"] = _spearman(data[x], data[y])
            bs = np.array([_spearman(data[x][i], data[y][i]) for i in draws])
            bs = bs[np.isfinite(bs)]
            lo, hi = (np.quantile(bs, [0.025, 0.975]) if bs.size >= 20
                      else (float("nan"), float("nan")))
            row[f"lo_{key}"], row[f"hi_{key}"] = float(lo), float(hi)
        out.append(row)
    if not out:
        raise InvalidArgumentError(
            f"rows: no group (family and width, per eps) has >= {min_operators} bracketed "
            f"cells with the descriptor; largest: {max(len(v) for v in groups.values())}")
    return out


def write_descriptor(corr: list[dict], rows: list[dict], out) -> list:
    """``descriptor.csv``, ``descriptor.md`` and ``descriptor.png`` (log q against the upper
    end, one panel per group at the eps closest to 0.25). Returns the paths."""
    import csv
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if not corr:
        raise InvalidArgumentError("corr: no group with enough operators to correlate")
    with open(out / "descriptor.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(corr[0]))
        w.writeheader()
        w.writerows(corr)

    def cell(c, key):
        v, lo, hi = c[f"rho_{key}"], c[f"lo_{key}"], c[f"hi_{key}"]
        return "-" if not np.isfinite(v) else f"{v:+.2f} [{lo:+.2f}, {hi:+.2f}]"

    lines = ["# Intrinsic descriptor against certified brackets", "",
             "Spearman rank correlation, 95 % cluster-bootstrap interval (clusters: sources "
             "for learned heads). `log q` = (r/2) log(1 + kappa/(eps - tau)^2) for the "
             "truncated SVD of C at the least rank with tau <= eps/2 (docs/theory/geometry.md); a descriptor, "
             "never a bound.", "",
             "| group | eps | operators | clusters | log q vs upper | log q vs lower | "
             "kappa vs upper |", "|---|---|---|---|---|---|---|"]
    for c in corr:
        lines.append(f"| {c['group']} | {c['eps']:g} | {c['operators']} | {c['clusters']} | "
                     f"{cell(c, 'logq_upper')} | {cell(c, 'logq_lower')} | "
                     f"{cell(c, 'kappa_upper')} |")
    kept = {(c["group"], c["eps"]) for c in corr}
    dropped = sorted({group_key(r) for r in rows if r.get("int_logq", "") not in ("", None)
                      and (group_key(r), float(r["eps"])) not in kept})
    if dropped:
        lines += ["", f"Left out (fewer than {MIN_OPERATORS} usable cells): "
                  + ", ".join(dropped) + "."]
    (out / "descriptor.md").write_text("\n".join(lines) + "\n")
    groups = sorted({c["group"] for c in corr})
    fig, axes = plt.subplots(1, len(groups), figsize=(3.0 * len(groups), 2.8), squeeze=False)
    for ax, g in zip(axes[0], groups):
        eps_g = sorted({c["eps"] for c in corr if c["group"] == g}, key=lambda e: abs(e - 0.25))[0]
        sel = [r for r in rows if group_key(r) == g and float(r["eps"]) == eps_g
               and r.get("int_logq", "") not in ("", None) and r["verdict"] in ("open", "resolved")
               and np.isfinite(float(r["int_logq"]))]
        x = [float(r["int_logq"]) for r in sel]
        ax.vlines(x, [int(r["lower"]) for r in sel], [int(r["upper"]) for r in sel],
                  color="tab:blue", alpha=0.5, lw=1)
        ax.plot(x, [int(r["upper"]) for r in sel], "v", ms=3, color="tab:blue")
        ax.plot(x, [int(r["lower"]) for r in sel], "^", ms=3, color="tab:orange")
        ax.set_title(f"{g}, eps {eps_g:g}", fontsize=8)
        ax.set_xlabel("log q", fontsize=8)
    axes[0][0].set_ylabel("bracket", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "descriptor.png", dpi=110)
    plt.close(fig)
    return [out / "descriptor.csv", out / "descriptor.md", out / "descriptor.png"]

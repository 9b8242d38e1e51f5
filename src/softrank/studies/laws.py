"""Scaling laws of the synthetic families (docs/theory/families.md): brackets against the size ``kappa``.

For a family with interaction dimension ``r``, the seed theorem gives
``r_eps <= C_r (1 + kappa / (eps - tau)^2)^(r/2)``; on the grids the exponent ``r/2 = d/2`` is
sharp, on the sphere the rank grows like ``beta^((d-1)/2)`` and on the ball like
``beta^(d/2)`` (for large ``beta`` and enough tokens). :func:`run_laws` brackets a sweep of
each family at one tolerance, computes ``kappa`` of the rank-``d`` retained part of ``C``
(:mod:`softrank.geometry`), and fits log-log slopes of the lower and the upper ends against
``kappa`` (grids) or ``beta`` (sphere, ball) with bootstrap intervals (:func:`fit_slope`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError
from ..validation import check_fraction, check_int

__all__ = ["SlopeFit", "fit_slope", "LAW_SWEEPS", "run_laws"]


@dataclass(frozen=True)
class SlopeFit:
    """Least-squares slope of ``log y`` on ``log x`` with a percentile bootstrap interval
    (resampling the points with replacement)."""

    slope: float
    intercept: float
    ci_low: float
    ci_high: float
    n: int
    n_boot: int


def fit_slope(x, y, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> SlopeFit:
    """Log-log slope of ``y`` against ``x`` with a ``level`` bootstrap interval.

    Parameters
    ----------
    x, y : (n,) array_like, all ``> 0``, ``n >= 3`` with at least 2 distinct ``x``
    n_boot : int, >= 100
    seed : int
    level : float in (0, 1)

    Raises
    ------
    InvalidArgumentError
        Naming ``x``/``y`` (non-positive, non-finite, too few or mismatched points),
        ``n_boot`` or ``level``.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size < 3:
        raise InvalidArgumentError(f"x, y: expected two 1-D arrays of equal length >= 3, got "
                                   f"shapes {x.shape} and {y.shape}")
    for name, v in (("x", x), ("y", y)):
        if not (np.isfinite(v).all() and (v > 0).all()):
            raise InvalidArgumentError(f"{name}: expected finite values > 0 (log-log fit)")
    if np.unique(x).size < 2:
        raise InvalidArgumentError("x: needs at least 2 distinct values")
    check_int(n_boot, "n_boot", 100)
    check_fraction(level, "level")
    lx, ly = np.log(x), np.log(y)
    slope, intercept = np.polyfit(lx, ly, 1)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    bx, by = lx[idx], ly[idx]
    mx, my = bx.mean(axis=1, keepdims=True), by.mean(axis=1, keepdims=True)
    sxx = ((bx - mx) ** 2).sum(axis=1)
    ok = sxx > 0  # resamples with a single distinct x have no slope
    bs = (((bx - mx) * (by - my)).sum(axis=1)[ok]) / sxx[ok]
    a = (1 - level) / 2
    lo, hi = np.quantile(bs, [a, 1 - a])
    return SlopeFit(float(slope), float(intercept), float(lo), float(hi), int(x.size),
                    int(ok.sum()))


#: family -> list of (d, predicted exponent, sweep of generator keyword arguments)
LAW_SWEEPS = {
    "grid": [(1, 0.5, [{"n": n} for n in (16, 24, 32, 48, 64, 96, 128)]),
             (2, 1.0, [{"n": n} for n in (4, 5, 6, 7, 8, 10, 12)]),
             (3, 1.5, [{"n": n} for n in (3, 4, 5, 6)])],
    "sphere": [(d, (d - 1) / 2, [{"beta": b, "m": 128, "N": 128}
                                 for b in (4, 8, 16, 32, 64, 128)]) for d in (2, 3, 4)],
    "ball": [(d, d / 2, [{"beta": b, "m": 128, "N": 128} for b in (4, 8, 16, 32, 64, 128)])
             for d in (2, 3, 4)],
}


def run_laws(eps: float = 0.25, n_boot: int = 1000, seed: int = 0, sweeps=None):
    """Bracket every operator of the sweeps at ``eps`` and fit the slopes.

    Returns
    -------
    rows : list of dict
        Per operator: family, d, parameter (``n`` or ``beta``), kappa of the rank-``d``
        retained part, tau, lower, upper.
    fits : list of dict
        Per (family, d): predicted exponent, against what (``kappa`` or ``beta``), and the
        :class:`SlopeFit` of the lower and the upper ends.
    """
    from ..certifiers.bracket import bracket
    from ..generators import synthetic
    from ..geometry import interaction, kappa, retained_part, tau

    sweeps = LAW_SWEEPS if sweeps is None else sweeps
    rows, fits = [], []
    for fam, groups in sweeps.items():
        for d, expo, kws in groups:
            pts = []
            for kw in kws:
                op = (synthetic.grid(d, **kw) if fam == "grid"
                      else getattr(synthetic, fam)(d, seed=seed, **kw))
                (br,) = bracket(op, eps)
                if br.verdict not in ("open", "resolved"):
                    raise RuntimeError(f"{op.operator_id}: verdict {br.verdict}")
                C = interaction(op)
                T = retained_part(C, d)
                k = kappa(T)
                row = {"family": fam, "d": d, "operator_id": op.operator_id,
                       "param": kw.get("n", kw.get("beta")), "beta": op.beta, "kappa": k,
                       "tau": tau(op, T), "lower": br.lower, "upper": br.upper}
                rows.append(row)
                pts.append(row)
            against = "kappa" if fam == "grid" else "beta"
            x = [p[against] for p in pts]
            fits.append({"family": fam, "d": d, "against": against, "predicted": expo,
                         "lower": fit_slope(x, [max(p["lower"], 1) for p in pts], n_boot, seed),
                         "upper": fit_slope(x, [p["upper"] for p in pts], n_boot, seed)})
    return rows, fits


#: A small sweep for smoke runs (``softrank laws --quick``): seconds, not minutes.
QUICK_SWEEPS = {
    "grid": [(1, 0.5, [{"n": n} for n in (12, 16, 24, 32)])],
    "sphere": [(2, 0.5, [{"beta": b, "m": 48, "N": 48} for b in (4, 8, 16, 32)])],
}


def write_laws(rows: list[dict], fits: list[dict], out, eps: float) -> list:
    """``laws.csv`` (one row per operator), ``laws.md`` (the slope table) and ``laws.png``
    (log-log brackets as bands, with the predicted slope drawn through the first upper end).
    Returns the paths written."""
    import csv
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cols = ["family", "d", "operator_id", "param", "beta", "kappa", "tau", "lower", "upper"]
    with open(out / "laws.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    lines = [f"# Scaling laws (docs/theory/families.md), eps = {eps:g}", "",
             "Log-log slopes of the certified lower and upper ends against `kappa` (grids: the "
             "size of the rank-d retained part of C) or `beta` (sphere, ball), with 95 % "
             "bootstrap intervals; the predicted exponent is d/2 (grid, in kappa), (d-1)/2 "
             "(sphere) and d/2 (ball, only above a token-count threshold and for large beta).",
             "", "| family | d | against | predicted | lower slope [95 %] | upper slope [95 %] | points |",
             "|---|---|---|---|---|---|---|"]
    for f in fits:
        lo, up = f["lower"], f["upper"]
        lines.append(f"| {f['family']} | {f['d']} | {f['against']} | {f['predicted']:g} | "
                     f"{lo.slope:.3f} [{lo.ci_low:.3f}, {lo.ci_high:.3f}] | "
                     f"{up.slope:.3f} [{up.ci_low:.3f}, {up.ci_high:.3f}] | {lo.n} |")
    if min(f["lower"].n for f in fits) < 5:
        lines += ["", "Sweeps of fewer than 5 points give crude bootstrap intervals (few distinct "
                  "resamples)."]
    (out / "laws.md").write_text("\n".join(lines) + "\n")
    ncol = min(3, len(fits))
    nrow = -(-len(fits) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.4 * ncol, 3.0 * nrow), squeeze=False)
    for ax in axes.flat[len(fits):]:
        ax.set_visible(False)
    for ax, f in zip(axes.flat, fits):
        pts = [r for r in rows if r["family"] == f["family"] and r["d"] == f["d"]]
        x = np.array([r[f["against"]] for r in pts], dtype=float)
        lo = np.array([max(r["lower"], 1) for r in pts], dtype=float)
        up = np.array([r["upper"] for r in pts], dtype=float)
        ax.fill_between(x, lo, up, alpha=0.3, label="bracket")
        ax.plot(x, lo, "o-", ms=3, lw=1)
        ax.plot(x, up, "s-", ms=3, lw=1)
        ax.plot(x, up[0] * (x / x[0]) ** f["predicted"], "k--", lw=1,
                label=f"slope {f['predicted']:g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):  # minor labels overlap on short log ranges
            axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(f"{f['family']} d={f['d']}", fontsize=9)
        ax.set_xlabel(f["against"], fontsize=8)
        ax.legend(fontsize=7)
    for row in axes:
        row[0].set_ylabel(f"r_eps bracket, eps={eps:g}", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "laws.png", dpi=110)
    plt.close(fig)
    return [out / "laws.csv", out / "laws.md", out / "laws.png"]

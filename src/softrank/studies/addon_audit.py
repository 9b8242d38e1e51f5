"""The held-out add-on test (:mod:`softrank.studies.addon`) on an audit's cells, and its files.

:func:`addon_from_rows` reads the learned heads of an audit's rows (``brackets.csv``: the
bracket's upper end, native geometry, the B1 features, the gauge features and the intrinsic
descriptor), builds the feature blocks per family and runs the test;
:func:`write_addon` writes ``addon.csv``, ``addon.md`` (tables laid out like the seed
paper's) and ``addon.png`` (docs/theory/studies.md#held-out-add-on-test).
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .addon import MIN_SOURCES, RESPONSE_EPS, Comparison, addon_test, aggregate

__all__ = ["addon_from_rows", "write_addon"]


def _family_seed(seed: int, family: str) -> int:
    """Independent bootstrap streams per family (strata), reproducible from ``seed``."""
    import zlib

    return int(seed) * 1_000_003 + zlib.crc32(family.encode())


def addon_from_rows(rows: list[dict], eps: float = RESPONSE_EPS, n_boot: int = 1000,
                    n_perm: int = 20, seed: int = 0) -> tuple[list[Comparison], list[str]]:
    """Run the test per family on an audit's cells (``brackets.csv`` rows read with
    :func:`softrank.audit.record.read_cell`: ``gauge_native`` a
    :class:`~softrank.audit.feature_stages.GaugedNative`, empty values None).

    Uses learned heads (rows with a ``checkpoint``) at ``eps`` whose verdict is ``open`` or
    ``resolved``, with native geometry, B1 features and the gauge features. Families with
    fewer than 6 sources or 8 operators are skipped and named in the second return value.

    Returns
    -------
    (results, skipped) : per family the :class:`Comparison` B1 vs B1+G, B0 vs B0+G and
    (when every cell carries the intrinsic descriptor) B1 vs B1+D, with D = ``log q``,
    ``log(1 + kappa)``, ``r / min(m, N)`` and ``tau`` (:mod:`softrank.geometry`;
    gauge-invariant); when there are several families, their equal-weight aggregates; and
    the skip reasons.
    """
    from .features import B1, G, native_features, size_features

    need = ("operator_id", "family", "source", "checkpoint", "layer", "head", "m", "n", "eps",
            "verdict", "upper", "rho_Q", "rho_K", "Gamma", "sv_Q", "sv_K", *B1, "gauge_native")
    missing = [c for c in need if rows and c not in rows[0]]
    if missing:
        raise InvalidArgumentError(f"rows: missing columns {missing} (an audit by an older "
                                   f"softrank, or not an audit's brackets.csv: rerun the audit)")
    def parse(r) -> dict:
        """One usable cell's numbers, or a one-line error naming the operator."""
        try:
            m, N = int(r["m"]), int(r["n"])
            gauge = {c: [float(r["gauge_native"].at(c)[k]) for k in G] for c in (4.0, 16.0)}
            d = ([float(r[k]) for k in ("int_logq", "int_kappa", "int_r", "int_tau")]
                 if all(r.get(k, "") not in ("", None) for k in ("int_logq", "int_kappa",
                                                                  "int_r", "int_tau"))
                 else [np.nan] * 4)
            out = {"m": m, "N": N, "upper": int(r["upper"]),
                   "b0": list(size_features(m, N, float(r["eps"])).values()),
                   "b1": [float(r[k]) for k in B1],
                   "g": list(native_features(float(r["rho_Q"]), float(r["rho_K"]),
                                             float(r["Gamma"]),
                                             [float(x) for x in r["sv_Q"].split()],
                                             [float(x) for x in r["sv_K"].split()]).values()),
                   "gauge": gauge, "d": d}
        except (ValueError, TypeError, KeyError, AttributeError, InvalidArgumentError) as exc:
            raise InvalidArgumentError(f"rows: operator {r.get('operator_id')!r} has a malformed "
                                       f"field ({type(exc).__name__}: {exc})") from None
        if not all(np.isfinite(v).all() for v in (out["b1"], out["g"],
                                                  *[np.array(x) for x in gauge.values()])):
            raise InvalidArgumentError(f"rows: operator {r.get('operator_id')!r} has non-finite "
                                       f"B1, native or gauge features")
        return out

    fams: dict = {}
    skipped = []
    learned, usable = [], []
    for r in rows:
        try:
            if not r.get("checkpoint") or abs(float(r["eps"]) - eps) > 1e-12:
                continue
            learned.append(r)
            if (r["verdict"] in ("open", "resolved") and int(r["upper"]) >= 1
                    and r.get("rho_Q", "") not in ("", None)
                    and r.get("b1_tsvd", "") not in ("", None)
                    and r.get("gauge_native") is not None):
                usable.append(r)
        except (ValueError, TypeError) as exc:
            raise InvalidArgumentError(f"rows: operator {r.get('operator_id')!r} has a malformed "
                                       f"eps or upper ({exc})") from None
    if not learned:
        raise InvalidArgumentError(f"rows: no learned-head cells (rows with a checkpoint) at "
                                   f"eps {eps:g}")
    for r in usable:
        fams.setdefault(r["family"], []).append((r, parse(r)))
    if not fams:
        raise InvalidArgumentError(
            f"rows: none of the {len(learned)} learned-head cells at eps {eps:g} is usable "
            f"(verdict open or resolved, with native geometry, B1 and gauge features)")
    results = []
    for fam, cells in sorted(fams.items()):
        rs = [r for r, _ in cells]
        pc = [c for _, c in cells]
        srcs = {r["source"] for r in rs}
        if len(srcs) < MIN_SOURCES or len(rs) < 8:
            skipped.append(f"{fam}: {len(rs)} operators from {len(srcs)} sources (needs >= 8 "
                           f"operators and >= {MIN_SOURCES} sources)")
            continue
        p = np.minimum([c["m"] for c in pc], [c["N"] for c in pc])
        y = np.array([c["upper"] for c in pc]) / p
        b0 = np.array([c["b0"] for c in pc])
        b1 = np.array([c["b1"] for c in pc])
        g = np.array([c["g"] for c in pc])
        gauges = {ratio: np.array([c["gauge"][ratio] for c in pc]) for ratio in (4.0, 16.0)}
        heads = np.array([f"{r['checkpoint']}|{r['layer']}|{r['head']}" for r in rs])
        blocks = {"B0": b0, "B1": b1, "G": g}
        comparisons = [("B1", "G"), ("B0", "G")]
        d = np.array([c["d"] for c in pc], dtype=np.float64)
        if np.isfinite(d).all():
            blocks["D"] = np.column_stack([d[:, 0], np.log1p(d[:, 1]), d[:, 2] / p, d[:, 3]])
            comparisons.append(("B1", "D"))
        else:
            skipped.append(f"{fam}: D not tested, {int((~np.isfinite(d).all(axis=1)).sum())} "
                           f"cells lack a finite intrinsic descriptor")
        results += addon_test(y, blocks, np.array([r["source"] for r in rs]), comparisons,
                              family=fam, n_boot=n_boot, perm_groups=heads, n_perm=n_perm,
                              gauge_blocks=gauges,
                              resolution=1.0 / p, probe="G", seed=_family_seed(seed, fam))
    if len({r.family for r in results}) > 1:
        for key in dict.fromkeys((r.base, r.added) for r in results):
            sel = [r for r in results if (r.base, r.added) == key]
            if len(sel) > 1:
                results.append(aggregate(sel))
    return results, skipped


def _fmt(x, ci=None, nd=5):
    s = f"{x:+.{nd}f}"
    return s if ci is None else f"{s} [{ci[0]:+.{nd}f}, {ci[1]:+.{nd}f}]"


def write_addon(results: list[Comparison], skipped: list[str], out, eps=RESPONSE_EPS) -> list:
    """``addon.csv``, ``addon.md`` (tables laid out like the seed paper's) and ``addon.png``
    (the MAE differences with their intervals). Returns the paths."""
    import csv
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cols = ["family", "base", "added", "operators", "sources", "mae_base", "mae_full", "diff",
            "diff_lo", "diff_hi", "rel", "rel_lo", "rel_hi", "n_boot", "perm_diff", "perm_lo",
            "perm_hi", "gauge4_median_shift", "gauge4_share_beyond", "gauge16_median_shift",
            "gauge16_share_beyond"]
    with open(out / "addon.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        for r in results:
            g4, g16 = r.gauge.get(4.0, {}), r.gauge.get(16.0, {})
            w.writerow({"family": r.family, "base": r.base, "added": r.added,
                        "operators": r.operators, "sources": r.sources,
                        "mae_base": r.mae_base, "mae_full": r.mae_full, "diff": r.diff,
                        "diff_lo": r.diff_ci[0], "diff_hi": r.diff_ci[1], "rel": r.rel,
                        "rel_lo": r.rel_ci[0], "rel_hi": r.rel_ci[1], "n_boot": r.n_boot,
                        "perm_diff": r.perm_diff, "perm_lo": r.perm_ci[0],
                        "perm_hi": r.perm_ci[1],
                        "gauge4_median_shift": g4.get("median_shift", ""),
                        "gauge4_share_beyond": g4.get("share_beyond", ""),
                        "gauge16_median_shift": g16.get("median_shift", ""),
                        "gauge16_share_beyond": g16.get("share_beyond", "")})
    nb = max((r.n_boot for r in results), default=0)
    lines = [f"# Held-out add-on test (docs/theory/studies.md#held-out-add-on-test), eps = {eps:g}", "",
             "Response: upper end / min(m, N). Ridge per family, source-disjoint outer folds "
             "(5), inner tuning grouped by source (4), "
             f"{nb} source-cluster bootstrap refits; difference = MAE(base) - MAE(base + added) "
             "(positive: the added block helps), relative gain = difference / MAE(base). "
             "B0: size and tolerance; B1: calibrated gauge-invariant baseline from A alone "
             "(truncated-SVD rank at eps, stable and effective rank, row entropy, row peak); "
             "G: native geometry (radii, Gamma, spectral product, stable ranks of Q and K); "
             "D: the intrinsic descriptor (log q, log(1 + kappa), r / min(m, N), tau; "
             "gauge-invariant, computed from A).", ""]
    for base, added in dict.fromkeys((r.base, r.added) for r in results):
        sel = [r for r in results if (r.base, r.added) == (base, added)]
        lines += [f"## {base} against {base} + {added}", "",
                  f"| family | operators | sources | MAE {base} | MAE {base}+{added} | "
                  "difference [95 %] | relative gain [95 %] | excludes 0 |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in sel:
            lines.append(f"| {r.family} | {r.operators} | {r.sources} | {r.mae_base:.5f} | "
                         f"{r.mae_full:.5f} | {_fmt(r.diff, r.diff_ci)} | "
                         f"{_fmt(r.rel, r.rel_ci, 4)} | {'yes' if r.excludes_zero else 'no'} |")
        lines.append("")
    perm = [r for r in results
            if not r.family.startswith("aggregate") and np.isfinite(r.perm_diff)]
    no_perm = sorted({r.family for r in results if r.added == "G" and not r.family.startswith(
        "aggregate") and not np.isfinite(r.perm_diff)})
    if no_perm:
        lines += ["Within-head permutation not run for " + ", ".join(no_perm) + ": every head "
                  "has a single operator there, so the permutation would be the identity.", ""]
    if perm:
        lines += ["## Within-head permutation of G", "",
                  "G permuted among the operators of each head: the gain that survives is "
                  "head-level structure, not operator-level information.", "",
                  "| family | base | difference | with G permuted within heads [2.5, 97.5 %] |",
                  "|---|---|---|---|"]
        for r in perm:
            lines.append(f"| {r.family} | {r.base} | {_fmt(r.diff)} | "
                         f"{_fmt(r.perm_diff, r.perm_ci)} |")
        lines.append("")
    gs = [r for r in results if r.gauge]
    if gs:
        lines += ["## Gauge sensitivity of the frozen native predictor", "",
                  "The base + G model fitted on all operators, fed G recomputed under diagonal "
                  "gauges (A unchanged). Shift = |change of prediction| / (1 / min(m, N)), "
                  "i.e. in ranks; beyond = share of operators moved by more than one rank.", "",
                  "| family | model | ratio 4: median shift | ratio 4: beyond | "
                  "ratio 16: median shift | ratio 16: beyond |", "|---|---|---|---|---|---|"]
        for r in gs:
            g4, g16 = r.gauge.get(4.0, {}), r.gauge.get(16.0, {})
            lines.append(f"| {r.family} | {r.base}+G | {g4.get('median_shift', float('nan')):.2f} | "
                         f"{100 * g4.get('share_beyond', float('nan')):.0f} % | "
                         f"{g16.get('median_shift', float('nan')):.2f} | "
                         f"{100 * g16.get('share_beyond', float('nan')):.0f} % |")
        lines.append("")
    few = sorted({r.family for r in results if r.sources < 20})
    if few:
        lines += ["Few sources (< 20) in " + ", ".join(few) + ": bootstrap draws then hold few "
                  "distinct sources, and the intervals (the relative gain's especially, when "
                  "a draw's base MAE is near 0) are wide and unstable.", ""]
    if skipped:
        lines += ["Skipped: " + "; ".join(skipped), ""]
    lines += ["Seed paper (docs/theory/studies.md#reference-figures), four families: B1 - (B1+G) = -0.00005 [-0.00060, +0.00025], "
              "relative gain -0.0035 [-0.0422, +0.0179]; against B0 the gain is 0.0279 "
              "[0.0254, 0.0300], relative about 0.36.", ""]
    (out / "addon.md").write_text("\n".join(lines))
    fig, ax = plt.subplots(figsize=(6.0, 0.5 + 0.45 * max(len(results), 1)))
    for i, r in enumerate(results):
        c = {("B1", "G"): "tab:blue", ("B0", "G"): "tab:orange"}.get((r.base, r.added),
                                                                      "tab:green")
        # the point estimate can fall outside a percentile interval: draw both, not errorbar
        ax.plot(list(r.diff_ci), [i, i], color=c, lw=2)
        ax.plot([r.diff], [i], "o", color=c)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(results)),
                  [f"{r.family}: {r.base} vs {r.base}+{r.added}" for r in results], fontsize=7)
    ax.set_xlabel("held-out MAE difference (base - (base + added)), 95 % interval", fontsize=8)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(out / "addon.png", dpi=110)
    plt.close(fig)
    return [out / "addon.csv", out / "addon.md", out / "addon.png"]

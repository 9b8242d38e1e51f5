"""The studies section of an audit report: every study the audit's cells support.

* **Scaling laws** from the panel's grid, sphere and ball operators (slopes of both bracket
  ends against ``beta``; on grids ``kappa`` of the rank-``d`` interaction is proportional to
  ``beta``, so the predicted ``d/2`` is the same exponent as against ``kappa``);
  ``softrank laws`` runs longer sweeps.
* **Block width** (:mod:`.blockwidth`) when learned heads come at two or more widths.
* **Held-out add-on test** (:mod:`.addon`) on learned heads at eps 0.25.
* **Intrinsic descriptor** (:mod:`.descriptor`).

Each writes its csv/md/png into ``out/studies/``; a study the cells cannot support is named
with the reason instead.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["law_rows", "report_studies"]

_LAW_ID = re.compile(r"^(grid)-d(\d+)-n(\d+)-c([0-9.e+-]+)$|^(sphere|ball)-d(\d+)-b([0-9.e+-]+)-s\d+$")


def law_rows(rows: list[dict]) -> dict:
    """Synthetic cells of the law families grouped by ``(family, d, eps)``:
    ``{key: [(beta, lower, upper), ...]}`` (``beta`` read from the generators' operator ids;
    grids: ``beta = c (n - 1)^2``, docs/theory/families.md)."""
    out: dict = {}
    for r in rows:
        if r["verdict"] not in ("open", "resolved"):
            continue
        mt = _LAW_ID.match(r["operator_id"])
        if not mt:
            continue
        if mt.group(1):
            fam, d, beta = "grid", int(mt.group(2)), float(mt.group(4)) * (int(mt.group(3)) - 1) ** 2
        else:
            fam, d, beta = mt.group(5), int(mt.group(6)), float(mt.group(7))
        out.setdefault((fam, d, float(r["eps"])), []).append(
            (beta, int(r["lower"]), int(r["upper"])))
    return out


def _laws(rows, out: Path, n_boot: int) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    from .laws import fit_slope

    groups = {k: sorted(v) for k, v in law_rows(rows).items()
              if len({b for b, _, _ in v}) >= 3}
    if not groups:
        raise InvalidArgumentError("rows: no grid/sphere/ball sweep with >= 3 values of beta")
    pred = {"grid": lambda d: d / 2, "sphere": lambda d: (d - 1) / 2, "ball": lambda d: d / 2}
    lines = ["| family | d | eps | points | predicted | lower slope [95 %] | upper slope [95 %] |",
             "|---|---|---|---|---|---|---|"]
    table = []
    for (fam, d, e), pts in sorted(groups.items()):
        x = [p[0] for p in pts]
        fl = fit_slope(x, [max(p[1], 1) for p in pts], n_boot)
        fu = fit_slope(x, [max(p[2], 1) for p in pts], n_boot)
        lines.append(f"| {fam} | {d} | {e:g} | {len(pts)} | {pred[fam](d):g} | "
                     f"{fl.slope:.2f} [{fl.ci_low:.2f}, {fl.ci_high:.2f}] | "
                     f"{fu.slope:.2f} [{fu.ci_low:.2f}, {fu.ci_high:.2f}] |")
        table.append({"family": fam, "d": d, "eps": e, "points": len(pts),
                      "predicted": pred[fam](d), "lower_slope": fl.slope,
                      "lower_ci_low": fl.ci_low, "lower_ci_high": fl.ci_high,
                      "upper_slope": fu.slope, "upper_ci_low": fu.ci_low,
                      "upper_ci_high": fu.ci_high})
    import csv

    with open(out / "laws.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    if min(len(v) for v in groups.values()) < 5:
        lines += ["", "Sweeps of fewer than 5 points give crude bootstrap intervals (few distinct "
                  "resamples); `softrank laws` runs sweeps of 4-7 points per family."]
    keys = sorted({(f, d) for f, d, _ in groups})
    ncol = min(3, len(keys))
    nrow = -(-len(keys) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol, 2.8 * nrow), squeeze=False)
    for ax in axes.flat[len(keys):]:
        ax.set_visible(False)
    for ax, (fam, d) in zip(axes.flat, keys):
        for (f2, d2, e), pts in sorted(groups.items()):
            if (f2, d2) != (fam, d):
                continue
            x = np.array([p[0] for p in pts])
            lo = np.array([max(p[1], 1) for p in pts])
            up = np.array([max(p[2], 1) for p in pts])
            ax.fill_between(x, lo, up, alpha=0.3, label=f"eps {e:g}")
            ax.plot(x, up[0] * (x / x[0]) ** pred[fam](d), "k--", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):  # minor labels overlap on short log ranges
            axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(f"{fam} d={d} (dashed: slope {pred[fam](d):g})", fontsize=8)
        ax.set_xlabel("beta", fontsize=8)
        ax.legend(fontsize=6)
    for row in axes:
        row[0].set_ylabel("r_eps bracket", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "laws.png", dpi=100)
    plt.close(fig)
    (out / "laws.md").write_text("\n".join(lines) + "\n")
    return lines + ["", "![laws](studies/laws.png)"]


def _body(md: Path) -> list[str]:
    """A study's markdown without its title line."""
    lines = [ln for ln in md.read_text().splitlines() if not ln.startswith("# ")]
    while lines and not lines[0].strip():
        lines.pop(0)
    return lines


def report_studies(rows: list[dict], out, n_boot: int = 1000, seed: int = 0) -> list[str]:
    """Run every study the cells support into ``out/studies`` and return the report section
    (Markdown lines)."""
    from .addon_audit import addon_from_rows, write_addon
    from .blockwidth import budget_shares, write_block_width
    from .descriptor import descriptor_correlations, write_descriptor

    sdir = Path(out) / "studies"
    sdir.mkdir(parents=True, exist_ok=True)
    lines = ["## Studies", ""]

    def section(title, fn):
        lines.extend([f"### {title}", ""])
        try:
            lines.extend(fn())
        except InvalidArgumentError as exc:
            lines.append(f"Not run on this panel: {exc}")
        lines.append("")

    section("Scaling laws (synthetic families, docs/theory/families.md)", lambda: _laws(rows, sdir, n_boot))

    def blockwidth():
        learned = [r for r in rows if r.get("checkpoint")]
        if len({int(r["n"]) for r in learned}) < 2:
            raise InvalidArgumentError("rows: learned heads at fewer than 2 widths")
        e = 0.25 if any(float(r["eps"]) == 0.25 for r in learned) else None
        write_block_width(budget_shares(learned, eps=e), sdir)
        return _body(sdir / "blockwidth.md") + ["", "![block width](studies/blockwidth.png)"]

    section("Block width", blockwidth)

    def addon():
        results, skipped = addon_from_rows(rows, n_boot=n_boot, seed=seed)
        if not results:
            raise InvalidArgumentError("rows: " + "; ".join(skipped))
        write_addon(results, skipped, sdir)
        body = [ln.replace("## ", "#### ") for ln in _body(sdir / "addon.md")]
        return body + ["", "![add-on](studies/addon.png)"]

    section("Held-out add-on test (docs/theory/studies.md#held-out-add-on-test)", addon)

    def descriptor():
        corr = descriptor_correlations(rows, n_boot=n_boot, seed=seed)
        write_descriptor(corr, rows, sdir)
        return _body(sdir / "descriptor.md") + ["", "![descriptor](studies/descriptor.png)"]

    section("Intrinsic descriptor against the brackets", descriptor)
    return lines

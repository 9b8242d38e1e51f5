"""The audit's report (``report.md``) and plots (PNG), from its cells and its summary
(:mod:`softrank.harness.summary`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from ..audit.record import group_key, read_cells, refutations
from .plots import plot_causal, plot_families, plot_frontier_families, plot_minilm
from .ledger import SUMMARY_NAME, read_summary
from .summary import PAPER, PAPER_COMPARE, by_method, cell_diagnostics, method_stats, summarize

__all__ = ["write_report", "summarize"]


def _stage_error_line(errs: dict, cut_short: int) -> str:
    cut = (f"; {cut_short} cells cut short by the time limit (their searches skipped, their "
           "ends checked)" if cut_short else "")
    if not errs:
        return "- stages: every stage ran on every operator" + cut
    return ("- **stage errors** (the stage's columns are empty on those operators; the `stages` "
            "column of brackets.csv has each message): " + "; ".join(
                f"`{n}` on {e['operators']} operators (first: {e['first']})"
                for n, e in errs.items()) + cut)


def _frontier_section(s: dict, plot: str | None) -> list[str]:
    f = s.get("frontier")
    if not f:
        return []
    crow = [[n, v["operators"], _fmt_score(v["median_excess_error"]),
             _fmt_score(v["median_excess_rank"])] for n, v in f["constructions"].items()]
    lines = [
        "## The rank-error frontier", "",
        f"For each of {f['operators']} operators, the band `lower < e_k <= upper` of "
        "`e_k = min ||A - B||_inf` over rank-`k` matrices `B`, at ranks 1, 2, 3, 4, 6, 8, 12, "
        "16, 24, 32, 48, 64, ... up to `min(m, N)`: each end a certificate that passed the "
        "checker in both arithmetics at that value (docs/theory/frontier.md), and each "
        "construction's checked error at those ranks (`witness_at_rank`). Scores, medians "
        "over operators: *excess error*, the median of error / lower end over its ranks (at "
        "least its error over the least possible one); *excess rank*, the median of its rank "
        "over the least rank the band allows at its error (`inf`: no better than the zero "
        "matrix at half its ranks or more). Both are upper bounds of the true figures. "
        f"Attacks on the certificates behind the lower ends, each at its own tolerance: "
        f"{f['attacks']['tried']} tried"
        + (f" (closest approach best_error/eps = {f['attacks']['closest']:.4g})"
           if f["attacks"]["closest"] is not None else "")
        + ". Contradictions (a band crossing itself, a curve at or below its lower edge, a "
        f"successful attack): **{f['contradictions']}**"
        + (f" ({'; '.join(f['first_contradictions'])})" if f["contradictions"] else "")
        + f". The bands took {f['seconds']:.0f} s in all.", "",
        _table(["construction", "operators", "median excess error", "median excess rank"],
               crow), "",
    ]
    if plot:
        lines += [f"![{plot}]({plot})", ""]
    return lines


def _causal_section(s: dict, plot: str | None) -> list[str]:
    c = s.get("causal")
    if not c:
        return []
    trows = [[fam, e, st["cells"], f"[{st['median_lower']}, {st['median_upper']}]",
              f"[{st['median_rank_lower']}, {st['median_rank_upper']}]", st["resolved"],
              st["unsound"]]
             for fam, per in c["families"].items() for e, st in per.items()]
    crow = [[n, v["cells"], v["met_eps"], v["median_rank"], v["median_rank_over_lower"],
             v["median_rank_over_upper"]] for n, v in c["constructions"].items()]
    lines = [
        f"## The causal rank ({', '.join(c['rank'])})", "",
        "Beside `r_eps` of each causal head, the least rank of `U W` whose causal part "
        "(`tril(U W)`; for `window:W` with each query's last `W` keys copied from `A`) is "
        "within `eps` of `A`: what causal linear attention with that many features can reach "
        "(docs/theory/causal.md). Lower ends are certificates of `r_eps` of blocks below the "
        "diagonal, upper ends checked causal witnesses; both passed the checker in both "
        f"arithmetics. {c['cells']} cells, {c['unsound']} unsound. Medians per family:", "",
        _table(["family", "eps", "cells", "r_eps [lower, upper]", "causal [lower, upper]",
                "causal resolved", "unsound"], trows), "",
    ]
    if crow:
        lines += [
            "Causal constructions (checked causal witnesses; `met eps`: cells where the "
            "construction met the tolerance within its budget; ratios against the causal "
            "bracket's ends of those cells):", "",
            _table(["construction", "cells", "met eps", "median rank",
                    "median rank / causal lower", "median rank / causal upper"], crow), ""]
    if plot:
        lines += [f"![{plot}]({plot})", ""]
    return lines


def _reference_line(s: dict) -> str:
    ref = s.get("reference_store")
    if not ref or ref["without_store"] == s["cells"]:
        return "- reference store: off (every bracket computed in this run)"
    refused = ref["refused"]
    lost = ref.get("not_kept", [])
    return (f"- reference store: **{ref['from_store']} cells read back** from it and checked "
            f"again in both arithmetics ({ref['check_seconds']} s), {ref['computed']} computed "
            f"({ref['computed'] - len(lost)} of them stored); a cell from the store keeps the "
            "seconds its bracket took when computed"
            + (f"; {len(refused)} stored entries refused and recomputed (first: "
               f"{refused[0]})" if refused else "")
            + (f"; {len(lost)} computed brackets not kept (first: {lost[0]})" if lost else "")
            + "".join(f"; **{n} cells from bundle {b}**: their ends and the methods credited "
                      "with them are checked, their seconds, method records and checker "
                      "disagreements are that bundle's claims and are left out of every time "
                      "and method figure here" for b, n in ref.get("from_bundles", {}).items()))


def _table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join("" if v is None else str(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def _standing(s: dict) -> list[str]:
    """Where MiniLM stands against the paper's BERT-native figures, from the data."""
    out = []
    for fam in sorted(f for f in s["families"] if f.startswith("minilm")):
        st = s["families"][fam].get("0.25")
        if not st:
            continue
        out.append(
            f"- **{fam}, eps 0.25**: {st['resolved_pct']} % resolved (paper, BERT native: 42.8 %); "
            f"median upper/lower {st['median_ratio']} (paper: 2.6-3.8 by family)."
        )
    if out:
        # the block widths of this run's MiniLM families ("minilm-w64" -> 64)
        names = [f"{w}-token" for w in sorted(
            {int(f[len("minilm-w"):]) for f in s["families"]
             if f.startswith("minilm-w") and f[len("minilm-w"):].isdigit()})]
        blocks = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 2 else names)
        out = ["## Where we stand against the seed paper", ""] + out + [
            "",
            "The settings differ: all-MiniLM-L6-v2 (6 layers, 12 heads of dimension 32) on "
            f"{blocks or 'token'} native blocks of standard-library docstrings, against the "
            "paper's BERT-base native operators. This is a comparison of settings, not a reproduction; "
            "an open bracket says how far the certificates are from each other, not where "
            "r_eps lies inside it.",
        ]
    return out


_ORIGIN = {"builtin": "built-in", "reference": "reference", "third-party": "third-party"}


def _plot_constructions(rows, out: Path) -> str | None:
    """The Constructions plot (:func:`softrank.harness.plots.plot_constructions`) of every
    construction's checked ranks against the cells' certified lower ends."""
    from .plots import plot_constructions

    points = {}
    for n, ps in by_method(rows, "upper").items():
        v = [(r["lower"], m.rank) for r, m in ps if m.status == "ok" and r["lower"] > 0]
        if v:
            origin = ps[0][1].origin
            points[n] = (origin, _ORIGIN.get(origin, origin), v)
    return plot_constructions(points, out)


def _fmt_x(v):
    return "" if v is None else f"{v:g}x"


def _fmt_score(v):
    """A frontier score: three significant digits, ``inf`` as such."""
    return "" if v is None else "inf" if v == "inf" else f"{v:.3g}x"


def _constructions_section(rows, summary, plot: str | None) -> list[str]:
    """The report's *Constructions* section: every construction (built-in, reference,
    third-party) against the certified ends, overall and per family and tolerance."""
    cons = summary.get("constructions", {})
    if not cons:
        return []
    head = ["construction", "origin", "cells", "declined", "skipped", "failed",
            "within eps (checked)", "rejected", "reported", "median rank / certified lower",
            "median rank / best upper", "median s / cell"]
    fr = summary.get("frontier", {}).get("constructions", {})
    if fr:
        head += ["frontier excess error", "frontier excess rank"]

    def row(name, st):
        out = [name, _ORIGIN.get(st["origin"], st["origin"]), st["cells"], st["declined"],
               st["skipped"], st["failed"], st["within_eps"], st["rejected"], st["reported"],
               _fmt_x(st["median_rank_over_lower"]), _fmt_x(st["median_rank_over_best_upper"]),
               st["median_seconds"]]
        if fr:
            f = fr.get(name, {})
            out += [_fmt_score(f.get("median_excess_error")),
                    _fmt_score(f.get("median_excess_rank"))]
        return out

    lines = [
        "## Constructions", "",
        "Every construction that ran, against the certified ends of the same cells. *Within "
        "eps (checked)*: its witness passed the float64 checker with rounding bounds (the "
        "reported end also passed the interval check); *rejected*: the checker refused it "
        "(never reported, counted against the construction); *declined*: it returned no "
        "witness (a reference construction without `Q`, `K`, or one that never met eps within "
        "its budget); *skipped*: a built-in search not run because the ends found before it "
        "left nothing to improve, or past a time limit (built-in searches only try ranks "
        "below the best witness so far, so their ratios to the best upper end are at least 1 "
        "by design; reference and third-party constructions search their own least rank); "
        "*reported*: its witness is "
        "the cell's upper end. Ratios are medians over the cells where the witness passed."
        + (" The frontier scores are those of the section *The rank-error frontier*." if fr
           else ""),
        "",
        "All cells:", "",
        _table(head, [row(n, st) for n, st in cons.items()]),
        "",
    ]
    third = [n for n, st in summary.get("lower_tests", {}).items()
             if st["origin"] == "third-party"]
    if third:
        lt = summary["lower_tests"]
        lines += ["Third-party lower tests:", "",
                  _table(["lower test", "cells", "declined", "failed", "certified (checked)",
                          "rejected", "reported", "median rank / certified lower",
                          "median rank / best upper", "median s / cell"],
                         [[n, lt[n]["cells"], lt[n]["declined"], lt[n]["failed"],
                           lt[n]["certified"], lt[n]["rejected"], lt[n]["reported"],
                           _fmt_x(lt[n]["median_rank_over_lower"]),
                           _fmt_x(lt[n]["median_rank_over_best_upper"]),
                           lt[n]["median_seconds"]] for n in third]), ""]
    by = defaultdict(list)
    for r in rows:
        by[(r["eps"], group_key(r))].append(r)
    for e in summary["eps"]:
        trows = []
        for g in sorted({k[1] for k in by if k[0] == e}):
            for n, ps in by_method(by[(e, g)], "upper").items():
                trows.append([g] + row(n, method_stats(ps))[:1]
                             + row(n, method_stats(ps))[2:12])
        if trows:
            lines += [f"By family at eps {e:g}:", "",
                      _table(["family"] + head[:1] + head[2:12], trows), ""]
    if plot:
        lines += [f"![{plot}]({plot})", ""]
    return lines


def _why(r) -> str:
    d = cell_diagnostics(r)
    if r["verdict"] == "unsound":
        refs = refutations(r)
        if refs:
            return "; ".join(f"refuted by stage {x.by!r}: a checked witness of rank {x.found} "
                             + (f"within eps, below the certified {x.claimed}"
                                if x.certificate == "lower" else
                                f"against {x.certificate} (certified {x.claimed})")
                             + (f" (saved in {x.saved})" if x.saved else "") for x in refs)
        return (f"lower {r['lower']} ({r['lower_method']}) above upper {r['upper']} "
                f"({r['upper_method']})" if r["lower"] > r["upper"]
                else f"attack: {r.get('attack', '')}")
    fails = [f"{m.name}: {m.message}" for m in d.methods if m.status == "failed"]
    text = "; ".join(([d.error] if d.error else []) + fails)
    return " ".join(text.split())[:400].replace("|", "/")  # one table row: no newline, no |


def _attack_line(a: dict) -> str:
    if not a["tried"]:
        return "- targeted attacks (docs/theory/attacks.md): none run (`--attacks none`, or no lower bound >= 2)"
    return (f"- targeted attacks on lower certificates of rank >= 2 (docs/theory/attacks.md): **{a['tried']} "
            f"tried, {a['succeeded']} succeeded** (seed paper: 0 of 458); the closest came to "
            f"{a['closest_best_error_over_eps']}x eps on {a['closest_cell']} (median "
            f"{a['median_best_error_over_eps']}x); "
            f"{a['errors']} attack errors, {a['seconds_total']} s in total"
            + ("; counterexamples in `counterexamples/`" if a["succeeded"] else ""))


def _build_note(s: dict) -> str:
    """`` (operators ready in X s, H of N from the operator cache)`` when known."""
    b = s.get("operator_build")
    if not b:
        return ""
    asked = b.get("hits", 0) + b.get("misses", 0)
    cached = f", {b['hits']} of {asked} from the operator cache" if asked else ""
    return f" (operators ready in {b['seconds']:.0f} s{cached})"


#: The files of the report's studies in ``out/studies`` (softrank.studies.report).
_STUDY_FILES = tuple(f"{stem}.{ext}" for stem in ("laws", "blockwidth", "addon", "descriptor")
                     for ext in ("csv", "md", "png"))


def _previous_outputs(out: Path) -> list[Path]:
    """The plots a previous report in ``out`` listed in its summary.json, and the study files
    softrank writes in ``out/studies``: the files a new report may leave stale."""
    plots = read_summary(out).get("plots", [])
    found = [out / str(p) for p in (plots if isinstance(plots, list) else [])
             if "/" not in str(p)]
    found += [out / "studies" / n for n in _STUDY_FILES]
    return [p for p in found if p.is_file()]


def write_report(rows: list[dict], summary: dict, out: Path, study_boot: int = 1000) -> None:
    """Write ``summary.json``, ``report.md`` and the PNG plots into ``out``, with the studies
    the cells support (:func:`softrank.studies.report.report_studies`, ``study_boot``
    bootstrap resamples; 0 leaves the studies out) in ``out/studies``. ``rows`` are read
    with :func:`softrank.audit.record.read_cell`."""
    import time as _time

    rows = read_cells(rows)
    out = Path(out)
    started = _time.time()
    previous = _previous_outputs(out)
    plots = []
    if any(r["family"] == "minilm" for r in rows):
        for e in summary["eps"]:
            plots += plot_minilm(rows, e, out)
    plots.insert(0, plot_families(summary, out))
    cplot = _plot_constructions(rows, out)
    causal_plot = plot_causal(rows, out) if summary.get("causal") else None
    fplot = (plot_frontier_families(summary["frontier"]["families"], out)
             if summary.get("frontier") else None)
    summary["plots"] = (plots + ([cplot] if cplot else []) + ([causal_plot] if causal_plot else [])
                        + ([fplot] if fplot else []))
    (out / SUMMARY_NAME).write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n")

    s = summary
    ov = s["overall"]
    lines = [
        f"# softrank audit: panel `{s['panel']}`",
        "",
        f"{s['operators']} operators x {len(s['eps'])} tolerances = **{s['cells']} cells**, "
        f"seed {s['seed']}, wall time {s['wall_seconds']:.0f} s{_build_note(s)}, "
        f"softrank {s['softrank_version']}.",
        "",
        "Every bracket `lower <= r_eps(A) <= upper` below is backed by two certificates that the "
        "independent checker accepted in float64 with rounding bounds *and* in interval "
        "arithmetic. A midpoint is never a rank: an open bracket is an honest interval.",
        "",
        f"- resolved (lower = upper): **{ov['resolved']} of {ov['cells']} ({ov['resolved_pct']} %)**; "
        f"open {ov['open']}; unsound {ov['unsound']}; error {ov['error']}",
        (f"- validated input mode: {s['validated']['cells']} cells bracket the exact softmax of "
         f"the float64 factors (enclosure radius at most {s['validated']['max_rho']:.3g})"
         if s["validated"]["cells"] else "- validated input mode: off"),
        f"- certificates reported: {s['certificates']['reported']}, all passed the checker: "
        f"**{s['certificates']['all_passed_checker']}** (interval back ends: "
        f"{', '.join(f'{k} {v}' for k, v in s['certificates']['interval_backends'].items()) or '-'}); "
        f"candidates accepted in float64 but rejected by the interval check: "
        f"{s['certificates']['float64_interval_disagreements']}",
        _attack_line(s["attacks"]),
        _reference_line(s),
        _stage_error_line(s.get("stage_errors", {}), s.get("cut_short", 0)),
        *(["- **effort fast** (`--effort fast`): the late searches (subspace-rows, "
           "subspace-climb, subspace-blocks, trust-region, alternating-l1-smooth, "
           "alternating-l1-anneal) did "
           "not run, so the ends are the other methods' and mostly wider than at full effort "
           "(README, \"Effort\"); the tables below leave those searches out"]
          if s.get("effort") == "fast" else []),
        "",
        "## By family and tolerance",
        "",
    ]
    trows = []
    for fam, per in s["families"].items():
        for e, st in per.items():
            paper = ""
            base = fam.split("-w")[0]
            if base in PAPER_COMPARE and e == "0.25":
                ref = PAPER_COMPARE[base]
                paper = (f"{ref}: {100 * PAPER['resolved_at_0.25'][ref]:.1f} % resolved; "
                         "median upper/lower 2.6-3.8 (by family)")
            trows.append([fam, e, st["cells"], f"{st['resolved_pct']} %", st["median_ratio"],
                          st["p90_ratio"], st["median_lower"], st["median_upper"],
                          st["median_seconds"], st.get("median_seconds_over_svd"),
                          st.get("median_Gamma"), paper])
    lines.append(_table(["family", "eps", "cells", "resolved", "median upper/lower",
                         "p90 upper/lower", "median lower", "median upper", "median s/cell",
                         "median cell / one SVD", "median native Gamma", "seed paper"], trows))
    lines += [
        "",
        "Seed paper (docs/theory/studies.md#reference-figures), eps 0.25: resolved GPT-2 99.7 %, Qwen2.5 77.1 %, ViT-Base IN1K "
        "59.0 %, IN21K 61.9 %, BERT native 42.8 % (219 of 512); median upper/lower 2.6-3.8 by "
        "family. Its certificates were float64 computations without interval enclosure (the "
        "seed project's stated limitation); every certificate here also passed an interval "
        "check.",
        "",
    ]
    lines += _standing(s)
    lines += [
        "",
        "## Which certificate and which construction won",
        "",
        "Truncated SVD's rank divided by the reported upper end (median per family; the seed "
        "paper: 1.62x against alternating l1): "
        + (", ".join(f"{g} {v}x" for g, v in s["truncated_svd_vs_best"].items()) or "-") + ".",
        "",
        _table(["lower certificate", "cells"], list(s["winners"]["lower"].items())),
        "",
        _table(["upper construction", "cells"], list(s["winners"]["upper"].items())),
        "",
    ]
    lines += _constructions_section(rows, s, cplot)
    lines += _causal_section(s, causal_plot)
    lines += _frontier_section(s, fplot)
    lines += [
        "## Plots",
        "",
    ]
    lines += [f"![{p}]({p})" for p in plots]
    bad = [r for r in rows if r["verdict"] in ("unsound", "error")]
    if bad:
        lines += ["", "## Cells needing attention", "",
                  _table(["operator", "eps", "verdict", "why"],
                         [[r["operator_id"], r["eps"], r["verdict"], _why(r)] for r in bad])]
    if study_boot:
        from ..studies.report import report_studies

        lines += [""] + report_studies(rows, out, n_boot=study_boot, seed=s["seed"])
    lines += ["", "Files: `brackets.csv` (one row per cell), `summary.json`.", ""]
    (out / "report.md").write_text("\n".join(lines))
    # a reused directory: the previous report's plots and studies that this one did not
    # write again would be read as this run's; they go (only softrank's own file names)
    for p in previous:
        try:
            if p.stat().st_mtime < started - 2.0:  # (a coarse file clock: 2 s of slack)
                p.unlink()
        except OSError:
            pass

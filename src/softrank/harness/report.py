"""Summary (JSON), report (Markdown) and plots (PNG) of an audit.

The report puts the seed paper's reference figures (docs/theory/studies.md#reference-figures) beside ours: at
``eps = 0.25`` BERT native operators resolved 42.8 % (219 of 512), GPT-2 99.7 %, Qwen2.5
77.1 %, ViT-Base 59.0 / 61.9 %; the median upper/lower ratio was 2.6-3.8 by family. MiniLM
is a BERT-architecture encoder on native operators, so its row is compared with BERT native.
"""

from __future__ import annotations

import json
import platform
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from ..audit.frontier_stage import decode_frontier
from ..audit.record import group_key, read_diagnostics, read_stages, refutations
from ..certifiers.interface import Diagnostics, MethodRecord
from .plots import plot_causal, plot_families, plot_frontier_families, plot_minilm
from .store import SUMMARY_NAME, read_summary

__all__ = ["summarize", "write_report", "PAPER", "group_key", "cell_diagnostics", "bundle_claim"]

#: Seed paper, eps = 0.25: resolved share by family (docs/theory/studies.md#reference-figures).
PAPER = {
    "resolved_at_0.25": {"BERT native": 0.428, "GPT-2": 0.997, "Qwen2.5": 0.771,
                         "ViT-Base IN1K": 0.590, "ViT-Base IN21K": 0.619},
    "median_ratio_range": [2.6, 3.8],
    "attacks": {"tried": 458, "succeeded": 0},
}
_PAPER_COMPARE = {"minilm": "BERT native"}  # other families: a user's own checkpoints




def _stats(rows):
    n = len(rows)
    timed = _measured(rows)  # a bundle's seconds are its claim
    ok = [r for r in rows if r["verdict"] in ("resolved", "open")]
    ratios = [float(r["upper"]) / float(r["lower"]) for r in ok if int(r["lower"]) > 0]
    return {
        "cells": n,
        "resolved": sum(r["verdict"] == "resolved" for r in rows),
        "resolved_pct": round(100.0 * sum(r["verdict"] == "resolved" for r in rows) / n, 1) if n else 0.0,
        "open": sum(r["verdict"] == "open" for r in rows),
        "unsound": sum(r["verdict"] == "unsound" for r in rows),
        "error": sum(r["verdict"] == "error" for r in rows),
        "median_ratio": round(float(np.median(ratios)), 3) if ratios else None,
        "p90_ratio": round(float(np.percentile(ratios, 90)), 3) if ratios else None,
        "median_lower": float(np.median([int(r["lower"]) for r in ok])) if ok else None,
        "median_upper": float(np.median([int(r["upper"]) for r in ok])) if ok else None,
        "median_seconds": round(float(np.median([float(r["seconds"]) for r in timed])), 3)
        if timed else None,
        "total_seconds": round(float(sum(float(r["seconds"]) for r in timed)), 1),
        "median_seconds_over_svd": _svd_ratio(timed),
        "median_Gamma": _median_field(rows, "Gamma"),
    }


def _median_field(rows, key):
    v = [float(r[key]) for r in rows if r.get(key, "") not in ("", None)]
    return round(float(np.median(v)), 4) if v else None


def _svd_ratio(rows):
    """Median of a cell's time over one float64 SVD of its matrix (the cell of the largest
    eps also carries the operator's shared set-up)."""
    r = [float(x["seconds"]) / float(x["svd_seconds"]) for x in rows
         if x.get("svd_seconds", "") not in ("", None) and float(x["svd_seconds"]) > 0]
    return round(float(np.median(r)), 1) if r else None


def _method_family(m: str) -> str:
    return m.split("(")[0].split("/")[0] if m else "(none)"


def cell_diagnostics(r) -> Diagnostics:
    """The cell's :class:`~softrank.certifiers.interface.Diagnostics`: every method's record,
    checker disagreements, the error of an ``error`` cell; empty for a row without them
    (:func:`softrank.audit.record.read_diagnostics`, which raises
    :class:`~softrank.errors.MalformedRecord` on a record that is not softrank's)."""
    return read_diagnostics(r)


def bundle_claim(r) -> str | None:
    """The bundle a cell's own bracket was imported from (docs/store.md), or None: then its
    seconds, its methods' records and its checker disagreements are that bundle's claims,
    not measured by softrank, and stay out of every time and method figure (the report's,
    ``softrank diff``'s)."""
    b = cell_diagnostics(r).reference.get("bundle")
    return str(b) if b else None


def _measured(rows) -> list:
    """The cells whose seconds and method records softrank measured (not a bundle's)."""
    return [r for r in rows if bundle_claim(r) is None]


def _records(r, side: str | None = None) -> list[MethodRecord]:
    return [m for m in cell_diagnostics(r).methods if side is None or m.side == side]


def _ok_rank(r, name: str):
    """Rank of method ``name``'s checked answer in cell ``r``, or None."""
    for m in _records(r):
        if m.name == name and m.status == "ok":
            return m.rank
    return None


def _tsvd_ratio(rows) -> dict:
    """Median of (truncated-SVD rank) / (reported upper end) per family group: how much rank
    the plain SVD wastes against the best construction (seed paper: 1.62x vs alternating l1)."""
    by = defaultdict(list)
    for r in _measured(rows):  # a bundle's method records are its claims
        k = _ok_rank(r, "truncated-svd")
        if k and r["verdict"] != "error" and int(r["upper"]) > 0:
            by[group_key(r)].append(k / int(r["upper"]))
    return {g: round(float(np.median(v)), 3) for g, v in sorted(by.items())}


def _attacks(rows) -> dict:
    """Targeted attacks on the lower certificates (docs/theory/attacks.md): tried, succeeded, how close."""
    att = [r for r in rows if r.get("attack", "") not in ("", None)]
    scored = [r for r in att if r.get("attack_closest", "") != ""]
    closest = [float(r["attack_closest"]) for r in scored]
    near = min(scored, key=lambda r: float(r["attack_closest"])) if scored else None
    secs = [float(r["attack_seconds"]) for r in att if r.get("attack_seconds", "") != ""]
    return {
        "tried": len(att),
        "succeeded": sum(r["attack"] == "SUCCEEDED" for r in att),
        "errors": sum(str(r["attack"]).startswith("error") for r in att),
        "with_failed_methods": sum(r["attack"] == "held(partial)" for r in att),
        "closest_best_error_over_eps": min(closest) if closest else None,
        "closest_cell": (f"{near['operator_id']} eps {near['eps']} (lower {near['lower']})"
                         if near else None),
        "median_best_error_over_eps": round(float(np.median(closest)), 4) if closest else None,
        "seconds_total": round(sum(secs), 1),
        "paper": "0 of 458 succeeded",
    }


def _stage_error_line(errs: dict, cut_short: int) -> str:
    cut = (f"; {cut_short} cells cut short by the time limit (their searches skipped, their "
           "ends checked)" if cut_short else "")
    if not errs:
        return "- stages: every stage ran on every operator" + cut
    return ("- **stage errors** (the stage's columns are empty on those operators; the `stages` "
            "column of brackets.csv has each message): " + "; ".join(
                f"`{n}` on {e['operators']} operators (first: {e['first']})"
                for n, e in errs.items()) + cut)


def stage_errors(rows: list[dict]) -> dict:
    """``{stage: {"operators": n, "first": message}}`` for the stages that raised or broke
    their protocol on some operator (from the ``stages`` column;
    :func:`softrank.audit.record.read_stages`)."""
    out: dict = {}
    seen = set()
    for r in rows:
        if r["operator_id"] in seen:
            continue
        seen.add(r["operator_id"])
        for name, rec in read_stages(r).items():
            if rec.error:
                e = out.setdefault(name, {"operators": 0, "first": rec.error[:300]})
                e["operators"] += 1
    return out


def _solve_device_name() -> str:
    """Where this process runs the reweighted solves: ``cpu``, ``cuda`` (README, *GPU*), or
    ``invalid`` under a ``$SOFTRANK_DEVICE`` that the engine refuses."""
    from ..certifiers.linalg import solve_device
    from ..errors import SoftrankError

    try:
        dev = solve_device()
    except SoftrankError:
        return "invalid"
    return "cpu" if dev is None else str(dev.type)


def summarize(rows: list[dict], panel: str, eps_list, wall_seconds: float, seed: int,
              effort: str = "full") -> dict:
    """The audit summary (JSON-ready); ``effort`` is the run's (:func:`softrank.bracket`)."""
    by = defaultdict(list)
    for r in rows:
        by[(group_key(r), float(r["eps"]))].append(r)
    families = defaultdict(dict)
    for (g, e), rs in sorted(by.items()):
        families[g][f"{e:g}"] = _stats(rs)
    ops = {r["operator_id"] for r in rows}
    all_checked = all(r["lower_check"].startswith("pass") and r["upper_check"].startswith("pass")
                      for r in rows if r["verdict"] != "error")
    from .. import __version__

    return {
        "softrank_version": __version__,
        "panel": panel,
        "seed": seed,
        "eps": [float(e) for e in eps_list],
        "operators": len(ops),
        "cells": len(rows),
        "wall_seconds": round(wall_seconds, 1),
        "cut_short": sum(cell_diagnostics(r).cut_short for r in rows),
        "effort": effort,
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "solve_device": _solve_device_name()},
        "overall": _stats(rows),
        "by_eps": {f"{e:g}": _stats([r for r in rows if float(r["eps"]) == e]) for e in eps_list},
        "families": families,
        "winners": {
            "lower": dict(Counter(_method_family(r["lower_method"]) for r in rows).most_common()),
            "upper": dict(Counter(_method_family(r["upper_method"]) for r in rows).most_common()),
        },
        "certificates": {
            "reported": 2 * sum(r["verdict"] != "error" for r in rows),
            "all_passed_checker": all_checked,
            "float64_interval_disagreements": sum(
                cell_diagnostics(r).checker_disagreements for r in _measured(rows)),
            "interval_backends": dict(Counter(
                c.split("+", 1)[1].split("(")[0] for r in rows
                for c in (r["lower_check"], r["upper_check"]) if "+" in c)),
        },
        "validated": {
            "cells": sum(r.get("validated_rho", "") != "" for r in rows),
            "max_rho": max((float(r["validated_rho"]) for r in rows
                            if r.get("validated_rho", "") != ""), default=None),
        },
        "attacks": _attacks(rows),
        "reference_store": _reference_counts(rows),
        "stage_errors": stage_errors(rows),
        "truncated_svd_vs_best": _tsvd_ratio(rows),
        "constructions": {name: _method_stats(rs) for name, rs in _by_method(rows, "upper").items()},
        "lower_tests": {name: _method_stats(rs) for name, rs in _by_method(rows, "lower").items()},
        "paper": PAPER,
        **({"causal": _causal_summary(rows)} if _causal_rows(rows) else {}),
        **({"frontier": frontier_summary(rows)} if any(r.get("frontier") for r in rows)
           else {}),
    }


def _json_num(v):
    """A median for JSON: ``"inf"`` for an infinite one, None kept, else rounded."""
    if v is None:
        return None
    return "inf" if np.isinf(v) else round(float(v), 6)


def _med(vals):
    vals = [v for v in vals if v is not None]
    return _json_num(float(np.median(vals))) if vals else None


def frontier_summary(rows) -> dict:
    """The audit's frontier bands (``softrank audit --frontier``; docs/theory/frontier.md):
    per family the median lower and upper ends at each rank and each construction's median
    error there; per construction the medians, over operators, of its two scores (excess
    error and excess rank, each an upper bound of the true figure); and the contradictions
    (a band crossing itself, a curve at or below its lower edge), which must be 0."""
    per_op = {}
    for r in rows:
        if r.get("frontier"):
            per_op.setdefault(r["operator_id"], (group_key(r), r["frontier"]))
    fams, cons = defaultdict(list), defaultdict(list)
    contradictions, seconds = [], 0.0
    attacks, closest = {"tried": 0}, []
    for op_id, (g, text) in sorted(per_op.items()):
        d = decode_frontier(text)
        fams[g].append(d)
        seconds += d["seconds"]
        contradictions += [f"{op_id}: lower >= upper at rank {k}" for k in d["unsound"]]
        contradictions += [f"{op_id}: {n} at rank {k} at or below the lower end"
                           for n, k in d["below_band"]]
        att = d.get("attacks", {"tried": 0, "succeeded": [], "closest": None})
        attacks["tried"] += att["tried"]
        if att["closest"] is not None:
            closest.append(att["closest"])
        contradictions += [f"{op_id}: attack found a witness of rank {r - 1} within {e:.6g}"
                           for r, e in att["succeeded"]]
        for name, c in d["curves"].items():
            cons[name].append(c)
    families = {}
    for g, ds in sorted(fams.items()):
        ranks = sorted({k for d in ds for k in d["ranks"]})
        at = [{k: (lo, up) for k, lo, up in zip(d["ranks"], d["lower"], d["upper"])} for d in ds]
        names = sorted({n for d in ds for n in d["curves"]})
        families[g] = {
            "operators": len(ds), "ranks": ranks,
            "median_lower": [_med([a[k][0] for a in at if k in a]) for k in ranks],
            "median_upper": [_med([a[k][1] for a in at if k in a]) for k in ranks],
            "curves": {n: [_med([d["curves"][n]["errors"].get(k) for d in ds
                                 if n in d["curves"]]) for k in ranks] for n in names},
        }
    return {
        "operators": len(per_op),
        "seconds": round(seconds, 1),
        "contradictions": len(contradictions),
        "first_contradictions": contradictions[:5],
        "attacks": {"tried": attacks["tried"],
                    "closest": None if not closest else round(min(closest), 6)},
        "families": families,
        "constructions": {n: {
            "operators": sum(bool(c["errors"]) for c in cs),
            "median_excess_error": _med([c["excess_error"] for c in cs]),
            "median_excess_rank": _med([c["excess_rank"] for c in cs]),
        } for n, cs in sorted(cons.items())},
    }


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


def _causal_rows(rows) -> list[dict]:
    """The rows that carry a bracket of a causal rank (``softrank audit --rank``)."""
    return [r for r in rows if r.get("rank", "") and not r["rank"].startswith("plain")]


def _causal_summary(rows) -> dict:
    """Per family and tolerance: the medians of both brackets, and the causal
    constructions' checked ranks against the causal lower end (docs/theory/causal.md)."""
    sel = _causal_rows(rows)
    by = defaultdict(list)
    for r in sel:
        by[(group_key(r), float(r["eps"]))].append(r)
    fams = defaultdict(dict)
    for (g, e), rs in sorted(by.items()):
        ok = [r for r in rs if r["rank_verdict"] in ("resolved", "open")]
        fams[g][f"{e:g}"] = {
            "cells": len(rs), "bounded": len(ok),
            "resolved": sum(r["rank_verdict"] == "resolved" for r in rs),
            "unsound": sum(r["rank_verdict"] == "unsound" for r in rs),
            "median_lower": _median([int(r["lower"]) for r in ok if r["lower"] != ""], 1),
            "median_upper": _median([int(r["upper"]) for r in ok if r["upper"] != ""], 1),
            "median_rank_lower": _median([int(r["rank_lower"]) for r in ok], 1),
            "median_rank_upper": _median([int(r["rank_upper"]) for r in ok], 1),
        }
    cons = defaultdict(list)
    for r in sel:
        if r["rank_verdict"] not in ("resolved", "open"):
            continue
        for name, k in json.loads(r.get("rank_constructions") or "{}").items():
            cons[name].append((k, int(r["rank_lower"]), int(r["rank_upper"])))
    return {
        "rank": sorted({r["rank"] for r in sel}),
        "cells": len(sel),
        "unsound": sum(r["rank_verdict"] == "unsound" for r in sel),
        "families": fams,
        "constructions": {n: {
            "cells": len(v), "met_eps": sum(k is not None for k, _, _ in v),
            "median_rank": _median([k for k, _, _ in v if k is not None], 1),
            "median_rank_over_lower": _median([k / max(lo, 1) for k, lo, _ in v
                                               if k is not None]),
            "median_rank_over_upper": _median([k / max(up, 1) for k, _, up in v
                                               if k is not None]),
        } for n, v in sorted(cons.items())},
    }


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


def _reference_counts(rows) -> dict:
    """Cells whose own bracket came from the reference store and cells computed (the
    ``reference`` column), the seconds spent reading and checking the stored ones, one line
    per stored entry refused (then computed again) and per computed bracket the store could
    not keep."""
    diags = [(r, cell_diagnostics(r).reference) for r in rows]
    return {
        "from_store": sum(r.get("reference") == "store" for r in rows),
        "computed": sum(r.get("reference") == "computed" for r in rows),
        "without_store": sum(r.get("reference", "") in ("", None) for r in rows),
        "check_seconds": round(sum(float(d.get("check_seconds", 0.0)) for _, d in diags), 2),
        "refused": [f"{r['operator_id']} eps {float(r['eps']):g}: {d['refused']}"
                    for r, d in diags if d.get("refused")],
        "not_kept": [f"{r['operator_id']} eps {float(r['eps']):g}: {d['not_kept']}"
                     for r, d in diags if d.get("not_kept")],
        "from_bundles": dict(Counter(str(d["bundle"]) for _, d in diags if d.get("bundle"))),
    }


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


def _by_method(rows, side: str) -> dict:
    """``{method name: [(cell row, record), ...]}`` over the non-error cells, in the order
    the methods ran; a search not run at ``--effort fast`` is left out (it was not tried)."""
    out: dict = {}
    for r in _measured(rows):  # a bundle's method records are its claims
        if r["verdict"] == "error":
            continue
        for m in _records(r, side):
            if not not_run(m):
                out.setdefault(m.name, []).append((r, m))
    return out


def not_run(record: MethodRecord) -> bool:
    """A method record of a late search that ``--effort fast`` skipped (never tried, unlike
    a search skipped because nothing was left to improve, or past a time limit)."""
    return record.status == "skipped" and record.message == "effort fast"


def _median(v, nd=3):
    return round(float(np.median(v)), nd) if v else None


def _method_stats(pairs) -> dict:
    """One method over its cells: counts by outcome, its checked rank over the cell's
    certified lower end and over the reported upper end (medians), median seconds.

    ``within_eps`` (constructions) and ``certified`` (lower tests) count answers that the
    float64 checker accepted; ``rejected`` those it refused (never reported)."""
    ok = [(r, m) for r, m in pairs if m.status == "ok"]
    st = Counter(m.status for _, m in pairs)
    side = pairs[0][1].side if pairs else "upper"
    out = {
        "origin": pairs[0][1].origin if pairs else "",
        "cells": len(pairs),
        "declined": st["declined"],
        "skipped": st["skipped"],
        "failed": st["failed"],
        ("within_eps" if side == "upper" else "certified"): st["ok"],
        "rejected": st["rejected"],
        "median_rank_over_lower": _median([m.rank / int(r["lower"]) for r, m in ok
                                           if int(r["lower"]) > 0]),
        "median_rank_over_best_upper": _median([m.rank / int(r["upper"]) for r, m in ok
                                                if int(r["upper"]) > 0]),
        "median_seconds": _median([float(m.seconds) for _, m in pairs
                                   if m.status != "skipped"], 4),
    }
    out["reported"] = sum(cell_diagnostics(r).reported.get(side) == m.name for r, m in pairs)
    return out


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
    for n, ps in _by_method(rows, "upper").items():
        v = [(int(r["lower"]), m.rank) for r, m in ps if m.status == "ok" and int(r["lower"]) > 0]
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
        by[(float(r["eps"]), group_key(r))].append(r)
    for e in summary["eps"]:
        trows = []
        for g in sorted({k[1] for k in by if k[0] == e}):
            for n, ps in _by_method(by[(e, g)], "upper").items():
                trows.append([g] + row(n, _method_stats(ps))[:1]
                             + row(n, _method_stats(ps))[2:12])
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
                             f"within eps, below the certified {x.claimed}"
                             + (f" (saved in {x.saved})" if x.saved else "") for x in refs)
        return (f"lower {r['lower']} ({r['lower_method']}) above upper {r['upper']} "
                f"({r['upper_method']})" if int(r["lower"]) > int(r["upper"])
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
    bootstrap resamples; 0 leaves the studies out) in ``out/studies``."""
    import time as _time

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
           "subspace-climb, trust-region, alternating-l1-smooth, alternating-l1-anneal) did "
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
            if base in _PAPER_COMPARE and e == "0.25":
                ref = _PAPER_COMPARE[base]
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

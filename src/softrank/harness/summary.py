"""The audit's summary (``summary.json``): every figure the report, ``softrank diff`` and the
studies read, computed once from the cells.

Beside ours, the seed paper's reference figures (docs/theory/studies.md#reference-figures):
at ``eps = 0.25`` BERT native operators resolved 42.8 % (219 of 512), GPT-2 99.7 %, Qwen2.5
77.1 %, ViT-Base 59.0 / 61.9 %; the median upper/lower ratio was 2.6-3.8 by family. MiniLM
is a BERT-architecture encoder on native operators, so its row is compared with BERT native.
Cells whose own bracket came from a reference bundle keep their ends in every figure and
their seconds and method records (the bundle's claims) out of every time and method figure.

Every function reads cells typed (:func:`softrank.audit.record.read_cell`: ends as ints,
``diagnostics``, ``stages`` and the stages' columns as their types, empty values as None);
:func:`summarize` reads the rows it is given so.
"""

from __future__ import annotations

import platform
from collections import Counter, defaultdict

import numpy as np

from ..audit.record import group_key, read_cells
from ..certifiers.interface import Diagnostics, MethodRecord

__all__ = ["summarize", "PAPER", "PAPER_COMPARE", "cell_diagnostics", "bundle_claim",
           "measured", "records", "ok_rank", "by_method", "not_run", "method_stats",
           "method_family", "family_stats", "frontier_summary", "causal_rows", "stage_errors",
           "json_num", "median_or_none", "median_rounded"]


#: Seed paper, eps = 0.25: resolved share by family (docs/theory/studies.md#reference-figures).
PAPER = {
    "resolved_at_0.25": {"BERT native": 0.428, "GPT-2": 0.997, "Qwen2.5": 0.771,
                         "ViT-Base IN1K": 0.590, "ViT-Base IN21K": 0.619},
    "median_ratio_range": [2.6, 3.8],
    "attacks": {"tried": 458, "succeeded": 0},
}


PAPER_COMPARE = {"minilm": "BERT native"}  # other families: a user's own checkpoints


def family_stats(rows):
    n = len(rows)
    timed = measured(rows)  # a bundle's seconds are its claim
    ok = [r for r in rows if r["verdict"] in ("resolved", "open")]
    ratios = [r["upper"] / r["lower"] for r in ok if r["lower"] > 0]
    return {
        "cells": n,
        "resolved": sum(r["verdict"] == "resolved" for r in rows),
        "resolved_pct": round(100.0 * sum(r["verdict"] == "resolved" for r in rows) / n, 1) if n else 0.0,
        "open": sum(r["verdict"] == "open" for r in rows),
        "unsound": sum(r["verdict"] == "unsound" for r in rows),
        "error": sum(r["verdict"] == "error" for r in rows),
        "median_ratio": round(float(np.median(ratios)), 3) if ratios else None,
        "p90_ratio": round(float(np.percentile(ratios, 90)), 3) if ratios else None,
        "median_lower": float(np.median([r["lower"] for r in ok])) if ok else None,
        "median_upper": float(np.median([r["upper"] for r in ok])) if ok else None,
        "median_seconds": round(float(np.median([r["seconds"] for r in timed])), 3)
        if timed else None,
        "total_seconds": round(float(sum(r["seconds"] for r in timed)), 1),
        "median_seconds_over_svd": _svd_ratio(timed),
        "median_Gamma": _median_field(rows, "Gamma"),
    }


def _median_field(rows, key):
    v = [r[key] for r in rows if r.get(key) is not None]
    return round(float(np.median(v)), 4) if v else None


def _svd_ratio(rows):
    """Median of a cell's time over one float64 SVD of its matrix (the cell of the largest
    eps also carries the operator's shared set-up)."""
    r = [x["seconds"] / x["svd_seconds"] for x in rows
         if x.get("svd_seconds") is not None and x["svd_seconds"] > 0]
    return round(float(np.median(r)), 1) if r else None


def method_family(m: str) -> str:
    return m.split("(")[0].split("/")[0] if m else "(none)"


def cell_diagnostics(r) -> Diagnostics:
    """The cell's :class:`~softrank.certifiers.interface.Diagnostics` (a typed cell's): every
    method's record, checker disagreements, the error of an ``error`` cell; empty for a row
    without them."""
    return r["diagnostics"]


def bundle_claim(r) -> str | None:
    """The bundle a cell's own bracket was imported from (docs/store.md), or None: then its
    seconds, its methods' records and its checker disagreements are that bundle's claims,
    not measured by softrank, and stay out of every time and method figure (the report's,
    ``softrank diff``'s)."""
    b = cell_diagnostics(r).reference.get("bundle")
    return str(b) if b else None


def measured(rows) -> list:
    """The cells whose seconds and method records softrank measured: not a bundle's, nor
    one whose stages never ran (no seconds: a stage that raised, a cell that ended its
    workers)."""
    return [r for r in rows
            if bundle_claim(r) is None and r.get("seconds", 0.0) not in ("", None)]


def records(r, side: str | None = None) -> list[MethodRecord]:
    return [m for m in cell_diagnostics(r).methods if side is None or m.side == side]


def ok_rank(r, name: str):
    """Rank of method ``name``'s checked answer in cell ``r``, or None."""
    for m in records(r):
        if m.name == name and m.status == "ok":
            return m.rank
    return None


def _tsvd_ratio(rows) -> dict:
    """Median of (truncated-SVD rank) / (reported upper end) per family group: how much rank
    the plain SVD wastes against the best construction (seed paper: 1.62x vs alternating l1)."""
    by = defaultdict(list)
    for r in measured(rows):  # a bundle's method records are its claims
        k = ok_rank(r, "truncated-svd")
        if k and r["verdict"] != "error" and r["upper"] > 0:
            by[group_key(r)].append(k / r["upper"])
    return {g: round(float(np.median(v)), 3) for g, v in sorted(by.items())}


def _attacks(rows) -> dict:
    """Targeted attacks on the lower certificates (docs/theory/attacks.md): tried, succeeded, how close."""
    att = [r for r in rows if r.get("attack", "") not in ("", None)]
    scored = [r for r in att if r.get("attack_closest") is not None]
    closest = [r["attack_closest"] for r in scored]
    near = min(scored, key=lambda r: r["attack_closest"]) if scored else None
    secs = [r["attack_seconds"] for r in att if r.get("attack_seconds") is not None]
    return {
        "tried": len(att),
        "succeeded": sum(r["attack"] == "SUCCEEDED" for r in att),
        "errors": sum(str(r["attack"]).startswith("error") for r in att),
        "with_failed_methods": sum(r["attack"] == "held(partial)" for r in att),
        "cut_short": sum(r["attack"] == "held(cut short)" for r in att),
        "closest_best_error_over_eps": min(closest) if closest else None,
        "closest_cell": (f"{near['operator_id']} eps {near['eps']} (lower {near['lower']})"
                         if near else None),
        "median_best_error_over_eps": round(float(np.median(closest)), 4) if closest else None,
        "seconds_total": round(sum(secs), 1),
        "paper": "0 of 458 succeeded",
    }


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
        for name, rec in r["stages"].items():
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
    """The audit summary (JSON-ready) of its cells (rows, read with
    :func:`softrank.audit.record.read_cell`); ``effort`` is the run's
    (:func:`softrank.bracket`)."""
    rows = read_cells(rows)
    families = defaultdict(dict)
    for (g, e), rs in _by_group_and_eps(rows):
        families[g][f"{e:g}"] = family_stats(rs)
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
        "overall": family_stats(rows),
        "by_eps": {f"{e:g}": family_stats([r for r in rows if r["eps"] == e]) for e in eps_list},
        "families": families,
        "winners": {
            "lower": dict(Counter(method_family(r["lower_method"]) for r in rows).most_common()),
            "upper": dict(Counter(method_family(r["upper_method"]) for r in rows).most_common()),
        },
        "certificates": {
            "reported": 2 * sum(r["verdict"] != "error" for r in rows),
            "all_passed_checker": all_checked,
            "float64_interval_disagreements": sum(
                cell_diagnostics(r).checker_disagreements for r in measured(rows)),
            "interval_backends": dict(Counter(
                c.split("+", 1)[1].split("(")[0] for r in rows
                for c in (r["lower_check"], r["upper_check"]) if "+" in c)),
        },
        "validated": {
            "cells": sum(r.get("validated_rho") is not None for r in rows),
            "max_rho": max((r["validated_rho"] for r in rows
                            if r.get("validated_rho") is not None), default=None),
        },
        "attacks": _attacks(rows),
        "reference_store": _reference_counts(rows),
        "stage_errors": stage_errors(rows),
        "truncated_svd_vs_best": _tsvd_ratio(rows),
        "constructions": {name: method_stats(rs) for name, rs in by_method(rows, "upper").items()},
        "lower_tests": {name: method_stats(rs) for name, rs in by_method(rows, "lower").items()},
        "paper": PAPER,
        **({"causal": _causal_summary(rows)} if causal_rows(rows) else {}),
        **({"frontier": frontier_summary(rows)} if any(r.get("frontier") is not None
                                                         for r in rows)
           else {}),
    }


def json_num(v):
    """A median for JSON: ``"inf"`` for an infinite one, None kept, else rounded."""
    if v is None:
        return None
    return "inf" if np.isinf(v) else round(float(v), 6)


def median_or_none(vals):
    vals = [v for v in vals if v is not None]
    return json_num(float(np.median(vals))) if vals else None


def frontier_summary(rows) -> dict:
    """The audit's frontier bands (``softrank audit --frontier``; docs/theory/frontier.md):
    per family the median lower and upper ends at each rank and each construction's median
    error there; per construction the medians, over operators, of its two scores (excess
    error and excess rank, each an upper bound of the true figure); and the contradictions
    (a band crossing itself, a curve at or below its lower edge, a successful attack on a
    certificate behind a lower end; each also refuted through the pipeline), which must be
    0."""
    rows = read_cells(rows)
    per_op = {}
    for r in rows:
        if r.get("frontier") is not None:
            per_op.setdefault(r["operator_id"], (group_key(r), r["frontier"]))
    fams, cons = defaultdict(list), defaultdict(list)
    contradictions, seconds = [], 0.0
    tried, closest = 0, []
    for op_id, (g, band) in sorted(per_op.items()):
        fams[g].append(band)
        seconds += band.seconds
        contradictions += [f"{op_id}: lower >= upper at rank {k}" for k in band.unsound]
        contradictions += [f"{op_id}: {n} at rank {k} at or below the lower end"
                           for n, k in band.below_band]
        contradictions += [f"{op_id}: attack found a witness of rank {k - 1} within {e:.6g}"
                           for k, e in band.attacks_succeeded]
        tried += band.attacks_tried
        if band.attacks_closest is not None:
            closest.append(band.attacks_closest)
        for name, c in band.curves.items():
            cons[name].append(c)
    families = {}
    for g, bands in sorted(fams.items()):
        ranks = sorted({k for b in bands for k in b.ranks})
        at = [{k: (lo, up) for k, lo, up in zip(b.ranks, b.lower, b.upper)} for b in bands]
        names = sorted({n for b in bands for n in b.curves})
        families[g] = {
            "operators": len(bands), "ranks": ranks,
            "median_lower": [median_or_none([a[k][0] for a in at if k in a]) for k in ranks],
            "median_upper": [median_or_none([a[k][1] for a in at if k in a]) for k in ranks],
            "curves": {n: [median_or_none([b.curves[n].errors.get(k) for b in bands
                                           if n in b.curves]) for k in ranks] for n in names},
        }
    return {
        "operators": len(per_op),
        "seconds": round(seconds, 1),
        "contradictions": len(contradictions),
        "first_contradictions": contradictions[:5],
        "attacks": {"tried": tried,
                    "closest": None if not closest else round(min(closest), 6)},
        "families": families,
        "constructions": {n: {
            "operators": sum(bool(c.errors) for c in cs),
            "median_excess_error": median_or_none([c.excess_error for c in cs]),
            "median_excess_rank": median_or_none([c.excess_rank for c in cs]),
        } for n, cs in sorted(cons.items())},
    }


def causal_rows(rows) -> list[dict]:
    """The rows that carry a bracket of a causal rank (``softrank audit --rank``)."""
    return [r for r in rows if r.get("rank", "") and not r["rank"].startswith("plain")]


def _by_group_and_eps(rows) -> list:
    """``[((family group, eps), cells), ...]`` in order of group, then tolerance."""
    by = defaultdict(list)
    for r in rows:
        by[(group_key(r), r["eps"])].append(r)
    return sorted(by.items())


def _causal_summary(rows) -> dict:
    """Per family and tolerance: the medians of both brackets, and the causal
    constructions' checked ranks against the causal lower end (docs/theory/causal.md)."""
    sel = causal_rows(rows)
    fams = defaultdict(dict)
    for (g, e), rs in _by_group_and_eps(sel):
        ok = [r for r in rs if r["rank_verdict"] in ("resolved", "open")]
        fams[g][f"{e:g}"] = {
            "cells": len(rs), "bounded": len(ok),
            "resolved": sum(r["rank_verdict"] == "resolved" for r in rs),
            "unsound": sum(r["rank_verdict"] == "unsound" for r in rs),
            "median_lower": median_rounded([r["lower"] for r in ok if r["lower"] is not None], 1),
            "median_upper": median_rounded([r["upper"] for r in ok if r["upper"] is not None], 1),
            "median_rank_lower": median_rounded([r["rank_lower"] for r in ok], 1),
            "median_rank_upper": median_rounded([r["rank_upper"] for r in ok], 1),
        }
    cons = defaultdict(list)
    for r in sel:
        if r["rank_verdict"] not in ("resolved", "open"):
            continue
        ranks = r.get("rank_constructions")
        for name, k in (ranks.as_dict() if ranks is not None else {}).items():
            cons[name].append((k, r["rank_lower"], r["rank_upper"]))
    return {
        "rank": sorted({r["rank"] for r in sel}),
        "cells": len(sel),
        "unsound": sum(r["rank_verdict"] == "unsound" for r in sel),
        "families": fams,
        "constructions": {n: {
            "cells": len(v), "met_eps": sum(k is not None for k, _, _ in v),
            "median_rank": median_rounded([k for k, _, _ in v if k is not None], 1),
            "median_rank_over_lower": median_rounded([k / max(lo, 1) for k, lo, _ in v
                                               if k is not None]),
            "median_rank_over_upper": median_rounded([k / max(up, 1) for k, _, up in v
                                               if k is not None]),
        } for n, v in sorted(cons.items())},
    }


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
        "refused": [f"{r['operator_id']} eps {r['eps']:g}: {d['refused']}"
                    for r, d in diags if d.get("refused")],
        "not_kept": [f"{r['operator_id']} eps {r['eps']:g}: {d['not_kept']}"
                     for r, d in diags if d.get("not_kept")],
        "from_bundles": dict(Counter(str(d["bundle"]) for _, d in diags if d.get("bundle"))),
    }


def by_method(rows, side: str) -> dict:
    """``{method name: [(cell row, record), ...]}`` over the non-error cells, in the order
    the methods ran; a search not run at ``--effort fast`` is left out (it was not tried)."""
    out: dict = {}
    for r in measured(rows):  # a bundle's method records are its claims
        if r["verdict"] == "error":
            continue
        for m in records(r, side):
            if not not_run(m):
                out.setdefault(m.name, []).append((r, m))
    return out


def not_run(record: MethodRecord) -> bool:
    """A method record of a late search that ``--effort fast`` skipped (never tried, unlike
    a search skipped because nothing was left to improve, or past a time limit)."""
    return record.status == "skipped" and record.message == "effort fast"


def median_rounded(v, nd=3):
    return round(float(np.median(v)), nd) if v else None


def method_stats(pairs) -> dict:
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
        "median_rank_over_lower": median_rounded([m.rank / r["lower"] for r, m in ok
                                                  if r["lower"] > 0]),
        "median_rank_over_best_upper": median_rounded([m.rank / r["upper"] for r, m in ok
                                                       if r["upper"] > 0]),
        "median_seconds": median_rounded([float(m.seconds) for _, m in pairs
                                   if m.status != "skipped"], 4),
    }
    out["reported"] = sum(cell_diagnostics(r).reported.get(side) == m.name for r, m in pairs)
    return out

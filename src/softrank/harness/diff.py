"""``softrank diff``: regression benchmarking of brackets between two audits.

Two audits of the same panel (two commits, or before and after a change to a certifier)
are joined cell by cell on ``(operator_id, eps)``. An end is *better* when it moved towards
``r_eps``: a higher lower end or a lower upper end; *worse* when it moved away. A cell that
became ``error`` or ``unsound`` counts both its ends as worse (it reports no bracket); a cell
that stopped being one counts them as better. The summed gap is taken over the cells with a
bracket in both audits. Per method (construction or lower test, from the
audit's ``diagnostics`` records) the change in the cells it answered, its median rank and
its median time is reported; per family group, the ends that moved, the summed gap
``upper - lower`` and the time.

The comparison refuses two audits of different panels: different tolerances, different
operator ids, or an operator whose matrix differs (its content hash in the run's ledger).
Settings that do not change which matrices are bracketed (extra certifiers, attacks,
validation, the cell time limit) may differ; the report lists them.

In the manner of ``asv compare`` and pytest-benchmark's ``--benchmark-compare-fail``: the
exit status is 1 when more ends got worse than allowed (``--allow-worse``, default 0) or
when the checker rejected more answers of some method in B than in A, so a CI job can gate
on it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..audit.record import cell_key, group_key, read_cell
from ..errors import InvalidArgumentError, MalformedRecord
from .summary import bundle_claim, frontier_summary, not_run
from .ledger import normal_identity, read_csv, read_ledger, read_summary

__all__ = ["Audit", "load_audit", "diff_audits", "render_markdown", "verdict"]

#: identity fields that decide which cells and matrices an audit brackets
_PANEL_FIELDS = ("eps", "operators")


@dataclass
class Audit:
    """One audit's cells as :func:`diff_audits` reads them.

    Attributes
    ----------
    path : Path
        The directory (or ``brackets.csv``) given.
    rows : dict
        ``(operator_id, eps) -> row``: the ``brackets.csv`` columns, typed by
        :func:`softrank.audit.record.read_cell`.
    identity : dict or None
        The run identity stored in ``ledger.sqlite`` (None for a bare ``brackets.csv``).
    summary : dict
        ``summary.json`` beside it, if any (panel name, softrank version).
    """

    path: Path
    rows: dict
    identity: dict | None = None
    summary: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        panel = (self.identity or {}).get("panel") or self.summary.get("panel") or "?"
        version = self.summary.get("softrank_version")
        return f"{self.path} (panel {panel}" + (f", softrank {version})" if version else ")")


def _cell(r: dict, arg: str, where: str) -> tuple[tuple, dict]:
    """One cell read and validated (:func:`softrank.audit.record.read_cell`): its key and
    its typed row."""
    try:
        c = read_cell(r)
    except MalformedRecord as exc:
        op, eps = r.get("operator_id", "?"), r.get("eps", "?")
        raise InvalidArgumentError(f"{arg}: malformed cell {op} at eps {eps} in {where}: "
                                   f"{exc}") from None
    return cell_key(c), c


def load_audit(path, arg: str = "audit") -> Audit:
    """Read an audit: a directory written by ``softrank audit`` (its ``ledger.sqlite``; its
    ``brackets.csv`` when there is no ledger) or a ``brackets.csv`` file (with the ledger
    beside it, when there is one, for the matrices' hashes).

    Every cell is validated: ends that fit the verdict, numeric seconds, diagnostics that
    are softrank's records. A ``brackets.csv`` beside a ledger must hold the ledger's ends
    (an edited export is refused rather than silently ignored).

    Raises
    ------
    InvalidArgumentError
        If ``path`` holds no audit, the audit is unfinished, a file is unreadable or a cell
        is malformed; ``arg`` names the argument in the message.
    """
    p = Path(path)
    if not str(path) or not p.exists():
        raise InvalidArgumentError(f"{arg}: {str(path)!r} does not exist")
    d = p if p.is_dir() else p.parent
    ledger, csv_path = d / "ledger.sqlite", (d / "brackets.csv" if p.is_dir() else p)
    if p.is_dir() and not ledger.is_file() and not csv_path.is_file():
        raise InvalidArgumentError(f"{arg}: {str(p)!r} holds no softrank audit (no "
                                   "ledger.sqlite or brackets.csv)")
    summary = read_summary(d)
    identity, rows = None, None
    if ledger.is_file():
        identity, rows, status = read_ledger(ledger, arg)
        if status != "complete":
            raise InvalidArgumentError(
                f"{arg}: the audit in {str(d)!r} is unfinished ({len(rows)} cells stored; "
                "still running, or interrupted); let it finish, or finish it with softrank "
                "audit --resume, first")
    exported = read_csv(csv_path, arg) if csv_path.is_file() else None
    if rows is None:
        rows = exported
    where = str(ledger if rows is not exported else csv_path)
    cells = {}
    for r in rows:
        key, c = _cell(r, arg, where)
        if key in cells:
            raise InvalidArgumentError(f"{arg}: cell {key[0]} at eps {key[1]:g} appears twice "
                                       f"in {where}")
        cells[key] = c
    if not cells:
        raise InvalidArgumentError(f"{arg}: {str(p)!r} holds no cells")
    if exported is not None and rows is not exported:
        mismatch = None if len(exported) == len(cells) else (
            f"{len(exported)} cells in the CSV, {len(cells)} in the ledger")
        for r in exported if mismatch is None else []:
            try:
                c = read_cell(r)
                key = cell_key(c)
                same = key in cells and (c["lower"], c["upper"], c["verdict"]) == (
                    cells[key]["lower"], cells[key]["upper"], cells[key]["verdict"])
            except (KeyError, MalformedRecord):
                same = False
            if not same:
                mismatch = f"cell {r.get('operator_id')} at eps {r.get('eps')}"
                break
        if mismatch:
            raise InvalidArgumentError(
                f"{arg}: {str(csv_path)!r} does not match the ledger beside it ({mismatch}): "
                "an edited or stale export; compare the audit directory, or move the CSV away "
                "from the ledger")
    return Audit(p, cells, identity, summary)


def _few(items, k=3) -> str:
    items = sorted(items)
    return ", ".join(map(str, items[:k])) + (f", ... ({len(items)} in all)" if len(items) > k else "")


def _same_panel(a: Audit, b: Audit) -> list[str]:
    """Settings that differ but do not change the cells (listed in the report); raises if
    the two audits bracket different cells or matrices."""
    ea = sorted({k[1] for k in a.rows})
    eb = sorted({k[1] for k in b.rows})
    if ea != eb:
        raise InvalidArgumentError(f"audits of different panels: tolerances differ (A: {ea}, "
                                   f"B: {eb})")
    oa = {k[0] for k in a.rows}
    ob = {k[0] for k in b.rows}
    if oa != ob:
        parts = []
        if oa - ob:
            parts.append(f"{len(oa - ob)} only in A ({_few(oa - ob)})")
        if ob - oa:
            parts.append(f"{len(ob - oa)} only in B ({_few(ob - oa)})")
        raise InvalidArgumentError("audits of different panels: operators differ: "
                                   + "; ".join(parts))
    missing = set(a.rows) ^ set(b.rows)
    if missing:
        op, e = sorted(missing)[0]
        raise InvalidArgumentError(f"audits of different panels: {len(missing)} cells are in "
                                   f"one audit only (e.g. {op} at eps {e:g})")
    notes = []
    if a.identity is not None and b.identity is not None:
        ha = dict(s.rsplit(":", 1) for s in a.identity.get("operators", []))
        hb = dict(s.rsplit(":", 1) for s in b.identity.get("operators", []))
        changed = sorted(k for k in ha.keys() & hb.keys() if ha[k] != hb[k])
        if changed:
            raise InvalidArgumentError(
                f"audits of different panels: {len(changed)} operators have different matrices "
                f"under the same id (content hashes differ), e.g. {changed[0]} "
                f"({ha[changed[0]][:12]} in A, {hb[changed[0]][:12]} in B)")
        ia, ib = normal_identity(a.identity), normal_identity(b.identity)
        for k in sorted(set(ia) | set(ib)):
            if k in _PANEL_FIELDS:
                continue
            va, vb = ia.get(k), ib.get(k)
            if va != vb:
                notes.append(f"{k}: {va!r} in A, {vb!r} in B")
    else:
        notes.append("matrix hashes not compared (an audit without its ledger.sqlite): cells "
                     "matched by operator id and eps only")
        ea, eb = _cells_effort(a), _cells_effort(b)
        if ea != eb:
            notes.append(f"effort (from the cells' diagnostics): {ea!r} in A, {eb!r} in B")
    return notes


def _cells_effort(audit: Audit) -> str:
    """``"fast"`` if the late searches were skipped at ``--effort fast`` in every cell with
    a bracket, ``"full"`` if in none, ``"mixed"`` otherwise (an audit without its ledger)."""
    fast = [any(not_run(m) for m in r["diagnostics"].methods)
            for r in audit.rows.values() if r.get("verdict") != "error"]
    return "fast" if fast and all(fast) else "full" if not any(fast) else "mixed"


def _method_table(a: Audit, b: Audit) -> list[dict]:
    """Per method (name, side): cells run and answered, median rank and seconds in A and B,
    the paired rank changes on cells both answered, rejected and failed answers."""
    recs = {"A": defaultdict(dict), "B": defaultdict(dict)}
    claimed = _claimed(a, b)
    for tag, audit in (("A", a), ("B", b)):
        for key, r in audit.rows.items():
            if key in claimed:  # a bundle's method records: its claims, in neither column
                continue
            for m in r["diagnostics"].methods:
                if not not_run(m):  # a late search skipped at --effort fast was not run
                    recs[tag][(m.name, m.side)][key] = m
    out = []
    for name, side in sorted(set(recs["A"]) | set(recs["B"]), key=lambda t: (t[1], t[0])):
        ra, rb = recs["A"].get((name, side), {}), recs["B"].get((name, side), {})

        def ok_ranks(rs):
            return {k: m.rank for k, m in rs.items() if m.status == "ok" and m.rank is not None}

        oa, ob = ok_ranks(ra), ok_ranks(rb)
        both = oa.keys() & ob.keys()
        sign = 1 if side == "upper" else -1
        better = sum(sign * (oa[k] - ob[k]) > 0 for k in both)
        worse = sum(sign * (oa[k] - ob[k]) < 0 for k in both)

        def med(vals):
            return float(np.median(vals)) if vals else None

        def count(rs, status):
            return sum(m.status == status for m in rs.values())

        out.append({
            "name": name, "side": side,
            "cells": [len(ra), len(rb)],
            "answered": [len(oa), len(ob)],
            "rejected": [count(ra, "rejected"), count(rb, "rejected")],
            "failed": [count(ra, "failed"), count(rb, "failed")],
            "median_rank": [med(list(oa.values())), med(list(ob.values()))],
            "median_seconds": [med([m.seconds for m in ra.values()]),
                               med([m.seconds for m in rb.values()])],
            "paired_cells": len(both), "rank_better": better, "rank_worse": worse,
        })
    return out


def _claimed(a: Audit, b: Audit) -> set:
    """The cells whose own bracket came from a bundle in A or in B (docs/store.md): their
    seconds and method records are the bundle's claims, so they are compared in neither
    audit (the ends are checked, and compared as always)."""
    return {k for audit in (a, b) for k, r in audit.rows.items() if bundle_claim(r)}


def _float(v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _bounded(verdict: str) -> bool:
    """A cell whose ends are a bracket (an error reports none; an unsound cell's ends
    contradict each other, so neither is trusted)."""
    return verdict in ("resolved", "open")


def diff_audits(a: Audit, b: Audit) -> dict:
    """Compare two audits of the same panel, cell by cell (JSON-ready).

    A cell that is ``error`` or ``unsound`` has no bracket: one that became so counts both
    ends as worse, one that stopped being so both ends as better. The summed gap is taken
    over the cells with a bracket in both audits, so that a cell that breaks cannot make it
    smaller.

    Returns
    -------
    dict
        ``summary`` (cells, ends better/worse, cells better/worse/mixed/unchanged, summed gap,
        resolved, unsound and error counts, answers rejected by the checker, brackets time),
        ``worse`` and ``better`` (the cells whose ends moved, largest change first, with the
        methods that reported them), ``groups`` (per family group) and ``methods`` (per
        construction and lower test), ``settings`` (identity fields that differ).

    Raises
    ------
    InvalidArgumentError
        If the audits bracket different cells or matrices; the message names what differs.
    """
    settings = _same_panel(a, b)
    claimed = _claimed(a, b)
    cells = []
    for key in sorted(a.rows, key=lambda k: (k[0], k[1])):
        ra, rb = a.rows[key], b.rows[key]
        ba, bb = _bounded(ra["verdict"]), _bounded(rb["verdict"])
        if not ba and not bb:
            dl = du = 0
        elif not ba or not bb:  # no bracket on one side: both ends count
            dl = du = 1 if not ba else -1
        else:
            dl = (rb["lower"] > ra["lower"]) - (rb["lower"] < ra["lower"])
            du = (rb["upper"] < ra["upper"]) - (rb["upper"] > ra["upper"])
        size = (abs(rb["lower"] - ra["lower"]) + abs(rb["upper"] - ra["upper"])
                if ba and bb else math.inf)
        cells.append({
            "operator_id": key[0], "eps": key[1], "group": group_key(ra),
            "lower": [ra["lower"], rb["lower"]], "upper": [ra["upper"], rb["upper"]],
            "verdict": [ra["verdict"], rb["verdict"]],
            "lower_method": [ra.get("lower_method", ""), rb.get("lower_method", "")],
            "upper_method": [ra.get("upper_method", ""), rb.get("upper_method", "")],
            "seconds": ([None, None] if key in claimed  # a bundle's claim: not a time
                        else [_float(ra.get("seconds")), _float(rb.get("seconds"))]),
            "lower_change": dl, "upper_change": du, "size": size,
        })

    def stats(cs) -> dict:
        both = [c for c in cs if _bounded(c["verdict"][0]) and _bounded(c["verdict"][1])]
        secs = [[c["seconds"][i] for c in cs if c["seconds"][i] is not None] for i in (0, 1)]
        ratios = [c["seconds"][1] / c["seconds"][0] for c in cs
                  if c["seconds"][0] and c["seconds"][1] is not None]
        return {
            "cells": len(cs),
            "lower_better": sum(c["lower_change"] > 0 for c in cs),
            "lower_worse": sum(c["lower_change"] < 0 for c in cs),
            "upper_better": sum(c["upper_change"] > 0 for c in cs),
            "upper_worse": sum(c["upper_change"] < 0 for c in cs),
            "gap_cells": len(both),
            "summed_gap": [sum(c["upper"][i] - c["lower"][i] for c in both) for i in (0, 1)],
            "resolved": [sum(c["verdict"][i] == "resolved" for c in cs) for i in (0, 1)],
            "seconds": [round(sum(secs[i]), 3) for i in (0, 1)],
            "median_seconds_ratio": round(float(np.median(ratios)), 4) if ratios else None,
        }

    s = stats(cells)
    worse = [c for c in cells if c["lower_change"] < 0 or c["upper_change"] < 0]
    better = [c for c in cells if (c["lower_change"] > 0 or c["upper_change"] > 0)
              and not (c["lower_change"] < 0 or c["upper_change"] < 0)]
    worse.sort(key=lambda c: (-c["size"], c["operator_id"], c["eps"]))
    better.sort(key=lambda c: (-c["size"], c["operator_id"], c["eps"]))
    methods = _method_table(a, b)
    rejected = [sum(m["rejected"][i] for m in methods) for i in (0, 1)]
    s.update({
        "ends_worse": s["lower_worse"] + s["upper_worse"],
        "ends_better": s["lower_better"] + s["upper_better"],
        "cells_worse": len(worse),
        "cells_mixed": sum(c["lower_change"] > 0 or c["upper_change"] > 0 for c in worse),
        "cells_better": len(better),
        "cells_unchanged": len(cells) - len(worse) - len(better),
        "unsound": [sum(c["verdict"][i] == "unsound" for c in cells) for i in (0, 1)],
        "errors": [sum(c["verdict"][i] == "error" for c in cells) for i in (0, 1)],
        "rejected_answers": rejected,
        "more_rejected": [m["name"] for m in methods if m["rejected"][1] > m["rejected"][0]],
        "bundle_cells": len(claimed),
    })
    groups = defaultdict(list)
    for c in cells:
        groups[c["group"]].append(c)
    for c in cells:
        if c["size"] == math.inf:
            c["size"] = None  # JSON has no infinity
    return {
        "a": {"path": str(a.path), "label": a.label},
        "b": {"path": str(b.path), "label": b.label},
        "settings": settings,
        "summary": s,
        "groups": {g: stats(cs) for g, cs in sorted(groups.items())},
        "worse": worse,
        "better": better,
        "methods": methods,
        **({"frontier": fr} if (fr := _frontier_table(a, b)) else {}),
    }


def _frontier_table(a: Audit, b: Audit) -> dict | None:
    """The two audits' frontier scores side by side (``softrank audit --frontier``), per
    construction: operators with a curve, median excess error, median excess rank; and the
    contradictions of each. None when neither audit has bands."""
    sums = [frontier_summary(list(x.rows.values()))
            if any(r.get("frontier") for r in x.rows.values()) else None for x in (a, b)]
    if sums == [None, None]:
        return None
    names = sorted({n for f in sums if f for n in f["constructions"]})

    def pick(f, n, key):
        return None if f is None else f["constructions"].get(n, {}).get(key)

    return {
        "contradictions": [None if f is None else f["contradictions"] for f in sums],
        "constructions": {n: {key: [pick(f, n, key) for f in sums]
                              for key in ("operators", "median_excess_error",
                                          "median_excess_rank")} for n in names},
    }


def verdict(d: dict, allow_worse: int = 0) -> tuple[bool, str]:
    """``(passed, reason)``: fails when more ends got worse than ``allow_worse``, when
    the checker rejected more answers of some method in B than in A (a certifier that
    started to produce invalid witnesses or certificates), or when B's frontier bands have
    more contradictions than A's."""
    s = d["summary"]
    reasons = []
    if s["ends_worse"] > allow_worse:
        reasons.append(f"{s['ends_worse']} ends worse (allowed {allow_worse})")
    if s["more_rejected"]:
        reasons.append("more answers rejected by the checker in B: "
                       + ", ".join(s["more_rejected"]))
    fc = d.get("frontier", {}).get("contradictions", [None, None])
    if (fc[1] or 0) > (fc[0] or 0):
        reasons.append(f"{fc[1]} frontier contradictions in B (A: {fc[0] or 0})")
    if reasons:
        return False, "; ".join(reasons)
    return True, f"{s['ends_worse']} ends worse (allowed {allow_worse}), no new rejections"


# ---------------------------------------------------------------------------- markdown

def _arrow(pair, fmt="{}") -> str:
    x, y = pair
    fx = "-" if x is None else fmt.format(x)
    fy = "-" if y is None else fmt.format(y)
    return fx if fx == fy else f"{fx} -> {fy}"


def _pct(x, y) -> str:
    if not x or x == y:
        return ""
    return f" ({100.0 * (y - x) / x:+.1f} %)"


def _ratio(x, y) -> str:
    return f"{y / x:.2f}x" if x and y is not None else "-"


def _table(headers, rows) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(v) for v in r) + " |" for r in rows]
    return out


def _end(c, side) -> str:
    v = c[side]
    mark = {1: " (better)", -1: " (**worse**)", 0: ""}[c[f"{side}_change"]]
    return _arrow(v) + mark


def _plural(n, word) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _cell_rows(cs, limit):
    rows = []
    for c in cs[:limit]:
        methods = []
        for side in ("lower", "upper"):
            methods.append(f"{side}: {_arrow([m or '-' for m in c[f'{side}_method']])}")
        rows.append([c["operator_id"], f"{c['eps']:g}", _end(c, "lower"), _end(c, "upper"),
                     _arrow(c["verdict"]), "; ".join(methods)])
    return rows


def render_markdown(d: dict, allow_worse: int = 0, limit: int = 50) -> str:
    """The comparison as Markdown (what ``softrank diff`` prints)."""
    s = d["summary"]
    L = ["# softrank diff", "", f"- A: {d['a']['label']}", f"- B: {d['b']['label']}"]
    for note in d["settings"]:
        L.append(f"- differs: {note}")
    g0, g1 = s["summed_gap"]
    ratio = s["median_seconds_ratio"]
    L += ["", "## Summary", "",
          f"- cells: {s['cells']}: {s['cells_better']} better, {s['cells_worse']} worse"
          f"{' (' + str(s['cells_mixed']) + ' of them mixed)' if s['cells_mixed'] else ''}, "
          f"{s['cells_unchanged']} unchanged",
          f"- ends better: {s['ends_better']} (lower {s['lower_better']}, upper "
          f"{s['upper_better']}); ends worse: {s['ends_worse']} (lower {s['lower_worse']}, "
          f"upper {s['upper_worse']})",
          f"- summed gap (upper - lower) over the {s['gap_cells']} cells with a bracket in "
          f"both: {_arrow((g0, g1))}{_pct(g0, g1)}",
          f"- resolved: {_arrow(s['resolved'])}; unsound: {_arrow(s['unsound'])}; errors: "
          f"{_arrow(s['errors'])}; answers rejected by the checker: "
          f"{_arrow(s['rejected_answers'])}",
          f"- time: sum of the cells' seconds {_arrow(s['seconds'], '{:.1f} s')}"
          f"{_pct(*s['seconds'])}; median over cells of the ratio B/A: "
          f"{'-' if ratio is None else format(ratio, '.3g') + 'x'} (per-cell work, not the "
          "audits' wall time)"]
    if s.get("bundle_cells"):
        L.append(f"- {s['bundle_cells']} cells took their own bracket from a reference bundle "
                 "in A or B: their ends are checked and compared, their seconds and method "
                 "records are the bundle's claims and are compared in neither (time, "
                 "rejections)")
    passed, reason = verdict(d, allow_worse)
    L += ["", f"**{'PASS' if passed else 'FAIL'}**: {reason}"]
    heads = ["operator", "eps", "lower", "upper", "verdict", "reported by"]
    for title, cs in (("Worse", d["worse"]), ("Better", d["better"])):
        if not cs:
            continue
        L += ["", f"## {title} ({_plural(len(cs), 'cell')}, largest change first)", ""]
        L += _table(heads, _cell_rows(cs, limit))
        if len(cs) > limit:
            L.append(f"\n... {len(cs) - limit} more (--limit, or --json for all)")
    L += ["", "## By group", ""]
    rows = []
    for g, st in d["groups"].items():
        a0, a1 = st["summed_gap"]
        rows.append([g, st["cells"], f"+{st['lower_better']} / -{st['lower_worse']}",
                     f"+{st['upper_better']} / -{st['upper_worse']}",
                     _arrow((a0, a1)) + _pct(a0, a1), _arrow(st["resolved"]),
                     _arrow(st["seconds"], "{:.1f}"),
                     "-" if st["median_seconds_ratio"] is None
                     else f"{st['median_seconds_ratio']:.3g}x"])
    L += _table(["group", "cells", "lower better / worse", "upper better / worse",
                 "summed gap", "resolved", "seconds (sum)", "median cell ratio B/A"], rows)
    if d["methods"]:
        for side, title in (("upper", "Constructions"), ("lower", "Lower tests")):
            ms = [m for m in d["methods"] if m["side"] == side]
            if not ms:
                continue
            L += ["", f"## {title}", "",
                  "Per method, from the audits' diagnostics: cells it ran in, cells it answered "
                  "with a checked result, its median rank over them, its median time per cell "
                  "(and the ratio of the two medians), on the cells both audits answered how "
                  "often its rank got better or worse, and answers the checker rejected or "
                  "that raised.", ""]
            rows = []
            for m in ms:
                t = m["median_seconds"]
                rows.append([m["name"], _arrow(m["cells"]), _arrow(m["answered"]),
                             _arrow(m["median_rank"], "{:g}"),
                             (_arrow(t, "{:.3g}") + " s") if t[0] is not None
                             or t[1] is not None else "-",
                             _ratio(*t),
                             f"{m['rank_better']} / {m['rank_worse']} of {m['paired_cells']}",
                             _arrow(m["rejected"]), _arrow(m["failed"])])
            L += _table(["method", "cells", "answered", "median rank", "median time",
                         "median time B/A", "rank better / worse", "rejected", "failed"], rows)
    elif s.get("bundle_cells") == s["cells"]:
        L += ["", "(no per-method records compared: every cell's own bracket came from a "
                  "reference bundle in A or B, whose method records are its claims)"]
    else:
        L += ["", "(no per-method records: audits older than the diagnostics column)"]
    if d.get("frontier"):
        f = d["frontier"]

        def score(v):
            return "-" if v is None else str(v) if v == "inf" else f"{v:.3g}x"

        L += ["", "## Frontier scores", "",
              "Per construction, from the audits' frontier bands (`softrank audit --frontier`; "
              "medians over operators; lower is better, both upper bounds of the true "
              "figures): operators with a curve, excess error (error / the band's lower end), "
              "excess rank (rank / the least rank the band allows at its error). "
              f"Contradictions: {_arrow(f['contradictions'])}.", ""]
        L += _table(["construction", "operators", "excess error", "excess rank"],
                    [[n, _arrow(v["operators"]),
                      f"{score(v['median_excess_error'][0])} -> "
                      f"{score(v['median_excess_error'][1])}",
                      f"{score(v['median_excess_rank'][0])} -> "
                      f"{score(v['median_excess_rank'][1])}"]
                     for n, v in f["constructions"].items()])
    return "\n".join(L) + "\n"

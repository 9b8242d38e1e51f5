"""The expected cost of an audit, printed before its first cell (docs/benchmarks.md, *The
paper panel*).

An estimate, said with the word "about" and its source, never a limit: the audit runs every
cell whatever it says. A cell costs the median seconds of a cell at the operator's *width*
``max(m, N)``, read off a curve through measured widths (:func:`seconds_at`: log-log
interpolation between them, the slope of the last two beyond them). The measured widths are

* the reference store's, where it holds entries of this engine, effort and validation for
  at least :data:`MIN_STORE_OPERATORS` of the panel's operators at that width: the median
  of their recorded ``seconds`` (the time the cell took when it was computed; entries
  imported from a bundle are counted as stored, their seconds, another machine's, are not
  used). Operators, not cells: the cells of one operator are alike, and an interrupted run
  of the ``paper`` panel left 6 entries of 2 width-512 heads whose median, 72 s, would
  have put the run at 65 core-hours instead of 361 (docs/benchmarks.md). The store's
  medians lean low all the same where it holds the first cells of a run: those that
  finished first;
* else :data:`CELL_SECONDS`, measured on MiniLM heads at effort full on a 2-core machine
  (docs/benchmarks.md gives the machine, the date and the commands), times
  :data:`FAST_FACTOR` at effort fast.

A cell already in the store costs its check instead (:data:`CHECK_SECONDS`, by width, read
the same way), a cell a resumed run finished nothing. What the seconds leave out: the
attack on each lower certificate and extra stages (about 5 % on the default panel), loading
the operators, and the idle cores at a run's end.
"""

from __future__ import annotations

import json
import math
import os
import stat
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidArgumentError
from ..validation import check_positive
from ..refstore.layout import ENTRY_FORMAT, IMPORTED_NAME, MAX_RECORD_BYTES, eps_name, is_seconds

__all__ = ["Cost", "WidthMedian", "expected_cost", "seconds_at", "CELL_SECONDS",
           "CHECK_SECONDS", "FAST_FACTOR", "MIN_STORE_OPERATORS"]

#: Median seconds of one cell computed at effort full, by width, on MiniLM heads (one core
#: per cell, 2 cells at once on a 2-core machine, 2026-12-06; docs/benchmarks.md, *The
#: paper panel*): widths 64 and 128 from the default panel's audit (216 cells each, all
#: three tolerances), 256 from 7 heads at eps 0.25, 512 from 6 heads at eps 0.25 of which 3
#: had not finished after 13 to 17 minutes, so that 520 s is a lower bound of its median.
CELL_SECONDS = {64: 1.32, 128: 3.13, 256: 22.0, 512: 520.0}

#: Seconds of a cell at effort fast over effort full: the median of the per-cell ratios on
#: the quick panel's 27 MiniLM cells (width 64; docs/benchmarks.md, *The paper panel*).
FAST_FACTOR = 0.21

#: Median seconds to read one stored cell back and check its two certificates again
#: (:meth:`softrank.refstore.store.ReferenceStore.read`), by width, on the same machine
#: (docs/benchmarks.md, *The paper panel*).
CHECK_SECONDS = {64: 0.02, 128: 0.06, 256: 0.2, 512: 0.5}

#: Operators with stored entries at one width from which their median replaces the
#: table's.
MIN_STORE_OPERATORS = 5

#: The floor of a median, in seconds: a log-log curve needs positive values.
_FLOOR = 1e-3


@dataclass(frozen=True)
class WidthMedian:
    """One measured point of the cost curve.

    Attributes
    ----------
    width : int
        ``max(m, N)`` of the operators.
    seconds : float
        Median seconds of a computed cell at that width (> 0).
    source : str
        ``"store"`` (the median of ``cells`` stored entries' seconds) or ``"table"``
        (:data:`CELL_SECONDS`, times :data:`FAST_FACTOR` at effort fast).
    cells, operators : int
        Stored entries behind a ``"store"`` median, and the operators they are of
        (>= :data:`MIN_STORE_OPERATORS`); 0 for the table.
    """

    width: int
    seconds: float
    source: str
    cells: int = 0
    operators: int = 0

    def label(self) -> str:
        """``64: 1.3 s [store, 216 cells]`` or ``512: 310 s [table]``."""
        where = f"store, {self.cells:,} cells" if self.source == "store" else "table"
        return f"{self.width}: {_seconds(self.seconds)} [{where}]"


@dataclass(frozen=True)
class Cost:
    """The expected cost of an audit (:func:`expected_cost`).

    Attributes
    ----------
    operators, tolerances : int
        The panel's operators and tolerances.
    cells : int
        ``operators x tolerances``.
    finished : int
        Cells a resumed run's ledger holds (not run again, cost nothing).
    stored : int
        Other cells whose entry is in the reference store (read back and checked).
    effort : str
        ``"full"`` or ``"fast"``.
    core_seconds : float
        Expected seconds of one core over every cell to run: computed cells at the curve's
        median, stored cells at their check time.
    check_seconds : float
        The part of ``core_seconds`` that checks stored cells.
    medians : tuple of WidthMedian
        The curve's measured points, by width.
    capped : int
        Computed cells whose curve value is above ``cell_timeout``, counted at it.
    cell_timeout : float or None
        The audit's time limit per cell (``--cell-timeout``), None without one.
    """

    operators: int
    tolerances: int
    cells: int
    finished: int
    stored: int
    effort: str
    core_seconds: float
    check_seconds: float
    medians: tuple
    capped: int = 0
    cell_timeout: float | None = None

    @property
    def to_compute(self) -> int:
        """Cells neither finished nor stored."""
        return self.cells - self.finished - self.stored

    def line(self, cores: int | None = None) -> str:
        """The line ``softrank audit`` prints before its first cell.

        Parameters
        ----------
        cores : int, optional
            Cores that run cells at once here: the line adds the wall time on them, and
            the way to a cluster where that is over an hour. None (a cluster of unknown
            size): core time only.

        Returns
        -------
        str
            One line, e.g. ``expected cost: 10,029 cells (3,343 operators x 3 tolerances),
            537 already in the reference store; about 1,800 core-hours at effort full
            (median seconds of a cell by width: 64: 1.3 s [store, 216 cells], ...; table
            measured on a 2-core machine, docs/benchmarks.md) -- about 900 h on 2 cores
            here; ...``.

        Raises
        ------
        InvalidArgumentError
            ``cores`` is not None or an integer >= 1.
        """
        if cores is not None and (isinstance(cores, bool) or not isinstance(cores, int)
                                  or cores < 1):
            raise InvalidArgumentError(f"cores: expected an integer >= 1 or None, got {cores!r}")
        done = []
        if self.finished:
            done.append(f"{self.finished:,} finished in the ledger")
        if self.stored:
            done.append(f"{self.stored:,} already in the reference store")
        head = (f"expected cost: {self.cells:,} cell{'s' if self.cells != 1 else ''} "
                f"({self.operators:,} operator"
                f"{'s' if self.operators != 1 else ''} x {self.tolerances} tolerance"
                f"{'s' if self.tolerances != 1 else ''})" + "".join(f", {d}" for d in done))
        table = any(m.source == "table" for m in self.medians)
        curve = ", ".join(m.label() for m in self.medians)
        limit = ("" if not self.capped else
                 f", {self.capped:,} cell{'s' if self.capped != 1 else ''} counted at the "
                 f"{_seconds(self.cell_timeout)} time limit per cell")
        out = (f"{head}; about {_core_time(self.core_seconds)} at effort {self.effort} "
               f"(median seconds of a cell by width: {curve}"
               f"{'; table measured on a 2-core machine, docs/benchmarks.md' if table else ''}"
               f"{limit})")
        if cores is not None:
            wall = self.core_seconds / cores
            out += f" -- about {_duration(wall)} on {cores} core{'s' if cores != 1 else ''} here"
            if wall > 3600:
                out += ("; on a cluster: --executor dask --scheduler ADDRESS (README, "
                        "\"Audits on a cluster\")")
        return out


def seconds_at(width: float, points) -> float:
    """The cost curve at ``width``: log-log linear between measured points, continued
    beyond the first and the last with the slope of the two nearest.

    Parameters
    ----------
    width : float, > 0
        ``max(m, N)`` of an operator.
    points : sequence of (width, seconds)
        Measured points, widths distinct and > 0, seconds > 0, in any order.

    Returns
    -------
    float
        Seconds; the single point's value when there is one.

    Raises
    ------
    InvalidArgumentError
        ``width`` not > 0, ``points`` empty, a width repeated or a value not > 0.
    """
    if not (isinstance(width, (int, float)) and not isinstance(width, bool) and width > 0):
        raise InvalidArgumentError(f"width: expected a number > 0, got {width!r}")
    pts = sorted((float(w), float(s)) for w, s in points)
    if not pts:
        raise InvalidArgumentError("points: expected at least one (width, seconds), got none")
    for w, s in pts:
        if not (w > 0 and s > 0 and math.isfinite(w) and math.isfinite(s)):
            raise InvalidArgumentError(f"points: expected widths and seconds > 0, got "
                                       f"({w:g}, {s:g})")
    if len({w for w, _ in pts}) != len(pts):
        raise InvalidArgumentError(f"points: a width is repeated, got {[w for w, _ in pts]}")
    if len(pts) == 1:
        return pts[0][1]
    i = 0  # the segment [i, i + 1] that holds width, or the end segment beyond it
    while i < len(pts) - 2 and width > pts[i + 1][0]:
        i += 1
    (w0, s0), (w1, s1) = pts[i], pts[i + 1]
    slope = math.log(s1 / s0) / math.log(w1 / w0)
    return s0 * (width / w0) ** slope


def expected_cost(operators, eps, effort: str = "full", validated: bool = False, store=None,
                  finished=(), table=None, check_table=None,
                  cell_timeout: float | None = None) -> Cost:
    """The expected cost of auditing ``operators`` at ``eps`` (module docstring).

    Parameters
    ----------
    operators : sequence of Operator
        The panel, materialised (its widths, and its hashes for the store).
    eps : sequence of float
        The tolerances.
    effort : {"full", "fast"}
    validated : bool
        Validated mode (the store keeps its entries apart).
    store : ReferenceStore, optional
        Where stored cells are looked up (``store.group_dir(op, effort, validated) /
        eps_name(eps)``, this engine only); None: none are.
    finished : collection of str
        Operator ids whose cells a resumed run's ledger holds.
    table : mapping of int to float, optional
        Median seconds of a computed cell at effort full by width, where the store has
        entries of fewer than :data:`MIN_STORE_OPERATORS` operators (default
        :data:`CELL_SECONDS`).
    check_table : mapping of int to float, optional
        Median seconds to check a stored cell by width (default :data:`CHECK_SECONDS`).
    cell_timeout : float, optional
        The audit's time limit per cell in seconds: a computed cell counts at most that
        (a cell cut short ends a little after it, at the end of an LP or a step already
        going). None: no limit.

    Returns
    -------
    Cost

    Raises
    ------
    InvalidArgumentError
        ``effort`` not ``"full"`` or ``"fast"``, no operators or no tolerances, a table
        that :func:`seconds_at` refuses, ``cell_timeout`` not None or a number > 0.
    """
    if cell_timeout is not None:
        cell_timeout = check_positive(cell_timeout, "cell_timeout")
    if effort not in ("full", "fast"):
        raise InvalidArgumentError(f"effort: expected 'full' or 'fast', got {effort!r}")
    operators, eps = list(operators), [float(e) for e in eps]
    if not operators or not eps:
        raise InvalidArgumentError(f"operators, eps: expected at least one of each, got "
                                   f"{len(operators)} operators and {len(eps)} tolerances")
    table = CELL_SECONDS if table is None else table
    check_table = CHECK_SECONDS if check_table is None else check_table
    finished = set(finished)
    engine = None
    if store is not None:
        from ..refstore.keys import engine_key

        engine = engine_key()
    todo = [op for op in operators if op.operator_id not in finished]
    widths, stored_at, seen, seen_ops = [], [], defaultdict(list), defaultdict(set)
    for op in todo:
        w = max(op.shape)
        group = None if store is None else store.group_dir(op, effort, validated, engine)
        for e in eps:
            got = None if group is None else _recorded(group / eps_name(e), op, e, effort,
                                                        validated, engine)
            if got is None:
                widths.append(w)
                continue
            stored_at.append(w)
            if got is not _IMPORTED:
                seen[w].append(got)
                seen_ops[w].add(op.operator_id)
    medians = {w: WidthMedian(w, max(statistics.median(s), _FLOOR), "store", len(s),
                              len(seen_ops[w]))
               for w, s in seen.items() if len(seen_ops[w]) >= MIN_STORE_OPERATORS}
    scale = 1.0 if effort == "full" else FAST_FACTOR
    for w, s in table.items():
        if w not in medians:
            medians[w] = WidthMedian(int(w), float(s) * scale, "table")
    points = [(m.width, m.seconds) for m in medians.values()]
    checks = [(w, s) for w, s in check_table.items()]
    each = [seconds_at(w, points) for w in widths]
    capped = 0 if cell_timeout is None else sum(x > cell_timeout for x in each)
    compute = sum(each if cell_timeout is None else (min(x, cell_timeout) for x in each))
    check = sum(seconds_at(w, checks) for w in stored_at)
    n_finished = (len(operators) - len(todo)) * len(eps)
    return Cost(operators=len(operators), tolerances=len(eps), cells=len(operators) * len(eps),
                finished=n_finished, stored=len(stored_at), effort=effort,
                core_seconds=compute + check, check_seconds=check,
                medians=tuple(medians[w] for w in sorted(medians)), capped=capped,
                cell_timeout=cell_timeout)


#: What :func:`_recorded` returns for an entry imported from a bundle.
_IMPORTED = object()


def _recorded(entry: Path, op, eps: float, effort: str, validated: bool, engine: str):
    """The seconds recorded in a stored entry's ``bracket.json`` when it is this engine's
    record of this operator, tolerance, effort and validation (:data:`_IMPORTED` for an entry
    from a bundle), else None. Its certificates are not checked here: the audit checks them
    when it reads the entry, and a refused entry is computed again (a few cells the estimate
    takes for stored)."""
    path = entry / "bracket.json"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            raw = fh.read(MAX_RECORD_BYTES + 1)
        rec = json.loads(raw) if len(raw) <= MAX_RECORD_BYTES else None
    except (OSError, ValueError, RecursionError):
        return None
    want = {"format": ENTRY_FORMAT, "engine": engine, "operator": op.hash, "eps": eps,
            "effort": effort, "validated": bool(validated)}
    if not isinstance(rec, dict) or any(rec.get(k) != v for k, v in want.items()):
        return None
    if not is_seconds(rec.get("seconds")):
        return None
    if os.path.lexists(entry / IMPORTED_NAME):
        return _IMPORTED
    return float(rec["seconds"])


def _seconds(s: float) -> str:
    """``1.3 s``, ``20 s``, ``1,240 s``."""
    return f"{s:.1f} s" if s < 10 else f"{s:,.0f} s"


def _number(x: float) -> str:
    """One decimal under 10, else whole with thousands separators."""
    return f"{x:.1f}" if x < 10 else f"{x:,.0f}"


def _scaled(s: float, units: tuple[str, str, str]) -> str:
    """``s`` seconds in the unit of ``units`` (seconds, minutes, hours) that reads best."""
    if s < 120:
        return f"{_number(s)} {units[0]}"
    if s < 7200:
        return f"{_number(s / 60)} {units[1]}"
    return f"{_number(s / 3600)} {units[2]}"


def _core_time(s: float) -> str:
    """Core time: core-seconds, -minutes or -hours."""
    return _scaled(s, ("core-seconds", "core-minutes", "core-hours"))


def _duration(s: float) -> str:
    """Wall time: ``40 s``, ``12 min``, ``3.4 h``, ``1,240 h``."""
    return _scaled(s, ("s", "min", "h"))

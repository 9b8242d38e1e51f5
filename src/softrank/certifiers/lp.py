"""Linear programs through HiGHS (``highspy``), with explicit status mapping.

Only an LP whose model status is ``kOptimal`` yields a solution; every other status
(infeasible, unbounded, time or iteration limit, solve error, ...) and any NaN in the
returned vector maps to ``LPResult(status=..., x=None)``. Callers never turn a result
without ``x`` into a bound (docs/theory/lower.md: "an LP whose status is not optimal ... yields no
certificate"); and the certificates built from an ``x`` are re-verified by the checker, so
the LP's own tolerances never enter a reported bound.

The problems softrank solves many times with one constraint matrix share one HiGHS
instance, and only the right-hand side or the costs change between solves: basis pursuit
for each row of a decoder changes the row bounds (the previous optimal basis stays dual
feasible, and the dual simplex restarts from it); l1 regression of each row of ``A`` on a
basis ``W (k, N)`` is solved as its dual, ``max a^T y s.t. W y = 0, -1 <= y <= 1``, which
has ``k`` rows instead of ``N`` and changes only the costs (the previous basis stays primal
feasible); the regression coefficients are the row duals.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidArgumentError
from ..validation import check_int, check_positive

__all__ = ["LPResult", "EqualityLP", "RangeLP", "solve_inequality_lp", "L1Regression",
           "BasisPursuit", "LP_TIME_LIMIT"]


_BANNER_SHOWN = False

#: HiGHS reads a bound of this magnitude or more as infinite (its ``infinite_bound``).
INFINITE_BOUND = 1e20
#: HiGHS refuses a matrix entry of this magnitude or more (its ``large_matrix_value``).
LARGE_ENTRY = 1e15
LP_TIME_LIMIT = 60.0  #: Seconds a row LP may take unless a bracket's time limit has less left.


def _set_options(highspy, h, options: dict | None) -> None:
    """Set HiGHS options (name: value) on ``h``; InvalidArgumentError for one HiGHS rejects
    (an unknown name or a bad value), never silently ignored."""
    for name, value in (options or {}).items():
        if h.setOptionValue(name, value) != highspy.HighsStatus.kOk:
            raise InvalidArgumentError(f"options: HiGHS rejected {name}={value!r}")


def _new_highs(highspy):
    """A ``Highs`` instance; the first one of a process prints a banner on fd 1, which would
    corrupt machine-readable output (``softrank bracket --json``), so it goes to /dev/null."""
    global _BANNER_SHOWN
    if _BANNER_SHOWN:
        return highspy.Highs()
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
    _BANNER_SHOWN = True
    return h


@dataclass(frozen=True)
class LPResult:
    """``status`` is ``"optimal"`` or the HiGHS model-status name; ``x`` (primal values) and
    ``y`` (row duals) only when optimal; ``iterations`` the simplex iterations of the last
    run when one was made (the retry's alone after a retry from scratch)."""

    status: str
    x: np.ndarray | None
    objective: float | None
    y: np.ndarray | None = None
    iterations: int | None = None

    @property
    def success(self) -> bool:
        return (self.status == "optimal" and self.x is not None and bool(np.isfinite(self.x).all())
                and (self.y is None or bool(np.isfinite(self.y).all())))


#: numpy dtype kinds read as real numbers: bool, signed and unsigned integers, floats.
_REAL_KINDS = "biuf"


def _real_or_none(v) -> np.ndarray | None:
    """``v`` as a float64 ndarray, or None if it is not made of real numbers: complex entries
    (a cast to float64 drops their imaginary part), strings, objects, ragged nesting."""
    try:
        a = np.asarray(v)
    except (TypeError, ValueError):
        return None
    return a.astype(np.float64, copy=False) if a.dtype.kind in _REAL_KINDS else None


def _not_real(name: str, dtype) -> InvalidArgumentError:
    return InvalidArgumentError(f"{name} must be real numbers, got dtype {dtype}")


def _real(name: str, v) -> np.ndarray:
    """:func:`_real_or_none`, with InvalidArgumentError naming ``name`` instead of None."""
    a = _real_or_none(v)
    if a is None:
        try:
            dtype = np.asarray(v).dtype
        except (TypeError, ValueError):  # numpy cannot read it as one array
            raise InvalidArgumentError(f"{name} must be real numbers, got a ragged or mixed "
                                       f"{type(v).__name__}") from None
        raise _not_real(name, dtype)
    return a


def _colwise(G, name: str = "G"):
    """``(shape, start, index, value)``: the column-wise sparse form of ``G`` (a dense array
    or a scipy sparse matrix) that HiGHS takes, zeros left out; for a dense ``G`` that of
    ``scipy.sparse.csc_matrix(G)``, built without it (3x faster at the climb's sizes)."""
    if sp.issparse(G):
        if G.dtype.kind not in _REAL_KINDS:
            raise _not_real(name, G.dtype)
        C = sp.csc_matrix(G, dtype=np.float64)
        out = C.shape, C.indptr.astype(np.int32), C.indices.astype(np.int32), C.data
    else:
        Gt = _real(name, G).T
        if Gt.ndim != 2:
            raise InvalidArgumentError(f"{name} must be 2-D, got shape {Gt.T.shape}")
        nz = Gt != 0
        start = np.zeros(Gt.shape[0] + 1, dtype=np.int32)
        np.cumsum(nz.sum(axis=1), out=start[1:])
        out = Gt.T.shape, start, np.nonzero(nz)[1].astype(np.int32), Gt[nz]
    _check_entries(name, out[3])
    return out


def _check_entries(name: str, values: np.ndarray) -> None:
    """InvalidArgumentError naming ``name`` if a matrix entry in ``values`` is NaN or
    infinite (HiGHS may loop on a NaN) or of magnitude ``LARGE_ENTRY`` or more."""
    if not np.isfinite(values).all():
        bad = int((~np.isfinite(values)).sum())
        raise InvalidArgumentError(f"{name} must be finite, got {bad} entries NaN or infinite")
    if values.size and np.abs(values).max() >= LARGE_ENTRY:
        raise InvalidArgumentError(f"{name}: entries must be below {LARGE_ENTRY:g} in magnitude "
                                   f"(HiGHS refuses larger ones), got {np.abs(values).max():g}")


def _vector(name: str, v, n: int, infinite: bool = False) -> np.ndarray:
    """``v`` as a contiguous float64 array of shape ``(n,)`` with no NaN, and with no
    infinite entry unless ``infinite`` (bounds); InvalidArgumentError naming ``name``
    otherwise (HiGHS's arrays interface reads ``n`` entries whatever it is given, and would
    read a NaN bound as no bound)."""
    a = np.ascontiguousarray(_real(name, v))
    if a.shape != (n,):
        raise InvalidArgumentError(f"{name} must have shape ({n},), got {a.shape}")
    bad = np.isnan(a) if infinite else ~np.isfinite(a)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidArgumentError(f"{name}[{i}] must be a number{' or +-inf' if infinite else ''}"
                                   f", got {float(a[i])!r}")
    return a


def _matrix(name: str, M) -> np.ndarray:
    """``M`` (array_like or scipy sparse) as a dense 2-D float64 array whose entries HiGHS
    takes (``_check_entries``); InvalidArgumentError naming ``name`` otherwise."""
    if sp.issparse(M):
        if M.dtype.kind not in _REAL_KINDS:
            raise _not_real(name, M.dtype)
        M = M.toarray()
    a = _real(name, M)
    if a.ndim != 2:
        raise InvalidArgumentError(f"{name} must be 2-D, got shape {a.shape}")
    _check_entries(name, a)
    return a


def _bounds(name: str, v, n: int, inf: float, side: str) -> np.ndarray:
    """A bound vector for HiGHS (:func:`_vector` with infinite entries allowed): on the
    ``side`` ``"lower"`` ``-inf`` means no bound and ``+inf`` is refused, on ``"upper"`` the
    reverse; a finite entry of magnitude ``INFINITE_BOUND`` or more is refused (HiGHS
    would read it as no bound); ``+-inf`` become HiGHS's infinity."""
    a = _vector(name, v, n, infinite=True)
    bad = a == (np.inf if side == "lower" else -np.inf)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidArgumentError(f"{name}[{i}] must not be {float(a[i])!r} (a {side} bound)")
    big = np.isfinite(a) & (np.abs(a) >= INFINITE_BOUND)
    if big.any():
        i = int(np.argmax(big))
        raise InvalidArgumentError(f"{name}[{i}] must be below {INFINITE_BOUND:g} in "
                                   f"magnitude or infinite (HiGHS reads it as no bound), got "
                                   f"{float(a[i])!r}")
    return np.clip(a, -inf, inf)


class _WarmLP:
    """One HiGHS instance for ``min/max c^T z  s.t.  row_lower <= G z <= row_upper,
    lower <= z <= upper`` solved many times with a few bounds or costs changed in between
    (the simplex restarts from the previous basis); the shared set-up and solve of
    :class:`EqualityLP` and :class:`RangeLP`. ``time_limit`` (seconds) holds for each
    solve: HiGHS counts its ``time_limit`` from the instance's first run, so that each
    solve would otherwise get what the earlier ones left (and every solve after the first
    ``time_limit`` seconds would end at once, not optimal)."""

    def __init__(self, G, c, lower, upper, row_lower, row_upper, time_limit: float = 60.0,
                 options: dict | None = None, maximize: bool = False):
        import highspy

        self._hs = highspy
        (r, n), start, index, value = _colwise(G)
        self.shape = (r, n)
        h = _new_highs(highspy)
        h.setOptionValue("output_flag", False)
        self._time_limit = float(time_limit)
        h.setOptionValue("threads", 1)
        _set_options(highspy, h, options)
        inf = highspy.kHighsInf
        self._row_lower = _bounds("row_lower", row_lower, r, inf, "lower")
        self._row_upper = _bounds("row_upper", row_upper, r, inf, "upper")
        sense = highspy.ObjSense.kMaximize if maximize else highspy.ObjSense.kMinimize
        # the arrays form of passModel: a HighsLp filled attribute by attribute cost 3x
        status = h.passModel(n, r, int(start[-1]), int(highspy.MatrixFormat.kColwise),
                             int(sense), 0.0, _vector("c", c, n),
                             _bounds("lower", lower, n, inf, "lower"),
                             _bounds("upper", upper, n, inf, "upper"),
                             self._row_lower, self._row_upper, start, index, value,
                             np.zeros(n, dtype=np.int32))
        # kWarning: HiGHS dropped matrix entries below its small_matrix_value, so it solves
        # a slightly other LP: harmless, as every certificate built from it is re-checked
        if status not in (highspy.HighsStatus.kOk, highspy.HighsStatus.kWarning):
            raise RuntimeError(f"HiGHS rejected the model: {status}")
        self._h = h

    def _run(self, final=()) -> LPResult:
        """Solve; a status other than optimal is retried once cold (a warm start now and then
        ends in a status such as "Unknown" on an LP that solves cold), except the time
        limit, whose retry would give the solve its limit twice, and those in ``final``."""
        h, hs = self._h, self._hs
        try:
            h.setOptionValue("time_limit", h.getRunTime() + self._time_limit)
            h.run()
            ms = h.getModelStatus()
            if ms not in (hs.HighsModelStatus.kOptimal, hs.HighsModelStatus.kTimeLimit, *final):
                h.clearSolver()
                h.setOptionValue("time_limit", h.getRunTime() + self._time_limit)
                h.run()
                ms = h.getModelStatus()
        except Exception as exc:  # a crash of the solver is a failed solve, never a bound
            return LPResult(f"exception:{type(exc).__name__}", None, None)
        # two values read by name: the whole HighsInfo costs four times as much (a solve of a
        # climb's LP takes 0.1-0.5 ms, this wrapper's own work about a tenth of that)
        st_its, its = h.getInfoValue("simplex_iteration_count")
        its = int(its) if st_its == hs.HighsStatus.kOk else None
        if ms != hs.HighsModelStatus.kOptimal:
            return LPResult(h.modelStatusToString(ms), None, None, iterations=its)
        st_obj, objective = h.getInfoValue("objective_function_value")
        sol = h.getSolution()
        x = np.asarray(sol.col_value, dtype=np.float64)
        y = np.asarray(sol.row_dual, dtype=np.float64)
        if (st_obj != hs.HighsStatus.kOk or x.shape != (self.shape[1],)
                or y.shape != (self.shape[0],) or not np.isfinite(objective)
                or not (np.isfinite(x).all() and np.isfinite(y).all())):
            return LPResult("nan-solution", None, None, iterations=its)
        return LPResult("optimal", x, float(objective), y, its)


class EqualityLP(_WarmLP):
    """``min c^T z  s.t.  G z = b,  lower <= z <= upper`` for a fixed ``G`` and many ``b`` or
    many ``c``.

    Parameters
    ----------
    G : (r, n) array_like or sparse
    c, lower, upper : (n,) array_like (``-inf`` lower and ``+inf`` upper bounds: no bound)
    maximize : bool
        ``max`` instead of ``min``.

    Raises
    ------
    InvalidArgumentError
        If ``G`` is not 2-D or has an entry that is NaN, infinite or 1e15 or more in
        magnitude, or ``c``, ``lower`` or ``upper`` has not one entry per column or has a
        NaN (or ``c`` an infinite entry), a lower bound is ``+inf`` or an upper bound
        ``-inf``, or a finite bound is 1e20 or more in magnitude; or any of them is not
        made of real numbers (complex entries, strings).

    :meth:`solve` returns a result without a solution (status ``"bad-rhs"``,
    ``"bad-cost"`` or ``"rejected:..."``) for a right-hand side or cost of the wrong
    length, not finite, not real numbers, or refused by HiGHS.
    """

    def __init__(self, G, c, lower, upper, time_limit: float = 60.0, maximize: bool = False):
        if not sp.issparse(G):
            G = _real("G", G)
        shape = G.shape
        if len(shape) != 2:
            raise InvalidArgumentError(f"G must be 2-D, got shape {shape}")
        r = shape[0]
        super().__init__(G, c, lower, upper, np.zeros(r), np.zeros(r), time_limit,
                         maximize=maximize)
        self._idx = np.arange(self.shape[0], dtype=np.int32)
        self._cols = np.arange(self.shape[1], dtype=np.int32)

    def solve(self, b=None, *, cost=None) -> LPResult:
        """Solve with right-hand side ``b (r,)`` and/or costs ``cost (n,)`` (each kept from
        the previous solve when None; ``b`` starts at 0)."""
        h = self._h
        if b is not None:
            b = _real_or_none(b)
            if b is None or b.shape != (self.shape[0],) or not np.isfinite(b).all():
                return LPResult("bad-rhs", None, None)
            st = h.changeRowsBounds(self.shape[0], self._idx, b, b)
            if st != self._hs.HighsStatus.kOk:  # e.g. |b| >= 1e20: the old b would stay
                return LPResult(f"rejected:{st}", None, None)
        if cost is not None:
            cost = _real_or_none(cost)
            if cost is None or cost.shape != (self.shape[1],) or not np.isfinite(cost).all():
                return LPResult("bad-cost", None, None)
            st = h.changeColsCost(self.shape[1], self._cols, cost)
            if st != self._hs.HighsStatus.kOk:  # the old costs would stay
                return LPResult(f"rejected:{st}", None, None)
        return self._run()

    def add_rows(self, G) -> None:
        """Append the rows ``G (j, n)`` (array_like or scipy sparse; right-hand side 0 until
        :meth:`solve` gives ``b``); the next solve restarts from the current basis, the new
        rows' slacks basic. RuntimeError if HiGHS refuses them (the instance is then as
        before); entries it drops as too small are accepted as in the constructor."""
        Gt = G.T if sp.issparse(G) else np.asarray(G).T
        (n, j), start, index, value = _colwise(Gt, "G")  # G row-wise
        if n != self.shape[1]:
            raise InvalidArgumentError(f"G must have {self.shape[1]} columns, got {n}")
        z = np.zeros(j)
        ok = (self._hs.HighsStatus.kOk, self._hs.HighsStatus.kWarning)
        if self._h.addRows(j, z, z, int(start[-1]), start, index, value) not in ok:
            raise RuntimeError(f"HiGHS refused {j} rows")
        self._resized(self.shape[0] + j)

    def delete_rows(self, j: int) -> None:
        """Delete the last ``j`` rows; HiGHS keeps the basic and nonbasic status of the rest
        and builds its next starting basis from them."""
        r = self.shape[0]
        j = check_int(j, "j", 0, r)
        if j and self._h.deleteRows(j, np.arange(r - j, r, dtype=np.int32)) \
                != self._hs.HighsStatus.kOk:
            raise RuntimeError(f"HiGHS refused to delete {j} rows")
        self._resized(r - j)

    def _resized(self, r: int) -> None:
        self.shape = (r, self.shape[1])
        self._idx = np.arange(r, dtype=np.int32)


class RangeLP(_WarmLP):
    """``min c^T z  s.t.  row_lower <= G z <= row_upper,  lower <= z <= upper`` for a fixed
    ``G`` and many changes of a few rows' bounds: each :meth:`RangeLP.solve` sets the bounds
    of the rows it is given, solves (the simplex restarts from the previous basis, or from
    one it is given: :meth:`RangeLP.basis` of an earlier solve), and puts those rows' bounds
    back. A solve that ends in a status other than optimal is retried once
    from scratch, except *infeasible*: that status is final, and like every other it yields
    no solution.

    Parameters
    ----------
    G : (r, n) array_like or sparse
    c, lower, upper : (n,) array_like (``-inf`` lower and ``+inf`` upper bounds: no bound)
    row_lower, row_upper : (r,) array_like (``-inf`` and ``+inf`` allowed likewise)
    options : dict, optional
        HiGHS options (name: value) set on the instance.

    Raises
    ------
    InvalidArgumentError
        If HiGHS rejects an entry of ``options`` (unknown name or bad value), the matrix
        has an entry that is NaN or infinite, or a cost, bound or right-hand side does not
        have one entry per column or row or has a NaN (an infinite cost is refused too),
        a lower bound is ``+inf`` or an upper bound ``-inf``, a finite bound is 1e20 or more
        in magnitude, or a matrix entry 1e15 or more; or any of them is not made of real
        numbers (complex entries, strings).
    """

    def __init__(self, G, c, lower, upper, row_lower, row_upper, time_limit: float = 60.0,
                 options: dict | None = None):
        super().__init__(G, c, lower, upper, row_lower, row_upper, time_limit, options)

    def solve(self, rows, row_lower, row_upper, start=None) -> LPResult:
        """Solve with the bounds of ``rows`` set to ``row_lower``/``row_upper`` (arrays of
        their length), then restore them; ``x`` and the row duals ``y`` only when optimal.

        ``start``, a basis from :meth:`basis` (of this or another instance of the same
        shape), is where the simplex starts instead of the previous basis. A start changes
        where the simplex begins, never what counts as an optimum.

        Raises
        ------
        InvalidArgumentError
            If ``rows`` is not a 1-D array of distinct row indices of this LP,
            ``row_lower`` or ``row_upper`` has not one entry per row in ``rows``, or
            ``start`` is neither None nor a basis from :meth:`basis` of an LP of this
            shape. Bounds that are NaN, infinite, 1e20 or more in magnitude (HiGHS would
            read them as no bound) or not real numbers are not raised: the result has status
            ``"bad-rhs"`` and no solution; bounds HiGHS refuses give ``"rejected:..."``."""
        h = self._h
        r = self.shape[0]
        try:
            idx = np.asarray(rows)
        except (TypeError, ValueError):  # ragged
            raise InvalidArgumentError(f"rows must be a 1-D array of distinct row indices in "
                                       f"[0, {r}), got {rows!r:.60}") from None
        # the checks in Python on the indices' list: numpy's reductions cost more than the
        # rest of this wrapper for the one or few rows a solve changes
        ok = idx.ndim == 1 and (idx.size == 0 or idx.dtype.kind in "iu")
        if ok and idx.size:
            at = idx.tolist()
            ok = 0 <= min(at) and max(at) < r and (len(at) == 1 or len(set(at)) == len(at))
        if not ok:
            got = (f"{rows!r}" if idx.ndim <= 1 and idx.size <= 8
                   else f"an array of shape {idx.shape} and dtype {idx.dtype}")
            raise InvalidArgumentError(f"rows must be a 1-D array of distinct row indices in "
                                       f"[0, {r}), got {got}")
        rows = idx.astype(np.int32)
        lo, hi = _real_or_none(row_lower), _real_or_none(row_upper)
        if lo is None or hi is None:  # complex, strings, objects: no solution, as for NaN
            return LPResult("bad-rhs", None, None)
        if lo.shape != rows.shape or hi.shape != rows.shape:
            raise InvalidArgumentError(f"row_lower and row_upper must have shape {rows.shape} "
                                       f"(one entry per row in rows), got {lo.shape} and "
                                       f"{hi.shape}")
        if not all(math.isfinite(v) and abs(v) < INFINITE_BOUND for v in lo.tolist() + hi.tolist()):
            return LPResult("bad-rhs", None, None)  # NaN, infinite, or read by HiGHS as infinite
        if start is not None:
            if not (isinstance(start, tuple) and len(start) == 2
                    and isinstance(start[0], tuple)
                    and isinstance(start[1], self._hs.HighsBasis)):
                raise InvalidArgumentError(f"start must be None or a basis from "
                                           f"RangeLP.basis(), got {type(start).__name__}")
            if start[0] != self.shape:
                raise InvalidArgumentError(f"start must be a basis of an LP of shape "
                                           f"{self.shape}, got one of shape {start[0]}")
            h.setBasis(start[1])
        try:
            st = h.changeRowsBounds(rows.size, rows, lo, hi)
            if st != self._hs.HighsStatus.kOk:  # e.g. |bound| >= 1e20: the old bounds would stay
                return LPResult(f"rejected:{st}", None, None)
            return self._run(final=(self._hs.HighsModelStatus.kInfeasible,))
        finally:
            h.changeRowsBounds(rows.size, rows, self._row_lower[rows], self._row_upper[rows])

    def basis(self) -> tuple:
        """The simplex basis after the last solve, a start for :meth:`solve`: ``(shape,
        HighsBasis)``, the LP's ``(rows, columns)`` and HiGHS's basis (kept whole: reading
        its status lists builds a Python object per row)."""
        return self.shape, self._h.getBasis()


def solve_inequality_lp(C, upper_rhs, cost, lower, upper, iteration_limit: int,
                        options: dict | None = None) -> LPResult:
    """Solve ``min cost^T x  s.t.  C x <= upper_rhs,  lower <= x <= upper`` once.

    Parameters
    ----------
    C : (r, n) sparse or array_like
    upper_rhs : (r,) array_like
    cost, lower, upper : (n,) array_like (``-inf`` lower and ``+inf`` upper bounds: no bound)
    iteration_limit : int
        HiGHS's ``simplex_iteration_limit``: a deterministic work budget (a solve that
        reaches it is not optimal, so it yields no solution).
    options : dict, optional
        Other HiGHS options (name: value) set before the solve.

    Returns
    -------
    LPResult
        ``x`` only when HiGHS reports an optimal model status and ``x`` is finite.

    Raises
    ------
    InvalidArgumentError
        If HiGHS rejects an entry of ``options`` (unknown name or bad value), the matrix
        has an entry that is NaN or infinite, or a cost, bound or right-hand side does not
        have one entry per column or row or has a NaN (an infinite cost is refused too),
        a lower bound is ``+inf`` or an upper bound ``-inf``, a finite bound is 1e20 or more
        in magnitude, or a matrix entry 1e15 or more; or any of them is not made of real
        numbers (complex entries, strings).
    """
    import highspy

    (r, n), start, index, value = _colwise(C, "C")
    h = _new_highs(highspy)
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("simplex_iteration_limit", int(iteration_limit))
    _set_options(highspy, h, options)
    inf = highspy.kHighsInf
    cost = _vector("cost", cost, n)
    upper_rhs = _bounds("upper_rhs", upper_rhs, r, inf, "upper")
    lower = _bounds("lower", lower, n, inf, "lower")
    upper = _bounds("upper", upper, n, inf, "upper")
    try:
        status = h.passModel(n, r, int(start[-1]), int(highspy.MatrixFormat.kColwise),
                             int(highspy.ObjSense.kMinimize), 0.0,
                             cost, lower, upper, np.full(r, -inf), upper_rhs,
                             start, index, value, np.zeros(n, dtype=np.int32))
        if status not in (highspy.HighsStatus.kOk, highspy.HighsStatus.kWarning):
            return LPResult(f"rejected:{status}", None, None)
        h.run()
        ms = h.getModelStatus()
    except Exception as exc:  # a crash of the solver is a failed solve, never a bound
        return LPResult(f"exception:{type(exc).__name__}", None, None)
    if ms != highspy.HighsModelStatus.kOptimal:
        return LPResult(h.modelStatusToString(ms), None, None)
    x = np.asarray(h.getSolution().col_value, dtype=np.float64)
    if x.shape != (n,) or not np.isfinite(x).all():
        return LPResult("nan-solution", None, None)
    return LPResult("optimal", x, float(h.getInfo().objective_function_value))


class L1Regression:
    """``min_u ||a - u W[:k]||_1`` for a fixed basis ``W (K, N)``, many rows ``a (N,)`` and
    nested bases: the first ``k`` rows of ``W`` (all of them by default).

    Solved as the LP dual ``max a^T y  s.t.  W[:k] y = 0,  -1 <= y <= 1`` (``k`` rows, ``N``
    boxed columns; feasible at ``y = 0`` and bounded, so optimal unless the solver fails); by
    LP duality its optimum equals the l1 minimum and its row duals are an optimal ``u``.
    Against the primal form (``W^T u + p - n = a``, ``N`` rows, ``k + 2 N`` columns) this is
    1.3-3x faster on 128-key rows (most at small ``k``; ``benchmarks/``). One HiGHS
    instance, of the rank last solved, serves every row and every ``k``: a new row changes
    the costs, a new ``k`` appends or deletes rows at the end, and each solve restarts from
    the last basis (docs/theory/witnesses.md#l1-refit, "One LP for every rank").
    :meth:`solve` returns ``u (k,)`` or ``None`` when not optimal (each solve has
    ``time_limit`` seconds, default 60: the l1 refit passes what is left of a bracket's
    limit); callers recompute ``||a - u W[:k]||_1`` from ``u``, never the LP's objective.

    Raises
    ------
    InvalidArgumentError
        If ``W`` (array_like or scipy sparse) is not 2-D, is not made of real numbers, or
        has an entry that is NaN, infinite or 1e15 or more in magnitude; from :meth:`solve`,
        if ``k`` is not an integer in ``[1, K]`` or ``time_limit`` not a number > 0.
    """

    def __init__(self, W):
        self._W = _matrix("W", W)
        self.k, self.N = self._W.shape
        self._lp: EqualityLP | None = None  # made at the first solve, on the rows it asks

    def solve(self, a, k: int | None = None, time_limit: float = 60.0) -> np.ndarray | None:
        k = self.k if k is None else check_int(k, "k", 1, self.k)
        time_limit = check_positive(time_limit, "time_limit")
        if a is None:  # EqualityLP reads None as "keep the last cost": it would answer that row
            return None
        lp = self._lp
        if lp is None:
            lp = self._lp = EqualityLP(self._W[:k], np.zeros(self.N), np.full(self.N, -1.0),
                                       np.ones(self.N), maximize=True)
        elif k > lp.shape[0]:
            lp.add_rows(self._W[lp.shape[0]:k])
        elif k < lp.shape[0]:
            lp.delete_rows(lp.shape[0] - k)
        lp._time_limit = time_limit
        res = lp.solve(cost=a)
        return None if not res.success else res.y


class BasisPursuit:
    """``min sum_i w_i |x_i|  s.t.  G x = b`` for a fixed ``G (r, n)`` and many ``b (r,)``.

    As an LP: ``x = p - q``, ``G p - G q = b``, ``p, q >= 0``, cost ``w^T (p + q)``
    (``weights`` default 1). :meth:`solve` returns ``x`` or ``None`` when not optimal
    (infeasible ``G x = b``, or past its ``time_limit``: seconds, 60 unless a caller has less).

    Raises
    ------
    InvalidArgumentError
        If ``G`` (array_like or scipy sparse) is not 2-D, is not made of real numbers, or
        has an entry that is NaN, infinite or 1e15 or more in magnitude, ``weights`` has
        not one finite real entry per column of ``G``, or ``time_limit`` is not finite > 0.
    """

    def __init__(self, G, weights=None):
        G = _matrix("G", G)
        r, n = G.shape
        self.n = n
        w = np.ones(n) if weights is None else _vector("weights", weights, n)
        M = sp.hstack([sp.csc_matrix(G), -sp.csc_matrix(G)], format="csc")
        self._lp = EqualityLP(M, np.concatenate([w, w]), np.zeros(2 * n), np.full(2 * n, np.inf))

    def solve(self, b, time_limit: float = LP_TIME_LIMIT) -> np.ndarray | None:
        self._lp._time_limit = check_positive(time_limit, "time_limit")
        if b is None:  # EqualityLP reads None as "keep the last b": it would answer that b
            return None
        res = self._lp.solve(b)
        return None if not res.success else res.x[: self.n] - res.x[self.n:]

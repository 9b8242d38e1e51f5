"""The l1 refit (docs/theory/witnesses.md#l1-refit): a right basis ``W`` and each row of
``U`` by an exact l1 regression, after the rows are screened by :func:`l1_candidates`; on
the top right singular vectors (:class:`L1Refit`), on rows of ``A`` (the row basis), and
with the heaviest key columns kept exactly (:class:`Hybrid`)."""

from __future__ import annotations

import numpy as np

from ...checker import UpperWitness
from ...errors import InvalidArgumentError
from ...validation import check_int
from ..linalg import EXACT_MAX_RANK, reweighted_step
from ..lp import LP_TIME_LIMIT, L1Regression
from .basic import least_feasible, safe_target

__all__ = ["l1_candidates", "l1_dual_bounds", "screening", "L1Refit", "Hybrid", "DUAL_ROWS",
           "DUAL_STEPS", "DUAL_MIN_ENTRIES"]

#: Rows of a rank, those of largest least-squares error, whose dual bound
#: (:func:`l1_dual_bounds`) :meth:`L1Refit.feasible` computes before any LP of that rank.
DUAL_ROWS = 32
#: The most alternating projections of :func:`l1_dual_bounds`.
DUAL_STEPS = 50
#: The least ``k N`` (rank times keys) at which :meth:`L1Refit.feasible` computes dual
#: bounds: below it a warm-started LP of a row takes about a millisecond, and the bounds
#: (least squares, a QR of ``W^T``, the projections) cost 2 to 7 such LPs (N = 64 to 256);
#: at 512 keys and rank 200 they cost 0.6 of one.
DUAL_MIN_ENTRIES = 2**16
# a rank is declined on a dual bound only above target * (1 + _DUAL_MARGIN) + _DUAL_MARGIN:
# the bound is computed in float64, and a tie is left to the LPs
_DUAL_MARGIN = 1e-9


def screening(k: int, N: int) -> dict:
    """The reweighting of the screening at rank ``k`` over ``N`` keys: 8 steps with the floor
    ``1e-8`` up to :data:`~softrank.certifiers.linalg.EXACT_MAX_RANK`; above it, where each LP
    takes seconds (a rank-670 row of 1,024 keys: 4-14 s), 30 steps with the floor at 1 % of a
    row's mean entry (``0.01 / N``: weights that stay within a few decades, where
    conjugate-gradient steps move; docs/theory/witnesses.md#l1-refit)."""
    if k <= EXACT_MAX_RANK:
        return {"iters": 8, "delta": 1e-8}
    return {"iters": 30, "delta": 0.01 / N}


def l1_candidates(A: np.ndarray, W: np.ndarray, iters: int | None = None,
                  delta: float | None = None, U0: np.ndarray | None = None,
                  target: float = -np.inf, stop=None):
    """Cheap candidates for ``min_u ||a_i - u W||_1`` on every row of ``A`` at once.

    Least squares (or the given start ``U0``), then up to ``iters`` steps of iteratively
    reweighted least squares (weights ``1 / max(|r_ij|, delta)``; each step a majorisation
    of the l1 loss) on the rows whose best error is still above ``target``, keeping each
    row's best iterate. The systems ``G_i = W diag(w_i) W^T`` of those rows are formed by
    one matrix product (:func:`softrank.certifiers.linalg.weighted_solves`), or, above rank
    :data:`~softrank.certifiers.linalg.EXACT_MAX_RANK`, each step is conjugate-gradient
    steps from the row's current iterate (:func:`softrank.certifiers.linalg.reweighted_step`).
    Any ``u``
    bounds its row's l1 optimum from above, so a row whose candidate error is within a
    target needs no LP (docs/theory/witnesses.md#l1-refit).

    Parameters
    ----------
    A : (m, N) float64 ndarray
    W : (k, N) float64 ndarray
        Basis (rows).
    iters : int, optional
        Reweighting steps after the start (default: :func:`screening`'s for this rank).
    delta : float, optional
        Floor of ``|r_ij|`` in the weights (default: :func:`screening`'s for this rank).
    U0 : (m, k) float64 ndarray, optional
        Start instead of least squares.
    target : float
        A row whose best error is at most ``target`` stops iterating.
    stop : callable, optional
        Asked before each reweighting step; when it answers True the steps end there (the
        candidates found so far are returned: any coefficients bound a row's optimum).

    Returns
    -------
    U : (m, k) float64 ndarray
        Each row's best coefficients found.
    err : (m,) float64 ndarray
        ``||a_i - U_i W||_1`` as computed in float64 (``inf`` where not finite).
    """
    m, N = A.shape
    k = W.shape[0]
    dflt = screening(k, N)
    iters = dflt["iters"] if iters is None else iters
    delta = dflt["delta"] if delta is None else delta
    with np.errstate(all="ignore"):
        if U0 is None:
            try:
                U = np.linalg.lstsq(W.T, A.T, rcond=None)[0].T
            except np.linalg.LinAlgError:
                U = np.zeros((m, k))
        else:
            U = np.array(U0, dtype=np.float64)
        err = np.abs(A - U @ W).sum(axis=1)
        err[~np.isfinite(err)] = np.inf
        best_U, best_err = U.copy(), err.copy()
        idx = np.arange(m)
        for _ in range(iters):
            if stop is not None and stop():
                break
            keep = best_err[idx] > target
            if not keep.any():
                break
            idx, U = idx[keep], U[keep]
            Ai = A[idx]
            wt = 1.0 / np.maximum(np.abs(Ai - U @ W), delta)
            try:
                U = reweighted_step(W, wt, (wt * Ai) @ W.T, U)
            except np.linalg.LinAlgError:
                break
            if not np.isfinite(U).all():
                break
            err = np.abs(Ai - U @ W).sum(axis=1)
            better = np.isfinite(err) & (err < best_err[idx])
            best_U[idx[better]], best_err[idx[better]] = U[better], err[better]
    return best_U, best_err


def _real(x, name: str) -> np.ndarray:
    """``x`` as a float64 array; refused when its entries are not real numbers."""
    arr = np.asarray(x)
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise InvalidArgumentError(f"{name}: expected real numbers, got dtype {arr.dtype}")
    return arr.astype(np.float64, copy=False)


def l1_dual_bounds(A: np.ndarray, W: np.ndarray, steps: int | None = None,
                   start: np.ndarray | None = None) -> np.ndarray:
    """Lower bounds on ``min_u ||a_i - u W||_1`` for every row ``a_i`` of ``A``, from dual points.

    By l1 regression duality (docs/theory/witnesses.md#l1-refit) the minimum equals
    ``max {a^T y : W y = 0, ||y||_inf <= 1}``, so every ``y != 0`` with ``W y = 0`` gives the
    bound ``a^T y / ||y||_inf``. With ``W^T = Q R`` (a QR factorisation: ``Q^T y = 0``
    implies ``W y = 0``, whatever ``W``'s rank), ``y`` starts as the sign of the
    least-squares residual ``a - Q Q^T a``, projected onto the null space of ``Q^T``,
    then alternates between the box ``[-1, 1]^N`` and that null space (von Neumann's
    alternating projections); each iterate's scaled value is a bound and the largest is
    kept. It stops after ``steps`` projections, or earlier when the best bound of every row
    has not risen by 0.1 % over the last 10. The LP's own dual at the optimum is the sign
    of the optimal residual off a basis, which the least-squares residual's sign approximates
    (docs/theory/witnesses.md#dual-bounds-before-lps); ``start`` gives other first points.

    Parameters
    ----------
    A : (r, N) float64 ndarray
        The rows.
    W : (k, N) float64 ndarray
        The basis (rows), finite.
    steps : int, optional
        The most projections (default :data:`DUAL_STEPS`, read at each call).
    start : (r, N) float64 ndarray, optional
        The points to project first, one per row (default: the signs of the least-squares
        residuals).

    Returns
    -------
    (r,) float64 ndarray
        Each row's bound, computed in float64 (``-inf`` where the null space gave no point
        that the projection left above ``1e-3`` of its size, or a value was not finite).
        The projection's rounding leaves ``Q^T y`` of the order of ``1e-16`` times the
        point before it, so at most about ``1e-13`` times a kept one, and the bound is
        off by that much times ``||a||_1``. :class:`L1Refit` declines a rank on a bound
        only with a margin of ``1e-9`` (its rows have ``||a||_1 = 1``), and a bound never
        makes an end: at worst it costs a search a rank.

    Raises
    ------
    InvalidArgumentError
        If ``A``, ``W`` or ``start`` is not a real array, ``A`` or ``W`` is not 2-D with
        at least one column, ``W`` has not one column per column of ``A`` or is not
        finite, ``start`` has not the shape of ``A``, or ``steps`` is not an integer >= 1.
    """
    A, W = _real(A, "A"), _real(W, "W")
    steps = check_int(DUAL_STEPS if steps is None else steps, "steps", 1)
    if A.ndim != 2 or W.ndim != 2 or W.shape[1] != A.shape[1] or A.shape[1] == 0:
        raise InvalidArgumentError(f"A, W: expected (r, N) and (k, N) arrays with N >= 1, got "
                                   f"shapes {A.shape} and {W.shape}")
    if not np.isfinite(W).all():
        raise InvalidArgumentError("W: expected finite entries, got NaN or infinity")
    if start is not None:
        start = _real(start, "start")
        if start.shape != A.shape:
            raise InvalidArgumentError(f"start: expected shape {A.shape}, got {start.shape}")
    Q = np.linalg.qr(W.T)[0] if W.shape[0] else np.zeros((W.shape[1], 0))
    r = A.shape[0]
    best = np.full(r, -np.inf)
    if r == 0:
        return best
    with np.errstate(all="ignore"):
        if start is None:  # the least-squares residuals' signs: a's part in the null space
            Y = np.sign(A - (A @ Q) @ Q.T)
        else:
            Y = start.copy()
        history = []
        for _ in range(steps):
            before = np.abs(Y).max(axis=1)
            Y = Y - (Y @ Q) @ Q.T
            top = np.abs(Y).max(axis=1)
            # a point the projection nearly cancelled is rounding: W y = 0 fails relatively
            ok = top > 1e-3 * before
            val = np.where(ok, (Y * A).sum(axis=1) / np.where(ok, top, 1.0), -np.inf)
            val[~np.isfinite(val)] = -np.inf
            best = np.maximum(best, val)
            history.append(best.copy())
            if len(history) > 10 and not (
                    best > history[-11] + 1e-3 * np.abs(history[-11])).any():
                break
            Y = np.clip(Y, -1.0, 1.0)
    return best


class L1Refit:
    """l1 refit on nested bases: the first ``k`` rows of ``Vt`` (docs/theory/witnesses.md: l1 refit, row basis).

    ``feasible(k, eps)`` decides whether every row's optimum of ``min_u ||a_i - u Vt[:k]||_1``
    is ``<= eps``, solving as few rows exactly (HiGHS) as it can:

    0. where ``k N`` is at least :data:`DUAL_MIN_ENTRIES`, dual bounds
       (:func:`l1_dual_bounds`) of the :data:`DUAL_ROWS` rows of largest least-squares
       error and of the row that ended the last infeasible rank, once per ``k``: a bound
       above the target shows that row's optimum above it, so the rank fails without any
       LP (far below the least feasible rank, where a bisection's failing probes lie,
       they usually do);
    1. the row that ended the last infeasible rank, if any, is solved first: a rank that
       fails usually fails there;
    2. the other rows are screened (:func:`l1_candidates`: least squares for all rows,
       then reweighted least squares for the rows still above the target): a row whose
       candidate is within the target needs no LP, since any candidate bounds its row's
       optimum from above;
    3. the remaining rows are solved exactly, largest candidate error first, stopping at the
       first whose optimum exceeds the target.

    The decision is the one of solving every row exactly: a row is feasible iff some ``u``
    meets the target. Candidates and exact solutions are cached per ``k``, so all
    tolerances share them (of the exact solutions, only the rows solved). Every exact
    solve goes through one LP (:class:`~softrank.certifiers.lp.L1Regression` on all of
    ``Vt``): a new rank appends or deletes rows and the simplex restarts from the last
    solve's basis (docs/theory/witnesses.md#l1-refit, "One LP for every rank"). A row
    that needs its LP and whose LP is not optimal makes the rank unavailable (never
    feasible). ``dual_rows`` (default :data:`DUAL_ROWS`; 0 turns step 0 off) changes how
    long a rank takes, and not its decision as long as the LPs are exact; where HiGHS's
    tolerances are comparable to the entries (rows of mass ``1e-6``) the LPs' answer can
    depend on which rows they solve first, and step 0 changes that order
    (docs/theory/witnesses.md#dual-bounds-before-lps).
    With ``Vt`` the right singular vectors this is the *l1 refit*; with ``Vt`` the rows of
    ``A`` in greedy farthest-row order (column-pivoted QR of ``A^T``) it is the *row basis*
    construction.
    """

    method = "l1-refit"
    #: Rows given dual bounds per rank; None: :data:`DUAL_ROWS`, read at each rank.
    dual_rows: int | None = None

    def __init__(self, A: np.ndarray, Vt: np.ndarray, method: str | None = None):
        self.A = A
        self.Vt = Vt
        if method:
            self.method = method
        self._cache: dict[int, dict] = {}
        self._hardest: int | None = None
        self._solver: L1Regression | None = None

    def _state(self, k: int) -> dict:
        st = self._cache.get(k)
        if st is None:
            m = self.A.shape[0]
            # "U" holds the exactly solved rows only (row: u): a rank solves a few rows
            # exactly, and an m x k array is 88 MB at 4,096 keys and rank 2,700
            st = {"U": {}, "err": np.full(m, np.nan), "cU": None,
                  "cerr": None, "refined": np.zeros(m, dtype=bool),
                  "failed": False, "complete": False, "max": None,
                  "lb": np.full(m, -np.inf), "dual": False}
            self._cache[k] = st
        return st

    def _screen(self, st: dict, k: int, tgt: float, stop=None) -> None:
        """Candidates for every row (least squares, once per ``k``), refined by reweighted
        least squares on the unsolved rows still above ``tgt``; steps cut by ``stop`` leave
        the rows unrefined (a later call without a deadline refines them)."""
        W = self.Vt[:k]
        self._least_squares(st, k)
        rows = np.nonzero(~st["refined"] & np.isnan(st["err"]) & ~(st["cerr"] <= tgt))[0]
        if rows.size:
            U, e = l1_candidates(self.A[rows], W, U0=st["cU"][rows], target=tgt, stop=stop)
            better = e < st["cerr"][rows]
            st["cU"][rows[better]], st["cerr"][rows[better]] = U[better], e[better]
            st["refined"][rows] = not (stop is not None and stop())

    def _least_squares(self, st: dict, k: int) -> None:
        """Every row's least-squares candidate (once per ``k``)."""
        if st["cU"] is None:
            st["cU"], st["cerr"] = l1_candidates(self.A, self.Vt[:k], iters=0)

    def _dual(self, st: dict, k: int) -> np.ndarray:
        """Lower bounds on the rows' optima at rank ``k`` (``-inf`` where none): once per
        ``k``, :func:`l1_dual_bounds` of the :attr:`dual_rows` rows of largest
        least-squares error and of the row that ended the last infeasible rank."""
        n = DUAL_ROWS if self.dual_rows is None else self.dual_rows
        if not st["dual"] and n > 0 and k * self.A.shape[1] >= DUAL_MIN_ENTRIES:
            st["dual"] = True
            self._least_squares(st, k)
            rows = np.argsort(-st["cerr"], kind="stable")[:n]
            h = self._hardest
            if h is not None and h not in rows:
                rows = np.append(rows, h)
            W = self.Vt[:k]
            if np.isfinite(W).all():
                st["lb"][rows] = l1_dual_bounds(self.A[rows], W)
        return st["lb"]

    def _solve_row(self, st: dict, k: int, i: int, stop=None) -> float | None:
        """Row ``i``'s exact l1 optimum (cached); None when its LP is not optimal. A ``stop``
        with a ``left()`` (:class:`~softrank.certifiers.upper.basic.Deadline`) gives the LP
        at most the seconds left, when fewer than its own 60."""
        if not np.isnan(st["err"][i]):
            return float(st["err"][i])
        if self._solver is None:
            self._solver = L1Regression(self.Vt)  # one LP for every rank: rows come and go
        left = getattr(stop, "left", None)
        # an LP that reaches its limit is not optimal and its rank is given up; one cut by
        # a bracket's limit leaves the rank undecided (docs/theory/witnesses.md#l1-refit)
        limit = LP_TIME_LIMIT if left is None else min(LP_TIME_LIMIT, max(left(), 1e-3))
        u = self._solver.solve(self.A[i], k, time_limit=limit)
        if u is None:
            return None
        e = float(np.abs(self.A[i] - u @ self.Vt[:k]).sum())
        if not np.isfinite(e):
            return None
        st["U"][i], st["err"][i] = u, e
        return e

    def _best(self, st: dict, i: int) -> float:
        """Row ``i``'s smallest known error (exact or candidate; nan if neither)."""
        c = np.nan if st["cerr"] is None else st["cerr"][i]
        return float(np.fmin(st["err"][i], c))

    def feasible(self, k: int, eps: float, stop=None) -> bool:
        """True when every row's l1 optimum at rank ``k`` is ``<= eps`` (with slack).

        ``stop`` (optional) is asked before each exact row solve and each reweighting step of
        the screening; when it answers True the rank is left undecided and False returned
        (not shown to hold; nothing is recorded against the rank, and the rows solved so far
        stay cached)."""
        tgt = safe_target(eps)
        if k == 0:
            return bool(self.A.sum(axis=1).max() <= tgt)
        st = self._state(k)
        if st["failed"]:
            return False
        best = st["err"] if st["cerr"] is None else np.fmin(st["err"], st["cerr"])
        if (best[~np.isnan(st["err"])] > tgt).any():
            return False  # a solved row's optimum is above the target
        lb = self._dual(st, k)
        over = np.nonzero(lb > tgt * (1 + _DUAL_MARGIN) + _DUAL_MARGIN)[0]
        if over.size:  # a dual point shows a row's optimum above the target
            self._hardest = int(over[np.argmax(lb[over])])
            if not st["refined"].any():  # only least squares so far: made again if asked
                st["cU"], st["cerr"] = None, None
            return False
        h = self._hardest
        if h is not None and not self._best(st, h) <= tgt:
            if stop is not None and stop():
                return False  # undecided
            e = self._solve_row(st, k, h, stop)
            if e is None:
                st["failed"] = not (stop is not None and stop())  # cut by it: undecided
                return False
            if self._best(st, h) > tgt:
                return False
        self._screen(st, k, tgt, stop)
        need = np.nonzero(np.isnan(st["err"]) & ~(st["cerr"] <= tgt))[0]
        for i in need[np.argsort(-st["cerr"][need], kind="stable")]:  # hardest first
            if stop is not None and stop():
                return False  # undecided: the time limit ran out between two LPs
            e = self._solve_row(st, k, int(i), stop)
            if e is None:
                st["failed"] = not (stop is not None and stop())  # cut by it: undecided
                return False
            if self._best(st, int(i)) > tgt:
                self._hardest = int(i)
                return False
        st["complete"] = True
        return True

    def max_error(self, k: int, stop=None) -> float | None:
        """The exact max-row l1 optimum at rank ``k`` once ``feasible(k, .)`` has held
        (None before): rows solved exactly, largest candidate first, until no remaining
        candidate exceeds the largest optimum found (each candidate bounds its row's
        optimum from above). Used to predict ranks from exactly solved rows only.
        ``stop`` (optional) is asked before each reweighting step and each exact row
        solve; when it answers True, None is returned (nothing is recorded as the maximum;
        the rows solved so far stay cached)."""
        st = self._cache.get(k)
        if st is None or not st["complete"] or st["failed"]:
            return None
        if st["max"] is None:
            solved = ~np.isnan(st["err"])
            worst = float(np.max(st["err"][solved])) if solved.any() else -np.inf
            self._screen(st, k, worst, stop)  # refine every candidate that could exceed it
            for i in np.argsort(-st["cerr"], kind="stable"):
                if not np.isnan(st["err"][i]):
                    continue
                if not st["cerr"][i] > worst:
                    break  # every remaining candidate, so every remaining optimum, is <= worst
                if stop is not None and stop():
                    return None
                e = self._solve_row(st, k, int(i), stop)
                if e is None:
                    return None
                worst = max(worst, e)
            st["max"] = worst
        return st["max"]

    def error_shown(self, k: int) -> float | None:
        """The largest lower bound on a row's l1 optimum at rank ``k`` that its checks have
        shown so far (rows solved exactly, rows' dual bounds), so a lower bound on the
        max-row optimum; None when nothing is known. A rank that failed early shows the row
        that failed it, usually the worst: the searches predict from it
        (:meth:`~softrank.certifiers.upper.AlternatingL1.least_feasible_rank`)."""
        st = self._cache.get(k)
        if st is None:
            return None
        shown = np.concatenate([st["err"][~np.isnan(st["err"])], st["lb"][np.isfinite(st["lb"])]])
        return float(shown.max()) if shown.size else None

    def least_feasible_rank(self, eps: float, lo: int, hi: int, stop=None) -> int | None:
        """Least ``k`` in ``[lo, hi]`` that is feasible, by bisection (monotone in ``k``);
        ``stop`` as in :func:`least_feasible`."""
        return least_feasible(lambda k: self.feasible(k, eps, stop), lo, hi, stop=stop)

    def least_rank(self, eps: float, lo: int, hi: int, stop=None) -> UpperWitness | None:
        """The witness of :meth:`least_feasible_rank`, or None."""
        k = self.least_feasible_rank(eps, lo, hi, stop=stop)
        return None if k is None else self.witness(eps, k)

    def witness(self, eps: float, k: int) -> UpperWitness:
        st = self._cache[k]
        U = st["cU"]
        exact = [i for i in st["U"] if not st["err"][i] > st["cerr"][i]]
        if exact:
            U = U.copy()
            U[exact] = np.array([st["U"][i] for i in exact])
        return UpperWitness(eps, U, self.Vt[:k], self.method)


class Hybrid:
    """Heavy key columns kept exactly plus an l1 refit of the rest (docs/theory/witnesses.md#hybrid).

    For ``h`` heavy keys ``H`` (largest column sums of ``A``), ``B = [A_H | U W]`` on the
    columns ``H`` and the rest, with ``U W`` an l1 refit of ``A[:, rest]`` on its own top
    right singular vectors. ``rank(B) <= h + k``. ``sizes`` lists the ``h`` tried, in
    order; :meth:`option` makes each one's refit when a search first reaches it.
    """

    method = "hybrid"

    def __init__(self, A: np.ndarray, max_heavy: int = 3, plain: bool = False):
        """``plain`` adds ``h = 0`` (no heavy key: the l1 refit of ``A`` itself). Inside a
        bracket it is left out: the l1-refit construction runs that same fit first, over a
        window that contains hybrid's, and its error is non-increasing in ``k`` (nested
        subspaces), so ``h = 0`` could not improve the upper end there."""
        self.A = A
        m, N = A.shape
        colmass = A.sum(axis=0)
        order = np.argsort(-colmass, kind="stable")
        # a key is "heavy" when it carries more than twice a uniform key's mass
        self._heavy = [int(j) for j in order[:max_heavy] if colmass[j] > 2.0 * m / N]
        self.sizes = list(range(0 if plain else 1, len(self._heavy) + 1))
        self._options: dict[int, tuple] = {}

    def option(self, h: int) -> tuple:
        """``(H, rest, fit)`` for the ``h`` heaviest keys, made when a search first asks for
        it: at 4,096 keys each option's SVD and fit take tens of seconds and hundreds of MiB,
        and a time limit often ends the search before the last."""
        if h not in self._options:
            H = np.array(sorted(self._heavy[:h]), dtype=np.intp)
            rest = np.setdiff1d(np.arange(self.A.shape[1]), H)
            _, _, Vt = np.linalg.svd(self.A[:, rest], full_matrices=False)
            self._options[h] = (H, rest, L1Refit(self.A[:, rest], Vt, method="hybrid"))
        return self._options[h]

    def least_rank(self, eps: float, lo: int, hi: int, stop=None) -> UpperWitness | None:
        """The witness of the least total rank in ``[lo, hi]`` over the heavy-key options,
        or None; ``stop`` as in :func:`least_feasible`, also asked before each option after
        the first (whose SVD and refit take seconds at 1,024 keys), found or not."""
        best = None
        for h in self.sizes:
            if h != self.sizes[0] and stop is not None and stop():
                break
            H, rest, fit = self.option(h)
            cap = (best[0] - 1) if best else hi
            k = fit.least_feasible_rank(eps, max(lo - h, 1), cap - h, stop=stop)
            if k is None:
                continue
            best = (h + k, H, rest, fit, k)
        if best is None:
            return None
        _, H, rest, fit, k = best
        sub = fit.witness(eps, k)
        m, N = self.A.shape
        U = np.hstack([self.A[:, H], sub.U])
        W = np.zeros((H.size + k, N))
        W[np.arange(H.size), H] = 1.0
        W[H.size:, rest] = sub.W
        return UpperWitness(eps, U, W, self.method)

"""Upper witnesses: explicit low-rank matrices within ``eps`` of ``A`` (docs/theory/witnesses.md).

Every function here returns candidate :class:`~softrank.checker.UpperWitness` objects
(``U (m, k)``, ``W (k, N)``) and never a bare number: a rank is reported only after the
checker has proved ``||A - U W||_inf <= eps``. Each construction searches the least rank it
reaches for every tolerance, sharing work across tolerances:

* :class:`TruncatedSVD` -- the error of every truncation, in one pass (errors of all ranks
  from rank-one updates);
* :class:`L1Refit` -- right basis ``V_k^T`` (top right singular vectors) and each row of
  ``U`` by an l1 regression (HiGHS LP, warm-started across rows), after the rows are
  screened by :func:`l1_candidates` (rows already within the target need no LP). The
  subspaces are nested, so the best max-row error is non-increasing in ``k`` and a
  bisection is exact; per-rank results are cached and shared by all tolerances;
* :class:`L1Refit` on the rows of ``A`` (greedy farthest-row order) -- the *row basis*;
* :class:`AlternatingL1` -- both factors by iteratively reweighted least squares with a
  minimax row reweighting, rows polished by exact l1 regressions;
* :class:`TrustRegionPolish` -- the alternating factors one rank below the best witness,
  improved by exact LPs: ``W`` by a box-constrained LP on the max row error, ``U`` by l1
  regressions;
* :func:`key_support` -- greedy key cover, ``B = A`` restricted to a key set ``S`` with
  ``sum_{j in S} A_ij >= 1 - eps`` on every row;
* :class:`Hybrid` -- the heaviest key columns exactly (attention sinks) plus an l1 refit of
  the remaining columns; rank adds;
* :func:`identity_witness` -- ``B = A`` itself, rank ``<= min(m, N)``, error 0: the bound
  every tolerance has, checked exactly (no rounding), so no bracket lacks an upper end.
"""

from __future__ import annotations

import numpy as np

from ..checker import UpperWitness
from ..errors import InvalidArgumentError
from ..validation import check_int, check_positive, check_real
from .linalg import weighted_solves
from .lp import L1Regression, solve_inequality_lp

__all__ = [
    "least_feasible", "l1_candidates",
    "TruncatedSVD", "L1Refit", "AlternatingL1", "TrustRegionPolish", "key_support", "Hybrid",
    "identity_witness",
    "SAFETY",
]

#: Relative slack kept below ``eps`` when selecting a candidate, so that the checker's
#: rounding bound (about ``N u`` relative) does not reject a witness that is right at ``eps``.
SAFETY = 1e-9


def _target(eps: float) -> float:
    return eps * (1.0 - SAFETY) - 1e-15


def least_feasible(feasible, lo: int, hi: int, guess=None) -> int | None:
    """Least ``k`` in ``[max(lo, 1), hi]`` with ``feasible(k)``, assuming feasibility is
    monotone (true from some ``k`` on): ``hi`` first, then bisection. None if ``hi`` fails.

    ``guess`` (optional) returns a predicted answer, or None when it has nothing to predict
    from; it is asked before ``hi`` is probed and, if it had nothing, again after. The
    search probes the prediction and gallops away from it (steps 1, 2, 4, ...) until the
    answer is enclosed, then bisects the enclosure; ``hi`` is probed only when needed. With a
    prediction within a rank or two this takes 2-4 probes where the bisection of a wide
    ``[lo, hi]`` takes ``log2(hi - lo) + 1``. Either way the result ``k`` has ``feasible(k)``
    and (when ``k > lo``) not ``feasible(k - 1)``; None means ``feasible(hi)`` failed.
    """
    lo = max(lo, 1)
    if hi < lo:
        return None
    g = guess() if guess is not None and lo < hi else None
    hi_known = False
    if g is None:
        if not feasible(hi):
            return None
        hi_known = True
        g = guess() if guess is not None and lo < hi else None
    if g is not None and lo < hi:
        g = min(max(int(g), lo), hi - 1)
        if feasible(g):
            hi, step, hi_known = g, 1, True
            while hi - step >= lo:
                if feasible(hi - step):
                    hi, step = hi - step, 2 * step
                else:
                    lo = hi - step + 1
                    break
        else:
            lo, step = g + 1, 1
            while lo + step - 1 < hi:
                if feasible(lo + step - 1):
                    hi, hi_known = lo + step - 1, True
                    break
                lo, step = lo + step, 2 * step
    if not hi_known and not feasible(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if feasible(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


class TruncatedSVD:
    """Truncated-SVD witnesses ``U = U_k S_k``, ``W = V_k^T`` for all ``k`` at once.

    Parameters
    ----------
    A : (m, N) float64 ndarray
    svd : tuple ``(U, s, Vt)`` from ``numpy.linalg.svd(A, full_matrices=False)``
    """

    method = "truncated-svd"

    def __init__(self, A: np.ndarray, svd):
        self.A = A
        self.U, self.s, self.Vt = svd
        p = self.s.size
        errs = np.empty(p + 1)
        R = A.copy()
        errs[0] = np.abs(R).sum(axis=1).max()
        for k in range(p):
            R -= np.outer(self.U[:, k] * self.s[k], self.Vt[k])
            errs[k + 1] = np.abs(R).sum(axis=1).max()
        #: errors[k] = max row l1 error of the rank-k truncation (float64, unchecked)
        self.errors = errs

    def least_rank(self, eps: float) -> int | None:
        ok = np.nonzero(self.errors[1:] <= _target(eps))[0]
        return int(ok[0]) + 1 if ok.size else None

    def witness(self, eps: float, k: int) -> UpperWitness:
        return UpperWitness(eps, self.U[:, :k] * self.s[:k], self.Vt[:k], self.method)


def l1_candidates(A: np.ndarray, W: np.ndarray, iters: int = 8, delta: float = 1e-8,
                  U0: np.ndarray | None = None, target: float = -np.inf):
    """Cheap candidates for ``min_u ||a_i - u W||_1`` on every row of ``A`` at once.

    Least squares (or the given start ``U0``), then up to ``iters`` steps of iteratively
    reweighted least squares (weights ``1 / max(|r_ij|, delta)``; each step a majorisation
    of the l1 loss) on the rows whose best error is still above ``target``, keeping each
    row's best iterate. The systems ``G_i = W diag(w_i) W^T`` of those rows are formed by
    one matrix product (:func:`softrank.certifiers.linalg.weighted_solves`). Any ``u``
    bounds its row's l1 optimum from above, so a row whose candidate error is within a
    target needs no LP (docs/theory/witnesses.md#l1-refit).

    Parameters
    ----------
    A : (m, N) float64 ndarray
    W : (k, N) float64 ndarray
        Basis (rows).
    iters : int
        Reweighting steps after the start.
    delta : float
        Floor of ``|r_ij|`` in the weights.
    U0 : (m, k) float64 ndarray, optional
        Start instead of least squares.
    target : float
        A row whose best error is at most ``target`` stops iterating.

    Returns
    -------
    U : (m, k) float64 ndarray
        Each row's best coefficients found.
    err : (m,) float64 ndarray
        ``||a_i - U_i W||_1`` as computed in float64 (``inf`` where not finite).
    """
    m, N = A.shape
    k = W.shape[0]
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
            keep = best_err[idx] > target
            if not keep.any():
                break
            idx, U = idx[keep], U[keep]
            Ai = A[idx]
            wt = 1.0 / np.maximum(np.abs(Ai - U @ W), delta)
            try:
                U = weighted_solves(W, wt, (wt * Ai) @ W.T)
            except np.linalg.LinAlgError:
                break
            if not np.isfinite(U).all():
                break
            err = np.abs(Ai - U @ W).sum(axis=1)
            better = np.isfinite(err) & (err < best_err[idx])
            best_U[idx[better]], best_err[idx[better]] = U[better], err[better]
    return best_U, best_err


class L1Refit:
    """l1 refit on nested bases: the first ``k`` rows of ``Vt`` (docs/theory/witnesses.md: l1 refit, row basis).

    ``feasible(k, eps)`` decides whether every row's optimum of ``min_u ||a_i - u Vt[:k]||_1``
    is ``<= eps``, solving as few rows exactly (HiGHS) as it can:

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
    tolerances share them. A row that needs its LP and whose LP is not optimal makes the
    rank unavailable (never feasible).
    With ``Vt`` the right singular vectors this is the *l1 refit*; with ``Vt`` the rows of
    ``A`` in greedy farthest-row order (column-pivoted QR of ``A^T``) it is the *row basis*
    construction.
    """

    method = "l1-refit"

    def __init__(self, A: np.ndarray, Vt: np.ndarray, method: str | None = None):
        self.A = A
        self.Vt = Vt
        if method:
            self.method = method
        self._cache: dict[int, dict] = {}
        self._hardest: int | None = None

    def _state(self, k: int) -> dict:
        st = self._cache.get(k)
        if st is None:
            m = self.A.shape[0]
            st = {"U": np.full((m, k), np.nan), "err": np.full(m, np.nan), "cU": None,
                  "cerr": None, "refined": np.zeros(m, dtype=bool), "solver": None,
                  "failed": False, "complete": False, "max": None}
            self._cache[k] = st
        return st

    def _screen(self, st: dict, k: int, tgt: float) -> None:
        """Candidates for every row (least squares, once per ``k``), refined by reweighted
        least squares on the unsolved rows still above ``tgt``."""
        W = self.Vt[:k]
        if st["cU"] is None:
            st["cU"], st["cerr"] = l1_candidates(self.A, W, iters=0)
        rows = np.nonzero(~st["refined"] & np.isnan(st["err"]) & ~(st["cerr"] <= tgt))[0]
        if rows.size:
            U, e = l1_candidates(self.A[rows], W, U0=st["cU"][rows], target=tgt)
            better = e < st["cerr"][rows]
            st["cU"][rows[better]], st["cerr"][rows[better]] = U[better], e[better]
            st["refined"][rows] = True

    def _solve_row(self, st: dict, k: int, i: int) -> float | None:
        """Row ``i``'s exact l1 optimum (cached); None when its LP is not optimal."""
        if not np.isnan(st["err"][i]):
            return float(st["err"][i])
        W = self.Vt[:k]
        if st["solver"] is None:
            st["solver"] = L1Regression(W)
        u = st["solver"].solve(self.A[i])
        if u is None:
            return None
        e = float(np.abs(self.A[i] - u @ W).sum())
        if not np.isfinite(e):
            return None
        st["U"][i], st["err"][i] = u, e
        return e

    def _best(self, st: dict, i: int) -> float:
        """Row ``i``'s smallest known error (exact or candidate; nan if neither)."""
        c = np.nan if st["cerr"] is None else st["cerr"][i]
        return float(np.fmin(st["err"][i], c))

    def feasible(self, k: int, eps: float) -> bool:
        """True when every row's l1 optimum at rank ``k`` is ``<= eps`` (with slack)."""
        tgt = _target(eps)
        if k == 0:
            return bool(self.A.sum(axis=1).max() <= tgt)
        st = self._state(k)
        if st["failed"]:
            return False
        best = st["err"] if st["cerr"] is None else np.fmin(st["err"], st["cerr"])
        if (best[~np.isnan(st["err"])] > tgt).any():
            return False  # a solved row's optimum is above the target
        h = self._hardest
        if h is not None and not self._best(st, h) <= tgt:
            e = self._solve_row(st, k, h)
            if e is None:
                st["failed"] = True
                return False
            if self._best(st, h) > tgt:
                return False
        self._screen(st, k, tgt)
        need = np.nonzero(np.isnan(st["err"]) & ~(st["cerr"] <= tgt))[0]
        for i in need[np.argsort(-st["cerr"][need], kind="stable")]:  # hardest first
            e = self._solve_row(st, k, int(i))
            if e is None:
                st["failed"] = True
                return False
            if self._best(st, int(i)) > tgt:
                self._hardest = int(i)
                return False
        st["complete"] = True
        return True

    def max_error(self, k: int) -> float | None:
        """The exact max-row l1 optimum at rank ``k`` once ``feasible(k, .)`` has held
        (None before): rows solved exactly, largest candidate first, until no remaining
        candidate exceeds the largest optimum found (each candidate bounds its row's
        optimum from above). Used to predict ranks from exactly solved rows only."""
        st = self._cache.get(k)
        if st is None or not st["complete"] or st["failed"]:
            return None
        if st["max"] is None:
            solved = ~np.isnan(st["err"])
            worst = float(np.max(st["err"][solved])) if solved.any() else -np.inf
            self._screen(st, k, worst)  # refine every candidate that could exceed it
            for i in np.argsort(-st["cerr"], kind="stable"):
                if not np.isnan(st["err"][i]):
                    continue
                if not st["cerr"][i] > worst:
                    break  # every remaining candidate, so every remaining optimum, is <= worst
                e = self._solve_row(st, k, int(i))
                if e is None:
                    return None
                worst = max(worst, e)
            st["max"] = worst
        return st["max"]

    def least_rank(self, eps: float, lo: int, hi: int) -> int | None:
        """Least ``k`` in ``[lo, hi]`` that is feasible, by bisection (monotone in ``k``)."""
        return least_feasible(lambda k: self.feasible(k, eps), lo, hi)

    def witness(self, eps: float, k: int) -> UpperWitness:
        st = self._cache[k]
        exact = ~np.isnan(st["err"]) & ~(st["err"] > st["cerr"])
        U = np.where(exact[:, None], st["U"], st["cU"])
        return UpperWitness(eps, U, self.Vt[:k], self.method)


class AlternatingL1:
    """Alternating l1 with minimax reweighting, finished by an exact LP polish (docs/theory/witnesses.md#alternating-l1).

    For a rank ``k``: start from the truncated SVD and run iteratively reweighted least
    squares on both factors -- weights ``1 / max(|residual|, delta)`` make each weighted
    least-squares step a majorisation of the l1 loss -- with multiplicative row weights
    ``(err_i / mean err)`` that grow on the rows whose error is largest (a minimax
    reweighting: the target is the *max* row error). The best right factor ``W`` seen is then
    polished exactly: every row of ``U`` by an l1 regression on ``W`` (HiGHS, an
    :class:`L1Refit` on ``W`` with its early exit). ``W`` depends on ``k`` only, so it and the
    polished rows are cached and shared by all tolerances; the method is a heuristic (not
    monotone in ``k`` in general), so the bisection in :meth:`least_rank` may miss a smaller
    rank but never reports one that does not hold: the witness is checked.

    Parameters
    ----------
    A : (m, N) float64 ndarray
        The attention matrix.
    svd : tuple of ndarray
        ``(U, s, Vt)`` of ``A`` (thin), the start of the iterations.
    iters : int
        Reweighted least-squares iterations per rank.
    delta : float
        The floor of ``|residual|`` in the weights (the smoothing of the l1 loss): ``1e-6``
        for ``alternating-l1``, ``1e-3`` for its restart ``alternating-l1-smooth``
        (docs/theory/witnesses.md#alternating-l1).
    delta_start : float, optional
        With it, the floor is annealed: iteration ``t`` (from 0) uses
        ``max(delta, delta_start * delta_decay**t)``, a smooth majoriser first and a sharper
        one as the factors settle (``alternating-l1-anneal``: ``1e-2``, ``0.8``, floor
        ``1e-4``). Without it (the default) every iteration uses ``delta``.
    delta_decay : float
        The factor of the annealed floor per iteration, in ``(0, 1]``; read only with
        ``delta_start``.
    tsvd_errors : (p,) ndarray, optional
        The truncated-SVD error curve, for the rank prediction of :meth:`least_rank`.
    method : str, optional
        The name its witnesses carry (default ``"alternating-l1"``).

    Raises
    ------
    InvalidArgumentError
        If ``iters`` is not an integer >= 0, ``delta`` or ``delta_start`` not a finite
        number > 0, ``delta_decay`` not one in ``(0, 1]`` (checked with or without
        ``delta_start``), or ``method`` not a non-empty string.
    """

    method = "alternating-l1"

    def __init__(self, A: np.ndarray, svd, iters: int = 40, delta: float = 1e-6,
                 tsvd_errors: np.ndarray | None = None, method: str | None = None,
                 delta_start: float | None = None, delta_decay: float = 1.0):
        delta = check_positive(delta, "delta")
        if delta_start is not None:
            delta_start = check_positive(delta_start, "delta_start")
        delta_decay = check_real(delta_decay, "delta_decay", 0, 1, lo_open=True)
        if method is not None:
            if not (isinstance(method, str) and method):
                raise InvalidArgumentError(f"method: expected a non-empty str, got {method!r}")
            self.method = method
        self.A = A
        self.U0, self.s0, self.Vt0 = svd
        self.iters = check_int(iters, "iters", 0)
        self.delta = delta
        self.delta_start, self.delta_decay = delta_start, delta_decay
        self._fits: dict[int, L1Refit] = {}
        self._svd = svd
        self._tsvd_errors = None if tsvd_errors is None else np.asarray(tsvd_errors)

    def irls_basis(self, k: int) -> np.ndarray:
        """A right basis ``W`` (k, N) of the alternating IRLS at rank ``k`` (no LP polish).

        Iteratively reweighted least squares on both factors, started from the SVD given at
        construction, with minimax row weights; the attacks use it as a start.

        Raises
        ------
        InvalidArgumentError
            If ``k`` is not an integer from 1 to the number of singular triples given at
            construction (at most ``min(m, N)``; a larger ``k`` was read as that number, a
            negative one counted from the end).
        """
        A = self.A
        k = check_int(k, "k", 1)
        p = min(self.U0.shape[1], self.s0.shape[0], self.Vt0.shape[0])
        if k > p:
            raise InvalidArgumentError(f"k must be at most {p}, the number of singular triples "
                                       f"given (A of shape {A.shape}), got {k}")
        U = self.U0[:, :k] * self.s0[:k]
        W = self.Vt0[:k].copy()
        rho = np.ones(A.shape[0])
        best_err, best_W = np.inf, W.copy()
        for it in range(self.iters):
            d = self.delta if self.delta_start is None else max(
                self.delta, self.delta_start * self.delta_decay ** it)
            R = A - U @ W
            err = np.abs(R).sum(axis=1)
            if err.max() < best_err:
                best_err, best_W = err.max(), W.copy()
            if not err.max() > 0:
                break  # an exact fit: nothing left to reweight
            rho = rho * (err / err.mean())
            rho /= rho.mean()
            wt = 1.0 / np.maximum(np.abs(R), d)  # (m, N)
            try:
                U = weighted_solves(W, wt, (wt * A) @ W.T)  # (m, k)
                R = A - U @ W
                wt = rho[:, None] / np.maximum(np.abs(R), d)
                W = weighted_solves(U.T, wt.T, (wt * A).T @ U).T  # (k, N)
            except np.linalg.LinAlgError:
                break  # a degenerate step: keep the best W seen so far
            if not (np.isfinite(U).all() and np.isfinite(W).all()):
                break
            # U W is invariant under U D, D^-1 W: the iteration can drift (U -> 0,
            # W -> inf) until the LP polish rejects W's scale; bring W's rows back to unit
            # length when they leave [1e-6, 1e6] (only then: the weighting is not exactly
            # scale-free, and rescaling every step changes the iterates)
            nrm = np.linalg.norm(W, axis=1)
            if not (nrm > 0).all():
                break
            if nrm.max() > 1e6 or nrm.min() < 1e-6:
                W, U = W / nrm[:, None], U * nrm
        R = A - U @ W
        if np.isfinite(R).all() and np.abs(R).sum(axis=1).max() < best_err:
            best_W = W
        return best_W

    def _fit(self, k: int) -> "L1Refit":
        fit = self._fits.get(k)
        if fit is None:
            fit = L1Refit(self.A, self.irls_basis(k), method=self.method)
            self._fits[k] = fit
        return fit

    def feasible(self, k: int, eps: float) -> bool:
        """IRLS at rank ``k`` (cached), then the exact row polish with early exit."""
        return self._fit(k).feasible(k, eps)

    def _predict(self, eps: float, hi: int) -> int | None:
        """Predicted least rank: the truncated-SVD error curve scaled to pass through the
        polished error of the largest rank fitted so far (``e(k) ~ c e_svd(k)``, any
        tolerance: the fits are shared); None before any rank has a complete fit."""
        if self._tsvd_errors is None:  # only searches need it (attacks fit single ranks)
            self._tsvd_errors = TruncatedSVD(self.A, self._svd).errors
        e_svd = self._tsvd_errors
        # the largest rank whose fit has held at some tolerance, with its exact max error
        # (rows solved exactly: screened candidates would only bound it from above)
        done = [k for k, fit in self._fits.items()
                if fit._cache.get(k) is not None and fit._cache[k]["complete"]
                and k < e_svd.size and e_svd[k] > 0]
        if not done:
            return None
        k0 = max(done)
        e0 = self._fits[k0].max_error(k0)
        if e0 is None:
            return None
        ok = np.nonzero((e0 / e_svd[k0]) * e_svd[1:hi + 1] <= _target(eps))[0]
        return int(ok[0]) + 1 if ok.size else hi

    def least_rank(self, eps: float, lo: int, hi: int) -> int | None:
        """Least ``k`` in ``[lo, hi]`` that is feasible: ``hi`` is tried first (most calls end
        there, when the construction cannot beat the best so far), then a search around the
        rank predicted from the truncated-SVD error curve (:func:`least_feasible`): the
        answer is usually 80-95 % of ``hi``, where a plain bisection of ``[lo, hi]`` probes
        its wasted midpoint first, and every probe costs an IRLS run."""
        return least_feasible(lambda k: self.feasible(k, eps), lo, hi,
                              guess=lambda: self._predict(eps, hi))

    def witness(self, eps: float, k: int) -> UpperWitness:
        return self._fits[k].witness(eps, k)


def identity_witness(A: np.ndarray, eps: float) -> UpperWitness:
    """``B = A`` as ``A I_N`` (``N <= m``) or ``I_m A`` (``m < N``): ``r_eps(A) <= min(m, N)``."""
    m, N = A.shape
    if N <= m:
        return UpperWitness(eps, A.copy(), np.eye(N), "identity")
    return UpperWitness(eps, np.eye(m), A.copy(), "identity")


def key_support(A: np.ndarray, eps: float) -> UpperWitness | None:
    """Greedy key cover (docs/theory/witnesses.md#key-support).

    Adds, one at a time, the key that covers most of the rows' remaining deficit
    ``max(0, (1 - eps) - mass_S(i))`` until every row has mass ``>= 1 - eps`` on ``S``;
    ``B = A[:, S] E_S`` has rank ``<= |S|`` and error ``1 - mass_S(i)`` on row ``i``.
    Returns None when the cover would need more than ``min(m, N)`` keys.
    """
    m, N = A.shape
    need_total = 1.0 - _target(eps)
    mass = np.zeros(m)
    chosen: list[int] = []
    free = np.ones(N, dtype=bool)
    while True:
        deficit = np.maximum(need_total - mass, 0.0)
        if not (deficit > 0).any():
            break
        gain = np.minimum(A, deficit[:, None]).sum(axis=0)
        gain[~free] = -1.0
        j = int(gain.argmax())
        if gain[j] <= 0:
            return None
        chosen.append(j)
        free[j] = False
        mass += A[:, j]
        if len(chosen) > min(m, N):
            return None  # such a cover cannot beat rank min(m, N), which any B reaches
    S = np.array(sorted(chosen), dtype=np.int64)
    W = np.zeros((S.size, N))
    W[np.arange(S.size), S] = 1.0
    return UpperWitness(eps, A[:, S].copy(), W, "key-support")


class Hybrid:
    """Heavy key columns kept exactly plus an l1 refit of the rest (docs/theory/witnesses.md#hybrid).

    For ``h`` heavy keys ``H`` (largest column sums of ``A``), ``B = [A_H | U W]`` on the
    columns ``H`` and the rest, with ``U W`` an l1 refit of ``A[:, rest]`` on its own top
    right singular vectors. ``rank(B) <= h + k``.
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
        heavy = [int(j) for j in order[:max_heavy] if colmass[j] > 2.0 * m / N]
        self.options = []
        for h in range(0 if plain else 1, len(heavy) + 1):
            H = np.array(sorted(heavy[:h]), dtype=np.intp)
            rest = np.setdiff1d(np.arange(N), H)
            _, _, Vt = np.linalg.svd(A[:, rest], full_matrices=False)
            self.options.append((H, rest, L1Refit(A[:, rest], Vt, method="hybrid")))

    def least_rank(self, eps: float, lo: int, hi: int):
        """Least total rank in ``[lo, hi]`` over the heavy-key options: ``(rank, witness)``."""
        best = None
        for H, rest, fit in self.options:
            h = H.size
            cap = (best[0] - 1) if best else hi
            k = fit.least_rank(eps, max(lo - h, 1), cap - h)
            if k is None:
                continue
            best = (h + k, H, rest, fit, k)
        if best is None:
            return None
        total, H, rest, fit, k = best
        sub = fit.witness(eps, k)
        m, N = self.A.shape
        U = np.hstack([self.A[:, H], sub.U])
        W = np.zeros((H.size + k, N))
        W[np.arange(H.size), H] = 1.0
        W[H.size:, rest] = sub.W
        return total, UpperWitness(eps, U, W, self.method)


class TrustRegionPolish:
    """Trust-region LP polish of the alternating-l1 factors (docs/theory/witnesses.md#trust-region-polish).

    At a rank ``k`` below the best witness so far: start from the alternating IRLS basis
    ``W`` (:meth:`AlternatingL1.irls_basis`, shared) and fit every row of ``U`` exactly
    (an l1 regression per row). Then alternate

    * a **W step**: ``W <- W + D`` where ``D`` minimises ``max_i ||A_i - U_i (W + D)||_1``
      for the fixed ``U`` within the box ``|D| <= delta``. The LP is an exact model of that
      problem: an entry whose residual cannot change sign within the box
      (``|R_ij| > ||U_i||_1 delta``) enters with its current sign, every other entry through
      its own ``|.|`` variable; a row whose error cannot reach the target within the box
      (``err_i + ||U_i||_1 delta N <= target``) is left out, since it stays below it;
    * a **U step**: every row of ``U`` refit exactly on the new ``W`` (each row's error can
      only fall, so the max row error never rises).

    A step that lowers the max row error is kept (and the polish stops when the remaining
    steps could not reach the target even at that step's gain); one that does not shrinks
    ``delta`` fourfold (``delta`` starts at ``5e-4 max |W|``: larger boxes let more residuals change
    sign, and the LP's cost grew fast with them). The polish stops at the target, after
    ``steps`` W steps, when ``delta`` falls below ``1e-7 max |W|``, or at an LP with more
    than ``max_nonzeros`` constraint entries or that needs more than ``max_iterations``
    simplex iterations: a work budget, deterministic, so a bracket does not depend on the
    machine's speed. The witness is checked like every other.

    This is a lighter form of the trust-region finish of docs/theory/exact.md (what searches
    close): on the default panel it lowered 184 of 537 upper ends (292 ranks in all) below
    the other constructions'; the 12 steps were chosen by measurement (docs/theory/witnesses.md).

    Parameters
    ----------
    A : (m, N) float64 ndarray
        The attention matrix (rows sum to 1).
    start : AlternatingL1
        Its IRLS bases (``start._fit(k).Vt``) are the starting ``W``; shared with the
        alternating-l1 construction of the same bracket.
    steps : int
        W steps per rank and call.
    max_nonzeros, max_iterations : int
        The budget of one W-step LP (constraint entries; HiGHS simplex iterations).
    delta : float
        The first box half-width, relative to ``max |W|``.
    """

    method = "trust-region"

    def __init__(self, A: np.ndarray, start: "AlternatingL1", steps: int = 12,
                 max_nonzeros: int = 150_000, max_iterations: int = 5_000,
                 delta: float = 5e-4):
        self.A = A
        self.start = start
        self.steps = steps
        self.max_nonzeros = max_nonzeros
        self.max_iterations = max_iterations
        self.delta = delta
        self._done: dict[int, tuple] = {}  # k -> (max error, U, W, budget spent)

    def _u_step(self, W: np.ndarray) -> np.ndarray | None:
        """Every row of ``U`` by its exact l1 regression on ``W``; None if an LP is not
        optimal."""
        reg = L1Regression(W)
        U = np.empty((self.A.shape[0], W.shape[0]))
        for i, a in enumerate(self.A):
            u = reg.solve(a)
            if u is None:
                return None
            U[i] = u
        return U

    def w_step(self, U: np.ndarray, W: np.ndarray, delta: float, target: float):
        """``W + D`` for the box LP at ``delta``, or None when the LP is over budget (more
        than ``max_nonzeros`` entries) or not optimal (including the simplex iteration
        limit)."""
        import scipy.sparse as sp

        A = self.A
        m, N = A.shape
        k = U.shape[1]
        n = k * N
        R = A - U @ W
        err = np.abs(R).sum(axis=1)
        unorm = np.abs(U).sum(axis=1)
        rows = np.nonzero(err + unorm * delta * N > target)[0]
        if rows.size == 0:
            return W
        Ur, Rr = U[rows], R[rows]
        flip = np.abs(Rr) <= (unorm[rows] * delta)[:, None]
        fi, fj = np.nonzero(flip)
        nf = fi.size
        s = np.where(flip, 0.0, np.sign(Rr))
        # entries: D in the row constraints, e and t there, D and e in the 2 nf flip rows
        nnz = int(np.count_nonzero(s)) * k + nf + rows.size + 2 * nf * (k + 1)
        if nnz > self.max_nonzeros:
            return None
        r = rows.size
        # columns: D (n, D[c, j] at c N + j) | e (nf) | t
        # row i: sum_j s_ij (R_ij - U_i D_j) + sum_{flip j} e_ij - t <= 0
        Dco = sp.csr_matrix(-(Ur[:, :, None] * s[:, None, :]).reshape(r, n))
        E = sp.csr_matrix((np.ones(nf), (fi, np.arange(nf))), shape=(r, nf))
        C1 = sp.hstack([Dco, E, sp.csr_matrix(-np.ones((r, 1)))])
        b1 = -(s * Rr).sum(axis=1)
        # flip entries: +-(R_ij - U_i D_j) <= e_ij
        rr = np.repeat(np.arange(nf), k)
        cc = (np.arange(k)[None, :] * N + fj[:, None]).ravel()
        UD = sp.csr_matrix((Ur[fi].ravel(), (rr, cc)), shape=(nf, n))
        Ie = sp.identity(nf, format="csr")
        z = sp.csr_matrix((nf, 1))
        C = sp.vstack([C1, sp.hstack([-UD, -Ie, z]), sp.hstack([UD, -Ie, z])]).tocsc()
        ub = np.concatenate([b1, -Rr[flip], Rr[flip]])
        nc = n + nf + 1
        cost = np.zeros(nc)
        cost[-1] = 1.0
        lower = np.concatenate([np.full(n, -delta), np.zeros(nf), [-np.inf]])
        upper = np.concatenate([np.full(n, delta), np.full(nf, np.inf), [np.inf]])
        # one solve per LP: presolve costs more than it saves here (W-step LPs of a MiniLM
        # head of width 64 at rank 29 ran 1.3-2.2x faster without it)
        res = solve_inequality_lp(C, ub, cost, lower, upper, self.max_iterations,
                                  options={"presolve": "off"})
        if not res.success:
            return None
        x = res.x
        return W + np.clip(x[:n].reshape(k, N), -delta, delta)

    def polish(self, k: int, target: float):
        """``(max row error, U, W)`` after the polish at rank ``k`` toward ``target``, or None
        when an l1 regression is not optimal. Cached per ``k``: a later target reuses a pair
        that already meets it, or resumes the polish when its budget was not spent."""
        got = self._done.get(k)
        if got is not None and (got[0] <= target or got[3]):
            return got[:3]
        W = self.start._fit(k).Vt if got is None else got[2]  # the IRLS basis, shared
        U = self._u_step(W) if got is None else got[1]
        if U is None:
            return None
        err = float(np.abs(self.A - U @ W).sum(axis=1).max())
        delta = self.delta * float(np.abs(W).max())
        floor = 1e-7 * float(np.abs(W).max())
        spent = False
        for step in range(self.steps):
            if err <= target or delta < floor:
                break
            out = self.w_step(U, W, delta, target)
            if out is None:
                spent = True  # over budget or no optimal LP: nothing more to gain here
                break
            W2 = out
            U2 = self._u_step(W2)
            if U2 is None:
                spent = True
                break
            e2 = float(np.abs(self.A - U2 @ W2).sum(axis=1).max())
            if np.isfinite(e2) and e2 < err:
                gain = err - e2
                W, U, err = W2, U2, e2
                if err - target > gain * (self.steps - step - 1):
                    # out of reach even at this step's rate (the rate falls as the
                    # box shrinks or the fit settles): stop, as the budget would
                    spent = err > target
                    break
            else:
                delta /= 4.0
        else:
            spent = True
        spent = spent or delta < floor
        self._done[k] = (err, U, W, spent)
        return err, U, W

    def least_rank(self, eps: float, lo: int, hi: int) -> UpperWitness | None:
        """The witness of the least rank reached going down from ``hi`` (one rank at a time,
        stopping at the first rank the polish cannot bring within ``eps``), or None."""
        tgt = _target(eps)
        best = None
        k = hi
        while k >= max(lo, 1):
            out = self.polish(k, tgt)
            if out is None or not out[0] <= tgt:
                break
            best = UpperWitness(eps, out[1], out[2], self.method)
            k -= 1
        return best

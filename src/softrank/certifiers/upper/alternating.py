"""The alternating l1 (docs/theory/witnesses.md#alternating-l1): both factors by iteratively
reweighted least squares with a minimax row reweighting, rows polished by exact l1
regressions."""

from __future__ import annotations

import time

import numpy as np

from ...checker import UpperWitness
from ...errors import InvalidArgumentError
from ...validation import check_int, check_positive, check_real
from ..linalg import reweighted_step
from .basic import TruncatedSVD, least_feasible, safe_target
from .refit import L1Refit

__all__ = ["AlternatingL1"]


class AlternatingL1:
    """Alternating l1 with minimax reweighting, finished by an exact LP polish (docs/theory/witnesses.md#alternating-l1).

    For a rank ``k``: start from the truncated SVD and run iteratively reweighted least
    squares on both factors -- weights ``1 / max(|residual|, delta)`` make each weighted
    least-squares step a majorisation of the l1 loss; on large heads each step is
    conjugate-gradient steps from the current factor, still a descent step of that
    majoriser (:func:`softrank.certifiers.linalg.reweighted_step`) -- with multiplicative
    row weights ``(err_i / mean err)`` that grow on the rows whose error is largest (a minimax
    reweighting: the target is the *max* row error). The best right factor ``W`` seen is then
    polished exactly: every row of ``U`` by an l1 regression on ``W`` (HiGHS, an
    :class:`L1Refit` on ``W`` with its early exit). ``W`` depends on ``k`` only, so it and the
    polished rows are cached and shared by all tolerances; the method is a heuristic (not
    monotone in ``k`` in general), so the bisection in :meth:`least_feasible_rank` may miss a smaller
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
        The truncated-SVD error curve, for the rank prediction of :meth:`least_feasible_rank`.
    method : str, optional
        The name its witnesses carry (default ``"alternating-l1"``).
    pace : dict, optional
        Shared by the runs on one head (a bracket passes one dict to the search and its
        restarts): each run writes its seconds per iteration and rank there after each
        iteration (``"rank_seconds"``, the latest run's), and a run with a ``foresee`` stop
        reads it before its first iteration, so that a restart whose iterations cannot end
        in time does not start (one iteration takes 8 s at 2,048 tokens, 34 s at 4,096).

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
                 delta_start: float | None = None, delta_decay: float = 1.0,
                 pace: dict | None = None):
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
        self.pace = {} if pace is None else pace

    def irls_basis(self, k: int, stop=None) -> np.ndarray | None:
        """A right basis ``W`` (k, N) of the alternating IRLS at rank ``k`` (no LP polish).

        Iteratively reweighted least squares on both factors, started from the SVD given at
        construction, with minimax row weights; the attacks use it as a start. ``stop``
        (optional) is asked before each iteration; when it answers True the iterations end
        and None is returned (a basis cut short is not this method's basis at ``k``: at
        2,048 tokens and rank 1,300 one run of the iterations takes minutes, and a bracket's
        time limit reaches it this way). A ``stop`` with a ``foresee(seconds)``
        (:class:`~softrank.certifiers.upper.basic.Deadline`) is also told, after each
        iteration, how long the iterations left would take at the mean pace of those done;
        when it foresees them ending past its limit, the run ends there with None: a run
        that cannot end in time stops after its first iteration rather than at the limit,
        or before it when an earlier run on the head gave the pace (``pace``;
        docs/theory/witnesses.md#alternating-l1).

        Raises
        ------
        InvalidArgumentError
            If ``stop`` is neither None nor callable, or ``k`` is not an integer from 1 to
            the number of singular triples given at construction (at most ``min(m, N)``;
            a larger ``k`` was read as that number, a negative one counted from the end).
        """
        A = self.A
        k = check_int(k, "k", 1)
        if stop is not None and not callable(stop):
            raise InvalidArgumentError(f"stop: expected a callable or None, got {stop!r}")
        p = min(self.U0.shape[1], self.s0.shape[0], self.Vt0.shape[0])
        if k > p:
            raise InvalidArgumentError(f"k must be at most {p}, the number of singular triples "
                                       f"given (A of shape {A.shape}), got {k}")
        foresee = getattr(stop, "foresee", None)
        U = self.U0[:, :k] * self.s0[:k]
        W = self.Vt0[:k].copy()
        rho = np.ones(A.shape[0])
        best_err, best_W = np.inf, W.copy()
        t0 = time.perf_counter()
        for it in range(self.iters):
            if stop is not None and stop():
                return None
            if it:
                per = (time.perf_counter() - t0) / it  # seconds per iteration so far
                self.pace["rank_seconds"] = per / k  # an iteration's work grows as m N k
            else:  # before the first: an earlier run's pace, if any
                per = self.pace.get("rank_seconds", 0.0) * k
            if per and foresee is not None and foresee(per * (self.iters - it)):
                return None  # the rest would end past the limit: cut now, not at it
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
                U = reweighted_step(W, wt, (wt * A) @ W.T, U)  # (m, k)
                R = A - U @ W
                wt = rho[:, None] / np.maximum(np.abs(R), d)
                W = reweighted_step(U.T, wt.T, (wt * A).T @ U, W.T).T  # (k, N)
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

    def _fit(self, k: int, stop=None) -> "L1Refit | None":
        """The polish of rank ``k`` on its IRLS basis (cached); None when ``stop`` cut the
        iterations (nothing cached)."""
        fit = self._fits.get(k)
        if fit is None:
            W = self.irls_basis(k, stop=stop)
            if W is None:
                return None
            fit = L1Refit(self.A, W, method=self.method)
            self._fits[k] = fit
        return fit

    def feasible(self, k: int, eps: float, stop=None) -> bool:
        """IRLS at rank ``k`` (cached), then the exact row polish with early exit;
        ``stop`` as in :meth:`L1Refit.feasible`, asked also before each IRLS iteration (a
        rank whose iterations it cut is left undecided: False, nothing cached)."""
        fit = self._fit(k, stop)
        return False if fit is None else fit.feasible(k, eps, stop)

    def _predict(self, eps: float, hi: int, stop=None) -> int | None:
        """Predicted least rank from the truncated-SVD error curve ``e_svd``, scaled by a
        ratio ``c(k)``: ``e(k) ~ c(k) e_svd(k)``, any tolerance (the fits are shared).
        ``c`` is the ratio at the largest rank fitted completely so far (its exact max
        error); when the checks of a smaller rank showed a larger ratio from below
        (:meth:`L1Refit.error_shown`: a failed probe, or a rank checked at another
        tolerance; the largest such rank), ``log c`` runs linearly between the two and stays
        at the smaller rank's below it. None before any rank has a complete fit, or when
        ``stop`` cut the exact row solves of that fit's maximum."""
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
        e0 = self._fits[k0].max_error(k0, stop)
        if e0 is None:
            return None
        curve = e_svd[1:hi + 1]
        ks = np.arange(1, curve.size + 1)
        log_c = np.full(ks.size, np.log(e0 / e_svd[k0])) if e0 > 0 else None
        # the largest rank below k0 whose checks showed a larger ratio (a failed probe)
        below = [(k, fit.error_shown(k)) for k, fit in self._fits.items()
                 if k < k0 and k < e_svd.size and e_svd[k] > 0]
        below = [(k, e / e_svd[k]) for k, e in below
                 if e is not None and e0 > 0 and e / e_svd[k] > e0 / e_svd[k0]]
        if below and log_c is not None:
            k1, c1 = max(below)
            t = np.clip((k0 - ks) / (k0 - k1), 0.0, 1.0)
            log_c = log_c + t * (np.log(c1) - log_c)
        scale = np.zeros(ks.size) if log_c is None else np.exp(log_c)
        ok = np.nonzero(scale * curve <= safe_target(eps))[0]
        return int(ok[0]) + 1 if ok.size else hi

    def least_feasible_rank(self, eps: float, lo: int, hi: int, stop=None) -> int | None:
        """Least ``k`` in ``[lo, hi]`` that is feasible: ``hi`` is tried first (most calls end
        there, when the construction cannot beat the best so far), then a search around the
        rank predicted from the truncated-SVD error curve (:func:`least_feasible`): the
        answer is usually 80-95 % of ``hi``, where a plain bisection of ``[lo, hi]`` probes
        its wasted midpoint first, and every probe costs an IRLS run. ``stop`` as in
        :func:`least_feasible`."""
        return least_feasible(lambda k: self.feasible(k, eps, stop), lo, hi,
                              guess=lambda: self._predict(eps, hi, stop), stop=stop)

    def least_rank(self, eps: float, lo: int, hi: int, stop=None) -> UpperWitness | None:
        """The witness of :meth:`least_feasible_rank`, or None."""
        k = self.least_feasible_rank(eps, lo, hi, stop=stop)
        return None if k is None else self.witness(eps, k)

    def witness(self, eps: float, k: int) -> UpperWitness:
        return self._fits[k].witness(eps, k)

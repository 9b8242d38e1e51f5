"""What every upper search shares (:data:`~softrank.certifiers.upper.basic.SAFETY`,
:func:`~softrank.certifiers.upper.basic.safe_target`,
:func:`~softrank.certifiers.upper.basic.least_feasible`) and the witnesses that need no search of their own: the truncated
SVD at every rank, the greedy key cover and ``B = A`` itself (docs/theory/witnesses.md)."""

from __future__ import annotations

import numpy as np

from ...checker import UpperWitness

__all__ = ["SAFETY", "safe_target", "least_feasible", "TruncatedSVD", "identity_witness",
           "key_support"]


#: Relative slack kept below ``eps`` when selecting a candidate, so that the checker's
#: rounding bound (about ``N u`` relative) does not reject a witness that is right at ``eps``.
SAFETY = 1e-9


def safe_target(eps: float) -> float:
    """The error a candidate must reach to be kept at ``eps``: ``eps (1 - SAFETY) - 1e-15``."""
    return eps * (1.0 - SAFETY) - 1e-15


def least_feasible(feasible, lo: int, hi: int, guess=None, stop=None) -> int | None:
    """Least ``k`` in ``[max(lo, 1), hi]`` with ``feasible(k)``, assuming feasibility is
    monotone (true from some ``k`` on): ``hi`` first, then bisection. None if ``hi`` fails.

    ``guess`` (optional) returns a predicted answer, or None when it has nothing to predict
    from; it is asked before ``hi`` is probed and, if it had nothing, again after. The
    search probes the prediction and gallops away from it (steps 1, 2, 4, ...) until the
    answer is enclosed, then bisects the enclosure; ``hi`` is probed only when needed. With a
    prediction within a rank or two this takes 2-4 probes where the bisection of a wide
    ``[lo, hi]`` takes ``log2(hi - lo) + 1``. Either way the result ``k`` has ``feasible(k)``
    and (when ``k > lo``) not ``feasible(k - 1)``; None means ``feasible(hi)`` failed.

    ``stop`` (optional) is asked before every probe but the first; when it answers True
    the search ends there with the least rank shown feasible so far (None if none was):
    a bracket's time limit reaches the searches this way (``Context.past_deadline``), so a
    search past it keeps what it proved and the bracket is marked cut short. A probe that
    the stop interrupted answers False (not shown), and the next question ends the
    search. Without ``stop`` the answer is the one described above.
    """
    if stop is None:
        return _least_feasible(feasible, lo, hi, guess)
    asked: list[int] = []
    shown: list[int] = []  # ranks shown feasible, for the answer when stopped

    def probe(k: int) -> bool:
        if asked and stop():  # never before the first probe
            raise _Stopped
        asked.append(k)
        ok = feasible(k)
        if ok:
            shown.append(k)
        return ok

    try:
        return _least_feasible(probe, lo, hi, guess)
    except _Stopped:
        return min(shown) if shown else None


class _Stopped(Exception):
    """Raised inside :func:`least_feasible` when its ``stop`` answers True."""


def _least_feasible(feasible, lo: int, hi: int, guess) -> int | None:
    """:func:`least_feasible` without ``stop``."""
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

    def least_rank(self, eps: float, lo: int = 1, hi: int | None = None) -> UpperWitness | None:
        """The truncation of the least rank ``k`` in ``[lo, hi]`` (default ``[1, min(m,
        N)]``) whose float64 error is within ``eps`` (with :data:`SAFETY`'s slack), or None.
        The first such ``k`` in order, not a bisection: the error need not be monotone in
        ``k``."""
        hi = self.s.size if hi is None else min(int(hi), self.s.size)
        lo = max(int(lo), 1)
        ok = np.nonzero(self.errors[lo:hi + 1] <= safe_target(eps))[0]
        return self.witness(eps, int(ok[0]) + lo) if ok.size else None

    def witness(self, eps: float, k: int) -> UpperWitness:
        return UpperWitness(eps, self.U[:, :k] * self.s[:k], self.Vt[:k], self.method)


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
    need_total = 1.0 - safe_target(eps)
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

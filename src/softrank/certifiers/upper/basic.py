"""What every upper search shares (:data:`~softrank.certifiers.upper.basic.SAFETY`,
:func:`~softrank.certifiers.upper.basic.safe_target`,
:func:`~softrank.certifiers.upper.basic.least_feasible`) and the witnesses that need no search of their own: the truncated
SVD at every rank, the greedy key cover and ``B = A`` itself (docs/theory/witnesses.md)."""

from __future__ import annotations

import heapq
import time

import numpy as np

from ...checker import UpperWitness
from ...errors import InvalidArgumentError
from ...validation import check_real
from ..linalg import compiled

__all__ = ["SAFETY", "safe_target", "least_feasible", "Deadline", "TruncatedSVD",
           "identity_witness", "key_support", "truncation_errors", "ERROR_BLOCK_ENTRIES",
           "ERROR_NUMPY_WORK"]


#: Relative slack kept below ``eps`` when selecting a candidate, so that the checker's
#: rounding bound (about ``N u`` relative) does not reject a witness that is right at ``eps``.
SAFETY = 1e-9


def safe_target(eps: float) -> float:
    """The error a candidate must reach to be kept at ``eps``: ``eps (1 - SAFETY) - 1e-15``."""
    return eps * (1.0 - SAFETY) - 1e-15


class Deadline:
    """A time limit as a search's ``stop``: true once ``time.perf_counter()`` passes ``at``;
    ``left()`` gives the seconds until then (negative past it, ``inf`` without a limit) to
    steps that can take what is left (the l1 refit's LPs, docs/theory/witnesses.md#l1-refit).

    A search that can time its own remaining work asks :meth:`foresee` before going on:
    when that work would end past the limit, the Deadline answers True from then on, as if
    the limit were reached, and ``foreseen`` records it (the bracket reports the search as
    cut by the limit).

    Parameters
    ----------
    at : float or None
        A ``time.perf_counter()`` reading (a bracket context's ``deadline``); None: no limit.

    Raises
    ------
    InvalidArgumentError
        If ``at`` is neither None nor a finite real number.
    """

    __slots__ = ("at", "foreseen")

    def __init__(self, at: float | None):
        self.at = None if at is None else check_real(at, "at")
        self.foreseen = False

    def __call__(self) -> bool:
        return self.foreseen or (self.at is not None and time.perf_counter() > self.at)

    def left(self) -> float:
        return np.inf if self.at is None else self.at - time.perf_counter()

    def foresee(self, seconds: float) -> bool:
        """Whether ``seconds`` more work would end past the limit (never without one); once
        it would, the Deadline is reached for good (``foreseen``)."""
        if not self.foreseen and seconds > self.left():
            self.foreseen = True
        return self.foreseen


def least_feasible(feasible, lo: int, hi: int, guess=None, stop=None) -> int | None:
    """Least ``k`` in ``[max(lo, 1), hi]`` with ``feasible(k)``, assuming feasibility is
    monotone (true from some ``k`` on): ``hi`` first, then bisection. None if ``hi`` fails.

    ``guess`` (optional) returns a predicted answer, or None when it has nothing to predict
    from; it is asked before ``hi`` is probed and, if it had nothing, again after. The
    search probes the prediction and gallops away from it (steps 1, 2, 4, ...) until the
    answer is enclosed, then bisects the enclosure; ``hi`` is probed only when needed. With a
    prediction within a rank or two this takes 2-4 probes where the bisection of a wide
    ``[lo, hi]`` takes ``log2(hi - lo) + 1``. Going up (the prediction failed), ``guess`` is
    asked again before each step, since a failure may inform it; a new prediction beyond the
    step is probed instead, and when it holds the search gallops down from it. Either way
    the result ``k`` has ``feasible(k)`` and (when ``k > lo``) not ``feasible(k - 1)``; None
    means ``feasible(hi)`` failed.

    ``stop`` (optional) is asked before every probe but the first; when it answers True
    the search ends there with the least rank shown feasible so far (None if none was):
    a bracket's time limit reaches the searches this way (``Context.past_deadline``), so a
    search past it keeps what it proved and the bracket is marked cut short. A probe that
    the stop interrupted answers False (not shown), and the next question ends the
    search. Without ``stop`` the answer is the one described above.

    Raises
    ------
    InvalidArgumentError
        If ``guess`` returns something other than None that has no integer value (NaN, an
        infinity, a word).
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
    g = _ask(guess) if guess is not None and lo < hi else None
    hi_known = False
    if g is None:
        if not feasible(hi):
            return None
        hi_known = True
        g = _ask(guess) if guess is not None and lo < hi else None
    if g is not None and lo < hi:
        g = min(max(g, lo), hi - 1)
        if feasible(g):
            hi_known = True
            lo, hi = _gallop_down(feasible, lo, g)
        else:
            lo, step = g + 1, 1
            while lo + step - 1 < hi:
                k = lo + step - 1
                # asked again: the failure just shown may move the prediction past the step
                g = _ask(guess) if guess is not None else None
                leap = g is not None and min(g, hi - 1) > k
                if leap:
                    k = min(g, hi - 1)
                if feasible(k):
                    hi, hi_known = k, True
                    if leap:  # a prediction that held: the answer is likely just below it
                        lo, hi = _gallop_down(feasible, lo, k)
                    break
                lo, step = k + 1, 2 * step
    if not hi_known and not feasible(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if feasible(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def _ask(guess) -> int | None:
    """``guess()`` as an int (a float is truncated), or None."""
    g = guess()
    if g is None:
        return None
    try:
        return int(g)
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(
            f"guess: expected it to return an int or None, got {g!r}") from None


def _gallop_down(feasible, lo: int, hi: int) -> tuple[int, int]:
    """From a ``hi`` shown feasible, probe ``hi - 1``, then 2, 4, ... ranks further down while
    the probes hold and stay ``>= lo``. Returns ``(lo, hi)`` enclosing the least feasible
    rank: ``hi`` the last probe that held, ``lo`` one above the first that failed (or the
    ``lo`` given)."""
    step = 1
    while hi - step >= lo:
        if not feasible(hi - step):
            return hi - step + 1, hi
        hi, step = hi - step, 2 * step
    return lo, hi


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
        #: errors[k] = max row l1 error of the rank-k truncation (float64, unchecked)
        self.errors = truncation_errors(A, self.U * self.s, self.Vt)

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


#: Entries of the block of residual rows that :func:`truncation_errors` keeps while it
#: runs through every rank: 2^17 (1 MiB), so that the block stays in a core's L2 cache.
ERROR_BLOCK_ENTRIES = 2**17

#: Multiply-adds ``m N p`` up to which :func:`truncation_errors` takes one numpy pass per
#: rank (a width-256 head, 0.03 s) rather than load its compiled code (about 0.2 s, once
#: per process).
ERROR_NUMPY_WORK = 2**24


def truncation_errors(A: np.ndarray, P: np.ndarray, Vt: np.ndarray) -> np.ndarray:
    """The max-row-l1 error of every truncation ``A - P[:, :k] Vt[:k]``, ``k = 0..p``.

    Parameters
    ----------
    A : (m, N) float64 ndarray
    P : (m, p) float64 ndarray
        The left factor, ``U_p S_p`` for the truncated SVD.
    Vt : (p, N) float64 ndarray
        The right factor.

    Returns
    -------
    (p + 1,) float64 ndarray
        Entry ``k``: ``max_i sum_j |A - P[:, :k] Vt[:k]|_{ij}``, in float64 without a bound
        on its rounding (a search's estimate: every witness chosen by it is checked).
        ``nan`` where a residual is not a number.

    Raises
    ------
    InvalidArgumentError
        If the shapes do not fit together.

    Notes
    -----
    Every rank needs the whole residual, so the table costs ``m N p`` multiply-adds,
    ``N^3`` for a square head. They are taken one block of rows at a time
    (:data:`ERROR_BLOCK_ENTRIES`), through every rank, in compiled code: the block is
    updated and summed in cache where one ``m x N`` pass per rank through memory took
    375 s at ``N = 4,096`` (docs/benchmarks.md, "Long heads at 2,048 and 4,096 tokens").
    Up to :data:`ERROR_NUMPY_WORK` it is one numpy pass per rank, as it was before.
    """
    A = np.ascontiguousarray(A, dtype=np.float64)
    P = np.ascontiguousarray(P, dtype=np.float64)
    Vt = np.ascontiguousarray(Vt, dtype=np.float64)
    if A.ndim != 2 or P.ndim != 2 or Vt.ndim != 2 or P.shape != (A.shape[0], Vt.shape[0]) \
            or Vt.shape[1] != A.shape[1]:
        raise InvalidArgumentError(f"A, P, Vt: expected shapes (m, N), (m, p), (p, N), got "
                                   f"{A.shape}, {P.shape}, {Vt.shape}")
    m, N = A.shape
    p = Vt.shape[0]
    if m * N * p <= ERROR_NUMPY_WORK:
        errs = np.empty(p + 1)
        R = A.copy()
        errs[0] = np.abs(R).sum(axis=1).max()
        for k in range(p):
            R -= np.outer(P[:, k], Vt[k])
            errs[k + 1] = np.abs(R).sum(axis=1).max()
        return errs
    rows = max(1, min(A.shape[0], ERROR_BLOCK_ENTRIES // max(A.shape[1], 1)))
    errs = np.zeros(Vt.shape[0] + 1)
    _truncation_errors(A, P, Vt, rows, errs)
    return errs


@compiled(fastmath={"reassoc", "contract"})
def _truncation_errors(A, P, Vt, rows, errs):  # pragma: no cover - compiled
    """``errs[k] = max(errs[k], row l1 norms of A - P[:, :k] Vt[:k])`` for ``k = 0..p``,
    ``rows`` rows of the residual at a time; a ``nan`` norm makes ``errs[k]`` ``nan``."""
    m, N = A.shape
    p = Vt.shape[0]
    R = np.empty((rows, N))
    for r0 in range(0, m, rows):
        nr = min(rows, m - r0)
        for i in range(nr):
            acc = 0.0
            for j in range(N):
                x = A[r0 + i, j]
                R[i, j] = x
                acc += abs(x)
            e = errs[0]
            if e == e and not (acc <= e):
                errs[0] = acc
        for k in range(p):
            for i in range(nr):
                a = P[r0 + i, k]
                acc = 0.0
                for j in range(N):
                    x = R[i, j] - a * Vt[k, j]
                    R[i, j] = x
                    acc += abs(x)
                e = errs[k + 1]
                if e == e and not (acc <= e):
                    errs[k + 1] = acc


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

    A key's gain ``sum_i min(A_ij, deficit_i)`` only falls as keys are added (the deficits
    fall and ``A >= 0``), so on a nonnegative ``A`` the gains are kept as bounds and only
    the best key's is recomputed until it stays the best (lazy greedy, Minoux 1978): the
    same keys as recomputing every gain at every step, in about ``m`` work per step where
    that took ``m N`` (132 s at ``N = 4,096``). Each gain is summed over the rows in order,
    in float64 whatever the layout or type of ``A``, so the bounds and the recomputed gains
    are rounded alike and fall in floating point too.
    """
    A = np.ascontiguousarray(A, dtype=np.float64)  # float64, rows in order, any layout
    m, N = A.shape
    need_total = 1.0 - safe_target(eps)
    mass = np.zeros(m)
    chosen: list[int] = []
    lazy = not (A < 0).any()
    if lazy:
        bound = np.zeros(N)  # the gains at mass 0, summed over the rows in order
        _key_gains(A, np.full(m, max(need_total, 0.0)), bound)
        heap = [(-float(g), j) for j, g in enumerate(bound)]
        heapq.heapify(heap)
    else:
        free = np.ones(N, dtype=bool)
    while True:
        deficit = np.maximum(need_total - mass, 0.0)
        if not (deficit > 0).any():
            break
        if lazy:
            while True:
                if not heap:
                    return None
                _, j = heapq.heappop(heap)
                best = (-_key_gain(A, deficit, j), j)
                if not heap or best <= heap[0]:
                    break
                heapq.heappush(heap, best)
            gain = -best[0]
        else:
            gains = np.minimum(A, deficit[:, None]).sum(axis=0)
            gains[~free] = -1.0
            j = int(gains.argmax())
            gain = gains[j]
            free[j] = False
        if gain <= 0:
            return None
        chosen.append(j)
        mass += A[:, j]
        if len(chosen) > min(m, N):
            return None  # such a cover cannot beat rank min(m, N), which any B reaches
    S = np.array(sorted(chosen), dtype=np.int64)
    W = np.zeros((S.size, N))
    W[np.arange(S.size), S] = 1.0
    return UpperWitness(eps, A[:, S].copy(), W, "key-support")


@compiled
def _key_gains(A, deficit, out):  # pragma: no cover - compiled
    """``out[j] = sum_i min(A[i, j], deficit[i])`` for every ``j``, summed over ``i`` in
    order (each ``out[j]`` as :func:`_key_gain` sums it), row by row through ``A``."""
    for i in range(A.shape[0]):
        d = deficit[i]
        for j in range(A.shape[1]):
            a = A[i, j]
            out[j] += a if a < d else d


@compiled
def _key_gain(A, deficit, j):  # pragma: no cover - compiled
    """``sum_i min(A[i, j], deficit[i])``, summed over ``i`` in order."""
    acc = 0.0
    for i in range(A.shape[0]):
        a = A[i, j]
        d = deficit[i]
        acc += a if a < d else d
    return acc

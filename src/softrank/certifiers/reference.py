"""Reference constructions: the efficient attention approximations users compare with.

Each is a rank-``k`` matrix built from the operator's factors ``Q`` (``m x d``), ``K``
(``N x d``) and ``beta`` (logits ``beta Q K^T``), written as an upper witness ``U W`` and
checked like any other. Each declines (returns None) on an operator without factors or with
a mask (their formulas are those of the unmasked softmax; for causal heads see
:mod:`softrank.certifiers.causal_reference`), and
searches the least rank at which it meets ``eps``; one that never meets it within its
budget declines, and the audit reports that.

* :class:`NystromLandmarks` -- Nystromformer (Xiong et al., AAAI 2021): landmarks are the
  means of ``k`` contiguous segments of the queries and of the keys;
  ``A^ = softmax(beta Q K~^T) pinv(softmax(beta Q~ K~^T)) softmax(beta Q~ K^T)`` (the
  Moore-Penrose inverse computed exactly by SVD, not by Nystromformer's iterative
  approximation). Rank ``<= k``; every ``k`` from 1 to ``min(m, N)`` is tried in turn.
* :class:`PositiveRandomFeatures` -- Performer's FAVOR+ (Choromanski et al., ICLR 2021):
  ``exp(x.y) = E[phi(x).phi(y)]`` with ``phi(x)_l = exp(w_l.x - |x|^2/2)`` for Gaussian
  ``w_l`` drawn in orthogonal blocks (norms chi-distributed), ``x = sqrt(beta) q``,
  ``y = sqrt(beta) k``; rows normalised by their estimated sums (a diagonal scaling: rank
  unchanged). Rank = number of features ``r``, searched up to ``4 min(m, N)`` on one seeded
  draw (prefixes of it are nested): doubling until eps is met, then bisection.
* :class:`SinksPlusRandomFeatures` -- Scatterbrain-like sparse plus low rank (Chen et al.,
  NeurIPS 2021): the ``s`` keys of largest column mass ("sinks") kept exactly, positive
  random features for the other keys, normalised over them and scaled to each row's
  remaining mass; rank ``s + r``, least over ``s`` in 1, 2, 4, 8.

The section *Constructions that users bring* of the project's docs (``docs/constructions.md``)
says how they enter the audit's Constructions table.
"""

from __future__ import annotations

import numpy as np

from ..checker import UpperWitness
from .interface import Context
from .upper import SAFETY

__all__ = ["NystromLandmarks", "PositiveRandomFeatures", "SinksPlusRandomFeatures", "RankSearch"]


def _target(eps: float) -> float:
    return eps * (1.0 - SAFETY) - 1e-15


def _softmax_rows(L: np.ndarray) -> np.ndarray:
    E = np.exp(L - L.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def _factors(operator):
    # their formulas approximate the unmasked softmax: on a masked operator (a causal head)
    # they decline, and the causal ones (causal_reference) answer instead
    if getattr(operator, "mask", None) is not None:
        return None
    if operator.Q is None or operator.K is None or operator.beta is None:
        return None
    return (np.asarray(operator.Q, dtype=np.float64), np.asarray(operator.K, dtype=np.float64),
            float(operator.beta))


def _context(operator, context):
    return context if context is not None else Context(operator.A)


class RankSearch:
    """Rank-``k`` factors ``make(k) -> (U, W) | None`` of one family and their errors
    against ``A``, kept per ``k`` so that the tolerances of one operator share them.

    ``error_of(U, W)`` measures a pair (default: the max row l1 error ``||A - U W||_inf``;
    the causal constructions pass the causal error,
    :func:`softrank.certifiers.causal_reference.causal_error`); a non-finite error counts
    as infinite."""

    def __init__(self, A: np.ndarray, make, error_of=None):
        self.A, self.make = A, make
        self.error_of = error_of or (lambda U, W: float(np.abs(A - U @ W).sum(axis=1).max()))
        self.err: dict = {}

    def error(self, k: int) -> float:
        if k not in self.err:
            f = self.make(k)
            e = np.inf
            if f is not None:
                with np.errstate(all="ignore"):
                    e = float(self.error_of(*f))
            self.err[k] = e if np.isfinite(e) else np.inf
        return self.err[k]

    def scan(self, target: float, lo: int, hi: int) -> int | None:
        """Least ``k`` in ``[lo, hi]`` within ``target``, every ``k`` tried in turn."""
        return next((k for k in range(lo, hi + 1) if self.error(k) <= target), None)

    def gallop(self, target: float, lo: int, hi: int) -> int | None:
        """A least ``k`` in ``[lo, hi]`` within ``target`` for a family whose error falls
        with ``k`` (nested random features): ``lo``, then ``lo + 1, 2, 4, ...`` steps up to
        the first ``k`` within it, then bisection below that ``k``."""
        prev, k = lo - 1, lo
        while self.error(k) > target:
            if k >= hi:
                return None
            prev, k = k, min(lo + max(1, 2 * (k - lo)), hi)
        a, b = prev + 1, k - 1
        while a <= b:
            mid = (a + b) // 2
            if self.error(mid) <= target:
                k, b = mid, mid - 1
            else:
                a = mid + 1
        return k


class NystromLandmarks:
    """Nystromformer landmarks (segment means) at the least ``k`` that meets ``eps``.

    Returns
    -------
    UpperWitness or None
        ``U = softmax(beta Q K~^T) pinv(softmax(beta Q~ K~^T))`` ``(m, k)``,
        ``W = softmax(beta Q~ K^T)`` ``(k, N)``; None without factors or when no ``k`` up to
        ``min(m, N)`` meets ``eps``.
    """

    name = "nystrom"
    #: Reads ``Q`` and ``K`` only through ``beta Q K^T`` and their segment means, which move
    #: linearly with a gauge ``Q S``, ``K S^-T``: the witness depends on ``A``'s logits only.
    gauge_invariant = True

    def witness(self, operator, eps, context=None):
        f = _factors(operator)
        if f is None:
            return None
        ctx = _context(operator, context)
        search = ctx.shared("ref:nystrom", lambda: RankSearch(
            ctx.A, lambda k: _nystrom(ctx.A.shape, *f, k)))
        k = search.scan(_target(eps), 1, ctx.p)
        return None if k is None else UpperWitness(eps, *search.make(k), self.name)

    def witness_at_rank(self, operator, k, context=None):
        """The ``k``-landmark witness (``k <= min(m, N)``), or None (no factors, a mask, a
        singular landmark kernel, or ``k`` past ``min(m, N)``)."""
        f = _factors(operator)
        ctx = _context(operator, context)
        if f is None or k > ctx.p:
            return None
        return _nystrom(ctx.A.shape, *f, k)


def _segment_means(X: np.ndarray, k: int) -> np.ndarray:
    """Means of the rows of ``X`` over ``k`` contiguous segments of sizes as equal as
    possible, the longer ones first (the segments of ``numpy.array_split``)."""
    n = X.shape[0]
    size, extra = divmod(n, k)
    starts = np.arange(k) * size + np.minimum(np.arange(k), extra)
    counts = np.full(k, size) + (np.arange(k) < extra)
    return np.add.reduceat(X, starts, axis=0) / counts[:, None]


def _nystrom(shape, Q, K, beta, k):
    m, N = shape
    Qt, Kt = _segment_means(Q, k), _segment_means(K, k)
    try:
        U = _softmax_rows(beta * Q @ Kt.T) @ np.linalg.pinv(_softmax_rows(beta * Qt @ Kt.T))
    except np.linalg.LinAlgError:
        return None
    return U, _softmax_rows(beta * Qt @ K.T)


def _orthogonal_gaussian(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` Gaussian directions in ``R^d``, orthogonal within blocks of ``d`` (Performer's
    orthogonal random features), each scaled by an independent chi(d) norm."""
    blocks = []
    for _ in range(-(-n // d)):
        q, r = np.linalg.qr(rng.standard_normal((d, d)))
        blocks.append((q * np.sign(np.diag(r))).T)  # signs fixed: Haar-distributed rotation
    W = np.vstack(blocks)[:n]
    return W * np.linalg.norm(rng.standard_normal((n, d)), axis=1)[:, None]


class _Features:
    """Log positive features of the queries and keys on one seeded draw of ``n`` directions:
    ``log phi(x)_l = w_l.x - |x|^2/2`` with ``x = sqrt(beta) q`` (or ``k``)."""

    def __init__(self, Q, K, beta, n, seed):
        rng = np.random.default_rng(seed)
        Wf = _orthogonal_gaussian(n, Q.shape[1], rng)
        XQ, XK = np.sqrt(beta) * Q, np.sqrt(beta) * K
        self.LQ = XQ @ Wf.T - 0.5 * (XQ * XQ).sum(axis=1, keepdims=True)
        self.LK = XK @ Wf.T - 0.5 * (XK * XK).sum(axis=1, keepdims=True)

    def scaled(self, r: int, keys: np.ndarray):
        """``(FQ, aq, FK, ak)`` for the first ``r >= 1`` features: ``phi(q_i)_l =
        FQ[i, l] exp(aq_i)`` and ``phi(k_j)_l = FK[j, l] exp(ak)`` with entries in
        ``[0, 1]`` (no overflow); ``keys`` selects the keys."""
        LQ, LK = self.LQ[:, :r], self.LK[keys, :r]
        aq = LQ.max(axis=1)
        ak = float(LK.max())
        return np.exp(LQ - aq[:, None]), aq, np.exp(LK - ak), ak


def _budget(budget: float, p: int) -> int:
    return max(1, int(budget * p))


class PositiveRandomFeatures:
    """Performer FAVOR+ (orthogonal positive random features), seeded.

    Parameters
    ----------
    seed : int
        Seed of the feature draw (default 0).
    budget : float
        Features searched up to ``budget * min(m, N)`` (default 4).

    Returns
    -------
    UpperWitness or None
        Rank ``r`` (may exceed ``min(m, N)``: then it bounds nothing but is still measured);
        None without factors, or when ``budget * min(m, N)`` features do not meet ``eps``.
    """

    name = "random-features"
    #: Reads ``Q`` and ``K`` themselves (features of their rows): a gauge ``Q S``, ``K S^-T``
    #: changes the witness (Nystrom's segment means, by contrast, move with the gauge).
    gauge_invariant = False

    def __init__(self, seed: int = 0, budget: float = 4.0):
        self.seed, self.budget = seed, budget

    def witness(self, operator, eps, context=None):
        f = _factors(operator)
        if f is None:
            return None
        ctx = _context(operator, context)
        n = _budget(self.budget, ctx.p)
        search = self._search(ctx, f, n)
        r = search.gallop(_target(eps), 1, n)
        return None if r is None else UpperWitness(eps, *search.make(r), self.name)

    def _search(self, ctx, f, n: int) -> RankSearch:
        """The operator's :class:`RankSearch` over the first ``r`` features of one seeded draw
        of ``n`` (shared by the tolerances and the ranks asked for)."""
        keys = np.arange(ctx.A.shape[1])

        def make(r):
            FQ, _, FK, _ = ctx.shared(f"ref:features:{self.seed}:{n}",
                                      lambda: _Features(*f, n, self.seed)).scaled(r, keys)
            z = FQ @ FK.sum(axis=0)
            if not (np.isfinite(z).all() and (z > 0).all()):
                return None
            return FQ / z[:, None], FK.T

        return ctx.shared(f"ref:random-features:{self.seed}:{n}",
                          lambda: RankSearch(ctx.A, make))

    def witness_at_rank(self, operator, k, context=None):
        """The first ``k`` features of the same seeded draw as :meth:`witness` (``k`` up to
        its budget), or None (no factors, a mask, ``k`` past the budget, an estimated row
        sum that is not positive and finite)."""
        f = _factors(operator)
        if f is None:
            return None
        ctx = _context(operator, context)
        n = _budget(self.budget, ctx.p)
        return self._search(ctx, f, n).make(k) if k <= n else None


class SinksPlusRandomFeatures:
    """Sinks kept exactly plus positive random features for the other keys (sparse plus low
    rank, Scatterbrain-like); rank ``s + r``, least over ``s`` in ``sinks``.

    ``B[:, S] = A[:, S]`` on the sink keys ``S``; on the other keys each row is the random
    feature estimate normalised over those keys, times the row's exact remaining mass
    ``1 - sum_{j in S} A_ij`` (a diagonal scaling: rank unchanged).

    Parameters
    ----------
    seed : int
        Seed of the feature draw (default 0).
    budget : float
        Features searched up to ``budget * min(m, N)`` for each ``s`` (default 4).
    sinks : tuple of int
        Numbers of sink keys tried (default 1, 2, 4, 8; those below ``N``): the keys of
        largest column mass of ``A``.
    """

    name = "sinks+random-features"
    gauge_invariant = False  # random features of the rows of Q and K

    def __init__(self, seed: int = 0, budget: float = 4.0, sinks=(1, 2, 4, 8)):
        self.seed, self.budget, self.sinks = seed, budget, tuple(sinks)

    def witness(self, operator, eps, context=None):
        f = _factors(operator)
        if f is None:
            return None
        ctx = _context(operator, context)
        N = ctx.A.shape[1]
        n = _budget(self.budget, ctx.p)
        target = _target(eps)
        best = None
        for s in self.sinks:
            if s >= N or (best is not None and s >= best[0]):
                break
            search = self._search(ctx, f, n, s)
            cap = n if best is None else min(n, best[0] - s - 1)
            r = search.gallop(target, 0, cap) if cap >= 0 else None
            if r is not None:
                best = (s + r, search, r)
        if best is None:
            return None
        return UpperWitness(eps, *best[1].make(best[2]), self.name)

    def _search(self, ctx, f, n: int, s: int) -> RankSearch:
        """The operator's :class:`RankSearch` over ``s`` sinks plus the first ``r`` features
        (``make(r)``: their factors, or None), shared by the tolerances and the ranks."""
        A = ctx.A

        def build():
            N = A.shape[1]
            order = np.argsort(-A.sum(axis=0), kind="stable")
            S = np.sort(order[:s])
            rest = np.setdiff1d(np.arange(N), S)
            left = 1.0 - A[:, S].sum(axis=1)  # each row's mass off the sinks

            def make(r):
                W = np.zeros((s + r, N))
                W[np.arange(s), S] = 1.0
                if r == 0:
                    return A[:, S].copy(), W
                FQ, _, FK, _ = ctx.shared(f"ref:features:{self.seed}:{n}",
                                          lambda: _Features(*f, n, self.seed)).scaled(r, rest)
                z = FQ @ FK.sum(axis=0)
                if not (np.isfinite(z).all() and (z > 0).all()):
                    return None
                W[s:, rest] = FK.T
                return np.hstack([A[:, S], FQ * (left / z)[:, None]]), W

            return RankSearch(A, make)

        return ctx.shared(f"ref:sinks:{self.seed}:{n}:{s}", build)

    def witness_at_rank(self, operator, k, context=None):
        """The best (least float64 error) of ``s`` sinks plus ``k - s`` features over the
        ``s`` of ``sinks`` below ``min(k + 1, N)`` (features up to the budget), or None."""
        f = _factors(operator)
        if f is None:
            return None
        ctx = _context(operator, context)
        n = _budget(self.budget, ctx.p)
        best = None
        for s in self.sinks:
            if s > k or s >= ctx.A.shape[1] or k - s > n:
                continue
            search = self._search(ctx, f, n, s)
            e = search.error(k - s)
            if np.isfinite(e) and (best is None or e < best[0]):
                best = (e, search.make(k - s))
        return None if best is None else best[1]

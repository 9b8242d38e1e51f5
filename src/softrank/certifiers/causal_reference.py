"""Causal reference constructions: the decoder efficient attention users compare with.

A decoder's efficient attention computes ``D^-1 tril(phi(Q) phi(K)^T)``: the kept (causal)
part of the rank-``r`` matrix ``U W`` with ``U = D^-1 phi(Q)`` (``D`` a diagonal scaling by
prefix sums) and ``W = phi(K)^T``, whose own rank may be ``N``. Each construction here is
such a pair ``(U, W)``, measured against the causal rank ``r^c_eps(A)`` (``causal``:
``B = keep * (U W)``; ``window:W``: ``B = exact * A + keep * (U W)``, the band of the last
``W`` keys copied; :func:`softrank.operators.rank_masks`) by :func:`causal_error` and
checked like any causal witness. Each reads the operator's factors ``Q`` (``m x d``), ``K``
(``N x d``) and ``beta``, and declines (returns None) on an operator without them or one that
is not causal (no mask, or ``A`` nonzero on a key after the query's position); each searches
the least rank at which it meets ``eps`` and declines when its budget does not.

* :class:`CausalRandomFeatures` -- Performer's FAVOR+ in its unidirectional (prefix-sum)
  form (Choromanski et al., ICLR 2021): ``phi(x)_l = exp(w_l.x - |x|^2/2) /
  sqrt(r)``, ``x = sqrt(beta) q`` (or ``k``), ``w_l`` Gaussian in orthogonal blocks; row
  ``i`` normalised by ``phi(q_i) . sum_{j <= i} phi(k_j)``. Rank = features ``r``, searched
  up to ``4 min(m, N)`` on one seeded draw whose prefixes are nested (gallop, bisection).
* :class:`CausalTaylorFeatures` -- the second-order Taylor feature map of ``exp`` (Based,
  Arora et al., ICML 2024; Katharopoulos et al., ICML 2020 and Schlag et al., ICML 2021 for
  linear attention as prefix sums): ``phi(x).phi(y) = 1 + x.y + (x.y)^2 / 2``, with
  ``d (d + 1) / 2`` quadratic features, normalised by causal prefix sums. Fixed ranks
  ``1 + d`` (order 1) and ``1 + d + d (d + 1) / 2`` (order 2); the least that meets ``eps``.
* :class:`SinkWindowLowRank` -- hybrid sliding window plus sinks plus linear attention (the
  sinks of StreamingLLM, Xiao et al., ICLR 2024; a window kept exact next to a linear or
  low-rank part as in Longformer/BigBird-style hybrids and Based): the band of the last ``W``
  keys copied (rank kind ``window:W``), the first ``s`` keys exactly through ``s`` columns
  ``A[:, j]`` of ``U``, FAVOR+ features for the other kept keys, each row normalised by the
  exact sums over band and sinks plus the features' estimate of the rest. Rank ``s + r``
  (``0`` on a sliding-window head, where ``A`` vanishes outside the band).

:data:`CAUSAL_REFERENCE` holds one of each with the defaults. docs/constructions.md,
*Causal reference constructions*, describes them for users.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np

from ..errors import SoftrankError
from ..operators import rank_masks
from ..validation import check_int, check_positive
from .interface import Context
from .reference import RankSearch
from .upper.basic import safe_target

__all__ = ["causal_error", "CausalRandomFeatures", "CausalTaylorFeatures",
           "SinkWindowLowRank", "CAUSAL_REFERENCE"]


def causal_error(A, U, W, rank: str = "causal") -> float:
    """``||A - (exact * A + keep * (U W))||_inf`` in float64, ``(keep, exact) =
    rank_masks(A.shape, rank)``: the error of a causal witness
    (:class:`softrank.checker.CausalUpperWitness`).

    Parameters
    ----------
    A : (m, N) array_like
        The attention matrix.
    U : (m, k) array_like
    W : (k, N) array_like
        ``k = 0`` is allowed (``U W = 0``).
    rank : str
        ``"causal"``, ``"window:W"`` or ``"plain"`` (:func:`softrank.operators.rank_masks`).

    Returns
    -------
    float
        The largest row l1 norm of the difference; ``inf`` when it is not finite (an
        overflowing or NaN factor).

    Raises
    ------
    InvalidArgumentError
        An unknown rank kind, or more queries than keys for a causal kind (from
        :func:`~softrank.operators.rank_masks`).
    """
    A = np.asarray(A, dtype=np.float64)
    keep, exact = rank_masks(A.shape, rank)
    with np.errstate(all="ignore"):
        P = np.asarray(U, dtype=np.float64) @ np.asarray(W, dtype=np.float64)
        R = np.where(keep, A - P, np.where(exact, 0.0, A))
        e = float(np.abs(R).sum(axis=1).max())
    return e if np.isfinite(e) else float("inf")


def _causal_factors(operator):
    """``(Q, K, beta)`` in float64 for a causal operator with factors; None for an operator
    without them, without a mask, with more queries than keys, or with a nonzero ``A``
    outside the causal keys (``rank_masks(A.shape, "causal")[0]``)."""
    if operator.Q is None or operator.K is None or operator.beta is None:
        return None
    if operator.mask is None:
        return None
    A = np.asarray(operator.A)
    try:
        keep = rank_masks(A.shape, "causal")[0]
    except SoftrankError:
        return None
    if (A[~keep] != 0).any():
        return None
    return (np.asarray(operator.Q, dtype=np.float64), np.asarray(operator.K, dtype=np.float64),
            float(operator.beta))


def _is_rank(k) -> bool:
    return not isinstance(k, bool) and isinstance(k, Integral)


def _search(A: np.ndarray, make, rank: str) -> RankSearch:
    """The reference constructions' search (scan, gallop) on the causal error of ``rank``."""
    return RankSearch(A, make, error_of=lambda U, W: causal_error(A, U, W, rank))


def _context(operator, context):
    return context if context is not None else Context(operator.A)


def _budget(budget: float, p: int) -> int:
    return max(1, int(budget * p))


def _nested_directions(n: int, d: int, seed: int) -> np.ndarray:
    """``(n, d)``: Performer's orthogonal random features, the first ``n`` of one seeded
    sequence of blocks of ``d`` (a Haar rotation, each row scaled by an independent chi(d)
    norm), so the draw for ``n`` is a prefix of the draw for any larger ``n``."""
    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(-(-n // d)):
        q, r = np.linalg.qr(rng.standard_normal((d, d)))
        rot = (q * np.sign(np.diag(r))).T  # signs fixed: Haar-distributed rotation
        blocks.append(rot * np.linalg.norm(rng.standard_normal((d, d)), axis=1)[:, None])
    return np.vstack(blocks)[:n] if blocks else np.zeros((0, d))


class _LogFeatures:
    """``log phi(x)_l + log sqrt(r) = w_l.x - |x|^2/2`` for the queries and keys
    (``x = sqrt(beta) q`` or ``k``) on the first ``n`` nested directions of ``seed``."""

    def __init__(self, Q, K, beta, n, seed):
        Wf = _nested_directions(n, Q.shape[1], seed)
        XQ, XK = np.sqrt(beta) * Q, np.sqrt(beta) * K
        self.LQ = XQ @ Wf.T - 0.5 * (XQ * XQ).sum(axis=1, keepdims=True)
        self.LK = XK @ Wf.T - 0.5 * (XK * XK).sum(axis=1, keepdims=True)

    def scaled(self, r: int):
        """``(FQ, aq, FK, ak)`` for the first ``r >= 1`` features: ``phi(q_i) = FQ[i]
        exp(aq_i)`` and ``phi(k_j) = FK[j] exp(ak)`` (the ``1 / sqrt(r)`` inside ``FQ``,
        ``FK``), the shifts taken so that no entry exceeds ``1 / sqrt(r)`` (no overflow)."""
        LQ, LK = self.LQ[:, :r], self.LK[:, :r]
        aq = LQ.max(axis=1)
        ak = float(LK.max())
        c = 1.0 / np.sqrt(r)
        return c * np.exp(LQ - aq[:, None]), aq, c * np.exp(LK - ak), ak


def _prefix_normalised(FQ, FK, keep):
    """``(U, W)``: ``U_i = FQ_i / (FQ_i . sum_{keep[i, j]} FK_j)``, ``W = FK^T``; the sums
    are prefix sums (a row of ``keep`` is a prefix of the keys, :func:`rank_masks`). Rows
    that keep no key get ``U_i = 0``. None when a denominator is 0 or not finite."""
    C = np.vstack([np.zeros((1, FK.shape[1])), np.cumsum(FK, axis=0)])
    counts = keep.sum(axis=1)
    with np.errstate(all="ignore"):
        D = (FQ * C[counts]).sum(axis=1)
    seen = counts > 0
    if not (np.isfinite(D[seen]).all() and (D[seen] != 0).all()):
        return None
    U = np.zeros_like(FQ)
    U[seen] = FQ[seen] / D[seen, None]
    return U, FK.T.copy()


class CausalRandomFeatures:
    """Performer FAVOR+ in causal (prefix-sum) form, seeded (Choromanski et al., ICLR 2021:
    unidirectional attention by prefix sums).

    ``phi(x)_l = exp(w_l.x - |x|^2/2) / sqrt(r)`` with ``x = sqrt(beta) q`` (or ``k``) and
    ``w_l`` Gaussian in orthogonal blocks (chi-distributed norms), so that
    ``E[phi(x).phi(y)] = exp(x.y)``; ``U_i = phi(q_i) / D_i``, ``D_i = phi(q_i) . sum_{j
    visible to i} phi(k_j)`` (the prefix over the causal keys), ``W = phi(K)^T``: then
    ``tril(U W) = D^-1 tril(phi(Q) phi(K)^T)`` and every kept row sums to 1. The row and key
    shifts that keep ``exp`` from overflowing cancel in ``D``.

    Parameters
    ----------
    seed : int
        Seed of the feature draw (default 0); the draws for growing ``r`` are nested.
    budget : float
        Features searched up to ``budget * min(m, N)`` (default 4).

    Raises
    ------
    InvalidArgumentError
        ``seed`` not an integer ``>= 0``, or ``budget`` not a finite number ``> 0``.
    """

    name = "causal-random-features"
    causal = True
    window = None
    #: Reads ``Q`` and ``K`` themselves (features of their rows): a gauge changes it.
    gauge_invariant = False

    def __init__(self, seed: int = 0, budget: float = 4.0):
        self.seed = check_int(seed, "seed", 0)
        self.budget = check_positive(budget, "budget")

    @property
    def rank_kind(self) -> str:
        """``"causal"``: what :func:`causal_error` measures it against."""
        return "causal"

    def directions(self, d: int, n: int) -> np.ndarray:
        """``(n, d)`` float64: the first ``n`` directions ``w_l`` of this seed's draw."""
        return _nested_directions(check_int(n, "n", 0), check_int(d, "d", 1), self.seed)

    def factors(self, operator, k):
        """``(U, W)``, ``U (m, k)``, ``W (k, N)`` float64, with the first ``k >= 1`` features;
        None for another ``k``, an operator without factors or a non-causal one."""
        f = _causal_factors(operator)
        if f is None or not _is_rank(k) or k < 1:
            return None
        keep = rank_masks(operator.A.shape, self.rank_kind)[0]
        FQ, _, FK, _ = _LogFeatures(*f, int(k), self.seed).scaled(int(k))
        return _prefix_normalised(FQ, FK, keep)

    def witness(self, operator, eps, context=None):
        """``(U, W)`` at the least number of features ``r`` (gallop, then bisection on the
        nested draw) whose :func:`causal_error` is within ``eps`` (with
        :func:`~softrank.certifiers.upper.basic.safe_target`'s margin); None when
        ``budget * min(m, N)`` features do not meet it, or the operator has no factors or is
        not causal."""
        f = _causal_factors(operator)
        if f is None:
            return None
        ctx = _context(operator, context)
        n = _budget(self.budget, ctx.p)
        keep = rank_masks(ctx.A.shape, self.rank_kind)[0]
        feats = ctx.shared(f"causal-ref:features:{self.seed}:{n}",
                           lambda: _LogFeatures(*f, n, self.seed))

        def make(r):
            FQ, _, FK, _ = feats.scaled(r)
            return _prefix_normalised(FQ, FK, keep)

        search = ctx.shared(f"causal-ref:{self.name}:{self.seed}:{n}",
                            lambda: _search(ctx.A, make, self.rank_kind))
        r = search.gallop(safe_target(eps), 1, n)
        return None if r is None else search.make(r)


def _taylor_map(X: np.ndarray, order: int) -> np.ndarray:
    """``[1, x]`` (order 1) or ``[1, x, x_a^2 / sqrt(2) (a), x_a x_b (a < b)]`` (order 2):
    ``phi(x).phi(y) = 1 + x.y [+ (x.y)^2 / 2]``, the quadratic part in the symmetric
    reduction (exact: ``(x.y)^2 / 2 = sum_a x_a^2 y_a^2 / 2 + sum_{a<b} x_a x_b y_a y_b``)."""
    n, d = X.shape
    parts = [np.ones((n, 1)), X]
    if order == 2:
        a, b = np.triu_indices(d)
        scale = np.where(a == b, 1.0 / np.sqrt(2.0), 1.0)
        parts.append(X[:, a] * X[:, b] * scale)
    return np.hstack(parts)


class CausalTaylorFeatures:
    """Taylor features of ``exp`` normalised by causal prefix sums (Based, Arora et al.,
    ICML 2024; linear attention as prefix sums, Katharopoulos et al., ICML 2020).

    ``exp(s) ~ 1 + s + s^2 / 2`` for ``s = beta q.k``: ``phi(x) = [1, x, (x kron x) /
    sqrt(2)]`` with ``x = sqrt(beta) q`` (or ``k``), the quadratic part reduced to its
    ``d (d + 1) / 2`` distinct products (exact). ``U_i = phi(q_i) / D_i``, ``D_i = phi(q_i)
    . sum_{j visible to i} phi(k_j)`` (``> 0`` at order 2, since ``1 + s + s^2/2 > 0``),
    ``W = phi(K)^T``. Order 1 (``1 + s``, rank ``1 + d``; its ``D_i`` may vanish, and then
    order 1 is not offered) and order 2 (rank ``1 + d + d (d + 1) / 2``) are offered; the
    witness is the least order that meets ``eps``. Deterministic: no parameters.
    """

    name = "causal-taylor"
    causal = True
    window = None
    #: ``phi(x).phi(y)`` depends on ``x.y`` alone, so ``tril(U W)`` depends only on the
    #: logits ``beta Q K^T``: a gauge ``Q S``, ``K S^-T`` leaves it unchanged.
    gauge_invariant = True
    orders = (1, 2)

    @property
    def rank_kind(self) -> str:
        """``"causal"``: what :func:`causal_error` measures it against."""
        return "causal"

    @staticmethod
    def rank_of(d: int, order: int) -> int:
        """``1 + d`` (order 1) or ``1 + d + d (d + 1) / 2`` (order 2)."""
        d = check_int(d, "d", 1)
        if check_int(order, "order", 1, 2) == 1:
            return 1 + d
        return 1 + d + d * (d + 1) // 2

    @staticmethod
    def feature_map(X, beta: float, order: int = 2) -> np.ndarray:
        """``(n, rank_of(d, order))`` float64: ``phi(sqrt(beta) x)`` for the rows ``x`` of
        ``X (n, d)``.

        Raises
        ------
        InvalidArgumentError
            ``beta`` not a finite number ``> 0`` or ``order`` not 1 or 2.
        """
        beta = check_positive(beta, "beta")
        order = check_int(order, "order", 1, 2)
        return _taylor_map(np.sqrt(beta) * np.asarray(X, dtype=np.float64), order)

    def _make(self, f, keep, order):
        Q, K, beta = f
        return _prefix_normalised(_taylor_map(np.sqrt(beta) * Q, order),
                                  _taylor_map(np.sqrt(beta) * K, order), keep)

    def factors(self, operator, k):
        """``(U, W)`` when ``k`` is ``1 + d`` (order 1) or ``1 + d + d (d + 1) / 2``
        (order 2); None for another ``k``, an operator without factors or a non-causal one,
        or a vanishing denominator."""
        f = _causal_factors(operator)
        if f is None or not _is_rank(k):
            return None
        d = f[0].shape[1]
        for order in self.orders:
            if k == self.rank_of(d, order):
                keep = rank_masks(operator.A.shape, self.rank_kind)[0]
                return self._make(f, keep, order)
        return None

    def witness(self, operator, eps, context=None):
        """``(U, W)`` of the least order (1, then 2) whose :func:`causal_error` is within
        ``eps`` (with :func:`~softrank.certifiers.upper.basic.safe_target`'s margin); None
        when neither meets it, or the operator has no factors or is not causal."""
        f = _causal_factors(operator)
        if f is None:
            return None
        ctx = _context(operator, context)
        keep = rank_masks(ctx.A.shape, self.rank_kind)[0]
        search = ctx.shared(f"causal-ref:{self.name}", lambda: _search(
            ctx.A, lambda o: self._make(f, keep, o), self.rank_kind))
        target = safe_target(eps)
        order = next((o for o in self.orders if search.error(o) <= target), None)
        return None if order is None else search.make(order)


class SinkWindowLowRank:
    """Sliding window kept exact, attention sinks, and causal FAVOR+ features for the rest:
    hybrid window plus linear attention (sinks: StreamingLLM, Xiao et al., ICLR 2024;
    features: Performer, Choromanski et al., ICLR 2021).

    Measured against the rank kind ``window:W`` (:func:`~softrank.operators.rank_masks`): the
    band of each query's last ``W`` keys is ``A`` itself. On the kept keys before the band:
    the sink keys ``j < s`` exactly, through the rank-``s`` part ``U[:, j] = A[:, j]``,
    ``W[j] = e_j^T``; every other kept key ``j`` gets ``phi(q_i).phi(k_j) / Z_i`` with
    ``Z_i = sum_{band} exp(l_ij) + sum_{sinks before the band} exp(l_ij) + phi(q_i) .
    sum_{kept non-sink j} phi(k_j)`` (``l = beta Q K^T`` in float64; one shift per row, the
    largest log term, cancels in the ratio). Rank ``s + r``, ``r`` features searched as in
    :class:`CausalRandomFeatures` from 0; rank 0 (``U (m, 0)``, ``W (0, N)``) first, which
    meets any ``eps`` on a sliding-window head of width ``W``.

    Parameters
    ----------
    window : int
        Band width ``W >= 1`` (default 8).
    sinks : int
        Sink keys ``s >= 0``: keys ``0 .. s - 1`` (default 4; fewer when there are fewer keys).
    seed : int
        Seed of the feature draw (default 0).
    budget : float
        Features searched up to ``budget * min(m, N)`` (default 4).

    Raises
    ------
    InvalidArgumentError
        An argument out of the ranges above.
    """

    causal = True
    gauge_invariant = False  # random features of the rows of Q and K

    def __init__(self, window: int = 8, sinks: int = 4, seed: int = 0, budget: float = 4.0):
        self.window = check_int(window, "window", 1)
        self.sinks = check_int(sinks, "sinks", 0)
        self.seed = check_int(seed, "seed", 0)
        self.budget = check_positive(budget, "budget")
        self.name = f"sink{self.sinks}+window{self.window}+random-features"

    @property
    def rank_kind(self) -> str:
        """``"window:W"``: what :func:`causal_error` measures it against."""
        return f"window:{self.window}"

    def _parts(self, f, shape, n):
        """What every rank shares: masks, the exact terms of ``Z`` (log sum and shift) and
        the log features on ``n`` nested directions."""
        Q, K, beta = f
        m, N = shape
        keep, exact = rank_masks(shape, self.rank_kind)
        s = min(self.sinks, N)
        sink = np.zeros(N, dtype=bool)
        sink[:s] = True
        on = exact | (keep & sink[None, :])  # the terms of Z computed exactly
        L = np.where(on, beta * (Q @ K.T), -np.inf)
        lmax = L.max(axis=1)
        with np.errstate(all="ignore"):
            lexact = lmax + np.log(np.exp(L - np.where(np.isfinite(lmax), lmax, 0.0)[:, None])
                                   .sum(axis=1))  # log sum_on exp(l); -inf if none
        return dict(keep=keep, s=s, sink=sink, lexact=lexact,
                    feats=_LogFeatures(Q, K, beta, n, self.seed) if n > 0 else None)

    def _make(self, A, parts, r):
        """``(U, W)`` of rank ``s + r``, or None when the normalisation fails."""
        keep, s, sink = parts["keep"], parts["s"], parts["sink"]
        m, N = A.shape
        Wm = np.zeros((s + r, N))
        Wm[np.arange(s), np.arange(s)] = 1.0
        U = np.zeros((m, s + r))
        U[:, :s] = A[:, :s]
        if r == 0:
            return U, Wm
        FQ, aq, FK, ak = parts["feats"].scaled(r)
        FK = np.where(sink[:, None], 0.0, FK)
        C = np.vstack([np.zeros((1, r)), np.cumsum(FK, axis=0)])
        with np.errstate(all="ignore"):
            est = (FQ * C[keep.sum(axis=1)]).sum(axis=1)  # phi(q_i).S_i exp(-aq_i - ak)
            lfeat = np.log(est) + aq + ak                 # log of the features' estimate
            c = np.maximum(parts["lexact"], lfeat)        # the row shift
            Z = np.exp(parts["lexact"] - c) + np.exp(lfeat - c)
            scale = np.where(est > 0, np.exp(aq + ak - c) / Z, 0.0)
        if not (np.isfinite(scale).all() and np.isfinite(FQ).all()):
            return None
        U[:, s:] = FQ * scale[:, None]
        Wm[s:] = FK.T
        return U, Wm

    def factors(self, operator, k):
        """``(U, W)`` of rank ``k``: ``k = 0`` (nothing kept), or ``k >= s`` (the sinks and
        ``k - s`` features); None for ``0 < k < s``, an operator without factors or a
        non-causal one."""
        f = _causal_factors(operator)
        if f is None or not _is_rank(k) or k < 0:
            return None
        A = np.asarray(operator.A, dtype=np.float64)
        m, N = A.shape
        if k == 0:
            return np.zeros((m, 0)), np.zeros((0, N))
        s = min(self.sinks, N)
        if k < s:
            return None
        return self._make(A, self._parts(f, A.shape, int(k) - s), int(k) - s)

    def witness(self, operator, eps, context=None):
        """``(U, W)`` of the least rank within ``eps`` (with
        :func:`~softrank.certifiers.upper.basic.safe_target`'s margin): rank 0 first, then
        ``s + r`` with ``r`` from 0 to ``budget * min(m, N)`` (gallop, then bisection on the
        nested draw); None when none meets it, or the operator has no factors or is not
        causal."""
        f = _causal_factors(operator)
        if f is None:
            return None
        ctx = _context(operator, context)
        A = ctx.A
        m, N = A.shape
        target = safe_target(eps)
        zero = np.zeros((m, 0)), np.zeros((0, N))
        if causal_error(A, *zero, self.rank_kind) <= target:
            return zero
        n = _budget(self.budget, ctx.p)
        key = f"causal-ref:{self.name}:{self.seed}:{n}"
        parts = ctx.shared(key + ":parts", lambda: self._parts(f, A.shape, n))
        search = ctx.shared(key, lambda: _search(
            A, lambda r: self._make(A, parts, r), self.rank_kind))
        r = search.gallop(target, 0, n)
        return None if r is None else search.make(r)


#: The causal reference constructions with their defaults, by name.
CAUSAL_REFERENCE = {c.name: c for c in (CausalRandomFeatures(), CausalTaylorFeatures(),
                                        SinkWindowLowRank())}

"""Synthetic attention operators (docs/theory/families.md).

All generators return validated :class:`~softrank.Operator` values with ``Q``, ``K``,
``beta`` (where the family has factors) and provenance; all randomness comes from a
``numpy.random.default_rng(seed)``, so a seed fixes the operator.

* :func:`grid` -- points of ``{0, 1/(n-1), ..., 1}^d`` as queries and keys, logits
  ``beta x.y - beta ||y||^2 / 2`` (rows are normalised Gaussian kernels), ``beta = c (n-1)^2``;
  ``r_eps`` grows like ``n^d`` (the sharp ``r/2`` law).
* :func:`sphere` -- ``m`` queries and ``N`` keys on ``S^{d-1}``, logits ``beta q.k``; exponent
  ``(d-1)/2`` in ``beta``.
* :func:`ball` -- queries and keys uniform in the unit ball, logits ``beta q.k``; exponent
  ``d/2`` (for large ``beta`` and many tokens).
* :func:`gaussian_head` -- Gaussian ``Q``, ``K`` with ``beta = temperature / sqrt(d)``.
* :func:`planted` -- ``A = (1 - delta) W H + delta P`` with row-stochastic ``W (m, k)``,
  ``H (k, N)``, ``P``: ``r_eps(A) <= k`` for ``eps >= 2 delta``.
* :func:`planted_blocks` -- ``k`` key blocks, each attended uniformly by its own query block,
  mixed with ``delta`` noise: ``r_eps(A) = k`` exactly for ``2 delta <= eps < 1 - 2 delta``.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..validation import check_int, check_positive, check_real
from ..operators import Operator

__all__ = ["grid", "sphere", "ball", "gaussian_head", "planted", "planted_blocks",
           "planted_causal", "planted_segments"]






#: Largest number of points a generator builds (``A`` is dense: 4096^2 float64 = 128 MiB).
MAX_POINTS = 4096




def grid(d: int, n: int, c: float = 1.0) -> Operator:
    """Finite-grid operator: ``N = n^d`` points, queries = keys (docs/theory/families.md).

    Parameters
    ----------
    d : int, 1..3
        Dimension of the grid (interaction dimension ``d``).
    n : int, >= 2
        Points per side.
    c : float, > 0
        ``beta = c (n - 1)^2``: the kernel width stays a fixed number of grid steps.

    Returns
    -------
    Operator
        ``A : (n^d, n^d)``, ``Q = K`` the points (``(n^d, d)``); the key-norm term is folded in
        by an extra coordinate (``Q = [x, 1]``, ``K = [y, -||y||^2 / 2]``) so that
        ``A = softmax(beta Q K^T)`` holds exactly.
    """
    d = check_int(d, "d", 1, 3)
    n = check_int(n, "n", 2, int(np.floor(MAX_POINTS ** (1.0 / d) + 1e-9)))
    c = check_positive(c, "c")
    ticks = np.linspace(0.0, 1.0, n)
    X = np.array(list(itertools.product(ticks, repeat=d)), dtype=np.float64)
    beta = c * (n - 1) ** 2
    Q = np.hstack([X, np.ones((X.shape[0], 1))])
    K = np.hstack([X, -0.5 * (X * X).sum(axis=1, keepdims=True)])
    return Operator.from_factors(
        Q, K, beta, family="grid", source=f"grid(d={d},n={n},c={c:g})", block="native",
        meta={"d": d, "n_side": n, "c": c},
        operator_id=f"grid-d{d}-n{n}-c{c:g}",
    )


def _sphere_points(rng, n, d):
    X = rng.standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def sphere(d: int, beta: float, m: int = 64, N: int = 64, seed: int = 0) -> Operator:
    """Queries and keys uniform on ``S^{d-1}``, logits ``beta q.k`` (docs/theory/families.md).

    Parameters
    ----------
    d : int, 2..4
    beta : float, > 0
    m, N : int
        Numbers of queries and keys.
    seed : int
    """
    d = check_int(d, "d", 2, 4)
    beta = check_positive(beta, "beta")
    m, N = check_int(m, "m", 1, MAX_POINTS), check_int(N, "N", 1, MAX_POINTS)
    seed = check_int(seed, "seed", 0)
    rng = np.random.default_rng(seed)
    Q = _sphere_points(rng, m, d)
    K = _sphere_points(rng, N, d)
    return Operator.from_factors(
        Q, K, beta, family="sphere", source=f"sphere(d={d},beta={beta:g})", block="native",
        seed=seed, meta={"d": d}, operator_id=f"sphere-d{d}-b{beta:g}-s{seed}",
    )


def ball(d: int, beta: float, m: int = 64, N: int = 64, seed: int = 0) -> Operator:
    """Queries and keys uniform in the unit ball of ``R^d``, logits ``beta q.k`` (docs/theory/families.md)."""
    d = check_int(d, "d", 2, 4)
    beta = check_positive(beta, "beta")
    m, N = check_int(m, "m", 1, MAX_POINTS), check_int(N, "N", 1, MAX_POINTS)
    seed = check_int(seed, "seed", 0)
    rng = np.random.default_rng(seed)
    Q = _sphere_points(rng, m, d) * rng.random((m, 1)) ** (1.0 / d)
    K = _sphere_points(rng, N, d) * rng.random((N, 1)) ** (1.0 / d)
    return Operator.from_factors(
        Q, K, beta, family="ball", source=f"ball(d={d},beta={beta:g})", block="native",
        seed=seed, meta={"d": d}, operator_id=f"ball-d{d}-b{beta:g}-s{seed}",
    )


def gaussian_head(m: int = 64, N: int = 64, d: int = 32, temperature: float = 2.0,
                  seed: int = 0, causal: bool = False, window: int | None = None) -> Operator:
    """Seeded Gaussian random head: ``Q, K ~ N(0, 1)``, ``beta = temperature / sqrt(d)``.

    With ``causal`` the head is masked as a decoder's (:func:`softrank.operators.causal_mask`:
    the queries are the last ``m`` of the ``N`` positions; ``window``: a sliding window of that
    width), family ``gaussian-causal``."""
    m, N, d = check_int(m, "m", 1, MAX_POINTS), check_int(N, "N", 1, MAX_POINTS), check_int(d, "d", 1)
    temperature = check_positive(temperature, "temperature")
    seed = check_int(seed, "seed", 0)
    mask, tag = _mask(m, N, causal, window)
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((m, d))
    K = rng.standard_normal((N, d))
    return Operator.from_factors(
        Q, K, temperature / np.sqrt(d), mask=mask,
        family="gaussian-causal" if causal else "gaussian",
        source=f"gaussian(d={d},t={temperature:g}{tag})", block="native", seed=seed,
        operator_id=f"gaussian-d{d}-t{temperature:g}-s{seed}" + (
            "" if not causal else f"-causal{N}" + ("" if window is None else f"-w{window}")),
    )


def _mask(m, N, causal, window):
    """The causal mask asked for, and a tag for the ids (``,causal`` or ``,wW``)."""
    from ..errors import InvalidArgumentError
    from ..operators import causal_mask

    if not isinstance(causal, bool):
        raise InvalidArgumentError(f"causal: expected True or False, got {causal!r}")
    if window is not None and not causal:
        raise InvalidArgumentError("window: a sliding window needs causal=True")
    if not causal:
        return None, ""
    if m > N:
        raise InvalidArgumentError(f"m: a causal head has at most N = {N} queries, got {m}")
    return causal_mask(m, N, window=window), (",causal" if window is None else f",w{window}")


def _stochastic(rng, r, c, conc):
    X = rng.dirichlet(np.full(c, conc), size=r)
    return X


def planted(m: int, N: int, k: int, delta: float, seed: int = 0,
            concentration: float = 0.3) -> Operator:
    """Planted instance ``A = (1 - delta) W H + delta P`` (docs/theory/families.md).

    ``W (m, k)``, ``H (k, N)``, ``P (m, N)`` are row-stochastic (Dirichlet rows with the
    given concentration), so ``||A - (1 - delta) W H||_inf = delta ||P||_inf = delta`` and
    ``r_eps(A) <= k`` for ``eps > delta`` (up to float64 rounding of ``A``, ~1e-16; the
    ``2 delta`` bound of docs/theory/families.md#planted compares with ``W H`` itself). ``meta["planted_rank"] = k`` and ``meta["planted_eps"] = delta``: any
    lower bound above ``k`` at ``eps >= delta`` is unsound.
    """
    m, N = check_int(m, "m", 1, MAX_POINTS), check_int(N, "N", 1, MAX_POINTS)
    k = check_int(k, "k", 1, min(m, N))
    delta = check_real(delta, "delta", 0, 1, hi_open=True)
    concentration = check_positive(concentration, "concentration")
    seed = check_int(seed, "seed", 0)
    rng = np.random.default_rng(seed)
    W = _stochastic(rng, m, k, concentration)
    H = _stochastic(rng, k, N, concentration)
    P = _stochastic(rng, m, N, 1.0)
    A = (1 - delta) * (W @ H) + delta * P  # rows sum to 1 within a few ulps
    return Operator(
        A=A, family="planted", source=f"planted(k={k},delta={delta:g})", seed=seed,
        meta={"planted_rank": k, "planted_eps": delta},
        operator_id=f"planted-{m}x{N}-k{k}-d{delta:g}-s{seed}",
    )


def planted_causal(N: int, k: int, delta: float, seed: int = 0, window: int | None = None,
                   concentration: float = 0.3) -> Operator:
    """A causal head whose causal rank is planted (docs/theory/families.md, *Planted causal
    instances*).

    ``A = (1 - delta) B + delta P`` on the mask ``M`` (:func:`softrank.operators.causal_mask`,
    ``N x N``, optionally a sliding ``window``): ``B = D^-1 (M * (W H))`` with ``W (N, k)``,
    ``H (k, N)`` positive (Dirichlet rows with the given concentration, plus 1e-3) and ``D``
    the row sums of ``M * (W H)``; ``P`` has Dirichlet rows on each row's visible keys. ``B``
    is the masked part of the rank-``k`` matrix ``U V = D^-1 W H``, and ``||A - (1 - delta)
    B||_inf = delta ||P||_inf = delta``. Without ``window`` (``M`` the lower triangle) the
    causal rank is therefore at most ``k`` for ``eps >= delta`` (up to the float64 rounding of
    ``A``, ~1e-16), and so is the windowed one (``window:W``, at most the causal rank). With
    ``window`` the planted form keeps the product on the band ``M`` only, which is neither
    rank kind: the causal rank of such a head may exceed ``k`` (the product would have to
    vanish below the band). The plain ``r_eps`` is not planted: the masked part of a rank-``k``
    matrix can have full rank. ``meta["planted_causal_rank"] = k`` (without ``window``) and
    ``meta["planted_eps"] = delta``.
    """
    A, M, _, _ = _planted_causal_parts(N, k, delta, seed, window, concentration)
    tag = "" if window is None else f"-w{window}"
    return Operator(
        A=A, mask=M, family="planted-causal",
        source=f"planted_causal(k={k},delta={delta:g}{',w=' + str(window) if window else ''})",
        seed=seed, meta={**({"planted_causal_rank": k} if window is None else
                            {"planted_masked_rank": k}), "planted_eps": delta},
        operator_id=f"planted-causal-{N}-k{k}-d{delta:g}-s{seed}{tag}",
    )


def planted_segments(N: int, k: int, delta: float, seed: int = 0,
                     concentration: float = 0.3) -> Operator:
    """A causal head whose plain rank is planted, and so its causal rank
    (docs/theory/causal.md#definitions, its ordering of the ranks; docs/theory/families.md).

    The ``N`` positions are cut into ``k`` contiguous segments starting at ``s_0 = 0 < s_1 <
    ... < s_{k-1}``; every query of segment ``a`` attends, in ``B``, with the same Dirichlet
    distribution (the given concentration) to the keys ``0..s_a`` -- keys it sees, since
    ``s_a <= i``. ``B`` has ``k`` distinct rows (rank ``<= k``) and is causal; ``A = (1 - delta)
    B + delta P`` with ``P`` Dirichlet rows on each row's causal keys. Then
    ``||A - (1 - delta) B||_inf = delta``: ``r_eps(A) <= k`` and, by the ordering of the
    ranks, ``r^c_eps(A) <= k`` for ``eps >= delta`` (up to the float64 rounding of ``A``).
    ``meta["planted_rank"] = k``, ``meta["planted_causal_rank"] = k``, ``meta["planted_eps"]
    = delta``; the mask is :func:`softrank.operators.causal_mask`.

    Raises
    ------
    InvalidArgumentError
        ``N``, ``k`` (``1 <= k <= N``), ``delta`` in ``[0, 1)``, ``concentration`` > 0 or
        ``seed`` out of range.
    """
    from ..operators import causal_mask

    N = check_int(N, "N", 1, MAX_POINTS)
    k = check_int(k, "k", 1, N)
    delta = check_real(delta, "delta", 0, 1, hi_open=True)
    concentration = check_positive(concentration, "concentration")
    seed = check_int(seed, "seed", 0)
    M = causal_mask(N)
    rng = np.random.default_rng(seed)
    starts = np.concatenate([[0], np.sort(rng.choice(np.arange(1, N), k - 1, replace=False))]
                            ) if k > 1 else np.array([0])
    B = np.zeros((N, N))
    for a, s in enumerate(starts):
        end = starts[a + 1] if a + 1 < k else N
        B[s:end, :s + 1] = rng.dirichlet(np.full(s + 1, concentration))
    P = np.zeros((N, N))
    for i in range(N):
        P[i, :i + 1] = rng.dirichlet(np.ones(i + 1))
    A = (1 - delta) * B + delta * P
    return Operator(A=A, mask=M, family="planted-segments",
                    source=f"planted_segments(k={k},delta={delta:g})", seed=seed,
                    meta={"planted_rank": k, "planted_causal_rank": k, "planted_eps": delta},
                    operator_id=f"planted-segments-{N}-k{k}-d{delta:g}-s{seed}")


def _planted_causal_parts(N, k, delta, seed, window, concentration):
    """``A``, its mask and the planted factors ``U (N, k)``, ``V (k, N)`` with
    ``||A - (1 - delta) tril_M(U V)||_inf <= delta`` (:func:`planted_causal`)."""
    from ..operators import causal_mask

    N = check_int(N, "N", 1, MAX_POINTS)
    k = check_int(k, "k", 1, N)
    delta = check_real(delta, "delta", 0, 1, hi_open=True)
    concentration = check_positive(concentration, "concentration")
    seed = check_int(seed, "seed", 0)
    M = causal_mask(N, window=window)
    rng = np.random.default_rng(seed)
    W = _stochastic(rng, N, k, concentration) + 1e-3
    H = _stochastic(rng, k, N, concentration) + 1e-3
    T = np.where(M, W @ H, 0.0)
    d = T.sum(axis=1, keepdims=True)
    B = T / d
    P = np.zeros((N, N))
    for i in range(N):
        vis = np.flatnonzero(M[i])
        P[i, vis] = rng.dirichlet(np.ones(vis.size))
    A = (1 - delta) * B + delta * P
    return A, M, W / d, H


def planted_blocks(m: int, N: int, k: int, delta: float = 0.0, seed: int = 0) -> Operator:
    """``k`` query blocks each attending uniformly to its own key block, mixed with noise.

    ``A = (1 - delta) B + delta P`` with ``B`` block-uniform (rank exactly ``k``) and ``P``
    row-stochastic. For ``2 delta <= eps < 1 - 2 delta``: ``r_eps(A) = k`` exactly. Upper:
    ``rank(B) = k`` and ``||A - B||_inf = delta ||P - B||_inf <= 2 delta``. Lower: one witness
    query per block has mass ``>= 1 - delta`` on its key block and ``<= delta`` on the
    others, a diagonal-dominance margin ``>= 1 - 2 delta > eps`` (key-group certificate).
    ``meta["exact_rank"] = k`` with its validity range ``exact_eps_range``.
    """
    m, N = check_int(m, "m", 1, MAX_POINTS), check_int(N, "N", 1, MAX_POINTS)
    k = check_int(k, "k", 1, min(m, N))
    delta = check_real(delta, "delta", 0, 0.25, hi_open=True)
    seed = check_int(seed, "seed", 0)
    rng = np.random.default_rng(seed)
    qb = np.array_split(np.arange(m), k)
    kb = np.array_split(np.arange(N), k)
    B = np.zeros((m, N))
    for qs, ks in zip(qb, kb):
        B[np.ix_(qs, ks)] = 1.0 / ks.size
    P = _stochastic(rng, m, N, 1.0)
    A = (1 - delta) * B + delta * P
    return Operator(
        A=A, family="planted-blocks", source=f"planted_blocks(k={k},delta={delta:g})",
        seed=seed,
        meta={"planted_rank": k, "exact_rank": k, "exact_eps_range": [2 * delta, 1 - 2 * delta]},
        operator_id=f"planted-blocks-{m}x{N}-k{k}-d{delta:g}-s{seed}",
    )

"""Hypothesis strategies for attention operators, planted instances, gauges and tolerances.

Operators are drawn as structural choices (shape, head dimension, scale ``beta``, a regime,
duplicated rows) plus a seed for the Gaussian factors, so that shrinking moves towards small
shapes and simple regimes while every example stays reproducible from its parameters.
Regimes reach the corners where certifiers break (docs/theory/families.md, docs/theory/attacks.md):

* ``"typical"``      -- ``beta Q K^T`` of moderate spread;
* ``"one-hot"``      -- huge ``beta``: near one-hot rows (entries down to ``1e-300``);
* ``"uniform"``      -- tiny ``beta``: near-uniform rows;
* ``"low-rank"``     -- head dimension 1 or 2;
* ``"duplicated"``   -- repeated query rows (and keys).

Every strategy validates its arguments when it is built and raises
:class:`~softrank.errors.InvalidArgumentError` naming the argument and its value.

Examples
--------
>>> from hypothesis import given
>>> from softrank.suites.strategies import attention_operators, tolerances
>>> @given(attention_operators(max_side=16), tolerances())
... def test_mine(op, eps): ...
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from ..errors import InvalidArgumentError
from ..validation import check_fraction, check_int
from ..operators import Operator

__all__ = ["attention_operators", "planted_operators", "planted_bound", "gauges", "tolerances", "cases",
           "REGIMES", "GAUGE_KINDS"]

REGIMES = ("typical", "one-hot", "uniform", "low-rank", "duplicated")
#: gauge kinds: diagonal with condition ratio 4 or 16, and dense with condition <= 16
GAUGE_KINDS = ("diagonal-4", "diagonal-16", "dense")






@st.composite
def _operator(draw, min_side, max_side, regimes, shapes):
    regime = draw(st.sampled_from(regimes))
    shape = draw(st.sampled_from(shapes))
    a = draw(st.integers(min_side, max_side))
    b = draw(st.integers(min_side, max_side))
    if shape == "tall":
        m, N = max(a, b), max(min(a, b) // 2, 1)
    elif shape == "wide":
        m, N = max(min(a, b) // 2, 1), max(a, b)
    else:
        m, N = a, b
    d = draw(st.integers(1, 2)) if regime == "low-rank" else draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**32 - 1))
    if regime == "one-hot":
        log_beta = draw(st.floats(1.0, 3.0))       # beta 10 .. 1000 on unit-scale factors
    elif regime == "uniform":
        log_beta = draw(st.floats(-8.0, -3.0))
    else:
        log_beta = draw(st.floats(-1.0, 0.7))
    beta = 10.0 ** log_beta / math.sqrt(d)
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((m, d))
    K = rng.standard_normal((N, d))
    if regime == "duplicated" and m > 1:
        src = rng.integers(0, max(m // 2, 1), size=m)
        Q = Q[src]
        if N > 1:
            K = K[rng.integers(0, max(N // 2, 1), size=N)]
    return Operator.from_factors(
        Q, K, beta, family="hypothesis", source=f"{regime}/{shape}", seed=seed,
        meta={"regime": regime, "shape": shape},
        operator_id=f"hyp-{regime}-{m}x{N}-d{d}-b{beta:.3g}-s{seed}")


def attention_operators(*, min_side: int = 1, max_side: int = 16,
                        regimes=REGIMES, shapes=("square", "tall", "wide")) -> st.SearchStrategy:
    """Operators ``A = softmax_rows(beta Q K^T)`` with their factors (docs/theory/operators.md).

    Parameters
    ----------
    min_side, max_side : int
        Range of the number of queries ``m`` and keys ``N`` (``1 <= min_side <= max_side
        <= 256``); tall and wide shapes halve one side.
    regimes : sequence of str
        Subset of :data:`REGIMES`.
    shapes : sequence of str
        Subset of ``("square", "tall", "wide")``.

    Returns
    -------
    SearchStrategy of Operator
        With ``Q (m, d)``, ``K (N, d)``, ``beta``; ``meta["regime"]``.
    """
    min_side = check_int(min_side, "min_side", 1, 256)
    max_side = check_int(max_side, "max_side", min_side, 256)
    regimes = tuple(regimes)
    if not regimes or any(r not in REGIMES for r in regimes):
        raise InvalidArgumentError(f"regimes: expected a non-empty subset of {REGIMES}, got {regimes!r}")
    shapes = tuple(shapes)
    if not shapes or any(s not in ("square", "tall", "wide") for s in shapes):
        raise InvalidArgumentError(
            f"shapes: expected a non-empty subset of ('square', 'tall', 'wide'), got {shapes!r}")
    return _operator(min_side, max_side, regimes, shapes)


@st.composite
def _planted(draw, min_side, max_side, max_rank, kinds):
    from ..generators.synthetic import planted, planted_blocks

    kind = draw(st.sampled_from(kinds))
    m = draw(st.integers(min_side, max_side))
    N = draw(st.integers(min_side, max_side))
    k = draw(st.integers(1, min(m, N, max_rank)))
    seed = draw(st.integers(0, 2**31 - 1))
    if kind == "blocks":
        delta = draw(st.sampled_from([0.0, 0.01, 0.05, 0.1]))
        return planted_blocks(m, N, k, delta, seed=seed)
    delta = draw(st.sampled_from([0.0, 1e-3, 0.02, 0.1, 0.3]))
    conc = draw(st.sampled_from([0.05, 0.3, 2.0]))
    return planted(m, N, k, delta, seed=seed, concentration=conc)


def planted_operators(*, min_side: int = 2, max_side: int = 16, max_rank: int = 6,
                      kinds=("mixture", "blocks")) -> st.SearchStrategy:
    """Planted instances with a known upper bound ``r_eps(A) <= k`` (docs/theory/families.md).

    ``"mixture"``: ``A = (1 - delta) W H + delta P`` -- ``r_eps(A) <= k`` for
    ``eps > meta["planted_eps"] = delta``. ``"blocks"``: block-uniform plus noise, where
    ``r_eps(A) = k`` exactly for ``eps`` in ``meta["exact_eps_range"]``.
    ``meta["planted_rank"] = k``; any lower bound above it where it applies is unsound
    (:func:`planted_bound` gives the bound for a tolerance).
    """
    min_side = check_int(min_side, "min_side", 1, 256)
    max_side = check_int(max_side, "max_side", min_side, 256)
    max_rank = check_int(max_rank, "max_rank", 1)
    kinds = tuple(kinds)
    if not kinds or any(k not in ("mixture", "blocks") for k in kinds):
        raise InvalidArgumentError(f"kinds: expected a non-empty subset of ('mixture', 'blocks'), got {kinds!r}")
    return _planted(min_side, max_side, max_rank, kinds)


def planted_bound(operator, eps: float) -> int | None:
    """The planted upper bound on ``r_eps`` of a planted operator at ``eps``, or None when the
    planting says nothing at this tolerance (docs/theory/families.md)."""
    meta = operator.meta
    k = meta.get("planted_rank")
    if k is None:
        return None
    if "exact_eps_range" in meta:
        lo, hi = meta["exact_eps_range"]
        return k if lo <= eps else None
    # ||A - (1 - delta) W H||_inf = delta exactly in exact arithmetic; A was rounded (~1e-15)
    return k if eps > meta.get("planted_eps", 0.0) + 1e-12 else None


@st.composite
def _gauge(draw, d, kinds):
    kind = draw(st.sampled_from(kinds))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    scale = 10.0 ** draw(st.floats(-1.0, 1.0))
    if kind.startswith("diagonal"):
        c = float(kind.split("-")[1])
        s = np.geomspace(1.0, c, d) if d > 1 else np.array([1.0])
        s = rng.permutation(s) * rng.choice([-1.0, 1.0], size=d) * scale
        return np.diag(s)
    Qa, _ = np.linalg.qr(rng.standard_normal((d, d)))
    Qb, _ = np.linalg.qr(rng.standard_normal((d, d)))
    s = np.geomspace(1.0, 16.0, d) if d > 1 else np.array([1.0])
    return (Qa * s) @ Qb.T * scale


def gauges(d: int, *, kinds=GAUGE_KINDS) -> st.SearchStrategy:
    """Invertible ``(d, d)`` gauges ``S`` (docs/theory/geometry.md): ``Q -> Q S``, ``K -> K S^{-T}``.

    ``"diagonal-4"``/``"diagonal-16"``: diagonal, condition ratio exactly 4 / 16 (for
    ``d >= 2``), random signs and order; ``"dense"``: ``Q_a diag(s) Q_b^T`` with singular
    values from 1 to 16. All times a random overall scale in ``[0.1, 10]``.
    """
    d = check_int(d, "d", 1, 4096)
    kinds = tuple(kinds)
    if not kinds or any(k not in GAUGE_KINDS for k in kinds):
        raise InvalidArgumentError(f"kinds: expected a non-empty subset of {GAUGE_KINDS}, got {kinds!r}")
    return _gauge(d, kinds)


def tolerances(*, min_value: float = 1e-4, max_value: float = 0.999) -> st.SearchStrategy:
    """Tolerances ``eps`` in ``[min_value, max_value]`` within ``(0, 1)``: the corners
    (``min_value``, ``max_value``, 0.5) and log-uniform values between them."""
    min_value = check_fraction(min_value, "min_value")
    max_value = check_fraction(max_value, "max_value")
    if min_value > max_value:
        raise InvalidArgumentError(
            f"min_value: expected <= max_value = {max_value!r}, got {min_value!r}")
    corners = sorted({min_value, max_value} | ({0.5} if min_value <= 0.5 <= max_value else set()))
    lo, hi = math.log10(min_value), math.log10(max_value)
    logu = st.floats(lo, hi).map(lambda x: float(min(max(10.0 ** x, min_value), max_value)))
    return st.one_of(logu, st.sampled_from(corners))


def _truncation_errors(A: np.ndarray) -> np.ndarray:
    """Max row l1 error of every truncated SVD of ``A`` (ranks 1 .. min(m, N) - 1)."""
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    R = A.copy()
    out = []
    for k in range(s.size - 1):
        R -= np.outer(U[:, k] * s[k], Vt[k])
        out.append(np.abs(R).sum(axis=1).max())
    return np.array(out)


@st.composite
def _case(draw, max_side, min_eps):
    op = draw(st.one_of(attention_operators(max_side=max_side),
                        planted_operators(max_side=max_side)))
    if draw(st.booleans()):
        return op, draw(tolerances(min_value=min_eps))
    # knife edge: eps at (or a hair off) the error of some truncated SVD of this operator,
    # where a construction's stopping rule or a certificate's margin decides the rank
    errs = _truncation_errors(op.A)
    errs = errs[(errs >= min_eps) & (errs <= 0.999)]
    if errs.size == 0:
        return op, draw(tolerances(min_value=min_eps))
    e = float(errs[draw(st.integers(0, errs.size - 1))])
    rel = draw(st.sampled_from([0.0, 1e-9, -1e-9, 1e-3, -1e-3, 0.03, -0.03]))
    return op, float(min(max(e * (1 + rel), min_eps), 0.999))


def cases(*, max_side: int = 16, min_eps: float = 1e-3) -> st.SearchStrategy:
    """``(operator, eps)`` pairs: random-factor and planted operators with tolerances in
    ``[min_eps, 0.999]``; half of them are knife edges: ``eps`` equal to, or within a
    relative 1e-9, 1e-3 or 3e-2 of, the max-row error of one of the operator's truncated
    SVDs, where a stopping rule or a margin decides the rank."""
    max_side = check_int(max_side, "max_side", 1, 256)
    min_eps = check_fraction(min_eps, "min_eps")
    return _case(max_side, min_eps)

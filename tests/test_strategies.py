"""Hypothesis strategies of the suites (softrank.suites.strategies).

Build-time argument validation, and properties of what the strategies draw: valid operators
(re-computed here from their factors), regimes as documented, gauges with the documented
condition numbers that leave ``A`` unchanged, tolerances in range, planted instances whose
``planted_bound`` is respected by softrank's checked lower bounds and confirmed by a
hand-built witness.
"""

import math
import re

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

import softrank
from softrank import Operator
from softrank.checker import UpperWitness, check, distance_bound
from softrank.errors import InvalidArgumentError
from softrank.generators.synthetic import planted, planted_blocks
from softrank.suites.strategies import (
    GAUGE_KINDS,
    REGIMES,
    attention_operators,
    cases,
    gauges,
    planted_bound,
    planted_operators,
    tolerances,
)

SETTINGS = settings(max_examples=30, deadline=None)


def _names(exc_info, *names):
    msg = str(exc_info.value)
    return any(re.search(rf"\b{n}\b", msg) for n in names), msg


def _softmax(L):
    Z = np.exp(L - L.max(axis=1, keepdims=True))
    return Z / Z.sum(axis=1, keepdims=True)


def _assert_stochastic(A):
    assert A.dtype == np.float64 and A.ndim == 2
    assert np.isfinite(A).all() and (A >= 0).all()
    assert max(abs(math.fsum(row) - 1.0) for row in A) <= 1e-9


# ------------------------------------------------------------------ argument validation


@pytest.mark.parametrize("build, names", [
    (lambda: attention_operators(max_side=0), ("max_side",)),
    (lambda: attention_operators(max_side=257), ("max_side",)),
    (lambda: attention_operators(max_side=2.5), ("max_side",)),
    (lambda: attention_operators(min_side=0), ("min_side",)),
    (lambda: attention_operators(min_side=True), ("min_side",)),
    (lambda: attention_operators(min_side=5, max_side=3), ("min_side", "max_side")),
    (lambda: attention_operators(regimes=("bogus",)), ("regimes",)),
    (lambda: attention_operators(regimes=("typical", "bogus")), ("regimes",)),
    (lambda: attention_operators(regimes=()), ("regimes",)),
    (lambda: attention_operators(shapes=("round",)), ("shapes",)),
    (lambda: attention_operators(shapes=()), ("shapes",)),
    (lambda: planted_operators(max_rank=0), ("max_rank",)),
    (lambda: planted_operators(min_side=0), ("min_side",)),
    (lambda: planted_operators(min_side=4, max_side=3), ("min_side", "max_side")),
    (lambda: planted_operators(kinds=()), ("kinds",)),
    (lambda: planted_operators(kinds=("bogus",)), ("kinds",)),
    (lambda: gauges(0), ("d",)),
    (lambda: gauges(-2), ("d",)),
    (lambda: gauges(2.0), ("d",)),
    (lambda: gauges(3, kinds=()), ("kinds",)),
    (lambda: gauges(3, kinds=("diagonal-8",)), ("kinds",)),
    (lambda: tolerances(min_value=0), ("min_value",)),
    (lambda: tolerances(min_value=1), ("min_value",)),
    (lambda: tolerances(min_value=-0.5), ("min_value",)),
    (lambda: tolerances(min_value=float("nan")), ("min_value",)),
    (lambda: tolerances(min_value=True), ("min_value",)),
    (lambda: tolerances(max_value=1.0), ("max_value",)),
    (lambda: tolerances(max_value=0), ("max_value",)),
    (lambda: tolerances(min_value=0.5, max_value=0.2), ("min_value", "max_value")),
    (lambda: cases(max_side=0), ("max_side",)),
])
def test_bad_arguments_raise_at_build_time_naming_the_argument(build, names):
    with pytest.raises(InvalidArgumentError) as ei:
        build()
    ok, msg = _names(ei, *names)
    assert ok, msg


def test_cases_bad_min_eps_names_min_eps():
    with pytest.raises(InvalidArgumentError) as ei:
        cases(min_eps=0)
    ok, msg = _names(ei, "min_eps")
    assert ok, msg


@settings(max_examples=5, deadline=None)
@given(one=attention_operators(min_side=1, max_side=1),
       wide=attention_operators(min_side=256, max_side=256, regimes=("one-hot",),
                                shapes=("wide",)),
       planted_one=planted_operators(min_side=1, max_side=1, max_rank=1, kinds=("blocks",)),
       gauge=gauges(1, kinds=("dense",)), eps=tolerances(min_value=0.3, max_value=0.3))
def test_valid_edge_arguments_build(one, wide, planted_one, gauge, eps):
    """The arguments at the ends of their ranges build strategies that draw what they say."""
    assert one.A.shape == (1, 1) and one.A[0, 0] == 1.0  # one key takes all the weight
    m, N = wide.A.shape
    assert N == 256 and m == 128  # wide: the queries' side halved
    assert np.allclose(wide.A.sum(axis=1), 1.0)
    assert planted_one.A.shape == (1, 1) and planted_one.meta["planted_rank"] == 1
    assert gauge.shape == (1, 1) and gauge[0, 0] != 0  # invertible
    assert eps == 0.3


# ------------------------------------------------------------------ operators


@SETTINGS
@given(op=attention_operators(min_side=2, max_side=12))
def test_attention_operators_are_valid(op):
    assert isinstance(op, Operator)
    _assert_stochastic(op.A)
    m, N = op.A.shape
    assert op.Q is not None and op.K is not None
    d = op.Q.shape[1]
    assert op.Q.shape == (m, d) and op.K.shape == (N, d) and 1 <= d <= 8
    assert np.isfinite(op.beta) and op.beta > 0
    # A is the softmax of its own factors (recomputed independently)
    ref = _softmax(op.beta * (op.Q @ op.K.T))
    assert distance_bound(op.A, ref) <= 1e-12
    shape = op.meta["shape"]
    assert op.meta["regime"] in REGIMES
    assert shape in ("square", "tall", "wide")
    assert 2 <= max(m, N) <= 12 and min(m, N) >= 1
    if shape == "square":
        assert 2 <= m <= 12 and 2 <= N <= 12
    elif shape == "tall":
        assert m >= N and N <= 6  # the short side is halved
    else:
        assert N >= m and m <= 6
    assert f"{m}x{N}" in op.operator_id


@pytest.mark.parametrize("regime", REGIMES)
@SETTINGS
@given(data=st.data())
def test_regimes_produce_what_they_claim(regime, data):
    op = data.draw(attention_operators(max_side=10, regimes=(regime,), shapes=("square",)))
    assert op.meta["regime"] == regime and op.source.startswith(regime + "/")
    m, N = op.A.shape
    d = op.Q.shape[1]
    b = op.beta * math.sqrt(d)  # the drawn scale, before the 1/sqrt(d) normalisation
    rel = 1e-12
    if regime == "one-hot":
        assert 10 * (1 - rel) <= b <= 1000 * (1 + rel)
    elif regime == "uniform":
        assert 1e-8 * (1 - rel) <= b <= 1e-3 * (1 + rel)
        # logits of size <= 1e-3 |q| |k| / sqrt(d): rows are within a few percent of 1/N
        assert np.abs(N * op.A - 1).max() <= 0.1
    else:
        assert 0.1 * (1 - rel) <= b <= 10 ** 0.7 * (1 + rel)
    if regime == "low-rank":
        assert d in (1, 2)
        assert np.linalg.matrix_rank(op.Q @ op.K.T) <= 2
    if regime == "duplicated" and m >= 2:
        # at most max(m // 2, 1) distinct query rows among m: some row repeats
        assert len(np.unique(op.Q, axis=0)) <= max(m // 2, 1)
        assert len(np.unique(op.A, axis=0)) < m
        if N >= 2:
            assert len(np.unique(op.K, axis=0)) <= max(N // 2, 1)


@pytest.mark.parametrize("shape", ["tall", "wide"])
@SETTINGS
@given(data=st.data())
def test_tall_and_wide_shapes(shape, data):
    op = data.draw(attention_operators(min_side=4, max_side=12, shapes=(shape,)))
    m, N = op.A.shape
    long_, short = (m, N) if shape == "tall" else (N, m)
    assert 4 <= long_ <= 12
    assert 1 <= short <= 6 and short <= long_


# ------------------------------------------------------------------ gauges


@pytest.mark.parametrize("kind", GAUGE_KINDS)
@SETTINGS
@given(data=st.data())
def test_gauges_have_the_documented_condition(kind, data):
    d = data.draw(st.integers(1, 8), label="d")
    S = data.draw(gauges(d, kinds=(kind,)), label="S")
    assert S.shape == (d, d) and S.dtype == np.float64 and np.isfinite(S).all()
    sv = np.linalg.svd(S, compute_uv=False)
    cond = sv[0] / sv[-1]
    # overall scale in [0.1, 10]: the smallest singular value is the scale
    assert 0.1 * (1 - 1e-12) <= sv[-1] <= 10 * (1 + 1e-12)
    if kind.startswith("diagonal"):
        c = float(kind.split("-")[1])
        assert np.count_nonzero(S - np.diag(np.diag(S))) == 0
        a = np.abs(np.diag(S))
        ratio = a.max() / a.min()
        if d >= 2:
            assert abs(ratio - c) <= 1e-9 * c
            assert abs(cond - c) <= 1e-9 * c
        else:
            assert ratio == 1.0
    else:
        assert cond <= 16 * (1 + 1e-9)
        if d >= 2:
            assert cond >= 16 * (1 - 1e-9)  # singular values from 1 to 16
        else:
            assert cond == pytest.approx(1.0, abs=1e-15)


@SETTINGS
@given(data=st.data())
def test_gauge_leaves_the_attention_matrix_unchanged(data):
    op = data.draw(attention_operators(max_side=12), label="op")
    S = data.draw(gauges(op.Q.shape[1]), label="S")
    Q2 = op.Q @ S
    K2 = op.K @ np.linalg.inv(S).T  # K S^{-T}
    # (Q S)(K S^{-T})^T = Q S S^{-1} K^T = Q K^T
    A2 = _softmax(op.beta * (Q2 @ K2.T))
    assert distance_bound(op.A, A2) <= 1e-9
    op2 = Operator.from_factors(Q2, K2, op.beta)
    assert distance_bound(op.A, op2.A) <= 1e-9


# ------------------------------------------------------------------ tolerances


@SETTINGS
@given(eps=tolerances())
def test_default_tolerances_in_range(eps):
    assert isinstance(eps, float)
    assert 1e-4 <= eps <= 0.999


@SETTINGS
@given(eps=tolerances(min_value=0.02, max_value=0.3))
def test_tolerances_in_given_range(eps):
    assert isinstance(eps, float) and 0.02 <= eps <= 0.3


@SETTINGS
@given(eps=tolerances(min_value=0.25, max_value=0.25))
def test_degenerate_tolerance_range(eps):
    assert eps == 0.25


def test_tolerance_corners_are_drawn():
    s = settings(max_examples=500, database=None, deadline=None)
    strat = tolerances(min_value=0.01, max_value=0.9)
    for corner in (0.01, 0.5, 0.9):
        assert find(strat, lambda e, c=corner: e == c, settings=s) == corner
    # a value strictly between the corners too (log-uniform part)
    v = find(strat, lambda e: 0.01 < e < 0.5 and e not in (0.01, 0.5), settings=s)
    assert 0.01 < v < 0.5


# ------------------------------------------------------------------ planted instances


@SETTINGS
@given(op=planted_operators(min_side=3, max_side=10, max_rank=4))
def test_planted_operators_are_valid(op):
    _assert_stochastic(op.A)
    m, N = op.A.shape
    assert 3 <= m <= 10 and 3 <= N <= 10
    k = op.meta["planted_rank"]
    assert 1 <= k <= min(m, N, 4)
    assert op.family in ("planted", "planted-blocks")
    if op.family == "planted-blocks":
        lo, hi = op.meta["exact_eps_range"]
        assert op.meta["exact_rank"] == k
        assert 0 <= lo <= 0.5 <= hi <= 1 and lo == pytest.approx(1 - hi)
    else:
        assert 0 <= op.meta["planted_eps"] < 1


@pytest.mark.parametrize("kind, family", [("blocks", "planted-blocks"), ("mixture", "planted")])
@SETTINGS
@given(data=st.data())
def test_planted_kinds_are_respected(kind, family, data):
    op = data.draw(planted_operators(max_side=8, kinds=(kind,)))
    assert op.family == family
    assert ("exact_eps_range" in op.meta) == (kind == "blocks")


def test_planted_bound_hand_worked():
    mix = planted(6, 7, 2, 0.1, seed=3)
    assert planted_bound(mix, 0.05) is None        # below the planting tolerance
    assert planted_bound(mix, 0.1) is None         # needs eps > delta
    assert planted_bound(mix, 0.1 + 1e-9) == 2
    assert planted_bound(mix, 0.9) == 2
    exact = planted(5, 5, 3, 0.0, seed=0)
    assert planted_bound(exact, 1e-6) == 3
    blocks = planted_blocks(8, 8, 2, 0.05, seed=1)
    assert planted_bound(blocks, 0.0999) is None   # below 2 delta
    assert planted_bound(blocks, 0.1) == 2         # 2 delta itself
    assert planted_bound(blocks, 0.5) == 2
    assert planted_bound(blocks, 0.95) == 2        # above the exact range: still an upper bound
    rnd = Operator.from_factors(np.eye(3), np.eye(3), 1.0)
    assert planted_bound(rnd, 0.5) is None         # not planted: no bound


def test_planted_blocks_bound_at_two_delta_has_a_rank_k_witness():
    """The block-uniform matrix (k query blocks attending uniformly to their key block) is a
    rank-k witness within 2 delta: planted_bound(op, 2 delta) = k is a true upper bound."""
    m, N, k, delta = 9, 12, 3, 0.05
    op = planted_blocks(m, N, k, delta, seed=2)
    # contiguous key blocks; each query assigned to the key block holding most of its mass
    kb = np.array_split(np.arange(N), k)
    U = np.zeros((m, k))
    W = np.zeros((k, N))
    for b, ks in enumerate(kb):
        W[b, ks] = 1.0 / ks.size
    for i in range(m):
        U[i, int(np.argmax([op.A[i, ks].sum() for ks in kb]))] = 1.0
    assert (U.sum(axis=0) >= 1).all()  # every block has queries
    eps = 2 * delta
    assert planted_bound(op, eps) == k
    assert check(op.A, UpperWitness(eps, U, W, "hand")).ok


@SETTINGS
@given(op=planted_operators(max_side=10, max_rank=4), eps=tolerances(min_value=1e-3))
def test_planted_bound_is_respected_by_checked_lower_bounds(op, eps):
    k = planted_bound(op, eps)
    r = op.meta["planted_rank"]
    if "exact_eps_range" in op.meta:
        lo, hi = op.meta["exact_eps_range"]
        assert k == (r if eps >= lo else None)
    else:
        delta = op.meta["planted_eps"]
        if eps > delta + 1e-9:
            assert k == r
        elif eps <= delta:
            assert k is None
    if k is None:
        return
    (br,) = softrank.bracket(op, eps)
    # a sound (checked) lower bound never exceeds a true upper bound
    assert br.lower <= k, (br.lower, k, br.lower_method)
    if "exact_eps_range" in op.meta and eps < op.meta["exact_eps_range"][1]:
        assert br.lower <= k <= br.upper  # r_eps = k exactly in the range


@SETTINGS
@given(case=cases(max_side=8, min_eps=0.01))
def test_cases_are_operator_tolerance_pairs(case):
    op, eps = case
    assert isinstance(op, Operator)
    _assert_stochastic(op.A)
    assert max(op.A.shape) <= 8
    assert isinstance(eps, float) and 0.01 <= eps <= 0.999

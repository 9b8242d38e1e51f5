"""The causal reference constructions (softrank.certifiers.causal_reference):
causal FAVOR+ against an explicit prefix-sum loop, the Taylor kernel against its formula,
the hybrid sink + window + features against its normalisation written out, prefix
normalisation, declines, and witnesses that the independent checker accepts."""

import numpy as np
import pytest

from softrank.certifiers.causal_reference import (CAUSAL_REFERENCE, CausalRandomFeatures,
                                                  CausalTaylorFeatures, SinkWindowLowRank,
                                                  causal_error)
from softrank.errors import InvalidArgumentError
from softrank.generators.synthetic import gaussian_head
from softrank.operators import Operator, causal_mask, rank_masks

N, D, T = 48, 6, 0.5  # a smooth head: beta = T / sqrt(D)


def _head(seed=1, window=None, m=N, d=D, temperature=T):
    return gaussian_head(m=m, N=N, d=d, temperature=temperature, causal=True, seed=seed,
                         window=window)


def _phi(X, beta, Wd):
    """FAVOR+ positive features written out, unshifted: exp(w.x - |x|^2/2) / sqrt(r)."""
    x = np.sqrt(beta) * X
    return np.exp(x @ Wd.T - 0.5 * (x * x).sum(axis=1, keepdims=True)) / np.sqrt(len(Wd))


def _linear_attention_loop(FQ, FK, offset):
    """Causal linear attention as a decoder runs it: one position at a time, a running sum
    of the key features (the state) and a running list of them; query i at ``offset + i``."""
    m, N = FQ.shape[0], FK.shape[0]
    out = np.zeros((m, N))
    state = np.zeros(FK.shape[1])
    pos = -1
    for i in range(m):
        while pos < offset + i:
            pos += 1
            state = state + FK[pos]
        den = FQ[i] @ state
        for j in range(pos + 1):
            out[i, j] = (FQ[i] @ FK[j]) / den
    return out


@pytest.mark.parametrize("m, window", [(N, None), (N, 8), (20, None)])
def test_causal_random_features_are_the_prefix_sum_linear_attention(m, window):
    op = _head(seed=3, window=window, m=m)
    rf = CausalRandomFeatures(seed=5)
    r = 24
    U, W = rf.factors(op, r)
    assert U.shape == (m, r) and W.shape == (r, N)
    Wd = rf.directions(D, r)
    expect = _linear_attention_loop(_phi(op.Q, op.beta, Wd), _phi(op.K, op.beta, Wd), N - m)
    got = np.where(causal_mask(m, N), U @ W, 0.0)
    np.testing.assert_allclose(got, expect, rtol=0, atol=1e-12)


def test_the_draw_is_nested_and_orthogonal_in_blocks():
    rf = CausalRandomFeatures(seed=2)
    big = rf.directions(D, 3 * D + 2)
    np.testing.assert_array_equal(rf.directions(D, 7), big[:7])
    block = big[D:2 * D]
    G = block @ block.T
    np.testing.assert_allclose(G - np.diag(np.diag(G)), 0, atol=1e-12)


@pytest.mark.parametrize("window", [None, 8])
def test_prefix_normalised_rows_sum_to_one(window):
    op = _head(seed=4, window=window)
    keep = rank_masks(op.A.shape, "causal")[0]
    for c, k in ((CausalRandomFeatures(), 10), (CausalRandomFeatures(), 1),
                 (CausalTaylorFeatures(), 1 + D), (CausalTaylorFeatures(), 1 + D + 21)):
        U, W = c.factors(op, k)
        np.testing.assert_allclose(np.where(keep, U @ W, 0).sum(axis=1), 1.0, rtol=0,
                                   atol=1e-12)


def test_the_taylor_kernel_is_the_truncated_exponential():
    rng = np.random.default_rng(0)
    X, Y, beta = rng.standard_normal((7, 5)), rng.standard_normal((9, 5)), 0.37
    s = beta * X @ Y.T
    P2 = CausalTaylorFeatures.feature_map(X, beta, 2)
    P1 = CausalTaylorFeatures.feature_map(X, beta, 1)
    assert P2.shape == (7, 1 + 5 + 15) and P1.shape == (7, 6)  # 1 + d + d(d+1)/2
    np.testing.assert_allclose(P2 @ CausalTaylorFeatures.feature_map(Y, beta, 2).T,
                               1 + s + s * s / 2, rtol=0, atol=1e-12)
    np.testing.assert_allclose(P1 @ CausalTaylorFeatures.feature_map(Y, beta, 1).T, 1 + s,
                               rtol=0, atol=1e-12)


def test_causal_taylor_is_the_normalised_taylor_kernel():
    op = _head(seed=6)
    U, W = CausalTaylorFeatures().factors(op, 1 + D + D * (D + 1) // 2)
    s = op.beta * op.Q @ op.K.T
    Kt = np.tril(1 + s + s * s / 2)
    np.testing.assert_allclose(np.tril(U @ W), Kt / Kt.sum(axis=1, keepdims=True), rtol=0,
                               atol=1e-12)
    assert CausalTaylorFeatures().factors(op, 5) is None  # neither 1 + d nor 1 + d + 21


def test_errors_fall_with_features_and_reach_a_moderate_eps():
    op = _head(seed=1)
    rf = CausalRandomFeatures()
    e = [causal_error(op.A, *rf.factors(op, r), "causal") for r in (1, 2, 4, 64, 128, 256)]
    assert max(e[3:]) < min(e[:3])  # many features beat few, whatever the noise
    assert e[-1] <= 0.5
    w = rf.witness(op, 0.5)
    assert w is not None and causal_error(op.A, *w, "causal") <= 0.5
    assert w[0].shape[1] <= 4 * N
    ty = CausalTaylorFeatures()
    e1, e2 = (causal_error(op.A, *ty.factors(op, k), "causal") for k in (1 + D, 1 + D + 21))
    assert e2 < e1  # the second order beats the first on a smooth head
    sw = SinkWindowLowRank()
    e = [causal_error(op.A, *sw.factors(op, 4 + r), "window:8") for r in (0, 1, 64, 256)]
    assert max(e[2:]) < min(e[:2])


def test_the_hybrid_is_window_plus_sinks_plus_features_over_the_exact_partition():
    op = _head(seed=7)
    s, Wb, r = 4, 8, 32
    sw = SinkWindowLowRank(window=Wb, sinks=s, seed=3)
    assert sw.name == "sink4+window8+random-features" and sw.window == Wb
    U, W = sw.factors(op, s + r)
    assert U.shape == (N, s + r) and W.shape == (s + r, N)
    P = U @ W
    keep, exact = rank_masks(op.A.shape, "window:8")
    # written out: band and the sinks before it exactly, the rest by features, one Z per row
    i, j = np.indices((N, N))
    band = (j <= i) & (j > i - Wb)
    before = j <= i - Wb
    sinks = before & (j < s)
    rest = before & (j >= s)
    np.testing.assert_array_equal(keep, before)
    np.testing.assert_array_equal(exact, band)
    E = np.exp(op.beta * op.Q @ op.K.T)
    Wd = CausalRandomFeatures(seed=3).directions(D, r)
    F = _phi(op.Q, op.beta, Wd) @ _phi(op.K, op.beta, Wd).T
    Z = (E * (band | sinks)).sum(axis=1) + (F * rest).sum(axis=1)
    np.testing.assert_allclose(P[rest], (F / Z[:, None])[rest], rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(P[sinks], op.A[sinks])  # sink columns exact on KEEP
    # the approximation copies A on the band: its error counts the kept keys only
    row = (np.abs(op.A - P) * keep).sum(axis=1)
    assert causal_error(op.A, U, W, "window:8") == pytest.approx(row.max(), abs=1e-14)


def test_a_sliding_window_head_needs_rank_zero():
    op = _head(seed=8, window=8)
    w = SinkWindowLowRank(window=8).witness(op, 1e-9)
    assert w is not None and w[0].shape == (N, 0) and w[1].shape == (0, N)
    assert causal_error(op.A, *w, "window:8") == 0.0
    # a wider band copies all of A too; a narrower one leaves mass the features only estimate
    assert SinkWindowLowRank(window=16).witness(op, 1e-9)[0].shape == (N, 0)
    assert SinkWindowLowRank(window=4).witness(op, 1e-9) is None


@pytest.mark.parametrize("name", sorted(CAUSAL_REFERENCE))
def test_each_declines_non_causal_operators_and_operators_without_factors(name):
    c = CAUSAL_REFERENCE[name]
    op = _head(seed=9)
    bidirectional = gaussian_head(m=N, N=N, d=D, temperature=T, causal=False, seed=9)
    no_factors = Operator(A=op.A, mask=op.mask)
    bare = Operator(A=op.A)  # no mask either
    M = causal_mask(N)
    upper = Operator.from_factors(op.Q, op.K, op.beta, mask=M.T.copy())  # keys after i
    for o in (bidirectional, no_factors, bare, upper):
        assert c.witness(o, 0.5) is None
        assert c.factors(o, 16) is None
    assert c.causal is True


def test_names_windows_and_argument_checks():
    assert set(CAUSAL_REFERENCE) == {"causal-random-features", "causal-taylor",
                                     "sink4+window8+random-features"}
    assert CAUSAL_REFERENCE["causal-taylor"].window is None
    assert CAUSAL_REFERENCE["causal-random-features"].window is None
    assert CAUSAL_REFERENCE["sink4+window8+random-features"].window == 8
    assert SinkWindowLowRank(window=16, sinks=2).name == "sink2+window16+random-features"
    for call, msg in ((lambda: SinkWindowLowRank(window=0), "window: .*got 0"),
                      (lambda: SinkWindowLowRank(sinks=-1), "sinks: .*got -1"),
                      (lambda: SinkWindowLowRank(seed=1.5), "seed: .*got 1.5"),
                      (lambda: CausalRandomFeatures(budget=0), "budget: .*got 0"),
                      (lambda: CausalTaylorFeatures.feature_map(np.ones((2, 2)), 1.0, 3),
                       "order: .*got 3")):
        with pytest.raises(InvalidArgumentError, match=msg):
            call()
    op = _head(seed=1)
    assert CausalRandomFeatures().factors(op, 0) is None
    assert SinkWindowLowRank(sinks=4).factors(op, 2) is None  # fewer columns than sinks


@pytest.mark.parametrize("name, window, eps", [
    ("causal-random-features", None, 0.5),
    ("causal-taylor", None, 0.25),
    ("sink4+window8+random-features", None, 0.5),
    ("sink4+window8+random-features", 8, 1e-6),
])
def test_witnesses_meet_eps_and_pass_the_checker(name, window, eps):
    from softrank.checker import CausalUpperWitness, check

    c = CAUSAL_REFERENCE[name]
    op = _head(seed=1, window=window)
    w = c.witness(op, eps)
    assert w is not None
    U, W = w
    rank = "causal" if c.window is None else f"window:{c.window}"
    assert causal_error(op.A, U, W, rank) <= eps
    keep, exact = rank_masks(op.A.shape, rank)
    assert check(op.A, CausalUpperWitness(eps, U, W, keep, exact)).ok
    # one rank less does not meet eps (the least rank of the family's search)
    k = U.shape[1]
    if name == "causal-taylor":
        assert k == 1 + D or causal_error(op.A, *c.factors(op, 1 + D), rank) > eps
    elif name == "causal-random-features" and k > 1:
        assert causal_error(op.A, *c.factors(op, k - 1), rank) > eps * (1 - 1e-9)

"""Intrinsic geometry (docs/theory/geometry.md): hand-worked sizes, identities, gauge invariance."""

import numpy as np
import pytest

from softrank import Operator
from softrank.errors import InvalidArgumentError
from softrank.generators.synthetic import grid, sphere
from softrank.geometry import (
    column_offset,
    interaction,
    interaction_dimension,
    kappa,
    kappa_upper,
    profile,
    retained_part,
    tau,
    tau_bound,
)

SDP = pytest.mark.geometry("cvxpy", "clarabel")  # kappa by its SDP


@pytest.mark.parametrize("by", [pytest.param(kappa, marks=SDP, id="sdp"),
                                pytest.param(kappa_upper, id="upper")])
def test_kappa_rank_one_is_the_product_of_max_entries(by):
    # T = x y^T: every factorisation is (c x, y / c), so kappa = max|x_i| max|y_j|
    x, y = np.array([1.0, -2.0]), np.array([3.0, -1.0, 0.5])
    T = np.outer(x, y)
    assert by(T) == pytest.approx(6.0, rel=1e-6 if by is kappa else 1e-12)


@pytest.mark.parametrize("by", [pytest.param(kappa, marks=SDP, id="sdp"),
                                pytest.param(kappa_upper, id="upper")])
@pytest.mark.parametrize("a, b", [(1.0, 1.0), (4.0, 1.0), (9.0, 0.25)])
def test_kappa_rank_two_diagonal(a, b, by):
    # T = diag(a, b): x_1 . y_1 = a forces ||x_1|| ||y_1|| >= a, and X = Y = diag(sqrt a, sqrt b)
    # reaches max(a, b): kappa = max(a, b)
    T = np.diag([a, b])
    assert by(T) == pytest.approx(max(a, b), rel=1e-6 if by is kappa else 1e-9)


@SDP
def test_kappa_is_homogeneous_and_below_its_upper_bound():
    rng = np.random.default_rng(0)
    T = rng.standard_normal((7, 3)) @ rng.standard_normal((3, 9))
    k = kappa(T)
    assert k <= kappa_upper(T) * (1 + 1e-6)
    assert kappa(2.5 * T) == pytest.approx(2.5 * k, rel=1e-5)
    assert kappa(np.zeros((3, 4))) == 0.0


def test_interaction_identities():
    op = sphere(3, 16.0, m=40, N=30, seed=1)
    C = interaction(op)
    assert np.abs(C.sum(axis=0)).max() < 1e-10 and np.abs(C.sum(axis=1)).max() < 1e-10
    # A = softmax(C + 1 b^T): T = C leaves no residual
    assert tau(op, C) < 1e-12
    B = np.exp(C + column_offset(op))
    assert np.abs(B / B.sum(axis=1, keepdims=True) - op.A).max() < 1e-12


@pytest.mark.parametrize("make, dim", [(lambda: grid(1, 12), 1), (lambda: grid(2, 6), 2),
                                       (lambda: sphere(3, 16.0, m=48, N=48, seed=0), 3),
                                       (lambda: sphere(4, 4.0, m=48, N=48, seed=0), 4)])
def test_interaction_dimension_of_the_synthetic_families(make, dim):
    d = interaction_dimension(make())
    assert d.dimension == d.lower == d.upper == dim
    assert d.singular_values[dim - 1] > 1e6 * d.singular_values[dim]


def test_tau_bound_dominates_tau_and_vanishes_with_the_rank():
    op = sphere(3, 16.0, m=48, N=48, seed=0)
    C = interaction(op)
    for r in range(0, 4):
        T = retained_part(C, r)
        assert tau(op, T) <= tau_bound(C, T) + 1e-12
    assert tau_bound(C, retained_part(C, 3)) < 1e-10


def _gauged_pair():
    """One head and the same head under a diagonal gauge of condition ratio 16."""
    rng = np.random.default_rng(3)
    Q, K = rng.standard_normal((32, 4)), rng.standard_normal((28, 4))
    S = np.diag([1.0, 2.0, 4.0, 0.25])
    return (Operator.from_factors(Q, K, beta=0.8),
            Operator.from_factors(Q @ S, K @ np.linalg.inv(S).T, beta=0.8))


def test_gauge_moves_native_geometry_not_intrinsic():
    a, b = _gauged_pair()
    assert np.abs(a.A - b.A).max() < 1e-13
    Ca, Cb = interaction(a), interaction(b)
    assert np.abs(Ca - Cb).max() < 1e-11
    assert interaction_dimension(a).dimension == interaction_dimension(b).dimension == 4
    ga, gb = a.native_geometry(), b.native_geometry()
    assert gb["rho_Q"] / ga["rho_Q"] > 1.5 and gb["Gamma"] != pytest.approx(ga["Gamma"], rel=0.05)


@SDP
def test_gauge_keeps_kappa():
    a, b = _gauged_pair()
    Ta, Tb = retained_part(interaction(a), 2), retained_part(interaction(b), 2)
    assert kappa(Ta) == pytest.approx(kappa(Tb), rel=1e-5)


def test_profile_and_errors():
    assert profile(3.0, 0.0, 0.5, 2) == pytest.approx(1 + 3.0 / 0.25)
    assert profile(1.0, 0.5, 0.25, 2) == float("inf")
    with pytest.raises(InvalidArgumentError, match="^eps"):
        profile(1.0, 0.0, 1.5, 2)
    A = np.array([[1.0, 0.0], [0.5, 0.5]])
    with pytest.raises(InvalidArgumentError, match=r"^A: .*A\[0, 1\]"):
        interaction(A)
    with pytest.raises(InvalidArgumentError, match="^threshold"):
        interaction_dimension(np.full((2, 2), 0.5), threshold=2.0)
    with pytest.raises(InvalidArgumentError, match="^r:"):
        retained_part(np.zeros((3, 3)), 4)


def test_interaction_from_logits_equals_from_log_a_and_survives_underflow():
    op = sphere(2, 8.0, m=20, N=24, seed=2)  # A > 0: both routes apply
    assert np.abs(interaction(op) - interaction(op.A)).max() < 1e-10
    fine = grid(1, 64)  # beta = 3969: far keys underflow to exactly 0 in A
    assert (fine.A == 0).any()
    with pytest.raises(InvalidArgumentError, match="positive support"):
        interaction(fine.A)
    d = interaction_dimension(fine)  # from the logits beta Q K^T
    assert d.dimension == 1

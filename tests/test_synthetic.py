"""Synthetic generators (docs/theory/families.md): shapes, kernels computed independently, supports,
seeding, planted structure, argument validation."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from softrank import Operator
from softrank.errors import InvalidArgumentError
from softrank.generators.synthetic import (
    ball,
    gaussian_head,
    grid,
    planted,
    planted_blocks,
    sphere,
)


def _grid_points(d, n):
    """Grid points in lexicographic order (last coordinate fastest), via meshgrid."""
    ticks = np.array([i / (n - 1) for i in range(n)])
    mesh = np.meshgrid(*([ticks] * d), indexing="ij")
    return np.stack([g.ravel() for g in mesh], axis=1)


def _gauss_kernel_rows(X, beta):
    D2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    Kmat = np.exp(-beta * D2 / 2)
    return Kmat / Kmat.sum(axis=1, keepdims=True)


def _rowsum_dev(A):
    return max(abs(math.fsum(r) - 1.0) for r in A)


# ---------------------------------------------------------------------------------- grid


@pytest.mark.parametrize("d, n, c", [(1, 2, 1.0), (1, 9, 1.0), (2, 5, 1.0), (2, 4, 0.3),
                                     (3, 3, 2.0), (1, 30, 4.0)])
def test_grid_is_normalised_gaussian_kernel(d, n, c):
    op = grid(d, n, c)
    assert isinstance(op, Operator)
    assert op.shape == (n**d, n**d)
    beta = c * (n - 1) ** 2
    assert op.beta == pytest.approx(beta, rel=1e-15)
    X = _grid_points(d, n)
    ref = _gauss_kernel_rows(X, beta)
    assert np.abs(op.A - ref).max() <= 1e-12
    # the points are the first d coordinates of the factors (queries = keys)
    np.testing.assert_allclose(op.Q[:, :d], X, atol=1e-15)
    np.testing.assert_allclose(op.K[:, :d], X, atol=1e-15)
    assert _rowsum_dev(op.A) <= 1e-14


def test_grid_hand_worked_two_points():
    # n = 2, d = 1, c = 1: points 0 and 1, beta = 1; kernel exp(-1/2) off the diagonal
    op = grid(1, 2)
    p = 1 / (1 + math.exp(-0.5))
    np.testing.assert_allclose(op.A, [[p, 1 - p], [1 - p, p]], rtol=1e-15, atol=0)


def test_grid_is_symmetric_and_doubly_stochastic_pattern():
    # on a grid the unnormalised kernel is symmetric; the centre row of an odd 1-D grid is
    # symmetric about the centre
    op = grid(1, 7, 2.0)
    row = op.A[3]
    np.testing.assert_allclose(row, row[::-1], rtol=1e-14)
    assert row.argmax() == 3


def test_grid_metadata():
    op = grid(2, 4, 0.5)
    assert op.family == "grid"
    assert op.meta["d"] == 2 and op.meta["n_side"] == 4


# ------------------------------------------------------------------------- sphere, ball


@pytest.mark.parametrize("d", [2, 3, 4])
def test_sphere_points_on_unit_sphere(d):
    op = sphere(d, 5.0, m=20, N=30, seed=3)
    assert op.shape == (20, 30)
    assert op.Q.shape == (20, d) and op.K.shape == (30, d)
    np.testing.assert_allclose(np.linalg.norm(op.Q, axis=1), 1.0, atol=1e-15)
    np.testing.assert_allclose(np.linalg.norm(op.K, axis=1), 1.0, atol=1e-15)
    L = 5.0 * op.Q @ op.K.T
    E = np.exp(L - L.max(axis=1, keepdims=True))
    assert np.abs(op.A - E / E.sum(axis=1, keepdims=True)).max() <= 1e-14
    assert op.beta == 5.0


@pytest.mark.parametrize("d", [2, 3, 4])
def test_ball_points_in_unit_ball(d):
    op = ball(d, 5.0, m=200, N=150, seed=4)
    nq = np.linalg.norm(op.Q, axis=1)
    nk = np.linalg.norm(op.K, axis=1)
    assert (nq <= 1.0 + 1e-15).all() and (nk <= 1.0 + 1e-15).all()
    # uniform in the ball, not on its boundary: P(|x| < 0.9) = 0.9^d >= 0.65
    assert (nq < 0.9).mean() > 0.4 and (nk < 0.9).mean() > 0.4
    # and not concentrated at the centre: P(|x| > 0.5) = 1 - 0.5^d >= 0.75
    assert (nq > 0.5).mean() > 0.5


def test_ball_radial_distribution_uniform_in_volume():
    # radius r of a uniform point in the 3-ball: P(r <= t) = t^3
    op = ball(3, 1.0, m=2000, N=1, seed=0)
    r = np.linalg.norm(op.Q, axis=1)
    for t in (0.5, 0.8):
        assert abs((r <= t).mean() - t**3) < 0.05


# ------------------------------------------------------------------------------- seeding


@pytest.mark.parametrize(
    "make",
    [
        lambda s: sphere(3, 4.0, m=12, N=10, seed=s),
        lambda s: ball(2, 4.0, m=12, N=10, seed=s),
        lambda s: gaussian_head(m=12, N=10, d=4, seed=s),
        lambda s: planted(12, 10, 3, 0.1, seed=s),
        lambda s: planted_blocks(12, 10, 3, 0.1, seed=s),
    ],
    ids=["sphere", "ball", "gaussian", "planted", "planted_blocks"],
)
def test_seed_reproduces_and_different_seeds_differ(make):
    a, b, c = make(5), make(5), make(6)
    np.testing.assert_array_equal(a.A, b.A)
    assert a.hash == b.hash
    assert not np.array_equal(a.A, c.A)
    assert a.hash != c.hash
    assert a.seed == 5


def test_grid_is_deterministic():
    np.testing.assert_array_equal(grid(2, 4).A, grid(2, 4).A)


# ------------------------------------------------------------------------------ planted


@pytest.mark.parametrize("m, N, k, delta, seed", [(10, 8, 3, 0.1, 0), (6, 15, 1, 0.0, 1),
                                                   (20, 20, 5, 0.3, 2), (7, 7, 7, 0.05, 3)])
def test_planted_rows_sum_to_one(m, N, k, delta, seed):
    op = planted(m, N, k, delta, seed=seed)
    assert op.shape == (m, N)
    assert (op.A >= 0).all()
    assert _rowsum_dev(op.A) <= 1e-14
    assert op.meta["planted_rank"] == k
    assert op.meta["planted_eps"] == delta


@pytest.mark.parametrize("m, N, k", [(10, 8, 3), (12, 20, 5), (9, 9, 1)])
def test_planted_without_noise_has_rank_k(m, N, k):
    A = planted(m, N, k, 0.0, seed=1).A
    s = np.linalg.svd(A, compute_uv=False)
    assert s[k - 1] > 1e-8  # generic Dirichlet factors: rank exactly k
    if k < min(m, N):
        assert s[k] < 1e-13


def _blocks(m, N, k):
    """Independent block-uniform matrix: block sizes differ by at most one, larger first."""
    def sizes(n):
        q, r = divmod(n, k)
        return [q + 1] * r + [q] * (k - r)

    B = np.zeros((m, N))
    i = j = 0
    for a, b in zip(sizes(m), sizes(N)):
        B[i:i + a, j:j + b] = 1.0 / b
        i, j = i + a, j + b
    return B


@pytest.mark.parametrize("m, N, k", [(12, 10, 3), (8, 8, 8), (7, 13, 2), (5, 9, 1)])
def test_planted_blocks_noise_free_is_block_uniform(m, N, k):
    op = planted_blocks(m, N, k, 0.0)
    np.testing.assert_allclose(op.A, _blocks(m, N, k), rtol=0, atol=1e-16)
    assert np.linalg.matrix_rank(op.A) == k
    assert op.meta["exact_rank"] == k
    assert op.meta["exact_eps_range"] == [0.0, 1.0]


@given(st.integers(1, 6), st.integers(0, 6), st.integers(0, 6), st.floats(0.0, 0.249),
       st.integers(0, 2**31 - 1))
def test_property_planted_blocks_structure(k, dm, dn, delta, seed):
    m, N = k + dm, k + dn
    op = planted_blocks(m, N, k, delta, seed=seed)
    B = _blocks(m, N, k)
    assert _rowsum_dev(op.A) <= 1e-14
    err = max(math.fsum(r) for r in np.abs(op.A - B))
    assert err <= 2 * delta + 1e-14
    # witness margin of each block: own-block mass minus other blocks >= 1 - 2 delta
    own = (op.A * (B > 0)).sum(axis=1)
    assert (own - (1 - own) >= 1 - 2 * delta - 1e-12).all()


# ----------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: grid(0, 4), "d"),
        (lambda: grid(4, 4), "d"),
        (lambda: grid(1.5, 4), "d"),
        (lambda: grid(True, 4), "d"),
        (lambda: grid(1, 1), "n"),
        (lambda: grid(1, 0), "n"),
        (lambda: grid(2, 3.0), "n"),
        (lambda: grid(1, 4, c=0), "c"),
        (lambda: grid(1, 4, c=float("nan")), "c"),
        (lambda: grid(1, 4, c="big"), "c"),
        (lambda: sphere(3, -1), "beta"),
        (lambda: sphere(3, 0.0), "beta"),
        (lambda: sphere(3, float("inf")), "beta"),
        (lambda: sphere(1, 1.0), "d"),
        (lambda: sphere(3, 1.0, m=0), "m"),
        (lambda: sphere(3, 1.0, N=-2), "N"),
        (lambda: ball(2, -1), "beta"),
        (lambda: ball(5, 1.0), "d"),
        (lambda: gaussian_head(d=0), "d"),
        (lambda: gaussian_head(temperature=-1.0), "temperature"),
        (lambda: planted(4, 6, 5, 0.1), "k"),
        (lambda: planted(6, 4, 5, 0.1), "k"),
        (lambda: planted(6, 6, 0, 0.1), "k"),
        (lambda: planted(6, 6, 2, 1.0), "delta"),
        (lambda: planted(6, 6, 2, -0.1), "delta"),
        (lambda: planted(6, 6, 2, float("nan")), "delta"),
        (lambda: planted(0, 6, 1, 0.1), "m"),
        (lambda: planted_blocks(4, 6, 5), "k"),
        (lambda: planted_blocks(6, 6, 2, 0.25), "delta"),
        (lambda: planted_blocks(6, 6, 2, -0.01), "delta"),
    ],
)
def test_bad_arguments_raise_naming_argument(call, name):
    with pytest.raises(InvalidArgumentError) as ei:
        call()
    assert str(ei.value).startswith(f"{name}:"), str(ei.value)


@pytest.mark.parametrize("delta", ["abc", None])
def test_non_numeric_delta_named(delta):
    with pytest.raises(InvalidArgumentError, match="^delta:"):
        planted(6, 6, 2, delta)


@pytest.mark.parametrize("conc", [0.0, -1.0])
def test_bad_concentration_named(conc):
    with pytest.raises(InvalidArgumentError, match="^concentration:"):
        planted(6, 6, 2, 0.1, concentration=conc)

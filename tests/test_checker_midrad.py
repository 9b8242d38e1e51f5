"""The interval check's midpoint-radius back end (docs/theory/checker.md#midpoint-radius-on-blas).

Each ball operation is compared with exact rational arithmetic (``fractions.Fraction``) on
the float64 data, including points drawn inside input balls, subnormal entries and
cancellation; the back end's decisions are compared with exact errors of witnesses, and
``auto`` is shown to choose it above ``FLINT_MAX_SIZE`` only.
"""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from softrank.checker import (BlockCertificate, CausalUpperWitness, UpperWitness, check,
                              check_interval)
from softrank.checker import midrad as mr
from softrank.checker.interval import FLINT_MAX_SIZE


def _fr(X):
    return [[Fraction(float(v)) for v in row] for row in np.atleast_2d(X)]


def _fr_matmul(X, Y):
    return [[sum((X[i][t] * Y[t][j] for t in range(len(Y))), Fraction(0))
             for j in range(len(Y[0]))] for i in range(len(X))]


def _inside(b: mr.Ball, X) -> bool:
    """Every entry of the exact matrix ``X`` (Fractions) lies in the ball, decided exactly."""
    M = _fr(b.mid)
    R = _fr(np.zeros_like(b.mid) if b.rad is None else b.rad)
    return all(abs(X[i][j] - M[i][j]) <= R[i][j]
               for i in range(len(X)) for j in range(len(X[0])))


# floats over many decades, with subnormals and exact cancellation among them
_entry = st.one_of(
    st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, allow_subnormal=True),
    st.sampled_from([0.0, 2.0**-1074, -(2.0**-1060), 2.0**53, -(2.0**53), 1.0, 0.5, 1e-300]),
)


def _mats(r, c):
    return st.lists(_entry, min_size=r * c, max_size=r * c).map(
        lambda v: np.array(v, dtype=np.float64).reshape(r, c))


@given(_mats(3, 4), _mats(4, 2), st.floats(0, 1e-3), st.floats(0, 1e-3),
       st.floats(-1, 1), st.floats(-1, 1))
def test_matmul_encloses_the_exact_product_of_points_of_the_balls(X, Y, rx, ry, tx, ty):
    bx = mr.Ball(X, np.abs(X) * rx + (1e-30 if rx else 0.0)) if rx else mr.ball(X)
    by = mr.Ball(Y, np.abs(Y) * ry + 1e-30) if ry else mr.ball(Y)
    # a point of each ball, exactly: M + t R with t in [-1, 1]
    t_x, t_y = Fraction(tx), Fraction(ty)
    Px = [[m + t_x * r for m, r in zip(mrow, rrow)] for mrow, rrow in
          zip(_fr(X), _fr(np.zeros_like(X) if bx.rad is None else bx.rad))]
    Py = [[m + t_y * r for m, r in zip(mrow, rrow)] for mrow, rrow in
          zip(_fr(Y), _fr(np.zeros_like(Y) if by.rad is None else by.rad))]
    try:
        out = mr.matmul(bx, by)
    except FloatingPointError:  # an overflowed enclosure is refused, never returned
        return
    assert _inside(out, _fr_matmul(Px, Py))


@given(_mats(3, 3), _mats(3, 3), st.floats(0, 1e-3))
def test_sub_encloses_the_exact_difference(X, Y, rx):
    bx = mr.Ball(X, np.abs(X) * rx) if rx else mr.ball(X)
    try:
        out = mr.sub(bx, mr.ball(Y))
    except FloatingPointError:
        return
    Fx, Fy = _fr(X), _fr(Y)
    for t in (Fraction(-1), Fraction(0), Fraction(1)):  # the ends and the midpoint of X's ball
        Px = [[m + t * r for m, r in zip(mrow, rrow)] for mrow, rrow in
              zip(Fx, _fr(np.zeros_like(X) if bx.rad is None else bx.rad))]
        assert _inside(out, [[a - b for a, b in zip(ra, rb)] for ra, rb in zip(Px, Fy)])


@given(_mats(4, 5), st.floats(0, 1e-2), st.lists(st.booleans(), min_size=20, max_size=20))
def test_row_abs_sums_and_sum_of_squares_bound_every_point(X, rx, mask):
    b = mr.Ball(X, np.abs(X) * rx) if rx else mr.ball(X)
    mask = np.array(mask).reshape(4, 5)
    try:
        lo, hi = mr.row_abs_sum_bounds(b, mask)
        slo, shi = mr.sum_squares_bounds(b)
    except FloatingPointError:
        return
    R = _fr(np.zeros_like(X) if b.rad is None else b.rad)
    for t in (Fraction(-1), Fraction(0), Fraction(1)):
        P = [[m + t * r for m, r in zip(mrow, rrow)] for mrow, rrow in zip(_fr(X), R)]
        for i in range(4):
            s = sum((abs(P[i][j]) for j in range(5) if mask[i, j]), Fraction(0))
            assert Fraction(float(lo[i])) <= s <= Fraction(float(hi[i]))
        sq = sum((v * v for row in P for v in row), Fraction(0))
        assert Fraction(slo) <= sq <= Fraction(shi)


def test_a_product_whose_float_value_cancels_is_enclosed():
    # each column of W is (2^53, 1, -2^53, 1/2): exactly 3/2, in float64 1/2 or 0 by order
    U = np.ones((1, 4))
    W = np.tile(np.array([[2.0**53], [1.0], [-(2.0**53)], [0.5]]), (1, 2))
    out = mr.matmul(mr.ball(U), mr.ball(W))
    assert _inside(out, [[Fraction(3, 2), Fraction(3, 2)]])


def test_overflow_is_refused_and_the_check_rejects():
    A = np.full((2, 2), 0.5)
    U, W = np.full((2, 1), 1e300), np.full((1, 2), 1e300)
    with pytest.raises(FloatingPointError), np.errstate(over="ignore"):
        mr.matmul(mr.ball(U), mr.ball(W))
    r = check_interval(A, UpperWitness(1e308, U, W), backend="midrad")
    assert not r.ok and "FloatingPointError" in r.detail


def _stochastic(m, n, seed):
    return np.random.default_rng(seed).dirichlet(np.ones(n), size=m)


def test_auto_is_flint_up_to_the_size_and_midrad_above():
    rng = np.random.default_rng(0)
    for n, expected in ((FLINT_MAX_SIZE, "flint"), (FLINT_MAX_SIZE + 1, "midrad")):
        A = _stochastic(6, n, 1)
        U, s, Vt = np.linalg.svd(A, full_matrices=False)
        U, W = U[:, :3] * s[:3], Vt[:3]
        e = float(np.abs(A - U @ W).sum(axis=1).max())
        rep = check(A, UpperWitness(e * (1 + 1e-9) + 1e-12, U, W))
        assert rep.ok and rep.interval.backend == expected and rep.interval.rows_checked == "all"
        bad = check(A, UpperWitness(e * (1 - 1e-6), U, W))
        assert not bad.ok and not bad.disagree and bad.interval.backend == expected
    # a block certificate is checked by the back end of its block's size
    from softrank.checker import TrivialCertificate

    A = np.abs(rng.standard_normal((4, FLINT_MAX_SIZE + 8)))
    A /= A.sum(axis=1, keepdims=True)
    cols = np.arange(4)
    inner = TrivialCertificate(float(A[:, cols].sum(axis=1).max()) * 0.5)
    rep = check(A, BlockCertificate(inner.eps, np.arange(4), cols, inner))
    assert rep.ok and rep.interval.backend == "flint"


@given(st.integers(0, 2**31 - 1), st.integers(1, 3), st.floats(-1e-3, 1e-3))
def test_midrad_never_accepts_a_witness_below_its_exact_error(seed, k, t):
    A = _stochastic(4, 5, seed)
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    U, W = U[:, :k] * s[:k], Vt[:k]
    U = U + np.random.default_rng(seed + 1).standard_normal(U.shape) * 1e-4
    P = _fr_matmul(_fr(U), _fr(W))
    e = max(sum((abs(a - p) for a, p in zip(ra, rp)), Fraction(0))
            for ra, rp in zip(_fr(A), P))
    eps = float(e * (1 + Fraction(t)))
    r = check_interval(A, UpperWitness(eps, U, W), backend="midrad")
    if r.ok:
        assert Fraction(eps) >= e
    if t > 1e-6:
        assert r.ok  # well inside: the rounding bounds (~1e-15) must not reject it


def test_midrad_and_flint_agree_on_a_causal_witness_of_every_mask_kind():
    rng = np.random.default_rng(3)
    n = 9
    A = np.tril(rng.random((n, n))) + 1e-3
    A /= A.sum(axis=1, keepdims=True)
    keep = np.tril(np.ones((n, n), bool), -2)  # older keys approximated
    exact = np.tril(np.ones((n, n), bool)) & ~keep  # the last two copied
    Ak = np.where(keep, A, 0.0)
    U, s, Vt = np.linalg.svd(Ak, full_matrices=False)
    U, W = U[:, :2] * s[:2], Vt[:2]
    err = np.where(keep, np.abs(A - U @ W), np.where(exact, 0.0, A)).sum(axis=1).max()
    for eps, ok in ((err * 1.001, True), (err * 0.999, False)):
        c = CausalUpperWitness(float(eps), U, W, keep, exact)
        got = {b: check_interval(A, c, backend=b).ok for b in ("flint", "midrad", "mpmath")}
        assert got == {"flint": ok, "midrad": ok, "mpmath": ok}


def test_selections_are_exact_so_exact_witnesses_pass_at_any_eps():
    # the identity witness (U = A, W = I) and a key-support witness (W selects columns) have
    # products computed exactly (a selection): no rounding allowance, as in float64
    A = np.random.default_rng(0).dirichlet(np.full(520, 0.05), size=520)
    for backend in ("midrad", "flint"):
        assert check_interval(A, UpperWitness(1e-13, A, np.eye(520)), backend=backend).ok
    rep = check(A, UpperWitness(1e-13, A, np.eye(520)))
    assert rep.ok and not rep.disagree and rep.interval.backend == "midrad"
    keys = np.arange(0, 520, 2)
    U, W = A[:, keys], np.eye(520)[keys]
    miss = np.abs(A[:, 1::2]).sum(axis=1).max()  # the exact error: the dropped keys' mass
    rep = check(A, UpperWitness(float(miss) * (1 + 1e-12), U, W))  # row sums: ~N u
    assert rep.ok and not rep.disagree
    out = mr.matmul(mr.ball(U), mr.ball(W))
    assert out.rad is None and np.array_equal(out.mid, A * np.isin(np.arange(520), keys))


def test_key_group_margins_are_enclosed_as_tightly_as_float64_does():
    # two witnesses whose exact margin is known; eps 1.5e-12 below it: float64 and
    # midpoint-radius both accept (one enclosure per margin, no double counting)
    from softrank.checker import KeyGroupCertificate

    N, d = 4096, 1e-4
    rng = np.random.default_rng(0)
    A = np.empty((2, N))
    A[0, :N // 2], A[0, N // 2:] = (1 + d) / N, (1 - d) / N
    A[1] = A[0, ::-1]
    A *= 1 + rng.random((2, N)) * 1e-3
    A /= A.sum(axis=1, keepdims=True)
    g0, g1 = np.arange(N // 2), np.arange(N // 2, N)
    exact = min(sum(map(Fraction, A[0, g0])) - sum(map(Fraction, A[0, g1])),
                sum(map(Fraction, A[1, g1])) - sum(map(Fraction, A[1, g0])))
    eps = float(exact) - 1.5e-12
    rep = check(A, KeyGroupCertificate(eps, [0, 1], (g0, g1)))
    assert rep.ok and not rep.disagree and rep.interval.backend == "midrad", rep.summary()
    above = float(exact) * (1 + 1e-12)
    bad = check(A, KeyGroupCertificate(above, [0, 1], (g0, g1)))
    assert not bad.ok and not bad.disagree


def test_the_interval_check_refuses_under_flush_to_zero_and_a_bad_backend_is_an_error(
        monkeypatch):
    from softrank.checker import interval
    from softrank.errors import InvalidArgumentError

    A = np.full((2, 2), 0.5)
    w = UpperWitness(0.5, np.ones((2, 1)), np.full((1, 2), 0.5))
    assert check_interval(A, w, backend="midrad").ok
    monkeypatch.setattr(interval, "_flush_to_zero", lambda: True)
    for backend in ("midrad", "flint", "mpmath"):
        r = check_interval(A, w, backend=backend)
        assert not r.ok and "FTZ" in r.detail
    monkeypatch.undo()
    with pytest.raises(InvalidArgumentError, match="backend"):
        check(A, w, backend="midrd")


def test_check_rejects_non_numeric_data_and_reports_python_bools():
    w = UpperWitness(0.5, np.ones((2, 1)), np.full((1, 2), 0.5))
    rep = check([["a", "b"], ["c", "d"]], w)
    assert not rep.ok and not rep.float64.ok and not rep.interval.ok
    rep = check(np.full((2, 2), 0.5), UpperWitness(np.float32(0.5), w.U, w.W))
    assert type(rep.ok) is bool and type(rep.disagree) is bool and rep.ok

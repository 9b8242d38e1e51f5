"""The independent checker (docs/theory/checker.md): soundness at the exact boundary, rejection of
tampered and malformed certificates, float64 vs interval agreement, the file format.

Reference values are derived here without the checker: hand-worked matrices, and exact
rational arithmetic (``fractions.Fraction``) on the float64 data of small certificates, so
that "the condition fails" is decided exactly rather than by another rounding analysis.
"""

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from softrank.checker import (
    DecodedInverseCertificate,
    FrobeniusCertificate,
    KeyGroupCertificate,
    MalformedCertificate,
    TrivialCertificate,
    UpperWitness,
    check,
    check_float64,
    check_interval,
    load_certificate,
    matrix_hash,
    save_certificate,
)

# ------------------------------------------------------------------------- exact helpers


def _fr(X):
    return [[Fraction(float(v)) for v in row] for row in np.atleast_2d(X)]


def _fr_matmul(X, Y):
    n = len(Y)
    return [[sum((X[i][t] * Y[t][j] for t in range(n)), Fraction(0)) for j in range(len(Y[0]))]
            for i in range(len(X))]


def exact_upper_error(A, U, W) -> Fraction:
    """Exact ``||A - U W||_inf`` of the float64 data."""
    P = _fr_matmul(_fr(U), _fr(W))
    Af = _fr(A)
    return max(sum((abs(a - p) for a, p in zip(ra, rp)), Fraction(0)) for ra, rp in zip(Af, P))


def exact_inf_norm(X) -> Fraction:
    return max(sum((abs(v) for v in row), Fraction(0)) for row in _fr(X))


def exact_decoded_condition_parts(A, L, R):
    """Exact ``(||I - L A R||_inf, ||L||_inf, ||R||_inf)``."""
    M = _fr_matmul(_fr(L), _fr_matmul(_fr(A), _fr(R)))
    k = len(M)
    resid = max(sum((abs((1 if a == b else 0) - M[a][b]) for b in range(k)), Fraction(0))
                for a in range(k))
    return resid, exact_inf_norm(L), exact_inf_norm(R)


def float_above(x: Fraction) -> float:
    """Least float64 >= x."""
    f = float(x)
    return f if Fraction(f) >= x else float(np.nextafter(f, np.inf))


def float_below(x: Fraction) -> float:
    """Greatest float64 < x."""
    f = float(x)
    return f if Fraction(f) < x else float(np.nextafter(f, -np.inf))


def stochastic(m, N, seed, conc=1.0):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.full(N, conc), size=m)


def tsvd(A, k):
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    return U[:, :k] * s[:k], Vt[:k]


def fsum_error(A, U, W) -> float:
    """Max row l1 error of ``A - fl(U W)`` with exactly rounded row sums (math.fsum)."""
    D = np.abs(A - U @ W)
    return max(math.fsum(row) for row in D)


I8 = np.eye(8)


def verdicts(A, cert):
    """(float64 decision, interval decision) -- each arithmetic must decide correctly alone."""
    rep = check(A, cert, max_rows=None)
    return rep.float64.ok, rep.interval.ok


def assert_accepts(A, cert):
    assert verdicts(A, cert) == (True, True), check(A, cert).summary()


def assert_rejects(A, cert):
    assert verdicts(A, cert) == (False, False), check(A, cert).summary()


# ------------------------------------------------------------------------ upper witnesses


@pytest.fixture(scope="module")
def svd_case():
    A = stochastic(7, 9, seed=11, conc=0.5)
    U, W = tsvd(A, 3)
    return A, U, W, exact_upper_error(A, U, W)


def test_upper_witness_passes_just_above_true_error(svd_case):
    A, U, W, e = svd_case
    assert abs(float(e) - fsum_error(A, U, W)) < 1e-13  # two independent computations agree
    eps = float(e) * (1 + 1e-6)
    rep = check(A, UpperWitness(eps, U, W))
    assert rep.ok, rep.summary()
    assert not rep.disagree
    assert 0 < rep.float64.margin <= eps - float(e)


def test_upper_witness_rejected_strictly_below_true_error(svd_case):
    A, U, W, e = svd_case
    for eps in (float_below(e), float(e) * (1 - 1e-9), float(e) / 2):
        assert Fraction(eps) < e
        rep = check(A, UpperWitness(eps, U, W))
        assert not rep.ok and not rep.float64.ok and not rep.interval.ok, (eps, rep.summary())


@pytest.mark.parametrize("where", ["U", "W"])
def test_tampered_svd_witness_rejected(svd_case, where):
    A, U, W, e = svd_case
    eps = float(e) * (1 + 1e-6)
    assert check(A, UpperWitness(eps, U, W)).ok
    worst = int(np.argmax([math.fsum(r) for r in np.abs(A - U @ W)]))
    for delta in (0.05, -0.05):  # one sign raises the worst row's error
        U2, W2 = U.copy(), W.copy()
        if where == "U":
            U2[worst, 1] += delta
        else:
            W2[0, int(np.argmax(np.abs(U[:, 0])))] += delta
        e2 = exact_upper_error(A, U2, W2)
        if e2 > Fraction(eps):
            break
    assert e2 > Fraction(eps)  # the tamper really pushes the exact error above eps
    rep = check(A, UpperWitness(eps, U2, W2))
    assert not rep.ok and not rep.float64.ok and not rep.interval.ok


def test_witness_exact_by_float_but_not_exactly_is_rejected():
    # Each column of W is (2^53, 1, -2^53, 1/2) and U = (1, 1, 1, 1): exactly the product is
    # 3/2, in float64 it is 1/2 or 0 depending on the summation order (2^53 + 1 rounds to
    # 2^53). So A - fl(UW) looks like error 0 or 1 while the exact error of the row is 2.
    A = np.array([[0.5, 0.5]])
    U = np.ones((1, 4))
    W = np.tile(np.array([[2.0**53], [1.0], [-(2.0**53)], [0.5]]), (1, 2))
    assert exact_upper_error(A, U, W) == 2
    assert_rejects(A, UpperWitness(0.5, U, W))
    assert_rejects(A, UpperWitness(1.9, U, W))
    # the interval product is exact here; the float64 bound (gamma_n |U||W|) is loose
    assert check_interval(A, UpperWitness(2.0 + 1e-6, U, W)).ok


def test_exact_witness_of_identity():
    # U = I, W = I: the product is exact, the error 0; any eps > 0 is certified, rank n.
    w = UpperWitness(1e-12, I8, I8)
    assert w.rank == 8
    assert check(I8, w).ok
    # rank n - 1 by dropping one factor column: the exact error is 1 on the dropped row.
    w7 = UpperWitness(0.999, I8[:, :7], I8[:7])
    assert not check(I8, w7).ok
    assert check(I8, UpperWitness(1.0 + 1e-12, I8[:, :7], I8[:7])).ok


@given(st.integers(0, 2**31 - 1), st.integers(1, 3), st.floats(-1e-3, 1e-3))
def test_property_upper_checker_never_accepts_below_exact_error(seed, k, t):
    """Soundness: if the checker accepts, the exact error of the float data is <= eps."""
    A = stochastic(4, 5, seed, conc=0.7)
    U, W = tsvd(A, k)
    rng = np.random.default_rng(seed + 1)
    U = U + rng.standard_normal(U.shape) * 1e-4  # not an optimal truncation any more
    e = exact_upper_error(A, U, W)
    eps = float(e * (1 + Fraction(t)))
    rep = check(A, UpperWitness(eps, U, W), backend="mpmath")
    if rep.float64.ok:
        assert Fraction(eps) >= e
    if rep.interval.ok:
        assert Fraction(eps) >= e
    if t > 1e-6:
        assert rep.ok  # well inside: the rounding bounds (~1e-15) must not reject it


# ---------------------------------------------------------------------- lower certificates


@pytest.mark.parametrize("eps, ok", [(0.0, True), (0.5, True), (0.999999, True),
                                     (1.0, False), (1.5, False)])
def test_trivial_on_stochastic(eps, ok):
    A = stochastic(5, 6, seed=1)
    assert exact_inf_norm(A) <= Fraction(1) + Fraction(1, 10**12)
    rep = check(A, TrivialCertificate(eps))
    assert rep.ok is ok, rep.summary()
    assert not rep.disagree


def test_trivial_exact_boundary():
    A = np.full((3, 4), 0.25)  # ||A||_inf = 1 exactly
    assert_rejects(A, TrivialCertificate(1.0))
    assert_rejects(A, TrivialCertificate(float(np.nextafter(1.0, 2.0))))
    assert_accepts(A, TrivialCertificate(1.0 - 1e-12))


@pytest.mark.parametrize("eps, ok", [(0.0, True), (0.1, True), (0.5, True), (0.999, True),
                                     (1.0, False), (1.2, False)])
def test_key_groups_identity(eps, ok):
    c = KeyGroupCertificate(eps, np.arange(8), tuple(np.array([j]) for j in range(8)))
    assert c.rank == 8
    rep = check(I8, c)
    assert rep.ok is ok, rep.summary()


def test_key_groups_margin_hand_worked():
    # row 0: own 0.7, other 0.2 -> margin 0.5; row 1: own 0.6, other 0.1 -> margin 0.5
    A = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4]])
    c = lambda e: KeyGroupCertificate(e, [0, 1], ([0], [1]))  # noqa: E731
    assert_accepts(A, c(0.49))
    assert not check(A, c(0.5)).ok  # margin must exceed eps strictly
    assert_rejects(A, c(0.51))
    # key 2 in group 1: row 1 own 0.9 margin 0.8; row 0 other 0.3 margin 0.4
    c2 = KeyGroupCertificate(0.39, [0, 1], ([0], [1, 2]))
    assert_accepts(A, c2)
    assert_rejects(A, KeyGroupCertificate(0.4, [0, 1], ([0], [1, 2])))


@pytest.mark.parametrize(
    "queries, groups, why",
    [
        ([0, 1], ([0, 2], [1, 2]), "overlapping groups"),
        ([0, 1], ([0, 1], [1]), "overlapping groups (nested)"),
        ([0, 0], ([0], [1]), "repeated witness query"),
        ([0, 1], ([0, 0], [1]), "key repeated inside a group"),
        ([0, 1], ([0], []), "empty group"),
        ([0, 8], ([0], [1]), "query out of range"),
        ([0, -1], ([0], [7]), "negative query"),
        ([0, 1], ([0], [8]), "key out of range"),
        ([0, 1], ([0], [-1]), "negative key"),
        ([], (), "no groups"),
    ],
)
def test_key_groups_malformed_rejected(queries, groups, why):
    c = KeyGroupCertificate(0.5, queries, groups)
    rep = check(I8, c)
    assert not rep.ok, why
    assert not check_float64(I8, c).ok, why


def test_key_groups_count_mismatch_is_malformed():
    with pytest.raises(MalformedCertificate):
        KeyGroupCertificate(0.5, [0, 1, 2], ([0], [1]))


@pytest.mark.parametrize("eps, ok", [(0.0, True), (0.5, True), (0.999, True), (1.0, False)])
def test_decoded_identity(eps, ok):
    # L = R = I on I_n: ||I - LAR|| = 0, ||L|| = ||R|| = 1 -> condition eps < 1
    rep = check(I8, DecodedInverseCertificate(eps, I8, I8))
    assert rep.ok is ok, rep.summary()
    assert not rep.disagree


def test_decoded_hand_worked_two_by_two():
    # A = [[3/4, 1/4], [1/4, 3/4]], R = I, L = A^{-1} = [[3/2, -1/2], [-1/2, 3/2]] (exact).
    # ||I - LAR|| = 0, ||L||_inf = 2, ||R||_inf = 1 -> certificate holds iff 2 eps < 1.
    A = np.array([[0.75, 0.25], [0.25, 0.75]])
    L = np.array([[1.5, -0.5], [-0.5, 1.5]])
    R = np.eye(2)
    assert_accepts(A, DecodedInverseCertificate(0.49, L, R))
    assert_rejects(A, DecodedInverseCertificate(0.5, L, R))
    # with L = I instead: ||I - A||_inf = 1/2, condition 1/2 + eps < 1 iff eps < 1/2
    assert_accepts(A, DecodedInverseCertificate(0.49, np.eye(2), R))
    assert_rejects(A, DecodedInverseCertificate(0.5, np.eye(2), R))
    # this is the true answer: r_eps = 2 iff eps < 1/2 ... B = [[1/2,1/2],[1/2,1/2]] has
    # rank 1 and error exactly 1/2, so no sound certificate may claim 2 at eps = 1/2.
    B_err = exact_upper_error(A, np.array([[1.0], [1.0]]), np.array([[0.5, 0.5]]))
    assert B_err == Fraction(1, 2)


@given(st.integers(0, 2**31 - 1), st.integers(1, 3), st.sampled_from([-1, 0, 1]))
def test_property_decoded_checker_sound_at_exact_threshold(seed, k, side):
    """With ``L = pinv(A R)`` (float), the exact threshold eps* = (1 - resid)/(|L||R|) is
    computed in rationals; any eps >= eps* must be rejected."""
    A = stochastic(5, 5, seed, conc=0.3)
    R = np.zeros((5, k))
    R[np.arange(k), np.arange(k)] = 1.0
    L = np.linalg.pinv(A @ R)
    resid, nL, nR = exact_decoded_condition_parts(A, L, R)
    if resid >= 1:
        return
    thr = (1 - resid) / (nL * nR)
    if side == 0:
        eps = float_above(thr)  # condition >= 1 exactly
    elif side == 1:
        eps = float(thr * Fraction(2))
    else:
        eps = float(thr * (1 - Fraction(1, 10**6)))
    c = DecodedInverseCertificate(eps, L, R)
    rep = check(A, c, backend="mpmath")
    exact_ok = resid + Fraction(eps) * nL * nR < 1
    if rep.float64.ok or rep.interval.ok:
        assert exact_ok
    if side == -1 and thr > Fraction(1, 10**6):
        assert rep.ok, rep.summary()


@pytest.mark.parametrize("n", [4, 8])
def test_frobenius_identity_both_sides(n):
    # I_n, all rows, r = n - 1: sigma = (1, ..., 1), tail = 1, condition 1 > n eps^2.
    In = np.eye(n)
    rows = np.arange(n)
    thr = 1 / math.sqrt(n)
    assert_accepts(In, FrobeniusCertificate(thr * 0.999, rows, n - 1))
    assert_accepts(In, FrobeniusCertificate(thr * 0.5, rows, n - 1))
    assert_rejects(In, FrobeniusCertificate(thr * 1.001, rows, n - 1))
    assert_rejects(In, FrobeniusCertificate(thr * 2, rows, n - 1))


def test_frobenius_identity_exact_boundary():
    # n = 4: 1/sqrt(4) = 1/2 exactly, so at eps = 1/2 the tail equals |I| eps^2: not > .
    assert_rejects(np.eye(4), FrobeniusCertificate(0.5, np.arange(4), 3))


def test_frobenius_row_subset_and_small_r():
    # rows {0, 1} of I_8: sigma = (1, 1); r = 0: tail 2 > 2 eps^2 iff eps < 1
    assert_accepts(I8, FrobeniusCertificate(0.99, [0, 1], 0))
    assert_rejects(I8, FrobeniusCertificate(1.0, [0, 1], 0))
    # r = 1: tail 1 > 2 eps^2 iff eps < 0.7071
    assert_accepts(I8, FrobeniusCertificate(0.70, [0, 1], 1))
    assert_rejects(I8, FrobeniusCertificate(0.71, [0, 1], 1))


@pytest.mark.parametrize(
    "rows, r, why",
    [
        ([0, 8], 0, "row out of range"),
        ([-1, 0], 0, "negative row"),
        ([0, 0, 1], 0, "repeated row"),
        ([], 0, "no rows"),
        (np.arange(8), 8, "r = |I|"),
        (np.arange(8), -1, "negative r"),
    ],
)
def test_frobenius_malformed_rejected(rows, r, why):
    rep = check(I8, FrobeniusCertificate(0.1, rows, r))
    assert not rep.ok, why


# ------------------------------------------------------------------- malformed, in general


@pytest.mark.parametrize(
    "cert",
    [
        UpperWitness(0.5, np.full((8, 8), np.nan), I8),
        UpperWitness(0.5, np.where(I8 == 1, np.inf, 0.0), I8),
        UpperWitness(0.5, np.ones((7, 8)) / 8, I8),  # U rows != m
        UpperWitness(0.5, I8, np.ones((8, 9)) / 9),  # W cols != N
        UpperWitness(float("nan"), I8, I8),
        UpperWitness(-0.1, I8, I8),
        UpperWitness(float("inf"), I8, I8),
        DecodedInverseCertificate(0.5, np.ones((2, 7)), np.ones((8, 2))),
        DecodedInverseCertificate(0.5, np.ones((2, 8)), np.ones((7, 2))),
        DecodedInverseCertificate(0.5, np.full((8, 8), np.nan), I8),
        DecodedInverseCertificate(float("nan"), I8, I8),
        TrivialCertificate(float("nan")),
        TrivialCertificate(-1.0),
    ],
    ids=["U-nan", "U-inf", "U-rows", "W-cols", "eps-nan", "eps-neg", "eps-inf",
         "L-cols", "R-rows", "L-nan", "dec-eps-nan", "triv-eps-nan", "triv-eps-neg"],
)
def test_malformed_rejected_without_raising(cert):
    rep = check(I8, cert)
    assert not rep.ok
    assert not check_float64(I8, cert).ok


@pytest.mark.parametrize(
    "make",
    [
        lambda: UpperWitness(0.5, np.ones((8, 3)), np.ones((2, 8))),
        lambda: UpperWitness(0.5, np.ones(8), np.ones((1, 8))),
        lambda: DecodedInverseCertificate(0.5, np.ones((3, 8)), np.ones((8, 2))),
        lambda: DecodedInverseCertificate(0.5, np.ones((3, 8, 1)), np.ones((8, 3))),
    ],
    ids=["inner-dims", "U-1d", "L-R-ranks", "L-3d"],
)
def test_inconsistent_shapes_are_malformed_at_construction(make):
    with pytest.raises(MalformedCertificate):
        make()


def test_unknown_kind_rejected():
    class Bogus:
        kind, eps, rank = "bogus", 0.5, 3

    rep = check(I8, Bogus())
    assert not rep.ok


def test_non_finite_A_rejected():
    A = I8.copy()
    A[0, 0] = np.nan
    assert not check(A, TrivialCertificate(0.5)).ok
    assert not check(A, UpperWitness(0.5, I8, I8)).ok


@pytest.mark.parametrize("eps", [None, "abc"])
def test_non_numeric_eps_rejected_without_raising(eps):
    assert not check(I8, TrivialCertificate(eps)).ok


def test_check_rejects_non_2d_A_without_raising():
    assert not check(np.full(4, 0.25), TrivialCertificate(0.5)).ok


@pytest.mark.parametrize(
    "cert",
    [KeyGroupCertificate(0.5, [], ()), FrobeniusCertificate(0.1, [-1, 0], 0),
     FrobeniusCertificate(0.1, np.arange(8), -1)],
    ids=["kg-empty", "frob-negative-row", "frob-negative-r"],
)
def test_interval_alone_rejects_structurally_malformed(cert):
    assert not check_interval(I8, cert).ok


# ----------------------------------------------------------- float64 vs interval agreement


def _agreement_cases():
    A = stochastic(6, 7, seed=5, conc=0.4)
    U, W = tsvd(A, 2)
    e = float(exact_upper_error(A, U, W))
    U4, W4 = tsvd(A, 4)
    e4 = float(exact_upper_error(A, U4, W4))
    A2 = np.array([[0.75, 0.25], [0.25, 0.75]])
    L2 = np.array([[1.5, -0.5], [-0.5, 1.5]])
    Ak = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4]])
    return [
        ("upper-pass", A, UpperWitness(e * 1.01, U, W), True),
        ("upper-fail", A, UpperWitness(e * 0.99, U, W), False),
        ("upper4-pass", A, UpperWitness(e4 * 1.01 + 1e-12, U4, W4), True),
        ("trivial-pass", A, TrivialCertificate(0.9), True),
        ("trivial-fail", A, TrivialCertificate(1.1), False),
        ("keygroups-pass", Ak, KeyGroupCertificate(0.45, [0, 1], ([0], [1])), True),
        ("keygroups-fail", Ak, KeyGroupCertificate(0.55, [0, 1], ([0], [1])), False),
        ("decoded-pass", A2, DecodedInverseCertificate(0.45, L2, np.eye(2)), True),
        ("decoded-fail", A2, DecodedInverseCertificate(0.55, L2, np.eye(2)), False),
        ("decoded-I-pass", I8, DecodedInverseCertificate(0.9, I8, I8), True),
        ("frob-pass", I8, FrobeniusCertificate(0.3, np.arange(8), 7), True),
        ("frob-fail", I8, FrobeniusCertificate(0.4, np.arange(8), 7), False),
        ("frob-subset-pass", A, FrobeniusCertificate(0.05, [0, 2, 4], 0), True),
    ]


@pytest.mark.parametrize("backend", ["mpmath", "flint", "midrad"])
@pytest.mark.parametrize("case", _agreement_cases(), ids=lambda c: c[0])
def test_float64_and_interval_agree(case, backend):
    name, A, cert, expected = case
    f = check_float64(A, cert)
    iv = check_interval(A, cert, backend=backend, max_rows=None)
    assert f.ok is expected, (name, f.detail)
    assert iv.ok is expected, (name, backend, iv.detail)
    assert iv.backend == backend and iv.rows_checked == "all"
    rep = check(A, cert, backend=backend)
    assert rep.ok is expected and not rep.disagree


def test_interval_rejects_unknown_backend_without_raising():
    iv = check_interval(I8, TrivialCertificate(0.5), backend="nope")
    assert not iv.ok


def test_check_interval_false_reports_float64_only():
    rep = check(I8, TrivialCertificate(0.5), interval=False)
    assert rep.ok and rep.interval is None and not rep.disagree


@pytest.mark.parametrize("shape", [(8, 6), (64, 64)])
def test_auto_backend_is_flint_on_every_row_at_small_sizes_too(shape):
    A = stochastic(*shape, seed=3)
    U, W = tsvd(A, 3)
    e = fsum_error(A, U, W)
    rep = check(A, UpperWitness(e * 1.01 + 1e-12, U, W))
    assert rep.ok and rep.interval.backend == "flint" and rep.interval.rows_checked == "all"


def test_the_two_backends_enclose_the_same_row_error():
    # each condition is written once for both libraries: the bound each reports on the max
    # row error of one witness agrees to far below float64's resolution of it
    A = stochastic(12, 10, seed=4)
    U, W = tsvd(A, 4)
    e = fsum_error(A, U, W)
    a = check_interval(A, UpperWitness(e * 1.01, U, W), backend="flint", max_rows=None)
    b = check_interval(A, UpperWitness(e * 1.01, U, W), backend="mpmath", max_rows=None)
    va, vb = (float(r.detail.rsplit(" ", 1)[1]) for r in (a, b))
    assert a.ok and b.ok and abs(va - vb) <= 4 * np.spacing(e) and abs(va - e) <= 1e-12


def test_auto_backend_on_a_larger_operator_samples_rows_or_uses_flint():
    A = stochastic(80, 70, seed=2)
    U, W = tsvd(A, 60)
    e = fsum_error(A, U, W)
    rep = check(A, UpperWitness(e * 1.01 + 1e-12, U, W))
    assert rep.ok, rep.summary()
    assert rep.interval.backend == "flint"
    rep2 = check(A, UpperWitness(e * 0.9, U, W))
    assert not rep2.ok and not rep2.disagree


# --------------------------------------------------------------------------- file format


def _roundtrip_cases():
    A = stochastic(6, 7, seed=9, conc=0.4)
    U, W = tsvd(A, 3)
    e = float(exact_upper_error(A, U, W))
    return [
        (A, UpperWitness(e * 1.01, U, W, "truncated-svd")),
        (A, TrivialCertificate(0.5)),
        (I8, FrobeniusCertificate(0.3, np.arange(8), 7)),
        (I8, KeyGroupCertificate(0.5, [3, 1, 5], ([3, 4], [1], [5, 6, 7]), "kg")),
        (I8, DecodedInverseCertificate(0.5, I8[:3], I8[:, :3], "dec")),
    ]


@pytest.mark.parametrize("case", _roundtrip_cases(), ids=lambda c: c[1].kind)
def test_save_load_roundtrip(tmp_path, case):
    A, cert = case
    assert check(A, cert).ok
    p = save_certificate(tmp_path / "sub" / "c.npz", cert, A, producer="tests")
    assert p.exists()
    assert not list(tmp_path.rglob("*.tmp.npz"))
    # plain numpy can read it without pickles
    with np.load(p, allow_pickle=False) as z:
        header = json.loads(str(z["header"][()]))
        np.testing.assert_array_equal(z["A"], A)
    assert header["kind"] == cert.kind and header["rank"] == cert.rank
    assert header["eps"] == cert.eps and header["shape"] == list(A.shape)
    assert header["producer"] == "tests"
    assert header["operator_hash"] == matrix_hash(A)
    c2, A2, h2 = load_certificate(p)
    assert h2 == header
    np.testing.assert_array_equal(A2, A)
    assert (c2.kind, c2.rank, c2.eps, c2.method) == (cert.kind, cert.rank, cert.eps, cert.method)
    for k, v in cert.arrays().items():
        np.testing.assert_array_equal(c2.arrays()[k], v)
    if cert.kind == "key-groups":
        assert [g.tolist() for g in c2.groups] == [[3, 4], [1], [5, 6, 7]]
    assert check(A2, c2).ok


def test_matrix_hash_changes_with_content_and_shape():
    a = np.full((2, 3), 1 / 3)
    b = a.copy()
    b[0, 0] = np.nextafter(b[0, 0], 1)
    assert matrix_hash(a) != matrix_hash(b)
    assert matrix_hash(a) != matrix_hash(a.reshape(3, 2))
    assert matrix_hash(a) == matrix_hash(a.copy(order="F"))


def _rewrite(path, **changes):
    with np.load(path, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    header = json.loads(str(data["header"][()]))
    for k, v in changes.items():
        if k.startswith("h_") and "header" in data:
            header[k[2:]] = v
        elif v is None:
            data.pop(k)
        else:
            data[k] = v
    if "header" in data:
        data["header"] = np.array(json.dumps(header))
    np.savez(path, **data)


@pytest.mark.parametrize(
    "changes",
    [
        dict(h_rank=4),
        dict(h_rank=2),
        dict(h_kind="sorcery"),
        dict(U=None),
        dict(header=None),
        dict(A=None),
    ],
    ids=["rank-high", "rank-low", "unknown-kind", "missing-U", "missing-header", "missing-A"],
)
def test_load_rejects_inconsistent_files(tmp_path, changes):
    A = stochastic(6, 7, seed=9)
    U, W = tsvd(A, 3)
    p = save_certificate(tmp_path / "c.npz", UpperWitness(0.5, U, W), A)
    _rewrite(p, **changes)
    with pytest.raises(MalformedCertificate):
        load_certificate(p)


def test_load_rejects_group_sizes_mismatch(tmp_path):
    p = save_certificate(tmp_path / "k.npz",
                         KeyGroupCertificate(0.5, [0, 1], ([0], [1, 2])), I8)
    _rewrite(p, group_sizes=np.array([1, 5]))
    with pytest.raises(MalformedCertificate):
        load_certificate(p)


def test_load_rejects_pickled_and_garbage_files(tmp_path):
    # an object array needs pickle: must not load with allow_pickle=False
    p = tmp_path / "pickled.npz"
    np.savez(p, header=np.array(json.dumps({"kind": "trivial", "eps": 0.5, "rank": 1})),
             A=np.array([object()], dtype=object))
    with pytest.raises(MalformedCertificate):
        load_certificate(p)
    g = tmp_path / "garbage.npz"
    g.write_bytes(b"not a zip file")
    with pytest.raises(MalformedCertificate):
        load_certificate(g)
    with pytest.raises(MalformedCertificate):
        load_certificate(tmp_path / "missing.npz")
    bad = tmp_path / "badjson.npz"
    np.savez(bad, header=np.array("{not json"), A=I8)
    with pytest.raises(MalformedCertificate):
        load_certificate(bad)


def test_loaded_certificate_is_rechecked_against_its_A(tmp_path):
    # a file whose certificate is false for the stored A loads fine but fails the check
    p = save_certificate(tmp_path / "k.npz", KeyGroupCertificate(0.5, [0, 1], ([0], [1])),
                         np.full((2, 2), 0.5))
    c, A, _ = load_certificate(p)
    assert not check(A, c).ok


@pytest.mark.parametrize("backend", ["mpmath", "flint", "midrad"])
def test_interval_check_restores_the_callers_precision(backend):
    """mpmath's iv and flint's ctx are process-wide: a check must leave them as it found them
    (on success, on failure and on a malformed certificate)."""
    import flint
    from mpmath import iv

    from softrank.checker.interval import PREC, check_interval

    A = np.full((3, 3), 1 / 3)
    good = UpperWitness(0.5, np.full((3, 1), 1.0), np.full((1, 3), 1 / 3))
    bad = UpperWitness(1e-20, np.full((3, 1), 1.0), np.zeros((1, 3)))
    old_iv, old_flint = iv.prec, flint.ctx.prec
    try:
        iv.prec, flint.ctx.prec = 30, 40
        assert PREC not in (30, 40)
        assert check_interval(A, good, backend=backend).ok
        assert not check_interval(A, bad, backend=backend).ok
        assert (iv.prec, flint.ctx.prec) == (30, 40)
    finally:
        iv.prec, flint.ctx.prec = old_iv, old_flint

"""Validated input (softrank.checker.validated; docs/theory/checker.md#validated-input): the
enclosure of the exact softmax of float64 factors, and brackets certified for that exact
matrix (``bracket(..., validated=True)``, ``softrank audit --validated``).

The exact softmax is computed independently here: the logits ``beta q_i . k_j`` of float64
data are exact rationals (:class:`fractions.Fraction`), and mpmath evaluates the
exponentials and the normalisation at 60 significant digits, far below every difference
the tests compare (the enclosure works at 106 bits in python-flint).
"""

from __future__ import annotations

import csv
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from softrank import Operator, bracket
from softrank.checker import check
from softrank.checker.validated import enclose_softmax
from softrank.errors import InvalidArgumentError


def exact_softmax(Q, K, beta) -> list[list[mpmath.mpf]]:
    """``softmax_rows(beta Q K^T)`` of the float64 data, each entry to 60 digits."""
    with mpmath.workdps(60):
        rows = []
        for q in np.asarray(Q, dtype=np.float64):
            logits = [Fraction(float(beta)) * sum(Fraction(float(a)) * Fraction(float(b))
                                                  for a, b in zip(q, k))
                      for k in np.asarray(K, dtype=np.float64)]
            top = max(logits)
            e = [mpmath.exp(mpmath.mpf(x.numerator) / x.denominator
                            - mpmath.mpf(top.numerator) / top.denominator) for x in logits]
            tot = mpmath.fsum(e)
            rows.append([x / tot for x in e])
        return rows


def row_l1_distance(exact, A) -> mpmath.mpf:
    """``max_i sum_j |exact_ij - A_ij|`` at 60 digits."""
    with mpmath.workdps(60):
        return max(mpmath.fsum(abs(x - mpmath.mpf(float(a))) for x, a in zip(row, arow))
                   for row, arow in zip(exact, A))


def test_uniform_rows_hand_worked():
    """Q = 0: every logit is 0 and every row of the exact softmax is 1/N. For N = 3 the
    midpoint is the double nearest 1/3 and rho covers the three roundings (3 |1/3 - fl(1/3)|
    = 2^-54 exactly); for N = 4 everything is exact and rho is a couple of subnormals."""
    A_mid, rho = enclose_softmax(np.zeros((2, 2)), np.ones((3, 2)), 1.0)
    assert A_mid.shape == (2, 3) and (A_mid == 1 / 3).all()
    deviation = 3 * abs(Fraction(1, 3) - Fraction(1 / 3))
    assert deviation == Fraction(1, 2 ** 54)
    assert Fraction(rho) >= deviation and rho < 1e-15
    A_mid, rho = enclose_softmax(np.zeros((1, 2)), np.ones((4, 2)), 2.0)
    assert (A_mid == 0.25).all() and 0 < rho < 1e-300


def test_two_keys_hand_worked():
    """One query, keys 0 and 1, beta = 1/2: the exact row is (1, e^{1/2}) / (1 + e^{1/2});
    the midpoint is within an ulp of it entrywise and rho covers the row's distance."""
    Q, K, beta = np.array([[1.0]]), np.array([[0.0], [1.0]]), 0.5
    A_mid, rho = enclose_softmax(Q, K, beta)
    with mpmath.workdps(60):
        r = mpmath.exp(mpmath.mpf(1) / 2)
        exact = [1 / (1 + r), r / (1 + r)]
        for a, x in zip(A_mid[0], exact):
            assert abs(mpmath.mpf(float(a)) - x) <= mpmath.mpf(np.spacing(a))
        dist = mpmath.fsum(abs(mpmath.mpf(float(a)) - x) for a, x in zip(A_mid[0], exact))
    assert dist <= rho <= 4 * np.spacing(1.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_enclosure_holds_the_exact_softmax(seed):
    rng = np.random.default_rng(seed)
    Q, K = rng.standard_normal((5, 4)), rng.standard_normal((7, 4))
    beta = 1.7
    A_mid, rho = enclose_softmax(Q, K, beta)
    assert row_l1_distance(exact_softmax(Q, K, beta), A_mid) <= rho < 1e-14


def _last_bits_operator():
    """Factors whose float64 softmax (Operator.from_factors) differs from the exact one in
    the last bits: the first seed where the two differ in some entry."""
    for seed in range(50):
        rng = np.random.default_rng(100 + seed)
        Q, K = 2 * rng.standard_normal((12, 6)), 2 * rng.standard_normal((12, 6))
        op = Operator.from_factors(Q, K, 0.5)
        A_mid, rho = enclose_softmax(Q, K, 0.5)
        if (op.A != A_mid).any():
            return op, A_mid, rho
    raise AssertionError("no seed in 50 where float64 softmax and the enclosure differ")


def test_float64_softmax_differs_from_the_exact_one_in_the_last_bits():
    op, A_mid, rho = _last_bits_operator()
    exact = exact_softmax(op.Q, op.K, op.beta)
    float64_error = row_l1_distance(exact, op.A)
    assert 0 < float64_error < 1e-14  # the float64 A is not the exact matrix
    assert row_l1_distance(exact, A_mid) <= rho < 1e-14  # the enclosure is
    assert np.abs(op.A - A_mid).max() < 1e-15


def test_a_validated_bracket_is_certified_for_every_matrix_of_the_enclosure():
    """The lower certificate holds for the midpoint at eps + rho and the upper witness at
    eps - rho (checked here again on the midpoint), so the bracket holds for the exact
    softmax; the float64 bracket carries eps itself."""
    op, A_mid, rho = _last_bits_operator()
    eps = 0.3
    (br,) = bracket(op, eps, validated=True)
    assert br.verdict in ("resolved", "open") and br.rho == rho > 0
    lower, upper = br.lower_certificate, br.upper_witness
    assert lower.eps == eps + rho and upper.eps == eps - rho
    assert check(A_mid, lower).ok and check(A_mid, upper).ok
    assert (lower.rank, upper.rank) == (br.lower, br.upper) and br.lower <= br.upper
    (plain,) = bracket(op, eps)
    assert plain.rho == 0.0 and plain.lower_certificate.eps == eps
    assert plain.upper_witness.eps == eps


def test_validated_needs_the_factors_and_a_tolerance_above_rho():
    A = np.full((3, 3), 1 / 3)
    with pytest.raises(InvalidArgumentError, match="^validated: needs the operator's factors"):
        bracket(Operator(A=A), 0.25, validated=True)
    op, _, rho = _last_bits_operator()
    with pytest.raises(InvalidArgumentError, match="does not exceed the enclosure radius"):
        bracket(op, rho / 2, validated=True)


def test_audit_validated_records_rho(tmp_path):
    """softrank audit --validated: the bracket column validated_rho holds the enclosure's
    radius of each operator with factors, empty for the one without."""
    from softrank.harness.cli import main

    A = np.full((4, 4), 0.25)
    np.save(tmp_path / "uniform.npy", A)
    (tmp_path / "panel.toml").write_text(
        "eps = [0.3]\n[[synthetic]]\nfamily = 'gaussian_head'\nm = 8\nN = 8\nseed = 0\n"
        "[[matrix]]\npath = 'uniform.npy'\nfamily = 'uniform'\n")
    out = tmp_path / "o"
    assert main(["audit", "--panel", str(tmp_path / "panel.toml"), "--out", str(out),
                 "--workers", "1", "--quiet", "--study-boot", "0", "--attacks", "none",
                 "--validated"]) == 0
    rows = {r["family"]: r for r in csv.DictReader(open(out / "brackets.csv"))}
    assert 0 < float(rows["gaussian"]["validated_rho"]) < 1e-12
    assert rows["uniform"]["validated_rho"] == ""
    assert rows["gaussian"]["verdict"] in ("resolved", "open")

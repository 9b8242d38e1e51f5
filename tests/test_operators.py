"""Operator validation and construction from factors (docs/theory/operators.md)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from softrank import Operator, softmax_rows
from softrank.errors import InvalidOperatorError, SoftrankError


def _ref_softmax(Q, K, beta):
    """Independent softmax of beta Q K^T: row by row, dot products one at a time."""
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    out = np.empty((Q.shape[0], K.shape[0]))
    for i in range(Q.shape[0]):
        logits = np.array([beta * float(np.dot(Q[i], K[j])) for j in range(K.shape[0])])
        z = np.exp(logits - logits.max())
        out[i] = z / z.sum()
    return out


def _stochastic(m=3, N=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((m, N)) + 0.1
    return X / X.sum(axis=1, keepdims=True)


GOOD = _stochastic()
Q0 = np.arange(6.0).reshape(3, 2) / 10
K0 = np.arange(8.0).reshape(4, 2) / 10


# ---------------------------------------------------------------------------- valid input


def test_valid_operator_is_read_only_float64_copy():
    src = GOOD.copy()
    op = Operator(A=src)
    assert op.shape == (3, 4)
    assert op.A.dtype == np.float64
    src[0, 0] = 5.0  # the operator holds its own copy
    assert op.A[0, 0] == GOOD[0, 0]
    with pytest.raises(ValueError):
        op.A[0, 0] = 0.0


def test_integer_identity_is_accepted_as_float():
    op = Operator(A=np.eye(3, dtype=int))
    np.testing.assert_array_equal(op.A, np.eye(3))


def test_row_sum_within_tolerance_is_accepted_not_repaired():
    A = np.full((2, 4), 0.25)
    A[0, 0] += 1e-12  # row 0 sums to 1 + 1e-12: inside the stated 1e-9 tolerance
    op = Operator(A=A)
    assert op.A[0, 0] == 0.25 + 1e-12  # kept as given, not renormalised


def test_hash_depends_on_content_and_shape():
    a = Operator(A=np.full((2, 2), 0.5))
    b = Operator(A=np.full((2, 2), 0.5))
    c = Operator(A=np.array([[0.5, 0.5], [0.25, 0.75]]))
    d = Operator(A=np.full((1, 4), 0.25))
    assert a.hash == b.hash
    assert len({a.hash, c.hash, d.hash}) == 3


# ------------------------------------------------------------------------------- bad input


def _bad(kind):
    A = GOOD.copy()
    if kind == "nan":
        A[1, 2] = np.nan
    elif kind == "inf":
        A[2, 1] = np.inf
    elif kind == "neg":
        A[0, 1] = -0.01
        A[0, 0] += 0.01  # row still sums to 1: only the sign is wrong
    elif kind == "rowsum":
        A[1, 3] += 1e-6
    return A


@pytest.mark.parametrize(
    "A, needles",
    [
        (_bad("nan"), ["A:", "A[1, 2]", "nan"]),
        (_bad("inf"), ["A:", "A[2, 1]", "inf"]),
        (_bad("neg"), ["A:", "A[0, 1]", "-0.01"]),
        (_bad("rowsum"), ["A:", "row 1", "1.000001"]),
        (np.array([]), ["A:", "1-D"]),
        (np.zeros((0, 3)), ["A:", "(0, 3)"]),
        (np.array([0.5, 0.5]), ["A:", "1-D"]),
        (np.full((2, 2, 2), 0.5), ["A:", "3-D"]),
        (np.array([["a", "b"]]), ["A:", "dtype"]),
    ],
    ids=["nan", "inf", "negative", "rowsum-1e-6", "empty", "empty-2d", "1d", "3d", "strings"],
)
def test_bad_A_rejected_naming_field_and_value(A, needles):
    with pytest.raises(InvalidOperatorError) as ei:
        Operator(A=A)
    msg = str(ei.value)
    for s in needles:
        assert s in msg, (s, msg)


def test_invalid_operator_error_is_a_softrank_value_error():
    with pytest.raises(SoftrankError):
        Operator(A=_bad("nan"))
    with pytest.raises(ValueError):
        Operator(A=_bad("nan"))


def test_row_sum_off_in_one_row_only_is_named():
    A = np.full((4, 2), 0.5)
    A[3, 0] = 0.5 - 2e-9
    with pytest.raises(InvalidOperatorError, match=r"A:.*row 3"):
        Operator(A=A)


@pytest.mark.parametrize(
    "kwargs, needles",
    [
        (dict(Q=Q0), ["Q, K", "K is None"]),
        (dict(K=K0, beta=1.0), ["Q, K", "Q is None"]),
        (dict(Q=Q0[:2], K=K0, beta=1.0), ["Q:", "3 rows", "(2, 2)"]),
        (dict(Q=Q0, K=K0[:3], beta=1.0), ["K:", "4 rows", "(3, 2)"]),
        (dict(Q=Q0, K=np.ones((4, 3)), beta=1.0), ["Q, K", "(4, 3)"]),
        (dict(Q=Q0, K=np.ones(4), beta=1.0), ["K:", "1-D"]),
        (dict(Q=np.full((3, 2), np.nan), K=K0, beta=1.0), ["Q:", "nan"]),
        (dict(Q=Q0, K=K0), ["beta:", "None"]),
        (dict(Q=Q0, K=K0, beta=float("nan")), ["beta:", "nan"]),
        (dict(Q=Q0, K=K0, beta=float("inf")), ["beta:", "inf"]),
        (dict(Q=Q0, K=K0, beta=0.0), ["beta:", "0.0"]),
        (dict(Q=Q0, K=K0, beta=-2.0), ["beta:", "-2.0"]),
        (dict(Q=Q0, K=K0, beta="abc"), ["beta:", "'abc'"]),
    ],
    ids=["Q-without-K", "K-without-Q", "Q-rows", "K-rows", "K-dims", "K-1d", "Q-nan",
         "beta-missing", "beta-nan", "beta-inf", "beta-zero", "beta-negative", "beta-str"],
)
def test_bad_factors_rejected_naming_field(kwargs, needles):
    with pytest.raises(InvalidOperatorError) as ei:
        Operator(A=GOOD, **kwargs)
    msg = str(ei.value)
    for s in needles:
        assert s in msg, (s, msg)


@pytest.mark.parametrize(
    "Q, K, beta, needles",
    [
        (Q0, K0, float("nan"), ["beta:", "nan"]),
        (Q0, K0, -1.0, ["beta:", "-1.0"]),
        (Q0, K0, 0, ["beta:"]),
        (Q0, np.ones((4, 3)), 1.0, ["Q, K"]),
        (np.array([[np.inf, 0.0]]), K0, 1.0, ["Q:", "inf"]),
        (Q0, np.zeros((0, 2)), 1.0, ["K:"]),
        (Q0.ravel(), K0, 1.0, ["Q:", "1-D"]),
    ],
    ids=["beta-nan", "beta-neg", "beta-zero", "dims", "Q-inf", "K-empty", "Q-1d"],
)
def test_from_factors_bad_input(Q, K, beta, needles):
    with pytest.raises(InvalidOperatorError) as ei:
        Operator.from_factors(Q, K, beta)
    for s in needles:
        assert s in str(ei.value), (s, str(ei.value))


# ------------------------------------------------------------------------------ factors


def test_from_factors_matches_independent_softmax():
    rng = np.random.default_rng(7)
    Q = rng.standard_normal((9, 5))
    K = rng.standard_normal((13, 5))
    beta = 1.7
    op = Operator.from_factors(Q, K, beta, family="test", seed=7)
    ref = _ref_softmax(Q, K, beta)
    assert np.abs(op.A - ref).max() <= 1e-14
    assert op.beta == beta
    np.testing.assert_array_equal(op.Q, Q)
    np.testing.assert_array_equal(op.K, K)
    assert op.family == "test" and op.seed == 7


def test_from_factors_large_logits_no_overflow():
    # logits up to 1e4: a softmax without the row-max shift overflows to inf / nan.
    Q = np.array([[100.0, 0.0], [0.0, 100.0]])
    K = np.array([[1.0, 0.0], [0.0, 1.0], [0.99, 0.0]])
    op = Operator.from_factors(Q, K, 1.0)
    # row 0: logits 100, 0, 99 -> weights proportional to 1, e^-100, e^-1
    w = np.array([1.0, np.exp(-100.0), np.exp(-1.0)])
    np.testing.assert_allclose(op.A[0], w / w.sum(), rtol=1e-14, atol=0)
    # row 1: logits 0, 100, 0 -> weights proportional to e^-100, 1, e^-100
    w = np.array([np.exp(-100.0), 1.0, np.exp(-100.0)])
    np.testing.assert_allclose(op.A[1], w / w.sum(), rtol=1e-14, atol=0)


def test_from_factors_uniform_when_logits_constant():
    Q = np.ones((2, 3))
    K = np.ones((5, 3))
    op = Operator.from_factors(Q, K, 4.0)
    np.testing.assert_array_equal(op.A, np.full((2, 5), 0.2))


@given(
    st.integers(1, 6), st.integers(1, 6), st.integers(1, 4), st.integers(0, 2**32 - 1),
    st.floats(0.01, 20.0),
)
def test_property_from_factors_equals_reference(m, N, d, seed, beta):
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((m, d))
    K = rng.standard_normal((N, d))
    op = Operator.from_factors(Q, K, beta)
    ref = _ref_softmax(Q, K, beta)
    assert np.abs(op.A - ref).max() <= 1e-14
    assert np.abs(op.A.sum(axis=1) - 1.0).max() <= 1e-14
    # the module-level helper agrees with the operator it built
    np.testing.assert_array_equal(softmax_rows(beta * (Q @ K.T)), op.A)


def test_gauge_transform_leaves_A_within_rounding():
    rng = np.random.default_rng(3)
    Q = rng.standard_normal((6, 3))
    K = rng.standard_normal((7, 3))
    S = np.diag([4.0, 0.5, 2.0])  # exact powers of two: Q S and K S^-T are exact
    a = Operator.from_factors(Q, K, 1.3).A
    b = Operator.from_factors(Q @ S, K @ np.linalg.inv(S).T, 1.3).A
    np.testing.assert_array_equal(a, b)


def test_provenance_is_json_ready_and_complete():
    import json

    op = Operator.from_factors(Q0, K0, 2.0, family="f", source="s", layer=1, head=2,
                               block="b", seed=3, meta={"x": 1})
    p = op.provenance()
    json.dumps(p)
    assert (p["m"], p["n"]) == (3, 4)
    assert p["family"] == "f" and p["layer"] == 1 and p["head"] == 2 and p["x"] == 1
    assert p["operator_id"].startswith("f-")

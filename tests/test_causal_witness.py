"""The causal witness (docs/theory/causal.md#upper-witnesses): ``||A - tril_M(U W)||_inf <=
eps`` checked in float64 with rounding bounds and in interval arithmetic, on hand-worked
matrices and planted causal instances; its file format."""

import numpy as np
import pytest

from softrank.checker import (CausalUpperWitness, MalformedCertificate, UpperWitness, check,
                              check_float64, check_interval, load_certificate,
                              save_certificate)
from softrank.operators import causal_mask


def _uniform_causal(n=3):
    M = causal_mask(n)
    return np.where(M, 1.0, 0.0) / M.sum(axis=1, keepdims=True), M


def test_a_hand_worked_causal_witness():
    """A = the causal uniform 3 x 3; U W = all 1/3 (rank 1). tril(U W) has rows
    [1/3,0,0], [1/3,1/3,0], [1/3,1/3,1/3]: row errors 2/3, 1/3, 0, so 2/3 in all; the same
    U W as a plain witness errs by 4/3 on row 0."""
    A, M = _uniform_causal()
    U, W = np.ones((3, 1)), np.full((1, 3), 1 / 3)
    assert check(A, CausalUpperWitness(0.67, U, W, M)).ok
    for backend in ("flint", "midrad", "mpmath"):
        assert check_interval(A, CausalUpperWitness(0.67, U, W, M), backend=backend).ok
        assert not check_interval(A, CausalUpperWitness(0.66, U, W, M), backend=backend).ok
    r = check_float64(A, CausalUpperWitness(0.67, U, W, M))
    assert r.ok and 0.0 < r.margin <= 0.67 - 2 / 3 + 1e-12
    assert not check(A, CausalUpperWitness(0.66, U, W, M)).ok
    assert not check(A, UpperWitness(0.67, U, W)).ok  # plain: 4/3
    # the mask decides: with every entry kept, the causal witness is the plain one
    assert not check(A, CausalUpperWitness(0.67, U, W, np.ones((3, 3), bool))).ok


@pytest.mark.parametrize("window", [None, 5])
def test_the_planted_factors_are_a_causal_witness(window):
    from softrank.generators.synthetic import _planted_causal_parts

    A, M, U, V = _planted_causal_parts(24, 3, 0.05, 4, window, 0.3)
    w = CausalUpperWitness(0.05 + 1e-9, 0.95 * U, V, M)
    rep = check(A, w)
    assert rep.ok and w.rank == 3
    assert not check(A, CausalUpperWitness(0.04, 0.95 * U, V, M)).ok
    assert not check(A, UpperWitness(0.05 + 1e-9, 0.95 * U, V)).ok  # the plain one fails


def test_malformed_causal_witnesses_are_rejected():
    A, M = _uniform_causal()
    U, W = np.ones((3, 1)), np.full((1, 3), 1 / 3)
    with pytest.raises(MalformedCertificate, match="keep: expected a 2-D boolean"):
        CausalUpperWitness(0.7, U, W, M.astype(int))
    bad = CausalUpperWitness(0.7, U, W, np.ones((3, 2), bool))
    rep = check(A, bad)
    assert not rep.ok
    nan = CausalUpperWitness(0.7, np.full((3, 1), np.nan), W, M)
    assert not check(A, nan).ok


def test_the_file_format_carries_the_mask(tmp_path):
    A, M = _uniform_causal()
    w = CausalUpperWitness(0.67, np.ones((3, 1)), np.full((1, 3), 1 / 3), M, method="by-hand")
    save_certificate(tmp_path / "w.npz", w, A)
    back, A2, header = load_certificate(tmp_path / "w.npz")
    assert isinstance(back, CausalUpperWitness) and header["kind"] == "causal-upper"
    assert np.array_equal(back.keep, M) and check(A2, back).ok and back.rank == 1

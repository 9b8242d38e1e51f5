"""Intrinsic descriptor (softrank.geometry.intrinsic_descriptor) and its rank correlation
with the brackets (softrank.studies.descriptor)."""

from __future__ import annotations

import numpy as np
import pytest

from softrank.errors import InvalidArgumentError
from softrank.generators import synthetic
from softrank.geometry import intrinsic_descriptor, kappa, kappa_upper
from softrank.operators import Operator
from softrank.studies.descriptor import descriptor_correlations, write_descriptor

SDP = pytest.mark.geometry("cvxpy", "clarabel")  # kappa by its SDP


def test_descriptor_of_a_one_dimensional_grid_is_hand_worked():
    # grid d = 1: C = beta (x - 1/2)(y - 1/2)^T exactly (rank 1), so T = C at r = 1 with
    # tau = 0 and kappa = beta max|x - 1/2| max|y - 1/2| = beta / 4
    op = synthetic.grid(1, n=16)
    d = intrinsic_descriptor(op, 0.25)
    assert d.r == 1 and d.tau < 1e-9
    assert d.kappa == pytest.approx(op.beta / 4, rel=1e-6)
    assert d.log_q == pytest.approx(0.5 * np.log1p(d.kappa / (0.25 - d.tau) ** 2))


@SDP
def test_descriptor_by_the_sdp_of_a_one_dimensional_grid_is_hand_worked():
    op = synthetic.grid(1, n=16)
    assert intrinsic_descriptor(op, 0.25, kappa_method="sdp").kappa == pytest.approx(
        op.beta / 4, rel=1e-5)


def test_descriptor_is_gauge_invariant():
    rng = np.random.default_rng(0)
    Q, K = rng.normal(size=(24, 6)), rng.normal(size=(30, 6))
    S = np.diag(16.0 ** np.linspace(0, 1, 6))
    a = intrinsic_descriptor(Operator.from_factors(Q, K, 0.7), 0.25)
    b = intrinsic_descriptor(Operator.from_factors(Q @ S, K @ np.linalg.inv(S).T, 0.7),
                             0.25)
    assert a.r == b.r
    assert a.tau == pytest.approx(b.tau, abs=1e-9)
    assert a.kappa == pytest.approx(b.kappa, rel=1e-4)


@SDP
def test_full_gauge_upper_bound_is_close_to_the_sdp():
    rng = np.random.default_rng(2)
    T = rng.normal(size=(40, 3)) @ rng.normal(size=(3, 30)) * rng.uniform(0.2, 3, size=(40, 1))
    k, ku = kappa(T), kappa_upper(T)
    assert k <= ku * (1 + 1e-6)
    assert ku <= k * 1.002


def _zero_row_T():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, 4)) * rng.uniform(0.2, 3, size=(30, 1))
    X[5] = 0.0  # an exactly zero row of T
    return X @ rng.normal(size=(20, 4)).T


_SCALES = (1e-170, 1e-5, 1e155)
_BAD_T = (np.array([[np.inf, 1.0], [1.0, 1.0]]), np.ones(3))


def test_kappa_upper_handles_zero_rows_and_extreme_scales():
    assert np.isfinite(kappa_upper(_zero_row_T()))
    D = np.diag([2.0, 1.0])  # kappa(diag(a, b)) = max(a, b), at any scale
    for scale in _SCALES:
        assert kappa_upper(D * scale) == pytest.approx(2 * scale, rel=1e-6)
    for bad in _BAD_T:
        with pytest.raises(InvalidArgumentError, match="T"):
            kappa_upper(bad)


@SDP
def test_kappa_sdp_handles_zero_rows_and_extreme_scales():
    T = _zero_row_T()
    k = kappa(T)
    assert k <= kappa_upper(T) <= k * 1.002
    D = np.diag([2.0, 1.0])
    for scale in _SCALES:
        assert kappa(D * scale) == pytest.approx(2 * scale, rel=1e-4)
    for bad in _BAD_T:
        with pytest.raises(InvalidArgumentError, match="T"):
            kappa(bad)


def test_descriptor_rejects_bad_arguments():
    op = synthetic.grid(1, n=8)
    for kw, name in (({"eps": 1.5}, "eps"), ({"eps": 0.2, "margin": 1.0}, "margin"),
                     ({"eps": 0.2, "kappa_method": "x"}, "kappa_method")):
        with pytest.raises(InvalidArgumentError, match=name):
            intrinsic_descriptor(op, **kw)


def _rows(sign=1, n=10):
    return [{"operator_id": f"op{i}", "family": "fam", "source": f"s{i % 5}",
             "checkpoint": "/ck", "n": 64, "eps": 0.25, "verdict": "open",
             "lower": 2 + i, "upper": 10 + 3 * i, "int_logq": sign * (1.0 + i),
             "int_kappa": 2.0 + i * i} for i in range(n)]


def test_rank_correlations_are_exact_on_monotone_rows(tmp_path):
    [c] = descriptor_correlations(_rows(), n_boot=200)
    assert c["group"] == "fam-w64" and c["operators"] == 10 and c["clusters"] == 5
    assert c["rho_logq_upper"] == pytest.approx(1.0)
    assert c["rho_kappa_upper"] == pytest.approx(1.0)
    assert (c["lo_logq_upper"], c["hi_logq_upper"]) == pytest.approx((1.0, 1.0))
    [d] = descriptor_correlations(_rows(sign=-1), n_boot=200)
    assert d["rho_logq_lower"] == pytest.approx(-1.0)
    paths = write_descriptor([c], _rows(), tmp_path)
    assert "+1.00 [+1.00, +1.00]" in (tmp_path / "descriptor.md").read_text()
    assert all(p.is_file() for p in paths)


def test_rank_correlation_needs_the_descriptor():
    rows = [{**r, "int_logq": ""} for r in _rows()]
    with pytest.raises(InvalidArgumentError, match="rows"):
        descriptor_correlations(rows)
    with pytest.raises(InvalidArgumentError, match="n_boot"):
        descriptor_correlations(_rows(), n_boot=10)

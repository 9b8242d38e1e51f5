"""Targeted rank-reduction attacks (softrank.attacks, docs/theory/attacks.md).

Expected outcomes are derived independently of the attack code:

* planted mixtures ``A = (1 - delta) W H + delta P`` have ``r_eps <= k`` for ``eps > delta``,
  so the claim ``r_eps >= k + 1`` is false and a confirmed rank-``k`` witness must be found;
* ``planted_blocks`` has ``r_eps = k`` exactly for ``2 delta <= eps < 1 - 2 delta`` (both ends
  re-established here with checked certificates), so the claim ``r_eps >= k`` is true and no
  attack may succeed; the key-group margin ``1 - 2 delta`` even bounds the error of every
  rank ``k - 1`` matrix from below, hence ``best_error``;
* for the identity ``I_k``: ``||I - B||_inf < 1`` would make ``B`` invertible (Neumann
  series), so every rank ``< k`` matrix has error ``>= 1``;
* rank 0 means ``B = 0``, whose error on a row-stochastic matrix is exactly 1;
* ``B = A`` has rank ``<= min(m, N)``.
"""

import json
import math
import re

import numpy as np
import pytest

import softrank
from softrank.attacks import EFFORTS, AttackResult, attack
from softrank.checker import KeyGroupCertificate, UpperWitness, check
from softrank.errors import InvalidArgumentError
from softrank.generators.synthetic import planted, planted_blocks


def _row_l1_error(A, U, W):
    return float(np.abs(A - U @ W).sum(axis=1).max())


# ------------------------------------------------------------------ refuting a false claim


@pytest.mark.parametrize("m, N, k, delta, eps, seed", [
    (12, 10, 3, 0.01, 0.10, 3),
    (16, 16, 4, 0.02, 0.15, 0),
    (10, 14, 2, 0.05, 0.25, 7),
])
def test_off_by_one_claim_on_planted_instance_is_refuted(m, N, k, delta, eps, seed):
    op = planted(m, N, k, delta, seed=seed)
    assert op.meta["planted_rank"] == k and op.meta["planted_eps"] == delta
    assert eps >= 5 * delta  # comfortably above the planting tolerance
    res = attack(op.A, eps, k + 1, effort="quick", seed=0)
    assert isinstance(res, AttackResult)
    assert res.claimed == k + 1 and res.target_rank == k and res.eps == eps
    assert res.succeeded is True
    w = res.witness
    assert isinstance(w, UpperWitness)
    assert w.rank <= k
    assert w.U.shape == (m, w.rank) and w.W.shape == (w.rank, N)
    assert w.eps == eps
    # re-check independently: the rigorous checker (float64 + intervals) and plain numpy
    rep = check(op.A, w)
    assert rep.ok, rep.summary()
    assert not rep.disagree
    assert _row_l1_error(op.A, w.U, w.W) <= eps
    assert res.best_error <= eps
    assert res.best_method and res.best_method in w.method
    assert res.failures == []


def test_claim_above_min_side_is_refuted_by_the_identity():
    op = planted(4, 6, 2, 0.1, seed=1)  # min(m, N) = 4
    for claimed in (5, 9):
        res = attack(op.A, 0.05, claimed)
        assert res.succeeded, res.to_dict()
        assert res.target_rank == claimed - 1
        assert res.witness.rank <= 4
        # B = A exactly: U W reproduces A entry for entry
        assert np.array_equal(res.witness.U @ res.witness.W, op.A)
        assert check(op.A, res.witness).ok
        assert res.best_error == 0.0
    # claimed = min(m, N) is not "above": the identity is not a rank-3 witness
    res = attack(op.A, 0.05, 4, effort="quick")
    assert res.target_rank == 3
    assert "identity" not in res.methods


def test_tall_claim_above_min_side_uses_rank_N():
    A = np.full((7, 3), 1.0 / 3.0)
    res = attack(A, 0.5, 4)
    assert res.succeeded and res.witness.rank == 3
    assert check(A, res.witness).ok


# ------------------------------------------------------------------ a true claim survives


@pytest.mark.parametrize("m, N, k, delta, eps", [
    (12, 12, 3, 0.02, 0.20),
    (16, 16, 4, 0.05, 0.30),
    (9, 12, 3, 0.0, 0.50),
])
def test_exact_rank_of_planted_blocks_is_not_refuted(m, N, k, delta, eps):
    op = planted_blocks(m, N, k, delta, seed=1)
    lo, hi = op.meta["exact_eps_range"]
    assert lo <= eps < hi
    # the exact value, from both sides, with checked certificates
    (br,) = softrank.bracket(op, eps)
    assert br.lower == k == br.upper
    assert check(op.A, br.lower_certificate).ok and check(op.A, br.upper_witness).ok
    res = attack(op.A, eps, k, upper_witness=br.upper_witness, effort="quick")
    assert res.succeeded is False and res.witness is None
    assert res.target_rank == k - 1
    # every rank k-1 matrix is at least the key-group margin 1 - 2 delta away
    assert res.best_error >= (1 - 2 * delta) * (1 - 1e-9)
    assert res.best_error > eps
    assert "witness-perturbation" in res.methods


def test_identity_full_rank_claim_survives_every_effort():
    A = planted_blocks(3, 3, 3, 0.0).A
    assert np.array_equal(A, np.eye(3))  # hand-checkable instance
    for effort in EFFORTS:
        res = attack(A, 0.9, 3, effort=effort)
        assert not res.succeeded
        # ||I - B||_inf < 1 would make B invertible: every rank-2 B has error >= 1
        assert res.best_error >= 1 - 1e-12


def test_rank_zero_target_fails_on_stochastic_matrix():
    op = planted(8, 8, 2, 0.1, seed=0)
    res = attack(op.A, 0.3, 1)
    assert res.target_rank == 0 and res.claimed == 1
    assert not res.succeeded and res.witness is None
    # B = 0: the error is max_i ||a_i||_1 = 1 for a row-stochastic matrix
    assert res.best_error == pytest.approx(1.0, abs=1e-12)
    assert res.best_method == "zero"


def test_rank_zero_target_succeeds_only_on_a_small_matrix():
    # not stochastic, but a valid array: ||A||_inf = 0.2 < eps, so B = 0 refutes r >= 1
    A = np.array([[0.1, 0.1], [0.05, 0.0]])
    res = attack(A, 0.25, 1)
    assert res.succeeded and res.witness.rank == 0
    assert res.best_error == pytest.approx(0.2, abs=1e-15)
    assert check(A, res.witness).ok


# ------------------------------------------------------------------ arguments


_A = planted(6, 6, 2, 0.05, seed=0).A


@pytest.mark.parametrize("kwargs, name", [
    ({"eps": 0}, "eps"),
    ({"eps": 1}, "eps"),
    ({"eps": 1.0}, "eps"),
    ({"eps": -1}, "eps"),
    ({"eps": float("nan")}, "eps"),
    ({"eps": float("inf")}, "eps"),
    ({"eps": "0.1"}, "eps"),
    ({"claimed": 0}, "claimed"),
    ({"claimed": -3}, "claimed"),
    ({"claimed": True}, "claimed"),
    ({"claimed": 1.5}, "claimed"),
    ({"claimed": "2"}, "claimed"),
    ({"effort": "nope"}, "effort"),
    ({"seed": -1}, "seed"),
    ({"seed": 1.5}, "seed"),
    ({"seed": True}, "seed"),
    ({"time_limit": 0}, "time_limit"),
    ({"time_limit": -1.0}, "time_limit"),
    ({"time_limit": float("nan")}, "time_limit"),
])
def test_bad_arguments_raise_naming_the_argument(kwargs, name):
    args = {"eps": 0.1, "claimed": 3}
    args.update(kwargs)
    eps, claimed = args.pop("eps"), args.pop("claimed")
    with pytest.raises(InvalidArgumentError) as ei:
        attack(_A, eps, claimed, **args)
    assert re.match(rf"{name}\b", str(ei.value)), str(ei.value)


@pytest.mark.parametrize("A", [np.ones(4) / 4, np.zeros((0, 3)), np.ones((2, 2, 2))])
def test_bad_matrix_raises_naming_A(A):
    with pytest.raises(InvalidArgumentError, match=r"^A\b"):
        attack(A, 0.1, 2)


def test_numpy_scalars_are_accepted():
    res = attack(_A, np.float64(0.5), np.int64(1), seed=np.int64(2))
    assert res.claimed == 1 and type(res.claimed) is int and type(res.eps) is float


# ------------------------------------------------------------------ determinism, output


def test_same_seed_same_result():
    op = planted_blocks(8, 8, 2, 0.05, seed=4)
    eps = 0.3
    r1 = attack(op.A, eps, 2, effort="quick", seed=11)
    r2 = attack(op.A, eps, 2, effort="quick", seed=11)
    assert not r1.succeeded and not r2.succeeded
    # random restarts ran (so the seed mattered) ...
    assert sum(m.startswith("alternating-l1[") for m in r1.methods) == EFFORTS["quick"]["starts"] + 1
    # ... and reproduce bit for bit
    assert r1.best_error == r2.best_error
    assert r1.best_method == r2.best_method
    assert r1.methods == r2.methods


def test_to_dict_is_json_serialisable():
    op = planted(8, 9, 2, 0.02, seed=5)
    ok = attack(op.A, 0.2, 3, effort="quick")
    bad = attack(op.A, 0.2, 1)
    assert ok.succeeded and not bad.succeeded
    for res in (ok, bad):
        text = json.dumps(res.to_dict(), allow_nan=False)
        back = json.loads(text)
        assert back["claimed"] == res.claimed and back["target_rank"] == res.claimed - 1
        assert back["succeeded"] is res.succeeded
        assert back["eps"] == 0.2
        assert math.isclose(back["best_error"], res.best_error)
        assert back["methods"] == res.methods
        assert back["seconds"] >= 0


def test_upper_witness_start_does_not_refute_a_true_claim():
    """Starting from a (full-rank) upper witness, the attack still cannot refute a claim
    that a hand-built key-group certificate proves."""
    op = planted_blocks(8, 8, 2, 0.05, seed=2)
    eps = 0.15
    # queries 0 and 4 put >= 1 - delta on their own key block, <= delta on the other:
    # margin >= 1 - 2 delta = 0.9 > eps
    cert = KeyGroupCertificate(eps, np.array([0, 4]), (np.arange(4), np.arange(4, 8)), "hand")
    assert check(op.A, cert).ok
    big = UpperWitness(eps, op.A.copy(), np.eye(8), "identity")
    res = attack(op.A, eps, cert, upper_witness=big, effort="quick")  # a certificate: its rank
    assert res.claimed == 2 and res.target_rank == 1
    assert not res.succeeded
    assert res.best_error >= (1 - 2 * 0.05) * (1 - 1e-9)


# ------------------------------------------------------------------------ the time limit


def test_a_time_limit_ends_the_attack_between_methods(monkeypatch):
    # a clock that jumps past the limit once the first method has run: only that method runs,
    # the result says it was cut short and it has not succeeded (the claim is true)
    import time as _time

    import softrank.attacks as at

    op = planted_blocks(8, 8, 2, 0.05, seed=4)
    full = attack(op.A, 0.3, 2, effort="quick", seed=11)
    assert not full.cut_short and len(full.methods) > 2
    t0 = _time.perf_counter()
    ran = []
    real = at.RankReductionAttack.attempt

    def attempt(self, method, fn):
        ran.append(method)
        return real(self, method, fn)

    monkeypatch.setattr(at.RankReductionAttack, "attempt", attempt)
    monkeypatch.setattr(at.time, "perf_counter", lambda: t0 + (100.0 if ran else 0.0))
    cut = attack(op.A, 0.3, 2, effort="quick", seed=11, time_limit=50.0)
    assert cut.cut_short and not cut.succeeded
    assert cut.methods == full.methods[:1] == ran
    assert cut.to_dict()["cut_short"] is True


def test_a_time_limit_never_stops_a_success_already_found():
    # an off-by-one claim is refuted by the first methods, well within a generous limit
    op = planted(8, 9, 2, 0.02, seed=5)
    res = attack(op.A, 0.2, 3, effort="quick", time_limit=600.0)
    assert res.succeeded and not res.cut_short

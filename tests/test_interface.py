"""The one certifier interface: extra methods in bracket(), credit and rejection, diagnostics,
the reference constructions on hand-worked operators, and the audit's Constructions section."""

import json

import numpy as np
import pytest

from softrank import Operator, bracket
from softrank.certifiers.interface import Context, Diagnostics
from softrank.certifiers.reference import (NystromLandmarks, PositiveRandomFeatures,
                                           SinksPlusRandomFeatures)
from softrank.certifiers.registry import CONSTRUCTIONS, LOWER_TESTS, REFERENCE, TRAITS, builtin
from softrank.checker import FrobeniusCertificate, check
from softrank.errors import InvalidArgumentError, SoftrankError


def _planted(m=40, N=40, k=3, delta=0.12, seed=0):
    """``A = (1 - delta) W H + delta P`` with Dirichlet rows: ``((1 - delta) W, H)`` is a
    rank-``k`` witness with error ``delta ||P - W H||_inf`` (docs/theory/families.md#planted)."""
    rng = np.random.default_rng(seed)
    W = rng.dirichlet(np.ones(k), size=m)
    H = rng.dirichlet(np.full(N, 0.3), size=k)
    P = rng.dirichlet(np.full(N, 0.3), size=m)
    A = (1 - delta) * W @ H + delta * P
    A /= A.sum(axis=1, keepdims=True)
    return A, (1 - delta) * W, H


class Oracle:
    """Knows the planted factors."""

    name = "oracle"

    def __init__(self, U, W):
        self.U, self.W = U, W

    def witness(self, operator, eps):
        return self.U, self.W


class Liar:
    """Claims rank 1 at every eps: the column means, which are not within eps."""

    name = "liar"

    def witness(self, operator, eps):
        A = operator.A
        return np.ones((A.shape[0], 1)), A.mean(axis=0, keepdims=True)


class OverClaimingLowerTest:
    """A Frobenius certificate claiming rank min(m, N): false for any eps where the
    identity... is not needed; the tail condition fails, so the checker refuses it."""

    name = "over-claim"

    def certify(self, operator, eps):
        m = operator.A.shape[0]
        return FrobeniusCertificate(eps, np.arange(m), min(operator.A.shape) - 1, self.name)


class Raises:
    name = "raises"

    def witness(self, operator, eps):
        raise RuntimeError("boom")


def test_a_third_party_witness_that_beats_the_built_ins_is_reported_and_credited():
    # a 12 x 12 Gaussian head at eps 0.25: the built-ins bracket [3, 5] (5 by the late
    # alternating-l1-smooth; [3, 6] without it); the targeted attack machinery (a much
    # heavier search) finds a rank-4 witness, which a third-party construction returns
    from softrank.attacks import attack
    from softrank.generators.synthetic import gaussian_head

    op = gaussian_head(12, 12, 8, 1.0, seed=1)
    (base,) = bracket(op, 0.25)
    assert (base.lower, base.upper) == (3, 5)
    found = attack(op.A, 0.25, base.upper, effort="standard")
    assert found.succeeded and found.witness.rank == 4
    (br,) = bracket(op, 0.25, constructions=[Oracle(found.witness.U, found.witness.W)])
    assert (br.upper, br.upper_method) == (4, "oracle")
    assert check(op.A, br.upper_witness).ok
    rec = br.diagnostics.record("oracle")
    assert (rec.status, rec.rank, rec.origin) == ("ok", 4, "third-party")
    assert br.lower == base.lower
    # at equal rank an (early) built-in keeps the credit; the late searches look only
    # below the best witness so far, so they never tie with it
    op = gaussian_head(12, 12, 8, 1.0, seed=0)
    (base,) = bracket(op, 0.25)
    assert (base.upper, base.upper_method) == (5, "alternating-l1")
    (br,) = bracket(op, 0.25, constructions=[Oracle(base.upper_witness.U, base.upper_witness.W)])
    assert br.upper_method == base.upper_method


def test_a_wrong_witness_is_rejected_counted_and_never_reported():
    A, _, _ = _planted(seed=1)
    (base,) = bracket(A, 0.2)
    (br,) = bracket(A, 0.2, constructions=[Liar])  # a class is instantiated
    rec = br.diagnostics.record("liar")
    assert (rec.status, rec.rank) == ("rejected", 1)
    assert br.upper_method != "liar" and (br.lower, br.upper) == (base.lower, base.upper)
    assert br.diagnostics.rejected == ["liar"]


def test_a_wrong_certificate_is_rejected_and_a_raising_method_only_fails():
    A, _, _ = _planted(seed=2)
    (br,) = bracket(A, 0.3, lower_tests=[OverClaimingLowerTest()], constructions=[Raises()])
    assert br.diagnostics.record("over-claim").status == "rejected"
    assert br.lower_method != "over-claim" and br.verdict in ("open", "resolved")
    rec = br.diagnostics.record("raises")
    assert rec.status == "failed" and "boom" in rec.message
    assert br.diagnostics.failures == [f"raises: {rec.message}"]


def test_extra_methods_are_named_uniquely_and_follow_their_protocol():
    A, U, W = _planted()
    dup = Oracle(U, W)
    dup.name = "truncated-svd"
    with pytest.raises(InvalidArgumentError, match="truncated-svd"):
        bracket(A, 0.3, constructions=[dup])
    with pytest.raises(InvalidArgumentError, match="certify"):
        bracket(A, 0.3, lower_tests=[Oracle(U, W)])
    with pytest.raises(InvalidArgumentError, match="constructions"):
        bracket(A, 0.3, constructions=Oracle(U, W))
    with pytest.raises(InvalidArgumentError, match="MODULE:OBJECT"):
        bracket(A, 0.3, constructions=["no colon"])


def test_a_string_spec_loads_like_the_plugin():
    A, _, _ = _planted()
    (br,) = bracket(A, 0.3, constructions=["examples.my_construction:MyConstruction"])
    rec = br.diagnostics.record("my-construction")
    tsvd = br.diagnostics.record("truncated-svd")
    assert rec.status == "ok" and rec.rank == tsvd.rank  # both are the least SVD rank


def test_diagnostics_record_every_method_and_round_trip():
    A, _, _ = _planted(seed=3)
    (br,) = bracket(A, 0.25)
    names = [r.name for r in br.diagnostics.methods]
    # the run order: lower tests, constructions, reference constructions, then the late
    # searches (lower, upper) that every earlier method runs without
    early = [n for n in LOWER_TESTS if not TRAITS[n].late]
    early += [n for n in CONSTRUCTIONS if not TRAITS[n].late]
    late = [n for n in LOWER_TESTS if TRAITS[n].late]
    late += [n for n in CONSTRUCTIONS if TRAITS[n].late]
    assert late == ["subspace-rows", "subspace-climb", "subspace-blocks", "trust-region",
                    "alternating-l1-smooth",
                    "alternating-l1-anneal"]
    assert names == early + list(REFERENCE) + late
    assert {r.status for r in br.diagnostics.methods} <= {"ok", "declined", "skipped",
                                                           "failed", "rejected"}
    # no factors: the reference constructions decline
    assert all(br.diagnostics.record(n).status == "declined" for n in REFERENCE)
    d = br.to_dict()["diagnostics"]
    assert Diagnostics.from_dict(json.loads(json.dumps(d))).to_dict() == d
    assert br.verdict in ("resolved", "open")


def test_the_reported_ends_are_the_best_checked_answers():
    A, _, _ = _planted(seed=4)
    for br in bracket(A, [0.1, 0.3]):
        ups = br.diagnostics.ranks("upper")
        los = br.diagnostics.ranks("lower")
        carried = br.diagnostics.carried
        assert br.upper == min(ups.values()) or "upper" in carried
        assert br.lower == max(los.values()) or "lower" in carried


# ------------------------------------------------------------- reference constructions

def _op(Q, K, beta=1.0):
    return Operator.from_factors(np.asarray(Q, float), np.asarray(K, float), beta=beta)


def test_nystrom_is_exact_at_one_landmark_when_all_queries_coincide():
    # identical queries: every row of A is the same, F = ones (m, 1), the middle matrix is
    # [[1]] and W is that row, so U W = A exactly at k = 1 (hand-worked)
    rng = np.random.default_rng(0)
    q = rng.standard_normal(4)
    op = _op(np.tile(q, (9, 1)), rng.standard_normal((7, 4)), 0.8)
    w = NystromLandmarks().witness(op, 0.01)
    assert w.rank == 1 and check(op.A, w).ok
    assert np.abs(op.A - w.U @ w.W).max() < 1e-14


def test_random_features_and_sinks_are_exact_on_uniform_attention():
    # Q = K = 0: logits 0, A uniform; every positive feature equals 1, so one feature gives
    # the uniform rows exactly (rank 1); sinks + features: one sink exactly and one feature
    # for the rest, rank 2 (a sink alone leaves error 1 - 1/N)
    op = _op(np.zeros((6, 3)), np.zeros((5, 3)))
    w = PositiveRandomFeatures().witness(op, 0.01)
    assert w.rank == 1 and np.abs(op.A - w.U @ w.W).max() < 1e-15
    s = SinksPlusRandomFeatures().witness(op, 0.01)
    assert s.rank == 2 and check(op.A, s).ok


def test_random_features_estimate_the_softmax_kernel_without_bias():
    # E[phi(x).phi(y)] = exp(x.y) (Performer): with 20000 features the estimate of every
    # kernel entry is within a few per cent (entries here are exp(O(0.1)))
    from softrank.certifiers.reference import _Features

    rng = np.random.default_rng(1)
    Q, K = 0.3 * rng.standard_normal((5, 4)), 0.3 * rng.standard_normal((6, 4))
    f = _Features(Q, K, 1.0, 20000, seed=0)
    FQ, aq, FK, ak = f.scaled(20000, np.arange(6))
    est = (FQ @ FK.T) * np.exp(aq[:, None] + ak) / 20000
    assert np.abs(est / np.exp(Q @ K.T) - 1).max() < 0.05


def test_reference_constructions_decline_without_factors_and_are_seeded():
    A, _, _ = _planted()
    op = Operator(A=A)
    for c in REFERENCE.values():
        assert c.witness(op, 0.3) is None
    rng = np.random.default_rng(2)
    op = _op(rng.standard_normal((16, 4)), rng.standard_normal((16, 4)), 0.05)
    a, b = (PositiveRandomFeatures(seed=0).witness(op, 0.3) for _ in range(2))
    assert a.rank == b.rank and np.array_equal(a.U, b.U) and check(op.A, a).ok


def test_reference_constructions_share_work_across_tolerances_through_the_context():
    rng = np.random.default_rng(3)
    op = _op(rng.standard_normal((24, 6)), rng.standard_normal((24, 6)), 0.4)
    ctx = Context(op.A)
    c = NystromLandmarks()
    ks = [c.witness(op, e, ctx).rank for e in (0.5, 0.25, 0.1)]
    assert ks == sorted(ks)  # a least rank over one shared scan
    assert ks[-1] == NystromLandmarks().witness(op, 0.1).rank


def test_builtin_specs_cover_every_registry_entry():
    for name in list(CONSTRUCTIONS) + list(REFERENCE) + list(LOWER_TESTS):
        assert builtin(name).name == name
    with pytest.raises(InvalidArgumentError, match="unknown built-in"):
        builtin("nope")


# ------------------------------------------------------------- audit: --certifier

USER_MODULE = '''
import numpy as np

class Good:
    name = "good-svd"
    def witness(self, operator, eps, context=None):
        U, s, Vt = np.linalg.svd(operator.A, full_matrices=False)
        for k in range(1, len(s) + 1):
            B = (U[:, :k] * s[:k]) @ Vt[:k]
            if np.abs(operator.A - B).sum(axis=1).max() <= eps * (1 - 1e-9):
                return U[:, :k] * s[:k], Vt[:k]

class Bad:
    name = "bad-rank-one"
    def witness(self, operator, eps):
        A = operator.A
        return np.ones((A.shape[0], 1)), A.mean(axis=0, keepdims=True)
'''


def _panel(tmp_path, certifier_entry=""):
    from softrank.generators.synthetic import planted

    op = planted(24, 24, 3, 0.05, seed=0)
    np.save(tmp_path / "p.npy", op.A)
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "usercons.py").write_text(USER_MODULE)
    p = tmp_path / "panel.toml"
    p.write_text('eps = [0.2, 0.4]\n[[synthetic]]\nfamily = "sphere"\nd = 2\nbeta = 8.0\n'
                 'm = 20\nN = 20\nseed = 0\n[[matrix]]\npath = "p.npy"\n' + certifier_entry)
    return p


def test_audit_certifier_writes_the_constructions_section(tmp_path, monkeypatch):
    from softrank.harness.cli import main

    p = _panel(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "user"))
    out = tmp_path / "out"
    rc = main(["audit", "--panel", str(p), "--out", str(out), "--quiet", "--workers", "1",
               "--study-boot", "0", "--attacks", "none",
               "--certifier", "usercons:Good", "--certifier", "usercons:Bad"])
    assert rc == 0
    s = json.loads((out / "summary.json").read_text())
    good, bad = s["constructions"]["good-svd"], s["constructions"]["bad-rank-one"]
    assert (good["cells"], good["within_eps"], good["rejected"]) == (4, 4, 0)
    assert (bad["cells"], bad["within_eps"], bad["rejected"]) == (4, 0, 4)
    # good-svd is the truncated SVD: the same rank as the built-in one in every cell
    assert good["median_rank_over_best_upper"] == s["constructions"]["truncated-svd"][
        "median_rank_over_best_upper"]
    assert set(good) >= {"cells", "declined", "within_eps", "rejected", "median_rank_over_lower",
                         "median_rank_over_best_upper", "median_seconds"}
    assert {"nystrom", "random-features", "sinks+random-features"} <= set(s["constructions"])
    rep = (out / "report.md").read_text()
    assert "## Constructions" in rep and "| bad-rank-one | third-party | 4 |" in rep
    assert (out / "constructions.png").exists()
    import csv

    rows = list(csv.DictReader(open(out / "brackets.csv")))
    assert all(r["upper_method"] != "bad-rank-one" for r in rows)


def test_panel_certifier_entries(tmp_path, monkeypatch):
    from softrank.harness.panels import build_panel

    p = _panel(tmp_path, '[[certifier]]\nspec = "usercons:Good"\npath = "user"\n')
    panel = build_panel(str(p))
    assert panel.certifiers == ("usercons:Good",)
    assert panel.certifier_paths == (str((tmp_path / "user").resolve()),)
    for bad, msg in (('spec = "nocolon"', "MODULE:OBJECT"), ('spec = "a:B"\npath = "nope"',
                                                              "not a directory"),
                     ('spec = "a:B"\nwhat = 1', "unknown keys")):
        p.write_text(p.read_text().split("[[certifier]]")[0] + "[[certifier]]\n" + bad + "\n")
        with pytest.raises(SoftrankError, match=msg):
            build_panel(str(p))


def test_audit_refuses_builtin_and_clashing_certifiers(tmp_path, monkeypatch):
    from softrank.certifiers.registry import load_certifiers

    monkeypatch.syspath_prepend(str(_panel(tmp_path).parent / "user"))
    with pytest.raises(SoftrankError, match="built-in methods run in every audit"):
        load_certifiers(["builtin:nystrom"])
    with pytest.raises(SoftrankError, match="cannot import"):
        load_certifiers(["nosuchmodule_xyz:Thing"])
    (tmp_path / "user" / "clash.py").write_text("class X:\n    name = 'nystrom'\n"
                                                "    def witness(self, operator, eps):\n"
                                                "        return None\n")
    with pytest.raises(SoftrankError, match="built-in method's"):
        load_certifiers(["clash:X"])


def test_attacks_take_constructions_of_the_interface():
    # a claim r_eps >= 6 is refuted by a registered construction with a rank-5 witness
    from softrank.attacks import attack
    from softrank.generators.synthetic import gaussian_head

    op = gaussian_head(12, 12, 8, 1.0, seed=1)
    w = attack(op.A, 0.25, 6, effort="standard").witness
    res = attack(op.A, 0.25, 6, effort="quick", constructions=[Oracle(w.U, w.W)])
    assert res.succeeded and res.best_method == "construction:oracle"
    res = attack(op.A, 0.25, 3, effort="quick", constructions=[CONSTRUCTIONS["truncated-svd"]])
    assert not res.succeeded  # rank 3 is certified: nothing refutes it


def test_the_reported_ends_are_credited_to_their_methods():
    from softrank.generators.synthetic import gaussian_head

    for br in bracket(gaussian_head(16, 16, 8, 1.0, seed=0), [0.1, 0.25, 0.5]):
        rep = br.diagnostics.reported
        assert set(rep) == {"lower", "upper"}
        assert br.diagnostics.record(rep["upper"]).status == "ok"
        assert br.diagnostics.record(rep["lower"]).status == "ok"
        if "upper" not in br.diagnostics.carried:
            assert br.diagnostics.record(rep["upper"]).rank == br.upper


def test_late_searches_run_after_both_sides(monkeypatch):
    """A late search that takes the rest of the time limit costs no earlier method: the
    constructions ran before it (under the old order the upper side was skipped and fell
    back to the identity). The engine's clock is replaced by one that only the slow search
    moves, so the outcome does not depend on the machine's load."""
    import types

    from softrank.certifiers import bracket as bracket_mod
    from softrank.certifiers import registry

    A, _, _ = _planted(seed=3)
    slow = registry.LOWER_TESTS["subspace-rows"]
    real = type(slow).certify
    clock = [0.0]

    def sleepy(self, operator, eps, context=None):
        clock[0] += 1.0  # one second passes, past the 0.5 s limit
        return real(self, operator, eps, context)

    monkeypatch.setattr(bracket_mod, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(type(slow), "certify", sleepy)
    (br,) = bracket(A, 0.25, time_limit=0.5)
    assert br.diagnostics.record("truncated-svd").status == "ok"
    assert br.diagnostics.record("trust-region").status == "skipped"
    assert br.cut_short and br.upper < min(A.shape) and br.upper_method != "identity"


def test_traits_are_declared_once_in_the_registry():
    """Every built-in and reference method has its traits in registry.TRAITS, carried by its
    Certifier; the engine reads them there (bracket.py uses no attribute of the object), and
    a third-party method's only trait is its gauge_invariant claim."""
    from softrank.certifiers.interface import Traits, as_certifier
    from softrank.certifiers.registry import (
        CONSTRUCTIONS, LOWER_TESTS, REFERENCE, TRAITS, builtin, builtin_certifiers)

    assert set(TRAITS) == set(CONSTRUCTIONS) | set(LOWER_TESTS) | set(REFERENCE)
    for c in builtin_certifiers("all"):
        assert c.traits is TRAITS[c.name]
        assert builtin(c.name).traits is TRAITS[c.name]
    late = sorted(n for n, t in TRAITS.items() if t.late)
    assert late == sorted(["subspace-rows", "subspace-climb", "subspace-blocks", "trust-region",
                           "alternating-l1-smooth", "alternating-l1-anneal"])
    assert sorted(n for n, t in TRAITS.items() if t.always) == ["identity", "trivial"]
    # the reference constructions' declared claims are the ones their classes document
    assert all(TRAITS[n].gauge_invariant == c.gauge_invariant for n, c in REFERENCE.items())
    for name in ("late", "always", "searches"):  # no built-in object carries a trait itself
        assert not any(hasattr(o, name) for o in (*CONSTRUCTIONS.values(),
                                                  *LOWER_TESTS.values()))

    class Mine:
        name = "mine"
        late = True  # not honoured: the engine schedules only built-ins by traits
        gauge_invariant = True

        def witness(self, operator, eps):
            return None

    assert as_certifier(Mine()).traits == Traits(gauge_invariant=True)


def test_searches_stop_when_the_ends_meet():
    """An exactly rank-4 matrix: the identity-free ends meet at 4 before the late searches
    (a rank-4 witness with error 0, a rank-4 lower certificate), so every later search, lower
    or upper, is recorded as skipped with both ends and takes no time; on an open bracket
    none is skipped for that reason."""
    from softrank.generators import synthetic

    A = synthetic.planted(32, 32, 4, 0.0, seed=0).A
    assert np.linalg.matrix_rank(A) == 4
    (br,) = bracket(A, 0.25)
    assert (br.lower, br.upper) == (4, 4)
    for name in ("subspace-rows", "subspace-climb", "subspace-blocks", "trust-region",
                 "alternating-l1-smooth", "alternating-l1-anneal"):
        rec = br.diagnostics.record(name)
        assert (rec.status, rec.seconds) == ("skipped", 0.0), (name, rec)
        assert rec.message == "the ends cannot move: upper 4, lower 4", rec.message
    A2 = synthetic.gaussian_head(32, 32, 16, 2.0, seed=0).A
    (open_,) = bracket(A2, 0.1)
    assert open_.lower < open_.upper
    assert not any("ends cannot move" in (r.message or "") for r in open_.diagnostics.methods)

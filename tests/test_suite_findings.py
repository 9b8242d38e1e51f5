"""Regressions for defects the suites found in softrank itself, and the audit's attacks."""

import json

import numpy as np

from softrank import Operator
from softrank.certifiers.bracket import Bracket, bracket
from softrank.certifiers.upper import AlternatingL1
from softrank.checker import FrobeniusCertificate, check, load_certificate
from softrank.generators.synthetic import planted
from softrank.audit.attack_stage import AttackStage
from softrank.audit import OperatorCells
from softrank.harness.cli import main


def test_frobenius_interval_check_on_near_identity():
    # A ~ I (2 x 2): sigma_2 ~ 1, so r_eps >= 2 for eps = 1e-3 (tail 1 > 2 eps^2). The flint
    # check used to take the arb sqrt of a sum of squares whose ball straddled 0 (NaN) and
    # rejected a true certificate: the arithmetics disagreed.
    A = np.array([[1.0, 5.7e-30], [1.9e-31, 1.0]])
    A = A / A.sum(axis=1, keepdims=True)
    cert = FrobeniusCertificate(1e-3, np.array([0, 1]), 1)
    for backend in ("flint", "midrad", "mpmath"):
        from softrank.checker.interval import check_interval

        assert check_interval(A, cert, backend=backend).ok, backend
    rep = check(A, cert)
    assert rep.ok and not rep.disagree


def test_alternating_l1_keeps_its_scale():
    # found by test_construction_gauge: at rank 1 IRLS drifted to U -> 0, W -> 1e28 and the
    # LP polish (HiGHS) rejected W; W's rows are now kept at unit length
    rng = np.random.default_rng(763)
    Q, K = rng.standard_normal((2, 2)), rng.standard_normal((4, 2))
    op = Operator.from_factors(Q, K, 100 / np.sqrt(2))
    con = AlternatingL1(op.A, np.linalg.svd(op.A, full_matrices=False))
    for k in (1, 2):
        W = con.irls_basis(k)
        nrm = np.linalg.norm(W, axis=1)
        assert (nrm <= 1e6).all() and (nrm >= 1e-6).all(), nrm
        con.feasible(k, 0.01)  # does not raise


def test_brackets_are_monotone_in_eps_on_a_head():
    rng = np.random.default_rng(0)
    op = Operator.from_factors(rng.standard_normal((40, 8)), rng.standard_normal((40, 8)), 0.9)
    brs = bracket(op, [0.05, 0.1, 0.2, 0.4])
    for a, b in zip(brs, brs[1:]):
        assert a.lower >= b.lower and a.upper >= b.upper
    for b in brs:
        assert check(op.A, b.lower_certificate).ok and check(op.A, b.upper_witness).ok
        assert b.lower_certificate.eps == b.eps and b.upper_witness.eps == b.eps


def _offbyone_cell(tmp_path):
    # planted rank 3 at eps 0.1 (delta 0.02): a Frobenius "certificate" claiming r >= 4
    op = planted(24, 24, 3, 0.02, seed=1)
    fake = FrobeniusCertificate(0.1, np.arange(24), 3, "off-by-one")
    assert not check(op.A, fake).ok  # the checker alone already refuses it
    (br,) = bracket(op, 0.1)
    br = Bracket(eps=0.1, lower=4, upper=br.upper, lower_certificate=fake,
                 upper_witness=br.upper_witness, verdict="open")
    cells = OperatorCells(op, (0.1,), out=tmp_path)
    cells.publish("bracket", [br])
    (row,) = AttackStage(attacks="quick").run(cells)
    return op, br, row, cells


def test_audit_attack_refutes_an_unsound_lower_bound(tmp_path, capsys):
    op, br, row, cells = _offbyone_cell(tmp_path)
    assert row["attack"] == "SUCCEEDED" and "verdict" not in row  # the pipeline sets it
    (ref,) = cells.refutations(0)
    assert (ref.by, ref.claimed) == ("attack", 4) and ref.found <= 3
    assert br.verdict == "open"  # the bracket is left as the bracket stage made it
    d = tmp_path / "counterexamples" / f"{op.operator_id}-eps0.1"
    wit, A, header = load_certificate(d / "witness.npz")
    assert wit.rank <= 3 and check(A, wit).ok
    assert header["refutes"]["claimed"] == 4
    assert main(["verify", str(d)]) == 1
    out = capsys.readouterr().out
    assert "REFUTED" in out


def test_audit_records_attacks_in_summary(tmp_path):
    panel = tmp_path / "p.toml"
    panel.write_text('eps = [0.1, 0.25]\n[[synthetic]]\nfamily = "gaussian_head"\nm = 32\n'
                     'N = 32\nd = 16\ntemperature = 2.0\nseed = 0\n')
    out = tmp_path / "out"
    assert main(["audit", "--panel", str(panel), "--out", str(out), "--quiet",
                 "--workers", "1"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["attacks"]["tried"] >= 1 and s["attacks"]["succeeded"] == 0
    assert s["attacks"]["closest_best_error_over_eps"] > 1.0
    assert "targeted attacks" in (out / "report.md").read_text()
    assert main(["audit", "--panel", str(panel), "--out", str(tmp_path / "o2"), "--quiet",
                 "--workers", "1", "--attacks", "none"]) == 0
    s2 = json.loads((tmp_path / "o2" / "summary.json").read_text())
    assert s2["attacks"]["tried"] == 0

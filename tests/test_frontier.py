"""The rank-error frontier (softrank.certifiers.frontier, docs/theory/frontier.md): bands of
hand-worked matrices, the monotone searches on hand-worked certificates, consistency with the
brackets, planted instances, and the ``softrank frontier`` command."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from softrank.certifiers.frontier import frontier
from softrank.certifiers.tolerances import largest_eps, least_error
from softrank.checker import FrobeniusCertificate, KeyGroupCertificate, UpperWitness, check
from softrank.errors import InvalidArgumentError
from softrank.generators.synthetic import gaussian_head, planted
from softrank.harness.cli import main
from softrank.operators import Operator, causal_mask


def _mixed_blocks(delta: float, rows: int = 3, keys: int = 4) -> np.ndarray:
    """Two groups of ``rows`` queries: group ``g`` attends ``(1 - delta) u_g + delta w``,
    ``u_g`` uniform on block ``g`` of ``keys`` keys and ``w`` uniform on all ``2 keys``."""
    N = 2 * keys
    w = np.full(N, 1.0 / N)
    A = np.zeros((2 * rows, N))
    for g in range(2):
        u = np.zeros(N)
        u[g * keys:(g + 1) * keys] = 1.0 / keys
        A[g * rows:(g + 1) * rows] = (1 - delta) * u + delta * w
    return A


def test_two_mixed_blocks_band_is_the_hand_worked_frontier():
    """``e_1 = 1 - delta``: the key groups {block 0}, {block 1} with a query of each have
    margin ``(1 - delta + delta / 2) - delta / 2 = 1 - delta``, so ``e_1 > eps`` for every
    ``eps < 1 - delta``; the rank-1 matrix with every row ``w`` is within
    ``||(1 - delta)(u_g - w)||_1 = 1 - delta``. ``A`` has rank 2: ``e_k = 0`` for ``k >= 2``,
    where no certificate may stand. The band closes on those values."""
    delta = 0.3
    A = _mixed_blocks(delta)
    fr = frontier(A, ranks=(1, 4), eps=(0.25, 0.5))
    p1, p2, p3, p4 = fr.points
    assert p1.lower <= 1 - delta <= p1.upper
    assert p1.upper - p1.lower < 1e-9
    for p in (p2, p3, p4):
        assert p.upper <= 1e-12
        assert p.lower == 0.0 and p.lower_method == "" and p.lower_rank is None
    for br in fr.brackets:  # r_eps = 2 at both tolerances
        assert (br.lower, br.upper) == (2, 2)
    assert fr.unsound == []


def test_identical_blocks_stay_at_one_until_their_number():
    """Three blocks of identical rows (disjoint supports): ``e_1 = e_2 = 1`` (three key groups
    of margin 1 prove ``e_2 > eps`` for every ``eps < 1``, and ``B = 0`` is within 1) and
    ``e_3 = 0``."""
    A = np.kron(np.eye(3), np.full((2, 3), 1.0 / 3))
    fr = frontier(A, ranks=(1, 4), eps=())
    for p in fr.points[:2]:
        assert 1 - 1e-9 <= p.lower <= 1.0 <= p.upper <= 1 + 1e-9
    for p in fr.points[2:]:
        assert p.upper <= 1e-12 and p.lower == 0.0


def test_largest_eps_of_hand_worked_certificates():
    """Key groups of ``[[0.9, 0.1], [0.2, 0.8]]``: margins 0.8 and 0.6, valid for
    ``eps < 0.6``. The Frobenius tail of ``I_2`` at ``r = 1``: ``sigma_2^2 = 1 > 2 eps^2``,
    valid for ``eps < sqrt(1/2)``. Each answer is a tolerance the checker accepts, and the
    certificate at it is returned."""
    A = np.array([[0.9, 0.1], [0.2, 0.8]])
    e, c = largest_eps(A, KeyGroupCertificate(0.1, np.array([0, 1]),
                                              (np.array([0]), np.array([1]))))
    assert 0.6 - 1e-12 < e <= 0.6
    assert c.eps == e and check(A, c).ok
    assert not check(A, KeyGroupCertificate(0.6 + 1e-9, c.queries, c.groups)).ok
    e, c = largest_eps(np.eye(2), FrobeniusCertificate(0.1, np.array([0, 1]), 1))
    assert np.sqrt(0.5) - 1e-9 < e <= np.sqrt(0.5)
    assert check(np.eye(2), c).ok
    # rejected at its own tolerance: no answer
    assert largest_eps(A, KeyGroupCertificate(0.7, np.array([0, 1]),
                                              (np.array([0]), np.array([1])))) is None


def test_least_error_of_a_hand_worked_witness():
    """``U = [1, 1]^T``, ``W = [0.75, 0.25]`` against ``[[0.5, 0.5], [1, 0]]``: both rows are
    0.5 away in l1."""
    A = np.array([[0.5, 0.5], [1.0, 0.0]])
    e, w = least_error(A, UpperWitness(0.9, np.ones((2, 1)), np.array([[0.75, 0.25]])))
    assert 0.5 <= e <= 0.5 * (1 + 1e-12)
    assert w.eps == e and check(A, w).ok


def test_consistent_with_its_brackets_and_checked():
    """Where a bracket at ``eps`` is ``[L, U]``, the band has ``lower >= eps`` at ``L - 1`` and
    ``upper <= eps`` at ``U``; both edges are non-increasing, ``lower < upper``, and every
    end's certificate passes the checker at that end's value (both arithmetics)."""
    op = gaussian_head(m=20, N=20, seed=3)
    fr = frontier(op, ranks=(1, 12), eps=(0.1, 0.3))
    at = {p.rank: p for p in fr.points}
    for br in fr.brackets:
        if br.lower - 1 in at:
            assert at[br.lower - 1].lower >= br.eps
        if br.upper in at:
            assert at[br.upper].upper <= br.eps
    lo = [p.lower for p in fr.points]
    up = [p.upper for p in fr.points]
    assert lo == sorted(lo, reverse=True) and up == sorted(up, reverse=True)
    assert all(a < b for a, b in zip(lo, up))
    for p in fr.points:
        if p.lower_method:
            c = fr.certificates[p.lower_rank]
            assert c.eps == p.lower and c.rank >= p.rank + 1 and check(op.A, c).ok
        w = fr.witnesses[p.upper_rank]
        assert w.eps == p.upper and w.rank <= p.rank and check(op.A, w).ok
        # the checked error is the witness's error, to rounding
        err = np.abs(op.A - w.U @ w.W).sum(axis=1).max()
        assert err <= p.upper <= err * (1 + 1e-9) + 1e-15


@settings(max_examples=8, deadline=None)
@given(k=st.integers(1, 3), dm=st.integers(0, 6), dn=st.integers(0, 6),
       delta=st.sampled_from([0.0, 0.05, 0.2]), seed=st.integers(0, 2**31 - 1))
def test_planted_rank_is_never_excluded(k, dm, dn, delta, seed):
    """A planted instance has a rank-``k`` matrix within ``delta`` (to rounding), so
    ``e_k <= delta``: the band's lower end at ``k`` (``e_k > lower``) is below ``delta``, and
    with ``delta = 0`` no certificate stands at ``k``."""
    op = planted(k + dm + 1, k + dn + 1, k, delta, seed=seed)
    p = min(op.A.shape)
    fr = frontier(op, ranks=(1, p), eps=(), effort="fast")
    pk = fr.points[k - 1]
    assert pk.lower < delta + 1e-12
    if delta == 0.0:
        assert pk.lower_method == ""
    assert fr.unsound == []


@pytest.mark.parametrize("ranks, eps, effort", [
    ((0, 3), (0.25,), "full"), ((3, 2), (0.25,), "full"), ((1, 9), (0.25,), "full"),
    ((1,), (0.25,), "full"), ((1, 3), (1.5,), "full"), ((1, 3), (0.25,), "most"),
])
def test_bad_arguments_are_refused_before_any_work(ranks, eps, effort):
    with pytest.raises(InvalidArgumentError):
        frontier(np.full((8, 8), 1 / 8), ranks=ranks, eps=eps, effort=effort)


def _err(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    return err[-1] if err else ""


def test_cli_json_plot_and_refusals(tmp_path, capsys, monkeypatch):
    f = tmp_path / "mixed.npy"
    np.save(f, _mixed_blocks(0.3))
    monkeypatch.chdir(tmp_path)
    base = ["frontier", str(f), "--no-reference-store"]
    assert main(base + ["--ranks", "1:3", "--eps", "0.5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [d["rank"] for d in out] == [1, 2, 3]
    assert out[0]["lower"] <= 0.7 <= out[0]["upper"] and out[1]["upper"] <= 1e-12
    assert (tmp_path / "mixed-frontier.png").stat().st_size > 0  # the default plot
    # the plot is never replaced without --overwrite, before any work
    assert main(base + ["--ranks", "1:2", "--eps"]) == 2
    err = _err(capsys)
    assert err.startswith("softrank frontier: error: --plot:") and "exists" in err
    assert main(base + ["--ranks", "1:2", "--eps", "--overwrite"]) == 0
    text = capsys.readouterr().out
    assert "lower < e_k <= upper" in text
    row1 = next(ln for ln in text.splitlines() if ln.split()[:1] == ["1"])
    assert row1.split()[1:3] == ["0.7", "0.7"] and "(2)" in row1  # a rank-2 certificate
    assert main(base + ["--ranks", "1:2", "--eps", "--plot", str(tmp_path / "b.png")]) == 0
    assert (tmp_path / "b.png").exists()
    assert main(base + ["--ranks", "1:2", "--eps", "--plot", str(tmp_path / "b.txt")]) == 2
    assert main(base + ["--ranks", "1:9", "--no-plot"]) == 2
    assert "--ranks" in _err(capsys)


@pytest.mark.parametrize("bad", ["3", "0:2", "2:1", "a:b", "1:2:3"])
def test_cli_ranks_argument(bad, tmp_path, capsys):
    f = tmp_path / "a.npy"
    np.save(f, np.full((4, 4), 0.25))
    with pytest.raises(SystemExit) as exc:
        main(["frontier", str(f), "--ranks", bad])
    assert exc.value.code == 2
    assert "--ranks" in capsys.readouterr().err


# ------------------------------------------------------------- constructions on the curve
class _Truncation:
    """A construction offering the truncated SVD at every rank (its errors are the truncated
    SVD's, computed independently in the test)."""
    name = "my-truncation"

    def witness(self, operator, eps):
        return None

    def witness_at_rank(self, operator, k):
        U, s, Vt = np.linalg.svd(operator.A, full_matrices=False)
        return U[:, :k] * s[:k], Vt[:k]


class _TooWide:
    name = "too-wide"

    def witness(self, operator, eps):
        return None

    def witness_at_rank(self, operator, k):
        m, N = operator.A.shape
        return np.ones((m, k + 1)), np.ones((k + 1, N))


class _Raises:
    name = "raises"

    def witness(self, operator, eps):
        return None

    def witness_at_rank(self, operator, k):
        raise RuntimeError("boom")


def test_construction_curves_are_checked_errors_never_below_the_band():
    """A construction's curve is the checked error of its witness at each rank (here the
    truncated SVD, whose error the test computes itself); the reference constructions draw on
    an operator with factors; no curve lies at or below the lower edge; the witnesses join
    the upper ends, so the band's upper end is at most every curve."""
    op = gaussian_head(m=16, N=16, seed=5)
    fr = frontier(op, ranks=(1, 8), eps=(0.25,), constructions=[_Truncation()])
    names = [c.name for c in fr.curves]
    assert names[:2] == ["truncated-svd", "best built-in"] and "my-truncation" in names
    tsvd, best = fr.curves[0], fr.curves[1]
    for p in fr.points:  # softrank's best is at most its truncation, and the band's upper
        assert best.errors[p.rank] <= tsvd.errors[p.rank]  # end where one of its own won
        if p.upper_method not in ("my-truncation", "nystrom", "random-features",
                                  "sinks+random-features"):
            assert best.errors[p.rank] <= p.upper
    assert {"nystrom", "random-features", "sinks+random-features"} <= set(names)
    mine = next(c for c in fr.curves if c.name == "my-truncation")
    U, s, Vt = np.linalg.svd(op.A, full_matrices=False)
    for k in range(1, 9):
        err = np.abs(op.A - (U[:, :k] * s[:k]) @ Vt[:k]).sum(axis=1).max()
        assert err <= mine.errors[k] <= err * (1 + 1e-9) + 1e-15
    assert fr.below_band == []
    for c in fr.curves:
        for k, e in c.errors.items():
            assert fr.points[k - 1].upper <= e * (1 + 1e-9) + 1e-15
    d = fr.to_dicts()[0]
    assert set(d) >= {"rank", "lower", "upper", "constructions"}
    assert d["constructions"]["my-truncation"] == mine.errors[1]
    # without factors (a plain matrix) the reference constructions have no points
    fr2 = frontier(op.A, ranks=(1, 3), eps=())
    assert all(not c.errors for c in fr2.curves
               if c.name not in ("truncated-svd", "best built-in"))


def test_a_construction_that_breaks_the_protocol_gets_no_curve():
    op = gaussian_head(m=8, N=8, seed=1)
    fr = frontier(op, ranks=(1, 3), eps=(), constructions=[_TooWide(), _Raises()],
                  reference=False)
    wide, raises = fr.curves[2:]
    assert wide.errors == {} and "rank" in wide.failed
    assert raises.errors == {} and "boom" in raises.failed


def test_scores_hand_worked():
    """Band lower ends 0.5, 0.2, 0.1 at ranks 1, 2, 3. A curve with errors 1.0, 0.4, 0.1:
    error / lower = 2, 2, 1 (median 2); least ranks allowed at those errors: 0.4 is below
    0.5 (rank 1 excluded: e_1 > 0.5 > 0.4) and not below 0.2, so L(0.4) = 2; L(0.1) = 4
    (every lower end >= 0.1); 1.0 is ||A||_inf = e_0, no better than B = 0 (infinite):
    ratios inf, 2 / 2, 3 / 4, median 1."""
    from softrank.certifiers.frontier import FrontierPoint, excess_error, excess_rank

    pts = [FrontierPoint(1, 0.5, 0.9, "x"), FrontierPoint(2, 0.2, 0.8, "x"),
           FrontierPoint(3, 0.1, 0.7, "x")]
    errs = {1: 1.0, 2: 0.4, 3: 0.1}
    assert excess_error(pts, errs) == 2.0
    assert excess_rank(pts, errs, 1.0) == 1.0
    assert excess_rank(pts, {1: 0.6}, 1.0) == 1.0  # nothing excluded at 0.6: L = 1
    assert excess_error([FrontierPoint(1, 0.0, 0.9)], {1: 0.5}) is None
    assert excess_rank(pts, {}, 1.0) is None


def test_reference_witness_at_rank_has_that_rank():
    from softrank.certifiers.interface import as_certifier
    from softrank.certifiers.reference import (NystromLandmarks, PositiveRandomFeatures,
                                               SinksPlusRandomFeatures)

    op = gaussian_head(m=12, N=10, seed=2)
    for obj in (NystromLandmarks(), PositiveRandomFeatures(), SinksPlusRandomFeatures()):
        c = as_certifier(obj)
        assert c.offers_rank
        for k in (1, 3, 7):
            w = c.witness_at_rank(op, k)
            assert w is not None and w.rank <= k and w.U.shape[0] == 12 and w.W.shape[1] == 10
    assert as_certifier(NystromLandmarks()).witness_at_rank(op, 11) is None  # past min(m, N)


def test_cli_draws_a_users_construction(tmp_path, capsys, monkeypatch):
    op = gaussian_head(m=12, N=12, seed=4)
    f = tmp_path / "g.npz"
    np.savez(f, A=op.A, Q=op.Q, K=op.K, beta=op.beta)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mycurve.py").write_text(
        "import numpy as np\n"
        "class C:\n    name = 'my-curve'\n"
        "    def witness(self, operator, eps):\n        return None\n"
        "    def witness_at_rank(self, operator, k):\n"
        "        U, s, Vt = np.linalg.svd(operator.A, full_matrices=False)\n"
        "        return U[:, :k] * s[:k], Vt[:k]\n"
        "class NoRank:\n    name = 'no-rank'\n"
        "    def witness(self, operator, eps):\n        return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    base = ["frontier", str(f), "--no-reference-store", "--ranks", "1:4", "--eps", "0.3"]
    assert main(base + ["--certifier", "mycurve:C"]) == 0
    out = capsys.readouterr().out
    assert "my-curve: 4 ranks, excess error <=" in out and "nystrom: 4 ranks" in out
    assert (tmp_path / "g-frontier.png").exists()
    assert main(base + ["--certifier", "mycurve:NoRank", "--no-plot"]) == 2
    assert "witness_at_rank" in capsys.readouterr().err
    assert main(base + ["--json", "--no-plot", "--no-reference"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert list(rows[0]["constructions"]) == ["truncated-svd", "best built-in"]


def test_a_list_of_ranks_and_the_audits_brackets():
    """A list gives exactly those ranks, with the same ends as the whole range there (the
    ends at a rank do not depend on the other ranks asked for, but for the certificates
    of rank above it that they bring); brackets passed in are used, not computed again."""
    from softrank.certifiers.bracket import bracket

    A = _mixed_blocks(0.3)
    brs = bracket(A, [0.25, 0.5])
    fr = frontier(A, ranks=[3, 1], brackets=brs)
    assert [p.rank for p in fr.points] == [1, 3]
    assert fr.brackets == brs
    assert fr.points[0].lower <= 0.7 <= fr.points[0].upper
    assert fr.points[0].upper - fr.points[0].lower < 1e-9
    with pytest.raises(InvalidArgumentError):
        frontier(A, ranks=[0, 2])
    with pytest.raises(InvalidArgumentError):
        frontier(A, ranks=[])


# ------------------------------------------------------------------ the audit and the diff
def test_audit_with_frontier_report_summary_and_diff(tmp_path, capsys):
    """``softrank audit --frontier``: every cell carries its operator's band (the same on
    each), the summary scores the constructions with 0 contradictions, the report has the
    section and its plot; an audit with itself diffs with the frontier scores unchanged,
    and one without the stage cannot be resumed as one with it."""
    from softrank.audit.frontier_stage import AUDIT_RANKS, FrontierBand

    p = tmp_path / "panel.toml"
    p.write_text("eps = [0.2, 0.5]\n" + "".join(
        f"[[synthetic]]\nfamily = 'gaussian_head'\nm = 12\nN = 12\nseed = {s}\n"
        for s in range(2)))
    out = tmp_path / "a"
    args = ["audit", "--panel", str(p), "--out", str(out), "--workers", "1", "--quiet",
            "--study-boot", "0", "--attacks", "quick", "--no-reference-store"]
    assert main(args + ["--frontier"]) == 0
    import csv

    with open(out / "brackets.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 and all(r["frontier"] for r in rows)
    by_op = {}
    for r in rows:
        by_op.setdefault(r["operator_id"], set()).add(r["frontier"])
    assert all(len(v) == 1 for v in by_op.values())  # one band per operator
    d = FrontierBand.decode(rows[0]["frontier"])
    assert d.ranks == tuple(k for k in AUDIT_RANKS if k <= 12)
    assert all(lo < up for lo, up in zip(d.lower, d.upper))
    assert d.unsound == () and d.below_band == ()
    # the band at the cell's own tolerance holds the cell's bracket
    for r in rows:
        eps, L, U = float(r["eps"]), int(r["lower"]), int(r["upper"])
        at = dict(zip(d.ranks, zip(d.lower, d.upper)))
        if r["frontier"] == rows[0]["frontier"]:
            if L - 1 in at:
                assert at[L - 1][0] >= eps
            if U in at:
                assert at[U][1] <= eps
    s = json.loads((out / "summary.json").read_text())["frontier"]
    assert s["operators"] == 2 and s["contradictions"] == 0
    assert s["attacks"]["tried"] > 0 and s["attacks"]["closest"] > 1  # none came within eps
    assert d.attacks_succeeded == ()
    assert {"truncated-svd", "nystrom", "random-features"} <= set(s["constructions"])
    report = (out / "report.md").read_text()
    assert "## The rank-error frontier" in report and "frontier excess error" in report
    assert (out / "frontier.png").exists()
    capsys.readouterr()
    assert main(["diff", str(out), str(out)]) == 0
    text = capsys.readouterr().out
    assert "## Frontier scores" in text and "Contradictions: 0." in text
    # the stage is part of the run's identity: a resume without it is refused
    assert main(args + ["--resume"]) == 2


def test_diff_fails_on_new_frontier_contradictions():
    from softrank.harness.diff import verdict

    d = {"summary": {"ends_worse": 0, "more_rejected": []},
         "frontier": {"contradictions": [0, 2], "constructions": {}}}
    ok, why = verdict(d)
    assert not ok and "2 frontier contradictions" in why
    d["frontier"]["contradictions"] = [2, 2]
    assert verdict(d)[0]


def test_encode_decode_frontier_round_trip():
    from softrank.audit.frontier_stage import FrontierBand

    fr = frontier(_mixed_blocks(0.3), ranks=(1, 3), eps=(), reference=False)
    fr.curves[0].excess_rank = float("inf")
    band = FrontierBand.of(fr, 2, 1.5, [(3, 0.25)])
    d = FrontierBand.decode(band.encode())
    assert d == band  # the column read back is the band written
    assert d.ranks == (1, 2, 3) and d.lower == tuple(p.lower for p in fr.points)
    assert d.curves["truncated-svd"].excess_rank == float("inf")
    assert d.attacks_succeeded == ((3, 0.25),) and d.attacks_tried == 2
    assert d.curves["truncated-svd"].errors == fr.curves[0].errors


def test_cli_plot_paths_refused_before_any_work(tmp_path, capsys, monkeypatch):
    """A directory, an empty name, a name without .png, a directory where nothing can be
    written: one line naming --plot, exit 2, before any work (no table printed)."""
    f = tmp_path / "m.npy"
    np.save(f, _mixed_blocks(0.3))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.png").mkdir()
    base = ["frontier", str(f), "--no-reference-store", "--ranks", "1:2", "--eps"]
    bad = [["--plot", "d.png", "--overwrite"], ["--plot", ""], ["--plot", ".png"],
           ["--plot", "x.PNG.txt"]]
    if os.path.isdir("/proc/self"):
        bad.append(["--plot", "/proc/x.png"])
    for extra in bad:
        assert main(base + extra) == 2, extra
        io = capsys.readouterr()
        assert io.out == "" and io.err.startswith("softrank frontier: error: --plot:"), io.err
    assert main(base + ["--plot", "UPPER.PNG"]) == 0  # the suffix in any case
    assert (tmp_path / "UPPER.PNG").exists()


def test_cli_says_why_a_construction_has_no_curve(tmp_path, capsys, monkeypatch):
    """A plain matrix (no factors): the reference constructions decline at every rank and
    the table says so; --renormalize reads a float32 file."""
    f = tmp_path / "m32.npy"
    np.save(f, _mixed_blocks(0.3).astype(np.float32))
    assert main(["frontier", str(f), "--no-reference-store", "--ranks", "1:2", "--eps",
                 "--no-plot", "--renormalize"]) == 0
    out = capsys.readouterr().out
    assert "nystrom: no curve (declined at every rank)" in out
    assert "truncated-svd: 2 ranks" in out


@pytest.mark.parametrize("n, d, beta, seed, kw", [
    (24, 4, 0.5, 1, {}),  # the defaults: brackets at 0.1, 0.25, 0.5, effort full
    (16, 4, 0.5, 0, dict(eps=(), effort="fast", reference=False))])
def test_no_upper_end_above_the_zero_matrix_on_a_causal_head(n, d, beta, seed, kw):
    """``B = 0`` has rank 0 and error ``||A||_inf = e_0``, so ``e_k <= ||A||_inf`` at every
    ``k``. On a causal head the searches (l2 fits, reweighted least squares) end above it at
    low rank (1.016 and 1.053 at k = 1 here without the zero witness); the band may not.

    The allowance is the float64 checker's for ``B = 0`` (docs/theory/checker.md, Higham):
    ``fl(|a| (1 + 2u))`` (factor ``(1 + 2u)(1 + u)``), a sum of ``N`` terms
    (``1 + gamma_{N-1}``), times ``1 + 2 gamma_{N+2}`` (rounded, ``1 + u``), plus ``N eta``
    (rounded, ``1 + u``), one ulp up (``1 + 2u``): first order ``(3N + 10) u``, and ``u`` more
    for the correctly rounded ``fsum`` below; ``(3N + 20) u`` covers the second-order terms,
    ``2 N eta`` the underflow term. Each end is a checked witness at its value, and the ends
    do not increase with ``k``."""
    u, eta = 2.0 ** -53, 2.0 ** -1074
    rng = np.random.default_rng(seed)
    op = Operator.from_factors(rng.standard_normal((n, d)), rng.standard_normal((n, d)), beta,
                               mask=causal_mask(n))
    norm = max(math.fsum(abs(x) for x in row) for row in op.A.tolist())
    allowed = norm * (1 + (3 * n + 20) * u) + 2 * n * eta
    fr = frontier(op, ranks=(1, 4), **kw)
    ups = [p.upper for p in fr.points]
    assert all(e <= allowed for e in ups), (ups, norm)
    assert all(a >= b for a, b in zip(ups, ups[1:])), ups
    for p in fr.points:
        w = fr.witnesses[p.upper_rank]
        assert w.eps == p.upper and w.rank <= p.rank and check(op.A, w).ok
    assert fr.unsound == []

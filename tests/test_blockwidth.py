"""Block-width study: budget shares from audit cells (hand-worked rows) and the CLI."""

import csv

import pytest

from softrank.errors import InvalidArgumentError
from softrank.harness.cli import main
from softrank.studies.blockwidth import budget_shares


def _row(w, lower, upper, verdict="open", eps=0.25, ck="ck"):
    return {"family": "f", "n": str(w), "eps": str(eps), "lower": str(lower),
            "upper": str(upper), "verdict": verdict, "checkpoint": ck}


def test_budget_shares_hand_worked():
    rows = [_row(32, 3, 6), _row(32, 9, 12), _row(32, 20, 40), _row(32, 5, 10),
            _row(64, 10, 20), _row(64, 0, -1, verdict="error"),
            _row(64, 1, 2, eps=0.5),            # another tolerance: filtered out
            _row(64, 1, 2, ck="")]              # a synthetic operator: not a learned head
    out = {(s["width"], s["budget"]): s for s in budget_shares(rows, [8, 16], eps=0.25)}
    # width 32, budget 8: feasible {6}, infeasible {9..12, 20..40}, unresolved {5..10}
    assert (out[32, 8]["feasible"], out[32, 8]["infeasible"], out[32, 8]["unresolved"]) == (1, 2, 1)
    assert (out[32, 16]["feasible"], out[32, 16]["infeasible"], out[32, 16]["unresolved"]) == (3, 1, 0)
    assert out[32, 8]["feasible_pct"] == 25.0 and out[32, 16]["feasible_pct"] == 75.0
    # width 64: the error cell is never counted as shown either way
    assert (out[64, 8]["operators"], out[64, 8]["infeasible"], out[64, 8]["unresolved"]) == (2, 1, 1)
    assert (out[64, 16]["feasible"], out[64, 16]["unresolved"]) == (0, 2)
    with pytest.raises(InvalidArgumentError, match="^budgets"):
        budget_shares(rows, [0])


@pytest.mark.models
def test_block_width_cli_runs_and_summarises(tmp_path, capsys):
    out = tmp_path / "bw"
    assert main(["study", "block-width", "--widths", "16", "24", "--layers", "2", "--heads", "3",
                 "--budgets", "4", "8", "--workers", "1", "--out", str(out)]) == 0
    shares = list(csv.DictReader(open(out / "blockwidth.csv")))
    assert [(s["width"], s["budget"]) for s in shares] == [("16", "4"), ("16", "8"),
                                                          ("24", "4"), ("24", "8")]
    cells = {r["n"]: r for r in csv.DictReader(open(out / "audit" / "brackets.csv"))}
    for s in shares:  # each share agrees with the audit's own bracket
        c, B = cells[s["width"]], int(s["budget"])
        assert int(s["feasible"]) == (int(c["upper"]) <= B)
        assert int(s["infeasible"]) == (int(c["lower"]) > B)
    assert (out / "blockwidth.png").stat().st_size > 1000
    # --from: the same summary from the audit directory
    assert main(["study", "block-width", "--from", str(out / "audit"), "--budgets", "4", "8",
                 "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "blockwidth.csv").read_text() == (out / "blockwidth.csv").read_text()

"""``softrank diff``: two audits compared cell by cell (hand-made ledgers, then real audits)."""

import json

import pytest

from softrank.harness.cli import main
from softrank.harness.ledger import Ledger


def _row(op, eps, lower, upper, verdict=None, seconds=1.0, methods=(), family="gaussian", n=16):
    verdict = verdict or ("resolved" if lower == upper else "open")
    diag = {"methods": [{"name": name, "side": side, "origin": "builtin", "status": status,
                         "rank": rank, "seconds": secs, "message": ""}
                        for name, side, status, rank, secs in methods]}
    return {"operator_id": op, "family": family, "n": n, "m": n, "eps": eps, "lower": lower,
            "upper": upper, "verdict": verdict, "seconds": seconds, "lower_method": "frobenius",
            "upper_method": "truncated-svd", "diagnostics": json.dumps(diag)}


BASE = [
    _row("g-1", 0.1, 3, 8, methods=[("truncated-svd", "upper", "ok", 9, 0.01),
                                     ("l1-refit", "upper", "ok", 8, 0.5),
                                     ("frobenius", "lower", "ok", 3, 0.01)]),
    _row("g-1", 0.25, 2, 5, methods=[("truncated-svd", "upper", "ok", 6, 0.01),
                                      ("l1-refit", "upper", "ok", 5, 0.4),
                                      ("frobenius", "lower", "ok", 2, 0.01)]),
    _row("g-2", 0.1, 4, 4, methods=[("truncated-svd", "upper", "ok", 4, 0.01)]),
    _row("g-2", 0.25, 1, 3, methods=[("truncated-svd", "upper", "ok", 3, 0.01)]),
]
IDENTITY = {"panel": "hand", "seed": 0, "eps": [0.1, 0.25], "attacks": "none",
            "certifiers": [], "operators": ["g-1:aaaa", "g-2:bbbb"]}


def _audit(path, rows, identity=IDENTITY, complete=True):
    path.mkdir()
    ledger = Ledger(path, identity)
    ops = []
    for r in rows:
        if r["operator_id"] not in ops:
            ops.append(r["operator_id"])
    for i, op in enumerate(ops):
        ledger.add(i, [r for r in rows if r["operator_id"] == op])
    if complete:
        ledger.mark_complete()
    ledger.close()
    return str(path)


def _run(capsys, *args):
    rc = main(["diff", *map(str, args)])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_an_audit_against_itself_exits_0(tmp_path, capsys):
    a = _audit(tmp_path / "a", BASE)
    rc, out, _ = _run(capsys, a, a)
    assert rc == 0
    assert "4 unchanged" in out and "ends worse: 0" in out and "**PASS**" in out
    # 5 + 3 + 0 + 2, hand-summed
    assert "summed gap (upper - lower) over the 4 cells with a bracket in both: 10\n" in out


def test_a_worse_end_exits_1_and_is_named(tmp_path, capsys):
    a = _audit(tmp_path / "a", BASE)
    rows = [dict(r) for r in BASE]
    rows[1] = _row("g-1", 0.25, 2, 6, methods=[("truncated-svd", "upper", "ok", 6, 0.01),
                                                ("l1-refit", "upper", "ok", 6, 0.8),
                                                ("frobenius", "lower", "ok", 2, 0.01)])
    rows[3] = _row("g-2", 0.25, 2, 3)  # lower 1 -> 2: better
    b = _audit(tmp_path / "b", rows)
    rc, out, _ = _run(capsys, a, b)
    assert rc == 1
    assert "1 better, 1 worse" in out and "**FAIL**: 1 ends worse (allowed 0)" in out
    assert ("| g-1 | 0.25 | 2 | 5 -> 6 (**worse**) | open | lower: frobenius; upper: "
            "truncated-svd |") in out
    assert "| g-2 | 0.25 | 1 -> 2 (better) | 3 |" in out
    assert "both: 10\n" in out  # +1 on g-1, -1 on g-2
    # per method: l1-refit's rank 5 -> 6 on one paired cell; its median time 0.45 -> 0.65 s
    line = next(ln for ln in out.splitlines() if ln.startswith("| l1-refit |"))
    assert "0 / 1 of 2" in line and "0.45 -> 0.65 s" in line and "1.44x" in line
    assert main(["diff", a, b, "--allow-worse", "1"]) == 0
    # reversed: the same cells, the other way round
    rc, out, _ = _run(capsys, b, a)
    assert rc == 1 and "1 better, 1 worse" in out


def test_json_output(tmp_path, capsys):
    a = _audit(tmp_path / "a", BASE)
    rows = [dict(r) for r in BASE]
    rows[0] = _row("g-1", 0.1, 4, 7)
    b = _audit(tmp_path / "b", rows)
    rc, out, _ = _run(capsys, a, b, "--json")
    d = json.loads(out)
    assert rc == 0 and d["passed"] is True and "no new rejections" in d["reason"]
    s = d["summary"]
    assert (s["lower_better"], s["upper_better"], s["ends_worse"]) == (1, 1, 0)
    assert s["summed_gap"] == [10, 8] and s["cells_better"] == 1
    assert [(c["operator_id"], c["lower"], c["upper"]) for c in d["better"]] == [
        ("g-1", [3, 4], [8, 7])]


def test_an_error_cell_counts_both_ends_worse(tmp_path, capsys):
    a = _audit(tmp_path / "a", BASE)
    rows = [dict(r) for r in BASE]
    rows[2] = _row("g-2", 0.1, 0, -1, verdict="error")
    b = _audit(tmp_path / "b", rows)
    rc, out, _ = _run(capsys, a, b, "--json")
    s = json.loads(out)["summary"]
    assert rc == 1 and (s["lower_worse"], s["upper_worse"]) == (1, 1)
    # the gap is summed over the 3 cells with a bracket in both audits: 5 + 3 + 2
    assert s["errors"] == [0, 1] and s["summed_gap"] == [10, 10] and s["gap_cells"] == 3


def test_an_unsound_cell_counts_both_ends_worse_and_leaves_the_gap(tmp_path, capsys):
    a = _audit(tmp_path / "a", BASE)
    rows = [dict(r) for r in BASE]
    rows[0] = _row("g-1", 0.1, 9, 8, verdict="unsound")  # lower above upper
    b = _audit(tmp_path / "b", rows)
    rc, out, _ = _run(capsys, a, b, "--json")
    s = json.loads(out)["summary"]
    assert rc == 1 and (s["lower_worse"], s["upper_worse"], s["unsound"]) == (1, 1, [0, 1])
    assert s["summed_gap"] == [5, 5] and s["gap_cells"] == 3  # 3 + 0 + 2 in both


def test_more_rejected_answers_fail_the_gate(tmp_path, capsys):
    a = _audit(tmp_path / "a", BASE)
    rows = [dict(r) for r in BASE]
    rows[2] = _row("g-2", 0.1, 4, 4, methods=[("truncated-svd", "upper", "ok", 4, 0.01),
                                               ("mine", "upper", "rejected", None, 0.02)])
    b = _audit(tmp_path / "b", rows)
    rc, out, _ = _run(capsys, a, b)
    assert rc == 1 and "ends worse: 0" in out
    assert "**FAIL**: more answers rejected by the checker in B: mine" in out
    assert "answers rejected by the checker: 0 -> 1" in out


def test_worse_cells_are_listed_largest_change_first(tmp_path, capsys):
    a = _audit(tmp_path / "a", BASE)
    rows = [dict(r) for r in BASE]
    rows[0] = _row("g-1", 0.1, 3, 9)   # upper +1
    rows[3] = _row("g-2", 0.25, 1, 6)  # upper +3
    b = _audit(tmp_path / "b", rows)
    rc, out, _ = _run(capsys, a, b, "--limit", "1")
    assert rc == 1 and "## Worse (2 cells, largest change first)" in out
    assert "| g-2 | 0.25 |" in out and "| g-1 | 0.1 |" not in out and "... 1 more" in out


@pytest.mark.parametrize("change, words", [
    ({"eps": [0.1]}, "tolerances differ"),
    ({"ops": ["g-1", "g-3"]}, "operators differ: 1 only in A (g-2); 1 only in B (g-3)"),
    ({"hash": "cccc"}, "different matrices under the same id"),
])
def test_audits_of_different_panels_are_refused(tmp_path, capsys, change, words):
    a = _audit(tmp_path / "a", BASE)
    rows, ident = [dict(r) for r in BASE], dict(IDENTITY)
    if "eps" in change:
        rows = [r for r in rows if r["eps"] == 0.1]
        ident["eps"] = [0.1]
    if "ops" in change:
        for r in rows:
            if r["operator_id"] == "g-2":
                r["operator_id"] = "g-3"
        ident["operators"] = ["g-1:aaaa", "g-3:bbbb"]
    if "hash" in change:
        ident["operators"] = ["g-1:aaaa", "g-2:cccc"]
    b = _audit(tmp_path / "b", rows, ident)
    rc, out, err = _run(capsys, a, b)
    assert rc == 2 and out == ""
    assert words in err and len(err.strip().splitlines()) == 1


def test_settings_that_differ_are_listed_not_refused(tmp_path, capsys):
    a = _audit(tmp_path / "a", BASE)
    b = _audit(tmp_path / "b", BASE, dict(IDENTITY, certifiers=["mine:Cons"]))
    rc, out, _ = _run(capsys, a, b)
    assert rc == 0 and "differs: certifiers: [] in A, ['mine:Cons'] in B" in out


def test_a_ledger_of_an_older_version_ran_at_full_effort(tmp_path, capsys):
    # IDENTITY has no "effort" (ledgers written before --effort): the same as "full"
    a = _audit(tmp_path / "a", BASE)
    b = _audit(tmp_path / "b", BASE, dict(IDENTITY, effort="full"))
    rc, out, _ = _run(capsys, a, b)
    assert rc == 0 and "differs" not in out
    c = _audit(tmp_path / "c", BASE, dict(IDENTITY, effort="fast"))
    rc, out, _ = _run(capsys, a, c)
    assert "differs: effort: 'full' in A, 'fast' in B" in out


def test_a_ledger_whose_identity_is_not_an_object_is_refused(tmp_path, capsys):
    import sqlite3

    a = _audit(tmp_path / "a", BASE)
    con = sqlite3.connect(tmp_path / "a" / "ledger.sqlite")
    with con:
        con.execute("UPDATE run SET value = '[1, 2]' WHERE key = 'identity'")
    con.close()
    rc, _, err = _run(capsys, a, a)
    assert rc == 2 and "its run identity is not a JSON object" in err


def test_unfinished_or_missing_audits_are_refused(tmp_path, capsys):
    a = _audit(tmp_path / "a", BASE)
    b = _audit(tmp_path / "b", BASE, complete=False)
    rc, _, err = _run(capsys, a, b)
    assert rc == 2 and "AUDIT_B" in err and "unfinished" in err
    rc, _, err = _run(capsys, a, tmp_path / "nothing")
    assert rc == 2 and "does not exist" in err
    (tmp_path / "empty").mkdir()
    rc, _, err = _run(capsys, tmp_path / "empty", a)
    assert rc == 2 and "AUDIT_A" in err and "no softrank audit" in err


@pytest.mark.parametrize("field, value, words", [
    ("verdict", "banana", "verdict 'banana'"),
    ("lower", "-5", "do not fit the verdict"),
    ("lower", "7", "do not fit the verdict 'open'"),  # lower 7 > upper 5, verdict open
    ("seconds", "abc", "seconds 'abc'"),
    ("diagnostics", "[1, 2]", "diagnostics: not softrank's record"),
    ("diagnostics", '{"methods": [{"name": "x"}]}', "diagnostics: not softrank's record"),
    ("eps", "1.5", "0 < eps < 1"),
    ("lower", "abc", "lower 'abc' is not an integer"),
])
def test_malformed_csv_cells_are_refused(tmp_path, capsys, field, value, words):
    import csv

    cols = list(BASE[0])
    rows = [dict(r) for r in BASE]
    rows[1][field] = value
    path = tmp_path / "brackets.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    a = _audit(tmp_path / "a", BASE)
    rc, out, err = _run(capsys, a, path)
    assert rc == 2 and out == "" and words in err and "AUDIT_B" in err
    assert len(err.strip().splitlines()) == 1


def test_an_edited_export_beside_its_ledger_is_refused(tmp_path, capsys):
    import csv

    a = tmp_path / "a"
    _audit(a, BASE)
    cols = list(BASE[0])
    rows = [dict(r) for r in BASE]
    rows[0]["upper"] = 18
    with (a / "brackets.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    for arg in (a, a / "brackets.csv"):
        rc, _, err = _run(capsys, arg, arg)
        assert rc == 2 and "does not match the ledger" in err


def test_two_real_audits(tmp_path, capsys):
    """End to end on real audits of one small panel: identical code, identical brackets; a
    brackets.csv is accepted in place of the directory (hashes then not compared)."""
    p = tmp_path / "panel.toml"
    p.write_text('eps = [0.2, 0.4]\n[[synthetic]]\nfamily = "sphere"\nd = 2\nbeta = 8.0\n'
                 'm = 20\nN = 20\nseed = 0\n[[synthetic]]\nfamily = "planted_blocks"\nm = 16\n'
                 'N = 16\nk = 3\ndelta = 0.05\n')
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        assert main(["audit", "--panel", str(p), "--out", str(out), "--quiet", "--workers",
                     "1", "--study-boot", "0", "--attacks", "none"]) == 0
        outs.append(out)
    capsys.readouterr()
    rc, out, _ = _run(capsys, outs[0], outs[1])
    assert rc == 0 and "4 unchanged" in out and "## Constructions" in out
    assert "| truncated-svd |" in out and "| frobenius |" in out
    # the export beside its ledger: the same cells, and the hashes still compared
    rc, out, _ = _run(capsys, outs[0] / "brackets.csv", outs[1])
    assert rc == 0 and "4 unchanged" in out and "matrix hashes not compared" not in out
    # a copy away from the ledger: matched by id and eps only, and the report says so
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "brackets.csv").write_bytes((outs[0] / "brackets.csv").read_bytes())
    rc, out, _ = _run(capsys, tmp_path / "copy" / "brackets.csv", outs[1])
    assert rc == 0 and "matrix hashes not compared" in out


def test_a_truncated_brackets_csv_is_refused(tmp_path, capsys):
    import csv

    path = tmp_path / "full.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(BASE[0]))
        w.writeheader()
        w.writerows(BASE)
    cut = tmp_path / "cut.csv"
    text = path.read_text()
    cut.write_text(text[: text.index("g-1", text.index("g-1") + 3) + 40])  # inside row 2
    rc, out, err = _run(capsys, cut, cut)
    assert rc == 2 and out == "" and "row 2 does not have the header's fields" in err

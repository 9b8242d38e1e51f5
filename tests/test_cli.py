"""The command line: bracket, verify, audit (end to end, small panels)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from softrank.errors import SoftrankError
from softrank.harness.cli import main


def _block_perm(k=4, size=3, seed=0):
    """A permuted block-diagonal matrix of k uniform blocks: r_eps = k for every eps < 1."""
    n = k * size
    B = np.zeros((n, n))
    for b in range(k):
        B[b * size:(b + 1) * size, b * size:(b + 1) * size] = 1.0 / size
    rng = np.random.default_rng(seed)
    return B[rng.permutation(n)][:, rng.permutation(n)]


def test_bracket_json_identity(tmp_path, capsys):
    f = tmp_path / "eye.npy"
    np.save(f, np.eye(6))
    assert main(["bracket", str(f), "--eps", "0.1", "0.5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(o["eps"], o["lower"], o["upper"]) for o in out] == [(0.1, 6, 6), (0.5, 6, 6)]


def test_bracket_json_is_clean_stdout(tmp_path):
    """Nothing but JSON on stdout (the HiGHS banner must not leak)."""
    f = tmp_path / "A.npy"
    np.save(f, _block_perm())
    res = subprocess.run([sys.executable, "-m", "softrank.harness.cli", "bracket", str(f),
                          "--eps", "0.25", "--json"], capture_output=True, text=True, check=True)
    out = json.loads(res.stdout)
    assert out[0]["lower"] == out[0]["upper"] == 4


def test_save_and_verify_certificates(tmp_path, capsys):
    f = tmp_path / "A.npy"
    A = _block_perm(k=5, size=2)
    np.save(f, A)
    d = tmp_path / "certs"
    assert main(["bracket", str(f), "--eps", "0.2", "--save-certificates", str(d)]) == 0
    files = sorted(d.glob("*.npz"))
    assert len(files) == 2
    for p in files:  # loadable without pickle
        with np.load(p, allow_pickle=False) as z:
            assert "header" in z.files and "A" in z.files
    capsys.readouterr()
    assert main(["verify", str(d)]) == 0
    assert "2 of 2 certificates hold" in capsys.readouterr().out
    assert main(["verify", str(d), "--matrix", str(f)]) == 0

    # against another matrix: the hash differs, so the check fails
    g = tmp_path / "B.npy"
    np.save(g, np.eye(10))
    capsys.readouterr()
    assert main(["verify", str(d), "--matrix", str(g)]) == 1
    assert "differs" in capsys.readouterr().out

    # tamper with the upper witness by one entry: the checker must reject it
    up = next(p for p in files if "upper" in p.name)
    with np.load(up, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    U = data["U"].copy()
    U[0, 0] += 0.5
    data["U"] = U
    np.savez(up, **data)
    capsys.readouterr()
    assert main(["verify", str(up)]) == 1
    assert "FAIL" in capsys.readouterr().out


@pytest.mark.parametrize("bad, word", [
    (np.array([[0.5, np.nan], [0.5, 0.5]]), "A:"),
    (np.array([[0.7, 0.7], [0.5, 0.5]]), "A:"),
    (np.array([0.5, 0.5]), "A:"),
])
def test_bracket_bad_input_exit_2(tmp_path, capsys, bad, word):
    f = tmp_path / "bad.npy"
    np.save(f, bad)
    assert main(["bracket", str(f), "--eps", "0.25"]) == 2
    assert word in capsys.readouterr().err


def test_bracket_missing_file_exit_2(tmp_path, capsys):
    assert main(["bracket", str(tmp_path / "nope.npy"), "--eps", "0.25"]) == 2
    assert "nope.npy" in capsys.readouterr().err


def test_bad_eps_is_rejected(tmp_path):
    f = tmp_path / "A.npy"
    np.save(f, np.eye(3))
    with pytest.raises(SystemExit) as e:
        main(["bracket", str(f), "--eps", "1.5"])
    assert e.value.code == 2


def _panel(tmp_path, extra=""):
    np.save(tmp_path / "blocks.npy", _block_perm(k=3, size=4))
    p = tmp_path / "panel.toml"
    p.write_text(f"""
eps = [0.2, 0.5]

[[synthetic]]
family = "planted_blocks"
m = 24
N = 24
k = 5
delta = 0.05

[[synthetic]]
family = "grid"
d = 1
n = 16

[[matrix]]
path = "blocks.npy"
family = "blocks"
{extra}
""")
    return p


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_audit_panel_file_end_to_end(tmp_path, capsys):
    p = _panel(tmp_path)
    out = tmp_path / "rep"
    assert main(["audit", "--panel", str(p), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    rows = _rows(out / "brackets.csv")
    assert len(rows) == 3 * 2
    for col in ("operator_id", "family", "source", "layer", "head", "m", "n", "eps", "lower",
                "upper", "lower_method", "upper_method", "verdict", "seconds"):
        assert col in rows[0]
    for r in rows:
        assert 1 <= int(r["lower"]) <= int(r["upper"])
        assert r["lower_check"].startswith("pass") and r["upper_check"].startswith("pass")
    # known answers: planted blocks k = 5 for 2 delta <= eps < 1 - 2 delta; block matrix k = 3
    for r in rows:
        if r["family"] == "planted-blocks":
            assert (int(r["lower"]), int(r["upper"])) == (5, 5)
        if r["family"] == "blocks":
            assert (int(r["lower"]), int(r["upper"])) == (3, 3)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cells"] == 6 and summary["certificates"]["all_passed_checker"] is True
    report = (out / "report.md").read_text()
    assert "resolved" in report and "BERT native" in report
    assert (out / "families.png").stat().st_size > 1000
    assert (out / "ledger.sqlite").exists()


def test_audit_is_deterministic_and_worker_independent(tmp_path):
    p = _panel(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["audit", "--panel", str(p), "--out", str(a), "--workers", "1", "--quiet"]) == 0
    assert main(["audit", "--panel", str(p), "--out", str(b), "--workers", "2", "--quiet"]) == 0
    strip = _strip
    assert strip(_rows(a / "brackets.csv")) == strip(_rows(b / "brackets.csv"))


@pytest.mark.parametrize("text, word", [
    ("[[synthetic]]\nfamily = 'nope'\n", "family"),
    ("[[synthetic]]\nfamily = 'grid'\nd = 7\nn = 4\n", "d:"),
    ("[[minilm]]\nlayers = [9]\n", "layers"),
    ("[[matrix]]\nfile = 'x.npy'\n", "path"),
    ("bogus = 1\n", "unknown keys"),
    ("not toml [", "TOML"),
])
def test_audit_bad_panel_exit_2(tmp_path, capsys, text, word):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    assert main(["audit", "--panel", str(p), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert word in capsys.readouterr().err


def test_audit_unknown_panel_name(tmp_path, capsys):
    assert main(["audit", "--panel", "huge", "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert "panel" in capsys.readouterr().err


@pytest.mark.models
def test_audit_minilm_entry(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text("eps = [0.5]\n[[minilm]]\nwidths = [32]\nlayers = [5]\nheads = [3]\n")
    out = tmp_path / "rep"
    assert main(["audit", "--panel", str(p), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    (row,) = _rows(out / "brackets.csv")
    assert row["family"] == "minilm" and row["layer"] == "5" and row["head"] == "3"
    assert row["m"] == row["n"] == "32"
    assert 1 <= int(row["lower"]) <= int(row["upper"]) <= 32
    assert (out / "minilm_w32_eps0.5.png").exists()


def _strip(rows):
    """Cells without their timings (also those of every method in ``diagnostics``)."""
    def diag(d):
        d = json.loads(d)
        for m in d["methods"]:
            m.pop("seconds")
        return d

    def stages(d):  # the stages that ran, in order, and their errors
        return [(name, rec.get("error")) for name, rec in json.loads(d).items()]

    timeless = {"diagnostics": diag, "stages": stages}
    return [{k: timeless[k](v) if k in timeless else v for k, v in r.items()
             if k not in ("seconds", "attack_seconds", "svd_seconds")} for r in rows]


def test_killed_audit_resumes_to_the_uninterrupted_result(tmp_path, capsys):
    """SIGKILL after the first finished operator: its cells are in the ledger, whole; the
    same run without --resume refuses to overwrite them; --resume finishes it with the same
    cells and brackets as an uninterrupted run, and no duplicates."""
    import os
    import signal
    import sqlite3

    p = tmp_path / "slow.toml"
    p.write_text("eps = [0.2, 0.5]\n" + "".join(
        f"[[synthetic]]\nfamily = 'gaussian_head'\nm = 32\nN = 32\nseed = {s}\n" for s in range(6)))
    ref = tmp_path / "ref"
    # (the report's studies are not what this is about: --study-boot 0 keeps it short)
    assert main(["audit", "--panel", str(p), "--out", str(ref), "--workers", "1", "--quiet",
                 "--study-boot", "0"]) == 0
    out = tmp_path / "rep"
    proc = subprocess.Popen([sys.executable, "-m", "softrank.harness.cli", "audit", "--panel", str(p),
                             "--out", str(out), "--workers", "1", "--study-boot", "0"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        for line in proc.stderr:
            if "cells]" in line:  # one operator committed
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert not (out / "brackets.csv").exists()
    with sqlite3.connect(out / "ledger.sqlite") as conn:
        kept = conn.execute("SELECT COUNT(*) FROM cells").fetchone()[0]
    assert 2 <= kept < 12 and kept % 2 == 0  # whole operators only: 2 cells each
    capsys.readouterr()
    assert main(["audit", "--panel", str(p), "--out", str(out), "--workers", "1", "--quiet"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(["audit", "--panel", str(p), "--out", str(out), "--workers", "2", "--quiet",
                 "--resume", "--study-boot", "0"]) == 0
    rows = _rows(out / "brackets.csv")
    assert len({(r["operator_id"], r["eps"]) for r in rows}) == len(rows) == 12
    assert _strip(rows) == _strip(_rows(ref / "brackets.csv"))
    # a finished run can be run again into the same directory (its ledger is replaced)
    assert main(["audit", "--panel", str(p), "--out", str(out), "--workers", "1", "--quiet",
                 "--study-boot", "0"]) == 0


def test_resume_refuses_a_different_run(tmp_path, capsys):
    p = _panel(tmp_path)
    out = tmp_path / "o"
    assert main(["audit", "--panel", str(p), "--out", str(out), "--quiet", "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["audit", "--panel", str(p), "--out", str(out), "--quiet", "--resume",
                 "--eps", "0.3"]) == 2
    err = capsys.readouterr().err
    assert "--resume" in err and "eps" in err
    assert main(["audit", "--panel", str(p), "--out", str(tmp_path / "none"), "--quiet",
                 "--resume"]) == 2
    assert "no ledger" in capsys.readouterr().err
    # same panel file and ids, different content (a regenerated input): refused
    np.save(tmp_path / "blocks.npy", _block_perm(k=2, size=6))
    assert main(["audit", "--panel", str(p), "--out", str(out), "--quiet", "--resume"]) == 2
    assert "operators" in capsys.readouterr().err


def test_a_cell_past_its_time_limit_is_cut_short_with_checked_ends(tmp_path):
    from softrank.certifiers.bracket import bracket
    from softrank.checker import check
    from softrank.generators.synthetic import gaussian_head

    op = gaussian_head(48, 48, 16, 2.0, seed=0)
    full = bracket(op, [0.1, 0.3])
    brs = bracket(op, [0.1, 0.3], time_limit=1e-6)
    for b, f in zip(brs, full):
        assert b.cut_short and not f.cut_short and b.verdict in ("open", "resolved")
        # only the O(m N) methods ran: trivial (lower 1) and identity (upper min(m, N))
        ran = {r.name for r in b.diagnostics.methods if r.message != "time limit"}
        assert ran == {"trivial", "identity"}, ran
        assert (b.lower, b.upper) == (1, 48) and b.lower <= f.lower <= f.upper <= b.upper
        for c in (b.lower_certificate, b.upper_witness):
            assert check(op.A, c).ok
        assert b.to_dict()["cut_short"] and b.to_dict()["diagnostics"]["cut_short"]
    with pytest.raises(SoftrankError, match="time_limit"):
        bracket(op, 0.1, time_limit=0)


def test_bracket_cli_time_limit_and_progress(tmp_path, capsys):
    from softrank.generators.synthetic import gaussian_head

    f = tmp_path / "h.npy"
    np.save(f, gaussian_head(32, 32, 16, 2.0, seed=1).A)
    assert main(["bracket", str(f), "--eps", "0.25", "--time-limit", "1e-6", "--progress"]) == 0
    out, err = capsys.readouterr()
    assert "cut short by --time-limit" in out and "both ends are checked" in out
    assert "methods skipped (frobenius, key-groups" in out and "0 stopped by it" in out
    assert "eps 0.25: lower trivial: ok rank 1" in err and "(time limit)" in err
    with pytest.raises(SystemExit) as exc:  # argparse's own one-line error
        main(["bracket", str(f), "--eps", "0.25", "--time-limit", "0"])
    assert exc.value.code == 2 and "--time-limit" in capsys.readouterr().err


#: the built-in searches that run after every other method (registry: ``late = True``),
#: listed here by hand so that a search added to or dropped from the late set is noticed
LATE = {"subspace-rows", "subspace-climb", "subspace-blocks", "trust-region",
        "alternating-l1-smooth", "alternating-l1-anneal"}


class _Declines:
    """A third-party construction that declines every tolerance."""

    name = "mine-declines"

    def witness(self, operator, eps, context=None):
        return None


def test_effort_fast_skips_exactly_the_late_searches():
    from softrank.certifiers.bracket import bracket
    from softrank.checker import check

    A = _block_perm(k=4, size=3)  # r_eps = 4 for every eps < 1, by hand
    for b in bracket(A, [0.1, 0.5], effort="fast", constructions=[_Declines()]):
        skipped = {r.name for r in b.diagnostics.methods if r.message == "effort fast"}
        assert skipped == LATE
        for r in b.diagnostics.methods:
            if r.name in LATE:
                assert (r.status, r.seconds, r.rank) == ("skipped", 0.0, None)
        # the user's construction still runs; the bracket is not "cut short"
        assert b.diagnostics.record("mine-declines").status == "declined"
        assert not b.cut_short and (b.lower, b.upper) == (4, 4)
        assert b.lower_method not in LATE and b.upper_method not in LATE
        assert check(A, b.lower_certificate).ok and check(A, b.upper_witness).ok
    (full,) = bracket(A, 0.5)
    assert not any(r.message == "effort fast" for r in full.diagnostics.methods)
    assert LATE <= {r.name for r in full.diagnostics.methods}
    for bad in ("quick", "FAST", None, 1, True):
        with pytest.raises(SoftrankError, match="effort must be one of 'full', 'fast', got"):
            bracket(A, 0.5, effort=bad)


def test_bracket_cli_effort(tmp_path, capsys):
    f = tmp_path / "b.npy"
    np.save(f, _block_perm(k=3, size=4))
    assert main(["bracket", str(f), "--eps", "0.25", "--effort", "fast", "--json"]) == 0
    (cell,) = json.loads(capsys.readouterr().out)
    assert (cell["lower"], cell["upper"]) == (3, 3)
    assert {m["name"] for m in cell["diagnostics"]["methods"]
            if m.get("message") == "effort fast"} == LATE
    assert cell["effort"] == "fast"
    assert main(["bracket", str(f), "--eps", "0.25", "0.5", "--effort", "fast"]) == 0
    out = capsys.readouterr().out
    assert out.count("effort fast: the late searches (") == 1 and "checked as always" in out
    assert main(["bracket", str(f), "--eps", "0.25"]) == 0
    assert "effort fast" not in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:  # argparse's own one-line error
        main(["bracket", str(f), "--eps", "0.25", "--effort", "quick"])
    assert exc.value.code == 2 and "--effort" in capsys.readouterr().err


def _identity(out):
    import sqlite3

    con = sqlite3.connect(f"file:{out / 'ledger.sqlite'}?mode=ro", uri=True)
    try:
        return json.loads(con.execute("SELECT value FROM run WHERE key = 'identity'")
                          .fetchone()[0])
    finally:
        con.close()


def test_audit_effort_fast_is_recorded_reported_and_part_of_the_run(tmp_path, capsys):
    p = _panel(tmp_path)
    full, fast = tmp_path / "full", tmp_path / "fast"
    assert main(["audit", "--panel", str(p), "--out", str(full), "--workers", "1", "--quiet",
                 "--attacks", "none", "--study-boot", "0"]) == 0
    assert main(["audit", "--panel", str(p), "--out", str(fast), "--workers", "1", "--quiet",
                 "--attacks", "none", "--study-boot", "0", "--effort", "fast"]) == 0
    assert "; effort fast (late searches skipped). Report:" in capsys.readouterr().out
    rows = _rows(fast / "brackets.csv")
    assert len(rows) == 6
    for r in rows:
        methods = json.loads(r["diagnostics"])["methods"]
        assert {m["name"] for m in methods if m.get("message") == "effort fast"} == LATE
    assert _identity(full)["effort"] == "full" and _identity(fast)["effort"] == "fast"
    assert json.loads((full / "summary.json").read_text())["effort"] == "full"
    assert json.loads((fast / "summary.json").read_text())["effort"] == "fast"
    report = (fast / "report.md").read_text()
    assert "**effort fast** (`--effort fast`)" in report
    assert "effort fast" not in (full / "report.md").read_text()
    # the skipped searches were not tried: left out of the report's tables, not "skipped"
    assert "| trust-region |" in (full / "report.md").read_text()
    assert "| trust-region |" not in report
    for side in ("constructions", "lower_tests"):
        names = set(json.loads((fast / "summary.json").read_text())[side])
        assert not names & LATE and names
    # the blocks matrix is resolved at either effort (r_eps = 3 for every eps < 1)
    for out in (full, fast):
        assert [(r["lower"], r["upper"]) for r in _rows(out / "brackets.csv")
                if r["family"] == "blocks"] == [("3", "3"), ("3", "3")]
    capsys.readouterr()
    # softrank diff lists the effort among the settings that differ; the searches that did
    # not run count no cells in B (not cells that took 0 s)
    main(["diff", str(full), str(fast), "--json"])
    d = json.loads(capsys.readouterr().out)
    assert "effort: 'full' in A, 'fast' in B" in d["settings"]
    cells = {(m["name"], m["side"]): m["cells"] for m in d["methods"]}
    assert cells[("trust-region", "upper")] == [6, 0]
    assert cells[("subspace-climb", "lower")] == [6, 0]
    # ... also from the exports alone (no ledger: the effort read from the diagnostics)
    for out in (full, fast):
        (tmp_path / "csv" / out.name).mkdir(parents=True)
        (tmp_path / "csv" / out.name / "brackets.csv").write_bytes(
            (out / "brackets.csv").read_bytes())
    main(["diff", str(tmp_path / "csv" / "full"), str(tmp_path / "csv" / "fast"), "--json"])
    d = json.loads(capsys.readouterr().out)
    assert "effort (from the cells' diagnostics): 'full' in A, 'fast' in B" in d["settings"]
    # a run is resumed at its own effort only, named in the refusal
    assert main(["audit", "--panel", str(p), "--out", str(fast), "--quiet", "--resume",
                 "--attacks", "none", "--study-boot", "0"]) == 2
    assert 'effort "fast" in the ledger, "full" in this run' in capsys.readouterr().err
    # a ledger written before the option (no effort in its identity) ran at full effort
    import sqlite3

    con = sqlite3.connect(full / "ledger.sqlite")
    with con:
        ident = _identity(full)
        del ident["effort"]
        con.execute("UPDATE run SET value = ? WHERE key = 'identity'",
                    (json.dumps(ident, sort_keys=True),))
    con.close()
    assert main(["audit", "--panel", str(p), "--out", str(full), "--quiet", "--resume",
                 "--attacks", "none", "--study-boot", "0", "--effort", "fast"]) == 2
    assert 'effort "full" in the ledger, "fast" in this run' in capsys.readouterr().err
    assert main(["audit", "--panel", str(p), "--out", str(full), "--quiet", "--resume",
                 "--attacks", "none", "--study-boot", "0"]) == 0
    # a ledger whose identity is not a JSON object does not describe a run: refused by name
    for bad in ("[1, 2]", "not json"):
        con = sqlite3.connect(full / "ledger.sqlite")
        with con:
            con.execute("UPDATE run SET value = ? WHERE key = 'identity'", (bad,))
        con.close()
        capsys.readouterr()
        assert main(["audit", "--panel", str(p), "--out", str(full), "--quiet", "--resume",
                     "--attacks", "none", "--study-boot", "0"]) == 2
        assert "its identity is not a JSON object" in capsys.readouterr().err


def test_effort_choices_are_the_engines():
    from softrank.certifiers.bracket import EFFORTS
    from softrank.harness.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for cmd in ("bracket", "audit"):
        (act,) = [a for a in sub.choices[cmd]._actions if a.dest == "effort"]
        assert tuple(act.choices) == EFFORTS and act.default == "full"


@pytest.mark.dist("pyarrow")
def test_parquet_export_matches_the_csv(tmp_path):
    import pyarrow.parquet as pq

    p = _panel(tmp_path)
    out = tmp_path / "o"
    assert main(["audit", "--panel", str(p), "--out", str(out), "--quiet", "--workers", "1"]) == 0
    t = pq.read_table(out / "brackets.parquet").to_pylist()
    rows = _rows(out / "brackets.csv")
    assert [(r["operator_id"], float(r["eps"]), int(r["lower"]), int(r["upper"])) for r in rows] == \
        [(r["operator_id"], r["eps"], r["lower"], r["upper"]) for r in t]


@pytest.mark.dist("distributed")
def test_dask_executor_gives_the_same_cells(tmp_path):
    p = _panel(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["audit", "--panel", str(p), "--out", str(a), "--workers", "1", "--quiet"]) == 0
    assert main(["audit", "--panel", str(p), "--out", str(b), "--workers", "2", "--quiet",
                 "--executor", "dask"]) == 0
    assert _strip(_rows(a / "brackets.csv")) == _strip(_rows(b / "brackets.csv"))


def test_audit_out_is_a_file(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["audit", "--panel", str(_panel(tmp_path)), "--out", str(f), "--quiet"]) == 2
    assert "--out" in capsys.readouterr().err


def test_close_tolerances_keep_distinct_certificate_files(tmp_path, capsys):
    f = tmp_path / "A.npy"
    np.save(f, _block_perm())
    d = tmp_path / "c"
    assert main(["bracket", str(f), "--eps", "0.25", "0.2500001", "--save-certificates", str(d)]) == 0
    files = sorted(d.glob("*.npz"))
    assert len(files) == 4
    capsys.readouterr()
    assert main(["verify", str(d)]) == 0
    out = capsys.readouterr().out
    assert "eps 0.25 " in out and "eps 0.2500001 " in out


def test_verify_reports_each_file_even_if_one_is_malformed(tmp_path, capsys):
    f = tmp_path / "A.npy"
    np.save(f, _block_perm())
    d = tmp_path / "c"
    assert main(["bracket", str(f), "--eps", "0.3", "--save-certificates", str(d)]) == 0
    good = sorted(d.glob("*.npz"))
    bad = d / "zz_bad.npz"
    with np.load(good[0], allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    data["A"] = np.array([["a"]])
    np.savez(bad, **data)
    np.save(d / "bare.npy", np.eye(2))  # not a certificate, not picked up (.npy)
    capsys.readouterr()
    assert main(["verify", str(d)]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "zz_bad.npz" in out and "2 of 3 certificates hold" in out
    assert main(["verify", str(d / "bare.npy")]) == 1


def test_float_indices_in_a_certificate_file_are_malformed(tmp_path, capsys):
    from softrank.checker import FrobeniusCertificate, save_certificate

    A = np.eye(6)
    p = save_certificate(tmp_path / "f.npz", FrobeniusCertificate(0.3, np.arange(6), 5), A)
    with np.load(p, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    data["rows"] = data["rows"] + 0.5
    np.savez(p, **data)
    assert main(["verify", str(p)]) == 1
    assert "integer" in capsys.readouterr().out


def test_tiny_eps_still_has_an_upper_end(tmp_path, capsys):
    f = tmp_path / "eye.npy"
    np.save(f, np.eye(3))
    assert main(["bracket", str(f), "--eps", "1e-300", "--json"]) == 0
    (o,) = json.loads(capsys.readouterr().out)
    assert (o["lower"], o["upper"]) == (3, 3)


@pytest.mark.parametrize("args, word", [
    (["--eps", "0.1", "0.1"], "repeat"),
    (["--save-certificates", "FILE"], "--save-certificates"),
])
def test_bracket_argument_errors(tmp_path, capsys, args, word):
    f = tmp_path / "A.npy"
    np.save(f, np.eye(3))
    (tmp_path / "FILE").write_text("x")
    args = [a.replace("FILE", str(tmp_path / "FILE")) for a in args]
    argv = ["bracket", str(f), *args] if args[0] == "--eps" else ["bracket", str(f), "--eps", "0.2", *args]
    assert main(argv) == 2
    assert word in capsys.readouterr().err


@pytest.mark.parametrize("text, word", [
    ("[synthetic]\nfamily = 'grid'\n", "[[synthetic]]"),
    ("[minilm]\nwidths = [64]\n", "[[minilm]]"),
    ("eps = 0.1\n[[synthetic]]\nfamily = 'grid'\nd = 1\nn = 8\n", "eps"),
    ("eps = ['abc']\n[[synthetic]]\nfamily = 'grid'\nd = 1\nn = 8\n", "eps"),
    ("[[matrix]]\npath = 5\n", "path"),
    ("[[matrix]]\npath = 'x.npy'\nfamly = 'a'\n", "famly"),
    ("[[minilm]]\nwidths = [true]\n", "widths"),
    ("[[minilm]]\nwidths = [1]\n", "widths"),
    ("[[synthetic]]\nfamily = 'sphere'\nd = 3\nbeta = 4.0\nseed = -1\n", "seed"),
])
def test_audit_bad_panel_shapes_exit_2(tmp_path, capsys, text, word):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    assert main(["audit", "--panel", str(p), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert word in capsys.readouterr().err


def test_audit_panel_directory_and_matrix_row_sums(tmp_path, capsys):
    assert main(["audit", "--panel", str(tmp_path), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    np.save(tmp_path / "bad.npy", np.full((3, 3), 0.5))
    p = tmp_path / "m.toml"
    p.write_text("[[matrix]]\npath = 'bad.npy'\n")
    capsys.readouterr()
    assert main(["audit", "--panel", str(p), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "bad.npy" in err and "A:" in err


def test_audit_seed_must_be_non_negative(tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["audit", "--panel", "quick", "--seed", "-1"])
    assert e.value.code == 2


def _die_on_three(x):
    import os

    if x == 3:
        os._exit(1)  # a worker killed mid-task
    return x


def test_a_dead_worker_stops_the_run_instead_of_hanging():
    from concurrent.futures.process import BrokenProcessPool

    from softrank.harness.executors import local_map

    got = []
    with pytest.raises(BrokenProcessPool):
        for r in local_map(_die_on_three, [1, 2, 3, 4, 5, 6], 2):
            got.append(r)
    assert 3 not in got


_SIGNAL_ON_ANOTHER_THREAD = """
import signal, sys, threading, time
from softrank.harness.executors import local_map

def stop(signum, frame):
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, stop)

def poke():
    time.sleep(3)  # the worker is up and the main thread waits for its task
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # this thread, not the main one

threading.Thread(target=poke, daemon=True).start()
t = time.monotonic()
try:
    for _ in local_map(time.sleep, [60], 1):
        pass
    print("finished", flush=True)
except KeyboardInterrupt:
    print(f"interrupted after {time.monotonic() - t:.1f} s", flush=True)
"""


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX threads' signals")
def test_a_signal_another_thread_takes_stops_the_pool_without_waiting_for_its_task():
    """SIGTERM taken by a thread other than the main one (here a thread that sends it to
    itself) runs its handler only when the main thread wakes: the pool's wait is bounded
    (WAIT_SECONDS), so the run stops within seconds, not when the 60 s task ends."""
    out = subprocess.run([sys.executable, "-c", _SIGNAL_ON_ANOTHER_THREAD], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert line.startswith("interrupted after "), line
    assert float(line.split()[2]) < 30, line  # the task sleeps 60 s


def test_a_signal_held_back_during_the_blocked_imports_still_ends_in_130(tmp_path):
    """A signal that arrives while the program imports with SIGINT and SIGTERM blocked is
    raised when they are unblocked (as KeyboardInterrupt, from the handler): that happens
    inside main's try, so it ends like any other interrupt, not in a traceback or a kill
    (here the signal is sent to the process while it blocks it)."""
    np.save(tmp_path / "a.npy", np.full((4, 4), 0.25))
    code = ("import os, signal, sys\n"
            "import softrank.harness.cli as cli\n"
            "real = cli._native_threads_without_stop_signals\n"
            "def held_back(**options):\n"
            "    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
            "    os.kill(os.getpid(), signal.SIGTERM)  # pending while blocked\n"
            "    real(**options)  # blocks again, imports, restores the mask below ours\n"
            "    signal.pthread_sigmask(signal.SIG_SETMASK, old)  # delivered here\n"
            "cli._native_threads_without_stop_signals = held_back\n"
            f"sys.argv = ['softrank', 'bracket', {str(tmp_path / 'a.npy')!r}, '--eps', '0.5']\n"
            "sys.exit(cli.main())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 130, (out.returncode, out.stderr)
    assert out.stderr.strip() == "softrank bracket: interrupted"


def test_the_program_blocks_stop_signals_in_native_threads_it_starts_at_import():
    """As a program, the CLI imports numpy, scipy and HiGHS with SIGINT and SIGTERM blocked:
    their threads (BLAS pools) block both (SigBlk bits 1 and 14 in /proc), the main thread
    neither, so the kernel hands both signals to the main thread."""
    if not os.path.exists("/proc/self/task"):
        pytest.skip("needs /proc")
    code = ("import os, sys\n"
            "from softrank.harness.cli import _native_threads_without_stop_signals\n"
            "assert 'numpy' not in sys.modules\n"
            "_native_threads_without_stop_signals()\n"
            "me = str(os.getpid())\n"
            "for t in sorted(os.listdir('/proc/self/task')):\n"
            "    with open(f'/proc/self/task/{t}/status') as f:\n"
            "        blk = [l.split()[1] for l in f if l.startswith('SigBlk')][0]\n"
            "    print('main' if t == me else 'other', blk)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.strip().splitlines()]
    both = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))  # bit n - 1: signal n
    assert [int(b, 16) & both for who, b in rows if who == "main"] == [0]
    others = [int(b, 16) & both for who, b in rows if who == "other"]
    assert others and all(b == both for b in others), rows


# ------------------------------------------------------------- nothing of the user's is replaced

def test_audit_refuses_a_directory_it_did_not_create(tmp_path, capsys):
    """--out holding the user's own files and no softrank ledger: refused before any work,
    naming what is there; the files are untouched."""
    p = _panel(tmp_path)
    user = tmp_path / "userdir"
    user.mkdir()
    (user / "report.md").write_text("my notes\n")
    (user / "summary.json").write_text('{"mine": true}\n')
    rc = main(["audit", "--panel", str(p), "--out", str(user), "--workers", "1", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "--out" in err and "report.md, summary.json" in err
    assert len(err.strip().splitlines()) == 1
    assert (user / "report.md").read_text() == "my notes\n"
    assert sorted(x.name for x in user.iterdir()) == ["report.md", "summary.json"]
    # an empty directory, or a finished audit's own directory, is fine
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["audit", "--panel", str(p), "--out", str(empty), "--workers", "1", "--quiet",
                 "--study-boot", "0", "--attacks", "none"]) == 0
    assert main(["audit", "--panel", str(p), "--out", str(empty), "--workers", "1", "--quiet",
                 "--study-boot", "0", "--attacks", "none"]) == 0


def test_saved_certificates_of_two_matrices_do_not_collide(tmp_path, capsys):
    """Names carry the matrix's hash: bracketing B into A's directory adds files; bracketing
    A again refuses to replace them unless --overwrite."""
    fa, fb = tmp_path / "A.npy", tmp_path / "B.npy"
    np.save(fa, _block_perm(k=3, size=4))
    np.save(fb, _block_perm(k=4, size=3))
    d = tmp_path / "certs"
    assert main(["bracket", str(fa), "--eps", "0.2", "--save-certificates", str(d)]) == 0
    first = {p.name: p.read_bytes() for p in d.glob("*.npz")}
    assert len(first) == 2
    assert main(["bracket", str(fb), "--eps", "0.2", "--save-certificates", str(d)]) == 0
    after = {p.name: p.read_bytes() for p in d.glob("*.npz")}
    assert len(after) == 4 and all(after[k] == v for k, v in first.items())
    capsys.readouterr()
    assert main(["bracket", str(fa), "--eps", "0.2", "--save-certificates", str(d)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["bracket", str(fa), "--eps", "0.2", "--save-certificates", str(d),
                 "--overwrite"]) == 0
    capsys.readouterr()
    assert main(["verify", str(d)]) == 0
    assert "4 of 4 certificates hold" in capsys.readouterr().out


def test_eps_next_to_one(tmp_path, capsys):
    """eps = 1 - 1e-12: a row summing to 1 still proves r_eps >= 1 (the margin is the
    rounding of the row sum, not the 1e-9 aim), so uniform attention is resolved at rank 1.
    Rows that sum to 1 - 1e-9 (within the accepted tolerance) do not: r_eps may be 0, the
    cell is an error, and the output says why."""
    f = tmp_path / "U.npy"
    np.save(f, np.full((4, 4), 0.25))
    assert main(["bracket", str(f), "--eps", str(1 - 1e-12), "--json"]) == 0
    (b,) = json.loads(capsys.readouterr().out)
    assert (b["lower"], b["upper"], b["verdict"]) == (1, 1, "resolved")
    A = np.full((4, 4), 0.25)
    A[:, 0] -= 1e-9
    np.save(f, A)
    assert main(["bracket", str(f), "--eps", str(1 - 1e-12)]) == 1
    out = capsys.readouterr().out
    assert "error" in out and "r_eps >= 1 cannot be certified" in out


def test_bracket_into_a_closed_pipe_is_not_a_traceback(tmp_path):
    import subprocess
    import sys

    A = np.full((6, 6), 1 / 6)
    np.save(tmp_path / "A.npy", A)
    # 30 tolerances: about 120 kB of JSON, more than a pipe holds once `head` has gone
    eps = " ".join(str(round(0.05 + 0.03 * i, 3)) for i in range(30))
    exe = [sys.executable, "-c", "import sys; from softrank.harness.cli import main; "
           "sys.exit(main())"]
    p = subprocess.run(" ".join(f"'{x}'" for x in exe) +
                       f" bracket '{tmp_path / 'A.npy'}' --eps {eps} --json | head -c 1",
                       shell=True, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr


def test_laws_and_studies_never_replace_files_without_overwrite(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "laws.md").write_text("my own notes")
    (mine / "blockwidth.csv").write_text("my data")
    assert main(["laws", "--quick", "--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "laws.md" in err and "--overwrite" in err
    assert main(["study", "block-width", "--from", str(tmp_path / "nowhere"), "--out",
                 str(mine)]) == 2
    assert "blockwidth.csv" in capsys.readouterr().err
    assert (mine / "laws.md").read_text() == "my own notes"
    assert (mine / "blockwidth.csv").read_text() == "my data"


def test_a_reused_directory_loses_the_previous_reports_stale_files_only(tmp_path, capsys):
    import os

    p = tmp_path / "s.toml"
    p.write_text("eps = [0.5]\n[[synthetic]]\nfamily = 'grid'\nd = 1\nn = 8\n")
    out = tmp_path / "out"
    args = ["audit", "--panel", str(p), "--out", str(out), "--quiet", "--workers", "1",
            "--study-boot", "0"]
    assert main(args) == 0
    # as if the previous run had been of a panel with MiniLM heads and its studies
    s = json.loads((out / "summary.json").read_text())
    s["plots"].append("minilm_w64_eps0.5.png")
    (out / "summary.json").write_text(json.dumps(s))
    (out / "studies").mkdir(exist_ok=True)
    stale = [out / "minilm_w64_eps0.5.png", out / "studies" / "addon.md"]
    keep = [out / "my-notes.txt", out / "studies" / "my-study.md"]
    for f in stale + keep:
        f.write_text("x")
        os.utime(f, (1e9, 1e9))
    assert main(args) == 0
    assert not any(f.exists() for f in stale) and all(f.exists() for f in keep)
    assert (out / "families.png").exists()

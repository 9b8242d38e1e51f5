"""The audit as a pipeline of stages (softrank.cells): order, records, failures, user stages."""

import csv
import json
import textwrap

import numpy as np
import pytest

from softrank.attacks import AttackStage
from softrank.cells import ID_COLUMNS, OperatorCells, check_stages, run_stages, stage_columns
from softrank.certifiers.bracket import BracketStage
from softrank.errors import InvalidArgumentError, SoftrankError
from softrank.generators.synthetic import planted_blocks
from softrank.harness.audit import CSV_COLUMNS, default_stages, load_stages, run_audit
from softrank.harness.cli import main


class Doubler:
    """Writes 2 eps: checks that rows and tolerances stay in order."""
    name = "doubler"
    columns = ("two_eps",)

    def run(self, cells):
        return [{"two_eps": 2 * e} for e in cells.eps]


class Gap:
    """Reads the bracket stage's result: the gap upper - lower of each cell."""
    name = "gap"
    columns = ("gap",)

    def run(self, cells):
        return [{"gap": b.upper - b.lower} for b in cells.brackets]


class Broken:
    name = "broken"
    columns = ("never",)

    def run(self, cells):
        raise RuntimeError("this stage always\nfails")


class Trespasser:
    name = "trespasser"
    columns = ("mine",)

    def run(self, cells):
        return [{"mine": 1, "lower": 99} for _ in cells.eps]


def _op():
    # planted blocks: r_eps = k = 3 exactly for delta <= eps < 1 - 2 delta
    return planted_blocks(12, 12, 3, 0.05, seed=0)


def test_stages_run_in_order_and_are_recorded_by_name():
    op = _op()
    rows = run_stages(op, [0.1, 0.3], [BracketStage(), Doubler(), Gap()])
    assert [r["eps"] for r in rows] == [0.1, 0.3]
    assert [r["two_eps"] for r in rows] == [0.2, 0.6]
    for r in rows:
        assert (r["lower"], r["upper"]) == (3, 3)  # the planted rank, from both sides
        assert r["gap"] == 0
        rec = json.loads(r["stages"])
        assert list(rec) == ["bracket", "doubler", "gap"]
        assert all(v["seconds"] >= 0 and "error" not in v for v in rec.values())
    assert list(rows[0]) == stage_columns([BracketStage(), Doubler(), Gap()])


def test_a_failing_stage_leaves_its_columns_empty_and_the_rest_runs():
    rows = run_stages(_op(), [0.1], [BracketStage(), Broken(), Doubler()])
    (r,) = rows
    assert r["never"] == "" and r["two_eps"] == 0.2 and r["lower"] == 3
    rec = json.loads(r["stages"])
    assert rec["broken"]["error"] == "RuntimeError: this stage always fails"  # one line


def test_a_stage_cannot_write_columns_it_does_not_declare():
    (r,) = run_stages(_op(), [0.1], [BracketStage(), Trespasser()])
    assert r["lower"] == 3 and r["mine"] == ""
    assert "does not declare" in json.loads(r["stages"])["trespasser"]["error"]


def test_the_attack_stage_needs_the_bracket_first():
    (r,) = run_stages(_op(), [0.1], [AttackStage("quick")])
    assert "bracket stage must run first" in json.loads(r["stages"])["attack"]["error"]


def test_the_attack_stage_may_rewrite_the_verdict_only():
    assert AttackStage.rewrites == ("verdict",)
    cells = OperatorCells(_op(), (0.1,))
    assert AttackStage("none").run(cells) == [{}]


@pytest.mark.parametrize("stages, words", [
    ([Doubler(), Doubler()], "given twice"),
    ([Doubler(), type("D2", (), {"name": "d2", "columns": ("two_eps",),
                                "run": lambda self, c: []})()], "already written by stage"),
    ([type("E", (), {"name": "e", "columns": ("eps",), "run": lambda self, c: []})()],
     "operator's identity"),
    ([object()], "is not a stage"),
    ([type("C", (), {"name": "c", "columns": "abc", "run": lambda self, c: []})()],
     "tuple of column names"),
])
def test_check_stages_refuses_clashes(stages, words):
    with pytest.raises(InvalidArgumentError, match=words):
        check_stages(stages)


def test_default_stages_make_the_documented_columns():
    names = [st.name for st in default_stages("none")]
    assert names == ["bracket", "attack", "native-geometry", "b1-features",
                     "intrinsic-descriptor", "gauge-features"]
    assert CSV_COLUMNS[:len(ID_COLUMNS)] == list(ID_COLUMNS) and CSV_COLUMNS[-1] == "stages"
    for c in ("lower", "upper", "verdict", "attack", "rho_Q", "b1_tsvd", "int_logq",
              "gauge_native", "diagnostics"):
        assert c in CSV_COLUMNS


def test_a_descriptor_failure_is_recorded_not_silent():
    # one row attends only to key 0: no common positive support and no factors
    A = np.full((4, 4), 0.25)
    A[0] = [1.0, 0, 0, 0]
    from softrank.operators import Operator

    (r,) = run_stages(Operator(A=A), [0.25], default_stages("none"))
    rec = json.loads(r["stages"])
    assert r["int_r"] == "" and "error" in rec["intrinsic-descriptor"]
    assert r["lower"] != "" and "error" not in rec["bracket"]


@pytest.fixture
def stage_module(tmp_path, monkeypatch):
    (tmp_path / "mystages.py").write_text(textwrap.dedent("""
        class KeyCount:
            name = "key-count"
            columns = ("keys",)

            def run(self, cells):
                return [{"keys": cells.operator.A.shape[1]} for _ in cells.eps]

        not_a_stage = 3
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "mystages"


def test_user_stage_by_spec_in_an_audit_and_resume_checks_it(tmp_path, stage_module):
    panel = tmp_path / "p.toml"
    panel.write_text('eps = [0.1, 0.3]\n[[synthetic]]\nfamily = "planted_blocks"\nm = 12\n'
                     'N = 10\nk = 3\ndelta = 0.05\nseed = 0\n')
    out = tmp_path / "out"
    assert main(["audit", "--panel", str(panel), "--out", str(out), "--quiet", "--workers", "1",
                 "--attacks", "none", "--study-boot", "0",
                 "--stage", f"{stage_module}:KeyCount"]) == 0
    with open(out / "brackets.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["keys"] for r in rows] == ["10", "10"]
    cols = list(rows[0])
    assert cols.index("keys") == len(cols) - 2 and cols[-1] == "stages"
    assert "key-count" in json.loads(rows[0]["stages"])


def test_resume_without_a_stage_is_another_run(tmp_path, stage_module):
    op, out = _op(), tmp_path / "out"
    run_audit([op], [0.1], out, workers=1, progress=False, attacks="none",
              stages=[f"{stage_module}:KeyCount"])
    # the ledger's identity names the stages: resuming without the stage is refused
    with pytest.raises(SoftrankError, match="stages"):
        run_audit([op], [0.1], out, workers=1, progress=False, attacks="none", resume=True)


@pytest.mark.parametrize("spec, words", [
    ("mystages:not_a_stage", "expected an object with name, columns and run"),
    ("mystages:Missing", "has no attribute"),
    ("no_such_module_xyz:Stage", "cannot import"),
    ("not a spec", "expected MODULE:OBJECT"),
])
def test_load_stages_refuses_bad_specs(spec, words, stage_module):
    with pytest.raises(InvalidArgumentError, match=words):
        load_stages([spec])


def test_a_user_stage_that_fails_is_named_in_the_summary_and_report(tmp_path, stage_module,
                                                                    capsys):
    (tmp_path / "brokenstage.py").write_text(textwrap.dedent("""
        class Broken:
            name = "broken"
            columns = ("x",)

            def run(self, cells):
                raise RuntimeError("kaboom")
    """))
    panel = tmp_path / "p.toml"
    panel.write_text('eps = [0.3]\n[[synthetic]]\nfamily = "grid"\nd = 1\nn = 8\n')
    out = tmp_path / "out"
    assert main(["audit", "--panel", str(panel), "--out", str(out), "--workers", "1",
                 "--attacks", "none", "--study-boot", "0", "--stage", "brokenstage:Broken"]) == 0
    err = capsys.readouterr().err
    assert "stage 'broken' failed on 1 of 1 operators" in err and "kaboom" in err
    s = json.loads((out / "summary.json").read_text())
    assert s["stage_errors"]["broken"]["operators"] == 1
    assert "kaboom" in s["stage_errors"]["broken"]["first"]
    assert "**stage errors**" in (out / "report.md").read_text()


def test_a_bad_stage_spec_is_refused_before_any_operator_is_built(tmp_path, monkeypatch,
                                                                   capsys):
    import softrank.harness.panels as panels

    def no_build(*a, **kw):
        raise AssertionError("operators were built before the spec was checked")

    monkeypatch.setattr(panels, "materialize", no_build)
    panel = tmp_path / "p.toml"
    panel.write_text('eps = [0.3]\n[[synthetic]]\nfamily = "grid"\nd = 1\nn = 8\n')
    for opt in (["--stage", "nosuch_module_xyz:thing"], ["--certifier", "nosuch_module_xyz:c"],
                ["--scheduler", "tcp://127.0.0.1:1"]):
        out = tmp_path / "never"
        assert main(["audit", "--panel", str(panel), "--out", str(out), "--quiet", *opt]) == 2
        assert opt[0] in capsys.readouterr().err
        assert not out.exists()  # a refused run leaves no directory behind

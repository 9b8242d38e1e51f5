"""The audit as a pipeline of stages (softrank.audit.pipeline, softrank.audit.config): order,
records, failures, refutations, user stages, the frozen settings."""

import csv
import json
import textwrap

import numpy as np
import pytest

from softrank.audit import (ID_COLUMNS, AuditConfig, OperatorCells, Refutation, check_stages,
                            default_stages, load_stages, read_stages, run_stages,
                            stage_columns)
from softrank.audit.attack_stage import AttackStage
from softrank.audit.bracket_stage import BracketStage
from softrank.errors import InvalidArgumentError, SoftrankError
from softrank.generators.synthetic import planted_blocks
from softrank.harness.runner import CSV_COLUMNS, run_audit
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
        rec = read_stages(r)
        assert list(rec) == ["bracket", "doubler", "gap"]
        assert all(v.seconds >= 0 and not v.error for v in rec.values())
    assert list(rows[0]) == stage_columns([BracketStage(), Doubler(), Gap()])


def test_a_failing_stage_leaves_its_columns_empty_and_the_rest_runs():
    rows = run_stages(_op(), [0.1], [BracketStage(), Broken(), Doubler()])
    (r,) = rows
    assert r["never"] == "" and r["two_eps"] == 0.2 and r["lower"] == 3
    assert read_stages(r)["broken"].error == "RuntimeError: this stage always fails"  # one line


def test_a_stage_cannot_write_columns_it_does_not_declare():
    (r,) = run_stages(_op(), [0.1], [BracketStage(), Trespasser()])
    assert r["lower"] == 3 and r["mine"] == ""
    assert "does not declare" in read_stages(r)["trespasser"].error


def test_the_attack_stage_needs_the_bracket_first():
    (r,) = run_stages(_op(), [0.1], [AttackStage(attacks="quick")])
    assert "bracket stage must run first" in read_stages(r)["attack"].error


def test_the_attack_stage_rewrites_nothing():
    assert not hasattr(AttackStage, "rewrites")
    cells = OperatorCells(_op(), (0.1,))
    assert AttackStage(attacks="none").run(cells) == [{}]


class Refuter:
    """Refutes the second cell's lower certificate (as the attack does on a success)."""
    name = "refuter"
    columns = ("refuted",)

    def run(self, cells):
        cells.refute(1, Refutation(self.name, cells.brackets[1].lower, 1))
        return [{"refuted": i == 1} for i in range(len(cells.eps))]


def test_a_refutation_makes_the_cell_unsound_and_leaves_the_bracket_alone():
    seen = {}

    class Keep:
        name = "keep"
        columns = ()

        def run(self, cells):
            seen["brackets"] = cells.brackets
            return [{} for _ in cells.eps]

    rows = run_stages(_op(), [0.1, 0.3], [BracketStage(), Refuter(), Keep()])
    assert [r["verdict"] for r in rows] == ["resolved", "unsound"]
    assert [(r["lower"], r["upper"]) for r in rows] == [(3, 3), (3, 3)]
    # the bracket stage's own result is what it published: resolved at both tolerances
    assert [b.verdict for b in seen["brackets"]] == ["resolved", "resolved"]


def test_a_stage_publishes_once_one_result_per_tolerance():
    cells = OperatorCells(_op(), (0.1, 0.3))
    with pytest.raises(InvalidArgumentError, match="one per tolerance"):
        cells.publish("x", [1])
    cells.publish("x", [1, 2])
    assert cells.published("x") == (1, 2) and cells.published("y") == ()
    with pytest.raises(InvalidArgumentError, match="already"):
        cells.publish("x", [3, 4])
    with pytest.raises(InvalidArgumentError, match="index"):
        cells.refute(2, Refutation("x", 3, 2))


@pytest.mark.parametrize("stages, words", [
    ([Doubler(), Doubler()], "given twice"),
    ([Doubler(), type("D2", (), {"name": "d2", "columns": ("two_eps",),
                                "run": lambda self, c: []})()], "already written by stage"),
    ([type("E", (), {"name": "e", "columns": ("eps",), "run": lambda self, c: []})()],
     "operator's identity"),
    ([object()], "is not a stage"),
    ([type("C", (), {"name": "c", "columns": "abc", "run": lambda self, c: []})()],
     "tuple of column names"),
    ([type("R", (), {"name": "r", "columns": ("x",), "rewrites": ("verdict",),
                     "run": lambda self, c: []})()], "writes its own columns only"),
])
def test_check_stages_refuses_clashes(stages, words):
    with pytest.raises(InvalidArgumentError, match=words):
        check_stages(stages)


def test_default_stages_make_the_documented_columns():
    names = [st.name for st in default_stages(AuditConfig(eps=(0.25,), attacks="none"))]
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

    (r,) = run_stages(Operator(A=A), [0.25],
                      default_stages(AuditConfig(eps=(0.25,), attacks="none")))
    rec = read_stages(r)
    assert r["int_r"] == "" and rec["intrinsic-descriptor"].error
    assert r["lower"] != "" and not rec["bracket"].error


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
    assert "key-count" in read_stages(rows[0])


def test_resume_without_a_stage_is_another_run(tmp_path, stage_module):
    op, out = _op(), tmp_path / "out"
    run_audit([op], AuditConfig(eps=(0.1,), attacks="none",
                                stages=(f"{stage_module}:KeyCount",)),
              out, workers=1, progress=False)
    # the ledger's identity names the stages: resuming without the stage is refused
    with pytest.raises(SoftrankError, match="stages"):
        run_audit([op], AuditConfig(eps=(0.1,), attacks="none"), out, workers=1,
                  progress=False, resume=True)


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


# ---------------------------------------------------------------- the settings: AuditConfig

@pytest.mark.parametrize("kw, words", [
    ({"eps": ()}, "eps: expected at least one"),
    ({"eps": (0.1, 1.5)}, "0 < eps < 1"),
    ({"eps": (0.1,), "attacks": "fierce"}, "attacks"),
    ({"eps": (0.1,), "effort": "medium"}, "effort"),
    ({"eps": (0.1,), "cell_timeout": -1}, "cell_timeout"),
    ({"eps": (0.1,), "validated": "yes"}, "validated"),
    ({"eps": (0.1,), "certifiers": "mypkg:C"}, "certifiers: expected a list"),
    ({"eps": (0.1,), "certifiers": ("nosuch_module_xyz:C",)}, "cannot import"),
    ({"eps": (0.1,), "stages": ("nosuch_module_xyz:S",)}, "cannot import"),
])
def test_audit_config_refuses_bad_settings_by_name(kw, words):
    with pytest.raises(InvalidArgumentError, match=words):
        AuditConfig(**kw)


def test_audit_config_is_frozen_and_its_identity_is_the_ledgers():
    import dataclasses
    import pickle

    c = AuditConfig(eps=[0.3, 0.1], cell_timeout=5, effort="fast")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.effort = "full"
    assert c.eps == (0.3, 0.1) and c.cell_timeout == 5.0
    assert c.identity() == {"eps": [0.3, 0.1], "validated": False, "attacks": "quick",
                            "cell_timeout": 5.0, "effort": "fast", "certifiers": [],
                            "stages": ["bracket", "attack", "native-geometry", "b1-features",
                                       "intrinsic-descriptor", "gauge-features"]}
    assert list(c.columns) == CSV_COLUMNS
    back = pickle.loads(pickle.dumps(c))  # what a worker receives
    assert back == c and back.identity() == c.identity() and back.columns == c.columns


def test_a_stage_class_is_instantiated_like_a_spec():
    (st,) = load_stages([Doubler])
    assert isinstance(st, Doubler)
    with pytest.raises(InvalidArgumentError, match="could not be instantiated"):
        load_stages([Refutation])


def test_run_audit_takes_a_config(tmp_path):
    with pytest.raises(InvalidArgumentError, match="AuditConfig"):
        run_audit([_op()], [0.1], tmp_path / "out", workers=1, progress=False)


def test_a_refuted_cell_reads_back_and_names_its_refutation(tmp_path):
    from softrank.audit import read_cell
    from softrank.audit.record import refutations

    rows = run_stages(_op(), [0.1, 0.3], [BracketStage(), Refuter()])
    typed = [read_cell(r) for r in rows]  # an unsound cell with lower = upper is readable
    assert [c["verdict"] for c in typed] == ["resolved", "unsound"]
    assert refutations(rows[0]) == []
    (ref,) = refutations(rows[1])
    assert (ref.by, ref.claimed, ref.found) == ("refuter", 3, 1)
    assert list(typed[1]["stages"]["refuter"].refuted) == [0.3]


class RefutesThenFails:
    name = "refutes-then-fails"
    columns = ("x",)

    def run(self, cells):
        cells.refute(0, Refutation(self.name, cells.brackets[0].lower, 1))
        raise RuntimeError("after the refutation")


class RefutesBadly:
    name = "refutes-badly"
    columns = ()

    def run(self, cells):
        cells.refute(0, "not a refutation")
        return [{} for _ in cells.eps]


@pytest.mark.parametrize("stage, words", [
    (RefutesThenFails(), "RuntimeError: after the refutation"),
    (RefutesBadly(), "expected a softrank.audit.Refutation"),
])
def test_a_failed_stage_refutes_nothing(stage, words):
    (r,) = run_stages(_op(), [0.1], [BracketStage(), stage])
    rec = read_stages(r)[stage.name]
    assert words in rec.error and not rec.refuted
    assert r["verdict"] == "resolved"


def test_a_refutation_must_be_of_a_smaller_rank():
    cells = OperatorCells(_op(), (0.1,))
    with pytest.raises(InvalidArgumentError, match="does not refute"):
        cells.refute(0, Refutation("x", 3, 3))


class NumpyValues:
    name = "numpy-values"
    columns = ("a", "b", "c")

    def run(self, cells):
        return [{"a": np.float32(1.5), "b": np.int64(3), "c": np.bool_(True)} for _ in cells.eps]


class ArrayValue:
    name = "array-value"
    columns = ("d", "e")

    def run(self, cells):
        return [{"d": 1, "e": np.arange(3)} for _ in cells.eps]


def test_stage_values_are_numbers_or_strings(tmp_path):
    (r,) = run_stages(_op(), [0.1], [NumpyValues(), ArrayValue()])
    assert (r["a"], r["b"], r["c"]) == (1.5, 3, True)
    assert type(r["a"]) is float and type(r["b"]) is int
    assert r["a"] == 1.5 and r["a"] != "" and not read_stages(r)["numpy-values"].error
    rec = read_stages(r)["array-value"]
    assert (r["d"], r["e"]) == ("", "")  # a stage that broke its protocol wrote nothing
    assert "wrote a ndarray to column 'e'" in rec.error


@pytest.mark.parametrize("eps, words", [([5.0], "0 < eps < 1"), ([0.3, 0.3], "repeat"),
                                        (["x"], "expected a number")])
def test_run_stages_validates_eps(eps, words):
    with pytest.raises(InvalidArgumentError, match=words):
        run_stages(_op(), eps, [Doubler()])


def test_the_cell_time_limit_reaches_the_attack():
    # the attack stage takes the audit's cell_timeout: with a limit already spent, the
    # attack of a rank-3 lower certificate stops before its first method ("held(cut
    # short)"); without one it runs its plan ("held")
    from softrank.audit.pipeline import build_stage

    assert "cell_timeout" in AttackStage.parameters
    st = build_stage(AttackStage, AuditConfig(eps=(0.1,), attacks="quick", cell_timeout=7.0))
    assert st.cell_timeout == 7.0
    (cut,) = run_stages(_op(), [0.1], [BracketStage(),
                                       AttackStage(attacks="quick", cell_timeout=1e-9)])
    (free,) = run_stages(_op(), [0.1], [BracketStage(), AttackStage(attacks="quick")])
    assert cut["lower"] == free["lower"] == 3
    assert cut["attack"] == "held(cut short)" and free["attack"] == "held"
    assert cut["attack_seconds"] < free["attack_seconds"]

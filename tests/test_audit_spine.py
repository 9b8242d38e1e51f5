"""The audit's spine: settings declared once (stage parameters, built once per process), results
written once and read typed (read_cell and the stages' registered types), one refutation
channel, the output directory locked once, the old import paths, the size of the modules."""

from __future__ import annotations

import ast
import csv
import importlib
import re
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from softrank.audit import AuditConfig, read_cell, read_cells, run_stages
from softrank.audit.bracket_stage import BracketStage
from softrank.audit.feature_stages import GaugedNative
from softrank.audit.frontier_stage import FrontierBand, FrontierStage
from softrank.audit.pipeline import build_stage, load_stages
from softrank.errors import InvalidArgumentError
from softrank.generators.synthetic import planted_blocks
from softrank.harness.cli import main
from softrank.harness.runner import run_audit

SRC = Path(__file__).resolve().parents[1] / "src" / "softrank"
ROOT = Path(__file__).resolve().parents[1]


def _op(seed=0):
    # planted blocks: r_eps = k = 3 exactly for delta <= eps < 1 - 2 delta
    return planted_blocks(12, 12, 3, 0.05, seed=seed)


# ---------------------------------------------------------------- the modules and the data


def test_no_module_of_src_over_600_lines():
    sizes = {str(p.relative_to(SRC)): len(p.read_text().splitlines())
             for p in SRC.rglob("*.py")}
    assert len(sizes) > 50
    assert {p: n for p, n in sizes.items() if n > 600} == {}


def _json_calls(path: Path) -> list[str]:
    """``json.loads``/``json.dumps`` calls of a module (by its syntax tree)."""
    tree = ast.parse(path.read_text())
    return [f"{path.name}:{n.lineno}" for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("loads", "dumps") and isinstance(n.func.value, ast.Name)
            and n.func.value.id == "json"]


def test_cells_are_read_only_through_read_cell():
    """The modules that read an audit's cells (the report, its summary and plots, diff, the
    studies) decode no column themselves: no json.loads or json.dumps there, except the
    report writing summary.json."""
    readers = [SRC / "harness" / f for f in ("report.py", "summary.py", "plots.py", "diff.py")]
    readers += sorted((SRC / "studies").glob("*.py"))
    found = [c for p in readers for c in _json_calls(p)]
    assert [c for c in found if not c.startswith("report.py")] == []
    assert len([c for c in found if c.startswith("report.py")]) == 1  # summary.json
    # the structured columns are encoded beside their types, which record.py reads
    for stage, cls in (("frontier_stage", "FrontierBand"), ("causal_stage", "RankConstructions"),
                       ("feature_stages", "GaugedNative")):
        text = (SRC / "audit" / f"{stage}.py").read_text()
        assert "register_column(" in text and f"class {cls}" in text


def test_read_cell_returns_every_registered_column_typed(tmp_path):
    out = tmp_path / "a"
    ops = [_op(), planted_blocks(10, 10, 2, 0.05, seed=1)]
    run_audit(ops, AuditConfig(eps=(0.1, 0.3), attacks="quick"), out, workers=1,
              progress=False)
    with open(out / "brackets.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    cells = read_cells(rows)
    for c in cells:
        assert type(c["lower"]) is int and type(c["svd_seconds"]) is float
        assert c["validated_rho"] is None and c["gauge_native"] is None  # empty: None
        assert c["int_r"] is None or type(c["int_r"]) is int
        assert type(c["b1_tsvd"]) is float
    assert read_cell(cells[0]) is cells[0]  # a typed cell is read as it is
    # the attack's figures are numbers where it ran, None where it did not
    attacked = [c for c in cells if c["attack"]]
    assert attacked and all(type(c["attack_seconds"]) is float for c in attacked)


def test_gauged_native_round_trip():
    g = GaugedNative(((4.0, {"g_log_rho_Q": 1.5}), (16.0, {"g_log_rho_Q": -2.0})))
    back = GaugedNative.decode(g.encode())
    assert back == g and back.at(16) == {"g_log_rho_Q": -2.0}
    with pytest.raises(KeyError):
        back.at(2.0)


# ---------------------------------------------------------------- one refutation channel


def _fake_frontier(unsound=(), below=()):
    """A band at ranks 1..3 whose ends the test chooses: lower >= upper at ``unsound``."""
    pts = [SimpleNamespace(rank=k, lower=0.2 if k in unsound else 0.1, upper=0.15)
           for k in (1, 2, 3)]
    return SimpleNamespace(points=pts, curves=[], seconds=0.01, unsound=list(unsound),
                           below_band=list(below), certificates={})


def test_a_frontier_contradiction_is_a_refutation_through_the_pipeline(monkeypatch):
    import softrank.audit.frontier_stage as fs

    monkeypatch.setattr(fs, "frontier", lambda *a, **k: _fake_frontier(unsound=(2,),
                                                                       below=(("mine", 3),)))
    rows = run_stages(_op(), [0.1, 0.3], [BracketStage(), FrontierStage(attacks="none")])
    for r in rows:
        c = read_cell(r)
        assert c["verdict"] == "unsound" and c["lower"] <= c["upper"]
        ref = c["stages"]["frontier"].refuted[c["eps"]]
        assert ref.certificate.startswith("frontier: e_") and ref.found == ref.claimed - 1
        band = c["frontier"]
        assert isinstance(band, FrontierBand) and band.unsound == (2,)
        assert band.below_band == (("mine", 3),)


def test_the_audit_exit_status_follows_the_verdicts(monkeypatch, tmp_path, capsys):
    """A frontier contradiction makes its operator's cells unsound, and the command fails on
    the verdicts alone."""
    import softrank.audit.frontier_stage as fs

    monkeypatch.setattr(fs, "frontier", lambda *a, **k: _fake_frontier(unsound=(1,)))
    p = tmp_path / "panel.toml"
    p.write_text("eps = [0.3]\n[[synthetic]]\nfamily = 'gaussian_head'\nm = 10\nN = 10\n"
                 "seed = 0\n")
    out = tmp_path / "a"
    rc = main(["audit", "--panel", str(p), "--out", str(out), "--workers", "1", "--quiet",
               "--study-boot", "0", "--attacks", "none", "--no-reference-store", "--frontier"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "UNSOUND: 1 frontier contradictions" in err
    (c,) = read_cells(csv.DictReader(open(out / "brackets.csv", newline="")))
    assert c["verdict"] == "unsound"
    assert "against frontier: e_1 > 0.2" in (out / "report.md").read_text()


# ---------------------------------------------------------------- settings declared once


class Counted:
    """A stage that takes two of the audit's settings and counts how often it is built."""

    name = "counted"
    parameters = ("effort", "reference_store")
    columns = ("effort_seen",)
    built = 0

    def __init__(self, *, effort, reference_store):
        type(self).built += 1
        self.effort, self.store = effort, reference_store

    def run(self, cells):
        return [{"effort_seen": self.effort} for _ in cells.eps]


def test_a_stage_receives_its_parameters_by_keyword(tmp_path):
    config = AuditConfig(eps=(0.3,), attacks="none", effort="fast",
                         reference_store=str(tmp_path / "store"))
    (st,) = load_stages([Counted], config)
    assert st.effort == "fast"
    # the store arrives opened, the same object for every stage of the process
    assert st.store is config.setting("reference_store")
    cons, tests = config.setting("certifiers")  # loaded: no third-party methods here
    assert list(cons) == [] and list(tests) == []

    class Unknown:
        name, columns, parameters = "unknown", ("x",), ("time_limit",)

        def __init__(self, **kw):
            pass

        def run(self, cells):
            return [{}]

    with pytest.raises(InvalidArgumentError,
                       match=r"^stages: 'Unknown': declares the parameter 'time_limit', which "
                             r"is not a setting of the audit \(one of eps, validated, attacks"):
        build_stage(Unknown, config)
    with pytest.raises(InvalidArgumentError, match="declares parameters"):
        load_stages([Counted])  # a class with parameters needs the config


def test_the_pipeline_is_built_once_per_process(tmp_path):
    """Three operators in one process: the stages (and the store they hold) are built once."""
    Counted.built = 0
    config = AuditConfig(eps=(0.3,), attacks="none", stages=(Counted,),
                         reference_store=str(tmp_path / "store"))
    assert Counted.built == 1  # the config builds its pipeline once, to know its columns
    run_audit([_op(0), _op(1), _op(2)], config, tmp_path / "a", workers=1, progress=False)
    assert Counted.built == 1
    assert config.pipeline()[0] is config.pipeline()[0]


def test_the_worked_example_adds_a_setting_in_the_config_and_the_stage(tmp_path):
    """examples/topk_stage.py, README *Stages*: the setting reaches the stage validated, is
    part of the run's identity, and the column holds an independently computed value."""
    from examples.topk_stage import TopKConfig

    with pytest.raises(InvalidArgumentError, match="^top_k: expected an integer >= 1, got 0"):
        TopKConfig(eps=(0.3,), top_k=0)
    op = _op()
    config = TopKConfig(eps=(0.3,), attacks="none", top_k=2,
                        stages=("examples.topk_stage:TopKMassStage",))
    assert config.identity()["top_k"] == 2 and "top-k-mass" in config.identity()["stages"]
    rows = run_audit([op], config, tmp_path / "a", workers=1, progress=False)
    expected = max(1.0 - sum(sorted(row)[-2:]) for row in op.A.tolist())
    assert rows[0]["top_k_tail"] == pytest.approx(expected, abs=1e-9)
    # the README shows the example's stage as it is in the file
    readme = (ROOT / "README.md").read_text()
    src = (ROOT / "examples" / "topk_stage.py").read_text()
    stage = src[src.index("class TopKMassStage"):].strip()
    assert stage in readme


# ---------------------------------------------------------------- rooms and the lock


@pytest.mark.parametrize("old, name, new", [
    ("softrank.harness.audit", "run_audit", "softrank.harness.runner"),
    ("softrank.harness.audit", "check_out_dir", "softrank.validation"),
    ("softrank.harness.store", "Ledger", "softrank.harness.ledger"),
    ("softrank.certifiers.bracket", "validate_eps", "softrank.validation"),
    ("softrank.certifiers.bracket", "check_effort", "softrank.validation"),
    ("softrank.operators", "parse_rank", "softrank.validation"),
])
def test_old_import_paths_work_with_a_deprecation_warning(old, name, new):
    mod = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=re.escape(f"{old}.{name} has moved to {new}")):
        obj = getattr(mod, name)
    assert obj is getattr(importlib.import_module(new), name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError):
            getattr(mod, "no_such_name")


def test_softrank_audit_locks_its_output_directory_once(tmp_path, monkeypatch):
    from softrank.harness.lock import AuditLock

    taken = []
    acquire = AuditLock.acquire
    monkeypatch.setattr(AuditLock, "acquire", lambda self: taken.append(self) or acquire(self))
    p = tmp_path / "panel.toml"
    p.write_text("eps = [0.3]\n[[synthetic]]\nfamily = 'gaussian_head'\nm = 8\nN = 8\nseed = 0\n")
    assert main(["audit", "--panel", str(p), "--out", str(tmp_path / "a"), "--workers", "1",
                 "--quiet", "--study-boot", "0", "--attacks", "none",
                 "--no-reference-store"]) == 0
    assert len(taken) == 1
    with pytest.raises(InvalidArgumentError, match="^lock: expected the held AuditLock"):
        run_audit([_op()], AuditConfig(eps=(0.3,)), tmp_path / "b",
                  lock=AuditLock(tmp_path / "b"))


# ---------------------------------------------------------------- what a trial found


class FalseRefuter:
    """Claims a refutation of a lower certificate the cell does not have."""

    name, columns = "false-refuter", ()

    def run(self, cells):
        from softrank.audit import Refutation

        cells.refute(0, Refutation("false-refuter", 99, 0))
        return [{} for _ in cells.eps]


def test_a_refutation_must_name_the_cells_certified_lower_end():
    (r,) = run_stages(_op(), [0.1], [BracketStage(), FalseRefuter()])
    c = read_cell(r)
    assert c["verdict"] != "unsound" and c["stages"]["false-refuter"].refuted == {}
    assert ("claims the lower certificate of rank 99 wrong, but the cell's certified lower "
            f"end is {c['lower']}") in c["stages"]["false-refuter"].error


class Squatter:
    name, columns = "squatter", ("rank_lower",)

    def run(self, cells):
        return [{"rank_lower": "many"} for _ in cells.eps]


def test_a_stage_cannot_write_a_column_another_stage_types(tmp_path):
    with pytest.raises(InvalidArgumentError,
                       match="^stages: 'squatter': column 'rank_lower' belongs to stage 'causal'"):
        AuditConfig(eps=(0.3,), stages=(Squatter,))


def test_malformed_typed_columns_are_refused_naming_the_cell():
    band = FrontierBand.decode(json_band := (
        '{"attacks":{"tried":0,"closest":null,"succeeded":[]},"ranks":[1,2],"lower":[0.5,0.1],'
        '"upper":[0.4,0.2],"curves":{},"seconds":1.0,"unsound":[1],"below_band":[]}'))
    assert band.unsound == (1,)
    for bad, why in ((json_band.replace('"unsound":[1]', '"unsound":[]'), "crosses itself"),
                     (json_band.replace('"lower":[0.5,0.1]', '"lower":[0.5]'), "2 ranks, 1 lower"),
                     (json_band.replace('"ranks":[1,2]', '"ranks":[2,2]'), "not increasing"),
                     (json_band.replace('"seconds":1.0,', ''), "missing 'seconds'")):
        row = {"operator_id": "op-1", "eps": "0.3", "lower": "1", "upper": "2",
               "verdict": "open", "frontier": bad}
        with pytest.raises(Exception, match=re.escape(why)) as exc:
            read_cells([row])
        assert str(exc.value).startswith("cell op-1 at eps 0.3: frontier: not softrank's record")
    causal = {"operator_id": "op-2", "eps": "0.3", "lower": "1", "upper": "2",
              "verdict": "open", "rank": "causal", "rank_lower": "10", "rank_upper": "3",
              "rank_verdict": "open"}
    with pytest.raises(Exception, match="rank_lower 10 and rank_upper 3 do not fit"):
        read_cells([causal])
    with pytest.raises(Exception, match=r"rank_lower: not softrank's record \(expected an "
                                        r"integer >= 0"):
        read_cells([{**causal, "rank_lower": "-4"}])
    with pytest.raises(Exception, match="svd_seconds: not softrank's record"):
        read_cells([{**causal, "rank_lower": "2", "svd_seconds": "nan"}])
    assert read_cells([{**causal, "rank_lower": "2", "m": "12"}])[0]["m"] == 12

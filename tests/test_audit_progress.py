"""An audit's progress lines per method on long cells (softrank.audit.bracket_stage,
softrank.harness.runner): shown once an operator has run PROGRESS_AFTER seconds, held
back before, never with --quiet."""

import logging

from softrank.audit import AuditConfig
from softrank.audit import bracket_stage
from softrank.generators.synthetic import planted_blocks
from softrank.harness import runner
from softrank.harness.runner import run_audit


def _audit(tmp_path, progress):
    op = planted_blocks(16, 16, 2, 0.04, seed=0)
    run_audit([op], AuditConfig(eps=(0.25,), attacks="none"), tmp_path / "out", workers=1,
              progress=progress)
    return op.operator_id


def _method_lines(err, op_id):
    return [ln.strip() for ln in err.splitlines() if ln.strip().startswith(f"{op_id}: eps ")]


def test_a_long_cell_shows_each_method_as_it_ends(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bracket_stage, "PROGRESS_AFTER", 0.0)
    log = logging.getLogger(bracket_stage.PROGRESS_LOGGER)
    before = (log.level, log.propagate)
    op_id = _audit(tmp_path, True)
    lines = _method_lines(capsys.readouterr().err, op_id)
    assert any(ln.startswith(f"{op_id}: eps 0.25: lower trivial: ") for ln in lines), lines
    assert any(ln.startswith(f"{op_id}: eps 0.25: upper truncated-svd: ") for ln in lines)
    assert all(ln.endswith(" s") or " s (" in ln for ln in lines), lines  # each with its time
    # the logger is as it was after the run: nothing shows outside an audit
    log = logging.getLogger(bracket_stage.PROGRESS_LOGGER)
    assert not any(isinstance(h, runner._LineHandler) for h in log.handlers)
    assert (log.level, log.propagate) == before


def test_short_cells_and_quiet_runs_show_no_method(tmp_path, capsys, monkeypatch):
    op_id = _audit(tmp_path / "short", True)  # well under 10 s
    assert _method_lines(capsys.readouterr().err, op_id) == []
    monkeypatch.setattr(bracket_stage, "PROGRESS_AFTER", 0.0)
    op_id = _audit(tmp_path / "quiet", False)
    assert _method_lines(capsys.readouterr().err, op_id) == []


def test_lines_are_held_until_the_operator_has_run_long_enough(monkeypatch):
    got = []
    log = logging.getLogger(bracket_stage.PROGRESS_LOGGER)
    handler = logging.Handler()
    handler.emit = lambda record: got.append(record.getMessage())
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    clock = iter([0.0, 1.0, 12.0, 13.0])  # construction, then one reading per line
    monkeypatch.setattr(bracket_stage.time, "perf_counter", lambda: next(clock))
    try:
        p = bracket_stage._CellProgress("op")
        p("eps 0.25: lower trivial: ok rank 1, 0.00 s")
        assert got == []  # 1 s in: held
        p("eps 0.25: lower frobenius: ok rank 3, 11.00 s")
        assert got == ["op: eps 0.25: lower trivial: ok rank 1, 0.00 s",
                       "op: eps 0.25: lower frobenius: ok rank 3, 11.00 s"]
        p("eps 0.25: upper identity: ok rank 16, 0.01 s")  # past: at once, no clock read
        assert got[-1] == "op: eps 0.25: upper identity: ok rank 16, 0.01 s"
    finally:
        log.removeHandler(handler)
        log.setLevel(logging.NOTSET)

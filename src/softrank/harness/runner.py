"""The audit run: bracket every operator of a panel at every tolerance (docs/index.md, docs/theory/checker.md).

Each operator's cells (operator x tolerance) go through the pipeline of stages of
:mod:`softrank.audit` (:func:`softrank.audit.worker.run_operator`, with the run's frozen
:class:`~softrank.audit.config.AuditConfig`), scheduled by an executor (:mod:`.executors`: a
local process pool; or :mod:`.cluster`: Dask distributed, every result brought home); they are committed to the run's ledger
(:mod:`softrank.harness.ledger`, SQLite in WAL mode) operator by operator, so an interrupted or killed run
keeps every finished cell and ``--resume`` continues it; at the end ``brackets.csv`` and
``brackets.parquet`` are exported from the ledger in panel order and the summary, report and
plots are made. Results do not depend on the executor, the number of workers or the
completion order.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..audit import AuditConfig, run_operator
from ..errors import InvalidArgumentError, SoftrankError
from ..operators import Operator
from ..stop import check as _check_stop
from ..validation import check_out_dir
from .lock import AuditLock

__all__ = ["CSV_COLUMNS", "run_audit"]

#: Columns of ``brackets.csv`` with the default stages (an audit with extra stages adds
#: theirs before ``stages``).
CSV_COLUMNS = list(AuditConfig(eps=(0.25,), attacks="none").columns)


def _task(args):
    i, op, config, out = args
    return i, run_operator(op, config, out)


def _worker_init(progress: bool = False):
    import signal

    # Ctrl-C goes to the whole process group: the parent decides, workers do not crash
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if progress:
        _method_lines(sys.stderr)


class _LineHandler(logging.StreamHandler):
    """A method's progress line on its own line: on a terminal it first clears the
    progress bar drawn in place (``\\r`` and erase to the end of the line)."""

    def format(self, record):
        line = "  " + super().format(record)
        tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        return "\r\x1b[K" + line if tty else line


def _method_lines(stream):
    """Show the methods' progress lines of long cells
    (:data:`softrank.audit.bracket_stage.PROGRESS_LOGGER`) on ``stream``; returns what
    :func:`_no_method_lines` needs to put the logger back as it was."""
    from ..audit.bracket_stage import PROGRESS_LOGGER

    log = logging.getLogger(PROGRESS_LOGGER)
    saved = (log.level, log.propagate)
    handler = _LineHandler(stream)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    return handler, saved


def _no_method_lines(shown) -> None:
    from ..audit.bracket_stage import PROGRESS_LOGGER

    handler, (level, propagate) = shown
    log = logging.getLogger(PROGRESS_LOGGER)
    log.removeHandler(handler)
    log.setLevel(level)
    log.propagate = propagate


def _fmt_time(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class _Progress:
    """Cells done, rate and time left: a bar redrawn in place on a terminal, one line per
    operator otherwise (logs)."""

    def __init__(self, total_cells: int, done_cells: int, stream, enabled: bool):
        self.total, self.done, self.start_done = total_cells, done_cells, done_cells
        self.stream, self.enabled = stream, enabled
        self.tty = enabled and hasattr(stream, "isatty") and stream.isatty()
        self.t0 = time.perf_counter()
        #: on a cluster: how many workers are in use now (shown on each line)
        self.workers = None

    def update(self, op_id: str, rows: list[dict]) -> None:
        self.done += len(rows)
        if not self.enabled:
            return
        el = max(time.perf_counter() - self.t0, 1e-9)
        rate = (self.done - self.start_done) / el * 60
        left = (self.total - self.done) / max(rate / 60, 1e-9)
        frac = self.done / max(self.total, 1)
        w = None if self.workers is None else self.workers()
        on = "" if w is None else f", {w} worker{'s' if w != 1 else ''}"
        if self.tty:
            bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
            print(f"\r[{bar}] {self.done}/{self.total} cells  {rate:6.1f} cells/min  "
                  f"~{_fmt_time(left)} left{on} ", end="", file=self.stream, flush=True)
        else:
            lo_up = " ".join("error" if r.get("verdict") == "error" else
                             f"[{r['lower']},{r['upper']}]" for r in rows)
            print(f"[{self.done:5d}/{self.total} cells] {op_id[:44]:44s} {lo_up}  "
                  f"{rate:6.1f} cells/min, ~{_fmt_time(left)} left{on}", file=self.stream, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=self.stream, flush=True)


def run_audit(operators: list[Operator], config: AuditConfig, out: Path, *,
              workers: int | None = None, progress=True, executor: str = "local",
              scheduler: str | None = None, resume: bool = False,
              identity: dict | None = None, lock=None) -> list[dict]:
    """Bracket ``operators`` at every tolerance of ``config``; returns the rows in operator order.

    Every finished operator's cells are committed to ``out/ledger.sqlite``
    (:class:`~softrank.harness.ledger.Ledger`) as they arrive; at the end ``brackets.csv``
    and ``brackets.parquet`` are exported from it. Results do not depend on the executor,
    the number of workers or the completion order.

    Parameters
    ----------
    operators : list of Operator
    config : AuditConfig
        What every cell is computed with (:class:`softrank.audit.config.AuditConfig`: tolerances,
        effort, attacks, time limit, third-party certifiers, extra stages); its
        :meth:`~softrank.audit.config.AuditConfig.identity` is part of the run's: a resumed run
        must match it (a ledger of an older version, without ``effort``, ran at
        ``"full"``), and ``softrank diff`` lists the settings that differ.
    out : path
        The output directory (:func:`check_out_dir`).
    workers : int, optional
        Processes (default: all cores); 1 runs in this process (local executor).
    executor : {"local", "dask"}
        A local process pool, or Dask distributed: a local cluster of ``workers``
        single-threaded processes, or the cluster at ``scheduler`` (``tcp://host:port``).
    resume : bool
        Continue the run whose ledger is in ``out``: finished operators are not recomputed.
    identity : dict, optional
        Extra description of the run (panel, seed) that a resumed run must match.
    lock : AuditLock, optional
        The lock on ``out`` that the caller holds already (``softrank audit`` checks
        ``out`` and takes it before any user code is loaded, and keeps it until the report
        is written): ``out`` is then neither checked nor locked again. Default: checked with
        :func:`~softrank.validation.check_out_dir` and locked for the run.

    Returns
    -------
    list of dict
        Every cell of the run (also those of a resumed run's earlier part), in panel order
        (read them with :func:`softrank.audit.record.read_cell`).

    Raises
    ------
    InvalidArgumentError
        ``config`` is not an :class:`~softrank.audit.config.AuditConfig`, or ``out`` holds files
        but no audit.
    SoftrankError
        Repeated operator ids; ``out`` in use by another audit (its lock file
        ``softrank.lock``, see :class:`~softrank.harness.lock.AuditLock`, is held for the
        run's whole life); an unfinished ledger without ``resume``; ``resume`` without a
        ledger or with a different run (see :class:`~softrank.harness.ledger.Ledger`).
    """
    if not isinstance(config, AuditConfig):
        raise InvalidArgumentError(f"config: expected a softrank.audit.config.AuditConfig, got "
                                   f"{type(config).__name__}")
    out = Path(out)
    if lock is None:
        check_out_dir(out)
        out.mkdir(parents=True, exist_ok=True)
    elif not (isinstance(lock, AuditLock) and lock.held and lock.out == out):
        raise InvalidArgumentError(f"lock: expected the held AuditLock of {str(out)!r}, got "
                                   f"{lock!r:.80}")
    ids = [op.operator_id for op in operators]
    if len(set(ids)) != len(ids):
        dup = sorted({x for x in ids if ids.count(x) > 1})
        raise SoftrankError(
            f"operators: ids repeat ({', '.join(dup[:5])}{', ...' if len(dup) > 5 else ''}); "
            "every cell is keyed by (operator_id, eps), so one would be lost. Give the panel "
            "entries distinct families (e.g. family = \"qwen2-seed1\"; a [[synthetic]] entry "
            "an id, e.g. id = \"gaussian-d32-t2-s0-n48\") or drop the repeats")
    ident = dict(identity or {})
    ident.update(config.identity())
    # ids and content hashes: a resumed run must bracket the same matrices
    ident["operators"] = [f"{op.operator_id}:{op.hash}" for op in operators]
    run = _Run(operators, config, out, ident, resume=resume, workers=workers,
               progress=progress, executor=executor, scheduler=scheduler)
    if lock is not None:
        return _audit_cells(run)
    with AuditLock(out):  # one run per directory, from the ledger to the exports
        return _audit_cells(run)


@dataclass(frozen=True)
class _Run:
    """What :func:`run_audit` was asked, validated: the operators, the cells' settings, the
    output directory, the run's identity and how the cells are scheduled."""

    operators: list
    config: AuditConfig
    out: Path
    identity: dict
    resume: bool = False
    workers: int | None = None
    progress: bool = True
    executor: str = "local"
    scheduler: str | None = None


def _audit_cells(run: _Run) -> list[dict]:
    """The body of :func:`run_audit`, under the directory's lock."""
    from .ledger import Ledger

    operators, config, out = run.operators, run.config, run.out
    ident, resume, workers, progress = run.identity, run.resume, run.workers, run.progress
    executor, scheduler = run.executor, run.scheduler
    ledger = Ledger(out, ident, resume=resume)
    n = len(operators)
    index = {op.operator_id: i for i, op in enumerate(operators)}
    finished = ledger.finished(len(config.eps)) & set(index)
    todo = [i for i in range(n) if operators[i].operator_id not in finished]
    workers = workers or os.cpu_count() or 1
    stream = sys.stderr
    bar = _Progress(n * len(config.eps), len(finished) * len(config.eps), stream, progress)
    if progress and finished:
        print(f"resuming: {len(finished)} of {n} operators already in {ledger.path}",
              file=stream, flush=True)

    def done(i, rows):
        ledger.add(i, rows)
        bar.update(operators[i].operator_id, rows)

    # largest operators first: better load balance at the end of the run
    order = sorted(todo, key=lambda i: -operators[i].A.size)
    tasks = [(i, operators[i], config, out) for i in order]
    try:
        if executor == "dask":
            from .cluster import ClusterMap

            cmap = ClusterMap(config, out, workers=workers, scheduler=scheduler, stream=stream)
            bar.workers = lambda: cmap.workers_in_use
            for i, rows in cmap.run((i, operators[i]) for i in order):
                done(i, rows)
        elif workers <= 1 or len(tasks) <= 1:
            lines = _method_lines(stream) if progress else None
            try:
                for t in tasks:
                    _check_stop()  # a stop whose KeyboardInterrupt was dropped (softrank.stop)
                    done(*_task(t))
            finally:
                if lines is not None:
                    _no_method_lines(lines)
        else:
            from .executors import local_map

            init = functools.partial(_worker_init, bool(progress))
            for i, rows in local_map(_task, tasks, workers, init):
                done(i, rows)
    except BaseException:
        bar.close()
        if progress and ledger.count():
            print(f"stopped: {ledger.count()} cells of {n * len(config.eps)} are kept in "
                  f"{ledger.path}; continue with --resume", file=stream, flush=True)
        elif progress:
            print("stopped before any cell finished", file=stream, flush=True)
        ledger.close()
        raise
    bar.close()
    rows = ledger.rows()
    ledger.export_csv(rows, out / "brackets.csv", config.columns)
    ledger.export_parquet(rows, out / "brackets.parquet", config.columns)
    ledger.mark_complete()
    ledger.close()
    return rows

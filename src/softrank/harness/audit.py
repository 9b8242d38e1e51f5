"""The audit run: bracket every operator of a panel at every tolerance (docs/index.md, docs/theory/checker.md).

Cells (operator x tolerance) are computed by an executor (:mod:`.executors`: a local
process pool, or Dask distributed) and committed to the run's ledger (:mod:`.store`, SQLite
in WAL mode) operator by operator, so an interrupted or killed run keeps every finished cell
and ``--resume`` continues it; at the end ``brackets.csv`` and ``brackets.parquet`` are
exported from the ledger in panel order and the summary, report and plots are made. Results
do not depend on the executor, the number of workers or the completion order.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ..cells import Stage, check_stages, run_stages, stage_columns
from ..certifiers.registry import load_certifiers
from ..errors import InvalidArgumentError, SoftrankError
from ..operators import Operator

__all__ = ["CSV_COLUMNS", "bracket_operator", "default_stages", "load_stages", "run_audit",
           "check_out_dir"]

def default_stages(attacks: str = "quick", certifiers=(), cell_timeout: float | None = None,
                   extra=(), effort: str = "full") -> list:
    """The stages of an audit cell, in the order they run (see :mod:`softrank.cells`).

    The bracket (:class:`~softrank.certifiers.bracket.BracketStage`), the attack on its lower
    certificate (:class:`~softrank.attacks.AttackStage`), native geometry
    (:class:`~softrank.geometry.NativeGeometryStage`), the B1 features of the add-on test
    (:class:`~softrank.studies.features.BaselineFeaturesStage`), the intrinsic descriptor
    (:class:`~softrank.geometry.IntrinsicDescriptorStage`) and the gauged native features
    (:class:`~softrank.studies.features.GaugeFeaturesStage`), then the ``extra`` stages
    (objects, or ``MODULE:OBJECT`` specs loaded with :func:`load_stages`). ``effort`` is the
    bracket's (:func:`softrank.bracket`).

    Raises
    ------
    InvalidArgumentError
        If ``attacks`` is not an attack effort, ``effort`` not one of
        :data:`softrank.certifiers.bracket.EFFORTS`, or the stages clash
        (:func:`softrank.cells.check_stages`).
    """
    from ..attacks import AttackStage
    from ..certifiers.bracket import BracketStage
    from ..geometry import IntrinsicDescriptorStage, NativeGeometryStage
    from ..studies.features import BaselineFeaturesStage, GaugeFeaturesStage

    stages = [BracketStage(certifiers, cell_timeout, effort), AttackStage(attacks),
              NativeGeometryStage(), BaselineFeaturesStage(), IntrinsicDescriptorStage(),
              GaugeFeaturesStage()]
    return check_stages(stages + load_stages(extra))


_LOADED_STAGES: dict = {}


def load_stages(specs) -> list:
    """Stages from ``MODULE:OBJECT`` specs (a class is instantiated without arguments;
    loaded once per process, so workers load them by name); objects are returned as given.

    Raises
    ------
    InvalidArgumentError
        A malformed spec, one that cannot be imported, or an object that is not a stage
        (:class:`softrank.cells.Stage`).
    """
    from ..certifiers.interface import load_object

    out = []
    for spec in specs:
        if not isinstance(spec, str):
            out.append(spec)
            continue
        st = _LOADED_STAGES.get(spec)
        if st is None:
            obj = load_object(spec, "--stage")
            if isinstance(obj, type):
                try:
                    obj = obj()
                except Exception as exc:
                    raise InvalidArgumentError(f"--stage {spec!r}: the class could not be "
                                               f"instantiated without arguments ({exc})") from exc
            if not isinstance(obj, Stage):
                raise InvalidArgumentError(f"--stage {spec!r}: expected an object with name, "
                                           "columns and run(cells)")
            st = _LOADED_STAGES[spec] = obj
        out.append(st)
    return check_stages(out)


#: Columns of ``brackets.csv`` with the default stages (an audit with extra stages adds
#: theirs before ``stages``).
CSV_COLUMNS = stage_columns(default_stages("none"))


def bracket_operator(op: Operator, eps_list, validated: bool = False, attacks: str = "none",
                     out: Path | None = None, cell_timeout: float | None = None,
                     certifiers=(), stages=(), effort: str = "full") -> list[dict]:
    """All cells of one operator as CSV-ready dicts (runs in a worker).

    ``validated``: bracket the exact softmax of the operator's factors (when it has them;
    ``validated_rho`` is then the enclosure radius, empty otherwise). ``attacks``: effort
    of the targeted attack run on every lower certificate of rank >= 2 (``"none"`` to skip;
    see :mod:`softrank.attacks`); a success is saved under ``out/counterexamples/`` and
    the cell becomes ``unsound``. ``cell_timeout``: seconds per cell (see
    :func:`softrank.bracket`'s ``time_limit``). ``certifiers``: third-party
    ``MODULE:OBJECT`` specs run beside the built-ins
    (:func:`~softrank.certifiers.registry.load_certifiers`); every method's outcome is in the
    ``diagnostics`` column (JSON). ``stages``: extra stages after the default ones
    (:func:`default_stages`). ``effort``: :func:`softrank.bracket`'s."""
    return run_stages(op, eps_list,
                      default_stages(attacks, certifiers, cell_timeout, stages, effort),
                      validated=validated, out=out)


def _task(args):
    i, op, eps_list, validated, attacks, out, cell_timeout, certifiers, stages, effort = args
    return i, bracket_operator(op, eps_list, validated, attacks, out, cell_timeout, certifiers,
                               stages, effort)


def _worker_init():
    import signal

    # Ctrl-C goes to the whole process group: the parent decides, workers do not crash
    signal.signal(signal.SIGINT, signal.SIG_IGN)


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

    def update(self, op_id: str, rows: list[dict]) -> None:
        self.done += len(rows)
        if not self.enabled:
            return
        el = max(time.perf_counter() - self.t0, 1e-9)
        rate = (self.done - self.start_done) / el * 60
        left = (self.total - self.done) / max(rate / 60, 1e-9)
        frac = self.done / max(self.total, 1)
        if self.tty:
            bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
            print(f"\r[{bar}] {self.done}/{self.total} cells  {rate:6.1f} cells/min  "
                  f"~{_fmt_time(left)} left ", end="", file=self.stream, flush=True)
        else:
            lo_up = " ".join(f"[{r['lower']},{r['upper']}]" for r in rows)
            print(f"[{self.done:5d}/{self.total} cells] {op_id[:44]:44s} {lo_up}  "
                  f"{rate:6.1f} cells/min, ~{_fmt_time(left)} left", file=self.stream, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=self.stream, flush=True)


def check_out_dir(out, arg: str = "--out") -> None:
    """Refuse an output directory that holds files but no softrank audit: an audit writes
    ``report.md``, ``summary.json``, ``brackets.csv`` and plots there, and must not replace
    what a user put there. A new or empty directory, or one with an audit's ledger or lock
    file (``softrank.lock``), is fine.

    Parameters
    ----------
    out : path
        The output directory (it need not exist).
    arg : str
        The argument named in the message.

    Raises
    ------
    InvalidArgumentError
        Naming what the directory holds.
    """
    from .lock import LOCK_NAME
    from .store import LEDGER_NAME

    out = Path(out)
    if not out.is_dir() or (out / LEDGER_NAME).exists() or (out / LOCK_NAME).exists():
        return
    present = sorted(p.name for p in out.iterdir())
    if present:
        raise InvalidArgumentError(
            f"{arg}: {str(out)!r} is not empty and holds no softrank audit ("
            f"{', '.join(present[:5])}{', ...' if len(present) > 5 else ''}); choose a new or "
            "empty directory: an audit would replace report.md, summary.json and brackets.csv")


def run_audit(operators: list[Operator], eps_list, out: Path, workers: int | None = None,
              progress=True, validated: bool = False, attacks: str = "quick",
              executor: str = "local", scheduler: str | None = None,
              cell_timeout: float | None = None, resume: bool = False,
              identity: dict | None = None, certifiers=(), stages=(),
              effort: str = "full") -> list[dict]:
    """Bracket ``operators`` x ``eps_list``; returns the rows in operator order.

    Every finished operator's cells are committed to ``out/ledger.sqlite``
    (:class:`~softrank.harness.store.Ledger`) as they arrive; at the end ``brackets.csv``
    and ``brackets.parquet`` are exported from it. Results do not depend on the executor,
    the number of workers or the completion order.

    Parameters
    ----------
    workers : int, optional
        Processes (default: all cores); 1 runs in this process (local executor).
    executor : {"local", "dask"}
        A local process pool, or Dask distributed: a local cluster of ``workers``
        single-threaded processes, or the cluster at ``scheduler`` (``tcp://host:port``).
    cell_timeout : float, optional
        Seconds per cell (operator x tolerance); a cell past it is an ``error`` verdict.
    resume : bool
        Continue the run whose ledger is in ``out``: finished operators are not recomputed.
    identity : dict, optional
        Extra description of the run (panel, seed) that a resumed run must match.
    certifiers : sequence of str
        Third-party ``MODULE:OBJECT`` specs run in every cell beside the built-ins (loaded
        here first, so a bad spec fails before any work; workers import them by name).
    stages : sequence of Stage or str
        Extra per-cell stages run after the default ones (:func:`default_stages`; objects
        or ``MODULE:OBJECT`` specs, see :mod:`softrank.cells`); their columns are added to
        ``brackets.csv`` before ``stages``.
    effort : {"full", "fast"}
        :func:`softrank.bracket`'s ``effort``, part of the run's identity: a resumed run must
        match it (a ledger of an older version, without it, ran at ``"full"``), and
        ``softrank diff`` lists it among the settings that differ.

    Returns
    -------
    list of dict
        Every cell of the run (also those of a resumed run's earlier part), in panel order.

    Raises
    ------
    SoftrankError
        Repeated operator ids; ``out`` in use by another audit (its lock file
        ``softrank.lock``, see :class:`~softrank.harness.lock.AuditLock`, is held for the
        run's whole life); an unfinished ledger without ``resume``; ``resume`` without a
        ledger or with a different run (see :class:`~softrank.harness.store.Ledger`).
    """
    from .lock import AuditLock

    certifiers = tuple(certifiers)
    load_certifiers(certifiers)
    stages = tuple(stages)
    pipeline = default_stages(attacks, certifiers, cell_timeout, stages,
                              effort)  # fails before any work
    out = Path(out)
    check_out_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    eps_list = tuple(float(e) for e in eps_list)
    ids = [op.operator_id for op in operators]
    if len(set(ids)) != len(ids):
        dup = sorted({x for x in ids if ids.count(x) > 1})
        raise SoftrankError(
            f"operators: ids repeat ({', '.join(dup[:5])}{', ...' if len(dup) > 5 else ''}); "
            "every cell is keyed by (operator_id, eps), so one would be lost. Give the panel "
            "entries distinct families (e.g. family = \"qwen2-seed1\") or drop the repeats")
    ident = dict(identity or {})
    ident.update({"eps": list(eps_list), "validated": bool(validated), "attacks": attacks,
                  "cell_timeout": cell_timeout, "effort": effort,
                  "certifiers": list(certifiers),
                  "stages": [st.name for st in pipeline],
                  # ids and content hashes: a resumed run must bracket the same matrices
                  "operators": [f"{op.operator_id}:{op.hash}" for op in operators]})
    with AuditLock(out):  # one run per directory, from the ledger to the exports
        return _audit_cells(operators, eps_list, out, ident, resume, workers, progress,
                            validated, attacks, executor, scheduler, cell_timeout, certifiers,
                            stages, stage_columns(pipeline), effort)


def _audit_cells(operators, eps_list, out, ident, resume, workers, progress, validated,
                 attacks, executor, scheduler, cell_timeout, certifiers, stages,
                 columns, effort) -> list[dict]:
    """The body of :func:`run_audit`, under the directory's lock."""
    from .store import Ledger

    ledger = Ledger(out, ident, resume=resume)
    n = len(operators)
    index = {op.operator_id: i for i, op in enumerate(operators)}
    finished = ledger.finished(len(eps_list)) & set(index)
    todo = [i for i in range(n) if operators[i].operator_id not in finished]
    workers = workers or os.cpu_count() or 1
    stream = sys.stderr
    bar = _Progress(n * len(eps_list), len(finished) * len(eps_list), stream, progress)
    if progress and finished:
        print(f"resuming: {len(finished)} of {n} operators already in {ledger.path}",
              file=stream, flush=True)

    def done(i, rows):
        ledger.add(i, rows)
        bar.update(operators[i].operator_id, rows)

    # largest operators first: better load balance at the end of the run
    order = sorted(todo, key=lambda i: -operators[i].A.size)
    tasks = [(i, operators[i], eps_list, validated, attacks, out, cell_timeout, certifiers,
              stages, effort) for i in order]
    try:
        if executor == "dask":
            from .executors import dask_map

            for i, rows in dask_map(_task, tasks, workers, scheduler):
                done(i, rows)
        elif workers <= 1 or len(tasks) <= 1:
            for t in tasks:
                done(*_task(t))
        else:
            from .executors import local_map

            for i, rows in local_map(_task, tasks, workers, _worker_init):
                done(i, rows)
    except BaseException:
        bar.close()
        if progress:
            print(f"stopped: {ledger.count()} cells of {n * len(eps_list)} are kept in "
                  f"{ledger.path}; continue with --resume", file=stream, flush=True)
        ledger.close()
        raise
    bar.close()
    rows = ledger.rows()
    ledger.export_csv(rows, out / "brackets.csv", columns)
    ledger.export_parquet(rows, out / "brackets.parquet", columns)
    ledger.mark_complete()
    ledger.close()
    return rows

"""Audits on a Dask cluster: every result comes home (README, *Audits on a cluster*).

A worker of a cluster may run on another machine, with its own disk: the client's output
directory and reference store are not there. So a cell never opens a path of the client's on
a worker. The client sends each operator with the store entries its cells may read
(:func:`softrank.refstore.transfer.pack_entries`); the worker runs the operator's cells in a
private directory of its own (:func:`run_cell_task`: a store holding those entries, an
output directory for counterexamples), removed when the task ends; and the result carries
home the rows, the store entries the cells wrote or changed, the entries they removed and
every counterexample. The client writes the counterexamples into its output directory,
receives the entries into its store, each checked as a store read is checked
(:func:`~softrank.refstore.transfer.receive_entries`), and only then commits the rows to the
ledger: nothing of the audit is left only on a worker, and a cell in the ledger has its
entries and counterexamples home.

Faults (:class:`ClusterMap`):

* workers are probed before any cell is sent (:func:`probe`): a worker without softrank, or
  with an engine other than the client's (another softrank or another numpy, scipy, highspy,
  ...: :func:`~softrank.refstore.keys.engine_key`), gets no cell; with no usable worker the
  audit stops within :data:`WORKER_WAIT` seconds, naming the scheduler and what each worker
  lacks;
* a worker that dies mid-cell: the scheduler runs the cell again elsewhere; the client
  commits each operator once (its result arrives once; the ledger ignores a repeat). A cell
  that takes down every worker it meets (the scheduler's ``allowed-failures``, 3 by
  default) is recorded as ``error`` cells naming the operator
  (:func:`softrank.audit.worker.failed_operator`), and the audit goes on;
* a cell that raises on a worker is tried once more, then stops the audit (the cells done
  are kept: ``--resume``, against the same cluster or another);
* when every usable worker has left, the audit waits :data:`WORKER_WAIT` seconds for a usable one,
  then stops the same way.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..audit import AuditConfig, run_operator
from ..audit.record import (STAGES_COLUMN, encode_diagnostics, encode_stages,
                            read_diagnostics, read_stages)
from ..audit.worker import failed_operator
from ..errors import InvalidArgumentError, SoftrankError
from ..refstore import keys
from ..refstore.transfer import (Harvest, Parcel, harvest_entries, pack_entries,
                                 receive_entries, unpack_entries)
from ..stop import check as _check_stop

__all__ = ["ClusterMap", "CellTask", "Homecoming", "run_cell_task", "probe", "WORKER_WAIT"]

#: Seconds the client waits for a usable worker (none connected yet, or all gone) before it
#: stops, naming the scheduler and what the workers lack.
WORKER_WAIT = 30.0

#: How often the client looks at the cluster while cells run, in seconds.
POLL_SECONDS = 1.0


@dataclass(frozen=True)
class CellTask:
    """One operator's cells as a worker receives them.

    Attributes
    ----------
    index : int
        The operator's place in the panel.
    operator : Operator
    config : AuditConfig
    parcel : Parcel or None
        The client's store entries of the operator (None: the audit has no store).
    out : str
        The client's output directory, as it names it: the paths recorded in the rows
        (counterexamples) are the client's.
    """

    index: int
    operator: object
    config: AuditConfig
    parcel: Parcel | None
    out: str


@dataclass(frozen=True)
class Homecoming:
    """What a worker sends home for one operator.

    Attributes
    ----------
    index : int
    rows : list of dict
        The operator's cells (:func:`softrank.audit.worker.run_operator`).
    harvest : Harvest or None
        What its cells changed in the worker's private store.
    counterexamples : dict
        ``{path relative to the output directory: bytes}``: every file the cells saved
        there (``counterexamples/NAME/lower.npz``, ``witness.npz``).
    worker : str
        The host that ran it.
    """

    index: int
    rows: list
    harvest: Harvest | None = None
    counterexamples: dict = field(default_factory=dict)
    worker: str = ""


def probe() -> dict:
    """What a worker runs softrank with: its version, engine key and host (run on each
    worker by :class:`ClusterMap` before it sends a cell)."""
    import platform
    import socket

    from .. import __version__

    return {"softrank": __version__, "engine": keys.engine_key(), "host": socket.gethostname(),
            "python": platform.python_version()}


def _aligned(op):
    """``op`` with every array in aligned, C-contiguous memory of its own (a copy of it where
    one is not). Dask hands a worker arrays that may sit unaligned in its receive buffer,
    and BLAS and the compiled kernels take other code paths on such memory, whose last bits
    differ: the same cell must give the same ends on a worker as in a local process."""
    import copy

    import numpy as np

    out = None
    for name, v in vars(op).items():
        if isinstance(v, np.ndarray) and not (v.flags.aligned and v.flags.c_contiguous):
            a = np.require(v, requirements=["A", "C"])
            if a is v or not (a.flags.aligned and a.flags.c_contiguous):
                a = np.array(v, order="C", copy=True)
            a.flags.writeable = v.flags.writeable
            out = out or copy.copy(op)
            object.__setattr__(out, name, a)
    return op if out is None else out


def run_cell_task(task: CellTask) -> Homecoming:
    """Run one operator's cells on a worker in a private directory, removed at the end: the
    parcel laid out as a store there, counterexamples saved there; return what must go home
    (module docstring)."""
    import socket

    with tempfile.TemporaryDirectory(prefix="softrank-cell-") as tmp:
        tmp_out = Path(tmp, "out")
        store_root = Path(tmp, "store") if task.parcel is not None else None
        if store_root is not None:
            store_root.mkdir()
            unpack_entries(store_root, task.parcel)
        config = task.config.relocated(None if store_root is None else str(store_root))
        try:
            rows = run_operator(_aligned(task.operator), config, tmp_out)
        finally:
            config.release()
        harvest = None if store_root is None else harvest_entries(store_root, task.parcel)
        found = sorted(p for p in tmp_out.rglob("*") if p.is_file()) if tmp_out.is_dir() else []
        cex = {p.relative_to(tmp_out).as_posix(): p.read_bytes() for p in found}
        rows = [_rehome(r, tmp_out, task.out) for r in rows]
    return Homecoming(task.index, rows, harvest, cex, socket.gethostname())


def _rehome(row: dict, tmp_out: Path, out: str) -> dict:
    """``row`` with the counterexamples' paths in its ``stages`` record moved from the
    worker's private directory to the client's output directory."""
    records = read_stages(row)
    moved = False
    for name, rec in records.items():
        refuted = {}
        for e, ref in rec.refuted.items():
            if ref.saved is not None and Path(ref.saved).is_relative_to(tmp_out):
                ref = replace(ref, saved=Path(out, Path(ref.saved).relative_to(tmp_out)))
                moved = True
            refuted[e] = ref
        records[name] = replace(rec, refuted=refuted)
    return {**row, STAGES_COLUMN: encode_stages(records)} if moved else row


def _not_kept(row: dict, why: str | None) -> dict:
    """``row`` with its bracket's reference marked not kept (``why``): its entry, made in the
    worker's store, did not reach the client's."""
    if why is None or not row.get("diagnostics"):
        return row
    diag = read_diagnostics(row)
    ref = dict(diag.reference or {})
    ref.pop("entry", None)
    ref["not_kept"] = why
    diag.reference = ref
    return {**row, "diagnostics": encode_diagnostics(diag)}


def _write_home(out: Path, rel: str, data: bytes) -> None:
    """Write a counterexample file the worker sent under ``out/counterexamples/`` (only
    there; replaced whole, as the local executor's save replaces it)."""
    parts = Path(rel).parts
    if (len(parts) < 3 or parts[0] != "counterexamples" or Path(rel).is_absolute()
            or any(p in ("", ".", "..") for p in parts)):
        raise SoftrankError(f"a worker sent {rel!r}, not a counterexample file; not written")
    path = out.joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise SoftrankError(f"{str(path)!r} is not a regular file; the counterexample a "
                            "worker sent is not written over it")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _lacks(addr: str, got, client_info: dict) -> str | None:
    """What the worker at ``addr`` lacks (its :func:`probe` or the error it raised), or None
    when it can run the client's cells."""
    if isinstance(got, BaseException):
        return f"{addr}: softrank cannot run there ({type(got).__name__}: {got})"[:300]
    if not isinstance(got, dict):
        return f"{addr}: answered {got!r:.80} to the probe"
    if got.get("engine") != client_info["engine"]:
        return (f"{addr} ({got.get('host')}): softrank {got.get('softrank')} with engine "
                f"{got.get('engine')}, the client's is softrank {client_info['softrank']} "
                f"with engine {client_info['engine']} (another version of softrank or of "
                "numpy, scipy, highspy, numba, python-flint or mpmath)")
    return None


class ClusterMap:
    """Run operators' cells on a Dask cluster and bring every result home (module
    docstring).

    Parameters
    ----------
    config : AuditConfig
    out : path
        The client's output directory (counterexamples are written under it).
    workers : int
        Without ``scheduler``: a local cluster of this many single-threaded processes.
    scheduler : str, optional
        An existing cluster's address (``tcp://host:port``).
    stream : file, optional
        Where the waiting line and the lines of entries not received go (stderr).

    Attributes
    ----------
    workers_in_use : int
        Usable workers connected now.
    received, notes : int, list of str
        Store entries received; one line per entry refused or removed (also said on
        ``stream``).

    Raises
    ------
    InvalidArgumentError
        ``distributed`` is missing, or the scheduler cannot be reached.
    """

    def __init__(self, config: AuditConfig, out, *, workers: int, scheduler: str | None = None,
                 stream=None):
        self.config, self.out = config, Path(out)
        self.n_workers, self.scheduler = workers, scheduler
        self.stream = stream
        self.store = config.setting("reference_store")
        self.workers_in_use = 0
        self.received = 0
        self.notes: list[str] = []
        self._usable: set = set()
        self._probed: dict = {}
        self._info = probe()

    # ------------------------------------------------------------------ the cluster

    def _connect(self):
        try:
            from distributed import Client, LocalCluster
        except ImportError as exc:
            raise InvalidArgumentError("--executor dask: needs Dask distributed "
                                       "(pip install 'softrank[dist]')") from exc
        if self.scheduler:
            try:
                return Client(self.scheduler, timeout="30s"), None
            except Exception as exc:
                raise InvalidArgumentError(f"--scheduler: cannot reach {self.scheduler!r} "
                                           f"({type(exc).__name__}: {exc})") from exc
        from .executors import one_blas_thread

        blas = one_blas_thread()
        blas.__enter__()  # for the cluster's whole life: a restarted worker reads it again
        try:
            cluster = LocalCluster(n_workers=self.n_workers, threads_per_worker=1,
                                   processes=True, host="127.0.0.1", dashboard_address=None)
        finally:
            blas.__exit__(None, None, None)
        return Client(cluster), cluster

    def _where(self) -> str:
        return f"--scheduler {self.scheduler}" if self.scheduler else "the local Dask cluster"

    def _look(self, client) -> set:
        """Probe the workers not probed yet; return the usable ones connected now."""
        now = set(client.scheduler_info(n_workers=-1)["workers"])
        new = sorted(now - set(self._probed))
        if new:
            got = client.run(probe, workers=new, on_error="return")
            for addr in new:
                answer = got.get(addr)
                if answer is None or isinstance(answer, OSError):
                    continue  # gone while probed (a closed connection): asked again if back
                self._probed[addr] = _lacks(addr, answer, self._info)
                if self._probed[addr] is None:
                    self._usable.add(addr)
                elif self.stream is not None:
                    print(f"softrank: not using worker {self._probed[addr]}",
                          file=self.stream, flush=True)
        for addr in set(self._probed) - now:  # left: a worker restarted gets a new address
            self._probed.pop(addr)
            self._usable.discard(addr)
        self.workers_in_use = len(self._usable)
        return set(self._usable)

    def _wait_for_workers(self, client, since: float) -> set:
        """The usable workers, waiting up to :data:`WORKER_WAIT` seconds from ``since``.

        Raises
        ------
        SoftrankError
            None within the wait: naming the scheduler and what each worker lacks.
        """
        said = False
        while True:
            usable = self._look(client)
            if usable:
                return usable
            _check_stop()
            if time.monotonic() - since > WORKER_WAIT:
                lacks = [w for w in self._probed.values() if w]
                what = ("no worker is connected" if not lacks else
                        f"no worker can run softrank's cells: {'; '.join(lacks[:4])}"
                        + (f" (and {len(lacks) - 4} more)" if len(lacks) > 4 else ""))
                raise SoftrankError(
                    f"{self._where()}: {what} after {WORKER_WAIT:g} s. Start workers with "
                    f"softrank {self._info['softrank']} (engine {self._info['engine']}) "
                    f"installed: dask worker {self.scheduler or 'ADDRESS'} --nthreads 1 "
                    "(README, Audits on a cluster)")
            if not said and self.stream is not None:
                print(f"softrank: waiting for a worker on {self._where()} (up to "
                      f"{WORKER_WAIT:g} s)", file=self.stream, flush=True)
                said = True
            time.sleep(0.5)

    # ------------------------------------------------------------------ the run

    def run(self, items):
        """Yield ``(index, rows)`` of each ``(index, operator)`` of ``items`` as its
        results are home (any order)."""
        items = list(items)
        client, cluster = self._connect()
        try:
            yield from self._run(client, items)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()

    def _submit(self, client, index: int, op, usable: set, pending: dict) -> None:
        parcel = None
        if self.store is not None:
            validated = self.config.validated and op.Q is not None
            parcel = pack_entries(self.store, op, self.config.eps, effort=self.config.effort,
                                  validated=validated)
        task = CellTask(index, op, self.config, parcel, str(self.out))
        # restricted to the usable workers only where some connected worker is not usable
        only = frozenset(usable) if set(self._probed) != usable else None
        fut = client.submit(run_cell_task, task, key=f"softrank-cell-{index}-{uuid.uuid4().hex}",
                            pure=False, retries=1, workers=None if only is None else sorted(only),
                            allow_other_workers=False)
        pending[fut] = (index, only)

    def _run(self, client, items):
        from distributed import KilledWorker
        from distributed import wait as dask_wait

        usable = self._wait_for_workers(client, time.monotonic())
        ops = dict(items)
        todo = [i for i, _ in items]
        todo.reverse()  # pop() takes them in the order given
        pending: dict = {}  # future: (index, restricted to the workers usable then)
        alone_since = None

        def fill():
            limit = max(2, 2 * sum(client.nthreads(sorted(usable)).values()))
            while todo and len(pending) < limit:
                i = todo.pop()
                self._submit(client, i, ops[i], usable, pending)

        try:
            fill()
            while pending:
                try:
                    done, _ = dask_wait(list(pending), timeout=POLL_SECONDS,
                                        return_when="FIRST_COMPLETED")
                except TimeoutError:
                    done = set()
                _check_stop()  # a stop whose KeyboardInterrupt was dropped (softrank.stop)
                for fut in done:
                    i, _ = pending.pop(fut)
                    yield i, self._home(fut, i, ops[i], KilledWorker)
                usable = self._look(client)
                if usable:
                    alone_since = None
                    self._resubmit(client, pending, ops, usable)
                    fill()
                elif alone_since is None:
                    alone_since = time.monotonic()
                else:  # every usable worker is gone: wait for one, or stop
                    usable = self._wait_for_workers(client, alone_since)
                    alone_since = None
                    self._resubmit(client, pending, ops, usable)
        except BaseException:
            client.cancel(list(pending))
            raise

    def _resubmit(self, client, pending: dict, ops: dict, usable: set) -> None:
        """Send again the cells restricted to workers that are all gone (a worker that a
        nanny restarts comes back at another address: a cell restricted to its old one would
        wait for ever)."""
        stale = [f for f, (_, only) in pending.items() if only is not None and not only & usable]
        if not stale:
            return
        client.cancel(stale)
        for fut in stale:
            i, _ = pending.pop(fut)
            self._submit(client, i, ops[i], usable, pending)

    def _home(self, fut, i: int, op, killed) -> list[dict]:
        """The rows of a finished future, once its counterexamples and store entries are
        home (an operator that killed every worker it met: its ``error`` rows)."""
        try:
            home = fut.result()
        except killed as exc:
            return failed_operator(op, self.config,
                                   f"KilledWorker: the cells of {op.operator_id} ended the "
                                   f"worker process of every try ({exc})"[:300])
        except Exception as exc:
            raise SoftrankError(f"operator {op.operator_id}: its cells failed on a worker, "
                                f"twice ({type(exc).__name__}: {exc})"[:400]
                                + " (third-party certifiers and stages must be importable on "
                                "every worker: README, Audits on a cluster)") from exc
        for rel, data in sorted(home.counterexamples.items()):
            _write_home(self.out, rel, data)
        if home.harvest is not None and self.store is not None:
            validated = self.config.validated and op.Q is not None
            A, rho = op.A, 0.0
            if validated and (home.harvest.entries):
                from ..checker.validated import enclose_softmax

                A, rho = enclose_softmax(op.Q, op.K, op.beta, op.mask)
            placed, notes, lost = receive_entries(self.store, op, A, rho, self.config.eps,
                                                  effort=self.config.effort,
                                                  validated=validated, harvest=home.harvest)
            self.received += placed
            for line in notes:
                self.notes.append(line)
                if self.stream is not None:
                    print(f"softrank: {line}", file=self.stream, flush=True)
            if lost:
                return [_not_kept(r, lost.get(float(r["eps"]))) for r in home.rows]
        return home.rows

"""The audit's local executor: a process pool (Dask distributed is :mod:`.cluster`).

:func:`local_map` takes a module-level function ``fn`` and a list of picklable tasks and
yields ``fn(task)`` results as they complete (any order: the ledger and the exports restore
panel order). A worker process that dies loses only the task it was running: every finished
task's cells were already handed back and committed by the caller.
"""

from __future__ import annotations

import os
import threading
import time
from multiprocessing import get_context

from ..stop import check as _check_stop

__all__ = ["local_map", "one_blas_thread"]

_BLAS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

#: Longest wait of :func:`local_map` for a task to finish before the main thread wakes
#: (and runs the handler of any signal another thread took) and waits again, in seconds.
WAIT_SECONDS = 1.0


#: How often a pool worker checks that the process that started it is still alive, in
#: seconds: a worker whose parent was killed (``kill -9``, the out-of-memory killer) ends
#: within about this long instead of sleeping on its task queue for ever.
PARENT_CHECK_SECONDS = 0.5


def _watch_parent(parent: int, interval: float) -> None:
    """A worker's watchdog (a daemon thread): end the worker at once when ``parent`` is no
    longer its parent process.

    A worker of a ``spawn`` pool holds both ends of the queue it reads its tasks from (the
    queue is pickled whole into it), so the death of the main process never shows it an end
    of file: without this it sleeps on that queue until killed by hand. ``os._exit`` skips
    the worker's clean-up: what it was computing is lost with its parent, and every finished
    cell is already in the ledger.
    """
    while True:
        time.sleep(interval)
        if os.getppid() != parent:
            os._exit(1)


def _worker_start(parent: int, initializer) -> None:
    """A pool worker's initializer: the parent watchdog, then the caller's initializer."""
    threading.Thread(target=_watch_parent, args=(parent, PARENT_CHECK_SECONDS), daemon=True,
                     name="softrank-parent-watchdog").start()
    if initializer is not None:
        initializer()


class one_blas_thread:
    """Workers already use the cores: one BLAS thread each (set for spawned children)."""

    def __enter__(self):
        self.saved = {k: os.environ.get(k) for k in _BLAS}
        for k in _BLAS:
            os.environ[k] = "1"

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def local_map(fn, tasks, workers: int, initializer=None):
    """A process pool (``concurrent.futures``, spawn), one task at a time per worker.

    Results are yielded as tasks finish. A worker that dies (killed, out of memory) breaks
    the pool: ``BrokenProcessPool`` is raised instead of waiting forever, after every result
    that finished before it was yielded (so the caller has committed them). On any exception
    or interrupt in the caller the workers are terminated: none outlives the run. A worker
    whose parent is killed outright (``kill -9``, where no handler runs) ends by itself within
    ``PARENT_CHECK_SECONDS``; the cells already committed stay, for ``--resume``.
    """
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    blas = one_blas_thread()
    blas.__enter__()  # for the pool's whole life: it spawns its workers lazily, on submit
    ex = ProcessPoolExecutor(workers, mp_context=get_context("spawn"),
                             initializer=_worker_start, initargs=(os.getpid(), initializer))
    try:
        pending = set()
        it = iter(tasks)
        for t in it:  # keep at most 2 tasks per worker queued: largest-first order holds
            pending.add(ex.submit(fn, t))
            if len(pending) >= 2 * workers:
                break
        while pending:
            # waits of at most WAIT_SECONDS: a signal that a thread other than the main one
            # takes (the pool's own threads, a BLAS pool) runs its Python handler (Ctrl-C,
            # SIGTERM: stop, workers ended) only when the main thread wakes
            done, pending = wait(pending, timeout=WAIT_SECONDS, return_when=FIRST_COMPLETED)
            _check_stop()  # a stop whose KeyboardInterrupt was dropped (softrank.stop)
            for fut in done:
                yield fut.result()
                nxt = next(it, None)
                if nxt is not None:
                    pending.add(ex.submit(fn, nxt))
    except BaseException:
        for p in list(getattr(ex, "_processes", {}).values()):
            p.terminate()
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    else:
        ex.shutdown(wait=True)
    finally:
        blas.__exit__(None, None, None)

"""What several commands share: the memory limit and its check, the operator cache, output
directories and files (refused before any work if they cannot be written), and quiet model
loading."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

from ...errors import SoftrankError, printable

__all__ = ["available_memory", "gib", "memory_limit", "check_memory", "operator_cache",
           "reference_store", "store_line", "say_refused", "cache_line", "out_dir", "made_dir",
           "missing_dirs", "remove_made", "probe_dir", "refuse_non_files", "quiet_transformers",
           "refuse_existing"]


def available_memory() -> int | None:
    """Memory available to a new process now (bytes): Linux's MemAvailable, else 80 % of
    the physical memory, else None (no limit can be derived)."""
    import os

    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(0.8 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def gib(n: int) -> str:
    return f"{n / 2**30:.3g} GiB" if n >= 2**30 else f"{n / 2**20:.4g} MiB"


def memory_limit(args) -> tuple[int, str]:
    """The limit in bytes and how it was set, for messages."""
    if args.max_memory is not None:
        return args.max_memory, f"--max-memory {gib(args.max_memory)}"
    avail = available_memory()
    if avail is None:
        return 2**60, "no limit (the available memory is unknown; set --max-memory)"
    return avail, f"--max-memory {gib(avail)} (default: the memory available now)"


def check_memory(shape, what: str, args, workers: int = 1) -> None:
    """Refuse, before any work, a bracket whose estimated peak (times the processes that
    bracket at once) exceeds the limit."""
    from ...certifiers.bracket import memory_estimate
    from ...errors import ResourceLimitError

    limit, how = memory_limit(args)
    est = memory_estimate(*shape) * workers
    if est > limit:
        times = f" x {workers} workers" if workers > 1 else ""
        raise ResourceLimitError(
            f"{what}: bracketing its {shape[0]} x {shape[1]} matrix{times} needs an estimated "
            f"{gib(est)} (softrank.certifiers.bracket.memory_estimate), above {how}; raise "
            "--max-memory" + (" or lower --workers" if workers > 1 else "") + " to run it anyway")


def operator_cache(args):
    """The run's OperatorCache, or None with --no-operator-cache."""
    from ...generators.cache import OperatorCache, default_cache_dir

    if args.no_operator_cache:
        return None
    if args.operator_cache is not None:
        return OperatorCache(args.operator_cache, "--operator-cache")
    return OperatorCache(default_cache_dir(), "SOFTRANK_OPERATOR_CACHE (default cache)")


def reference_store(args, required: bool = False, create: bool | str = True):
    """The run's ReferenceStore: ``--reference-store DIR``, else the default one
    (``$SOFTRANK_REFERENCE_STORE``, ``$XDG_CACHE_HOME/softrank/references``,
    ``~/.cache/softrank/references``); None with ``--no-reference-store`` or when the default
    is turned off (``required``: refused then). ``create=False``: a missing directory is
    refused, not made (commands that only read or remove); ``"later"``: made only when
    something is written (:meth:`~softrank.refstore.ReferenceStore.ensure_root`)."""
    from ...refstore import STORE_ENV, ReferenceStore, default_store_dir
    from ...refstore.store import default_store_label

    if getattr(args, "no_reference_store", False):
        return None
    if args.reference_store is not None:
        return ReferenceStore(args.reference_store, "--reference-store", create=create)
    d = default_store_dir()
    if d is None:
        if required:
            raise SoftrankError(f"--reference-store: the default store is turned off ("
                                f"{STORE_ENV}=off); name a directory with --reference-store")
        return None
    return ReferenceStore(d, default_store_label(), create=create)


def store_line(store, ref: dict) -> str:
    """One line from the summary's ``reference_store`` counts."""
    if store is None:
        return "reference store: off (every bracket computed)"
    refused, lost = len(ref["refused"]), len(ref["not_kept"])
    return (f"reference store {str(store.root)!r}: {ref['from_store']} cells read back and "
            f"checked in {ref['check_seconds']:.1f} s, {ref['computed']} computed"
            + (f" ({refused} stored entries refused and recomputed, each named on its own "
               "line)" if refused else "")
            + (f"; {lost} computed brackets not kept (first: {ref['not_kept'][0]})"
               if lost else ""))


def say_refused(command: str, lines) -> None:
    """One line on stderr per stored entry the reference store refused (damaged, tampered
    or not the store's own; the bracket was computed again), under ``--quiet`` too: news the
    user must act on, not progress. ``lines``: ``"OPERATOR eps EPS: REASON"``, as
    :attr:`~softrank.refstore.ReferenceStore.refused` and the summary's
    ``reference_store.refused`` hold them."""
    for line in lines:
        print(printable(f"softrank {command}: stored entry refused and recomputed: {line}"),
              file=sys.stderr, flush=True)


def cache_line(cache, seconds: float) -> str:
    if cache is None:
        return f"operators ready in {seconds:.1f} s (no operator cache)"
    asked = cache.hits + cache.misses
    return (f"operators ready in {seconds:.1f} s ({cache.hits} of {asked} MiniLM operators from "
            f"the cache in {str(cache.dir)!r})" if asked else
            f"operators ready in {seconds:.1f} s")


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def probe_dir(d: Path, arg: str) -> None:
    """Refuse, before any work, a directory where no file can be created: a probe file is
    created there and removed at once (permission bits alone do not tell, e.g. for root
    or in ``/proc``)."""
    import tempfile

    try:
        fd, probe = tempfile.mkstemp(dir=d, prefix=".softrank-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise SoftrankError(f"{arg}: cannot write into {str(d)!r} ({_reason(exc)})") from None


def out_dir(path: str, arg: str) -> Path:
    """The output directory ``path``, created (with its parents) if missing and refused,
    before any work, if it is not a directory, cannot be created or no file can be
    written into it. The messages name ``arg``, the path and the reason."""
    out = Path(path)  # (never empty: the parser refuses an empty path)
    if out.exists() and not out.is_dir():
        raise SoftrankError(f"{arg}: {str(out)!r} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SoftrankError(f"{arg}: cannot create {str(out)!r} ({_reason(exc)})") from None
    probe_dir(out, arg)
    return out


def missing_dirs(path) -> list[Path]:
    """``path`` and those of its parents that are not there yet, deepest first: the
    directories :func:`out_dir` would create (``.`` and ``..`` left out: never made)."""
    out: list[Path] = []
    for p in (Path(path), *Path(path).parents):
        if os.path.lexists(p):
            break
        if p.name not in ("", ".", ".."):
            out.append(p)
    return out


def remove_made(dirs: list[Path]) -> None:
    """Remove, deepest first, each of ``dirs`` (:func:`missing_dirs` before this run made
    them) that is still an empty directory: a refused or failed run leaves nothing that a
    next run would stumble on. Anything not empty, or not a directory, is left as it is;
    a directory that was there before the run is never among ``dirs``."""
    for d in dirs:
        if d.is_symlink():
            continue
        try:
            d.rmdir()  # only if empty
        except OSError:
            pass


@contextmanager
def made_dir(path: str, arg: str):
    """:func:`out_dir` for a ``with`` block: the directories this call created (``path`` and
    any parents) are removed again if the block raises while they are still empty
    (:func:`remove_made`)."""
    made = missing_dirs(path)
    try:
        out = out_dir(path, arg)
        yield out
    except BaseException:
        remove_made(made)
        raise


def refuse_non_files(paths, arg: str) -> None:
    """Refuse output files that exist as something other than a file (a directory, a FIFO):
    ``--overwrite`` replaces files only."""
    odd = [p for p in paths if os.path.lexists(p) and not Path(p).is_file()]
    if odd:
        kind = "a directory" if Path(odd[0]).is_dir() else "not a regular file"
        raise SoftrankError(f"{arg}: {str(odd[0])!r} exists and is {kind}; softrank writes a "
                            "file of that name there")


def quiet_transformers() -> None:
    """No "Loading weights" progress bars under --quiet (only if transformers is there)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()


def refuse_existing(out: str, stem: str, overwrite: bool) -> None:
    """Refuse, before any work, to replace ``STEM.csv``, ``STEM.md`` or ``STEM.png`` in
    ``out`` unless ``--overwrite`` was given."""
    names = [Path(out) / f"{stem}.{ext}" for ext in ("csv", "md", "png")]
    refuse_non_files(names, "--out")
    taken = [p.name for p in names if p.exists()]
    if taken and not overwrite:
        raise SoftrankError(f"--out: {str(out)!r} holds {', '.join(taken)} already; use another "
                            "--out, or --overwrite to replace them")

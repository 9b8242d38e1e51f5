"""``softrank audit``: bracket every operator of a panel and write the report."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ...errors import SoftrankError
from .common import (cache_line, check_memory, missing_dirs, operator_cache, out_dir,
                     quiet_transformers, reference_store, remove_made, say_refused, store_line)

__all__ = ['run']


def run(args) -> int:
    from ...validation import validate_eps
    from ..lock import AuditLock
    from ..panels import build_panel

    t0 = time.perf_counter()
    if args.eps:
        validate_eps(args.eps, "--eps")
    panel = build_panel(args.panel, seed=args.seed)
    if args.scheduler and args.executor != "dask":
        raise SoftrankError("--scheduler: needs --executor dask")
    from ...validation import check_out_dir

    check_out_dir(args.out, "--out")
    made = missing_dirs(args.out)  # what this run creates: --out and any missing parents
    try:
        out = out_dir(args.out, "--out")  # refuses a path that is not a writable directory
    except BaseException:
        remove_made(made)
        raise
    fresh = bool(made) or not any(out.iterdir())
    try:
        with AuditLock(out, "--out") as lock:  # one audit per --out, until its report is written
            return _audit_locked(args, panel, out, t0, lock)
    except Exception:  # (an interrupt keeps its ledger: the run was cut, not refused)
        if made or (fresh and not args.resume):  # (a directory made now holds nothing to resume)
            _drop_empty_run(out, made)
        raise


def _config(args, panel, store=None):
    """The cells' settings from the options and the panel, validated once (under the
    directory's lock, so that a refused run imports no user code): every refusal that needs
    no operator comes before any is built."""
    from ...audit import AuditConfig
    from ...certifiers.registry import load_certifier

    for d in panel.certifier_paths:  # [[certifier]] path = "...": importable, here and in workers
        if d not in sys.path:
            sys.path.insert(0, d)
    for spec in panel.certifiers:  # named as the panel file's, not as --certifier
        load_certifier(spec, "panel: [[certifier]] spec")
    return AuditConfig(eps=tuple(args.eps or panel.eps), validated=bool(args.validated),
                       attacks=args.attacks,
                       cell_timeout=(args.cell_timeout if args.cell_timeout is not None
                                     else panel.cell_timeout),
                       effort=args.effort,
                       certifiers=tuple(panel.certifiers) + tuple(args.certifier),
                       stages=tuple(args.stage),
                       rank=args.rank if args.rank is not None else panel.rank,
                       frontier=bool(args.frontier),
                       reference_store=None if store is None else str(store.root))


def _drop_empty_run(out: Path, made: list) -> None:
    """After a run that failed in a directory it found new or empty: remove the ledger if no
    cell reached it (e.g. an unreachable --scheduler), then the directories this run created
    (``made``: --out and its missing parents) that are empty (:func:`.common.remove_made`):
    the failure leaves nothing that a next run would stumble on. A ledger with cells is
    kept, for --resume."""
    from ..ledger import LEDGER_NAME, ledger_cells

    ledger = out / LEDGER_NAME
    if ledger.exists():
        if ledger_cells(ledger) != 0:
            return  # cells to keep, or not readable as a ledger: left as it is
        for suffix in ("", "-wal", "-shm"):
            Path(str(ledger) + suffix).unlink(missing_ok=True)
    remove_made(made)


def _cost_line(args, ops, config, store, out: Path) -> str:
    """The expected cost of the run (:mod:`softrank.harness.cost`), printed before its first
    cell: the operators a resumed run's ledger holds at every tolerance are left out, the
    wall time is on the local workers (none with --scheduler: a cluster of unknown size)."""
    import os
    from collections import Counter

    from ..cost import expected_cost
    from ..ledger import LEDGER_NAME, read_ledger

    finished: set = set()
    if args.resume:
        _, rows, _ = read_ledger(out / LEDGER_NAME, "--resume")
        counts = Counter(r["operator_id"] for r in rows)
        finished = {i for i, n in counts.items() if n >= len(config.eps)}
    cost = expected_cost(ops, config.eps, config.effort, config.validated, store, finished,
                         cell_timeout=config.cell_timeout)
    cores = None if args.scheduler else min(len(ops), args.workers or os.cpu_count() or 1)
    return cost.line(cores)


def _audit_locked(args, panel, out: Path, t0: float, lock) -> int:
    from ...audit.record import read_cells
    from ..runner import run_audit
    from ..panels import materialize
    from ..report import summarize, write_report

    from ..ledger import Ledger

    store = reference_store(args)
    config = _config(args, panel, store)
    Ledger.check_can_open(out, args.resume)
    cache = operator_cache(args)  # every refusal before the first line of progress
    if args.quiet:
        quiet_transformers()
    else:
        print(f"softrank audit: panel {panel.name!r}, {len(panel)} "
              f"operator{'s' if len(panel) != 1 else ''} x {len(config.eps)} "
              f"tolerance{'s' if len(config.eps) != 1 else ''} -> {out}/", file=sys.stderr,
              flush=True)
    ops = materialize(panel.specs, cache)
    t_ops = time.perf_counter() - t0
    if not args.quiet:
        for note in cache.notes if cache is not None else []:
            print(note, file=sys.stderr, flush=True)
        print(cache_line(cache, t_ops), file=sys.stderr, flush=True)
        print(_cost_line(args, ops, config, store, out), file=sys.stderr, flush=True)
    if args.executor == "local":  # each local worker brackets one operator at a time
        import os

        from ...certifiers.bracket import memory_estimate

        big = max(ops, key=lambda o: memory_estimate(*o.shape))
        n = min(len(ops), args.workers or os.cpu_count() or 1)
        check_memory(big.shape, f"--panel: operator {big.operator_id!r}", args, workers=n)
    rows = run_audit(ops, config, out, workers=args.workers, progress=not args.quiet,
                     executor=args.executor, scheduler=args.scheduler, resume=args.resume,
                     identity={"panel": args.panel, "seed": args.seed}, lock=lock)
    rows = read_cells(rows)  # typed once, for the summary and the report
    summary = summarize(rows, panel.name, config.eps, time.perf_counter() - t0, args.seed,
                        effort=config.effort)
    summary["operator_build"] = {"seconds": round(t_ops, 1),
                                 **(cache.summary() if cache is not None else {"directory": None})}
    summary["reference_store"]["directory"] = None if store is None else str(store.root)
    if not args.quiet:
        print(store_line(store, summary["reference_store"]), file=sys.stderr, flush=True)
    say_refused("audit", summary["reference_store"]["refused"])  # --quiet or not
    if args.study_boot and not args.quiet:
        print(f"brackets done in {summary['wall_seconds']:.0f} s; running the report's studies "
              f"({args.study_boot} bootstrap resamples; --study-boot 0 skips them)",
              file=sys.stderr, flush=True)
    t1 = time.perf_counter()
    write_report(rows, summary, out, study_boot=args.study_boot)
    ov = summary["overall"]
    print(f"{summary['cells']} cells: {ov['resolved']} resolved ({ov['resolved_pct']} %), "
          f"{ov['open']} open, {ov['unsound']} unsound, {ov['error']} error; "
          f"median upper/lower {ov['median_ratio']}; attacks {summary['attacks']['tried']} tried, "
          f"{summary['attacks']['succeeded']} succeeded; brackets {summary['wall_seconds']:.0f} s"
          f", report and studies {time.perf_counter() - t1:.0f} s"
          f"{'; effort fast (late searches skipped)' if args.effort == 'fast' else ''}. "
          f"Report: {out / 'report.md'}")
    if not args.quiet:  # (summary.json and report.md have them either way)
        for name, e in summary["stage_errors"].items():
            print(f"stage {name!r} failed on {e['operators']} of {summary['operators']} "
                  f"operators (its columns are empty there); first: {e['first']}",
                  file=sys.stderr)
        if summary["cut_short"]:
            print(f"{summary['cut_short']} cells cut short by --cell-timeout (ends checked, "
                  "searches skipped)", file=sys.stderr)
    bad_bands = summary.get("frontier", {}).get("contradictions", 0)
    if bad_bands:  # (refuted through the pipeline: their cells are unsound)
        print(f"UNSOUND: {bad_bands} frontier contradictions (a band crossing itself, a "
              "curve at or below its lower edge or a successful attack; report.md, 'The "
              "rank-error frontier')", file=sys.stderr)
    return 1 if ov["unsound"] or ov["error"] else 0

"""``softrank cache info|prune`` and ``softrank reference export|import``: the reference
store (:mod:`softrank.refstore`) and the operator cache, seen and carried."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ...errors import SoftrankError, printable
from .common import gib, made_dir, operator_cache, reference_store

__all__ = ["run_cache", "run_reference", "store_inventory"]

def store_inventory(found) -> dict:
    """``{engine: {"operators", "entries", "bytes", "last_used"}}`` of a store's scan
    (:func:`softrank.refstore.layout.scan`; ``last_used``: the newest ``bracket.json`` time,
    ISO 8601 UTC)."""
    out: dict = {}
    groups: dict = {}
    for e in found.entries:
        rec = out.setdefault(e.engine, {"operators": 0, "entries": 0, "bytes": 0,
                                        "last_used": 0.0})
        groups.setdefault(e.engine, set()).add(e.group.split("-")[0])
        rec["entries"] += 1
        rec["bytes"] += e.bytes
        rec["last_used"] = max(rec["last_used"], e.last_used)
    for eng, rec in out.items():
        rec["operators"] = len(groups[eng])
        rec["last_used"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(rec["last_used"]))
    return out


def _scan(store):
    """The store's :class:`~softrank.refstore.layout.Scan`; one line when it cannot be read."""
    from ...refstore.layout import scan

    try:
        return scan(store.root)
    except OSError as exc:
        raise SoftrankError(f"{store.arg}: {str(store.root)!r} cannot be read "
                            f"({exc.strerror or exc})") from None


def run_cache(args) -> int:
    from ...refstore import engine_key
    from ...refstore.layout import prune, prune_plan

    store = reference_store(args, required=True, create=False)
    current = engine_key()
    found = _scan(store)
    if args.cache_command == "info":
        inv = store_inventory(found)
        from ...generators.cache import default_cache_dir

        odir = Path(args.operator_cache) if args.operator_cache else default_cache_dir()
        ofiles = [f for f in odir.glob("*.npz") if f.is_file()] if odir.is_dir() else []
        info = {"reference_store": {"directory": str(store.root), "current_engine": current,
                                    "engines": inv, "foreign": found.foreign},
                "operator_cache": {"directory": str(odir), "operators": len(ofiles),
                                   "bytes": sum(f.stat().st_size for f in ofiles)}}
        if args.json:
            print(json.dumps(info, indent=2))
            return 0
        print(f"reference store {str(store.root)!r} (this softrank's engine: {current})")
        if not inv:
            print("  empty")
        for eng, r in inv.items():
            tag = "  <- this engine" if eng == current else ""
            print(f"  engine {eng}: {_count(r['operators'], 'operator')}, "
                  f"{_count(r['entries'], 'bracket')}, "
                  f"{gib(r['bytes'])}, last used {r['last_used']}{tag}")
        if found.foreign:
            print(f"  {_count(len(found.foreign), 'path')} that softrank did not write "
                  f"(first: {found.foreign[0]}); `softrank cache prune` refuses this directory")
        oc = info["operator_cache"]
        print(f"operator cache {oc['directory']!r}: {oc['operators']} operators, "
              f"{gib(oc['bytes'])}")
        return 0
    # prune: only what the store wrote, recognised by content; anything else refuses it all
    if found.foreign:
        raise SoftrankError(
            f"{store.arg}: {str(store.root)!r} holds what softrank did not write "
            f"({found.foreign[0]}"
            + (f"; {len(found.foreign) - 1} more" if len(found.foreign) > 1 else "")
            + "); nothing removed (prune removes only a reference store's own files)")
    if args.all:
        choose, what = (lambda e: True), "every entry"
    elif args.older_than is not None:
        cutoff = time.time() - 86400 * args.older_than
        choose = lambda e: e.last_used < cutoff  # noqa: E731
        what = f"entries unused for {args.older_than:g} days"
    else:
        choose = lambda e: e.engine != current  # noqa: E731
        what = f"entries of engines other than {current}"
    plan = prune_plan(found, choose)
    paths = plan.paths(store.root)
    if not args.dry_run and paths and not store.writable:
        raise SoftrankError(f"{store.arg}: {str(store.root)!r} cannot be written here "
                            "(read-only); nothing removed")
    if args.dry_run:
        n, size, others, failed = len(plan.entries), plan.bytes, len(paths) - len(plan.entries), []
    else:
        done = prune(plan)
        n, size, others, failed = len(done.entries), done.bytes, len(done.others), done.failed
    print(f"softrank cache prune: {'would remove' if args.dry_run else 'removed'} "
          f"{_count(n, 'bracket')} ({gib(size)}): {what}, in {str(store.root)!r}"
          + (f"; with them {_count(others, 'other path')} (operator and engine directories "
             "left empty, their locks, entries a killed run left half-made)" if others else ""))
    if args.dry_run:
        for p in paths:
            print(f"  {p}")
    for p in plan.in_use:
        print(f"  left alone (in use by another run): {p}/")
    for f in failed[:20]:
        print(f"  could not remove {printable(f)}")
    if len(failed) > 20:
        print(f"  ... and {len(failed) - 20} more")
    return 1 if failed else 0


def _count(n: int, noun: str) -> str:
    """``1 bracket``, ``2 brackets``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def run_reference(args) -> int:
    from ...refstore import export_bundle, import_bundle, read_manifest

    if args.reference_command == "export":
        if args.eps:
            from ...validation import validate_eps

            validate_eps(args.eps, "--eps")
        dest = Path(args.directory)
        if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
            raise SoftrankError(f"DIR: {str(dest)!r} exists and is not an empty directory; a "
                                "bundle is written into a new one")
        store = reference_store(args, required=True, create=False)
        from ...refstore.layout import within

        if within(dest, store.root):
            raise SoftrankError(f"DIR: {str(dest)!r} is inside the reference store "
                                f"{str(store.root)!r}; write the bundle elsewhere (the store "
                                "holds only its own files)")
        with made_dir(args.directory, "DIR") as dest:
            return _export(args, store, dest, export_bundle)
    read_manifest(args.directory)  # a directory that is no bundle creates nothing
    store = reference_store(args, required=True, create="later")
    rep = import_bundle(store, args.directory, keep_engine=args.keep_engine)
    print(f"softrank reference import: {_count(rep.done, 'bracket')} added to "
          f"{str(store.root)!r}, {rep.already} already there (engine {rep.engine}); "
          f"{len(rep.problems)} not added")
    for p in rep.problems[:50]:
        print(f"  {printable(p)}")
    if len(rep.problems) > 50:
        print(f"  ... and {len(rep.problems) - 50} more")
    return 1 if rep.problems else 0


def _export(args, store, dest: Path, export_bundle) -> int:
    from ..panels import build_panel, materialize

    panel = build_panel(args.panel, seed=args.seed)
    ops = materialize(panel.specs, operator_cache(args))
    eps = list(args.eps or panel.eps)
    rep = export_bundle(store, ops, eps, dest, effort=args.effort, validated=args.validated,
                        panel=panel.name)
    print(f"softrank reference export: {rep.done} of {len(ops) * len(eps)} cells of panel "
          f"{panel.name!r} written to {str(dest)!r} (engine {rep.engine})")
    for p in rep.problems[:50]:
        print(f"  missing: {printable(p)}")
    if len(rep.problems) > 50:
        print(f"  ... and {len(rep.problems) - 50} more")
    if any(p.endswith("not in the store") for p in rep.problems):
        print("  (run softrank audit on the panel with this store first; the bundle holds the "
              "cells that were stored)")
    return 1 if rep.problems else 0

"""``softrank cache info|prune`` and ``softrank reference export|import``: the reference
store (:mod:`softrank.refstore`) and the operator cache, seen and carried."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

from ...errors import SoftrankError
from .common import gib, operator_cache, reference_store

__all__ = ["run_cache", "run_reference", "store_inventory"]

_ENGINE = re.compile(r"[0-9a-f]{16}")
_GROUP = re.compile(r"[0-9a-f]{16}-(full|fast)(-validated-[0-9a-f]{16})?")
_ENTRY = re.compile(r"eps[0-9.e+-]+")


def _size(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def _entries(root: Path):
    """``(engine, group dir, entry dir)`` of every directory laid out as the store's (other
    names are never touched)."""
    for eng in sorted(root.iterdir()) if root.is_dir() else []:
        if not (_ENGINE.fullmatch(eng.name) and eng.is_dir() and not eng.is_symlink()):
            continue
        for group in sorted(eng.iterdir()):
            if not (_GROUP.fullmatch(group.name) and group.is_dir() and not group.is_symlink()):
                continue
            for entry in sorted(group.iterdir()):
                if _ENTRY.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink():
                    yield eng.name, group, entry


def store_inventory(root: Path) -> dict:
    """``{engine: {"operators", "entries", "bytes", "last_used"}}`` of the store at ``root``
    (``last_used``: the newest ``bracket.json`` time, ISO 8601 UTC)."""
    out: dict = {}
    groups: dict = {}
    for eng, group, entry in _entries(root):
        rec = out.setdefault(eng, {"operators": 0, "entries": 0, "bytes": 0, "last_used": 0.0})
        groups.setdefault(eng, set()).add(group.name.split("-")[0])
        rec["entries"] += 1
        rec["bytes"] += _size(entry)
        try:
            rec["last_used"] = max(rec["last_used"], (entry / "bracket.json").stat().st_mtime)
        except OSError:
            pass
    for eng, rec in out.items():
        rec["operators"] = len(groups[eng])
        rec["last_used"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(rec["last_used"]))
    return out


def run_cache(args) -> int:
    from ...refstore import engine_key

    store = reference_store(args, required=True, create=False)
    current = engine_key()
    if args.cache_command == "info":
        inv = store_inventory(store.root)
        from ...generators.cache import default_cache_dir

        odir = Path(args.operator_cache) if args.operator_cache else default_cache_dir()
        ofiles = [f for f in odir.glob("*.npz") if f.is_file()] if odir.is_dir() else []
        info = {"reference_store": {"directory": str(store.root), "current_engine": current,
                                    "engines": inv},
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
            print(f"  engine {eng}: {r['operators']} operators, {r['entries']} brackets, "
                  f"{gib(r['bytes'])}, last used {r['last_used']}{tag}")
        oc = info["operator_cache"]
        print(f"operator cache {oc['directory']!r}: {oc['operators']} operators, "
              f"{gib(oc['bytes'])}")
        return 0
    # prune
    cutoff = None if args.older_than is None else time.time() - 86400 * args.older_than
    gone, failed, freed = [], [], 0
    for eng, group, entry in list(_entries(store.root)):
        if args.all:
            drop = True
        elif cutoff is not None:
            try:
                drop = (entry / "bracket.json").stat().st_mtime < cutoff
            except OSError:
                drop = True  # an incomplete entry: never read back
        else:
            drop = eng != current
        if not drop:
            continue
        size = _size(entry)
        if not args.dry_run:
            try:
                with store.locked(group):
                    shutil.rmtree(entry)
                if not any(group.iterdir()):
                    group.rmdir()
                    (group.parent / f"{group.name}.lock").unlink(missing_ok=True)
            except OSError as exc:
                failed.append(f"{eng}/{group.name}/{entry.name}: {exc.strerror or exc}")
                continue
        gone.append(f"{eng}/{group.name}/{entry.name}")
        freed += size
    if not args.dry_run and store.writable:
        for eng in store.root.iterdir():  # entries a killed writer left half-made
            if _ENGINE.fullmatch(eng.name) and eng.is_dir() and not eng.is_symlink():
                for tmp in eng.glob("*/.eps*.tmp"):
                    if (_GROUP.fullmatch(tmp.parent.name) and tmp.is_dir()
                            and not tmp.is_symlink()
                            and time.time() - tmp.stat().st_mtime > 3600):
                        shutil.rmtree(tmp, ignore_errors=True)
        for eng in store.root.iterdir():
            if _ENGINE.fullmatch(eng.name) and eng.is_dir() and not eng.is_symlink() and not any(
                    p for p in eng.iterdir() if not p.name.endswith(".lock")):
                try:
                    for lock in eng.glob("*.lock"):
                        lock.unlink(missing_ok=True)
                    eng.rmdir()
                except OSError:
                    pass  # left for a later prune
    what = ("every entry" if args.all else f"entries unused for {args.older_than:g} days"
            if cutoff is not None else f"entries of engines other than {current}")
    verb = "would remove" if args.dry_run else "removed"
    print(f"softrank cache prune: {verb} {len(gone)} brackets ({gib(freed)}): {what}, in "
          f"{str(store.root)!r}")
    if args.dry_run:
        for g in gone[:50]:
            print(f"  {g}")
        if len(gone) > 50:
            print(f"  ... and {len(gone) - 50} more")
    for f in failed[:20]:
        print(f"  could not remove {f}")
    return 1 if failed else 0


def run_reference(args) -> int:
    from ...refstore import export_bundle, import_bundle

    if args.reference_command == "export":
        dest = Path(args.directory)
        if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
            raise SoftrankError(f"DIR: {str(dest)!r} exists and is not an empty directory; a "
                                "bundle is written into a new one")
    store = reference_store(args, required=True, create=args.reference_command == "import")
    if args.reference_command == "import":
        rep = import_bundle(store, args.directory, keep_engine=args.keep_engine)
        print(f"softrank reference import: {rep.done} brackets added to {str(store.root)!r}, "
              f"{rep.already} already there (engine {rep.engine}); {len(rep.problems)} refused")
        for p in rep.problems[:50]:
            print(f"  refused: {p}")
        return 1 if rep.problems else 0
    from ..panels import build_panel, materialize

    panel = build_panel(args.panel, seed=args.seed)
    ops = materialize(panel.specs, operator_cache(args))
    eps = list(args.eps or panel.eps)
    rep = export_bundle(store, ops, eps, dest, effort=args.effort, validated=args.validated,
                        panel=panel.name)
    print(f"softrank reference export: {rep.done} of {len(ops) * len(eps)} cells of panel "
          f"{panel.name!r} written to {str(dest)!r} (engine {rep.engine})")
    for p in rep.problems[:50]:
        print(f"  missing: {p}")
    if rep.problems:
        print("  (run softrank audit on the panel with this store first; the bundle holds the "
              "cells that were stored)")
    return 1 if rep.problems else 0

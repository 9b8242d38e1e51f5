"""Reference bundles: a panel's stored brackets as a portable directory (docs/store.md).

A team computes a panel's references once (on a big machine, on a Dask cluster) and every
member and CI job imports them. A bundle is a directory:

* ``manifest.json``: ``format`` (``"softrank-reference-bundle"``), ``version`` (1), the
  engine (:func:`~softrank.refstore.store.engine_key`) and its versions, the panel, and one
  record per entry (operator hash, group, ``eps``, effort, ends, sha256 of each file) and
  per operator (file and sha256);
* ``operators/HASH.npz``: each operator (:func:`softrank.operators.save_operator`), so that
  the importing side checks every certificate against the matrix it is about;
* ``entries/GROUP/epsEPS/``: the store's entries as they are (two certificate files and
  ``bracket.json``).

:func:`import_bundle` trusts nothing in it: every file's digest, every operator (read back
and validated like any operator file, its hash equal to its name) and every certificate
(checked again in float64 and interval arithmetic, as the store checks on every read). A
bundle of another engine is refused by name, or, when asked, imported as references of that
engine only (this engine never reads them).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..certifiers.bracket import EFFORTS
from ..errors import InvalidArgumentError, SoftrankError
from ..operators import load_operator, save_operator
from .store import (SIDE_NAME, ReferenceStore, Refused, engine_key, engine_versions, eps_name,
                    file_sha256, group_name, side_record_ok)

__all__ = ["export_bundle", "import_bundle", "BundleReport", "BUNDLE_FORMAT", "BUNDLE_VERSION"]

BUNDLE_FORMAT = "softrank-reference-bundle"
BUNDLE_VERSION = 1
_MAX_MANIFEST = 64 << 20  # bytes
_HASH = re.compile(r"[0-9a-f]{16}")
_ENTRY_FILES = ("bracket.json", "lower.npz", "upper.npz")


@dataclass
class BundleReport:
    """What an export or import did.

    Attributes
    ----------
    engine : str
        The bundle's engine.
    done : int
        Entries written (export) or accepted into the store (import).
    already : int
        Import: entries the store already held, valid (left as they were).
    problems : list of str
        One line per cell not exported (not stored, or refused on reading) or entry not
        imported (and why).
    """

    engine: str
    done: int = 0
    already: int = 0
    problems: list = field(default_factory=list)


def _matrix(op, validated: bool):
    """The matrix the certificates are about and the enclosure radius."""
    if not validated:
        return op.A, 0.0
    from ..checker.validated import enclose_softmax

    return enclose_softmax(op.Q, op.K, op.beta, op.mask)


def export_bundle(store: ReferenceStore, operators, eps_list, dest, *, effort: str = "full",
                  validated: bool = False, panel: str = "") -> BundleReport:
    """Write the stored references of ``operators`` at ``eps_list`` to the new directory
    ``dest`` (module docstring); each entry is read back and checked first.

    Parameters
    ----------
    store : ReferenceStore
    operators : sequence of Operator
    eps_list : sequence of float
    dest : path
        A directory that does not exist or is empty (nothing is overwritten).
    effort : str
    validated : bool
    panel : str
        Recorded in the manifest.

    Returns
    -------
    BundleReport
        ``problems`` names each cell without a stored, valid entry (not in the bundle).

    Raises
    ------
    InvalidArgumentError
        ``dest`` exists and is not an empty directory.
    """
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise InvalidArgumentError(f"DIR: {str(dest)!r} exists and is not an empty directory; "
                                   "a bundle is written into a new one")
    eng = engine_key()
    report = BundleReport(eng)
    entries, ops = [], {}
    for op in operators:
        v = validated and op.Q is not None  # as the audit: without factors, not validated
        A, rho = _matrix(op, v)
        group = store.group_dir(op, effort, v)
        wrote = False
        try:
            store.check_entry_dirs(group)
        except OSError as exc:
            report.problems += [f"{op.operator_id} eps {e:g}: {exc}" for e in eps_list]
            continue
        stack = contextlib.ExitStack()
        if store.writable:
            try:
                stack.enter_context(store.locked(group))
            except OSError:  # a lock this process cannot take: read without it
                pass
        with stack:
            for e in eps_list:
                entry = group / eps_name(e)
                where = f"{op.operator_id} eps {e:g}"
                if not os.path.lexists(entry):
                    report.problems.append(f"{where}: not in the store")
                    continue
                try:
                    br = store.read(entry, op, A, rho, e, effort, v)
                except Refused as why:
                    report.problems.append(f"{where}: refused ({why})")
                    continue
                target = dest / "entries" / group.name / entry.name
                side = store.side_files(entry)
                store.copy_entry(entry, target, side)
                entries.append({"operator": op.hash, "group": group.name, "eps": float(e),
                                "effort": effort, "validated": v,
                                "lower": br.lower, "upper": br.upper,
                                "files": {n: file_sha256(target / n) for n in
                                          ("bracket.json", "lower.npz", "upper.npz", *side)}})
                report.done += 1
                wrote = True
        if wrote and op.hash not in ops:
            f = dest / "operators" / f"{op.hash}.npz"
            f.parent.mkdir(parents=True, exist_ok=True)
            save_operator(f, op)
            ops[op.hash] = {"file": f"operators/{op.hash}.npz", "sha256": file_sha256(f),
                            "operator_id": op.operator_id}
    manifest = {"format": BUNDLE_FORMAT, "version": BUNDLE_VERSION, "engine": eng,
                "versions": engine_versions(), "panel": panel,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "operators": ops, "entries": entries}
    dest.mkdir(parents=True, exist_ok=True)
    tmp = dest / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    tmp.replace(dest / "manifest.json")  # last: a bundle without it is incomplete
    return report


def read_manifest(src) -> dict:
    """The bundle's manifest, checked for its format and version.

    Raises
    ------
    InvalidArgumentError
        Naming ``DIR`` and what is wrong.
    """
    src = Path(src)
    path = src / "manifest.json"
    if not src.is_dir() or path.is_symlink() or not path.is_file():
        raise InvalidArgumentError(f"DIR: {str(src)!r} is not a reference bundle (no "
                                   "manifest.json; write one with softrank reference export)")
    with open(path, "rb") as fh:
        raw = fh.read(_MAX_MANIFEST + 1)
    try:
        if len(raw) > _MAX_MANIFEST:
            raise ValueError(f"over {_MAX_MANIFEST} bytes")
        m = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"DIR: {str(path)!r} is not JSON ({exc})") from None
    if not isinstance(m, dict) or m.get("format") != BUNDLE_FORMAT:
        raise InvalidArgumentError(f"DIR: {str(path)!r} is not a softrank reference bundle's "
                                   "manifest")
    if m.get("version") != BUNDLE_VERSION:
        raise InvalidArgumentError(f"DIR: bundle version {m.get('version')!r}, this softrank "
                                   f"reads version {BUNDLE_VERSION}")
    if (not isinstance(m.get("engine"), str) or not _HASH.fullmatch(m["engine"])
            or not isinstance(m.get("operators"), dict) or not isinstance(m.get("entries"), list)):
        raise InvalidArgumentError(f"DIR: {str(path)!r}: engine, operators or entries missing "
                                   "or malformed")
    return m


def import_bundle(store: ReferenceStore, src, *, keep_engine: bool = False) -> BundleReport:
    """Check every entry of the bundle ``src`` and add the ones that pass to ``store``.

    Parameters
    ----------
    store : ReferenceStore
    src : path
        A bundle written by :func:`export_bundle`.
    keep_engine : bool
        A bundle of another engine is imported as references of that engine only (under
        its own engine directory, which this engine never reads), instead of refused.

    Returns
    -------
    BundleReport
        ``done`` entries added, ``already`` held valid by the store, ``problems`` one line
        per entry refused (a digest that differs, an operator that does not read back or
        has another hash, a certificate the checker rejects).

    Raises
    ------
    InvalidArgumentError
        ``src`` is not a bundle of a version this softrank reads, or it was made by another
        engine and ``keep_engine`` is False.
    """
    src = Path(src)
    m = read_manifest(src)
    eng = m["engine"]
    if eng != engine_key() and not keep_engine:
        theirs = (m.get("versions") or {}).get("softrank", "?")
        raise InvalidArgumentError(
            f"DIR: the bundle's references were made by engine {eng} (softrank {theirs}); this "
            f"is engine {engine_key()} (softrank {engine_versions()['softrank']}), whose ends "
            "may differ; --keep-engine imports them as references of that engine only")
    report = BundleReport(eng)
    ops: dict = {}
    for h, rec in m["operators"].items():
        try:
            if not _HASH.fullmatch(h) or not isinstance(rec, dict):
                raise SoftrankError("not an operator record")
            f = src / "operators" / f"{h}.npz"
            if f.is_symlink() or not f.is_file() or file_sha256(f) != rec.get("sha256"):
                raise SoftrankError(f"operators/{h}.npz is missing or differs from the manifest")
            op = load_operator(f, "bundle operator")
            if op.hash != h:
                raise SoftrankError(f"its matrix has hash {op.hash}")
            ops[h] = op
        except (SoftrankError, OSError) as exc:
            report.problems.append(f"operator {h!s:.20}: {exc}")
    for rec in m["entries"]:
        try:
            op, group, e, effort, validated = _entry_fields(rec, ops)
        except SoftrankError as exc:
            who = (f"operator {rec.get('operator')!s:.20} eps {rec.get('eps')!s:.24}"
                   if isinstance(rec, dict) else f"{rec!r:.40}")
            report.problems.append(f"entry of {who}: {exc}")
            continue
        where = f"{op.operator_id} eps {e:g} ({effort})"
        entry = src / "entries" / group / eps_name(e)
        files = rec.get("files")
        try:
            side = tuple(n for n in files if n not in _ENTRY_FILES) if isinstance(
                files, dict) else ()
            if not isinstance(files, dict) or not all(
                    isinstance(n, str) and SIDE_NAME.fullmatch(n) for n in side) or any(
                    (entry / n).is_symlink() or not (entry / n).is_file()
                    or file_sha256(entry / n) != files.get(n)
                    for n in (*_ENTRY_FILES, *side)):
                raise Refused("a file is missing or differs from the manifest (sha256)")
            A, rho = _matrix(op, validated)
            br = store.read(entry, op, A, rho, e, effort, validated, engine=eng)
            if (type(rec.get("lower")) is not int or type(rec.get("upper")) is not int
                    or (rec["lower"], rec["upper"]) != (br.lower, br.upper)):
                raise Refused(f"the manifest says [{rec.get('lower')!r}, {rec.get('upper')!r}],"
                              f" the entry's certificates [{br.lower}, {br.upper}]")
            digests = json.loads((entry / "bracket.json").read_bytes()).get("files")
            for n in side:
                if not side_record_ok(_json(entry / n), digests, n[:-len(".json")]):
                    raise Refused(f"{n} is not a record softrank keeps beside an entry")
            target = store.root / eng / group / entry.name
            with store.locked(target.parent):
                try:
                    if os.path.lexists(target):
                        store.read(target, op, A, rho, e, effort, validated, engine=eng)
                        report.already += 1
                        continue
                except Refused:
                    pass  # replaced by the bundle's, which passed
                store.copy_entry(entry, target, side)
                report.done += 1
        except Refused as why:
            report.problems.append(f"{where}: refused ({why})")
        except OSError as exc:
            report.problems.append(f"{where}: {exc.strerror or exc}")
    return report


def _json(path: Path):
    """A small JSON file's content, or None."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(1 << 20)
        return json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None


def _entry_fields(rec, ops: dict):
    if not isinstance(rec, dict):
        raise SoftrankError("not an entry record")
    op = ops.get(rec.get("operator"))
    if op is None:
        raise SoftrankError("its operator is not in the bundle or was refused")
    e, effort, validated = rec.get("eps"), rec.get("effort"), rec.get("validated")
    if (type(e) is not float or not 0 < e < 1 or effort not in EFFORTS
            or type(validated) is not bool):
        raise SoftrankError("eps, effort or validated malformed")
    if validated and op.Q is None:
        raise SoftrankError("validated, but its operator has no factors")
    group = group_name(op, effort, validated)
    if rec.get("group") != group:
        raise SoftrankError(f"group {rec.get('group')!r} is not its operator's ({group})")
    return op, group, e, effort, validated

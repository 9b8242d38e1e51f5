"""Reference bundles: a panel's stored brackets as a portable directory (docs/store.md).

A team computes a panel's references once (on a big machine, on a Dask cluster) and every
member and CI job imports them. A bundle is a directory:

* ``manifest.json``: ``format`` (``"softrank-reference-bundle"``), ``version`` (1), the
  engine (:func:`~softrank.refstore.keys.engine_key`) and its versions, the panel, and one
  record per entry (operator hash, group, ``eps``, effort, ends, sha256 of each file) and
  per operator (file and sha256);
* ``operators/HASH.npz``: each operator (:func:`softrank.operator_files.save_operator`), so that
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
import errno
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..certifiers.bracket import EFFORTS
from ..errors import InvalidArgumentError, SoftrankError, printable
from ..operator_files import MAX_FILE_BYTES, load_operator, save_operator
from .layout import IMPORTED_NAME, MAX_RECORD_BYTES, SIDE_NAME, eps_name, mode_kind, within
from .record import Refused, certificate_bytes_bound, side_record_ok
from .keys import engine_key, engine_versions, file_sha256, group_name
from .store import ReferenceStore

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
        ``dest`` exists and is not an empty directory, or a file cannot be written there
        (one line naming it and the reason).
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
                _written(target, lambda: store.copy_entry(entry, target, side))
                entries.append({"operator": op.hash, "group": group.name, "eps": float(e),
                                "effort": effort, "validated": v,
                                "lower": br.lower, "upper": br.upper,
                                "files": {n: file_sha256(target / n) for n in
                                          ("bracket.json", "lower.npz", "upper.npz", *side)}})
                report.done += 1
                wrote = True
        if wrote and op.hash not in ops:
            f = dest / "operators" / f"{op.hash}.npz"
            _written(f, lambda: (f.parent.mkdir(parents=True, exist_ok=True),
                                 save_operator(f, op)))
            ops[op.hash] = {"file": f"operators/{op.hash}.npz", "sha256": file_sha256(f),
                            "operator_id": op.operator_id}
    manifest = {"format": BUNDLE_FORMAT, "version": BUNDLE_VERSION, "engine": eng,
                "versions": engine_versions(), "panel": panel,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "operators": ops, "entries": entries}
    tmp = dest / "manifest.json.tmp"

    def write_manifest():
        dest.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
        tmp.replace(dest / "manifest.json")  # last: a bundle without it is incomplete

    _written(dest / "manifest.json", write_manifest)
    return report


def _written(path: Path, write) -> None:
    """Run ``write``; an :class:`OSError` (a directory that cannot be created, a full disk)
    becomes one line naming the file and the reason, and saying that the bundle is
    incomplete (it has no manifest yet: no import reads it)."""
    try:
        write()
    except OSError as exc:
        raise InvalidArgumentError(f"DIR: cannot write {str(path)!r} ({exc.strerror or exc}); "
                                   "the bundle is incomplete (no manifest.json): remove it and "
                                   "export again") from None


def read_manifest(src) -> dict:
    """The bundle's manifest, checked for its format and version.

    Raises
    ------
    InvalidArgumentError
        Naming ``DIR`` and what is wrong.
    """
    src = Path(src)
    path = src / "manifest.json"
    if not str(src).strip() or not src.is_dir() or not os.path.lexists(path):
        raise InvalidArgumentError(f"DIR: {str(src)!r} is not a reference bundle (no "
                                   "manifest.json; write one with softrank reference export)")
    kind = mode_kind(os.lstat(path).st_mode)
    if kind != "regular file":
        raise InvalidArgumentError(f"DIR: {str(path)!r} is a {kind}, not a regular file (a "
                                   "bundle holds directories and regular files only)")
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


#: Largest operator file a bundle may hold (bytes): the data bound of
#: :func:`softrank.operator_files.load_operator` and room for the archive's headers. Measured
#: before the file is hashed or read.
MAX_OPERATOR_FILE = MAX_FILE_BYTES + (4 << 20)

_WRITE_ERRORS = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT)


def _regular(src: Path, rel: str, limit: int) -> Path:
    """``src/rel`` after checking, with ``lstat`` and without following a link, that every
    directory on the way is a directory and the file a regular file of at most ``limit``
    bytes. Else :class:`Refused` naming the file and the reason."""
    path = src
    parts = rel.split("/")
    for i, part in enumerate(parts):
        path = path / part
        here = "/".join(parts[:i + 1])
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            raise Refused(f"{here} is missing") from None
        except OSError as exc:
            raise Refused(f"{here} cannot be read ({exc.strerror or exc})") from None
        kind, want = mode_kind(st.st_mode), ("regular file" if i == len(parts) - 1
                                             else "directory")
        if kind != want:
            raise Refused(f"{here} is a {kind}, not a {want} (a bundle holds directories and "
                          "regular files only)")
    if st.st_size > limit:
        raise Refused(f"{rel} is {st.st_size} bytes, more than such a file can hold ({limit})")
    return path


def _digest(src: Path, rel: str, limit: int, want) -> Path:
    """:func:`_regular`, then its sha256 against the manifest's ``want``."""
    path = _regular(src, rel, limit)
    got = file_sha256(path)
    if got != want:
        raise Refused(f"{rel} differs from the manifest (sha256 {got[:16]}..., the manifest "
                      f"says {str(want)[:16]}...)")
    return path


def _bundle_dirs(src: Path) -> None:
    """Refuse a bundle whose ``operators`` or ``entries`` is a link or not a directory."""
    for name in ("operators", "entries"):
        try:
            kind = mode_kind(os.lstat(src / name).st_mode)
        except FileNotFoundError:
            continue  # an empty bundle has neither
        if kind != "directory":
            raise InvalidArgumentError(f"DIR: {str(src / name)!r} is a {kind}, not a "
                                       "directory (a bundle holds directories and regular "
                                       "files only)")


def import_bundle(store: ReferenceStore, src, *, keep_engine: bool = False) -> BundleReport:
    """Check every entry of the bundle ``src`` and add the ones that pass to ``store``.

    Nothing is trusted and nothing of the bundle is changed (docs/store.md): every file is
    measured (``lstat``: a directory or a regular file, never followed through a link, of
    at most the size its kind can have, from the operator's shape for certificates) before
    it is hashed or read; every digest must be the manifest's; every operator is read back
    and validated like any operator file (its hash equal to its name); every entry must pass
    the store's own checks (:meth:`~softrank.refstore.store.ReferenceStore.read`). Only then
    is anything written: the store's directory is created for a bundle with at least one
    entry to add, and each
    entry is added with a record of the bundle it came from (the entry's seconds and method
    records are that bundle's claims: :data:`~softrank.refstore.record.BUNDLE_CLAIMS`). An
    attack's outcome kept beside an entry is a claim no check covers and is not imported:
    the first audit that uses the entry attacks it again and keeps its own.

    Parameters
    ----------
    store : ReferenceStore
        Opened with ``create="later"`` to create nothing for a bundle that adds nothing.
    src : path
        A bundle written by :func:`export_bundle`.
    keep_engine : bool
        A bundle of another engine is imported as references of that engine only (under
        its own engine directory, which this engine never reads), instead of refused.

    Returns
    -------
    BundleReport
        ``done`` entries added, ``already`` held valid by the store, ``problems`` one line
        per operator or entry refused, naming the file and the reason.

    Raises
    ------
    InvalidArgumentError
        ``src`` is not a bundle of a version this softrank reads, its ``operators`` or
        ``entries`` is a link or not a directory, it was made by another engine and
        ``keep_engine`` is False, or the store cannot be created or written (one line; the
        entries added before a write failed stay, whole).
    """
    src = Path(src)
    m = read_manifest(src)
    eng = m["engine"]
    if eng != engine_key() and not keep_engine:
        versions = m.get("versions")
        theirs = printable(versions.get("softrank", "?") if isinstance(versions, dict) else "?")
        raise InvalidArgumentError(
            f"DIR: the bundle's references were made by engine {eng} (softrank {theirs}); this "
            f"is engine {engine_key()} (softrank {engine_versions()['softrank']}), whose ends "
            "may differ; --keep-engine imports them as references of that engine only")
    _bundle_dirs(src)
    _writable(store, src)
    report = BundleReport(eng)
    ops: dict = {}
    for h, rec in m["operators"].items():
        try:
            if not _HASH.fullmatch(h) or not isinstance(rec, dict):
                raise Refused("not an operator record")
            f = _digest(src, f"operators/{h}.npz", MAX_OPERATOR_FILE, rec.get("sha256"))
            try:
                op = load_operator(f, "bundle operator")
            except SoftrankError as exc:
                raise Refused(f"operators/{h}.npz: {exc}") from None
            if op.hash != h:
                raise Refused(f"operators/{h}.npz: its matrix has hash {op.hash}")
            ops[h] = op
        except Refused as why:
            report.problems.append(printable(f"operator {h!s:.20}: refused ({why})"))
    accepted = []
    for rec in m["entries"]:
        try:
            op, group, e, effort, validated = _entry_fields(rec, ops)
        except SoftrankError as exc:
            who = (f"operator {printable(rec.get('operator'))[:20]} eps "
                   f"{printable(rec.get('eps'))[:24]}" if isinstance(rec, dict)
                   else printable(rec)[:40])
            report.problems.append(f"entry of {who}: {exc}")
            continue
        where = f"{op.operator_id} eps {e:g} ({effort})"
        try:
            entry, side, A, rho = _check_entry(src, rec, op, group, e, effort, validated, eng,
                                               store)
        except Refused as why:
            report.problems.append(f"{where}: refused ({why})")
            continue
        except OSError as exc:
            report.problems.append(f"{where}: refused ({exc.strerror or exc})")
            continue
        except (TypeError, ValueError, KeyError, AttributeError, IndexError,
                RecursionError) as exc:  # a field of a type no check foresaw
            report.problems.append(f"{where}: refused (the manifest's record of it is "
                                   f"malformed: {type(exc).__name__})")
            continue
        accepted.append((where, op, group, e, effort, validated, entry, side, A, rho))
    if not accepted:
        return report
    imported = {"bundle": printable(f"{src.resolve()} (panel {str(m.get('panel') or '?')[:60]}, "
                                 f"made {str(m.get('created') or '?')[:40]})"),
                "manifest_sha256": file_sha256(src / "manifest.json"),
                "imported": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    store.ensure_root(hint=False)
    for where, op, group, e, effort, validated, entry, side, A, rho in accepted:
        target = store.root / eng / group / entry.name
        try:
            with store.locked(target.parent):
                if os.path.lexists(target):
                    try:
                        store.read(target, op, A, rho, e, effort, validated, engine=eng)
                        report.already += 1
                        continue
                    except Refused:
                        pass  # replaced by the bundle's, which passed
                files = json.loads((entry / "bracket.json").read_bytes()).get("files")
                store.copy_entry(entry, target, side, imported={**imported, "files": files})
                report.done += 1
        except OSError as exc:
            if exc.errno in _WRITE_ERRORS:
                raise InvalidArgumentError(
                    f"{store.arg}: cannot write {str(store.root)!r} ({exc.strerror}); "
                    f"{report.done} of {len(accepted)} entries were added before it stopped"
                ) from None
            report.problems.append(f"{where}: not added (the store: {exc.strerror or exc})")
    return report


def _writable(store: ReferenceStore, src: Path) -> None:
    """Refuse, before any work and in one line, a store inside the bundle (importing would
    change the bundle) and a store that cannot be written or created: a file is created in
    it, or a directory beside where it would be, and removed at once (permission bits do not
    tell, e.g. for root, in ``/proc`` or on a read-only mount)."""
    import tempfile

    root = store.root
    if within(root, src):
        raise InvalidArgumentError(f"{store.arg}: {str(root)!r} is inside the bundle "
                                   f"{str(src)!r}; a bundle is never changed by its import")
    if within(src, root):
        raise InvalidArgumentError(f"DIR: the bundle {str(src)!r} is inside the store "
                                   f"{str(root)!r}, which holds only its own files; move it out")
    try:
        if root.exists():
            if not store.writable:
                raise PermissionError(errno.EROFS, "read-only")
            fd, probe = tempfile.mkstemp(dir=root, prefix=".softrank-probe-")
            os.close(fd)
            os.unlink(probe)
            return
        up = root.parent
        while not os.path.lexists(up) and up != up.parent:
            up = up.parent
        if not up.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{str(up)!r} is not a directory")
        os.rmdir(tempfile.mkdtemp(dir=up, prefix=".softrank-probe-"))
    except OSError as exc:
        verb = "cannot be written here" if root.exists() else "cannot be created"
        raise InvalidArgumentError(f"{store.arg}: {str(root)!r} {verb} "
                                   f"({exc.strerror or exc}); nothing imported") from None


def _check_entry(src: Path, rec: dict, op, group: str, e: float, effort: str,
                 validated: bool, eng: str, store: ReferenceStore):
    """One entry of the bundle checked as :func:`import_bundle` says: ``(entry directory,
    its side records to keep, A, rho)``, or :class:`Refused` naming the file and why."""
    rel = f"entries/{group}/{eps_name(e)}"
    files = rec.get("files")
    if not isinstance(files, dict):
        raise Refused("the manifest lists no files for it")
    side = tuple(n for n in files if n not in _ENTRY_FILES)
    for n in side:
        if not (isinstance(n, str) and SIDE_NAME.fullmatch(n)) or n == IMPORTED_NAME:
            raise Refused(f"{rel}/{str(n)[:60]!r} is not a name softrank writes beside an entry")
    for n in _ENTRY_FILES:
        if n not in files:
            raise Refused(f"the manifest lists no {n} for {rel}")
    bound = certificate_bytes_bound(*op.shape)
    for n in (*_ENTRY_FILES, *side):
        limit = bound if n.endswith(".npz") else MAX_RECORD_BYTES
        _digest(src, f"{rel}/{n}", limit, files[n])
    entry = src / rel
    A, rho = _matrix(op, validated)
    br = store.read(entry, op, A, rho, e, effort, validated, engine=eng, touch=False)
    if (type(rec.get("lower")) is not int or type(rec.get("upper")) is not int
            or (rec["lower"], rec["upper"]) != (br.lower, br.upper)):
        raise Refused(f"the manifest says [{rec.get('lower')!r}, {rec.get('upper')!r}], the "
                      f"entry's certificates [{br.lower}, {br.upper}]")
    digests = json.loads((entry / "bracket.json").read_bytes()).get("files")
    for n in side:
        if not side_record_ok(_json(entry / n), digests, n[:-len(".json")]):
            raise Refused(f"{rel}/{n} is not a record softrank keeps beside an entry")
    keep = tuple(n for n in side if not n.startswith("attack-"))  # claims: not imported
    return entry, keep, A, rho


def _json(path: Path):
    """A small JSON file's content, or None."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(1 << 20)
        return json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None


def _entry_fields(rec, ops: dict):
    if not isinstance(rec, dict) or not isinstance(rec.get("operator"), str):
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

"""What a reference store's directory holds, recognised by content (docs/store.md, *What prune
may delete*).

:class:`~softrank.refstore.store.ReferenceStore` writes only these, under its root:

* ``ENGINE/``: 16 hex digits (:func:`~softrank.refstore.keys.engine_key`);
* ``ENGINE/GROUP.lock``: an empty regular file, the operator's lock, named after ``GROUP``;
* ``ENGINE/GROUP/``: ``HASH-EFFORT`` or ``HASH-EFFORT-validated-HASH``
  (:func:`~softrank.refstore.store.group_name`);
* ``ENGINE/GROUP/epsEPS/``: an *entry*, regular files only: ``bracket.json`` (a JSON object
  of :data:`ENTRY_FORMAT` naming this ``ENGINE``, the group's operator hash, effort and
  validation, an ``eps`` whose name is the directory's, and the sha256 of exactly
  ``lower.npz`` and ``upper.npz``), those two certificate files (``.npz`` archives), side
  records ``NAME.json`` (``{"files": ..., "value": ...}`` with the record's digests) and
  :data:`IMPORTED_NAME` (where the entry came from a bundle, with the record's digests);
* ``ENGINE/GROUP/.epsEPS.PID.tmp/``: an entry being written (``bracket.json``, the two
  certificate files, their own temporaries ``lower.npz.tmp.npz`` and ``upper.npz.tmp.npz``,
  and :data:`IMPORTED_NAME`).

:func:`scan` walks a directory and sorts what it finds into those kinds; everything else is
*foreign*, named by its path and why. An entry is recognised by its ``bracket.json``, which
must be a record of the store's format, and every other file in it must be one that record
accounts for: a certificate file it names (whose bytes may have been damaged since:
its record still names it, and reading the entry refuses it) or a record whose digests are
its own. :func:`entry_problem` says why one directory is not an entry; the store replaces
or removes an entry (:func:`replaceable_problem`, :func:`remove_dir`) and ``softrank cache
prune`` (:func:`prune_plan`, :func:`prune`) deletes only what these functions recognise, and
only file by file: a file that appeared since it was recognised stays, and so does its
directory. A staged entry, whose files may be cut short, is recognised by their names.
Directories named as the store names them and left empty are the store's too (they hold
nothing to lose).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import printable

__all__ = ["ENTRY_FORMAT", "SIDE_NAME", "IMPORTED_NAME", "MAX_RECORD_BYTES", "ENTRY_FILES",
           "ENGINE_NAME", "GROUP_NAME", "ENTRY_NAME", "eps_name", "mode_kind", "within",
           "is_seconds", "side_record_ok", "imported_record_ok", "entry_problem",
           "staging_problem", "replaceable_problem", "remove_dir", "Scan", "scan",
           "PrunePlan", "prune_plan", "prune", "PruneResult", "STALE_STAGING"]

#: The version of an entry's layout (``bracket.json``'s ``format``).
ENTRY_FORMAT = 1

#: The name of a side record kept beside an entry (an attack's outcome).
SIDE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,80}\.json")

#: Where an entry imported from a bundle says which bundle (beside ``bracket.json``).
IMPORTED_NAME = "imported.json"

#: Largest ``bracket.json`` (or side record) read, in bytes: a bracket's diagnostics are a
#: few kB.
MAX_RECORD_BYTES = 1 << 20

#: The files of every entry.
ENTRY_FILES = ("bracket.json", "lower.npz", "upper.npz")

ENGINE_NAME = re.compile(r"[0-9a-f]{16}")
GROUP_NAME = re.compile(r"([0-9a-f]{16})-(full|fast)(-validated-[0-9a-f]{16})?")
ENTRY_NAME = re.compile(r"eps[0-9.e+-]+")
_STAGING = re.compile(r"\.(eps[0-9.e+-]+)\.[0-9]+\.tmp")
_LOCK = re.compile(r"(.+)\.lock")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX16 = ENGINE_NAME

#: A staged entry older than this (seconds) was left by a writer that was killed.
STALE_STAGING = 3600


def is_seconds(v) -> bool:
    """A duration as softrank writes one: a finite number >= 0 (not a bool)."""
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and v >= 0)


def side_record_ok(rec, files, name: str = "") -> bool:
    """A side record as :meth:`~softrank.refstore.store.ReferenceStore.put_side_record`
    writes one, for the entry whose certificate digests are ``files``: ``{"files": ...,
    "value": {key: value}}``, each value a finite number or a short string; an attack's
    (``attack-*``) exactly
    ``{"attack": "held", "attack_closest": x, "attack_seconds": s}`` with numbers >= 0."""
    if not (isinstance(rec, dict) and set(rec) == {"files", "value"} and isinstance(files, dict)
            and rec["files"] == files and isinstance(rec["value"], dict)):
        return False
    v = rec["value"]
    if name.startswith("attack-"):
        return (set(v) == {"attack", "attack_closest", "attack_seconds"}
                and v["attack"] == "held" and is_seconds(v["attack_closest"])
                and is_seconds(v["attack_seconds"]))
    return all(isinstance(k, str) and (is_seconds(x) or (isinstance(x, (int, float))
                                                         and not isinstance(x, bool)
                                                         and math.isfinite(x))
                                       or (isinstance(x, str) and len(x) <= 80))
               for k, x in v.items())


def within(child, parent) -> bool:
    """Whether the path ``child`` (which need not exist) is ``parent`` or lies inside it,
    judged by the device and inode of each directory on the way up from ``child``'s real
    path, so that a link, ``..`` or a bind mount of ``parent`` is seen through."""
    try:
        top = os.stat(parent)
    except OSError:
        return False
    p = Path(child).resolve()
    while True:
        try:
            st = os.stat(p)
            if (st.st_dev, st.st_ino) == (top.st_dev, top.st_ino):
                return True
        except OSError:
            pass  # not there (yet): its parent decides
        if p == p.parent:
            return False
        p = p.parent


def eps_name(eps: float) -> str:
    """An entry's directory name: ``eps`` and the float as Python writes it."""
    return f"eps{float(eps)!r}"


_DIR, _FILE = "directory", "regular file"


def _kind(path: Path) -> str:
    """:func:`mode_kind` of ``path``'s ``lstat`` (never follows a link)."""
    return mode_kind(os.lstat(path).st_mode)


def mode_kind(mode: int) -> str:
    """``directory``, ``regular file``, ``symbolic link``, ``FIFO``, ``socket``, ``device``
    or ``special file``: what a file's mode says it is, for messages."""
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISDIR(mode):
        return _DIR
    if stat.S_ISREG(mode):
        return _FILE
    return {stat.S_IFIFO: "FIFO", stat.S_IFSOCK: "socket", stat.S_IFCHR: "device",
            stat.S_IFBLK: "device"}.get(stat.S_IFMT(mode), "special file")


def _small_json(path: Path):
    """A regular file's JSON content (at most :data:`MAX_RECORD_BYTES`), or None."""
    try:
        if os.lstat(path).st_size > MAX_RECORD_BYTES:
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            return json.loads(fh.read(MAX_RECORD_BYTES + 1))
    except (OSError, ValueError, RecursionError):
        return None


def entry_problem(entry: Path) -> str | None:
    """Why the directory ``entry`` is not an entry the store wrote, naming the first path at
    fault; None when it is one (module docstring): its ``bracket.json`` is a record of the
    store's format (whether or not it is still the record of this path: an entry moved or
    edited is refused on reading, and replaced), every other file one it accounts for."""
    why = _files_problem(entry, lambda n: n in ENTRY_FILES or bool(SIDE_NAME.fullmatch(n)))
    if why is not None:
        return why
    names = sorted(os.listdir(entry))
    if "bracket.json" not in names:
        return f"{entry.name} has no bracket.json"
    rec = _small_json(entry / "bracket.json")
    if not (isinstance(rec, dict) and type(rec.get("format")) is int
            and rec["format"] == ENTRY_FORMAT
            and isinstance(rec.get("engine"), str) and ENGINE_NAME.fullmatch(rec["engine"])
            and isinstance(rec.get("operator"), str) and _HEX16.fullmatch(rec["operator"])
            and rec.get("effort") in ("full", "fast") and isinstance(rec.get("validated"), bool)
            and isinstance(rec.get("eps"), float) and 0 < rec["eps"] < 1
            and isinstance(rec.get("files"), dict)
            and set(rec["files"]) == {"lower.npz", "upper.npz"}
            and all(isinstance(v, str) and _HEX64.fullmatch(v) for v in rec["files"].values())):
        return f"{entry.name}/bracket.json is not a record of the store's (format {ENTRY_FORMAT})"
    for name in names:
        if name in ("bracket.json", "lower.npz", "upper.npz"):
            continue
        doc = _small_json(entry / name)
        if not (side_record_ok(doc, rec["files"], name[:-len(".json")])
                if name != IMPORTED_NAME else imported_record_ok(doc, rec["files"])):
            return (f"{entry.name}/{name} is not a record the store keeps beside this entry "
                    "(with its digests)")
    return None


def imported_record_ok(doc, files) -> bool:
    """:data:`IMPORTED_NAME` as the store writes it, for the entry whose certificate digests
    are ``files``: the bundle's description, the manifest's digest, when, and ``files``."""
    return (isinstance(doc, dict) and set(doc) == {"bundle", "manifest_sha256", "imported",
                                                   "files"}
            and doc["files"] == files and isinstance(doc["bundle"], str)
            and isinstance(doc["manifest_sha256"], str) and isinstance(doc["imported"], str))


#: What an entry being written may hold (module docstring).
_STAGED_NAMES = (*ENTRY_FILES, "lower.npz.tmp.npz", "upper.npz.tmp.npz", IMPORTED_NAME)


def _files_problem(d: Path, named) -> str | None:
    """Why ``d`` is not a directory of regular files whose names ``named`` accepts (naming
    the first path at fault), or None."""
    try:
        kind = _kind(d)
        if kind != _DIR:
            return f"{d.name} is a {kind}, not a directory"
        names = sorted(os.listdir(d))
    except OSError as exc:
        return f"{d.name} cannot be read ({exc.strerror or exc})"
    for name in names:
        if not named(name):
            return f"{d.name}/{name} is not a file the store writes"
        try:
            kind = _kind(d / name)
        except OSError as exc:
            return f"{d.name}/{name} cannot be read ({exc.strerror or exc})"
        if kind != _FILE:
            return f"{d.name}/{name} is a {kind}, not a regular file"
    return None


def replaceable_problem(entry: Path) -> str | None:
    """Why the store may not replace (or remove) what lies at the entry path ``entry``
    (``ROOT/ENGINE/GROUP/epsEPS``), naming the first path at fault; None when it may:
    nothing there, or an entry of its own (:func:`entry_problem`), damaged or not. Anything
    else is left alone."""
    if not os.path.lexists(entry):
        return None
    return entry_problem(entry)


def remove_dir(path: Path, names=None, check=None) -> None:
    """Unlink the files ``names`` of the directory ``path`` (default: every file, once
    ``check(path)`` -- :func:`replaceable_problem` unless given, e.g. :func:`staging_problem`
    -- has accepted them now), then remove the directory itself.

    Raises
    ------
    OSError
        ``path`` holds something else (it is left, with that), or a file cannot be removed.
    """
    if names is None:
        why = (check or replaceable_problem)(path)
        if why is not None:
            raise OSError(f"{why}; left alone")
        names = os.listdir(path)
    # the record last: a removal cut short leaves an entry its record still accounts for
    for name in sorted(names, key=lambda n: n == "bracket.json"):
        try:
            os.unlink(path / name)
        except OSError as exc:
            raise OSError(exc.errno, f"{name}: {exc.strerror or exc}") from None
    os.rmdir(path)


def staging_problem(tmp: Path) -> str | None:
    """Why the directory ``tmp`` (``.epsEPS.PID.tmp``) is not an entry the store was
    writing, naming the first path at fault; None when it is one. Its files may be cut
    short (a writer killed mid-way): recognised by their names and kinds only."""
    return _files_problem(tmp, lambda n: n in _STAGED_NAMES)


@dataclass
class Entry:
    """One entry of a store: its engine, group and directory, its files, their bytes and
    when it was last used (``bracket.json``'s modification time)."""

    engine: str
    group: str
    path: Path
    files: list
    bytes: int
    last_used: float


@dataclass
class Scan:
    """What :func:`scan` found under a store's root.

    Attributes
    ----------
    entries : list of Entry
    staging : list of (Path, float)
        Entries being written (or left by a killed writer), with their modification times.
    locks : dict
        ``{(engine, group): Path}``: the lock files.
    groups, engines : list of Path
        Every group and engine directory.
    foreign : list of str
        One line per path that is not the store's: the path (relative to the root) and why.
        The walk does not descend into a foreign directory.
    """

    root: Path
    entries: list = field(default_factory=list)
    staging: list = field(default_factory=list)
    locks: dict = field(default_factory=dict)
    groups: list = field(default_factory=list)
    engines: list = field(default_factory=list)
    foreign: list = field(default_factory=list)


def _listdir(path: Path) -> list[str]:
    return sorted(os.listdir(path))


def scan(root) -> Scan:
    """Walk the store at ``root`` (module docstring), in sorted order; never follows a link.

    Raises
    ------
    OSError
        ``root`` itself cannot be listed.
    """
    root = Path(root)
    out = Scan(root)
    for e in _listdir(root):
        eng = root / e
        kind = _noted(out, e, lambda: _kind(eng))
        if kind is None:
            continue
        if not (ENGINE_NAME.fullmatch(e) and kind == _DIR):
            _foreign(out, f"{e}: a {kind} that is not an engine directory (16 hex digits)")
            continue
        out.engines.append(eng)
        for g in _noted(out, e, lambda: _listdir(eng)) or []:
            _group(out, e, eng / g)
    return out


def _foreign(out: Scan, line: str) -> None:
    out.foreign.append(printable(line))


def _noted(out: Scan, rel: str, look):
    """``look()``, or None with a line in ``out.foreign`` when it raises :class:`OSError`."""
    try:
        return look()
    except OSError as exc:
        _foreign(out, f"{rel}: cannot be read ({exc.strerror or exc})")
        return None


def _group(out: Scan, e: str, path: Path) -> None:
    g = path.name
    rel = f"{e}/{g}"
    kind = _noted(out, rel, lambda: _kind(path))
    if kind is None:
        return
    lock = _LOCK.fullmatch(g)
    if lock:
        size = _noted(out, rel, lambda: os.lstat(path).st_size) if kind == _FILE else None
        if GROUP_NAME.fullmatch(lock.group(1)) and size == 0:
            out.locks[(e, lock.group(1))] = path
        elif size is None or GROUP_NAME.fullmatch(lock.group(1)):
            _foreign(out, f"{rel}: a {kind if size is None else f'{size}-byte file'}, not a "
                          "lock the store writes (an empty regular file named GROUP.lock)")
        else:
            _foreign(out, f"{rel}: not named as the store names a lock (GROUP.lock)")
        return
    if not (GROUP_NAME.fullmatch(g) and kind == _DIR):
        _foreign(out, f"{rel}: a {kind} that is not an operator's directory "
                      "(HASH-EFFORT[-validated-HASH])")
        return
    out.groups.append(path)
    for n in _noted(out, rel, lambda: _listdir(path)) or []:
        p = path / n
        if ENTRY_NAME.fullmatch(n):
            why = entry_problem(p)
            if why is not None:
                _foreign(out, f"{e}/{g}/{why}")
                continue
            files = _listdir(p)
            size = sum(os.lstat(p / f).st_size for f in files)
            out.entries.append(Entry(e, g, p, files, size,
                                     os.lstat(p / "bracket.json").st_mtime))
        elif _STAGING.fullmatch(n):
            why = staging_problem(p)
            if why is not None:
                _foreign(out, f"{e}/{g}/{why}")
                continue
            out.staging.append((p, os.lstat(p).st_mtime))
        else:
            _foreign(out, f"{e}/{g}/{n}: not an entry the store writes (epsEPS)")


@dataclass
class PrunePlan:
    """What a prune removes, in the order it removes it.

    Attributes
    ----------
    entries : list of Entry
        The entries chosen.
    staging : list of Path
        Entries a killed writer left half-made (older than :data:`STALE_STAGING`).
    groups, locks, engines : list of Path
        The operator directories, their locks and the engine directories that are empty once
        the above are gone.
    in_use : list of str
        Operators whose lock another process holds: left alone, with everything in them.
    """

    entries: list = field(default_factory=list)
    staging: list = field(default_factory=list)
    groups: list = field(default_factory=list)
    locks: list = field(default_factory=list)
    engines: list = field(default_factory=list)
    in_use: list = field(default_factory=list)

    def paths(self, root: Path) -> list[str]:
        """Every path the prune removes, relative to ``root``, in order (directories with a
        trailing ``/``)."""
        rel = lambda p: str(p.relative_to(root))  # noqa: E731
        return ([rel(e.path) + "/" for e in self.entries] + [rel(p) + "/" for p in self.staging]
                + [rel(p) + "/" for p in self.groups] + [rel(p) for p in self.locks]
                + [rel(p) + "/" for p in self.engines])

    @property
    def bytes(self) -> int:
        return sum(e.bytes for e in self.entries)


def _held(lock: Path) -> bool:
    """Whether another process holds ``lock`` (a non-blocking try, released at once)."""
    import fcntl

    try:
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False  # cannot be opened: not held through this file
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def prune_plan(found: Scan, choose, now: float | None = None) -> PrunePlan:
    """What a prune removes from the store ``found`` describes: the entries ``choose(entry)``
    picks, the staged entries older than :data:`STALE_STAGING`, then every operator directory
    left empty (with its lock), every lock of an operator without a directory, and every
    engine directory left empty. An operator whose lock another process holds is left as it
    is (``in_use``). The caller refuses a scan with foreign paths first."""
    now = time.time() if now is None else now
    plan = PrunePlan()
    by_group: dict = {}
    for e in found.entries:
        by_group.setdefault((e.engine, e.group), []).append(e)
    staged: dict = {}
    for p, mtime in found.staging:
        staged.setdefault((p.parent.parent.name, p.parent.name), []).append((p, mtime))
    held = {k for k, lock in found.locks.items() if _held(lock)}
    plan.in_use = [f"{e}/{g}" for e, g in sorted(held)]
    gone_groups = set()
    for gdir in found.groups:
        key = (gdir.parent.name, gdir.name)
        if key in held:
            continue
        ents = [e for e in by_group.get(key, []) if choose(e)]
        old = [p for p, mtime in staged.get(key, []) if now - mtime > STALE_STAGING]
        plan.entries += ents
        plan.staging += old
        if len(ents) + len(old) == len(by_group.get(key, [])) + len(staged.get(key, [])):
            plan.groups.append(gdir)
            gone_groups.add(key)
    groups = {(g.parent.name, g.name) for g in found.groups}
    for key, lock in sorted(found.locks.items()):
        if key not in held and (key in gone_groups or key not in groups):
            plan.locks.append(lock)
    for eng in found.engines:
        e = eng.name
        left = [k for k in groups if k[0] == e and k not in gone_groups]
        left += [k for k in found.locks if k[0] == e and found.locks[k] not in plan.locks]
        if not left:
            plan.engines.append(eng)
    return plan


@dataclass
class PruneResult:
    """What :func:`prune` did: the entries removed (and their bytes), every other path
    removed, and one line per path not removed, with why."""

    entries: list = field(default_factory=list)
    bytes: int = 0
    others: list = field(default_factory=list)
    failed: list = field(default_factory=list)


def prune(plan: PrunePlan) -> PruneResult:
    """Carry out ``plan`` (:func:`prune_plan`): each entry's files one by one, then its
    directory; each staged entry, checked again; then the operator directories, their locks
    and the engine directories that are empty now (one that still holds something, because a
    removal above failed, is left with its lock; the failure is the line that says why). An
    operator whose lock another process took since the plan was made is left alone."""
    import fcntl

    out = PruneResult()

    def locked(lock: Path | None):
        """An open, exclusively locked descriptor of ``lock``, None without one, or
        BlockingIOError when another process holds it."""
        if lock is None or not os.path.lexists(lock):
            return None
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise
        return fd

    def attempt(path: Path, what, lock: Path | None = None) -> bool:
        try:
            fd = locked(lock)
        except BlockingIOError:
            out.failed.append(f"{path}: in use by another run (its lock is held)")
            return False
        except OSError as exc:
            out.failed.append(f"{path}: its lock cannot be taken ({exc.strerror or exc})")
            return False
        try:
            what()
            return True
        except OSError as exc:
            out.failed.append(f"{path}: {exc.strerror or exc}")
            return False
        finally:
            if fd is not None:
                os.close(fd)

    def lock_of(gdir: Path) -> Path:
        return gdir.parent / f"{gdir.name}.lock"

    def emptied(d: Path) -> bool:
        try:
            return not os.listdir(d)
        except OSError:
            return False

    for e in plan.entries:
        if attempt(e.path, lambda e=e: remove_dir(e.path, e.files), lock_of(e.path.parent)):
            out.entries.append(e)
            out.bytes += e.bytes
    for p in plan.staging:
        if attempt(p, lambda p=p: remove_dir(p, check=staging_problem), lock_of(p.parent)):
            out.others.append(p)
    for g in plan.groups:
        if emptied(g) and attempt(g, lambda g=g: os.rmdir(g), lock_of(g)):
            out.others.append(g)
    for lock in plan.locks:
        group = lock.with_name(lock.name[:-len(".lock")])

        def unlink(lock=lock):
            st = os.lstat(lock)
            if not stat.S_ISREG(st.st_mode) or st.st_size:
                raise OSError("no longer an empty lock file; left alone")
            os.unlink(lock)

        if not os.path.lexists(group) and attempt(lock, unlink, lock):
            out.others.append(lock)
    for eng in plan.engines:
        if emptied(eng) and attempt(eng, lambda eng=eng: os.rmdir(eng)):
            out.others.append(eng)
    return out

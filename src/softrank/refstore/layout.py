"""What a reference store's directory holds, recognised by content (docs/store.md, *What prune
may delete*).

:class:`~softrank.refstore.store.ReferenceStore` writes only these, under its root:

* ``ENGINE/``: 16 hex digits (:func:`~softrank.refstore.store.engine_key`);
* ``ENGINE/GROUP.lock``: an empty regular file, the operator's lock, named after ``GROUP``;
* ``ENGINE/GROUP/``: ``HASH-EFFORT`` or ``HASH-EFFORT-validated-HASH``
  (:func:`~softrank.refstore.store.group_name`);
* ``ENGINE/GROUP/epsEPS/``: an *entry*, regular files only: ``bracket.json`` (a JSON object
  of :data:`ENTRY_FORMAT` naming this ``ENGINE``, the group's operator hash, effort and
  validation, an ``eps`` whose name is the directory's, and the sha256 of exactly
  ``lower.npz`` and ``upper.npz``), those two certificate files (``.npz`` archives), side
  records ``NAME.json`` (``{"files": ..., "value": ...}``), :data:`IMPORTED_NAME` (where the
  entry came from a bundle) and a side record being written (``.NAME.json.PID.tmp``);
* ``ENGINE/GROUP/.epsEPS.PID.tmp/``: an entry being written (those file names, plus the
  certificate files' own temporaries ``lower.npz.tmp.npz`` and ``upper.npz.tmp.npz``).

:func:`scan` walks a directory and sorts what it finds into those kinds; everything else is
*foreign*, named by its path and why. :func:`entry_problem` says why one directory is not an
entry, :func:`replaceable_problem` why the store may not replace what lies at an entry's
path. ``softrank cache prune`` (:func:`prune_plan`, :func:`prune`), the store's replacement
of an entry and its removal of a refuted one delete only what these functions recognise, and
only file by file (:func:`remove_dir`): a file that appeared since it was recognised stays,
and so does its directory.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ENTRY_FORMAT", "SIDE_NAME", "IMPORTED_NAME", "MAX_RECORD_BYTES", "ENTRY_FILES",
           "ENGINE_NAME", "GROUP_NAME", "ENTRY_NAME", "eps_name", "entry_problem",
           "staging_problem", "replaceable_problem", "remove_dir", "Scan", "scan",
           "PrunePlan", "prune_plan", "prune", "STALE_STAGING"]

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
_SIDE_TMP = re.compile(r"\.([A-Za-z0-9][A-Za-z0-9_-]{0,80}\.json)\.[0-9]+\.tmp")
_LOCK = re.compile(r"(.+)\.lock")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_ZIP = b"PK\x03\x04"

#: A staged entry older than this (seconds) was left by a writer that was killed.
STALE_STAGING = 3600


def eps_name(eps: float) -> str:
    """An entry's directory name: ``eps`` and the float as Python writes it."""
    return f"eps{float(eps)!r}"


def _kind(path: Path) -> str:
    """``dir``, ``file``, ``link`` or what else ``lstat`` says (never follows a link)."""
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
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


def _starts_as_zip(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            return fh.read(4) == _ZIP
    except OSError:
        return False


def entry_problem(entry: Path, engine: str, group: str) -> str | None:
    """Why the directory ``entry`` (at ``ENGINE/GROUP/NAME``) is not an entry the store
    wrote, naming the first path at fault; None when it is one (module docstring). Its
    certificate files are recognised by their names, their kind and their first bytes, not
    checked (a damaged entry is still the store's own; reading it refuses it)."""
    gm = GROUP_NAME.fullmatch(group)
    why = _files_problem(entry)
    if why is not None:
        return why
    names = sorted(os.listdir(entry))
    for name in ENTRY_FILES:
        if name not in names:
            return f"{entry.name} has no {name}"
    rec = _small_json(entry / "bracket.json")
    gm_ok = gm is not None and isinstance(rec, dict)
    if not (gm_ok and rec.get("format") == ENTRY_FORMAT and rec.get("engine") == engine
            and rec.get("operator") == gm.group(1) and rec.get("effort") == gm.group(2)
            and rec.get("validated") is bool(gm.group(3))
            and isinstance(rec.get("eps"), float) and eps_name(rec["eps"]) == entry.name
            and isinstance(rec.get("files"), dict)
            and set(rec["files"]) == {"lower.npz", "upper.npz"}
            and all(isinstance(v, str) and _HEX64.fullmatch(v) for v in rec["files"].values())):
        return (f"{entry.name}/bracket.json is not the store's record of this entry (format "
                f"{ENTRY_FORMAT}, engine {engine}, group {group}, {entry.name})")
    for name in ("lower.npz", "upper.npz"):
        if not _starts_as_zip(entry / name):
            return f"{entry.name}/{name} is not a certificate file (.npz)"
    for name in names:
        if SIDE_NAME.fullmatch(name) and name not in ENTRY_FILES:
            doc = _small_json(entry / name)
            if name == IMPORTED_NAME:
                if not (isinstance(doc, dict) and "bundle" in doc):
                    return f"{entry.name}/{name} is not the store's record of an import"
            elif not (isinstance(doc, dict) and set(doc) == {"files", "value"}):
                return f"{entry.name}/{name} is not a side record the store writes"
    return None


def _store_file_name(name: str) -> bool:
    return bool(name in ENTRY_FILES or name == IMPORTED_NAME or SIDE_NAME.fullmatch(name)
                or _SIDE_TMP.fullmatch(name)
                or name in ("lower.npz.tmp.npz", "upper.npz.tmp.npz"))


def _files_problem(d: Path) -> str | None:
    """Why ``d`` is not a directory of regular files named as the store names them (naming
    the first path at fault), or None."""
    try:
        kind = _kind(d)
        if kind != "dir":
            return f"{d.name} is a {kind}, not a directory"
        names = sorted(os.listdir(d))
    except OSError as exc:
        return f"{d.name} cannot be read ({exc.strerror or exc})"
    for name in names:
        if not _store_file_name(name):
            return f"{d.name}/{name} is not a file the store writes"
        try:
            kind = _kind(d / name)
        except OSError as exc:
            return f"{d.name}/{name} cannot be read ({exc.strerror or exc})"
        if kind != "file":
            return f"{d.name}/{name} is a {kind}, not a regular file"
    return None


def replaceable_problem(entry: Path) -> str | None:
    """Why the store may not replace (or remove) what lies at an entry's path, naming the
    first path at fault; None when it may: nothing there, or a directory holding only
    regular files named as the store names them (its own entry, or one damaged: a
    truncated certificate, a missing or edited record). A link, a file, a subdirectory or
    any other name is left alone."""
    return None if not os.path.lexists(entry) else _files_problem(entry)


def remove_dir(path: Path, names=None) -> None:
    """Unlink the files ``names`` of the directory ``path`` (default: those
    :func:`replaceable_problem` accepts, checked now), then remove the directory itself.

    Raises
    ------
    OSError
        ``path`` holds something else (it is left, with that), or a file cannot be removed.
    """
    if names is None:
        why = replaceable_problem(path)
        if why is not None:
            raise OSError(f"{why}; left alone")
        names = os.listdir(path)
    for name in names:
        os.unlink(path / name)
    os.rmdir(path)


def staging_problem(tmp: Path) -> str | None:
    """Why the directory ``tmp`` (``.epsEPS.PID.tmp``) is not an entry the store was
    writing, naming the first path at fault; None when it is one. Its files may be
    incomplete (a writer killed mid-way): recognised by their names and kinds only."""
    return _files_problem(tmp)


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
        if not (ENGINE_NAME.fullmatch(e) and kind == "dir"):
            out.foreign.append(f"{e}: a {kind} that is not an engine directory (16 hex digits)")
            continue
        out.engines.append(eng)
        for g in _noted(out, e, lambda: _listdir(eng)) or []:
            _group(out, e, eng / g)
    return out


def _noted(out: Scan, rel: str, look):
    """``look()``, or None with a line in ``out.foreign`` when it raises :class:`OSError`."""
    try:
        return look()
    except OSError as exc:
        out.foreign.append(f"{rel}: cannot be read ({exc.strerror or exc})")
        return None


def _group(out: Scan, e: str, path: Path) -> None:
    g = path.name
    rel = f"{e}/{g}"
    kind = _noted(out, rel, lambda: _kind(path))
    if kind is None:
        return
    lock = _LOCK.fullmatch(g)
    if lock:
        empty = kind == "file" and _noted(out, rel, lambda: os.lstat(path).st_size) == 0
        if GROUP_NAME.fullmatch(lock.group(1)) and empty:
            out.locks[(e, lock.group(1))] = path
        else:
            out.foreign.append(f"{rel}: not a lock the store writes (an empty regular file "
                               "named GROUP.lock)")
        return
    if not (GROUP_NAME.fullmatch(g) and kind == "dir"):
        out.foreign.append(f"{rel}: a {kind} that is not an operator's directory "
                           "(HASH-EFFORT[-validated-HASH])")
        return
    out.groups.append(path)
    for n in _noted(out, rel, lambda: _listdir(path)) or []:
        p = path / n
        if ENTRY_NAME.fullmatch(n):
            why = entry_problem(p, e, g)
            if why is not None:
                out.foreign.append(f"{e}/{g}/{why}")
                continue
            files = _listdir(p)
            size = sum(os.lstat(p / f).st_size for f in files)
            out.entries.append(Entry(e, g, p, files, size,
                                     os.lstat(p / "bracket.json").st_mtime))
        elif _STAGING.fullmatch(n):
            why = staging_problem(p)
            if why is not None:
                out.foreign.append(f"{e}/{g}/{why}")
                continue
            out.staging.append((p, os.lstat(p).st_mtime))
        else:
            out.foreign.append(f"{e}/{g}/{n}: not an entry the store writes (epsEPS)")


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


def prune(plan: PrunePlan) -> list[str]:
    """Carry out ``plan`` (:func:`prune_plan`): each entry's files one by one, then its
    directory; each staged entry, checked again; the operator directories, locks and engine
    directories left empty. An operator whose lock another process took since the plan was
    made is left alone. Returns one line per path not removed, and why."""
    import fcntl

    failed = []

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

    def attempt(path: Path, what, lock: Path | None = None) -> None:
        try:
            fd = locked(lock)
        except BlockingIOError:
            failed.append(f"{path}: in use by another run (its lock is held)")
            return
        except OSError as exc:
            failed.append(f"{path}: its lock cannot be taken ({exc.strerror or exc})")
            return
        try:
            what()
        except OSError as exc:
            failed.append(f"{path}: {exc.strerror or exc}")
        finally:
            if fd is not None:
                os.close(fd)

    def lock_of(gdir: Path) -> Path:
        return gdir.parent / f"{gdir.name}.lock"

    for e in plan.entries:
        attempt(e.path, lambda e=e: remove_dir(e.path, e.files), lock_of(e.path.parent))
    for p in plan.staging:
        def staged(p=p):
            why = staging_problem(p)
            if why is not None:
                raise OSError(f"{why}; left alone")
            remove_dir(p, os.listdir(p))
        attempt(p, staged, lock_of(p.parent))
    for g in plan.groups:
        attempt(g, lambda g=g: os.rmdir(g), lock_of(g))
    for lock in plan.locks:
        def unlink(lock=lock):
            st = os.lstat(lock)
            if not stat.S_ISREG(st.st_mode) or st.st_size:
                raise OSError("no longer an empty lock file; left alone")
            os.unlink(lock)
        attempt(lock, unlink, lock)
    for eng in plan.engines:
        attempt(eng, lambda eng=eng: os.rmdir(eng))
    return failed

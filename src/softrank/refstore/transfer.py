"""A store's entries carried to a machine that cannot see the store, and home again
(docs/store.md, *A store on a cluster*).

A worker of a Dask cluster runs on another machine: the client's reference store is not
there. So the client packs the entries a cell may read (:func:`pack_entries`: the files of
the operator's entries at the audit's tolerances, as bytes), the worker lays them out in a
private store of its own (:func:`unpack_entries`) and runs the cell against it, and what the
cell changed there (:func:`harvest_entries`: entries written or given a side record, entries
removed) travels back with the result. The client then receives it into its store
(:func:`receive_entries`): an entry that comes home is **checked as a store read is
checked** (:meth:`~softrank.refstore.store.ReferenceStore.read`, both arithmetics, against the
client's own matrix) before it is placed, with the store's own writer and lock; an entry the
worker removed (its lower certificate was refuted there) is removed from the client's store
only where the client's entry is still the one that was sent. Nothing a worker returns is
written anywhere but into the store's layout, under this operator's group, at the audit's
tolerances.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .layout import (ENTRY_FILES, IMPORTED_NAME, MAX_RECORD_BYTES, SIDE_NAME, entry_problem,
                     eps_name, remove_dir)
from .record import Refused, certificate_bytes_bound

__all__ = ["Parcel", "Harvest", "pack_entries", "unpack_entries", "harvest_entries",
           "receive_entries"]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _entry_file(name: str) -> bool:
    """A file an entry may hold: its record, its certificates, a side record, an import's."""
    return name in ENTRY_FILES or name == IMPORTED_NAME or bool(SIDE_NAME.fullmatch(name))


def _limit(name: str, shape) -> int:
    return certificate_bytes_bound(*shape) if name.endswith(".npz") else MAX_RECORD_BYTES


@dataclass(frozen=True)
class Parcel:
    """The client's entries of one operator, packed for a worker.

    Attributes
    ----------
    group : str
        ``ENGINE/GROUP``: the operator's directory, relative to the store's root
        (:meth:`~softrank.refstore.store.ReferenceStore.group_dir`).
    entries : dict
        ``{entry name (epsEPS): {file name: bytes}}``.
    """

    group: str
    entries: dict = field(default_factory=dict)

    @property
    def digests(self) -> dict:
        """``{entry name: {file name: sha256}}``."""
        return {e: {n: _digest(b) for n, b in files.items()} for e, files in self.entries.items()}


@dataclass(frozen=True)
class Harvest:
    """What one cell changed in a worker's private store.

    Attributes
    ----------
    group : str
        As :attr:`Parcel.group`.
    entries : dict
        ``{entry name: {file name: bytes}}``: every entry written or changed (a side record
        added), whole.
    removed : dict
        ``{entry name: {file name: sha256}}``: entries that were sent and are gone (the
        store removed them: an attack refuted the lower certificate), with the digests of
        what was sent.
    """

    group: str
    entries: dict = field(default_factory=dict)
    removed: dict = field(default_factory=dict)


def pack_entries(store, operator, eps_list, *, effort: str, validated: bool) -> Parcel:
    """The files of ``store``'s entries of ``operator`` at ``eps_list``, read, not checked (the
    worker's store checks them when it reads them).

    Parameters
    ----------
    store : ReferenceStore
    operator : Operator
    eps_list : sequence of float
    effort : {"full", "fast"}
    validated : bool
        As the entries are keyed (:func:`~softrank.refstore.keys.group_name`).

    Returns
    -------
    Parcel
        Only regular files of the names an entry holds, each no larger than such a file of
        this operator's shape can be; an entry, group or engine path that is a link is
        passed over.
    """
    group = store.group_dir(operator, effort, validated)
    out: dict = {}
    if any(p.is_symlink() for p in (group.parent, group)):
        return Parcel(_rel(store, group), out)
    for e in eps_list:
        entry = group / eps_name(e)
        if entry.is_symlink() or not entry.is_dir():
            continue
        files = {}
        try:
            for p in sorted(entry.iterdir()):
                if (_entry_file(p.name) and not p.is_symlink() and p.is_file()
                        and p.stat().st_size <= _limit(p.name, operator.shape)):
                    files[p.name] = p.read_bytes()
        except OSError:
            continue  # unreadable here: the worker computes the cell
        if files:
            out[entry.name] = files
    return Parcel(_rel(store, group), out)


def _rel(store, group: Path) -> str:
    return group.relative_to(store.root).as_posix()


def unpack_entries(root: Path, parcel: Parcel) -> None:
    """Lay ``parcel`` out as a store's entries under ``root`` (a worker's private store)."""
    group = Path(root, *parcel.group.split("/"))
    for name, files in parcel.entries.items():
        entry = group / name
        entry.mkdir(parents=True, exist_ok=True)
        for fname, data in files.items():
            (entry / fname).write_bytes(data)


def harvest_entries(root: Path, parcel: Parcel) -> Harvest:
    """What the cell changed under ``root`` in the operator's group since ``parcel`` was laid
    out there (:func:`unpack_entries`): entries new or changed, entries removed."""
    group = Path(root, *parcel.group.split("/"))
    sent = parcel.digests
    entries: dict = {}
    names = sorted(os.listdir(group)) if group.is_dir() else []
    for name in names:
        entry = group / name
        if name.startswith(".") or entry.is_symlink() or not entry.is_dir():
            continue  # a staging directory or a lock: the store's own working files
        files = {p.name: p.read_bytes() for p in sorted(entry.iterdir())
                 if p.is_file() and not p.is_symlink() and _entry_file(p.name)}
        if {n: _digest(b) for n, b in files.items()} != sent.get(name):
            entries[name] = files
    removed = {name: d for name, d in sent.items() if name not in names}
    return Harvest(parcel.group, entries, removed)


def receive_entries(store, operator, A, rho: float, eps_list, *, effort: str, validated: bool,
                    harvest: Harvest) -> tuple[int, list[str]]:
    """Receive what a worker's cell changed into ``store`` (module docstring).

    Parameters
    ----------
    store : ReferenceStore
        The client's store.
    operator : Operator
    A : (m, N) float64 array
        The matrix the certificates are about: ``operator.A``, or in validated mode the
        enclosure's midpoint.
    rho : float
        The enclosure radius (0 unless validated).
    eps_list : sequence of float
        The audit's tolerances: an entry of another name is not received.
    effort, validated
        As the entries are keyed.
    harvest : Harvest

    Returns
    -------
    (int, list of str, dict)
        How many entries were placed; one line per entry not received (refused by the
        check, not an entry of this cell) or removed; and ``{eps: why}`` for each tolerance
        whose entry came home and was not kept (refused, not writable here), for the cell's
        ``diagnostics.reference.not_kept``.
    """
    notes: list[str] = []
    lost: dict = {}
    if not harvest.entries and not harvest.removed:
        return 0, notes, lost
    group = store.group_dir(operator, effort, validated)
    by_name = {eps_name(e): float(e) for e in eps_list}
    where = f"{operator.operator_id}: a worker's store entry"
    if harvest.group != _rel(store, group):
        return 0, [f"{where} for {harvest.group!r}, not this operator's; not received"], lost
    if not store.writable:
        return 0, notes, {by_name[n]: "the store is not writable here"
                          for n in harvest.entries if n in by_name}
    placed = 0
    for name, files in sorted(harvest.entries.items()):
        if name not in by_name:
            notes.append(f"{where} {name!r} is not at a tolerance of this audit; not received")
            continue
        why = _receive_one(store, operator, A, rho, by_name[name], effort, validated,
                           group / name, files)
        if why is None:
            placed += 1
        else:
            lost[by_name[name]] = f"the entry made on a worker {why}"
            notes.append(f"{operator.operator_id} eps {by_name[name]:g}: {lost[by_name[name]]}")
    for name, sent in sorted(harvest.removed.items()):
        if name not in by_name:
            continue
        why = _remove_one(store, group, group / name, sent)
        if why:
            notes.append(f"{operator.operator_id} eps {by_name[name]:g}: {why}")
    return placed, notes, lost


def _receive_one(store, operator, A, rho, eps, effort, validated, entry: Path, files: dict
                 ) -> str | None:
    """Check the entry ``files`` and place it at ``entry``; None, or why it was not."""
    if not set(ENTRY_FILES) <= set(files) or not all(map(_entry_file, files)):
        return "lacks a file of an entry or holds another; not kept"
    if any(len(b) > _limit(n, A.shape) for n, b in files.items()):
        return "holds a file larger than an entry of this shape can; not kept"
    with tempfile.TemporaryDirectory(prefix="softrank-entry-") as tmp:
        staged = Path(tmp) / entry.name
        staged.mkdir()
        for n, b in files.items():
            (staged / n).write_bytes(b)
        try:
            store.read(staged, operator, A, rho, eps, effort, validated, touch=False)
        except Refused as exc:
            return f"was refused ({exc}); not kept"
        extra = tuple(store.side_files(staged))
        if IMPORTED_NAME in files:
            extra += (IMPORTED_NAME,)
        try:
            with store.locked(entry.parent):
                store.copy_entry(staged, entry, side=extra)
        except OSError as exc:
            return f"could not be written ({exc.strerror or exc}); not kept"
    store.stored += 1
    return None


def _remove_one(store, group: Path, entry: Path, sent: dict) -> str:
    """Remove the client's ``entry`` where it is still the one ``sent`` (digests); the line
    that says what was done."""
    try:
        with store.locked(group):
            if not entry.is_dir() or entry.is_symlink():
                return ""
            now = {p.name: _digest(p.read_bytes()) for p in entry.iterdir()
                   if p.is_file() and not p.is_symlink()}
            if now != sent:
                return (f"kept {entry.relative_to(store.root)}: a worker refuted the entry it "
                        "was sent, and this one has changed since")
            why = entry_problem(entry)
            if why is not None:
                return f"kept {entry.relative_to(store.root)}: {why}"
            remove_dir(entry, os.listdir(entry))
    except OSError as exc:
        return f"cannot remove {entry.relative_to(store.root)} ({exc.strerror or exc})"
    return (f"removed {entry.relative_to(store.root)}: its lower certificate was refuted on a "
            "worker")

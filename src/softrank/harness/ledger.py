"""The results store: a crash-safe ledger per audit run (SQLite in WAL mode).

``OUT/ledger.sqlite`` holds the run's identity (panel, tolerances, seed, modes, the
operators' ids in order) and one row per cell (operator x tolerance), committed operator by
operator in one transaction each, so a run killed at any moment (SIGKILL included) keeps
every cell of every operator whose commit returned, and never a partial operator. A cell is
keyed by ``(operator_id, eps)``: inserting it twice is impossible (``--resume`` skips
finished operators; a duplicate insert is ignored). ``brackets.csv`` and
``brackets.parquet`` are exported from the ledger.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

from ..errors import InvalidArgumentError

__all__ = ["Ledger", "LEDGER_NAME", "identity_diff", "ledger_cells", "read_ledger", "read_csv",
           "read_summary", "SUMMARY_NAME"]

LEDGER_NAME = "ledger.sqlite"

#: The run's summary beside the ledger (written by the report).
SUMMARY_NAME = "summary.json"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS run (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cells (
    operator_index INTEGER NOT NULL,
    operator_id TEXT NOT NULL,
    eps REAL NOT NULL,
    row TEXT NOT NULL,
    PRIMARY KEY (operator_id, eps)
);
"""


def _short(value, width: int = 60) -> str:
    text = "absent" if value is None else json.dumps(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def _operators_diff(old: list, new: list) -> str:
    """``operators`` entries are ``"id:hash"``: which ids were removed, added or changed."""
    def split(entries):
        pairs = (str(e).rpartition(":") for e in entries)
        return {(i if sep else h): (h if sep else "?") for i, sep, h in pairs}

    o, n = split(old), split(new)
    only_old = [i for i in o if i not in n]
    only_new = [i for i in n if i not in o]
    changed = [i for i in o if i in n and o[i] != n[i]]
    parts = []
    if only_old:
        parts.append(f"{len(only_old)} only in the ledger (first: {only_old[0]}, hash "
                     f"{o[only_old[0]]})")
    if only_new:
        parts.append(f"{len(only_new)} only in this run (first: {only_new[0]}, hash "
                     f"{n[only_new[0]]})")
    if changed:
        parts.append(f"{len(changed)} with a different matrix (first: {changed[0]}, hash "
                     f"{o[changed[0]]} -> {n[changed[0]]})")
    if not parts:
        at = next((k for k, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        parts.append(f"the same ids in another order or repeated (first difference at position "
                     f"{at}: {_short(old[at] if at < len(old) else None)} in the ledger, "
                     f"{_short(new[at] if at < len(new) else None)} in this run)")
    return "operators differ: " + ", ".join(parts)


#: identity fields added after ledgers were first written, with the value that a ledger
#: without the field ran at (so a run of an older version compares as such)
IDENTITY_DEFAULTS = {"effort": "full"}


def normal_identity(identity: dict) -> dict:
    """``identity`` with the fields of :data:`IDENTITY_DEFAULTS` it lacks filled in."""
    return {**IDENTITY_DEFAULTS, **identity}


def identity_diff(old: dict, new: dict) -> str:
    """One line naming what differs between two run identities (a ledger's and a run's).

    Parameters
    ----------
    old, new : dict
        The stored and the wanted identity (JSON-ready: panel, eps, seed, modes, and
        ``operators`` as ``"id:hash"`` strings).

    Returns
    -------
    str
        ``"; "``-separated differences, e.g. ``eps [0.2] in the ledger, [0.3] in this
        run``; for operators, the counts of ids only in the ledger, only in this run and
        with a different content hash, each with its first id and hash(es). Empty when the
        identities are equal.
    """
    parts = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if a == b:
            continue
        if k == "operators" and isinstance(a, list) and isinstance(b, list):
            parts.append(_operators_diff(a, b))
        elif k in ("stages", "certifiers") and isinstance(a, list) and isinstance(b, list):
            gone = [x for x in a if x not in b]
            added = [x for x in b if x not in a]
            parts.append(f"{k}: " + ", ".join(
                ([f"{_short(gone)} only in the ledger"] if gone else [])
                + ([f"{_short(added)} only in this run"] if added else [])
                or [f"{_short(a)} in the ledger, {_short(b)} in this run (another order)"]))
        else:
            parts.append(f"{k} {_short(a)} in the ledger, {_short(b)} in this run")
    return "; ".join(parts)


def ledger_cells(path) -> int | None:
    """Cells stored in the ledger at ``path``, read-only (None if it cannot be read as a
    ledger)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM cells").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return None


class Ledger:
    """One audit run's cells, stored as they finish.

    Parameters
    ----------
    out : path
        The run's output directory; the ledger is ``out/ledger.sqlite``.
    identity : dict
        JSON-ready description of the run (panel, eps, seed, modes, operator ids). A resumed
        run must have the same identity.
    resume : bool
        Continue the ledger found in ``out``. Without it, a finished ledger is replaced and an
        unfinished one is an error (its cells would be lost).

    Raises
    ------
    InvalidArgumentError
        ``--resume`` without a ledger, or with a different run identity (what differs is
        named, see :func:`identity_diff`); an unfinished ledger without ``--resume`` (said
        to be running only while a live process holds the directory's lock, see
        :mod:`softrank.harness.lock`; interrupted otherwise, with the cells it kept).
    """

    @classmethod
    def check_can_open(cls, out, resume: bool = False) -> None:
        """The refusals of the constructor that need no identity, without opening anything
        for writing: ``--resume`` without a ledger, an unfinished ledger without
        ``--resume``. The CLI calls it before building any operator.

        Raises
        ------
        InvalidArgumentError
            As the constructor does.
        """
        self = cls.__new__(cls)
        self.path = Path(out) / LEDGER_NAME
        exists = self.path.exists()
        if resume and not exists:
            raise InvalidArgumentError(f"--resume: no ledger {str(self.path)!r} to continue")
        if exists and not resume:
            status = self._peek_status()
            if status != "complete":
                raise InvalidArgumentError(
                    f"--out: {str(self.path.parent)!r} holds an unfinished audit "
                    f"({self._unfinished(status)}); continue it with --resume or choose "
                    "another --out")

    def __init__(self, out, identity: dict, resume: bool = False):
        self.path = Path(out) / LEDGER_NAME
        exists = self.path.exists()
        self.check_can_open(out, resume)
        if exists and not resume:
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=60.0)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.executescript(_SCHEMA)
        stored = self._get("identity")
        wanted = json.dumps(identity, sort_keys=True)
        problem = None if stored in (None, wanted) else self._mismatch(stored, wanted)
        if problem:
            self.conn.close()
            raise InvalidArgumentError(f"--resume: {problem}")
        with self.conn:
            if stored is None:
                self.conn.execute("INSERT INTO run VALUES ('identity', ?)", (wanted,))
            self.conn.execute("INSERT OR REPLACE INTO run VALUES ('status', 'running')")

    def _mismatch(self, stored: str, wanted: str) -> str | None:
        """Why the stored identity (JSON) refuses this run's, or None when they agree once
        the fields of :data:`IDENTITY_DEFAULTS` are filled in (JSON: tuples compare as
        lists)."""
        try:
            old = json.loads(stored)
        except ValueError:
            old = None
        if not isinstance(old, dict):
            return (f"the ledger in {str(self.path.parent)!r} does not describe its run (its "
                    "identity is not a JSON object); choose another --out")
        old, new = normal_identity(old), normal_identity(json.loads(wanted))
        if old == new:
            return None
        return (f"the run in {str(self.path.parent)!r} differs from this one: "
                f"{identity_diff(old, new)}; resume with the same panel, tolerances, seed "
                "and options, or choose another --out")

    def _peek_status(self) -> str:
        try:
            conn = sqlite3.connect(self.path, timeout=60.0)
            try:
                row = conn.execute("SELECT value FROM run WHERE key = 'status'").fetchone()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            return f"unreadable: {exc}"
        return row[0] if row else "unknown"

    def _unfinished(self, status: str) -> str:
        """What an unfinished ledger's run is: running (a live process holds the directory's
        lock) or interrupted, with the cells it kept."""
        from .lock import lock_holder

        holder = lock_holder(self.path.parent)
        if holder is not None:
            import socket

            state = "running" if holder["host"] == socket.gethostname() else \
                "locked from another host"
            return (f"{state}: pid {holder['pid']} on host {holder['host']}"
                    + (f", since {holder['started']}" if holder.get("started") else ""))
        if status not in ("running", "unknown") and not status.startswith("unreadable"):
            return status
        try:
            conn = sqlite3.connect(self.path, timeout=60.0)
            try:
                tables = {r[0] for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'")}
                kept = (conn.execute("SELECT COUNT(*) FROM cells").fetchone()[0]
                        if "cells" in tables else 0)
                row = (conn.execute("SELECT value FROM run WHERE key = 'identity'").fetchone()
                       if "run" in tables else None)
            finally:
                conn.close()
            ident = json.loads(row[0]) if row else {}
            total = len(ident.get("operators") or []) * len(ident.get("eps") or [])
        except (sqlite3.Error, ValueError, TypeError, AttributeError):
            return "interrupted: its process is gone" if status == "running" else status
        return (f"interrupted: its process is gone; {kept} "
                + (f"of {total} cells kept" if total else "cells kept"))

    def _get(self, key):
        row = self.conn.execute("SELECT value FROM run WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def add(self, operator_index: int, rows: list[dict]) -> None:
        """Commit all cells of one operator at once (a duplicate cell is ignored)."""
        with self.conn:
            self.conn.executemany(
                "INSERT OR IGNORE INTO cells VALUES (?, ?, ?, ?)",
                [(operator_index, r["operator_id"], float(r["eps"]), json.dumps(r)) for r in rows])

    def finished(self, n_eps: int) -> set[str]:
        """Operator ids with all ``n_eps`` cells stored."""
        q = "SELECT operator_id FROM cells GROUP BY operator_id HAVING COUNT(*) >= ?"
        return {r[0] for r in self.conn.execute(q, (n_eps,))}

    def rows(self) -> list[dict]:
        """Every stored cell, in panel order and, per operator, in the order written."""
        q = "SELECT row FROM cells ORDER BY operator_index, rowid"
        return [json.loads(r[0]) for r in self.conn.execute(q)]

    def count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM cells").fetchone()[0]

    def mark_complete(self) -> None:
        with self.conn:
            self.conn.execute("INSERT OR REPLACE INTO run VALUES ('status', 'complete')")

    def close(self) -> None:
        self.conn.close()

    # ------------------------------------------------------------------ exports

    @staticmethod
    def export_csv(rows: list[dict], path, columns: list[str]) -> Path:
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=columns)
            w.writeheader()
            w.writerows(rows)
        tmp.replace(path)
        return path

    @staticmethod
    def export_parquet(rows: list[dict], path, columns: list[str]) -> Path | None:
        """``brackets.parquet`` (pyarrow; None if pyarrow is not installed). Integer and
        float columns are typed; empty fields are nulls."""
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            return None
        ints = {"layer", "head", "m", "n", "lower", "upper", "planted_rank"}
        floats = {"eps", "ratio", "seconds", "svd_seconds", "attack_closest", "attack_seconds",
                  "validated_rho", "rho_Q", "rho_K", "Gamma"}
        data = {}
        for c in columns:
            vals = [r.get(c, "") for r in rows]
            if c in ints:
                data[c] = pa.array([None if v in ("", None) else int(v) for v in vals], pa.int64())
            elif c in floats:
                data[c] = pa.array([None if v in ("", None) else float(v) for v in vals],
                                   pa.float64())
            else:
                data[c] = pa.array(["" if v is None else str(v) for v in vals], pa.string())
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        pq.write_table(pa.table(data), tmp)
        tmp.replace(path)
        return path


# ---------------------------------------------------------------------- reading a run back

def read_ledger(path: Path, arg: str) -> tuple[dict, list[dict], str]:
    """A finished or unfinished run's ``(identity, rows, status)`` from its ledger, read-only
    (and immutable when no audit runs there, so that reading leaves no ``-shm`` or ``-wal``
    file behind).

    Raises
    ------
    InvalidArgumentError
        When the file is not a readable softrank ledger (``arg`` names the argument).
    """
    from .lock import LOCK_NAME

    path = Path(path)
    # immutable only when no audit runs there (no lock file) and no write-ahead log holds
    # data that is not in the file itself
    wal = Path(str(path) + "-wal")
    quiet = not (path.parent / LOCK_NAME).exists() and (not wal.exists() or wal.stat().st_size == 0)
    immutable = "&immutable=1" if quiet else ""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro{immutable}", uri=True, timeout=60.0)
        try:
            run = dict(conn.execute("SELECT key, value FROM run").fetchall())
            rows = [json.loads(r[0]) for r in
                    conn.execute("SELECT row FROM cells ORDER BY operator_index, rowid")]
        finally:
            conn.close()
        identity = json.loads(run["identity"])
        if not isinstance(identity, dict):
            raise ValueError("its run identity is not a JSON object")
    except (sqlite3.Error, KeyError, ValueError) as exc:
        raise InvalidArgumentError(f"{arg}: {str(path)!r} is not a readable softrank ledger "
                                   f"({type(exc).__name__}: {exc})") from None
    return identity, rows, run.get("status", "unknown")


def read_csv(path: Path, arg: str) -> list[dict]:
    """The rows of an audit's ``brackets.csv`` as strings (validate them with
    :func:`softrank.audit.record.read_cell`).

    Raises
    ------
    InvalidArgumentError
        When the file cannot be read, lacks the id, end or verdict columns, or has a row
        without the header's fields (a truncated or edited file).
    """
    try:
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InvalidArgumentError(f"{arg}: cannot read {str(path)!r} ({exc})") from None
    need = {"operator_id", "eps", "lower", "upper", "verdict"}
    if rows and not need <= set(rows[0]):
        raise InvalidArgumentError(f"{arg}: {str(path)!r} is not a softrank brackets.csv "
                                   f"(missing columns {sorted(need - set(rows[0]))})")
    for i, r in enumerate(rows, start=1):
        if None in r or None in r.values():  # fields missing (a cut file) or extra
            raise InvalidArgumentError(
                f"{arg}: {str(path)!r}: row {i} does not have the header's fields (a truncated "
                "or edited file)")
    return rows


def read_summary(directory) -> dict:
    """The ``summary.json`` of the audit in ``directory`` as a dict; ``{}`` when it is
    missing, unreadable or not a JSON object (a summary is a description, never data that
    a comparison depends on)."""
    try:
        summary = json.loads((Path(directory) / SUMMARY_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}

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

__all__ = ["Ledger", "LEDGER_NAME"]

LEDGER_NAME = "ledger.sqlite"

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
        ``--resume`` without a ledger, with a different run identity, or an unfinished ledger
        without ``--resume``.
    """

    def __init__(self, out, identity: dict, resume: bool = False):
        self.path = Path(out) / LEDGER_NAME
        exists = self.path.exists()
        if resume and not exists:
            raise InvalidArgumentError(f"--resume: no ledger {str(self.path)!r} to continue")
        if exists and not resume:
            status = self._peek_status()
            if status != "complete":
                raise InvalidArgumentError(
                    f"--out: {str(self.path.parent)!r} holds an unfinished audit "
                    f"({status}); continue it with --resume or choose another --out")
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=60.0)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.executescript(_SCHEMA)
        stored = self._get("identity")
        wanted = json.dumps(identity, sort_keys=True)
        if stored is None:
            with self.conn:
                self.conn.execute("INSERT INTO run VALUES ('identity', ?)", (wanted,))
                self.conn.execute("INSERT OR REPLACE INTO run VALUES ('status', 'running')")
        elif stored != wanted:
            old = json.loads(stored)
            diff = sorted(k for k in set(old) | set(identity) if old.get(k) != identity.get(k))
            raise InvalidArgumentError(
                f"--resume: the run in {str(self.path.parent)!r} differs in {diff}; resume with "
                "the same panel, tolerances, seed and options, or choose another --out")
        else:
            with self.conn:
                self.conn.execute("INSERT OR REPLACE INTO run VALUES ('status', 'running')")

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

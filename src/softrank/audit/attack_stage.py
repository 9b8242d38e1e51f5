"""The attack stage: a targeted attack on every cell's lower certificate (docs/theory/attacks.md).

Runs after the bracket stage (:mod:`softrank.audit.pipeline`) and reads the brackets it
published. A witness within ``eps`` below the certified rank that the checker accepts is a
refutation: it is saved with the certificate it refutes and recorded with
:meth:`~softrank.audit.pipeline.OperatorCells.refute`, and the pipeline makes the cell
``unsound``.
"""

from __future__ import annotations

import hashlib

from ..attacks import attack
from ..errors import InvalidArgumentError
from .record import Refutation, number, register_column, save_counterexample

__all__ = ["AttackStage"]

_CODE: list = []


def _attack_code() -> str:
    """12 hex digits of the bytes of :mod:`softrank.attacks` (a kept attack outcome is
    keyed by them; the methods it calls are the engine's, keyed by the store's entry)."""
    if not _CODE:
        from pathlib import Path

        from .. import attacks

        _CODE.append(hashlib.sha256(Path(attacks.__file__).read_bytes()).hexdigest()[:12])
    return _CODE[0]


def _held(kept, columns) -> bool:
    """A kept attack outcome as this stage writes one: ``held``, and the closest approach
    and seconds as numbers >= 0."""
    return (isinstance(kept, dict) and set(kept) == set(columns) and kept["attack"] == "held"
            and all(isinstance(kept[c], (int, float)) and not isinstance(kept[c], bool)
                    and 0 <= kept[c] < float("inf") for c in columns[1:]))


class AttackStage:
    """The audit stage that attacks each cell's lower certificate (see
    :mod:`softrank.audit.pipeline`).

    Every lower certificate of rank ``>= 2`` is attacked with :func:`softrank.attacks.attack`
    at ``effort``,
    on the matrix the certificate is about (in validated mode, the enclosure's midpoint). A
    success (a witness the checker accepts) makes the cell ``unsound`` and, when the audit
    has an output directory, saves the certificate and its counterexample under
    ``OUT/counterexamples/OPERATOR-epsEPS/`` (``lower.npz``, ``witness.npz``; re-check with
    ``softrank verify``). An attack that raises is recorded as ``error: TYPE``, never as a
    verdict.

    Parameters
    ----------
    attacks : {"quick", "standard", "hard", "none"}
        The attack's effort (:data:`softrank.attacks.EFFORTS`); ``"none"`` attacks nothing
        (the columns stay empty).
    reference_store : ReferenceStore, optional
        The reference store, opened: an attack that held on a cell whose ends are a stored
        reference's is kept beside that entry (keyed by the effort and the bytes of
        :mod:`softrank.attacks`) and read back instead of run again. A success is never
        kept: it is found again, and saved, in every run.
    cell_timeout : float, optional
        The audit's time limit per cell, which each cell's attack also gets
        (:func:`softrank.attacks.attack`'s ``time_limit``): a cell's bracket and its attack
        take at most about that long each. Default: no limit.

    Notes
    -----
    Columns: ``attack`` (``held``, ``held(partial)`` when a method failed, ``held(cut
    short)`` when the time limit ended it first, ``SUCCEEDED``, empty when nothing was
    attacked), ``attack_closest`` (the least max-row error found over
    ``eps``; unchecked, near 1 means nearly tight) and ``attack_seconds``. A success is
    recorded as a :class:`~softrank.audit.record.Refutation` of the cell, which the
    pipeline turns into the verdict ``unsound``; the bracket itself is left as it was.
    """

    name = "attack"
    parameters = ("attacks", "reference_store", "cell_timeout")
    columns = ("attack", "attack_closest", "attack_seconds")

    def __init__(self, *, attacks: str = "quick", reference_store=None,
                 cell_timeout: float | None = None):
        self.effort = attacks
        self._store = reference_store
        self.cell_timeout = cell_timeout

    def run(self, cells) -> list[dict]:
        if self.effort == "none":
            return [{} for _ in cells.eps]
        if not cells.brackets:
            raise InvalidArgumentError("attack: no brackets to attack (the bracket stage "
                                       "must run first)")
        A = cells.certified_matrix()
        rows = []
        for i, br in enumerate(cells.brackets):
            try:
                rows.append(self._cell(cells, i, br, A))
            except Exception as exc:  # noqa: BLE001 - recorded; a crash is never a verdict
                rows.append({"attack": f"error: {type(exc).__name__}", "attack_closest": "",
                             "attack_seconds": ""})
        return rows

    def _cell(self, cells, i: int, br, A) -> dict:
        c = br.lower_certificate
        if c is None or c.rank < 2 or br.verdict == "error":
            return {}
        key = f"attack-{self.effort}-{_attack_code()}"
        if self._store is not None:
            kept = self._store.side_record(br, key)
            if _held(kept, self.columns):
                return kept
        res = attack(A, c.eps, c, upper_witness=br.upper_witness, effort=self.effort,
                     time_limit=self.cell_timeout)
        row = {"attack": ("held(partial)" if res.failures else
                          "held(cut short)" if res.cut_short else "held"),
               "attack_closest": round(res.best_error / c.eps, 4),
               "attack_seconds": round(res.seconds, 4)}
        if self._store is not None and not res.succeeded and row["attack"] == "held":
            self._store.put_side_record(br, key, row)
        if res.succeeded:
            if self._store is not None:  # a refuted reference is never read back again
                self._store.discard(br, "its lower certificate was refuted by the "
                                        f"{self.effort} attack")
            row["attack"] = "SUCCEEDED"
            saved = save_counterexample(cells.out, f"{cells.operator.operator_id}-eps{br.eps:g}",
                                        c, res.witness, A)
            cells.refute(i, Refutation(self.name, c.rank, res.witness.rank, saved))
        return row


register_column("attack_closest", number, "attack")
register_column("attack_seconds", number, "attack")

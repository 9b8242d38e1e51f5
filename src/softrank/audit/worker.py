"""One operator's cells through the pipeline: what an audit's worker runs.

:func:`run_operator` is the whole of a worker's task: the stages of
:meth:`~softrank.audit.config.AuditConfig.pipeline` on every tolerance of one operator
(:func:`softrank.audit.pipeline.run_stages`), returning its rows for the ledger.
:func:`failed_operator` is the record of an operator whose task never returned (it took down
every worker that ran it).
"""

from __future__ import annotations

from pathlib import Path

from ..certifiers.result import Bracket
from .config import AuditConfig
from .pipeline import run_stages
from .record import (STAGES_COLUMN, StageRecord, cell_identity, encode_diagnostics,
                     encode_stages)

__all__ = ["run_operator", "failed_operator"]


def run_operator(operator, config: AuditConfig, out: Path | None = None) -> list[dict]:
    """All cells of ``operator`` as rows (the :attr:`AuditConfig.columns`), in the order of
    ``config.eps``.

    Parameters
    ----------
    operator : Operator
    config : AuditConfig
    out : path, optional
        The audit's output directory (the attack stage saves counterexamples under it).

    Returns
    -------
    list of dict
        One row per tolerance (:func:`softrank.audit.pipeline.run_stages`).
    """
    return run_stages(operator, config.eps, config.pipeline(), validated=config.validated,
                      out=out)


def failed_operator(operator, config: AuditConfig, reason: str) -> list[dict]:
    """The rows of ``operator`` when no stage could finish on it: ``error`` cells, no ends,
    ``reason`` in the cell's ``diagnostics.error`` and as the error of the ``worker`` record
    of its ``stages`` column.

    Parameters
    ----------
    operator : Operator
    config : AuditConfig
    reason : str
        One line, e.g. ``"KilledWorker: the cell ended 3 workers' processes"``.

    Returns
    -------
    list of dict
        One row per tolerance of ``config.eps``, with every column of ``config.columns``.
    """
    stamp = encode_stages({"worker": StageRecord(0.0, reason)})
    rows = []
    for e in config.eps:
        row = dict.fromkeys(config.columns, "")
        row.update(cell_identity(operator, e))
        if "verdict" in row:
            row["verdict"] = "error"
            row["diagnostics"] = encode_diagnostics(Bracket.failed(e, reason).diagnostics)
        row[STAGES_COLUMN] = stamp
        rows.append(row)
    return rows

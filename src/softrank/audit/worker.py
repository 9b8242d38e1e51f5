"""One operator's cells through the pipeline: what an audit's worker runs.

:func:`run_operator` is the whole of a worker's task: the stages of
:meth:`~softrank.audit.config.AuditConfig.pipeline` on every tolerance of one operator
(:func:`softrank.audit.pipeline.run_stages`), returning its rows for the ledger.
"""

from __future__ import annotations

from pathlib import Path

from .config import AuditConfig
from .pipeline import run_stages

__all__ = ["run_operator"]


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

"""The bracket stage: every cell's certified bracket (docs/theory/checker.md).

The first stage of an audit cell (:mod:`softrank.audit.pipeline`): :func:`softrank.bracket`
once for all tolerances of the operator, its :class:`~softrank.certifiers.result.Bracket`
objects published for the stages after it, and the checked ends, the methods that made them
and the bracket's diagnostics as the row's columns.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ..certifiers.bracket import Bracket, bracket
from .record import encode_diagnostics, number, register_column

__all__ = ["BracketStage", "svd_seconds", "PROGRESS_AFTER", "PROGRESS_LOGGER"]

#: Seconds a cell runs before its methods' progress lines are shown: a cell of the default
#: panel takes 1-3 s and stays silent; a cell of 2,048 tokens shows every method as it ends.
PROGRESS_AFTER = 10.0

#: The logger the lines go to, at level INFO (``softrank audit`` without ``--quiet`` shows
#: it on stderr, in its local worker processes too; a Dask worker makes the lines only where
#: its own logging enables this logger at INFO, and keeps them in its own log).
PROGRESS_LOGGER = "softrank.audit.progress"


class _CellProgress:
    """:func:`bracket`'s ``progress`` for one operator's cells: its lines are held until
    the operator has run :data:`PROGRESS_AFTER` seconds, then logged, and every later one at
    once, each prefixed with the operator's id."""

    def __init__(self, operator_id: str):
        self.log = logging.getLogger(PROGRESS_LOGGER)
        self.prefix = operator_id
        self.t0 = time.perf_counter()
        self.held: list[str] | None = []

    def __call__(self, line: str) -> None:
        if self.held is None:
            self.log.info("%s: %s", self.prefix, line)
            return
        self.held.append(line)
        if time.perf_counter() - self.t0 >= PROGRESS_AFTER:
            for held in self.held:
                self.log.info("%s: %s", self.prefix, held)
            self.held = None


def svd_seconds(A: np.ndarray, repeats: int = 3) -> float:
    """Median wall time (s) of one float64 SVD of ``A`` over ``repeats`` runs: the floor every
    certifier pays, against which a cell's ``seconds`` are compared."""
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        np.linalg.svd(A, full_matrices=False)
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def _check_label(rep) -> str:
    if rep is None:
        return ""
    iv = rep.interval
    tag = "float64" + (f"+{iv.backend}({iv.rows_checked})" if iv is not None else "")
    return ("pass:" if rep.ok else "FAIL:") + tag


class BracketStage:
    """The audit stage that brackets every cell of an operator (see :mod:`softrank.audit.pipeline`).

    Runs :func:`bracket` once for all tolerances of the operator, with softrank's own
    methods and the third-party ones named by ``certifiers``. An operator whose bracket
    raises is recorded as ``error`` cells with the reason, never as a bound. Where the
    logger :data:`PROGRESS_LOGGER` shows INFO, each method's outcome and seconds go to it
    once the operator has run :data:`PROGRESS_AFTER` seconds.

    Parameters
    ----------
    certifiers : (constructions, lower_tests), optional
        The audit's third-party methods, loaded
        (:meth:`~softrank.audit.config.AuditConfig.setting`); default none.
    cell_timeout : float, optional
        Seconds per cell (:func:`bracket`'s ``time_limit``).
    effort : {"full", "fast"}
        :func:`bracket`'s ``effort``.
    reference_store : ReferenceStore, optional
        The reference store, opened (:func:`bracket`'s ``store``).

    The audit builds the stage once per worker process with its :attr:`parameters` from
    the :class:`~softrank.audit.config.AuditConfig`, validated there.

    Notes
    -----
    Columns: ``lower``, ``upper`` (the checked ends; empty where an ``error`` cell has no
    certificate), ``ratio`` (upper / lower),
    ``lower_method``, ``upper_method``, ``verdict``, ``seconds`` (the cell's share of the
    engine's time), ``svd_seconds`` (:func:`svd_seconds` of ``A``), ``lower_check``,
    ``upper_check`` (the checker's verdict and arithmetics), ``validated_rho`` (the
    enclosure radius in validated mode), ``reference`` (``store``: softrank's own bracket read
    back from the reference store and checked again, ``computed``: computed in this run;
    empty without a store) and ``diagnostics`` (JSON, every method's outcome). A cell from
    the store keeps the ``seconds`` its bracket took when it was computed (plus any
    third-party methods' time in this run); this run's time is in the ``stages`` column.
    """

    name = "bracket"
    parameters = ("certifiers", "cell_timeout", "effort", "reference_store")
    columns = ("lower", "upper", "ratio", "lower_method", "upper_method", "verdict", "seconds",
               "svd_seconds", "lower_check", "upper_check", "validated_rho", "reference",
               "diagnostics")

    def __init__(self, *, certifiers=((), ()), cell_timeout: float | None = None,
                 effort: str = "full", reference_store=None):
        self.constructions, self.lower_tests = (list(x) for x in certifiers)
        self.cell_timeout = cell_timeout
        self.effort = effort
        self.store = reference_store

    def run(self, cells) -> list[dict]:
        op = cells.operator
        validated = cells.validated and op.Q is not None
        on = logging.getLogger(PROGRESS_LOGGER).isEnabledFor(logging.INFO)
        try:
            brs = bracket(op, list(cells.eps), validated=validated, time_limit=self.cell_timeout,
                          constructions=self.constructions, lower_tests=self.lower_tests,
                          effort=self.effort, store=self.store,
                          progress=_CellProgress(op.operator_id) if on else None)
        except Exception as exc:  # an operator that crashes is recorded, never a bound
            brs = [Bracket.failed(e, f"{type(exc).__name__}: {exc}") for e in cells.eps]
        cells.publish(self.name, brs)
        svd_s = svd_seconds(op.A)
        rows = []
        for br in brs:
            ratio = br.upper / br.lower if br.lower and br.upper else ""  # (None: no end)
            rows.append({
                "lower": "" if br.lower is None else br.lower,
                "upper": "" if br.upper is None else br.upper,
                "ratio": round(ratio, 6) if ratio != "" else "",
                "lower_method": br.lower_method, "upper_method": br.upper_method,
                "verdict": br.verdict, "seconds": round(br.seconds, 4),
                "svd_seconds": round(svd_s, 6),
                "lower_check": _check_label(br.checks.get("lower")),
                "upper_check": _check_label(br.checks.get("upper")),
                "validated_rho": f"{br.rho:.3g}" if validated else "",
                "reference": br.diagnostics.reference.get("source", ""),
                "diagnostics": encode_diagnostics(br.diagnostics),
            })
        return rows


for _col in ("ratio", "svd_seconds", "validated_rho"):
    register_column(_col, number, "bracket")

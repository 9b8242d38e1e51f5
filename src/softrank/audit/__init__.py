"""The audit of one operator's cells, as a pipeline of stages.

What a cell goes through, module by module, in order:

* :mod:`~softrank.audit.config`: :class:`AuditConfig`, the frozen settings every cell is
  computed with (tolerances, effort, attacks, time limit, third-party certifiers, extra
  stages, rank, frontier, reference store), validated once and used as the run's identity;
  a stage receives the settings it declares from it (:meth:`AuditConfig.setting`);
* :mod:`~softrank.audit.worker`: :func:`run_operator`, a worker's task: one operator's cells
  through the pipeline, built once per process;
* :mod:`~softrank.audit.pipeline`: the :class:`Stage` interface, the operator's typed
  record (:class:`OperatorCells`), :func:`~softrank.audit.pipeline.build_stage` and
  :func:`run_stages`, the one place that writes a cell's verdict (a refutation by any stage
  makes it ``unsound``);
* the stages, in the order they run, each with the types of its columns:
  :mod:`~softrank.audit.bracket_stage` (the certified bracket),
  :mod:`~softrank.audit.attack_stage` (the attack on its lower certificate),
  :mod:`~softrank.audit.causal_stage` (``--rank``), :mod:`~softrank.audit.frontier_stage`
  (``--frontier``), :mod:`~softrank.audit.geometry_stages` and
  :mod:`~softrank.audit.feature_stages` (descriptors beside the bracket);
* :mod:`~softrank.audit.record`: the row a cell becomes, written once and read back typed
  by the report, the studies and ``softrank diff`` (:func:`read_cell`).

Scheduling the operators over workers, the ledger and the exports are the harness's
(:mod:`softrank.harness.runner`, :mod:`softrank.harness.ledger`).
"""
# the stages' modules register their typed columns with .record (read_cell reads them)
from . import (attack_stage, bracket_stage, causal_stage, feature_stages,  # noqa: F401
               frontier_stage, geometry_stages)
from .config import ATTACKS, AuditConfig
from .pipeline import (OperatorCells, Stage, check_stages, default_stages,
                       load_stages, run_stages, stage_columns)
from .record import (ID_COLUMNS, STAGES_COLUMN, Cell, Refutation, StageRecord, group_key,
                     read_cell, read_cells, read_diagnostics, read_stages, refutations,
                     register_column)
from .worker import run_operator

__all__ = ["ATTACKS", "AuditConfig", "OperatorCells", "Refutation", "Stage", "check_stages",
           "default_stages", "load_stages", "run_stages", "stage_columns", "ID_COLUMNS",
           "STAGES_COLUMN", "StageRecord", "group_key", "read_cell", "read_diagnostics",
           "read_stages", "refutations", "run_operator", "Cell", "read_cells",
           "register_column"]

"""The cells of an audit and the stages that measure them.

A **cell** is one operator at one tolerance ``eps``; an audit writes one row per cell
(``brackets.csv``; the README lists the columns). Each row is made by a pipeline of
**stages**, run in order on all cells of one operator: the bracket itself
(:class:`softrank.certifiers.bracket.BracketStage`), the targeted attack on its lower
certificate (:class:`softrank.attacks.AttackStage`), native geometry and the intrinsic
descriptor (:class:`softrank.geometry.NativeGeometryStage`,
:class:`softrank.geometry.IntrinsicDescriptorStage`), the features of the studies
(:class:`softrank.studies.features.BaselineFeaturesStage`,
:class:`softrank.studies.features.GaugeFeaturesStage`), and any stage a user adds
(``softrank audit --stage MODULE:OBJECT``).

A stage is any object with a ``name``, the ``columns`` it writes and a
``run(cells) -> list[dict]`` method returning one dict per tolerance (:class:`Stage`).
:func:`run_stages` runs them: a stage that raises leaves its columns empty and its error is
recorded, never a value; each cell's ``stages`` column records, by stage name, the seconds
each stage took on the operator and its error if any. A stage is a measurement beside the
bracket: only the bracket stage's certificates (checked by :mod:`softrank.checker`) are
bounds, and only the attack stage may change a verdict (to ``unsound``, on a checked
counterexample).

This module sits below the operators, certifiers and studies: it imports nothing from
softrank but the errors, and takes an operator as any object with the
:class:`~softrank.operators.Operator` attributes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .errors import InvalidArgumentError

__all__ = ["group_key", "ID_COLUMNS", "STAGES_COLUMN", "OperatorCells", "Stage", "check_stages",
           "stage_columns", "run_stages"]

#: Columns every row carries before any stage runs: the operator's identity and the cell's
#: tolerance.
ID_COLUMNS = ("operator_id", "family", "source", "layer", "head", "block", "m", "n",
              "checkpoint", "planted_rank", "eps")

#: The last column: JSON ``{stage name: {"seconds": s[, "error": "Type: message"]}}``.
STAGES_COLUMN = "stages"


def group_key(row: Mapping[str, Any]) -> str:
    """The report's family group of a cell.

    Parameters
    ----------
    row : mapping
        A cell row with at least ``family`` and ``n`` (the number of keys); ``checkpoint``
        is non-empty for heads of a user's checkpoint.

    Returns
    -------
    str
        ``FAMILY-wN`` for learned heads (one group per width ``N``), the family otherwise.
    """
    fam = row["family"]
    if fam == "minilm" or row.get("checkpoint"):  # learned heads: one group per width
        return f"{fam}-w{row['n']}"
    return fam


@dataclass
class OperatorCells:
    """All cells of one operator, as the stages see them.

    Attributes
    ----------
    operator : Operator
        The operator (``A`` (m, N) float64, row-stochastic; ``Q``, ``K``, ``beta`` when
        known).
    eps : tuple of float
        The tolerances, one cell each, in the order of the rows.
    validated : bool
        Whether the bracket is certified for the exact softmax of the factors (validated
        input mode; then :meth:`certified_matrix` is the enclosure's midpoint).
    out : pathlib.Path or None
        The audit's output directory (a stage may save files under it, e.g. the attack's
        counterexamples), or None.
    brackets : list
        One :class:`~softrank.certifiers.bracket.Bracket` per tolerance, set by the bracket
        stage (empty before it runs).
    """

    operator: Any
    eps: tuple[float, ...]
    validated: bool = False
    out: Path | None = None
    brackets: list = field(default_factory=list)
    _shared: dict = field(default_factory=dict, repr=False)

    def shared(self, key: str, make: Callable[[], Any]) -> Any:
        """``make()`` once per operator, shared by every stage that asks for ``key``."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def certified_matrix(self):
        """The matrix the bracket's certificates are about: ``A``, or in validated mode the
        midpoint of the enclosure of the exact softmax of the factors."""
        op = self.operator
        if not (self.validated and op.Q is not None):
            return op.A

        def enclose():
            from .checker.validated import enclose_softmax

            return enclose_softmax(op.Q, op.K, op.beta)[0]

        return self.shared("certified_matrix", enclose)


@runtime_checkable
class Stage(Protocol):
    """One per-cell measurement of an audit (see the module docstring).

    Attributes
    ----------
    name : str
        Unique among the audit's stages; the key of its record in the ``stages`` column.
    columns : tuple of str
        The columns it adds to each row (distinct from every other stage's and from
        :data:`ID_COLUMNS`).

    Methods
    -------
    run(cells)
        Returns a list of ``len(cells.eps)`` dicts, one per tolerance in order. Their keys
        are its own ``columns``; a stage may also rewrite a column of an earlier stage that
        it names in an attribute ``rewrites`` (the attack stage rewrites ``verdict``).
        Missing keys are left empty.
    """

    name: str
    columns: tuple[str, ...]

    def run(self, cells: OperatorCells) -> list[dict]:
        ...


def check_stages(stages: Sequence[Any]) -> list:
    """The stages as a list, validated before any work.

    Raises
    ------
    InvalidArgumentError
        If an entry lacks ``name``, ``columns`` or ``run``, or two stages share a name or a
        column, or a column is one of :data:`ID_COLUMNS` or ``stages``.
    """
    out, names, owner = [], set(), {c: "the operator's identity" for c in ID_COLUMNS}
    owner[STAGES_COLUMN] = "the stage record"
    for st in stages:
        name = getattr(st, "name", None)
        cols = getattr(st, "columns", None)
        if not isinstance(name, str) or not name or not callable(getattr(st, "run", None)):
            raise InvalidArgumentError(f"stages: {st!r:.80} is not a stage (expected an object "
                                       "with a str name, a tuple of columns and run(cells))")
        if not isinstance(cols, (tuple, list)) or not all(isinstance(c, str) and c for c in cols):
            raise InvalidArgumentError(f"stages: {name!r}: columns: expected a tuple of column "
                                       f"names, got {cols!r:.80}")
        if name in names:
            raise InvalidArgumentError(f"stages: the name {name!r} is given twice")
        names.add(name)
        for c in cols:
            if c in owner:
                raise InvalidArgumentError(f"stages: {name!r}: column {c!r} is already written "
                                           f"by {owner[c]}")
            owner[c] = f"stage {name!r}"
        out.append(st)
    return out


def stage_columns(stages: Sequence[Any]) -> list[str]:
    """The row's columns: :data:`ID_COLUMNS`, each stage's in order, then ``stages``."""
    cols = list(ID_COLUMNS)
    for st in stages:
        cols += list(st.columns)
    return cols + [STAGES_COLUMN]


def _identity(op, eps: float) -> dict:
    prov = op.provenance()
    return {"operator_id": op.operator_id, "family": op.family, "source": op.source,
            "layer": "" if op.layer is None else op.layer,
            "head": "" if op.head is None else op.head, "block": op.block,
            "m": op.shape[0], "n": op.shape[1], "checkpoint": prov.get("checkpoint", ""),
            "planted_rank": prov.get("planted_rank", ""), "eps": float(eps)}


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def run_stages(operator, eps: Sequence[float], stages: Sequence[Any], *,
               validated: bool = False, out: Path | None = None) -> list[dict]:
    """Every cell of ``operator`` as a row: the stages run in order on all its cells.

    Parameters
    ----------
    operator : Operator
    eps : sequence of float
        Tolerances, one row each, in this order.
    stages : sequence of Stage
        Validated with :func:`check_stages`.
    validated, out
        See :class:`OperatorCells`.

    Returns
    -------
    list of dict
        One row per tolerance with the keys :func:`stage_columns` (empty strings where a
        stage wrote nothing or failed).

    Raises
    ------
    InvalidArgumentError
        If the stages are malformed (before any runs). A stage that raises while it runs,
        or returns rows of the wrong number or keys, is recorded in the ``stages`` column
        with its error and its columns are left empty; nothing else stops the operator.
    """
    stages = check_stages(stages)
    cells = OperatorCells(operator, tuple(float(e) for e in eps), bool(validated),
                          None if out is None else Path(out))
    rows = [_identity(operator, e) for e in cells.eps]
    record: dict[str, dict] = {}
    for st in stages:
        own = tuple(st.columns)
        may = set(own) | set(getattr(st, "rewrites", ()))
        t0 = time.perf_counter()
        try:
            got = st.run(cells)
            if not isinstance(got, list) or len(got) != len(rows) or not all(
                    isinstance(g, dict) for g in got):
                raise InvalidArgumentError(f"stage {st.name!r} returned {type(got).__name__} "
                                           f"of {len(got) if hasattr(got, '__len__') else '?'} "
                                           f"entries, expected a list of {len(rows)} dicts")
            extra = sorted({k for g in got for k in g} - may)
            if extra:
                raise InvalidArgumentError(f"stage {st.name!r} wrote columns it does not "
                                           f"declare: {extra[:5]}")
            error = None
        except Exception as exc:  # noqa: BLE001 - recorded by name; never a value
            got, error = [{} for _ in rows], _one_line(exc)
        rec = {"seconds": round(time.perf_counter() - t0, 4)}
        if error is not None:
            rec["error"] = error
        record[st.name] = rec
        for row, g in zip(rows, got):
            for c in own:
                row[c] = g.get(c, "")
            for c in may - set(own):
                if c in g:
                    row[c] = g[c]
    stamp = json.dumps(record, separators=(",", ":"))
    for row in rows:
        row[STAGES_COLUMN] = stamp
    return rows

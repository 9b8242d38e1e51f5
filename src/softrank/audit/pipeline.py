"""The audit's pipeline: the stages every cell of an operator goes through, in order.

Each operator's cells (one per tolerance ``eps``) are measured by **stages**, run in order on
all its cells at once (:func:`run_stages`):

1. ``bracket`` (:mod:`softrank.audit.bracket_stage`): the certified bracket;
2. ``attack`` (:mod:`softrank.audit.attack_stage`): the targeted attack on its lower
   certificate; with a rank other than ``plain`` (``softrank audit --rank``), then
   ``causal`` (:mod:`softrank.audit.causal_stage`): the bracket of the causal rank;
3. ``native-geometry`` and 5. ``intrinsic-descriptor``
   (:mod:`softrank.audit.geometry_stages`): the factors' geometry and the descriptor;
4. ``b1-features`` and 6. ``gauge-features`` (:mod:`softrank.audit.feature_stages`): the
   add-on study's baseline features and the gauged native ones;

then any stage a user adds (``softrank audit --stage MODULE:OBJECT``).

A stage is any object with a ``name``, the ``columns`` it writes and a ``run(cells) ->
list[dict]`` method returning one dict per tolerance with its own columns only
(:class:`Stage`). What a stage hands to the stages after it goes into the operator's typed
record, :class:`OperatorCells`: the bracket stage publishes its
:class:`~softrank.certifiers.result.Bracket` objects, which the attack reads; the attack
records a checked counterexample with :meth:`OperatorCells.refute`. No stage rewrites
another's result: the pipeline alone writes the cell's final ``verdict`` (the bracket's, or
``unsound`` when a stage refuted a certificate of the cell: its lower end's, or one the
frontier stage reports beside it). That is the only refutation channel; ``softrank audit``'s
exit status follows the verdicts.

A stage takes the audit's settings it needs by naming them in ``parameters``
(:func:`build_stage`): each is passed by keyword, validated once by the
:class:`~softrank.audit.config.AuditConfig`, and the stages are built once per process.

A stage that raises leaves its columns empty and its error is recorded, never a value; each
row's ``stages`` column records, by stage name, the seconds each stage took on the operator
and its error if any (:class:`~softrank.audit.record.StageRecord`). Only the bracket stage's
certificates (checked by :mod:`softrank.checker`) are bounds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..validation import validate_eps
from ..errors import InvalidArgumentError
from ..stop import check as _check_stop
from .record import (ID_COLUMNS, STAGES_COLUMN, Refutation, StageRecord, cell_identity,
                     column_owner, encode_stages)

__all__ = ["OperatorCells", "Stage", "check_stages", "stage_columns",
           "run_stages", "default_stages", "load_stages", "build_stage"]


@dataclass
class OperatorCells:
    """All cells of one operator, as the stages see them: the operator, the tolerances and
    what the earlier stages published.

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
    """

    operator: Any
    eps: tuple[float, ...]
    validated: bool = False
    out: Path | None = None
    _published: dict = field(default_factory=dict, repr=False)
    _refutations: list = field(default_factory=list, repr=False)  # (stage, index, refutation)
    _running: str | None = field(default=None, repr=False)
    _shared: dict = field(default_factory=dict, repr=False)

    def publish(self, stage: str, results: Sequence[Any]) -> None:
        """Hand one typed result per tolerance to the later stages, under the stage's name
        (once per stage).

        Raises
        ------
        InvalidArgumentError
            If ``stage`` has published already, or ``results`` is not one per tolerance.
        """
        if stage in self._published:
            raise InvalidArgumentError(f"stage {stage!r} has published its results already")
        results = tuple(results)
        if len(results) != len(self.eps):
            raise InvalidArgumentError(f"stage {stage!r}: expected {len(self.eps)} results, "
                                       f"one per tolerance, got {len(results)}")
        self._published[stage] = results

    def published(self, stage: str) -> tuple:
        """The results ``stage`` published (one per tolerance), or ``()``."""
        return self._published.get(stage, ())

    @property
    def brackets(self) -> tuple:
        """The bracket stage's :class:`~softrank.certifiers.result.Bracket` per tolerance
        (``()`` before it runs, or when it failed)."""
        return self.published("bracket")

    def refute(self, index: int, refutation: Refutation) -> None:
        """Record a counterexample to the lower certificate of cell ``index`` that the stage
        has checked (a witness within ``eps`` of rank below the certificate's that
        :func:`softrank.checker.check` accepts): the pipeline makes the cell ``unsound`` and
        records the refutation in the stage's record, unless the stage then fails (a
        failed stage's refutations are dropped, like its columns).

        Raises
        ------
        InvalidArgumentError
            If ``index`` is not a cell's index or ``refutation`` not a
            :class:`~softrank.audit.record.Refutation` of a smaller rank than it claims, or,
            for the cell's lower certificate (``certificate="lower"``), one whose ``claimed``
            is not the rank of that certificate (the bracket stage's lower end).
        """
        if isinstance(index, bool) or not (isinstance(index, int) and 0 <= index < len(self.eps)):
            raise InvalidArgumentError(f"index: expected a cell index in [0, {len(self.eps)}), "
                                       f"got {index!r}")
        if not isinstance(refutation, Refutation):
            raise InvalidArgumentError("refutation: expected a softrank.audit.Refutation, got "
                                       f"{type(refutation).__name__}")
        if not (isinstance(refutation.found, int) and isinstance(refutation.claimed, int)
                and 0 <= refutation.found < refutation.claimed):
            raise InvalidArgumentError(
                f"refutation: a witness of rank {refutation.found!r} does not refute a lower "
                f"certificate of rank {refutation.claimed!r}")
        if refutation.certificate == "lower":
            br = self.brackets[index] if self.brackets else None
            lower = None if br is None else br.lower
            if lower is None or refutation.claimed != lower:
                raise InvalidArgumentError(
                    f"refutation: claims the lower certificate of rank {refutation.claimed!r} "
                    f"wrong, but the cell's certified lower end is {lower!r}")
        self._refutations.append((self._running or refutation.by, index, refutation))

    def refutations(self, index: int) -> tuple:
        """The refutations recorded for cell ``index``."""
        return tuple(r for _, i, r in self._refutations if i == index)

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
            from ..checker.validated import enclose_softmax

            return enclose_softmax(op.Q, op.K, op.beta, op.mask)[0]

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
        :data:`~softrank.audit.record.ID_COLUMNS`).
    parameters : tuple of str, optional
        On the class: the :class:`~softrank.audit.config.AuditConfig` settings its
        constructor takes by keyword (:func:`build_stage`; README, *Adding a stage with a
        parameter*). A column that is not a plain string is declared with its decoder
        (:func:`softrank.audit.record.register_column`), so that
        :func:`~softrank.audit.record.read_cell` returns it typed.

    Methods
    -------
    run(cells)
        Returns a list of ``len(cells.eps)`` dicts, one per tolerance in order, whose keys
        are among its own ``columns`` (missing keys are left empty). It may read what earlier
        stages published (:meth:`OperatorCells.published`), publish its own typed results
        and record refutations; it never writes another stage's columns.
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
        If an entry lacks ``name``, ``columns`` or ``run``, two stages share a name or a
        column, a column is one of the identity columns or ``stages``, or a stage declares
        ``rewrites`` (a stage writes its own columns only; see :meth:`OperatorCells.refute`).
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
        if getattr(st, "rewrites", ()):
            raise InvalidArgumentError(
                f"stages: {name!r} declares rewrites={st.rewrites!r}: a stage writes its own "
                "columns only (a checked counterexample is recorded with cells.refute(), and the "
                "pipeline sets the verdict)")
        if name in names:
            raise InvalidArgumentError(f"stages: two stages are named {name!r} (a name of "
                                       "softrank's own stages, or one given twice)")
        names.add(name)
        for c in cols:
            typed_by = column_owner(c)
            if typed_by is not None and typed_by != name:
                raise InvalidArgumentError(f"stages: {name!r}: column {c!r} belongs to stage "
                                           f"{typed_by!r} (read back as its type)")
            if c in owner:
                raise InvalidArgumentError(f"stages: {name!r}: column {c!r} is already written "
                                           f"by {owner[c]}")
            owner[c] = f"stage {name!r}"
        out.append(st)
    return out


def stage_columns(stages: Sequence[Any]) -> list[str]:
    """The row's columns: the identity columns, each stage's in order, then ``stages``."""
    cols = list(ID_COLUMNS)
    for st in stages:
        cols += list(st.columns)
    return cols + [STAGES_COLUMN]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def _value(stage: str, col: str, v):
    """A stage's value as the row holds it: a str, int, float or bool (a numpy scalar as the
    Python number it holds); None as empty."""
    if v is None:
        return ""
    if isinstance(v, (str, int, float)):
        return v
    item = getattr(v, "item", None)
    if type(v).__module__ == "numpy" and getattr(v, "ndim", None) == 0 and callable(item):
        return item()
    raise InvalidArgumentError(f"stage {stage!r} wrote a {type(v).__name__} to column {col!r} "
                               "(expected a str or a number)")


def _run_one(st, cells: OperatorCells, n: int) -> tuple[list[dict], str]:
    """One stage on the operator's cells: its rows and its error (``""`` when none)."""
    try:
        got = st.run(cells)
        if not isinstance(got, list) or len(got) != n or not all(isinstance(g, dict) for g in got):
            raise InvalidArgumentError(f"stage {st.name!r} returned {type(got).__name__} "
                                       f"of {len(got) if hasattr(got, '__len__') else '?'} "
                                       f"entries, expected a list of {n} dicts")
        extra = sorted({k for g in got for k in g} - set(st.columns))
        if extra:
            raise InvalidArgumentError(f"stage {st.name!r} wrote columns it does not "
                                       f"declare: {extra[:5]}")
        return [{c: _value(st.name, c, v) for c, v in g.items()} for g in got], ""
    except Exception as exc:  # noqa: BLE001 - recorded by name; never a value
        return [{} for _ in range(n)], _one_line(exc)


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
        stage wrote nothing or failed). A cell with a refutation has verdict ``unsound``.

    Raises
    ------
    InvalidArgumentError
        If the stages are malformed or ``eps`` is not a list of distinct tolerances in
        ``(0, 1)`` (before any runs). A stage that raises while it runs, or returns rows of
        the wrong number, keys or value types (a str or a number; numpy scalars are
        converted), is recorded in the ``stages`` column with its error and its columns are
        left empty; nothing else stops the operator.
    """
    stages = check_stages(stages)
    cells = OperatorCells(operator, tuple(validate_eps(list(eps))), bool(validated),
                          None if out is None else Path(out))
    rows = [cell_identity(operator, e) for e in cells.eps]
    record: dict[str, StageRecord] = {}
    for st in stages:
        _check_stop()  # a stop whose KeyboardInterrupt was dropped (softrank.stop)
        t0 = time.perf_counter()
        cells._running, mark = st.name, len(cells._refutations)
        got, error = _run_one(st, cells, len(rows))
        cells._running = None
        if error:  # a failed stage's refutations go with its columns
            del cells._refutations[mark:]
        refuted = {cells.eps[i]: ref for _, i, ref in cells._refutations[mark:]}
        record[st.name] = StageRecord(time.perf_counter() - t0, error, refuted)
        for row, g in zip(rows, got):
            for c in st.columns:
                row[c] = g.get(c, "")
    for i, row in enumerate(rows):
        if cells.refutations(i) and "verdict" in row:
            row["verdict"] = "unsound"
    stamp = encode_stages(record)
    for row in rows:
        row[STAGES_COLUMN] = stamp
    return rows


def build_stage(cls, config, label: str | None = None):
    """An instance of the stage class ``cls`` for ``config``: each name in ``cls.parameters``
    (a tuple of :class:`~softrank.audit.config.AuditConfig` settings; none when absent) is
    passed by keyword, with its value from :meth:`AuditConfig.setting
    <softrank.audit.config.AuditConfig.setting>` (validated there; the third-party methods
    loaded and the reference store opened once per process).

    Raises
    ------
    InvalidArgumentError
        Naming ``label`` (default: ``stages:`` and the class's name): ``parameters`` is not
        a tuple of the audit's settings, or the class cannot be instantiated with them.
    """
    params = getattr(cls, "parameters", ())
    label = label or f"stages: {getattr(cls, '__name__', cls)!r:.80}"
    if isinstance(params, str) or not isinstance(params, (tuple, list)):
        raise InvalidArgumentError(f"{label}: parameters: expected a tuple of the audit's "
                                   f"settings, got {params!r:.80}")
    kwargs = {p: config.setting(p, label) for p in params}
    try:
        return cls(**kwargs)
    except Exception as exc:
        given = f"with the parameters {', '.join(kwargs)}" if kwargs else "without arguments"
        raise InvalidArgumentError(f"{label}: the class could not be instantiated {given} "
                                   f"({exc})") from exc


def default_stages(config) -> list:
    """The stages of an audit cell under ``config`` (an
    :class:`~softrank.audit.config.AuditConfig`), in the order they run (see the module
    docstring), then the config's extra stages; each built with its declared
    ``parameters`` (:func:`build_stage`)."""
    from .attack_stage import AttackStage
    from .bracket_stage import BracketStage
    from .feature_stages import BaselineFeaturesStage, GaugeFeaturesStage
    from .geometry_stages import IntrinsicDescriptorStage, NativeGeometryStage

    classes = [BracketStage, AttackStage, NativeGeometryStage, BaselineFeaturesStage,
               IntrinsicDescriptorStage, GaugeFeaturesStage]
    if config.rank != "plain":
        from .causal_stage import CausalStage

        classes.insert(2, CausalStage)
    if config.frontier:
        from .frontier_stage import FrontierStage

        classes.insert(classes.index(AttackStage) + 1, FrontierStage)
    stages = [build_stage(cls, config) for cls in classes]
    return check_stages(stages + load_stages(config.stages, config))


_LOADED_OBJECTS: dict = {}


def load_stages(specs, config=None) -> list:
    """Stages from ``MODULE:OBJECT`` specs (imported once per process, so workers load them
    by name), classes and objects (returned as given). A class, given or named, is built
    with :func:`build_stage`: with the ``parameters`` it declares, from ``config``, or
    without arguments when it declares none.

    Parameters
    ----------
    specs : sequence of str, type or Stage
    config : AuditConfig, optional
        Where declared parameters come from (needed only by a class that declares some).

    Raises
    ------
    InvalidArgumentError
        A malformed spec, one that cannot be imported, a class that declares parameters
        without a ``config``, or an object that is not a stage (:class:`Stage`).
    """
    from ..certifiers.interface import load_object

    out = []
    for spec in specs:
        what = f"--stage {spec!r}" if isinstance(spec, str) else f"stages: {spec!r:.80}"
        obj = spec
        if isinstance(spec, str):
            obj = _LOADED_OBJECTS.get(spec)
            if obj is None:
                obj = _LOADED_OBJECTS[spec] = load_object(spec, "--stage")
        if isinstance(obj, type):
            if getattr(obj, "parameters", ()) and config is None:
                raise InvalidArgumentError(f"{what}: declares parameters "
                                           f"{tuple(obj.parameters)!r}; build it from an "
                                           "AuditConfig (load_stages(specs, config))")
            obj = build_stage(obj, config, what)
        if not isinstance(obj, Stage):
            raise InvalidArgumentError(f"{what}: expected an object with name, columns and "
                                       "run(cells)")
        out.append(obj)
    return check_stages(out)

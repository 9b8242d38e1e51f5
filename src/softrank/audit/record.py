"""The audit's cell record: one row per cell, written once and read back through one set of types.

A **cell** is one operator at one tolerance ``eps``. Its row holds the operator's identity
(:data:`ID_COLUMNS`), every stage's columns (strings and numbers, as in ``brackets.csv``;
the README lists them) and two structured columns, serialised here and nowhere else:

* ``diagnostics``: the bracket's :class:`~softrank.certifiers.interface.Diagnostics` (every
  method's :class:`~softrank.certifiers.interface.MethodRecord`, the checker's
  disagreements, the ends carried from another tolerance, the error of an ``error`` cell),
  written by :func:`encode_diagnostics` and read by :func:`read_diagnostics`;
* ``stages`` (:data:`STAGES_COLUMN`): ``{stage name: StageRecord}``, the seconds each stage
  took on the operator and its error, written by :func:`encode_stages` and read by
  :func:`read_stages`.

Every other column that is not a plain string is declared by the stage that writes it, with
its decoder, beside the stage (:func:`register_column`): numbers (``svd_seconds``,
``attack_closest``, ...) and the stages' own result types (the frontier stage's
:class:`~softrank.audit.frontier_stage.FrontierBand`, the causal stage's
:class:`~softrank.audit.causal_stage.RankConstructions`, the gauge stage's
:class:`~softrank.audit.feature_stages.GaugedNative`), each with its ``encode`` beside its
type. :func:`read_cell` returns them all typed (an empty value as None), as a :class:`Cell`.

The pipeline (:mod:`softrank.audit.pipeline`) writes rows; the ledger stores them as they are
and exports them to ``brackets.csv`` and ``brackets.parquet``; the report and ``softrank
diff`` read them back with :func:`read_cell` (a validated, typed copy of a row), so the
verdicts and statuses they accept are the interface's literals (:data:`VERDICTS`,
:data:`STATUSES`) and a record that is not softrank's is refused by name.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from ..certifiers.interface import Diagnostics, MethodRecord, Status, Verdict
from ..errors import MalformedRecord
from ..ids import group_key

__all__ = ["ID_COLUMNS", "STAGES_COLUMN", "VERDICTS", "STATUSES", "StageRecord", "group_key",
           "Refutation", "cell_identity", "encode_diagnostics", "read_diagnostics",
           "encode_stages", "read_stages", "read_cell", "read_cells", "cell_key",
           "refutations", "Cell", "register_column", "column_types", "number", "integer",
           "json_column", "count", "column_owner", "register_cell_check",
           "compact_json", "save_counterexample"]

#: Columns every row carries before any stage runs: the operator's identity and the cell's
#: tolerance.
ID_COLUMNS = ("operator_id", "family", "source", "layer", "head", "block", "m", "n",
              "checkpoint", "planted_rank", "eps")

#: The last column: ``{stage name: {"seconds": s[, "error": "Type: message"]}}`` as JSON.
STAGES_COLUMN = "stages"

#: A cell's verdicts and a method's statuses: the interface's literals.
VERDICTS = get_args(Verdict)
STATUSES = get_args(Status)


@dataclass(frozen=True)
class StageRecord:
    """What one stage did on one operator (the same for all its cells).

    Attributes
    ----------
    seconds : float
        Wall time of the stage's ``run`` on the operator's cells.
    error : str
        ``"Type: message"`` when it raised or broke its protocol (its columns are then
        empty, and its refutations dropped); empty otherwise.
    refuted : dict
        ``{eps: Refutation}``: the cells a certificate of which the stage refuted with a
        checked counterexample (the pipeline made them ``unsound``).
    """

    seconds: float
    error: str = ""
    refuted: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d: dict = {"seconds": round(self.seconds, 4)}
        if self.error:
            d["error"] = self.error
        if self.refuted:
            d["refuted"] = [{"eps": e, "claimed": r.claimed, "found": r.found,
                             **({"saved": str(r.saved)} if r.saved is not None else {}),
                             **({"certificate": r.certificate}
                                if r.certificate != "lower" else {})}
                            for e, r in self.refuted.items()]
        return d


@dataclass(frozen=True)
class Refutation:
    """A checked counterexample to a cell's lower certificate, recorded by a stage.

    Attributes
    ----------
    by : str
        The stage's name.
    claimed : int
        The rank the lower certificate claimed.
    found : int
        The rank of the witness within ``eps`` that the checker accepted.
    saved : pathlib.Path or None
        Where the certificate and its counterexample were saved, if anywhere.
    certificate : str
        Which certificate: ``"lower"``, the cell's lower end (default), or a description of
        another one the stage reported beside the cell (e.g. ``"frontier: e_4 > 0.31"``, a
        lower end of the operator's frontier band).
    """

    by: str
    claimed: int
    found: int
    saved: Path | None = None
    certificate: str = "lower"


def save_counterexample(out: Path | None, name: str, certificate, witness, A) -> Path | None:
    """Save a refuted ``certificate`` and the ``witness`` that refutes it under
    ``out/counterexamples/NAME/`` (``lower.npz``, ``witness.npz``; re-check with ``softrank
    verify``) and return that directory; None (nothing saved) without an output directory."""
    import re

    from ..checker import save_certificate

    if out is None:
        return None
    saved = out / "counterexamples" / re.sub(r"[^\w.-]+", "_", name).lstrip(".")
    save_certificate(saved / "lower.npz", certificate, A, producer=f"softrank {certificate.method}")
    save_certificate(saved / "witness.npz", witness, A, producer="softrank attack",
                     refutes={"claimed": certificate.rank, "eps": certificate.eps,
                              "by": certificate.method})
    return saved


def cell_identity(op, eps: float) -> dict:
    """The :data:`ID_COLUMNS` of ``op``'s cell at ``eps`` (empty strings where unknown)."""
    prov = op.provenance()
    return {"operator_id": op.operator_id, "family": op.family, "source": op.source,
            "layer": "" if op.layer is None else op.layer,
            "head": "" if op.head is None else op.head, "block": op.block,
            "m": op.shape[0], "n": op.shape[1], "checkpoint": prov.get("checkpoint", ""),
            "planted_rank": prov.get("planted_rank", ""), "eps": float(eps)}


def compact_json(obj, **kwargs) -> str:
    """``obj`` as compact JSON: how the cell's structured columns are written (here and by
    the stages' result types registered with :func:`register_column`)."""
    return json.dumps(obj, separators=(",", ":"), **kwargs)


_compact = compact_json


class Cell(dict):
    """A cell row as :func:`read_cell` returns it: validated and typed (a ``dict`` of its
    columns). Reading a :class:`Cell` again returns it as it is."""


#: ``{column: decoder}``: how each stage's typed columns are read back (:func:`register_column`).
_COLUMN_TYPES: dict = {}
_OWNERS: dict = {}  # column -> the stage that registered it
_CELL_CHECKS: list = []  # (stage, check(cell) -> None or raise ValueError)


def register_column(column: str, decode: Callable[[Any], Any], stage: str | None = None,
                    ) -> None:
    """Declare how :func:`read_cell` reads the column ``column`` back: ``decode(value)`` gets
    the value as stored (a string from ``brackets.csv``, a string or a number from the
    ledger; never empty: an empty value reads as None) and returns the typed value, or raises
    ``ValueError``/``TypeError``/``KeyError`` for a value that is not the stage's record.
    The stage that writes the column registers it, beside its result type, under its name
    (``stage``): no other stage may then write that column (:func:`column_owner`).

    Raises
    ------
    InvalidArgumentError
        ``column`` is registered already with another decoder, or is one of the columns
        this module reads itself.
    """
    from ..errors import InvalidArgumentError

    if column in ID_COLUMNS or column in ("lower", "upper", "verdict", "seconds",
                                          "diagnostics", STAGES_COLUMN):
        raise InvalidArgumentError(f"column: {column!r} is read by softrank.audit.record itself")
    if _COLUMN_TYPES.get(column, decode) is not decode:
        raise InvalidArgumentError(f"column: {column!r} is registered already")
    _COLUMN_TYPES[column] = decode
    if stage is not None:
        _OWNERS[column] = stage


def column_owner(column: str) -> str | None:
    """The stage that registered ``column`` with a type (:func:`register_column`), or None."""
    return _OWNERS.get(column)


def register_cell_check(stage: str, check: Callable[[Mapping[str, Any]], None]) -> None:
    """A check of a typed cell across a stage's columns, run by :func:`read_cell` after the
    columns are decoded (e.g. the causal stage's ends against its verdict): ``check(cell)``
    raises ``ValueError`` for a cell that is not the stage's record."""
    _CELL_CHECKS.append((stage, check))


def json_column(text, cls):
    """For a registered decoder of a JSON column: ``text`` as it is when it is a ``cls``
    already, else the JSON it holds.

    Raises
    ------
    TypeError
        ``text`` is neither a ``cls`` nor a string.
    ValueError
        It is not JSON.
    """
    if isinstance(text, cls):
        return text
    if not isinstance(text, str):
        raise TypeError(f"expected JSON text, got {type(text).__name__}")
    return json.loads(text)


def column_types() -> dict:
    """``{column: decoder}`` of every registered column."""
    return dict(_COLUMN_TYPES)


def number(v) -> float:
    """A number column's value as a float (``"0.25"``, ``0.25``, ``inf``; not a bool, not
    NaN)."""
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise TypeError(f"expected a number, got {v!r:.40}")
    f = float(v)
    if math.isnan(f):
        raise ValueError(f"expected a number, got {v!r:.40}")
    return f


def count(v) -> int:
    """A column of ranks or counts: :func:`integer`, and ``>= 0``."""
    k = integer(v)
    if k < 0:
        raise ValueError(f"expected an integer >= 0, got {v!r:.40}")
    return k


def integer(v) -> int:
    """An integer column's value as an int (``"4"``, ``4``, ``4.0``: a CSV rewritten by a
    tool that reads the column as floats)."""
    f = number(v)
    if not math.isfinite(f) or not f.is_integer():
        raise ValueError(f"expected an integer, got {v!r:.40}")
    return int(f)


def encode_diagnostics(diag: Diagnostics) -> str:
    """The ``diagnostics`` column of a cell: ``diag`` as compact JSON."""
    return _compact(diag.to_dict())


def encode_stages(records: Mapping[str, StageRecord]) -> str:
    """The ``stages`` column: ``{name: record}`` as compact JSON, in the order run."""
    return _compact({name: rec.to_dict() for name, rec in records.items()})


def _method(m) -> MethodRecord:
    if isinstance(m, MethodRecord):
        return m
    if not (isinstance(m, dict) and isinstance(m.get("name"), str)
            and m.get("side") in ("lower", "upper") and m.get("status") in STATUSES
            and (m.get("rank") is None or (isinstance(m.get("rank"), int)
                                           and not isinstance(m.get("rank"), bool)))
            and isinstance(m.get("seconds", 0.0), (int, float))
            and isinstance(m.get("message", ""), str)
            and set(m) <= {"name", "side", "origin", "status", "rank", "seconds", "message"}):
        raise MalformedRecord("diagnostics: not softrank's record (a method without name, side, "
                              f"status, rank and seconds), got {m!r:.120}")
    return MethodRecord(name=m["name"], side=m["side"], origin=m.get("origin", "builtin"),
                        status=m["status"], rank=m.get("rank"),
                        seconds=float(m.get("seconds", 0.0)), message=m.get("message", ""))


def read_diagnostics(row: Mapping[str, Any]) -> Diagnostics:
    """The cell's :class:`~softrank.certifiers.interface.Diagnostics` (empty when the row has
    none: a stage error, or an audit older than the column).

    Parameters
    ----------
    row : mapping
        A cell row; its ``diagnostics`` is JSON text (``brackets.csv``, the ledger), a dict
        or a :class:`Diagnostics`.

    Raises
    ------
    MalformedRecord
        When the column is not softrank's record (not JSON, or methods without name, side,
        status, rank and seconds).
    """
    d = row.get("diagnostics", "")
    if isinstance(d, Diagnostics):
        return d
    if d in ("", None):
        return Diagnostics()
    if isinstance(d, str):
        try:
            d = json.loads(d)
        except ValueError as exc:
            raise MalformedRecord(f"diagnostics: not softrank's record (not JSON: {exc})") from None
    if not isinstance(d, dict) or not isinstance(d.get("methods", []), list):
        raise MalformedRecord("diagnostics: not softrank's record (expected a JSON object with "
                              f"a list of methods), got {d!r:.120}")
    try:
        diag = Diagnostics.from_dict({**d, "methods": []})
    except (TypeError, ValueError) as exc:
        raise MalformedRecord(f"diagnostics: {exc}") from None
    diag.methods = [_method(m) for m in d.get("methods", [])]
    return diag


def read_stages(row: Mapping[str, Any]) -> dict[str, StageRecord]:
    """``{stage name: StageRecord}`` from the row's ``stages`` column (empty without one).

    Raises
    ------
    MalformedRecord
        When the column is not a JSON object of ``{"seconds": s[, "error": e]}`` records.
    """
    st = row.get(STAGES_COLUMN, "")
    if st in ("", None):
        return {}
    if isinstance(st, str):
        try:
            st = json.loads(st)
        except ValueError as exc:
            raise MalformedRecord(f"stages: not JSON ({exc})") from None
    if not isinstance(st, dict):
        raise MalformedRecord(f"stages: expected a JSON object, got {st!r:.120}")
    out = {}
    for name, rec in st.items():
        if isinstance(rec, StageRecord):
            out[name] = rec
            continue
        refs = rec.get("refuted", []) if isinstance(rec, dict) else None
        if not (isinstance(rec, dict) and isinstance(rec.get("seconds"), (int, float))
                and isinstance(rec.get("error", ""), str) and isinstance(refs, list)
                and all(isinstance(x, dict) and isinstance(x.get("eps"), (int, float))
                        and isinstance(x.get("claimed"), int)
                        and isinstance(x.get("found"), int) for x in refs)):
            raise MalformedRecord(f"stages: the record of {name!r} is not softrank's, got "
                                  f"{rec!r:.120}")
        refuted = {float(x["eps"]): Refutation(name, x["claimed"], x["found"],
                                               Path(x["saved"]) if x.get("saved") else None,
                                               str(x.get("certificate", "lower")))
                   for x in refs}
        out[name] = StageRecord(float(rec["seconds"]), rec.get("error", ""), refuted)
    return out


def cell_key(row: Mapping[str, Any]) -> tuple[str, float]:
    """``(operator_id, eps)``: what keys a cell in a run."""
    return str(row["operator_id"]), float(row["eps"])


def read_cells(rows) -> list[Cell]:
    """:func:`read_cell` of every row, in order.

    Raises
    ------
    MalformedRecord
        As :func:`read_cell`, naming the cell (its operator and tolerance) first."""
    out = []
    for r in rows:
        try:
            out.append(read_cell(r))
        except MalformedRecord as exc:
            raise MalformedRecord(f"cell {str(r.get('operator_id', '?'))[:80]} at eps "
                                  f"{r.get('eps', '?')}: {exc}") from None
    return out


def read_cell(row: Mapping[str, Any]) -> Cell:
    """A validated, typed copy of a cell row, as the report, the plots, the studies and
    ``softrank diff`` read it (and nothing else reads a row).

    ``lower`` and ``upper`` become ints (None for an end without a certificate, in an
    ``error`` cell), ``eps`` and ``seconds`` floats (``seconds`` stays ``""`` when empty),
    ``diagnostics`` a :class:`Diagnostics`, ``stages`` a dict of :class:`StageRecord`, and
    every column a stage registered (:func:`register_column`) its typed value, None where
    empty; every other column is kept as it is. A :class:`Cell` is returned as it is.

    Raises
    ------
    MalformedRecord
        Naming what is wrong: a missing id column, ends that are not integers or do not fit
        the verdict (an ``error`` cell lacks at least one), a verdict outside
        :data:`VERDICTS`, seconds that are not a finite number ``>= 0``, or a structured
        column that is not softrank's record.
    """
    if isinstance(row, Cell):
        return row
    r = Cell(row)
    r[STAGES_COLUMN] = read_stages(r)
    for col in ("operator_id", "eps", "lower", "upper"):
        if col not in r:
            raise MalformedRecord(f"no column {col!r}")
    try:
        r["operator_id"], r["eps"] = str(r["operator_id"]), float(r["eps"])
    except (TypeError, ValueError):
        raise MalformedRecord(f"eps {r['eps']!r} is not a number") from None
    if not (r["operator_id"] and 0 < r["eps"] < 1):
        raise MalformedRecord("expected an operator id and 0 < eps < 1")
    verdict = r.get("verdict")
    if verdict not in VERDICTS:
        raise MalformedRecord(f"verdict {verdict!r} is not one of {VERDICTS}")
    if verdict == "error":
        # an end without a certificate is empty (audits before d831c3d wrote 0 and -1)
        for col, absent in (("lower", 0), ("upper", -1)):
            v = r[col]
            r[col] = None if v in ("", None) else _rank(v, col)
            if r[col] == absent:
                r[col] = None
            if r[col] is not None and r[col] < 1:
                raise MalformedRecord(f"{col} {v!r} is not a rank of a certificate")
        if r["lower"] is not None and r["upper"] is not None:
            raise MalformedRecord(f"an error cell with both ends ({r['lower']}, {r['upper']})")
    else:
        for col in ("lower", "upper"):
            v = r[col]
            r[col] = _rank(v, col)
        lo, up = r["lower"], r["upper"]
        if lo < 0 or up < 0 or (not (lo > up or _refuted(r)) if verdict == "unsound"
                                else (verdict == "resolved") != (lo == up) or lo > up):
            raise MalformedRecord(f"ends ({lo}, {up}) do not fit the verdict {verdict!r}")
    sec = r.get("seconds", "")
    if sec not in ("", None):
        try:
            r["seconds"] = float(sec)
        except (TypeError, ValueError):
            raise MalformedRecord(f"seconds {sec!r} is not a number") from None
        if not (r["seconds"] >= 0 and math.isfinite(r["seconds"])):
            raise MalformedRecord(f"seconds {sec!r} is not a finite number >= 0")
    r["diagnostics"] = read_diagnostics(r)
    for col in ("m", "n"):  # the shape: ints from the ledger, strings from brackets.csv
        if col in r:
            try:
                r[col] = count(r[col])
            except (TypeError, ValueError):
                raise MalformedRecord(f"{col} {r[col]!r} is not a size") from None
    for col, decode in _COLUMN_TYPES.items():
        v = r.get(col)
        if v is None or (isinstance(v, str) and v == ""):
            if col in r:
                r[col] = None
            continue
        try:
            r[col] = decode(v)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            why = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise MalformedRecord(f"{col}: not softrank's record ({why})"[:300]) from None
    for stage, check in _CELL_CHECKS:
        try:
            check(r)
        except (TypeError, ValueError) as exc:
            raise MalformedRecord(f"stage {stage!r}: {exc}"[:300]) from None
    return r


def _rank(v, col: str) -> int:
    """An end as an int: an int, or a string or float of an integer value (``"4"``,
    ``"4.0"``: a CSV rewritten by a tool that reads the column as floats)."""
    try:
        if isinstance(v, bool):
            raise ValueError(v)
        if isinstance(v, int):
            return v
        f = float(v)
        if not f.is_integer():
            raise ValueError(v)
        return int(f)
    except (TypeError, ValueError, OverflowError):
        raise MalformedRecord(f"{col} {v!r} is not an integer") from None


def refutations(row: Mapping[str, Any]) -> list[Refutation]:
    """The checked counterexamples to the cell's lower certificate that its stages recorded
    (``[]`` for a cell that none refuted)."""
    eps = float(row["eps"])
    return [rec.refuted[eps] for rec in read_stages(row).values() if eps in rec.refuted]


def _refuted(r: Mapping[str, Any]) -> bool:
    """The cell's lower certificate was refuted by a checked counterexample: its verdict is
    ``unsound`` whatever its ends (audits before the ``refuted`` stage records: the attack
    column says ``SUCCEEDED``)."""
    return bool(refutations(r)) or r.get("attack") == "SUCCEEDED"

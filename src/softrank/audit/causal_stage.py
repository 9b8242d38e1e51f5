"""The causal stage: beside every cell of a causal head, its bracket of the causal rank
(docs/theory/causal.md).

Run when the audit asks for a rank other than ``plain`` (``softrank audit --rank causal`` or
``--rank window:W``). For an operator whose ``A`` is causal (0 above the diagonal), the
stage brackets ``r^c_eps`` (or its windowed form) with
:func:`softrank.certifiers.causal.causal_bracket`, handing it the plain bracket's witness
(a rank-``k`` matrix within ``eps`` of a causal ``A`` is a causal witness); the reference
causal constructions and the user's constructions that declare ``causal = True`` run
beside it, and their ranks are recorded next to the bracket. Other operators get the
columns empty, with ``rank`` saying why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..certifiers.causal import UserCausalConstruction, causal_bracket, check_causal_operator
from ..errors import InvalidArgumentError
from .record import count, json_column, number, register_cell_check, register_column

__all__ = ["CausalStage", "RankConstructions"]


@dataclass(frozen=True)
class RankConstructions:
    """The causal constructions' checked ranks on one cell (the causal stage's
    ``rank_constructions`` column).

    Attributes
    ----------
    ranks : tuple of (str, int or None)
        ``(name, rank)`` in name order: the rank of its witness that the checker accepted
        at the cell's ``eps``, None where it declined or failed.
    """

    ranks: tuple = ()

    def as_dict(self) -> dict:
        """``{name: rank or None}``."""
        return dict(self.ranks)

    def encode(self) -> str:
        """The column: JSON ``{name: rank}`` (``null`` for None), keys sorted."""
        return json.dumps(self.as_dict(), sort_keys=True)

    @classmethod
    def decode(cls, text) -> "RankConstructions":
        """The column read back, for :func:`~softrank.audit.record.read_cell` (a
        ``ValueError`` or ``TypeError`` for a value that is not this stage's)."""
        d = json_column(text, cls)
        if isinstance(d, cls):
            return d
        if not isinstance(d, dict) or not all(
                v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0)
                for v in d.values()):
            raise ValueError(f"expected {{name: rank or null}}, got {text!r:.80}")
        return cls(tuple(sorted(d.items())))


def _check_ends(cell) -> None:
    """The causal bracket's ends fit its verdict, as the plain ends fit theirs."""
    lo, up, verdict = cell.get("rank_lower"), cell.get("rank_upper"), cell.get("rank_verdict")
    if verdict in ("resolved", "open") and (lo is None or up is None or lo > up
                                            or (verdict == "resolved") != (lo == up)):
        raise ValueError(f"rank_lower {lo!r} and rank_upper {up!r} do not fit the "
                         f"rank_verdict {verdict!r}")


register_column("rank_constructions", RankConstructions.decode, "causal")
register_column("rank_lower", count, "causal")
register_column("rank_upper", count, "causal")
register_column("rank_seconds", number, "causal")
register_cell_check("causal", _check_ends)


class CausalStage:
    """The audit stage that brackets the causal rank of every cell of a causal head.

    Parameters
    ----------
    rank : str
        ``causal`` or ``window:W`` (:func:`softrank.validation.parse_rank`).
    certifiers : (constructions, lower_tests), optional
        The audit's third-party methods, loaded; the constructions among them with
        ``causal = True`` run as causal constructions.
    effort : {"full", "fast"}
    cell_timeout : float, optional
        Seconds for the operator's causal brackets.

    The audit builds the stage once per worker process with its :attr:`parameters` from
    the :class:`~softrank.audit.config.AuditConfig`, validated there, and only when its
    ``rank`` is not ``plain``.

    Notes
    -----
    Columns: ``rank`` (the rank bracketed, or ``plain only: WHY`` for an operator that is
    not causal), ``rank_lower``, ``rank_upper``, ``rank_verdict``, ``rank_lower_method``,
    ``rank_upper_method``, ``rank_seconds``, ``rank_check`` (both ends' checks) and
    ``rank_constructions`` (JSON ``{name: rank}`` of the causal constructions whose witness
    the checker accepted at the cell's ``eps``; ``null`` where one declined or failed).
    """

    name = "causal"
    parameters = ("rank", "certifiers", "effort", "cell_timeout")
    columns = ("rank", "rank_lower", "rank_upper", "rank_verdict", "rank_lower_method",
               "rank_upper_method", "rank_seconds", "rank_check", "rank_constructions")

    def __init__(self, *, rank: str = "causal", certifiers=((), ()), effort: str = "full",
                 cell_timeout: float | None = None):
        self.rank = rank
        self.user = [UserCausalConstruction(c) for c in certifiers[0]
                     if getattr(c.obj, "causal", False) is True]
        self.effort = effort
        self.cell_timeout = cell_timeout

    def run(self, cells) -> list[dict]:
        op = cells.operator
        try:
            check_causal_operator(op, self.rank)
        except InvalidArgumentError:
            why = "plain only: not a causal head"
            return [{"rank": why} for _ in cells.eps]
        plain = [b.upper_witness for b in cells.brackets if b.upper_witness is not None]
        brs = causal_bracket(op, list(cells.eps), rank=self.rank, effort=self.effort,
                             time_limit=self.cell_timeout, constructions=self.user,
                             witnesses=plain)
        rows = []
        for br in brs:
            names = [r.name for r in br.diagnostics.methods
                     if r.origin in ("reference", "third-party")]
            ranks = {}
            for n in dict.fromkeys(names):
                r = br.diagnostics.record(n)
                ranks[n] = r.rank if r.status == "ok" else None
            chk = " ".join(f"{side}:{'pass' if rep.ok else 'FAIL'}"
                           for side, rep in sorted(br.checks.items()))
            rows.append({
                "rank": self.rank,
                "rank_lower": "" if br.lower is None else br.lower,
                "rank_upper": "" if br.upper is None else br.upper,
                "rank_verdict": br.verdict, "rank_lower_method": br.lower_method,
                "rank_upper_method": br.upper_method, "rank_seconds": round(br.seconds, 4),
                "rank_check": chk, "rank_constructions": RankConstructions(tuple(sorted(ranks.items()))).encode(),
            })
        return rows

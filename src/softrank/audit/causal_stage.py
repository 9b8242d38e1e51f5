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

from ..validation import check_effort
from ..certifiers.causal import UserCausalConstruction, causal_bracket, check_causal_operator
from ..certifiers.registry import load_certifiers
from ..errors import InvalidArgumentError

__all__ = ["CausalStage"]


class CausalStage:
    """The audit stage that brackets the causal rank of every cell of a causal head.

    Parameters
    ----------
    rank : str
        ``causal`` or ``window:W`` (:func:`softrank.operators.parse_rank`).
    certifiers : sequence of str
        The audit's third-party specs; the constructions among them with ``causal = True``
        run as causal constructions.
    effort : {"full", "fast"}
    time_limit : float, optional
        Seconds for the operator's causal brackets.

    Notes
    -----
    Columns: ``rank`` (the rank bracketed, or ``plain only: WHY`` for an operator that is
    not causal), ``rank_lower``, ``rank_upper``, ``rank_verdict``, ``rank_lower_method``,
    ``rank_upper_method``, ``rank_seconds``, ``rank_check`` (both ends' checks) and
    ``rank_constructions`` (JSON ``{name: rank}`` of the causal constructions whose witness
    the checker accepted at the cell's ``eps``; ``null`` where one declined or failed).
    """

    name = "causal"
    columns = ("rank", "rank_lower", "rank_upper", "rank_verdict", "rank_lower_method",
               "rank_upper_method", "rank_seconds", "rank_check", "rank_constructions")

    def __init__(self, rank: str, certifiers=(), effort: str = "full",
                 time_limit: float | None = None):
        from ..validation import parse_rank

        kind, _ = parse_rank(rank, "rank")
        if kind == "plain":
            raise InvalidArgumentError("rank: the causal stage brackets 'causal' or "
                                       "'window:W', got 'plain'")
        self.rank = rank
        self.certifiers = tuple(certifiers)
        self.effort = check_effort(effort)
        self.time_limit = time_limit

    def run(self, cells) -> list[dict]:
        op = cells.operator
        try:
            check_causal_operator(op, self.rank)
        except InvalidArgumentError:
            why = "plain only: not a causal head"
            return [{"rank": why} for _ in cells.eps]
        cons, _ = load_certifiers(self.certifiers)
        user = [UserCausalConstruction(c) for c in cons if getattr(c.obj, "causal", False) is True]
        plain = [b.upper_witness for b in cells.brackets if b.upper_witness is not None]
        brs = causal_bracket(op, list(cells.eps), rank=self.rank, effort=self.effort,
                             time_limit=self.time_limit, constructions=user, witnesses=plain)
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
                "rank_check": chk, "rank_constructions": json.dumps(ranks, sort_keys=True),
            })
        return rows

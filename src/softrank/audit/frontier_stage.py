"""The frontier stage: beside every cell, the band of its operator's rank-error frontier and
the constructions' curves on it (docs/theory/frontier.md).

Run when the audit asks for it (``softrank audit --frontier``). For each operator the stage
brackets ``e_k`` at the ranks of :data:`AUDIT_RANKS` up to ``min(m, N)`` with
:func:`softrank.certifiers.frontier.frontier`, reusing the bracket stage's brackets (their
certificates join the band's), and measures the truncated SVD, the reference constructions
and the audit's constructions that offer ``witness_at_rank`` at each of those ranks. The
report plots the bands per family with the curves and scores each construction; ``softrank
diff`` compares the scores of two audits.
"""

from __future__ import annotations

import json
import math

from ..attacks import attack
from ..certifiers.frontier import frontier

__all__ = ["FrontierStage", "AUDIT_RANKS", "encode_frontier", "decode_frontier"]

#: The ranks of an audit's bands (those up to ``min(m, N)``): a grid even on a log scale,
#: so that a band costs a fraction of every rank's (the command ``softrank frontier`` does
#: every rank of its range).
AUDIT_RANKS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def _num(v):
    """A float for JSON: ``"inf"`` for an infinite one (JSON has none), None kept."""
    if v is None:
        return None
    return "inf" if math.isinf(v) else v


def encode_frontier(fr, attacks: dict | None = None) -> str:
    """The ``frontier`` column: JSON of the band (``ranks``, ``lower``, ``upper``), the
    curves (``{name: {"errors": {rank: error}, "excess_error", "excess_rank"}}``), the
    seconds, any contradiction (``unsound`` ranks, ``below_band`` points) and the attacks
    on the band's certificates (``{"tried", "succeeded", "closest"}``: ``closest`` the
    least ``best_error / eps`` over them)."""
    return json.dumps({
        "attacks": attacks or {"tried": 0, "succeeded": [], "closest": None},
        "ranks": [p.rank for p in fr.points],
        "lower": [p.lower for p in fr.points],
        "upper": [_num(p.upper) for p in fr.points],
        "curves": {c.name: {"errors": {str(k): _num(e) for k, e in sorted(c.errors.items())},
                            "excess_error": _num(c.excess_error),
                            "excess_rank": _num(c.excess_rank)} for c in fr.curves},
        "seconds": round(fr.seconds, 3),
        "unsound": fr.unsound,
        "below_band": [list(b) for b in fr.below_band],
    }, sort_keys=True)


def decode_frontier(text: str) -> dict | None:
    """The column read back (``"inf"`` as ``float("inf")``, curve ranks as ints), or None
    for an empty cell."""
    if not text:
        return None
    d = json.loads(text)

    def num(v):
        return float("inf") if v == "inf" else v

    d["upper"] = [num(v) for v in d["upper"]]
    for c in d["curves"].values():
        c["errors"] = {int(k): num(v) for k, v in c["errors"].items()}
        c["excess_error"] = num(c["excess_error"])
        c["excess_rank"] = num(c["excess_rank"])
    return d


class FrontierStage:
    """The audit stage that writes each operator's frontier band beside its cells.

    Parameters
    ----------
    certifiers : (constructions, lower_tests), optional
        The audit's third-party methods, loaded; the constructions among them with
        ``witness_at_rank`` are drawn.
    effort : {"full", "fast"}
        :func:`softrank.certifiers.frontier.frontier`'s effort (``full``: the alternating
        l1 at each rank too).
    attacks : {"none", "quick", "standard", "hard"}
        The audit's attack effort: each certificate behind a lower end of rank ``>= 2`` is
        attacked at its own (largest) tolerance (:func:`softrank.attacks.attack`), a
        targeted search for a witness below the band (docs/theory/attacks.md).

    Notes
    -----
    Column ``frontier``: :func:`encode_frontier`'s JSON, the same on every cell of the
    operator. A band that crosses itself, a curve at or below its lower edge or a
    successful attack (each a wrong certificate) is kept in it, and the report and the
    command's exit status count it.
    """

    name = "frontier"
    parameters = ("certifiers", "effort", "attacks")
    columns = ("frontier",)

    def __init__(self, *, certifiers=((), ()), effort: str = "full", attacks: str = "none"):
        self.constructions = [c for c in certifiers[0] if c.offers_rank]
        self.effort = effort
        self.attacks = attacks

    def run(self, cells) -> list[dict]:
        op = cells.operator
        ks = [k for k in AUDIT_RANKS if k <= min(op.shape)]
        brs = [b for b in cells.brackets if b.bounded]
        fr = frontier(op, ranks=ks, brackets=brs, effort=self.effort,
                      constructions=self.constructions)
        return [{"frontier": encode_frontier(fr, self._attack(op, fr))} for _ in cells.eps]

    def _attack(self, op, fr) -> dict:
        """Attack every certificate behind a lower end (rank ``>= 2``, tolerance in
        ``(0, 1)``) at its tolerance; ``succeeded`` lists ``[rank, eps]`` of the refuted."""
        tried, won, closest = 0, [], None
        if self.attacks == "none":
            return {"tried": 0, "succeeded": [], "closest": None}
        for r, cert in sorted(fr.certificates.items()):
            if r < 2 or not 0 < cert.eps < 1:
                continue
            res = attack(op.A, cert.eps, cert, effort=self.attacks, operator=op)
            tried += 1
            if res.succeeded:
                won.append([r, cert.eps])
            if math.isfinite(res.best_error):
                q = res.best_error / cert.eps
                closest = q if closest is None else min(closest, q)
        return {"tried": tried, "succeeded": won,
                "closest": None if closest is None else round(closest, 6)}

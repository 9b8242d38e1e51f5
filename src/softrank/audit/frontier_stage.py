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
from dataclasses import dataclass

from ..attacks import attack
from ..certifiers.frontier import frontier
from .record import Refutation, json_column, register_column, save_counterexample

__all__ = ["FrontierStage", "FrontierBand", "FrontierCurve", "AUDIT_RANKS"]

#: The ranks of an audit's bands (those up to ``min(m, N)``): a grid even on a log scale,
#: so that a band costs a fraction of every rank's (the command ``softrank frontier`` does
#: every rank of its range).
AUDIT_RANKS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def _num(v):
    """A float for JSON: ``"inf"`` for an infinite one (JSON has none), None kept."""
    if v is None:
        return None
    return "inf" if math.isinf(v) else v


def _float(v):
    """:func:`_num` read back."""
    if v is None:
        return None
    return float("inf") if v == "inf" else float(v)


@dataclass(frozen=True)
class FrontierCurve:
    """One construction's checked errors on an operator's band (docs/theory/frontier.md).

    Attributes
    ----------
    errors : dict
        ``{rank: error}`` (``inf`` where it gave nothing within its rank).
    excess_error, excess_rank : float or None
        Its two scores on this operator (upper bounds of the true figures; ``inf`` allowed).
    """

    errors: dict
    excess_error: float | None
    excess_rank: float | None


@dataclass(frozen=True)
class FrontierBand:
    """The frontier stage's result on one operator, the ``frontier`` column of its cells.

    Attributes
    ----------
    ranks, lower, upper : tuple
        The band ``lower < e_k <= upper`` at each rank (``upper`` may be ``inf``).
    curves : dict
        ``{construction: FrontierCurve}``.
    seconds : float
        The band's time.
    unsound : tuple of int
        Ranks where the band crosses itself (``lower >= upper``).
    below_band : tuple of (str, int)
        ``(construction, rank)`` where a checked curve is at or below the lower end.
    attacks_tried : int
        Attacks on the certificates behind the lower ends.
    attacks_closest : float or None
        The least ``best_error / eps`` over them.
    attacks_succeeded : tuple of (int, float)
        ``(rank, eps)`` of the certificates an attack refuted.

    The last three facts and the first two are contradictions: the stage also refutes each
    through the pipeline (the operator's cells become ``unsound``); the band keeps them all,
    so that the report can name every one.
    """

    ranks: tuple
    lower: tuple
    upper: tuple
    curves: dict
    seconds: float
    unsound: tuple = ()
    below_band: tuple = ()
    attacks_tried: int = 0
    attacks_closest: float | None = None
    attacks_succeeded: tuple = ()

    @classmethod
    def of(cls, fr, tried: int = 0, closest: float | None = None,
           succeeded=()) -> "FrontierBand":
        """The band of a :class:`softrank.certifiers.frontier.Frontier` and its attacks."""
        return cls(ranks=tuple(p.rank for p in fr.points), lower=tuple(p.lower for p in fr.points),
                   upper=tuple(p.upper for p in fr.points),
                   curves={c.name: FrontierCurve(dict(sorted(c.errors.items())), c.excess_error,
                                                 c.excess_rank) for c in fr.curves},
                   seconds=round(fr.seconds, 3), unsound=tuple(fr.unsound),
                   below_band=tuple(tuple(b) for b in fr.below_band), attacks_tried=tried,
                   attacks_closest=closest, attacks_succeeded=tuple(succeeded))

    def encode(self) -> str:
        """The ``frontier`` column: JSON of the band (``ranks``, ``lower``, ``upper``), the
        curves (``{name: {"errors": {rank: error}, "excess_error", "excess_rank"}}``), the
        seconds, the contradictions (``unsound`` ranks, ``below_band`` points) and the
        attacks (``{"tried", "closest"}``); ``inf`` as ``"inf"``."""
        return json.dumps({
            "attacks": {"tried": self.attacks_tried, "closest": self.attacks_closest,
                        "succeeded": [list(x) for x in self.attacks_succeeded]},
            "ranks": list(self.ranks), "lower": list(self.lower),
            "upper": [_num(v) for v in self.upper],
            "curves": {n: {"errors": {str(k): _num(e) for k, e in sorted(c.errors.items())},
                           "excess_error": _num(c.excess_error),
                           "excess_rank": _num(c.excess_rank)} for n, c in self.curves.items()},
            "seconds": self.seconds, "unsound": list(self.unsound),
            "below_band": [list(b) for b in self.below_band],
        }, sort_keys=True)

    @classmethod
    def decode(cls, text) -> "FrontierBand":
        """The band of a ``frontier`` column, for :func:`~softrank.audit.record.read_cell`
        (``ValueError``, ``KeyError`` or ``TypeError`` for one that is not this stage's)."""
        d = json_column(text, cls)
        if isinstance(d, cls):
            return d
        att = d.get("attacks") or {}
        band = cls(ranks=tuple(int(k) for k in d["ranks"]),
                   lower=tuple(float(v) for v in d["lower"]),
                   upper=tuple(_float(v) for v in d["upper"]),
                   curves={n: FrontierCurve({int(k): _float(e) for k, e in c["errors"].items()},
                                            _float(c["excess_error"]), _float(c["excess_rank"]))
                           for n, c in d["curves"].items()},
                   seconds=float(d["seconds"]), unsound=tuple(int(k) for k in d["unsound"]),
                   below_band=tuple((str(n), int(k)) for n, k in d["below_band"]),
                   attacks_tried=int(att.get("tried", 0)),
                   attacks_closest=_float(att.get("closest")),
                   attacks_succeeded=tuple((int(r), float(e))
                                           for r, e in att.get("succeeded", ())))
        band._check()
        return band

    def _check(self) -> None:
        """A band as the stage writes one: ranks increasing from 1, an end per rank, ends
        ``>= 0``, and the ranks where it crosses itself listed in ``unsound``.

        Raises
        ------
        ValueError
            Naming what does not hold."""
        n = len(self.ranks)
        if not (len(self.lower) == len(self.upper) == n and n > 0):
            raise ValueError(f"{n} ranks, {len(self.lower)} lower and {len(self.upper)} upper "
                             "ends")
        if self.ranks[0] < 1 or any(a >= b for a, b in zip(self.ranks, self.ranks[1:])):
            raise ValueError(f"ranks {list(self.ranks)[:8]} are not increasing from 1")
        if not all(x >= 0 for x in self.lower + self.upper):
            raise ValueError("an end below 0")
        crossing = [k for k, lo, up in zip(self.ranks, self.lower, self.upper) if lo >= up]
        if sorted(self.unsound) != crossing:
            raise ValueError(f"the band crosses itself at ranks {crossing}, its record says "
                             f"{list(self.unsound)}")


register_column("frontier", FrontierBand.decode, "frontier")


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
    Column ``frontier``: the operator's :class:`FrontierBand` (:meth:`FrontierBand.encode`),
    the same on every cell. A band that crosses itself, a curve at or below its lower edge
    or a successful attack is a wrong certificate: the stage refutes it through the
    pipeline (:meth:`~softrank.audit.pipeline.OperatorCells.refute`, on every cell of the
    operator, which become ``unsound``), and the band keeps the first two as facts of it.
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
        tried, closest, refuted, won = self._attack(cells, fr)
        # a band that crosses itself or a checked curve at or below the lower end: a witness
        # of rank k within the error that the certificate at rank k says no rank-k matrix has
        lower = {p.rank: p.lower for p in fr.points}
        refuted += [Refutation(self.name, k + 1, k, None,
                               f"frontier: e_{k} > {lower[k]:.6g} (the band crosses itself)")
                    for k in fr.unsound]
        refuted += [Refutation(self.name, k + 1, k, None,
                               f"frontier: e_{k} > {lower[k]:.6g} ({name} is within it)")
                    for name, k in fr.below_band]
        for ref in refuted:  # the band is every cell's: each is refuted
            for i in range(len(cells.eps)):
                cells.refute(i, ref)
        band = FrontierBand.of(fr, tried, closest, won).encode()
        return [{"frontier": band} for _ in cells.eps]

    def _attack(self, cells, fr) -> tuple[int, float | None, list, list]:
        """Attack every certificate behind a lower end (rank ``>= 2``, tolerance in
        ``(0, 1)``) at its tolerance: ``(tried, least best_error / eps, refutations,
        [(rank, eps)] of the refuted)``; a
        success is saved under ``OUT/counterexamples/OPERATOR-frontier-rRANK/`` when the
        audit has an output directory."""
        tried, closest, refuted, won = 0, None, [], []
        if self.attacks == "none":
            return 0, None, [], []
        op = cells.operator
        for r, cert in sorted(fr.certificates.items()):
            if r < 2 or not 0 < cert.eps < 1:
                continue
            res = attack(op.A, cert.eps, cert, effort=self.attacks, operator=op)
            tried += 1
            if res.succeeded:
                saved = save_counterexample(cells.out, f"{op.operator_id}-frontier-r{r}",
                                            cert, res.witness, op.A)
                refuted.append(Refutation(self.name, cert.rank, res.witness.rank, saved,
                                          f"frontier: e_{r - 1} > {cert.eps:.6g}"))
                won.append((r, cert.eps))
            if math.isfinite(res.best_error):
                q = res.best_error / cert.eps
                closest = q if closest is None else min(closest, q)
        return tried, None if closest is None else round(closest, 6), refuted, won

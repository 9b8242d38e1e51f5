"""A bracket's value (:class:`~softrank.certifiers.result.Bracket`) and how the brackets of one operator agree across
tolerances (:func:`~softrank.certifiers.result.monotone`: ``r_eps`` is non-increasing in ``eps``, so a certificate carries
from one tolerance to another, re-checked before it is adopted)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..checker import check
from .interface import Diagnostics, Verdict

__all__ = ["Bracket", "monotone", "set_verdict"]


@dataclass
class Bracket:
    """A certified bracket at one tolerance.

    Attributes
    ----------
    eps : float
        Tolerance (max-row-l1 error, dimensionless: rows of ``A`` have l1 norm 1).
    lower, upper : int or None
        ``lower <= r_eps(A) <= upper``; each backed by its checked certificate, and None
        when there is none (then the verdict is ``error``: no bracket, and
        ``diagnostics.error`` says why).
    lower_certificate, upper_witness :
        The certificates (see :mod:`softrank.checker.certificates`).
    lower_method, upper_method : str
        Which certificate family / construction won.
    verdict : {"resolved", "open", "unsound", "error"}
        ``resolved`` (lower == upper), ``open`` (lower < upper), ``unsound`` (lower > upper:
        a bug), ``error`` (no certified end could be produced).
    seconds : float
        Wall time spent on this tolerance (shared work is charged to the first one).
    cut_short : bool
        (Property.) The time limit passed before every method ran; both ends are still
        checked certificates.
    checks : dict
        The checker's reports for the two reported certificates.
    diagnostics : Diagnostics
        Every method's outcome (:class:`~softrank.certifiers.interface.MethodRecord`: ok,
        declined, skipped, failed or rejected, its rank and time), checker disagreements,
        ends carried from other tolerances, and the error of an ``error`` cell.
    rho : float
        Validated mode: the enclosure radius; the lower certificate holds at ``eps + rho``
        and the upper witness at ``eps - rho`` for the enclosure's midpoint, so the bracket
        holds for the exact softmax of the exact logits. 0 otherwise.
    rank : str
        Which rank the ends bound: ``plain`` (``r_eps``, :func:`~softrank.certifiers.bracket.bracket`), ``causal`` or
        ``window:W`` (:func:`softrank.certifiers.causal.causal_bracket`).
    """

    eps: float
    lower: int | None
    upper: int | None
    lower_certificate: object = field(default=None, repr=False)
    upper_witness: object = field(default=None, repr=False)
    lower_method: str = ""
    upper_method: str = ""
    verdict: Verdict = "open"
    seconds: float = 0.0
    checks: dict = field(default_factory=dict, repr=False)
    diagnostics: Diagnostics = field(default_factory=Diagnostics, repr=False)
    rho: float = 0.0
    rank: str = "plain"

    @property
    def resolved(self) -> bool:
        return self.verdict == "resolved"

    @property
    def bounded(self) -> bool:
        """The ends are a bracket: verdict ``resolved`` or ``open`` (an ``error`` has no
        ends; an ``unsound`` one has ends that contradict each other)."""
        return self.verdict in ("resolved", "open")

    @classmethod
    def failed(cls, eps: float, error: str) -> "Bracket":
        """The ``error`` bracket at ``eps``: no ends, ``diagnostics.error`` saying why."""
        return cls(eps=float(eps), lower=None, upper=None, verdict="error",
                   diagnostics=Diagnostics(error=error))

    @property
    def cut_short(self) -> bool:
        """The time limit passed before every method ran (``diagnostics.cut_short``): the
        ends are checked, but searches were skipped."""
        return self.diagnostics.cut_short

    def to_dict(self) -> dict:
        return {
            "eps": self.eps,
            "lower": self.lower,
            "upper": self.upper,
            "lower_method": self.lower_method,
            "upper_method": self.upper_method,
            "verdict": self.verdict,
            "seconds": round(self.seconds, 4),
            "checks": {k: v.summary() for k, v in self.checks.items()},
            "diagnostics": self.diagnostics.to_dict(),
            "rho": self.rho,
            "cut_short": self.cut_short,
            "rank": self.rank,
        }


def set_verdict(br: Bracket) -> None:
    """Set ``br.verdict`` from its checked ends (``error`` without one, with a reason in
    ``diagnostics.error``; ``unsound``, ``resolved`` or ``open``)."""
    if br.lower_certificate is None or br.upper_witness is None:
        br.verdict = "error"
        if not br.diagnostics.error:  # say why, never an error without a reason
            side = "lower certificate" if br.lower_certificate is None else "upper witness"
            br.diagnostics.error = (
                f"no checked {side} at eps {br.eps!r}"
                + (": no row of A sums to more than eps by a provable margin, so even "
                   "r_eps >= 1 cannot be certified (rows may sum to 1 only within 1e-9)"
                   if br.lower_certificate is None else ""))
    elif br.lower > br.upper:
        br.verdict = "unsound"
    elif br.lower == br.upper:
        br.verdict = "resolved"
    else:
        br.verdict = "open"


def _restamp(cert, eps: float, method: str):
    """``cert`` issued at ``eps`` under ``method``; a block or causal lower certificate's
    inner one is re-stamped with it (the checker asks both to share ``eps``)."""
    inner = getattr(cert, "inner", None)
    extra = {} if inner is None else {"inner": dataclasses.replace(inner, eps=eps)}
    return dataclasses.replace(cert, eps=eps, method=method, **extra)


def monotone(brs: list[Bracket], A: np.ndarray, interval: bool, verdict=None) -> None:
    """Make brackets monotone in ``eps`` (``brs`` in increasing ``eps``), in place.

    ``r_eps`` is non-increasing in ``eps``, and so is the causal rank: a lower certificate
    issued at ``eps2`` also proves its rank at every ``eps1 < eps2`` (every condition only
    gets easier), and an upper witness at ``eps1`` holds at ``eps2 > eps1``. Each
    certificate carried over is re-stamped with its new tolerance and re-checked by the full
    checker before it is adopted; ``error`` brackets take nothing. ``verdict(br)`` sets each
    bracket's verdict afterwards (default: that of ``r_eps``;
    :func:`softrank.certifiers.causal.causal_bracket` passes its own, for which a lower end
    of 0 needs no certificate).
    """
    for i, small in enumerate(brs):
        for big in brs[i + 1:]:
            # lower side: carry a larger tolerance's certificate down
            c = big.lower_certificate
            if c is not None and not small.diagnostics.error and small.lower is not None and \
                    c.rank > small.lower:
                moved = _restamp(c, small.eps + small.rho, f"{c.method} (from eps {big.eps:g})")
                rep = check(A, moved, interval=interval)
                if rep.ok:
                    small.lower_certificate, small.lower = moved, moved.rank
                    small.lower_method, small.checks["lower"] = moved.method, rep
                    small.diagnostics.carried["lower"] = big.eps
                    small.diagnostics.reported["lower"] = big.diagnostics.reported.get("lower")
            # upper side: carry a smaller tolerance's witness up
            w = small.upper_witness
            if w is not None and not big.diagnostics.error and (
                    big.upper_witness is None or w.rank < big.upper):
                moved = _restamp(w, big.eps - big.rho, f"{w.method} (from eps {small.eps:g})")
                rep = check(A, moved, interval=interval)
                if rep.ok:
                    big.upper_witness, big.upper = moved, moved.rank
                    big.upper_method, big.checks["upper"] = moved.method, rep
                    big.diagnostics.carried["upper"] = small.eps
                    big.diagnostics.reported["upper"] = small.diagnostics.reported.get("upper")
    for br in brs:
        (verdict or set_verdict)(br)

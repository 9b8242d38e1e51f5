"""The tolerances at which the checker accepts a certificate whose arrays are fixed
(docs/theory/frontier.md): the largest for a lower certificate (:func:`~softrank.certifiers.tolerances.largest_eps`), the
least for a witness (:func:`~softrank.certifiers.tolerances.least_error`, its checked max-row-l1 error). Each is found on the
float64 checker's own margin and then confirmed by the full check, so that the answer is a
tolerance the checker accepted, never an estimate; the frontier
(:mod:`softrank.certifiers.frontier`) runs the two steps apart, to confirm only the ends it
reports.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..checker import UpperWitness, check, check_float64

__all__ = ["largest_eps", "least_error", "float64_largest_eps", "float64_error",
           "confirm_largest", "confirm_least", "RTOL", "MAX_STEPS"]

#: Relative width at which :func:`~softrank.certifiers.tolerances.largest_eps` and :func:`~softrank.certifiers.tolerances.least_error` stop refining.
RTOL = 1e-12
#: :func:`~softrank.certifiers.tolerances.largest_eps`: steps of its search at most (a bisection needs ~45 for RTOL).
MAX_STEPS = 100


def _accepted(A: np.ndarray, cert, eps: float, interval: bool) -> bool:
    return check(A, dataclasses.replace(cert, eps=float(eps)), interval=interval).ok


def float64_largest_eps(A: np.ndarray, cert, norm: float | None = None) -> float | None:
    """The largest tolerance the float64 checker accepts for ``cert`` (to :data:`RTOL`), or
    None if it rejects ``cert`` at its own ``eps`` (see :func:`~softrank.certifiers.tolerances.largest_eps`); ``norm`` is
    ``||A||_inf`` when the caller has it."""
    def margin(e):
        return check_float64(A, dataclasses.replace(cert, eps=float(e))).margin

    lo = float(cert.eps)
    f_lo = margin(lo)
    if not f_lo > 0:
        return None
    # no lower certificate holds at ||A||_inf (B = 0 is within it): a finite upper end
    if norm is None:
        norm = float(np.abs(A).sum(axis=1).max())
    hi = norm * (1 + 1e-9) + 1e-300
    f_hi = margin(hi)
    if f_hi > 0:  # a certificate valid where B = 0 fits: never trusted
        return None
    side = 0
    for _ in range(MAX_STEPS):
        if hi - lo <= RTOL * hi:
            break
        x = 0.5 * (lo + hi)
        if np.isfinite(f_hi) and f_lo > f_hi:  # regula falsi where the margins allow it
            xf = lo + (hi - lo) * f_lo / (f_lo - f_hi)
            if lo < xf < hi:
                x = xf
        fx = margin(x)
        if fx > 0:
            lo, f_lo = x, fx
            if side == 1 and np.isfinite(f_hi):  # Illinois: the stale end's weight halved
                f_hi *= 0.5
            side = 1
        else:
            hi, f_hi = x, fx
            if side == -1:
                f_lo *= 0.5
            side = -1
    return lo


def confirm_largest(A: np.ndarray, cert, e: float, floor: float, interval: bool):
    """``cert`` at the largest of ``e``, then smaller tolerances down to ``floor``, that the
    full checker accepts; None if none is."""
    for i in range(60):
        if _accepted(A, cert, e, interval):
            return e, dataclasses.replace(cert, eps=e)
        if e <= floor:
            return None
        e = max(floor, e - (e - floor) * 2.0 ** (i - 40) - e * 2.0 ** (i - 50))
    return None


def largest_eps(A: np.ndarray, cert, *, interval: bool = True):
    """The largest tolerance at which the checker accepts the lower certificate ``cert``
    (its arrays unchanged, ``eps`` moved), and the certificate stamped with it.

    Every lower certificate's condition is monotone in ``eps`` (valid at ``eps``, valid at any
    smaller one: docs/theory/frontier.md), so the accepted tolerances are an interval
    ``(0, eps*)``. A regula falsi (Illinois) on the float64 checker's margin, kept inside a
    bracket ``[lo, hi]`` whose ``lo`` the checker accepts, narrows it to a relative width of
    :data:`RTOL`; the full check (both arithmetics with ``interval``) then confirms ``lo``,
    and where it does not, ``lo`` is moved down until it does. The answer is a tolerance
    the checker accepted, never an estimate.

    Parameters
    ----------
    A : (m, N) float64 ndarray
    cert : lower certificate
        Accepted at its own ``cert.eps``.
    interval : bool
        Confirm with the interval cross-check too (default True).

    Returns
    -------
    (float, certificate) or None
        None if the checker rejects ``cert`` at its own ``eps``.
    """
    A = np.asarray(A, dtype=np.float64)
    e = float64_largest_eps(A, cert)
    if e is None:
        return None
    return confirm_largest(A, cert, e, float(cert.eps), interval)


def float64_error(A: np.ndarray, witness: UpperWitness) -> float | None:
    """The float64 checker's bound of ``||A - U W||_inf`` (independent of ``eps``)."""
    res = check_float64(A, witness)
    if not np.isfinite(res.margin):
        return None
    b = float(witness.eps - res.margin)
    return b if np.isfinite(b) and b >= 0 else None


def confirm_least(A: np.ndarray, witness: UpperWitness, b: float, interval: bool):
    """``witness`` at the least of ``b`` and relative steps above it (to ``2 b``) that the
    full checker accepts; None if none is."""
    e = b
    for i in range(60):
        if _accepted(A, witness, e, interval):
            return e, dataclasses.replace(witness, eps=e)
        e = b * (1 + 2.0 ** (i - 45)) + 2.0 ** (i - 1074)
        if e > 2 * b + 1e-300:
            break
    return None


def least_error(A: np.ndarray, witness: UpperWitness, *, interval: bool = True):
    """The least tolerance at which the checker accepts ``witness`` (its checked max-row-l1
    error), and the witness stamped with it.

    The float64 check bounds ``||A - U W||_inf`` by a value ``b`` independent of ``eps``
    (``eps - margin``); ``b`` is accepted by that check and is confirmed by the full one,
    moved up by relative steps where the interval cross-check's own bound is larger.

    Returns
    -------
    (float, UpperWitness) or None
        None if the checker cannot bound the error (non-finite products) or rejects every
        tolerance up to twice the bound.
    """
    A = np.asarray(A, dtype=np.float64)
    b = float64_error(A, witness)
    return None if b is None else confirm_least(A, witness, b, interval)

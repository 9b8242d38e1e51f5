"""Argument validation shared by every public function of softrank.

Each check returns the value in its canonical Python type or raises
:class:`~softrank.errors.InvalidArgumentError` with a one-line message that names the
argument, the value given and what was expected (``"n: expected an integer >= 2, got 1.5"``).
Booleans are never accepted as numbers. Nothing is repaired: a value of the wrong type or out
of range is refused, never clipped or rounded.

The checker (:mod:`softrank.checker`) does not use this module: it imports nothing from
softrank outside itself and :mod:`softrank.errors`, so that it can be read on its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InvalidArgumentError

__all__ = ["check_int", "check_real", "check_positive", "check_fraction", "check_indices",
           "check_choice", "validate_eps", "check_effort", "EFFORTS", "parse_rank", "MAX_WINDOW",
           "check_out_dir", "AUDIT_FILES"]


def _range(lo: Any, hi: Any, lo_open: bool = False, hi_open: bool = False) -> str:
    if lo is None and hi is None:
        return ""
    if hi is None:
        return f" {'>' if lo_open else '>='} {lo}"
    if lo is None:
        return f" {'<' if hi_open else '<='} {hi}"
    return f" in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"


def check_int(value: Any, arg: str, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an ``int`` in ``[lo, hi]`` (either end optional).

    Python and numpy integers are accepted; ``bool``, floats (even integral ones such as
    ``2.0``) and strings are refused.

    Raises
    ------
    InvalidArgumentError
        If ``value`` is not an integer or lies outside ``[lo, hi]``.
    """
    if isinstance(value, bool) or not isinstance(value, Integral) or (
            lo is not None and value < lo) or (hi is not None and value > hi):
        raise InvalidArgumentError(f"{arg}: expected an integer{_range(lo, hi)}, got {value!r}")
    return int(value)


def check_real(value: Any, arg: str, lo: float | None = None, hi: float | None = None, *,
               lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` as a finite ``float`` between ``lo`` and ``hi``.

    Parameters
    ----------
    value : int or float (Python or numpy)
    arg : str
        The argument's name, quoted in the message.
    lo, hi : float, optional
        Bounds; ``lo_open`` / ``hi_open`` make them strict.

    Raises
    ------
    InvalidArgumentError
        If ``value`` is not a real number (``bool`` and complex numbers are refused), is NaN
        or infinite, or lies outside the range.
    """
    ok = not isinstance(value, bool) and isinstance(value, Real)
    try:
        f = float(value) if ok else math.nan
    except OverflowError:  # an int beyond the float range (10**400): not finite
        f = math.nan
    if ok and math.isfinite(f):
        ok = ((lo is None or (f > lo if lo_open else f >= lo))
              and (hi is None or (f < hi if hi_open else f <= hi)))
    else:
        ok = False
    if not ok:
        raise InvalidArgumentError(f"{arg}: expected a finite number"
                                   f"{_range(lo, hi, lo_open, hi_open)}, got {value!r}")
    return f


def check_positive(value: Any, arg: str) -> float:
    """``value`` as a finite ``float > 0`` (see :func:`check_real`)."""
    return check_real(value, arg, 0, lo_open=True)


def check_fraction(value: Any, arg: str) -> float:
    """``value`` as a ``float`` in the open interval ``(0, 1)`` (see :func:`check_real`)."""
    return check_real(value, arg, 0, 1, lo_open=True, hi_open=True)


def check_indices(values: Iterable[Any] | None, arg: str, bound: int) -> list[int]:
    """Distinct integers in ``[0, bound)``, in the order given; ``None`` means all of them.

    Raises
    ------
    InvalidArgumentError
        If an entry is not an integer in ``[0, bound)`` or is given twice.
    """
    if values is None:
        return list(range(bound))
    out: list[int] = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, Integral) or not 0 <= v < bound:
            raise InvalidArgumentError(f"{arg}: expected integers in [0, {bound}), got {v!r}")
        if int(v) in out:
            raise InvalidArgumentError(f"{arg}: {int(v)} is given twice")
        out.append(int(v))
    return out


def check_choice(value: Any, arg: str, choices: Iterable[Any]) -> Any:
    """``value`` if it is one of ``choices``.

    Raises
    ------
    InvalidArgumentError
        Otherwise, listing the choices.
    """
    choices = tuple(choices)
    try:
        known = not isinstance(value, bool) and value in choices
    except (TypeError, ValueError):  # e.g. an array, whose == is elementwise
        known = False
    if not known:
        raise InvalidArgumentError(f"{arg}: expected one of "
                                   f"{', '.join(repr(c) for c in choices)}, got {value!r}")
    return value


#: The engine's efforts: ``full`` runs every built-in method; ``fast`` skips the late
#: searches (subspace-rows, subspace-climb, subspace-blocks, trust-region,
#: alternating-l1-smooth, alternating-l1-anneal), which take most of the bracket time and make the ends that the
#: other methods do not reach (README, "Effort": the trade measured on the default panel).
EFFORTS = ("full", "fast")


def _is_scalar_eps(eps) -> bool:
    return isinstance(eps, (int, float, np.integer, np.floating)) or (
        isinstance(eps, np.ndarray) and eps.ndim == 0)


#: Smallest tolerance accepted: the least normal float64. Below it the checker's rounding
#: bounds (which add subnormal-scale terms) exceed eps even for the witness ``A`` itself.
_EPS_MIN = float(np.finfo(np.float64).tiny)


def validate_eps(eps, arg: str = "eps") -> list[float]:
    """Tolerances as a list of floats in ``(0, 1)``.

    ``eps = 0`` asks for the exact rank, which floating-point witnesses cannot certify (a
    rank-k witness is checked with a strictly positive rounding bound), and ``eps >= 1``
    gives ``r_eps = 0`` on a row-stochastic ``A``; both are rejected, and so are a subnormal
    tolerance (below ``2.2e-308``, the checker's rounding floor) and a tolerance given twice.

    Parameters
    ----------
    eps : float or sequence of float
    arg : str, default "eps"
        The argument named in the messages (the CLI passes ``"--eps"``).

    Raises
    ------
    InvalidArgumentError
        Naming ``arg`` and the offending value.
    """
    if _is_scalar_eps(eps):
        vals = [eps]
    elif isinstance(eps, (list, tuple)) or (isinstance(eps, np.ndarray) and eps.ndim == 1):
        vals = list(eps)
    else:
        raise InvalidArgumentError(f"{arg}: expected a number or a sequence of numbers, got {eps!r}")
    if not vals:
        raise InvalidArgumentError(f"{arg}: expected at least one tolerance, got none")
    out = []
    for e in vals:
        if isinstance(e, bool) or not _is_scalar_eps(e):
            raise InvalidArgumentError(f"{arg}: expected a number, got {e!r}")
        f = float(e)
        if not np.isfinite(f) or f <= 0 or f >= 1:
            raise InvalidArgumentError(
                f"{arg}: expected a tolerance with 0 < eps < 1 (r_eps = 0 for eps >= 1 on a "
                f"row-stochastic A; eps = 0 is the exact rank), got {f!r}"
            )
        if f < _EPS_MIN:
            raise InvalidArgumentError(
                f"{arg}: expected a normal float64 >= {_EPS_MIN!r} (a subnormal tolerance is "
                f"below the checker's rounding floor, even for A itself), got {f!r}")
        if f in out:
            raise InvalidArgumentError(f"{arg}: tolerances repeat, {f!r} is given twice")
        out.append(f)
    return out



def check_effort(effort) -> str:
    """``effort`` if it is one of :data:`EFFORTS`; else :class:`InvalidArgumentError`."""
    if not (isinstance(effort, str) and effort in EFFORTS):
        raise InvalidArgumentError(f"effort must be one of {', '.join(map(repr, EFFORTS))}, "
                                   f"got {effort!r}")
    return effort


#: The largest band width ``W`` of a rank ``window:W`` (a band wider than the sequence copies
#: every causal key, as one of its width does).
MAX_WINDOW = 10**9


def parse_rank(rank: Any, arg: str = "rank") -> tuple[str, int | None]:
    """``("plain", None)``, ``("causal", None)`` or ``("window", W)`` from ``plain``,
    ``causal`` or ``window:W`` (``W >= 1``); else :class:`~softrank.errors.InvalidArgumentError` naming ``arg``."""
    if rank in ("plain", "causal"):
        return rank, None
    if isinstance(rank, str) and rank.startswith("window:"):
        w = rank[len("window:"):]
        # W as written by str(int): no sign, no leading zero, at most 10 digits
        if w.isascii() and w.isdigit() and w == str(int(w)) and 1 <= int(w) <= MAX_WINDOW:
            return "window", int(w)
    raise InvalidArgumentError(f"{arg}: expected 'plain', 'causal' or 'window:W' with an "
                               f"integer 1 <= W <= {MAX_WINDOW} written without leading zeros, "
                               f"got {rank!r}")


#: The files that mark a directory as a softrank audit's (its ledger and its lock:
#: :data:`softrank.harness.ledger.LEDGER_NAME`, :data:`softrank.harness.lock.LOCK_NAME`).
AUDIT_FILES = ("ledger.sqlite", "softrank.lock")


def check_out_dir(out, arg: str = "--out") -> Path:
    """Refuse an output directory that holds files but no softrank audit: an audit writes
    ``report.md``, ``summary.json``, ``brackets.csv`` and plots there, and must not replace
    what a user put there. A new or empty directory, or one with an audit's ledger or lock
    file (:data:`AUDIT_FILES`), is fine.

    Parameters
    ----------
    out : path
        The output directory (it need not exist).
    arg : str
        The argument named in the message.

    Returns
    -------
    pathlib.Path
        ``out``.

    Raises
    ------
    InvalidArgumentError
        Naming what the directory holds, or an empty path.
    """
    if not str(out).strip():  # Path("") is the current directory: never meant
        raise InvalidArgumentError(f"{arg}: expected a directory path, got {str(out)!r}")
    out = Path(out)
    if not out.is_dir() or any((out / name).exists() for name in AUDIT_FILES):
        return out
    present = sorted(p.name for p in out.iterdir())
    if present:
        raise InvalidArgumentError(
            f"{arg}: {str(out)!r} is not empty and holds no softrank audit ("
            f"{', '.join(present[:5])}{', ...' if len(present) > 5 else ''}); choose a new or "
            "empty directory: an audit would replace report.md, summary.json and brackets.csv")
    return out

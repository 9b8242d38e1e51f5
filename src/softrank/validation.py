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
from typing import Any

from .errors import InvalidArgumentError

__all__ = ["check_int", "check_real", "check_positive", "check_fraction", "check_indices",
           "check_choice"]


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

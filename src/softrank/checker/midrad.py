"""Midpoint-radius interval matrices on BLAS (docs/theory/checker.md#midpoint-radius-on-blas).

The interval check's back end for large operators. A *ball matrix* ``(M, R)`` stands for
every real matrix ``X`` with ``|X - M| <= R`` entrywise; ``M`` and ``R >= 0`` are float64
arrays (``R = None``: radius 0, a float matrix taken exactly). Each operation returns a ball
that encloses every exact result of its inputs' points, computed in IEEE-754 binary64 with
rounding to nearest: the midpoint by one BLAS call, the radius from a priori bounds of that
call's rounding error [Rump12], with every bound itself rounded upwards. Nothing here
switches the processor's rounding mode, so the BLAS threads need no special care.

The model (each fact is cited where it is used):

* ``u = 2^-53``, ``eta = 2^-1074`` (the smallest subnormal); ``gamma_n = n u / (1 - n u)``.
* (R1) One rounding to nearest of a real ``x`` gives ``y`` with ``|y - x| <= u |y|``, and
  ``x <= nextafter(y, +inf)``, ``x >= nextafter(y, -inf)``; a sum or difference of two
  floats whose result is subnormal is exact.
* (R2) A sum of ``n`` non-negative floats in any order: ``|fl(s) - s| <= gamma_{n-1} s``
  (Higham 2002, (4.4)).
* (R3) A matrix product of floats, inner dimension ``n``, any order of accumulation, with or
  without FMA (no Strassen-type algorithm): ``|fl(X Y) - X Y| <= gamma_n |X||Y| + n eta``
  (Higham 2002, (3.13); ``n eta`` covers products that underflow).
* (R4) Points of balls: if ``|X - M1| <= R1`` and ``|Y - M2| <= R2`` then
  ``|X Y - M1 M2| <= |M1| R2 + R1 (|M2| + R2)`` (Rump 1999, Theorem 2.1 / Rump 2012).
* (R5) A product in which every column of ``Y`` (or every row of ``X``) has at most one
  non-zero entry, equal to 1, is exact: each entry is one float times 1 plus exact zeros.

This module shares no code with :mod:`.float64`: the two checks of a certificate are
independent programs, one with an analysis per condition, this one with an analysis per
operation.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Ball", "ball", "matmul", "sub", "row_abs_sum_bounds", "sum_squares_bounds"]

_U = 2.0**-53
_ETA = 2.0**-1074


def _gamma(n: int) -> float:
    """``gamma_n``; the model is used only while ``n u < 0.01``."""
    nu = n * _U
    if nu >= 0.01:
        raise ValueError(f"n: {n} is too large for the rounding model (n u >= 0.01)")
    return nu / (1.0 - nu)


def _up(x):
    return np.nextafter(x, np.inf)


def _down(x):
    return np.nextafter(x, -np.inf)


def _add_up(*terms):
    """An upper bound, entrywise, of the exact sum of non-negative float arrays.

    ``s = fl(t_1 + ... + t_k)`` has ``exact <= s / (1 - gamma_{k-1}) <= s (1 + 2 gamma_{k-1})``
    (R2); the factor is taken as ``1 + 2 gamma_{k+1}``, whose slack covers the rounding of the
    factor and of the product, and the result is stepped one float up (R1)."""
    s = terms[0]
    for t in terms[1:]:
        s = s + t
    return _up(s * (1.0 + 2.0 * _gamma(len(terms) + 1)))


def _nonneg_matmul_up(X, Y):
    """An upper bound of the exact product of non-negative float matrices: by (R3),
    ``Q = fl(X Y) >= (1 - gamma_n) X Y - n eta``, so ``X Y <= (Q + n eta) / (1 - gamma_n)``."""
    n = X.shape[1]
    return _up((X @ Y + n * _ETA) * (1.0 + 2.0 * _gamma(n + 2)))


class Ball:
    """A ball matrix: midpoint ``mid`` (float64 array) and radius ``rad`` (float64 array
    ``>= 0`` of the same shape, or None for radius 0)."""

    __slots__ = ("mid", "rad")

    def __init__(self, mid, rad=None):
        self.mid = mid
        self.rad = rad

    @property
    def shape(self):
        return self.mid.shape


def _checked(mid, rad) -> Ball:
    """A ball whose midpoint and radius are finite; anything else raises (the caller's check
    then rejects: an overflowed enclosure proves nothing)."""
    if not np.isfinite(mid).all() or (rad is not None and not np.isfinite(rad).all()):
        raise FloatingPointError("an enclosure overflowed or is not finite")
    return Ball(mid, rad)


def ball(X) -> Ball:
    """The exact ball (radius 0) of a float64 array.

    Parameters
    ----------
    X : (r, c) array_like
        Converted to float64.

    Returns
    -------
    Ball

    Raises
    ------
    FloatingPointError
        If an entry is not finite.
    """
    X = np.asarray(X, dtype=np.float64)
    return _checked(X, None)


def _abs_up(b: Ball):
    """An upper bound of ``|X|`` over the ball's points: ``|M| + R`` rounded up."""
    a = np.abs(b.mid)
    return a if b.rad is None else _add_up(a, b.rad)


def _abs_down(b: Ball):
    """A lower bound of ``|X|`` over the ball's points: ``max(|M| - R, 0)`` rounded down."""
    a = np.abs(b.mid)
    return a if b.rad is None else np.maximum(_down(a - b.rad), 0.0)


def _selects(M, axis: int) -> bool:
    """Every column (``axis=0``) or row (``axis=1``) of ``M`` has at most one non-zero, = 1."""
    nz = M != 0
    return bool((nz.sum(axis=axis) <= 1).all() and (M[nz] == 1.0).all())


def matmul(a: Ball, b: Ball) -> Ball:
    """A ball enclosing ``X Y`` for every ``X`` in ``a`` and ``Y`` in ``b``.

    Midpoint ``C = fl(M1 M2)``; radius an upper bound of
    ``gamma_n |M1||M2| + n eta + |M1| R2 + R1 (|M2| + R2)`` ((R3) for the rounding of ``C``,
    (R4) for the radii), each product of non-negative matrices bounded by
    ``_nonneg_matmul_up``; when a midpoint selects (R5), ``C`` is exact and only the
    radii remain (key-support and identity witnesses: radius 0). Point inputs cost two BLAS
    products, ball inputs up to four.

    Parameters
    ----------
    a, b : Ball
        Shapes ``(m, n)`` and ``(n, c)``, with ``n u < 0.01``.

    Returns
    -------
    Ball
        Shape ``(m, c)``.

    Raises
    ------
    FloatingPointError
        If the midpoint or the radius overflows.
    ValueError
        If ``n`` is too large for the rounding model.
    """
    n = a.shape[1]
    A1 = np.abs(a.mid)
    B1 = np.abs(b.mid)
    C = a.mid @ b.mid
    if _selects(b.mid, 0) or _selects(a.mid, 1):  # (R5): C = M1 M2 exactly
        terms = []
    else:
        g = 2.0 * _gamma(n + 2)  # >= gamma_n after the two roundings of g * Pi (R1)
        terms = [_up(_nonneg_matmul_up(A1, B1) * g), n * _ETA]
    if b.rad is not None:
        terms.append(_nonneg_matmul_up(A1, b.rad))
    if a.rad is not None:
        terms.append(_nonneg_matmul_up(a.rad, _abs_up(b)))
    return _checked(C, _add_up(*terms) if terms else None)


def sub(a: Ball, b: Ball) -> Ball:
    """A ball enclosing ``X - Y``: midpoint ``D = fl(M1 - M2)``, radius an upper bound of
    ``R1 + R2 + u |D|`` (R1: ``|D - (M1 - M2)| <= u |D|``; ``u |D|`` is an exact scaling
    unless it underflows, which the step up covers).

    Parameters
    ----------
    a, b : Ball
        One shape.

    Returns
    -------
    Ball

    Raises
    ------
    FloatingPointError
        If the result overflows.
    """
    D = a.mid - b.mid
    err = _up(_U * np.abs(D))
    radii = [r for r in (a.rad, b.rad) if r is not None]
    return _checked(D, _add_up(*radii, err) if radii else err)


def _row_sums_up(T):
    """Upper bounds of the exact row sums of a non-negative array (R2)."""
    n = T.shape[1]
    return _up(T.sum(axis=1) * (1.0 + 2.0 * _gamma(n + 2)))


def _row_sums_down(T):
    """Lower bounds of the exact row sums of a non-negative array (R2:
    ``exact >= fl(s) / (1 + gamma_{n-1}) >= fl(s) (1 - gamma_{n-1})``)."""
    n = T.shape[1]
    return np.maximum(_down(T.sum(axis=1) * (1.0 - 2.0 * _gamma(n + 2))), 0.0)


def row_abs_sum_bounds(b: Ball, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)``: for every point ``X`` of the ball, ``lo_i <= sum_j |X_ij| <= hi_i``, the
    sum over the entries where ``mask`` is True, or over all entries.

    Parameters
    ----------
    b : Ball
        Shape ``(r, c)``.
    mask : (r, c) bool ndarray, optional

    Returns
    -------
    lo, hi : (r,) float64 ndarray

    Raises
    ------
    FloatingPointError
        If a sum overflows.
    """
    hi_e, lo_e = _abs_up(b), _abs_down(b)
    if mask is not None:
        hi_e = np.where(mask, hi_e, 0.0)
        lo_e = np.where(mask, lo_e, 0.0)
    hi = _row_sums_up(hi_e)
    if not np.isfinite(hi).all():
        raise FloatingPointError("a row sum overflowed")
    return _row_sums_down(lo_e), hi


def sum_squares_bounds(b: Ball) -> tuple[float, float]:
    """``(lo, hi)`` with ``lo <= sum_ij X_ij^2 <= hi`` for every point ``X`` of the ball:
    each square of a bound of ``|X_ij|`` is rounded outwards (one rounding, R1; a product
    that underflows moves by less than the step), then summed as in (R2).

    Parameters
    ----------
    b : Ball

    Returns
    -------
    lo, hi : float

    Raises
    ------
    FloatingPointError
        If the sum overflows.
    """
    hi_e = _abs_up(b).ravel()
    lo_e = _abs_down(b).ravel()
    hi = float(_row_sums_up(_up(hi_e * hi_e)[None, :])[0]) if hi_e.size else 0.0
    lo = float(_row_sums_down(np.maximum(_down(lo_e * lo_e), 0.0)[None, :])[0]) if (
        lo_e.size) else 0.0
    if not np.isfinite(hi):
        raise FloatingPointError("a sum of squares overflowed")
    return lo, hi

"""The starts of the subspace climb (docs/theory/lower.md, section *Subspace climb*):
:func:`climb_starts` (rows of ``A``, random rows, random mixtures of singular vectors) and
the checks of the starts a caller gives :meth:`SubspaceClimb.best
<softrank.certifiers.lower.climb.SubspaceClimb.best>`.
"""

from __future__ import annotations

import re

import numpy as np

from ...errors import InvalidArgumentError
from ...validation import check_int

__all__ = ["climb_starts", "checked_start", "finite_columns", "brief_repr"]

_LABEL = re.compile(r"(?!svd$)[A-Za-z0-9][A-Za-z0-9._-]{0,39}")


def finite_columns(arg: str, X, N: int, cols: str) -> np.ndarray:
    """``X`` as a float64 ``(N, cols)`` array; InvalidArgumentError naming ``arg`` if it is
    not a real (integer or float) array, has another shape or a non-finite entry."""
    try:
        X = np.asarray(X)
    except ValueError as exc:  # ragged nested sequences
        raise InvalidArgumentError(f"{arg} must be a finite ({N}, {cols}) array: {exc}") from None
    if X.dtype.kind not in "iuf":
        raise InvalidArgumentError(f"{arg} must be a real ({N}, {cols}) array, got dtype "
                                   f"{X.dtype}")
    X = X.astype(np.float64, copy=False)
    if X.ndim != 2 or X.shape[0] != N or not np.isfinite(X).all():
        raise InvalidArgumentError(f"{arg} must be a finite ({N}, {cols}) array, got shape "
                                   f"{X.shape}" + ("" if X.ndim != 2 or X.shape[0] != N
                                                   else " with a non-finite entry"))
    return X


def brief_repr(x) -> str:
    """``repr(x)`` on one line, at most 80 characters (for error messages)."""
    return " ".join(repr(x).split())[:80]


#: Largest magnitude of a start's entries: beyond it the QR that orthonormalises a start can
#: overflow (a span does not change with scale, so a start is rescaled, not clipped).
_START_MAX = 1e150


def checked_start(item, N: int, k: int, arg: str = "starts") -> tuple[str, np.ndarray]:
    """One item given by ``starts(k)`` (or ``screened(k)``, named by ``arg``) of
    :meth:`~softrank.certifiers.lower.climb.SubspaceClimb.best` as ``(label, B)``, ``B`` a
    float64 ``(N, k)`` array with
    entries of magnitude at most ``1e150``; InvalidArgumentError naming it otherwise."""
    if not (isinstance(item, tuple) and len(item) == 2
            and isinstance(item[0], str) and _LABEL.fullmatch(item[0])):
        raise InvalidArgumentError(
            f"{arg}({k}) must give (label, B) pairs, the label letters, digits, '.', '_' or "
            f"'-' and not 'svd', got {brief_repr(item)}")
    label, B = item
    name = f"start {label!r}" if arg == "starts" else f"{arg} start {label!r}"
    B = finite_columns(name, B, N, str(k))
    if B.shape[1] != k:
        raise InvalidArgumentError(f"{name} at dimension {k} must have {k} columns, "
                                   f"got {B.shape[1]}")
    if B.size and np.abs(B).max() > _START_MAX:
        raise InvalidArgumentError(f"{name} must have entries of magnitude at most 1e150 "
                                   f"(rescale it: its span is what counts), got "
                                   f"{np.abs(B).max():.3g}")
    return label, B


def climb_starts(A: np.ndarray, V: np.ndarray, order: np.ndarray, k: int,
                 random_rows: int = 2, svd_mix: int = 1,
                 seed: int = 0) -> list[tuple[str, np.ndarray]]:
    """Starts of :class:`~softrank.certifiers.lower.climb.SubspaceClimb` at dimension ``k``
    besides the singular one
    (docs/theory/lower.md#subspace-climb).

    First ``rows``, the span of the first ``k`` rows of ``A`` in ``order`` (a column-pivoted
    QR of ``A^T``: :func:`~softrank.certifiers.lower.basic.row_order`); then, alternating,
    ``random_rows`` draws of
    ``random-rows``, the span of ``k`` distinct rows of ``A`` drawn uniformly, and
    ``svd_mix`` draws of ``svd-mix``, ``k`` Gaussian combinations of the top ``min(2k, p)``
    right singular vectors. The draws come from ``numpy.random.default_rng((seed, k))``:
    the same for every tolerance and run.

    Parameters
    ----------
    A : (m, N) float64 ndarray
    V : (N, p) float64 ndarray
        Right singular vectors, by decreasing singular value.
    order : (m,) int ndarray
        Row order (:func:`~softrank.certifiers.lower.basic.row_order`).
    k : int
        Dimension of the starts, ``1 <= k <= min(m, N, p)``.
    random_rows, svd_mix : int
        Random starts of each kind.
    seed : int
        The generator's seed, ``>= 0``.

    Returns
    -------
    list of (str, (N, k) float64 ndarray)
        Label and basis, not orthonormalised (the climb does that). A basis can be
        rank-deficient: ``rows`` and ``random-rows`` where ``A`` has repeated or dependent
        rows, ``svd-mix`` never when ``p >= k`` (Gaussian combinations of ``min(2k, p)``
        orthonormal columns have rank ``k`` almost surely).

    Raises
    ------
    InvalidArgumentError
        If ``A`` is not a finite 2-D float64 array, ``V`` not a finite ``(N, p)`` array,
        ``order`` not a permutation of the rows,
        ``k`` outside ``[1, min(m, N, p)]``, or a count or the seed negative or not an
        integer.
    """
    if not (isinstance(A, np.ndarray) and A.ndim == 2 and A.dtype == np.float64
            and np.isfinite(A).all()):
        raise InvalidArgumentError(f"A must be a finite 2-D float64 array, got "
                                   f"{type(A).__name__} {getattr(A, 'shape', '')}")
    m, N = A.shape
    V = finite_columns("V", V, N, "p")
    order = np.asarray(order)
    if order.dtype.kind not in "iu" or sorted(order.tolist()) != list(range(m)):
        raise InvalidArgumentError(f"order must be a permutation of range({m}), got "
                                   f"{order.size} entries of dtype {order.dtype}")
    k = check_int(k, "k", 1, min(m, N, V.shape[1]))
    random_rows = check_int(random_rows, "random_rows", 0)
    svd_mix = check_int(svd_mix, "svd_mix", 0)
    seed = check_int(seed, "seed", 0)
    rng = np.random.default_rng((int(seed), int(k)))
    out = [("rows", A[order[:k]].T.copy())]
    p = min(2 * k, V.shape[1])
    for i in range(max(random_rows, svd_mix)):
        if i < random_rows:
            out.append(("random-rows", A[np.sort(rng.choice(m, k, replace=False))].T.copy()))
        if i < svd_mix:
            out.append(("svd-mix", V[:, :p] @ rng.standard_normal((p, k))))
    return out

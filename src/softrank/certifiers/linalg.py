"""Blocked linear algebra shared by the certifiers' reweighted least-squares steps.

Many small weighted least-squares systems, one per row of ``A`` or per key, solved in blocks
so that no temporary grows with the number of rows (docs/theory/witnesses.md#l1-refit,
docs/theory/witnesses.md#alternating-l1, docs/theory/lower.md#subspace-certificate).
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.linalg import lapack

from ..errors import InvalidArgumentError

__all__ = ["BLOCK_ENTRIES", "weighted_solves"]

#: Entries (float64) of the largest temporary a blocked step forms at once: 4 Mi (32 MiB).
BLOCK_ENTRIES = 2**22

#: Entries of the largest table of products of pairs of rows of ``X`` (``n x k(k+1)/2``)
#: formed at once: 16 Mi (128 MiB); beyond it the systems are formed by broadcasting.
TABLE_ENTRIES = 2**24

#: From this ``k`` on, the systems are solved one by one by Cholesky (LAPACK ``dposv``): at
#: these sizes that is faster than numpy's batched LU, below it slower (per-call overhead).
CHOLESKY_FROM = 32


@functools.lru_cache(maxsize=None)
def _packing(k: int):
    """Row and column of each of the ``k(k+1)/2`` entries on or above the diagonal of a
    ``k x k`` matrix, the packed position of each entry ``(a, b)`` (row-major, both
    triangles)."""
    iu, ju = np.triu_indices(k)
    packed = np.empty((k, k), dtype=np.intp)
    packed[iu, ju] = packed[ju, iu] = np.arange(iu.size)
    out = (iu, ju, packed.ravel())
    for a in out:
        a.flags.writeable = False
    return out


def _solve_spd(G: np.ndarray, B: np.ndarray, first: int = 0) -> np.ndarray:
    """``G[i] x_i = B[i]`` for a stack ``G (r, k, k)`` of symmetric matrices (``G`` may be
    overwritten). Cholesky where it succeeds, LU where a system is not numerically positive
    definite; raises numpy.linalg.LinAlgError if a system is singular, naming it as system
    ``first + i``. A stack with a NaN or infinite entry goes to numpy's LU, whose answer
    then has NaN entries (``dposv`` can return finite numbers for it)."""
    r, k, _ = G.shape
    if k < CHOLESKY_FROM or not np.isfinite(G).all():
        return np.linalg.solve(G, B[:, :, None])[..., 0]
    out = np.empty((r, k))
    for i in range(r):
        # G[i] is symmetric, so its transpose (Fortran order, no copy) is the same matrix;
        # dposv works on a copy, so that a failed Cholesky leaves G[i] whole for the LU
        _, x, info = lapack.dposv(G[i].T, B[i], lower=1, overwrite_a=0, overwrite_b=0)
        if info != 0:
            _, _, x, info = lapack.dgesv(G[i].T, B[i], overwrite_a=1, overwrite_b=0)
            if info != 0:
                raise np.linalg.LinAlgError(f"weighted_solves: system {first + i} is singular")
        out[i] = x
    return out


def weighted_solves(X: np.ndarray, wt: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Row ``i``: the solution ``u`` of ``(X diag(wt_i) X^T + r_i I) u = B_i`` for every row
    of ``wt (r, n)`` and ``B (r, k)``, with ``X (k, n)`` and a relative ridge
    ``r_i = 1e-12 trace / k``: the weighted least-squares steps of the alternating l1
    (:meth:`softrank.certifiers.upper.AlternatingL1.irls_basis`, both factors) and of the
    screening (:func:`softrank.certifiers.upper.l1_candidates`,
    :func:`softrank.certifiers.lower.basis_pursuit_candidates`).

    The systems are symmetric: their ``k(k+1)/2`` distinct entries are formed by one matrix
    product ``wt @ T`` with the ``(n, k(k+1)/2)`` table ``T`` of products of pairs of ``X``'s
    rows when that table is at most ``TABLE_ENTRIES`` entries, else by broadcasting;
    both in blocks of rows, so that no temporary other than the table (which takes twice
    its size while it is built) exceeds about 32 MiB. From
    ``k =`` ``CHOLESKY_FROM`` on, each system is solved by Cholesky (LU if it is not
    numerically positive definite), below by numpy's batched LU.

    Parameters
    ----------
    X : (k, n) float64 ndarray
    wt : (r, n) float64 ndarray
        The weights, one row per system (non-negative).
    B : (r, k) float64 ndarray
        The right-hand sides.

    Returns
    -------
    (r, k) float64 ndarray

    Raises
    ------
    InvalidArgumentError
        If ``X``, ``wt`` or ``B`` is not 2-D or their shapes do not match.
    numpy.linalg.LinAlgError
        If a system is singular.
    """
    X, wt, B = (np.asarray(v, dtype=np.float64) for v in (X, wt, B))
    if X.ndim != 2 or wt.ndim != 2 or B.ndim != 2:
        raise InvalidArgumentError(f"X, wt and B must be 2-D, got shapes {X.shape}, "
                                   f"{wt.shape} and {B.shape}")
    k, n = X.shape
    r = wt.shape[0]
    if wt.shape != (r, n) or B.shape != (r, k):
        raise InvalidArgumentError(f"wt and B must have shapes ({r}, {n}) and ({r}, {k}) for "
                                   f"X of shape {X.shape}, got {wt.shape} and {B.shape}")
    out = np.empty((r, k))
    if k == 0 or r == 0:  # no unknowns, or no systems
        return out
    iu, ju, packed = _packing(k)  # entry (a, b) of G is column packed[a k + b]
    table = None
    if n * iu.size <= TABLE_ENTRIES:
        table = X[iu]
        table *= X[ju]
        table = table.T  # (n, k(k+1)/2)
    step = max(1, BLOCK_ENTRIES // max(k * (k if table is not None else n), 1))
    for a in range(0, r, step):
        w = wt[a:a + step]
        if table is not None:
            G = np.take(w @ table, packed, axis=1)  # (rows, k * k)
        else:
            G = ((X[None, :, :] * w[:, None, :]) @ X.T).reshape(-1, k * k)
        d = G[:, ::k + 1]  # the diagonals, a view
        d += (1e-12 * np.maximum(d.sum(axis=1) / k, 1e-300))[:, None]
        out[a:a + step] = _solve_spd(G.reshape(-1, k, k), B[a:a + step], first=a)
    return out

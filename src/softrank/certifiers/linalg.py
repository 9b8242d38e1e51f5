"""Blocked linear algebra shared by the certifiers' screening steps.

Many small weighted least-squares systems, one per row of ``A`` or per key, solved in blocks
so that no temporary grows with the number of rows (docs/theory/witnesses.md#l1-refit,
docs/theory/lower.md#subspace-certificate).
"""

from __future__ import annotations

import numpy as np

__all__ = ["BLOCK_ENTRIES", "weighted_solves"]

#: Entries (float64) of the largest temporary a blocked step forms at once: 4 Mi (32 MiB).
BLOCK_ENTRIES = 2**22


def weighted_solves(X: np.ndarray, wt: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Row ``i``: the solution ``u`` of ``(X diag(wt_i) X^T + r_i I) u = B_i`` for every row
    of ``wt (r, n)`` and ``B (r, k)``, with ``X (k, n)`` and a relative ridge
    ``r_i = 1e-12 trace / k``: the weighted least-squares steps of the screening
    (:func:`softrank.certifiers.upper.l1_candidates`,
    :func:`softrank.certifiers.lower.basis_pursuit_candidates`).

    The ``r`` systems are formed by one matrix product ``wt @ (X * X)`` with the
    ``(n, k^2)`` table of products of ``X``'s columns when that table is at most 16 Mi
    entries (128 MiB), else by broadcasting; both in blocks of rows, so that no temporary
    exceeds about 32 MiB.

    Raises
    ------
    numpy.linalg.LinAlgError
        If a system is singular.
    """
    k, n = X.shape
    r = wt.shape[0]
    out = np.empty((r, k))
    eye = np.eye(k)
    table = (X[:, None, :] * X[None, :, :]).reshape(k * k, n).T if n * k * k <= 2**24 else None
    step = max(1, BLOCK_ENTRIES // max(k * (k if table is not None else n), 1))
    for a in range(0, r, step):
        w = wt[a:a + step]
        if table is not None:
            G = (w @ table).reshape(-1, k, k)
        else:
            G = (X[None, :, :] * w[:, None, :]) @ X.T
        ridge = 1e-12 * np.maximum(np.trace(G, axis1=1, axis2=2) / k, 1e-300)
        out[a:a + step] = np.linalg.solve(G + ridge[:, None, None] * eye,
                                          B[a:a + step, :, None])[..., 0]
    return out

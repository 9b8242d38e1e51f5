"""Validated input: enclose the exact softmax of the exact logits (docs/theory/checker.md).

A float64 ``A = softmax_rows(beta Q K^T)`` carries the rounding of the logits, the
exponentials and the normalisation. In validated mode the operator is instead the *exact*
real matrix ``A* = softmax_rows(beta Q K^T)`` of the stored float64 ``Q``, ``K``, ``beta``.
:func:`enclose_softmax` computes, in ball arithmetic (python-flint ``arb`` at 106 bits), a
float64 matrix ``A_mid`` and a rigorous ``rho`` with ``||A* - A_mid||_inf <= rho``.

Then, for every matrix ``A'`` with ``||A' - A_mid||_inf <= rho`` (``A*`` among them):

* an upper witness with ``||A_mid - U W||_inf <= eps - rho`` gives ``||A' - U W||_inf <= eps``;
* a lower certificate valid for ``A_mid`` at ``eps + rho`` covers every ``B`` with
  ``||A' - B||_inf <= eps``, since then ``||A_mid - B||_inf <= eps + rho``.

So brackets certified on ``A_mid`` with the tolerance shrunk (upper side) and grown (lower
side) by ``rho`` hold for every matrix of the enclosure.
"""

from __future__ import annotations

import numpy as np

__all__ = ["enclose_softmax", "PREC"]

PREC = 106


def enclose_softmax(Q, K, beta: float, mask=None) -> tuple[np.ndarray, float]:
    """``(A_mid, rho)`` with ``||softmax_rows(beta Q K^T, mask) - A_mid||_inf <= rho`` exactly.

    Parameters
    ----------
    Q : (m, d) float64 ndarray
    K : (N, d) float64 ndarray
    beta : float
        The float64 scale; logits are ``beta * (Q K^T)`` in exact real arithmetic.
    mask : (m, N) bool ndarray, optional
        The keys each query sees (every row at least one); the softmax runs over those, and
        the others are exactly 0 in both the exact matrix and ``A_mid``. Default: all.

    Returns
    -------
    A_mid : (m, N) float64 ndarray
        Entrywise the float64 nearest the midpoint of each entry's ball.
    rho : float
        Upper bound (rounded up) of ``max_i sum_j |A*_ij - A_mid_ij|``.
    """
    import flint
    from flint import arb, arb_mat

    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    m, N = Q.shape[0], K.shape[0]
    old = flint.ctx.prec
    flint.ctx.prec = PREC
    try:
        Lq = arb_mat([[float(v) for v in row] for row in Q])
        Lk = arb_mat([[float(v) for v in row] for row in K]).transpose()
        L = (Lq * Lk) * arb(float(beta))
        M = np.ones((m, N), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        # any per-row shift is exact for softmax
        shift = np.where(M, float(beta) * (Q @ K.T), -np.inf).max(axis=1)
        A_mid = np.zeros((m, N))
        rho = 0.0
        for i in range(m):
            c = arb(float(shift[i]))
            vis = np.flatnonzero(M[i])
            e = [(L[i, int(j)] - c).exp() for j in vis]
            tot = sum(e[1:], e[0])
            a = [x / tot for x in e]
            row = np.array([float(x.mid()) for x in a])
            A_mid[i, vis] = row
            dev = sum((abs(x - arb(float(v))) for x, v in zip(a, row)), arb(0))
            hi = float(dev.mid()) + float(dev.rad())
            rho = max(rho, float(np.nextafter(np.nextafter(hi, np.inf), np.inf)))
    finally:
        flint.ctx.prec = old
    return A_mid, rho

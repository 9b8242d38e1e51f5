"""Lower certificates by a decoded inverse (docs/theory/lower.md, sections *Decoded
inverse* and *LP decoder*): the truncated pseudoinverse of the top singular subspace, and
the least-norm decoder of the first ``k`` key groups of an ordering found by basis-pursuit
LPs (HiGHS).

Each search returns a candidate :class:`~softrank.checker.DecodedInverseCertificate`, or
None; none is a bound until the checker accepts it.
"""

from __future__ import annotations

import numpy as np

from ...checker import DecodedInverseCertificate
from ..lp import BasisPursuit
from .basic import largest_certified

__all__ = ["LPDecoder", "truncated_pseudoinverse"]


class LPDecoder:
    """Decoded inverse with an LP decoder for nested key-group indicators ``R`` (docs/theory/lower.md).

    Parameters
    ----------
    A : (m, N) float64 ndarray
    groups : list of disjoint key-index arrays, in priority order (``R`` uses the first k)
    name : label recorded in the certificate's ``method``
    """

    def __init__(self, A: np.ndarray, groups: list[np.ndarray], name: str):
        self.A = A
        self.groups = groups
        self.name = name
        self.AG = np.stack([A[:, g].sum(axis=1) for g in groups], axis=1)  # (m, n_groups)
        self._cache: dict[int, tuple[float, np.ndarray | None]] = {}

    def _solve(self, k: int, bound: float):
        """``(max_a ||l_a||_1, L)`` for the first ``k`` groups; stops once a row's norm
        exceeds ``bound`` (then ``L`` is None). ``inf`` if an LP is not optimal."""
        hit = self._cache.get(k)
        if hit is not None and (hit[1] is not None or hit[0] > bound):
            return hit
        G = self.AG[:, :k].T  # (k, m): constraints (A R)^T l = e_a
        bp = BasisPursuit(G)
        rows = []
        worst = 0.0
        for a in range(k):
            e = np.zeros(k)
            e[a] = 1.0
            x = bp.solve(e)
            if x is None:
                self._cache[k] = (np.inf, None)
                return self._cache[k]
            nrm = np.abs(x).sum()
            if not np.isfinite(nrm):
                self._cache[k] = (np.inf, None)
                return self._cache[k]
            worst = max(worst, nrm)
            rows.append(x)
            if worst > bound:
                self._cache[k] = (worst, None)
                return self._cache[k]
        L = np.array(rows)
        self._cache[k] = (worst, L)
        return self._cache[k]

    def certificate(self, k: int, eps: float) -> DecodedInverseCertificate | None:
        bound = (1.0 - 1e-7) / eps if eps > 0 else np.inf
        nrm, L = self._solve(k, bound)
        if L is None or not nrm * eps < 1.0 - 1e-7:
            return None
        R = np.zeros((self.A.shape[1], k))
        for a, g in enumerate(self.groups[:k]):
            R[g, a] = 1.0
        return DecodedInverseCertificate(eps, L, R, f"lp-decoder/{self.name}")

    def best(self, eps: float, lo: int, hi: int) -> DecodedInverseCertificate | None:
        """Largest ``k`` in ``[lo, hi]`` with a certificate, by bisection."""
        return largest_certified(lambda k: self.certificate(k, eps), lo,
                                 min(hi, len(self.groups), self.A.shape[0]))


def truncated_pseudoinverse(A: np.ndarray, eps: float, svd, hi: int) -> DecodedInverseCertificate | None:
    """Decoded inverse with ``R = V_k``, ``L = S_k^{-1} U_k^T`` (docs/theory/lower.md): the largest ``k <= hi``
    with ``eps ||L||_inf ||R||_inf + ||I - L A R||_inf < 1`` (estimated in float64 here; the
    checker decides).

    ``L A R = I`` up to rounding, so the condition is about the norms, which are cheap for
    every ``k`` at once: row ``a`` of ``L`` is ``u_a^T / s_a`` whatever ``k`` is, so
    ``||L_k||_inf`` is a running maximum, and ``||R_k||_inf`` the maximum of running row sums.
    """
    U, s, Vt = svd
    p = min(hi, int((s > 0).sum()))
    if p < 1:
        return None
    nL = np.maximum.accumulate(np.abs(U[:, :p]).sum(axis=0) / s[:p])
    nR = np.cumsum(np.abs(Vt[:p]), axis=0).max(axis=1)
    ok = np.nonzero(eps * nL * nR < 1.0 - 1e-6)[0]
    if not ok.size:
        return None
    for k in sorted(ok + 1, reverse=True)[:3]:  # the residual is ~1e-15; check a few
        L = U[:, :k].T / s[:k, None]
        R = Vt[:k].T
        res = np.abs(np.eye(k) - L @ (A @ R)).sum(axis=1).max()
        if eps * nL[k - 1] * nR[k - 1] + res < 1.0 - 1e-7:
            return DecodedInverseCertificate(eps, L, R, "truncated-pseudoinverse")
    return None

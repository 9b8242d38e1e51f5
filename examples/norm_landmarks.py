"""A construction that reads ``Q`` and ``K``: Nystrom with landmarks chosen by norm.

The ``k`` landmark keys are the keys of largest norm, the ``k`` landmark queries the queries
of largest norm, and ``A ~ softmax(beta Q K~^T) pinv(softmax(beta Q~ K~^T)) softmax(beta Q~ K^T)``
(Nystromformer, Xiong et al. 2021, with a different choice of landmarks). Norms are not
preserved by a gauge ``Q -> Q S``, ``K -> K S^{-T}``, so the landmarks (and the rank) may move
with the gauge although ``A`` does not: the construction does not claim gauge invariance
(``gauge_invariant = False``), and the suites report how far its rank moves instead of
failing it. It is sound either way: every witness it returns is within ``eps``.

Run the suites on it, and draw it against the certified rank-error frontier of a head::

    pytest --softrank-certifier examples.norm_landmarks:NormLandmarks --softrank-profile ci
    softrank frontier head.npz --certifier examples.norm_landmarks:NormLandmarks
"""

import numpy as np


def _softmax_rows(L):
    L = L - L.max(axis=1, keepdims=True)
    E = np.exp(L)
    return E / E.sum(axis=1, keepdims=True)


class NormLandmarks:
    name = "norm-landmarks"
    gauge_invariant = False  # landmarks by norm: a gauge changes them

    def witness(self, operator, eps):
        if operator.Q is None:
            return None  # needs the factors
        A = operator.A
        m, N = A.shape
        target = eps * (1 - 1e-9)
        for k in range(1, min(m, N) + 1):
            U, W = self.witness_at_rank(operator, k)
            # a margin for the checker's rounding bounds, which grow with |U| |W|: an
            # ill-conditioned landmark block makes U huge, and a witness whose error is
            # within eps only before rounding is refused (as it should be)
            slack = 4 * (k + 2) * 2.0**-53 * (np.abs(U) @ np.abs(W) + np.abs(A)).sum(axis=1)
            if (np.abs(A - U @ W).sum(axis=1) + slack).max() <= target:
                return U, W
        return None

    def witness_at_rank(self, operator, k):
        """The ``k``-landmark factors, whatever their error (``softrank frontier`` draws
        them against the certified band)."""
        if operator.Q is None or k > min(operator.A.shape):
            return None
        Q, K, beta = operator.Q, operator.K, operator.beta
        qs = np.argsort(-np.linalg.norm(Q, axis=1), kind="stable")
        ks = np.argsort(-np.linalg.norm(K, axis=1), kind="stable")
        Qt, Kt = Q[qs[:k]], K[ks[:k]]
        U = _softmax_rows(beta * Q @ Kt.T) @ np.linalg.pinv(_softmax_rows(beta * Qt @ Kt.T))
        return U, _softmax_rows(beta * Qt @ K.T)

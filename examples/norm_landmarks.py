"""A construction that reads ``Q`` and ``K``: Nystrom with landmarks chosen by norm.

The ``k`` landmark keys are the keys of largest norm, the ``k`` landmark queries the queries
of largest norm, and ``A ~ softmax(beta Q K~^T) pinv(softmax(beta Q~ K~^T)) softmax(beta Q~ K^T)``
(Nystromformer, Xiong et al. 2021, with a different choice of landmarks). Norms are not
preserved by a gauge ``Q -> Q S``, ``K -> K S^{-T}``, so the landmarks (and the rank) may move
with the gauge although ``A`` does not: the construction does not claim gauge invariance
(``gauge_invariant = False``), and the suites report how far its rank moves instead of
failing it. It is sound either way: every witness it returns is within ``eps``.

Run the suites on it::

    pytest --softrank-certifier examples.norm_landmarks:NormLandmarks --softrank-profile ci
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
        A, Q, K, beta = operator.A, operator.Q, operator.K, operator.beta
        m, N = A.shape
        qs = np.argsort(-np.linalg.norm(Q, axis=1), kind="stable")
        ks = np.argsort(-np.linalg.norm(K, axis=1), kind="stable")
        target = eps * (1 - 1e-9)
        for k in range(1, min(m, N) + 1):
            Qt, Kt = Q[qs[:k]], K[ks[:k]]
            U = _softmax_rows(beta * Q @ Kt.T) @ np.linalg.pinv(_softmax_rows(beta * Qt @ Kt.T))
            W = _softmax_rows(beta * Qt @ K.T)
            # a margin for the checker's rounding bounds, which grow with |U| |W|: an
            # ill-conditioned landmark block makes U huge, and a witness whose error is
            # within eps only before rounding is refused (as it should be)
            slack = 4 * (k + 2) * 2.0**-53 * (np.abs(U) @ np.abs(W) + np.abs(A)).sum(axis=1)
            if (np.abs(A - U @ W).sum(axis=1) + slack).max() <= target:
                return U, W
        return None

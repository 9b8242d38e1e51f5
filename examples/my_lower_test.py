"""A lower test following the softrank protocol: single-key groups with Varah's bound.

Greedily picks keys ``j`` with a witness query ``q_j = argmax_i A[i, j]`` while every chosen
witness keeps ``A[q_j, j] - sum_{j' chosen, j' != j} A[q_j, j'] > eps`` (strict diagonal
dominance with margin ``eps``): then ``r_eps(A) >= #chosen`` (docs/theory/lower.md, key groups).
``certify(operator, eps)`` returns a :class:`softrank.checker.KeyGroupCertificate` or None.
"""

import numpy as np

from softrank.checker import KeyGroupCertificate


class MyLowerTest:
    name = "my-lower-test"
    gauge_invariant = True  # reads only A

    def certify(self, operator, eps):
        A = operator.A
        need = eps * (1 + 1e-9)  # stay clear of the checker's rounding bounds
        keys, queries = [], []
        for j in np.argsort(-A.max(axis=0), kind="stable"):
            q = int(A[:, j].argmax())
            if q in queries:
                continue
            ks, qs = keys + [int(j)], queries + [q]
            M = A[np.ix_(qs, ks)]
            margin = 2 * np.diag(M) - M.sum(axis=1)  # own mass minus the others'
            if margin.min() > need:
                keys, queries = ks, qs
        if not keys:
            return None
        return KeyGroupCertificate(eps, np.array(queries), tuple(np.array([j]) for j in keys),
                                   self.name)

"""A construction following the softrank protocol: truncated SVD at the least rank that fits.

``witness(operator, eps)`` returns factors ``U (m, k)``, ``W (k, N)`` with
``||A - U W||_inf <= eps`` (max row l1 error), or None when no rank fits.
"""

import numpy as np


class MyConstruction:
    name = "my-construction"
    gauge_invariant = True  # reads only A, so it claims gauge invariance (the suites check it)

    def witness(self, operator, eps):
        A = operator.A
        U, s, Vt = np.linalg.svd(A, full_matrices=False)
        R = A.copy()
        for k in range(len(s)):
            R -= np.outer(U[:, k] * s[k], Vt[k])
            # a little below eps: the checker adds a rigorous bound for float64 rounding
            if np.abs(R).sum(axis=1).max() <= eps * (1 - 1e-9):
                return U[:, : k + 1] * s[: k + 1], Vt[: k + 1]
        return None

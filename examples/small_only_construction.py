"""A deliberately broken construction: correct only up to 32 keys.

Truncated SVD at the least rank whose error fits, but the error is measured on the first 32
keys only (a chunked loop that forgot its remainder). Up to 32 keys it is exact and passes
every drawn case of the ``ci`` profile (at most 16 x 16); above 32 keys its witnesses
miss the tolerance. The real-size cases of the suites (``--softrank-sizes``) must catch it.
"""

import numpy as np


class SmallOnlyConstruction:
    name = "small-only"
    gauge_invariant = True  # reads only A

    def witness(self, operator, eps):
        A = operator.A
        U, s, Vt = np.linalg.svd(A, full_matrices=False)
        R = A.copy()
        for k in range(len(s)):
            R -= np.outer(U[:, k] * s[k], Vt[k])
            err = np.abs(R[:, :32]).sum(axis=1).max()  # BUG: keys 32.. never counted
            if err <= eps * (1 - 1e-9):
                return U[:, : k + 1] * s[: k + 1], Vt[: k + 1]
        return None

"""A deliberately broken construction: it claims an error smaller than its witness has.

Its error estimate is the largest entry of ``|A - U W|`` instead of the largest row l1
norm, so it stops at a rank whose witness is not within ``eps``. The suites must reject it
(``test_construction_stress``: the checker rejects the witness).
"""

import numpy as np


class BrokenConstruction:
    name = "broken-construction"

    def witness(self, operator, eps):
        A = operator.A
        U, s, Vt = np.linalg.svd(A, full_matrices=False)
        for k in range(1, len(s) + 1):
            B = (U[:, :k] * s[:k]) @ Vt[:k]
            if np.abs(A - B).max() <= eps:  # BUG: max entry, not max row l1 sum
                return U[:, :k] * s[:k], Vt[:k]
        return None

"""A deliberately unsound lower test: a Frobenius tail test with an off-by-one index.

The sound test (docs/theory/lower.md) proves ``r_eps(A) >= r + 1`` when ``sum_{j > r} sigma_j^2 > m eps^2``.
This one sums from ``j = r`` (one singular value too many) and so claims one more than it
proves. The suites must reject it (the checker refuses the certificate; attacks and planted
instances refute the claim).
"""

import numpy as np

from softrank.checker import FrobeniusCertificate


class OffByOneLowerTest:
    name = "off-by-one-lower-test"

    def certify(self, operator, eps):
        A = operator.A
        m = A.shape[0]
        s = np.linalg.svd(A, compute_uv=False)
        tails = np.cumsum((s ** 2)[::-1])[::-1]  # tails[i] = sum_{j >= i} s_j^2 (0-based)
        # BUG: tails[r - 1] includes sigma_r; the sound test uses tails[r]
        ok = [r for r in range(1, len(s) + 1) if tails[r - 1] > m * eps ** 2]
        if not ok:
            return None
        return FrobeniusCertificate(eps, np.arange(m), max(ok), self.name)

"""Lower certificates from the matrix alone: the trivial bound, the Frobenius tail and key
groups (docs/theory/lower.md, sections *Trivial*, *Frobenius tail* and *Key groups*), and
what the other searches share (:data:`~softrank.certifiers.lower.basic.SLACK`,
:func:`~softrank.certifiers.lower.basic.largest_certified`,
:func:`~softrank.certifiers.lower.basic.row_order`).

Each function returns a candidate certificate of :mod:`softrank.checker.certificates`, or
None; none of them is a bound until the checker accepts it.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ...checker import FrobeniusCertificate, KeyGroupCertificate, TrivialCertificate
from ...validation import check_int

__all__ = ["SLACK", "largest_certified", "trivial", "row_order", "frobenius", "group_families",
           "coattended_groups", "key_groups"]


#: Relative slack demanded in the certifiers' own (unchecked) arithmetic so that the
#: checker's rounding bounds rarely reject a candidate at the edge.
SLACK = 1e-9


def largest_certified(certificate, lo: int, hi: int, stop=None):
    """The certificate of the largest ``k`` in ``[lo, hi]`` for which ``certificate(k)`` is not
    None, assuming that holds up to some ``k`` and fails above (nested families): ``lo``
    first, then steps up from it of 1, 2, 4, ... until one fails (or ``hi`` holds), then
    bisection between the last that held and the first that failed. None if ``lo`` fails.
    ``stop`` (optional) is asked before each probe after ``lo``: when it answers True the
    best certificate so far is returned. InvalidArgumentError if ``lo`` or ``hi`` is not an
    integer.

    The answer lies a few ranks above ``lo`` on almost every head (``lo`` is one above the
    lower end already proved), and a probe's cost grows with ``k`` (its screening as
    ``k^2``), so the probes stay near it: a bisection of ``[lo, N]`` first probed about
    ``N / 2``, and at 2,048 keys that one probe (rank 1,054) took 292 s where the answer was
    ``lo`` itself (232). With ``d`` ranks between ``lo`` and the answer this takes about
    ``2 log2(d) + 1`` probes, against ``log2(hi - lo)`` for the bisection alone."""
    lo, hi = check_int(lo, "lo"), check_int(hi, "hi")
    if hi < lo:
        return None
    best = certificate(lo)
    if best is None:
        return None
    a, b, step = lo, hi, 1  # invariant: a is certified, and nothing above b is
    while a < b and not (stop is not None and stop()):
        k = min(a + step, b) if step else (a + b + 1) // 2
        c = certificate(k)
        if c is not None:
            a, best = k, c
            step *= 2
        else:
            b, step = k - 1, 0  # bisection from here on
    return best


def trivial(A: np.ndarray, eps: float) -> TrivialCertificate | None:
    """``r_eps >= 1`` when ``eps < ||A||_inf`` (= 1 for a stochastic ``A``).

    The margin is the rounding of a sum of ``N`` nonnegative floats, ``(N + 1) u`` relative
    (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., sec. 4.2), not
    ``SLACK``: with ``eps`` within 1e-9 of 1 a row of ``A`` still proves ``r_eps >= 1``."""
    margin = (A.shape[1] + 1) * 2.0 ** -53
    return TrivialCertificate(eps) if np.abs(A).sum(axis=1).max() * (1 - margin) > eps else None


def row_order(A: np.ndarray) -> np.ndarray:
    """Rows of ``A`` ordered by a column-pivoted QR of ``A^T`` (most independent first)."""
    _, _, piv = scipy.linalg.qr(A.T, mode="economic", pivoting=True)
    return np.asarray(piv, dtype=np.int64)


def subset_sizes(m: int) -> list[int]:
    """The row-subset sizes the Frobenius test tries: 2 to 8, then growing by 25 % (rounded
    up) while below ``m``, and ``m``."""
    sizes = {m}
    s = 2
    while s < m:
        sizes.add(s)
        s = int(np.ceil(s * 1.25)) if s >= 8 else s + 1
    return sorted(sizes)


def frobenius(A: np.ndarray, eps: float, order: np.ndarray, sv_cache: dict,
              stop=None) -> FrobeniusCertificate | None:
    """Best Frobenius-tail certificate over the whole matrix and prefixes of ``order``.

    For rows ``I`` with singular values ``s``: the largest ``r`` with
    ``sum_{j>r} s_j^2 > |I| eps^2`` gives ``r_eps >= r + 1``. ``sv_cache`` maps a subset size
    to its singular values (shared across tolerances; a bracket puts the whole matrix's
    there from its SVD). ``stop`` (optional) is asked before each subset whose singular
    values are not cached: True leaves it out, so that past a time limit only the cached
    subsets count (at 4,096 tokens the subsets' SVDs take minutes on one core).
    """
    m = A.shape[0]
    best = None
    for size in subset_sizes(m):
        s = sv_cache.get(size)
        if s is None:
            if stop is not None and stop():
                continue
            rows = order[:size] if size < m else np.arange(m)
            s = np.linalg.svd(A[rows], compute_uv=False)
            sv_cache[size] = s
        sq = s * s
        tail = np.concatenate([np.cumsum(sq[::-1])[::-1], [0.0]])  # tail[r] = sum_{j>=r} sq_j (0-based)
        need = size * eps * eps * (1 + SLACK) + 1e-12
        ok = np.nonzero(tail > need)[0]
        if not ok.size:
            continue
        r = int(ok.max())  # sum_{j>r} s_j^2 (1-based) = tail[r] (0-based)
        if best is None or r + 1 > best.rank:
            rows = order[:size] if size < m else np.arange(m)
            best = FrobeniusCertificate(eps, np.sort(rows), r, f"frobenius(rows={size})")
    return best


def group_families(N: int) -> list[tuple[str, list[np.ndarray]]]:
    """Candidate partitions of the keys: singletons, then contiguous blocks of widths
    2, 3, 4, 6, 8, 12, 16 at offsets 0 and half a block."""
    fams = [("singletons", [np.array([j]) for j in range(N)])]
    for w in (2, 3, 4, 6, 8, 12, 16):
        if w >= N:
            break
        for off in sorted({0, w // 2}):
            edges = list(range(off, N, w))
            if edges[0] != 0:
                edges = [0] + edges
            edges.append(N)
            groups = [np.arange(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]
            fams.append((f"blocks(w={w},off={off})", groups))
    return fams


def coattended_groups(A: np.ndarray, theta: float) -> list[tuple[np.ndarray, int]]:
    """Query-driven key groups: for every query ``q``, the keys it attends with at least
    ``theta`` times its largest weight (``(group, q)`` pairs; groups may overlap -- the
    greedy selection keeps the chosen ones disjoint). Blocks of co-attended keys, in any key
    order, are found this way."""
    thr = theta * A.max(axis=1, keepdims=True)
    return [(np.nonzero(A[q] >= thr[q])[0], q) for q in range(A.shape[0])]


def _greedy_groups(A: np.ndarray, eps: float, cands: list[tuple[np.ndarray, int]]):
    """Greedy selection of disjoint (group, witness query) pairs keeping every margin ``> eps``.

    Candidates are taken in order of the witness's own mass on its group; one is added when
    its group is disjoint from the chosen ones, its query is new, its own margin exceeds
    ``eps`` and every chosen witness keeps a margin above ``eps``.
    """
    m, N = A.shape
    thr = eps * (1 + SLACK) + 1e-12
    own = np.array([A[q, g].sum() for g, q in cands])
    order = np.argsort(-own, kind="stable")
    chosen_mass = np.zeros(m)  # mass of each query on the chosen groups
    key_used = np.zeros(N, dtype=bool)
    used_q = np.zeros(m, dtype=bool)
    wq: list[int] = []
    wg: list[np.ndarray] = []
    w_own: list[float] = []
    for c in order:
        g, q = cands[c]
        val = own[c]
        if val <= thr:
            break
        if used_q[q] or key_used[g].any() or val - chosen_mass[q] <= thr:
            continue
        col = A[:, g].sum(axis=1)
        if wq:
            qa = np.array(wq)
            if (2 * np.array(w_own) - chosen_mass[qa] - col[qa]).min() <= thr:
                continue
        wq.append(q)
        wg.append(g)
        w_own.append(val)
        used_q[q] = True
        key_used[g] = True
        chosen_mass += col
    return wq, wg


def key_groups(A: np.ndarray, eps: float, per_group: int = 4) -> KeyGroupCertificate | None:
    """Best key-group (Varah) certificate over the partitions of :func:`group_families`
    (each group with its ``per_group`` heaviest queries as candidate witnesses) and the
    co-attended groups of :func:`coattended_groups` (``theta`` = 0.5, 0.25, 0.1)."""
    families = []
    for name, groups in group_families(A.shape[1]):
        G = np.stack([A[:, g].sum(axis=1) for g in groups], axis=1)
        top = np.argsort(-G, axis=0, kind="stable")[:per_group]
        families.append((name, [(groups[gi], int(q)) for gi in range(len(groups))
                                for q in top[:, gi]]))
    for theta in (0.5, 0.25, 0.1):
        families.append((f"coattended(theta={theta:g})", coattended_groups(A, theta)))
    best = None
    for name, cands in families:
        wq, wg = _greedy_groups(A, eps, cands)
        if wq and (best is None or len(wq) > best.rank):
            best = KeyGroupCertificate(eps, np.array(wq), tuple(wg), f"key-groups/{name}")
    return best

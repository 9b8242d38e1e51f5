"""Lower certificates: proofs that every ``B`` with ``||A - B||_inf <= eps`` has rank ``>= k``
(docs/theory/lower.md).

Each function returns candidate certificates from :mod:`softrank.checker.certificates`;
none of them is a bound until the checker accepts it. The searches:

* :func:`trivial` -- ``||A||_inf > eps`` gives 1;
* :func:`frobenius` -- the Frobenius tail on the whole matrix and on nested row subsets
  (rows in the order of a column-pivoted QR of ``A^T``: the most linearly independent first);
* :func:`key_groups` -- the decoded inverse with Varah's bound: disjoint key groups
  (singletons; contiguous blocks of several widths and offsets, for local heads; groups of
  keys co-attended by one query, for blocks in any order), each with a witness query,
  chosen greedily so that every witness keeps a diagonal-dominance margin
  above ``eps``;
* :class:`LPDecoder` -- for ``R`` the indicators of the first ``k`` groups of an ordering,
  the decoder ``L`` minimising ``||L||_inf`` subject to ``L A R = I`` (one basis-pursuit LP
  per row of ``L``, HiGHS). The least achievable ``||L||_inf`` is non-decreasing in ``k``
  (each added group adds a constraint to every existing row), so a bisection over ``k`` is
  exact; results are cached per ``k`` and shared by all tolerances;
* :class:`SubspaceSearch` -- subspace certificates on the top right singular vectors (and a
  local search around the best), each key screened by :func:`basis_pursuit_candidates`
  before its LP;
* :class:`SubspaceClimb` -- a subspace one dimension above the best lower end, turned by
  ascent steps on ``beta(S)`` (the least ``||A x||_inf`` over ``x`` in ``S`` with
  ``||x||_inf = 1``) until ``beta(S) > eps``, then certified by :class:`SubspaceSearch`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import scipy.linalg

from ..checker import (
    DecodedInverseCertificate,
    FrobeniusCertificate,
    KeyGroupCertificate,
    SubspaceCertificate,
    TrivialCertificate,
)
from ..errors import InvalidArgumentError
from ..validation import check_real
from .linalg import weighted_solves
from .lp import BasisPursuit, RangeLP

__all__ = [
    "trivial", "frobenius", "row_order", "key_groups", "group_families", "coattended_groups",
    "LPDecoder", "SubspaceSearch", "SubspaceClimb", "truncated_pseudoinverse",
    "basis_pursuit_candidates", "climb_starts",
]

#: Relative slack demanded in the certifiers' own (unchecked) arithmetic so that the
#: checker's rounding bounds rarely reject a candidate at the edge.
SLACK = 1e-9


def largest_certified(certificate, lo: int, hi: int):
    """The certificate of the largest ``k`` in ``[lo, hi]`` for which ``certificate(k)`` is not
    None, assuming that holds up to some ``k`` and fails above (nested families): ``lo``
    first, then bisection. None if ``lo`` fails."""
    if hi < lo:
        return None
    best = certificate(lo)
    if best is None:
        return None
    a, b = lo, hi  # invariant: a is certified
    while a < b:
        mid = (a + b + 1) // 2
        c = certificate(mid)
        if c is not None:
            a, best = mid, c
        else:
            b = mid - 1
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


def _subset_sizes(m: int) -> list[int]:
    sizes = {m}
    s = 2
    while s < m:
        sizes.add(s)
        s = int(np.ceil(s * 1.25)) if s >= 8 else s + 1
    return sorted(sizes)


def frobenius(A: np.ndarray, eps: float, order: np.ndarray, sv_cache: dict) -> FrobeniusCertificate | None:
    """Best Frobenius-tail certificate over the whole matrix and prefixes of ``order``.

    For rows ``I`` with singular values ``s``: the largest ``r`` with
    ``sum_{j>r} s_j^2 > |I| eps^2`` gives ``r_eps >= r + 1``. ``sv_cache`` maps a subset size
    to its singular values (shared across tolerances).
    """
    m = A.shape[0]
    best = None
    for size in _subset_sizes(m):
        s = sv_cache.get(size)
        if s is None:
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


def basis_pursuit_candidates(G: np.ndarray, weights: np.ndarray, B: np.ndarray, score,
                             bound: float, iters: int = 10, delta: float = 1e-12):
    """Cheap candidates for ``min sum_i w_i |z_i|  s.t.  G z = b`` for many ``b`` at once.

    The weighted least-norm solution ``z = D G^T (G D G^T)^-1 b`` with ``D = diag(1 / w)``,
    then up to ``iters`` steps of iteratively reweighted least squares with
    ``D = diag((|z_i| + delta) / w_i)`` (each step a majorisation of the weighted l1 norm),
    on the right-hand sides whose best score is still ``>= bound``; the systems
    ``G D_b G^T`` of those right-hand sides are formed by one matrix product
    (:func:`softrank.certifiers.linalg.weighted_solves`). Every iterate solves ``G z = b`` up to
    rounding and is scored by the caller's own objective, so a candidate is only ever an
    upper bound of the LP's optimum.

    Parameters
    ----------
    G : (k, n) float64 ndarray
    weights : (n,) float64 ndarray, positive
    B : (nb, k) float64 ndarray
        Right-hand sides, one per row.
    score : callable
        ``score(Z, idx) -> (len(idx),)`` values of the iterates ``Z`` for the right-hand
        sides ``idx`` (``inf`` for a non-finite one); lower is better.
    bound : float
        A right-hand side whose best score is below it stops iterating.
    iters : int
    delta : float

    Returns
    -------
    Z : (nb, n) float64 ndarray
        Each right-hand side's best iterate.
    values : (nb,) float64 ndarray
        Their scores.
    """
    k, n = G.shape
    nb = B.shape[0]
    eye = np.eye(k)
    best_val = np.full(nb, np.inf)
    best_Z = np.zeros((nb, n))
    with np.errstate(all="ignore"):
        d = 1.0 / weights
        M = (G * d) @ G.T
        ridge = 1e-12 * max(np.trace(M) / k, 1e-300)
        try:
            Z = (np.linalg.solve(M + ridge * eye, B.T).T @ G) * d  # (nb, n)
        except np.linalg.LinAlgError:
            return best_Z, best_val
        idx = np.arange(nb)
        for t in range(iters + 1):
            v = np.asarray(score(Z, idx), dtype=np.float64)
            v[~np.isfinite(v)] = np.inf
            better = v < best_val[idx]
            best_val[idx[better]], best_Z[idx[better]] = v[better], Z[better]
            keep = best_val[idx] >= bound
            if t == iters or not keep.any():
                break
            idx, Z = idx[keep], Z[keep]
            D = (np.abs(Z) + delta) / weights
            try:
                Y = weighted_solves(G, D, B[idx])
            except np.linalg.LinAlgError:
                break
            Z = (Y @ G) * D
    return best_Z, best_val


class SubspaceSearch:
    """Subspace certificates on a nested family of subspaces (docs/theory/lower.md#subspace-certificate).

    For ``S_k`` = the span of the first ``k`` columns of ``V`` (e.g. top right singular
    vectors), ``R = V_k (V_k[J])^{-1}`` with ``J`` from a column-pivoted QR of ``V_k^T`` (so
    ``R[J] = I``), and for every key ``j`` the LP
    ``min eps ||lam||_1 + ||mu||_1  s.t.  (A R)^T lam + R^T mu = r_j`` (a weighted basis
    pursuit, HiGHS) gives row ``j`` of ``Lam`` and ``M``. By LP duality the optimum is below 1
    for every ``j`` iff ``||A x||_inf > eps ||x||_inf`` on all of ``S_k``; the subspaces are
    nested, so that holds for an initial run of ``k`` and a bisection finds its end. Values
    per ``k`` are cached per ``(k, eps)`` (the LP depends on ``eps``). :meth:`extend` then
    searches locally for a larger certified subspace around the best one found.

    The keys' LPs run hardest first: a key whose LP ended a certificate is moved to the front
    of an order shared by the searches of one operator (``key_order``), so that a failing
    subspace usually fails on its first LP instead of after a few dozen.
    """

    def __init__(self, A: np.ndarray, V: np.ndarray, name: str, key_order: list | None = None):
        self.A = A
        self.V = V
        self.name = name
        self._cache: dict = {}
        self.key_order = key_order if key_order is not None else list(range(A.shape[1]))

    def certificate(self, k: int, eps: float) -> SubspaceCertificate | None:
        key = (k, eps)
        if key in self._cache:
            return self._cache[key]
        A = self.A
        m, N = A.shape
        Vk = self.V[:, :k]
        _, _, piv = scipy.linalg.qr(Vk.T, mode="economic", pivoting=True)
        J = np.sort(piv[:k])
        try:
            R = np.linalg.solve(Vk[J].T, Vk.T).T  # R = Vk (Vk[J])^{-1}
        except np.linalg.LinAlgError:
            self._cache[key] = None
            return None
        R[J] = np.eye(k)  # exact identity rows (the solve leaves rounding there)
        AR = A @ R
        G = np.hstack([AR.T, R.T])  # (k, m + N)
        weights = np.concatenate([np.full(m, eps), np.ones(N)])
        bound = 1.0 - 1e-7
        order = self.key_order

        def value(j, z):  # the key's condition c_j (< 1 needed), as the checker states it
            lam, mu = z[:m], z[m:]
            return (eps * np.abs(lam).sum() + np.abs(mu).sum()
                    + np.abs(R[j] - AR.T @ lam - R.T @ mu).sum())

        bp = None

        def fail(j):  # j ended this subspace: hardest first next time
            pos = order.index(j)
            if pos:
                order.insert(0, order.pop(pos))
            self._cache[key] = None

        def exact(j):
            nonlocal bp
            if bp is None:
                bp = BasisPursuit(G, weights)
            z = bp.solve(R[j])
            val = np.inf if z is None else value(j, z)
            return z, val

        Lam = np.empty((N, m))
        Mu = np.empty((N, N))
        # 1. the key that ended the last subspace: a subspace that fails usually fails there
        j0 = order[0]
        z, val = exact(j0)
        if not np.isfinite(val) or val >= bound:
            fail(j0)
            return None
        Lam[j0], Mu[j0] = z[:m], z[m:]
        # 2. screen the other keys with candidates (any z bounds the LP's optimum above)
        rest = np.array([j for j in order if j != j0], dtype=np.int64)
        best_val = np.full(N, np.inf)
        best_z = np.zeros((N, m + N))
        if rest.size:
            def score(Z, idx):
                lam, mu = Z[:, :m], Z[:, m:]
                return (eps * np.abs(lam).sum(axis=1) + np.abs(mu).sum(axis=1)
                        + np.abs(R[rest[idx]] - lam @ AR - mu @ R).sum(axis=1))

            best_z[rest], best_val[rest] = basis_pursuit_candidates(G, weights, R[rest], score,
                                                                    bound)
        # 3. the keys still at or above the bound exactly, largest candidate value first
        need = [int(j) for j in rest if not best_val[j] < bound]
        for j in sorted(need, key=lambda j: -best_val[j]):
            z, val = exact(j)
            if not np.isfinite(val) or val >= bound:
                fail(j)
                return None
            if val < best_val[j]:
                best_val[j], best_z[j] = val, z
        for j in rest:
            Lam[j], Mu[j] = best_z[j, :m], best_z[j, m:]
        cert = SubspaceCertificate(eps, J, R, Lam, Mu, f"subspace/{self.name}")
        self._cache[key] = cert
        return cert

    def extend(self, eps: float, cert: SubspaceCertificate, n_cand: int = 8,
               max_steps: int = 6) -> SubspaceCertificate | None:
        """Local search: grow ``range(cert.R)`` one direction at a time while the subspace
        still certifies. Candidates: the next right singular directions of ``V``, unit vectors
        of the keys with the largest column mass, and the most peaked rows of ``A`` (a key
        pattern a query attends). Returns the grown certificate, or None if no step held."""
        A = self.A
        m, N = A.shape
        basis = cert.R
        k0 = basis.shape[1]
        colmass = A.sum(axis=0)
        cands = [self.V[:, j] for j in range(k0, min(k0 + n_cand, self.V.shape[1]))]
        cands += [np.eye(N)[j] for j in np.argsort(-colmass, kind="stable")[:n_cand]]
        cands += [A[i] / A[i].max() for i in np.argsort(-A.max(axis=1), kind="stable")[:n_cand]]
        best = None
        for _ in range(max_steps):
            if basis.shape[1] >= min(m, N):
                break
            grown = None
            for v in cands:
                B = np.column_stack([basis, v])
                if np.linalg.matrix_rank(B) <= basis.shape[1]:
                    continue
                c = SubspaceSearch(A, B, f"{self.name}+local",
                                   self.key_order).certificate(B.shape[1], eps)
                if c is not None:
                    grown = (B, c)
                    break
            if grown is None:
                break
            basis, best = grown
        return best

    def best(self, eps: float, lo: int, hi: int) -> SubspaceCertificate | None:
        """Largest ``k`` in ``[lo, hi]`` with a certificate, by bisection."""
        return largest_certified(lambda k: self.certificate(k, eps), lo,
                                 min(hi, self.V.shape[1], self.A.shape[0]))


#: A start's label, as it appears in the method ``subspace/<label>+climb``: ``svd`` is the
#: singular start's own.
_LABEL = re.compile(r"(?!svd$)[A-Za-z0-9][A-Za-z0-9._-]{0,39}")


def _finite_columns(arg: str, X, N: int, cols: str) -> np.ndarray:
    """``X`` as a float64 ``(N, cols)`` array; InvalidArgumentError naming ``arg`` if it is
    not a real (integer or float) array, has another shape or a non-finite entry."""
    try:
        X = np.asarray(X)
    except ValueError as exc:  # ragged nested sequences
        raise InvalidArgumentError(f"{arg} must be a finite ({N}, {cols}) array: {exc}") from None
    if X.dtype.kind not in "iuf":
        raise InvalidArgumentError(f"{arg} must be a real ({N}, {cols}) array, got dtype "
                                   f"{X.dtype}")
    X = X.astype(np.float64, copy=False)
    if X.ndim != 2 or X.shape[0] != N or not np.isfinite(X).all():
        raise InvalidArgumentError(f"{arg} must be a finite ({N}, {cols}) array, got shape "
                                   f"{X.shape}" + ("" if X.ndim != 2 or X.shape[0] != N
                                                   else " with a non-finite entry"))
    return X


def _brief(x) -> str:
    """``repr(x)`` on one line, at most 80 characters (for error messages)."""
    return " ".join(repr(x).split())[:80]


#: Largest magnitude of a start's entries: beyond it the QR that orthonormalises a start can
#: overflow (a span does not change with scale, so a start is rescaled, not clipped).
_START_MAX = 1e150


def _checked_start(item, N: int, k: int, arg: str = "starts") -> tuple[str, np.ndarray]:
    """One item given by ``starts(k)`` (or ``screened(k)``, named by ``arg``) of
    :meth:`SubspaceClimb.best` as ``(label, B)``, ``B`` a float64 ``(N, k)`` array with
    entries of magnitude at most ``1e150``; InvalidArgumentError naming it otherwise."""
    if not (isinstance(item, tuple) and len(item) == 2
            and isinstance(item[0], str) and _LABEL.fullmatch(item[0])):
        raise InvalidArgumentError(
            f"{arg}({k}) must give (label, B) pairs, the label letters, digits, '.', '_' or "
            f"'-' and not 'svd', got {_brief(item)}")
    label, B = item
    name = f"start {label!r}" if arg == "starts" else f"{arg} start {label!r}"
    B = _finite_columns(name, B, N, str(k))
    if B.shape[1] != k:
        raise InvalidArgumentError(f"{name} at dimension {k} must have {k} columns, "
                                   f"got {B.shape[1]}")
    if B.size and np.abs(B).max() > _START_MAX:
        raise InvalidArgumentError(f"{name} must have entries of magnitude at most 1e150 "
                                   f"(rescale it: its span is what counts), got "
                                   f"{np.abs(B).max():.3g}")
    return label, B


def climb_starts(A: np.ndarray, V: np.ndarray, order: np.ndarray, k: int,
                 random_rows: int = 2, svd_mix: int = 1,
                 seed: int = 0) -> list[tuple[str, np.ndarray]]:
    """Starts of :class:`SubspaceClimb` at dimension ``k`` besides the singular one
    (docs/theory/lower.md#subspace-climb).

    First ``rows``, the span of the first ``k`` rows of ``A`` in ``order`` (a column-pivoted
    QR of ``A^T``: :func:`row_order`); then, alternating, ``random_rows`` draws of
    ``random-rows``, the span of ``k`` distinct rows of ``A`` drawn uniformly, and
    ``svd_mix`` draws of ``svd-mix``, ``k`` Gaussian combinations of the top ``min(2k, p)``
    right singular vectors. The draws come from ``numpy.random.default_rng((seed, k))``:
    the same for every tolerance and run.

    Parameters
    ----------
    A : (m, N) float64 ndarray
    V : (N, p) float64 ndarray
        Right singular vectors, by decreasing singular value.
    order : (m,) int ndarray
        Row order (:func:`row_order`).
    k : int
        Dimension of the starts, ``1 <= k <= min(m, N, p)``.
    random_rows, svd_mix : int
        Random starts of each kind.
    seed : int
        The generator's seed, ``>= 0``.

    Returns
    -------
    list of (str, (N, k) float64 ndarray)
        Label and basis, not orthonormalised (the climb does that). A basis can be
        rank-deficient: ``rows`` and ``random-rows`` where ``A`` has repeated or dependent
        rows, ``svd-mix`` never when ``p >= k`` (Gaussian combinations of ``min(2k, p)``
        orthonormal columns have rank ``k`` almost surely).

    Raises
    ------
    InvalidArgumentError
        If ``A`` is not a finite 2-D float64 array, ``V`` not a finite ``(N, p)`` array,
        ``order`` not a permutation of the rows,
        ``k`` outside ``[1, min(m, N, p)]``, or a count or the seed negative or not an
        integer.
    """
    if not (isinstance(A, np.ndarray) and A.ndim == 2 and A.dtype == np.float64
            and np.isfinite(A).all()):
        raise InvalidArgumentError(f"A must be a finite 2-D float64 array, got "
                                   f"{type(A).__name__} {getattr(A, 'shape', '')}")
    m, N = A.shape
    V = _finite_columns("V", V, N, "p")
    order = np.asarray(order)
    if order.dtype.kind not in "iu" or sorted(order.tolist()) != list(range(m)):
        raise InvalidArgumentError(f"order must be a permutation of range({m}), got "
                                   f"{order.size} entries of dtype {order.dtype}")
    if isinstance(k, bool) or not (isinstance(k, (int, np.integer))
                                   and 1 <= k <= min(m, N, V.shape[1])):
        raise InvalidArgumentError(f"k must be an integer in [1, {min(m, N, V.shape[1])}], "
                                   f"got {k!r}")
    for arg, val in (("random_rows", random_rows), ("svd_mix", svd_mix), ("seed", seed)):
        if isinstance(val, bool) or not (isinstance(val, (int, np.integer)) and val >= 0):
            raise InvalidArgumentError(f"{arg} must be an integer >= 0, got {val!r}")
    rng = np.random.default_rng((int(seed), int(k)))
    out = [("rows", A[order[:k]].T.copy())]
    p = min(2 * k, V.shape[1])
    for i in range(max(random_rows, svd_mix)):
        if i < random_rows:
            out.append(("random-rows", A[np.sort(rng.choice(m, k, replace=False))].T.copy()))
        if i < svd_mix:
            out.append(("svd-mix", V[:, :p] @ rng.standard_normal((p, k))))
    return out


class SubspaceClimb:
    """Ascent on ``beta(S)`` to a subspace certificate one dimension above the best lower end
    (docs/theory/lower.md#subspace-climb).

    A ``k``-dimensional ``S = span(B)`` certifies ``r_eps >= k`` iff
    ``beta(S) = min_j LP_j(S) > eps``, where
    ``LP_j(S) = min ||A x||_inf  s.t.  x in S, x_j = 1, ||x||_inf <= 1``
    (a ``k + 1``-column LP: ``x = B c``, variables ``c`` and ``t >= |A B c|``; an infeasible
    ``LP_j`` -- no ``x`` in ``S`` peaks at key ``j`` -- counts as ``+inf``). The derivative
    of ``LP_j`` in ``B`` is read off its duals: with ``(c, t)`` optimal and ``y`` the row
    duals, ``d LP_j / d B = -(A^T y_A + y_X) c^T`` (``y_A`` the duals of the rows
    ``|A B c| <= t``, ``y_X`` of the rows of ``B c``); by stationarity in ``c`` that
    direction is orthogonal to ``S``, a rotation of ``S``.

    :meth:`climb` starts from ``B`` and repeats: the sum of these directions over the keys
    at the least value of a small active set moves ``B`` (then re-orthonormalised), with
    the step halved until the active set's least value rises (the active keys are solved
    in the order most likely to fail, and the first at or below that value rejects the
    step without the others: ``values(..., stop_at=)``); every ``full_every`` steps, and
    whenever the active set's least value passes the goal, the watched keys are solved
    again (:meth:`climb`) and the worst join the active set. It stops when ``beta(S)``
    exceeds the goal ``eps + margin min(eps, 1 - eps)`` (then :class:`SubspaceSearch` builds
    the certificate from ``S`` and the checker decides), when no step raises it, when the
    goal is out of reach at the mean rate of ascent so far, or when its deterministic budget
    of ``LP_j`` evaluations is spent (a solve, or a proof of infeasibility by
    :meth:`farkas`; each solve also stops at HiGHS's 60 s time limit, as every LP of
    softrank's does). :meth:`best` climbs from the top ``lo`` right singular vectors and,
    after each certificate, from the certified ``S`` plus the next singular direction; where
    that fails, from the further starts it is given (:func:`climb_starts`), and where those
    fail, from the best of the screened starts it is given.
    The climb is a heuristic: nothing it computes is a bound until the certificate built
    from ``S`` passes the checker.

    Parameters
    ----------
    A : (m, N) float64 ndarray
    V : (N, p) float64 ndarray
        Starting directions, orthonormal columns (the right singular vectors).
    name : str
        Family label in the certificate's method (``subspace/<name>+climb``).
    key_order : list of int, optional
        Shared hardest-first key order of :class:`SubspaceSearch`.
    lps_per_key : int
        The budget of one climb at dimension ``k``: ``lps_per_key * N * min(1, 16 / (k + 1))``
        ``LP_j`` evaluations (a solve's cost grows with ``k``).
    max_entries : int
        No climb at a dimension ``k`` whose LPs have more than ``max_entries`` constraint
        entries, ``(k + 1) (2 m + N)``.
    full_every, active : int
        Steps between evaluations of the watched keys; keys added to the active set each time.
    margin : float
        Relative margin of the goal over ``eps``.

    Raises
    ------
    InvalidArgumentError
        If ``V`` is not a finite ``(N, p)`` array, ``key_order`` not a permutation of the
        keys, an integer setting below 1 or ``margin`` negative or not finite.
    """

    def __init__(self, A: np.ndarray, V: np.ndarray, name: str = "svd",
                 key_order: list | None = None, lps_per_key: int = 12,
                 max_entries: int = 20_000, full_every: int = 10, active: int = 4,
                 margin: float = 1e-4):
        m, N = A.shape
        V = _finite_columns("V", V, N, "p")
        for arg, val in (("lps_per_key", lps_per_key), ("max_entries", max_entries),
                         ("full_every", full_every), ("active", active)):
            if not (isinstance(val, (int, np.integer)) and val >= 1):
                raise InvalidArgumentError(f"{arg} must be an integer >= 1, got {val!r}")
        if not (np.isfinite(margin) and margin >= 0):
            raise InvalidArgumentError(f"margin must be finite and >= 0, got {margin!r}")
        order = list(range(N)) if key_order is None else key_order
        if sorted(order) != list(range(N)):
            raise InvalidArgumentError(f"key_order must be a permutation of range({N}), got "
                                       f"{len(order)} keys")
        self.A = A
        self.V = V
        self.name = name
        self.key_order = order
        self.budget = lps_per_key * N
        self.max_entries = max_entries
        self.full_every = full_every
        self.n_active = active
        self.margin = margin
        self.lps = 0  # LP_j evaluations spent (all climbs): solves and Farkas proofs
        # key -> row duals of its last exact LP, kept per eps: the climbs at one eps never
        # depend on which other tolerances the same operator is bracketed at
        self._duals_by_eps: dict = {}
        self._duals: dict = {}
        # key -> its last Farkas vector, or None, while its LP_j is infeasible (the key is
        # then tried by farkas() before a solve); kept per eps like the duals
        self._farkas_by_eps: dict = {}
        self._farkas: dict = {}
        self.proofs = 0  # LP_j found infeasible by a Farkas vector, without a solve
        self._last_values: dict = {}  # key -> (LP_j, derivative) of the last climb's end
        # (eps, k) -> {key: the simplex basis of its last solve}: the next solve of the key
        # starts there (the subspace has turned a little since), not from the previous key's
        # basis (docs/theory/lower.md#subspace-climb: 2.4x fewer simplex iterations on
        # MiniLM heads of width 128, and the same ends)
        self._bases_by_eps: dict = {}
        self._eps = None

    def _at_eps(self, eps: float) -> None:
        """Point :meth:`values` at the duals and Farkas vectors kept for ``eps``."""
        self._duals = self._duals_by_eps.setdefault(eps, {})
        self._farkas = self._farkas_by_eps.setdefault(eps, {})
        self._eps = eps

    def _model(self, B: np.ndarray) -> RangeLP:
        m, N = self.A.shape
        k = B.shape[1]
        AB = self.A @ B
        col = np.ones((m, 1))
        G = np.vstack([np.hstack([AB, -col]), np.hstack([AB, col]),
                       np.hstack([B, np.zeros((N, 1))])])
        cost = np.zeros(k + 1)
        cost[-1] = 1.0
        lower = np.concatenate([np.full(k, -np.inf), [0.0]])
        upper = np.full(k + 1, np.inf)
        row_lower = np.concatenate([np.full(m, -np.inf), np.zeros(m), -np.ones(N)])
        row_upper = np.concatenate([np.zeros(m), np.full(m, np.inf), np.ones(N)])
        # the keys' LPs differ in one row's bounds: no presolve (it would run on every solve),
        # primal simplex (1.3-1.9x faster than dual here, measured on MiniLM heads), no
        # scaling (the entries are already of order one: A is row-stochastic, B orthonormal;
        # 0.97x the bracket time on MiniLM heads of widths 64 and 128, and the same ends on
        # the default panel: docs/theory/lower.md#subspace-climb)
        return RangeLP(G, cost, lower, upper, row_lower, row_upper,
                       options={"presolve": "off", "simplex_strategy": 4,
                                "simplex_scale_strategy": 0})

    def lower_bounds(self, B: np.ndarray, keys) -> np.ndarray:
        """Lower bounds of ``LP_j(span B)`` from the duals of each key's last exact solve
        (on any earlier ``B``; ``-inf`` for a key without one): the box rows' duals are
        corrected by ``B B^T`` so that the stationarity in ``c`` holds again on ``B``, and
        the dual objective of the corrected point bounds the optimum below (weak duality).
        Used only to skip LPs; nothing here is a certificate."""
        m = self.A.shape[0]
        keys = list(keys)
        out = np.full(len(keys), -np.inf)
        have = [i for i, j in enumerate(keys) if j in self._duals]
        if not have:
            return out
        Y = np.stack([self._duals[keys[i]] for i in have])
        y12 = np.minimum(Y[:, :m], 0.0) + np.maximum(Y[:, m:2 * m], 0.0)
        y3 = Y[:, 2 * m:]
        r = -((y12 @ self.A + y3) @ B)
        y3 = y3 + r @ B.T
        own = y3[np.arange(len(have)), [keys[i] for i in have]]
        out[have] = own - (np.abs(y3).sum(axis=1) - np.abs(own))
        return out

    def farkas(self, B: np.ndarray, keys, start: dict | None = None,
               iters: int = 8) -> dict:
        """``{j: y}`` for the keys ``j`` whose ``LP_j(span B)`` is proved infeasible: ``y``
        orthogonal to ``S = span B`` with ``y_j > (1 + 1e-6) sum_{i != j} |y_i|``. Then every
        ``x`` in ``S`` has ``y^T x = 0``, so ``y_j |x_j| <= sum_{i != j} |y_i| |x_i|`` and
        ``|x_j| < max_i |x_i|``: no ``x`` in ``S`` peaks at ``j``, and the LP (``x_j = 1``,
        ``||x||_inf <= 1``) is infeasible beyond its solver's tolerances, so a solve would
        give the same value (``inf``). As computed, ``y`` is orthogonal to ``S`` only up to
        rounding: for ``x = B c`` with ``||x||_inf = 1``, ``|y^T x| <= sqrt(N) ||B^T y||_2``,
        so the test asks ``y_j - (1 + 1e-6) sum_{i != j} |y_i|`` to exceed
        ``sqrt(N) ||B^T y||_2 + 1e-9 ||y||_1`` (a key in ``S`` itself, whose projected
        ``e_j`` is rounding noise, is never proved).

        ``y`` is sought as ``min sum_{i != j} |y_i|`` subject to ``B^T y = 0``, ``y_j = 1``
        by at most ``iters`` steps of reweighted least squares, batched over the keys, from
        ``start[j]`` projected onto ``S``'s complement (a key's vector on an earlier ``B``)
        or from ``e_j`` projected likewise. A key not proved is left out; nothing here is a
        certificate (the climb's result is certified and checked on its own).

        Parameters
        ----------
        B : (N, k) float64 ndarray
            Orthonormal basis of ``S``.
        keys : iterable of int
            The keys to try.
        start : dict, optional
            ``{j: y (N,)}``, a starting vector per key (``None`` values are ignored).
        iters : int
            Reweighted least-squares steps at most.

        Returns
        -------
        dict
            ``{j: y (N,)}`` for the keys proved infeasible (docs/theory/lower.md, "Subspace
            climb").

        Raises
        ------
        InvalidArgumentError
            If ``B`` is not a finite ``(N, k)`` array with orthonormal columns (within
            ``1e-8``), a key is not an integer in ``[0, N)``, or ``iters`` is not an integer
            ``>= 0``.
        """
        N = self.A.shape[1]
        B = _finite_columns("B", B, N, "k")
        k = B.shape[1]
        if not np.allclose(B.T @ B, np.eye(k), rtol=0.0, atol=1e-8):
            raise InvalidArgumentError("B must have orthonormal columns (B^T B = I within "
                                       "1e-8)")
        keys = list(keys)
        bad = [j for j in keys if not (isinstance(j, (int, np.integer))
                                       and not isinstance(j, (bool, np.bool_)) and 0 <= j < N)]
        if bad:
            raise InvalidArgumentError(f"keys must be integers in [0, {N}), got {bad[0]!r}")
        if not (isinstance(iters, (int, np.integer)) and iters >= 0):
            raise InvalidArgumentError(f"iters must be an integer >= 0, got {iters!r}")
        if not keys:
            return {}
        start = start or {}
        J = np.asarray(keys)
        Y = np.zeros((J.size, N))
        Y[np.arange(J.size), J] = 1.0
        for i, j in enumerate(keys):
            if start.get(j) is not None:
                Y[i] = start[j]
        Y -= (Y @ B) @ B.T  # onto the orthogonal complement of S
        out = {}
        BB = (B[:, :, None] * B[:, None, :]).reshape(N, k * k)
        todo = np.arange(J.size)
        for it in range(iters + 1):
            Yt, Jt = Y[todo], J[todo]
            own = Yt[np.arange(todo.size), Jt]
            l1 = np.abs(Yt).sum(axis=1)
            slack = np.sqrt(N) * np.linalg.norm(Yt @ B, axis=1) + 1e-9 * l1
            ok = own - (1 + 1e-6) * (l1 - np.abs(own)) > slack
            for i in todo[ok]:
                out[keys[i]] = Y[i].copy()
            todo = todo[~ok]
            if it == iters or todo.size == 0:
                break
            # one IRLS step for min sum w_i y_i^2 s.t. [B, e_j]^T y = (0, 1), w = 1 / |y|
            Jt = J[todo]
            winv = np.maximum(np.abs(Y[todo]), 1e-9)
            winv[np.arange(todo.size), Jt] = 1e6  # y_j is fixed by its constraint
            M = np.empty((todo.size, k + 1, k + 1))
            M[:, :k, :k] = (winv @ BB).reshape(todo.size, k, k)
            wj = winv[np.arange(todo.size), Jt]
            M[:, :k, k] = M[:, k, :k] = wj[:, None] * B[Jt]
            M[:, k, k] = wj
            rhs = np.zeros((todo.size, k + 1, 1))
            rhs[:, k, 0] = 1.0
            try:
                lam = np.linalg.solve(M, rhs)[..., 0]
            except np.linalg.LinAlgError:
                break
            Yn = winv * (lam[:, :k] @ B.T)
            Yn[np.arange(todo.size), Jt] += wj * lam[:, k]
            if not np.isfinite(Yn).all():
                break
            Y[todo] = Yn - (Yn @ B) @ B.T
        return out

    def values(self, B: np.ndarray, keys, skip_above: float | None = None,
               stop_at: float | None = None) -> dict:
        """``{j: (LP_j(S), d LP_j / d B)}`` for ``S = span(B)``, ``B (N, k)`` orthonormal;
        ``(inf, None)`` for a key whose LP has no optimal solution. With ``skip_above``, a
        key whose :meth:`lower_bounds` exceeds it is not solved: ``(bound, None)``. A key
        whose LP was infeasible at its last evaluation, or that has not been solved yet, is
        first tried by :meth:`farkas`: a proof of infeasibility answers ``(inf, None)``
        without a solve (and counts in the budget as one); those keys come first in the
        result. The other keys are solved in the order given. With ``stop_at``, the first
        solve whose value is at or below it ends the evaluation: the keys after it are left
        out (the least value is then at most ``stop_at`` whatever theirs are); keys answered
        without a solve never end it. A key's simplex starts from the basis of its own last
        solve at this ``eps`` and dimension (on an earlier ``B``); a
        key without one starts from the basis the instance holds (the previous key's, or the
        all-slack basis for the first solve on this ``B``). The start can move a value by
        rounding, or pick another optimum (and so another derivative) where the optimum is
        not unique. A ``skip_above`` or ``stop_at`` that is not a finite real number
        (:func:`softrank.validation.check_real`) raises
        :class:`~softrank.errors.InvalidArgumentError`."""
        m, N = self.A.shape
        k = B.shape[1]
        keys = list(keys)
        skip_above = None if skip_above is None else check_real(skip_above, "skip_above")
        stop_at = None if stop_at is None else check_real(stop_at, "stop_at")
        out = {}
        if skip_above is not None:
            lb = self.lower_bounds(B, keys)
            for j, v in zip(keys, lb):
                if v > skip_above:
                    out[j] = (float(v), None)
            keys = [j for j in keys if j not in out]
        proved = self.farkas(B, [j for j in keys
                                 if j in self._farkas or j not in self._duals], self._farkas)
        for j, y in proved.items():
            self.lps += 1
            self.proofs += 1
            self._farkas[j] = y
            out[j] = (np.inf, None)
        keys = [j for j in keys if j not in proved]
        if not keys:
            return out
        lp = self._model(B)
        bases = self._bases_by_eps.setdefault((self._eps, k), {})
        for j in keys:
            self.lps += 1
            res = lp.solve([2 * m + j], [1.0], [1.0], start=bases.get(j))
            bases[j] = lp.basis()
            if not res.success:
                out[j] = (np.inf, None)
                self._farkas.setdefault(j, None)  # tried by farkas() next time
                continue
            c, y = res.x[:k], res.y
            self._duals[j] = y
            self._farkas.pop(j, None)
            g = self.A.T @ (y[:m] + y[m:2 * m]) + y[2 * m:]
            out[j] = (float(res.x[k]), -np.outer(g, c))
            if stop_at is not None and out[j][0] <= stop_at:
                break
        return out

    def climb(self, B: np.ndarray, eps: float, extra=()) -> np.ndarray | None:
        """``B`` turned until ``beta(span B)`` exceeds the goal on the keys it watches, or
        None (no step raised ``beta``, the goal is out of reach at the rate so far, or the
        budget is spent first). The keys watched: every key at the start; then those whose
        value was below three times the goal there or whose LP had no optimum (no ``x`` in ``S`` peaks at
        the key yet; a turn of ``S`` can change that), and ``extra`` (the certificate built
        from the result covers every key). A full evaluation skips the keys whose
        :meth:`lower_bounds` exceed the goal; the duals behind those bounds come from the
        climbs at the same ``eps`` only."""
        N = self.A.shape[1]
        B = np.linalg.qr(B)[0]
        spent0 = self.lps
        # the budget in LP_j evaluations, fewer above dimension 16 (a solve's cost grows with k)
        budget = int(self.budget * min(1.0, 16.0 / (B.shape[1] + 1)))
        # beta <= ||A||_inf = 1 on row-stochastic A: near eps = 1 the margin shrinks with 1 - eps
        goal = eps + self.margin * min(eps, 1.0 - eps)
        self._at_eps(eps)
        vals = self.values(B, range(N), skip_above=goal)
        vals.update(self.values(B, extra))
        self._last_values = vals  # updated in place below: the screen of best() reads it
        watch = sorted({j for j, (v, _) in vals.items() if not 3 * goal <= v < np.inf}
                       | set(extra))
        beta = min(vals[j][0] for j in watch) if watch else np.inf
        active = list(dict.fromkeys(list(extra)
                                    + sorted(watch, key=lambda j: vals[j][0])[:self.n_active]))
        tau = 0.3
        step = 0
        failed = None  # the key that rejected the last trial step
        beta0 = top = beta
        while beta <= goal:
            spent = self.lps - spent0
            if spent >= budget:
                return None
            low = min(vals[j][0] for j in active)
            if not np.isfinite(low):
                return None
            G = sum(vals[j][1] for j in active
                    if vals[j][1] is not None and vals[j][0] <= low * (1 + 1e-3))
            norm = float(np.linalg.norm(G)) if isinstance(G, np.ndarray) else 0.0
            if not norm > 0:
                return None
            # a trial step is kept only if every active key rises above low, so the first
            # key at or below low decides it: the keys are solved in the order most likely
            # to fail (the key that rejected the last trial, then by value) and those after
            # it are left unsolved (docs/theory/lower.md#subspace-climb)
            order = sorted(active, key=lambda j: (j != failed, vals[j][0]))
            for _ in range(6):
                B2 = np.linalg.qr(B + (tau / norm) * G)[0]
                v2 = self.values(B2, order, stop_at=low)
                least = min(v2.items(), key=lambda kv: kv[1][0])
                if least[1][0] > low:
                    break
                failed = least[0]
                order = sorted(order, key=lambda j: j != failed)
                tau /= 2
            else:
                return None
            B, tau, step = B2, min(1.5 * tau, 1.0), step + 1
            vals.update(v2)
            if min(v for v, _ in v2.values()) > goal or step % self.full_every == 0:
                vals.update(self.values(B, watch, skip_above=goal))
                beta = min(vals[j][0] for j in watch)
                worst = sorted(watch, key=lambda j: vals[j][0])[:self.n_active]
                active = list(dict.fromkeys(active + worst))[-3 * self.n_active:]
                # out of reach at the mean rate so far (the best beta seen over the
                # evaluations spent): stop, as the budget would (deterministic)
                top = max(top, beta)
                rate = (top - beta0) / max(self.lps - spent0, 1)
                left = budget - (self.lps - spent0)
                if beta <= goal and not (rate > 0 and top + rate * left > goal):
                    return None
        return B

    def best(self, eps: float, lo: int, hi: int, starts=None, screened=None,
             screened_climbs: int = 2, screen_keys: int = 8) -> SubspaceCertificate | None:
        """The largest ``k`` in ``[lo, hi]`` reached by climbing ``k = lo, lo + 1, ...``, each
        from the last certified subspace plus the next right singular direction (the top
        ``lo`` right singular vectors at ``k = lo``).

        Parameters
        ----------
        eps : float
            Tolerance.
        lo, hi : int
            The dimensions tried: ``lo`` first, then up while certificates hold; ``hi`` is
            also capped by ``min(m, N)``, the columns of ``V`` and ``max_entries``.
        starts : callable, optional
            ``starts(k)`` gives further ``(label, B)`` starts at dimension ``k``, ``B`` a
            real ``(N, k)`` array: tried in order, only where the climb above fails at ``k``;
            the first that certifies continues the ascent (its certificates are named
            ``subspace/<label>+climb``; a label is 1-40 letters, digits, ``.``, ``_`` or
            ``-``, and not ``svd``). Each is one more climb with its own budget, and there is
            no cap on their number. The climb orthonormalises ``B`` by a QR factorisation,
            which completes a rank-deficient ``B`` with other directions: the certificate
            is then for that completed subspace (and checked like any other).
        screened : callable, optional
            ``screened(k)`` gives more starts of the same form, tried only where every start
            of ``starts`` fails at ``k``: each is scored by the least ``LP_j`` of its span over
            the ``screen_keys`` keys with the least values at the end of the climb that
            failed first at ``k`` (from the singular or the carried subspace; an upper bound
            of the start's ``beta``, ``screen_keys`` evaluations of the budget's kind, all
            at this ``eps`` only), and the ``screened_climbs`` best (equal scores in the
            given order) are climbed, best first.
        screened_climbs, screen_keys : int
            Climbs after the screen (``>= 0``) and keys scored per screened start (``>= 1``).

        Returns
        -------
        SubspaceCertificate or None
            The certificate of the largest dimension reached; None if none was.

        Raises
        ------
        InvalidArgumentError
            If ``lo`` or ``hi`` is not an integer, ``starts`` or ``screened`` is not
            callable, ``starts(k)`` or ``screened(k)`` is not an iterable of
            ``(label, finite real (N, k) array)`` pairs, ``screened_climbs`` is not an integer
            ``>= 0`` or ``screen_keys`` not one ``>= 1``.
        """
        for arg, val in (("lo", lo), ("hi", hi)):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)):
                raise InvalidArgumentError(f"{arg} must be an integer, got {val!r}")
        for arg, fn in (("starts", starts), ("screened", screened)):
            if fn is not None and not callable(fn):
                raise InvalidArgumentError(f"{arg} must be a function of k or None, got "
                                           f"{_brief(fn)}")
        for arg, val, least in (("screened_climbs", screened_climbs, 0),
                                ("screen_keys", screen_keys, 1)):
            if isinstance(val, bool) or not (isinstance(val, (int, np.integer)) and val >= least):
                raise InvalidArgumentError(f"{arg} must be an integer >= {least}, got {val!r}")
        A = self.A
        m, N = A.shape
        # the LP of a key has (k + 1) (2 m + N) entries; past max_entries its solves cost
        # tens of milliseconds each (measured), and the climb is not tried
        hi = min(hi, m, N, self.V.shape[1], self.max_entries // (2 * m + N) - 1)
        if lo < 1 or lo > hi:
            return None

        def certify(B, name, k):
            S = self.climb(B, eps)
            if S is None:
                return None, None
            cert = SubspaceSearch(A, S, f"{name}+climb", self.key_order).certificate(k, eps)
            if cert is None:  # a key the climb did not watch ended it: once more with it
                S = self.climb(S, eps, extra=(self.key_order[0],))
                if S is not None:
                    cert = SubspaceSearch(A, S, f"{name}+climb",
                                          self.key_order).certificate(k, eps)
            return (S, cert) if cert is not None else (None, None)

        B = self.V[:, :lo]
        name = self.name
        best = None
        k = lo

        def given(fn, arg, k):
            items = fn(k)
            if not isinstance(items, Iterable) or isinstance(items, (str, bytes)):
                raise InvalidArgumentError(f"{arg}({k}) must give an iterable of "
                                           f"(label, B) pairs, got {_brief(items)}")
            return (_checked_start(item, N, k, arg) for item in items)

        def screen(items):
            """The ``screened_climbs`` items whose spans score best: the least ``LP_j``
            over the hardest keys bounds ``beta`` from above."""
            items = list(items)
            if screened_climbs == 0:
                return []
            self._at_eps(eps)
            keys = hardest[:screen_keys]
            score = [min(v for v, _ in self.values(np.linalg.qr(B1)[0], keys).values())
                     for _, B1 in items]
            ranked = sorted(range(len(items)), key=lambda i: -score[i])
            return [items[i] for i in ranked[:screened_climbs]]

        while True:
            S, cert = certify(B, name, k)
            # the keys hardest for the climb that just failed (its last values, lowest first):
            # they depend only on this eps, where the shared key_order moves with every
            # search of the operator, at any tolerance
            last = self._last_values
            hardest = sorted(last, key=lambda j: (last[j][0], j))
            for fn, arg in ((starts, "starts"), (screened, "screened")):
                if cert is not None or fn is None:
                    continue
                items = given(fn, arg, k)
                for label, B1 in (items if arg == "starts" else screen(items)):
                    S, cert = certify(B1, label, k)
                    if cert is not None:
                        name = label
                        break
            if cert is None:
                return best
            best = cert
            if k >= hi:
                return best
            v = self.V[:, k] - S @ (S.T @ self.V[:, k])
            if not np.linalg.norm(v) > 1e-8:
                return best
            B, k = np.column_stack([S, v / np.linalg.norm(v)]), k + 1

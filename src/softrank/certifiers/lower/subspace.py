"""Subspace certificates (docs/theory/lower.md, section *Subspace certificate*): a
``k``-dimensional subspace of key space none of whose vectors ``A`` maps inside the
``eps``-ball, certified key by key by basis-pursuit LPs, each key screened first by
:func:`basis_pursuit_candidates`.

:class:`SubspaceSearch` returns a candidate :class:`~softrank.checker.SubspaceCertificate`,
or None; none is a bound until the checker accepts it.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ...checker import SubspaceCertificate
from ...validation import check_int
from ..linalg import weighted_solves
from ..lp import LP_TIME_LIMIT, BasisPursuit
from .basic import largest_certified

__all__ = ["basis_pursuit_candidates", "SubspaceSearch", "SCREENING_BLOCK_WORK"]

#: Multiply-adds of one block of the screening's weighted solves (about half a second on
#: one core): the right-hand sides are solved in blocks of at most this much work, the stop
#: asked between them. At 2,048 keys and rank 1,054 one step over every key took 292 s.
SCREENING_BLOCK_WORK = 1e10


def basis_pursuit_candidates(G: np.ndarray, weights: np.ndarray, B: np.ndarray, score,
                             bound: float, iters: int = 10, delta: float = 1e-12, stop=None):
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
    stop : callable, optional
        Asked before each reweighting step and between its blocks of right-hand sides
        (:data:`SCREENING_BLOCK_WORK`); True ends the steps there, with the best iterates
        so far (a step over every key of a head of 2,048 tokens takes minutes at rank
        1,000, and a bracket's time limit reaches it this way).

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
            if t == iters or not keep.any() or (stop is not None and stop()):
                break
            idx, Z = idx[keep], Z[keep]
            D = (np.abs(Z) + delta) / weights
            Y = np.empty((idx.size, k))
            rows = max(1, int(SCREENING_BLOCK_WORK // max(n * k * k, 1)))
            cut = False
            try:
                for a in range(0, idx.size, rows):
                    cut = a > 0 and stop is not None and stop()
                    if cut:  # this step's iterates are incomplete: keep the best so far
                        break
                    Y[a:a + rows] = weighted_solves(G, D[a:a + rows], B[idx[a:a + rows]])
            except np.linalg.LinAlgError:
                break
            if cut:
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
    nested, so that holds for an initial run of ``k`` and :meth:`best` finds its end. Answers
    are cached per ``(k, eps)`` (the LP depends on ``eps``). :meth:`extend` then
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

    def certificate(self, k: int, eps: float, stop=None) -> SubspaceCertificate | None:
        # stop (optional): asked before each exact key LP and each screening block; True
        # ends it with None, uncached. A stop with ``left()`` (seconds to the limit, as
        # softrank.certifiers.upper.Deadline) gives each key LP at most that; an LP cut
        # there leaves the subspace undecided (None, uncached, the key order as it was)
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

        left = getattr(stop, "left", None)

        def exact(j):
            nonlocal bp
            if bp is None:
                bp = BasisPursuit(G, weights)
            z = bp.solve(R[j], LP_TIME_LIMIT if left is None
                         else min(LP_TIME_LIMIT, max(left(), 1e-3)))
            val = np.inf if z is None else value(j, z)
            return z, val

        def cut():  # a key LP ended by the time limit: no answer for this subspace
            return stop is not None and stop()

        Lam = np.empty((N, m))
        Mu = np.empty((N, N))
        # 1. the key that ended the last subspace: a subspace that fails usually fails there
        j0 = order[0]
        if stop is not None and stop():
            return None
        z, val = exact(j0)
        if z is None and cut():
            return None
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
                                                                    bound, stop=stop)
        # 3. the keys still at or above the bound exactly, largest candidate value first
        need = [int(j) for j in rest if not best_val[j] < bound]
        for j in sorted(need, key=lambda j: -best_val[j]):
            if stop is not None and stop():
                return None
            z, val = exact(j)
            if z is None and cut():
                return None
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
               max_steps: int = 6, stop=None) -> SubspaceCertificate | None:
        """Local search: grow ``range(cert.R)`` one direction at a time while the subspace
        still certifies. Candidates: the next right singular directions of ``V``, unit vectors
        of the keys with the largest column mass, and the most peaked rows of ``A`` (a key
        pattern a query attends). Returns the grown certificate, or None if no step held;
        ``stop`` (optional) is asked before each candidate (and each key LP) and ends the
        search there."""
        A = self.A
        m, N = A.shape
        basis = cert.R
        k0 = basis.shape[1]
        colmass = A.sum(axis=0)
        cands = [self.V[:, j] for j in range(k0, min(k0 + n_cand, self.V.shape[1]))]
        cands += [np.eye(N)[j] for j in np.argsort(-colmass, kind="stable")[:n_cand]]
        cands += [A[i] / A[i].max() for i in np.argsort(-A.max(axis=1), kind="stable")[:n_cand]
                  if A[i].max() > 0]  # (a zero row, in a block of a causal head: no direction)
        best = None
        for _ in range(max_steps):
            if basis.shape[1] >= min(m, N):
                break
            grown = None
            for v in cands:
                if stop is not None and stop():
                    return best
                B = np.column_stack([basis, v])
                if np.linalg.matrix_rank(B) <= basis.shape[1]:
                    continue
                c = SubspaceSearch(A, B, f"{self.name}+local",
                                   self.key_order).certificate(B.shape[1], eps, stop)
                if c is not None:
                    grown = (B, c)
                    break
            if grown is None:
                break
            basis, best = grown
        return best

    def best(self, eps: float, lo: int, hi: int, stop=None) -> SubspaceCertificate | None:
        """Largest ``k`` in ``[lo, hi]`` with a certificate, by the search of
        :func:`~softrank.certifiers.lower.basic.largest_certified` (steps up from ``lo``,
        then bisection); ``stop`` as there, and asked before each exact key LP and each
        block of the screening of a probe (a probe it cuts certifies nothing). Of the
        certificates it finds only the last stays cached. InvalidArgumentError if ``lo`` is
        not an integer >= 1 or ``hi`` not an integer."""
        lo = check_int(lo, "lo", 1)
        held = []  # the rank of the best certificate so far, cached

        def probe(k):
            c = self.certificate(k, eps, stop)
            if c is not None:  # the search never asks a lower rank again: forget its
                for j in held:  # multipliers (N (m + N) floats, 64 MiB at 2,048 tokens)
                    self._cache.pop((j, eps), None)
                held[:] = [k]
            return c

        return largest_certified(probe, lo, min(hi, self.V.shape[1], self.A.shape[0]),
                                 stop=stop)


#: A start's label, as it appears in the method ``subspace/<label>+climb``: ``svd`` is the
#: singular start's own.

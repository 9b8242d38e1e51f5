"""The trust-region polish (docs/theory/witnesses.md#trust-region-polish): the alternating
factors one rank below the best witness, improved by exact LPs."""

from __future__ import annotations

import numpy as np

from ...checker import UpperWitness
from ..lp import L1Regression, solve_inequality_lp
from .alternating import AlternatingL1
from .basic import safe_target

__all__ = ["TrustRegionPolish"]


class TrustRegionPolish:
    """Trust-region LP polish of the alternating-l1 factors (docs/theory/witnesses.md#trust-region-polish).

    At a rank ``k`` below the best witness so far: start from the alternating IRLS basis
    ``W`` (:meth:`AlternatingL1.irls_basis`, shared) and fit every row of ``U`` exactly
    (an l1 regression per row). Then alternate

    * a **W step**: ``W <- W + D`` where ``D`` minimises ``max_i ||A_i - U_i (W + D)||_1``
      for the fixed ``U`` within the box ``|D| <= delta``. The LP is an exact model of that
      problem: an entry whose residual cannot change sign within the box
      (``|R_ij| > ||U_i||_1 delta``) enters with its current sign, every other entry through
      its own ``|.|`` variable; a row whose error cannot reach the target within the box
      (``err_i + ||U_i||_1 delta N <= target``) is left out, since it stays below it;
    * a **U step**: every row of ``U`` refit exactly on the new ``W`` (each row's error can
      only fall, so the max row error never rises).

    A step that lowers the max row error is kept (and the polish stops when the remaining
    steps could not reach the target even at that step's gain); one that does not shrinks
    ``delta`` fourfold (``delta`` starts at ``5e-4 max |W|``: larger boxes let more residuals change
    sign, and the LP's cost grew fast with them). The polish stops at the target, after
    ``steps`` W steps, when ``delta`` falls below ``1e-7 max |W|``, or at an LP with more
    than ``max_nonzeros`` constraint entries or that needs more than ``max_iterations``
    simplex iterations: a work budget, deterministic, so a bracket does not depend on the
    machine's speed. The witness is checked like every other.

    This is a lighter form of the trust-region finish of docs/theory/exact.md (what searches
    close): on the default panel it lowered 184 of 537 upper ends (292 ranks in all) below
    the other constructions'; the 12 steps were chosen by measurement (docs/theory/witnesses.md).

    Parameters
    ----------
    A : (m, N) float64 ndarray
        The attention matrix (rows sum to 1).
    start : AlternatingL1
        Its IRLS bases (``start._fit(k).Vt``) are the starting ``W``; shared with the
        alternating-l1 construction of the same bracket.
    steps : int
        W steps per rank and call.
    max_nonzeros, max_iterations : int
        The budget of one W-step LP (constraint entries; HiGHS simplex iterations).
    delta : float
        The first box half-width, relative to ``max |W|``.
    """

    method = "trust-region"

    def __init__(self, A: np.ndarray, start: "AlternatingL1", steps: int = 12,
                 max_nonzeros: int = 150_000, max_iterations: int = 5_000,
                 delta: float = 5e-4):
        self.A = A
        self.start = start
        self.steps = steps
        self.max_nonzeros = max_nonzeros
        self.max_iterations = max_iterations
        self.delta = delta
        self._done: dict[int, tuple] = {}  # k -> (max error, U, W, budget spent)

    def _u_step(self, W: np.ndarray, stop=None) -> np.ndarray | None:
        """Every row of ``U`` by its exact l1 regression on ``W``; None if an LP is not
        optimal or ``stop`` (asked before each) answers True."""
        reg = L1Regression(W)
        U = np.empty((self.A.shape[0], W.shape[0]))
        for i, a in enumerate(self.A):
            if stop is not None and stop():
                return None
            u = reg.solve(a)
            if u is None:
                return None
            U[i] = u
        return U

    def w_step(self, U: np.ndarray, W: np.ndarray, delta: float, target: float):
        """``W + D`` for the box LP at ``delta``, or None when the LP is over budget (more
        than ``max_nonzeros`` entries) or not optimal (including the simplex iteration
        limit)."""
        import scipy.sparse as sp

        A = self.A
        m, N = A.shape
        k = U.shape[1]
        n = k * N
        R = A - U @ W
        err = np.abs(R).sum(axis=1)
        unorm = np.abs(U).sum(axis=1)
        rows = np.nonzero(err + unorm * delta * N > target)[0]
        if rows.size == 0:
            return W
        Ur, Rr = U[rows], R[rows]
        flip = np.abs(Rr) <= (unorm[rows] * delta)[:, None]
        fi, fj = np.nonzero(flip)
        nf = fi.size
        s = np.where(flip, 0.0, np.sign(Rr))
        # entries: D in the row constraints, e and t there, D and e in the 2 nf flip rows
        nnz = int(np.count_nonzero(s)) * k + nf + rows.size + 2 * nf * (k + 1)
        if nnz > self.max_nonzeros:
            return None
        r = rows.size
        # columns: D (n, D[c, j] at c N + j) | e (nf) | t
        # row i: sum_j s_ij (R_ij - U_i D_j) + sum_{flip j} e_ij - t <= 0
        Dco = sp.csr_matrix(-(Ur[:, :, None] * s[:, None, :]).reshape(r, n))
        E = sp.csr_matrix((np.ones(nf), (fi, np.arange(nf))), shape=(r, nf))
        C1 = sp.hstack([Dco, E, sp.csr_matrix(-np.ones((r, 1)))])
        b1 = -(s * Rr).sum(axis=1)
        # flip entries: +-(R_ij - U_i D_j) <= e_ij
        rr = np.repeat(np.arange(nf), k)
        cc = (np.arange(k)[None, :] * N + fj[:, None]).ravel()
        UD = sp.csr_matrix((Ur[fi].ravel(), (rr, cc)), shape=(nf, n))
        Ie = sp.identity(nf, format="csr")
        z = sp.csr_matrix((nf, 1))
        C = sp.vstack([C1, sp.hstack([-UD, -Ie, z]), sp.hstack([UD, -Ie, z])]).tocsc()
        ub = np.concatenate([b1, -Rr[flip], Rr[flip]])
        nc = n + nf + 1
        cost = np.zeros(nc)
        cost[-1] = 1.0
        lower = np.concatenate([np.full(n, -delta), np.zeros(nf), [-np.inf]])
        upper = np.concatenate([np.full(n, delta), np.full(nf, np.inf), [np.inf]])
        # one solve per LP: presolve costs more than it saves here (W-step LPs of a MiniLM
        # head of width 64 at rank 29 ran 1.3-2.2x faster without it)
        res = solve_inequality_lp(C, ub, cost, lower, upper, self.max_iterations,
                                  options={"presolve": "off"})
        if not res.success:
            return None
        x = res.x
        return W + np.clip(x[:n].reshape(k, N), -delta, delta)

    def polish(self, k: int, target: float, stop=None):
        """``(max row error, U, W)`` after the polish at rank ``k`` toward ``target``, or None
        when an l1 regression is not optimal. Cached per ``k``: a later target reuses a pair
        that already meets it, or resumes the polish when its budget was not spent.
        ``stop`` (optional) is asked before each IRLS iteration of the start, each row's
        LP of its first ``U`` and each step; when it answers True before the first ``U``
        the answer is None (nothing cached), after it the pair reached so far (cached as
        resumable)."""
        got = self._done.get(k)
        if got is not None and (got[0] <= target or got[3]):
            return got[:3]
        if got is None:
            fit = self.start._fit(k, stop)  # the IRLS basis, shared
            if fit is None:
                return None
        W = fit.Vt if got is None else got[2]
        U = self._u_step(W, stop) if got is None else got[1]
        if U is None:
            return None
        err = float(np.abs(self.A - U @ W).sum(axis=1).max())
        delta = self.delta * float(np.abs(W).max())
        floor = 1e-7 * float(np.abs(W).max())
        spent = False
        for step in range(self.steps):
            if err <= target or delta < floor or (stop is not None and stop()):
                break
            out = self.w_step(U, W, delta, target)
            if out is None:
                spent = True  # over budget or no optimal LP: nothing more to gain here
                break
            W2 = out
            U2 = self._u_step(W2)
            if U2 is None:
                spent = True
                break
            e2 = float(np.abs(self.A - U2 @ W2).sum(axis=1).max())
            if np.isfinite(e2) and e2 < err:
                gain = err - e2
                W, U, err = W2, U2, e2
                if err - target > gain * (self.steps - step - 1):
                    # out of reach even at this step's rate (the rate falls as the
                    # box shrinks or the fit settles): stop, as the budget would
                    spent = err > target
                    break
            else:
                delta /= 4.0
        else:
            spent = True
        spent = spent or delta < floor
        self._done[k] = (err, U, W, spent)
        return err, U, W

    def least_rank(self, eps: float, lo: int, hi: int, stop=None) -> UpperWitness | None:
        """The witness of the least rank reached going down from ``hi`` (one rank at a time,
        stopping at the first rank the polish cannot bring within ``eps``), or None.
        ``stop`` (optional) is asked before every rank but the first, and inside each rank's
        polish (:meth:`polish`); when it answers True the search ends with the least rank
        reached so far."""
        tgt = safe_target(eps)
        best = None
        k = hi
        while k >= max(lo, 1):
            if k < hi and stop is not None and stop():
                break
            out = self.polish(k, tgt, stop)
            if out is None or not out[0] <= tgt:
                break
            best = UpperWitness(eps, out[1], out[2], self.method)
            k -= 1
        return best

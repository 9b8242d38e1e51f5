"""Linear programs through HiGHS (``highspy``), with explicit status mapping.

Only an LP whose model status is ``kOptimal`` yields a solution; every other status
(infeasible, unbounded, time or iteration limit, solve error, ...) and any NaN in the
returned vector maps to ``LPResult(status=..., x=None)``. Callers never turn a result
without ``x`` into a bound (SPEC 5: "an LP whose status is not optimal ... yields no
certificate"); and the certificates built from an ``x`` are re-verified by the checker, so
the LP's own tolerances never enter a reported bound.

The problems softrank solves many times with one constraint matrix and many right-hand
sides (l1 regression of each row of ``A`` on a basis; basis pursuit for each row of a
decoder) share one HiGHS instance: only the row bounds change between solves, and the dual
simplex restarts from the previous optimal basis (a warm start).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["LPResult", "EqualityLP", "L1Regression", "BasisPursuit"]


_BANNER_SHOWN = False


def _new_highs(highspy):
    """A ``Highs`` instance; the first one of a process prints a banner on fd 1, which would
    corrupt machine-readable output (``softrank bracket --json``), so it goes to /dev/null."""
    global _BANNER_SHOWN
    if _BANNER_SHOWN:
        return highspy.Highs()
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
    _BANNER_SHOWN = True
    return h


@dataclass(frozen=True)
class LPResult:
    """``status`` is ``"optimal"`` or the HiGHS model-status name; ``x`` only when optimal."""

    status: str
    x: np.ndarray | None
    objective: float | None

    @property
    def success(self) -> bool:
        return self.status == "optimal" and self.x is not None and bool(np.isfinite(self.x).all())


class EqualityLP:
    """``min c^T z  s.t.  G z = b,  lower <= z <= upper`` for a fixed ``G`` and many ``b``.

    Parameters
    ----------
    G : (r, n) array_like or sparse
    c, lower, upper : (n,) array_like (``+-inf`` allowed in the bounds)
    """

    def __init__(self, G, c, lower, upper, time_limit: float = 60.0):
        import highspy

        self._hs = highspy
        G = sp.csc_matrix(G, dtype=np.float64)
        r, n = G.shape
        self.shape = (r, n)
        h = _new_highs(highspy)
        h.setOptionValue("output_flag", False)
        h.setOptionValue("time_limit", float(time_limit))
        h.setOptionValue("threads", 1)
        inf = highspy.kHighsInf
        lp = highspy.HighsLp()
        lp.num_col_ = n
        lp.num_row_ = r
        lp.col_cost_ = np.asarray(c, dtype=np.float64)
        lp.col_lower_ = np.where(np.isfinite(lower), lower, -inf).astype(np.float64)
        lp.col_upper_ = np.where(np.isfinite(upper), upper, inf).astype(np.float64)
        lp.row_lower_ = np.zeros(r)
        lp.row_upper_ = np.zeros(r)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = G.indptr.astype(np.int32)
        lp.a_matrix_.index_ = G.indices.astype(np.int32)
        lp.a_matrix_.value_ = G.data
        lp.a_matrix_.num_col_ = n
        lp.a_matrix_.num_row_ = r
        status = h.passModel(lp)
        # kWarning: HiGHS dropped matrix entries below its small_matrix_value. The LP it
        # solves then differs slightly from ours; harmless, because nothing an LP returns is
        # trusted: every certificate built from it is re-checked against the exact data.
        if status not in (highspy.HighsStatus.kOk, highspy.HighsStatus.kWarning):
            raise RuntimeError(f"HiGHS rejected the model: {status}")
        self._h = h
        self._idx = np.arange(r, dtype=np.int32)

    def solve(self, b) -> LPResult:
        b = np.asarray(b, dtype=np.float64)
        if b.shape != (self.shape[0],) or not np.isfinite(b).all():
            return LPResult("bad-rhs", None, None)
        h = self._h
        h.changeRowsBounds(self.shape[0], self._idx, b, b)
        try:
            h.run()
        except Exception as exc:  # a crash of the solver is a failed solve, never a bound
            return LPResult(f"exception:{type(exc).__name__}", None, None)
        ms = h.getModelStatus()
        if ms != self._hs.HighsModelStatus.kOptimal:
            return LPResult(h.modelStatusToString(ms), None, None)
        x = np.asarray(h.getSolution().col_value, dtype=np.float64)
        if x.shape != (self.shape[1],) or not np.isfinite(x).all():
            return LPResult("nan-solution", None, None)
        return LPResult("optimal", x, float(h.getInfo().objective_function_value))


class L1Regression:
    """``min_u ||a - u W||_1`` for a fixed basis ``W (k, N)`` and many rows ``a (N,)``.

    As an LP: variables ``(u, p, n)``, ``W^T u + p - n = a``, ``p, n >= 0``, cost
    ``1^T (p + n)``. :meth:`solve` returns ``u (k,)`` or ``None`` when not optimal.
    """

    def __init__(self, W):
        W = np.asarray(W, dtype=np.float64)
        k, N = W.shape
        self.k, self.N = k, N
        G = sp.hstack([sp.csc_matrix(W.T), sp.identity(N, format="csc"),
                       -sp.identity(N, format="csc")], format="csc")
        c = np.concatenate([np.zeros(k), np.ones(2 * N)])
        lo = np.concatenate([np.full(k, -np.inf), np.zeros(2 * N)])
        hi = np.full(k + 2 * N, np.inf)
        self._lp = EqualityLP(G, c, lo, hi)

    def solve(self, a) -> np.ndarray | None:
        res = self._lp.solve(a)
        return None if not res.success else res.x[: self.k]


class BasisPursuit:
    """``min sum_i w_i |x_i|  s.t.  G x = b`` for a fixed ``G (r, n)`` and many ``b (r,)``.

    As an LP: ``x = p - q``, ``G p - G q = b``, ``p, q >= 0``, cost ``w^T (p + q)``
    (``weights`` default 1). :meth:`solve` returns ``x`` or ``None`` when not optimal
    (including infeasible ``G x = b``).
    """

    def __init__(self, G, weights=None):
        G = np.asarray(G, dtype=np.float64)
        r, n = G.shape
        self.n = n
        w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
        M = sp.hstack([sp.csc_matrix(G), -sp.csc_matrix(G)], format="csc")
        self._lp = EqualityLP(M, np.concatenate([w, w]), np.zeros(2 * n), np.full(2 * n, np.inf))

    def solve(self, b) -> np.ndarray | None:
        res = self._lp.solve(b)
        return None if not res.success else res.x[: self.n] - res.x[self.n:]

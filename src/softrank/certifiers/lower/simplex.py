"""A compiled dense simplex for the subspace climb's ``LP_j(S)``, started from the key's
own last vertex (docs/theory/lower.md, section *Subspace climb*, "Where a solve runs").

The climb solves thousands of LPs per operator, each small (``k + 1`` variables,
``2 (m + N)`` rows) and each close to one it solved a step before. HiGHS spends about
0.3 ms setting up each solve and 25 us per simplex iteration on MiniLM heads of width 64;
:func:`solve_from` keeps the vertex of a key's last solve as an active set and runs the
simplex in compiled code (numba) on dense arrays: no set-up beyond one ``(k + 1)``-square
inversion, and a few microseconds per pivot. HiGHS still solves every LP this module does
not finish (a key's first solve at a dimension, a pivot limit, a vertex that fails the
final check below, an infeasible LP) and every LP outside the climb.

The problem, in the climb's variables ``z = (c, t)``, ``n = k + 1``:

    ``min t  s.t.  G z <= h  (rows excl0 and excl1 left out),  e^T z = 1``

with ``G = [[A B, -1], [-A B, -1], [B, 0], [-B, 0]]``, ``h = [0, 0, 1, 1]`` and
``e = (B[j], 0)``: the rows ``|A B c| <= t`` and ``|B c| <= 1``, key ``j``'s two box rows
replaced by its equality. A vertex is an active set of ``n - 1`` rows that, with ``e``, form
a nonsingular matrix ``M``; its point is ``M^{-1} (h_act, 1)`` and its multipliers ``v``
solve ``M^T v = -e_t`` (those of the active rows must be ``>= 0`` at an optimum). The
inverse of ``M`` is updated by one rank-one (Sherman-Morrison) correction per pivot and
recomputed every :data:`REFACTOR` pivots.

Two phases, from any nonsingular active set:

1. *dual simplex* on a perturbed cost ``c' = -M^T v'`` for which the start is dual
   feasible (``v'`` the start's multipliers, each raised to at least :data:`PERTURB`):
   the most violated row enters, the ratio test keeps ``v' >= 0`` (ties broken by the
   largest pivot), until the vertex is primal feasible;
2. *primal simplex* on the true cost from that vertex: the row with the most negative
   multiplier leaves, the point moves along the edge it frees to the first row it meets
   (ties again by the largest pivot), until every multiplier is non-negative.

The answer is accepted only if the final vertex, recomputed from a fresh inversion, solves
its rows, is primal feasible, and its multipliers are stationary and non-negative, each
within :data:`CHECK_TOL`: an optimum to that accuracy (HiGHS's own tolerances are ``1e-7``). Nothing here is a bound: the climb
uses the optimum to choose its steps, and every certificate it leads to is built and
checked on its own.
"""

from __future__ import annotations

import numpy as np

from ..linalg import compiled as _jit

__all__ = ["solve_from", "OPTIMAL", "NO_OPTIMUM", "PIVOT_LIMIT", "CHECK_FAILED", "SINGULAR",
           "REFACTOR", "PERTURB", "CHECK_TOL", "MAX_PIVOTS"]

#: :func:`solve_from`'s status: the final vertex passed the check, an optimum.
OPTIMAL = 0
#: Status: a ratio test found the LP infeasible (phase 1) or unbounded (phase 2).
NO_OPTIMUM = 1
#: Status: a phase reached its pivot limit.
PIVOT_LIMIT = 2
#: Status: the final vertex failed the check (rows, stationarity, feasibility, multipliers).
CHECK_FAILED = 3
#: Status: the start's active set with the equality row, or a later inversion, is singular.
SINGULAR = 4
#: Pivots between two fresh inversions of ``M``.
REFACTOR = 30
#: A row enters when it is violated by more than this; a multiplier leaves below minus it.
PIVOT_TOL = 1e-9
#: The final check's tolerance on rows and multipliers.
CHECK_TOL = 1e-8
#: The least multiplier of phase 1's perturbed cost.
PERTURB = 1e-7
#: A pivot element must exceed this.
PIVOT_MIN = 1e-11
#: Ratios within this of the least are tied.
TIE = 1e-12
#: Pivots per phase at most (then HiGHS solves the LP).
MAX_PIVOTS = 400


@_jit
def _invert(G, act, e, Minv):  # pragma: no cover - compiled
    n = e.size
    M = np.empty((n, n))
    for i in range(n - 1):
        M[i, :] = G[act[i], :]
    M[n - 1, :] = e
    Minv[:, :] = np.linalg.inv(M)
    return M


@_jit
def _solve(G, h, x0, x1, e, act, max_pivots, z, mult):  # pragma: no cover - compiled
    R, n = G.shape
    k1 = n - 1
    Minv = np.empty((n, n))
    M = _invert(G, act, e, Minv)
    blocked = np.zeros(R, dtype=np.bool_)  # rows that may not enter: active or left out
    blocked[x0] = True
    blocked[x1] = True
    for i in range(k1):
        blocked[act[i]] = True
    rhs = np.empty(n)
    for i in range(k1):
        rhs[i] = h[act[i]]
    rhs[k1] = 1.0
    vp = np.empty(n)
    for i in range(n):
        vp[i] = -Minv[k1, i]
    for i in range(k1):
        floor = PERTURB * (1.0 + (i % 7) / 7.0)
        if vp[i] < floor:
            vp[i] = floor
    cp = -(M.T @ vp)
    w = np.empty(n)
    S = np.empty(R)
    Gd = np.empty(R)
    col = np.empty(n)
    pivots = 0
    since = 0
    for phase in range(2):
        for it in range(max_pivots + 1):
            zz = Minv @ rhs
            if phase == 0:
                mult[:] = -(Minv.T @ cp)
            else:
                for i in range(n):
                    mult[i] = -Minv[k1, i]
            for r in range(R):
                s = h[r]
                for c in range(n):
                    s -= G[r, c] * zz[c]
                S[r] = s
            q = -1
            rr = -1
            if phase == 0:  # dual simplex: the most violated row enters
                worst = -PIVOT_TOL
                for r in range(R):
                    if not blocked[r] and S[r] < worst:
                        worst = S[r]
                        rr = r
                if rr < 0:
                    break
                for i in range(n):
                    acc = 0.0
                    for c in range(n):
                        acc += Minv[c, i] * G[rr, c]
                    w[i] = acc
                least = np.inf
                for i in range(k1):
                    if w[i] > PIVOT_MIN:
                        ratio = max(mult[i], 0.0) / w[i]
                        if ratio < least:
                            least = ratio
                if least == np.inf:
                    return NO_OPTIMUM, pivots  # infeasible
                top = -np.inf
                for i in range(k1):
                    if w[i] > PIVOT_MIN and max(mult[i], 0.0) / w[i] <= least + TIE \
                            and w[i] > top:
                        top = w[i]
                        q = i
            else:  # primal simplex: the most negative multiplier leaves
                lowest = -PIVOT_TOL
                for i in range(k1):
                    if mult[i] < lowest:
                        lowest = mult[i]
                        q = i
                if q < 0:
                    break
                least = np.inf
                for r in range(R):  # along d = -Minv[:, q]: rows with G_r d > 0 limit it
                    gd = 0.0
                    if not blocked[r]:
                        for c in range(n):
                            gd -= G[r, c] * Minv[c, q]
                        if gd > PIVOT_MIN:
                            ratio = max(S[r], 0.0) / gd
                            if ratio < least:
                                least = ratio
                    Gd[r] = gd
                if least == np.inf:
                    return NO_OPTIMUM, pivots  # unbounded
                top = -np.inf
                for r in range(R):
                    if not blocked[r] and Gd[r] > PIVOT_MIN \
                            and max(S[r], 0.0) / Gd[r] <= least + TIE and Gd[r] > top:
                        top = Gd[r]
                        rr = r
                for i in range(n):
                    acc = 0.0
                    for c in range(n):
                        acc += Minv[c, i] * G[rr, c]
                    w[i] = acc
            if it == max_pivots:
                return PIVOT_LIMIT, pivots
            # row q of M becomes G[rr]: Minv -= Minv[:, q] (w - e_q)^T / w_q
            wq = w[q]
            for c in range(n):
                col[c] = Minv[c, q]
            for i in range(n):
                f = (w[i] - (1.0 if i == q else 0.0)) / wq
                if f != 0.0:
                    for c in range(n):
                        Minv[c, i] -= col[c] * f
            blocked[act[q]] = False
            blocked[rr] = True
            act[q] = rr
            rhs[q] = h[rr]
            pivots += 1
            since += 1
            if since == REFACTOR:
                since = 0
                _invert(G, act, e, Minv)
    M = _invert(G, act, e, Minv)  # the final check, from a fresh inversion
    zz = Minv @ rhs
    for i in range(n):
        z[i] = zz[i]
        mult[i] = -Minv[k1, i]
    # the vertex solves its rows, and the multipliers are stationary (e_t + M^T mult = 0):
    # an ill-conditioned M fails here
    res = M @ zz - rhs
    stat = M.T @ mult
    stat[k1] += 1.0
    for i in range(n):
        if not (abs(res[i]) <= CHECK_TOL and abs(stat[i]) <= CHECK_TOL):
            return CHECK_FAILED, pivots
    for r in range(R):
        if r != x0 and r != x1:
            s = h[r]
            for c in range(n):
                s -= G[r, c] * zz[c]
            if not s >= -CHECK_TOL:
                return CHECK_FAILED, pivots
    for i in range(n):
        if not np.isfinite(zz[i]) or not np.isfinite(mult[i]):
            return CHECK_FAILED, pivots
    for i in range(k1):
        if not mult[i] >= -CHECK_TOL:
            return CHECK_FAILED, pivots
    return OPTIMAL, pivots


def solve_from(G: np.ndarray, h: np.ndarray, excl: tuple, e: np.ndarray, act: np.ndarray,
               max_pivots: int = MAX_PIVOTS):
    """Solve ``min z_t s.t. G z <= h`` (rows ``excl`` left out), ``e^T z = 1`` from the
    active set ``act`` (module docstring).

    Parameters
    ----------
    G : (R, n) float64 ndarray, C-contiguous
    h : (R,) float64 ndarray
    excl : (int, int)
        Two rows of ``G`` left out of this problem (they may be equal).
    e : (n,) float64 ndarray
        The equality row.
    act : (n - 1,) intp ndarray
        The start: distinct rows of ``G``, not in ``excl``, that with ``e`` form a
        nonsingular matrix. Updated in place to the final active set.
    max_pivots : int
        Pivots per phase at most.

    Returns
    -------
    status : int
        :data:`OPTIMAL` (the vertex passed the final check), or why not: an infeasible or
        unbounded ratio test (:data:`NO_OPTIMUM`), the pivot limit (:data:`PIVOT_LIMIT`),
        the final check (:data:`CHECK_FAILED`), a singular start or inversion
        (:data:`SINGULAR`).
    z : (n,) ndarray
        The optimal point (``z[-1]`` the value).
    mult : (n,) ndarray
        The multipliers of ``act`` (``>= 0``) and, last, of the equality:
        ``e_t + G[act]^T mult[:-1] + mult[-1] e = 0``.
    pivots : int
    """
    n = G.shape[1]
    z = np.empty(n)
    mult = np.empty(n)
    try:
        status, pivots = _solve(G, h, int(excl[0]), int(excl[1]), e, act, int(max_pivots),
                                z, mult)
    except np.linalg.LinAlgError:
        return SINGULAR, z, mult, 0
    return int(status), z, mult, int(pivots)


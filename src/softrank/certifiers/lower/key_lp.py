"""The LP of one key, ``LP_j(span B) = min ||A x||_inf  s.t.  x in span B, x_j = 1,
||x||_inf <= 1`` (docs/theory/lower.md#subspace-climb), in the two layouts the climb solves it
in: the compiled simplex's (:func:`~softrank.certifiers.lower.key_lp.key_lp_rows`, a start from another vertex's active rows:
:func:`~softrank.certifiers.lower.key_lp.complete_start`) and HiGHS's (:func:`~softrank.certifiers.lower.key_lp.key_lp_model`, its basis read back as active rows:
:func:`~softrank.certifiers.lower.key_lp.active_rows`, the simplex's multipliers as HiGHS's row duals: :func:`~softrank.certifiers.lower.key_lp.highs_duals`);
and :func:`~softrank.certifiers.lower.key_lp.warm`, which compiles the engine's kernels before a run."""

from __future__ import annotations

import numpy as np

from ..linalg import solve_device, weighted_solves
from ..lp import RangeLP
from .simplex import solve_from

__all__ = ["key_lp_rows", "key_lp_model", "highs_duals", "complete_start", "active_rows", "warm"]


def key_lp_rows(AB: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``G, h`` of :func:`~softrank.certifiers.lower.simplex.solve_from` for ``LP_j(span B)``:
    the rows ``A B c - t <= 0``, ``-A B c - t <= 0``, ``B c <= 1``, ``-B c <= 1``."""
    m, k = AB.shape
    N = B.shape[0]
    G = np.zeros((2 * (m + N), k + 1))
    G[:m, :k], G[:m, k] = AB, -1.0
    G[m:2 * m, :k], G[m:2 * m, k] = -AB, -1.0
    G[2 * m:2 * m + N, :k] = B
    G[2 * m + N:, :k] = -B
    h = np.zeros(2 * (m + N))
    h[2 * m:] = 1.0
    return G, h



def warm() -> None:
    """Compile now (or read from numba's disk cache) every compiled kernel of the engine:
    the simplex of :func:`~softrank.certifiers.lower.simplex.solve_from` and the Cholesky
    of :func:`softrank.certifiers.linalg.weighted_solves`, with the argument types the engine
    passes them, so that no compilation happens later in the run. numba compiles inside
    ctypes callbacks, where a ``KeyboardInterrupt`` raised by a signal handler is reported
    and dropped: the command line calls this with SIGINT and SIGTERM blocked, so that a stop
    sent while it compiles is raised afterwards, not lost. Seconds on a first run
    (compilation), a fraction of one from the cache. The device of the solves is settled
    first (:func:`softrank.certifiers.linalg.solve_device`: where an NVIDIA driver is loaded,
    torch is imported and asked for a GPU here too), so a bad ``$SOFTRANK_DEVICE`` stops the
    command before any work."""
    solve_device()
    weighted_solves(np.ones((1, 2)), np.ones((1, 2)), np.ones((1, 1)))
    # key 0 of the hand-worked LP with A B = [[1, -1], [1, 1]], B = I, from rows 0 and 7
    G, h = key_lp_rows(np.array([[1.0, -1.0], [1.0, 1.0]]), np.eye(2))
    solve_from(G, h, (4, 6), np.array([1.0, 0.0, 0.0]), np.array([0, 7], dtype=np.intp))

def highs_duals(act: np.ndarray, mult: np.ndarray, m: int, N: int, j: int) -> np.ndarray:
    """The row duals of :func:`~softrank.certifiers.lower.key_lp.key_lp_model`'s LP (HiGHS's rows and signs) from the
    multipliers of :func:`~softrank.certifiers.lower.simplex.solve_from`: rows ``0..m-1``
    are ``A B c - t <= 0`` (dual ``-mult``), ``m..2m-1`` are ``A B c + t >= 0``
    (``+mult``), ``2m + l`` is ``-1 <= (B c)_l <= 1`` (``-mult`` at its upper bound, row
    ``2m + l`` of ``G``; ``+mult`` at its lower bound, row ``2m + N + l``), and ``2m + j`` the
    equality (``-mult[-1]``)."""
    y = np.zeros(2 * m + N)
    lam = mult[:-1]
    sign = np.where((act < m) | ((act >= 2 * m) & (act < 2 * m + N)), -1.0, 1.0)
    np.add.at(y, np.where(act >= 2 * m + N, act - N, act), sign * lam)
    y[2 * m + j] -= mult[-1]
    return y


def complete_start(rows: np.ndarray, G: np.ndarray, e: np.ndarray, j: int, m: int, N: int,
              k: int) -> np.ndarray:
    """A start of ``k`` rows for ``LP_j`` from ``rows`` (another vertex's active rows: the
    key's own one dimension down, or another key's at this dimension): key ``j``'s own box
    rows left out, then, while fewer than ``k``, the row of ``G`` farthest from the span of
    the rows so far and ``e`` (relative to its norm) added, so that the start is
    nonsingular whenever such a row exists; only a start
    (:func:`~softrank.certifiers.lower.simplex.solve_from`)."""
    own = (2 * m + j, 2 * m + N + j)
    act = [int(r) for r in rows if r not in own][:k]
    norms = np.maximum(np.linalg.norm(G, axis=1), 1e-300)
    while len(act) < k:
        u = np.linalg.svd(np.vstack([G[act], e]))[2][-1]  # in the null space of the rows
        score = np.abs(G @ u) / norms
        score[act] = -1.0
        score[list(own)] = -1.0
        act.append(int(np.argmax(score)))
    return np.asarray(act, dtype=np.intp)


def active_rows(basis, m: int, N: int, j: int, k: int) -> np.ndarray | None:
    """The active rows (in :func:`~softrank.certifiers.lower.simplex.solve_from`'s
    layout: ``A B c - t <= 0``, ``-A B c - t <= 0``, ``B c <= 1``, ``-B c <= 1``) of a
    HiGHS basis of ``LP_j``: its nonbasic rows other than row ``2m + j``; None unless there
    are exactly ``k`` of them (a nonbasic column, or a status this layout cannot name)."""
    import highspy

    st = highspy.HighsBasisStatus
    rows = basis.row_status
    act = []
    for r in range(2 * m + N):
        s = rows[r]
        if s == st.kBasic or r == 2 * m + j:
            continue
        if r < 2 * m:
            act.append(r)
        elif s == st.kUpper:
            act.append(r)
        elif s == st.kLower:
            act.append(r + N)
        else:
            return None
    return np.asarray(act, dtype=np.intp) if len(act) == k else None


def key_lp_model(A: np.ndarray, B: np.ndarray, AB: np.ndarray | None = None) -> RangeLP:
    """``LP_j(span B)`` of every key as one HiGHS model (:class:`~softrank.certifiers.lp.RangeLP`):
    variables ``c`` and ``t``, rows ``A B c - t <= 0``, ``A B c + t >= 0``,
    ``-1 <= B c <= 1``; the key ``j`` is set by the bounds of its row (``(B c)_j = 1``).
    ``AB`` is ``A B`` when the caller has it."""
    m, N = A.shape
    k = B.shape[1]
    AB = A @ B if AB is None else AB
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

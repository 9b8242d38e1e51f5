"""Feature blocks of the held-out add-on test (docs/theory/geometry.md, docs/theory/studies.md#held-out-add-on-test; :mod:`softrank.studies.addon`).

* **B0** -- size and tolerance: ``log m``, ``log N``, ``eps``.
* **B1** -- a calibrated, gauge-invariant baseline computed from ``A`` alone
  (:func:`baseline_features`). Every entry is a function of ``A``, so a gauge
  ``Q -> Q S``, ``K -> K S^{-T}`` cannot move it. "Calibrated" means its main entry is
  measured on the response's own scale: the least rank ``k`` whose truncated SVD is within
  ``eps`` of ``A`` in max-row-l1, over ``min(m, N)`` (a float64 feature, not a certified
  bound). Beside it: the stable rank and the effective rank (exponential of the entropy of
  the normalised singular values) over ``min(m, N)``, the mean row entropy over ``log N``,
  and the mean row maximum.
* **G** -- native query/key geometry (:func:`native_features`): ``log rho_Q``,
  ``log rho_K``, ``log Gamma``, ``log(beta s1(Q) s1(K))`` and the stable ranks of ``Q`` and
  ``K`` over their number of singular values (the head dimension when the block is wider). Gauge-dependent by design (docs/theory/geometry.md);
  :func:`gauged_native` recomputes it under fixed diagonal gauges of condition ratio 4 and
  16, which leave ``A`` unchanged.
"""

from __future__ import annotations

import numpy as np

from numbers import Real

from ..errors import InvalidArgumentError

__all__ = ["B0", "B1", "G", "size_features", "baseline_features", "native_features",
           "gauged_native", "GAUGE_RATIOS"]

B0 = ("log_m", "log_N", "eps")
B1 = ("b1_tsvd", "b1_stable", "b1_erank", "b1_entropy", "b1_peak")
G = ("g_log_rho_Q", "g_log_rho_K", "g_log_Gamma", "g_log_spectral", "g_stable_Q",
     "g_stable_K")
GAUGE_RATIOS = (4.0, 16.0)


def size_features(m: int, N: int, eps: float) -> dict:
    """B0: ``log m``, ``log N``, ``eps``."""
    return {"log_m": float(np.log(m)), "log_N": float(np.log(N)), "eps": float(eps)}


def _tsvd_rank(U, s, Vt, A, eps) -> int:
    """Least ``k`` with ``||A - A_k||_inf <= eps`` (``A_k`` the rank-``k`` truncated SVD).

    The error is not monotone in ``k``, so every ``k`` is scanned: the residual
    ``A - A_k`` is updated one singular triple at a time (``O(p m N)`` in all)."""
    R = A.copy()
    for k in range(s.size + 1):
        if float(np.abs(R).sum(axis=1).max()) <= eps:
            return k
        if k < s.size:
            R -= s[k] * np.outer(U[:, k], Vt[k])
    return s.size  # not reached: A - A_p is rounding only, far below any eps > 0


def baseline_features(A, eps: float) -> dict:
    """B1 of one operator at one tolerance (module docstring).

    Parameters
    ----------
    A : (m, N) float64 array, row-stochastic (validated as an :class:`~softrank.Operator`)
    eps : float in (0, 1)

    Returns
    -------
    dict with keys :data:`B1`, all in ``[0, 1]``.

    Raises
    ------
    InvalidOperatorError
        If ``A`` is not a finite row-stochastic 2-D array.
    InvalidArgumentError
        Naming ``eps``.
    """
    from ..operators import Operator

    A = Operator(A=A).A
    if not (isinstance(eps, Real) and 0 < eps < 1):
        raise InvalidArgumentError(f"eps: expected 0 < eps < 1, got {eps!r}")
    m, N = A.shape
    p = min(m, N)
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    sn = s / s.sum()
    nz = sn[sn > 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(A > 0, A * np.log(A), 0.0).sum(axis=1)
    return {
        "b1_tsvd": _tsvd_rank(U, s, Vt, A, float(eps)) / p,
        "b1_stable": float((s ** 2).sum() / s[0] ** 2) / p,
        "b1_erank": float(np.exp(-(nz * np.log(nz)).sum())) / p,
        "b1_entropy": float(ent.mean() / np.log(N)) if N > 1 else 0.0,
        "b1_peak": float(A.max(axis=1).mean()),
    }


def native_features(rho_Q: float, rho_K: float, Gamma: float, sv_Q, sv_K) -> dict:
    """G from the native geometry of the factors (:meth:`softrank.Operator.native_geometry`;
    ``beta = Gamma / (rho_Q rho_K)``). The stable ranks are over the number of singular
    values, ``min(tokens, head dimension)``."""
    sv_Q = np.asarray(sv_Q, dtype=np.float64)
    sv_K = np.asarray(sv_K, dtype=np.float64)
    vals = np.array([rho_Q, rho_K, Gamma], dtype=np.float64)
    if (not np.isfinite(vals).all() or vals.min() <= 0 or sv_Q.ndim != 1 or sv_K.ndim != 1
            or sv_Q.size == 0 or sv_K.size == 0 or not np.isfinite(sv_Q).all()
            or not np.isfinite(sv_K).all() or sv_Q[0] <= 0 or sv_K[0] <= 0):
        raise InvalidArgumentError(f"rho_Q, rho_K, Gamma: expected > 0 with singular values, "
                                   f"got {rho_Q!r}, {rho_K!r}, {Gamma!r}")
    beta = Gamma / (rho_Q * rho_K)
    return {
        "g_log_rho_Q": float(np.log(rho_Q)), "g_log_rho_K": float(np.log(rho_K)),
        "g_log_Gamma": float(np.log(Gamma)),
        "g_log_spectral": float(np.log(beta * sv_Q[0] * sv_K[0])),
        "g_stable_Q": float((sv_Q ** 2).sum() / sv_Q[0] ** 2 / sv_Q.size),
        "g_stable_K": float((sv_K ** 2).sum() / sv_K[0] ** 2 / sv_K.size),
    }


def gauge_diagonal(d: int, ratio: float) -> np.ndarray:
    """The fixed diagonal gauge of condition ratio ``ratio`` in dimension ``d >= 2``: entries
    ``ratio ** (k / (d - 1))``, ``k = 0..d-1``, in a fixed shuffled order (seed 0), so
    ``max / min = ratio`` exactly (in dimension 1 every gauge is a scalar, which ``Gamma``
    absorbs: the identity is returned)."""
    if d < 1 or ratio < 1:
        raise InvalidArgumentError(f"d, ratio: expected d >= 1 and ratio >= 1, got {d}, {ratio}")
    e = np.linspace(0.0, 1.0, d) if d > 1 else np.zeros(1)
    return ratio ** np.random.default_rng(0).permutation(e)


def gauged_native(Q, K, beta: float, ratios=GAUGE_RATIOS) -> dict:
    """G under the gauges ``Q S``, ``K S^{-1}`` with ``S = gauge_diagonal(d, ratio)``, which
    leave ``Q K^T`` (hence the logits and ``A``) unchanged. Returns ``{ratio: G dict}``."""
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    if Q.ndim != 2 or K.ndim != 2 or Q.shape[1] != K.shape[1] or 0 in Q.shape + K.shape:
        raise InvalidArgumentError(f"Q, K: expected 2-D arrays with the same head dimension, "
                                   f"got shapes {Q.shape} and {K.shape}")
    out = {}
    for c in ratios:
        S = gauge_diagonal(Q.shape[1], float(c))
        Qs, Ks = Q * S, K / S
        rq = float(np.linalg.norm(Qs, axis=1).max())
        rk = float(np.linalg.norm(Ks, axis=1).max())
        out[float(c)] = native_features(rq, rk, float(beta) * rq * rk,
                                        np.linalg.svd(Qs, compute_uv=False),
                                        np.linalg.svd(Ks, compute_uv=False))
    return out

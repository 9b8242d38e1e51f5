"""Float64 verification with explicit rounding bounds (docs/theory/checker.md).

Every quantity that a certificate's condition needs is computed in IEEE-754 binary64 with
round-to-nearest and then enclosed by a rigorous bound on its rounding error, and the
condition is accepted only if it holds **after** the bound is added. The model and bounds
(Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002):

* ``fl(a op b) = (a op b)(1 + d)``, ``|d| <= u = 2^-53`` (Higham (2.4)), plus, for a product
  that underflows, an absolute error at most ``eta / 2`` with ``eta = 2^-1074`` (the
  smallest subnormal); sums and differences of floats are exact when they underflow.
* Dot products and matrix products, any summation order: ``|fl(X Y) - X Y| <= gamma_n |X||Y|
  + n eta`` entrywise, ``gamma_n = n u / (1 - n u)``, ``n`` the inner dimension (Higham
  Lemma 3.1 and (3.13); the ``n eta`` term covers underflowed products).
* A sum of ``n`` non-negative floats computed in any order satisfies
  ``|fl(sum) - sum| <= gamma_{n-1} sum`` (Higham (4.4)), so
  ``sum <= fl(sum) / (1 - gamma_{n-1})``.
* A single correctly rounded result ``y = fl(x)`` with ``x`` normal satisfies
  ``x <= nextafter(y, +inf)`` (one ulp covers half an ulp of rounding).

The bound matrices themselves are formed in floating point; each is inflated by a factor
``2`` on ``gamma`` (which dominates ``1 / (1 - gamma)`` and the few roundings spent forming
it for every ``n`` used here, ``n u < 0.01``) and bumped one ulp up, so each stated bound is
an upper bound of the exact quantity. Functions return a :class:`Float64Result` with the
decision and the margin (how far inside the condition the bound lies).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError
from .certificates import (
    DecodedInverseCertificate,
    FrobeniusCertificate,
    KeyGroupCertificate,
    SubspaceCertificate,
    TrivialCertificate,
    UpperWitness,
    structure_error,
)

__all__ = ["Float64Result", "check_float64", "distance_bound", "gamma", "U_ROUND", "ETA"]

U_ROUND = 2.0**-53
ETA = 2.0**-1074
_INF = np.inf


def gamma(n: int) -> float:
    """``gamma_n = n u / (1 - n u)`` (Higham Lemma 3.1); requires ``n u < 1``."""
    nu = n * U_ROUND
    if nu >= 0.01:
        raise InvalidArgumentError(f"n: {n} is too large for the rounding model used here "
                                   "(n u >= 0.01)")
    return nu / (1.0 - nu)


def _up(x):
    """One ulp toward +inf: an upper bound of the exact value that rounded to ``x``."""
    return np.nextafter(x, _INF)


def _down(x):
    return np.nextafter(x, -_INF)


def _sum_up(X: np.ndarray, axis=None):
    """Upper bound of the exact sum of the non-negative array ``X`` along ``axis``."""
    n = X.size if axis is None else X.shape[axis]
    s = X.sum(axis=axis)
    return _up(s * (1.0 + 2.0 * gamma(n + 2)) + n * ETA)


def _sum_down(X: np.ndarray, axis=None):
    """Lower bound of the exact sum of the non-negative array ``X`` along ``axis``."""
    n = X.size if axis is None else X.shape[axis]
    s = X.sum(axis=axis)
    return np.maximum(_down(s * (1.0 - 2.0 * gamma(n + 2)) - n * ETA), 0.0)


def _is_selection(M: np.ndarray, axis: int) -> bool:
    """Every column (``axis=0``) or row (``axis=1``) of ``M`` has at most one non-zero, = 1."""
    nz = M != 0
    return bool((nz.sum(axis=axis) <= 1).all() and (M[nz] == 1.0).all())


def _matmul_bound(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``P = fl(X Y)`` and ``E >= |P - X Y|`` entrywise (exact product of the float inputs).

    When ``Y`` selects (each column has at most one non-zero, equal to 1) or ``X`` selects
    (each row likewise), every entry of ``X Y`` is a single float times 1 plus exact zeros,
    so ``fl(X Y) = X Y`` exactly and ``E = 0``: key-support witnesses and the identity
    witness are checked without any rounding allowance.
    """
    n = X.shape[1]
    P = X @ Y
    if _is_selection(Y, 0) or _is_selection(X, 1):
        return P, np.zeros_like(P)
    absprod = np.abs(X) @ np.abs(Y)  # >= (1 - gamma_n)|X||Y| - n eta
    g = 2.0 * gamma(n + 2)
    E = _up((absprod + n * ETA) * g + 2.0 * n * ETA)
    return P, E


@dataclass(frozen=True)
class Float64Result:
    """Outcome of a float64 check.

    ``ok`` is True only if the certificate's condition holds after every rounding bound;
    ``margin`` is the slack (positive when ``ok``; in the units of the condition: e.g.
    ``eps - bound(||A - UW||_inf)`` for an upper witness); ``detail`` says what was bounded.
    """

    ok: bool
    margin: float
    detail: str


def _fail(detail: str) -> Float64Result:
    return Float64Result(False, float("-inf"), detail)


def check_upper(A: np.ndarray, c: UpperWitness) -> Float64Result:
    """``||A - U W||_inf <= eps`` with rounding bounds (docs/theory/witnesses.md)."""
    P, E = _matmul_bound(c.U, c.W)
    if not np.isfinite(P).all() or not np.isfinite(E).all():
        return _fail("U W overflows")
    D = np.abs(A - P)  # exact |A - P| <= D (1 + u) up to rounding: covered below
    T = np.where(D == 0, 0.0, D * (1.0 + 2.0 * U_ROUND)) + E  # fl(a - p) = 0 iff a = p
    rows = _sum_up(T, axis=1)
    worst = float(rows.max())
    return Float64Result(worst <= c.eps, c.eps - worst, f"max row l1 error <= {worst:.17g}")


def check_causal_upper(A: np.ndarray, c) -> Float64Result:
    """``||A - (exact * A + keep * (U W))||_inf <= eps`` with rounding bounds: as
    :func:`check_upper` where ``keep`` holds; ``|A_ij|`` (exact) where neither mask holds;
    nothing where ``exact`` holds (the approximation is ``A`` itself there)."""
    P, E = _matmul_bound(c.U, c.W)
    if not np.isfinite(P).all() or not np.isfinite(E).all():
        return _fail("U W overflows")
    D = np.where(c.keep, np.abs(A - P), np.where(c.exact, 0.0, np.abs(A)))
    T = np.where(D == 0, 0.0, D * (1.0 + 2.0 * U_ROUND)) + np.where(c.keep, E, 0.0)
    rows = _sum_up(T, axis=1)
    worst = float(rows.max())
    return Float64Result(worst <= c.eps, c.eps - worst,
                         f"max row l1 error (masked product) <= {worst:.17g}")


def check_block(A: np.ndarray, c) -> Float64Result:
    """The inner certificate's condition on the block ``A[rows][:, cols]`` (kinds ``block``
    and ``causal-lower``; the latter's position inside ``keep`` is checked by
    ``structure_error``). Selecting entries is exact, so the inner check's rounding
    analysis is the whole of it."""
    r = check_float64(A[np.ix_(c.rows, c.cols)], c.inner)
    return Float64Result(r.ok, r.margin, f"block {c.rows.size}x{c.cols.size}: {r.detail}")


def distance_bound(A, B) -> float:
    """A rigorous upper bound of ``||A - B||_inf`` (max row l1 distance) of two float matrices.

    Used where two computations of one operator must be compared (gauge invariance, docs/theory/geometry.md):
    ``fl(a - b) = (a - b)(1 + d)`` (Higham (2.4); exact when it underflows) and the row sums
    by ``_sum_up``. Returns ``inf`` for non-finite input.

    Raises
    ------
    InvalidArgumentError
        If the shapes differ or an array is not 2-D.
    """
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if A.ndim != 2 or A.shape != B.shape:
        raise InvalidArgumentError(f"A, B: expected two 2-D arrays of one shape, got {A.shape} "
                                   f"and {B.shape}")
    if A.size == 0:
        return 0.0
    with np.errstate(all="ignore"):
        D = np.abs(A - B)
        if not np.isfinite(D).all():
            return float("inf")
        T = D * (1.0 + 2.0 * U_ROUND)
        return float(_up(_sum_up(T, axis=1).max()))


def check_trivial(A: np.ndarray, c: TrivialCertificate) -> Float64Result:
    """``||A||_inf > eps``."""
    rows = _sum_down(np.abs(A), axis=1)
    best = float(rows.max())
    return Float64Result(best > c.eps, best - c.eps, f"||A||_inf >= {best:.17g}")


def check_key_groups(A: np.ndarray, c: KeyGroupCertificate) -> Float64Result:
    """Each witness query's mass on its group minus its mass on the other groups ``> eps``."""
    N = A.shape[1]
    k = c.rank
    q = c.queries
    owner = np.full(N, -1, dtype=np.int64)
    for a, g in enumerate(c.groups):  # disjoint and in range: checked by structure_error
        owner[g] = a
    rows = A[q]  # (k, N), entries >= 0 (validated operator) but checked through abs anyway
    rows = np.abs(rows)
    chosen = owner >= 0
    own_mask = owner[None, :] == np.arange(k)[:, None]
    other_mask = chosen[None, :] & ~own_mask
    own_low = _sum_down(np.where(own_mask, rows, 0.0), axis=1)
    other_up = _sum_up(np.where(other_mask, rows, 0.0), axis=1)
    margin = _down(_down(own_low - other_up))
    worst = float(margin.min())
    return Float64Result(
        worst > c.eps, worst - c.eps, f"min diagonal-dominance margin >= {worst:.17g}"
    )


def check_decoded(A: np.ndarray, c: DecodedInverseCertificate) -> Float64Result:
    """``||I - L A R||_inf + eps ||L||_inf ||R||_inf < 1`` with rounding bounds (docs/theory/lower.md)."""
    m = A.shape[0]
    L, R = c.L, c.R
    k = c.rank
    X, E1 = _matmul_bound(A, R)  # A R = X + D1, |D1| <= E1
    M, E2 = _matmul_bound(L, X)  # L X = M + D2, |D2| <= E2
    # |L A R - M| <= E2 + |L| E1 ; |L| E1 formed in float, inflated like a matmul bound
    absLE1 = np.abs(L) @ E1
    F = _up((absLE1 + m * ETA) * (1.0 + 2.0 * gamma(m + 2)) + m * ETA)
    G = np.abs(np.eye(k) - M) * (1.0 + 2.0 * U_ROUND) + E2 + F
    if not np.isfinite(G).all():
        return _fail("I - L A R overflows")
    resid = float(_sum_up(G, axis=1).max())
    nL = float(_sum_up(np.abs(L), axis=1).max())
    nR = float(_sum_up(np.abs(R), axis=1).max())
    total = float(_up(_up(_up(_up(c.eps * nL) * nR) + resid)))
    return Float64Result(
        total < 1.0,
        1.0 - total,
        f"||I-LAR||_inf <= {resid:.6g}, ||L||_inf <= {nL:.6g}, ||R||_inf <= {nR:.6g}, "
        f"condition <= {total:.17g} (< 1 needed)",
    )


def check_subspace(A: np.ndarray, c: SubspaceCertificate) -> Float64Result:
    """``max_j eps ||lam_j||_1 + ||mu_j||_1 + ||r_j - R^T (A^T lam_j + mu_j)||_1 < 1``.

    ``S = Lam (A R) + M R`` is formed as ``X = fl(A R)``, ``P1 = fl(Lam X)``, ``P2 = fl(M R)``,
    ``S = fl(P1 + P2)``; ``|Lam A R + M R - S| <= E(Lam X) + |Lam| E(A R) + E(M R) + 2u |S|``
    (the last term: one rounded addition); ``R[J] = I`` is exact (checked structurally).
    """
    m = A.shape[0]
    X, E1 = _matmul_bound(A, c.R)
    P1, E2 = _matmul_bound(c.Lam, X)
    P2, E3 = _matmul_bound(c.M, c.R)
    S = P1 + P2
    absLE1 = np.abs(c.Lam) @ E1
    F = _up((absLE1 + m * ETA) * (1.0 + 2.0 * gamma(m + 2)) + m * ETA)
    G = np.abs(c.R - S) * (1.0 + 2.0 * U_ROUND) + E2 + F + E3 + 2.0 * U_ROUND * np.abs(S)
    if not np.isfinite(G).all():
        return _fail("Lam A R + M R overflows")
    resid = _sum_up(G, axis=1)
    nL = _sum_up(np.abs(c.Lam), axis=1)
    nM = _sum_up(np.abs(c.M), axis=1)
    cj = _up(_up(_up(_up(c.eps * nL) + nM) + resid))
    worst = float(cj.max())
    return Float64Result(worst < 1.0, 1.0 - worst,
                         f"max_j c_j <= {worst:.17g} (< 1 needed), max residual "
                         f"{float(resid.max()):.3g}")


def frobenius_terms(B: np.ndarray, r: int):
    """Rigorous ``(||B||_F^2 lower bound, upper bounds of sigma_1..sigma_r(B))``.

    From a computed SVD ``B ~ U diag(s) V^T`` and ``Y = fl(U diag(s))``:
    ``sigma_j(B) <= sqrt(1 + eta_V) (sqrt(1 + eta_U) s_j + zeta) + delta`` where
    ``eta_U >= ||U^T U - I||_2``, ``eta_V >= ||V^T V - I||_2`` (bounded by Frobenius norms),
    ``zeta >= ||Y - U diag(s)||_2`` and ``delta >= ||B - Y V^T||_2`` (Weyl's inequality and
    ``sigma_j(X Z) <= ||X||_2 sigma_j(Z)``; docs/theory/lower.md).
    """
    Uf, s, Vt = np.linalg.svd(B, full_matrices=False)

    def gram_defect_up(Z):  # >= ||Z^T Z - I||_F for Z with orthonormal-ish columns
        G, E = _matmul_bound(Z.T, Z)
        D = np.abs(G - np.eye(G.shape[0])) * (1.0 + 2.0 * U_ROUND) + E
        return float(_up(np.sqrt(_sum_up(D * D * (1.0 + 2.0 * U_ROUND)))))

    def frob_up(Z):
        return float(_up(np.sqrt(_sum_up(Z * Z * (1.0 + 2.0 * U_ROUND)))))

    eta_U = gram_defect_up(Uf)
    eta_V = gram_defect_up(Vt.T)
    Y = Uf * s
    zeta = float(_up(2.0 * U_ROUND * frob_up(Y) + ETA))
    P, E = _matmul_bound(Y, Vt)
    Dres = np.abs(B - P) * (1.0 + 2.0 * U_ROUND) + E
    delta = frob_up(Dres)
    cU = float(_up(np.sqrt(_up(1.0 + eta_U))))
    cV = float(_up(np.sqrt(_up(1.0 + eta_V))))
    sig = _up(_up(cV * _up(_up(cU * s[:r]) + zeta)) + delta)
    fro2_low = float(_sum_down(B * B * (1.0 - 2.0 * U_ROUND)))
    return fro2_low, sig


def check_frobenius(A: np.ndarray, c: FrobeniusCertificate) -> Float64Result:
    """``sum_{j>r} sigma_j(A_I)^2 > |I| eps^2`` with a rigorous singular-value bound."""
    rows = c.rows
    B = A[rows]
    fro2_low, sig = frobenius_terms(B, c.r)
    top_up = float(_sum_up(sig * sig * (1.0 + 2.0 * U_ROUND))) if c.r else 0.0
    tail_low = float(_down(_down(fro2_low - top_up)))
    need = float(_up(_up(c.eps * c.eps) * rows.size))
    return Float64Result(
        tail_low > need,
        tail_low - need,
        f"tail sum sigma_j^2 (j>{c.r}) >= {tail_low:.17g} vs |I| eps^2 <= {need:.17g}",
    )


_DISPATCH = {
    "upper": check_upper,
    "causal-upper": check_causal_upper,
    "causal-lower": check_block,
    "block": check_block,
    "trivial": check_trivial,
    "key-groups": check_key_groups,
    "decoded": check_decoded,
    "frobenius": check_frobenius,
    "subspace": check_subspace,
}


def _flush_to_zero() -> bool:
    """True if subnormal results are flushed to zero (some libraries built with fast-math
    switch the FPU to FTZ/DAZ for the whole process); the bounds above assume IEEE gradual
    underflow, so the checker then refuses to accept anything."""
    tiny = np.array([2.0**-1022])
    return bool((tiny / 2.0)[0] == 0.0 or (tiny * 0.5)[0] != 2.0**-1023)


def check_float64(A: np.ndarray, cert) -> Float64Result:
    """Check ``cert`` against ``A`` in float64 with rounding bounds; never raises on bad data."""
    if _flush_to_zero():
        return _fail("floating point flushes subnormals to zero here (FTZ/DAZ): the rounding "
                     "model of this checker (gradual underflow) does not hold")
    try:
        A = np.asarray(A, dtype=np.float64)
        if A.ndim != 2 or A.size == 0 or not np.isfinite(A).all():
            return _fail("A must be a finite non-empty 2-D array")
        err = structure_error(cert, A.shape)
        if err is not None:
            return _fail(err)
        with np.errstate(all="ignore"):
            return _DISPATCH[cert.kind](A, cert)
    except Exception as exc:  # malformed data: a rejection, never a pass
        return _fail(f"check raised {type(exc).__name__}: {exc}")

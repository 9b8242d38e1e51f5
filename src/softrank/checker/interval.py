"""Interval cross-check of every certificate condition (docs/theory/checker.md).

The conditions checked in :mod:`.float64` are recomputed here in interval arithmetic, from
the exact float64 data, with outward rounding done by a library rather than by our own
error analysis:

* ``mpmath`` (``mpmath.iv``, pure Python) -- used for operators with ``m, N <= 64``, or on a
  sample of rows (``max_rows``) for larger ones;
* ``flint`` (python-flint ``arb_mat``, ball arithmetic in C) -- full size at any size.

Only the final comparison is done in float64, on enclosure endpoints converted with one
ulp of outward rounding. The result is independent evidence: a certificate is accepted by
:func:`softrank.checker.check` only if both this check and the float64 one accept it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError
from .certificates import structure_error

__all__ = ["IntervalResult", "check_interval", "MPMATH_FULL_SIZE"]

#: Largest ``max(m, N)`` that the mpmath back end checks in full by default.
MPMATH_FULL_SIZE = 64
PREC = 80  # working precision (bits) of both back ends


@dataclass(frozen=True)
class IntervalResult:
    """Outcome of an interval check: ``ok``, the back end, the rows covered, a detail."""

    ok: bool
    backend: str
    rows_checked: str
    detail: str


class _Precision:
    """Sets the back end's working precision to ``PREC`` bits for one check and restores
    the caller's afterwards (mpmath's ``iv`` and flint's ``ctx`` are process-wide)."""

    def __enter__(self):
        self._saved = self._get()
        self._set(PREC)
        return self

    def __exit__(self, *exc):
        self._set(self._saved)
        return False


class _Mp(_Precision):
    name = "mpmath"

    def __init__(self):
        from mpmath import iv

        self.iv = iv

    def _get(self) -> int:
        return self.iv.prec

    def _set(self, prec: int) -> None:
        self.iv.prec = prec

    def num(self, x):
        return self.iv.mpf(float(x))

    def mat(self, X):
        iv = self.iv
        X = np.asarray(X, dtype=np.float64)
        M = iv.matrix(X.shape[0], X.shape[1])
        for i in range(X.shape[0]):
            for j in range(X.shape[1]):
                M[i, j] = iv.mpf(float(X[i, j]))
        return M

    def matmul(self, X, Y):
        return X * Y

    def get(self, M, i, j):
        return M[i, j]

    def sqrt(self, x):
        return self.iv.sqrt(x)

    def sqrt_upper(self, x):
        """An enclosure of ``sqrt(hi(x))``, an upper bound of ``sqrt`` over ``x``'s points
        that are ``>= 0`` (for sums of squares, whose enclosure may dip below 0)."""
        return self.iv.sqrt(self.iv.mpf(max(float(x.b), 0.0)))

    def hi(self, x) -> float:
        return float(np.nextafter(float(x.b), np.inf))

    def lo(self, x) -> float:
        return float(np.nextafter(float(x.a), -np.inf))


class _Flint(_Precision):
    name = "flint"

    def __init__(self):
        import flint

        self.flint = flint

    def _get(self) -> int:
        return self.flint.ctx.prec

    def _set(self, prec: int) -> None:
        self.flint.ctx.prec = prec

    def num(self, x):
        return self.flint.arb(float(x))

    def mat(self, X):
        X = np.asarray(X, dtype=np.float64)
        return self.flint.arb_mat([[float(v) for v in row] for row in X]) if X.size else (
            self.flint.arb_mat(X.shape[0], X.shape[1])
        )

    def matmul(self, X, Y):
        return X * Y

    def get(self, M, i, j):
        return M[i, j]

    def sqrt(self, x):
        return x.sqrt()

    def sqrt_upper(self, x):
        """An enclosure of ``sqrt(upper(x))`` (see ``_Mp.sqrt_upper``); arb's own sqrt of a
        ball that straddles 0 is indeterminate (NaN)."""
        u = x.upper()
        return (u if u > 0 else self.flint.arb(0)).sqrt()

    def hi(self, x) -> float:
        # x.upper() is an exact binary number >= every point of the ball; float() rounds it
        # to nearest, one ulp up restores the bound (mid + rad in floats would not: with
        # mid ~ -rad the cancellation can exceed any fixed number of ulps of the result)
        return float(np.nextafter(float(x.upper()), np.inf))

    def lo(self, x) -> float:
        return float(np.nextafter(float(x.lower()), -np.inf))


def _backend(name: str):
    if name == "mpmath":
        return _Mp()
    if name == "flint":
        return _Flint()
    raise InvalidArgumentError(f"backend: expected 'mpmath' or 'flint', got {name!r}")


def _rows_abs_sums(B, A_rows, P, rows, cols_pred=None):
    """Interval row sums ``sum_j |A_ij - P_ij|`` for the listed rows (A_rows: float array)."""
    out = []
    for t, i in enumerate(rows):
        s = B.num(0.0)
        for j in range(A_rows.shape[1]):
            s = s + abs(B.num(A_rows[t, j]) - B.get(P, t, j))
        out.append(s)
    return out


def _sample(m: int, max_rows: int | None, rng_seed: int = 0) -> np.ndarray:
    if max_rows is None or m <= max_rows:
        return np.arange(m)
    rng = np.random.default_rng(rng_seed)
    return np.sort(rng.choice(m, size=max_rows, replace=False))


def _upper(B, A, c, rows):
    U = B.mat(c.U[rows])
    W = B.mat(c.W)
    P = B.matmul(U, W)
    sums = _rows_abs_sums(B, A[rows], P, rows)
    worst = max(B.hi(s) for s in sums)
    return worst <= c.eps, f"max row l1 error <= {worst:.17g}"


def _trivial(B, A, c, rows):
    best = -np.inf
    for i in rows:
        s = B.num(0.0)
        for v in A[i]:
            s = s + abs(B.num(v))
        best = max(best, B.lo(s))
    return best > c.eps, f"||A||_inf >= {best:.17g}"


def _key_groups(B, A, c, rows):
    k = c.rank
    worst = np.inf
    for a in range(k):
        q = int(c.queries[a])
        own = B.num(0.0)
        for j in c.groups[a]:
            own = own + B.num(A[q, j])
        other = B.num(0.0)
        for b in range(k):
            if b != a:
                for j in c.groups[b]:
                    other = other + B.num(A[q, j])
        worst = min(worst, B.lo(own - other))
    return worst > c.eps, f"min diagonal-dominance margin >= {worst:.17g}"


def _decoded(B, A, c, rows):
    k = c.rank
    X = B.matmul(B.mat(A), B.mat(c.R))
    M = B.matmul(B.mat(c.L[rows]), X)
    resid = -np.inf
    for t, a in enumerate(rows):
        s = B.num(0.0)
        for b in range(k):
            s = s + abs(B.num(1.0 if a == b else 0.0) - B.get(M, t, b))
        resid = max(resid, B.hi(s))
    nL = max(B.hi(sum((abs(B.num(v)) for v in row), B.num(0.0))) for row in c.L)
    nR = max(B.hi(sum((abs(B.num(v)) for v in row), B.num(0.0))) for row in c.R)
    total = B.num(resid) + B.num(c.eps) * B.num(nL) * B.num(nR)
    t = B.hi(total)
    return t < 1.0, f"condition <= {t:.17g} (< 1 needed)"


def _frobenius(B, A, c, rows):
    Bm = A[c.rows]
    Uf, s, Vt = np.linalg.svd(Bm, full_matrices=False)
    r = c.r

    def gram_defect(Z):
        Zi = B.mat(Z)
        Zt = B.mat(Z.T)
        G = B.matmul(Zt, Zi)
        acc = B.num(0.0)
        for i in range(Z.shape[1]):
            for j in range(Z.shape[1]):
                d = B.get(G, i, j) - B.num(1.0 if i == j else 0.0)
                acc = acc + d * d
        return B.sqrt_upper(acc)

    eta_U = gram_defect(Uf)
    eta_V = gram_defect(Vt.T)
    Y = B.matmul(B.mat(Uf), B.mat(np.diag(s)))
    P = B.matmul(Y, B.mat(Vt))
    acc = B.num(0.0)
    fro2 = B.num(0.0)
    for i in range(Bm.shape[0]):
        for j in range(Bm.shape[1]):
            bij = B.num(Bm[i, j])
            d = bij - B.get(P, i, j)
            acc = acc + d * d
            fro2 = fro2 + bij * bij
    delta = B.sqrt_upper(acc)
    one = B.num(1.0)
    cU = B.sqrt(one + eta_U)
    cV = B.sqrt(one + eta_V)
    top = B.num(0.0)
    for j in range(r):
        sig = cV * cU * B.num(s[j]) + delta
        top = top + sig * sig
    tail = B.lo(fro2 - top)
    need = B.hi(B.num(c.eps) * B.num(c.eps) * B.num(len(c.rows)))
    return tail > need, f"tail >= {tail:.17g} vs |I| eps^2 <= {need:.17g}"


def _subspace(B, A, c, rows):
    X = B.matmul(B.mat(A), B.mat(c.R))
    Rm = B.mat(c.R)
    S1 = B.matmul(B.mat(c.Lam[rows]), X)
    S2 = B.matmul(B.mat(c.M[rows]), Rm)
    k = c.rank
    eps = B.num(c.eps)
    worst = -np.inf
    for t, j in enumerate(rows):
        s = B.num(0.0)
        for b in range(k):
            s = s + abs(B.num(c.R[j, b]) - B.get(S1, t, b) - B.get(S2, t, b))
        s = s + eps * sum((abs(B.num(v)) for v in c.Lam[j]), B.num(0.0))
        s = s + sum((abs(B.num(v)) for v in c.M[j]), B.num(0.0))
        worst = max(worst, B.hi(s))
    return worst < 1.0, f"max_j c_j <= {worst:.17g} (< 1 needed)"


_CONDITIONS = {
    "upper": (_upper, True),
    "trivial": (_trivial, True),
    "key-groups": (_key_groups, False),
    "decoded": (_decoded, True),
    "frobenius": (_frobenius, False),
    "subspace": (_subspace, True),
}


def check_interval(A, cert, backend: str = "auto", max_rows: int | None = 16) -> IntervalResult:
    """Recompute ``cert``'s condition for ``A`` in interval arithmetic.

    Parameters
    ----------
    A : (m, N) float64 ndarray
    cert : a certificate from :mod:`.certificates`
    backend : {"auto", "mpmath", "flint"}
        ``auto``: mpmath when ``max(m, N) <= MPMATH_FULL_SIZE`` (except Frobenius-tail
        certificates), otherwise flint (full size).
    max_rows : int or None
        With the mpmath back end on a larger operator, check this many rows (a seeded sample;
        rows of ``U`` for witnesses, rows of ``L`` for decoded inverses). ``None``: all rows.

    Returns
    -------
    IntervalResult
        ``ok`` False on any failure, malformed data or exception (never raises).
    """
    try:
        A = np.asarray(A, dtype=np.float64)
        if A.ndim != 2 or A.size == 0 or not np.isfinite(A).all():
            return IntervalResult(False, backend, "-", "A must be a finite non-empty 2-D array")
        m, N = A.shape
        err = structure_error(cert, A.shape)
    except Exception as exc:
        return IntervalResult(False, backend, "-", f"check raised {type(exc).__name__}: {exc}")
    if err is not None:
        return IntervalResult(False, backend, "-", err)
    if backend == "auto":
        # The Frobenius and subspace conditions need n^3-sized interval products (about 5 s
        # in mpmath at 64 x 64, 0.1 s in flint): they always go to flint.
        small = max(m, N) <= MPMATH_FULL_SIZE and cert.kind not in ("frobenius", "subspace")
        backend = "mpmath" if small else "flint"
    fn, rowwise = _CONDITIONS[cert.kind]
    try:
        nrows = {"decoded": cert.rank, "subspace": N}.get(cert.kind, m)
        if backend == "mpmath" and max(m, N) > MPMATH_FULL_SIZE and rowwise:
            rows = _sample(nrows, max_rows)
        else:
            rows = np.arange(nrows)
        covered = "all" if rows.size == nrows else f"{rows.size} of {nrows}"
        with _backend(backend) as B:  # the caller's precision is restored on every exit
            ok, detail = fn(B, A, cert, rows)
        return IntervalResult(bool(ok), backend, covered, detail)
    except Exception as exc:
        return IntervalResult(False, backend, "-", f"check raised {type(exc).__name__}: {exc}")

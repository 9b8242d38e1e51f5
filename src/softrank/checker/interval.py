"""Interval cross-check of every certificate condition (docs/theory/checker.md#interval-cross-check).

The conditions checked in :mod:`.float64` are recomputed here in interval arithmetic, from
the exact float64 data, with outward rounding done by a library rather than by the float64
check's error analysis (above ``FLINT_MAX_SIZE``: by per-operation bounds of our own that
share no code with it). Three back ends:

* ``flint`` (python-flint ``arb_mat``: Arb's ball arithmetic in C) -- the default on
  operators with ``max(m, N) <= FLINT_MAX_SIZE``: each matrix is converted once, and
  products, differences and row sums are matrix-level operations in C;
* ``midrad`` (:mod:`.midrad`: midpoint-radius matrices on BLAS, Rump 2012) -- the default
  above that size, where Arb's per-entry objects cost minutes and gigabytes: products,
  differences and sums of whole matrices in float64 with a priori bounds of their rounding,
  scalars in Arb;
* ``mpmath`` (``mpmath.iv``, pure Python) -- on request (``backend="mpmath"``), a second
  library for cross-checks; on operators with ``max(m, N) > 64`` it checks a seeded sample
  of rows (``max_rows``) unless told otherwise.

Each condition is written once, in terms of a few operations that every back end provides
(matrices of exact float64 data, products, differences, row sums of absolute values, sums
of squares); only the final comparison is made in float64, on enclosure endpoints converted
with one step of outward rounding. The result is independent evidence: a certificate is
accepted by :func:`softrank.checker.check` only if both this check and the float64 one
accept it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError
from . import midrad as _mr
from .certificates import structure_error

__all__ = ["IntervalResult", "check_interval", "MPMATH_FULL_SIZE", "FLINT_MAX_SIZE", "BACKENDS"]

#: Largest ``max(m, N)`` that the mpmath back end checks in full by default (larger
#: operators: a sample of ``max_rows`` rows).
MPMATH_FULL_SIZE = 64
#: Largest ``max(m, N)`` (of the operator, or of the block a block certificate is about) that
#: the ``auto`` back end checks with python-flint; larger ones: midpoint-radius on BLAS.
FLINT_MAX_SIZE = 512
PREC = 80  # working precision (bits) of Arb and mpmath


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


def _outward_up(x: float) -> float:
    return float(np.nextafter(x, np.inf))


def _outward_down(x: float) -> float:
    return float(np.nextafter(x, -np.inf))


class _Mp(_Precision):
    """mpmath ``iv``: every operation in Python, entry by entry."""

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
        """The exact interval matrix of a float64 array."""
        iv = self.iv
        X = np.asarray(X, dtype=np.float64)
        M = iv.matrix(X.shape[0], X.shape[1])
        for i in range(X.shape[0]):
            for j in range(X.shape[1]):
                M[i, j] = iv.mpf(float(X[i, j]))
        return M

    def matmul(self, X, Y):
        return X * Y

    def sub(self, X, Y):
        return X - Y

    def get(self, M, i, j):
        return M[i, j]

    def row_abs_sums(self, M, mask=None) -> list:
        """Enclosures of ``sum_j |M_ij|``, one per row (over the entries where the boolean
        array ``mask`` is True, when one is given)."""
        out = []
        for i in range(M.rows):
            s = self.num(0.0)
            for j in range(M.cols):
                if mask is None or mask[i, j]:
                    s = s + abs(M[i, j])
            out.append(s)
        return out

    def abs_row_sums_of(self, X) -> list:
        """Enclosures of ``sum_j |X_ij|`` for a float64 array (its absolute values exact)."""
        return self.row_abs_sums(self.mat(np.abs(np.asarray(X, dtype=np.float64))))

    def sum_squares(self, M):
        """An enclosure of ``sum_ij M_ij^2`` (it may dip below 0 when entries straddle 0)."""
        s = self.num(0.0)
        for i in range(M.rows):
            for j in range(M.cols):
                s = s + M[i, j] * M[i, j]
        return s

    def sqrt(self, x):
        return self.iv.sqrt(x)

    def sqrt_upper(self, x):
        """An enclosure of ``sqrt(hi(x))``, an upper bound of ``sqrt`` over ``x``'s points
        that are ``>= 0`` (for sums of squares, whose enclosure may dip below 0)."""
        return self.iv.sqrt(self.iv.mpf(max(float(x.b), 0.0)))

    def hi(self, x) -> float:
        return _outward_up(float(x.b))

    def lo(self, x) -> float:
        return _outward_down(float(x.a))


class _Flint(_Precision):
    """python-flint ``arb_mat``: one conversion per matrix, products, differences and sums
    in C (the only per-entry Python work is the absolute value of a computed matrix)."""

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
        """The exact ball matrix of a float64 array (radius 0: 80 bits hold every double)."""
        X = np.asarray(X, dtype=np.float64)
        r, c = X.shape
        return self.flint.arb_mat(r, c, X.ravel().tolist()) if X.size else (
            self.flint.arb_mat(r, c))

    def matmul(self, X, Y):
        return X * Y

    def sub(self, X, Y):
        return X - Y

    def get(self, M, i, j):
        return M[i, j]

    def _ones(self, n: int):
        return self.flint.arb_mat(n, 1, [1] * n)

    def _column(self, S) -> list:
        return [S[i, 0] for i in range(S.nrows())]

    def row_abs_sums(self, M, mask=None) -> list:
        """Enclosures of ``sum_j |M_ij|``, one per row (over the entries where the boolean
        array ``mask`` is True, when one is given): ``|M|`` entry by entry (arb's abs of a
        ball), then the sums as one product with a vector of ones, in C."""
        r, c = M.nrows(), M.ncols()
        if r == 0:
            return []
        if c == 0:
            return [self.num(0.0)] * r
        if mask is None:
            absM = self.flint.arb_mat(r, c, [abs(x) for x in M.entries()])
        else:
            zero = self.num(0.0)
            absM = self.flint.arb_mat(r, c, [abs(x) if k else zero for x, k in
                                             zip(M.entries(), np.ravel(mask).tolist())])
        return self._column(absM * self._ones(c))

    def abs_row_sums_of(self, X) -> list:
        """Enclosures of ``sum_j |X_ij|`` for a float64 array (its absolute values exact)."""
        X = np.abs(np.asarray(X, dtype=np.float64))
        if X.shape[0] == 0:
            return []
        if X.shape[1] == 0:
            return [self.num(0.0)] * X.shape[0]
        return self._column(self.mat(X) * self._ones(X.shape[1]))

    def sum_squares(self, M):
        """An enclosure of ``sum_ij M_ij^2``: the entries as one row ``v``, then ``v v^T``
        in C (it may dip below 0 when entries straddle 0)."""
        n = M.nrows() * M.ncols()
        if n == 0:
            return self.num(0.0)
        v = self.flint.arb_mat(1, n, M.entries())
        return (v * v.transpose())[0, 0]

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
        return _outward_up(float(x.upper()))

    def lo(self, x) -> float:
        return _outward_down(float(x.lower()))


class _MidRad(_Flint):
    """Midpoint-radius matrices on BLAS (:mod:`.midrad`) for every matrix operation; the
    scalars the conditions combine (row sums, norms, margins) are converted to Arb balls
    exactly and combined by Arb, as in :class:`_Flint`."""

    name = "midrad"

    def _scalar(self, lo: float, hi: float):
        """An Arb ball containing the float interval ``[lo, hi]``."""
        return self.flint.arb(float(lo)).union(self.flint.arb(float(hi)))

    def mat(self, X):
        return _mr.ball(X)

    def matmul(self, X, Y):
        return _mr.matmul(X, Y)

    def sub(self, X, Y):
        return _mr.sub(X, Y)

    def get(self, M, i, j):
        rad = 0.0 if M.rad is None else float(M.rad[i, j])
        return self.flint.arb(float(M.mid[i, j]), rad)

    def row_abs_sums(self, M, mask=None) -> list:
        lo, hi = _mr.row_abs_sum_bounds(M, mask)
        return [self._scalar(a, b) for a, b in zip(lo.tolist(), hi.tolist())]

    def abs_row_sums_of(self, X) -> list:
        return self.row_abs_sums(_mr.ball(np.abs(np.asarray(X, dtype=np.float64))))

    def sum_squares(self, M):
        return self._scalar(*_mr.sum_squares_bounds(M))


def _backend(name: str):
    if name == "mpmath":
        return _Mp()
    if name == "flint":
        return _Flint()
    if name == "midrad":
        return _MidRad()
    raise InvalidArgumentError(
        f"backend: expected 'auto', 'flint', 'midrad' or 'mpmath', got {name!r}")


def _sample(m: int, max_rows: int | None, rng_seed: int = 0) -> np.ndarray:
    if max_rows is None or m <= max_rows:
        return np.arange(m)
    rng = np.random.default_rng(rng_seed)
    return np.sort(rng.choice(m, size=max_rows, replace=False))


def _upper(B, A, c, rows):
    """``max_i sum_j |A_ij - (U W)_ij| <= eps`` over the listed rows."""
    P = B.matmul(B.mat(c.U[rows]), B.mat(c.W))
    sums = B.row_abs_sums(B.sub(B.mat(A[rows]), P))
    worst = max(B.hi(s) for s in sums)
    return worst <= c.eps, f"max row l1 error <= {worst:.17g}"


def _causal_upper(B, A, c, rows):
    """``max_i (sum_{j in keep_i} |A_ij - (U W)_ij| + sum_{j in neither} |A_ij|) <= eps``
    over the listed rows (``exact`` entries contribute nothing): the whole product, its row
    sums over ``keep``, and the exact row sums of ``A`` over neither mask."""
    keep = c.keep[rows]
    Ar = A[rows]
    if c.rank:
        D = B.sub(B.mat(Ar), B.matmul(B.mat(c.U[rows]), B.mat(c.W)))
        kept = B.row_abs_sums(D, keep)
    else:  # rank 0: the product is exactly 0
        kept = B.abs_row_sums_of(np.where(keep, Ar, 0.0))
    dropped = B.abs_row_sums_of(np.where(~keep & ~c.exact[rows], Ar, 0.0))
    worst = max(B.hi(a + b) for a, b in zip(kept, dropped))
    return worst <= c.eps, f"max row l1 error (masked product) <= {worst:.17g}"


def _trivial(B, A, c, rows):
    """``max_i sum_j |A_ij| > eps``."""
    best = max(B.lo(s) for s in B.abs_row_sums_of(A[rows]))
    return best > c.eps, f"||A||_inf >= {best:.17g}"


def _key_groups(B, A, c, rows):
    """Every witness query's margin ``own - other > eps``: with ``V`` the signed indicators
    (column ``a``: +1 on group ``a``, -1 on the other groups, 0 elsewhere), the margin of
    witness ``a`` is ``(A[queries] V)_aa``, one product whose every entry is enclosed once."""
    k = c.rank
    N = A.shape[1]
    R = np.zeros((N, k))
    for a, g in enumerate(c.groups):
        R[np.asarray(g, dtype=np.int64), a] = 1.0
    V = 2.0 * R - R.sum(axis=1, keepdims=True)  # entries -1, 0, 1, exactly
    X = B.matmul(B.mat(A[np.asarray(c.queries, dtype=np.int64)]), B.mat(V))
    worst = min(B.lo(B.get(X, a, a)) for a in range(k))
    return worst > c.eps, f"min diagonal-dominance margin >= {worst:.17g}"


def _decoded(B, A, c, rows):
    """``eps ||L||_inf ||R||_inf + ||I - L A R||_inf < 1`` (rows of ``L`` listed)."""
    k = c.rank
    X = B.matmul(B.mat(A), B.mat(c.R))
    M = B.matmul(B.mat(c.L[rows]), X)
    D = B.sub(B.mat(np.eye(k)[rows]), M)
    resid = max(B.hi(s) for s in B.row_abs_sums(D))
    nL = max(B.hi(s) for s in B.abs_row_sums_of(c.L))
    nR = max(B.hi(s) for s in B.abs_row_sums_of(c.R))
    total = B.num(resid) + B.num(c.eps) * B.num(nL) * B.num(nR)
    t = B.hi(total)
    return t < 1.0, f"condition <= {t:.17g} (< 1 needed)"


def _frobenius(B, A, c, rows):
    """Eckart-Young tail of ``A[I]`` with the float64 SVD's defects enclosed (see the module
    docstring of :mod:`.float64` for the quantities)."""
    Bm = A[c.rows]
    Uf, s, Vt = np.linalg.svd(Bm, full_matrices=False)
    r = c.r

    def gram_defect(Z):
        G = B.matmul(B.mat(Z.T), B.mat(Z))
        return B.sqrt_upper(B.sum_squares(B.sub(G, B.mat(np.eye(Z.shape[1])))))

    eta_U = gram_defect(Uf)
    eta_V = gram_defect(Vt.T)
    Y = B.matmul(B.mat(Uf), B.mat(np.diag(s)))
    P = B.matmul(Y, B.mat(Vt))
    Bi = B.mat(Bm)
    delta = B.sqrt_upper(B.sum_squares(B.sub(Bi, P)))
    fro2 = B.sum_squares(Bi)
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
    """``c_j = ||r_j - Lam_j A R - M_j R||_1 + eps ||Lam_j||_1 + ||M_j||_1 < 1`` for every
    listed key ``j``."""
    Rm = B.mat(c.R)
    X = B.matmul(B.mat(A), Rm)
    S1 = B.matmul(B.mat(c.Lam[rows]), X)
    S2 = B.matmul(B.mat(c.M[rows]), Rm)
    resid = B.row_abs_sums(B.sub(B.sub(B.mat(c.R[rows]), S1), S2))
    nLam = B.abs_row_sums_of(c.Lam[rows])
    nM = B.abs_row_sums_of(c.M[rows])
    eps = B.num(c.eps)
    worst = max(B.hi(r + eps * l + mu) for r, l, mu in zip(resid, nLam, nM))
    return worst < 1.0, f"max_j c_j <= {worst:.17g} (< 1 needed)"


_CONDITIONS = {
    "upper": (_upper, True),
    "causal-upper": (_causal_upper, True),
    "trivial": (_trivial, True),
    "key-groups": (_key_groups, False),
    "decoded": (_decoded, True),
    "frobenius": (_frobenius, False),
    "subspace": (_subspace, True),
}


#: The back ends ``check_interval`` accepts.
BACKENDS = ("auto", "flint", "midrad", "mpmath")


def _flush_to_zero() -> bool:
    """True if subnormal results are flushed to zero in this process (FTZ/DAZ), under which
    neither the libraries' outward rounding nor the midpoint-radius bounds are guaranteed
    (the same test as the float64 check's, written again: the two share no code)."""
    tiny = np.array([2.0**-1022])
    return bool((tiny / 2.0)[0] == 0.0 or (tiny * 0.5)[0] != 2.0**-1023)


def check_interval(A, cert, backend: str = "auto", max_rows: int | None = 16) -> IntervalResult:
    """Recompute ``cert``'s condition for ``A`` in interval arithmetic.

    Parameters
    ----------
    A : (m, N) float64 ndarray
    cert : a certificate from :mod:`.certificates`
    backend : {"auto", "flint", "midrad", "mpmath"}
        Every row is checked by all but ``mpmath``. ``flint``: python-flint's Arb.
        ``midrad``: midpoint-radius matrices on BLAS with a priori rounding bounds
        (:mod:`.midrad`), scalars in Arb. ``auto``: ``flint`` when ``max(m, N)`` of the
        operator (of the block, for block certificates) is at most
        :data:`FLINT_MAX_SIZE`, else ``midrad``. ``mpmath``: mpmath's ``iv``, a second
        library (slow: about 1.5 s for a witness on a 64 x 64 operator).
    max_rows : int or None
        With the mpmath back end on an operator with ``max(m, N) > MPMATH_FULL_SIZE``,
        check this many rows (a seeded sample; rows of ``U`` for witnesses, rows of ``L``
        for decoded inverses, keys for subspace certificates). ``None``: all rows.

    Returns
    -------
    IntervalResult
        ``ok`` False on any failure, malformed data or exception (never raises).
    """
    if _flush_to_zero():
        return IntervalResult(False, backend, "-", "floating point flushes subnormals to zero "
                              "here (FTZ/DAZ): the interval arithmetic's model does not hold")
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
    if cert.kind in ("causal-lower", "block"):  # the inner condition on the block, rows as for it
        try:
            block = A[np.ix_(cert.rows, cert.cols)]
        except Exception as exc:  # indices altered after construction: a rejection
            return IntervalResult(False, backend, "-", f"check raised {type(exc).__name__}: {exc}")
        r = check_interval(block, cert.inner, backend, max_rows)
        return IntervalResult(r.ok, r.backend, r.rows_checked,
                              f"block {cert.rows.size}x{cert.cols.size}: {r.detail}")
    if backend == "auto":
        backend = "flint" if max(m, N) <= FLINT_MAX_SIZE else "midrad"
    fn, rowwise = _CONDITIONS[cert.kind]
    try:
        nrows = {"decoded": cert.rank, "subspace": N}.get(cert.kind, m)
        if backend == "mpmath" and max(m, N) > MPMATH_FULL_SIZE and rowwise:
            rows = _sample(nrows, max_rows)
        else:
            rows = np.arange(nrows)
        covered = "all" if rows.size == nrows else f"{rows.size} of {nrows}"
        with _backend(backend) as B, np.errstate(all="ignore"):  # the caller's precision is
            ok, detail = fn(B, A, cert, rows)  # restored on every exit; overflow raises
        return IntervalResult(bool(ok), backend, covered, detail)
    except Exception as exc:
        return IntervalResult(False, backend, "-", f"check raised {type(exc).__name__}: {exc}")

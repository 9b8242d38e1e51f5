"""Certificate values (docs/theory/witnesses.md, docs/theory/lower.md); their file format is
:mod:`softrank.checker.files`.

These are plain data: what a certifier claims and the numbers that prove it. Nothing here
trusts the producer; :mod:`softrank.checker` decides whether a certificate holds for a given
``A``. This module depends on numpy, the standard library and :mod:`softrank.errors` (the
error classes, which import nothing) only.

Kinds and the claim each makes about ``r_eps(A)`` for the stated ``eps``:

=================  ==========================================  =========================
kind               data                                        claim
=================  ==========================================  =========================
``upper``          ``U (m, k)``, ``W (k, N)``                  ``r_eps(A) <= k``
``trivial``        --                                          ``r_eps(A) >= 1``
``frobenius``      ``rows (s,)``, ``r``                        ``r_eps(A) >= r + 1``
``key-groups``     ``queries (k,)``, ``groups`` (k disjoint)   ``r_eps(A) >= k``
``decoded``        ``L (k, m)``, ``R (N, k)``                  ``r_eps(A) >= k``
``subspace``       ``J (k,)``, ``R (N, k)``, ``Lam (N, m)``,   ``r_eps(A) >= k``
                   ``M (N, N)``
``block``          ``rows (s,)``, ``cols (t,)``, ``inner``     ``r_eps(A) >= k``
                   (rank ``k``, of ``A[rows][:, cols]``)
=================  ==========================================  =========================
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Union

import numpy as np

from ..errors import MalformedCertificate

__all__ = [
    "ROW_SUM_TOL", "attention_problem",
    "UpperWitness",
    "CausalUpperWitness",
    "CausalLowerCertificate",
    "BlockCertificate",
    "TrivialCertificate",
    "FrobeniusCertificate",
    "KeyGroupCertificate",
    "DecodedInverseCertificate",
    "SubspaceCertificate",
    "Certificate",
    "LowerCertificate",
    "matrix_hash",
    "index_array",
    "structure_error",
]

def matrix_hash(A: np.ndarray) -> str:
    """SHA-256 (hex, first 16 chars) of ``A`` as C-ordered float64 bytes with its shape."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    h = hashlib.sha256()
    h.update(repr(A.shape).encode())
    h.update(A.tobytes())
    return h.hexdigest()[:16]


def index_array(name: str, X) -> np.ndarray:
    """A read-only 1-D int64 copy of index data ``X``.

    Raises
    ------
    MalformedCertificate
        Naming ``name``: non-integer values are malformed, not truncated.
    """
    arr = np.asarray(X)
    if arr.size and arr.dtype.kind not in "iu":
        raise MalformedCertificate(f"{name}: expected integer indices, got dtype {arr.dtype}")
    out = np.array(arr, dtype=np.int64).ravel()
    out.setflags(write=False)
    return out


def _f64(name: str, X) -> np.ndarray:
    arr = np.array(X, dtype=np.float64, copy=True)
    if arr.ndim != 2:
        raise MalformedCertificate(f"{name}: expected a 2-D array, got shape {arr.shape}")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class UpperWitness:
    """``r_eps(A) <= k`` because ``||A - U W||_inf <= eps`` (docs/theory/witnesses.md).

    ``U : (m, k)``, ``W : (k, N)`` float64; ``rank(U W) <= k`` holds exactly.
    """

    eps: float
    U: np.ndarray
    W: np.ndarray
    method: str = ""
    kind: str = field(default="upper", init=False)

    def __post_init__(self):
        object.__setattr__(self, "U", _f64("U", self.U))
        object.__setattr__(self, "W", _f64("W", self.W))
        if self.U.shape[1] != self.W.shape[0]:
            raise MalformedCertificate(
                f"U, W: inner dimensions differ, U {self.U.shape}, W {self.W.shape}"
            )

    @property
    def rank(self) -> int:
        return int(self.U.shape[1])

    def arrays(self) -> dict:
        return {"U": self.U, "W": self.W}


def _mask(name: str, X) -> np.ndarray:
    M = np.asarray(X)
    if M.dtype != bool or M.ndim != 2:
        raise MalformedCertificate(f"{name}: expected a 2-D boolean array, got dtype "
                                   f"{M.dtype} shape {M.shape}")
    M = np.array(M, dtype=bool, copy=True)
    M.setflags(write=False)
    return M

def _block_fields(cert) -> None:
    """Read-only index copies of a block-holding certificate's ``rows`` and ``cols``
    (kinds ``causal-lower`` and ``block``); its ``inner`` must be a plain lower certificate.

    Raises
    ------
    MalformedCertificate
        Naming the field.
    """
    object.__setattr__(cert, "rows", index_array("rows", cert.rows))
    object.__setattr__(cert, "cols", index_array("cols", cert.cols))
    if type(cert.inner) not in _INNER:
        raise MalformedCertificate(f"inner: expected a lower certificate of r_eps, got "
                                   f"{type(cert.inner).__name__}")


def _inner_arrays(cert) -> dict:
    """The arrays of a block-holding certificate's inner one, as ``inner_NAME`` (the file
    format, :mod:`.files`)."""
    return {f"inner_{k}": v for k, v in cert.inner.arrays().items()}


@dataclass(frozen=True, eq=False)
class CausalUpperWitness:
    """``r^c_eps(A) <= k`` because ``||A - (exact * A + keep * (U W))||_inf <= eps``
    (docs/theory/causal.md, *Causal witnesses*).

    ``U : (m, k)``, ``W : (k, N)`` float64; ``keep``, ``exact : (m, N)`` disjoint boolean
    masks. The approximation is the rank-``k`` product where ``keep`` is True, ``A`` itself
    where ``exact`` is True and 0 elsewhere: with ``keep`` the causal mask and ``exact``
    empty, ``tril(U W)`` (the causal rank); with ``exact`` a band of the last ``W`` keys,
    window plus low rank. Row ``i``'s error is
    ``sum_{keep} |A_ij - (U W)_ij| + sum_{neither} |A_ij|``. A witness of the rank of that
    form, not of ``r_eps``: ``keep * (U W)`` may have any rank. Which masks belong to which
    rank is the caller's to check (:func:`softrank.operators.rank_masks`).
    """

    eps: float
    U: np.ndarray
    W: np.ndarray
    keep: np.ndarray
    exact: np.ndarray | None = None
    method: str = ""
    kind: str = field(default="causal-upper", init=False)

    def __post_init__(self):
        object.__setattr__(self, "U", _f64("U", self.U))
        object.__setattr__(self, "W", _f64("W", self.W))
        keep = _mask("keep", self.keep)
        object.__setattr__(self, "keep", keep)
        object.__setattr__(self, "exact", _mask("exact", np.zeros(keep.shape, dtype=bool)
                                                if self.exact is None else self.exact))
        if self.U.shape[1] != self.W.shape[0]:
            raise MalformedCertificate(
                f"U, W: inner dimensions differ, U {self.U.shape}, W {self.W.shape}"
            )

    @property
    def rank(self) -> int:
        return int(self.U.shape[1])

    def arrays(self) -> dict:
        return {"U": self.U, "W": self.W, "keep": self.keep, "exact": self.exact}


@dataclass(frozen=True, eq=False)
class CausalLowerCertificate:
    """``r^c_eps(A) >= k`` because ``r_eps(A[rows][:, cols]) >= k`` and every entry of that
    block is one the approximation takes from the low-rank product (docs/theory/causal.md,
    *Causal lower certificates*).

    ``rows``, ``cols``: distinct indices; ``keep : (m, N)`` bool, True on the whole block;
    ``inner``: a lower certificate (trivial, frobenius, key-groups, decoded, subspace) at the
    same ``eps`` about the block ``A[rows][:, cols]``, whose rows need not sum to 1.

    Proof: if ``B = exact * A + keep * (U W)`` has ``||A - B||_inf <= eps`` with
    ``rank(U W) = k``, then on the block ``B`` equals ``U W`` (``keep`` is True there and
    ``exact`` is disjoint from it), and each block row's error is part of its row's error,
    so ``(U W)[rows][:, cols]``, of rank at most ``k``, is within ``eps`` of the block:
    ``k >= r_eps(block)``, which ``inner`` bounds below (its conditions hold for any matrix).
    """

    eps: float
    rows: np.ndarray
    cols: np.ndarray
    keep: np.ndarray
    inner: "LowerCertificate"
    method: str = ""
    kind: str = field(default="causal-lower", init=False)

    def __post_init__(self):
        _block_fields(self)
        object.__setattr__(self, "keep", _mask("keep", self.keep))

    @property
    def rank(self) -> int:
        return int(self.inner.rank)

    def arrays(self) -> dict:
        return {"rows": self.rows, "cols": self.cols, "keep": self.keep,
                **_inner_arrays(self)}


@dataclass(frozen=True, eq=False)
class TrivialCertificate:
    """``r_eps(A) >= 1`` because ``||A||_inf > eps`` (``B = 0`` is the only rank-0 matrix)."""

    eps: float
    method: str = "trivial"
    kind: str = field(default="trivial", init=False)

    @property
    def rank(self) -> int:
        return 1

    def arrays(self) -> dict:
        return {}


@dataclass(frozen=True, eq=False)
class FrobeniusCertificate:
    """``r_eps(A) >= r + 1`` by the Frobenius tail on the row subset ``rows`` (docs/theory/lower.md).

    If ``rank(B) <= r`` and ``||A - B||_inf <= eps`` then on rows ``I``:
    ``sum_{j>r} sigma_j(A_I)^2 <= ||A_I - B_I||_F^2 <= |I| eps^2`` (Eckart-Young and
    ``||e||_2 <= ||e||_1``). The checker proves the opposite strict inequality.
    """

    eps: float
    rows: np.ndarray
    r: int
    method: str = "frobenius"
    kind: str = field(default="frobenius", init=False)

    def __post_init__(self):
        object.__setattr__(self, "rows", index_array("rows", self.rows))
        r = np.asarray(self.r)
        if r.shape != () or r.dtype.kind not in "iu":
            raise MalformedCertificate(f"r: expected one integer, got {self.r!r}")
        object.__setattr__(self, "r", int(r))

    @property
    def rank(self) -> int:
        return self.r + 1

    def arrays(self) -> dict:
        return {"rows": self.rows, "r": np.array(self.r)}


@dataclass(frozen=True, eq=False)
class KeyGroupCertificate:
    """``r_eps(A) >= k`` by ``k`` disjoint key groups with witness queries (docs/theory/lower.md).

    ``queries : (k,)`` query indices; ``groups``: ``k`` disjoint non-empty arrays of key
    indices. Claim: for every ``a``,
    ``A[q_a, G_a].sum() - sum_{b != a} A[q_a, G_b].sum() > eps``.
    Proof: with ``S`` selecting the witness rows and ``R`` the group indicators, ``M = S A R``
    is strictly row diagonally dominant with margin ``> eps``; for ``||A - B||_inf <= eps``,
    ``S B R`` differs from ``M`` by at most ``eps`` in each row's l1 norm (disjoint groups),
    so it is still strictly diagonally dominant, hence invertible (Levy-Desplanques), and
    ``rank(B) >= rank(S B R) = k``. This is the decoded inverse with Varah's bound.
    """

    eps: float
    queries: np.ndarray
    groups: tuple
    method: str = "key-groups"
    kind: str = field(default="key-groups", init=False)

    def __post_init__(self):
        q = index_array("queries", self.queries)
        gs = [index_array(f"groups[{a}]", g) for a, g in enumerate(self.groups)]
        if len(gs) != q.size:
            raise MalformedCertificate(
                f"queries, groups: {q.size} witness queries but {len(gs)} groups"
            )
        object.__setattr__(self, "queries", q)
        object.__setattr__(self, "groups", tuple(gs))

    @property
    def rank(self) -> int:
        return int(self.queries.size)

    def arrays(self) -> dict:
        sizes = np.array([g.size for g in self.groups], dtype=np.int64)
        flat = np.concatenate(self.groups) if self.groups else np.zeros(0, np.int64)
        return {"queries": self.queries, "group_sizes": sizes, "group_keys": flat}


@dataclass(frozen=True, eq=False)
class DecodedInverseCertificate:
    """``r_eps(A) >= k`` by the decoded inverse (docs/theory/lower.md).

    ``L : (k, m)``, ``R : (N, k)``. Claim: ``||I_k - L A R||_inf + eps ||L||_inf ||R||_inf < 1``.
    Proof: ``L B R = L A R - L E R`` with ``||E||_inf <= eps``, so ``||I - L B R||_inf < 1``,
    ``L B R`` is invertible (Neumann series) and ``rank(B) >= k``.
    """

    eps: float
    L: np.ndarray
    R: np.ndarray
    method: str = "decoded"
    kind: str = field(default="decoded", init=False)

    def __post_init__(self):
        object.__setattr__(self, "L", _f64("L", self.L))
        object.__setattr__(self, "R", _f64("R", self.R))
        if self.L.shape[0] != self.R.shape[1]:
            raise MalformedCertificate(
                f"L, R: L has {self.L.shape[0]} rows but R has {self.R.shape[1]} columns"
            )

    @property
    def rank(self) -> int:
        return int(self.L.shape[0])

    def arrays(self) -> dict:
        return {"L": self.L, "R": self.R}


def structure_error(cert, shape) -> str | None:
    """What is structurally wrong with ``cert`` for an ``A`` of ``shape`` (None if nothing).

    Shared by both arithmetics of the checker, so that neither evaluates a condition on
    malformed data: shapes, finiteness, index ranges, distinctness and disjointness.
    """
    m, N = shape
    # exact classes only: a subclass could override ``rank`` or ``kind`` and have one claim
    # checked under another kind's condition
    expected = {UpperWitness: "upper", CausalUpperWitness: "causal-upper",
                CausalLowerCertificate: "causal-lower", BlockCertificate: "block",
                TrivialCertificate: "trivial",
                FrobeniusCertificate: "frobenius", KeyGroupCertificate: "key-groups",
                DecodedInverseCertificate: "decoded", SubspaceCertificate: "subspace"}
    if type(cert) not in expected:
        return (f"not a softrank certificate: {type(cert).__module__}.{type(cert).__qualname__} "
                "(subclasses are not accepted)")
    if getattr(cert, "kind", None) != expected[type(cert)]:
        return f"kind {getattr(cert, 'kind', None)!r} does not match {type(cert).__name__}"
    try:
        eps = float(cert.eps)
    except (TypeError, ValueError):
        return f"eps must be a number, got {cert.eps!r}"
    if not np.isfinite(eps) or eps < 0:
        return f"eps must be finite and >= 0, got {eps!r}"
    kind = getattr(cert, "kind", None)
    if kind == "upper":
        if cert.U.shape[0] != m or cert.W.shape[1] != N:
            return f"shape mismatch: A {shape}, U {cert.U.shape}, W {cert.W.shape}"
        if not (np.isfinite(cert.U).all() and np.isfinite(cert.W).all()):
            return "U or W has non-finite entries"
    elif kind == "causal-upper":
        if cert.U.shape[0] != m or cert.W.shape[1] != N or cert.keep.shape != (m, N) \
                or cert.exact.shape != (m, N):
            return (f"shape mismatch: A {shape}, U {cert.U.shape}, W {cert.W.shape}, keep "
                    f"{cert.keep.shape}, exact {cert.exact.shape}")
        if cert.keep.dtype != bool or cert.exact.dtype != bool:
            return "keep and exact must be boolean"
        if (cert.keep & cert.exact).any():
            return "keep and exact overlap"
        if not (np.isfinite(cert.U).all() and np.isfinite(cert.W).all()):
            return "U or W has non-finite entries"
    elif kind in ("causal-lower", "block"):
        if kind == "causal-lower" and (cert.keep.shape != (m, N) or cert.keep.dtype != bool):
            return f"keep must be a boolean array of the shape of A {shape}, got {cert.keep.shape}"
        r, c = cert.rows, cert.cols
        if (r.ndim != 1 or c.ndim != 1 or r.dtype.kind not in "iu"
                or c.dtype.kind not in "iu"):
            return "rows and cols must be 1-D arrays of integer indices"
        if r.size == 0 or c.size == 0:
            return "empty block"
        if r.min() < 0 or r.max() >= m or np.unique(r).size != r.size:
            return f"rows must be distinct query indices in [0, {m})"
        if c.min() < 0 or c.max() >= N or np.unique(c).size != c.size:
            return f"cols must be distinct key indices in [0, {N})"
        if kind == "causal-lower" and not cert.keep[np.ix_(r, c)].all():
            return "the block reaches entries outside keep"
        if type(cert.inner) not in _INNER:
            return "inner must be a lower certificate of r_eps"
        if float(cert.inner.eps) != float(cert.eps):
            return f"inner eps {cert.inner.eps!r} differs from eps {cert.eps!r}"
        inner = structure_error(cert.inner, (r.size, c.size))
        if inner is not None:
            return f"inner certificate of the {r.size}x{c.size} block: {inner}"
    elif kind == "trivial":
        pass
    elif kind == "frobenius":
        rows = cert.rows
        if rows.size == 0 or rows.min() < 0 or rows.max() >= m or np.unique(rows).size != rows.size:
            return f"rows must be distinct indices in [0, {m})"
        if not 0 <= cert.r < min(rows.size, N):
            return f"r={cert.r} must satisfy 0 <= r < min(|I|, N) = {min(rows.size, N)}"
    elif kind == "key-groups":
        k = cert.rank
        q = cert.queries
        if k == 0:
            return "no groups"
        if q.min() < 0 or q.max() >= m:
            return f"witness query index out of range [0, {m})"
        if np.unique(q).size != k:
            return "witness queries repeat"
        seen = np.zeros(N, dtype=bool)
        for a, g in enumerate(cert.groups):
            if g.size == 0:
                return f"group {a} is empty"
            if g.min() < 0 or g.max() >= N:
                return f"group {a} has a key index out of range [0, {N})"
            if seen[g].any() or np.unique(g).size != g.size:
                return f"group {a} overlaps another group or repeats a key"
            seen[g] = True
    elif kind == "decoded":
        k = cert.rank
        if k == 0:
            return "empty decoder"
        if cert.L.shape != (k, m) or cert.R.shape != (N, k):
            return f"shape mismatch: A {shape}, L {cert.L.shape}, R {cert.R.shape}"
        if not (np.isfinite(cert.L).all() and np.isfinite(cert.R).all()):
            return "L or R has non-finite entries"
    elif kind == "subspace":
        k = cert.rank
        J = cert.J
        if k == 0:
            return "empty subspace"
        if J.min() < 0 or J.max() >= N or np.unique(J).size != k:
            return f"J must be distinct key indices in [0, {N})"
        if cert.R.shape != (N, k) or cert.Lam.shape != (N, m) or cert.M.shape != (N, N):
            return (f"shape mismatch: A {shape}, R {cert.R.shape} (expected {(N, k)}), "
                    f"Lam {cert.Lam.shape} (expected {(N, m)}), M {cert.M.shape} "
                    f"(expected {(N, N)})")
        if not all(np.isfinite(X).all() for X in (cert.R, cert.Lam, cert.M)):
            return "R, Lam or M has non-finite entries"
        if not np.array_equal(cert.R[J], np.eye(k)):
            return "R[J] is not exactly the identity"
    else:
        return f"unknown certificate kind {kind!r}"
    return None


@dataclass(frozen=True, eq=False)
class SubspaceCertificate:
    """``r_eps(A) >= k`` by a subspace on which ``A`` is ``eps``-injective (docs/theory/lower.md#subspace-certificate).

    ``R : (N, k)`` with ``R[J] = I_k`` exactly (``J : (k,)`` distinct key indices),
    ``Lam : (N, m)``, ``M : (N, N)``. Claim: for every key index ``j``,

        c_j = eps ||lam_j||_1 + ||mu_j||_1 + ||r_j - R^T (A^T lam_j + mu_j)||_1 < 1,

    with ``lam_j``, ``mu_j``, ``r_j`` the ``j``-th rows of ``Lam``, ``M``, ``R``.

    Proof. Let ``||A - B||_inf <= eps`` and suppose ``rank(B) < k``. Some ``y != 0`` has
    ``B R y = 0``; ``x = R y`` has ``x_J = y``, so ``x != 0`` and ``||y||_inf <= ||x||_inf``,
    and ``A x = (A - B) x`` gives ``||A x||_inf <= eps ||x||_inf``. For every ``j``,
    ``x_j = r_j^T y = lam_j^T (A x) + mu_j^T x + (r_j - R^T (A^T lam_j + mu_j))^T y``, so
    ``|x_j| <= (eps ||lam_j||_1 + ||mu_j||_1 + ||res_j||_1) ||x||_inf < ||x||_inf``; at the
    ``j`` where ``|x_j| = ||x||_inf`` this is a contradiction. ``M = 0`` with the maxima taken
    separately is the subspace (Bernstein) certificate of docs/theory/lower.md#subspace-certificate; with ``M`` free, for a fixed
    ``range(R)`` the best ``(Lam, M)`` makes the test exact: by LP duality ``max_j c_j < 1``
    is attainable iff ``min {||A x||_inf : x in range(R), ||x||_inf = 1} > eps``.
    """

    eps: float
    J: np.ndarray
    R: np.ndarray
    Lam: np.ndarray
    M: np.ndarray
    method: str = "subspace"
    kind: str = field(default="subspace", init=False)

    def __post_init__(self):
        object.__setattr__(self, "J", index_array("J", self.J))
        for name in ("R", "Lam", "M"):
            object.__setattr__(self, name, _f64(name, getattr(self, name)))

    @property
    def rank(self) -> int:
        return int(self.J.size)

    def arrays(self) -> dict:
        return {"J": self.J, "R": self.R, "Lam": self.Lam, "M": self.M}


@dataclass(frozen=True, eq=False)
class BlockCertificate:
    """``r_eps(A) >= k`` because ``r_eps(A[rows][:, cols]) >= k`` (docs/theory/lower.md#block-certificates).

    ``rows (s,)``, ``cols (t,)``: distinct query and key indices; ``inner``: a lower
    certificate (trivial, frobenius, key-groups, decoded, subspace) at the same ``eps``
    about the block ``A[rows][:, cols]``, whose rows need not sum to 1; ``k = inner.rank``.

    Proof (the block lemma): if ``||A - B||_inf <= eps`` then each row of
    ``(A - B)[rows][:, cols]`` is part of a row of ``A - B``, so its l1 norm is at most
    ``eps``, and ``rank(B[rows][:, cols]) <= rank(B)``: every ``B`` within ``eps`` of ``A``
    has a block within ``eps`` of ``A[rows][:, cols]``, of rank at most its own, so
    ``r_eps(A) >= r_eps(A[rows][:, cols]) >= k`` (``inner``'s conditions hold for any
    matrix, docs/theory/lower.md).
    """

    eps: float
    rows: np.ndarray
    cols: np.ndarray
    inner: "LowerCertificate"
    method: str = ""
    kind: str = field(default="block", init=False)

    def __post_init__(self):
        _block_fields(self)

    @property
    def rank(self) -> int:
        return int(self.inner.rank)

    def arrays(self) -> dict:
        return {"rows": self.rows, "cols": self.cols, **_inner_arrays(self)}


LowerCertificate = Union[
    TrivialCertificate, FrobeniusCertificate, KeyGroupCertificate, DecodedInverseCertificate,
    SubspaceCertificate, BlockCertificate,
]
Certificate = Union[UpperWitness, CausalUpperWitness, CausalLowerCertificate, LowerCertificate]
_INNER = (TrivialCertificate, FrobeniusCertificate, KeyGroupCertificate,
          DecodedInverseCertificate, SubspaceCertificate)


#: Largest accepted ``|sum_j A_ij - 1|`` of an attention matrix (docs/theory/operators.md); shared by
#: :class:`softrank.operators.Operator` and :func:`~softrank.checker.files.load_certificate`.
ROW_SUM_TOL = 1e-9

def attention_problem(A: np.ndarray) -> str | None:
    """Why ``A`` is not an attention matrix, or None (docs/theory/operators.md).

    Parameters
    ----------
    A : ndarray
        Any array.

    Returns
    -------
    str or None
        One line naming the first problem: not 2-D or empty, not real, a non-finite or
        negative entry, or a row whose sum differs from 1 by more than :data:`ROW_SUM_TOL`.
    """
    if A.ndim != 2 or A.size == 0:
        return f"A: expected a non-empty 2-D array, got shape {A.shape}"
    if A.dtype.kind not in "fiub":
        return f"A: expected real numbers, got dtype {A.dtype}"
    A = np.asarray(A, dtype=np.float64)
    bad = ~np.isfinite(A)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        return f"A: entries must be finite, A[{i}, {j}] = {float(A[i, j])!r}"
    neg = A < 0
    if neg.any():
        i, j = np.argwhere(neg)[0]
        return f"A: entries must be >= 0, A[{i}, {j}] = {float(A[i, j])!r}"
    dev = np.abs(A.sum(axis=1) - 1.0)
    if dev.max() > ROW_SUM_TOL:
        i = int(dev.argmax())
        return f"A: rows must sum to 1 within {ROW_SUM_TOL:g}, row {i} sums to {float(A[i].sum())!r}"
    return None



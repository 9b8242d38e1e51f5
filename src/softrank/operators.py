"""The attention operator value (docs/theory/operators.md).

An :class:`Operator` holds a row-stochastic attention matrix ``A`` (``m`` queries x ``N``
keys, float64) and, when known, the factors it came from: ``Q`` (``m x d``), ``K``
(``N x d``) and the scale ``beta``, so that ``A = softmax_rows(beta Q K^T)``. It also carries
provenance (family, source, layer, head, block, seed).

Construction validates and never repairs: NaN/inf, negative entries, rows whose sums differ
from 1 by more than :data:`ROW_SUM_TOL`, empty or non-2-D arrays, mismatched factor shapes,
a non-finite or non-positive ``beta``, factors whose softmax differs from ``A`` by more than
:data:`FACTOR_TOL` and a family or id that :func:`softrank.ids.check_id_part` refuses raise
:class:`~softrank.errors.InvalidOperatorError` naming the field and the offending value.
Files are written and read by :mod:`softrank.operator_files` (within a memory bound, no
object arrays; reduced-precision attention renormalised only on request).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .checker.certificates import ROW_SUM_TOL, attention_problem, matrix_hash
from .deprecation import moved
from .errors import InvalidOperatorError
from .validation import parse_rank as _parse_rank

# parse_rank and MAX_WINDOW moved to softrank.validation (kept here for one release)
__getattr__ = moved(__name__, {"parse_rank": "softrank.validation",
                               "MAX_WINDOW": "softrank.validation"})

__all__ = ["Operator", "softmax_rows", "causal_mask", "mask_kind", "rank_masks",
           "check_matrix", "RANK_KINDS", "ROW_SUM_TOL", "operator_hash", "FACTOR_TOL"]

#: Largest accepted ``|A - softmax_rows(beta Q K^T)|`` of an operator with factors.
FACTOR_TOL = 1e-9

#: ``ROW_SUM_TOL`` (1e-9, from the checker): largest accepted ``|sum_j A_ij - 1|``. Float64
#: softmax rows of width up to a few thousand sum to 1 within ~1e-13; float32 attention does
#: only within ~1e-7. A matrix further off is not an attention matrix and is rejected, not
#: renormalised: :func:`renormalize_rows` (``--renormalize``) does that on request.


def softmax_rows(logits: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Row-wise softmax in float64 with the row-max shift, over the visible keys of ``mask``.

    Parameters
    ----------
    logits : (m, N) array_like
        Logits ``L``; finite wherever ``mask`` is True (elsewhere ignored).
    mask : (m, N) bool array_like, optional
        The keys each query sees (True); every row must see at least one. Default: all.

    Returns
    -------
    A : (m, N) float64 ndarray
        ``A_ij = exp(L_ij - max_k L_ik) / sum_k exp(L_ik - max_k L_ik)`` over the visible
        ``k`` of row ``i``, exactly 0 where ``mask`` is False (docs/theory/operators.md,
        *Masked operators*); rows sum to 1 within a few ulps.
    """
    L = np.asarray(logits, dtype=np.float64)
    if mask is None:
        Z = np.exp(L - L.max(axis=1, keepdims=True))
        return Z / Z.sum(axis=1, keepdims=True)
    M = np.asarray(mask, dtype=bool)
    Lm = np.where(M, L, -np.inf)
    Z = np.where(M, np.exp(Lm - Lm.max(axis=1, keepdims=True)), 0.0)
    return Z / Z.sum(axis=1, keepdims=True)


def causal_mask(m: int, N: int | None = None, offset: int | None = None,
                window: int | None = None) -> np.ndarray:
    """The mask of causal attention: query ``i`` (at position ``offset + i``) sees keys
    ``j <= offset + i``, and with ``window`` only the last ``window`` of them
    (``offset + i - window < j``).

    Parameters
    ----------
    m : int
        Queries.
    N : int, optional
        Keys (default ``m``).
    offset : int, optional
        Position of query 0 among the keys (default ``N - m``: the queries are the last
        ``m`` positions, as in a full causal head, where ``m = N`` and ``offset = 0``).
    window : int, optional
        Sliding-window width ``W >= 1`` (default: none).

    Returns
    -------
    (m, N) bool ndarray

    Raises
    ------
    InvalidArgumentError
        A size, offset or window out of range, or a query that would see no key.
    """
    from .errors import InvalidArgumentError

    N = m if N is None else N
    offset = N - m if offset is None else offset
    for name, v, lo in (("m", m, 1), ("N", N, 1), ("offset", offset, 0)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise InvalidArgumentError(f"{name}: expected an integer >= {lo}, got {v!r}")
    if offset + m > N:
        raise InvalidArgumentError(f"offset: queries at positions {offset}..{offset + m - 1} "
                                   f"need keys up to {offset + m - 1}, got N = {N}")
    if window is not None and (isinstance(window, bool) or not isinstance(
            window, (int, np.integer)) or window < 1):
        raise InvalidArgumentError(f"window: expected an integer >= 1, got {window!r}")
    pos = offset + np.arange(m)[:, None]
    j = np.arange(N)[None, :]
    M = j <= pos
    if window is not None:
        M &= j > pos - min(int(window), N)  # (a wider window adds no key)
    return M


#: The ranks softrank brackets: ``plain`` (``r_eps``), ``causal`` (``r^c_eps``) and
#: ``window:W`` (``r^{c,W}_eps``, the band of width ``W`` kept exact); :func:`rank_masks`.
RANK_KINDS = ("plain", "causal", "window:W")


def rank_masks(shape: tuple[int, int], rank: str,
               arg: str = "rank") -> tuple[np.ndarray, np.ndarray]:
    """``(keep, exact)``: where an approximation of the given rank kind is the low-rank
    product and where it copies ``A`` exactly (docs/theory/causal.md).

    The approximation of ``A`` is ``B = exact * A + keep * (U W)`` (entrywise), 0 elsewhere.
    ``causal``: ``keep`` is the causal mask (query ``i`` at position ``N - m + i`` keeps
    keys ``j <= N - m + i``; :func:`causal_mask`), ``exact`` is empty. ``window:W``:
    ``exact`` is the band of the last ``W`` keys of each query (``causal_mask(..., window=W)``),
    ``keep`` the causal keys before it. ``plain``: ``keep`` everything, ``exact`` nothing.

    Parameters
    ----------
    shape : (m, N)
        ``m <= N`` queries for the causal kinds (the queries are the last ``m`` positions).
    rank : str
        ``plain``, ``causal`` or ``window:W`` (:func:`~softrank.validation.parse_rank`).
    arg : str
        The argument's name in the messages (default ``rank``; e.g. ``--rank``).

    Returns
    -------
    keep, exact : (m, N) bool ndarrays, disjoint

    Raises
    ------
    InvalidArgumentError
        An unknown rank kind, or more queries than keys for a causal kind (one line that
        begins with ``arg``).
    """
    from .errors import InvalidArgumentError

    kind, W = _parse_rank(rank, arg)
    m, N = int(shape[0]), int(shape[1])
    if kind == "plain":
        return np.ones((m, N), dtype=bool), np.zeros((m, N), dtype=bool)
    if m > N:
        raise InvalidArgumentError(f"{arg}: {rank!r} needs at most as many queries as keys "
                                   f"(the queries are the last positions), got {m} x {N}")
    causal = causal_mask(m, N)
    if kind == "causal":
        return causal, np.zeros((m, N), dtype=bool)
    band = causal_mask(m, N, window=min(W, N))  # (a wider band adds no key)
    return causal & ~band, band


def mask_kind(mask: np.ndarray | None) -> str:
    """``"none"``, ``"causal"``, ``"window:W"`` (a causal mask of window ``W``,
    :func:`causal_mask`) or ``"custom"``: how a mask reads, for provenance and reports."""
    if mask is None:
        return "none"
    m, N = mask.shape
    if m <= N:
        if np.array_equal(mask, causal_mask(m, N)):
            return "causal"
        W = int(mask.sum(axis=1).max())
        if W >= 1 and np.array_equal(mask, causal_mask(m, N, window=W)):
            return f"window:{W}"
    return "custom"


#: Content hash of ``A`` (SHA-256 of its shape and C-ordered float64 bytes, 16 hex chars);
#: the same function the checker uses to tie a certificate file to its matrix.
operator_hash = matrix_hash


def check_matrix(name: str, X: Any) -> np.ndarray:
    """``X`` as a read-only float64 copy: a non-empty 2-D array of finite real numbers.

    Raises
    ------
    InvalidOperatorError
        Naming ``name`` and what is wrong (not numeric, not 2-D, empty, a non-finite entry).
    """
    try:
        arr = np.asarray(X)
    except Exception as exc:  # pragma: no cover - numpy raises rarely here
        raise InvalidOperatorError(f"{name}: cannot be read as an array ({exc})") from exc
    if arr.dtype.kind not in "fiub":
        raise InvalidOperatorError(f"{name}: expected a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise InvalidOperatorError(
            f"{name}: expected a 2-D array, got {arr.ndim}-D with shape {arr.shape}"
        )
    if arr.size == 0:
        raise InvalidOperatorError(f"{name}: expected a non-empty array, got shape {arr.shape}")
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite values: refused below
        arr = np.array(arr, dtype=np.float64, copy=True)
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InvalidOperatorError(
            f"{name}: entries must be finite, {name}[{i}, {j}] = {float(arr[i, j])!r} "
            f"({int(bad.sum())} non-finite entries)"
        )
    arr.setflags(write=False)
    return arr


def _check_mask(mask: Any, A: np.ndarray) -> np.ndarray:
    """``mask`` as a read-only bool array of ``A``'s shape, every row seeing a key and ``A``
    exactly 0 on every key a row does not see; else :class:`InvalidOperatorError`."""
    M = np.asarray(mask)
    if M.dtype != bool:
        raise InvalidOperatorError(f"mask: expected a boolean array, got dtype {M.dtype}")
    if M.shape != A.shape:
        raise InvalidOperatorError(f"mask: expected the shape of A {A.shape}, got {M.shape}")
    empty = ~M.any(axis=1)
    if empty.any():
        raise InvalidOperatorError(f"mask: row {int(np.argmax(empty))} sees no key (every "
                                   "query must see at least one)")
    hidden = ~M & (A != 0)
    if hidden.any():
        i, j = np.argwhere(hidden)[0]
        raise InvalidOperatorError(
            f"A: A[{i}, {j}] = {float(A[i, j])!r} on a key the mask hides (masked entries must "
            f"be exactly 0; {int(hidden.sum())} are not)")
    M = np.array(M, dtype=bool, copy=True)
    M.setflags(write=False)
    return M


@dataclass(frozen=True, eq=False)
class Operator:
    """A validated attention operator (docs/theory/operators.md).

    Parameters
    ----------
    A : (m, N) array_like
        Attention matrix: finite, entries ``>= 0``, rows summing to 1 within
        :data:`ROW_SUM_TOL`. Stored as a read-only float64 copy.
    Q : (m, d) array_like, optional
        Query factor.
    K : (N, d) array_like, optional
        Key factor. ``Q`` and ``K`` are given together or not at all.
    beta : float, optional
        Logit scale, finite and ``> 0``; required with ``Q`` and ``K``. With the factors,
        ``A`` must equal ``softmax_rows(beta Q K^T)`` within :data:`FACTOR_TOL` in every
        entry (the check the operator file loader makes; :meth:`from_factors` builds such an
        ``A``). No option skips it: factors that do not reproduce ``A`` are refused, and an
        operator without them is built from ``A`` alone.
    family, source, layer, head, block, seed :
        Provenance. ``family`` is e.g. ``"minilm"``, ``"grid"``, ``"planted"``: part of the
        operator id, so it passes :func:`softrank.ids.check_id_part` (non-empty; no control
        characters, ``|``, ``/``, ``\\`` or ``..``; no leading or trailing whitespace; at
        most :data:`softrank.ids.MAX_ID_BYTES` bytes). ``source`` the text or generator
        parameters; ``block`` a description of the query/key positions.
    meta : dict
        Extra provenance (e.g. planted rank, width).
    operator_id : str, optional
        Stable identifier; defaults to ``family`` plus the hash of ``A``. Checked as
        ``family`` is.
    mask : (m, N) bool array_like, optional
        The keys each query sees (True), e.g. :func:`causal_mask`: every row sees at least
        one key and ``A`` is exactly 0 on the others; with the factors, ``A`` must equal the
        masked softmax ``softmax_rows(beta Q K^T, mask)``. None (default): every key is
        visible, and zeros in ``A`` carry no meaning (docs/theory/operators.md, *Masked
        operators*). ``r_eps(A)`` depends on ``A`` alone, so brackets are the same with or
        without it; the causal rank depends on it.

    Raises
    ------
    InvalidOperatorError
        On any of the conditions above; the message names the field and value.
    """

    A: np.ndarray
    Q: np.ndarray | None = None
    K: np.ndarray | None = None
    beta: float | None = None
    family: str = "matrix"
    source: str = ""
    layer: int | None = None
    head: int | None = None
    block: str = ""
    seed: int | None = None
    meta: dict = field(default_factory=dict)
    operator_id: str = ""
    mask: np.ndarray | None = None

    def __post_init__(self) -> None:
        from .ids import check_id_part

        A = check_matrix("A", self.A)
        problem = attention_problem(A)  # the checker's own test: >= 0, rows summing to 1
        if problem:
            raise InvalidOperatorError(problem)
        object.__setattr__(self, "A", A)
        if self.mask is not None:
            object.__setattr__(self, "mask", _check_mask(self.mask, A))
        if (self.Q is None) != (self.K is None):
            raise InvalidOperatorError(
                "Q, K: give both factors or neither "
                f"(Q is {'None' if self.Q is None else 'set'}, "
                f"K is {'None' if self.K is None else 'set'})"
            )
        if self.Q is not None:
            Q = check_matrix("Q", self.Q)
            K = check_matrix("K", self.K)
            m, N = A.shape
            if Q.shape[0] != m:
                raise InvalidOperatorError(
                    f"Q: expected {m} rows (one per query row of A, shape {A.shape}), "
                    f"got shape {Q.shape}"
                )
            if K.shape[0] != N:
                raise InvalidOperatorError(
                    f"K: expected {N} rows (one per key column of A, shape {A.shape}), "
                    f"got shape {K.shape}"
                )
            if Q.shape[1] != K.shape[1]:
                raise InvalidOperatorError(
                    f"Q, K: head dimensions differ, Q has shape {Q.shape} and K {K.shape}"
                )
            if self.beta is None:
                raise InvalidOperatorError("beta: required when Q and K are given, got None")
            object.__setattr__(self, "Q", Q)
            object.__setattr__(self, "K", K)
        if self.beta is not None:
            try:
                beta = float(self.beta)
            except (TypeError, ValueError) as exc:
                raise InvalidOperatorError(f"beta: expected a real number, got {self.beta!r}") from exc
            if not np.isfinite(beta) or beta <= 0:
                raise InvalidOperatorError(f"beta: expected a finite number > 0, got {beta!r}")
            object.__setattr__(self, "beta", beta)
        if self.Q is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                logits = self.beta * (self.Q @ self.K.T)
            if not np.isfinite(logits).all():
                raise InvalidOperatorError(
                    f"Q, K, beta: beta Q K^T overflows (non-finite logits, beta = {self.beta!r})")
            gap = np.abs(A - softmax_rows(logits, self.mask))
            dev = float(gap.max())
            if not dev <= FACTOR_TOL:
                i, j = np.unravel_index(int(gap.argmax()), gap.shape)
                raise InvalidOperatorError(
                    f"A: differs from softmax_rows(beta Q K^T) of the given factors by {dev:.3g} "
                    f"(> {FACTOR_TOL:g}) at A[{i}, {j}] = {float(A[i, j])!r}")
        check_id_part(self.family, "family", InvalidOperatorError)
        if not self.operator_id:
            object.__setattr__(self, "operator_id", f"{self.family}-{operator_hash(A)}")
        check_id_part(self.operator_id, "operator_id", InvalidOperatorError)

    @classmethod
    def from_factors(cls, Q: Any, K: Any, beta: float, mask: Any = None,
                     **provenance: Any) -> "Operator":
        """Build ``A = softmax_rows(beta Q K^T, mask)`` in float64 (docs/theory/operators.md) and validate.

        Parameters
        ----------
        Q : (m, d) array_like
        K : (N, d) array_like
        beta : float
            Finite, ``> 0``.
        mask : (m, N) bool array_like, optional
            The keys each query sees (:func:`causal_mask`); default all.

        Raises
        ------
        InvalidOperatorError
            As for the constructor, for ``Q``, ``K`` or ``beta``.
        """
        Qa = check_matrix("Q", Q)
        Ka = check_matrix("K", K)
        if Qa.shape[1] != Ka.shape[1]:
            raise InvalidOperatorError(
                f"Q, K: head dimensions differ, Q has shape {Qa.shape} and K {Ka.shape}"
            )
        try:
            b = float(beta)
        except (TypeError, ValueError) as exc:
            raise InvalidOperatorError(f"beta: expected a real number, got {beta!r}") from exc
        if not np.isfinite(b) or b <= 0:
            raise InvalidOperatorError(f"beta: expected a finite number > 0, got {b!r}")
        if mask is not None:
            M = np.asarray(mask)
            if M.dtype != bool or M.shape != (Qa.shape[0], Ka.shape[0]):
                raise InvalidOperatorError(
                    f"mask: expected a boolean array of shape {(Qa.shape[0], Ka.shape[0])}, got "
                    f"dtype {M.dtype} shape {M.shape}")
            if not M.any(axis=1).all():
                raise InvalidOperatorError(f"mask: row {int(np.argmin(M.any(axis=1)))} sees no "
                                           "key (every query must see at least one)")
        A = softmax_rows(b * (Qa @ Ka.T), mask)
        return cls(A=A, Q=Qa, K=Ka, beta=b, mask=mask, **provenance)

    @property
    def shape(self) -> tuple[int, int]:
        """``(m, N)``: queries x keys."""
        return self.A.shape  # type: ignore[return-value]

    @property
    def hash(self) -> str:
        """Content hash of ``A`` (see :func:`operator_hash`)."""
        return operator_hash(self.A)

    def native_geometry(self) -> dict | None:
        """Native geometry of the factors (docs/theory/geometry.md), or None without factors.

        Returns
        -------
        dict
            ``rho_Q = max_i ||q_i||_2``, ``rho_K = max_j ||k_j||_2``,
            ``Gamma = beta rho_Q rho_K`` (floats) and ``sv_Q``, ``sv_K``: the singular values
            of ``Q`` and ``K`` (descending 1-D arrays). Gauge-dependent by design:
            ``Q -> Q S``, ``K -> K S^{-T}`` moves them while ``A`` stays.
        """
        if self.Q is None:
            return None
        rq = float(np.linalg.norm(self.Q, axis=1).max())
        rk = float(np.linalg.norm(self.K, axis=1).max())
        return {"rho_Q": rq, "rho_K": rk, "Gamma": float(self.beta) * rq * rk,
                "sv_Q": np.linalg.svd(self.Q, compute_uv=False),
                "sv_K": np.linalg.svd(self.K, compute_uv=False)}

    def provenance(self) -> dict:
        """Provenance fields as a JSON-ready dict."""
        return {
            "operator_id": self.operator_id,
            "family": self.family,
            "source": self.source,
            "layer": self.layer,
            "head": self.head,
            "block": self.block,
            "seed": self.seed,
            "m": self.shape[0],
            "n": self.shape[1],
            "hash": self.hash,
            **({"mask": mask_kind(self.mask), "mask_hash": matrix_hash(
                self.mask.astype(np.float64))} if self.mask is not None else {}),
            **{k: v for k, v in self.meta.items()},
        }


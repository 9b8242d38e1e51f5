"""The attention operator value (SPEC 3).

An :class:`Operator` holds a row-stochastic attention matrix ``A`` (``m`` queries x ``N``
keys, float64) and, when known, the factors it came from: ``Q`` (``m x d``), ``K``
(``N x d``) and the scale ``beta``, so that ``A = softmax_rows(beta Q K^T)``. It also carries
provenance (family, source, layer, head, block, seed).

Construction validates and never repairs: NaN/inf, negative entries, rows whose sums differ
from 1 by more than :data:`ROW_SUM_TOL`, empty or non-2-D arrays, mismatched factor shapes
and a non-finite or non-positive ``beta`` raise :class:`~softrank.errors.InvalidOperatorError`
naming the field and the offending value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .checker.certificates import matrix_hash
from .errors import InvalidOperatorError

__all__ = ["Operator", "softmax_rows", "ROW_SUM_TOL", "operator_hash", "save_operator",
           "load_operator", "OPERATOR_FORMAT", "FACTOR_TOL"]

#: Largest accepted ``|sum_j A_ij - 1|``. Float64 softmax rows of width up to a few thousand
#: sum to 1 within ~1e-13; float32-derived matrices that were renormalised in float64 do too.
#: A matrix further off is not an attention matrix and is rejected, not renormalised.
ROW_SUM_TOL = 1e-9


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64 with the row-max shift.

    Parameters
    ----------
    logits : (m, N) array_like
        Finite logits ``L``.

    Returns
    -------
    A : (m, N) float64 ndarray
        ``A_ij = exp(L_ij - max_j L_ij) / sum_j exp(L_ij - max_j L_ij)``; rows sum to 1 within
        a few ulps.
    """
    L = np.asarray(logits, dtype=np.float64)
    Z = np.exp(L - L.max(axis=1, keepdims=True))
    return Z / Z.sum(axis=1, keepdims=True)


#: Content hash of ``A`` (SHA-256 of its shape and C-ordered float64 bytes, 16 hex chars);
#: the same function the checker uses to tie a certificate file to its matrix.
operator_hash = matrix_hash


def _check_matrix(name: str, X: Any) -> np.ndarray:
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
    arr = np.array(arr, dtype=np.float64, copy=True)
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InvalidOperatorError(
            f"{name}: entries must be finite, {name}[{i}, {j}] = {arr[i, j]!r} "
            f"({int(bad.sum())} non-finite entries)"
        )
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class Operator:
    """A validated attention operator (SPEC 3).

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
        Logit scale, finite and ``> 0``; required with ``Q`` and ``K``.
    family, source, layer, head, block, seed :
        Provenance. ``family`` is e.g. ``"minilm"``, ``"grid"``, ``"planted"``; ``source`` the
        text or generator parameters; ``block`` a description of the query/key positions.
    meta : dict
        Extra provenance (e.g. planted rank, width).
    operator_id : str, optional
        Stable identifier; defaults to ``family`` plus the hash of ``A``.

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

    def __post_init__(self) -> None:
        A = _check_matrix("A", self.A)
        neg = A < 0
        if neg.any():
            i, j = np.argwhere(neg)[0]
            raise InvalidOperatorError(
                f"A: entries must be >= 0, A[{i}, {j}] = {A[i, j]!r}"
            )
        dev = np.abs(A.sum(axis=1) - 1.0)
        if dev.max() > ROW_SUM_TOL:
            i = int(dev.argmax())
            raise InvalidOperatorError(
                f"A: rows must sum to 1 within {ROW_SUM_TOL:g}, row {i} sums to "
                f"{A[i].sum()!r}"
            )
        object.__setattr__(self, "A", A)
        if (self.Q is None) != (self.K is None):
            raise InvalidOperatorError(
                "Q, K: give both factors or neither "
                f"(Q is {'None' if self.Q is None else 'set'}, "
                f"K is {'None' if self.K is None else 'set'})"
            )
        if self.Q is not None:
            Q = _check_matrix("Q", self.Q)
            K = _check_matrix("K", self.K)
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
        if not self.operator_id:
            object.__setattr__(self, "operator_id", f"{self.family}-{operator_hash(A)}")

    @classmethod
    def from_factors(cls, Q: Any, K: Any, beta: float, **provenance: Any) -> "Operator":
        """Build ``A = softmax_rows(beta Q K^T)`` in float64 (SPEC 3) and validate.

        Parameters
        ----------
        Q : (m, d) array_like
        K : (N, d) array_like
        beta : float
            Finite, ``> 0``.

        Raises
        ------
        InvalidOperatorError
            As for the constructor, for ``Q``, ``K`` or ``beta``.
        """
        Qa = _check_matrix("Q", Q)
        Ka = _check_matrix("K", K)
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
        A = softmax_rows(b * (Qa @ Ka.T))
        return cls(A=A, Q=Qa, K=Ka, beta=b, **provenance)

    @property
    def shape(self) -> tuple[int, int]:
        """``(m, N)``: queries x keys."""
        return self.A.shape  # type: ignore[return-value]

    @property
    def hash(self) -> str:
        """Content hash of ``A`` (see :func:`operator_hash`)."""
        return operator_hash(self.A)

    def native_geometry(self) -> dict | None:
        """Native geometry of the factors (SPEC 7), or None without factors.

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
            **{k: v for k, v in self.meta.items()},
        }


#: Format tag of operator files written by :func:`save_operator` (``softrank heads``).
OPERATOR_FORMAT = "softrank-operator/1"

#: Largest accepted ``|A - softmax_rows(beta Q K^T)|`` in an operator file with factors.
FACTOR_TOL = 1e-9


def save_operator(path: Any, op: Operator) -> None:
    """Write an operator as ``.npz`` (no pickle): ``A``, ``Q``, ``K``, ``beta`` (when it has
    factors), ``layer``, ``head`` (-1 when unknown), ``query_positions``, ``key_positions``
    (from ``meta``, else empty) and ``provenance`` (a JSON string of
    :meth:`Operator.provenance` plus ``format``). Written to a temporary name and renamed, so
    an interrupted write leaves no partial file."""
    import json
    import os
    import pathlib

    path = pathlib.Path(path)
    meta = dict(op.meta)
    arrays = {"A": op.A,
              "layer": np.int64(-1 if op.layer is None else op.layer),
              "head": np.int64(-1 if op.head is None else op.head),
              "query_positions": np.asarray(meta.get("query_positions", []), dtype=np.int64),
              "key_positions": np.asarray(meta.get("key_positions", []), dtype=np.int64)}
    if op.Q is not None:
        arrays.update(Q=op.Q, K=op.K, beta=np.float64(op.beta))
    prov = {k: v for k, v in op.provenance().items()
            if k not in ("query_positions", "key_positions")}
    prov["format"] = OPERATOR_FORMAT
    arrays["provenance"] = np.array(json.dumps(prov, default=_json_default))
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


def load_operator(path: Any, arg: str = "path") -> Operator:
    """Read an operator from ``.npy`` (a bare ``A``) or ``.npz`` (:func:`save_operator`'s
    format, or any archive with an ``A`` array and optionally ``Q``, ``K``, ``beta``).

    Raises
    ------
    InvalidOperatorError
        Naming ``arg`` and the file: unreadable, a certificate file, no ``A``, invalid
        ``A``/``Q``/``K``/``beta``, or ``A`` differs from ``softmax_rows(beta Q K^T)`` by more
        than :data:`FACTOR_TOL`.
    """
    import json
    import pathlib

    p = pathlib.Path(path)
    where = f"{arg}: {str(p)!r}"
    try:
        data = np.load(p, allow_pickle=False)
    except FileNotFoundError:
        raise InvalidOperatorError(f"{where} not found") from None
    except IsADirectoryError:
        raise InvalidOperatorError(f"{where} is a directory, expected a .npy or .npz file") from None
    except (OSError, ValueError) as exc:
        raise InvalidOperatorError(f"{where} is not a readable .npy/.npz file ({exc})") from exc
    if isinstance(data, np.ndarray):
        try:
            return Operator(A=data, family="matrix", source=p.name, operator_id=f"matrix-{p.stem}")
        except InvalidOperatorError as exc:
            raise InvalidOperatorError(f"{where}: {exc}") from exc
    with data:
        files = set(data.files)
        if "A" not in files:
            kind = " (a certificate: use `softrank verify`)" if "header" in files else ""
            raise InvalidOperatorError(f"{where} holds no array 'A'{kind}")
        A = data["A"]
        has_f = {"Q", "K", "beta"} & files
        if has_f and has_f != {"Q", "K", "beta"}:
            raise InvalidOperatorError(f"{where}: factors incomplete, has {sorted(has_f)} of "
                                       "Q, K, beta")
        prov = {}
        if "provenance" in files:
            try:
                prov = json.loads(str(data["provenance"]))
            except ValueError as exc:
                raise InvalidOperatorError(f"{where}: provenance is not JSON ({exc})") from exc
            if not isinstance(prov, dict):
                raise InvalidOperatorError(f"{where}: provenance is not a JSON object")
        meta = {k: v for k, v in prov.items()
                if k not in ("operator_id", "family", "source", "layer", "head", "block",
                             "seed", "m", "n", "hash", "format")}
        for k in ("query_positions", "key_positions"):
            if k in files and data[k].size:
                meta[k] = data[k].astype(np.int64).tolist()
        layer = int(data["layer"]) if "layer" in files and int(data["layer"]) >= 0 else prov.get("layer")
        head = int(data["head"]) if "head" in files and int(data["head"]) >= 0 else prov.get("head")
        kw = dict(family=prov.get("family", "matrix"), source=prov.get("source", p.name),
                  layer=layer, head=head, block=prov.get("block", ""), seed=prov.get("seed"),
                  meta=meta, operator_id=prov.get("operator_id") or f"matrix-{p.stem}")
        try:
            if has_f:
                Q, K, beta = data["Q"], data["K"], data["beta"]
                if beta.shape != ():
                    raise InvalidOperatorError(f"beta: expected a scalar, got shape {beta.shape}")
                beta = float(beta)
                op = Operator(A=A, Q=Q, K=K, beta=beta, **kw)
                dev = float(np.abs(op.A - softmax_rows(op.beta * (op.Q @ op.K.T))).max())
                if not dev <= FACTOR_TOL:
                    raise InvalidOperatorError(
                        f"A: differs from softmax_rows(beta Q K^T) of the file's factors by "
                        f"{dev:.3g} (> {FACTOR_TOL:g})")
            else:
                op = Operator(A=A, **kw)
        except InvalidOperatorError as exc:
            raise InvalidOperatorError(f"{where}: {exc}") from exc
        if "hash" in prov and prov["hash"] != op.hash:
            raise InvalidOperatorError(f"{where}: A's hash {op.hash} differs from the "
                                       f"provenance's {prov['hash']}")
    return op

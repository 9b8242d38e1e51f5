"""Operator files (docs/theory/operators.md): :func:`~softrank.operator_files.save_operator` writes an
:class:`~softrank.operators.Operator` as ``.npz`` (no pickle), :func:`~softrank.operator_files.load_operator` reads one
back, or a bare ``.npy`` matrix, within a memory bound (headers checked before any
allocation, no object arrays), validating it as the constructor does, and
:func:`~softrank.operator_files.renormalize_rows` renormalises reduced-precision attention, on request only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .checker.certificates import matrix_hash
from .errors import InvalidOperatorError
from .operators import Operator, check_matrix

__all__ = ["save_operator", "load_operator", "renormalize_rows", "OPERATOR_FORMAT",
           "MAX_FILE_BYTES", "RENORMALIZE_MAX_DELTA"]


#: Format tag of operator files written by :func:`~softrank.operator_files.save_operator` (``softrank heads``).
OPERATOR_FORMAT = "softrank-operator/1"

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
    if op.mask is not None:
        arrays["mask"] = op.mask
    prov = {k: v for k, v in op.provenance().items()
            if k not in ("query_positions", "key_positions")}
    prov["format"] = OPERATOR_FORMAT
    arrays["provenance"] = np.array(json.dumps(prov, default=_json_default))
    tmp = path.with_name(path.name + ".part")
    try:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk, an interrupt: no half-written file is left
        tmp.unlink(missing_ok=True)
        raise


def _json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


#: Default bound on the data an operator file may hold (bytes): 4 GiB.
MAX_FILE_BYTES = 4 * 2**30


#: Largest ``|sum_j A_ij - 1|`` that :func:`~softrank.operator_files.renormalize_rows` accepts: float16 softmax rows
#: are within ~5e-4 of 1; a matrix further off is not attention in reduced precision.
RENORMALIZE_MAX_DELTA = 1e-2


def renormalize_rows(A: Any) -> tuple[np.ndarray, float]:
    """Divide each row of a nonnegative matrix by its sum, in float64 (docs/theory/operators.md).

    For attention probabilities saved in float32, float16 (or bfloat16 converted to either),
    whose rows sum to 1 only within ~1e-7 or ~1e-3. The bracket then holds for the returned
    ``A'``; since row ``i`` moves by ``||a_i - a_i / s_i||_1 = |s_i - 1|`` in l1, a bracket
    ``[l, u]`` of ``r_eps(A')`` gives ``r_{eps + delta}(A) <= u`` and
    ``r_{eps - delta}(A) >= l`` for the given ``A``, with ``delta`` returned here.

    Parameters
    ----------
    A : (m, N) array_like
        Finite, entries ``>= 0``, every row with a positive sum; any real dtype.

    Returns
    -------
    A_renormalized : (m, N) float64 ndarray
    delta : float
        ``max_i |s_i - 1|`` with ``s_i`` the float64 row sums of ``A``.

    Raises
    ------
    InvalidOperatorError
        On a non-finite or negative entry, a row that sums to 0, or a row whose sum differs
        from 1 by more than :data:`RENORMALIZE_MAX_DELTA`.
    """
    B = check_matrix("A", A)
    neg = B < 0
    if neg.any():
        i, j = np.argwhere(neg)[0]
        raise InvalidOperatorError(f"A: entries must be >= 0, A[{i}, {j}] = {float(B[i, j])!r}")
    s = B.sum(axis=1)
    if not (s > 0).all():
        i = int(np.argmin(s))
        raise InvalidOperatorError(f"A: row {i} sums to {float(s[i])!r}; it cannot be renormalised")
    dev = np.abs(s - 1.0)
    if dev.max() > RENORMALIZE_MAX_DELTA:
        i = int(dev.argmax())
        raise InvalidOperatorError(
            f"A: row {i} sums to {float(s[i])!r}: renormalising is for the rounding of attention "
            f"saved in reduced precision (|sum - 1| <= {RENORMALIZE_MAX_DELTA:g}), not for "
            "rescaling another matrix")
    return B / s[:, None], float(dev.max())


_ROW_SUM_HINT = ("; attention saved in {dtype} sums to 1 only up to its rounding: "
                 "`--renormalize` (load_operator(..., renormalize=True)) divides each row by "
                 "its sum and records it")


def _scalar(data: dict, key: str, kinds: str, where: str | None = None):
    x = data[key]
    if x.shape != () or x.dtype.kind not in kinds:
        raise InvalidOperatorError(f"{where + ': ' if where else ''}{key}: expected a scalar "
                                   f"{'integer' if kinds == 'iu' else 'real number'}, got "
                                   f"dtype {x.dtype} shape {x.shape}")
    return x[()].item()


def load_operator(path: Any, arg: str = "path", *, max_bytes: int = MAX_FILE_BYTES,
                  renormalize: bool = False) -> Operator:
    """Read an operator from ``.npy`` (a bare ``A``) or ``.npz`` (:func:`~softrank.operator_files.save_operator`'s
    format, or any archive with an ``A`` array and optionally ``Q``, ``K``, ``beta``).

    The file is read through :func:`softrank.checker.arrays.read_arrays`: headers first, no
    object arrays, at most ``max_bytes`` of data, nothing allocated before that is known.
    Every field is checked for its type: ``beta`` a real scalar, ``layer`` and ``head``
    integer scalars (``-1``: unknown), positions 1-D integers, ``provenance`` a JSON object
    whose names are strings.

    Parameters
    ----------
    path : str or path-like
    arg : str
        The argument the path was given as, for messages.
    max_bytes : int
        Largest total data the file may hold, in bytes (default 4 GiB).
    renormalize : bool
        Divide each row of ``A`` by its sum first (:func:`~softrank.operator_files.renormalize_rows`), for attention
        saved in reduced precision; recorded in ``meta["renormalized"]`` with the original
        dtype and ``delta``. Only for files without factors.

    Raises
    ------
    InvalidOperatorError
        Naming ``arg`` and the file: a certificate file, no ``A``, a field of the wrong type,
        invalid ``A``/``Q``/``K``/``beta``, or ``A`` differs from ``softmax_rows(beta Q K^T)``
        by more than :data:`~softrank.operators.FACTOR_TOL`.
    InvalidFileError
        The file is missing, unreadable, corrupt, holds a disallowed dtype or more than
        ``max_bytes`` of data (:func:`softrank.checker.arrays.read_arrays`).
    """
    import json
    import pathlib

    from .checker.arrays import read_arrays

    p = pathlib.Path(path)
    where = f"{arg}: {str(p)!r}"
    data = read_arrays(p, arg, max_bytes=max_bytes)
    if isinstance(data, np.ndarray):
        data = {"A": data}
    files = set(data)
    if "header" in files:
        raise InvalidOperatorError(f"{where} is a softrank certificate, not an operator: "
                                   "`softrank verify` checks it (to bracket its matrix, save "
                                   "its array 'A' as .npy)")
    if "A" not in files:
        raise InvalidOperatorError(f"{where} holds no array 'A' (arrays: "
                                   f"{sorted(files)[:8]})")
    has_f = {"Q", "K", "beta"} & files
    if has_f and has_f != {"Q", "K", "beta"}:
        raise InvalidOperatorError(f"{where}: factors incomplete, has {sorted(has_f)} of "
                                   "Q, K, beta")
    if has_f and renormalize:
        raise InvalidOperatorError(f"{where}: renormalize applies to a matrix without factors "
                                   "(this file's A is checked against its Q, K, beta): save A "
                                   "alone as .npy to renormalise it, or A = softmax_rows(beta Q "
                                   "K^T) in float64 (Operator.from_factors) to keep the factors")
    prov: dict = {}
    if "provenance" in files:
        raw = data["provenance"]
        if raw.shape != () or raw.dtype.kind != "U":
            raise InvalidOperatorError(f"{where}: provenance: expected a 0-d text array, got "
                                       f"dtype {raw.dtype} shape {raw.shape}")
        try:
            prov = json.loads(str(raw[()]))
        except ValueError as exc:
            raise InvalidOperatorError(f"{where}: provenance is not JSON "
                                       f"({' '.join(str(exc).split())})") from None
        if not isinstance(prov, dict):
            raise InvalidOperatorError(f"{where}: provenance is not a JSON object")
        for k in ("operator_id", "family", "source", "block", "hash"):
            if k in prov and not isinstance(prov[k], str):
                raise InvalidOperatorError(f"{where}: provenance {k}: expected a string, got "
                                           f"{type(prov[k]).__name__}")
        for k in ("layer", "head", "seed"):
            if prov.get(k) is not None and type(prov[k]) is not int:
                raise InvalidOperatorError(f"{where}: provenance {k}: expected an integer or "
                                           f"null, got {type(prov[k]).__name__}")
    meta = {k: v for k, v in prov.items()
            if k not in ("operator_id", "family", "source", "layer", "head", "block",
                         "seed", "m", "n", "hash", "format", "mask", "mask_hash")}
    for k in ("query_positions", "key_positions"):
        if k in files:
            x = data[k]
            if x.ndim != 1 or (x.size and x.dtype.kind not in "iu"):
                raise InvalidOperatorError(f"{where}: {k}: expected 1-D integers, got dtype "
                                           f"{x.dtype} shape {x.shape}")
            want = data["A"].shape[0 if k == "query_positions" else 1] if data["A"].ndim == 2 else None
            if x.size and want is not None and x.size != want:
                raise InvalidOperatorError(f"{where}: {k}: {x.size} positions for the {want} "
                                           f"{'queries' if k == 'query_positions' else 'keys'} "
                                           "of A")
            if x.size:
                meta[k] = x.astype(np.int64).tolist()
    idx = {}
    for k in ("layer", "head"):
        idx[k] = prov.get(k)
        if k in files:
            v = _scalar(data, k, "iu", where)
            if v < -1:
                raise InvalidOperatorError(f"{where}: {k}: expected >= 0 (or -1: unknown), "
                                           f"got {v}")
            if v >= 0:
                idx[k] = v
    A = data["A"]
    if renormalize:
        try:
            A, delta = renormalize_rows(A)
        except InvalidOperatorError as exc:
            raise InvalidOperatorError(f"{where}: {exc}") from None
        meta["renormalized"] = {"dtype": str(data["A"].dtype), "delta": delta}
    if "mask" in files:
        if data["mask"].dtype != bool:
            raise InvalidOperatorError(f"{where}: mask: expected a boolean array, got dtype "
                                       f"{data['mask'].dtype}")
        if renormalize:
            raise InvalidOperatorError(f"{where}: renormalize applies to a matrix without a "
                                       "mask")
    kw = dict(family=prov.get("family", "matrix"), source=prov.get("source", p.name),
              layer=idx["layer"], head=idx["head"], block=prov.get("block", ""),
              seed=prov.get("seed"), meta=meta,
              operator_id=prov.get("operator_id") or f"matrix-{p.stem}",
              mask=data.get("mask"))
    try:
        if has_f:
            beta = _scalar(data, "beta", "fiu")  # (the message gets `where` below)
            # the constructor checks A against softmax_rows(beta Q K^T) (FACTOR_TOL)
            op = Operator(A=A, Q=data["Q"], K=data["K"], beta=beta, **kw)
        else:
            op = Operator(A=A, **kw)
    except InvalidOperatorError as exc:
        low = data["A"].dtype.kind == "f" and data["A"].dtype.itemsize < 8
        hint = (_ROW_SUM_HINT.format(dtype=data["A"].dtype.name)
                if "rows must sum to 1" in str(exc) and not renormalize and low else "")
        raise InvalidOperatorError(f"{where}: {exc}{hint}") from None
    if "mask_hash" in prov and (op.mask is None or prov["mask_hash"] != matrix_hash(
            op.mask.astype(np.float64))):
        raise InvalidOperatorError(f"{where}: the mask differs from the provenance's "
                                   f"(mask_hash {prov['mask_hash']!s:.20})")
    if "hash" in prov and not renormalize and prov["hash"] != op.hash:
        raise InvalidOperatorError(f"{where}: A's hash {op.hash} differs from the "
                                   f"provenance's {prov['hash']}")
    return op

"""The certificate file format (docs/theory/checker.md#certificate-files).

One ``.npz`` per certificate (``numpy.savez``, read back through :mod:`.arrays`, never with
pickles) holding the certificate's arrays (:mod:`.certificates`), the operator ``A`` it was
issued for, and ``header``: a 0-d unicode array with a JSON object (``kind``, ``eps``,
``rank``, ``method``, ``operator_hash``, ``shape``, ``producer``, ``format``; ``inner`` for a
causal lower certificate and a block certificate, ``refutes`` for a counterexample).
:func:`save_certificate` writes one; :func:`load_certificate` reads one within a memory
bound and checks its header field by field. This module depends on numpy, the standard
library, :mod:`softrank.errors` and the checker's own modules only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import MalformedCertificate
from .certificates import (BlockCertificate, CausalLowerCertificate, CausalUpperWitness,
                           Certificate, DecodedInverseCertificate, FrobeniusCertificate,
                           KeyGroupCertificate, SubspaceCertificate, TrivialCertificate,
                           UpperWitness, attention_problem, index_array, matrix_hash)

__all__ = ["save_certificate", "load_certificate", "HEADER_FIELDS", "KINDS", "FORMAT_VERSION",
           "MAX_FILE_BYTES"]

FORMAT_VERSION = 1



#: Default bound on the data a certificate file may hold (bytes): 4 GiB.
MAX_FILE_BYTES = 4 * 2**30

#: Header fields of a certificate file and whether each is required.
HEADER_FIELDS = {"format": True, "kind": True, "eps": True, "rank": True, "method": True,
                 "operator_hash": True, "shape": True, "producer": True, "refutes": False,
                 "inner": False}

KINDS = ("upper", "causal-upper", "causal-lower", "trivial", "frobenius", "key-groups", "decoded",
         "subspace", "block")

#: The kinds whose certificate holds an ``inner`` one about a block of ``A``.
_WITH_INNER = ("causal-lower", "block")


def save_certificate(path, cert: Certificate, A: np.ndarray, producer: str = "",
                     refutes: dict | None = None) -> Path:
    """Write ``cert`` (issued for ``A``) to ``path`` (``.npz``) with a JSON header.

    ``refutes``: for a counterexample witness, the claim it refutes, e.g.
    ``{"claimed": 5, "eps": 0.25, "by": "my-lower-test"}`` (``r_eps(A) >= claimed``);
    ``softrank verify`` then reports whether the refutation holds."""
    path = Path(path)
    A = np.ascontiguousarray(A, dtype=np.float64)
    header = {
        "format": FORMAT_VERSION,
        "kind": cert.kind,
        "eps": float(cert.eps),
        "rank": int(cert.rank),
        "method": cert.method,
        "operator_hash": matrix_hash(A),
        "shape": list(A.shape),
        "producer": producer,
    }
    if cert.kind in _WITH_INNER:
        header["inner"] = {"kind": cert.inner.kind, "method": cert.inner.method}
    if refutes is not None:
        header["refutes"] = {"claimed": int(refutes["claimed"]), "eps": float(refutes["eps"]),
                             "by": str(refutes.get("by", ""))}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    try:
        np.savez(tmp, header=np.array(json.dumps(header, sort_keys=True)), A=A, **cert.arrays())
        tmp.replace(path)
    except BaseException:  # a full disk, an interrupt: no half-written file is left
        tmp.unlink(missing_ok=True)
        raise
    return path



def _short(v, n: int = 60) -> str:
    """``repr(v)`` on one line, cut to ``n`` characters (hostile headers can be long)."""
    r = " ".join(repr(v).split())
    return r if len(r) <= n else r[: n - 3] + "..."


def _no_repeated_keys(pairs):
    keys = [k for k, _ in pairs]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise ValueError(f"repeated keys {dup}")
    return dict(pairs)


def _header_problem(header, A_shape) -> str | None:
    """Why a certificate header is malformed, or None: every field strictly typed."""
    if not isinstance(header, dict):
        return f"header: expected a JSON object, got {type(header).__name__}"
    extra = sorted(set(header) - set(HEADER_FIELDS))
    if extra:
        return f"header: unknown fields {_short(extra)}"
    missing = [k for k, req in HEADER_FIELDS.items() if req and k not in header]
    if missing:
        return f"header: missing fields {missing}"
    if header["format"] != FORMAT_VERSION or type(header["format"]) is not int:
        return f"header: format {_short(header['format'])} is not {FORMAT_VERSION}"
    if header["kind"] not in KINDS:
        return f"header: kind {_short(header['kind'])} is not one of {list(KINDS)}"
    eps = header["eps"]
    if type(eps) not in (int, float) or not (0.0 < float(eps) < 1.0):
        return f"header: eps {_short(eps)} is not a number with 0 < eps < 1"
    rank = header["rank"]
    if type(rank) is not int or rank < 0:
        return f"header: rank {_short(rank)} is not an integer >= 0"
    for k in ("method", "producer", "operator_hash"):
        if not isinstance(header[k], str):
            return f"header: {k} {_short(header[k])} is not a string"
        if not header[k].isprintable():  # it is printed: no newline, no terminal escape
            return f"header: {k} {_short(header[k])} holds a control character"
    h = header["operator_hash"]
    if len(h) != 16 or any(c not in "0123456789abcdef" for c in h):
        return f"header: operator_hash {_short(h)} is not 16 lower-case hex digits"
    shape = header["shape"]
    if (not isinstance(shape, list) or len(shape) != 2
            or any(type(x) is not int for x in shape) or tuple(shape) != tuple(A_shape)):
        return f"header: shape {_short(shape)} differs from the shape {list(A_shape)} of A"
    inner = header.get("inner")
    if (inner is not None) != (header["kind"] in _WITH_INNER):
        return "header: inner belongs to the kinds causal-lower and block, and only there"
    if inner is not None:
        if (not isinstance(inner, dict) or set(inner) != {"kind", "method"}
                or inner["kind"] not in _INNER_KINDS or not isinstance(inner["method"], str)
                or not inner["method"].isprintable()):
            return (f"header: inner {_short(inner)} is not {{kind: one of "
                    f"{list(_INNER_KINDS)}, method: str}}")
    ref = header.get("refutes")
    if ref is not None:
        if (not isinstance(ref, dict) or set(ref) - {"claimed", "eps", "by"}
                or type(ref.get("claimed")) is not int
                or type(ref.get("eps")) not in (int, float)
                or not isinstance(ref.get("by", ""), str)
                or not ref.get("by", "").isprintable()):
            return f"header: refutes {_short(ref)} is not {{claimed: int, eps: number, by: str}}"
    return None


_INNER_KINDS = ("trivial", "frobenius", "key-groups", "decoded", "subspace")


def _from_arrays(kind: str, eps: float, data: dict, method: str):
    """The certificate of ``kind`` from its arrays (KeyError: one is missing)."""
    if kind == "upper":
        return UpperWitness(eps, data["U"], data["W"], method)
    if kind == "causal-upper":
        return CausalUpperWitness(eps, data["U"], data["W"], data["keep"], data["exact"], method)
    if kind == "trivial":
        return TrivialCertificate(eps, method)
    if kind == "frobenius":
        return FrobeniusCertificate(eps, data["rows"], data["r"], method)
    if kind == "key-groups":
        sizes = index_array("group_sizes", data["group_sizes"])
        if sizes.sum() != data["group_keys"].size or (sizes < 0).any():
            raise MalformedCertificate("group_sizes do not match group_keys")
        groups = np.split(data["group_keys"], np.cumsum(sizes)[:-1]) if sizes.size else []
        return KeyGroupCertificate(eps, data["queries"], tuple(groups), method)
    if kind == "decoded":
        return DecodedInverseCertificate(eps, data["L"], data["R"], method)
    if kind == "subspace":
        return SubspaceCertificate(eps, data["J"], data["R"], data["Lam"], data["M"], method)
    raise MalformedCertificate(f"unknown certificate kind {kind!r}")


def load_certificate(path, *, max_bytes: int = MAX_FILE_BYTES
                     ) -> tuple[Certificate, np.ndarray, dict]:
    """Read a certificate file: returns ``(certificate, A, header)``.

    The file is read within ``max_bytes`` (:mod:`.arrays`: headers first, no object
    arrays, nothing allocated beyond the bound); its header is checked field by field
    (:data:`HEADER_FIELDS`: ``format`` 1, ``kind`` one of :data:`KINDS`, ``0 < eps < 1``,
    ``rank`` a JSON integer equal to the data's rank, ``shape`` equal to ``A``'s,
    ``operator_hash`` 16 hex digits, strings where strings belong, no other field) and the
    embedded ``A`` must be an attention matrix (:func:`~softrank.checker.certificates.attention_problem`). Whether the hash
    matches ``A`` is left to the caller, which may check against another copy of the matrix.

    Raises
    ------
    MalformedCertificate
        One line naming the file and the problem, for any file that is not such a certificate.
    """
    from .arrays import read_arrays
    from ..errors import InvalidFileError

    path = Path(path)
    try:
        data = read_arrays(path, "certificate", max_bytes=max_bytes)
    except InvalidFileError as exc:
        raise MalformedCertificate(str(exc)) from None
    if not isinstance(data, dict):
        raise MalformedCertificate(f"{path}: a bare array, not an .npz certificate")
    if "header" not in data or "A" not in data:
        raise MalformedCertificate(f"{path}: missing 'header' or 'A' array")
    hdr = data["header"]
    if hdr.shape != () or hdr.dtype.kind != "U":
        raise MalformedCertificate(f"{path}: header is not a 0-d text array")
    try:
        header = json.loads(str(hdr[()]), object_pairs_hook=_no_repeated_keys)
    except ValueError as exc:
        raise MalformedCertificate(f"{path}: header is not valid JSON ({_short(str(exc))})"
                                   ) from None
    A = data["A"]
    problem = _header_problem(header, A.shape) or attention_problem(A)
    if problem:
        raise MalformedCertificate(f"{path}: {problem}")
    kind, eps = header["kind"], float(header["eps"])
    method = header["method"]
    A = np.asarray(A, dtype=np.float64)
    try:
        if kind in _WITH_INNER:
            ik = header["inner"]["kind"]
            try:
                inner = _from_arrays(ik, eps, {k[6:]: v for k, v in data.items()
                                               if k.startswith("inner_")},
                                     header["inner"]["method"])
            except KeyError as exc:
                raise MalformedCertificate(f"inner kind {ik!r} needs array "
                                           f"'inner_{exc.args[0]}'") from None
            if kind == "block":
                cert = BlockCertificate(eps, data["rows"], data["cols"], inner, method)
            else:
                cert = CausalLowerCertificate(eps, data["rows"], data["cols"], data["keep"],
                                              inner, method)
        else:
            cert = _from_arrays(kind, eps, data, method)
    except KeyError as exc:
        raise MalformedCertificate(f"{path}: kind {kind!r} needs array {exc}") from exc
    except MalformedCertificate as exc:  # the data's own checks: one line, cut
        raise MalformedCertificate(f"{path}: {' '.join(str(exc).split())[:300]}") from None
    except Exception as exc:  # unreadable values of any kind: malformed, never a crash
        raise MalformedCertificate(f"{path}: malformed data ({type(exc).__name__}: "
                                   f"{_short(str(exc), 200)})") from exc
    if header["rank"] != cert.rank:
        raise MalformedCertificate(
            f"{path}: header rank {header.get('rank')} differs from the data's rank {cert.rank}"
        )
    return cert, A, header

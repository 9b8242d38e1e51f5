"""Reading ``.npy`` and ``.npz`` files that may be hostile, with bounded memory.

``numpy.load`` trusts a file's header: an ``.npy`` whose header claims 10^12 entries makes it
allocate them (``MemoryError``), an ``.npz`` member may hold an object array (``ValueError``
only when the member is read), and a corrupt archive raises ``zipfile.BadZipFile``. Every
softrank loader (operator files, bare matrices, certificates) reads through this module
instead, which

* reads each array's header first and refuses, before any allocation, a dtype that is not a
  plain real number of at most 64 bits, integer, boolean or (for text fields) a unicode
  string; a negative or
  non-integer dimension; and data larger than ``max_bytes`` in
  total;
* checks that the bytes the header announces are what the file (or the archive member,
  by its declared uncompressed size) holds, so a header cannot make the reader wait for or
  allocate data that is not there, and a decompression never yields more than announced;
* refuses archives with more than :data:`MAX_MEMBERS` members or members that are not
  ``.npy`` arrays;
* raises :class:`ArrayFileError` (a :class:`~softrank.errors.SoftrankError`) with one line
  naming the argument, the file and the problem, and nothing else.

It depends on numpy, the standard library and :mod:`softrank.errors` only (the checker's
rule).
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np
from numpy.lib import format as npformat

from ..errors import InvalidFileError

__all__ = ["ArrayFileError", "read_arrays", "MAX_MEMBERS", "ALLOWED_KINDS"]

#: Raised on a file that cannot be read as the arrays it should hold.
ArrayFileError = InvalidFileError

#: Most members an ``.npz`` may hold (a certificate has at most 7, an operator file 9).
MAX_MEMBERS = 32

#: dtype kinds accepted: float, signed and unsigned integer, boolean, unicode text.
ALLOWED_KINDS = "fiubU"

_MAGIC_NPY = b"\x93NUMPY"
_MAGIC_ZIP = (b"PK\x03\x04", b"PK\x05\x06")


def _header(fp, where: str) -> tuple[tuple[int, ...], np.dtype, bool, int]:
    """Read and validate one ``.npy`` header from ``fp``:
    ``(shape, dtype, fortran_order, header bytes)``."""
    try:
        version = npformat.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = npformat.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, fortran, dtype = npformat.read_array_header_2_0(fp)
        else:
            raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
    except Exception as exc:  # untrusted header text: numpy's parser raises many types
        # (ValueError, SyntaxError, tokenize.TokenError, TypeError, RecursionError, ...)
        raise ArrayFileError(f"{where}: not a readable .npy array "
                             f"({type(exc).__name__}: {_one_line(exc)[:200]})") from None
    if dtype.kind not in ALLOWED_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        hint = ("; bfloat16 has no numpy dtype: save tensor.float() and pass --renormalize"
                if dtype.kind == "V" and dtype.itemsize == 2 else "")
        raise ArrayFileError(f"{where}: dtype {dtype.str!r} is not allowed (real numbers, "
                             f"integers, booleans or text only; never objects){hint}")
    if dtype.itemsize == 0:
        raise ArrayFileError(f"{where}: dtype {dtype.str!r} has no size")
    if dtype.kind in "fc" and dtype.itemsize > 8:
        raise ArrayFileError(f"{where}: dtype {dtype.str!r} (extended precision) cannot be read "
                             "exactly as float64; round it to float64 yourself if you mean to")
    if dtype.hasobject:  # pragma: no cover - excluded by the kinds above
        raise ArrayFileError(f"{where}: object arrays are not allowed")
    if any((not isinstance(s, int)) or s < 0 for s in shape):
        raise ArrayFileError(f"{where}: invalid shape {shape!r} in the header")
    return tuple(shape), dtype, bool(fortran), fp.tell()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _size(n: float) -> str:
    """A byte count for people: ``512 B``, ``3.2 MiB``, ``7.28 TiB``."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} B"


def _nbytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    return math.prod(shape) * dtype.itemsize


def read_arrays(path, arg: str = "path", *, max_bytes: int) -> np.ndarray | dict[str, np.ndarray]:
    """Read an ``.npy`` (one array) or ``.npz`` (a dict of arrays) within a memory bound.

    Parameters
    ----------
    path : str or path-like
        The file. Its kind is decided by its first bytes, not its name.
    arg : str
        The argument the file was given as, for messages (e.g. ``"file"``, ``"--matrix"``).
    max_bytes : int
        Largest total size in bytes of the arrays the file may hold; checked from the
        headers before anything is allocated.

    Returns
    -------
    numpy.ndarray or dict of str to numpy.ndarray
        The array of an ``.npy`` file, or the arrays of an ``.npz`` archive by name (without
        the ``.npy`` suffix).

    Raises
    ------
    InvalidFileError
        One line naming ``arg``, the file and the problem: not found, a directory, neither
        ``.npy`` nor ``.npz``, a corrupt archive, a disallowed dtype, a header that does not
        match the data, or more than ``max_bytes`` of data.
    """
    p = Path(path)
    where = f"{arg}: {str(p)!r}"
    try:
        fh = open(p, "rb")
    except FileNotFoundError:
        raise ArrayFileError(f"{where} not found") from None
    except IsADirectoryError:
        raise ArrayFileError(f"{where} is a directory, expected a .npy or .npz file") from None
    except OSError as exc:
        raise ArrayFileError(f"{where} cannot be opened ({_one_line(exc)})") from None
    with fh:
        magic = fh.read(6)
        fh.seek(0)
        if magic == _MAGIC_NPY:
            return _read_npy(fh, where, os.fstat(fh.fileno()).st_size, max_bytes)
        if magic[:4] in _MAGIC_ZIP:
            return _read_npz(fh, where, max_bytes)
    raise ArrayFileError(f"{where} is neither a .npy array nor a .npz archive (first bytes "
                         f"{magic!r})")


def _read_npy(fp, where: str, size: int, max_bytes: int) -> np.ndarray:
    shape, dtype, fortran, start = _header(fp, where)
    need = _nbytes(shape, dtype)
    if need > max_bytes:
        raise ArrayFileError(f"{where}: the header announces shape {shape} of {dtype.str} "
                             f"({_size(need)}), above the limit of "
                             f"{_size(max_bytes)}")
    if size - start != need:
        raise ArrayFileError(f"{where}: the header announces {need} bytes of data "
                             f"(shape {shape}, {dtype.str}), the file holds {size - start}")
    return _read_data(fp, shape, dtype, fortran, where)


def _read_data(fp, shape, dtype, fortran: bool, where: str) -> np.ndarray:
    need = _nbytes(shape, dtype)
    try:
        buf = fp.read(need)
    except (OSError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
        raise ArrayFileError(f"{where}: the data cannot be read ({_one_line(exc)})") from None
    if len(buf) != need:
        raise ArrayFileError(f"{where}: truncated data, {len(buf)} of {need} bytes")
    flat = np.frombuffer(buf, dtype=dtype)
    if fortran:  # column-major data: numpy.load's reading (shape reversed, then transposed)
        return flat.reshape(shape[::-1]).T.copy()
    return flat.reshape(shape).copy()


def _read_npz(fh, where: str, max_bytes: int) -> dict[str, np.ndarray]:
    try:
        zf = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ArrayFileError(f"{where}: not a readable .npz archive ({_one_line(exc)})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise ArrayFileError(f"{where}: {len(infos)} members, at most {MAX_MEMBERS} "
                                 "accepted")
        names = [i.filename for i in infos]
        if len(set(names)) != len(names):
            raise ArrayFileError(f"{where}: repeated member names in the archive")
        total = sum(i.file_size for i in infos)
        # the header of each member is at most a few hundred bytes; the data is bounded below
        if total > max_bytes + 65536 * max(1, len(infos)):
            raise ArrayFileError(f"{where}: the archive announces {_size(total)} "
                                 f"uncompressed, above the limit of {_size(max_bytes)}")
        out: dict[str, np.ndarray] = {}
        used = 0
        for info in infos:
            name = info.filename
            if not name.endswith(".npy") or info.is_dir():
                raise ArrayFileError(f"{where}: member {name!r} is not a .npy array")
            key = name[:-4]
            mwhere = f"{where}, array {key!r}"
            try:
                member = zf.open(info)
            except (zipfile.BadZipFile, NotImplementedError, OSError, ValueError,
                    RuntimeError, EOFError, zlib.error) as exc:
                raise ArrayFileError(f"{mwhere}: cannot be read ({_one_line(exc)})") from None
            with member:
                shape, dtype, fortran, start = _header(member, mwhere)
                need = _nbytes(shape, dtype)
                used += need
                if used > max_bytes:
                    raise ArrayFileError(f"{where}: its arrays need {_size(used)} or "
                                         f"more, above the limit of {_size(max_bytes)}")
                if info.file_size - start != need:
                    raise ArrayFileError(f"{mwhere}: the header announces {need} bytes of data "
                                         f"(shape {shape}, {dtype.str}), the archive holds "
                                         f"{info.file_size - start}")
                out[key] = _read_data(member, shape, dtype, fortran, mwhere)
        return out

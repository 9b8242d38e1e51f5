"""softrank's reference brackets kept on disk between pytest sessions
(``--softrank-reference-cache DIR``; docs/suites.md, *Reference cache*).

The suites compare every certifier with softrank's own bracket of the same case
(:func:`softrank.suites.builtin.reference_bracket`); at the real sizes that bracket is most of a
session's time, and it is the same in every session that runs the same softrank on the same
operator. With a cache directory, a bracket is stored once per key (the operator's hash,
``eps`` and the engine: the bytes of softrank's modules and the versions of numpy, scipy and
highspy) as two certificate files (:func:`softrank.checker.save_certificate`) and its ends.

A stored bracket is re-checked, not trusted: on load both certificates are checked again by
the checker (float64 and interval) against the operator in hand, and their ranks and ``eps``
must equal the stored ends; anything else (a missing, truncated or edited file, an entry that
is not a directory of regular files, or a certificate the checker rejects) is counted as
refused, computed afresh and stored again. A bracket whose verdict is ``unsound`` or ``error``
is never stored. What the check cannot tell is whether a valid certificate is softrank's own:
whoever can write to the directory can replace a reference by a weaker valid one (never an
unsound one), so keep the directory where only you write, as for the operator cache. Several
sessions may share one directory at once: one key is computed by one of them while the others
wait for it (a POSIX ``flock`` on the key's lock file).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

__all__ = ["ReferenceCache", "engine_key"]

_ENGINE: list = []
_MAX_ENDS = 4096  # bytes: an entry's ends.json is about 50


def engine_key() -> str:
    """16 hex digits naming this engine: softrank's version, the bytes of every module of
    the installed package (any edit changes it) and the versions of numpy, scipy and
    highspy."""
    if not _ENGINE:
        from importlib.metadata import PackageNotFoundError, version

        import softrank

        h = hashlib.sha256(softrank.__version__.encode())
        for dist in ("numpy", "scipy", "highspy"):
            try:
                h.update(f"{dist}={version(dist)}".encode())
            except PackageNotFoundError:
                h.update(f"{dist}=none".encode())
        root = Path(softrank.__file__).parent
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
        _ENGINE.append(h.hexdigest()[:16])
    return _ENGINE[0]


class ReferenceCache:
    """A directory of reference brackets (module docstring).

    Parameters
    ----------
    root : path
        The directory; created when missing. Only ``<root>/<key>/`` entries and their lock
        files are written there.

    Attributes
    ----------
    loaded, stored, refused : int
        Brackets read back and re-checked; computed and written; entries present but not
        accepted (then computed and written again).
    notes : list of str
        One line per entry that could not be written.

    Raises
    ------
    InvalidArgumentError
        ``root`` exists and is not a directory, or cannot be created or written.
    """

    def __init__(self, root):
        from ..errors import InvalidArgumentError

        if not str(root):
            raise InvalidArgumentError("--softrank-reference-cache: expected a directory path, "
                                       "got ''")
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise InvalidArgumentError(f"--softrank-reference-cache: {str(root)!r} exists and "
                                       "is not a directory")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidArgumentError(f"--softrank-reference-cache: cannot create "
                                       f"{str(root)!r}: {exc.strerror}") from None
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise InvalidArgumentError(f"--softrank-reference-cache: {str(root)!r} is not "
                                       "writable")
        self.notes: list[str] = []  # entries that could not be written
        self.loaded = 0  # brackets read back and re-checked
        self.stored = 0  # brackets computed and written
        self.refused = 0  # entries present but not accepted (recomputed)

    def key(self, operator, eps: float) -> str:
        """24 hex digits: :func:`engine_key`, the operator's hash and ``eps``."""
        return hashlib.sha256(f"{engine_key()}/{operator.hash}/{float(eps)!r}".encode()
                              ).hexdigest()[:24]

    def get(self, operator, eps: float, compute):
        """The bracket of ``operator`` at ``eps``: read back and re-checked, or
        ``compute(operator, eps)`` stored (when its verdict is ``open`` or ``resolved``).
        An entry that cannot be read back is counted as refused; one that cannot be written
        is noted in ``notes`` and the bracket is returned unstored."""
        import fcntl

        key = self.key(operator, eps)
        with open(self.root / f"{key}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            entry = self.root / key
            if os.path.lexists(entry):
                br = self._load(entry, operator, float(eps))
                if br is not None:
                    self.loaded += 1
                    return br
                self.refused += 1
            br = compute(operator, eps)
            if (br.verdict in ("open", "resolved") and br.lower_certificate is not None
                    and br.upper_witness is not None):
                try:
                    self._store(entry, operator, br)
                    self.stored += 1
                except OSError as exc:
                    self.notes.append(f"reference cache: cannot store {entry.name} "
                                      f"({exc.strerror or exc}); computed, not kept")
            return br

    def _load(self, entry: Path, operator, eps: float):
        """The stored bracket, or None unless the entry is a directory of regular files whose
        two certificates have the stored ranks and ``eps`` and pass the checker on
        ``operator.A`` (the methods are the certificates' own, as in a fresh bracket)."""
        from ..certifiers.bracket import Bracket
        from ..checker import UpperWitness, check, load_certificate
        from ..errors import SoftrankError

        files = {n: entry / n for n in ("ends.json", "lower.npz", "upper.npz")}
        if entry.is_symlink() or not entry.is_dir() or not all(
                f.is_file() and not f.is_symlink() for f in files.values()):
            return None  # never open a FIFO, a device or a link
        try:
            with open(files["ends.json"], "rb") as fh:
                raw = fh.read(_MAX_ENDS + 1)
            if len(raw) > _MAX_ENDS:
                return None
            ends = json.loads(raw)
            if not isinstance(ends, dict) or set(ends) != {"eps", "lower", "upper"}:
                return None
            certs = {}
            for side in ("lower", "upper"):
                cert, _, _ = load_certificate(files[f"{side}.npz"])
                if ((side == "upper") != isinstance(cert, UpperWitness) or cert.eps != eps
                        or type(ends[side]) is not int or cert.rank != ends[side]
                        or not check(operator.A, cert).ok):
                    return None
                certs[side] = cert
        except (OSError, ValueError, KeyError, TypeError, RecursionError, SoftrankError):
            return None
        lo, up = certs["lower"].rank, certs["upper"].rank
        if ends["eps"] != eps or lo > up:
            return None
        return Bracket(eps, lo, up, certs["lower"], certs["upper"], certs["lower"].method,
                       certs["upper"].method, "resolved" if lo == up else "open")

    def _store(self, entry: Path, operator, br) -> None:
        """Write the entry: the two certificates, then ``ends.json`` last (an entry without
        it is never read back). A previous entry of this key is replaced: a file, a link or
        a directory of softrank's own entry files (nothing else is removed)."""
        from ..checker import save_certificate

        if entry.is_symlink() or (os.path.lexists(entry) and not entry.is_dir()):
            entry.unlink()
        entry.mkdir(exist_ok=True)
        for name in ("ends.json", "lower.npz", "upper.npz"):
            f = entry / name
            if f.is_symlink() or (os.path.lexists(f) and not f.is_file()):
                f.rmdir() if f.is_dir() and not f.is_symlink() else f.unlink()
        (entry / "ends.json").unlink(missing_ok=True)  # the entry is incomplete from here
        for side, cert in (("lower", br.lower_certificate), ("upper", br.upper_witness)):
            save_certificate(entry / f"{side}.npz", cert, operator.A,
                             producer="softrank reference bracket")
        ends = {"eps": float(br.eps), "lower": int(br.lower), "upper": int(br.upper)}
        tmp = entry / "ends.json.tmp"
        tmp.write_text(json.dumps(ends, sort_keys=True))
        tmp.replace(entry / "ends.json")

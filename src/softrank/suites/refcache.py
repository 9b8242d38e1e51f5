"""softrank's reference brackets kept on disk between pytest sessions
(``--softrank-reference-cache DIR``; docs/suites.md, *Reference cache*).

The suites compare every certifier with softrank's own bracket of the same case
(:func:`softrank.suites.builtin.reference_bracket`); at the real sizes that bracket is most of a
session's time, and it is the same in every session that runs the same softrank on the same
operator. With a cache directory, a bracket is stored once per key (the operator's hash,
``eps`` and the engine: the bytes of softrank's modules and the versions of numpy, scipy and
highspy) as two certificate files (:func:`softrank.checker.save_certificate`) and its ends.

A stored bracket is never trusted: on load both certificates are checked again by the
checker (float64 and interval) against the operator in hand, and their ranks and ``eps``
must equal the stored ends; anything else (a missing, truncated or edited file, or a
certificate the checker rejects) is computed afresh and stored again. A bracket whose verdict
is ``unsound`` or ``error`` is never stored. Several sessions may share one directory at once:
one key is computed by one of them while the others wait for it (a POSIX ``flock`` on the
key's lock file).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

__all__ = ["ReferenceCache", "engine_key"]

_ENGINE: list = []


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

    Raises
    ------
    InvalidArgumentError
        ``root`` exists and is not a directory, or cannot be created or written.
    """

    def __init__(self, root):
        from ..errors import InvalidArgumentError

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
        self.loaded = 0  # brackets read back and re-checked
        self.stored = 0  # brackets computed and written
        self.refused = 0  # entries present but not accepted (recomputed)

    def key(self, operator, eps: float) -> str:
        """24 hex digits: :func:`engine_key`, the operator's hash and ``eps``."""
        return hashlib.sha256(f"{engine_key()}/{operator.hash}/{float(eps)!r}".encode()
                              ).hexdigest()[:24]

    def get(self, operator, eps: float, compute):
        """The bracket of ``operator`` at ``eps``: read back and re-checked, or
        ``compute(operator, eps)`` stored (when its verdict is ``open`` or ``resolved``)."""
        import fcntl

        key = self.key(operator, eps)
        with open(self.root / f"{key}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            entry = self.root / key
            if (entry / "ends.json").exists():
                br = self._load(entry, operator, float(eps))
                if br is not None:
                    self.loaded += 1
                    return br
                self.refused += 1
            br = compute(operator, eps)
            if (br.verdict in ("open", "resolved") and br.lower_certificate is not None
                    and br.upper_witness is not None):
                self._store(entry, operator, br)
                self.stored += 1
            return br

    def _load(self, entry: Path, operator, eps: float):
        """The stored bracket, or None unless both certificates load, have the stored ranks
        and ``eps`` and pass the checker on ``operator.A``."""
        from ..certifiers.bracket import Bracket
        from ..checker import UpperWitness, check, load_certificate
        from ..errors import SoftrankError

        try:
            ends = json.loads((entry / "ends.json").read_text())
            certs = {}
            for side in ("lower", "upper"):
                cert, _, _ = load_certificate(entry / f"{side}.npz")
                if ((side == "upper") != isinstance(cert, UpperWitness) or cert.eps != eps
                        or cert.rank != ends[side] or not check(operator.A, cert).ok):
                    return None
                certs[side] = cert
            if ends["eps"] != eps or not certs["lower"].rank <= certs["upper"].rank:
                return None
            methods = str(ends["lower_method"]), str(ends["upper_method"])
        except (OSError, ValueError, KeyError, TypeError, SoftrankError):
            return None
        lo, up = certs["lower"].rank, certs["upper"].rank
        return Bracket(eps, lo, up, certs["lower"], certs["upper"], *methods,
                       "resolved" if lo == up else "open")

    def _store(self, entry: Path, operator, br) -> None:
        from ..checker import save_certificate

        entry.mkdir(exist_ok=True)
        for side, cert in (("lower", br.lower_certificate), ("upper", br.upper_witness)):
            save_certificate(entry / f"{side}.npz", cert, operator.A,
                             producer="softrank reference bracket")
        ends = {"eps": float(br.eps), "lower": int(br.lower), "upper": int(br.upper),
                "lower_method": br.lower_method, "upper_method": br.upper_method}
        tmp = entry / "ends.json.tmp"
        tmp.write_text(json.dumps(ends, sort_keys=True))
        tmp.replace(entry / "ends.json")  # last: an entry without it is not read

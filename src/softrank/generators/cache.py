"""Captured operators kept by content, so that a second audit does not run the model again.

Capturing MiniLM heads costs a model load (importing torch and transformers), one forward
pass per source and width, the eager-attention check of every operator and ``A`` in float64
from the float32 factors: the one serial step before an audit's cells start. An
:class:`OperatorCache` keeps each captured operator as an operator file
(:func:`softrank.operator_files.save_operator`, no pickle) named by the hash of everything the
operator depends on:

* the checkpoint's files (sha256 of every regular file at the top of its directory: config,
  weights, tokenizer);
* the source (its name and the sha256 of its text);
* the width, layer and head;
* the versions of torch and transformers (the forward pass is theirs) and
  :data:`CAPTURE_VERSION`, softrank's own, raised whenever the capture's output for the same
  input changes.

A cached operator is read back through :func:`softrank.operator_files.load_operator`, which
validates it like any operator file (``A`` row-stochastic, ``A`` equal to
``softmax_rows(beta Q K^T)``), and its provenance must match the request (family, layer,
head, source, width); an entry that fails either is reported and captured again. The cache
is trusted as the checkpoint directory is: whoever can write to it could also replace the
weights.

The suites' real-size MiniLM cases (:mod:`softrank.suites.sizes`) read and fill the same
default cache. The cache lives in ``$SOFTRANK_OPERATOR_CACHE`` when set, else
``$XDG_CACHE_HOME/softrank/operators`` (``~/.cache/softrank/operators``); ``softrank audit
--operator-cache DIR`` chooses another directory and ``--no-operator-cache`` turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from typing import Any

from ..errors import InvalidArgumentError, SoftrankError
from ..operators import Operator
from ..operator_files import load_operator, save_operator

__all__ = ["CAPTURE_VERSION", "OperatorCache", "default_cache_dir", "checkpoint_digest",
           "package_versions", "text_digest"]

#: softrank's version of the capture: part of every cache key. Raise it when the operators
#: captured from the same checkpoint, source, width, layer and head change.
CAPTURE_VERSION = 1

_DIGESTS: dict = {}


def default_cache_dir() -> pathlib.Path:
    """``$SOFTRANK_OPERATOR_CACHE``, else ``$XDG_CACHE_HOME/softrank/operators``, else
    ``~/.cache/softrank/operators``."""
    env = os.environ.get("SOFTRANK_OPERATOR_CACHE")
    if env:
        return pathlib.Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "softrank" / "operators"


def checkpoint_digest(directory: Any) -> str:
    """sha256 (hex) over the names, sizes and contents of the regular files at the top of a
    checkpoint directory, in name order (cached per process by path, size and mtime).

    Raises
    ------
    InvalidArgumentError
        If ``directory`` is not a directory.
    """
    d = pathlib.Path(directory)
    if not d.is_dir():
        raise InvalidArgumentError(f"checkpoint: {str(d)!r} is not a directory")
    files = sorted(p for p in d.iterdir() if p.is_file())
    stamp = (str(d.resolve()), tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                                     for p in files))
    hit = _DIGESTS.get(stamp)
    if hit is None:
        h = hashlib.sha256()
        for p in files:
            h.update(f"{p.name}\0{p.stat().st_size}\0".encode())
            with open(p, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
        hit = _DIGESTS[stamp] = h.hexdigest()
    return hit


def text_digest(text: str) -> str:
    """sha256 (hex) of a text as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def package_versions() -> dict:
    """Installed versions of torch and transformers (read from their metadata, without
    importing them; ``None`` when not installed)."""
    from importlib import metadata

    out = {}
    for name in ("torch", "transformers"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


class OperatorCache:
    """Operator files in one directory, named by the hash of what each operator depends on.

    Parameters
    ----------
    directory : str or path-like
        Created (with its parents) on the first write.
    arg : str
        The option the directory was given as, for messages.

    Attributes
    ----------
    hits, misses : int
        Operators read from the cache, and operators requested but not found (or refused).
    notes : list of str
        One line per entry refused on reading and per failed write (the run goes on: the
        operator is captured again, or simply not kept).

    Raises
    ------
    InvalidArgumentError
        If ``directory`` exists and is not a directory.
    """

    def __init__(self, directory: Any, arg: str = "--operator-cache"):
        self.dir = pathlib.Path(directory)
        self.arg = arg
        if self.dir.exists() and not self.dir.is_dir():
            raise InvalidArgumentError(f"{arg}: {str(self.dir)!r} exists and is not a directory")
        self.hits = 0
        self.misses = 0
        self.notes: list[str] = []

    @staticmethod
    def key(parts: dict) -> str:
        """The cache key (64 hex digits) of a JSON-ready dict of what an operator depends on
        (:data:`CAPTURE_VERSION` is added)."""
        blob = json.dumps({**parts, "capture_version": CAPTURE_VERSION}, sort_keys=True,
                          separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def path(self, key: str) -> pathlib.Path:
        return self.dir / f"{key}.npz"

    def get(self, key: str, expect: dict | None = None) -> Operator | None:
        """The operator stored under ``key``, or None (counted as a miss).

        ``expect`` maps provenance fields (``family``, ``layer``, ``head``, ``source``, and
        ``m``/``n``) to the values the request implies; an entry that differs, or that
        :func:`~softrank.operator_files.load_operator` refuses, is noted and treated as missing.
        """
        p = self.path(key)
        if not p.is_file():
            self.misses += 1
            return None
        try:
            op = load_operator(p, self.arg)
        except SoftrankError as exc:
            self.notes.append(f"operator cache: refused {p.name} ({exc}); capturing it again")
            self.misses += 1
            return None
        prov = op.provenance()
        wrong = {k: (prov.get(k), v) for k, v in (expect or {}).items() if prov.get(k) != v}
        if wrong:
            self.notes.append(f"operator cache: refused {p.name} (provenance differs: {wrong}); "
                              "capturing it again")
            self.misses += 1
            return None
        self.hits += 1
        return op

    def put(self, key: str, op: Operator) -> None:
        """Store ``op`` under ``key`` (written to a temporary name, then renamed: an
        interrupted write leaves no entry). A directory that cannot be written is noted
        once and the run goes on without keeping the operator."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            save_operator(self.path(key), op)
        except OSError as exc:
            msg = f"operator cache: cannot write to {str(self.dir)!r} ({exc.strerror or exc})"
            if msg not in self.notes:
                self.notes.append(msg)

    def summary(self) -> dict:
        """``{"directory", "hits", "misses", "notes"}``."""
        return {"directory": str(self.dir), "hits": self.hits, "misses": self.misses,
                "notes": list(self.notes)}

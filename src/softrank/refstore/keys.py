"""What names a reference store's entries and where the store is (docs/store.md, *What the
key is*): the engine's key (:func:`~softrank.refstore.keys.engine_key`), an operator's directory name
(:func:`~softrank.refstore.keys.group_name`), the digest of a file (:func:`~softrank.refstore.keys.file_sha256`), and the default store's
directory (:func:`~softrank.refstore.keys.default_store_dir`, ``$SOFTRANK_REFERENCE_STORE``)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..checker import matrix_hash

__all__ = ["engine_key", "engine_versions", "group_name", "file_sha256", "default_store_dir",
           "default_store_label", "turned_off", "STORE_ENV"]

#: The environment variable naming the store's directory (``off`` turns the store off).
STORE_ENV = "SOFTRANK_REFERENCE_STORE"

#: Every module at or below :mod:`softrank.certifiers` in the import layers
#: (``pyproject.toml``): what an end can depend on.
_ENGINE_SOURCES = ("certifiers", "checker", "operators.py", "operator_files.py", "ids.py",
                   "validation.py", "errors.py")
_ENGINE_LIBRARIES = ("numpy", "scipy", "highspy", "numba", "llvmlite", "python-flint", "mpmath")
_OFF = ("off", "none", "no", "0", "false")
_ENGINE: list = []


def engine_versions() -> dict:
    """softrank's version and the versions of the libraries an end can depend on."""
    from importlib.metadata import PackageNotFoundError, version

    import softrank

    out = {"softrank": softrank.__version__}
    for dist in _ENGINE_LIBRARIES:
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def engine_key() -> str:
    """16 hex digits naming this engine (:mod:`softrank.refstore.store`): the versions of
    :func:`~softrank.refstore.keys.engine_versions` and the bytes of every engine module of the installed package;
    any edit to one of them changes it."""
    if not _ENGINE:
        import softrank

        h = hashlib.sha256(json.dumps(engine_versions(), sort_keys=True).encode())
        root = Path(softrank.__file__).parent
        for name in _ENGINE_SOURCES:
            base = root / name
            for path in sorted(base.rglob("*.py")) if base.is_dir() else [base]:
                h.update(str(path.relative_to(root)).encode() + b"\0")
                h.update(path.read_bytes())
        _ENGINE.append(h.hexdigest()[:16])
    return _ENGINE[0]


def turned_off(value: str) -> bool:
    """Whether a store setting (the environment variable, the plugin's option) turns the
    store off: ``off``, ``none``, ``no``, ``false`` or ``0``, in any case."""
    return value.strip().lower() in _OFF


def default_store_dir() -> Path | None:
    """``$SOFTRANK_REFERENCE_STORE`` when set and not empty (None when it turns the store
    off, :func:`~softrank.refstore.keys.turned_off`), else ``$XDG_CACHE_HOME/softrank/references``, else
    ``~/.cache/softrank/references`` (beside the operator cache,
    :func:`softrank.generators.cache.default_cache_dir`)."""
    env = os.environ.get(STORE_ENV, "")
    if env.strip():
        return None if turned_off(env) else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "softrank" / "references"


def default_store_label() -> str:
    """How the default store was chosen, for messages."""
    return (f"{STORE_ENV} (default store)" if os.environ.get(STORE_ENV, "").strip()
            else "the default reference store")


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, as 64 hex digits."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def group_name(operator, effort: str, validated: bool) -> str:
    """The operator's directory name: ``HASH-EFFORT``, and ``-validated-`` with the hash of
    the factors ``Q``, ``K``, ``beta`` in validated mode (:mod:`softrank.refstore.store`)."""
    name = f"{operator.hash}-{effort}"
    if validated:
        h = hashlib.sha256()
        for M in (operator.Q, operator.K):
            h.update(matrix_hash(M).encode())
        h.update(repr(float(operator.beta)).encode())
        name += f"-validated-{h.hexdigest()[:16]}"
    return name

"""Is the checker the suites use still softrank's own?

A certifier under test runs in the suites' process, so it can replace the checker (assign
``softrank.suites.suite.check``, a function of :mod:`softrank.checker.float64`, an entry of
its dispatch table, or a function's code). Every verdict after that is the certifier's own.
:func:`snapshot` records the identity of every function, class, code object and table of the
checker's modules (and the checker names the suites imported); :func:`changes` lists what
differs from it. The plugin takes the snapshot before it imports any certifier and checks
it whenever a suite fails and at the end of the session, so a patched checker is named as
such instead of being reported as a checker that accepted an unsound certificate.

This guards against a certifier that patches Python objects, not against one that edits
numpy or the interpreter: run certifiers you do not trust in a separate process.
"""

from __future__ import annotations

import sys
import types

__all__ = ["snapshot", "changes", "CHECKER_MODULES"]

#: Modules whose objects are recorded, and for the suites module the names it imported.
CHECKER_MODULES = ("softrank.checker", "softrank.checker.certificates",
                   "softrank.checker.float64", "softrank.checker.interval",
                   "softrank.checker.arrays")
#: Names the suites module imported from the checker, and the checker object each must be.
_SUITE_ALIASES = {"softrank.suites.suite.check": "softrank.checker.check",
                  "softrank.suites.suite.distance_bound": "softrank.checker.distance_bound"}


def _fingerprint(value):
    if isinstance(value, types.FunctionType):
        return ("function", id(value), id(value.__code__), id(value.__defaults__),
                id(value.__kwdefaults__))
    if isinstance(value, type):
        return ("class", id(value), tuple(sorted((k, _fingerprint(v))
                                                 for k, v in vars(value).items()
                                                 if isinstance(v, types.FunctionType))))
    if isinstance(value, dict):
        return ("table", id(value), tuple(sorted((str(k), id(v)) for k, v in value.items())))
    return None


def _objects() -> dict:
    import importlib

    out = {}
    for name in CHECKER_MODULES:
        mod = importlib.import_module(name)
        for k, v in vars(mod).items():
            if k.startswith("__"):
                continue
            fp = _fingerprint(v)
            if fp is not None:
                out[f"{name}.{k}"] = fp
    return out


def snapshot() -> dict:
    """Record the checker's objects now (call before any certifier is imported).

    Returns
    -------
    dict
        Opaque: pass it to :func:`changes`.
    """
    return _objects()


def changes(snap: dict | None) -> list[str]:
    """Names of the checker's objects replaced or modified since ``snap``.

    Parameters
    ----------
    snap : dict or None
        A :func:`snapshot`; None (no snapshot taken) gives no changes.

    Returns
    -------
    list of str
        Qualified names, sorted; empty when the checker is intact.
    """
    if not snap:
        return []
    now = _objects()
    out = {k for k in set(snap) | set(now) if now.get(k) != snap.get(k)}
    for alias, target in _SUITE_ALIASES.items():  # once the suites module is imported
        mod_name, _, attr = alias.rpartition(".")
        mod = sys.modules.get(mod_name)
        if mod is not None and _fingerprint(getattr(mod, attr, None)) != snap.get(target):
            out.add(alias)
    return sorted(out)

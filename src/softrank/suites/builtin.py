"""softrank's own certifiers in the suites, from the one registry
(:mod:`softrank.certifiers.registry`).

Called by the suites (without a bracket's context), each built-in construction returns the
witness of the least rank it reaches over its whole range and each built-in lower test the
largest certificate its family finds (unchecked: the suites check). ``builtin:NAME`` loads
one (``builtin:all`` is the plugin's default set); :func:`reference_bracket` is the full
:func:`softrank.bracket`, cached per operator, against which third-party certifiers are
compared.
"""

from __future__ import annotations

from ..certifiers.registry import CONSTRUCTIONS, LOWER_TESTS, REFERENCE, builtin, builtin_certifiers

__all__ = ["CONSTRUCTIONS", "LOWER_TESTS", "REFERENCE", "builtin", "builtin_certifiers",
           "reference_bracket"]

_CACHE: dict = {}


def reference_bracket(operator, eps: float, store=None):
    """softrank's full bracket of ``operator`` at ``eps`` (cached in memory for the session,
    and in ``store``, a :class:`softrank.refstore.ReferenceStore`
    (``--softrank-reference-store``) when given, where it is checked again when read back;
    both ends checked)."""
    from ..certifiers.bracket import bracket

    key = (operator.hash, float(eps))
    br = _CACHE.get(key)
    if br is None:
        if len(_CACHE) > 512:
            _CACHE.clear()
        br = _CACHE[key] = bracket(operator, float(eps), store=store)[0]
    return br

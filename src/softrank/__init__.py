"""softrank: certified brackets for the approximation rank of softmax attention.

``r_eps(A)`` is the least rank of any matrix within max-row-l1 error ``eps`` of an attention
matrix ``A``. softrank computes brackets ``lower <= r_eps(A) <= upper`` whose ends are backed
by explicit certificates re-verified by an independent checker (``softrank.checker``).
The theory is in docs/theory/ (index.md).
"""

from .errors import SoftrankError

__version__ = "0.1.0"

__all__ = ["Operator", "SoftrankError", "softmax_rows", "bracket", "causal_bracket",
           "__version__"]


_SUBPACKAGES = ("attacks", "audit", "certifiers", "checker", "generators", "geometry", "harness",
                "operators", "refstore", "studies", "suites")


def __getattr__(name):  # lazy: keep `import softrank` light (the pytest plugin imports it)
    if name == "bracket":
        from .certifiers.bracket import bracket

        return bracket
    if name == "causal_bracket":
        from .certifiers.causal import causal_bracket

        return causal_bracket
    if name in ("Operator", "softmax_rows"):
        from . import operators

        return getattr(operators, name)
    if name in _SUBPACKAGES:  # `softrank.refstore.ReferenceStore(...)` after `import softrank`
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'softrank' has no attribute {name!r}")

"""softrank's own certifiers behind the suite protocol (:mod:`softrank.suites.protocol`).

Each built-in construction returns the witness of the least rank it reaches; each built-in
lower test returns the largest certificate its family finds (unchecked: the suites check).
``builtin:NAME`` loads one (``builtin:all`` is the default set of the plugin);
:func:`reference_bracket` is the full :func:`softrank.bracket`, cached per operator, against
which third-party certifiers are compared.
"""

from __future__ import annotations

import numpy as np

from ..certifiers import lower as lo_
from ..certifiers import upper as up_
from ..errors import InvalidArgumentError
from .protocol import Certifier, as_certifier

__all__ = ["CONSTRUCTIONS", "LOWER_TESTS", "builtin", "builtin_certifiers", "reference_bracket"]


def _svd(A):
    return np.linalg.svd(A, full_matrices=False)


class _Construction:
    def __init__(self, name, fn):
        self.name, self._fn = name, fn

    def witness(self, operator, eps):
        return self._fn(operator.A, eps)


class _LowerTest:
    def __init__(self, name, fn):
        self.name, self._fn = name, fn

    def certify(self, operator, eps):
        return self._fn(operator.A, eps)


def _tsvd(A, eps):
    t = up_.TruncatedSVD(A, _svd(A))
    k = t.least_rank(eps)
    return None if k is None else t.witness(eps, k)


def _refit_on(basis, method):
    def run(A, eps):
        con = up_.L1Refit(A, basis(A), method=method)
        k = con.least_rank(eps, 1, min(A.shape))
        return None if k is None else con.witness(eps, k)
    return run


def _alternating(A, eps):
    con = up_.AlternatingL1(A, _svd(A))
    k = con.least_rank(eps, 1, min(A.shape))
    return None if k is None else con.witness(eps, k)


def _hybrid(A, eps):
    out = up_.Hybrid(A).least_rank(eps, 1, min(A.shape))
    return None if out is None else out[1]


def _frobenius(A, eps):
    return lo_.frobenius(A, eps, lo_.row_order(A), {})


def _pinv(A, eps):
    return lo_.truncated_pseudoinverse(A, eps, _svd(A), min(A.shape))


def _decoder(A, eps):
    import scipy.linalg

    _, _, piv = scipy.linalg.qr(A, mode="economic", pivoting=True)
    dec = lo_.LPDecoder(A, [np.array([j]) for j in piv], "singletons")
    return dec.best(eps, 1, min(A.shape))


def _subspace(A, eps):
    search = lo_.SubspaceSearch(A, _svd(A)[2].T, "svd")
    c = search.best(eps, 1, min(A.shape))
    if c is None:
        return None
    g = search.extend(eps, c)
    return g if g is not None and g.rank > c.rank else c


#: name -> function (A, eps) -> UpperWitness | None
CONSTRUCTIONS = {
    "truncated-svd": _tsvd,
    "l1-refit": _refit_on(lambda A: _svd(A)[2], "l1-refit"),
    "row-basis": _refit_on(lambda A: A[lo_.row_order(A)], "row-basis"),
    "alternating-l1": _alternating,
    "key-support": up_.key_support,
    "hybrid": _hybrid,
    "identity": up_.identity_witness,
}

#: name -> function (A, eps) -> lower certificate | None
LOWER_TESTS = {
    "trivial": lo_.trivial,
    "frobenius": _frobenius,
    "key-groups": lo_.key_groups,
    "truncated-pseudoinverse": _pinv,
    "lp-decoder": _decoder,
    "subspace": _subspace,
}


def builtin(name: str) -> Certifier:
    """``builtin:NAME``: one construction or lower test by name.

    Raises
    ------
    InvalidArgumentError
        If ``name`` is not one of :data:`CONSTRUCTIONS` or :data:`LOWER_TESTS`.
    """
    if name in CONSTRUCTIONS:
        return as_certifier(_Construction(name, CONSTRUCTIONS[name]), f"builtin:{name}", name)
    if name in LOWER_TESTS:
        return as_certifier(_LowerTest(name, LOWER_TESTS[name]), f"builtin:{name}", name)
    raise InvalidArgumentError(
        f"--softrank-certifier: unknown built-in {name!r}; expected 'all' or one of "
        f"{sorted(CONSTRUCTIONS) + sorted(LOWER_TESTS)}")


def builtin_certifiers() -> list[Certifier]:
    """Every built-in construction and lower test (the plugin's default set)."""
    return [builtin(n) for n in list(CONSTRUCTIONS) + list(LOWER_TESTS)]


_CACHE: dict = {}


def reference_bracket(operator, eps: float):
    """softrank's full bracket of ``operator`` at ``eps`` (cached; both ends checked)."""
    from ..certifiers.bracket import bracket

    key = (operator.hash, float(eps))
    br = _CACHE.get(key)
    if br is None:
        if len(_CACHE) > 512:
            _CACHE.clear()
        br = _CACHE[key] = bracket(operator.A, float(eps))
    return br

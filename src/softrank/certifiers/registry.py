"""softrank's own methods behind the one interface (:mod:`softrank.certifiers.interface`).

:data:`LOWER_TESTS` and :data:`CONSTRUCTIONS` are the registries that :func:`softrank.bracket`
runs, in order; :data:`REFERENCE` holds the reference constructions users measure their own
against (:mod:`softrank.certifiers.reference`). The suites (``builtin:NAME``), the audit and
the attacks take their built-in methods from here.

Run inside a bracket, each built-in reads the operator's shared work from the
:class:`~softrank.certifiers.interface.Context` (one SVD, per-rank l1 fits, LP caches) and a
*search* looks only for ranks that would improve the ends found before it: a lower test
above ``context.lower``, a construction in ``context.window()``. Called without a context
(the suites), each builds its own and searches its whole range.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.linalg

from ..errors import InvalidArgumentError
from . import lower as lo_
from . import upper as up_
from .climbs import BLOCK_MIN_ROWS, BLOCK_ROWS, SubspaceBlocksTest, SubspaceClimbTest
from .interface import Certifier, Context, Traits, as_certifier, load_object, parse_spec

__all__ = ["CONSTRUCTIONS", "LOWER_TESTS", "REFERENCE", "TRAITS", "CERTIFICATE_METHODS",
           "SubspaceClimbTest", "SubspaceBlocksTest", "BLOCK_ROWS", "BLOCK_MIN_ROWS",
           "extra_methods", "check_unique_names", "builtin", "builtin_certifiers",
           "default_constructions", "default_lower_tests", "load_certifier",
           "load_certifiers"]


def _ctx(operator, context: Context | None) -> Context:
    return context if context is not None else Context(operator.A)


def _until_deadline(ctx: Context, search):
    """``search(stop)`` with the context's deadline as a :class:`~softrank.certifiers.upper.Deadline`;
    a search that foresaw it marks the context (``Context.foreseen``)."""
    stop = up_.Deadline(ctx.deadline)
    out = search(stop)
    ctx.foreseen |= stop.foreseen
    return out


# ---------------------------------------------------------------- constructions (docs/theory/witnesses.md)

class TruncatedSVDConstruction:
    """Top-``k`` singular triplets at the least ``k`` within ``eps`` (every rank's error from
    one SVD; :class:`~softrank.certifiers.upper.TruncatedSVD`)."""

    name = "truncated-svd"

    def witness(self, operator, eps, context=None):
        ctx = _ctx(operator, context)
        t = ctx.shared("tsvd", lambda: up_.TruncatedSVD(ctx.A, ctx.svd))
        # up to min(m, N) itself (the window stops below it: the identity witness has it)
        lo, _ = ctx.window()
        return t.least_rank(eps, lo, min(ctx.upper, ctx.p + 1) - 1)


class KeySupportConstruction:
    """Greedy key cover (:func:`~softrank.certifiers.upper.key_support`)."""

    name = "key-support"

    def witness(self, operator, eps, context=None):
        return up_.key_support(_ctx(operator, context).A, eps)


class _WindowSearch:
    """A construction that searches the least rank in ``context.window()``."""

    name = ""

    def _con(self, ctx: Context):
        raise NotImplementedError

    def witness(self, operator, eps, context=None):
        ctx = _ctx(operator, context)
        return _until_deadline(
            ctx, lambda stop: self._con(ctx).least_rank(eps, *ctx.window(), stop=stop))


class L1RefitConstruction(_WindowSearch):
    """Top right singular vectors as ``W``, each row of ``U`` by an l1 regression."""

    name = "l1-refit"

    def _con(self, ctx):
        return ctx.shared("l1-refit", lambda: up_.L1Refit(ctx.A, ctx.svd[2]))


class RowBasisConstruction(_WindowSearch):
    """Rows of ``A`` in pivoted-QR order as ``W``, each row of ``U`` by an l1 regression."""

    name = "row-basis"

    def _con(self, ctx):
        return ctx.shared("row-basis", lambda: up_.L1Refit(
            ctx.A, ctx.A[ctx.shared("row-order", lambda: lo_.row_order(ctx.A))],
            method="row-basis"))


class AlternatingL1Construction(_WindowSearch):
    """Both factors by reweighted least squares, rows polished by exact l1 regressions."""

    name = "alternating-l1"
    delta = 1e-6  # the floor of |residual| in the IRLS weights
    delta_start = None  # with it, the floor is annealed from delta_start down to delta
    delta_decay = 1.0
    iters = 40  # reweighted least-squares iterations per rank

    def _con(self, ctx):
        return ctx.shared(self.name, lambda: up_.AlternatingL1(
            ctx.A, ctx.svd, iters=self.iters, delta=self.delta, method=self.name,
            delta_start=self.delta_start, delta_decay=self.delta_decay,
            tsvd_errors=ctx.shared("tsvd", lambda: up_.TruncatedSVD(ctx.A, ctx.svd)).errors,
            pace=ctx.shared("irls-pace", dict)))


class HybridConstruction:
    """Heavy (sink) keys exactly plus an l1 refit of the rest; rank adds. Called without a
    context it also tries no heavy key at all (the plain l1 refit), so it answers on every
    operator; in a bracket that option is the l1-refit construction's, which ran first."""

    name = "hybrid"

    def witness(self, operator, eps, context=None):
        ctx = _ctx(operator, context)
        lo, _ = ctx.window()
        # alone (the suites), h = 0 too: without heavy keys hybrid is the l1 refit itself
        hy = ctx.shared("hybrid", lambda: up_.Hybrid(ctx.A, plain=context is None))
        return _until_deadline(
            ctx, lambda stop: hy.least_rank(eps, lo, min(ctx.upper, ctx.p + 1) - 1, stop=stop))


class TrustRegionConstruction:
    """The alternating-l1 factors one rank below the best witness so far, polished by exact
    LPs (:class:`~softrank.certifiers.upper.TrustRegionPolish`), going down while it
    reaches ``eps``. Called without a context (the suites) it starts below the rank of its
    own alternating-l1 search, and answers with that search's witness when no polished rank
    is smaller (the polish with no step)."""

    name = "trust-region"

    def witness(self, operator, eps, context=None):
        ctx = _ctx(operator, context)
        alt = AlternatingL1Construction()._con(ctx)
        tr = ctx.shared("trust-region", lambda: up_.TrustRegionPolish(ctx.A, alt))
        lo, hi = ctx.window()
        start = None
        if context is None:
            start = AlternatingL1Construction().witness(operator, eps, ctx)
            if start is None:
                return None
            hi = start.rank - 1
        w = _until_deadline(ctx, lambda stop: tr.least_rank(eps, lo, hi, stop=stop))
        if w is None and start is not None:
            w = dataclasses.replace(start, method=tr.method)
        return w


class SmoothedAlternatingConstruction(AlternatingL1Construction):
    """The alternating l1 restarted with a smoother l1 majoriser: IRLS weights
    ``1 / max(|residual|, 1e-3)`` instead of ``1e-6`` (fewer rows and entries dominate the
    weights as residuals vanish, so the iterations settle on other factors), then the same
    exact row polish (:class:`~softrank.certifiers.upper.AlternatingL1` with
    ``delta=1e-3``). Late: it runs after every other method of both sides, trust-region
    included (only alternating-l1-anneal runs after it), so it only searches below the best
    witness they found and changes none of their answers (docs/theory/witnesses.md#alternating-l1)."""

    name = "alternating-l1-smooth"
    delta = 1e-3


class AnnealedAlternatingConstruction(AlternatingL1Construction):
    """The alternating l1 restarted with an annealed l1 majoriser: the floor of the IRLS
    weights ``1 / max(|residual|, delta_t)`` starts at ``1e-2`` and shrinks by ``0.8`` per
    iteration down to ``1e-4`` (smooth while the factors move, sharper as they settle),
    for 160 iterations (four times the others'), then the same exact row polish
    (:class:`~softrank.certifiers.upper.AlternatingL1` with ``delta_start=1e-2,
    delta_decay=0.8, delta=1e-4, iters=160``). Late: it runs last, after
    alternating-l1-smooth, and searches only below the best witness so far
    (docs/theory/witnesses.md#alternating-l1)."""

    name = "alternating-l1-anneal"
    delta = 1e-4
    delta_start = 1e-2
    delta_decay = 0.8
    iters = 160


class IdentityConstruction:
    """``B = A`` itself: rank ``min(m, N)``, error 0 (every bracket has an upper end)."""

    name = "identity"

    def witness(self, operator, eps, context=None):
        return up_.identity_witness(_ctx(operator, context).A, eps)


# ---------------------------------------------------------------- lower tests (docs/theory/lower.md)

class TrivialTest:
    """``r_eps >= 1`` when ``||A||_inf > eps``."""

    name = "trivial"

    def certify(self, operator, eps, context=None):
        return lo_.trivial(_ctx(operator, context).A, eps)


class FrobeniusTest:
    """Eckart-Young tail on the whole matrix and on row subsets (shared singular values,
    the whole matrix's from the context's SVD); under a time limit it is asked before each
    subset's SVD."""

    name = "frobenius"

    def certify(self, operator, eps, context=None):
        ctx = _ctx(operator, context)
        return lo_.frobenius(ctx.A, eps, ctx.shared("row-order", lambda: lo_.row_order(ctx.A)),
                             ctx.shared("sv-cache", lambda: {ctx.A.shape[0]: ctx.svd[1]}),
                             stop=ctx.past_deadline)


class KeyGroupsTest:
    """Disjoint key groups with Varah's bound."""

    name = "key-groups"

    def certify(self, operator, eps, context=None):
        return lo_.key_groups(_ctx(operator, context).A, eps)


class TruncatedPseudoinverseTest:
    """Decoded inverse with ``R = V_k``, ``L = S_k^-1 U_k^T``."""

    name = "truncated-pseudoinverse"

    def certify(self, operator, eps, context=None):
        ctx = _ctx(operator, context)
        return lo_.truncated_pseudoinverse(ctx.A, eps, ctx.svd, ctx.p)


class SubspaceTest:
    """Subspace (Bernstein) certificate on the top right singular vectors, searched above
    ``context.lower`` and up to ``context.upper``, then grown by a local search; under a
    time limit every probe asks it before each key LP and each block of its screening, and
    a key LP gets at most the seconds left."""

    name = "subspace"

    def _search(self, ctx: Context) -> lo_.SubspaceSearch:
        return ctx.shared("subspace", lambda: lo_.SubspaceSearch(ctx.A, ctx.svd[2].T, "svd"))

    def certify(self, operator, eps, context=None):
        ctx = _ctx(operator, context)
        sub = self._search(ctx)
        base = max(ctx.lower, 1)
        stop = up_.Deadline(ctx.deadline)
        c = sub.best(eps, base + 1, min(ctx.upper, ctx.p), stop=stop)
        if c is None and not stop():
            c = sub.certificate(base, eps, stop=stop)
        if c is None:
            return None
        g = sub.extend(eps, c, stop=stop)
        return g if g is not None and g.rank > c.rank else c


class RowSubspaceTest(SubspaceTest):
    """Subspace certificate on the span of rows of ``A`` in pivoted-QR order (the first
    ``k`` rows a column-pivoted QR of ``A^T`` picks), searched above ``context.lower``,
    then grown by the local search: the row starts of docs/theory/exact.md."""

    name = "subspace-rows"

    def _search(self, ctx: Context) -> lo_.SubspaceSearch:
        def make():
            order = ctx.shared("row-order", lambda: lo_.row_order(ctx.A))
            Q, _ = np.linalg.qr(ctx.A[order].T)  # (N, min(m, N)): nested spans of the rows
            # past the numerical rank of A the spans take in directions outside its row
            # space, where no subspace can certify (A x = 0 there): leave them out
            s = ctx.svd[1]
            r = int(np.count_nonzero(s > s[0] * max(ctx.A.shape) * np.finfo(float).eps))
            return lo_.SubspaceSearch(ctx.A, Q[:, :max(r, 1)], "rows")

        return ctx.shared("subspace-rows", make)


#: Key-block widths of the LP decoders the engine runs. Single keys (width 1, in pivoted-QR
#: order) are no longer run: that decoder answered no cell of the default panel (537 cells)
#: nor of benchmarks/small_heads.toml (288 cells), for 10 s of the default panel's 3,269 s
#: of methods (docs/benchmarks.md); widths 2 and 4 answered 1 and 4 small-heads cells and 0
#: and 3 default-panel cells.
DECODER_WIDTHS = (2, 4)


def _decoders(ctx: Context) -> dict:
    """LP decoders of one operator: contiguous blocks of each width of
    :data:`DECODER_WIDTHS` in the pivoted-QR order of their column sums."""
    A = ctx.A
    N = A.shape[1]
    out = {}
    for w in DECODER_WIDTHS:
        if w < N:
            groups = [np.arange(a, min(a + w, N)) for a in range(0, N, w)]
            AG = np.stack([A[:, g].sum(axis=1) for g in groups], axis=1)
            _, _, gpiv = scipy.linalg.qr(AG, mode="economic", pivoting=True)
            out[w] = lo_.LPDecoder(A, [groups[i] for i in gpiv], f"blocks(w={w})")
    return out


class LPDecoderTest:
    """Decoded inverse with contiguous key blocks of ``width`` (one of
    :data:`DECODER_WIDTHS`) as ``R`` and ``L`` by basis-pursuit LPs, searched above
    ``context.lower`` (declines when ``width >= N``)."""

    def __init__(self, width: int):
        self.width = width
        self.name = f"lp-decoder-blocks{width}"

    def certify(self, operator, eps, context=None):
        ctx = _ctx(operator, context)
        dec = ctx.shared("decoders", lambda: _decoders(ctx)).get(self.width)
        if dec is None:
            return None
        return dec.best(eps, max(ctx.lower, 1) + 1, min(ctx.upper, ctx.p))


def _reference():
    from . import reference

    return [reference.NystromLandmarks(), reference.PositiveRandomFeatures(),
            reference.SinksPlusRandomFeatures()]


#: Built-in constructions in the order the engine runs them (cheapest first; the searches
#: after them try only ranks below the best end found so far), except that those marked
#: ``late`` (trust-region, alternating-l1-smooth, then alternating-l1-anneal) run after
#: every other method of both sides (:func:`softrank.certifiers.bracket.bracket`).
CONSTRUCTIONS = {c.name: c for c in (
    TruncatedSVDConstruction(), KeySupportConstruction(), L1RefitConstruction(),
    RowBasisConstruction(), AlternatingL1Construction(), HybridConstruction(),
    TrustRegionConstruction(), SmoothedAlternatingConstruction(),
    AnnealedAlternatingConstruction(), IdentityConstruction())}

#: Built-in lower tests in the order the engine runs them.
LOWER_TESTS = {t.name: t for t in (
    TrivialTest(), FrobeniusTest(), KeyGroupsTest(), TruncatedPseudoinverseTest(),
    SubspaceTest(), *(LPDecoderTest(w) for w in DECODER_WIDTHS),
    RowSubspaceTest(), SubspaceClimbTest(), SubspaceBlocksTest())}

#: Reference constructions (Nystrom landmarks, positive random features, sinks plus random
#: features): they need ``Q``, ``K``, ``beta``, decline without them, and search their own
#: least rank; run by every bracket beside the built-ins.
REFERENCE = {c.name: c for c in _reference()}

_ONLY_A = Traits(gauge_invariant=True)  # reads only A: a gauge of the factors changes nothing
#: How the engine schedules each of softrank's methods
#: (:class:`~softrank.certifiers.interface.Traits`), by name: declared here, once, for every
#: entry of
#: :data:`CONSTRUCTIONS`, :data:`LOWER_TESTS` and :data:`REFERENCE`. The built-ins read only
#: ``A`` (gauge invariant); ``late`` ones run after every other method of both sides,
#: ``always`` ones past a time limit too, ``searches`` constructions only below the best
#: witness so far. Of the reference constructions only Nystrom's landmarks (chosen and
#: fitted on ``A``) claim gauge invariance; random features of the rows of ``Q`` and ``K``
#: move with the gauge.
TRAITS = {
    "truncated-svd": _ONLY_A,  # always run: its rank is the engine's first upper end
    "key-support": _ONLY_A,
    "l1-refit": Traits(searches=True, gauge_invariant=True),
    "row-basis": Traits(searches=True, gauge_invariant=True),
    "alternating-l1": Traits(searches=True, gauge_invariant=True),
    "hybrid": Traits(searches=True, gauge_invariant=True),
    "trust-region": Traits(late=True, searches=True, gauge_invariant=True),
    "alternating-l1-smooth": Traits(late=True, searches=True, gauge_invariant=True),
    "alternating-l1-anneal": Traits(late=True, searches=True, gauge_invariant=True),
    "identity": Traits(always=True, gauge_invariant=True),  # O(m N): an upper end always
    "trivial": Traits(always=True, gauge_invariant=True),  # O(m N): a lower end always
    "frobenius": _ONLY_A,
    "key-groups": _ONLY_A,
    "truncated-pseudoinverse": _ONLY_A,
    "subspace": _ONLY_A,
    "lp-decoder-blocks2": _ONLY_A,
    "lp-decoder-blocks4": _ONLY_A,
    "subspace-rows": Traits(late=True, gauge_invariant=True, asks_limit=True),
    "subspace-climb": Traits(late=True, gauge_invariant=True, asks_limit=True),
    "subspace-blocks": Traits(late=True, gauge_invariant=True, asks_limit=True),
    "nystrom": Traits(gauge_invariant=True),
    "random-features": Traits(),
    "sinks+random-features": Traits(),
}


#: The ``method`` each of softrank's methods writes into its certificates (the certificate
#: file's header), as a regular expression, by the method's name: what a stored bracket's
#: certificate must carry for the method its diagnostics credit with that end
#: (docs/store.md). An end carried from another tolerance adds `` (from eps X)`` once per
#: carry (:func:`softrank.certifiers.bracket.monotone`). The value is not rendered in the
#: API pages (its backslashes would read as TeX there); the source has it.
#:
#: :meta hide-value:
CERTIFICATE_METHODS = {
    "truncated-svd": r"truncated-svd",
    "key-support": r"key-support",
    "l1-refit": r"l1-refit",
    "row-basis": r"row-basis",
    "alternating-l1": r"alternating-l1",
    "hybrid": r"hybrid",
    "trust-region": r"trust-region",
    "alternating-l1-smooth": r"alternating-l1-smooth",
    "alternating-l1-anneal": r"alternating-l1-anneal",
    "identity": r"identity",
    "trivial": r"trivial",
    "frobenius": r"frobenius\(rows=[0-9]+\)",
    "key-groups": r"key-groups/[a-z-]+(\([a-z]+=[0-9.e+-]+(,[a-z]+=[0-9.e+-]+)*\))?",
    "truncated-pseudoinverse": r"truncated-pseudoinverse",
    "subspace": r"subspace/svd(\+local)*",
    "lp-decoder-blocks2": r"lp-decoder/blocks\(w=2\)",
    "lp-decoder-blocks4": r"lp-decoder/blocks\(w=4\)",
    "subspace-rows": r"subspace/rows(\+local)*",
    "subspace-climb": r"subspace/[A-Za-z0-9._-]{1,40}\+climb",
    "subspace-blocks": (r"block\(rows=[0-9]+,keys=[0-9]+\)/subspace/[A-Za-z0-9._-]{1,40}"
                        r"(\+climb)?"),
    "nystrom": r"nystrom",
    "random-features": r"random-features",
    "sinks+random-features": r"sinks\+random-features",
}


def _wrapped(name: str, obj, origin: str) -> Certifier:
    """One of softrank's methods as a :class:`Certifier`, with its declared traits."""
    return as_certifier(obj, f"builtin:{name}", name, origin, traits=TRAITS[name])


def default_constructions() -> list[Certifier]:
    """The built-in constructions, then the reference ones, as :class:`Certifier` values."""
    return ([_wrapped(n, c, "builtin") for n, c in CONSTRUCTIONS.items()]
            + [_wrapped(n, c, "reference") for n, c in REFERENCE.items()])


def default_lower_tests() -> list[Certifier]:
    """The built-in lower tests as :class:`Certifier` values."""
    return [_wrapped(n, t, "builtin") for n, t in LOWER_TESTS.items()]


def builtin(name: str, arg: str = "--softrank-certifier") -> Certifier:
    """``builtin:NAME``: one construction (built-in or reference) or lower test by name.

    Raises
    ------
    InvalidArgumentError
        If ``name`` is not a key of :data:`CONSTRUCTIONS`, :data:`REFERENCE` or
        :data:`LOWER_TESTS`.
    """
    for table, origin in ((CONSTRUCTIONS, "builtin"), (REFERENCE, "reference"),
                          (LOWER_TESTS, "builtin")):
        if name in table:
            return _wrapped(name, table[name], origin)
    raise InvalidArgumentError(
        f"{arg}: unknown built-in {name!r}; expected 'all', 'own', 'reference' or one of "
        f"{sorted(CONSTRUCTIONS) + sorted(REFERENCE) + sorted(LOWER_TESTS)}")


def builtin_certifiers(which: str = "all") -> list[Certifier]:
    """softrank's certifiers as the suites select them.

    Parameters
    ----------
    which : {"all", "own", "reference"}
        ``own``: softrank's constructions and lower tests (``builtin:own``, the suites'
        default); ``reference``: the reference constructions (``builtin:reference``);
        ``all``: both (``builtin:all``).

    Raises
    ------
    InvalidArgumentError
        On another ``which``.
    """
    if which not in ("all", "own", "reference"):
        raise InvalidArgumentError(f"which: expected 'all', 'own' or 'reference', got {which!r}")
    cons = default_constructions()
    if which == "reference":
        return [c for c in cons if c.origin == "reference"]
    if which == "own":
        cons = [c for c in cons if c.origin == "builtin"]
    return cons + default_lower_tests()

def load_certifier(spec: str, arg: str = "--softrank-certifier") -> Certifier:
    """Load ``MODULE:OBJECT`` (or ``builtin:NAME``, see :mod:`softrank.certifiers.registry`).

    Raises
    ------
    InvalidArgumentError
        If ``spec`` is malformed, the module cannot be imported or has no such object, or the
        object follows neither protocol. The message names ``arg``.
    """
    module, attr = parse_spec(spec, arg)
    if module == "builtin":
        return builtin(attr, arg)
    return as_certifier(load_object(spec, arg), spec)


_LOADED: dict = {}


def load_certifiers(specs) -> tuple[list, list]:
    """``(constructions, lower_tests)`` of the ``MODULE:OBJECT`` specs (loaded once per
    process: workers load them by name).

    Raises
    ------
    InvalidArgumentError
        A malformed spec, one that cannot be loaded, a ``builtin:`` spec (every audit runs
        the built-ins already), or two certifiers with one name.
    """
    cons, tests, names = [], [], {}
    for spec in specs:
        if isinstance(spec, str) and spec.startswith("builtin:"):
            raise InvalidArgumentError(f"--certifier {spec!r}: the built-in methods run in every "
                                       "audit already; give a third-party MODULE:OBJECT")
        c = _LOADED.get(spec)
        if c is None:
            c = _LOADED[spec] = load_certifier(spec, "--certifier")
        if c.name in CONSTRUCTIONS or c.name in REFERENCE or c.name in LOWER_TESTS:
            raise InvalidArgumentError(f"--certifier {spec!r}: its name {c.name!r} is a built-in "
                                       "method's; give it another 'name' attribute")
        if c.name in names:
            raise InvalidArgumentError(f"--certifier {spec!r}: its name {c.name!r} is also the "
                                       f"name of {names[c.name]!r}; names must differ")
        names[c.name] = spec
        if c.is_construction:
            cons.append(c)
        if c.is_lower_test:
            tests.append(c)
    return cons, tests


def extra_methods(items, side: str) -> list[Certifier]:
    """Extra constructions (``side="upper"``) or lower tests (``"lower"``) as certifiers:
    objects, classes, :class:`~softrank.certifiers.interface.Certifier` values or
    ``MODULE:OBJECT`` strings (:func:`softrank.bracket`'s ``constructions`` and
    ``lower_tests``).

    Raises
    ------
    InvalidArgumentError
        Not a list, or a method without its side's protocol method.
    """
    arg = "constructions" if side == "upper" else "lower_tests"
    if items is None:
        return []
    if isinstance(items, (str, bytes)) or not isinstance(items, (list, tuple)):
        raise InvalidArgumentError(f"{arg}: expected a list of certifiers, got {items!r}")
    out = []
    for it in items:
        c = load_certifier(it, arg) if isinstance(it, str) else as_certifier(it)
        if side == "upper" and not c.is_construction:
            raise InvalidArgumentError(f"{arg}: {c.name!r} has no witness(operator, eps) method")
        if side == "lower" and not c.is_lower_test:
            raise InvalidArgumentError(f"{arg}: {c.name!r} has no certify(operator, eps) method")
        out.append(c)
    return out


def check_unique_names(methods: list[Certifier], side: str) -> None:
    """Refuse two methods of one side with the same name (every method is credited by name).

    Raises
    ------
    InvalidArgumentError
        Naming the two and the argument of the side (``constructions`` or ``lower_tests``).
    """
    seen: dict = {}
    for c in methods:
        if c.name in seen:
            raise InvalidArgumentError(
                f"{'constructions' if side == 'upper' else 'lower_tests'}: two methods are named "
                f"{c.name!r} ({seen[c.name] or 'built-in'} and {c.spec or c.obj!r}); every "
                "method is credited by name, so names must differ (set a 'name' attribute)")
        seen[c.name] = c.spec

"""The one certifier interface: constructions and lower tests, built-in or brought by a user.

Every method that :func:`softrank.bracket` runs -- softrank's own, the reference
constructions of :mod:`softrank.certifiers.reference` and any third-party one -- follows one
of two signatures:

``witness(operator, eps[, context]) -> UpperWitness | (U, W) | None``  -- a **construction**
    ``operator`` is a :class:`softrank.Operator` (``operator.A`` is the ``(m, N)`` float64
    row-stochastic matrix; ``operator.Q``, ``operator.K``, ``operator.beta`` the factors
    when known, else None); ``eps`` a float in ``(0, 1)``. Return factors ``U (m, k)`` and
    ``W (k, N)`` (float64-convertible, finite) claiming ``||A - U W||_inf <= eps``, hence
    ``r_eps(A) <= k``, or an :class:`~softrank.checker.UpperWitness`. Return None to
    decline (no witness at this tolerance); raising is a failure.

``certify(operator, eps[, context]) -> certificate | None``  -- a **lower test**
    Return a lower certificate from :mod:`softrank.checker.certificates` (trivial,
    frobenius, key-groups, decoded, subspace) issued at this ``eps``, claiming
    ``r_eps(A) >= certificate.rank``; the checker must accept it in float64 and in interval
    arithmetic. Return None to decline; raising is a failure.

``witness_at_rank(operator, k[, context]) -> UpperWitness | (U, W) | None``  -- optional
    A construction may also offer its witness at a given rank ``k >= 1`` (``U (m, j)``,
    ``W (j, N)`` with ``j <= k``), whatever its error: :func:`softrank.certifiers.frontier.frontier`
    measures the checked error at each rank and draws the construction's curve against the
    certified band (docs/theory/frontier.md). Return None to decline a rank.

``context`` is optional: a method whose signature has a ``context`` parameter receives the
:class:`Context` of the running bracket (the operator's shared SVD and other cached work, and
the ends found so far at this tolerance); one without it is called with two arguments. An
optional ``name`` attribute names the method in diagnostics, reports and test ids.

What the engine does with each answer (:mod:`softrank.certifiers.bracket`): every witness and
every certificate is checked in float64 with rigorous rounding bounds; the strongest that
also passes the interval cross-check becomes the reported end, credited by name. One that the
checker rejects is recorded as ``rejected`` against its method and never reported.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from ..checker import LowerCertificate, UpperWitness
from ..errors import CertifierError, InvalidArgumentError

__all__ = [
    "Construction", "LowerTest", "Context", "Certifier", "Traits", "CertifierError", "MethodRecord",
    "Diagnostics", "Status", "Verdict", "Origin", "as_certifier", "import_module", "load_object",
    "parse_spec", "instantiate",
]

#: What became of one method at one tolerance.
#:
#: ``ok`` -- it returned a witness or certificate that the float64 checker accepted;
#: ``declined`` -- it returned None; ``skipped`` -- not run, because the ends found before it
#: already leave it nothing to improve (built-in searches only) or the time limit had passed
#: (its message says which); ``failed`` -- it raised or
#: broke the protocol (never a bound); ``rejected`` -- the checker refused what it returned.
Status = Literal["ok", "declined", "skipped", "failed", "rejected"]
#: A cell's verdict (see :class:`softrank.certifiers.result.Bracket`).
Verdict = Literal["resolved", "open", "unsound", "error"]
#: Where a method comes from: softrank's engine, the reference constructions users compare
#: themselves with, or a user.
Origin = Literal["builtin", "reference", "third-party"]


@runtime_checkable
class Construction(Protocol):
    """Anything with ``witness(operator, eps[, context])`` (see the module docstring)."""

    def witness(self, operator, eps: float): ...


@runtime_checkable
class LowerTest(Protocol):
    """Anything with ``certify(operator, eps[, context])`` (see the module docstring)."""

    def certify(self, operator, eps: float): ...


class Context:
    """Work shared by the methods of one :func:`softrank.bracket` call on one operator.

    Attributes
    ----------
    A : (m, N) float64 ndarray
        The matrix being bracketed (the enclosure's midpoint in validated mode).
    p : int
        ``min(m, N)``: every bracket has ``upper <= p``.
    lower : int
        The largest lower rank found so far at the current tolerance (on the lower side:
        before checking; on the upper side: the checked, reported lower end). 0 if none.
    upper : int
        The least witness rank found so far at the current tolerance; ``p + 1`` if none.
        A built-in search looks for ranks in ``[max(lower, 1), min(upper, p) - 1]`` only.
    deadline : float or None
        The ``time.perf_counter()`` reading past which the current tolerance's time limit
        has run out (None: no limit). The searches that probe rank after rank ask
        :meth:`past_deadline` before each probe and stop there with what they have proved.
    foreseen : bool
        Set by a built-in search that stopped before ``deadline`` because the rest of its
        work would have ended past it (:meth:`softrank.certifiers.upper.Deadline.foresee`);
        cleared before each method runs. The bracket records that method as cut by the
        limit.
    """

    def __init__(self, A: np.ndarray):
        self.A = A
        self.p = int(min(A.shape))
        self.lower = 0
        self.upper = self.p + 1
        self.deadline: float | None = None
        self.foreseen = False
        self._cache: dict = {}

    def past_deadline(self) -> bool:
        """True once the current tolerance's time limit has run out (never without one)."""
        return self.deadline is not None and time.perf_counter() > self.deadline

    def shared(self, key: str, make):
        """The value cached under ``key``, made by ``make()`` on first use."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    @property
    def svd(self):
        """``(U, s, Vt)``: the thin SVD of ``A``, computed once."""
        return self.shared("svd", lambda: np.linalg.svd(self.A, full_matrices=False))

    def window(self) -> tuple[int, int]:
        """``(lo, hi)``: the ranks a witness search still needs to try."""
        return max(self.lower, 1), min(self.upper, self.p) - 1


@dataclass
class MethodRecord:
    """One method's outcome at one tolerance.

    Attributes
    ----------
    name : str
    side : {"lower", "upper"}
    origin : {"builtin", "reference", "third-party"}
    status : Status
    rank : int or None
        Rank of the witness or certificate returned (also when rejected); None otherwise.
    seconds : float
        Wall time of the method's call (the float64 check of its answer is not included).
    message : str
        Why it failed or was rejected.
    """

    name: str
    side: Literal["lower", "upper"]
    origin: Origin
    status: Status
    rank: int | None = None
    seconds: float = 0.0
    message: str = ""

    def to_dict(self) -> dict:
        d = {"name": self.name, "side": self.side, "origin": self.origin, "status": self.status,
             "rank": self.rank, "seconds": round(self.seconds, 4)}
        if self.message:
            d["message"] = self.message
        return d


@dataclass
class Diagnostics:
    """What happened inside one bracket: every method's record and the engine's notes.

    Attributes
    ----------
    methods : list of MethodRecord
        In the order run (lower side, then upper side).
    checker_disagreements : int
        Candidates that the float64 check accepted and the interval check refused.
    carried : dict
        ``{"lower": eps, "upper": eps}``: an end carried from another tolerance (brackets
        are monotone in ``eps``).
    error : str
        Why the cell has no bracket (set-up failure, time limit, crash); empty otherwise.
    reported : dict
        ``{"lower": name, "upper": name}``: the methods whose answers are the reported ends
        (for an end carried from another tolerance, the method that made it there).
    cut_short : bool
        The time limit passed before every method had run: the ends are the best checked
        ones of the methods that ran (``skipped`` records name the others).
    reference : dict
        Empty unless a reference store was used (:func:`softrank.bracket`'s ``store``):
        ``source`` (``"store"``: softrank's own bracket read back and checked again;
        ``"computed"``: computed in this run), ``check_seconds`` (wall time of reading and
        checking a stored one) and ``refused`` (why a stored entry was not used).
    """

    methods: list = field(default_factory=list)
    checker_disagreements: int = 0
    carried: dict = field(default_factory=dict)
    error: str = ""
    reported: dict = field(default_factory=dict)
    cut_short: bool = False
    reference: dict = field(default_factory=dict)

    def record(self, name: str) -> MethodRecord | None:
        """The record of method ``name`` (the last one if it ran twice), or None."""
        for r in reversed(self.methods):
            if r.name == name:
                return r
        return None

    def ranks(self, side: str) -> dict:
        """``{name: rank}`` of the methods of ``side`` whose answer the checker accepted."""
        return {r.name: r.rank for r in self.methods if r.side == side and r.status == "ok"}

    @property
    def failures(self) -> list[str]:
        return [f"{r.name}: {r.message}" for r in self.methods if r.status == "failed"]

    @property
    def rejected(self) -> list[str]:
        return [r.name for r in self.methods if r.status == "rejected"]

    def to_dict(self) -> dict:
        return {"methods": [r.to_dict() for r in self.methods],
                "checker_disagreements": self.checker_disagreements,
                "carried": dict(self.carried), "error": self.error,
                "reported": dict(self.reported), "cut_short": self.cut_short,
                **({"reference": dict(self.reference)} if self.reference else {})}

    @classmethod
    def from_dict(cls, d: dict) -> "Diagnostics":
        return cls(methods=[MethodRecord(**m) for m in d.get("methods", [])],
                   checker_disagreements=int(d.get("checker_disagreements", 0)),
                   carried=dict(d.get("carried", {})), error=str(d.get("error", "")),
                   reported=dict(d.get("reported", {})), cut_short=bool(d.get("cut_short")),
                   reference=dict(d.get("reference", {})))


def _accepts_context(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "context" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


_LOWER_TYPES: tuple | None = None


def _lower_types() -> tuple:
    global _LOWER_TYPES
    if _LOWER_TYPES is None:
        from ..checker import certificates as C

        _LOWER_TYPES = (C.TrivialCertificate, C.FrobeniusCertificate, C.KeyGroupCertificate,
                        C.DecodedInverseCertificate, C.SubspaceCertificate,
                        C.BlockCertificate)
    return _LOWER_TYPES


@dataclass(frozen=True)
class Traits:
    """How the engine schedules a method and what it claims, declared once where the method
    is registered (:mod:`softrank.certifiers.registry` for softrank's own; for a third-party
    method, its ``gauge_invariant`` attribute read by :func:`as_certifier`).

    Attributes
    ----------
    late : bool
        A built-in search that runs after every other method of both sides, so that the
        others see the ends they would see without it (``--effort fast`` skips it). A late
        lower test is skipped when the lower end already reaches the best witness so far
        (message ``the ends cannot move``).
    always : bool
        A built-in method of cost ``O(m N)`` that runs past a time limit too, so that every
        bracket has both ends (``trivial``, ``identity``).
    searches : bool
        A built-in construction that only looks for ranks below the best witness so far:
        skipped when the lower end already reaches the upper (message ``the ends cannot
        move``, with both ends).
    gauge_invariant : bool
        Claims that its rank does not change under a gauge of the factors (the suites test
        the claim; docs/suites.md).
    asks_limit : bool
        A late built-in lower test that asks the time limit inside its probes, so that it
        runs in the share of the limit kept for the late searches (every late one of
        softrank's; :data:`~softrank.certifiers.bracket.LATE_LOWER_SHARE`); others are
        skipped there.
    """

    late: bool = False
    always: bool = False
    searches: bool = False
    gauge_invariant: bool = False
    asks_limit: bool = False


@dataclass(frozen=True)
class Certifier:
    """A construction or lower test with protocol checks around its calls.

    Attributes
    ----------
    name : str
        Its name in diagnostics, reports and test ids.
    obj : object
        The object that implements ``witness`` and/or ``certify``.
    spec : str
        Where it came from (``MODULE:OBJECT``, ``builtin:NAME``), or empty.
    origin : {"builtin", "reference", "third-party"}
    traits : Traits
        How the engine schedules it (the engine honours ``late``, ``always`` and
        ``searches`` for built-in methods only) and whether it claims gauge invariance.
    """

    name: str
    obj: Any
    spec: str
    origin: Origin = "third-party"
    traits: Traits = Traits()

    @property
    def is_construction(self) -> bool:
        return callable(getattr(self.obj, "witness", None))

    @property
    def is_lower_test(self) -> bool:
        return callable(getattr(self.obj, "certify", None))

    @property
    def gauge_invariant(self) -> bool:
        """Whether it *claims* gauge invariance (``traits.gauge_invariant``: a third-party
        object's ``gauge_invariant`` attribute, ``False`` (no claim) when absent). Claimed,
        the suites fail it when a gauge moves its rank beyond the margin; not claimed, they
        report the movement (docs/suites.md)."""
        return self.traits.gauge_invariant

    def _call(self, method: str, operator, eps: float, context: Context | None,
              arg: str = "eps"):
        """Call ``obj.method``. A third-party method gets a private copy of ``operator``, and a
        change to the copy (writing into ``operator.A`` or the factors) is a failure."""
        fn = getattr(self.obj, method)
        op = _copy(operator) if self.origin == "third-party" else operator
        try:
            out = fn(op, eps, context=context) if _accepts_context(fn) else fn(op, eps)
        except Exception as exc:
            tb = "".join(traceback.format_exception(exc)[-6:])
            raise CertifierError(f"{self.name}: {method}(operator {operator.A.shape}, {arg}={eps!r}) "
                                 f"raised {type(exc).__name__}: {exc}\n{tb}", kind="raised") from exc
        if op is not operator:
            for name in ("A", "Q", "K"):
                a, b = getattr(operator, name), getattr(op, name)
                if a is not None and not np.array_equal(a, b):
                    raise CertifierError(f"{self.name}: {method} modified operator.{name} in place",
                                         kind="mutated-input")
        return out

    def witness(self, operator, eps: float, context: Context | None = None) -> UpperWitness | None:
        """Call the construction; validate what it returns.

        Returns
        -------
        UpperWitness or None
            Unchecked: the engine and the suites check it. Its ``method`` is this
            certifier's name.

        Raises
        ------
        CertifierError
            If the construction raised (third-party ones) or returned something that is not
            ``(U, W)`` of shapes ``(m, k)``, ``(k, N)`` with finite real entries.
        """
        out = self._call("witness", operator, eps, context)
        if out is None:
            return None
        if type(out) is UpperWitness and self.origin != "third-party":
            return out
        return self._factors("witness", out, operator.A, eps)

    @property
    def offers_rank(self) -> bool:
        """Whether it is a construction with the optional ``witness_at_rank``."""
        return callable(getattr(self.obj, "witness_at_rank", None))

    def witness_at_rank(self, operator, k: int,
                        context: Context | None = None) -> UpperWitness | None:
        """Call the construction's optional ``witness_at_rank(operator, k[, context])``: its
        witness of rank at most ``k`` whatever its error (the frontier measures the error;
        docs/constructions.md, *Witnesses at a given rank*).

        Returns
        -------
        UpperWitness or None
            Unchecked, issued at ``eps = 1.0`` (the tolerance a rank-0 witness meets: a
            placeholder the frontier replaces by the checked error); its ``method`` is this
            certifier's name. None where it declines or has no ``witness_at_rank``.

        Raises
        ------
        CertifierError
            As :meth:`witness`, and if the factors' inner dimension exceeds ``k``.
        """
        if not self.offers_rank:
            return None
        out = self._call("witness_at_rank", operator, k, context, arg="k")
        if out is None:
            return None
        w = self._factors("witness_at_rank", out, operator.A, 1.0)
        if w.rank > k:
            raise CertifierError(f"{self.name}: witness_at_rank(k={k}) returned factors of rank "
                                 f"{w.rank}")
        return w

    def _factors(self, method: str, out, A: np.ndarray, eps: float) -> UpperWitness:
        """``out`` (an UpperWitness or a pair ``(U, W)``) validated as factors of ``A``."""
        if type(out) is UpperWitness:
            U, W = out.U, out.W
        else:
            try:
                U, W = out
            except Exception as exc:
                raise CertifierError(f"{self.name}: {method} must return (U, W), an "
                                     f"UpperWitness or None, got {type(out).__name__}") from exc
        try:
            cplx = np.iscomplexobj(U) or np.iscomplexobj(W)
            if not cplx:
                U = np.asarray(U, dtype=np.float64)
                W = np.asarray(W, dtype=np.float64)
        except Exception as exc:
            raise CertifierError(f"{self.name}: U, W are not numeric arrays ({exc})") from exc
        if cplx:
            raise CertifierError(f"{self.name}: U, W must be real, got complex factors")
        m, N = A.shape
        if U.ndim != 2 or W.ndim != 2 or U.shape[0] != m or W.shape[1] != N or U.shape[1] != W.shape[0]:
            raise CertifierError(f"{self.name}: expected U (m={m}, k) and W (k, N={N}), got U "
                                 f"{U.shape} and W {W.shape}")
        if not (np.isfinite(U).all() and np.isfinite(W).all()):
            raise CertifierError(f"{self.name}: U or W has a NaN or an infinity")
        return UpperWitness(eps, U, W, self.name)

    def certify(self, operator, eps: float, context: Context | None = None) -> LowerCertificate | None:
        """Call the lower test; validate the type and tolerance of what it returns.

        Raises
        ------
        CertifierError
            If the lower test raised (third-party ones), returned something other than a
            lower certificate of :mod:`softrank.checker.certificates`, or one issued at
            another tolerance.
        """
        cert = self._call("certify", operator, eps, context)
        if cert is None:
            return None
        types = _lower_types()
        if type(cert) not in types:
            raise CertifierError(f"{self.name}: certify must return a lower certificate (one of "
                                 f"{[t.__name__ for t in types]}, not a subclass) or None, "
                                 f"got {type(cert).__module__}.{type(cert).__qualname__}")
        try:
            same = float(cert.eps) == float(eps)
        except (TypeError, ValueError):
            same = False
        if not same:
            raise CertifierError(f"{self.name}: certificate issued at eps={cert.eps!r}, asked for "
                                 f"eps={eps!r}")
        return cert


def _copy(operator):
    """A copy of ``operator`` whose arrays the certifier may do anything with."""
    from ..operators import Operator

    return Operator(A=np.array(operator.A), Q=None if operator.Q is None else np.array(operator.Q),
                    K=None if operator.K is None else np.array(operator.K), beta=operator.beta,
                    family=operator.family, source=operator.source, layer=operator.layer,
                    head=operator.head, block=operator.block, seed=operator.seed,
                    meta=dict(operator.meta), operator_id=operator.operator_id,
                    mask=None if operator.mask is None else np.array(operator.mask))


def import_module(module: str):
    """Import ``module`` by name; like ``python -m``, a module in the current directory is
    importable (the directory is added to ``sys.path`` only if that import succeeds)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        cwd = os.getcwd()
        # like ``python -m``: a module in the current directory is importable
        if exc.name and module.startswith(exc.name) and cwd not in sys.path:
            sys.path.insert(0, cwd)
            try:
                return importlib.import_module(module)
            except Exception:
                sys.path.remove(cwd)  # leave sys.path as it was
                raise
        raise


def instantiate(obj, what: str):
    """``obj()`` when ``obj`` is a class (a method or stage given by its class is instantiated
    without arguments, as a ``MODULE:OBJECT`` spec naming a class is); anything else as given.

    Raises
    ------
    InvalidArgumentError
        Naming ``what`` (the argument and the value), when the class cannot be instantiated.
    """
    if not isinstance(obj, type):
        return obj
    try:
        return obj()
    except Exception as exc:
        raise InvalidArgumentError(f"{what}: the class could not be instantiated without "
                                   f"arguments ({exc})") from exc


def as_certifier(obj, spec: str = "", name: str | None = None,
                 origin: Origin = "third-party", traits: Traits | None = None) -> Certifier:
    """Wrap an object (or a class, instantiated without arguments) as a :class:`Certifier`.

    A :class:`Certifier` is returned as it is. ``traits`` declares how the engine schedules
    the method (the registry passes softrank's own); without it the method's only trait is
    the ``gauge_invariant`` claim of the object (``False`` when absent).

    Raises
    ------
    InvalidArgumentError
        If it has neither ``witness`` nor ``certify``, or the class cannot be instantiated.
    """
    if isinstance(obj, Certifier):
        return obj
    obj = instantiate(obj, f"certifier {spec or obj!r}")
    c = Certifier(name or str(getattr(obj, "name", "") or spec.rpartition(":")[2] or
                             type(obj).__name__), obj, spec, origin)
    if not (c.is_construction or c.is_lower_test):
        raise InvalidArgumentError(f"certifier {spec or obj!r}: expected an object with a "
                                   "witness(operator, eps) or a certify(operator, eps) method")
    if traits is not None:
        return replace(c, traits=traits)
    claim = getattr(obj, "gauge_invariant", False)
    if not isinstance(claim, (bool, np.bool_)):
        raise InvalidArgumentError(f"certifier {spec or c.name!r}: gauge_invariant: expected "
                                   f"True or False, got {claim!r}")
    return replace(c, traits=Traits(gauge_invariant=bool(claim)))


def load_object(spec: str, arg: str):
    """The object named by ``MODULE:OBJECT`` (``OBJECT`` may be dotted); ``arg`` names the
    option in the errors.

    Raises
    ------
    InvalidArgumentError
        If ``spec`` is malformed, the module cannot be imported or has no such attribute.
    """
    module, attr = parse_spec(spec, arg)
    try:
        obj = import_module(module)
    except Exception as exc:
        raise InvalidArgumentError(f"{arg} {spec!r}: cannot import {module!r} "
                                   f"({type(exc).__name__}: {exc})") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InvalidArgumentError(f"{arg} {spec!r}: {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def parse_spec(spec, arg: str = "--certifier") -> tuple[str, str]:
    """``MODULE:OBJECT`` split in two; ``arg`` names the option in the error.

    Raises
    ------
    InvalidArgumentError
        If ``spec`` is not of that form.
    """
    if not isinstance(spec, str) or not re.fullmatch(r"[\w.]+:[\w.+-]+", spec):
        raise InvalidArgumentError(f"{arg}: expected MODULE:OBJECT, got {spec!r}")
    module, _, attr = spec.partition(":")
    return module, attr



"""The protocol a third-party certifier follows to be gated by the suites (SPEC 4, 5, 10).

A certifier is any object (or a class instantiable without arguments) with one or both of:

``witness(operator, eps) -> (U, W) | None``  -- a **construction**
    ``operator`` is a :class:`softrank.Operator` (``operator.A`` is the ``(m, N)`` float64
    row-stochastic matrix; ``operator.Q``, ``operator.K``, ``operator.beta`` the factors
    when known, else None); ``eps`` a float in ``(0, 1)``. Return factors ``U (m, k)`` and
    ``W (k, N)`` (float64-convertible, finite) claiming ``||A - U W||_inf <= eps``, hence
    ``r_eps(A) <= k``; an :class:`~softrank.checker.UpperWitness` is accepted too. Return
    None to decline (no witness at this tolerance); raising is a failure.

``certify(operator, eps) -> certificate | None``  -- a **lower test**
    Return a lower certificate from :mod:`softrank.checker.certificates` (trivial,
    frobenius, key-groups, decoded, subspace) issued at this ``eps``, claiming
    ``r_eps(A) >= certificate.rank``; the checker must accept it in float64 and in interval
    arithmetic. Return None to decline; raising is a failure.

An optional ``name`` attribute labels the certifier in test ids and saved counterexamples.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..checker import LowerCertificate, UpperWitness
from ..errors import InvalidArgumentError, SoftrankError

__all__ = ["Construction", "LowerTest", "Certifier", "CertifierError", "load_certifier",
           "as_certifier"]


@runtime_checkable
class Construction(Protocol):
    def witness(self, operator, eps: float): ...


@runtime_checkable
class LowerTest(Protocol):
    def certify(self, operator, eps: float): ...


class CertifierError(SoftrankError, AssertionError):
    """A certifier broke the protocol (wrong return type or shape, or raised).

    Subclasses ``AssertionError`` so that a suite reports it as a test failure."""


@dataclass(frozen=True)
class Certifier:
    """A loaded certifier with protocol checks around its calls.

    Attributes
    ----------
    name : str
    obj : object
        The user's object.
    spec : str
        Where it came from (``MODULE:OBJECT`` or ``builtin:NAME``).
    """

    name: str
    obj: Any
    spec: str

    @property
    def is_construction(self) -> bool:
        return callable(getattr(self.obj, "witness", None))

    @property
    def is_lower_test(self) -> bool:
        return callable(getattr(self.obj, "certify", None))

    def _call(self, method: str, operator, eps: float):
        """Call ``obj.method`` on a private copy of ``operator``; a change to the copy (a
        certifier writing into ``operator.A`` or the factors) is a failure."""
        copy = _copy(operator)
        try:
            out = getattr(self.obj, method)(copy, eps)
        except Exception as exc:
            tb = "".join(traceback.format_exception(exc)[-6:])
            raise CertifierError(f"{self.name}: {method}(operator {operator.A.shape}, eps={eps!r}) "
                                 f"raised {type(exc).__name__}: {exc}\n{tb}") from exc
        for name in ("A", "Q", "K"):
            a, b = getattr(operator, name), getattr(copy, name)
            if a is not None and not np.array_equal(a, b):
                raise CertifierError(f"{self.name}: {method} modified operator.{name} in place")
        return out

    def witness(self, operator, eps: float) -> UpperWitness | None:
        """Call the construction; validate what it returns (raises :class:`CertifierError`)."""
        A = operator.A
        out = self._call("witness", operator, eps)
        if out is None:
            return None
        if type(out) is UpperWitness:
            U, W = out.U, out.W
        else:
            try:
                U, W = out
            except Exception as exc:
                raise CertifierError(f"{self.name}: witness must return (U, W), an UpperWitness "
                                     f"or None, got {type(out).__name__}") from exc
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

    def certify(self, operator, eps: float) -> LowerCertificate | None:
        """Call the lower test; validate the type and tolerance of what it returns."""
        cert = self._call("certify", operator, eps)
        if cert is None:
            return None
        from ..checker import certificates as C

        lower_types = (C.TrivialCertificate, C.FrobeniusCertificate, C.KeyGroupCertificate,
                       C.DecodedInverseCertificate, C.SubspaceCertificate)
        if type(cert) not in lower_types:
            raise CertifierError(f"{self.name}: certify must return a lower certificate (one of "
                                 f"{[t.__name__ for t in lower_types]}, not a subclass) or None, "
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
                    meta=dict(operator.meta), operator_id=operator.operator_id)


def _import(module: str):
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


def as_certifier(obj, spec: str = "", name: str | None = None) -> Certifier:
    """Wrap an object (or a class, instantiated without arguments) as a :class:`Certifier`.

    Raises
    ------
    InvalidArgumentError
        If it has neither ``witness`` nor ``certify``, or the class cannot be instantiated.
    """
    if isinstance(obj, type):
        try:
            obj = obj()
        except Exception as exc:
            raise InvalidArgumentError(f"certifier {spec or obj!r}: the class could not be "
                                       f"instantiated without arguments ({exc})") from exc
    c = Certifier(name or str(getattr(obj, "name", "") or spec.rpartition(":")[2] or
                             type(obj).__name__), obj, spec)
    if not (c.is_construction or c.is_lower_test):
        raise InvalidArgumentError(f"certifier {spec or obj!r}: expected an object with a "
                                   "witness(operator, eps) or a certify(operator, eps) method")
    return c


def load_certifier(spec: str) -> Certifier:
    """Load ``MODULE:OBJECT`` (or ``builtin:NAME``, see :mod:`softrank.suites.builtin`).

    Raises
    ------
    InvalidArgumentError
        If ``spec`` is malformed, the module cannot be imported or has no such object, or the
        object follows neither protocol.
    """
    if not isinstance(spec, str) or not re.fullmatch(r"[\w.]+:[\w.-]+", spec):
        raise InvalidArgumentError(f"--softrank-certifier: expected MODULE:OBJECT, got {spec!r}")
    module, _, attr = spec.partition(":")
    if module == "builtin":
        from .builtin import builtin

        return builtin(attr)
    try:
        mod = _import(module)
    except Exception as exc:
        raise InvalidArgumentError(f"--softrank-certifier {spec!r}: cannot import {module!r} "
                                   f"({type(exc).__name__}: {exc})") from exc
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InvalidArgumentError(f"--softrank-certifier {spec!r}: {module!r} has no "
                                       f"attribute {attr!r}")
        obj = getattr(obj, part)
    return as_certifier(obj, spec)

"""One error family for softrank.

Every error softrank raises on bad input is a :class:`SoftrankError`; the message names the
argument (or field), its value and what was expected. Every error class of softrank is
defined here (the modules that raise them re-export them where they are used: for instance
:class:`MalformedCertificate` from :mod:`softrank.checker`); the one exception is the
suites' ``SuiteFailure``, a pytest outcome that must derive from pytest's own class.
"""

from __future__ import annotations

__all__ = [
    "SoftrankError",
    "InvalidOperatorError",
    "InvalidArgumentError",
    "CertificateError",
    "MalformedRecord",
    "CheckpointError",
    "PanelError",
    "InvalidFileError",
    "ResourceLimitError",
    "MalformedCertificate",
    "CertifierError",
    "ModelsUnavailable",
    "printable",
]


def printable(text) -> str:
    """``text`` for one line of a message: every control character (a newline, a carriage
    return, the C1 controls, the Unicode line and paragraph separators) written as an escape
    ``\\uXXXX``, so that what a message quotes of an input (a file name, a field of a
    bundle) cannot start a line of its own."""
    import re

    return re.sub("[\x00-\x1f\x7f-\x9f\u2028\u2029]",
                  lambda c: f"\\u{ord(c.group()):04x}", str(text))


class SoftrankError(Exception):
    """Base class of every error softrank raises on purpose."""


class InvalidOperatorError(SoftrankError, ValueError):
    """An attention operator (``A``, ``Q``, ``K``, ``beta``) failed validation (docs/theory/operators.md)."""


class InvalidArgumentError(SoftrankError, ValueError):
    """A function or CLI argument is out of its documented range."""


class CertificateError(SoftrankError, ValueError):
    """A certificate file or object is malformed (not: a certificate that fails the check)."""


class CheckpointError(SoftrankError, OSError):
    """A model checkpoint or tokenizer is missing, unreadable or unsupported."""


class PanelError(SoftrankError, ValueError):
    """A panel (name or TOML file) is unknown or malformed."""


class InvalidFileError(SoftrankError, ValueError):
    """An input file cannot be read as what it should hold (a corrupt archive, a disallowed
    dtype, a header that does not match its data, more data than the memory limit)."""


class ResourceLimitError(SoftrankError):
    """A job would need more memory than its stated limit (``--max-memory``); refused before
    any work."""


class MalformedCertificate(CertificateError):
    """A certificate whose data is inconsistent or unreadable (the checker rejects it)."""


class MalformedRecord(SoftrankError, ValueError):
    """An audit's cell row whose structured columns (``diagnostics``, ``stages``), ends or
    verdict are not softrank's record (:mod:`softrank.audit.record`)."""


class CertifierError(SoftrankError, AssertionError):
    """A certifier broke the protocol (wrong return type or shape, or raised).

    Subclasses ``AssertionError`` so that a suite reports it as a test failure.

    Parameters
    ----------
    message : str
    kind : {"protocol", "raised", "mutated-input"}
        What went wrong: a malformed answer, an exception inside the certifier, or an
        operator modified in place. The suites save each kind's counterexample apart.
    """

    def __init__(self, message: str, kind: str = "protocol"):
        super().__init__(message)
        self.kind = kind

    def __reduce__(self):  # keep the kind across processes
        return (type(self), (str(self), self.kind))


class ModelsUnavailable(CheckpointError):
    """The MiniLM cases cannot be built here (no torch/transformers or no checkpoint)."""

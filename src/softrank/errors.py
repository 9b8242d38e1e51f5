"""One error family for softrank.

Every error softrank raises on bad input is a :class:`SoftrankError`; the message names the
argument (or field), its value and what was expected.
"""

from __future__ import annotations

__all__ = [
    "SoftrankError",
    "InvalidOperatorError",
    "InvalidArgumentError",
    "CertificateError",
    "CheckpointError",
    "PanelError",
    "InvalidFileError",
    "ResourceLimitError",
]


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

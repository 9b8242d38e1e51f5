"""Deprecated: the audit's runner is :mod:`softrank.harness.runner` (workers, ledger, exports)
and :func:`~softrank.validation.check_out_dir` is in :mod:`softrank.validation`; this path
works, with a :class:`DeprecationWarning`, for one release."""

from ..deprecation import moved

__all__: list[str] = []

__getattr__ = moved(__name__, {"run_audit": "softrank.harness.runner",
                               "CSV_COLUMNS": "softrank.harness.runner",
                               "check_out_dir": "softrank.validation"})

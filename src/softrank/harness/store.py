"""Deprecated: the run's ledger is :mod:`softrank.harness.ledger`; this path works, with a
:class:`DeprecationWarning`, for one release."""

from ..deprecation import moved

__all__: list[str] = []

__getattr__ = moved(__name__, {name: "softrank.harness.ledger" for name in (
    "Ledger", "LEDGER_NAME", "SUMMARY_NAME", "identity_diff", "normal_identity", "ledger_cells",
    "read_ledger", "read_csv", "read_summary")})

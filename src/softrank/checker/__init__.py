"""The independent checker: the small trusted core of softrank (docs/theory/checker.md).

Everything softrank reports is only as sound as this package. It imports nothing from the
certifiers (only numpy, mpmath, python-flint and the error classes of
:mod:`softrank.errors`), and it can be read in one sitting:

* :mod:`.certificates` -- what a certificate is;
* :mod:`.files` -- the certificate file format;
* :mod:`.arrays` -- reading ``.npy``/``.npz`` files that may be hostile, in bounded memory;
* :mod:`.float64` -- each condition in float64 with an explicit rounding analysis;
* :mod:`.interval` -- the same conditions in interval arithmetic (python-flint; above 512,
  :mod:`.midrad`, midpoint-radius matrices on BLAS; mpmath on request).

:func:`check` runs both and accepts a certificate only if both accept it. A disagreement
is reported as such and is a rejection, never averaged away.
"""

from __future__ import annotations

from dataclasses import dataclass

from .certificates import (
    Certificate,
    DecodedInverseCertificate,
    FrobeniusCertificate,
    KeyGroupCertificate,
    LowerCertificate,
    MalformedCertificate,
    SubspaceCertificate,
    TrivialCertificate,
    UpperWitness,
    CausalUpperWitness,
    CausalLowerCertificate,
    BlockCertificate,
    matrix_hash,
)
from .files import load_certificate, save_certificate
from .float64 import Float64Result, check_float64, distance_bound
from ..errors import InvalidArgumentError
from .interval import BACKENDS, IntervalResult, check_interval

__all__ = [
    "check",
    "CheckReport",
    "Certificate",
    "LowerCertificate",
    "UpperWitness",
    "CausalUpperWitness",
    "CausalLowerCertificate",
    "BlockCertificate",
    "TrivialCertificate",
    "FrobeniusCertificate",
    "KeyGroupCertificate",
    "DecodedInverseCertificate",
    "SubspaceCertificate",
    "MalformedCertificate",
    "save_certificate",
    "load_certificate",
    "matrix_hash",
    "check_float64",
    "distance_bound",
    "check_interval",
]


@dataclass(frozen=True)
class CheckReport:
    """The checker's word on one certificate.

    Attributes
    ----------
    ok : bool
        True only if the float64 check and the interval check both accept.
    float64 : Float64Result
    interval : IntervalResult or None
        None when the interval check was skipped (``interval=False``).
    disagree : bool
        True when the two arithmetics reached different decisions (a failure).
    """

    ok: bool
    float64: Float64Result
    interval: IntervalResult | None
    disagree: bool

    def summary(self) -> str:
        iv = "skipped" if self.interval is None else (
            f"{'ok' if self.interval.ok else 'FAIL'} ({self.interval.backend}, rows "
            f"{self.interval.rows_checked})"
        )
        return (
            f"{'PASS' if self.ok else 'FAIL'}: float64 {'ok' if self.float64.ok else 'FAIL'} "
            f"[{self.float64.detail}], interval {iv}"
            + (" -- ARITHMETICS DISAGREE" if self.disagree else "")
        )


def check(A, cert, *, interval: bool = True, backend: str = "auto",
          max_rows: int | None = 16) -> CheckReport:
    """Verify ``cert`` for the matrix ``A`` without trusting its producer.

    Parameters
    ----------
    A : (m, N) array_like
        The operator the certificate claims something about (float64).
    cert : UpperWitness or a lower certificate
    interval : bool
        Also run the interval cross-check (default True). With ``False`` only the float64
        check runs and ``ok`` reflects it alone.
    backend, max_rows :
        Passed to :func:`.interval.check_interval`.

    Returns
    -------
    CheckReport
        Never raises on malformed certificates: they are rejected.

    Raises
    ------
    InvalidArgumentError
        If ``backend`` is not one of :data:`.interval.BACKENDS`.
    """
    if backend not in BACKENDS:
        raise InvalidArgumentError(f"backend: expected one of {', '.join(BACKENDS)}, got "
                                   f"{backend!r}")
    f = check_float64(A, cert)  # each check converts A itself: bad data is a rejection
    if not interval:
        return CheckReport(bool(f.ok), f, None, False)
    # The interval check runs even after a float64 rejection, so that the report states
    # whether the two arithmetics agree.
    iv = check_interval(A, cert, backend=backend, max_rows=max_rows)
    # A float64 rejection next to an interval pass on a sample of rows is no disagreement:
    # the sample may miss the failing row. Every other mismatch is one.
    disagree = bool(f.ok != iv.ok and not (iv.ok and iv.rows_checked != "all"))
    return CheckReport(bool(f.ok and iv.ok), f, iv, disagree)

"""Suite configuration shared by the pytest plugin and the suite tests.

Profiles (``--softrank-profile``, or the environment variable ``SOFTRANK_PROFILE``):

========  ==========  =========  ======================  ============  ==============
profile   examples    max side   attack effort           randomness    database
========  ==========  =========  ======================  ============  ==============
``dev``   30          16         ``standard``            random        ``.hypothesis/softrank-dev``
``ci``    50          16         ``quick``               derandomized  none
``deep``  2000        32         ``hard``                random        ``.hypothesis/softrank-deep``
========  ==========  =========  ======================  ============  ==============

"Max side" bounds the operators hypothesis draws. Beside them, every profile runs fixed
cases at real sizes (:mod:`softrank.suites.sizes`; ``--softrank-sizes``, or the environment
variable ``SOFTRANK_SIZES``): ``dev`` 32, 64 and MiniLM width 64; ``ci`` 32, 64, 128 and
MiniLM widths 64 and 128; ``deep`` adds 256 and MiniLM width 256.

The hypothesis profiles are registered as ``softrank-dev``, ``softrank-ci`` and
``softrank-deep``; the suite tests use the selected one (other hypothesis tests in the
session keep theirs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

__all__ = ["PROFILES", "SuiteConfig", "CONFIG", "register_profiles", "suite_settings"]

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
             HealthCheck.function_scoped_fixture]

PROFILES = {
    "dev": {"max_examples": 30, "max_side": 16, "effort": "standard"},
    "ci": {"max_examples": 50, "max_side": 16, "effort": "quick"},
    "deep": {"max_examples": 2000, "max_side": 32, "effort": "hard"},
}


def register_profiles() -> None:
    # parent: hypothesis's own defaults, not whatever profile the session loaded first
    base = settings.get_profile("default")
    settings.register_profile(
        "softrank-dev", parent=base, max_examples=PROFILES["dev"]["max_examples"],
        derandomize=False, deadline=None, print_blob=True, suppress_health_check=_SUPPRESS,
        database=DirectoryBasedExampleDatabase(os.path.join(".hypothesis", "softrank-dev")))
    settings.register_profile(
        "softrank-ci", parent=base, max_examples=PROFILES["ci"]["max_examples"],
        derandomize=True, database=None, deadline=None, print_blob=True,
        suppress_health_check=_SUPPRESS)
    settings.register_profile(
        "softrank-deep", parent=base, max_examples=PROFILES["deep"]["max_examples"],
        derandomize=False, deadline=None, print_blob=True, suppress_health_check=_SUPPRESS,
        database=DirectoryBasedExampleDatabase(os.path.join(".hypothesis", "softrank-deep")))


@dataclass
class SuiteConfig:
    """What the plugin decided for this session (profile, certifiers, where failures go)."""

    profile: str = field(default_factory=lambda: os.environ.get("SOFTRANK_PROFILE", "dev"))
    failures_dir: str = "softrank-failures"
    certifiers: list = field(default_factory=list)  # list of protocol.Certifier
    attacks_tried: int = 0
    attacks_succeeded: int = 0
    closest_attack: float = float("inf")  # least best_error / eps over failed attacks
    gauge: list = field(default_factory=list)  # (kind, Gamma ratio, rho_Q ratio, C rel. change, delta)
    gauge_rank_changes: int = 0
    sizes: str | None = None  # --softrank-sizes (None: the profile's default)
    min_coverage: float = 0.5  # --softrank-min-coverage
    #: :func:`softrank.suites.integrity.snapshot` of the checker, taken before any
    #: certifier is imported (None: not taken; the suites module then takes one)
    checker_snapshot: dict | None = None
    #: one record per (certifier, case) a suite ran: name, side, group, status
    #: ("answered"/"declined"), rank, softrank's lower and upper end
    cases: list = field(default_factory=list)
    #: one record per gauged case: name, side, claimed, rank before, rank after, explained
    gauge_moves: list = field(default_factory=list)

    def sized_cases(self) -> list:
        """The fixed real-size cases of this session (:mod:`softrank.suites.sizes`)."""
        from .sizes import DEFAULT_SIZES, parse_sizes, sized_cases

        spec = self.sizes
        if spec is None:
            spec = os.environ.get("SOFTRANK_SIZES", DEFAULT_SIZES[self.profile])
        return sized_cases(parse_sizes(spec))

    def record(self, name: str, side: str, group: str, op, rank, ref=None) -> None:
        """Count one case a certifier answered (``rank``) or declined (``rank is None``) on
        operator ``op``, with softrank's bracket ``ref`` when known."""
        self.cases.append({
            "name": name, "side": side, "group": group, "factors": op.Q is not None,
            "status": "declined" if rank is None else "answered", "rank": rank,
            "lower": None if ref is None or ref.lower_certificate is None else ref.lower,
            "upper": None if ref is None or ref.upper_witness is None else ref.upper})

    @property
    def max_side(self) -> int:
        return PROFILES[self.profile]["max_side"]

    @property
    def effort(self) -> str:
        return PROFILES[self.profile]["effort"]


CONFIG = SuiteConfig()
register_profiles()


def suite_settings(fraction: float = 1.0):
    """The selected profile's settings (``fraction`` of its examples, at least 3)."""
    if CONFIG.profile not in PROFILES:
        from ..errors import InvalidArgumentError

        raise InvalidArgumentError(f"SOFTRANK_PROFILE: expected one of {sorted(PROFILES)}, got "
                                   f"{CONFIG.profile!r}")
    base = settings.get_profile(f"softrank-{CONFIG.profile}")
    return settings(base, max_examples=max(3, int(base.max_examples * fraction)))

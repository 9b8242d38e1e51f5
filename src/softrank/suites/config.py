"""Suite configuration shared by the pytest plugin and the suite tests.

Profiles (``--softrank-profile``, or the environment variable ``SOFTRANK_PROFILE``):

========  ==========  =========  ======================  ============  ==============
profile   examples    max side   attack effort           randomness    database
========  ==========  =========  ======================  ============  ==============
``dev``   30          16         ``standard``            random        ``.hypothesis/softrank-dev``
``ci``    50          16         ``quick``               derandomized  none
``deep``  2000        32         ``hard``                random        ``.hypothesis/softrank-deep``
========  ==========  =========  ======================  ============  ==============

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

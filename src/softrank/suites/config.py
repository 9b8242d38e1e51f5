"""Suite configuration shared by the pytest plugin and the suite tests.

Profiles (``--softrank-profile``, or the environment variable ``SOFTRANK_PROFILE``): ``dev``,
``ci``, ``deep``, :data:`PROFILES`. They are softrank's one set of hypothesis profiles,
registered here (:func:`register_profiles`) for the suites and for softrank's own tests, and
documented in docs/suites.md (*Hypothesis profiles*). Besides hypothesis's settings a profile
sets the largest operator hypothesis draws ("max side"), the attack effort and the real-size
cases (:mod:`softrank.suites.sizes`; ``--softrank-sizes``, or ``SOFTRANK_SIZES``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

__all__ = ["PROFILES", "LIGHT", "SuiteConfig", "CONFIG", "register_profiles", "suite_settings"]

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
             HealthCheck.function_scoped_fixture]

#: The one set of hypothesis profiles (docs/suites.md, *Hypothesis profiles*): examples per
#: property, derandomized or not (a random profile keeps a database in
#: ``.hypothesis/softrank-NAME``), and for the suites the largest drawn side and attack effort.
PROFILES = {
    "dev": {"max_examples": 30, "derandomize": False, "max_side": 16, "effort": "standard"},
    "ci": {"max_examples": 50, "derandomize": True, "max_side": 16, "effort": "quick"},
    "deep": {"max_examples": 2000, "derandomize": False, "max_side": 32, "effort": "hard"},
}
#: Share of a profile's examples run by the lighter properties: the suites' gauge, attack and
#: cross-certifier tests (``suite_settings(0.5)``) and softrank's own property tests
#: (tests/conftest.py loads ``softrank-NAME-light``; ``ci``: 25 examples).
LIGHT = 0.5


def register_profiles() -> None:
    """Register the set: ``softrank-NAME`` for each of :data:`PROFILES` and
    ``softrank-NAME-light``, the same with :data:`LIGHT` of its examples. The only place
    softrank registers hypothesis profiles (tests/test_suites_plugin.py checks it)."""
    # parent: hypothesis's own defaults, not whatever profile the session loaded first
    base = settings.get_profile("default")
    for name, p in PROFILES.items():
        db = None if p["derandomize"] else DirectoryBasedExampleDatabase(
            os.path.join(".hypothesis", f"softrank-{name}"))
        for suffix, n in (("", p["max_examples"]), ("-light", _light(p["max_examples"]))):
            settings.register_profile(
                f"softrank-{name}{suffix}", parent=base, max_examples=n,
                derandomize=p["derandomize"], database=db, deadline=None, print_blob=True,
                suppress_health_check=_SUPPRESS)


def _light(max_examples: int, fraction: float = LIGHT) -> int:
    return max(3, int(max_examples * fraction))


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
    #: --softrank-reference-store (:class:`softrank.refstore.ReferenceStore`; by default the
    #: default store), or None when it is off
    reference_store: object = None
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
    return settings(base, max_examples=_light(base.max_examples, fraction))

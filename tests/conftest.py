"""Shared test configuration: hypothesis profiles.

Profiles (select with the environment variable ``HYPOTHESIS_PROFILE``; default ``ci``):

* ``ci``   -- derandomized, few examples, no deadline: reproducible and fast (``make test``);
* ``dev``  -- a little more exploration while editing;
* ``deep`` -- 2000 examples per property, for a nightly or a manual soak.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=25,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None, print_blob=True)
settings.register_profile(
    "deep",
    max_examples=2000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
# the suites (tests/test_suites_builtin.py) follow --softrank-profile, else this default
os.environ.setdefault("SOFTRANK_PROFILE", "ci")


def pytest_terminal_summary(terminalreporter):
    """The fuzz tier's count of inputs per target (tests/test_fuzz.py); in a long run
    (``make fuzz``) also written to fuzz-stats.json."""
    import json
    import sys

    mod = sys.modules.get("test_fuzz") or sys.modules.get("tests.test_fuzz")
    if mod is None or not mod.COUNTS:
        return
    tr = terminalreporter
    tr.section("fuzz")
    for name, n in mod.COUNTS.items():
        tr.write_line(f"{name}: {n} inputs")
    if mod.LONG_SECONDS > 0:
        with open("fuzz-stats.json", "w") as fh:
            json.dump({"seconds_per_target": mod.LONG_SECONDS, "inputs": mod.COUNTS}, fh,
                      indent=1)

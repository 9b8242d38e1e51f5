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

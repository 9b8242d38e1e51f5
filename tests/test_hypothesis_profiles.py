"""softrank's one set of hypothesis profiles (docs/suites.md, *Hypothesis profiles*).

The pytest plugin's :mod:`softrank.suites.config` registers them; the suites and softrank's
own tests (tests/conftest.py) load them, and nothing else registers a profile.
"""

import ast
import inspect
import os
import re
from pathlib import Path

import pytest
from hypothesis import settings

from softrank.suites import config
from softrank.suites.config import CONFIG, LIGHT, PROFILES, suite_settings

REPO = Path(__file__).resolve().parents[1]


def _register_profile_calls(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return sum(isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
               and getattr(node.func, "attr", getattr(node.func, "id", None)) == "register_profile"
               for node in ast.walk(tree))


def test_one_registration_of_the_profiles():
    """One call of ``settings.register_profile`` in the repository: the plugin's loop over
    :data:`PROFILES`; the tests' conftest and every other module only load profiles."""
    files = [*REPO.joinpath("tests").glob("*.py"), *REPO.joinpath("src").rglob("*.py"),
             *REPO.joinpath("benchmarks").rglob("*.py"), *REPO.joinpath("examples").rglob("*.py")]
    calls = {p.relative_to(REPO).as_posix(): n for p in files
             if (n := _register_profile_calls(p))}
    plugin = Path(inspect.getsourcefile(config.register_profiles)).resolve()
    assert calls == {plugin.relative_to(REPO).as_posix(): 1}, calls
    assert _register_profile_calls(REPO / "tests" / "conftest.py") == 0


def test_the_set_is_registered_with_its_light_variants():
    for name, p in PROFILES.items():
        full = settings.get_profile(f"softrank-{name}")
        light = settings.get_profile(f"softrank-{name}-light")
        assert full.max_examples == p["max_examples"]
        assert light.max_examples == max(3, int(p["max_examples"] * LIGHT))
        for s in (full, light):
            assert s.derandomize is p["derandomize"] and s.deadline is None and s.print_blob
            assert (s.database is None) is p["derandomize"]
    assert settings.get_profile("softrank-ci-light").max_examples == 25  # make test's own tests


def test_this_session_runs_the_selected_profile(request):
    """softrank's own tests run the light variant of ``$HYPOTHESIS_PROFILE``, else of the
    suites' profile; the suites run the full one."""
    if request.config.getoption("hypothesis_profile", None):
        pytest.skip("--hypothesis-profile chose another profile for this session")
    name = os.environ.get("HYPOTHESIS_PROFILE") or CONFIG.profile
    expected = settings.get_profile(f"softrank-{name}-light")
    now = settings()
    assert (now.max_examples, now.derandomize, now.database, now.deadline) == (
        expected.max_examples, expected.derandomize, expected.database, expected.deadline)
    assert suite_settings().max_examples == PROFILES[CONFIG.profile]["max_examples"]
    assert suite_settings(0.5).max_examples == max(3, int(PROFILES[CONFIG.profile]["max_examples"]
                                                         * LIGHT))


def test_the_profiles_are_documented_once_as_defined():
    """docs/suites.md's *Hypothesis profiles* table states each profile's examples (full and
    light) and randomness as :data:`PROFILES` defines them."""
    text = (REPO / "docs" / "suites.md").read_text(encoding="utf-8")
    section = text.split("## Hypothesis profiles", 1)[1].split("\n## ", 1)[0]
    for name, p in PROFILES.items():
        row = re.search(rf"^\| `{name}` \|(.*)$", section, re.M)
        assert row, name
        cells = [c.strip() for c in row.group(1).split("|")]
        light = max(3, int(p["max_examples"] * LIGHT))
        assert cells[0] == str(p["max_examples"]) and cells[1] == str(light), (name, cells)
        assert cells[2] == ("derandomized" if p["derandomize"] else "random"), (name, cells)

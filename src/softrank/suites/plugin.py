"""pytest plugin (entry point ``pytest11: softrank``): gate certifiers in CI (SPEC 5-7, 10).

Options
-------
``--softrank-certifier MODULE:OBJECT`` (repeatable)
    A construction or lower test following :mod:`softrank.suites.protocol`;
    ``builtin:NAME`` for one of softrank's own, ``builtin:all`` for all of them (the default
    when the option is absent). Given without test paths, pytest runs the suites only;
    with test paths, the suites and those paths.
``--softrank-profile dev|ci|deep``
    Hypothesis settings of the suite tests (:mod:`softrank.suites.config`); other tests
    keep their own profile. Default ``dev`` (or ``$SOFTRANK_PROFILE``).
``--softrank-failures DIR``
    Where counterexamples are saved (default ``softrank-failures``).

This module imports only pytest and the standard library at load time, so installing
softrank costs other test suites nothing; numpy, hypothesis and the certifiers are imported
when the suites are configured.
"""

from __future__ import annotations

import os

import pytest

PROFILES = ("dev", "ci", "deep")


def pytest_addoption(parser):
    g = parser.getgroup("softrank", "softrank suites (soundness, gauge, attacks)")
    g.addoption("--softrank-certifier", action="append", default=[], metavar="MODULE:OBJECT",
                help="certifier to gate (repeatable); builtin:all by default")
    g.addoption("--softrank-profile", default=None, choices=PROFILES,
                help="hypothesis profile of the suites: dev, ci (derandomized) or deep")
    g.addoption("--softrank-failures", default="softrank-failures", metavar="DIR",
                help="directory for counterexamples (default: softrank-failures)")


def _suite_path() -> str:
    import importlib.util

    return importlib.util.find_spec("softrank.suites.suite").origin


def pytest_configure(config):
    specs = config.getoption("softrank_certifier")
    profile = config.getoption("softrank_profile")
    if not specs and profile is None:
        return  # not asked for: stay out of the way (suites imported explicitly still work)
    from .config import CONFIG, PROFILES

    if profile is not None:
        CONFIG.profile = profile
    elif CONFIG.profile not in PROFILES:
        raise pytest.UsageError(f"SOFTRANK_PROFILE: expected one of {sorted(PROFILES)}, got "
                                f"{CONFIG.profile!r}")
    fdir = config.getoption("softrank_failures")
    if os.path.exists(fdir) and not os.path.isdir(fdir):
        raise pytest.UsageError(f"--softrank-failures: {fdir!r} exists and is not a directory")
    CONFIG.failures_dir = fdir
    if specs:
        from .builtin import builtin_certifiers
        from .protocol import load_certifier

        certs = []
        for spec in specs:
            try:
                certs.extend(builtin_certifiers() if spec == "builtin:all" else [load_certifier(spec)])
            except Exception as exc:
                raise pytest.UsageError(str(exc)) from exc
        CONFIG.certifiers = certs
        if config.args_source != pytest.Config.ArgsSource.ARGS:
            # no test paths given: run the suites themselves
            config.args[:] = [_suite_path()]
        elif _suite_path() not in config.args:
            # test paths given: run the suites as well as them
            config.args.append(_suite_path())


def _certifiers():
    from .config import CONFIG

    if not CONFIG.certifiers:
        from .builtin import builtin_certifiers

        CONFIG.certifiers = builtin_certifiers()
    return CONFIG.certifiers


def pytest_generate_tests(metafunc):
    kind = getattr(metafunc.function, "_softrank_kind", None)
    if kind is None:
        return
    if "softrank_certifier" in metafunc.fixturenames:
        certs = [c for c in _certifiers()
                 if (kind == "construction" and c.is_construction)
                 or (kind == "lower" and c.is_lower_test)]
        metafunc.parametrize("softrank_certifier", certs, ids=[c.name for c in certs])
    if "softrank_certifiers" in metafunc.fixturenames:
        metafunc.parametrize("softrank_certifiers", [_certifiers()], ids=["all"])


def pytest_collection_modifyitems(session, config, items):
    """Deselect suite tests that no loaded certifier applies to (e.g. the construction suites
    when only a lower test is gated), instead of reporting them as skipped."""
    keep, drop = [], []
    for item in items:
        fn = getattr(item, "function", None)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if (getattr(fn, "_softrank_kind", None) in ("construction", "lower")
                and not hasattr(params.get("softrank_certifier"), "is_construction")):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    import sys

    mod = sys.modules.get("softrank.suites.config")
    if mod is None:
        return
    C = mod.CONFIG
    if not (C.attacks_tried or C.gauge):
        return
    tr = terminalreporter
    tr.section("softrank suites")
    tr.write_line(f"profile {C.profile}; counterexamples go to {os.path.abspath(C.failures_dir)}")
    if C.attacks_tried:
        close = f"; closest approach best_error/eps = {C.closest_attack:.4g}" if C.closest_attack < float("inf") else ""
        tr.write_line(f"attacks: {C.attacks_tried} tried, {C.attacks_succeeded} succeeded{close}")
    if C.gauge:
        import numpy as np

        for kind in ("diagonal", "dense"):
            rows = [g for g in C.gauge if g[0] == kind]
            if not rows:
                continue
            arr = np.array([g[1:] for g in rows])
            tr.write_line(
                f"gauge {kind} ({len(rows)}, cond {arr[:, 0].min():.3g}-{arr[:, 0].max():.3g}): "
                f"Gamma moved x{arr[:, 1].min():.3g}..x{arr[:, 1].max():.3g}, rho_Q "
                f"x{arr[:, 2].min():.3g}..x{arr[:, 2].max():.3g}; C changed <= "
                f"{arr[:, 3].max():.2g} rel.; A moved <= {arr[:, 4].max():.2g} (proved)")
        tr.write_line(f"gauge: rank changes explained by the margin: {C.gauge_rank_changes}")

"""pytest plugin (entry point ``pytest11: softrank``): gate certifiers in CI
(docs/suites.md; docs/theory/lower.md, docs/theory/geometry.md, docs/theory/attacks.md).

Options
-------
``--softrank-certifier MODULE:OBJECT`` (repeatable)
    A construction or lower test following :mod:`softrank.suites.protocol`;
    ``builtin:NAME`` for one of softrank's own or reference certifiers, ``builtin:own`` for
    softrank's own constructions and lower tests (the default when the option is absent),
    ``builtin:reference`` for the reference constructions, ``builtin:all`` for both. Given
    without test paths, pytest runs the suites only; with test paths, the suites and those
    paths.
``--softrank-profile dev|ci|deep``
    Hypothesis settings of the suite tests (:mod:`softrank.suites.config`); other tests
    keep their own profile. Default ``dev`` (or ``$SOFTRANK_PROFILE``).
``--softrank-failures DIR``
    Where counterexamples are saved (default ``softrank-failures``).
``--softrank-sizes LIST``
    The fixed real-size cases (:mod:`softrank.suites.sizes`): ``n`` for synthetic ``n x n``
    heads (8-256), ``minilm:w`` for MiniLM heads of width ``w`` (16-512, needs the
    ``[models]`` extra), ``none`` for none. Default per profile (``ci``:
    ``32,64,128,minilm:64,minilm:128``), or ``$SOFTRANK_SIZES``.
``--softrank-min-coverage F``
    A construction that answers (does not decline) fewer than this share of its cases fails
    the session, with the count (default 0.5; 0 turns the gate off).

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
                help="certifier to gate (repeatable): MODULE:OBJECT, builtin:NAME, builtin:own "
                     "(softrank's own; the default), builtin:reference, builtin:all")
    g.addoption("--softrank-profile", default=None, choices=PROFILES,
                help="hypothesis profile of the suites: dev, ci (derandomized) or deep")
    g.addoption("--softrank-failures", default="softrank-failures", metavar="DIR",
                help="directory for counterexamples (default: softrank-failures)")
    g.addoption("--softrank-sizes", default=None, metavar="LIST",
                help="real-size cases beside the drawn ones: comma-separated n (synthetic n x n "
                     "heads, 8 <= n <= 256) and minilm:w (MiniLM heads of width w, 16 <= w <= "
                     "512, needs the [models] extra), or none. Default by profile: dev "
                     "32,64,minilm:64; ci 32,64,128,minilm:64,minilm:128; deep adds 256 and "
                     "minilm:256 (or $SOFTRANK_SIZES). Cost grows with n: softrank's own bracket "
                     "of each case is computed once per session (about 20 s at 128 x 128)")
    g.addoption("--softrank-reference-store", "--softrank-reference-cache", default=None,
                metavar="DIR", dest="softrank_reference_store",
                help="softrank's reference brackets are kept in this reference store between "
                     "sessions and runs (each checked again in float64 and interval arithmetic "
                     "when read back; keyed by operator, eps, effort and engine); 'off' "
                     "computes them in every session. Default: the store softrank audit uses "
                     "($SOFTRANK_REFERENCE_STORE, else $XDG_CACHE_HOME/softrank/references, "
                     "else ~/.cache/softrank/references)")
    g.addoption("--softrank-min-coverage", default=0.5, type=_share, metavar="F",
                help="fail when a construction answers fewer than this share of its cases "
                     "(declines the rest); default 0.5, 0 turns the gate off")


def _share(s: str) -> float:
    import argparse

    try:
        v = float(s)
    except ValueError:
        v = float("nan")
    if not 0 <= v <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {s!r}")
    return v


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
    CONFIG.sizes = config.getoption("softrank_sizes")
    CONFIG.min_coverage = config.getoption("softrank_min_coverage")
    from ..errors import SoftrankError

    try:
        CONFIG.sized_cases()
    except SoftrankError as exc:
        where = "--softrank-sizes" if CONFIG.sizes is not None else "SOFTRANK_SIZES"
        raise pytest.UsageError(str(exc).replace("--softrank-sizes", where)) from None
    fdir = config.getoption("softrank_failures")
    if os.path.exists(fdir) and not os.path.isdir(fdir):
        raise pytest.UsageError(f"--softrank-failures: {fdir!r} exists and is not a directory")
    CONFIG.failures_dir = fdir
    from ..refstore import ReferenceStore, turned_off

    where = config.getoption("softrank_reference_store")
    try:
        CONFIG.reference_store = (
            ReferenceStore.default() if where is None else None
            if turned_off(where) else ReferenceStore(where, "--softrank-reference-store"))
    except SoftrankError as exc:
        raise pytest.UsageError(str(exc)) from None
    from .integrity import snapshot

    CONFIG.checker_snapshot = snapshot()  # before any certifier's code runs
    if specs:
        from .builtin import builtin_certifiers
        from .protocol import load_certifier

        certs = []
        for spec in specs:
            try:
                sel = spec.partition(":")[2] if spec.startswith("builtin:") else None
                certs.extend(builtin_certifiers(sel) if sel in ("all", "own", "reference")
                             else [load_certifier(spec)])
            except Exception as exc:
                raise pytest.UsageError(str(exc)) from exc
        names = [c.name for c in certs]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise pytest.UsageError(
                f"--softrank-certifier: names must differ, {dup} given twice (set a distinct "
                "`name` attribute on each class)")
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

        CONFIG.certifiers = builtin_certifiers("own")
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
    if "softrank_size_case" in metafunc.fixturenames:
        from .config import CONFIG

        cases = CONFIG.sized_cases()
        if cases:
            metafunc.parametrize("softrank_size_case", cases, ids=[c.id for c in cases])
        else:
            metafunc.parametrize("softrank_size_case", [pytest.param(None, marks=pytest.mark.skip(
                reason="no real-size cases requested (--softrank-sizes none)"))], ids=["none"])


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


def _coverage_failures(C) -> list[str]:
    """Constructions that answered fewer than ``min_coverage`` of their cases, counted over
    operators given with their factors ``Q``, ``K`` (attention as it is computed) and
    separately for the drawn cases and for the real-size ones (declining every real-size
    case must not pass on the strength of the small drawn ones). An operator given as ``A``
    only (a planted instance) may be declined by a construction that needs the factors; it
    is listed in the summary but not counted."""
    if C.min_coverage <= 0:
        return []
    out = []
    by = {}
    for r in C.cases:
        if r["side"] == "upper" and r["factors"]:
            kind = "drawn" if r["group"].startswith("drawn") else "real-size"
            by.setdefault((r["name"], kind), []).append(r)
    for (name, kind), rs in by.items():
        answered = sum(r["status"] == "answered" for r in rs)
        if answered < C.min_coverage * len(rs):
            out.append(f"{name} answered {answered} of {len(rs)} {kind} cases with factors "
                       f"({100.0 * answered / len(rs):.0f} %) and declined "
                       f"{len(rs) - answered}; --softrank-min-coverage is {C.min_coverage:g}: a "
                       "construction that declines is not measured (return a witness within "
                       "eps, of any rank)")
    return out


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session):
    """After the tests: the coverage gate (in the manner of pytest-cov's --cov-fail-under,
    a failed gate fails the session)."""
    yield
    import sys

    mod = sys.modules.get("softrank.suites.config")
    if mod is None:
        return
    from .integrity import changes

    changed = changes(mod.CONFIG.checker_snapshot)
    if changed:  # whatever passed, passed a checker that is not softrank's
        session.config._softrank_tampered = changed
        session.testsfailed += 1
    if session.shouldstop or session.shouldfail:
        return
    fails = _coverage_failures(mod.CONFIG)
    if fails:
        session.config._softrank_coverage_failures = fails
        session.testsfailed += len(fails)


def _median(v):
    import statistics

    return statistics.median(v) if v else None


def _fmt(x, nd=2):
    return "-" if x is None else f"{x:.{nd}f}"


def _summary_table(C) -> list[str]:
    """Per certifier and case group: cases, declined, median rank / softrank's certified
    lower end and rank / softrank's upper end."""
    groups = {}
    for r in C.cases:
        groups.setdefault((r["name"], r["side"]), {}).setdefault(r["group"], []).append(r)
    labels = {key: f"{key[0]} ({'construction' if key[1] == 'upper' else 'lower test'})"
              for key in groups}
    wl = max([len(v) for v in labels.values()] + [9])
    wg = max([len(r["group"]) for r in C.cases] + [5])
    head = (f"{'certifier':<{wl}} {'group':<{wg}} {'cases':>5} {'declined':>8} "
            f"{'answered/with Q,K':>17} {'rank/lower':>10} {'rank/upper':>10}")
    lines = [head, "-" * len(head)]
    for key, by in groups.items():
        rows = [("all", [r for rs in by.values() for r in rs])] + list(by.items())
        if len(by) == 1:
            rows = rows[1:]
        for i, (g, rs) in enumerate(rows):
            ans = [r for r in rs if r["status"] == "answered"]
            lo = [r["rank"] / r["lower"] for r in ans if r["lower"]]
            up = [r["rank"] / r["upper"] for r in ans if r["upper"]]
            fac = [r for r in rs if r["factors"]]
            cov = f"{sum(r['status'] == 'answered' for r in fac)}/{len(fac)}"
            label = labels[key] if i == 0 else ""
            lines.append(f"{label:<{wl}} {g:<{wg}} {len(rs):>5} {len(rs) - len(ans):>8} "
                         f"{cov:>17} {_fmt(_median(lo)):>10} {_fmt(_median(up)):>10}")
    return lines


def _gauge_lines(C) -> list[str]:
    by = {}
    for m in C.gauge_moves:
        by.setdefault((m["name"], m["side"], m["claimed"]), []).append(m)
    out = []
    for (name, side, claimed), ms in by.items():
        both = [m for m in ms if m["before"] is not None and m["after"] is not None]
        moved = [m for m in both if m["before"] != m["after"]]
        one = sum((m["before"] is None) != (m["after"] is None) for m in ms)
        size = max((abs(m["before"] - m["after"]) for m in moved), default=0)
        unexplained = sum(not m["explained"] for m in moved)
        tail = ((f"rank moved in {len(moved)} of {len(both)} (by up to {size})" if moved else
                 f"rank unchanged in all {len(both)} answered before and after" if both else
                 "none answered both before and after")
                + (f", {unexplained} beyond the margin" if unexplained else "")
                + (f"; answered on one side only in {one}" if one else ""))
        verdict = ("claimed: gated" if claimed else
                   "not claimed (gauge_invariant = False or absent): reported, not gated")
        out.append(f"gauge {name}: {len(ms)} gauged examples, {tail}; {verdict}")
    return out


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    import sys

    mod = sys.modules.get("softrank.suites.config")
    if mod is None:
        return
    C = mod.CONFIG
    tr = terminalreporter
    changed = getattr(config, "_softrank_tampered", None)
    if changed:
        tr.write_line(f"FAIL checker integrity: {', '.join(changed)} replaced while the suites "
                      "ran (a certifier under test patched the checker): no verdict of this "
                      "session is the checker's", red=True, bold=True)
    if not (C.attacks_tried or C.gauge or C.cases):
        return
    tr.section("softrank suites")
    tr.write_line(f"profile {C.profile}; counterexamples go to {os.path.abspath(C.failures_dir)}")
    if C.cases:
        tr.write_line("rank/lower and rank/upper: medians of the certifier's rank over softrank's "
                      "certified lower end and its checked upper end on the same case; "
                      "'declined': cases without an answer; 'answered/with Q,K': the cases the "
                      "coverage gate counts (operators given with their factors), drawn and "
                      "real-size separately; counts include hypothesis's shrinking replays")
        for ln in _summary_table(C):
            tr.write_line(ln)
    for ln in _gauge_lines(C):
        tr.write_line(ln)
    rc = C.reference_store
    if rc is not None and (rc.loaded or rc.stored or rc.refused or rc.notes):
        tr.write_line(f"reference store {rc.root}: {rc.loaded} brackets read back and checked "
                      f"again, {rc.stored} computed and stored, {len(rc.refused)} stored entries "
                      "refused (recomputed)")
        for line in rc.refused[:5]:
            tr.write_line(f"  refused: {line}")
        for line in rc.notes[:5]:
            tr.write_line(f"  {line}")
    if C.attacks_tried:
        close = f"; closest approach best_error/eps = {C.closest_attack:.4g}" if C.closest_attack < float("inf") else ""
        tr.write_line(f"attacks: {C.attacks_tried} tried, {C.attacks_succeeded} succeeded{close}")
    if C.gauge and config.getoption("verbose") > 0:
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
    for msg in getattr(config, "_softrank_coverage_failures", []):
        tr.write_line(f"FAIL coverage: {msg}", red=True, bold=True)

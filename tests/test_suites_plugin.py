"""The pytest plugin end to end, the certifier protocol, and the plugin's import cost.

End to end: ``pytest --softrank-certifier MODULE:OBJECT --softrank-profile ci`` runs in a subprocess
from the repository root against the example certifiers. The sound examples pass; the two
deliberately broken ones fail the suites that must catch them, and the counterexamples they
leave behind replay (``softrank verify`` exits non-zero) and are re-checked here with the
checker. Bad specs are usage errors (exit 4) naming the option.

All pytest subprocesses are started together (module fixture) to keep the wall time down.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from softrank.checker import (
    FrobeniusCertificate,
    TrivialCertificate,
    UpperWitness,
    check,
    load_certificate,
    save_certificate,
)
from softrank.errors import InvalidArgumentError, SoftrankError
from softrank.generators.synthetic import planted, planted_blocks
from softrank.suites.protocol import Certifier, CertifierError, as_certifier, load_certifier

from conftest import EXTRAS, has_extra

REPO = Path(__file__).resolve().parents[1]
SOFTRANK = Path(sys.executable).with_name("softrank")
TIMEOUT = 600

NEVER = """
class Never:
    name = "never"
    def witness(self, operator, eps):
        return None
"""

#: loaded into every run (``-p``): which optional extras' modules the plugin, the suites'
#: configuration and their collection imported, before any test ran
PROBE = """
import json, os, sys

def pytest_collection_finish(session):
    with open(os.environ["SOFTRANK_TEST_PROBE"], "w") as fh:
        json.dump(sorted(m for m in json.loads(os.environ["SOFTRANK_TEST_EXTRAS"])
                         if m in sys.modules), fh)
"""

# key -> (certifier specs, extra options); every run uses the ci profile
SPECS = {
    "good": (["examples.my_construction:MyConstruction", "examples.my_lower_test:MyLowerTest"],
             []),
    "broken-construction": (["examples.broken_construction:BrokenConstruction"], []),
    "broken-lower": (["examples.broken_lower_test:OffByOneLowerTest"], []),
    # real sizes, coverage and gauge claims: the reference constructions, a construction that
    # reads Q and K without claiming gauge invariance, one wrong above 32 keys, one that
    # always declines
    "sized": (["builtin:reference", "examples.norm_landmarks:NormLandmarks",
               "examples.small_only_construction:SmallOnlyConstruction", "nevermod:Never"], []),
    "no-module": (["nosuchmodule:X"], []),
    "no-object": (["examples.my_construction:Nope"], []),
    "not-a-spec": (["not-a-spec"], []),
    "no-builtin": (["builtin:nope"], []),
    "bad-sizes": (["examples.my_construction:MyConstruction"], ["--softrank-sizes", "minilm:4"]),
    "bad-coverage": (["examples.my_construction:MyConstruction"],
                     ["--softrank-min-coverage", "1.5"]),
    "same-names": (["examples.my_construction:MyConstruction",
                    "examples.my_construction:MyConstruction"], []),
    "bad-cache": (["examples.my_construction:MyConstruction"],
                  ["--softrank-reference-store", str(REPO / "pyproject.toml")]),
}


def _env():
    env = dict(os.environ)
    for var in ("PYTHONPATH", "PYTEST_ADDOPTS", "SOFTRANK_PROFILE", "SOFTRANK_SIZES"):
        env.pop(var, None)
    # several pytest processes run at once: one BLAS thread each avoids oversubscription
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    return env


class Run:
    def __init__(self, key, specs, extra, root):
        self.key, self.specs = key, specs
        self.spec = specs[0]
        self.failures = root / key / "f"
        self.failures.parent.mkdir(parents=True)
        self._out = open(root / key / "stdout", "w+")
        self._err = open(root / key / "stderr", "w+")
        cmd = [sys.executable, "-m", "pytest", "--softrank-profile", "ci", "-p",
               "no:cacheprovider", "-q", "--softrank-failures", str(self.failures), "-rA",
               "-p", "softrank_test_probe"]
        for spec in specs:
            cmd += ["--softrank-certifier", spec]
        # every run shares one reference store (the heavy runs compare with the same cases;
        # the old option name is an alias)
        cmd += ["--softrank-reference-cache", str(root / "reference-store")]
        env = _env()
        (root / "mods").mkdir(exist_ok=True)
        (root / "mods" / "nevermod.py").write_text(NEVER)
        (root / "mods" / "softrank_test_probe.py").write_text(PROBE)
        env["PYTHONPATH"] = str(root / "mods")
        self.probe = root / key / "extras-imported.json"
        env["SOFTRANK_TEST_PROBE"] = str(self.probe)
        env["SOFTRANK_TEST_EXTRAS"] = json.dumps(_EXTRA_MODULES)
        self.proc = subprocess.Popen(cmd + extra, cwd=REPO, env=env, stdout=self._out,
                                     stderr=self._err)
        self._done = False

    def wait(self):
        if not self._done:
            try:
                self.proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
            for f in (self._out, self._err):
                f.seek(0)
            self.stdout, self.stderr = self._out.read(), self._err.read()
            self._out.close()
            self._err.close()
            self._done = True
        return self

    @property
    def returncode(self):
        return self.wait().proc.returncode

    def lines(self, prefix):
        self.wait()
        return [ln[len(prefix):].strip() for ln in self.stdout.splitlines() if ln.startswith(prefix)]

    def saved_dirs(self):
        self.wait()
        return sorted({Path(p) for p in re.findall(r"counterexample saved in (\S+)", self.stdout)})

    def __repr__(self):
        self.wait()
        return (f"<pytest --softrank-certifier {self.spec}: rc={self.proc.returncode}>\n"
                f"--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-3000:]}")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("plugin-runs")
    started = {k: Run(k, specs, extra, root) for k, (specs, extra) in SPECS.items()}
    yield started
    for r in started.values():  # only our own processes, by handle
        if r.proc.poll() is None:
            r.proc.kill()
            r.proc.wait()


#: the optional extras' modules (and the other heavy ones they bring) that loading the plugin
#: and collecting the suites must not import
_EXTRA_MODULES = sorted({m for mods in EXTRAS.values() for m in mods}
                        | {"tokenizers", "skimage", "dask"})


def _minilm_skipped_without_models(run):
    """Without the [models] extra the MiniLM real-size cases are skipped, each with the
    reason (the extra), never failed or passed."""
    if has_extra("models"):
        return
    skips = [ln for ln in run.stdout.splitlines() if ln.startswith("SKIPPED") and "MiniLM" in ln]
    assert skips and all("[models]" in ln for ln in skips), run
    assert not any("minilm" in t for t in _passed(run) | _failed(run)), run


def _failed(run):
    return {re.sub(r"^.*::", "", ln.split(" - ")[0]) for ln in run.lines("FAILED ")}


def _passed(run):
    return {re.sub(r"^.*::", "", ln) for ln in run.lines("PASSED ")}


def _summary(run):
    """The terminal summary's table: {certifier label: {group: (cases, declined,
    "answered/with Q,K", rank/lower, rank/upper)}} (None for '-')."""
    lines = run.wait().stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("certifier ") and "rank/upper" in ln)
    out, label = {}, None
    for ln in lines[start + 2:]:
        parts = ln.split()
        if len(parts) < 6 or not parts[-5].isdigit() or not parts[-4].isdigit():
            break
        if len(parts) > 6:
            label = " ".join(parts[:-6])
        vals = [None if v == "-" else float(v) for v in parts[-2:]]
        out.setdefault(label, {})[parts[-6]] = (int(parts[-5]), int(parts[-4]), parts[-3], *vals)
    return out


def _verify(path):
    return subprocess.run([str(SOFTRANK), "verify", str(path)], cwd=path, env=_env(),
                          capture_output=True, text=True, timeout=TIMEOUT)


def _replay(path):
    # from the repository root, where the examples' modules are importable
    return subprocess.run([sys.executable, "-m", "softrank.suites.replay", str(path)], cwd=REPO,
                          env=_env(), capture_output=True, text=True, timeout=TIMEOUT)


# ------------------------------------------------------------------ end to end


def test_a_certifier_that_patches_the_checker_is_named_as_such(monkeypatch, tmp_path):
    """A suite failure while the checker is replaced says so, instead of "the checker
    accepted an unsound certificate"; every replaced object is named (in process: the
    plugin snapshots the checker before importing any certifier, and fails the session at
    its end on the same changes)."""
    import softrank.checker.float64 as f64
    import softrank.suites.suite as suite
    from softrank.checker import CheckReport
    from softrank.checker.float64 import Float64Result
    from softrank.suites.config import CONFIG
    from softrank.suites.integrity import changes, snapshot

    snap = snapshot()
    monkeypatch.setattr(CONFIG, "checker_snapshot", snap)
    monkeypatch.setattr(CONFIG, "failures_dir", str(tmp_path / "failures"))
    assert changes(snap) == []
    monkeypatch.setattr(suite, "check", lambda A, c, **kw: CheckReport(
        True, Float64Result(True, 1.0, "patched"), None, False))
    monkeypatch.setitem(f64._DISPATCH, "trivial", lambda A, c: None)
    assert changes(snap) == ["softrank.checker.float64._DISPATCH", "softrank.suites.suite.check"]
    op = planted(8, 8, 2, 0.0, seed=0)
    with pytest.raises(suite.SuiteFailure) as e:
        suite._fail("liar", "lower_le_upper", op, 0.25, "liar certifies r_eps >= 9 ...: the "
                    "checker accepted an unsound certificate", kind="contradiction")
    msg = str(e.value)
    assert msg.startswith("the checker was replaced while the suites ran "
                          "(softrank.checker.float64._DISPATCH, softrank.suites.suite.check): a "
                          "certifier under test patched it"), msg
    monkeypatch.undo()
    assert changes(snap) == []


def test_sound_construction_and_lower_test_pass(runs):
    r = runs["good"]
    assert r.returncode == 0, r
    passed = _passed(r)
    assert "test_construction_stress[my-construction]" in passed, r
    assert "test_construction_gauge[my-construction]" in passed, r
    for t in ("test_lower_soundness", "test_lower_attack_resistance", "test_lower_gauge"):
        assert f"{t}[my-lower-test]" in passed, r
    # the real-size cases: synthetic 32-128 under ci (MiniLM: the test below)
    for case in ("gaussian-128-eps0.25", "planted-64-eps0.25"):
        assert f"test_construction_sizes[my-construction-{case}]" in passed, r
        assert f"test_lower_sizes[my-lower-test-{case}]" in passed, r
    assert "attacks:" in r.stdout and " 0 succeeded" in r.stdout, r
    assert not _failed(r)
    assert not r.failures.exists() or not any(r.failures.rglob("*"))
    # the summary: per certifier and size, cases, declined, rank against softrank's ends
    table = _summary(r)
    lower = table["my-lower-test (lower test)"]
    assert lower["drawn<=16"][0] == 50, r
    assert table["my-construction (construction)"]["gaussian-128"][:2] == (2, 0), r
    assert sum(lower[f"{k}-{n}"][0] for k in ("gaussian", "planted") for n in (32, 64, 128)) == 9
    assert "gauge my-construction: 25 gauged examples" in r.stdout and "claimed: gated" in r.stdout
    _minilm_skipped_without_models(r)


@pytest.mark.models
def test_sound_construction_and_lower_test_pass_on_minilm_heads(runs):
    r = runs["good"]
    passed = _passed(r)
    for case in ("minilm-w64-L2H3-eps0.25", "minilm-w128-L5H11-eps0.25"):
        assert f"test_construction_sizes[my-construction-{case}]" in passed, r
        assert f"test_lower_sizes[my-lower-test-{case}]" in passed, r
    table = _summary(r)
    assert table["my-construction (construction)"]["minilm-w128"][:2] == (2, 0), r
    assert table["my-lower-test (lower test)"]["all"][0] == 63, r  # 50 drawn, 9 + 4 sized


def test_broken_construction_fails_and_its_counterexample_replays(runs):
    r = runs["broken-construction"]
    assert r.returncode == 1, r
    assert "test_construction_stress[broken-construction]" in _failed(r), r
    stress = [d for d in r.saved_dirs() if d.parent.name == "construction_stress"]
    assert stress, r
    d = stress[0]
    assert d.name in ("rejected", "no-margin"), r
    case = json.loads((d / "case.json").read_text())
    assert case["certifier"] == "broken-construction" and 0 < case["eps"] < 1
    # the saved witness really is outside eps: recompute its error with numpy and the checker
    w, A, _ = load_certificate(d / "witness.npz")
    assert np.array_equal(A, np.load(d / "A.npy"))
    assert w.eps == case["eps"]
    if d.name == "rejected":
        assert np.abs(A - w.U @ w.W).sum(axis=1).max() > w.eps
    assert not check(A, w).ok
    v = _verify(d)
    assert v.returncode == 1, v.stdout + v.stderr
    assert "FAIL" in v.stdout
    rp = _replay(d)
    assert rp.returncode == 1 and "REPRODUCED" in rp.stdout, rp.stdout + rp.stderr


def test_broken_lower_test_fails_and_its_counterexamples_replay(runs):
    r = runs["broken-lower"]
    assert r.returncode == 1, r
    failed = _failed(r)
    assert "test_lower_soundness[off-by-one-lower-test]" in failed, r
    assert "test_lower_attack_resistance[off-by-one-lower-test]" in failed, r
    base = r.failures / "off-by-one-lower-test"
    soundness = base / "lower_soundness" / "rejected"
    attack = base / "lower_attack_resistance" / "attack-succeeded"
    saved = r.saved_dirs()
    assert soundness in saved and attack in saved, r
    for d in (soundness, attack):
        case = json.loads((d / "case.json").read_text())
        assert case["certifier"] == "off-by-one-lower-test"
        lower, A, header = load_certificate(d / "lower.npz")
        assert np.array_equal(A, np.load(d / "A.npy"))
        assert header["producer"] == "off-by-one-lower-test"
        assert lower.eps == case["eps"]
        assert not check(A, lower).ok  # the claim the suite caught is not provable
        v = _verify(d)
        assert v.returncode == 1, v.stdout + v.stderr
        assert "FAIL" in v.stdout
        rp = _replay(d)
        assert rp.returncode == 1 and "REPRODUCED" in rp.stdout, rp.stdout + rp.stderr
    assert "REFUTED" in _verify(attack).stdout
    # the attack's counterexample: a checked witness one rank below the claim
    lower, A, _ = load_certificate(attack / "lower.npz")
    w, A2, header = load_certificate(attack / "witness.npz")
    assert np.array_equal(A, A2)
    assert header["refutes"]["claimed"] == lower.rank
    assert w.rank < lower.rank and w.eps == lower.eps
    assert check(A, w).ok
    assert np.abs(A - w.U @ w.W).sum(axis=1).max() <= w.eps


def test_sizes_catch_a_construction_wrong_above_32_keys(runs):
    """Exact up to 32 keys: every drawn case (<= 16 x 16) passes; the real-size cases above
    32 keys fail, with the checker's rejection saved."""
    r = runs["sized"]
    assert r.returncode == 1, r
    failed, passed = _failed(r), _passed(r)
    assert "test_construction_stress[small-only]" in passed, r
    mine = {t for t in failed if "small-only" in t}
    assert mine and all(t.startswith("test_construction_sizes[small-only-") for t in mine), r
    assert not any("-32-" in t for t in mine), r
    assert "test_construction_sizes[small-only-gaussian-64-eps0.1]" in mine, r
    saved = [d for d in r.saved_dirs() if "small-only" in str(d)]
    assert saved and all(d.name in ("rejected", "no-margin") for d in saved), r
    assert all(d.parent.parent.name == "construction_sizes" for d in saved), r
    # one directory per failing case (DIR/<certifier>/<test>/<case>/<tag>): the failures of
    # several cases are all kept, each with its own operator and tolerance
    assert len(saved) == len(mine), r
    for d in saved:
        info = json.loads((d / "case.json").read_text())
        assert f"test_construction_sizes[small-only-{info['case']}]" in mine, (d, info)
        assert info["case"].endswith(f"-eps{info['eps']:g}"), (d, info)
        assert info["operator_id"].split("-")[0] == info["case"].split("-")[0], (d, info)
    rp = _replay(saved[0])
    assert rp.returncode == 1 and "REPRODUCED" in rp.stdout, rp.stdout + rp.stderr
    v = _verify(saved[0])
    assert v.returncode == 1 and "FAIL" in v.stdout, v.stdout + v.stderr
    # only constructions given: the lower-test suites are deselected
    assert not any("lower_soundness" in t or "lower_sizes" in t for t in passed | failed)
    _minilm_skipped_without_models(r)


@pytest.mark.models
def test_sizes_catch_a_construction_wrong_above_32_keys_on_minilm_heads(runs):
    r = runs["sized"]
    assert "test_construction_sizes[small-only-minilm-w128-L2H3-eps0.25]" in _failed(r), r


def test_coverage_fails_a_construction_that_always_declines(runs):
    r = runs["sized"]
    # all of its tests pass (a decline is not unsound) ...
    assert not any("[never" in t for t in _failed(r)), r
    assert "test_construction_sizes[never-gaussian-64-eps0.1]" in _passed(r), r
    # ... and the session fails on coverage, with the count: 50 drawn + 9 synthetic sized
    # cases (and 4 MiniLM ones, below), of which those given with Q and K are counted (the
    # planted ones are A only)
    fails = r.lines("FAIL coverage: ")
    never = [f for f in fails if f.startswith("never ")]
    # counted apart: the drawn cases and the real-size ones
    assert len(never) == 2 and all("answered 0 of" in f and "(0 %)" in f for f in never), r
    assert any(re.search(r"0 of \d+ real-size cases with factors", f) for f in never), r
    table = _summary(r)["never (construction)"]
    assert table["drawn<=16"][:2] == (50, 50) and table["gaussian-128"][:3] == (2, 2, "0/2"), r


@pytest.mark.models
def test_coverage_fails_a_construction_that_always_declines_on_minilm_heads(runs):
    r = runs["sized"]
    assert "test_construction_sizes[never-minilm-w64-L2H3-eps0.25]" in _passed(r), r
    never = [f for f in r.lines("FAIL coverage: ") if f.startswith("never ")]
    # 10 of the 13 real-size cases have factors: 6 synthetic, 4 MiniLM
    assert any("0 of 10 real-size cases with factors" in f for f in never), r
    assert _summary(r)["never (construction)"]["all"][:2] == (63, 63), r


def test_gauge_movement_of_a_construction_that_does_not_claim_it_is_reported(runs):
    """norm-landmarks reads Q and K (landmarks by norm) and sets gauge_invariant = False: its
    gauge test passes and the summary reports the movement; it answers every case with
    factors, so coverage passes too."""
    r = runs["sized"]
    passed = _passed(r)
    assert "test_construction_gauge[norm-landmarks]" in passed, r
    assert "test_construction_stress[norm-landmarks]" in passed, r
    assert not any("norm-landmarks" in t for t in _failed(r)), r
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("gauge norm-landmarks:"))
    assert "25 gauged examples" in line and "not claimed" in line and "reported, not gated" in line
    assert not any(f.startswith("norm-landmarks ") for f in r.lines("FAIL coverage: ")), r


def test_reference_constructions_at_real_sizes(runs):
    """nystrom (claims gauge invariance) passes everything; the random-feature constructions
    are sound but decline every real-size case (no feature count up to 4 min(m, N) meets
    eps), and the coverage gate says so."""
    r = runs["sized"]
    failed, passed = _failed(r), _passed(r)
    assert not any("nystrom" in t or "random-features" in t for t in failed), r
    assert "test_construction_sizes[nystrom-gaussian-128-eps0.25]" in passed, r
    table = _summary(r)
    ny = table["nystrom (construction)"]
    assert ny["gaussian-128"][:3] == (2, 0, "2/2") and ny["gaussian-128"][3] > 1, r
    assert table["random-features (construction)"]["gaussian-128"][:2] == (2, 2), r
    fails = r.lines("FAIL coverage: ")
    assert any(f.startswith("random-features answered ") for f in fails), r
    assert not any(f.startswith("nystrom ") for f in fails), r
    assert "gauge nystrom:" in r.stdout and "claimed: gated" in r.stdout


@pytest.mark.models
def test_reference_constructions_at_real_sizes_on_minilm_heads(runs):
    r = runs["sized"]
    assert "test_construction_sizes[nystrom-minilm-w128-L2H3-eps0.25]" in _passed(r), r
    table = _summary(r)
    ny = table["nystrom (construction)"]
    assert ny["minilm-w128"][:3] == (2, 0, "2/2") and ny["minilm-w128"][3] > 1, r
    assert table["random-features (construction)"]["minilm-w64"][:2] == (2, 2), r


@pytest.mark.parametrize("key", ["good", "sized"])
def test_the_suites_load_without_the_optional_extras(runs, key):
    """Loading the plugin, configuring the suites (certifiers, real-size cases including
    MiniLM widths) and collecting them imports no module of an optional extra: the cases that
    need one import it when they run, and are skipped with the reason where it is missing."""
    r = runs[key].wait()
    assert json.loads(r.probe.read_text()) == [], r


def test_the_runs_share_their_reference_brackets(runs):
    """The four runs that bracket cases share one reference cache: every bracket one of them
    stored and another needed was read back (and re-checked) instead of computed again, and
    no stored entry was refused."""
    counts = []
    for key in ("good", "sized", "broken-construction", "broken-lower"):
        r = runs[key].wait()
        got = re.search(r"reference store \S+: (\d+) brackets read back and checked again, "
                        r"(\d+) computed and stored, (\d+) stored entries refused", r.stdout)
        assert got, r
        counts.append(tuple(map(int, got.groups())))
    assert sum(c[0] for c in counts) > 0 and all(c[1] > 0 or c[0] > 0 for c in counts), counts
    assert all(c[2] == 0 for c in counts), counts


@pytest.mark.parametrize("key, option", [("bad-sizes", "--softrank-sizes"),
                                         ("bad-coverage", "--softrank-min-coverage"),
                                         ("bad-cache", "--softrank-reference-store"),
                                         ("same-names", "names must differ")])
def test_bad_suite_options_are_usage_errors(runs, key, option):
    r = runs[key]
    assert r.returncode == 4, r
    assert option in r.stdout + r.stderr, r


@pytest.mark.parametrize("key", ["no-module", "no-object", "not-a-spec", "no-builtin"])
def test_bad_spec_is_a_usage_error(runs, key):
    r = runs[key]
    assert r.returncode == 4, r
    out = r.stdout + r.stderr
    assert "--softrank-certifier" in out, r
    if key != "no-builtin":
        assert r.spec in out, r
    assert not r.failures.exists()


@pytest.mark.parametrize("claimed, refuted", [(3, True), (2, False)])
def test_verify_reports_a_saved_refutation(tmp_path, claimed, refuted):
    """A counterexample witness names the claim it refutes; ``verify`` exits non-zero exactly
    when the witness holds and its rank is below the claim."""
    m, N, k, delta, eps = 6, 6, 2, 0.05, 0.2
    op = planted_blocks(m, N, k, delta, seed=0)
    U = np.repeat(np.eye(k), m // k, axis=0)                    # queries 0-2 | 3-5
    W = np.repeat(np.eye(k), N // k, axis=1) / (N // k)         # uniform on keys 0-2 | 3-5
    w = UpperWitness(eps, U, W, "hand")
    # error delta ||P - B|| < 2 delta = 0.1 <= eps: rank 2 holds, so r_eps >= 3 is false
    assert check(op.A, w).ok
    save_certificate(tmp_path / "witness.npz", w, op.A, producer="test",
                     refutes={"claimed": claimed, "eps": eps, "by": "some-lower-test"})
    v = _verify(tmp_path)
    assert v.returncode == (1 if refuted else 0), v.stdout + v.stderr
    assert ("REFUTED" in v.stdout) is refuted, v.stdout


def test_plugin_import_is_light(tmp_path):
    code = textwrap.dedent("""
        import json, sys
        import softrank.suites.plugin as p
        assert callable(p.pytest_addoption) and callable(p.pytest_configure)
        heavy = ["numpy", "hypothesis", "scipy", "mpmath", "flint"] + json.loads(sys.argv[1])
        print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
    """)
    out = subprocess.run([sys.executable, "-c", code, json.dumps(_EXTRA_MODULES)],
                         cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


# ------------------------------------------------------------------ protocol, in process


@pytest.fixture
def usermod(tmp_path, monkeypatch):
    """Write a module into a fresh sys.path entry; returns its import name."""
    counter = iter(range(1000))

    def make(source):
        name = f"_softrank_usermod_{os.getpid()}_{tmp_path.name}_{next(counter)}"
        name = re.sub(r"\W", "_", name)
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        monkeypatch.delitem(sys.modules, name, raising=False)
        return name

    monkeypatch.syspath_prepend(str(tmp_path))
    return make


def test_load_certifier_accepts_a_construction_and_a_lower_test(usermod):
    mod = usermod("""
        class Con:
            name = "con"
            def witness(self, operator, eps):
                return None

        class Both:
            def witness(self, operator, eps):
                return None
            def certify(self, operator, eps):
                return None

        class Holder:
            class Inner:
                def certify(self, operator, eps):
                    return None
    """)
    c = load_certifier(f"{mod}:Con")
    assert isinstance(c, Certifier) and c.name == "con" and c.spec == f"{mod}:Con"
    assert c.is_construction and not c.is_lower_test
    b = load_certifier(f"{mod}:Both")
    assert b.is_construction and b.is_lower_test and b.name == "Both"
    i = load_certifier(f"{mod}:Holder.Inner")
    assert i.is_lower_test and not i.is_construction


def test_load_certifier_rejects_objects_without_the_protocol(usermod):
    mod = usermod("""
        class NoMethods:
            def certify_me(self, operator, eps):
                return None

        class NotCallable:
            witness = 3

        class NeedsArgs:
            def __init__(self, x):
                self.x = x
            def witness(self, operator, eps):
                return None
    """)
    for attr in ("NoMethods", "NotCallable", "NeedsArgs"):
        with pytest.raises(InvalidArgumentError) as ei:
            load_certifier(f"{mod}:{attr}")
        assert f"{mod}:{attr}" in str(ei.value)
    with pytest.raises(InvalidArgumentError, match="witness.*certify|certify.*witness"):
        as_certifier(object())


@pytest.mark.parametrize("spec", [None, 3, "", "x", "a:b:c", "mod:", ":obj", "a b:c"])
def test_load_certifier_malformed_spec(spec):
    with pytest.raises(InvalidArgumentError, match="--softrank-certifier"):
        load_certifier(spec)


def _op():
    return planted(5, 4, 2, 0.1, seed=0)  # A is 5 x 4


class _Returns:
    def __init__(self, value=None, exc=None):
        self.value, self.exc = value, exc
        self.name = "stub"

    def witness(self, operator, eps):
        if self.exc is not None:
            raise self.exc
        return self.value(operator) if callable(self.value) else self.value

    certify = witness


@pytest.mark.parametrize("out", [
    lambda op: (np.ones((5, 2)), np.ones((3, 4))),        # inner dimensions differ
    lambda op: (np.ones((4, 2)), np.ones((2, 4))),        # U has the wrong number of rows
    lambda op: (np.ones((5, 2)), np.ones((2, 5))),        # W has the wrong number of columns
    lambda op: (np.ones(5), np.ones((1, 4))),             # U is 1-D
    lambda op: (np.ones((5, 1, 1)), np.ones((1, 4))),     # U is 3-D
    lambda op: (np.full((5, 1), np.nan), np.ones((1, 4))),
    lambda op: (np.ones((5, 1)), np.full((1, 4), np.inf)),
    lambda op: (op.A, np.eye(4), np.eye(4)),              # three items
    lambda op: 42,
    lambda op: "UW",                                      # unpacks, not numeric
    lambda op: ([[1.0, 2.0], [3.0]], np.ones((2, 4))),    # ragged
])
def test_witness_protocol_violations_raise_certifier_error(out):
    c = as_certifier(_Returns(out), "t:stub")
    with pytest.raises(CertifierError) as ei:
        c.witness(_op(), 0.2)
    assert isinstance(ei.value, AssertionError) and isinstance(ei.value, SoftrankError)
    assert "stub" in str(ei.value)


def test_witness_that_raises_is_a_certifier_error():
    c = as_certifier(_Returns(exc=ZeroDivisionError("boom")), "t:stub")
    with pytest.raises(CertifierError, match="ZeroDivisionError: boom") as ei:
        c.witness(_op(), 0.2)
    assert isinstance(ei.value.__cause__, ZeroDivisionError)


def test_witness_valid_returns_are_wrapped():
    op = _op()
    c = as_certifier(_Returns(lambda o: (o.A.tolist(), np.eye(4))), "t:stub")
    w = c.witness(op, 0.2)
    assert isinstance(w, UpperWitness) and w.eps == 0.2 and w.rank == 4 and w.method == "stub"
    assert check(op.A, w).ok
    c2 = as_certifier(_Returns(lambda o: UpperWitness(0.2, o.A, np.eye(4), "mine")), "t:stub")
    w2 = c2.witness(op, 0.2)
    assert w2.rank == 4 and np.array_equal(w2.U, op.A)
    assert as_certifier(_Returns(None), "t:stub").witness(op, 0.2) is None


def test_certify_rejects_wrong_eps_and_non_certificates():
    op = _op()
    wrong_eps = as_certifier(_Returns(TrivialCertificate(0.1)), "t:stub")
    with pytest.raises(CertifierError, match="eps"):
        wrong_eps.certify(op, 0.2)
    for bad in (3, "frobenius", (np.ones((5, 1)), np.ones((1, 4))),
                UpperWitness(0.2, op.A, np.eye(4))):  # an upper witness is not a lower test
        with pytest.raises(CertifierError) as ei:
            as_certifier(_Returns(bad), "t:stub").certify(op, 0.2)
        assert isinstance(ei.value, AssertionError)
    with pytest.raises(CertifierError, match="RuntimeError"):
        as_certifier(_Returns(exc=RuntimeError("x")), "t:stub").certify(op, 0.2)


def test_certify_valid_returns_pass_through():
    op = _op()
    cert = FrobeniusCertificate(0.2, np.arange(5), 0, "mine")
    c = as_certifier(_Returns(cert), "t:stub")
    assert c.certify(op, 0.2) is cert
    assert as_certifier(_Returns(None), "t:stub").certify(op, 0.2) is None
    # the protocol checks form, not soundness: that is the suites' job (with the checker)
    # sum_j sigma_j^2 = ||A||_F^2 >= m / N = 1.25 > m eps^2 = 0.2: this one even holds
    assert check(op.A, cert).ok


def test_certify_rejects_a_duck_typed_non_certificate():
    class Fake:
        kind = "trivial"  # looks like a certificate kind, is not one

    with pytest.raises(CertifierError):
        as_certifier(_Returns(Fake()), "t:stub").certify(_op(), 0.2)


def test_failure_kind_is_given_not_guessed_from_words(monkeypatch, tmp_path):
    """A certifier named 'disagree-raised' whose certificate the checker rejects is saved as
    'rejected': the kind comes from the caller, never from words in names or messages."""
    import softrank.suites.suite as suite
    from softrank.suites.config import CONFIG

    monkeypatch.setattr(CONFIG, "failures_dir", str(tmp_path / "failures"))
    op = planted(8, 8, 2, 0.0, seed=0)
    with pytest.raises(suite.SuiteFailure):
        suite._fail("disagree-raised", "lower_sound", op, 0.25, "disagree-raised: claims "
                    "r_eps >= 3 on a planted instance, the gauge was not monotone",
                    kind="rejected")
    saved = [p.name for p in (tmp_path / "failures").rglob("*") if p.is_dir()]
    assert "rejected" in saved
    assert not {"arithmetics-disagree", "raised", "gauge", "not-monotone",
                "above-planted-rank"} & set(saved)
    with pytest.raises(ValueError, match="kind"):
        suite._fail("x", "lower_sound", op, 0.25, "reason", kind="guess")


def test_certifier_error_kinds_survive_pickling():
    import pickle

    e = CertifierError("c: certify raised ValueError: boom", kind="raised")
    e2 = pickle.loads(pickle.dumps(e))
    assert e2.kind == "raised" and str(e2) == str(e)

"""The pytest plugin end to end, the certifier protocol, and the plugin's import cost.

End to end: ``pytest --softrank-certifier SPEC --softrank-profile ci`` runs in a subprocess
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

REPO = Path(__file__).resolve().parents[1]
SOFTRANK = Path(sys.executable).with_name("softrank")
TIMEOUT = 600

SPECS = {
    "good-construction": "examples.my_construction:MyConstruction",
    "good-lower": "examples.my_lower_test:MyLowerTest",
    "broken-construction": "examples.broken_construction:BrokenConstruction",
    "broken-lower": "examples.broken_lower_test:OffByOneLowerTest",
    "no-module": "nosuchmodule:X",
    "no-object": "examples.my_construction:Nope",
    "not-a-spec": "not-a-spec",
    "no-builtin": "builtin:nope",
}


def _env():
    env = dict(os.environ)
    for var in ("PYTHONPATH", "PYTEST_ADDOPTS", "SOFTRANK_PROFILE"):
        env.pop(var, None)
    # several pytest processes run at once: one BLAS thread each avoids oversubscription
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    return env


class Run:
    def __init__(self, key, spec, root):
        self.key, self.spec = key, spec
        self.failures = root / key / "f"
        self.failures.parent.mkdir(parents=True)
        self._out = open(root / key / "stdout", "w+")
        self._err = open(root / key / "stderr", "w+")
        cmd = [sys.executable, "-m", "pytest", "--softrank-certifier", spec,
               "--softrank-profile", "ci", "-p", "no:cacheprovider", "-q",
               "--softrank-failures", str(self.failures), "-rA"]
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=self._out,
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
    started = {k: Run(k, spec, root) for k, spec in SPECS.items()}
    yield started
    for r in started.values():  # only our own processes, by handle
        if r.proc.poll() is None:
            r.proc.kill()
            r.proc.wait()


def _failed(run):
    return {re.sub(r"^.*::", "", ln.split(" - ")[0]) for ln in run.lines("FAILED ")}


def _passed(run):
    return {re.sub(r"^.*::", "", ln) for ln in run.lines("PASSED ")}


def _verify(path):
    return subprocess.run([str(SOFTRANK), "verify", str(path)], cwd=path, env=_env(),
                          capture_output=True, text=True, timeout=TIMEOUT)


def _replay(path):
    # from the repository root, where the examples' modules are importable
    return subprocess.run([sys.executable, "-m", "softrank.suites.replay", str(path)], cwd=REPO,
                          env=_env(), capture_output=True, text=True, timeout=TIMEOUT)


# ------------------------------------------------------------------ end to end


def test_sound_construction_passes(runs):
    r = runs["good-construction"]
    assert r.returncode == 0, r
    passed = _passed(r)
    assert "test_construction_stress[my-construction]" in passed, r
    assert "test_construction_gauge[my-construction]" in passed, r
    assert not any("lower_soundness" in t for t in passed)  # lower suites deselected
    assert not _failed(r)
    assert not r.failures.exists() or not any(r.failures.rglob("*"))


def test_sound_lower_test_passes(runs):
    r = runs["good-lower"]
    assert r.returncode == 0, r
    passed = _passed(r)
    for t in ("test_lower_soundness", "test_lower_attack_resistance", "test_lower_gauge"):
        assert f"{t}[my-lower-test]" in passed, r
    assert not any("construction_stress" in t for t in passed)
    assert "attacks:" in r.stdout and " 0 succeeded" in r.stdout, r
    assert not r.failures.exists() or not any(r.failures.rglob("*"))


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
        heavy = ["torch", "transformers", "numpy", "hypothesis", "scipy", "mpmath", "flint"]
        print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=120)
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

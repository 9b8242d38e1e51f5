"""Preloaded into the test cluster's workers (``dask worker --preload``): makes each worker a
machine of its own, and plants the faults a test asks for.

* ``SOFTRANK_TEST_HIDDEN``: a directory (the client's side of the test) that is absent on this
  worker: opening, creating, listing, renaming or removing anything under it raises
  ``FileNotFoundError``, as on a machine that does not have it (``os.stat`` is not an audit
  event, and reveals nothing that could be written).
* ``SOFTRANK_TEST_NO_SOFTRANK=1``: softrank cannot be imported here.
* ``SOFTRANK_TEST_ENGINE=KEY``: this worker's engine key is ``KEY`` (as with another version
  of softrank or of its solvers).
* ``SOFTRANK_TEST_REFUTE=N``: the attack on every lower certificate of an ``N x N`` operator
  "succeeds", with the upper witness cut to one rank below the certificate (a fake
  counterexample, so that one travels home).
* ``SOFTRANK_TEST_KILL=ID``: the worker process ends at once when it starts the cells of the
  operator ``ID``.
"""

import os
import sys

_HIDDEN = os.environ.get("SOFTRANK_TEST_HIDDEN")
_EVENTS = {"open", "os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir",
           "os.listdir", "os.scandir", "os.chdir", "shutil.copyfile", "os.symlink",
           "os.chmod", "os.utime", "os.truncate", "shutil.rmtree", "os.link"}


def _hide(event, args):
    if event not in _EVENTS or not args:
        return
    for a in args[:2]:
        if isinstance(a, (str, bytes, os.PathLike)):
            p = os.path.abspath(os.fsdecode(a))
            if p == _HIDDEN or p.startswith(_HIDDEN + os.sep):
                raise FileNotFoundError(2, "No such file or directory (another machine)", p)


if _HIDDEN:
    _HIDDEN = os.path.abspath(_HIDDEN)
    sys.addaudithook(_hide)

if os.environ.get("SOFTRANK_TEST_NO_SOFTRANK") == "1":
    for name in [m for m in sys.modules if m == "softrank" or m.startswith("softrank.")]:
        del sys.modules[name]
    sys.modules["softrank"] = None  # import softrank raises ImportError

if os.environ.get("SOFTRANK_TEST_ENGINE"):
    import softrank.refstore.keys as _keys

    _keys.engine_key = lambda: os.environ["SOFTRANK_TEST_ENGINE"]

_REFUTE = os.environ.get("SOFTRANK_TEST_REFUTE")
if _REFUTE:
    from types import SimpleNamespace

    import numpy as np

    import softrank.audit.attack_stage as _stage
    from softrank.checker import UpperWitness

    def _fake_attack(A, eps, certificate, upper_witness=None, effort="quick", time_limit=None):
        if A.shape != (int(_REFUTE), int(_REFUTE)) or upper_witness is None:
            return _real(A, eps, certificate, upper_witness=upper_witness, effort=effort,
                         time_limit=time_limit)
        r = certificate.rank - 1
        w = upper_witness
        cut = UpperWitness(U=np.ascontiguousarray(w.U[:, :r]), W=np.ascontiguousarray(w.W[:r]),
                           eps=w.eps, method="fake-attack")
        return SimpleNamespace(succeeded=True, failures=[], best_error=0.0, seconds=0.0,
                               witness=cut, cut_short=False)

    if not hasattr(_stage, "_test_real_attack"):  # a preload may be imported twice
        _stage._test_real_attack = _stage.attack
    _real = _stage._test_real_attack
    _stage.attack = _fake_attack

_KILL = os.environ.get("SOFTRANK_TEST_KILL")
if _KILL:
    import softrank.harness.cluster as _cluster

    if not hasattr(_cluster, "_test_real_run"):  # a preload may be imported twice
        _cluster._test_real_run = _cluster.run_operator
    _run = _cluster._test_real_run

    def _killing(op, config, out=None):
        if op.operator_id == _KILL:
            os._exit(13)
        return _run(op, config, out)

    _cluster.run_operator = _killing

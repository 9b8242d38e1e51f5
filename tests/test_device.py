"""The GPU path of the reweighted solves (softrank.certifiers.linalg, docs/benchmarks.md#gpu):
the torch code run on the CPU against each system solved alone, the device setting, and a
bracket whose solves all go through torch. A GPU is not needed: where one is present the same
code runs there (``SOFTRANK_DEVICE``)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import require_extra
from softrank.certifiers import linalg
from softrank.errors import InvalidArgumentError


def _torch_cpu():
    require_extra("models", "torch")
    import torch

    return torch.device("cpu")


def _alone(X, w, b):
    k = X.shape[0]
    G = (X * w) @ X.T
    G += 1e-12 * max(np.trace(G) / k, 1e-300) * np.eye(k)
    return np.linalg.solve(G, b)


@pytest.mark.parametrize("k, n, rows", [(1, 5, 3), (3, 7, 11), (40, 90, 11), (60, 50, 9)])
def test_torch_solves_match_each_system_solved_alone(k, n, rows, monkeypatch):
    dev = _torch_cpu()
    rng = np.random.default_rng(k)
    X = rng.standard_normal((k, n))
    wt = rng.uniform(0.1, 2.0, size=(rows, n))
    B = rng.standard_normal((rows, k))
    monkeypatch.setattr(linalg, "BLOCK_ENTRIES", 2 * k * max(k, n))  # blocks of two rows
    got = linalg._torch_solves(X, wt, B, dev)
    assert got.shape == (rows, k)
    for i in range(rows):
        want = _alone(X, wt[i], B[i])
        if k <= n:
            assert np.allclose(got[i], want, rtol=1e-9, atol=1e-12)
        else:  # rank n < k: only the ridge makes it solvable (condition ~1e12); the answer
            # is judged by its backward error, as a stable solver's must be small
            G = (X * wt[i]) @ X.T
            G += 1e-12 * np.trace(G) / k * np.eye(k)
            res = np.linalg.norm(G @ got[i] - B[i])
            assert res <= 1e-12 * np.linalg.norm(G, 2) * np.linalg.norm(got[i])


def test_torch_solves_fall_back_like_the_compiled_path(monkeypatch):
    dev = _torch_cpu()
    rng = np.random.default_rng(3)
    k, n = 6, 20
    X = rng.standard_normal((k, n))
    wt = rng.uniform(0.1, 2.0, size=(8, n))
    B = rng.standard_normal((8, k))
    wt[2, 3] = np.nan   # not finite: a NaN answer for that system only
    wt[5, 1] = np.inf
    wt[4] = -wt[4]      # negative definite: Cholesky fails, LU solves it
    with np.errstate(invalid="ignore"):
        got = linalg._torch_solves(X, wt, B, dev)
        cpu = linalg.weighted_solves(X, wt, B)
    assert np.isnan(got).any(axis=1).tolist() == [False, False, True, False, False, True,
                                                  False, False]
    ok = [0, 1, 3, 4, 6, 7]
    assert np.allclose(got[ok], cpu[ok], rtol=1e-10)
    assert np.allclose(got[4], _alone(X, wt[4], B[4]), rtol=1e-10)
    # a singular system is named by its row, as on the CPU: X diag(w) X^T = diag(-r, 0, ..)
    # plus the ridge r = 1e-12 * 1e-300 is diag(0, r, ..., r)
    X = np.eye(k, 40)
    wt = np.ones((5, 40))
    wt[3, :] = 0.0
    wt[3, 0] = -(1e-12 * 1e-300)
    monkeypatch.setattr(linalg, "BLOCK_ENTRIES", 2 * k * 40)
    with pytest.raises(np.linalg.LinAlgError, match="system 3 is singular"):
        linalg._torch_solves(X, wt, np.ones((5, k)), dev)


def _setting(monkeypatch, value):
    monkeypatch.setenv("SOFTRANK_DEVICE", value)
    linalg._device_for.cache_clear()


def test_device_setting(monkeypatch):
    for bad in ("gpu", "cuda:0", "0"):
        _setting(monkeypatch, bad)
        with pytest.raises(InvalidArgumentError, match=f"SOFTRANK_DEVICE: expected one of "
                                                       f"'auto', 'cpu', 'cuda', got '{bad}'"):
            linalg.solve_device()
    _setting(monkeypatch, "cpu")
    assert linalg.solve_device() is None
    # auto without an NVIDIA driver: the CPU, whatever torch says
    monkeypatch.setattr(linalg, "_nvidia_present", lambda: False)
    _setting(monkeypatch, "auto")
    assert linalg.solve_device() is None
    _setting(monkeypatch, " AUTO ")
    assert linalg.solve_device() is None
    linalg._device_for.cache_clear()


def test_cuda_without_a_gpu_is_refused(monkeypatch):
    require_extra("models", "torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    _setting(monkeypatch, "cuda")
    try:
        with pytest.raises(InvalidArgumentError,
                           match=r"SOFTRANK_DEVICE: 'cuda' asked for, but "
                                 r"torch.cuda.is_available\(\) is False"):
            linalg.solve_device()
    finally:
        linalg._device_for.cache_clear()


def test_cpu_setting_never_imports_torch():
    code = ("import sys, numpy as np\n"
            "from softrank import bracket\n"
            "from softrank.certifiers import linalg\n"
            "linalg.GPU_MIN_WORK = 0\n"
            "A = np.full((6, 6), 1 / 6); A[:3] = np.eye(6)[:3] * 0.5 + 1 / 12\n"
            "bracket(A, 0.25)\n"
            "linalg.weighted_solves(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)))\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    env = dict(os.environ, SOFTRANK_DEVICE="cpu", SOFTRANK_REFERENCE_STORE="off")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_bracket_with_every_solve_in_torch_is_checked(monkeypatch):
    # the device path end to end, on the CPU: every weighted solve goes through torch, and
    # each end is a checked certificate that brackets the planted rank
    from softrank import bracket
    from softrank.generators.synthetic import planted

    dev = _torch_cpu()
    calls = []
    real = linalg._torch_solves

    def spy(X, wt, B, device):
        calls.append(X.shape)
        return real(X, wt, B, device)

    monkeypatch.setattr(linalg, "GPU_MIN_WORK", 0)
    monkeypatch.setattr(linalg, "solve_device", lambda: dev)
    monkeypatch.setattr(linalg, "_torch_solves", spy)
    op = planted(m=32, N=32, k=4, delta=0.04, seed=4)
    for br in bracket(op, [0.1, 0.25]):
        assert br.verdict in ("open", "resolved")
        assert br.checks["lower"].ok and br.checks["upper"].ok
        assert br.lower <= br.upper
    assert calls, "no solve went through torch"


def test_bad_device_setting_stops_bracket_and_the_cli(tmp_path, monkeypatch):
    from softrank import bracket

    _setting(monkeypatch, "tpu")
    try:
        with pytest.raises(InvalidArgumentError, match="SOFTRANK_DEVICE: .* got 'tpu'"):
            bracket(np.full((4, 4), 0.25), 0.25)
    finally:
        linalg._device_for.cache_clear()
    np.save(tmp_path / "a.npy", np.full((4, 4), 0.25))
    env = dict(os.environ, SOFTRANK_DEVICE="tpu", SOFTRANK_REFERENCE_STORE="off")
    r = subprocess.run([sys.executable, "-m", "softrank.harness.cli", "bracket",
                        str(tmp_path / "a.npy"), "--eps", "0.25"],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip() == ("softrank bracket: error: SOFTRANK_DEVICE: expected one of "
                                "'auto', 'cpu', 'cuda', got 'tpu'"), r.stderr


def test_torch_solves_take_any_layout(monkeypatch):
    # negative strides, read-only and mixed dtypes: copied to contiguous float64 first, as
    # weighted_solves reads them on the CPU
    dev = _torch_cpu()
    rng = np.random.default_rng(7)
    X = rng.standard_normal((5, 30))
    wt = rng.uniform(0.1, 2.0, size=(9, 30))
    B = rng.standard_normal((9, 5))
    want = linalg.weighted_solves(X[:, ::-1], wt[:, ::-1], B[::-1])
    ro = wt.copy()
    ro.flags.writeable = False
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = linalg._torch_solves(X[:, ::-1], wt[:, ::-1], B[::-1], dev)
        assert np.allclose(got, want, rtol=1e-12)
        got = linalg._torch_solves(X.astype(np.float32), ro, B.astype(int), dev)
    assert np.allclose(got, linalg.weighted_solves(X.astype(np.float32), ro, B.astype(int)),
                       rtol=1e-12)
    monkeypatch.setattr(linalg, "GPU_MIN_WORK", 0)
    monkeypatch.setattr(linalg, "solve_device", lambda: dev)
    assert np.allclose(linalg.weighted_solves(X[:, ::-1], wt[:, ::-1], B[::-1]), want,
                       rtol=1e-12)


def test_summary_names_the_solve_device(monkeypatch):
    from softrank.harness.report import summarize

    _setting(monkeypatch, "cpu")
    try:
        assert summarize([], "p", [0.25], 1.0, 0)["machine"]["solve_device"] == "cpu"
        _setting(monkeypatch, "tpu")
        assert summarize([], "p", [0.25], 1.0, 0)["machine"]["solve_device"] == "invalid"
    finally:
        linalg._device_for.cache_clear()

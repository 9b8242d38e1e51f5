"""One audit per output directory: the lock file, stale locks, what an unfinished run is
called, and what a refused --resume names."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from softrank.errors import SoftrankError
from softrank.harness.cli import main

FAST = ["--workers", "1", "--quiet", "--study-boot", "0", "--attacks", "none"]


def _blocks(k, size):
    n = k * size
    B = np.zeros((n, n))
    for b in range(k):
        B[b * size:(b + 1) * size, b * size:(b + 1) * size] = 1.0 / size
    return B


def _panel(tmp_path, names=("blocks",), eps="[0.2, 0.5]"):
    """A panel of one [[matrix]] per name (block matrices, a cell takes well under a second)."""
    text = f"eps = {eps}\n"
    for i, name in enumerate(names):
        np.save(tmp_path / f"{name}.npy", _blocks(3 + i, 4))
        text += f"[[matrix]]\npath = \"{name}.npy\"\nfamily = \"{name}\"\n"
    p = tmp_path / "panel.toml"
    p.write_text(text)
    return p


def _audit(p, out, *extra):
    return main(["audit", "--panel", str(p), "--out", str(out), *FAST, *extra])


def _write_lock(out, pid, host=None, started="2026-01-02T03:04:05Z"):
    out.mkdir(parents=True, exist_ok=True)
    f = out / "softrank.lock"
    f.write_text(json.dumps({"pid": pid, "host": host or socket.gethostname(),
                             "started": started, "command": "softrank audit ..."}))
    return f


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _err_line(capsys):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def _interrupt(out, drop_eps=None):
    """Make a finished run's ledger look like one whose process died: status 'running',
    and the cells of ``drop_eps`` (if given) not yet done."""
    with sqlite3.connect(out / "ledger.sqlite") as conn:
        conn.execute("UPDATE run SET value = 'running' WHERE key = 'status'")
        if drop_eps is not None:
            conn.execute("DELETE FROM cells WHERE eps = ?", (drop_eps,))
    conn.close()


# ------------------------------------------------------------------------------ a live lock

@pytest.mark.parametrize("resume", [False, True])
def test_a_live_lock_refuses_a_second_run(tmp_path, capsys, resume):
    """A lock naming a live process (this one) on this host: the run is refused with one
    line naming the pid, host and start time, with or without --resume; nothing is
    touched, the lock stays."""
    p = _panel(tmp_path)
    out = tmp_path / "o"
    assert _audit(p, out) == 0
    before = sorted(x.name for x in out.iterdir())
    report = (out / "report.md").read_text()
    lock = _write_lock(out, os.getpid())
    text = lock.read_text()
    capsys.readouterr()
    assert _audit(p, out, *(["--resume"] if resume else [])) == 2
    err = _err_line(capsys)
    assert err.startswith("softrank audit: error: --out: ")
    assert "in use by a running audit" in err and f"pid {os.getpid()}" in err
    assert socket.gethostname() in err and "2026-01-02T03:04:05Z" in err
    assert "--resume" not in err  # no invitation to run beside it
    assert lock.read_text() == text
    assert sorted(x.name for x in out.iterdir()) == sorted(before + ["softrank.lock"])
    assert (out / "report.md").read_text() == report


def test_a_live_lock_refuses_run_audit_too(tmp_path):
    """The library entry (also used by `softrank study`) takes the same lock."""
    from softrank.generators.synthetic import planted_blocks
    from softrank.audit import AuditConfig
    from softrank.harness.runner import run_audit

    out = tmp_path / "o"
    _write_lock(out, os.getpid())
    op = planted_blocks(12, 12, 2, 0.05, seed=0)
    with pytest.raises(SoftrankError, match=f"in use by a running audit \\(pid {os.getpid()}"):
        run_audit([op], AuditConfig(eps=(0.5,), attacks="none"), out, workers=1,
                  progress=False)
    assert not (out / "ledger.sqlite").exists()


def _has_identity(ledger):
    """Whether the ledger exists and its run's identity is written."""
    if not ledger.exists():
        return False
    try:
        conn = sqlite3.connect(ledger, timeout=5)
        try:
            return conn.execute("SELECT 1 FROM run WHERE key = 'identity'").fetchone() is not None
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def _signal_status(pid: int) -> str:
    """The signal lines of /proc/PID/status (pending, blocked, ignored, caught) and the
    process's threads, for a failure message; empty where /proc is not there."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return ", ".join(line.strip().replace(":\t", " ") for line in f
                             if line.startswith(("Sig", "ShdPnd", "Threads", "State")))
    except OSError:
        return ""


def test_a_running_audit_holds_its_directory(tmp_path, capsys):
    """While an audit runs (another process), a second one on its --out is refused, with or
    without --resume, naming that process; stopped by SIGTERM it releases the lock, and its
    unfinished ledger is then called interrupted, not running."""
    p = tmp_path / "slow.toml"
    # a construction that sleeps 60 s per cell keeps the run going whatever the machine's
    # load (with 5 s, the 8 cells take about 55 s, and in one full-suite run the child
    # returned 0 instead of 130, as if it had ended first); SIGTERM cuts the sleep, so the
    # test does not wait for it
    (tmp_path / "sleepymod.py").write_text(
        "import time\nclass Sleepy:\n    name = 'sleepy'\n"
        "    def witness(self, operator, eps):\n        time.sleep(60)\n        return None\n")
    p.write_text("eps = [0.2, 0.5]\n[[certifier]]\nspec = 'sleepymod:Sleepy'\npath = '.'\n" + "".join(
        f"[[synthetic]]\nfamily = 'gaussian_head'\nm = 8\nN = 8\nseed = {s}\n" for s in range(4)))
    out = tmp_path / "o"
    # the CLI as a program (argv from sys.argv, so it installs its SIGTERM handler), with
    # faulthandler on SIGUSR1: if the run outlives the signal, the failure shows its stacks
    child = ("import faulthandler, runpy, signal\n"
             "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
             "runpy.run_module('softrank.harness.cli', run_name='__main__', alter_sys=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", child, "audit", "--panel", str(p), "--out",
                             str(out), "--workers", "1", "--quiet", "--attacks", "none"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        t = time.monotonic()
        while not _has_identity(out / "ledger.sqlite"):  # the run has started its ledger
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() - t < 120, "the audit did not start"
            time.sleep(0.05)
        capsys.readouterr()
        for extra in ([], ["--resume"]):
            assert _audit(p, out, *extra) == 2
            err = _err_line(capsys)
            assert "in use by a running audit" in err and f"pid {proc.pid} " in err, err
        assert proc.poll() is None  # refused while it was still running
        held = json.loads((out / "softrank.lock").read_text())
        assert held["pid"] == proc.pid and held["host"] == socket.gethostname()
        assert "audit" in held["command"] and held["started"].endswith("Z")
        proc.send_signal(signal.SIGTERM)
        t_sig = time.monotonic()
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            status = _signal_status(proc.pid)
            proc.send_signal(signal.SIGUSR1)  # faulthandler: every thread's stack on stderr
            time.sleep(2)
            proc.kill()
            proc.wait()
            err = proc.stderr.read()
            # a dropped stop is printed as "Exception ignored in ...": shown first, as the
            # stacks that follow may be cut from a long log
            dropped = [ln for ln in err.splitlines() if "Exception ignored" in ln]
            pytest.fail(f"the audit outlived SIGTERM by 120 s ({status}; dropped: {dropped}); "
                        f"its stderr:\n{err}")
        assert rc == 130, (rc, time.monotonic() - t_sig, proc.stderr.read())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (out / "softrank.lock").exists()  # released on SIGTERM
    assert not (out / "brackets.csv").exists()
    assert _audit(p, out) == 2
    err = _err_line(capsys)
    assert "unfinished audit (interrupted" in err and "of 8 cells kept" in err
    assert "(running" not in err and "--resume" in err


def test_a_stop_whose_interrupt_was_dropped_is_raised_again(tmp_path):
    """A SIGTERM whose KeyboardInterrupt is dropped (Python drops one raised inside a
    finaliser or a callback from C; here the construction swallows it) still stops the run:
    the stop is recorded and raised again when the construction returns (softrank.stop).
    Without that, the run would go on to the next cell's 60 s sleep."""
    (tmp_path / "deafmod.py").write_text(
        "import pathlib, time\nclass Deaf:\n    name = 'deaf'\n"
        "    def witness(self, operator, eps):\n"
        "        pathlib.Path('asleep').touch()\n"
        "        try:\n            time.sleep(60)\n"
        "        except KeyboardInterrupt:\n            pass  # the stop's exception, dropped\n"
        "        return None\n")
    p = tmp_path / "deaf.toml"
    p.write_text("eps = [0.2, 0.5]\n[[certifier]]\nspec = 'deafmod:Deaf'\npath = '.'\n" + "".join(
        f"[[synthetic]]\nfamily = 'gaussian_head'\nm = 8\nN = 8\nseed = {s}\n" for s in range(4)))
    child = "import runpy\nrunpy.run_module('softrank.harness.cli', run_name='__main__', alter_sys=True)\n"
    proc = subprocess.Popen([sys.executable, "-c", child, "audit", "--panel", str(p), "--out",
                             str(tmp_path / "o"), "--workers", "1", "--quiet", "--attacks", "none"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        t = time.monotonic()
        while not (tmp_path / "asleep").exists():  # inside the construction's sleep
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() - t < 120, "the construction was not reached"
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=45)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    assert rc == 130, err
    assert "softrank audit: interrupted" in err


def test_stop_request_records_and_raises(monkeypatch):
    """The handler raises, and what it recorded makes every later check raise: the engine's
    method calls and the audit pipeline's stages (a library caller's state is untouched until
    a handler ran)."""
    from softrank import stop
    from softrank.audit.pipeline import run_stages
    from softrank.certifiers.bracket import bracket

    monkeypatch.setattr(stop, "_signal", None)
    stop.check()  # nothing recorded: no stop
    assert stop.requested() is None
    with pytest.raises(KeyboardInterrupt):
        stop.request(signal.SIGTERM, None)
    assert stop.requested() == signal.SIGTERM
    with pytest.raises(KeyboardInterrupt):
        stop.check()
    with pytest.raises(KeyboardInterrupt):
        bracket(_blocks(2, 3), [0.3])
    from softrank.audit.bracket_stage import BracketStage
    from softrank.operators import Operator

    with pytest.raises(KeyboardInterrupt):
        run_stages(Operator(_blocks(2, 3)), [0.3], [BracketStage()])
    stop.reset()
    assert stop.requested() is None
    # two blocks (rows x, y of disjoint supports, mass 1): a rank-1 B = (a v; b v) within 0.3
    # puts >= 0.7 of |a| v on x's support and <= 0.3 on y's, and the reverse for |b| v: the
    # ratios of v's masses would be <= 3/7 both ways. So r_0.3 = 2
    b = bracket(_blocks(2, 3), [0.3])[0]
    assert (b.lower, b.upper) == (2, 2)


def _children(pid: int) -> set[int]:
    """The live processes whose parent is ``pid`` (from /proc)."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            # pid (comm) state ppid ...: comm may hold spaces, so split after its ')'
            fields = stat.rsplit(")", 1)[-1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.add(int(d))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads processes from /proc")
def test_kill_9_of_a_running_audit_leaves_no_worker_behind(tmp_path, capsys):
    """SIGKILL of a running audit's main process (no handler runs, as with the kernel's
    out-of-memory killer): its pool workers end by themselves within 10 s, instead of
    sleeping on their task queue for ever, and --resume finishes the run."""
    p = tmp_path / "slow.toml"
    # cells sleep 60 s while the file 'slow' exists: the workers are busy when the main
    # process is killed; the resume runs without it, in this process. The module's name is
    # its own: another test's 'sleepymod' (which always sleeps) may be imported here already
    (tmp_path / "sleepykill.py").write_text(
        "import os, time\nclass Sleepy:\n    name = 'sleepy'\n"
        "    def witness(self, operator, eps):\n"
        f"        if os.path.exists({str(tmp_path / 'slow')!r}):\n"
        "            time.sleep(60)\n        return None\n")
    (tmp_path / "slow").write_text("")
    p.write_text("eps = [0.2, 0.5]\n[[certifier]]\nspec = 'sleepykill:Sleepy'\npath = '.'\n"
                 + "".join(f"[[synthetic]]\nfamily = 'gaussian_head'\nm = 8\nN = 8\nseed = {s}\n"
                           for s in range(4)))
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "softrank.harness.cli", "audit", "--panel",
                             str(p), "--out", str(out), "--workers", "2", "--quiet",
                             "--attacks", "none"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    workers: set[int] = set()
    try:
        t = time.monotonic()
        # both workers started (the pool may also start multiprocessing's resource tracker)
        while len(workers) < 2 or not _has_identity(out / "ledger.sqlite"):
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() - t < 120, f"the audit did not start its workers: {workers}"
            time.sleep(0.1)
            workers = _children(proc.pid)
        time.sleep(1.0)  # the workers are inside their first cells
        workers = _children(proc.pid)
        proc.kill()
        proc.wait()
        t_kill = time.monotonic()
        while any(_alive(w) for w in workers) and time.monotonic() - t_kill < 10:
            time.sleep(0.1)
        left = sorted(w for w in workers if _alive(w))
        assert not left, f"workers {left} of the killed audit still alive 10 s later"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
    (tmp_path / "slow").unlink()
    capsys.readouterr()
    assert _audit(p, out, "--resume") == 0
    assert "stale lock" in capsys.readouterr().err
    with sqlite3.connect(out / "ledger.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM cells").fetchone()[0] == 8
    conn.close()
    assert (out / "brackets.csv").exists() and not (out / "softrank.lock").exists()


# ------------------------------------------------------------------- stale and foreign locks

def test_a_stale_lock_is_named_and_taken_over(tmp_path, capsys):
    """A lock of a process that is gone (same host): named on stderr, removed, and the run
    proceeds; its own lock is gone when it ends."""
    p = _panel(tmp_path)
    out = tmp_path / "o"
    pid = _dead_pid()
    _write_lock(out, pid)  # the directory holds nothing but the lock
    assert _audit(p, out) == 0
    err = capsys.readouterr().err
    assert (f"removing a stale lock of pid {pid} on host {socket.gethostname()} from "
            "2026-01-02T03:04:05Z") in err and "that process is gone" in err
    assert (out / "brackets.csv").exists() and (out / "report.md").exists()
    assert not (out / "softrank.lock").exists()
    assert not [x.name for x in out.iterdir() if x.name.startswith("softrank.lock")]


def test_a_stale_lock_beside_an_interrupted_ledger_resumes(tmp_path, capsys):
    """SIGKILL leaves the lock behind: the next --resume names it as stale and finishes."""
    p = _panel(tmp_path)
    out = tmp_path / "o"
    assert _audit(p, out) == 0
    _interrupt(out, 0.5)
    pid = _dead_pid()
    _write_lock(out, pid)
    capsys.readouterr()
    assert _audit(p, out) == 2  # without --resume: the stale lock goes, the ledger stays
    err = capsys.readouterr().err
    assert f"stale lock of pid {pid}" in err
    assert "unfinished audit (interrupted: its process is gone; 1 of 2 cells kept)" in err
    assert not (out / "softrank.lock").exists()
    _write_lock(out, pid)
    assert _audit(p, out, "--resume") == 0
    assert f"stale lock of pid {pid}" in capsys.readouterr().err
    assert not (out / "softrank.lock").exists()


def test_a_lock_from_another_host_is_refused(tmp_path, capsys):
    p = _panel(tmp_path)
    out = tmp_path / "o"
    lock = _write_lock(out, 1, host="elsewhere.invalid")
    assert _audit(p, out, "--resume") == 2
    err = _err_line(capsys)
    assert "another host" in err and "pid 1 on host elsewhere.invalid" in err
    assert f"remove {str(lock)!r}" in err
    assert lock.exists() and sorted(x.name for x in out.iterdir()) == ["softrank.lock"]


@pytest.mark.parametrize("text, why", [("", "empty"), ("not json {", "not JSON"),
                                        ('{"host": "h"}', "pid and host")])
def test_an_unreadable_lock_is_refused_naming_the_file(tmp_path, capsys, text, why):
    p = _panel(tmp_path)
    out = tmp_path / "o"
    out.mkdir()
    lock = out / "softrank.lock"
    lock.write_text(text)
    assert _audit(p, out) == 2
    err = _err_line(capsys)
    assert f"lock file {str(lock)!r} is unreadable" in err and why in err
    assert lock.read_text() == text


def test_the_lock_covers_the_report_and_is_released_after_an_error(tmp_path, capsys,
                                                                   monkeypatch):
    """The lock (this process's) is held while the report is written and removed after;
    an error inside the locked part (here: --scheduler without dask; then an unfinished
    ledger without --resume) still removes the lock file."""
    import softrank.harness.report as report

    seen = []
    write_report = report.write_report

    def spy(rows, summary, out, **kw):
        f = out / "softrank.lock"
        seen.append(json.loads(f.read_text())["pid"] if f.exists() else None)
        return write_report(rows, summary, out, **kw)

    monkeypatch.setattr(report, "write_report", spy)
    p = _panel(tmp_path)
    out = tmp_path / "o"
    assert _audit(p, out, "--resume") == 2 and "no ledger" in capsys.readouterr().err
    assert not (out / "softrank.lock").exists()
    assert _audit(p, out) == 0
    assert seen == [os.getpid()] and not (out / "softrank.lock").exists()
    assert _audit(p, out, "--scheduler", "tcp://127.0.0.1:1") == 2
    assert "--scheduler" in capsys.readouterr().err
    assert not (out / "softrank.lock").exists()
    assert _audit(p, out) == 0
    _interrupt(out)
    assert _audit(p, out) == 2
    assert not (out / "softrank.lock").exists()


def test_taking_over_a_stale_lock_never_removes_a_fresh_one(tmp_path, capsys):
    """Two runs saw the same stale lock; the first replaced it with its own: the second,
    breaking what it saw, must put the first's lock back and be refused."""
    from softrank.harness.lock import AuditLock

    out = tmp_path / "o"
    stale = _write_lock(out, _dead_pid()).read_bytes()
    first = AuditLock(out)
    first._break(stale, "x")  # the first run broke the stale lock ...
    assert not (out / "softrank.lock").exists()
    with first.acquire():  # ... and took the directory
        fresh = (out / "softrank.lock").read_bytes()
        AuditLock(out)._break(stale, "y")  # the second breaks what it saw: not this one
        assert (out / "softrank.lock").read_bytes() == fresh
        assert sorted(x.name for x in out.iterdir()) == ["softrank.lock"]
        other = subprocess.run(  # another process is refused
            [sys.executable, "-c", "import sys; from softrank.harness.lock import AuditLock; "
             "AuditLock(sys.argv[1]).acquire()", str(out)], capture_output=True, text=True)
        assert other.returncode != 0
        assert f"in use by a running audit (pid {os.getpid()} " in other.stderr
    assert not (out / "softrank.lock").exists()


# ---------------------------------------------------------------- what a refusal names

def test_an_interrupted_ledger_is_not_called_running(tmp_path, capsys):
    """An unfinished ledger whose process is gone (no lock): interrupted, with its cells."""
    p = _panel(tmp_path)
    out = tmp_path / "o"
    assert _audit(p, out) == 0
    _interrupt(out, 0.2)
    capsys.readouterr()
    assert _audit(p, out) == 2
    err = _err_line(capsys)
    assert ("holds an unfinished audit (interrupted: its process is gone; 1 of 2 cells kept); "
            "continue it with --resume") in err
    assert "(running" not in err


def test_resume_refusal_names_the_operators_that_differ(tmp_path, capsys):
    from softrank.operators import operator_hash

    p = _panel(tmp_path, names=("alpha", "beta", "gamma"))
    out = tmp_path / "o"
    assert _audit(p, out) == 0
    old_beta = operator_hash(np.load(tmp_path / "beta.npy"))
    capsys.readouterr()
    # a regenerated input: same id, another matrix
    np.save(tmp_path / "beta.npy", _blocks(2, 6))
    new_beta = operator_hash(np.load(tmp_path / "beta.npy"))
    assert _audit(p, out, "--resume") == 2
    err = _err_line(capsys)
    assert (f"operators differ: 1 with a different matrix (first: beta-beta, hash {old_beta} "
            f"-> {new_beta})") in err
    assert "only in" not in err and "differs in" not in err
    # one operator dropped, one added
    (tmp_path / "panel.toml").write_text(
        "eps = [0.2, 0.5]\n" + "".join(f"[[matrix]]\npath = \"{n}.npy\"\nfamily = \"{n}\"\n"
                                       for n in ("alpha", "delta", "beta", "gamma")))
    np.save(tmp_path / "beta.npy", _blocks(4, 4))
    np.save(tmp_path / "delta.npy", _blocks(5, 2))
    delta = operator_hash(np.load(tmp_path / "delta.npy"))
    assert _audit(p, out, "--resume") == 2
    err = _err_line(capsys)
    assert f"operators differ: 1 only in this run (first: delta-delta, hash {delta})" in err
    p.write_text("eps = [0.2, 0.5]\n[[matrix]]\npath = \"alpha.npy\"\nfamily = \"alpha\"\n")
    assert _audit(p, out, "--resume") == 2
    err = _err_line(capsys)
    assert "operators differ: 2 only in the ledger (first: beta-beta, hash " in err
    # another option: named with both values
    assert _audit(_panel(tmp_path, names=("alpha", "beta", "gamma")), out, "--resume",
                  "--eps", "0.3") == 2
    err = _err_line(capsys)
    assert "eps [0.2, 0.5] in the ledger, [0.3] in this run" in err


def test_identity_diff_counts_and_first_of_each_kind():
    from softrank.harness.ledger import identity_diff

    old = {"seed": 0, "operators": ["a:1", "b:2", "c:3", "d:4", "e:5"]}
    new = {"seed": 1, "operators": ["a:1", "c:9", "e:6", "f:7"]}
    assert identity_diff(old, new) == (
        "operators differ: 2 only in the ledger (first: b, hash 2), 1 only in this run "
        "(first: f, hash 7), 2 with a different matrix (first: c, hash 3 -> 9); "
        "seed 0 in the ledger, 1 in this run")
    assert identity_diff({"operators": ["a:1", "b:2"]}, {"operators": ["b:2", "a:1"]}) == (
        'operators differ: the same ids in another order or repeated (first difference at '
        'position 0: "a:1" in the ledger, "b:2" in this run)')
    assert identity_diff(old, old) == ""
    # stages and certifiers: the names that differ, not two cut lists
    built_in = ["bracket", "attack", "native-geometry", "b1-features", "intrinsic-descriptor",
                "gauge-features"]
    assert identity_diff({"stages": built_in + ["flaky"]}, {"stages": built_in + ["other"]}) == (
        'stages: ["flaky"] only in the ledger, ["other"] only in this run')


def test_a_ledger_killed_while_being_created_is_interrupted(tmp_path, capsys):
    """Killed between creating the ledger file and writing its run: interrupted, 0 cells."""
    p = _panel(tmp_path)
    out = tmp_path / "o"
    out.mkdir()
    sqlite3.connect(out / "ledger.sqlite").close()
    assert _audit(p, out) == 2
    err = _err_line(capsys)
    assert "unfinished audit (interrupted: its process is gone; 0 cells kept)" in err
    assert _audit(p, out, "--resume") == 0  # and it can be continued


def test_a_symlink_or_an_unprintable_host_in_place_of_the_lock_is_refused(tmp_path, capsys):
    p, out = _panel(tmp_path), tmp_path / "o"
    assert _audit(p, out) == 0  # a finished run's directory, then a link where the lock goes
    (out / "softrank.lock").symlink_to(tmp_path / "nowhere")
    assert _audit(p, out) == 2
    assert "is a symbolic link" in _err_line(capsys)
    (out / "softrank.lock").unlink()
    (out / "softrank.lock").write_text(json.dumps({"pid": 1, "host": "other\nhost"}))
    assert _audit(p, out) == 2
    assert "pid and host, printable" in _err_line(capsys)

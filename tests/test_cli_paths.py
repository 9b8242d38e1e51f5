"""Paths the command line cannot create or write, and the tolerances it is given: every
command that writes what the user names exits 2 with one line on stderr naming the argument,
the path and the reason, before any long work, never with a traceback; a tolerance the
command refuses is named as the user typed it (``--eps``)."""

from __future__ import annotations

import builtins
import errno
import io
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from softrank.errors import InvalidArgumentError
from softrank.harness import cli
from softrank.harness.cli import main

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="FIFOs and /proc paths")


def _one_line(capsys, *words) -> str:
    """The run's stderr: exactly one line, with each of ``words`` and no traceback."""
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err and "Error:" not in err, err
    for w in words:
        assert str(w) in err, (w, err)
    return err


@pytest.fixture
def locked(tmp_path, monkeypatch):
    """An empty directory where nothing can be created or opened, as on a read-only mount
    (we may run as root, whom permission bits do not stop): ``os.open``, ``os.mkdir`` and
    ``open`` fail with EACCES for every path inside it."""
    d = tmp_path / "locked"
    d.mkdir()

    def inside(p) -> bool:
        if not isinstance(p, (str, bytes, os.PathLike)):
            return False  # a file descriptor
        p = Path(os.path.abspath(os.fsdecode(p)))
        return p != d and d in p.parents

    def denied(real):
        def call(path, *a, **k):
            if inside(path):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(path))
            return real(path, *a, **k)
        return call

    monkeypatch.setattr(os, "open", denied(os.open))
    monkeypatch.setattr(os, "mkdir", denied(os.mkdir))
    monkeypatch.setattr(builtins, "open", denied(builtins.open))
    monkeypatch.setattr(io, "open", denied(io.open))
    return d


def _bad_dirs(tmp_path) -> dict:
    """Directory arguments that cannot be created or written, by kind."""
    (tmp_path / "file").write_text("mine")
    os.mkfifo(tmp_path / "fifo")
    return {"parent is a file": tmp_path / "file" / "out",
            "parent is a fifo": tmp_path / "fifo" / "out",
            "a file": tmp_path / "file",
            "under /proc": Path("/proc/x/out"),
            "in /proc/1": Path("/proc/1/out")}


KINDS = ["parent is a file", "parent is a fifo", "a file", "under /proc", "in /proc/1"]


@pytest.fixture
def tiny(tmp_path):
    np.save(tmp_path / "u.npy", np.full((4, 4), 0.25))
    (tmp_path / "panel.toml").write_text(
        'eps = [0.25]\n[[matrix]]\npath = "u.npy"\nfamily = "mine"\n')
    (tmp_path / "audit").mkdir()  # what `study --from` reads: an audit's brackets.csv
    (tmp_path / "audit" / "brackets.csv").write_text(
        "operator_id,family,source,checkpoint,m,n,eps,lower,upper,verdict\n"
        "u,mine,,,4,4,0.25,1,1,resolved\n")
    return tmp_path


def _commands(t: Path, out: Path) -> dict:
    """Each command with ``out`` as the path it writes, and the argument named."""
    u, panel = str(t / "u.npy"), str(t / "panel.toml")
    audit = ["audit", "--panel", panel, "--study-boot", "0", "--workers", "1", "--attacks",
             "none", "--no-reference-store", "--no-operator-cache"]
    return {
        "bracket": (["bracket", u, "--eps", "0.5", "--no-reference-store",
                     "--save-certificates", str(out)], "--save-certificates"),
        "audit": (audit + ["--out", str(out)], "--out"),
        "laws": (["laws", "--quick", "--n-boot", "100", "--out", str(out)], "--out"),
        "study block-width": (["study", "block-width", "--from", str(t / "audit"), "--out",
                               str(out)], "--out"),
        "study causal": (["study", "causal", "--no-synthetic", "--widths", "8", "--out",
                          str(out)], "--out"),
        # refused before the checkpoint is read: no model is needed to see it
        "heads": (["heads", str(t / "no-checkpoint"), "--source", "stdlib:json", "--out",
                   str(out)], "--out"),
        "tiny-checkpoint": (["tiny-checkpoint", "gpt2", str(out)], "directory"),
    }


COMMANDS = ["bracket", "audit", "laws", "study block-width", "study causal", "heads",
            "tiny-checkpoint"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_directory_that_cannot_be_created_is_one_line(tiny, capsys, command, kind):
    out = _bad_dirs(tiny)[kind]
    argv, arg = _commands(tiny, out)[command]
    assert main(argv) == 2
    _one_line(capsys, f"softrank {command.split()[0]}: error: {arg}: ", out)
    assert (tiny / "file").read_text() == "mine"  # nothing of the user's replaced


@pytest.mark.parametrize("command", COMMANDS)
def test_a_directory_that_cannot_be_written_is_one_line(tiny, capsys, locked, command):
    argv, arg = _commands(tiny, locked)[command]
    assert main(argv) == 2
    _one_line(capsys, f"{arg}: cannot write into {str(locked)!r} (Permission denied)")


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "audit"])
def test_a_proc_directory_that_takes_no_files_is_one_line(tiny, capsys, command):
    """/proc/self exists and is a directory, but no file can be created in it (an audit
    refuses it sooner: it is not empty)."""
    argv, arg = _commands(tiny, Path("/proc/self"))[command]
    assert main(argv) == 2
    _one_line(capsys, f"{arg}: cannot write into '/proc/self' (")


def test_a_new_directory_is_not_left_behind_by_a_refused_run(tiny, capsys):
    out = tiny / "new"
    assert main(["heads", str(tiny / "no-checkpoint"), "--source", "stdlib:json", "--out",
                 str(out)]) == 2
    _one_line(capsys, "checkpoint")
    assert main(["tiny-checkpoint", "llama", str(out), "--sliding-window", "8"]) == 2
    _one_line(capsys, "--sliding-window")
    assert not out.exists()


@pytest.mark.parametrize("kind", ["parent missing", "parent is a file", "parent is a fifo",
                                  "a directory", "a fifo", "under /proc", "locked",
                                  "in /proc/self"])
def test_frontier_plot_that_cannot_be_written_is_one_line(tiny, capsys, locked, kind):
    (tiny / "file").write_text("mine")
    os.mkfifo(tiny / "fifo")
    os.mkfifo(tiny / "f.png")
    (tiny / "d.png").mkdir()
    plot, named = {"parent missing": (tiny / "nowhere" / "p.png", "does not exist"),
                   "parent is a file": (tiny / "file" / "p.png", "is not a directory"),
                   "parent is a fifo": (tiny / "fifo" / "p.png", "is not a directory"),
                   "a directory": (tiny / "d.png", "is a directory"),
                   "a fifo": (tiny / "f.png", "is not a regular file"),  # even --overwrite
                   "under /proc": (Path("/proc/x/p.png"), "does not exist"),
                   "locked": (locked / "p.png", f"cannot write into {str(locked)!r}"),
                   "in /proc/self": (Path("/proc/self/p.png"),
                                     "cannot write into '/proc/self'")}[kind]
    assert main(["frontier", str(tiny / "u.npy"), "--no-reference-store", "--overwrite",
                 "--plot", str(plot)]) == 2
    err = _one_line(capsys, "softrank frontier: error: --plot: ", named)
    assert str(plot) in err or str(plot.parent) in err


def test_a_directory_where_an_output_file_goes_is_refused_even_with_overwrite(tiny, capsys):
    u = str(tiny / "u.npy")
    d = tiny / "certs"
    assert main(["bracket", u, "--eps", "0.5", "--no-reference-store",
                 "--save-certificates", str(d)]) == 0
    capsys.readouterr()
    first = sorted(d.iterdir())[0]
    first.unlink()
    first.mkdir()
    assert main(["bracket", u, "--eps", "0.5", "--no-reference-store", "--overwrite",
                 "--save-certificates", str(d)]) == 2
    _one_line(capsys, "--save-certificates: ", f"{str(first)!r} exists and is a directory")

    out = tiny / "laws"
    (out / "laws.md").mkdir(parents=True)
    assert main(["laws", "--quick", "--overwrite", "--out", str(out)]) == 2
    _one_line(capsys, "--out: ", f"{str(out / 'laws.md')!r} exists and is a directory")
    (out / "laws.md").rmdir()
    os.mkfifo(out / "laws.csv")
    assert main(["laws", "--quick", "--overwrite", "--out", str(out)]) == 2
    _one_line(capsys, "--out: ", f"{str(out / 'laws.csv')!r} exists and is not a regular file")


def test_an_os_error_with_a_file_name_that_escapes_a_command_is_one_line(capsys, monkeypatch):
    def fails(args):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), "/x/report.md")

    monkeypatch.setitem(cli._COMMANDS, "verify", fails)
    assert main(["verify", "anything"]) == 2
    assert capsys.readouterr().err == "softrank verify: error: '/x/report.md': Is a directory\n"

    def fails_unnamed(args):
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setitem(cli._COMMANDS, "verify", fails_unnamed)
    with pytest.raises(OSError):  # no file to name: not this command line's to explain
        main(["verify", "anything"])


# ---- tolerances ------------------------------------------------------------------------

def _eps_commands(t: Path) -> dict:
    u = str(t / "u.npy")
    return {"bracket": ["bracket", u, "--no-reference-store", "--eps"],
            "frontier": ["frontier", u, "--no-reference-store", "--no-plot", "--eps"],
            "audit": ["audit", "--panel", str(t / "panel.toml"), "--study-boot", "0",
                      "--workers", "1", "--attacks", "none", "--no-reference-store",
                      "--out", str(t / "out"), "--eps"]}


@pytest.mark.parametrize("command", ["bracket", "frontier", "audit"])
def test_a_repeated_or_subnormal_tolerance_names_the_option(tiny, capsys, command):
    argv = _eps_commands(tiny)[command]
    assert main(argv + ["0.1", "0.1"]) == 2
    err = _one_line(capsys)
    assert err == f"softrank {command}: error: --eps: tolerances repeat, 0.1 is given twice\n"
    assert main(argv + ["0.25", "1e-310"]) == 2
    err = _one_line(capsys)
    assert err.startswith(f"softrank {command}: error: --eps: expected a normal float64 >= ")
    assert err.endswith("got 1e-310\n")
    assert not (tiny / "out").exists()  # refused before the audit's directory is made


@pytest.mark.parametrize("command", ["bracket", "frontier", "audit"])
@pytest.mark.parametrize("eps", ["0", "1", "1.5", "nan", "inf"])
def test_a_tolerance_out_of_range_names_the_option(tiny, capsys, command, eps):
    with pytest.raises(SystemExit) as e:
        main(_eps_commands(tiny)[command] + ["0.25", eps])
    assert e.value.code == 2
    _one_line(capsys, f"softrank {command}: error: argument --eps: expected 0 < eps < 1, "
                      f"got {eps!r}")


@pytest.mark.parametrize("argv", [["laws", "--quick"], ["study", "causal", "--no-synthetic"],
                                  ["study", "block-width", "--from", "AUDIT"]])
def test_laws_and_studies_name_the_option(tiny, capsys, argv):
    argv = [str(tiny / "audit") if a == "AUDIT" else a for a in argv]
    assert main(argv + ["--eps", "1e-310", "--out", str(tiny / "out")]) == 2
    _one_line(capsys, "error: --eps: expected a normal float64", "got 1e-310")
    assert not (tiny / "out").exists()


def test_the_library_still_names_eps():
    from softrank.validation import validate_eps

    with pytest.raises(InvalidArgumentError, match=r"^eps: tolerances repeat, 0\.1 is given"):
        validate_eps([0.1, 0.1])
    with pytest.raises(InvalidArgumentError, match=r"^eps: expected a normal float64"):
        validate_eps(1e-310)
    with pytest.raises(InvalidArgumentError, match=r"^eps: expected a tolerance with 0 < eps"):
        validate_eps(1.0)
    with pytest.raises(InvalidArgumentError, match=r"^--eps: expected a tolerance with 0 < eps"):
        validate_eps([0.5, 0.0], "--eps")

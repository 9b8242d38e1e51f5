"""``softrank`` command line: ``audit``, ``bracket``, ``frontier``, ``verify``, ``diff``,
``heads``, ``laws``, ``study``, ``tiny-checkpoint``, ``cache``, ``reference``.

Exit codes: 0 success; 1 a check failed (``verify``), a cell was unsound/errored
(``audit``, ``bracket``), a frontier's band crossed itself (``frontier``) or more ends got worse than allowed or more answers were rejected
by the checker than before (``diff``); 2 bad arguments or
input (the message names the argument), or a file that cannot be read or written (the
message names the file and the reason).

The package holds one module per command (``audit_cmd``, ``bracket_cmd``, ``verify_cmd``,
``diff_cmd``, ``frontier_cmd``, ``heads_cmd`` with ``tiny-checkpoint``, ``study_cmd`` with ``laws``,
``store_cmd`` with ``cache`` and ``reference``), the
parser (:mod:`.parser`) and what several commands share (:mod:`.common`); this module holds
:func:`main`: the dispatch, the exit codes and the signals.
"""

from __future__ import annotations

import errno
import sys

from ... import stop
from ...errors import SoftrankError, printable
from . import (audit_cmd, bracket_cmd, diff_cmd, frontier_cmd, heads_cmd, store_cmd,
               study_cmd, verify_cmd)
from .parser import build_parser

__all__ = ["main", "build_parser"]

_COMMANDS = {"audit": audit_cmd.run, "bracket": bracket_cmd.run, "verify": verify_cmd.run,
             "heads": heads_cmd.run, "tiny-checkpoint": heads_cmd.run_tiny,
             "laws": study_cmd.run_laws, "study": study_cmd.run, "diff": diff_cmd.run,
             "cache": store_cmd.run_cache, "reference": store_cmd.run_reference,
             "frontier": frontier_cmd.run}


def _native_threads_without_stop_signals(engine: bool = False) -> None:
    """Import numpy, scipy.linalg and highspy with SIGINT and SIGTERM blocked: numpy's and
    scipy's OpenBLAS each start a thread pool at import, and those threads inherit the
    block. The kernel hands a signal sent to the process to any thread that does not block
    it; if a BLAS thread takes it, Python's handler waits until the main thread next
    retakes the GIL (after a sleep or a wait of any length), and a sleep or wait in the
    main thread is not cut short. With the pools blocking them, SIGINT and SIGTERM reach
    the main thread. Threads started later (torch's pools, on first use) are not covered.
    Does nothing for a library already imported. With ``engine``, the engine's compiled
    kernels are also compiled (or read from numba's cache) there
    (:func:`softrank.certifiers.lower.climb.warm`): numba compiles inside ctypes
    callbacks, where the ``KeyboardInterrupt`` of a stop would be dropped and the run go on."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):  # not POSIX
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        import numpy  # noqa: F401
        import scipy.linalg  # noqa: F401
        import highspy  # noqa: F401
        if engine:
            from ...certifiers.lower.climb import warm

            warm()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def main(argv=None) -> int:
    import signal

    args = build_parser().parse_args(argv)
    if argv is None:  # as a program: SIGTERM stops like Ctrl-C (workers ended, cells kept);
        for sig in (signal.SIGINT, signal.SIGTERM):  # a stop is also recorded, and raised
            signal.signal(sig, stop.request)  # again where its first one was dropped
    try:
        if argv is None:  # a signal held back during these imports is raised here, inside
            _native_threads_without_stop_signals(  # the try: 130, as at any other moment
                engine=args.command in ("audit", "bracket", "frontier", "study", "laws"))
        return _COMMANDS[args.command](args)
    except SoftrankError as exc:  # one line: what it quotes of an input cannot break it
        print(f"softrank {_name(args)}: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"softrank {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (e.g. `| head`): as SIGPIPE would, quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # a last resort: each command checks the paths it writes up front
        if exc.filename is not None:
            where = repr(str(exc.filename)) + (
                f" -> {str(exc.filename2)!r}" if exc.filename2 is not None else "")
        elif exc.errno in _CANNOT_WRITE and args.command in _OUTPUTS:  # (a full disk
            # mid-run: the write names no file; the command's output is what it writes)
            where = _output(args)
        else:
            raise
        print(f"softrank {_name(args)}: error: {printable(f'{where}: {exc.strerror or exc}')}",
              file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - only a database that cannot be written
        import sqlite3

        if not (isinstance(exc, sqlite3.OperationalError)
                and any(w in str(exc) for w in ("disk is full", "disk I/O error",
                                                "readonly database"))):
            raise
        print(f"softrank {_name(args)}: error: {_output(args)}: cannot write its ledger "
              f"({exc})", file=sys.stderr)
        return 2


#: errno values of a write that cannot be done: a full disk or quota, a read-only mount, no
#: permission, a file too large.
_CANNOT_WRITE = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                 errno.EFBIG}

#: Each command's output argument, for a write that fails without naming its file.
_OUTPUTS = {"audit": ("out", "--out"), "heads": ("out", "--out"), "laws": ("out", "--out"),
            "study": ("out", "--out"), "bracket": ("save_certificates", "--save-certificates"),
            "frontier": ("plot", "--plot"), "tiny-checkpoint": ("directory", "directory"),
            "reference": ("directory", "DIR")}


def _name(args) -> str:
    """The command as typed: ``reference import``, ``cache prune``, ``bracket``."""
    sub = getattr(args, f"{args.command}_command", None)
    return f"{args.command} {sub}" if isinstance(sub, str) else args.command


def _output(args) -> str:
    """``ARG 'PATH'``: what the command was writing, for a failure that names no file."""
    attr, name = _OUTPUTS.get(args.command, (None, None))
    path = getattr(args, attr, None) if attr else None
    return f"{name} {str(path)!r}" if path else "its output"

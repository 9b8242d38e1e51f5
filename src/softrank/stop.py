"""A stop asked for by a signal, kept until the run has stopped.

The command line (``softrank audit``, ``bracket``, ...) run as a program stops on SIGINT
(Ctrl-C) and SIGTERM by raising ``KeyboardInterrupt`` in its main thread: the cells already
finished are kept and the exit status is 130. Python runs a signal's handler at the next
bytecode boundary of the main thread, wherever that is; where it is inside a finaliser
(``__del__``, a weakref callback, run by the garbage collector at any allocation) or a
callback from C (numba compiles inside ctypes callbacks), the ``KeyboardInterrupt`` is
printed as "Exception ignored" and dropped, and the run would go on as if no stop had been
asked for. :func:`request` (the handler) therefore also records the stop, and the engine
calls :func:`check` around every method it runs, the audit pipeline around every stage and
the audit between operators: a stop whose exception was dropped is raised again there.

Nothing here is set unless the command line installed :func:`request` as a handler: a
library caller's Ctrl-C is Python's own ``KeyboardInterrupt``, untouched.
"""

from __future__ import annotations

__all__ = ["request", "requested", "check", "reset"]

_signal: int | None = None


def request(signum: int, frame=None) -> None:
    """The handler of SIGINT and SIGTERM (``signal.signal(sig, request)``): record the stop
    and raise ``KeyboardInterrupt``.

    Raises
    ------
    KeyboardInterrupt
        Always.
    """
    global _signal
    _signal = int(signum)
    raise KeyboardInterrupt


def requested() -> int | None:
    """The signal number of the stop asked for, or None."""
    return _signal


def check() -> None:
    """Raise ``KeyboardInterrupt`` again if a stop was asked for (its first one may have been
    dropped: see the module's docstring). Costs one global read.

    Raises
    ------
    KeyboardInterrupt
        If :func:`request` ran in this process (and :func:`reset` did not run since).
    """
    if _signal is not None:
        raise KeyboardInterrupt


def reset() -> None:
    """Forget a recorded stop (for tests that call :func:`request` in-process)."""
    global _signal
    _signal = None

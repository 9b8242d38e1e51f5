"""One audit at a time per output directory: the lock file ``OUT/softrank.lock``.

An audit holds the lock for its whole life (ledger, exports, report). The file is created
atomically (``O_CREAT | O_EXCL``) and holds JSON: the holder's ``pid``, ``host``, start time
(UTC) and command line. A second run on the same directory is refused while the holder
lives. A lock whose process is gone (same host, no such pid) is stale: it is named on
stderr and taken over. A lock from another host cannot be checked and is refused; so is a
lock file that cannot be read. ``softrank audit`` takes it once, before any user code is
loaded, and hands it to :func:`~softrank.harness.runner.run_audit` (``lock=``); the lock is
re-entrant within one process, so a caller of the API may also nest runs under one.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from ..errors import SoftrankError

__all__ = ["AuditLock", "LOCK_NAME", "lock_holder"]

LOCK_NAME = "softrank.lock"

# locks this process holds: resolved lock path -> [token, depth]
_HELD: dict[str, list] = {}


def _key(path: Path) -> str:
    return str(path.parent.resolve() / path.name)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (an unknown answer counts as alive)."""
    if pid == os.getpid():
        return True
    if os.name == "nt":  # os.kill would terminate it; cannot tell
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, owned by another user
        return True
    return True


def _describe(info: dict) -> str:
    return (f"pid {info['pid']} on host {info['host']}"
            + (f", since {info['started']}" if info.get("started") else ""))


def _read(path: Path, arg: str):
    """``(raw bytes, info dict)`` of the lock file, or None when there is none.

    A file that is empty or not valid JSON is read again for up to a second (its creator
    may be between creating and writing it), then refused."""
    if path.is_symlink():  # never followed: it could point anywhere, or nowhere
        raise SoftrankError(
            f"{arg}: the lock file {str(path)!r} is a symbolic link, not a softrank lock; "
            "remove it and run again")
    for attempt in range(21):
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            problem = f"cannot be read: {exc}"
            break
        try:
            info = json.loads(raw.decode())
            if (isinstance(info, dict) and isinstance(info.get("pid"), int)
                    and not isinstance(info.get("pid"), bool) and info["pid"] > 0
                    and isinstance(info.get("host"), str) and info["host"]
                    and info["host"].isprintable()
                    and str(info.get("started", "")).isprintable()):
                return raw, info
            problem = "it does not name a pid and host, printable"
            break
        except (UnicodeDecodeError, json.JSONDecodeError):
            problem = "it is not JSON" if raw.strip() else "it is empty"
        if attempt < 20:
            time.sleep(0.05)
    raise SoftrankError(
        f"{arg}: the lock file {str(path)!r} is unreadable ({problem}); if no audit is running "
        f"in {str(path.parent)!r}, remove that file and run again")


def lock_holder(out) -> dict | None:
    """The audit that holds ``out``'s lock, unless it is this process or is gone.

    Parameters
    ----------
    out : path
        An audit's output directory.

    Returns
    -------
    dict or None
        The lock's contents (``pid``, ``host``, ``started``, ``command``) when another
        process that is alive, or one on another host (which cannot be checked), holds the
        lock; None when there is no lock, it is this process's, it is stale, or it cannot
        be read.
    """
    path = Path(out) / LOCK_NAME
    try:
        got = _read(path, "--out")
    except SoftrankError:
        return None
    if got is None:
        return None
    raw, info = got
    held = _HELD.get(_key(path))
    if held is not None and info.get("token") == held[0]:
        return None
    if info["host"] == socket.gethostname() and not _alive(info["pid"]):
        return None
    return info


class AuditLock:
    """Exclusive use of an audit's output directory, for a ``with`` block.

    Parameters
    ----------
    out : path
        The output directory (it must exist); the lock is ``out/softrank.lock``.
    arg : str
        The argument named in error messages.
    stream : file, optional
        Where a stale lock's removal is reported (default: stderr).

    Raises
    ------
    SoftrankError
        On entering: the directory is in use by a live audit (its pid, host and start time
        are named), is locked from another host, or its lock file cannot be read.
    """

    def __init__(self, out, arg: str = "--out", stream=None):
        self.out = Path(out)
        self.path = self.out / LOCK_NAME
        self.arg = arg
        self.stream = stream
        self._key = None
        self._pid = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock (in this process)."""
        return self._key is not None and self._pid == os.getpid()

    def __enter__(self) -> "AuditLock":
        return self.acquire()  # a no-op if taken already (``with lock.acquire():``)

    def __exit__(self, *exc) -> None:
        self.release()

    def _content(self, token: str) -> bytes:
        return json.dumps({
            "pid": os.getpid(), "host": socket.gethostname(),
            "started": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": shlex.join(sys.argv), "token": token,
        }).encode()

    def _create(self, token: str) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        except OSError as exc:
            raise SoftrankError(f"{self.arg}: cannot create the lock file {str(self.path)!r} "
                                f"({exc})") from exc
        try:
            os.write(fd, self._content(token))
        except BaseException:  # never leave an empty lock behind
            os.close(fd)
            self.path.unlink(missing_ok=True)
            raise
        os.close(fd)
        return True

    def _break(self, raw: bytes, token: str) -> None:
        """Move the stale lock (bytes ``raw``) away; if what was moved is not it (another run
        took over meanwhile), put it back."""
        aside = self.path.with_name(f"{LOCK_NAME}.stale-{token}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        try:
            moved = aside.read_bytes()
        except OSError:
            moved = None
        if moved != raw:
            try:
                os.link(aside, self.path)
            except FileExistsError:
                pass
            except OSError:
                if not self.path.exists():
                    os.rename(aside, self.path)
                    return
        aside.unlink(missing_ok=True)

    def acquire(self) -> "AuditLock":
        """Take the lock (see the class); returns ``self``.

        Returns
        -------
        AuditLock
            ``self``, holding the lock until :meth:`release`.

        Raises
        ------
        SoftrankError
            As the class says.
        """
        if self._key is not None and self._pid == os.getpid():
            return self  # this object holds it already
        key = _key(self.path)
        held = _HELD.get(key)
        if held is not None:
            got = _read(self.path, self.arg)
            if got is not None and got[1].get("token") == held[0]:
                held[1] += 1
                self._key, self._pid = key, os.getpid()
                return self
            del _HELD[key]  # our lock file was removed or replaced meanwhile
        token = uuid.uuid4().hex
        for _ in range(10):
            if self._create(token):
                _HELD[key] = [token, 1]
                self._key, self._pid = key, os.getpid()
                return self
            got = _read(self.path, self.arg)
            if got is None:  # released between our attempt and our look
                continue
            raw, info = got
            where = str(self.out)
            if info["host"] != socket.gethostname():
                raise SoftrankError(
                    f"{self.arg}: {where!r} is locked by an audit on another host "
                    f"({_describe(info)}) and whether it still runs cannot be checked from "
                    f"here; if that run is over, remove {str(self.path)!r} and run again")
            if _alive(info["pid"]):
                raise SoftrankError(
                    f"{self.arg}: {where!r} is in use by a running audit ({_describe(info)}); "
                    f"wait for it or choose another {self.arg}")
            print(f"softrank: removing a stale lock of pid {info['pid']} on host {info['host']}"
                  f" from {info.get('started') or 'an unknown time'} ({str(self.path)!r}): "
                  "that process is gone", file=self.stream or sys.stderr, flush=True)
            self._break(raw, token)
        raise SoftrankError(f"{self.arg}: could not take the lock {str(self.path)!r}: other "
                            "runs keep taking it; try again")

    def release(self) -> None:
        """Give the lock up (the file is removed when the outermost holder releases it).

        Only the process that took the lock removes its file, and only while the file is
        still this lock's (not a later run's)."""
        key, self._key = self._key, None
        if key is None or self._pid != os.getpid():
            return
        held = _HELD.get(key)
        if held is None:
            return
        held[1] -= 1
        if held[1] > 0:
            return
        del _HELD[key]
        try:
            got = _read(self.path, self.arg)
        except SoftrankError:
            return
        if got is not None and got[1].get("token") == held[0]:
            self.path.unlink(missing_ok=True)

"""The reference store: softrank's own brackets kept on disk, checked again on every read
(docs/store.md).

softrank's own bracket of an operator at a tolerance depends on the operator's matrix,
``eps``, the effort, whether it was validated, and the engine -- nothing a user changes
between two runs of their construction. A :class:`ReferenceStore` keeps each such bracket
once, as the two certificate files (:func:`softrank.checker.save_certificate`) and a
``bracket.json`` with its ends, methods, seconds and diagnostics, under

``ROOT/ENGINE/GROUP/epsEPS/``

* ``ENGINE``: :func:`engine_key`, 16 hex digits naming softrank's version, the bytes of every
  module that can change an end (the engine, the methods, the checker and the operator's
  validation: every module the import layers put at or below :mod:`softrank.certifiers`) and
  the versions of numpy, scipy, highspy, numba, llvmlite, python-flint and mpmath;
* ``GROUP``: the operator's content hash and the effort (``HASH-full``), plus ``-validated-``
  and the hash of the factors ``Q``, ``K``, ``beta`` in validated mode;
* ``EPS``: the tolerance as Python writes the float.

**A stored bracket is checked, not trusted.** On every read the entry must be a directory of
regular files; ``bracket.json`` must name this engine, this operator, ``eps``, effort and
enclosure radius; the certificate files must have the digests ``bracket.json`` gives, be
certificates for the matrix in hand (its hash) at the stored tolerance and ranks; and both
must pass the checker again, in float64 and in interval arithmetic, against the matrix in
hand. Anything else is *refused*: named (:attr:`ReferenceStore.refused`, and in the
bracket's ``diagnostics.reference``), computed afresh and stored again, where what lies at
the entry's path is the store's own (:mod:`softrank.refstore.layout`; anything else is left
alone and the bracket not kept). What the entry's record says beyond its ends is checked
against its certificates (:mod:`softrank.refstore.record`); an entry imported from a bundle
keeps the rest as that bundle's claims. A bracket whose verdict is
not ``open`` or ``resolved``, that was cut short by a time limit, or that was made without the
interval check is never stored. No check can tell whether a valid certificate is softrank's
own: whoever can write to the store can replace a reference by a weaker valid one, never by
an unsound one.

**Concurrent runs** may share a store: one operator's entries are read and written under a
POSIX ``flock`` on ``GROUP.lock`` (one writer computes, the others wait and read its result);
an entry is written into a temporary directory and renamed into place, ``bracket.json``
last, so a reader never sees half an entry.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path

from ..certifiers.bracket import Bracket
from ..checker import UpperWitness, check, load_certificate, matrix_hash, save_certificate
from ..errors import InvalidArgumentError, SoftrankError
from .keys import (STORE_ENV, default_store_dir, default_store_label, engine_key,
                   engine_versions, file_sha256, group_name, turned_off)
from .layout import (ENTRY_FORMAT, IMPORTED_NAME, MAX_RECORD_BYTES, SIDE_NAME, entry_problem,
                     eps_name, remove_dir, replaceable_problem, staging_problem)
from .record import (BUNDLE_CLAIMS, Refused, certificate_bytes_bound, check_diagnostics,
                     imported_from, is_seconds, side_record_ok)

# the names of .keys, .record and .layout that callers of the store use are re-exported
__all__ = ["ReferenceStore", "engine_key", "engine_versions", "default_store_dir",
           "Refused", "side_record_ok", "turned_off", "default_store_label", "STORE_ENV",
           "ENTRY_FORMAT", "SIDE_NAME", "file_sha256", "eps_name", "group_name",
           "certificate_bytes_bound", "BUNDLE_CLAIMS"]

class ReferenceStore:
    """A directory of softrank's reference brackets (module docstring).

    Parameters
    ----------
    root : path
        The store's directory; created when missing (with ``create``). Only ``ENGINE/``
        directories, their entries and lock files are written there. A directory this
        process cannot write is read only: entries are read back, none stored.
    arg : str
        How the directory was given, for messages (an option or an environment variable).
    create : bool or "later"
        Create ``root`` when it is missing (default); ``False``: a missing one is refused;
        ``"later"``: left missing until :meth:`ensure_root` (``softrank reference import``
        creates it only for a bundle with an entry to add).

    Attributes
    ----------
    loaded, stored : int
        Brackets read back and checked again; brackets computed and written.
    refused : list of str
        One line per entry present but not accepted (then computed and stored again).
    notes : list of str
        One line per bracket computed but not kept (the store or its entry could not be
        written), also in that bracket's ``diagnostics.reference.not_kept``.

    Raises
    ------
    InvalidArgumentError
        ``root`` is empty, exists and is not a directory, cannot be created (or is missing,
        without ``create``) or cannot be read.
    """

    def __init__(self, root, arg: str = "--reference-store", create: bool | str = True):
        if not str(root):
            raise InvalidArgumentError(f"{arg}: expected a directory path, got ''")
        self.root = Path(root)
        self.arg = arg
        if self.root.exists() and not self.root.is_dir():
            raise InvalidArgumentError(f"{arg}: {str(root)!r} exists and is not a directory")
        if not self.root.exists():
            if not create:
                raise InvalidArgumentError(f"{arg}: {str(root)!r} does not exist")
            if create != "later":
                self.ensure_root()
        if self.root.exists() and not os.access(self.root, os.R_OK | os.X_OK):
            raise InvalidArgumentError(f"{arg}: {str(root)!r} is not readable")
        #: False where the directory cannot be written: entries are read, none stored
        self.writable = self.root.exists() and os.access(self.root, os.W_OK)
        self.loaded = 0
        self.stored = 0
        self.refused: list[str] = []
        self.notes: list[str] = []

    def ensure_root(self, hint: bool = True) -> None:
        """Create the store's directory where it is missing (``create="later"``: a command
        that writes only once its input is checked, so that a refused input creates nothing).
        ``hint``: the message says how to run without a store.

        Raises
        ------
        InvalidArgumentError
            It cannot be created (one line naming the argument, the path and the reason).
        """
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidArgumentError(
                f"{self.arg}: cannot create {str(self.root)!r}: {exc.strerror or exc}"
                + (f" ({self._without()} runs without a store)" if hint else "")) from None
        self.writable = os.access(self.root, os.W_OK)

    def _without(self) -> str:
        """How the store named by :attr:`arg` is turned off, for messages."""
        if self.arg.startswith("--softrank-"):
            return f"{self.arg} off"
        if self.arg.startswith("--"):
            return "--no-reference-store"
        return f"{STORE_ENV}=off (or --no-reference-store)"

    @classmethod
    def default(cls) -> "ReferenceStore | None":
        """The store of :func:`default_store_dir`, or None when it is turned off."""
        d = default_store_dir()
        return None if d is None else cls(d, default_store_label())

    def __reduce__(self):  # a worker opens the same directory with fresh counters
        return (type(self), (str(self.root), self.arg, False))

    # ------------------------------------------------------------------ paths and locks

    def group_dir(self, operator, effort: str, validated: bool, engine: str | None = None
                  ) -> Path:
        return self.root / (engine or engine_key()) / group_name(operator, effort, validated)

    @contextlib.contextmanager
    def locked(self, group: Path):
        """Hold the group's lock (``GROUP.lock`` beside it) for the block. Waiting for
        another run that holds it, one line on stderr says so (after 5 s).

        Raises
        ------
        OSError
            The engine or group path is a link or not a directory, the engine directory or
            the lock cannot be made or opened, or the lock is not a regular file (a link, a
            FIFO, a directory: never opened in a way that blocks).
        """
        import fcntl
        import stat
        import sys

        self.check_entry_dirs(group)
        group.parent.mkdir(parents=True, exist_ok=True)
        lock = group.parent / f"{group.name}.lock"
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     0o644)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"{self._rel(lock)} is not a regular file")
            t0, said = time.monotonic(), False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if not said and time.monotonic() - t0 > 5:
                        print(f"softrank: waiting for {str(lock)!r}, held by another run that "
                              "is computing or reading the same operator's references "
                              "(--no-reference-store computes without the store)",
                              file=sys.stderr, flush=True)
                        said = True
                    time.sleep(0.2)
            yield
        finally:
            os.close(fd)  # releases the lock

    def check_entry_dirs(self, group: Path) -> None:
        """:class:`OSError` unless the engine and group paths are directories (or absent),
        never links."""
        for d in (group.parent, group):
            if d.is_symlink() or (d.exists() and not d.is_dir()):
                raise OSError(f"{self._rel(d)} is not a directory")

    # ------------------------------------------------------------------ the engine's side

    def brackets(self, operator, A, rho: float, eps_list, *, effort: str, validated: bool,
                 interval: bool, compute) -> list[Bracket]:
        """softrank's own brackets of ``A`` at ``eps_list``: each tolerance stored for this
        operator, effort and ``validated`` read back and checked again, the others
        ``compute(missing_eps)`` and stored (the protocol :func:`softrank.bracket`'s
        ``store`` follows).

        Parameters
        ----------
        operator : Operator
            The operator (its hash and factors name the entries).
        A : (m, N) float64 array
            The matrix the certificates are about: ``operator.A``, or the enclosure's
            midpoint in validated mode.
        rho : float
            The enclosure radius (0 unless validated): lower certificates are stored at
            ``eps + rho``, witnesses at ``eps - rho``.
        eps_list : list of float
            Validated tolerances.
        effort : str
        validated : bool
        interval : bool
            Whether computed brackets had the interval check (only those are stored).
        compute : callable
            ``compute(list of eps) -> list of Bracket`` in that order.

        Returns
        -------
        list of Bracket
            In the order of ``eps_list``; ``diagnostics.reference`` says which were read
            back (``"store"``) and which computed (``"computed"``, with ``refused`` when a
            stored entry was not accepted).
        """
        group = self.group_dir(operator, effort, validated)
        with contextlib.ExitStack() as stack:
            read_only = None if self.writable else "the store is not writable here"
            try:
                self.check_entry_dirs(group)
                if read_only is None:
                    try:
                        stack.enter_context(self.locked(group))
                    except OSError as exc:  # entries are still read, nothing is written
                        read_only = f"the store cannot be written here ({exc.strerror or exc})"
                        self.check_entry_dirs(group)
            except OSError as exc:  # the store cannot be used for this operator: computed
                why = f"the store cannot be used for this operator ({exc.strerror or exc})"
                brs = compute(list(eps_list))
                for br in brs:
                    br.diagnostics.reference = {"source": "computed", "not_kept": why}
                self.notes.append(f"{operator.operator_id}: {why}; computed, not kept")
                return brs
            return self._brackets(group, operator, A, rho, eps_list, effort, validated,
                                  interval, compute, read_only)

    def _brackets(self, group, operator, A, rho, eps_list, effort, validated, interval,
                  compute, read_only: str | None) -> list[Bracket]:
        got: dict = {}
        refused: dict = {}
        for e in eps_list:
            entry = group / eps_name(e)
            if not os.path.lexists(entry):
                continue
            t = time.perf_counter()
            try:
                br = self.read(entry, operator, A, rho, e, effort, validated)
            except Refused as why:
                refused[e] = str(why)
                self.refused.append(f"{operator.operator_id} eps {e:g}: {why}")
                continue
            br.diagnostics.reference = {"source": "store", "entry": self._rel(entry),
                                        "check_seconds": round(time.perf_counter() - t, 4),
                                        **br.diagnostics.reference}
            got[e] = br
            self.loaded += 1
        missing = [e for e in eps_list if e not in got]
        if missing:
            for br in compute(missing):
                ref = {"source": "computed"}
                if br.eps in refused:
                    ref["refused"] = refused[br.eps]
                entry = group / eps_name(br.eps)
                if br.bounded and not (interval and self.storable(br)):
                    ref["not_kept"] = ("cut short by the time limit" if br.cut_short else
                                       "made without the interval check")
                elif interval and self.storable(br):
                    why = read_only
                    if why is None:
                        try:
                            self.write(entry, operator, A, br, effort, validated)
                            ref["entry"] = self._rel(entry)
                            self.stored += 1
                        except OSError as exc:
                            why = f"cannot write {self._rel(entry)} ({exc.strerror or exc})"
                    if why is not None:
                        ref["not_kept"] = why
                        self.notes.append(f"{operator.operator_id} eps {br.eps:g}: {why}; "
                                          "computed, not kept")
                br.diagnostics.reference = ref
                got[br.eps] = br
        return [got[e] for e in eps_list]

    @staticmethod
    def storable(br: Bracket) -> bool:
        """A bracket worth keeping: both ends checked, not cut short by a time limit."""
        return (br.verdict in ("open", "resolved") and br.lower_certificate is not None
                and br.upper_witness is not None and not br.cut_short)

    def _rel(self, entry: Path) -> str:
        return str(entry.relative_to(self.root))

    # ------------------------------------------------------------------ one entry

    def read(self, entry: Path, operator, A, rho: float, eps: float, effort: str,
             validated: bool, engine: str | None = None, touch: bool = True) -> Bracket:
        """The bracket stored in ``entry``, checked again against ``A`` (module docstring).
        With ``touch`` (default) its ``bracket.json`` is marked as used now (``softrank cache
        prune --older-than``); never for an entry outside the store (a bundle's).

        Raises
        ------
        Refused
            Naming the first thing that is wrong with the entry.
        """
        try:
            return self._read(entry, operator, A, rho, eps, effort, validated, engine, touch)
        except OSError as exc:
            raise Refused(f"cannot be read ({exc.strerror or exc})") from None
        except (TypeError, ValueError, KeyError, AttributeError, IndexError,
                RecursionError) as exc:  # a field of a type no check above foresaw
            raise Refused(f"bracket.json is malformed ({type(exc).__name__})") from None

    def _read(self, entry, operator, A, rho, eps, effort, validated, engine, touch) -> Bracket:
        rec, files = self._record(entry)
        current = engine is None or engine == engine_key()
        want = {"format": ENTRY_FORMAT, "engine": engine or engine_key(),
                "operator": operator.hash, "eps": float(eps), "effort": effort,
                "validated": bool(validated), "rho": float(rho)}
        for k, v in want.items():
            if rec.get(k) != v:
                raise Refused(f"bracket.json: {k} is {rec.get(k)!r}, expected {v!r}")
        certs, reports = {}, {}
        a_hash = matrix_hash(A)
        bound = certificate_bytes_bound(*A.shape)
        for side, at in (("lower", eps + rho), ("upper", eps - rho)):
            path = files[side]
            size = os.lstat(path).st_size
            if size > bound:  # measured before it is hashed or read
                raise Refused(f"{path.name} is {size} bytes, more than a certificate of a "
                              f"{A.shape[0]} x {A.shape[1]} operator can hold ({bound})")
            digests = rec.get("files")
            if not isinstance(digests, dict) or digests.get(path.name) != file_sha256(path):
                raise Refused(f"{path.name} differs from the file that was stored (sha256)")
            try:
                cert, _, header = load_certificate(path, max_bytes=bound)
            except SoftrankError as exc:
                raise Refused(f"{path.name}: {exc}") from None
            if (side == "upper") != isinstance(cert, UpperWitness):
                raise Refused(f"{path.name} is not {'an upper witness' if side == 'upper' else 'a lower certificate'}")
            if header["operator_hash"] != a_hash or tuple(header["shape"]) != A.shape:
                raise Refused(f"{path.name} is about another matrix (hash "
                              f"{header['operator_hash']}, expected {a_hash})")
            if cert.eps != at or type(rec.get(side)) is not int or cert.rank != rec[side]:
                raise Refused(f"{path.name}: rank {cert.rank} at eps {cert.eps!r}, expected "
                              f"rank {rec.get(side)!r} at eps {at!r}")
            try:
                rep = check(A, cert, interval=True)
            except Exception as exc:  # noqa: BLE001 - a certificate the checker cannot read
                raise Refused(f"{path.name}: the checker could not read it "
                              f"({type(exc).__name__})") from None
            if not rep.ok:
                raise Refused(f"the checker rejects {path.name} ({rep.summary()})")
            certs[side], reports[side] = cert, rep
        lo, up = certs["lower"].rank, certs["upper"].rank
        if lo > up:
            raise Refused(f"lower end {lo} above upper end {up}")
        diag = check_diagnostics(rec.get("diagnostics"), lo, up, effort, certs, current)
        seconds = rec.get("seconds")
        if not is_seconds(seconds):
            raise Refused(f"bracket.json: seconds is {seconds!r}, expected a number >= 0")
        bundle = imported_from(entry, rec.get("files"))
        if bundle is not None:
            diag.reference = {"bundle": bundle, "claims": list(BUNDLE_CLAIMS)}
        if touch:
            with contextlib.suppress(OSError):
                os.utime(files["record"])  # last used: `softrank cache prune --older-than`
        return Bracket(eps=float(eps), lower=lo, upper=up, lower_certificate=certs["lower"],
                       upper_witness=certs["upper"], lower_method=certs["lower"].method,
                       upper_method=certs["upper"].method,
                       verdict="resolved" if lo == up else "open", seconds=float(seconds),
                       checks=reports, diagnostics=diag, rho=float(rho))

    @staticmethod
    def _record(entry: Path) -> tuple[dict, dict]:
        """``bracket.json`` of ``entry`` and its files, or :class:`Refused`."""
        if entry.is_symlink() or not entry.is_dir():
            raise Refused("not a directory")
        files = {"record": entry / "bracket.json", "lower": entry / "lower.npz",
                 "upper": entry / "upper.npz"}
        for f in files.values():
            if f.is_symlink() or not f.is_file():  # never open a FIFO, a device or a link
                raise Refused(f"{f.name} is missing or not a regular file"
                              + (" (an incomplete entry)" if f.name == "bracket.json" else ""))
        try:
            with open(files["record"], "rb") as fh:
                raw = fh.read(MAX_RECORD_BYTES + 1)
            if len(raw) > MAX_RECORD_BYTES:
                raise Refused(f"bracket.json is over {MAX_RECORD_BYTES} bytes")
            rec = json.loads(raw)
        except (OSError, ValueError, RecursionError) as exc:
            raise Refused(f"bracket.json cannot be read ({type(exc).__name__})") from None
        if not isinstance(rec, dict):
            raise Refused("bracket.json is not a JSON object")
        return rec, files

    def write(self, entry: Path, operator, A, br: Bracket, effort: str, validated: bool,
              engine: str | None = None) -> None:
        """Store ``br`` as ``entry`` (replacing an entry of that name): the certificates and
        ``bracket.json`` go into a temporary directory beside it, renamed into place."""
        with self._staged(entry) as tmp:
            digests = {}
            for side, cert in (("lower", br.lower_certificate), ("upper", br.upper_witness)):
                save_certificate(tmp / f"{side}.npz", cert, A, producer="softrank reference store")
                digests[f"{side}.npz"] = file_sha256(tmp / f"{side}.npz")
            diag = br.diagnostics.to_dict()
            diag.pop("reference", None)
            rec = {"format": ENTRY_FORMAT, "engine": engine or engine_key(),
                   "operator": operator.hash, "operator_id": operator.operator_id,
                   "eps": float(br.eps), "effort": effort, "validated": bool(validated),
                   "rho": float(br.rho), "lower": int(br.lower), "upper": int(br.upper),
                   "lower_method": br.lower_method, "upper_method": br.upper_method,
                   "seconds": round(float(br.seconds), 4), "files": digests,
                   "diagnostics": diag, "stored": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                time.gmtime())}
            (tmp / "bracket.json").write_text(json.dumps(rec, sort_keys=True))

    @staticmethod
    @contextlib.contextmanager
    def _staged(entry: Path):
        """A temporary directory beside ``entry`` to fill; when the block ends without an
        exception it replaces ``entry``, which must be absent or an entry of the store's own,
        damaged or not (:func:`~softrank.refstore.layout.replaceable_problem`: anything else
        there is left alone, and :class:`OSError` says so); it is removed on every exit."""
        why = replaceable_problem(entry)  # before any work: nothing is written then
        if why is not None:
            raise OSError(f"{entry.parent.name}/{why}; left alone (remove it to let the "
                          "store keep this bracket)")
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.parent / f".{entry.name}.{os.getpid()}.tmp"
        if os.path.lexists(tmp):  # left by a killed process of the same id
            remove_dir(tmp, check=staging_problem)
        tmp.mkdir()
        try:
            yield tmp
            if os.path.lexists(entry):
                remove_dir(entry)
            os.rename(tmp, entry)
        finally:
            if os.path.lexists(tmp):
                with contextlib.suppress(OSError):
                    remove_dir(tmp, check=staging_problem)

    def copy_entry(self, src: Path, entry: Path, side: tuple = (),
                   imported: dict | None = None) -> None:
        """Place a copy of the entry directory ``src`` (already checked) at ``entry``, with
        the side records named in ``side`` (:meth:`side_files`) and, for an entry from a
        bundle, ``imported`` (where from) as :data:`~softrank.refstore.layout.IMPORTED_NAME`.
        The source's files are read, never changed (not even their times)."""
        with self._staged(entry) as tmp:
            for name in ("lower.npz", "upper.npz", "bracket.json", *side):
                shutil.copyfile(src / name, tmp / name)
            if imported is not None:
                (tmp / IMPORTED_NAME).write_text(json.dumps(imported, sort_keys=True))

    @staticmethod
    def side_files(entry: Path) -> list[str]:
        """The names of the side records in ``entry`` (regular ``NAME.json`` files beside
        ``bracket.json`` that are records of this entry, e.g. an attack's outcome; not the
        record of an import, nor any other file)."""
        try:
            files = json.loads((entry / "bracket.json").read_bytes()).get("files")
        except (OSError, ValueError, RecursionError, AttributeError):
            return []
        out = []
        for p in sorted(entry.glob("*.json")):
            if (p.name in ("bracket.json", IMPORTED_NAME) or not SIDE_NAME.fullmatch(p.name)
                    or not p.is_file() or p.is_symlink()
                    or p.stat().st_size > MAX_RECORD_BYTES):
                continue
            try:
                if side_record_ok(json.loads(p.read_bytes()), files, p.name[:-len(".json")]):
                    out.append(p.name)
            except (OSError, ValueError, RecursionError):
                continue
        return out

    # ------------------------------------------------------------------ results kept beside a bracket

    def side_record(self, br: Bracket, name: str) -> dict | None:
        """A record stored beside ``br``'s entry under ``name`` (e.g. an attack's outcome),
        or None: when ``br`` is not its entry's bracket (a user's method moved an end), when
        there is none, or when it was written for other certificate files."""
        path = self._side_path(br, name)
        if path is None or path.is_symlink() or not path.is_file():
            return None
        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_RECORD_BYTES + 1)
            rec = json.loads(raw) if len(raw) <= MAX_RECORD_BYTES else None
            files = json.loads((path.parent / "bracket.json").read_bytes()).get("files")
        except (OSError, ValueError, RecursionError):
            return None
        if not side_record_ok(rec, files, name):
            return None
        return rec["value"]

    def discard(self, br: Bracket, why: str) -> bool:
        """Remove ``br``'s entry from the store (e.g. a lower certificate an attack refuted:
        never a reference again); False when ``br`` has no entry of its own."""
        path = self._side_path(br, "bracket", lower_only=True)
        if path is None:
            return False
        entry = path.parent
        try:
            with self.locked(entry.parent):
                why = entry_problem(entry)
                if why is not None:
                    raise OSError(f"{why}; left alone")
                remove_dir(entry, os.listdir(entry))
        except OSError as exc:
            self.notes.append(f"cannot remove {self._rel(entry)} ({why}): "
                              f"{exc.strerror or exc}")
            return False
        self.notes.append(f"removed {self._rel(entry)}: {why}")
        return True

    def put_side_record(self, br: Bracket, name: str, value: dict) -> bool:
        """Store ``value`` (JSON-ready) beside ``br``'s entry under ``name``; False when
        ``br`` has no entry of its own or it cannot be written."""
        path = self._side_path(br, name)
        if path is None:
            return False
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            files = json.loads((path.parent / "bracket.json").read_bytes()).get("files")
            if os.path.lexists(path) and not (
                    path.is_file() and not path.is_symlink()
                    and side_record_ok(json.loads(path.read_bytes()), files, name)):
                return False  # not a record of the store's: never replaced
            tmp.write_text(json.dumps({"files": files, "value": value}, sort_keys=True))
            tmp.replace(path)
        except (OSError, ValueError, RecursionError):
            with contextlib.suppress(OSError):
                tmp.unlink()  # a full disk: no empty record left in the entry
            return False
        return True

    def _side_path(self, br: Bracket, name: str, lower_only: bool = False) -> Path | None:
        """``ENTRY/NAME.json`` when ``br`` is its entry's bracket (the same ends: a user's
        method only ever moves an end strictly; ``lower_only``: the same lower end), else
        None."""
        ref = br.diagnostics.reference
        rel = ref.get("entry") if isinstance(ref, dict) else None
        if not rel or not br.bounded or not SIDE_NAME.fullmatch(f"{name}.json"):
            return None
        entry = self.root / rel
        try:
            rec, _ = self._record(entry)
        except Refused:
            return None
        if rec.get("lower") != br.lower or (not lower_only and rec.get("upper") != br.upper):
            return None
        return entry / f"{name}.json"

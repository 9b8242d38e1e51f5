"""The audit run: bracket every operator of a panel at every tolerance (SPEC 1, 6).

Cells (operator x tolerance) are computed by an executor (:mod:`.executors`: a local
process pool, or Dask distributed) and committed to the run's ledger (:mod:`.store`, SQLite
in WAL mode) operator by operator, so an interrupted or killed run keeps every finished cell
and ``--resume`` continues it; at the end ``brackets.csv`` and ``brackets.parquet`` are
exported from the ledger in panel order and the summary, report and plots are made. Results
do not depend on the executor, the number of workers or the completion order.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ..errors import InvalidArgumentError, SoftrankError
from ..operators import Operator

__all__ = ["CSV_COLUMNS", "bracket_operator", "run_audit", "check_out_dir"]

CSV_COLUMNS = [
    "operator_id", "family", "source", "layer", "head", "block", "m", "n", "eps",
    "lower", "upper", "ratio", "lower_method", "upper_method", "verdict", "seconds",
    "svd_seconds", "lower_check", "upper_check", "planted_rank", "validated_rho", "attack", "attack_closest",
    "attack_seconds", "rho_Q", "rho_K", "Gamma", "sv_Q", "sv_K", "checkpoint",
    "b1_tsvd", "b1_stable", "b1_erank", "b1_entropy", "b1_peak",
    "int_r", "int_tau", "int_kappa", "int_logq", "gauge_native", "diagnostics",
]


def _geometry_fields(op: Operator) -> dict:
    """Native geometry beside each bracket (SPEC 7): radii, ``Gamma = beta rho_Q rho_K`` and
    the singular values of ``Q`` and ``K`` (space-separated, descending); empty without
    factors. Gauge-dependent: they describe the model's chosen factorisation, not ``A``."""
    g = op.native_geometry()
    if g is None:
        return {"rho_Q": "", "rho_K": "", "Gamma": "", "sv_Q": "", "sv_K": ""}
    return {**{k: g[k] for k in ("rho_Q", "rho_K", "Gamma")},
            **{k: " ".join(f"{x:.6g}" for x in g[k]) for k in ("sv_Q", "sv_K")}}


def _gauge_field(op: Operator) -> str:
    """Native geometry features (G of the add-on test) under the fixed diagonal gauges of
    condition ratio 4 and 16 (JSON; empty without factors)."""
    import json

    if op.Q is None:
        return ""
    from ..studies.features import gauged_native

    return json.dumps({f"{c:g}": v for c, v in gauged_native(op.Q, op.K, op.beta).items()})


def _study_fields(op: Operator, eps_list) -> list[dict]:
    """B1 features of the add-on test and the intrinsic descriptor (``int_*``; SPEC 7) of
    each cell of one operator. The descriptor is empty when ``A`` has no common positive
    support and no factors, or when it fails (so are the B1 features): they are
    descriptors, never bounds."""
    from ..geometry import intrinsic_descriptors
    from ..studies.features import baseline_features

    try:
        rows = [{k: round(v, 6) for k, v in baseline_features(op.A, e).items()}
                for e in eps_list]
    except Exception:  # noqa: BLE001 - features are descriptors; an operator never crashes here
        rows = [{k: "" for k in ("b1_tsvd", "b1_stable", "b1_erank", "b1_entropy", "b1_peak")}
                for _ in eps_list]
    try:
        ds = intrinsic_descriptors(op, list(eps_list))
    except Exception:  # noqa: BLE001 - recorded as missing, never as a value
        ds = [None] * len(rows)
    for row, d in zip(rows, ds):
        row.update({"int_r": d.r, "int_tau": round(d.tau, 6), "int_kappa": round(d.kappa, 6),
                    "int_logq": round(d.log_q, 6)} if d is not None else
                   {"int_r": "", "int_tau": "", "int_kappa": "", "int_logq": ""})
    return rows


def _check_label(rep) -> str:
    if rep is None:
        return ""
    iv = rep.interval
    tag = "float64" + (f"+{iv.backend}({iv.rows_checked})" if iv is not None else "")
    return ("pass:" if rep.ok else "FAIL:") + tag


def _attack_cell(op: Operator, br, A, effort: str, out: Path | None) -> dict:
    """Attack the cell's lower certificate (SPEC 10); a confirmed success makes it unsound."""
    from ..attacks import attack

    c = br.lower_certificate
    if effort == "none" or c is None or c.rank < 2 or br.verdict == "error":
        return {"attack": "", "attack_closest": "", "attack_seconds": ""}
    res = attack(A, c.eps, c, upper_witness=br.upper_witness, effort=effort)
    row = {"attack": "held", "attack_closest": round(res.best_error / c.eps, 4),
           "attack_seconds": round(res.seconds, 4)}
    if res.failures:
        row["attack"] = "held(partial)"
    if res.succeeded:
        row["attack"] = "SUCCEEDED"
        br.verdict = "unsound"
        if out is not None:
            from ..checker import save_certificate

            import re

            name = re.sub(r"[^\w.-]+", "_", f"{op.operator_id}-eps{br.eps:g}").lstrip(".")
            d = Path(out) / "counterexamples" / name
            save_certificate(d / "lower.npz", c, A, producer=f"softrank {c.method}")
            save_certificate(d / "witness.npz", res.witness, A, producer="softrank attack",
                             refutes={"claimed": c.rank, "eps": c.eps, "by": c.method})
    return row


def _svd_seconds(A) -> float:
    """Median time of one float64 SVD of ``A`` (3 runs): the floor every certifier pays."""
    import numpy as np

    ts = []
    for _ in range(3):
        t = time.perf_counter()
        np.linalg.svd(A, full_matrices=False)
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


_LOADED: dict = {}


def load_certifiers(specs) -> tuple[list, list]:
    """``(constructions, lower_tests)`` of the ``MODULE:OBJECT`` specs (loaded once per
    process: workers load them by name).

    Raises
    ------
    InvalidArgumentError
        A malformed spec, one that cannot be loaded, a ``builtin:`` spec (every audit runs
        the built-ins already), or two certifiers with one name.
    """
    from ..certifiers.interface import load_certifier
    from ..certifiers.registry import CONSTRUCTIONS, LOWER_TESTS, REFERENCE
    from ..errors import InvalidArgumentError

    cons, tests, names = [], [], {}
    for spec in specs:
        if isinstance(spec, str) and spec.startswith("builtin:"):
            raise InvalidArgumentError(f"--certifier {spec!r}: the built-in methods run in every "
                                       "audit already; give a third-party MODULE:OBJECT")
        c = _LOADED.get(spec)
        if c is None:
            c = _LOADED[spec] = load_certifier(spec, "--certifier")
        if c.name in CONSTRUCTIONS or c.name in REFERENCE or c.name in LOWER_TESTS:
            raise InvalidArgumentError(f"--certifier {spec!r}: its name {c.name!r} is a built-in "
                                       "method's; give it another 'name' attribute")
        if c.name in names:
            raise InvalidArgumentError(f"--certifier {spec!r}: its name {c.name!r} is also the "
                                       f"name of {names[c.name]!r}; names must differ")
        names[c.name] = spec
        if c.is_construction:
            cons.append(c)
        if c.is_lower_test:
            tests.append(c)
    return cons, tests


def bracket_operator(op: Operator, eps_list, validated: bool = False, attacks: str = "none",
                     out: Path | None = None, cell_timeout: float | None = None,
                     certifiers=()) -> list[dict]:
    """All cells of one operator as CSV-ready dicts (runs in a worker).

    ``validated``: bracket the exact softmax of the operator's factors (when it has them;
    ``validated_rho`` is then the enclosure radius, empty otherwise). ``attacks``: effort
    of the targeted attack run on every lower certificate of rank >= 2 (``"none"`` to skip;
    see :mod:`softrank.attacks`); a success is saved under ``out/counterexamples/`` and
    the cell becomes ``unsound``. ``cell_timeout``: seconds per cell (see
    :func:`softrank.bracket`'s ``time_limit``). ``certifiers``: third-party
    ``MODULE:OBJECT`` specs run beside the built-ins (:func:`load_certifiers`); every method's
    outcome is in the ``diagnostics`` column (JSON)."""
    import json

    from ..certifiers.bracket import Bracket, bracket
    from ..certifiers.interface import Diagnostics

    prov = op.provenance()
    rows = []
    cons, tests = load_certifiers(certifiers)
    try:
        brs = bracket(op, list(eps_list), validated=validated and op.Q is not None,
                      time_limit=cell_timeout, constructions=cons, lower_tests=tests)
    except Exception as exc:  # an operator that crashes is recorded, never a bound
        brs = [Bracket(eps=float(e), lower=0, upper=-1, verdict="error",
                       diagnostics=Diagnostics(error=f"{type(exc).__name__}: {exc}"))
               for e in eps_list]
    svd_s = _svd_seconds(op.A)
    geo = _geometry_fields(op)
    gauge = _gauge_field(op)
    study = _study_fields(op, [br.eps for br in brs])
    A_att = op.A
    if validated and op.Q is not None and attacks != "none":
        from ..checker.validated import enclose_softmax

        A_att = enclose_softmax(op.Q, op.K, op.beta)[0]  # the matrix the certificates are for
    for br, st in zip(brs, study):
        try:
            att = _attack_cell(op, br, A_att, attacks, out)
        except Exception as exc:  # recorded; an attack that crashes is never a verdict
            att = {"attack": f"error: {type(exc).__name__}", "attack_closest": "",
                   "attack_seconds": ""}
        ratio = br.upper / br.lower if br.lower > 0 and br.upper > 0 else ""
        rows.append({
            "operator_id": op.operator_id, "family": op.family, "source": op.source,
            "layer": "" if op.layer is None else op.layer,
            "head": "" if op.head is None else op.head, "block": op.block,
            "m": op.shape[0], "n": op.shape[1], "eps": br.eps,
            "lower": br.lower, "upper": br.upper,
            "ratio": round(ratio, 6) if ratio != "" else "",
            "lower_method": br.lower_method, "upper_method": br.upper_method,
            "verdict": br.verdict, "seconds": round(br.seconds, 4),
            "svd_seconds": round(svd_s, 6),
            "lower_check": _check_label(br.checks.get("lower")),
            "upper_check": _check_label(br.checks.get("upper")),
            "planted_rank": prov.get("planted_rank", ""),
            "validated_rho": f"{br.rho:.3g}" if validated and op.Q is not None else "",
            **att,
            **geo,
            "checkpoint": prov.get("checkpoint", ""),
            **st,
            "gauge_native": gauge,
            "diagnostics": json.dumps(br.diagnostics.to_dict(), separators=(",", ":")),
        })
    return rows


def _task(args):
    i, op, eps_list, validated, attacks, out, cell_timeout, certifiers = args
    return i, bracket_operator(op, eps_list, validated, attacks, out, cell_timeout, certifiers)


def _worker_init():
    import signal

    # Ctrl-C goes to the whole process group: the parent decides, workers do not crash
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _fmt_time(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class _Progress:
    """Cells done, rate and time left: a bar redrawn in place on a terminal, one line per
    operator otherwise (logs)."""

    def __init__(self, total_cells: int, done_cells: int, stream, enabled: bool):
        self.total, self.done, self.start_done = total_cells, done_cells, done_cells
        self.stream, self.enabled = stream, enabled
        self.tty = enabled and hasattr(stream, "isatty") and stream.isatty()
        self.t0 = time.perf_counter()

    def update(self, op_id: str, rows: list[dict]) -> None:
        self.done += len(rows)
        if not self.enabled:
            return
        el = max(time.perf_counter() - self.t0, 1e-9)
        rate = (self.done - self.start_done) / el * 60
        left = (self.total - self.done) / max(rate / 60, 1e-9)
        frac = self.done / max(self.total, 1)
        if self.tty:
            bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
            print(f"\r[{bar}] {self.done}/{self.total} cells  {rate:6.1f} cells/min  "
                  f"~{_fmt_time(left)} left ", end="", file=self.stream, flush=True)
        else:
            lo_up = " ".join(f"[{r['lower']},{r['upper']}]" for r in rows)
            print(f"[{self.done:5d}/{self.total} cells] {op_id[:44]:44s} {lo_up}  "
                  f"{rate:6.1f} cells/min, ~{_fmt_time(left)} left", file=self.stream, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=self.stream, flush=True)


def check_out_dir(out, arg: str = "--out") -> None:
    """Refuse an output directory that holds files but no softrank audit: an audit writes
    ``report.md``, ``summary.json``, ``brackets.csv`` and plots there, and must not replace
    what a user put there. A new or empty directory, or one with an audit's ledger or lock
    file (``softrank.lock``), is fine.

    Parameters
    ----------
    out : path
        The output directory (it need not exist).
    arg : str
        The argument named in the message.

    Raises
    ------
    InvalidArgumentError
        Naming what the directory holds.
    """
    from .lock import LOCK_NAME
    from .store import LEDGER_NAME

    out = Path(out)
    if not out.is_dir() or (out / LEDGER_NAME).exists() or (out / LOCK_NAME).exists():
        return
    present = sorted(p.name for p in out.iterdir())
    if present:
        raise InvalidArgumentError(
            f"{arg}: {str(out)!r} is not empty and holds no softrank audit ("
            f"{', '.join(present[:5])}{', ...' if len(present) > 5 else ''}); choose a new or "
            "empty directory: an audit would replace report.md, summary.json and brackets.csv")


def run_audit(operators: list[Operator], eps_list, out: Path, workers: int | None = None,
              progress=True, validated: bool = False, attacks: str = "quick",
              executor: str = "local", scheduler: str | None = None,
              cell_timeout: float | None = None, resume: bool = False,
              identity: dict | None = None, certifiers=()) -> list[dict]:
    """Bracket ``operators`` x ``eps_list``; returns the rows in operator order.

    Every finished operator's cells are committed to ``out/ledger.sqlite``
    (:class:`~softrank.harness.store.Ledger`) as they arrive; at the end ``brackets.csv``
    and ``brackets.parquet`` are exported from it. Results do not depend on the executor,
    the number of workers or the completion order.

    Parameters
    ----------
    workers : int, optional
        Processes (default: all cores); 1 runs in this process (local executor).
    executor : {"local", "dask"}
        A local process pool, or Dask distributed: a local cluster of ``workers``
        single-threaded processes, or the cluster at ``scheduler`` (``tcp://host:port``).
    cell_timeout : float, optional
        Seconds per cell (operator x tolerance); a cell past it is an ``error`` verdict.
    resume : bool
        Continue the run whose ledger is in ``out``: finished operators are not recomputed.
    identity : dict, optional
        Extra description of the run (panel, seed) that a resumed run must match.
    certifiers : sequence of str
        Third-party ``MODULE:OBJECT`` specs run in every cell beside the built-ins (loaded
        here first, so a bad spec fails before any work; workers import them by name).

    Returns
    -------
    list of dict
        Every cell of the run (also those of a resumed run's earlier part), in panel order.

    Raises
    ------
    SoftrankError
        Repeated operator ids; ``out`` in use by another audit (its lock file
        ``softrank.lock``, see :class:`~softrank.harness.lock.AuditLock`, is held for the
        run's whole life); an unfinished ledger without ``resume``; ``resume`` without a
        ledger or with a different run (see :class:`~softrank.harness.store.Ledger`).
    """
    from .lock import AuditLock

    certifiers = tuple(certifiers)
    load_certifiers(certifiers)
    out = Path(out)
    check_out_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    eps_list = tuple(float(e) for e in eps_list)
    ids = [op.operator_id for op in operators]
    if len(set(ids)) != len(ids):
        dup = sorted({x for x in ids if ids.count(x) > 1})
        raise SoftrankError(
            f"operators: ids repeat ({', '.join(dup[:5])}{', ...' if len(dup) > 5 else ''}); "
            "every cell is keyed by (operator_id, eps), so one would be lost. Give the panel "
            "entries distinct families (e.g. family = \"qwen2-seed1\") or drop the repeats")
    ident = dict(identity or {})
    ident.update({"eps": list(eps_list), "validated": bool(validated), "attacks": attacks,
                  "cell_timeout": cell_timeout, "certifiers": list(certifiers),
                  # ids and content hashes: a resumed run must bracket the same matrices
                  "operators": [f"{op.operator_id}:{op.hash}" for op in operators]})
    with AuditLock(out):  # one run per directory, from the ledger to the exports
        return _audit_cells(operators, eps_list, out, ident, resume, workers, progress,
                            validated, attacks, executor, scheduler, cell_timeout, certifiers)


def _audit_cells(operators, eps_list, out, ident, resume, workers, progress, validated,
                 attacks, executor, scheduler, cell_timeout, certifiers) -> list[dict]:
    """The body of :func:`run_audit`, under the directory's lock."""
    from .store import Ledger

    ledger = Ledger(out, ident, resume=resume)
    n = len(operators)
    index = {op.operator_id: i for i, op in enumerate(operators)}
    finished = ledger.finished(len(eps_list)) & set(index)
    todo = [i for i in range(n) if operators[i].operator_id not in finished]
    workers = workers or os.cpu_count() or 1
    stream = sys.stderr
    bar = _Progress(n * len(eps_list), len(finished) * len(eps_list), stream, progress)
    if progress and finished:
        print(f"resuming: {len(finished)} of {n} operators already in {ledger.path}",
              file=stream, flush=True)

    def done(i, rows):
        ledger.add(i, rows)
        bar.update(operators[i].operator_id, rows)

    # largest operators first: better load balance at the end of the run
    order = sorted(todo, key=lambda i: -operators[i].A.size)
    tasks = [(i, operators[i], eps_list, validated, attacks, out, cell_timeout, certifiers)
             for i in order]
    try:
        if executor == "dask":
            from .executors import dask_map

            for i, rows in dask_map(_task, tasks, workers, scheduler):
                done(i, rows)
        elif workers <= 1 or len(tasks) <= 1:
            for t in tasks:
                done(*_task(t))
        else:
            from .executors import local_map

            for i, rows in local_map(_task, tasks, workers, _worker_init):
                done(i, rows)
    except BaseException:
        bar.close()
        if progress:
            print(f"stopped: {ledger.count()} cells of {n * len(eps_list)} are kept in "
                  f"{ledger.path}; continue with --resume", file=stream, flush=True)
        ledger.close()
        raise
    bar.close()
    rows = ledger.rows()
    ledger.export_csv(rows, out / "brackets.csv", CSV_COLUMNS)
    ledger.export_parquet(rows, out / "brackets.parquet", CSV_COLUMNS)
    ledger.mark_complete()
    ledger.close()
    return rows

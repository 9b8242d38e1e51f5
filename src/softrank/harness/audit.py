"""The audit run: bracket every operator of a panel at every tolerance (SPEC 1, 6).

Cells (operator x tolerance) are computed in worker processes (``multiprocessing.Pool``,
spawn context, one BLAS thread each; on interrupt or SIGTERM the workers are terminated) and written to ``brackets.partial.csv`` as each
operator finishes, so an interrupted run keeps every finished cell; at the end the rows
are written in panel order to ``brackets.csv`` and the summary, report and plots are made.
Results do not depend on the number of workers or the completion order.
"""

from __future__ import annotations

import csv
import os
import sys
import time
from multiprocessing import get_context
from pathlib import Path

from ..operators import Operator

__all__ = ["CSV_COLUMNS", "bracket_operator", "run_audit"]

CSV_COLUMNS = [
    "operator_id", "family", "source", "layer", "head", "block", "m", "n", "eps",
    "lower", "upper", "ratio", "lower_method", "upper_method", "verdict", "seconds",
    "lower_check", "upper_check", "planted_rank", "validated_rho", "attack", "attack_closest",
    "attack_seconds", "candidates",
]


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


def bracket_operator(op: Operator, eps_list, validated: bool = False, attacks: str = "none",
                     out: Path | None = None) -> list[dict]:
    """All cells of one operator as CSV-ready dicts (runs in a worker).

    ``validated``: bracket the exact softmax of the operator's factors (when it has them;
    ``validated_rho`` is then the enclosure radius, empty otherwise). ``attacks``: effort
    of the targeted attack run on every lower certificate of rank >= 2 (``"none"`` to skip;
    see :mod:`softrank.attacks`); a success is saved under ``out/counterexamples/`` and
    the cell becomes ``unsound``."""
    from ..certifiers.bracket import bracket

    from ..certifiers.bracket import Bracket

    prov = op.provenance()
    rows = []
    try:
        brs = bracket(op, list(eps_list), validated=validated and op.Q is not None)
    except Exception as exc:  # an operator that crashes is recorded, never a bound
        brs = [Bracket(eps=float(e), lower=0, upper=-1, verdict="error",
                       candidates={"error": f"{type(exc).__name__}: {exc}"}) for e in eps_list]
    A_att = op.A
    if validated and op.Q is not None and attacks != "none":
        from ..checker.validated import enclose_softmax

        A_att = enclose_softmax(op.Q, op.K, op.beta)[0]  # the matrix the certificates are for
    for br in brs:
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
            "lower_check": _check_label(br.checks.get("lower")),
            "upper_check": _check_label(br.checks.get("upper")),
            "planted_rank": prov.get("planted_rank", ""),
            "validated_rho": f"{br.rho:.3g}" if validated and op.Q is not None else "",
            **att,
            "candidates": ";".join(f"{k}={v}" for k, v in br.candidates.items()
                                   if not isinstance(v, (list, dict))),
        })
    return rows


def _task(args):
    i, op, eps_list, validated, attacks, out = args
    return i, bracket_operator(op, eps_list, validated, attacks, out)


def _worker_init():
    import signal

    # Ctrl-C goes to the whole process group: the parent decides, workers do not crash
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _fmt_time(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def run_audit(operators: list[Operator], eps_list, out: Path, workers: int | None = None,
              progress=True, validated: bool = False, attacks: str = "quick") -> list[dict]:
    """Bracket ``operators`` x ``eps_list``; returns the rows in operator order.

    Writes ``out/brackets.partial.csv`` incrementally and ``out/brackets.csv`` at the end.
    ``workers``: processes (default: all cores); 1 runs in this process.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    partial = out / "brackets.partial.csv"
    n = len(operators)
    workers = workers or os.cpu_count() or 1
    results: dict[int, list[dict]] = {}
    t0 = time.perf_counter()
    stream = sys.stderr

    with partial.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        fh.flush()

        def done(i, rows):
            results[i] = rows
            writer.writerows(rows)
            fh.flush()
            os.fsync(fh.fileno())
            if progress:
                k = len(results)
                el = time.perf_counter() - t0
                eta = el / k * (n - k)
                lo_up = " ".join(f"[{r['lower']},{r['upper']}]" for r in rows)
                print(f"[{k:4d}/{n}] {operators[i].operator_id[:48]:48s} {lo_up}  "
                      f"{k / el * 60:5.1f} ops/min, ~{_fmt_time(eta)} left", file=stream, flush=True)

        if workers <= 1 or n <= 1:
            for i, op in enumerate(operators):
                done(i, bracket_operator(op, eps_list, validated, attacks, out))
        else:
            saved = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
            for k in saved:
                os.environ[k] = "1"  # one BLAS thread per worker: workers already use the cores
            pool = get_context("spawn").Pool(workers, initializer=_worker_init)
            try:
                # largest operators first: better load balance at the end of the run
                order = sorted(range(n), key=lambda i: -operators[i].A.size)
                tasks = [(i, operators[i], tuple(eps_list), validated, attacks, out) for i in order]
                for i, rows in pool.imap_unordered(_task, tasks, chunksize=1):
                    done(i, rows)
            except BaseException:
                # interrupted, terminated or a worker failed: keep what is finished and end
                # the workers now (a worker left running would outlive this process)
                pool.terminate()
                pool.join()
                if progress:
                    print(f"stopped after {len(results)} of {n} operators; their cells are in "
                          f"{partial}", file=stream, flush=True)
                raise
            else:
                pool.close()
                pool.join()
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v

    rows = [r for i in range(n) for r in results[i]]
    tmp = out / "brackets.csv.tmp"
    with tmp.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(out / "brackets.csv")
    partial.unlink()
    return rows

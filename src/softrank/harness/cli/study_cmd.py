"""``softrank laws`` (scaling laws of the synthetic families) and ``softrank study``
(block width, held-out add-on test, intrinsic descriptor)."""

from __future__ import annotations

import time
from pathlib import Path

from ...errors import MalformedRecord, SoftrankError
from .common import made_dir, operator_cache, refuse_existing

__all__ = ['run', 'run_laws']


def run_laws(args) -> int:
    from ...validation import validate_eps
    from ...studies.laws import QUICK_SWEEPS, run_laws, write_laws

    validate_eps(args.eps, "--eps")
    refuse_existing(args.out, "laws", args.overwrite)
    t0 = time.perf_counter()
    with made_dir(args.out, "--out") as out:  # removed again if the run fails while empty
        rows, fits = run_laws(args.eps, n_boot=args.n_boot,
                              sweeps=QUICK_SWEEPS if args.quick else None)
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
    from ..panels import N_SOURCES

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
        from ...studies.addon import MIN_SOURCES

        n_src = len({s["source_index"] for s in specs})
        if n_src < MIN_SOURCES or len(specs) < 8:
            raise SoftrankError(f"--heads/--layers/--sources-per-head: the add-on test needs "
                                f">= 8 operators from >= {MIN_SOURCES} sources, this selection "
                                f"gives {len(specs)} from {n_src}")
    if args.study == "descriptor":
        from ...studies.descriptor import MIN_OPERATORS

        per_width = len(specs) // len(set(args.widths))
        if per_width < MIN_OPERATORS:
            raise SoftrankError(f"--heads/--layers/--sources-per-head: the descriptor study needs "
                                f">= {MIN_OPERATORS} operators per width, this selection gives "
                                f"{per_width}")


def _study_specs(args):
    from ..panels import minilm_specs

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
        from ...audit.record import read_cells

        try:
            return read_cells(rows)
        except MalformedRecord as exc:
            raise SoftrankError(f"--from: {str(f)!r}: a cell is not softrank's ({exc})") from None
    from ..runner import run_audit
    from ..panels import materialize

    ops = materialize(_study_specs(args), operator_cache(args))
    from ...audit import AuditConfig

    from ...audit.record import read_cells

    return read_cells(run_audit(ops, AuditConfig(eps=(args.eps,), attacks="none"),
                                out / "audit", workers=args.workers, progress=True,
                                identity={"study": args.study}))


_STUDY_STEMS = {"block-width": "blockwidth", "addon": "addon", "descriptor": "descriptor",
                "causal": "causal"}


def _run_causal(args) -> int:
    """``softrank study causal``: the same decoder heads three ways (docs/theory/causal.md)."""
    for w in args.widths:
        if w % 2:
            raise SoftrankError(f"--widths: each width must be even (the block is N/2), got {w}")
    for d in args.checkpoint:
        if not Path(d).is_dir():
            raise SoftrankError(f"--checkpoint: {d!r} is not a directory")
    refuse_existing(args.out, "causal", args.overwrite)
    with made_dir(args.out, "--out") as out:  # removed again if the run fails while empty
        return _causal_into(args, out)


def _causal_into(args, out: Path) -> int:
    import sys
    import tempfile

    from ...studies.causal import (decoder_heads, run_causal_study, synthetic_causal_heads,
                                   write_causal)
    from .common import quiet_transformers

    t0 = time.perf_counter()
    quiet_transformers()
    with tempfile.TemporaryDirectory(prefix="softrank-tiny-") as tmp:
        dirs = list(args.checkpoint)
        if not dirs:
            from ...generators.tiny import save_tiny_checkpoint

            for name, fam, kw in (("gpt2", "gpt2", {}), ("qwen2", "qwen2", {}),
                                  ("qwen2-window16", "qwen2", {"sliding_window": 16}),
                                  ("llama", "llama", {})):
                dirs.append(str(save_tiny_checkpoint(fam, Path(tmp) / name, seed=args.seed,
                                                     **kw)))
        heads = decoder_heads(dirs, args.widths, args.source, args.layers, args.heads)
    if not args.no_synthetic:
        heads += synthetic_causal_heads(args.widths, seed=args.seed)
    print(f"{len(heads)} causal heads, eps {args.eps:g}, effort {args.effort}", file=sys.stderr)
    say = lambda r: print(f"  {r['model']} N={r['width']} "  # noqa: E731
                          + (f"L{r['layer']}H{r['head']} " if r["layer"] is not None else "")
                          + f"full [{r['full_lower']},{r['full_upper']}] causal "
                          f"[{r['causal_lower']},{r['causal_upper']}] block "
                          f"[{r['block_lower']},{r['block_upper']}] {r['seconds']:.1f} s",
                          file=sys.stderr, flush=True)
    rows = run_causal_study(heads, args.eps, args.effort, args.workers, progress=say)
    paths = write_causal(rows, out)
    print((out / "causal.md").read_text())
    print(f"{len(rows)} heads in {time.perf_counter() - t0:.1f} s -> "
          f"{', '.join(str(p) for p in paths)}")
    return 0


def run(args) -> int:
    from ...validation import validate_eps

    validate_eps(args.eps, "--eps")
    if args.study == "causal":
        return _run_causal(args)
    _study_check(args)
    refuse_existing(args.out, _STUDY_STEMS[args.study], args.overwrite)
    t0 = time.perf_counter()
    rows = _study_rows(args, None) if args.source_dir is not None else None
    with made_dir(args.out, "--out") as out:  # removed again if the run fails while empty
        return _study_into(args, rows, out, t0)


def _study_into(args, rows, out: Path, t0: float) -> int:
    if rows is None:
        rows = _study_rows(args, out)
    if args.study == "block-width":
        from ...studies.blockwidth import budget_shares, write_block_width

        eps = args.eps if any(float(r["eps"]) == args.eps for r in rows) else None
        paths = write_block_width(budget_shares(rows, args.budgets, eps=eps), out)
        md = "blockwidth.md"
    elif args.study == "addon":
        from ...studies.addon_audit import addon_from_rows, write_addon

        results, skipped = addon_from_rows(rows, eps=args.eps, n_boot=args.n_boot,
                                           n_perm=args.permutations, seed=args.seed)
        if not results:
            raise SoftrankError("the add-on test needs more data: " + "; ".join(skipped))
        paths = write_addon(results, skipped, out, eps=args.eps)
        md = "addon.md"
    else:
        from ...studies.descriptor import descriptor_correlations, write_descriptor

        corr = descriptor_correlations(rows, n_boot=args.n_boot, seed=args.seed)
        paths = write_descriptor(corr, rows, out)
        md = "descriptor.md"
    print((out / md).read_text())
    print(f"{len(rows)} cells in {time.perf_counter() - t0:.1f} s -> "
          f"{', '.join(str(p) for p in paths)}")
    return 0

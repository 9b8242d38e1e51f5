"""``softrank heads CHECKPOINT`` (per-head operators of a local checkpoint; ``--full``: whole
heads with the model's own mask) and ``softrank tiny-checkpoint`` (a tiny random-initialised
one to try it on)."""

from __future__ import annotations

import time

from ...errors import SoftrankError
from .common import made_dir, quiet_transformers, refuse_non_files

__all__ = ['run', 'run_tiny']


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


def run(args) -> int:
    from ...generators.capture import capture, read_sources, resolve_checkpoint
    from ...operators import mask_kind
    from ...operator_files import save_operator

    keys, queries = _span_arg(args.keys, "--keys"), _span_arg(args.queries, "--queries")
    if (keys is None) != (queries is None):
        raise SoftrankError("--keys, --queries: give both or neither")
    if args.full and keys is not None:
        raise SoftrankError(f"--full: not with --keys {args.keys} / --queries {args.queries} "
                            "(a full head takes every position as query and key)")
    if keys is not None and args.width is not None:
        raise SoftrankError("--width: not with --keys/--queries (they fix the block)")
    sources = read_sources(args.source)
    if args.quiet:
        quiet_transformers()
    _check_layers(args)
    t0 = time.perf_counter()
    with made_dir(args.out, "--out") as out:  # refused before the model is loaded
        ck, family = resolve_checkpoint(args.checkpoint, args.family)
        ops = capture(ck, sources, width=args.width, layers=args.layers, heads=args.heads,
                      key_positions=keys, query_positions=queries, family=family,
                      batch_size=args.batch_size, verify=not args.no_verify, full=args.full)
        targets = [out / f"{op.operator_id}.npz" for op in ops]
        refuse_non_files(targets, "--out")
        clash = [t.name for t in targets if t.exists()]
        if clash and not args.overwrite:
            raise SoftrankError(f"--out: {len(clash)} operator files exist already ({clash[0]}, "
                                "...); use another --out or --family, or --overwrite")
        for op, t in zip(ops, targets):
            save_operator(t, op)
    worst = max((op.meta.get("eager_max_abs_diff", 0.0) for op in ops), default=0.0)
    kinds = sorted({mask_kind(op.mask) for op in ops})  # "causal", "window:8", "none", ...
    print(f"{len(ops)} {'full ' if args.full else ''}operators ({len(sources)} inputs x "
          f"{len(set(o.layer for o in ops))} layers x {len(set(o.head for o in ops))} heads, "
          f"{ops[0].family} ({ck.model_type}), {ops[0].shape[0]}x{ops[0].shape[1]} first"
          + (f", masks {', '.join(kinds)}" if args.full else "") + f") -> {out}/ in "
          f"{time.perf_counter() - t0:.1f} s" + (
              "" if args.no_verify else
              f"; largest difference from the model's eager attention {worst:.2e}"))
    return 0


def _check_layers(args) -> None:
    """Refuse ``--layers`` outside the checkpoint's layers (duplicates too) from its
    ``config.json``, before the weights load (a config that cannot tell is left to the
    loader, which refuses it by name before any weights)."""
    from ...errors import InvalidArgumentError
    from ...generators.capture.checkpoints import checkpoint_dir, config_layers
    from ...validation import check_indices

    if args.layers is None:
        return
    n = config_layers(checkpoint_dir(args.checkpoint))
    if n is None:
        return
    try:
        check_indices(args.layers, "--layers", n)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"{exc} (the checkpoint {args.checkpoint!r} has {n} layers, "
                                   "by its config.json)") from None


def run_tiny(args) -> int:
    from ...generators.tiny import save_tiny_checkpoint

    from safetensors import SafetensorError

    window = args.sliding_window
    try:
        with made_dir(args.directory, "directory") as d:  # refused before the model is built
            save_tiny_checkpoint(args.family, d, seed=args.seed, sliding_window=window,
                                 max_positions=args.max_positions)
    except SoftrankError as exc:  # name the option, not the keyword
        for kw, opt in (("sliding_window", "--sliding-window"),
                        ("max_positions", "--max-positions")):
            if str(exc).startswith(kw + ":"):
                raise SoftrankError(opt + str(exc)[len(kw):]) from None
        raise
    except SafetensorError as exc:  # the weights' writer's own error (a full disk)
        raise SoftrankError(f"directory: cannot write the checkpoint into "
                            f"{args.directory!r} ({exc})") from None
    pos = args.max_positions
    print(f"tiny {args.family} checkpoint (2 layers x 4 heads, head dimension 8, "
          f"initializer_range 0.5" + (f", layer 1 a sliding window of {window}" if window else "")
          + (f", {pos} positions" if pos else "") + f") -> {d}/")
    return 0

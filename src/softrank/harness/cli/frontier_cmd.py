"""``softrank frontier FILE``: the band ``lower < e_k <= upper`` of the rank-error frontier
of one operator for a range of ranks (docs/theory/frontier.md)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ...errors import SoftrankError
from .common import (check_memory, memory_limit, probe_dir, reference_store, refuse_non_files,
                     say_refused)

__all__ = ["run"]


def run(args) -> int:
    from ...validation import validate_eps
    from ...certifiers.frontier import frontier
    from ...operator_files import load_operator

    if args.eps:  # (--eps alone: none)
        validate_eps(args.eps, "--eps")
    limit, _ = memory_limit(args)
    op = load_operator(args.file, "file", max_bytes=limit, renormalize=args.renormalize)
    check_memory(op.shape, f"file: {args.file!r}", args)
    p = min(op.shape)
    if args.ranks is not None and args.ranks[1] > p:
        raise SoftrankError(f"--ranks: {args.ranks[0]}:{args.ranks[1]} goes past min(m, N) = {p} "
                            f"of the {op.shape[0]} x {op.shape[1]} matrix in {args.file!r}")
    plot = None if args.no_plot else _plot_path(args)
    from ...certifiers.registry import load_certifiers

    cons, tests = load_certifiers(args.certifier)
    if tests:
        raise SoftrankError(f"--certifier {tests[0].spec or tests[0].name!r}: a lower test; the "
                            "frontier draws constructions (witness_at_rank) only")
    lacking = [c for c in cons if not c.offers_rank]
    if lacking:
        raise SoftrankError(f"--certifier {lacking[0].spec or lacking[0].name!r}: has no "
                            "witness_at_rank(operator, k) method (docs/constructions.md)")
    store = reference_store(args)
    fr = frontier(op, ranks=args.ranks, eps=list(args.eps), interval=not args.no_interval,
                  effort=args.effort, store=store, constructions=cons,
                  reference=not args.no_reference)
    if store is not None:  # with --json too: news, not output
        say_refused("frontier", store.refused)
    if args.json:
        print(json.dumps(fr.to_dicts(), indent=2))
    else:
        print(f"operator {op.operator_id} (hash {op.hash}): {op.shape[0]} x {op.shape[1]}; "
              f"e_k = min ||A - B||_inf over rank-k B: lower < e_k <= upper, each end a "
              f"checked certificate (lower 0 and '-': no certificate, only e_k >= 0) "
              f"({fr.seconds:.1f} s)")
        for br in fr.brackets:
            print(f"  bracket at eps {br.eps:g}: [{br.lower}, {br.upper}]")
        print(f"{'k':>5}  {'lower':>11}  {'upper':>11}  {'lower by (rank)':<36}  upper by (rank)")
        for pt in fr.points:
            lo = f"{pt.lower_method} ({pt.lower_rank})" if pt.lower_method else "-"
            up = f"{pt.upper_method} ({pt.upper_rank})" if pt.upper_method else "-"
            print(f"{pt.rank:>5}  {pt.lower:>11.6g}  {pt.upper:>11.6g}  {lo:<36}  {up}")
        if fr.curves:
            print("constructions (checked error at each rank; scores over the ranks with a "
                  "certified lower end: median error / lower end, median rank / least rank the "
                  "band allows at its error)")
            for c in fr.curves:
                if not c.errors:
                    print(f"  {c.name}: no curve ({c.failed or 'declined at every rank'})")
                    continue
                ee = "-" if c.excess_error is None else f"{c.excess_error:.3g}x"
                er = ("-" if c.excess_rank is None else f"{c.excess_rank:.3g}x"
                      if c.excess_rank != float("inf") else
                      "inf (at half its ranks or more no better than B = 0)")
                print(f"  {c.name}: {len(c.errors)} ranks, excess error <= {ee}, excess rank "
                      f"<= {er}" + (f" (stopped: {c.failed})" if c.failed else ""))
    if plot is not None:
        from ..plots import plot_frontier

        try:
            plot_frontier(fr, op.operator_id, plot)
        except OSError as exc:  # after the table: the band is printed either way
            raise SoftrankError(f"--plot: cannot write {str(plot)!r} ({exc.strerror or exc})") \
                from None
        if not args.json:
            print(f"plot: {plot}", file=sys.stderr)
    if fr.unsound or fr.below_band:
        what = (f"lower >= upper at ranks {fr.unsound}" if fr.unsound else
                f"a construction's checked error at or below the lower end: {fr.below_band[:5]}")
        print(f"softrank frontier: UNSOUND: {what} (a certificate or the checker is wrong; "
              "please report it)", file=sys.stderr)
        return 1
    return 0


def _plot_path(args) -> Path:
    """The plot's path, refused before any work: not a PNG name, a directory, an existing
    file without ``--overwrite``, or a directory where no file can be created."""
    if args.plot is not None and not args.plot.strip():
        raise SoftrankError("--plot: expected a file name ending in .png, got ''")
    plot = Path(args.plot) if args.plot else Path(f"{Path(args.file).stem}-frontier.png")
    if not plot.name.lower().endswith(".png") or plot.name.lower() == ".png":
        raise SoftrankError(f"--plot: expected a file name ending in .png, got {str(plot)!r}")
    if plot.is_dir():
        raise SoftrankError(f"--plot: {str(plot)!r} is a directory")
    refuse_non_files([plot], "--plot")  # a FIFO, a device: not replaced, even with --overwrite
    if plot.exists() and not args.overwrite:
        raise SoftrankError(f"--plot: {str(plot)!r} exists; give another --plot PATH, "
                            "--no-plot, or --overwrite to replace it")
    parent = plot.parent
    if not parent.is_dir():
        up = parent  # the first path on the way that is there says why
        while not os.path.lexists(up) and up != up.parent:
            up = up.parent
        raise SoftrankError(f"--plot: cannot write {str(plot)!r}: " + (
            f"{str(up)!r} is not a directory" if os.path.lexists(up) and not up.is_dir()
            else f"{str(parent)!r} does not exist"))
    probe_dir(parent, "--plot")
    return plot

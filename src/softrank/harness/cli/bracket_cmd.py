"""``softrank bracket FILE``: bracket one operator saved as ``.npy`` or ``.npz``."""

from __future__ import annotations

import json
import sys

from ...errors import SoftrankError, printable
from .common import (check_memory, made_dir, memory_limit, reference_store, refuse_non_files,
                     say_refused)

__all__ = ['run']


def run(args) -> int:
    from ...validation import validate_eps
    from ...operator_files import load_operator

    validate_eps(args.eps, "--eps")
    limit, _ = memory_limit(args)
    op = load_operator(args.file, "file", max_bytes=limit, renormalize=args.renormalize)
    check_memory(op.shape, f"file: {args.file!r}", args)
    if not args.save_certificates:
        return _bracket(args, op, None)
    # a directory made here is removed again if the run is refused while it is empty
    with made_dir(args.save_certificates, "--save-certificates") as d:
        return _bracket(args, op, d)


def _bracket(args, op, d) -> int:
    from ... import __version__
    from ...certifiers.bracket import bracket
    from ...certifiers.registry import load_certifiers
    from ...checker import save_certificate
    from ...operators import mask_kind

    cons, tests = load_certifiers(args.certifier)
    say = (lambda line: print(line, file=sys.stderr, flush=True)) if args.progress else None
    if args.rank != "plain":
        from ...certifiers.causal import check_causal_operator

        check_causal_operator(op, args.rank, "--rank")  # before any work
        if tests:
            raise SoftrankError(
                f"--certifier {tests[0].spec or tests[0].name!r}: a lower test of r_eps does not "
                f"bound the rank {args.rank!r}; with --rank give constructions only")
        plain = [c for c in cons if getattr(c.obj, "causal", False) is not True]
        if plain:
            raise SoftrankError(
                f"--certifier {plain[0].spec or plain[0].name!r}: not a causal construction; with "
                f"--rank {args.rank} give constructions that set causal = True (their U, W are "
                "checked as tril(U W); docs/theory/causal.md)")
        store = None
    else:
        store = reference_store(args)
    if args.rank != "plain":
        from ...certifiers.causal import UserCausalConstruction, causal_bracket

        brs = causal_bracket(op, list(args.eps), rank=args.rank,
                             interval=not args.no_interval, effort=args.effort,
                             time_limit=args.time_limit, progress=say,
                             constructions=[UserCausalConstruction(c) for c in cons])
    else:
        brs = bracket(op, list(args.eps), interval=not args.no_interval, constructions=cons,
                      lower_tests=tests, time_limit=args.time_limit, progress=say,
                      effort=args.effort, store=store)
    if store is not None:  # with --json too: news, not output
        say_refused("bracket", store.refused)
    if d is not None:
        # the matrix's hash, the tolerance (repr: distinct tolerances never share a name),
        # the side and the kind: bracketing another matrix into DIR never reuses a name
        tag = "" if args.rank == "plain" else args.rank.replace(":", "") + "_"
        files = [(d / f"{op.hash[:16]}_eps{br.eps!r}_{tag}{side}_{cert.kind}.npz", cert)
                 for br in brs
                 for side, cert in (("lower", br.lower_certificate), ("upper", br.upper_witness))
                 if cert is not None]
        refuse_non_files([f for f, _ in files], "--save-certificates")
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
            f", mask {mask_kind(op.mask)}" if op.mask is not None else "") + (
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
        if args.rank != "plain":
            print(f"rank {args.rank}: " + ("lower <= r^c_eps(A) <= upper, the least rank of U W "
                  "with ||A - tril(U W)||_inf <= eps" if args.rank == "causal" else
                  "the least rank of U W with ||A - (band * A + below * U W)||_inf <= eps, the "
                  f"band of each query's last {args.rank[7:]} keys copied exactly")
                  + " (docs/theory/causal.md); the reference store keeps plain brackets only")
        w = max(6, *(len(repr(br.eps)) for br in brs))
        print(f"{'eps':>{w}}  {'lower':>5}  {'upper':>5}  verdict   lower method / upper method")
        for br in brs:
            lo, up = ("-" if e is None else e for e in (br.lower, br.upper))
            print(f"{br.eps!r:>{w}}  {lo:>5}  {up:>5}  {br.verdict:8s}  "
                  f"{br.lower_method} / {br.upper_method}")
            if br.verdict == "error":
                print(f"{'':>{w}}  error: {br.diagnostics.error}")
            if br.cut_short:
                print(f"{'':>{w}}  cut short by --time-limit: {_cut_by_limit(br)}; both ends "
                      "are checked")
        if store is not None:
            got = [br for br in brs if br.diagnostics.reference.get("source") == "store"]
            print(f"reference store {str(store.root)!r}: {len(got)} of {len(brs)} tolerances "
                  "read back and checked again in float64 and interval arithmetic"
                  + (f" (eps {', '.join(repr(br.eps) for br in got)})" if got else ""))
            for br in brs:
                ref = br.diagnostics.reference
                if ref.get("not_kept"):
                    print(f"  bracket at eps {br.eps!r} computed, not kept: "
                          f"{printable(ref['not_kept'])}")
                if ref.get("bundle"):
                    print(f"  entry at eps {br.eps!r} came from bundle "
                          f"{printable(ref['bundle'])}: its ends and the methods credited with "
                          f"them are checked; its {', '.join(ref.get('claims', []))} are that "
                          "bundle's claims, not measured here")
        if args.effort == "fast" and any(br.verdict != "error" for br in brs):
            print("effort fast: the late searches (subspace-rows, subspace-climb, "
                  "subspace-blocks, trust-region, alternating-l1-smooth, "
                  "alternating-l1-anneal) were skipped; the ends are "
                  "the other methods', checked as always")
        causal_ref = sorted({r.name for br in brs for r in br.diagnostics.methods
                             if r.origin == "reference"}) if args.rank != "plain" else []
        for name in causal_ref:
            for br in brs:
                r = br.diagnostics.record(name)
                if r is not None:
                    print(f"  {name} at eps {br.eps!r}: {r.status}"
                          + (f", rank {r.rank}" if r.rank is not None else "")
                          + (f" ({r.message})" if r.message else ""))
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


def _cut_by_limit(br) -> str:
    """The methods a tolerance's time limit skipped, and those it stopped while they ran or
    that stopped before it because the rest of their work would pass it, by name."""
    def names(which, what):
        got = [r.name for r in br.diagnostics.methods if which(r.message)]
        return (f"{len(got)} {what} ({', '.join(got[:6])}{', ...' if len(got) > 6 else ''})"
                if got else f"0 {what}")

    stopping = ("the time limit ran out while it ran",
                "stopped before the time limit, which the rest of its work would pass")
    return (names(lambda m: m.startswith("time limit"), "methods skipped") + ", "
            + names(lambda m: m in stopping, "stopped by it"))

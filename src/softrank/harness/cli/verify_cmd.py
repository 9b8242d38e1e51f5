"""``softrank verify PATH``: re-check saved certificates without trusting the producer."""

from __future__ import annotations

from pathlib import Path

from ...errors import SoftrankError
from .common import memory_limit

__all__ = ['run']


def run(args) -> int:
    from ...checker import MalformedCertificate, check, load_certificate, matrix_hash

    p = Path(args.path)
    if p.is_dir():
        files = sorted(p.rglob("*.npz"))
    elif p.exists():
        files = [p]
    else:
        raise SoftrankError(f"path: {str(p)!r} does not exist")
    if not files:
        raise SoftrankError(f"path: no .npz certificates under {str(p)!r}")
    limit, _ = memory_limit(args)
    ext = None
    if args.matrix:  # validated as `bracket` would (docs/theory/operators.md), read within the limit
        from ...operator_files import load_operator

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
        form, quantity = _form(cert, A.shape)
        side = f"{quantity} <=" if cert.kind in ("upper", "causal-upper") else f"{quantity} >="
        print(f"{'ok  ' if rep.ok else 'FAIL'} {f}: {side} {cert.rank} at eps {float(cert.eps)!r} "
              f"for the matrix of hash {h}{' (--matrix)' if ext is not None else ''} "
              f"({cert.kind}, {cert.method}) -- {rep.summary()}")
        failures += not rep.ok
        if rep.ok:
            held.append((h, cert.kind, float(cert.eps), cert.rank, f, header, form, quantity))
    print(f"{len(files) - failures} of {len(files)} certificates hold")
    refuted = _contradictions(held)
    return 0 if failures == 0 and not refuted else 1


def _form(cert, shape) -> tuple[str, str]:
    """``(form, quantity)``: which rank a certificate bounds. ``plain`` and ``r_eps`` for the
    kinds of ``r_eps``; for the causal kinds the hash of the kept region (two certificates
    bound the same rank iff their regions are equal) and ``r^causal_eps`` /
    ``r^window:W_eps`` when the region is one of :func:`softrank.operators.rank_masks`'s,
    else ``r^custom_eps``."""
    import numpy as np

    from ...checker import matrix_hash
    from ...operators import rank_masks

    if cert.kind not in ("causal-upper", "causal-lower"):
        return "plain", "r_eps"
    keep = cert.keep
    if keep.ndim != 2 or keep.shape != tuple(shape):  # malformed: rejected, no rank to name
        return "malformed", "r^c_eps"
    m, N = keep.shape
    label = "custom"
    kinds = ["causal"] + ([f"window:{N - int(keep[-1].sum())}"]
                          if 0 < N - int(keep[-1].sum()) else [])
    for kind in kinds:
        try:
            k, e = rank_masks((m, N), kind)
        except Exception:  # noqa: BLE001 - a shape no rank kind has
            continue
        if np.array_equal(k, keep) and (cert.kind == "causal-lower"
                                        or np.array_equal(e, cert.exact)):
            label = kind
            break
    name = "r^c_eps" if label == "causal" else f"r^c[{label}]_eps"
    return matrix_hash(keep.astype(np.float64)), name


def _contradictions(held) -> int:
    """Report claims refuted by certificates that hold (docs/theory/attacks.md): a lower certificate
    ``r_eps1 >= l`` and an upper witness ``r_eps2 <= u`` on one matrix with ``eps2 <= eps1``
    and ``u < l`` cannot both be sound; and a counterexample witness (header ``refutes``)
    that holds refutes the claim it names. Returns how many were found."""
    n = 0
    for h, kind, eps, rank, f, header, _, _ in held:
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
    lowers = [x for x in held if x[1] not in ("upper", "causal-upper")]
    uppers = [x for x in held if x[1] in ("upper", "causal-upper")]
    for lh, _, leps, lrank, lf, _, lform, q in lowers:
        for uh, _, ueps, urank, uf, _, uform, _ in uppers:
            # the same matrix and the same rank (plain, or the same kept region)
            if lh == uh and lform == uform and ueps <= leps and urank < lrank:
                n += 1
                print(f"CONTRADICTION: {lf} ({q} >= {lrank} at eps {leps!r}) and {uf} "
                      f"({q} <= {urank} at eps {ueps!r}) both pass the checker: the checker "
                      "or a certificate's proof is unsound")
    return n

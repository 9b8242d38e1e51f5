"""Time one check of a rank-``k`` witness of ``gaussian_head(N, N, 32, 2.0, seed=0)``
(docs/benchmarks.md, "The checker at long widths").

Usage::

    python benchmarks/check_at_length.py N K {float64,flint,midrad,mpmath,check} [causal]

The witness is ``U = Q``, ``W = Q^T A`` with ``Q`` an orthonormal basis of ``A G`` (``G``
Gaussian ``N x K``), at 1.001 times its max row l1 error (with ``causal``: the causal head
and a causal witness whose ``keep`` is the causal mask). Prints the seconds of the check
alone and, for float64 and midrad, tracemalloc's peak during it; run it under
``/usr/bin/time -v`` for the whole process's peak.
"""

import gc
import sys
import time
import tracemalloc

import numpy as np


def main(argv):
    from softrank.checker import (CausalUpperWitness, UpperWitness, check, check_float64,
                                  check_interval)
    from softrank.generators.synthetic import gaussian_head

    N, k, which = int(argv[0]), int(argv[1]), argv[2]
    causal = argv[3:] == ["causal"]
    A = gaussian_head(N, N, 32, 2.0, seed=0, causal=causal).A
    Q, _ = np.linalg.qr(A @ np.random.default_rng(0).standard_normal((N, k)))
    U, W = Q, Q.T @ A
    if causal:
        keep = np.tril(np.ones((N, N), bool))
        err = float(np.where(keep, np.abs(A - U @ W), 0.0).sum(axis=1).max())
        cert = CausalUpperWitness(err * 1.001, U, W, keep)
    else:
        err = float(np.abs(A - U @ W).sum(axis=1).max())
        cert = UpperWitness(err * 1.001, U, W)
    gc.collect()
    if which in ("float64", "midrad"):
        tracemalloc.start()
    t = time.perf_counter()
    if which == "float64":
        r = check_float64(A, cert)
        ok, detail = r.ok, r.detail
    elif which == "check":
        r = check(A, cert)
        ok, detail = r.ok, r.summary()
    else:
        r = check_interval(A, cert, backend=which)
        ok, detail = r.ok, r.detail
    dt = time.perf_counter() - t
    peak = (f"{tracemalloc.get_traced_memory()[1] / 2**20:.0f} MiB"
            if tracemalloc.is_tracing() else "-")
    print(f"N={N} k={k} {which}{' causal' if causal else ''}: ok={ok} {dt:.2f} s, "
          f"numpy peak {peak} | {detail}")


if __name__ == "__main__":
    main(sys.argv[1:])

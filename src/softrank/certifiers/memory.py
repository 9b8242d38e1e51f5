"""The engine's memory model: the peak resident memory a bracket of an ``m x N`` operator may
need, which ``softrank bracket`` and ``softrank audit`` compare with the memory available
before any work (``--max-memory``)."""

from __future__ import annotations

from ..validation import check_int

__all__ = ["memory_estimate", "BASE_MEMORY", "SEARCH_MEMORY", "ENTRY_MEMORY"]

#: Resident memory of a process that has imported the engine (numpy, scipy, HiGHS,
#: python-flint, numba and llvmlite) and holds a small operator, in bytes: 272 MiB. Before the
#: compiled climb (numba) it was 160 MiB, above the ~95 MiB measured then; importing numba and
#: llvmlite adds about 105 MiB (whole-process peaks of ``softrank bracket`` on one MiniLM head
#: of width 64: 112 -> 218 MiB).
BASE_MEMORY = 272 * 2**20

#: What the searches' blocked temporaries and the allocator's retention between them add at
#: most, in bytes: 4 GiB, above the 3,569 MiB of an audit worker of the ``wide`` panel
#: after several width-512 heads. Their temporaries are blocked
#: (:data:`softrank.certifiers.linalg.BLOCK_ENTRIES`, ``TABLE_ENTRIES``), so that they stop
#: growing with the head past a few hundred tokens.
SEARCH_MEMORY = 4 * 2**30

#: Bytes per entry of the operator that a bracket holds at once past that: ``A``, the SVD's
#: factors and LAPACK's workspace, a witness and its residual, and the checker's ball
#: matrices (midpoint and radius, with their products): 224, above the measured peaks of
#: heads of 1,024 to 4,096 tokens (:func:`memory_estimate`).
ENTRY_MEMORY = 224


def memory_estimate(m: int, N: int) -> int:
    """Peak resident memory (bytes) the engine may need to bracket an ``m x N`` operator.

    ``BASE_MEMORY + min(42 m N min(m, N, 384), SEARCH_MEMORY + ENTRY_MEMORY m N)``.

    The first term was fitted (2026-12-05) to whole-process peaks of ``softrank bracket`` at
    three tolerances, full effort, one BLAS thread: the searches probe ranks ``k`` up to
    about ``min(m, N)``, and what they hold grows as ``m N k`` while ``k`` does. Measured
    (estimated) in MiB: MiniLM heads of width 64, 128 and 256, 218, 224 and 834 (283, 356
    and 944); Gaussian heads (``softmax(Q K^T / 2)``, ``Q``, ``K`` with 16 standard normal
    columns) of 64, 128, 192 and 256 square, 227, 354, 538 and 858 (283, 356, 556 and 944);
    width 512, one MiniLM head at eps 0.25 alone 822, and an audit worker of the ``wide``
    panel 3,569 after several width-512 heads at three tolerances (4,304, set to cover it).

    Past a few hundred tokens the searches' temporaries stop growing (they are blocked) and
    what grows is what is held per entry of ``A``: the second term (2026-12-06), below the
    first from 520 x 520 on (at 512 x 512 the first, 4,032 MiB, is still the smaller), so
    that every estimate up to there is as before. Measured
    (estimated) in MiB, one head at eps 0.25, full effort, with a time limit (which ends the
    searches early: what they would hold later is in ``SEARCH_MEMORY``): Gaussian heads
    (``d = 32``, temperature 2) of 1,024 tokens, 1,838 (4,592); of 2,048 tokens, 3,038,
    causal 3,188 (5,264); of 4,096 tokens, 3,466 (7,952), and 4,499 once the l1 refit
    held one LP for every rank (2026-12-07; 8,427 the day before, with an LP per rank);
    planted rank-16 heads of 1,024 and 2,048 tokens, complete, 471 and 1,236
    (docs/benchmarks.md, "The long panel"). Much of it is freed memory the
    allocator keeps, not arrays alive at once (numpy's own peak at width 256 and eps 0.25
    was 138 MiB where the process held 481). An estimate, not a bound: it is what the
    ``--max-memory`` check compares with, before any work; on a GPU the process also holds
    torch and CUDA's own memory (README, *GPU*), which it does not count.

    Parameters
    ----------
    m, N : int
        Queries and keys.

    Returns
    -------
    int
        Bytes.

    Raises
    ------
    InvalidArgumentError
        If ``m`` or ``N`` is not an integer >= 1.
    """
    m, N = check_int(m, "m", 1), check_int(N, "N", 1)
    return BASE_MEMORY + min(42 * m * N * min(m, N, 384), SEARCH_MEMORY + ENTRY_MEMORY * m * N)

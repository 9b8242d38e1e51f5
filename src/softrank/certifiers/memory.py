"""The engine's memory model: the peak resident memory a bracket of an ``m x N`` operator may
need, which ``softrank bracket`` and ``softrank audit`` compare with the memory available
before any work (``--max-memory``)."""

from __future__ import annotations

from ..validation import check_int

__all__ = ["memory_estimate", "BASE_MEMORY"]

#: Resident memory of a process that has imported the engine (numpy, scipy, HiGHS,
#: python-flint, numba and llvmlite) and holds a small operator, in bytes: 272 MiB. Before the
#: compiled climb (numba) it was 160 MiB, above the ~95 MiB measured then; importing numba and
#: llvmlite adds about 105 MiB (whole-process peaks of ``softrank bracket`` on one MiniLM head
#: of width 64: 112 -> 218 MiB).
BASE_MEMORY = 272 * 2**20


def memory_estimate(m: int, N: int) -> int:
    """Peak resident memory (bytes) the engine may need to bracket an ``m x N`` operator.

    ``BASE_MEMORY + 42 m N min(m, N, 384)``, fitted (2026-12-05) to whole-process peaks of
    ``softrank bracket`` at three tolerances, full effort, one BLAS thread: the searches
    probe ranks ``k`` up to about ``min(m, N)``, and what they hold grows as ``m N k`` while
    ``k`` does; their temporaries are blocked (:data:`softrank.certifiers.linalg.BLOCK_ENTRIES`,
    ``TABLE_ENTRIES``), so past ``k = 384`` the growth is taken as ``m N`` only. Measured
    (estimated) in MiB: MiniLM heads of width 64, 128 and 256, 218, 224 and 834 (283, 356
    and 944); Gaussian heads (``softmax(Q K^T / 2)``, ``Q``, ``K`` with 16 standard normal
    columns) of 64, 128, 192 and 256 square, 227, 354, 538 and 858 (283, 356, 556 and 944);
    width 512, one MiniLM head at eps 0.25 alone 822, and an audit worker of the ``wide``
    panel 3,569 after several width-512 heads at three tolerances (4,304, set to cover
    it); an 800 x 800 matrix passed 4.5 GB with an older
    engine (9.9 GiB). Much of it is freed memory the allocator keeps, not arrays alive at
    once (numpy's own peak at width 256 and eps 0.25 was 138 MiB where the process held
    481). An estimate, not a bound: it is what the ``--max-memory`` check compares with,
    before any work; on a GPU the process also holds torch and CUDA's own memory (README,
    *GPU*), which it does not count.

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
    return BASE_MEMORY + 42 * m * N * min(m, N, 384)

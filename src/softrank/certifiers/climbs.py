"""The subspace climb as lower tests of the registry (docs/theory/lower.md#subspace-climb,
docs/theory/lower.md#block-certificates): on the whole head (``subspace-climb``) and on
blocks of its query rows (``subspace-blocks``), both late. Re-exported by
:mod:`softrank.certifiers.registry`, whose :data:`~softrank.certifiers.registry.LOWER_TESTS`
runs them."""

from __future__ import annotations

import functools

import numpy as np

from ..checker import BlockCertificate
from ..errors import InvalidArgumentError
from ..validation import check_int
from . import lower as lo_
from .interface import Context

__all__ = ["SubspaceClimbTest", "SubspaceBlocksTest", "BLOCK_ROWS", "BLOCK_MIN_ROWS",
           "BLOCK_KEY_MASS", "block_keys"]


def _ctx(operator, context: Context | None) -> Context:
    return context if context is not None else Context(operator.A)


class SubspaceClimbTest:
    """Subspace certificate one dimension above ``context.lower`` by ascent on ``beta(S)``
    from the top right singular vectors (:class:`~softrank.certifiers.lower.SubspaceClimb`),
    then the next dimensions while it certifies; searched up to ``context.upper``. Where the
    singular start fails, the starts of :func:`~softrank.certifiers.lower.climb_starts`
    (pivoted-QR rows of ``A``, random rows, mixed singular vectors) are tried at that
    dimension: four in order, then two of four more, chosen by a screen on the keys hardest
    for the climb that failed
    (:meth:`~softrank.certifiers.lower.SubspaceClimb.best`); the first that certifies
    continues the ascent."""

    name = "subspace-climb"
    #: The climb's cap on the constraint entries of one key's LP, ``(k + 1) (2 m + N)``
    #: (:class:`~softrank.certifiers.lower.SubspaceClimb`): dimension 51 at width 128, 25
    #: at 256, 12 at 512.
    max_entries = 20_000

    def certify(self, operator, eps, context=None):
        ctx = _ctx(operator, context)
        return self._climb(ctx, eps, alone=context is None, stop=ctx.past_deadline)

    def _climb(self, ctx: Context, eps: float, alone: bool, keep_base: bool = False,
               max_entries: int | None = None, stop=None):
        """The climb on ``ctx.A`` above ``ctx.lower``, up to ``ctx.upper``; ``alone``: above
        the singular subspaces' end, whose certificate is the answer when the climb finds
        nothing above it and ``keep_base``; ``max_entries`` the climb's cap (default the
        class's); ``stop`` asked before each dimension (a bracket's time limit)."""
        sub = ctx.shared("subspace", lambda: lo_.SubspaceSearch(ctx.A, ctx.svd[2].T, "svd"))
        # 36 evaluations per key (the class's default is 12): on 24 MiniLM heads of width
        # 128 at eps 0.25, budgets 12, 24, 36, 72 raised lower ends by 1, 12, 18, 18 ranks
        # (docs/theory/lower.md#subspace-climb)
        climb = ctx.shared("subspace-climb", lambda: lo_.SubspaceClimb(
            ctx.A, ctx.svd[2].T, "svd", sub.key_order, lps_per_key=36,
            max_entries=self.max_entries if max_entries is None else max_entries))
        base, c = max(ctx.lower, 1), None
        if alone:  # on its own (the suites): above the singular subspaces' end,
            c = sub.best(eps, base + 1, ctx.p)  # as inside a bracket, not from rank 2 up
            base = max(base, c.rank if c is not None else 0)
        order = ctx.shared("row-order", lambda: lo_.row_order(ctx.A))
        V = ctx.svd[2].T
        # the same draws as climb_starts(..., random_rows=2, svd_mix=1) first, in order (so
        # an end never falls below theirs); then four more, screened, two of them climbed
        draws = functools.lru_cache(maxsize=None)(
            lambda k: lo_.climb_starts(ctx.A, V, order, k, random_rows=4, svd_mix=3))
        out = climb.best(eps, base + 1, min(ctx.upper, ctx.p),
                         starts=lambda k: draws(k)[:4], screened=lambda k: draws(k)[4:],
                         screened_climbs=2, stop=stop)
        return c if out is None and keep_base else out


#: Row counts of the blocks of :class:`SubspaceBlocksTest`, tried in this order.
BLOCK_ROWS = (64, 128)
#: The least number of queries of a head on which :class:`SubspaceBlocksTest` runs: from
#: width 256 on, the climb's cap
#: (:attr:`~softrank.certifiers.climbs.SubspaceClimbTest.max_entries`) stops the climb on
#: the whole head at dimension 25 and below (docs/theory/lower.md#block-certificates).
BLOCK_MIN_ROWS = 256
#: The least share of a block's attention mass its keys keep when not every key fits the
#: climb's cap (:func:`~softrank.certifiers.climbs.block_keys`;
#: docs/theory/lower.md#block-certificates): at 4,096 tokens a 128-row block of a Gaussian
#: head certified 64 on the keys holding 81 % of its mass and nothing on those holding 69 %.
BLOCK_KEY_MASS = 0.85


def block_keys(B: np.ndarray, max_entries: int) -> np.ndarray:
    """The keys of a block of ``b`` query rows ``B`` (b, N) on which
    :class:`~softrank.certifiers.climbs.SubspaceBlocksTest` climbs
    (docs/theory/lower.md#block-certificates).

    Every key when the climb's LPs at rank ``b / 2``, ``(b / 2 + 1) (2 b + N)`` entries, fit
    under ``max_entries``. Otherwise the keys of largest mass in the block (column sums of
    ``B``): as many as fit under the cap, and more if those keep less than
    :data:`~softrank.certifiers.climbs.BLOCK_KEY_MASS` of the block's mass (the fewest that
    keep it). Ties go to the smaller index; the keys are returned sorted.

    Returns
    -------
    (c,) int64 ndarray
        Distinct key indices, ``1 <= c <= N``.

    Raises
    ------
    InvalidArgumentError
        If ``B`` is not a 2-D array of finite non-negative numbers with at least one row
        and one key, or ``max_entries`` is not an integer >= 1.
    """
    max_entries = check_int(max_entries, "max_entries", 1)
    B = np.asarray(B)
    if (B.ndim != 2 or 0 in B.shape or B.dtype.kind not in "biuf"
            or not np.isfinite(B).all() or (B < 0).any()):
        raise InvalidArgumentError(f"B must be a 2-D array of finite non-negative numbers "
                                   f"with at least one row and one key, got "
                                   f"{B.dtype} of shape {B.shape}")
    b, N = B.shape
    fit = max_entries // (b // 2 + 1) - 2 * b
    if fit >= N:
        return np.arange(N)
    mass = B.sum(axis=0)
    order = np.argsort(-mass, kind="stable")
    kept = np.cumsum(mass[order])
    need = int(np.searchsorted(kept, BLOCK_KEY_MASS * kept[-1])) + 1
    return np.sort(order[:min(N, max(fit, need, 1))])


class SubspaceBlocksTest(SubspaceClimbTest):
    """The subspace climb on blocks of the head: the rows a column-pivoted QR of ``A^T``
    picks first, :data:`~softrank.certifiers.climbs.BLOCK_ROWS` of them (each block at
    most half the rows), and every key; by the block lemma ``r_eps(A[rows]) <= r_eps(A)``
    a certificate of the block, wrapped as a :class:`~softrank.checker.BlockCertificate`,
    is one of the head (docs/theory/lower.md#block-certificates). A block's LPs have
    ``(k + 1) (2 b + N)`` entries instead of ``(k + 1) (2 m + N)``, so the climb runs at
    the dimensions of wide heads (under its own cap, ``max_entries``) at a fraction of the
    cost. Each block climbs from ``context.lower`` (the second from the first's end) up to
    ``context.upper``, at ranks up to ``b / 2`` for a block of ``b`` rows (near ``b`` a
    certificate needs the block nearly full rank and well conditioned; there the climb spent
    minutes failing, on a 256-query head of random logits at lower end 93). It runs only on
    heads of at least :data:`~softrank.certifiers.climbs.BLOCK_MIN_ROWS` queries and
    declines on smaller ones. Late: after subspace-climb."""

    name = "subspace-blocks"
    #: The climb's cap on a block: 100,000 entries (dimension 259 for 64 rows and 256 keys,
    #: 129 for 128 rows and 512 keys, 21 for 128 rows and 4,096 keys); the test tries ranks
    #: up to half the block's rows.
    max_entries = 100_000

    def certify(self, operator, eps, context=None):
        ctx = _ctx(operator, context)
        m = ctx.A.shape[0]
        if m < BLOCK_MIN_ROWS:
            return None
        order = ctx.shared("row-order", lambda: lo_.row_order(ctx.A))
        best = None
        for b in BLOCK_ROWS:
            if 2 * b > m:
                continue

            def make(b=b):
                rows = np.sort(order[:b])
                keys = block_keys(ctx.A[rows], self.max_entries)
                return rows, keys, Context(np.ascontiguousarray(ctx.A[np.ix_(rows, keys)]))

            lower = max(ctx.lower, best.rank if best is not None else 0)
            if 2 * (lower + 1) > b:
                continue  # a block of b rows is tried for ranks up to b / 2 only
            if lower >= ctx.upper:
                break  # nothing left between the ends
            rows, keys, bctx = ctx.shared(f"block-rows{b}", make)
            bctx.lower, bctx.upper = lower, min(ctx.upper, b // 2)
            # the cap of the keys chosen: above the class's where they keep the block's mass
            cap = max(self.max_entries, (b // 2 + 1) * (2 * b + keys.size))
            inner = self._climb(bctx, eps, alone=context is None, keep_base=True,
                                max_entries=cap, stop=ctx.past_deadline)
            if inner is not None and (best is None or inner.rank > best.rank):
                best = BlockCertificate(
                    inner.eps, rows, keys, inner,
                    f"block(rows={rows.size},keys={keys.size})/{inner.method}")
        return best

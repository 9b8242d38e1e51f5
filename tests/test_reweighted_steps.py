"""Reweighted least-squares steps by conjugate gradients (softrank.certifiers.linalg.weighted_cg,
reweighted_step): the exact solutions they converge to, the descent that makes them valid
majorisation steps, their choice against the exact solves, and the searches that use them."""

from __future__ import annotations

import numpy as np
import pytest

from softrank.certifiers import linalg
from softrank.errors import InvalidArgumentError


def _system(X, w):
    k = X.shape[0]
    G = (X * w) @ X.T
    return G + 1e-12 * max(np.trace(G) / k, 1e-300) * np.eye(k)


def _problem(k, n, r, seed, floor=None):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((k, n))
    if floor is None:
        wt = rng.uniform(0.1, 2.0, size=(r, n))
    else:  # IRLS weights 1 / max(|residual|, floor): badly scaled, as in the searches
        wt = 1.0 / np.maximum(np.abs(rng.standard_normal((r, n))) ** 3, floor)
    B = rng.standard_normal((r, k))
    return X, wt, B


@pytest.mark.parametrize("k, n", [(1, 5), (6, 40), (25, 60)])
def test_weighted_cg_reaches_each_system_solved_alone(k, n, monkeypatch):
    # in exact arithmetic conjugate gradients end in k steps; 3k steps on well-scaled
    # weights reach numpy's solution of each system formed alone, across blocks of rows
    X, wt, B = _problem(k, n, 9, seed=k)
    monkeypatch.setattr(linalg, "BLOCK_ENTRIES", 2 * n)  # two systems a block
    got = linalg.weighted_cg(X, wt, B, np.zeros_like(B), steps=3 * k)
    for i in range(9):
        assert np.allclose(got[i], np.linalg.solve(_system(X, wt[i]), B[i]),
                           rtol=1e-8, atol=1e-10)


def test_weighted_cg_never_increases_each_systems_quadratic():
    # q_i(u) = u^T G_i u / 2 - B_i^T u, G_i formed here alone: from any start, every
    # number of steps gives a q_i no larger than one step fewer (the majorisation property
    # the alternating l1 relies on), on weights spread over six orders of magnitude
    k, n, r = 12, 50, 7
    X, wt, B = _problem(k, n, r, seed=3, floor=1e-6)
    x0 = np.random.default_rng(4).standard_normal((r, k))
    G = [_system(X, wt[i]) for i in range(r)]

    def q(x):
        return np.array([x[i] @ G[i] @ x[i] / 2 - B[i] @ x[i] for i in range(r)])

    prev = q(x0)
    for s in range(1, 2 * k):
        cur = q(linalg.weighted_cg(X, wt, B, x0, steps=s))
        assert (cur <= prev + 1e-9 * np.abs(prev)).all(), s
        prev = cur
    exact = q(np.array([np.linalg.solve(G[i], B[i]) for i in range(r)]))
    assert (prev >= exact - 1e-9 * np.abs(exact)).all()  # never below the minimum


def test_weighted_cg_start_steps_and_bad_input():
    X, wt, B = _problem(4, 10, 3, seed=5)
    x0 = np.ones((3, 4))
    same = linalg.weighted_cg(X, wt, B, x0, steps=0)
    assert np.array_equal(same, x0) and same is not x0  # no step: the start, copied
    # a start that is not finite gives NaN in its own row only, which the callers see
    bad = x0.copy()
    bad[1, 2] = np.nan
    with np.errstate(invalid="ignore"):
        got = linalg.weighted_cg(X, wt, B, bad)
    assert np.isnan(got[1]).all() and np.isfinite(got[[0, 2]]).all()
    # so does a right-hand side or a row of weights that is not finite, at any steps, and
    # every row where X is not finite (no system is live there: the start would come back)
    for s in (0, 10):
        Bn, wn, Xn = B.copy(), wt.copy(), X.copy()
        Bn[:] = np.nan
        wn[2, 3] = np.inf
        Xn[0, 0] = np.nan
        with np.errstate(invalid="ignore"):
            assert np.isnan(linalg.weighted_cg(X, wt, Bn, x0, steps=s)).all()
            got = linalg.weighted_cg(X, wn, B, x0, steps=s)
            assert np.isnan(got[2]).all() and np.isfinite(got[:2]).all()
            assert np.isnan(linalg.weighted_cg(Xn, wt, B, x0, steps=s)).all()
    with pytest.raises(InvalidArgumentError, match="steps"):
        linalg.weighted_cg(X, wt, B, x0, steps=-1)
    with pytest.raises(InvalidArgumentError, match=r"x0 must have shapes"):
        linalg.weighted_cg(X, wt, B, np.ones((3, 5)))
    with pytest.raises(InvalidArgumentError, match="must be 2-D"):
        linalg.weighted_cg(X, wt, B, np.ones(4))
    assert linalg.weighted_cg(X[:0], wt, B[:, :0], x0[:, :0]).shape == (3, 0)


def test_reweighted_step_solves_exactly_up_to_the_rank_and_by_cg_above(monkeypatch):
    # every rank a head of width 128 can reach is solved exactly (the panels up to that
    # width keep their steps bit for bit); above EXACT_MAX_RANK, conjugate gradients
    assert linalg.EXACT_MAX_RANK >= 128
    k, n, r = 10, 30, 6
    X, wt, B = _problem(k, n, r, seed=6, floor=1e-4)
    x0 = np.zeros((r, k))
    assert np.array_equal(linalg.reweighted_step(X, wt, B, x0), linalg.weighted_solves(X, wt, B))
    monkeypatch.setattr(linalg, "EXACT_MAX_RANK", k - 1)
    assert np.array_equal(linalg.reweighted_step(X, wt, B, x0),
                          linalg.weighted_cg(X, wt, B, x0, steps=linalg.CG_STEPS))
    # where a GPU takes the call, the systems are solved exactly whatever their rank
    monkeypatch.setattr(linalg, "solve_device", lambda: object())
    monkeypatch.setattr(linalg, "weighted_solves", lambda X, wt, B: "exact")
    assert linalg.reweighted_step(X, wt, B, x0) == "exact"


def test_searches_with_cg_steps_find_planted_ranks_and_checked_witnesses(monkeypatch):
    # every reweighted step by conjugate gradients: the alternating l1 and the l1 refit
    # still find a rank-3 row-stochastic matrix's rank, and their witnesses pass the checker
    from softrank.certifiers import upper as up_
    from softrank.checker import check

    monkeypatch.setattr(linalg, "EXACT_MAX_RANK", 0)
    rng = np.random.default_rng(7)
    P = rng.dirichlet(np.ones(3), size=60)
    Q = rng.dirichlet(np.ones(80) * 0.3, size=3)
    A = P @ Q
    svd = np.linalg.svd(A, full_matrices=False)
    for con in (up_.AlternatingL1(A, svd, iters=20),
                up_.AlternatingL1(A, svd, iters=40, delta=1e-4, delta_start=1e-2,
                                  delta_decay=0.8),
                up_.L1Refit(A, svd[2])):
        w = con.least_rank(0.05, 1, 10)
        assert w is not None and w.rank == 3
        assert check(A, w).ok


def test_screening_above_the_rank_changes_no_l1_refit_decision(monkeypatch):
    # the screening only bounds rows' optima from above; the LPs decide the rest, so the
    # longer screening with conjugate-gradient steps finds the same least rank at every
    # tolerance, and leaves no more rows to the LPs than the short one
    from softrank.certifiers.upper import refit
    from softrank.generators.synthetic import gaussian_head

    A = gaussian_head(48, 96, 8, 2.0, seed=2).A
    svd = np.linalg.svd(A, full_matrices=False)
    assert refit.screening(128, 96) == {"iters": 8, "delta": 1e-8}
    assert refit.screening(129, 96) == {"iters": 30, "delta": 0.01 / 96}

    def run():
        f = refit.L1Refit(A, svd[2])
        ranks = [f.least_feasible_rank(eps, 1, 47) for eps in (0.5, 0.25, 0.1)]
        return ranks, sum(int((~np.isnan(st["err"])).sum()) for st in f._cache.values())

    exact, lps_exact = run()
    monkeypatch.setattr(refit, "EXACT_MAX_RANK", 0)
    monkeypatch.setattr(linalg, "EXACT_MAX_RANK", 0)
    cg, lps_cg = run()
    assert exact == cg and None not in exact
    assert lps_cg <= lps_exact


def test_brackets_with_cg_steps_everywhere_keep_their_lower_ends_and_stay_sound(monkeypatch):
    # plain and causal heads bracketed with every reweighted step by conjugate gradients
    # (the masked alternating l1 of causal heads included): the lower side does not use
    # them, so the lower ends are those of the exact steps; the upper ends are checked
    # witnesses, never below the lower ends
    import softrank
    from softrank.certifiers.upper import refit
    from softrank.generators.synthetic import gaussian_head

    ops = [gaussian_head(32, 32, 8, 2.0, seed=1),
           gaussian_head(24, 24, 8, 2.0, seed=1, causal=True)]
    exact = [softrank.bracket(op, [0.5, 0.25], effort="fast") for op in ops]
    monkeypatch.setattr(refit, "EXACT_MAX_RANK", 0)
    monkeypatch.setattr(linalg, "EXACT_MAX_RANK", 0)
    calls, cg_solves = [], linalg.weighted_cg
    monkeypatch.setattr(linalg, "weighted_cg",
                        lambda *a, **kw: calls.append(a[0].shape) or cg_solves(*a, **kw))
    cg = []
    for op in ops:
        n = len(calls)
        cg.append(softrank.bracket(op, [0.5, 0.25], effort="fast"))
        assert len(calls) > n  # the head's searches took conjugate-gradient steps
    for ex, got in zip(exact, cg):
        for a, b in zip(ex, got):
            assert a.lower == b.lower and b.lower <= b.upper
            assert b.upper_witness is not None and b.verdict != "error"


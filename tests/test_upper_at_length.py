"""The basic constructions at long widths (docs/theory/witnesses.md#truncated-svd,
docs/theory/witnesses.md#key-support): the truncation-error table in compiled blocks of
rows, and the greedy key cover with lazily recomputed gains.

Independent references: integer factors, whose residuals and row sums are exact in float64
and are computed here in int64; the greedy cover as first written, every gain recomputed at
every step, on matrices built to have ties.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from softrank.certifiers.upper import basic
from softrank.checker import check
from softrank.generators.synthetic import gaussian_head


def _int_errors(P, Vt):
    """Row-l1 errors of ``P Vt - P[:, :k] Vt[:k]`` for every ``k``, in integers."""
    p = Vt.shape[0]
    return np.array([np.abs(P[:, k:] @ Vt[k:]).sum(axis=1).max() for k in range(p + 1)],
                    dtype=np.float64)


@pytest.mark.parametrize("numpy_work, block", [(None, None), (0, None), (0, 3)])
def test_truncation_errors_are_exact_on_integer_factors(monkeypatch, numpy_work, block):
    # entries are small integers: every product, difference and sum is exact, so the
    # compiled blocks (any row block, any order of the sums) give the integer table
    rng = np.random.default_rng(0)
    P = rng.integers(-3, 4, size=(37, 11))
    Vt = rng.integers(-2, 3, size=(11, 29))
    if numpy_work is not None:
        monkeypatch.setattr(basic, "ERROR_NUMPY_WORK", numpy_work)
    if block is not None:  # 3 rows a block: 12 full blocks and a partial one of 1 row
        monkeypatch.setattr(basic, "ERROR_BLOCK_ENTRIES", block * 29)
    errs = basic.truncation_errors((P @ Vt).astype(float), P.astype(float), Vt.astype(float))
    np.testing.assert_array_equal(errs, _int_errors(P, Vt))
    assert errs[-1] == 0.0


def test_truncation_errors_of_the_identity(monkeypatch):
    # I_N with P = Vt = I: rank k leaves rows k.. with their 1, so the error is 1 up to N
    monkeypatch.setattr(basic, "ERROR_NUMPY_WORK", 0)
    eye = np.eye(40)
    errs = basic.truncation_errors(eye, eye, eye)
    np.testing.assert_array_equal(errs, np.r_[np.ones(40), 0.0])


@pytest.mark.parametrize("numpy_work", [None, 0])
def test_a_nan_residual_makes_the_error_nan(monkeypatch, numpy_work):
    if numpy_work is not None:
        monkeypatch.setattr(basic, "ERROR_NUMPY_WORK", numpy_work)
    eye = np.eye(6)
    A = eye.copy()
    A[4, 2] = np.nan
    errs = basic.truncation_errors(A, eye, eye)
    assert np.isnan(errs).all()  # the row keeps its nan at every rank


def test_the_compiled_table_agrees_with_one_pass_per_rank(monkeypatch):
    op = gaussian_head(300, 280, 16, 2.0, seed=4)
    A = np.asarray(op.A, dtype=float)
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    assert A.shape[0] * A.shape[1] * s.size > basic.ERROR_NUMPY_WORK  # the compiled path
    fast = basic.truncation_errors(A, U * s, Vt)
    monkeypatch.setattr(basic, "ERROR_NUMPY_WORK", 10**12)
    slow = basic.truncation_errors(A, U * s, Vt)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-13)
    # and the construction picks its rank from the table, its witness passing the checker
    ts = basic.TruncatedSVD(A, (U, s, Vt))
    w = ts.least_rank(0.25)
    assert w is not None and check(A, w).ok
    assert slow[w.rank] <= 0.25 and (w.rank == 1 or slow[w.rank - 1] > 0.25 - 1e-9)


def _eager_cover(A, eps):
    """The greedy cover recomputing every key's gain at every step (lowest key on ties)."""
    m, N = A.shape
    need = 1.0 - basic.safe_target(eps)
    mass, chosen, free = np.zeros(m), [], np.ones(N, dtype=bool)
    while True:
        deficit = np.maximum(need - mass, 0.0)
        if not (deficit > 0).any():
            return sorted(chosen)
        gain = np.minimum(A, deficit[:, None]).sum(axis=0)
        gain[~free] = -1.0
        j = int(gain.argmax())
        if gain[j] <= 0:
            return None
        chosen.append(j)
        free[j] = False
        mass += A[:, j]
        if len(chosen) > min(m, N):
            return None


def _keys(w):
    return None if w is None else np.nonzero(w.W.any(axis=0))[0].tolist()


@given(st.integers(2, 12), st.integers(2, 14), st.integers(0, 2**32 - 1),
       st.sampled_from([0.05, 0.25, 0.5, 0.75]), st.booleans())
def test_lazy_cover_picks_the_eager_covers_keys(m, N, seed, eps, duplicate):
    # entries are multiples of 1/16, and duplicated columns, so gains tie exactly
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(16, rng.dirichlet(np.full(N, 0.5)), size=m)
    if duplicate:
        counts[:, N // 2:] = counts[:, :N - N // 2][:, :N // 2]
    A = counts / 16.0
    A = A[A.sum(axis=1) > 0] if duplicate else A
    if A.shape[0] == 0:
        return
    w = basic.key_support(A, eps)
    assert _keys(w) == _eager_cover(A, eps)
    if w is not None:
        assert check(A, w).ok


@pytest.mark.parametrize("temperature", [0.5, 2.0, 8.0])
@pytest.mark.parametrize("eps", [0.05, 0.25, 0.5])
def test_lazy_cover_on_gaussian_heads(temperature, eps):
    A = np.asarray(gaussian_head(160, 200, 16, temperature, seed=7).A, dtype=float)
    w = basic.key_support(A, eps)
    assert _keys(w) == _eager_cover(A, eps)
    assert w is None or check(A, w).ok  # None: the cover needs more than 160 keys


def test_the_cover_of_a_matrix_with_negative_entries_recomputes_every_gain():
    # gains need not fall where A < 0, so the cover keeps the eager steps there
    A = np.array([[0.7, 0.5, -0.2], [0.1, 0.6, 0.3], [-0.1, 0.3, 0.8]])
    assert _keys(basic.key_support(A, 0.3)) == _eager_cover(A, 0.3)


def test_truncation_errors_refuse_factors_that_do_not_fit(monkeypatch):
    from softrank.errors import InvalidArgumentError

    monkeypatch.setattr(basic, "ERROR_NUMPY_WORK", 0)  # the compiled path reads no bounds
    A, P, Vt = np.ones((5, 7)), np.ones((5, 3)), np.ones((3, 7))
    for args in ((A, P, Vt[:, :6]), (A, P[:4], Vt), (A, P[:, :2], Vt), (A[0], P, Vt)):
        with pytest.raises(InvalidArgumentError, match="^A, P, Vt: expected shapes"):
            basic.truncation_errors(*args)


def test_the_cover_is_the_same_whatever_the_layout_or_type():
    # a Fortran-ordered or float32 A is covered as its C-ordered float64 copy: the gains are
    # summed over the rows in order in float64 (numpy sums a Fortran column pairwise)
    rng = np.random.default_rng(11)
    A = rng.dirichlet(np.full(50, 0.3), 48)
    for eps in (0.1, 0.25, 0.5):
        want = _keys(basic.key_support(A, eps))
        assert want == _eager_cover(A, eps)
        assert _keys(basic.key_support(np.asfortranarray(A), eps)) == want
        assert _keys(basic.key_support(A[:, ::-1][:, ::-1], eps)) == want  # a strided view
    A32 = np.array([[.6, .6, 0, 0, 0], [.6, .6, 0, 0, 0], [0, 2**-30, .2, .2, .2],
                    [0, 2**-30, .2, .2, .2]], dtype=np.float32)
    for eps in (0.5, 0.55):
        A64 = A32.astype(np.float64)
        assert _keys(basic.key_support(A32, eps)) == _keys(basic.key_support(A64, eps)) \
            == _eager_cover(A64, eps)


# ---- dual bounds before LPs (docs/theory/witnesses.md#dual-bounds-before-lps)

from softrank.certifiers.lp import L1Regression  # noqa: E402
from softrank.certifiers.upper import refit  # noqa: E402


def test_dual_bounds_of_hand_worked_rows():
    # a = e1 on the all-ones basis: min_u |1 - u| + 2 |u| = 1 at u = 0; the dual point
    # (1, -1/2, -1/2) reaches it
    lb = refit.l1_dual_bounds(np.array([[1.0, 0.0, 0.0]]), np.array([[1.0, 1.0, 1.0]]))
    assert lb[0] == pytest.approx(1.0, abs=1e-12)
    # basis e1: u = a_1 leaves |0.2| + |-0.3| + |0.1| = 0.6, and y = (0, 1, -1, 1) shows it
    lb = refit.l1_dual_bounds(np.array([[0.5, 0.2, -0.3, 0.1]]), np.array([[1.0, 0, 0, 0]]))
    assert lb[0] == pytest.approx(0.6, abs=1e-12)
    # a row in the span of W: the optimum is 0, and its null-space part is rounding, which
    # must not be read as a bound (a point the projection cancels is dropped)
    for a in ([2.0, 2.0, 2.0], [0.1, 0.1, 0.1], [1 / 3, 1 / 3, 1 / 3]):
        lb = refit.l1_dual_bounds(np.array([a]), np.array([[1.0, 1.0, 1.0]]))
        assert lb[0] <= 1e-12


@given(seed=st.integers(0, 2**31 - 1), k=st.integers(1, 6), N=st.integers(4, 12),
       repeat=st.booleans())
def test_dual_bounds_never_exceed_the_l1_optimum(seed, k, N, repeat):
    # weak duality: every bound is at most the row's optimum, which the LP's u bounds from
    # above (its error is recomputed from u); W may repeat a row (rank below k)
    rng = np.random.default_rng(seed)
    k = min(k, N - 1)
    W = rng.standard_normal((k, N))
    if repeat and k > 1:
        W[-1] = W[0]
    A = rng.random((5, N))
    lb = refit.l1_dual_bounds(A, W)
    # any first points: the bound is taken only after the projection
    warm = refit.l1_dual_bounds(A, W, start=rng.standard_normal(A.shape))
    lp = L1Regression(W)
    for i in range(A.shape[0]):
        u = lp.solve(A[i])
        assert u is not None
        opt = np.abs(A[i] - u @ W).sum()
        assert lb[i] <= opt + 1e-9 and warm[i] <= opt + 1e-9


def test_the_lps_own_dual_point_gives_its_optimum():
    # strong duality: started from the LP's optimal y (W y = 0, |y| <= 1, a^T y = optimum),
    # the projection keeps it and the bound is the optimum; at the next rank the same point,
    # projected, still bounds that rank's optimum
    from softrank.certifiers.lp import EqualityLP

    A = gaussian_head(64, 64, 16, 2.0, seed=5).A
    Vt = np.linalg.svd(A)[2]
    # the LP of L1Regression, max a^T y s.t. W y = 0, -1 <= y <= 1, whose x is y
    lp = EqualityLP(Vt[:12], np.zeros(64), np.full(64, -1.0), np.ones(64), maximize=True)
    for i in range(4):
        res = lp.solve(cost=A[i])
        assert res.success
        u, y = res.y, res.x
        opt = np.abs(A[i] - u @ Vt[:12]).sum()
        assert np.abs(Vt[:12] @ y).max() < 1e-9 and np.abs(y).max() <= 1 + 1e-9
        lb = refit.l1_dual_bounds(A[[i]], Vt[:12], start=y[None])
        assert lb[0] == pytest.approx(opt, rel=1e-7)
        u13 = L1Regression(Vt[:13]).solve(A[i])
        opt13 = np.abs(A[i] - u13 @ Vt[:13]).sum()
        lb13 = refit.l1_dual_bounds(A[[i]], Vt[:13], start=y[None])
        assert lb13[0] <= opt13 + 1e-9


def test_dual_bounds_reach_most_of_the_optimum_far_from_the_least_rank():
    A = gaussian_head(128, 128, 32, 2.0, seed=3).A
    Vt = np.linalg.svd(A)[2]
    W = Vt[:20]
    lb = refit.l1_dual_bounds(A[:8], W)
    lp = L1Regression(W)
    opt = np.array([np.abs(A[i] - lp.solve(A[i]) @ W).sum() for i in range(8)])
    assert (lb <= opt + 1e-9).all()
    assert (lb >= 0.5 * opt).all()  # the ascent is worth running only if it gets close


def _counted(fit):
    """``fit`` with its exact row solves counted."""
    calls = []
    solve = fit._solve_row

    def counting(st_, k, i, stop=None):
        calls.append((k, i))
        return solve(st_, k, i, stop)

    fit._solve_row = counting
    return calls


@pytest.mark.parametrize("seed, eps", [(0, 0.25), (1, 0.1), (2, 0.5)])
def test_the_dual_screen_changes_no_decision_and_saves_lps(monkeypatch, seed, eps):
    monkeypatch.setattr(refit, "DUAL_MIN_ENTRIES", 0)  # at every size, so a small head shows it
    A = gaussian_head(96, 96, 16, 2.0, seed=seed).A
    Vt = np.linalg.svd(A)[2]
    plain, screened = refit.L1Refit(A, Vt), refit.L1Refit(A, Vt)
    plain.dual_rows = 0
    n_plain, n_screened = _counted(plain), _counted(screened)
    for k in (1, 3, 10, 25, 40, 60, 80, 95):
        assert screened.feasible(k, eps) == plain.feasible(k, eps), k
    assert (screened.least_feasible_rank(eps, 1, 96) == plain.least_feasible_rank(eps, 1, 96))
    # the failing probes far below the least rank are decided by a bound, not an LP
    low = [k for k, _ in n_screened if k <= 10]
    assert len(low) < len([k for k, _ in n_plain if k <= 10])


def test_dual_bounds_refuse_what_they_cannot_read():
    from softrank.errors import InvalidArgumentError

    bad = [({"A": np.ones((2, 4)), "W": np.ones((1, 3))}, "A, W"),
           ({"A": np.zeros((2, 0)), "W": np.zeros((1, 0))}, "A, W"),
           ({"A": np.ones((2, 4)), "W": np.ones((1, 4)), "steps": 0}, "steps"),
           ({"A": np.ones((2, 4)), "W": np.ones((1, 4)), "start": np.ones((1, 4))}, "start"),
           ({"A": np.ones((2, 4)) + 1j, "W": np.ones((1, 4))}, "A: expected real"),
           ({"A": np.array([["a"] * 4]), "W": np.ones((1, 4))}, "A: expected real"),
           ({"A": np.ones((2, 4)), "W": np.full((1, 4), np.nan)}, "W: expected finite")]
    for kw, msg in bad:
        with pytest.raises(InvalidArgumentError, match=msg):
            refit.l1_dual_bounds(**kw)


def test_no_dual_bound_below_its_size():
    # 96 keys at rank 40: k N = 3,840, below DUAL_MIN_ENTRIES, so the LPs decide alone
    A = gaussian_head(96, 96, 16, 2.0, seed=0).A
    fit = refit.L1Refit(A, np.linalg.svd(A)[2])
    fit.feasible(40, 0.25)
    assert 40 * 96 < refit.DUAL_MIN_ENTRIES
    assert not fit._cache[40]["dual"] and np.isneginf(fit._cache[40]["lb"]).all()


def test_a_point_the_projection_nearly_cancels_gives_no_bound():
    # a row of norm 1e6 in the span of W (optimum ~0) and a first point within 2e-6 of that
    # span: the projection keeps only rounding of the big part, which must not be read as
    # a bound (it was, as 1.8e-3, when points kept down to 1e-6 of their size counted)
    rng = np.random.default_rng(0)
    N, k = 160, 150
    W = rng.standard_normal((k, N))
    Q = np.linalg.qr(W.T)[0]
    a = 1e6 * (Q @ rng.standard_normal(k))
    n = rng.standard_normal(N)
    n -= Q @ (Q.T @ n)
    start = Q @ (Q.T @ a) / np.abs(a).max() + 2e-6 * n / np.abs(n).max()
    lb = refit.l1_dual_bounds(a[None], W, steps=1, start=start[None])
    u = L1Regression(W).solve(a)
    assert lb[0] <= np.abs(a - u @ W).sum() + 1e-9


def test_the_dual_rows_are_read_when_a_rank_is_decided(monkeypatch):
    monkeypatch.setattr(refit, "DUAL_MIN_ENTRIES", 0)
    monkeypatch.setattr(refit, "DUAL_ROWS", 0)
    A = gaussian_head(64, 64, 16, 2.0, seed=0).A
    fit = refit.L1Refit(A, np.linalg.svd(A)[2])
    fit.feasible(3, 0.25)
    assert np.isneginf(fit._cache[3]["lb"]).all()
    hardest = fit._hardest  # the row whose LP ended rank 3
    monkeypatch.setattr(refit, "DUAL_ROWS", 4)
    assert not fit.feasible(5, 0.25)
    st = fit._cache[5]
    ls_err = refit.l1_candidates(A, fit.Vt[:5], iters=0)[1]
    top = np.argsort(-ls_err, kind="stable")[:4]
    bounded = set(np.nonzero(np.isfinite(st["lb"]))[0].tolist())
    assert bounded == set(top.tolist()) | ({hardest} if hardest is not None else set())
    # failed by a bound, the rank keeps no m x k array (88 MB each at 4,096 keys, rank
    # 2,700): its least squares are made again if another tolerance asks
    assert st["U"] == {} and st["cU"] is None and st["cerr"] is None
    assert fit.feasible(5, 0.9) == refit.L1Refit(A, fit.Vt).feasible(5, 0.9)


# ---- one LP for every rank (docs/theory/witnesses.md#l1-refit)


def test_nested_l1_regression_on_a_hand_worked_basis():
    # W = [ones; e1]: a = e1 has optimum 1 on the first row alone (u = 0: |1 - u| + 3 |u|
    # >= 1) and 0 on both; going back to k = 1 deletes the second row and gives 1 again
    from softrank.errors import InvalidArgumentError

    W = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    a = np.array([1.0, 0.0, 0.0, 0.0])
    reg = L1Regression(W)
    for k, opt in [(1, 1.0), (2, 0.0), (1, 1.0), (2, 0.0)]:
        u = reg.solve(a, k)
        assert u.shape == (k,)
        assert np.abs(a - u @ W[:k]).sum() == pytest.approx(opt, abs=1e-9)
        assert reg._lp.shape == (k, 4)  # one LP, of the rank last asked
    assert reg.solve(a).shape == (2,)  # k defaults to every row
    for bad in (0, 3, 1.0, True):
        with pytest.raises(InvalidArgumentError, match="k: expected an integer"):
            reg.solve(a, bad)


@given(seed=st.integers(0, 2**31 - 1), ranks=st.lists(st.integers(1, 9), min_size=1,
                                                      max_size=8))
def test_nested_l1_regression_matches_a_fresh_lp_at_every_rank(seed, ranks):
    # one instance asked ranks up and down, rows interleaved: each optimum equals that of
    # an LP built for that rank alone (both are the l1 minimum; errors recomputed from u)
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((9, 14))
    A = rng.random((3, 14))
    reg = L1Regression(W)
    for j, k in enumerate(ranks):
        a = A[j % 3]
        u, v = reg.solve(a, k), L1Regression(W[:k]).solve(a)
        assert u is not None and v is not None
        e, f = np.abs(a - u @ W[:k]).sum(), np.abs(a - v @ W[:k]).sum()
        assert e == pytest.approx(f, rel=1e-7, abs=1e-9)


def test_equality_lp_rows_refused():
    from softrank.certifiers.lp import EqualityLP
    from softrank.errors import InvalidArgumentError

    lp = EqualityLP(np.ones((1, 3)), np.zeros(3), np.zeros(3), np.ones(3))
    with pytest.raises(InvalidArgumentError, match="G must have 3 columns"):
        lp.add_rows(np.ones((1, 4)))
    with pytest.raises(InvalidArgumentError, match="G must be finite"):
        lp.add_rows(np.array([[1.0, np.nan, 0.0]]))
    with pytest.raises(InvalidArgumentError, match="j: expected an integer"):
        lp.delete_rows(2)
    assert lp.shape == (1, 3)
    lp.add_rows(np.eye(3)[:2])
    lp.delete_rows(1)
    assert lp.shape == (2, 3) and lp.solve(np.array([1.0, 0.5])).success
    import scipy.sparse as sp

    lp.add_rows(sp.csr_matrix(np.eye(3)[2:]))  # sparse rows, as the constructor takes
    res = lp.solve(np.array([1.0, 0.5, 0.25]))
    assert lp.shape == (3, 3) and res.success
    np.testing.assert_allclose(res.x, [0.5, 0.25, 0.25], atol=1e-9)  # ones, e1, e3


def test_l1_refit_holds_one_lp_and_the_exact_rows_alone():
    # a search over many ranks keeps a single LP (of the rank last solved), and each rank
    # only the rows solved exactly, where each rank kept an LP and an m x k array before
    A = gaussian_head(96, 96, 16, 2.0, seed=1).A
    fit = refit.L1Refit(A, np.linalg.svd(A)[2])
    fit.dual_rows = 0
    k = fit.least_feasible_rank(0.25, 1, 95)
    solved = {j: int((~np.isnan(s["err"])).sum()) for j, s in fit._cache.items()}
    assert sum(solved.values()) > 0
    for j, s in fit._cache.items():
        assert sorted(s["U"]) == sorted(np.nonzero(~np.isnan(s["err"]))[0].tolist())
        assert all(u.shape == (j,) for u in s["U"].values())
    assert fit._solver._lp.shape[0] in fit._cache
    w = fit.witness(0.25, k)
    assert check(A, w).ok


def test_rows_with_entries_highs_drops_are_added():
    # HiGHS drops entries below its small_matrix_value (1e-9) with a warning, as the
    # constructor accepts; rows of A (the row basis) have such entries (softmax tails)
    W = np.array([[1.0, 1e-12, 1.0, 0.0], [1.0, 2e-13, 0.0, 1.0], [0.0, 1.0, 0.0, 3e-11]])
    a = np.array([1.0, 0.0, 0.5, 0.25])
    reg = L1Regression(W)
    for k in (1, 3, 2):
        u = reg.solve(a, k)
        v = L1Regression(W[:k]).solve(a)
        assert u is not None and v is not None
        assert np.abs(a - u @ W[:k]).sum() == pytest.approx(np.abs(a - v @ W[:k]).sum(),
                                                            abs=1e-9)


def test_each_solve_gets_the_whole_time_limit():
    # HiGHS counts time_limit from an instance's first run: with one LP for every rank, the
    # solves after the first time_limit seconds would all end at once ("Time limit
    # reached"), and the ranks they decide would be lost; each solve gets the limit anew
    from softrank.certifiers.lp import EqualityLP

    rng = np.random.default_rng(0)
    W = rng.standard_normal((120, 300))
    lp = EqualityLP(W, np.zeros(300), -np.ones(300), np.ones(300), time_limit=1.0,
                    maximize=True)
    runs = 0
    while lp._h.getRunTime() < 2.5:  # solves of about 0.05 s: 2.5 limits' worth on one LP
        assert lp.solve(cost=rng.random(300)).success
        runs += 1
    assert runs > 10

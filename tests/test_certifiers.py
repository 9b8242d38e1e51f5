"""Certifiers and ``bracket()`` (docs/theory/quantity.md, docs/theory/witnesses.md, docs/theory/lower.md): hand-worked exact ranks, planted instances,
soundness invariants, re-checking every reported certificate, LP failure handling, bad input.

Independent references used here: matrices whose ``r_eps`` is known by hand (identity,
constant rows, permuted uniform blocks), planted instances with a known upper bound, and a
numpy truncated SVD whose error is summed with ``math.fsum`` (an upper bound on ``r_eps``
that no sound lower certificate may exceed).
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from softrank import Operator, bracket
from softrank.certifiers import lp
from softrank.certifiers.lp import BasisPursuit, EqualityLP, L1Regression, LPResult
from softrank.checker import (
    DecodedInverseCertificate,
    FrobeniusCertificate,
    KeyGroupCertificate,
    SubspaceCertificate,
    TrivialCertificate,
    UpperWitness,
    check,
    load_certificate,
    save_certificate,
)
from softrank.errors import InvalidArgumentError, InvalidOperatorError
from softrank.generators.synthetic import (
    ball,
    gaussian_head,
    grid,
    planted,
    planted_blocks,
    sphere,
)

LP_METHODS = ("lp-decoder", "l1-refit", "hybrid", "subspace", "row-basis", "alternating-l1",
              "trust-region")
LOWER_KINDS = (TrivialCertificate, FrobeniusCertificate, KeyGroupCertificate,
               DecodedInverseCertificate, SubspaceCertificate)


# --------------------------------------------------------------------------- references


def svd_upper(A, eps):
    """Least k whose numpy truncated SVD has max row l1 error <= eps - 1e-9 (fsum rows):
    an upper bound on r_eps(A) computed without softrank."""
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    for k in range(1, s.size + 1):
        E = np.abs(A - (U[:, :k] * s[:k]) @ Vt[:k])
        if max(math.fsum(r) for r in E) <= eps - 1e-9:
            return k
    return min(A.shape)


def block_uniform(m, N, k):
    B = np.zeros((m, N))
    for qs, ks in zip(np.array_split(np.arange(m), k), np.array_split(np.arange(N), k)):
        B[np.ix_(qs, ks)] = 1.0 / ks.size
    return B


def block_permutation(m, N, k, seed):
    rng = np.random.default_rng(seed)
    return block_uniform(m, N, k)[rng.permutation(m)][:, rng.permutation(N)]


def assert_sound(A, br, eps, recheck=True):
    """Invariants every bracket must satisfy, and an independent re-check of its ends."""
    A = np.asarray(A, dtype=np.float64)
    p = min(A.shape)
    assert br.eps == eps
    assert br.verdict in ("resolved", "open"), (br.verdict, br.diagnostics)
    assert 1 <= br.lower <= br.upper <= p, (br.lower, br.upper)
    assert (br.verdict == "resolved") == (br.lower == br.upper)
    assert br.resolved == (br.lower == br.upper)
    lc, uw = br.lower_certificate, br.upper_witness
    assert isinstance(lc, LOWER_KINDS) and isinstance(uw, UpperWitness)
    assert lc.rank == br.lower and uw.rank == br.upper
    assert lc.eps == eps and uw.eps == eps
    assert br.lower_method == lc.method and br.upper_method == uw.method
    # the true r_eps is at most rank(A) (B = A) and at most the independent SVD rank
    assert br.lower <= np.linalg.matrix_rank(A) or br.lower == 1
    assert br.lower <= svd_upper(A, eps)
    # the witness's error, summed independently, is within eps (up to fl(UW) rounding)
    E = np.abs(A - uw.U @ uw.W)
    assert max(math.fsum(r) for r in E) <= eps + 1e-12
    if recheck:
        for cert in (lc, uw):
            rep = check(A.copy(), cert, max_rows=None)
            assert rep.ok and not rep.disagree, (cert.method, rep.summary())


def assert_consistent(brs):
    """r_eps is non-increasing in eps, so lower(e_big) <= r(e_big) <= r(e_small) <= upper(e_small)."""
    for a in brs:
        for b in brs:
            if b.eps >= a.eps:
                assert b.lower <= a.upper, (a.eps, a.upper, b.eps, b.lower)


# ------------------------------------------------------------------------ hand-worked cases


@pytest.mark.parametrize("eps", [0.1, 0.5, 0.9])
def test_identity_is_full_rank(eps):
    I8 = np.eye(8)
    (br,) = bracket(I8, eps)
    assert (br.lower, br.upper, br.verdict) == (8, 8, "resolved")
    assert_sound(I8, br, eps)


def test_identity_all_tolerances_in_one_call():
    eps = [0.9, 0.1, 0.5]
    brs = bracket(np.eye(8), eps)
    assert [b.eps for b in brs] == eps  # order kept
    assert all((b.lower, b.upper) == (8, 8) for b in brs)


def test_repeated_tolerance_is_rejected():
    with pytest.raises(InvalidArgumentError, match="^eps: tolerances repeat"):
        bracket(np.eye(4), [0.1, 0.5, 0.1])


@pytest.mark.parametrize("shape", [(6, 10), (1, 5), (10, 3), (4, 4)])
@pytest.mark.parametrize("eps", [0.1, 0.5, 0.9])
def test_constant_rows_rank_one(shape, eps):
    A = np.full(shape, 1.0 / shape[1])
    (br,) = bracket(A, eps)
    assert (br.lower, br.upper) == (1, 1)
    assert_sound(A, br, eps)


@pytest.mark.parametrize("m, N, k, seed", [(12, 9, 3, 0), (16, 12, 4, 1), (10, 10, 5, 2),
                                           (8, 6, 2, 3), (15, 20, 5, 4)])
def test_block_permutation_exact(m, N, k, seed):
    # k uniform blocks, rows and columns permuted: r_eps = k for every eps < 1 (the
    # block-uniform matrix itself has rank k; one witness per block has margin 1 > eps).
    A = block_permutation(m, N, k, seed)
    eps = [0.05, 0.3, 0.5, 0.75, 0.99]
    brs = bracket(A, eps)
    for e, br in zip(eps, brs):
        assert (br.lower, br.upper) == (k, k), (e, br.lower, br.upper, br.diagnostics)
        assert_sound(A, br, e)


@pytest.mark.parametrize(
    "m, N, k, delta",
    [(24, 20, 4, 0.05), (16, 16, 4, 0.1), (30, 24, 6, 0.05), (20, 30, 5, 0.02),
     (16, 16, 8, 0.1), (12, 12, 3, 0.2)],
)
def test_planted_blocks_exact(m, N, k, delta):
    op = planted_blocks(m, N, k, delta, seed=1)
    lo, hi = 2 * delta, 1 - 2 * delta
    eps = [lo, lo + (hi - lo) / 3, (lo + hi) / 2, hi - 1e-3]
    brs = bracket(op, eps)
    for e, br in zip(eps, brs):
        assert (br.lower, br.upper) == (k, k), (e, br.lower, br.upper)
        assert_sound(op.A, br, e, recheck=(e == eps[1]))


@pytest.mark.parametrize("A", [planted_blocks(12, 12, 3, 0.0).A, np.full((4, 5), 0.2)],
                         ids=["blocks", "constant"])
def test_eps_zero_is_rejected(A):
    """eps = 0 is the exact rank, which float64 witnesses cannot certify: rejected up front."""
    with pytest.raises(InvalidArgumentError, match="^eps:"):
        bracket(A, 0.0)


@pytest.mark.parametrize("seed", range(4))
def test_planted_lower_never_exceeds_k(seed):
    k, delta = 3, 0.1
    op = planted(20, 16, k, delta, seed=seed)
    eps = [delta + 1e-6, 2 * delta, 0.35, 0.6, 0.9]
    brs = bracket(op, eps)
    for e, br in zip(eps, brs):
        assert br.lower <= k, (e, br.lower, br.lower_method)
        assert_sound(op.A, br, e, recheck=(e == eps[0]))
    assert_consistent(brs)


@given(
    k=st.integers(1, 4), dm=st.integers(0, 10), dn=st.integers(0, 10),
    delta=st.floats(0.0, 0.3), frac=st.floats(0.0, 1.0), seed=st.integers(0, 2**31 - 1),
    conc=st.sampled_from([0.1, 0.3, 1.0]),
)
def test_property_planted_lower_at_most_k(k, dm, dn, delta, frac, seed, conc):
    op = planted(k + dm + 1, k + dn + 1, k, delta, seed=seed, concentration=conc)
    eps = delta + 1e-9 + frac * (0.999 - delta - 1e-9)
    (br,) = bracket(op, eps)
    assert br.lower <= k
    assert_sound(op.A, br, eps, recheck=False)


# ------------------------------------------------- certifier components, hand-worked values


@pytest.mark.parametrize("eps, rank", [(0.1, 8), (0.3, 8), (0.5, 6), (0.7, 5), (0.9, 2)])
def test_frobenius_search_on_identity(eps, rank):
    # I_8, all rows: tail sum_{j>r} sigma_j^2 = 8 - r > 8 eps^2 gives rank r + 1; subsets of
    # s rows give s - r > s eps^2, never better. e.g. eps = 0.5: 8 - r > 2 -> r = 5 -> 6.
    from softrank.certifiers import lower

    I8 = np.eye(8)
    c = lower.frobenius(I8, eps, lower.row_order(I8), {})
    assert c.rank == rank
    assert check(I8, c).ok


def test_trivial_candidate():
    from softrank.certifiers import lower

    A = np.full((3, 4), 0.25)
    assert lower.trivial(A, 0.5).rank == 1
    assert lower.trivial(A, 1.0) is None


@pytest.mark.parametrize("eps", [0.1, 0.6, 0.95])
def test_key_groups_search_on_identity_and_blocks(eps):
    from softrank.certifiers import lower

    c = lower.key_groups(np.eye(8), eps)
    assert c.rank == 8 and check(np.eye(8), c).ok
    A = block_permutation(12, 9, 3, seed=5)
    c = lower.key_groups(A, eps)
    assert c.rank == 3 and check(A, c).ok


def test_lp_decoder_hand_worked():
    from softrank.certifiers import lower

    # A = [[3/4, 1/4], [1/4, 3/4]], singleton groups. k = 2: L = A^{-1}, ||L||_inf = 2,
    # certificate iff 2 eps < 1. k = 1: min |l|_1 with l . (3/4, 1/4) = 1 is 4/3.
    A = np.array([[0.75, 0.25], [0.25, 0.75]])
    dec = lower.LPDecoder(A, [np.array([0]), np.array([1])], "singletons")
    c = dec.best(0.4, 1, 2)
    assert c.rank == 2
    np.testing.assert_allclose(c.L, [[1.5, -0.5], [-0.5, 1.5]], atol=1e-9)
    assert check(A, c).ok
    c = dec.best(0.6, 1, 2)
    assert c.rank == 1
    assert abs(np.abs(c.L).sum() - 4 / 3) < 1e-9
    assert dec.best(0.8, 1, 2) is None  # 4/3 * 0.8 > 1
    I8 = np.eye(8)
    dec = lower.LPDecoder(I8, [np.array([j]) for j in range(8)], "singletons")
    assert dec.best(0.9, 1, 8).rank == 8


@pytest.mark.parametrize("eps, keys", [(0.05, 10), (0.25, 8), (0.45, 6), (0.85, 2)])
def test_key_support_on_constant_rows(eps, keys):
    # every key carries 1/10 of each row: the least cover with mass >= 1 - eps has
    # ceil(10 (1 - eps)) keys
    from softrank.certifiers import upper

    A = np.full((12, 10), 0.1)
    w = upper.key_support(A, eps)
    assert w.rank == keys
    assert check(A, w).ok


def test_key_support_never_returns_a_non_cover():
    from softrank.certifiers import upper

    A = np.full((3, 10), 0.1)
    w = upper.key_support(A, 0.25)
    assert w is None or check(A, w).ok


def test_truncated_svd_and_refit_on_hand_worked():
    from softrank.certifiers import upper

    I8 = np.eye(8)
    ts = upper.TruncatedSVD(I8, np.linalg.svd(I8))
    assert ts.least_rank(0.99).rank == 8  # r_eps(I) = 8 for eps < 1: no rank-7 matrix is closer
    A = np.full((5, 6), 1 / 6)
    ts = upper.TruncatedSVD(A, np.linalg.svd(A, full_matrices=False))
    assert ts.least_rank(0.01).rank == 1
    assert check(A, ts.witness(0.01, 1)).ok
    fit = upper.L1Refit(A, np.linalg.svd(A)[2])
    w = fit.least_rank(0.01, 1, 5)
    assert w.rank == 1 and check(A, w).ok


# -------------------------------------------------------------- invariants on a small panel

PANEL = {
    "sphere": lambda: sphere(3, 8.0, m=24, N=24, seed=0),
    "grid1": lambda: grid(1, 12),
    "grid2": lambda: grid(2, 4),
    "gaussian": lambda: gaussian_head(16, 20, 8, seed=1),
    "ball": lambda: ball(2, 12.0, m=20, N=16, seed=2),
    "planted": lambda: planted(16, 12, 3, 0.1, seed=3),
    "random": lambda: Operator(A=np.random.default_rng(5).dirichlet(np.full(9, 0.2), 11)),
}
EPS = [0.02, 0.1, 0.25, 0.5, 0.8]


@pytest.fixture(scope="module")
def panel_brackets():
    return {name: (make(), bracket(make(), EPS)) for name, make in PANEL.items()}


@pytest.mark.parametrize("name", list(PANEL))
def test_panel_brackets_sound_and_rechecked(panel_brackets, name):
    op, brs = panel_brackets[name]
    for e, br in zip(EPS, brs):
        assert_sound(op.A, br, e)
    assert_consistent(brs)


def test_panel_checks_recorded_and_pass(panel_brackets):
    for op, brs in panel_brackets.values():
        for br in brs:
            assert br.checks["lower"].ok and br.checks["upper"].ok
            d = br.to_dict()
            assert d["lower"] == br.lower and d["upper"] == br.upper


def test_saved_certificates_recheck_from_file(panel_brackets, tmp_path):
    op, brs = panel_brackets["sphere"]
    for i, br in enumerate(brs):
        for j, cert in enumerate((br.lower_certificate, br.upper_witness)):
            p = save_certificate(tmp_path / f"{i}-{j}.npz", cert, op.A, producer="bracket")
            c2, A2, h = load_certificate(p)
            assert h["rank"] == cert.rank and h["eps"] == br.eps
            assert check(A2, c2).ok


def test_permutation_invariance_of_the_truth():
    # r_eps(P A Q) = r_eps(A): the brackets of the two must overlap.
    op = sphere(3, 6.0, m=20, N=20, seed=7)
    rng = np.random.default_rng(0)
    B = op.A[rng.permutation(20)][:, rng.permutation(20)]
    for a, b in zip(bracket(op, [0.1, 0.3]), bracket(B, [0.1, 0.3])):
        assert a.lower <= b.upper and b.lower <= a.upper


def test_operator_and_array_inputs_agree():
    op = grid(1, 10)
    (a,) = bracket(op, 0.2)
    (b,) = bracket(np.array(op.A), 0.2)
    assert (a.lower, a.upper) == (b.lower, b.upper)


def test_bracket_always_returns_a_list():
    A = np.eye(4)
    for eps in (0.5, np.float64(0.5), np.array(0.5), [0.5], (0.5,), np.array([0.5])):
        brs = bracket(A, eps)
        assert isinstance(brs, list) and [(b.eps, b.lower, b.upper) for b in brs] == [(0.5, 4, 4)]
    assert [b.lower for b in bracket(A, np.array([0.5, 0.2]))] == [4, 4]


def test_an_error_bracket_has_no_ends_and_says_why(monkeypatch):
    import softrank.certifiers.bracket as engine

    def crash(*a, **kw):
        raise RuntimeError("the engine crashed")

    monkeypatch.setattr(engine, "_bracket_one", crash)
    (br,) = bracket(np.eye(4), 0.5)
    assert br.verdict == "error" and (br.lower, br.upper) == (None, None)
    assert not br.bounded and br.diagnostics.error == "RuntimeError: the engine crashed"
    assert br.lower_certificate is None and br.upper_witness is None


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("eps", [1, 1.0, -0.1, float("nan"), float("inf"), [], [0.5, 1.0],
                                 [0.2, -1e-9], "abc", [None]])
def test_bad_eps_raises_naming_eps(eps):
    with pytest.raises(InvalidArgumentError) as ei:
        bracket(np.eye(3), eps)
    assert str(ei.value).startswith("eps:"), str(ei.value)


@pytest.mark.parametrize("eps", [None, np.array(0.5)], ids=["None", "0-d"])
def test_eps_none_or_zero_d_array(eps):
    try:
        (br,) = bracket(np.eye(3), eps)
    except InvalidArgumentError as exc:
        assert str(exc).startswith("eps:")
    else:
        assert (br.lower, br.upper) == (3, 3)


@pytest.mark.parametrize(
    "A",
    [np.array([[0.5, np.nan]]), np.array([[1.5, -0.5]]), np.array([[0.5, 0.5 + 1e-6]]),
     np.array([0.5, 0.5]), np.zeros((0, 2)), np.ones((2, 2, 1))],
    ids=["nan", "negative", "rowsum", "1d", "empty", "3d"],
)
def test_bad_operator_raises(A):
    with pytest.raises(InvalidOperatorError, match="^A:"):
        bracket(A, 0.5)


# ------------------------------------------------------------------------------------ LPs


def test_basis_pursuit_hand_worked():
    # min |x1| + |x2| s.t. x1 + 2 x2 = 2: optimum x = (0, 1), l1 norm 1
    x = BasisPursuit(np.array([[1.0, 2.0]])).solve(np.array([2.0]))
    np.testing.assert_allclose(x, [0.0, 1.0], atol=1e-9)


def test_basis_pursuit_inconsistent_returns_none():
    bp = BasisPursuit(np.array([[1.0, 1.0], [1.0, 1.0]]))
    assert bp.solve(np.array([1.0, 2.0])) is None  # x1 + x2 = 1 and = 2
    x = bp.solve(np.array([1.0, 1.0]))  # consistent: still solvable on the same instance
    assert x is not None and abs(x.sum() - 1.0) < 1e-9 and abs(np.abs(x).sum() - 1) < 1e-9


def test_l1_regression_is_the_median():
    # min_u sum_i |a_i - u| over a constant basis: any median; a = (1, 2, 4) -> u = 2
    reg = L1Regression(np.ones((1, 3)))
    np.testing.assert_allclose(reg.solve(np.array([1.0, 2.0, 4.0])), [2.0], atol=1e-9)
    np.testing.assert_allclose(reg.solve(np.array([5.0, -1.0, 0.0])), [0.0], atol=1e-9)


def test_inequality_lp_options():
    # min -z s.t. z <= 2, 0 <= z <= 5: z = 2 with and without presolve; a misspelt option
    # or a bad value is an error naming it, never silently ignored
    from softrank.certifiers.lp import RangeLP, solve_inequality_lp
    from softrank.errors import InvalidArgumentError

    for opts in (None, {"presolve": "off"}):
        r = solve_inequality_lp(np.array([[1.0]]), [2.0], [-1.0], [0.0], [5.0], 100, opts)
        assert r.success and r.x[0] == pytest.approx(2.0, abs=1e-12)
    for bad in ({"presolv": "off"}, {"presolve": "of"}):
        with pytest.raises(InvalidArgumentError, match="options: HiGHS rejected"):
            solve_inequality_lp(np.array([[1.0]]), [2.0], [-1.0], [0.0], [5.0], 100, bad)
        with pytest.raises(InvalidArgumentError, match="options: HiGHS rejected"):
            RangeLP(np.array([[1.0]]), [-1.0], [0.0], [5.0], [-np.inf], [2.0], options=bad)


def test_equality_lp_statuses():
    # infeasible: z = 1 with 0 <= z <= 0.5
    lp = EqualityLP(np.array([[1.0]]), [1.0], [0.0], [0.5])
    r = lp.solve([1.0])
    assert not r.success and r.x is None and r.status != "optimal"
    # unbounded: min -z s.t. 0 z = 0 (no row constraint binds), z >= 0
    lp = EqualityLP(np.array([[0.0]]), [-1.0], [0.0], [np.inf])
    r = lp.solve([0.0])
    assert not r.success and r.x is None
    # bad right-hand sides never reach the solver
    lp = EqualityLP(np.array([[1.0, 1.0]]), [1.0, 1.0], [0.0, 0.0], [np.inf, np.inf])
    assert lp.solve([np.nan]).status == "bad-rhs"
    assert lp.solve([1.0, 2.0]).status == "bad-rhs"
    ok = lp.solve([3.0])
    assert ok.success and abs(ok.objective - 3.0) < 1e-9


class _HighsProxy:
    """Wraps a real ``highspy.Highs`` and overrides one behaviour."""

    def __init__(self, real, mode):
        self._real, self._mode = real, mode

    def __getattr__(self, name):
        return getattr(self._real, name)

    def run(self):
        if self._mode == "raise":
            raise RuntimeError("simulated solver crash")
        return self._real.run()

    def getModelStatus(self):
        import highspy

        if self._mode == "timelimit":
            return highspy.HighsModelStatus.kTimeLimit
        if self._mode == "unknown-until-cleared":
            return highspy.HighsModelStatus.kUnknown
        return self._real.getModelStatus()

    def clearSolver(self):
        if self._mode == "unknown-until-cleared":
            self._mode = None
        return self._real.clearSolver()

    def getSolution(self):
        sol = self._real.getSolution()
        if self._mode != "nan":
            return sol

        class _S:
            col_value = np.full(len(sol.col_value), np.nan)
            row_dual = np.full(len(sol.row_dual), np.nan)

        return _S()


@pytest.fixture
def highs_mode(monkeypatch):
    """Set the failure mode of every HiGHS instance created afterwards."""
    state = {"mode": None}
    real_new = lp._new_highs

    def fake_new(highspy):
        return _HighsProxy(real_new(highspy), state["mode"])

    monkeypatch.setattr(lp, "_new_highs", fake_new)
    return state


@pytest.mark.parametrize("mode, status", [("raise", "exception:RuntimeError"),
                                          ("timelimit", "Time limit reached"),
                                          ("nan", "nan-solution")])
def test_solver_failures_map_to_no_solution(highs_mode, mode, status):
    highs_mode["mode"] = mode
    lp = EqualityLP(np.array([[1.0, 2.0]]), [1.0, 1.0], [0.0, 0.0], [np.inf, np.inf])
    r = lp.solve([2.0])
    assert r.status == status and r.x is None and not r.success
    assert BasisPursuit(np.array([[1.0, 2.0]])).solve(np.array([2.0])) is None
    assert L1Regression(np.ones((1, 3))).solve(np.array([1.0, 2.0, 4.0])) is None


def test_non_optimal_warm_start_is_retried_cold(highs_mode):
    # HiGHS sometimes ends a warm-started solve with status Unknown on an LP that solves from
    # scratch; the solve is retried once after clearSolver, and only an optimal retry counts
    highs_mode["mode"] = "unknown-until-cleared"
    lp = EqualityLP(np.array([[1.0, 2.0]]), [1.0, 1.0], [0.0, 0.0], [np.inf, np.inf])
    r = lp.solve([2.0])
    assert r.success and abs(r.objective - 1.0) < 1e-9  # z = (0, 1)


# operators on which the LP-based methods win when the LP works (checked below)
LP_OPS = {
    "sphere": lambda: sphere(3, 8.0, m=32, N=32, seed=0),
    "grid": lambda: grid(1, 16),
}
LP_EPS = [0.1, 0.3]


def _uses_lp(brs):
    return any(m.startswith(LP_METHODS) for br in brs for m in (br.lower_method, br.upper_method))


def _lp_candidates(brs):
    return [r.name for br in brs for r in br.diagnostics.methods
            if r.rank is not None and r.name.startswith(LP_METHODS)]


@pytest.mark.parametrize("name", list(LP_OPS))
def test_lp_methods_are_exercised_when_lp_works(name):
    # makes the failure-injection tests below meaningful: here the LP methods do win
    brs = bracket(LP_OPS[name](), LP_EPS)
    assert _uses_lp(brs)


@pytest.fixture
def no_screening(monkeypatch):
    """Candidates that never screen a row or key: every decision of the LP-based methods
    then rests on its LPs (the screening itself is tested below, with the LPs failing)."""
    from softrank.certifiers.lower import subspace as lower_mod
    from softrank.certifiers.upper import refit as upper_mod  # where L1Refit screens

    monkeypatch.setattr(upper_mod, "l1_candidates", lambda A, W, **kw: (
        np.zeros((A.shape[0], W.shape[0])), np.full(A.shape[0], np.inf)))
    monkeypatch.setattr(lower_mod, "basis_pursuit_candidates", lambda G, w, B, score, bound, **kw: (
        np.zeros((B.shape[0], G.shape[1])), np.full(B.shape[0], np.inf)))


def _assert_no_lp_bound(op, brs, allow_error):
    for e, br in zip(LP_EPS, brs):
        if br.verdict == "error":
            assert allow_error, br.diagnostics
            assert br.lower_certificate is None and br.upper_witness is None
            assert br.lower is None and br.upper is None
            continue
        assert not br.lower_method.startswith(LP_METHODS), br.lower_method
        assert not br.upper_method.startswith(LP_METHODS), br.upper_method
        assert_sound(op.A, br, e)


@pytest.mark.parametrize("name", list(LP_OPS))
@pytest.mark.parametrize("mode", ["timelimit", "nan", "raise"])
def test_failing_highs_yields_no_lp_bound(highs_mode, name, mode, no_screening):
    highs_mode["mode"] = mode
    op = LP_OPS[name]()
    brs = bracket(op, LP_EPS)
    _assert_no_lp_bound(op, brs, allow_error=False)
    assert not _lp_candidates(brs)


@pytest.mark.parametrize("name", list(LP_OPS))
def test_time_limit_result_yields_no_lp_bound(monkeypatch, name, no_screening):
    monkeypatch.setattr(EqualityLP, "solve",
                        lambda self, b=None, **kw: LPResult("Time limit reached", None, None))
    op = LP_OPS[name]()
    brs = bracket(op, LP_EPS)
    _assert_no_lp_bound(op, brs, allow_error=False)
    assert not _lp_candidates(brs)


@pytest.mark.parametrize("name", list(LP_OPS))
def test_nan_optimal_result_yields_no_reported_lp_bound(monkeypatch, name, no_screening):
    # an "optimal" LPResult carrying NaN (violating LPResult's own contract): whatever the
    # certifiers make of it, the checker must keep it out of the bracket
    monkeypatch.setattr(EqualityLP, "solve",
                        lambda self, b=None, **kw: LPResult("optimal", np.full(self.shape[1], np.nan), 0.0))
    op = LP_OPS[name]()
    brs = bracket(op, LP_EPS)
    _assert_no_lp_bound(op, brs, allow_error=False)


def test_nan_optimal_result_produces_no_lp_candidates(monkeypatch, no_screening):
    monkeypatch.setattr(EqualityLP, "solve",
                        lambda self, b=None, **kw: LPResult("optimal", np.full(self.shape[1], np.nan), 0.0))
    brs = bracket(LP_OPS["sphere"](), LP_EPS)
    assert not _lp_candidates(brs)


@pytest.mark.parametrize("name", list(LP_OPS))
def test_solve_raising_yields_error_or_non_lp_bracket(monkeypatch, name, no_screening):
    def boom(self, b=None, **kw):
        raise RuntimeError("solver exploded")

    monkeypatch.setattr(EqualityLP, "solve", boom)
    op = LP_OPS[name]()
    brs = bracket(op, LP_EPS)
    _assert_no_lp_bound(op, brs, allow_error=True)


@pytest.mark.parametrize("name", list(LP_OPS))
def test_screened_methods_answer_without_lps_and_stay_sound(highs_mode, name):
    # every LP fails: the l1 refits and subspace searches still answer where their
    # candidates meet the target (an upper bound of each LP's optimum), and every such
    # answer is a checked end; on these operators they do win that way
    highs_mode["mode"] = "raise"
    op = LP_OPS[name]()
    brs = bracket(op, LP_EPS)
    for e, br in zip(LP_EPS, brs):
        assert_sound(op.A, br, e)
    assert _lp_candidates(brs)


def test_screening_decides_as_the_lps_do():
    # the screened l1 refit and subspace search reach the decisions of solving every row
    # and key exactly, rank by rank, on a sphere and a grid operator
    from softrank.certifiers.lower import subspace as lower_mod
    from softrank.certifiers import upper as upper_mod

    for op in (LP_OPS["sphere"](), LP_OPS["grid"]()):
        A = op.A
        _, _, Vt = np.linalg.svd(A)
        for eps in LP_EPS:
            screened = upper_mod.L1Refit(A, Vt)
            for k in range(1, 12):
                W = Vt[:k]
                reg = L1Regression(W)
                exact = max(np.abs(A[i] - reg.solve(A[i]) @ W).sum() for i in range(A.shape[0]))
                target = eps * (1.0 - upper_mod.SAFETY) - 1e-15  # the searches' slack
                assert screened.feasible(k, eps) == (exact <= target), (k, eps)
            sub = lower_mod.SubspaceSearch(A, Vt.T, "svd")
            bare = lower_mod.SubspaceSearch(A, Vt.T, "svd")
            for k in range(1, 12):
                with pytest.MonkeyPatch.context() as mp:
                    mp.setattr(lower_mod, "basis_pursuit_candidates",
                               lambda G, w, B, score, bound, **kw: (
                                   np.zeros((B.shape[0], G.shape[1])), np.full(B.shape[0], np.inf)))
                    want = bare.certificate(k, eps) is not None
                assert (sub.certificate(k, eps) is not None) == want, (k, eps)


# ------------------------------------------------------------------ rank searches


@pytest.mark.parametrize("guess", [None, 1, 3, 7, 8, 9, 15, 40])
@pytest.mark.parametrize("lo, hi, t", [(1, 20, 8), (5, 20, 5), (1, 8, 8), (3, 3, 3), (1, 30, 1)])
def test_least_feasible_finds_the_threshold_with_any_guess(lo, hi, t, guess):
    from softrank.certifiers.upper import least_feasible

    probed = []

    def feasible(k):
        assert lo <= k <= hi, f"probed {k} outside [{lo}, {hi}]"
        probed.append(k)
        return k >= t

    g = None if guess is None else (lambda: guess)
    assert least_feasible(feasible, lo, hi, guess=g) == t
    assert len(probed) == len(set(probed)), f"a rank probed twice: {probed}"
    # a guess at the answer costs 2 probes (it and the rank below), never more than 2+2log2
    if guess == t and t > lo:
        assert len(probed) == 2
    assert len(probed) <= 2 + 2 * int(np.ceil(np.log2(hi - lo + 1)))


@pytest.mark.parametrize("guess", [None, 2, 9])
def test_least_feasible_none_when_hi_fails(guess):
    from softrank.certifiers.upper import least_feasible

    g = None if guess is None else (lambda: guess)
    assert least_feasible(lambda k: False, 1, 10, guess=g) is None
    assert least_feasible(lambda k: True, 5, 4, guess=g) is None  # empty range


def test_least_feasible_guess_asked_again_after_hi():
    # a guess with nothing to predict from before hi is probed, and a prediction after
    from softrank.certifiers.upper import least_feasible

    calls = []

    def guess():
        calls.append(len(calls))
        return None if len(calls) == 1 else 6

    probed = []
    assert least_feasible(lambda k: probed.append(k) or k >= 6, 1, 20, guess=guess) == 6
    assert calls == [0, 1] and probed == [20, 6, 5]


def test_least_feasible_leaps_to_a_guess_moved_by_a_failure():
    # worked by hand: feasible from 37 on in [1, 100]; the guess says 20, then 40 once 20
    # has failed. 20 fails; the next probe leaps from the gallop's 21 to the guess, 40, which
    # holds; galloping down 39, 37 hold and 33 fails; the bisection of [34, 37] probes 35, 36
    from softrank.certifiers.upper import least_feasible

    probed = []

    def guess():
        return 20 if not probed else 40

    assert least_feasible(lambda k: probed.append(k) or k >= 37, 1, 100, guess=guess) == 37
    assert probed == [20, 40, 39, 37, 33, 35, 36]
    # a guess that does not move gallops up from it as before: 21, 23, 27, 35, 51 (holds),
    # then the bisection of [36, 51]
    probed.clear()
    assert least_feasible(lambda k: probed.append(k) or k >= 37, 1, 100, guess=lambda: 20) == 37
    assert probed == [20, 21, 23, 27, 35, 51, 43, 39, 37, 36]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "seven", object()])
def test_least_feasible_refuses_a_guess_without_an_integer_value(bad):
    # first asked, or asked again after a failed probe: a one-line error naming the guess
    from softrank.certifiers.upper import least_feasible
    from softrank.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="^guess: "):
        least_feasible(lambda k: k >= 10, 1, 50, guess=lambda: bad)
    probed = []
    with pytest.raises(InvalidArgumentError, match="^guess: "):
        least_feasible(lambda k: probed.append(k) or k >= 10, 1, 50,
                       guess=lambda: 3 if not probed else bad)
    assert probed == [3]


@pytest.mark.parametrize("seed", range(12))
def test_least_feasible_finds_the_threshold_whatever_the_guesses(seed):
    # guesses that jump anywhere (inside and outside [lo, hi]) never make the search miss the
    # threshold or probe a rank twice
    from softrank.certifiers.upper import least_feasible

    rng = np.random.default_rng(seed)
    lo, hi = (int(v) for v in np.sort(rng.integers(1, 80, size=2)))
    t = int(rng.integers(lo, hi + 2))  # hi + 1: no rank in [lo, hi] holds
    probed = []

    def feasible(k):
        assert lo <= k <= hi, f"probed {k} outside [{lo}, {hi}]"
        probed.append(k)
        return k >= t

    def guess():
        return None if rng.random() < 0.2 else int(rng.integers(lo - 5, hi + 6))

    assert least_feasible(feasible, lo, hi, guess=guess) == (t if t <= hi else None)
    assert len(probed) == len(set(probed)), f"a rank probed twice: {probed}"


class _Fit:
    """A stand-in for an alternating-l1 fit: exact max error where complete, else what its
    checks showed from below."""

    def __init__(self, k, complete, error):
        self._cache = {k: {"complete": complete}}
        self.error = error

    def max_error(self, k, stop=None):
        return self.error

    def error_shown(self, k):
        return self.error


def test_alternating_prediction_moves_up_after_a_failure_shows_a_larger_ratio():
    # worked by hand: the truncated-SVD curve e_svd(k) = 1 / k; rank 10 fitted completely
    # with max error 0.2 (ratio c = 2), so c e_svd(k) = 2 / k <= 0.25 first at k = 9 (2/8 is
    # not below the target). Rank 8 then failed, showing 0.5 (ratio 4): log c runs
    # linearly from log 4 at 8 to log 2 at 10, so at 9, c = 2 sqrt(2) and c / 9 = 0.31
    # > 0.25, and the prediction is 10. A failure showing a ratio no larger (0.2 at 8,
    # ratio 1.6) leaves it at 9.
    from softrank.certifiers.upper import AlternatingL1

    A = np.eye(12)
    svd = np.linalg.svd(A)
    curve = np.array([1.0] + [1.0 / k for k in range(1, 13)])
    alt = AlternatingL1(A, svd, tsvd_errors=curve)
    alt._fits = {10: _Fit(10, True, 0.2)}
    assert alt._predict(0.25, 12) == 9
    alt._fits[8] = _Fit(8, False, 0.5)
    assert alt._predict(0.25, 12) == 10
    alt._fits[8] = _Fit(8, False, 0.2)
    assert alt._predict(0.25, 12) == 9
    alt._fits = {}
    assert alt._predict(0.25, 12) is None  # nothing fitted completely


def test_error_shown_is_the_failing_rows_optimum():
    # worked by hand: A = I (3 x 3) on the basis e_1 at rank 1: row 0 is fitted exactly, rows
    # 1 and 2 have l1 optimum 1 (|u| + 1 at best u = 0). At eps 0.5 the check fails on one of
    # them, which shows 1.0; nothing is known at a rank never checked
    from softrank.certifiers.upper import L1Refit

    fit = L1Refit(np.eye(3), np.eye(3))
    assert fit.error_shown(1) is None
    assert not fit.feasible(1, 0.5)
    assert fit.error_shown(1) == pytest.approx(1.0, abs=1e-9)
    assert fit.feasible(3, 0.5) and fit.error_shown(3) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("k, n, table", [(1, 5, True), (3, 7, True), (6, 40, False),
                                         (40, 90, True), (45, 300, False), (90, 95, True)])
def test_weighted_solves_match_each_system_solved_alone(k, n, table, monkeypatch):
    from softrank.certifiers import linalg

    rng = np.random.default_rng(k)
    X = rng.standard_normal((k, n))
    wt = rng.uniform(0.1, 2.0, size=(11, n))
    B = rng.standard_normal((11, k))
    monkeypatch.setattr(linalg, "BLOCK_ENTRIES", 3 * k * k)  # blocks of a few rows
    if not table:  # systems formed by broadcasting
        monkeypatch.setattr(linalg, "TABLE_ENTRIES", n * k * (k + 1) // 2 - 1)
    got = linalg.weighted_solves(X, wt, B)
    for i in range(11):
        G = (X * wt[i]) @ X.T
        G += 1e-12 * np.trace(G) / k * np.eye(k)
        assert np.allclose(got[i], np.linalg.solve(G, B[i]), rtol=1e-9, atol=1e-12)


def test_weighted_solves_refuse_bad_shapes_and_keep_nan_visible(monkeypatch):
    from softrank.certifiers import linalg

    k = 32
    X = np.eye(k, 40)
    # integer input is read as float64: X diag(1) X^T = I_k, so u = B (up to the ridge)
    got = linalg.weighted_solves(np.eye(k, dtype=int), np.ones((2, k), dtype=int),
                                 np.ones((2, k)))
    assert np.allclose(got, 1.0, rtol=1e-10)
    with pytest.raises(InvalidArgumentError, match=r"wt and B must have shapes \(2, 40\) and \(2, 32\)"):
        linalg.weighted_solves(X, np.ones((2, 40)), np.ones((3, k)))
    with pytest.raises(InvalidArgumentError, match="X, wt and B must be 2-D"):
        linalg.weighted_solves(X, np.ones(40), np.ones((1, k)))
    # an infinite weight: NaN in the answer at every k (LAPACK's Cholesky returned zeros)
    for kk in (1, k - 1, k):
        wt = np.ones((1, 40))
        wt[0, 0] = np.inf
        with np.errstate(invalid="ignore"):
            assert np.isnan(linalg.weighted_solves(np.eye(kk, 40), wt, np.ones((1, kk)))).any()
    # a singular system is named by its row, across blocks of rows
    monkeypatch.setattr(linalg, "BLOCK_ENTRIES", 2 * k * k)  # two rows a block
    wt = np.ones((5, 40))
    # row 3: X diag(wt_3) X^T = diag(-r, 0, ..., 0) with r the ridge 1e-12 * 1e-300 (the
    # trace is below the floor 1e-300), so the system solved is diag(0, r, ..., r): singular
    wt[3, :] = 0.0
    wt[3, 0] = -(1e-12 * 1e-300)
    with pytest.raises(np.linalg.LinAlgError, match="system 3 is singular"):
        linalg.weighted_solves(X, wt, np.ones((5, k)))


@pytest.mark.parametrize("k", [1, 5, 40])
def test_symmetric_solves_fall_back_to_lu_and_refuse_singular_systems(k):
    from softrank.certifiers import linalg

    # diag(1, ..., 1, -1) is symmetric and invertible but not positive definite: Cholesky
    # fails, LU solves it (x = (b_1, ..., b_{k-1}, -b_k) up to the ridge 1e-12 (k-2)/k); a
    # zero matrix is singular (its ridge is 1e-312, below the LU's pivot: exactly 0 + 1e-312
    # is representable but the 1e-300 floor times 1e-12 underflows to a subnormal pivot, and
    # dgesv takes a subnormal pivot as non-zero, so the zero system is built with a negative
    # trace instead: ridge = 1e-12 * 1e-300 on a diagonal of -1e-312, exactly 0)
    whole = linalg._whole(k)
    D = np.eye(k)
    D[-1, -1] = -1.0
    b = np.arange(1.0, k + 1)
    x = linalg._solve_packed(np.stack([np.eye(k), D]).reshape(2, k * k), whole, np.stack([b, b]))
    flip = np.ones(k)
    flip[-1] = -1.0
    assert np.allclose(x[0], b, rtol=1e-11) and np.allclose(x[1], flip * b, rtol=1e-11)
    Z = np.zeros((k, k))
    Z[0, 0] = -(1e-12 * 1e-300)  # with the ridge: diag(0, r, ..., r), singular
    with pytest.raises(np.linalg.LinAlgError, match="system 1 is singular"):
        linalg._solve_packed(np.stack([np.eye(k), Z]).reshape(2, k * k), whole, np.stack([b, b]))
    # the packed layout reads the same systems as the whole one
    rng = np.random.default_rng(k)
    M = rng.standard_normal((3, k, k + 2))
    G = M @ M.transpose(0, 2, 1)
    iu, ju, packed = linalg._packing(k)
    got = linalg._solve_packed(G[:, iu, ju], packed, np.stack([b, b, b]))
    assert np.allclose(got, linalg._solve_packed(G.reshape(3, k * k), whole, np.stack([b, b, b])),
                       rtol=1e-10)


def test_compiles_without_a_cache_where_numba_has_none(monkeypatch):
    """numba raises at decoration when it finds no writable place for its cache (a read-only
    install run by a user without a writable home): the function is then compiled in each
    process instead, not refused."""
    from softrank.certifiers import linalg

    calls = []

    def njit(**options):
        calls.append(options)
        if options.get("cache"):
            raise RuntimeError("cannot cache function 'f': no locator available for file 'x'")
        return lambda fn: ("compiled", fn)

    monkeypatch.setattr(linalg.numba, "njit", njit)
    f = lambda: None  # noqa: E731
    assert linalg.compiled(f) == ("compiled", f)
    assert linalg.compiled(fastmath={"reassoc"})(f) == ("compiled", f)
    assert calls == [{"cache": True, "fastmath": False}, {"fastmath": False},
                     {"cache": True, "fastmath": {"reassoc"}}, {"fastmath": {"reassoc"}}]


def test_range_lp_starts_from_a_given_basis():
    # min -z1 - z2 s.t. z1 + 2 z2 <= 4, 3 z1 + z2 <= 6, z >= 0: both rows bind at the optimum
    # z = (8/5, 6/5) (solve the 2 x 2 system), so the all-slack start is not optimal and
    # needs pivots, while the optimal basis of another instance needs none
    from softrank.certifiers.lp import RangeLP

    G = np.array([[1.0, 2.0], [3.0, 1.0]])

    def make(g=G):
        n = g.shape[1]
        return RangeLP(g, -np.ones(n), np.zeros(n), np.full(n, np.inf),
                       [-np.inf, -np.inf], [4.0, 6.0])

    first = make()
    cold = first.solve([0], [-100.0], [4.0])
    assert cold.success and cold.iterations >= 1
    np.testing.assert_allclose(cold.x, [1.6, 1.2], atol=1e-12)
    start = first.basis()
    warm = make().solve([0], [-100.0], [4.0], start=start)
    assert warm.success and warm.iterations == 0
    np.testing.assert_allclose(warm.x, [1.6, 1.2], atol=1e-12)
    # a start of another LP's shape, or that is not a basis, is refused by name
    from softrank.errors import InvalidArgumentError

    wide = make(np.array([[1.0, 2.0, 1.0], [3.0, 1.0, 1.0]]))
    with pytest.raises(InvalidArgumentError, match=r"start must be a basis of an LP of "
                                                   r"shape \(2, 3\), got one of shape \(2, 2\)"):
        wide.solve([0], [-100.0], [4.0], start=start)
    for bad in ("basis", (start[0], "basis"), start[1], [start[0], start[1]]):
        with pytest.raises(InvalidArgumentError, match="start must be None or a basis"):
            wide.solve([0], [-100.0], [4.0], start=bad)
    # the instance still solves after a refused start: optimum -4 at z = (0, 0, 4), proved
    # by the dual point (1, 0) (value 4; column sums 1, 2, 1 each >= the cost 1)
    res = wide.solve([0], [-100.0], [4.0])
    assert res.success and res.objective == pytest.approx(-4.0, abs=1e-12)


def test_colwise_form_is_scipys_csc():
    # the column-wise arrays given to HiGHS: those of scipy's CSC form of the same matrix
    # (zeros left out, rows in order in each column), for dense and sparse input alike
    import scipy.sparse as sp

    from softrank.certifiers.lp import _colwise

    rng = np.random.default_rng(3)
    G = rng.standard_normal((7, 5)) * (rng.random((7, 5)) < 0.5)
    G[:, 2] = 0.0  # an empty column
    ref = sp.csc_matrix(G)
    for X in (G, sp.csr_matrix(G), np.asfortranarray(G)):
        shape, start, index, value = _colwise(X)
        assert shape == (7, 5) and start.dtype == index.dtype == np.int32
        np.testing.assert_array_equal(start, ref.indptr)
        np.testing.assert_array_equal(index, ref.indices)
        np.testing.assert_array_equal(value, ref.data)


def test_lp_vectors_of_the_wrong_length_are_refused():
    # HiGHS's arrays interface reads as many entries as the LP has columns or rows: a short
    # vector would be read past its end, so it is refused by name before any solve
    from softrank.certifiers.lp import RangeLP, solve_inequality_lp
    from softrank.errors import InvalidArgumentError

    big = np.array([1.0, -5.0, -7.0])
    ok = dict(G=np.eye(3), c=big, lower=np.zeros(3), upper=np.full(3, 2.0),
              row_lower=np.full(3, -np.inf), row_upper=np.full(3, np.inf))
    for name in ("c", "lower", "upper", "row_lower", "row_upper"):
        with pytest.raises(InvalidArgumentError, match=rf"{name} must have shape \(3,\), got \(1,\)"):
            RangeLP(**{**ok, name: ok[name][:1]})
    with pytest.raises(InvalidArgumentError, match=r"c must have shape \(3,\), got \(1,\)"):
        EqualityLP(np.ones((1, 3)), big[:1], np.zeros(3), np.full(3, 2.0))
    args = dict(C=np.eye(3), upper_rhs=np.ones(3), cost=-big, lower=np.zeros(3),
                upper=np.full(3, 2.0))
    for name in ("upper_rhs", "cost", "lower", "upper"):
        with pytest.raises(InvalidArgumentError, match=rf"{name} must have shape \(3,\)"):
            solve_inequality_lp(**{**args, name: args[name][:1]}, iteration_limit=100)
    # the full vectors: min -x1 + 5 x2 + 7 x3 over [0, 2]^3 with x <= 1 is -1 at (1, 0, 0)
    res = solve_inequality_lp(np.eye(3), np.ones(3), np.array([-1.0, 5.0, 7.0]),
                              np.zeros(3), np.full(3, 2.0), 100)
    assert res.success and res.objective == pytest.approx(-1.0, abs=1e-12)


def test_lp_data_that_is_nan_or_out_of_range_is_refused_by_name():
    # a NaN in an LP's matrix made HiGHS loop; a NaN bound was read as no bound; a row index
    # outside the LP, or row bounds shorter than the rows, were read out of bounds
    import scipy.sparse as sp

    from softrank.certifiers.lp import BasisPursuit, L1Regression, RangeLP, solve_inequality_lp
    from softrank.errors import InvalidArgumentError

    nan = np.array([[1.0, np.nan], [0.0, 1.0]])
    with pytest.raises(InvalidArgumentError, match="W must be finite, got 1 entries"):
        L1Regression(nan)
    with pytest.raises(InvalidArgumentError, match="G must be finite"):
        BasisPursuit(np.array([[1.0, np.inf]]))
    with pytest.raises(InvalidArgumentError, match=r"G must be 2-D, got shape \(3,\)"):
        BasisPursuit(np.ones(3))
    with pytest.raises(InvalidArgumentError, match=r"W: entries must be below 1e\+15 in magnitude"):
        L1Regression(np.array([[1.0, 2e15]]))
    with pytest.raises(InvalidArgumentError, match=r"weights\[1\] must be a number, got nan"):
        BasisPursuit(np.eye(2), weights=[1.0, np.nan])
    with pytest.raises(InvalidArgumentError, match="G must be finite"):
        EqualityLP(sp.csr_matrix(nan), np.zeros(2), np.zeros(2), np.ones(2))
    ok = dict(G=np.eye(2), c=np.ones(2), lower=np.zeros(2), upper=np.ones(2),
              row_lower=np.full(2, -np.inf), row_upper=np.full(2, np.inf))
    for name in ("lower", "upper", "row_lower", "row_upper"):
        v = ok[name].copy()
        v[1] = np.nan
        with pytest.raises(InvalidArgumentError, match=rf"{name}\[1\] must be a number or \+-inf"):
            RangeLP(**{**ok, name: v})
    with pytest.raises(InvalidArgumentError, match=r"c\[0\] must be a number, got inf"):
        RangeLP(**{**ok, "c": np.array([np.inf, 1.0])})
    lp = RangeLP(**ok)
    for rows in ([-1], [2], [0.0], [[0]], [1, 1]):
        with pytest.raises(InvalidArgumentError, match=r"rows must be a 1-D array of distinct row indices in \[0, 2\)"):
            lp.solve(rows, np.zeros(np.size(rows)), np.zeros(np.size(rows)))
    with pytest.raises(InvalidArgumentError, match=r"row_lower and row_upper must have shape \(2,\)"):
        lp.solve([0, 1], [0.0], [0.0, 0.0])
    # the instance still solves: min x1 + x2 over [0, 1]^2 with x1 + 0 x2 in [1/2, 1/2]
    res = lp.solve([0], [0.5], [0.5])
    assert res.success and res.objective == pytest.approx(0.5, abs=1e-12)
    with pytest.raises(InvalidArgumentError, match=r"upper_rhs\[0\] must be a number or \+-inf"):
        solve_inequality_lp(np.eye(1), [np.nan], [1.0], [0.0], [1.0], 100)
    # a lower bound +inf (it was read as -inf: min x s.t. x <= 1 came back unbounded), an
    # upper bound -inf, a finite bound HiGHS reads as infinite, an entry HiGHS refuses
    with pytest.raises(InvalidArgumentError, match=r"lower\[0\] must not be inf \(a lower bound\)"):
        solve_inequality_lp(np.eye(1), [1.0], [1.0], [np.inf], [np.inf], 100)
    with pytest.raises(InvalidArgumentError, match=r"upper_rhs\[0\] must not be -inf"):
        solve_inequality_lp(np.eye(1), [-np.inf], [1.0], [0.0], [1.0], 100)
    with pytest.raises(InvalidArgumentError, match=r"upper\[1\] must be below 1e\+20 in magnitude"):
        solve_inequality_lp(np.ones((1, 2)), [1.0], [-1.0, 0.0], [0.0, 0.0], [1.0, 1e25], 100)
    with pytest.raises(InvalidArgumentError, match=r"G: entries must be below 1e\+15 in magnitude"):
        RangeLP(**{**ok, "G": np.array([[1.0, 0.0], [0.0, 1e16]])})
    # a warm change HiGHS refuses (|b| >= 1e20) yields no solution, never the previous LP's
    bp = BasisPursuit(np.eye(2))
    assert np.array_equal(bp.solve(np.array([1.0, 1.0])), [1.0, 1.0])
    assert bp.solve(np.array([1e25, 2.0])) is None
    res = lp.solve([0], [1e25], [1e25])  # refused before HiGHS sees it (HiGHS refused it too)
    assert not res.success and res.status == "bad-rhs"
    assert lp.solve([0], [0.5], [0.5]).objective == pytest.approx(0.5, abs=1e-12)


def test_lp_data_that_is_not_real_numbers_is_refused_by_name():
    """Complex data lost its imaginary part in the cast to float64 (a ComplexWarning at
    most), strings and ragged lists raised numpy's errors or an IndexError; a solve's
    right-hand side, cost or row bounds that are not real give a result without a solution,
    as a NaN does. Sparse matrices are read by BasisPursuit and L1Regression as by the
    LPs (they raised numpy's 'setting an array element' error)."""
    import scipy.sparse as sp

    from softrank.certifiers.lp import RangeLP, solve_inequality_lp

    z = np.eye(2) * (1 + 1j)
    for make, name in ((lambda: EqualityLP(z, np.ones(2), np.zeros(2), np.ones(2)), "G"),
                       (lambda: EqualityLP(sp.csr_matrix(z), np.ones(2), np.zeros(2),
                                           np.ones(2)), "G"),
                       (lambda: EqualityLP(np.eye(2), [1 + 1j, 1.0], np.zeros(2), np.ones(2)),
                        "c"),
                       (lambda: BasisPursuit(z), "G"),
                       (lambda: BasisPursuit(np.eye(2), weights=[1 + 1j, 1.0]), "weights"),
                       (lambda: L1Regression(z), "W"),
                       (lambda: solve_inequality_lp(np.eye(1), ["1"], [1.0], [0.0], [1.0], 100),
                        "upper_rhs")):
        with pytest.raises(InvalidArgumentError, match=rf"^{name} must be real numbers, got "
                                                        r"dtype (complex128|<U1)$"):
            make()
    for G, why in ((np.float64(1.0), r"shape \(\)"), ("abc", "dtype <U3"),
                   ([[1.0], [1.0, 2.0]], "a ragged or mixed list")):
        with pytest.raises(InvalidArgumentError, match=rf"^G must be .*{why}"):
            EqualityLP(G, np.ones(1), np.zeros(1), np.ones(1))
    lp = EqualityLP(np.eye(2), np.ones(2), np.zeros(2), np.ones(2))
    assert lp.solve(np.array([0.5 + 1j, 0.5])).status == "bad-rhs"
    assert lp.solve(np.array([0.5, 0.5]), cost=np.array([1 + 2j, 1.0])).status == "bad-cost"
    # the instance still solves: min x1 + x2 with x = (1/2, 1/4)
    assert lp.solve(np.array([0.5, 0.25]), cost=np.ones(2)).objective == pytest.approx(0.75)
    rl = RangeLP(np.eye(2), np.ones(2), np.zeros(2), np.ones(2), np.full(2, -np.inf),
                 np.full(2, np.inf))
    for lo in ([0.5 + 1j], ["0.5"], None):
        assert rl.solve([0], lo, [0.5]).status == "bad-rhs"
    with pytest.raises(InvalidArgumentError, match=r"^rows must be a 1-D array of distinct row "
                                                   r"indices in \[0, 2\), got \[\[0\], \[0, 1\]\]"):
        rl.solve([[0], [0, 1]], [0.5], [0.5])
    assert rl.solve([0], [0.5], [0.5]).objective == pytest.approx(0.5, abs=1e-12)
    # a finite row bound HiGHS would read as no bound: no solution, as for inf
    assert rl.solve([0], [-1e25], [1e25]).status == "bad-rhs"
    # None: EqualityLP keeps the last right-hand side or cost; the wrappers must not answer
    # the last row again
    W = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    l1, bp = L1Regression(W), BasisPursuit(W)
    assert l1.solve([1.0, 2.0, 1.0]) is not None and bp.solve([1.0, 2.0]) is not None
    assert l1.solve(None) is None and bp.solve(None) is None
    # sparse G and W: the same answers as dense (x = b for G = I; u = a for W = I)
    b = np.array([1.0, -2.0])
    assert np.allclose(BasisPursuit(sp.csr_matrix(np.eye(2))).solve(b), b)
    assert np.allclose(L1Regression(sp.csc_matrix(np.eye(2))).solve(b), b)


def test_irls_basis_refuses_a_rank_the_svd_does_not_have():
    """k above min(m, N) was read as min(m, N) (a W with fewer rows than asked), a negative
    k counted factors from the end, k = 0 raised numpy's reshape error."""
    from softrank.certifiers.upper import AlternatingL1

    A = np.full((4, 6), 1 / 6)
    alt = AlternatingL1(A, np.linalg.svd(A, full_matrices=False), iters=3)
    assert alt.irls_basis(4).shape == (4, 6)
    with pytest.raises(InvalidArgumentError, match=r"^k must be at most 4, the number of "
                                                   r"singular triples given \(A of shape "
                                                   r"\(4, 6\)\), got 5$"):
        alt.irls_basis(5)
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    short = AlternatingL1(A, (U[:, :3], s[:3], Vt[:3]), iters=3)  # a truncated SVD: 3 triples
    assert short.irls_basis(3).shape == (3, 6)
    with pytest.raises(InvalidArgumentError, match=r"^k must be at most 3, the number"):
        short.irls_basis(4)
    for k in (0, -1):
        with pytest.raises(InvalidArgumentError, match=r"^k: expected an integer >= 1, got -?[01]$"):
            alt.irls_basis(k)


def test_a_solve_that_reached_its_time_limit_is_not_retried(highs_mode, monkeypatch):
    # a cold retry would give the solve its limit a second time; a status such as Unknown
    # is still retried
    runs = []
    real_run = _HighsProxy.run
    monkeypatch.setattr(_HighsProxy, "run", lambda self: runs.append(1) or real_run(self))
    highs_mode["mode"] = "timelimit"
    lp = EqualityLP(np.array([[1.0, 2.0]]), [1.0, 1.0], [0.0, 0.0], [np.inf, np.inf])
    assert lp.solve([2.0]).status == "Time limit reached" and len(runs) == 1
    highs_mode["mode"] = "unknown-until-cleared"
    runs.clear()
    lp = EqualityLP(np.array([[1.0, 2.0]]), [1.0, 1.0], [0.0, 0.0], [np.inf, np.inf])
    assert lp.solve([2.0]).success and len(runs) == 2


def test_an_l1_regression_solve_takes_its_own_time_limit():
    # a microsecond is not enough for a 120 x 300 l1 regression (about 0.05 s); the next
    # solve of the same instance, with the default limit, is optimal
    from softrank.errors import InvalidArgumentError

    rng = np.random.default_rng(0)
    W, a = rng.standard_normal((120, 300)), rng.random(300)
    reg = L1Regression(W)
    assert reg.solve(a, 120, time_limit=1e-6) is None
    u = reg.solve(a, 120)
    assert u is not None and u.shape == (120,)
    for bad in (0.0, -1.0, np.nan, "1"):
        with pytest.raises(InvalidArgumentError, match="^time_limit"):
            reg.solve(a, 120, time_limit=bad)

"""Each construction and each lower-certificate family on a case whose answer is known
(docs/theory/witnesses.md, docs/theory/lower.md), and the subspace certificate's checker on hand-made data."""

from __future__ import annotations

import numpy as np
import pytest

from softrank import Operator, bracket
from softrank.certifiers import lower as lo
from softrank.certifiers import upper as up
from softrank.checker import SubspaceCertificate, check, load_certificate, save_certificate
from softrank.checker.certificates import MalformedCertificate
from softrank.errors import InvalidArgumentError
from softrank.generators.synthetic import planted_blocks


def _permuted_blocks(k, size, seed=0):
    """k uniform blocks, rows and columns permuted: r_eps = k for every eps < 1."""
    n = k * size
    B = np.zeros((n, n))
    for b in range(k):
        B[b * size:(b + 1) * size, b * size:(b + 1) * size] = 1.0 / size
    rng = np.random.default_rng(seed)
    return B[rng.permutation(n)][:, rng.permutation(n)]


def _exact_rank(m, N, k, seed=0):
    """Row-stochastic W H of rank exactly k (generic Dirichlet factors)."""
    rng = np.random.default_rng(seed)
    W = rng.dirichlet(np.ones(k), size=m)
    H = rng.dirichlet(np.full(N, 0.5), size=k)
    A = W @ H
    assert np.linalg.matrix_rank(A) == k
    return A


# --------------------------------------------------------------- subspace certificate


def test_subspace_identity_hand_worked():
    """On I_n with R = Lam = I, M = 0: c_j = eps exactly, so the claim n holds iff eps < 1."""
    n = 6
    c = SubspaceCertificate(0.9, np.arange(n), np.eye(n), np.eye(n), np.zeros((n, n)))
    assert check(np.eye(n), c).ok
    c = SubspaceCertificate(1.0, np.arange(n), np.eye(n), np.eye(n), np.zeros((n, n)))
    rep = check(np.eye(n), c)
    assert not rep.ok and not rep.disagree


def test_subspace_mu_only_certificate_is_rejected():
    """Lam = 0, M = I: c_j = ||mu_j||_1 = 1, never < 1 (x = x proves nothing)."""
    n = 5
    c = SubspaceCertificate(0.1, np.arange(n), np.eye(n), np.zeros((n, n)), np.eye(n))
    assert not check(np.eye(n), c).ok


def test_subspace_claim_above_the_rank_fails():
    """A rank-1 matrix: any claim of rank 2 must fail, whatever Lam and M say."""
    A = np.full((4, 4), 0.25)
    R = np.zeros((4, 2))
    R[[0, 1], [0, 1]] = 1.0
    rng = np.random.default_rng(0)
    for _ in range(20):
        c = SubspaceCertificate(0.01, [0, 1], R, rng.standard_normal((4, 4)) * 0.1,
                                rng.standard_normal((4, 4)) * 0.1)
        assert not check(A, c).ok


def test_subspace_structure_is_validated(tmp_path):
    n = 4
    R = np.eye(n)
    R[0, 0] = 1.0 + 2.0**-52  # R[J] must be exactly I
    c = SubspaceCertificate(0.5, np.arange(n), R, np.eye(n), np.zeros((n, n)))
    rep = check(np.eye(n), c)
    assert not rep.ok and "identity" in rep.float64.detail and not rep.disagree
    with pytest.raises(MalformedCertificate):
        SubspaceCertificate(0.5, np.arange(n) + 0.5, np.eye(n), np.eye(n), np.zeros((n, n)))
    good = SubspaceCertificate(0.5, np.arange(n), np.eye(n), np.eye(n), np.zeros((n, n)))
    p = save_certificate(tmp_path / "s.npz", good, np.eye(n))
    cert, A, header = load_certificate(p)
    assert header["kind"] == "subspace" and cert.rank == n and check(A, cert).ok


@pytest.mark.parametrize("k, size", [(3, 4), (5, 2)])
@pytest.mark.parametrize("eps", [0.2, 0.6])
def test_subspace_search_finds_block_count(k, size, eps):
    """Permuted blocks: on the span of the block indicators ||A x||_inf = ||x||_inf, so the
    SVD subspace certifies k, and k + 1 is impossible (rank k)."""
    A = _permuted_blocks(k, size)
    _, _, Vt = np.linalg.svd(A)
    c = lo.SubspaceSearch(A, Vt.T, "svd").best(eps, 1, k * size)
    assert c is not None and c.rank == k and check(A, c).ok


def test_truncated_pseudoinverse_identity():
    A = np.eye(7)
    c = lo.truncated_pseudoinverse(A, 0.8, np.linalg.svd(A), 7)
    assert c is not None and c.rank == 7 and check(A, c).ok


# --------------------------------------------------------------------- constructions


@pytest.mark.parametrize("seed", [0, 1])
def test_row_basis_reaches_the_exact_rank(seed):
    """Rows of W H span its row space with k pivot rows: the row basis is exact at k."""
    k = 4
    A = _exact_rank(24, 20, k, seed)
    rows = lo.row_order(A)
    con = up.L1Refit(A, A[rows], method="row-basis")
    kr = con.least_feasible_rank(1e-6, 1, 20)
    assert kr is not None and kr <= k
    assert check(A, con.witness(1e-6, kr)).ok


#: the IRLS weight floors of alternating-l1, alternating-l1-smooth and alternating-l1-anneal
FLOORS = [dict(delta=1e-6), dict(delta=1e-3), dict(delta=1e-4, delta_start=1e-2, delta_decay=0.8)]


@pytest.mark.parametrize("floor", FLOORS)
@pytest.mark.parametrize("seed", [0, 1])
def test_alternating_l1_reaches_the_exact_rank(seed, floor):
    k = 3
    A = _exact_rank(20, 24, k, seed)
    con = up.AlternatingL1(A, np.linalg.svd(A, full_matrices=False), **floor)
    kr = con.least_feasible_rank(1e-6, 1, 20)
    assert kr is not None and kr <= k
    assert check(A, con.witness(1e-6, kr)).ok


@pytest.mark.parametrize("floor", FLOORS)
def test_alternating_l1_never_worse_than_its_svd_start(floor):
    """The polish makes each row optimal for the final W, and the best W seen is kept:
    the max row error is at most the truncated SVD's at the same rank (the start), whatever
    the smoothing ``delta`` and its schedule."""
    A = planted_blocks(30, 30, 5, 0.08, seed=3).A
    svd = np.linalg.svd(A, full_matrices=False)
    ts = up.TruncatedSVD(A, svd)
    alt = up.AlternatingL1(A, svd, **floor)
    for k in (2, 4, 5):
        assert alt.feasible(k, ts.errors[k] + 1e-9)


def test_smoothed_alternating_restart_is_named_and_searches_below_the_best_witness():
    """alternating-l1-smooth: witnesses carry its name; in a bracket it runs after
    trust-region and only below the best witness so far (a planted rank-3 matrix: the
    earlier constructions reach 3 and the lower end is 3, so it has nothing to search);
    called alone it finds the exact rank; a delta that is not a finite number > 0, or a
    method name that is not a non-empty string, is refused by name."""
    from softrank.certifiers.registry import CONSTRUCTIONS

    k = 3
    A = _exact_rank(20, 24, k, 0)
    con = CONSTRUCTIONS["alternating-l1-smooth"]
    w = con.witness(Operator(A=A), 1e-6)
    assert w is not None and w.rank == k and w.method == "alternating-l1-smooth"
    assert check(A, w).ok
    (br,) = bracket(A, 1e-6)
    assert (br.lower, br.upper) == (k, k)
    names = [r.name for r in br.diagnostics.methods if r.side == "upper"]
    assert names.index("alternating-l1-smooth") > names.index("trust-region")
    assert br.diagnostics.record("alternating-l1-smooth").status == "skipped"
    svd = np.linalg.svd(A, full_matrices=False)
    for bad in (0.0, -1e-3, np.nan, np.inf, "1e-3", None, True, [1e-3]):
        with pytest.raises(InvalidArgumentError, match="^delta: expected a finite number > 0"):
            up.AlternatingL1(A, svd, delta=bad)
    for bad in ("", 123):
        with pytest.raises(InvalidArgumentError, match="^method: expected a non-empty str"):
            up.AlternatingL1(A, svd, method=bad)


def test_annealed_floor_follows_its_schedule():
    """Iteration t weighs by ``1 / max(|r|, max(delta, delta_start * delta_decay**t))``:
    one iteration is the constant floor ``delta_start`` bit for bit, a start below the floor
    or a decay of 1 is the constant floor, and 40 annealed iterations are neither constant
    floor (the schedule is used); bad schedule arguments are refused by name."""
    A = planted_blocks(30, 30, 5, 0.08, seed=3).A
    svd = np.linalg.svd(A, full_matrices=False)

    def W(**kw):
        return up.AlternatingL1(A, svd, **kw).irls_basis(4)

    np.testing.assert_array_equal(W(iters=1, delta=1e-4, delta_start=1e-2, delta_decay=0.8),
                                  W(iters=1, delta=1e-2))
    np.testing.assert_array_equal(W(delta=1e-3, delta_start=1e-5, delta_decay=0.8),
                                  W(delta=1e-3))
    np.testing.assert_array_equal(W(delta=1e-4, delta_start=1e-2, delta_decay=1.0),
                                  W(delta=1e-2))
    annealed = W(delta=1e-4, delta_start=1e-2, delta_decay=0.8)
    assert not np.array_equal(annealed, W(delta=1e-2))
    assert not np.array_equal(annealed, W(delta=1e-4))
    start_msg = "^delta_start: expected a finite number > 0"
    decay_msg = r"^delta_decay: expected a finite number in \(0, 1\]"
    for bad in (0.0, -1e-2, np.nan, np.inf, "1e-2", True):
        with pytest.raises(InvalidArgumentError, match=start_msg):
            up.AlternatingL1(A, svd, delta_start=bad)
    for bad in (0.0, -0.5, 1.5, np.nan, "0.8", None, True):
        with pytest.raises(InvalidArgumentError, match=decay_msg):
            up.AlternatingL1(A, svd, delta_start=1e-2, delta_decay=bad)
    for bad in (-3, 2.5, "x", None, True):
        with pytest.raises(InvalidArgumentError, match="^iters: expected an integer >= 0"):
            up.AlternatingL1(A, svd, iters=bad)


def test_annealed_alternating_restart_runs_last_and_searches_below_the_best_witness():
    """alternating-l1-anneal: witnesses carry its name; in a bracket it runs after
    alternating-l1-smooth and is skipped when the bracket is closed; called alone it finds
    the exact rank of a planted rank-3 matrix."""
    from softrank.certifiers.registry import CONSTRUCTIONS

    k = 3
    A = _exact_rank(20, 24, k, 1)
    w = CONSTRUCTIONS["alternating-l1-anneal"].witness(Operator(A=A), 1e-6)
    assert w is not None and w.rank == k and w.method == "alternating-l1-anneal"
    assert check(A, w).ok
    (br,) = bracket(A, 1e-6)
    assert (br.lower, br.upper) == (k, k)
    names = [r.name for r in br.diagnostics.methods if r.side == "upper"]
    assert names.index("alternating-l1-anneal") == names.index("alternating-l1-smooth") + 1
    assert br.diagnostics.record("alternating-l1-anneal").status == "skipped"


def test_identity_witness_both_shapes():
    for shape in [(5, 3), (3, 5)]:
        A = np.full(shape, 1.0 / shape[1])
        w = up.identity_witness(A, 1e-300)
        assert w.rank == min(shape) and check(A, w).ok


def test_subspace_local_search_never_shrinks_and_checks():
    """The grown subspace contains the start, so its certificate claims more, and holds."""
    from softrank.generators.synthetic import sphere

    A = sphere(3, 16.0, 40, 40, seed=1).A
    _, _, Vt = np.linalg.svd(A)
    ss = lo.SubspaceSearch(A, Vt.T, "svd")
    c = ss.best(0.25, 1, 40)
    g = ss.extend(0.25, c)
    assert g is None or (g.rank > c.rank and check(A, g).ok)


def test_key_support_on_concentrated_rows():
    """Every row puts 1 - delta on the same 3 keys: the cover is those 3 keys for
    eps >= delta, and no cover of 2 keys reaches (error >= (1 - delta) / 3 > eps)."""
    delta, N = 0.05, 12
    rng = np.random.default_rng(0)
    A = np.empty((8, N))
    for i in range(8):
        w = rng.dirichlet(np.ones(3)) * 0.5 + 0.5 / 3  # each main key >= 1/6 of the mass
        A[i, :3] = (1 - delta) * w
        A[i, 3:] = delta * rng.dirichlet(np.ones(N - 3))
    w = up.key_support(A, 0.1)
    assert w is not None and w.rank == 3 and check(A, w).ok


def test_hybrid_keeps_a_sink_exactly():
    """A = s e_1^T-sink column plus a rank-1 remainder: the hybrid reaches rank 2 exactly."""
    m, N = 16, 12
    rng = np.random.default_rng(1)
    sink = rng.uniform(0.3, 0.9, size=m)
    rest = rng.dirichlet(np.ones(N - 1))
    A = np.column_stack([sink, (1 - sink)[:, None] * rest[None, :]])
    hy = up.Hybrid(A)
    w = hy.least_rank(1e-6, 1, N)
    k = w.rank
    assert k <= 2 and w.rank == k and check(A, w).ok


def test_hybrid_makes_each_option_when_its_search_reaches_it():
    """Three heavy keys (column sums above 2 m / N): options h = 1, 2, 3, none made before
    a search; a search stopped after its first option made only h = 1, and one without a
    stop made all three, each once (the first kept, not made again)."""
    m, N = 16, 12
    rng = np.random.default_rng(2)
    heavy = rng.uniform(0.15, 0.25, size=(m, 3))
    rest = rng.dirichlet(np.ones(N - 3), size=m) * (1 - heavy.sum(axis=1))[:, None]
    A = np.column_stack([heavy, rest])
    assert (A.sum(axis=0)[:3] > 2 * m / N).all()
    hy = up.Hybrid(A)
    assert hy.sizes == [1, 2, 3] and hy._options == {}
    w = hy.least_rank(0.05, 1, N, stop=lambda: True)
    assert sorted(hy._options) == [1] and w is not None and check(A, w).ok
    first = hy.option(1)
    hy.least_rank(0.05, 1, N)
    assert sorted(hy._options) == [1, 2, 3] and hy.option(1) is first
    # found or not, the options after the first ask the stop: a window with no witness
    # (rank 1 at eps 1e-9) and a stop that answers True make option 1 only
    hy = up.Hybrid(A)
    assert hy.least_rank(1e-9, 1, 1, stop=lambda: True) is None
    assert sorted(hy._options) == [1]


def test_lp_decoder_identity_and_blocks():
    """On I_n the decoder L = I certifies n for every eps < 1; on permuted uniform blocks
    with the true blocks as groups, L picks one row per block: ||L||_inf = 1."""
    n = 6
    dec = lo.LPDecoder(np.eye(n), [np.array([j]) for j in range(n)], "singletons")
    c = dec.best(0.9, 1, n)
    assert c is not None and c.rank == n and check(np.eye(n), c).ok
    A = planted_blocks(12, 12, 4, 0.0).A
    groups = [np.arange(3 * b, 3 * b + 3) for b in range(4)]
    c = lo.LPDecoder(A, groups, "blocks").best(0.9, 1, 4)
    assert c is not None and c.rank == 4 and check(A, c).ok


def test_frobenius_row_subset_beats_whole_matrix():
    """A 2x2 identity block among many identical rows: on all rows the tail is diluted by
    m eps^2; on the two distinct rows it is not (sigma_2 = 1 > 2 eps^2 at eps 0.5)."""
    A = np.zeros((40, 2))
    A[:, 0] = 1.0
    A[1] = [0.0, 1.0]
    order = lo.row_order(A)
    c = lo.frobenius(A, 0.5, order, {})
    assert c is not None and c.rank == 2 and c.rows.size < 40 and check(A, c).ok
    # stopped at once, only cached subsets count: the whole matrix's values (39 and 1
    # squared; the tail past the first, 1, is below 40 * 0.25) give rank 1, nothing cached
    # gives no certificate
    whole = {40: np.linalg.svd(A, compute_uv=False)}
    c = lo.frobenius(A, 0.5, order, whole, stop=lambda: True)
    assert c is not None and c.rank == 1 and c.rows.size == 40 and check(A, c).ok
    assert list(whole) == [40]
    assert lo.frobenius(A, 0.5, order, {}, stop=lambda: True) is None


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_planted_soundness_sweep(seed):
    """Slow tier: planted instances of several shapes and ranks; at eps > delta the true
    r_eps is at most k, so every reported lower end must be <= k (and re-check both ends)."""
    from softrank import bracket
    from softrank.generators.synthetic import planted

    rng = np.random.default_rng(seed)
    m, N = int(rng.integers(8, 64)), int(rng.integers(8, 64))
    k = int(rng.integers(1, min(m, N) // 2 + 1))
    delta = float(rng.uniform(0.0, 0.15))
    op = planted(m, N, k, delta, seed=seed)
    for br in bracket(op, [delta + 1e-3, min(2 * delta + 0.05, 0.9), 0.5 if delta < 0.49 else 0.9]):
        assert br.lower <= k <= min(m, N) and br.lower <= br.upper
        assert check(op.A, br.lower_certificate).ok and check(op.A, br.upper_witness).ok


def test_flint_endpoints_are_directed_under_cancellation():
    """A ball whose midpoint nearly cancels its radius: the float endpoints must still
    enclose it (mid + rad in floats would lose the bound)."""
    from flint import arb

    from softrank.checker.interval import _Flint

    B = _Flint()
    for text in ("1e-3 +/- 1e-20", "-1e-300 +/- 3e-310", "0.1 +/- 1e-30"):
        x = arb(-1e-3) + arb(text) if text.startswith("1e-3") else arb(text)
        assert arb(B.hi(x)) >= x.upper() and arb(B.lo(x)) <= x.lower()


def test_flush_to_zero_makes_the_checker_refuse(monkeypatch):
    from softrank.checker import UpperWitness, float64

    monkeypatch.setattr(float64, "_flush_to_zero", lambda: True)
    A = np.eye(3)
    rep = check(A, UpperWitness(0.5, np.eye(3), np.eye(3)))
    assert not rep.ok and "flush" in rep.float64.detail


# ------------------------------------------------------- row-span subspaces, trust region

@pytest.mark.parametrize("k, size", [(3, 4), (5, 2)])
@pytest.mark.parametrize("eps", [0.2, 0.6])
def test_row_subspace_test_finds_block_count(k, size, eps):
    """Permuted blocks: the first k pivoted-QR rows are one row of each block, whose span
    is that of the block indicators, so the row-span subspace certifies r_eps = k."""
    from softrank import Operator
    from softrank.certifiers.registry import LOWER_TESTS

    A = _permuted_blocks(k, size)
    c = LOWER_TESTS["subspace-rows"].certify(Operator(A=A), eps)
    assert c is not None and c.rank == k and c.method.startswith("subspace/rows")
    assert check(A, c).ok


def _l1_row_optimum(a, W):
    """min_u ||a - u W||_1 by scipy's linprog on the primal form (u free, a - u W = p - q)."""
    from scipy.optimize import linprog

    k, N = W.shape
    c = np.concatenate([np.zeros(k), np.ones(2 * N)])
    A_eq = np.hstack([W.T, np.eye(N), -np.eye(N)])
    r = linprog(c, A_eq=A_eq, b_eq=a, bounds=[(None, None)] * k + [(0, None)] * (2 * N),
                method="highs")
    assert r.status == 0
    return r.fun


def _box_optimum(A, U, W, delta):
    """min over |D| <= delta of max_i ||A_i - U_i (W + D)||_1, every entry with its own
    absolute-value variable (the naive LP, by scipy's linprog)."""
    import scipy.sparse as sp
    from scipy.optimize import linprog

    m, N = A.shape
    k = U.shape[1]
    n = k * N
    # columns: D (c N + j) | e (i N + j) | t
    rows, cols, vals = [], [], []
    for i in range(m):
        for j in range(N):
            for c in range(k):
                rows.append(i * N + j)
                cols.append(c * N + j)
                vals.append(U[i, c])
    UD = sp.csr_matrix((vals, (rows, cols)), shape=(m * N, n))
    I = sp.identity(m * N)
    z = sp.csr_matrix((m * N, 1))
    S = sp.hstack([sp.csr_matrix((m, n)), sp.kron(sp.identity(m), np.ones((1, N))),
                   -np.ones((m, 1))])
    R = (A - U @ W).ravel()
    A_ub = sp.vstack([sp.hstack([-UD, -I, z]), sp.hstack([UD, -I, z]), S]).tocsc()
    b_ub = np.concatenate([-R, R, np.zeros(m)])
    cost = np.zeros(n + m * N + 1)
    cost[-1] = 1.0
    bounds = [(-delta, delta)] * n + [(0, None)] * (m * N) + [(None, None)]
    r = linprog(cost, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
    assert r.status == 0
    return r.fun


@pytest.mark.parametrize("seed", range(3))
def test_trust_region_w_step_is_the_exact_box_optimum(seed):
    """The reduced LP (signs fixed where a residual cannot flip within the box) reaches the
    optimum of the naive LP with an absolute value per entry."""
    rng = np.random.default_rng(seed)
    m, N, k = 7, 9, 2
    A = rng.dirichlet(np.full(N, 0.5), size=m)
    U = rng.normal(size=(m, k))
    W = rng.normal(size=(k, N)) * 0.2
    delta = 0.05
    tr = up.TrustRegionPolish(A, start=None)
    W2 = tr.w_step(U, W, delta, target=0.0)
    assert W2 is not None and np.abs(W2 - W).max() <= delta * (1 + 1e-12)
    got = np.abs(A - U @ W2).sum(axis=1).max()
    assert got == pytest.approx(_box_optimum(A, U, W, delta), abs=1e-8)
    assert got <= np.abs(A - U @ W).sum(axis=1).max() + 1e-12


def test_trust_region_without_budget_is_the_exact_row_fit():
    """No W step fits the budget: the polish returns the alternating W with every row of U
    by its exact l1 regression; its max row error is the max of the rows' LP optima."""
    A = np.random.default_rng(4).dirichlet(np.full(10, 0.4), size=8)
    svd = np.linalg.svd(A, full_matrices=False)
    alt = up.AlternatingL1(A, svd)
    tr = up.TrustRegionPolish(A, alt, max_nonzeros=0)
    err, U, W = tr.polish(3, 0.0)
    assert np.array_equal(W, alt.irls_basis(3))
    want = max(_l1_row_optimum(a, W) for a in A)
    assert err == pytest.approx(want, abs=1e-9)
    assert err == pytest.approx(np.abs(A - U @ W).sum(axis=1).max(), abs=1e-12)


def test_trust_region_never_worse_than_its_start_and_checks():
    """The W and U steps never raise the max row error, and a witness it reports holds."""
    from softrank.generators.synthetic import gaussian_head

    A = gaussian_head(24, 24, 4, 2.0, seed=1).A
    svd = np.linalg.svd(A, full_matrices=False)
    alt = up.AlternatingL1(A, svd)
    start = up.TrustRegionPolish(A, alt, max_nonzeros=0).polish(4, 0.0)[0]
    tr = up.TrustRegionPolish(A, alt)
    err, U, W = tr.polish(4, 0.0)
    assert err <= start
    w = tr.least_rank(err * 1.001, 1, 4)
    assert w is not None and w.rank <= 4 and check(A, w).ok


def test_trust_region_polish_asks_stop_and_resumes():
    """``stop`` answering True at once: no pair, nothing cached (the start's IRLS asks it
    first). Answering True from the first step on (after 40 IRLS iterations and one LP per
    row): the start's exact row fit, cached as resumable, so that the polish asked again
    without ``stop`` ends where an uninterrupted one does."""
    from softrank.generators.synthetic import gaussian_head

    A = gaussian_head(24, 24, 4, 2.0, seed=1).A
    svd = np.linalg.svd(A, full_matrices=False)
    free = up.TrustRegionPolish(A, up.AlternatingL1(A, svd)).polish(4, 0.0)
    tr = up.TrustRegionPolish(A, up.AlternatingL1(A, svd))
    assert tr.polish(4, 0.0, stop=lambda: True) is None and not tr._done
    asked = [0]

    def stop():
        asked[0] += 1
        return asked[0] > 40 + A.shape[0]

    start = up.TrustRegionPolish(A, up.AlternatingL1(A, svd), max_nonzeros=0).polish(4, 0.0)
    err, U, W = tr.polish(4, 0.0, stop=stop)
    assert err == start[0] and np.array_equal(W, start[2])
    assert tr._done[4][3] is False  # not spent: resumable
    again = tr.polish(4, 0.0)
    assert again[0] == free[0] and np.array_equal(again[2], free[2])

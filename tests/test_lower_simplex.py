"""The compiled simplex of the subspace climb (softrank.certifiers.lower.simplex) against
HiGHS on the same LPs, and the climb's values with and without it."""

import numpy as np
import pytest

from softrank.certifiers.lower import SubspaceClimb
from softrank.certifiers.lower import climb as climb_mod
from softrank.certifiers.lower import key_lp
from softrank.certifiers.lower.simplex import (CHECK_FAILED, NO_OPTIMUM, OPTIMAL,
                                               PIVOT_LIMIT, SINGULAR, solve_from)
from softrank.generators.synthetic import gaussian_head


def _setup(N=32, k=8, seed=0):
    A = gaussian_head(N, N, 16, 2.0, seed=seed).A
    V = np.linalg.svd(A)[2].T
    return A, V, V[:, :k]


def _highs(A, B):
    """LP_j(span B) of every key by HiGHS (the climb's own model), cold."""
    cl = SubspaceClimb(A, np.linalg.svd(A)[2].T)
    m, N = A.shape
    out = {}
    for j in range(N):
        lp = key_lp.key_lp_model(cl.A, B)
        out[j] = lp.solve([2 * m + j], [1.0], [1.0])
    return out


def _turned(B, step, seed):
    D = np.random.default_rng(seed).standard_normal(B.shape)
    D -= B @ (B.T @ D)
    return np.linalg.qr(B + step * D / np.linalg.norm(D))[0]


@pytest.mark.parametrize("step", [0.0, 0.05, 0.3])
def test_warm_solves_reach_highs_optimum(step):
    """From each key's optimal vertex on B, the optimum on a turned B equals HiGHS's value
    (and the multipliers are those of an optimum: e_t + G_act^T lam + mu e = 0, lam >= 0)."""
    A, V, B = _setup()
    m, N = A.shape
    k = B.shape[1]
    ref0 = _highs(A, B)
    B2 = _turned(B, step, 1)
    ref = _highs(A, B2)
    G, h = key_lp.key_lp_rows(A @ B2, B2)
    solved = 0
    for j in range(N):
        if ref0[j].x is None or ref[j].x is None:
            continue
        cl = SubspaceClimb(A, V)
        lp = key_lp.key_lp_model(cl.A, B)
        lp.solve([2 * m + j], [1.0], [1.0])
        act = key_lp.active_rows(lp.basis()[1], m, N, j, k)
        if act is None:
            continue
        e = np.append(B2[j], 0.0)
        status, z, mult, _ = solve_from(G, h, (2 * m + j, 2 * m + N + j), e, act)
        assert status == OPTIMAL
        assert z[-1] == pytest.approx(ref[j].x[k], abs=1e-9)
        assert (mult[:-1] >= -1e-8).all()
        c0 = np.zeros(k + 1)
        c0[-1] = 1.0
        assert np.allclose(c0 + G[act].T @ mult[:-1] + mult[-1] * e, 0.0, atol=1e-9)
        assert (h - G @ z >= -1e-8)[np.setdiff1d(np.arange(G.shape[0]),
                                                 [2 * m + j, 2 * m + N + j])].all()
        solved += 1
    assert solved >= N // 4


def test_hand_worked_lp():
    """Key 0 with ``B = I`` (``x = c``) and ``A B = [[1, -1], [1, 1]]``: ``x_0 = 1``, and
    ``max(|1 - c_1|, |1 + c_1|)`` is least at ``c_1 = 0``: the value 1 at ``(1, 0)``."""
    AB = np.array([[1.0, -1.0], [1.0, 1.0]])
    B = np.eye(2)
    G, h = key_lp.key_lp_rows(AB, B)
    e = np.array([1.0, 0.0, 0.0])
    # rows: 0-1 A B c - t <= 0, 2-3 -A B c - t <= 0, 4-5 B c <= 1, 6-7 -B c <= 1; key 0's
    # box rows 4 and 6 are left out; start at rows 0 and 7 (x_0 - x_1 = t, x_1 = -1)
    act = np.array([0, 7], dtype=np.intp)
    status, z, mult, _ = solve_from(G, h, (4, 6), e, act)
    assert status == OPTIMAL
    assert z == pytest.approx([1.0, 0.0, 1.0], abs=1e-12)
    assert sorted(act.tolist()) == [0, 1]  # both |A B c| rows tight at the optimum
    assert (mult[:-1] >= 0).all()


def test_infeasible_key_is_no_optimum():
    """Key 1 of x = B c with B = [1, 1/2]^T never peaks: x_1 = 1 forces x_0 = 2 > 1."""
    B = np.array([[1.0], [0.5]])
    AB = np.array([[1.0]])
    G, h = key_lp.key_lp_rows(AB, B)
    m, N = 1, 2
    e = np.array([0.5, 0.0])
    act = np.array([0], dtype=np.intp)
    status, *_ = solve_from(G, h, (2 * m + 1, 2 * m + N + 1), e, act)
    assert status == NO_OPTIMUM


def test_pivot_limit_and_singular_start():
    A, V, B = _setup()
    m, N = A.shape
    k = B.shape[1]
    G, h = key_lp.key_lp_rows(A @ B, B)
    j = 0
    e = np.append(B[j], 0.0)
    # a start far from the optimum with no pivots allowed
    act = key_lp.complete_start(np.array([], dtype=np.intp), G, e, j, m, N, k)
    status, *_ = solve_from(G, h, (2 * m + j, 2 * m + N + j), e, act.copy(), max_pivots=0)
    assert status in (PIVOT_LIMIT, OPTIMAL, NO_OPTIMUM)
    if status == OPTIMAL:  # the start happened to be optimal: then it is checked
        pytest.skip("start already optimal")
    # a repeated row makes the start singular (numerically: its inversion may or may not
    # raise, by rounding): refused by the inversion or the final check, or, where the pivots
    # leave the repeated row, the true optimum (HiGHS's value) on distinct rows, never another
    bad = act.copy()
    bad[1] = bad[0]
    status, z, _, _ = solve_from(G, h, (2 * m + j, 2 * m + N + j), e, bad)
    assert status in (SINGULAR, CHECK_FAILED, OPTIMAL)
    if status == OPTIMAL:
        ref = _highs(A, B)[j]
        assert ref.x is not None and abs(z[-1] - ref.x[-1]) <= 1e-7
        assert len(set(bad.tolist())) == k


def test_complete_gives_a_nonsingular_start_without_the_keys_box_rows():
    A, V, B = _setup(k=6)
    m, N = A.shape
    G, h = key_lp.key_lp_rows(A @ B, B)
    for j in (0, 5, N - 1):
        e = np.append(B[j], 0.0)
        own = [2 * m + j, 2 * m + N + j]
        act = key_lp.complete_start(np.array(own + [0, 1]), G, e, j, m, N, 6)
        assert act.size == 6 and len(set(act.tolist())) == 6
        assert not set(own) & set(act.tolist())
        assert abs(np.linalg.det(np.vstack([G[act], e]))) > 1e-12


@pytest.mark.parametrize("eps", [0.1, 0.3])
def test_climb_values_equal_highs_values(eps, monkeypatch):
    """The climb's values on a turned subspace, from compiled solves, equal those of HiGHS
    alone (the compiled path turned off), key by key."""
    A, V, B = _setup(k=10)
    N = A.shape[1]
    B2 = _turned(B, 0.1, 3)

    def run(compiled: bool):
        if not compiled:
            monkeypatch.setattr(climb_mod, "solve_from",
                                lambda *a, **k: (SINGULAR, None, None, 0))
        cl = SubspaceClimb(A, V)
        cl._at_eps(eps)
        cl.values(B, range(N))
        out = cl.values(B2, range(N))
        monkeypatch.undo()
        return cl, out

    fast, a = run(True)
    slow, b = run(False)
    assert fast.compiled > 0 and slow.compiled == 0
    assert a.keys() == b.keys()
    for j in a:
        assert a[j][0] == pytest.approx(b[j][0], abs=1e-9, rel=1e-9)


def test_warm_compiles_what_the_engine_calls():
    """After warm(), a bracket with the climb and the alternating searches compiles nothing
    more: the kernels were compiled for the argument types the engine passes (the command
    line warms them with its stop signals blocked, since a stop during a compilation is
    dropped)."""
    from softrank import bracket
    from softrank.certifiers import linalg
    from softrank.certifiers.lower import simplex

    climb_mod.warm()
    kernels = (simplex._solve, linalg._cholesky_solves)
    before = [len(k.signatures) for k in kernels]
    assert all(n >= 1 for n in before)
    A = gaussian_head(24, 24, 8, 2.0, seed=3).A
    (b,) = bracket(A, 0.25)
    assert b.lower is not None and b.upper is not None
    ran = {m.name for m in b.diagnostics.methods if m.status != "skipped"}
    assert {"subspace-climb", "alternating-l1"} <= ran
    # and the climb's own evaluations, which do reach the compiled simplex
    A, V, B = _setup(k=6)
    cl = SubspaceClimb(A, V)
    cl._at_eps(0.3)
    cl.values(B, range(A.shape[1]))
    cl.values(_turned(B, 0.1, 3), range(A.shape[1]))
    assert cl.compiled > 0
    assert [len(k.signatures) for k in kernels] == before

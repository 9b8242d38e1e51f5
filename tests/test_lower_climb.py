"""The subspace climb and its starts (softrank.certifiers.lower.climb and .starts;
docs/theory/lower.md#subspace-climb): its LP values against scipy's, its Farkas proofs of
infeasibility, its certificates on cases whose answer is known, and its arguments."""

from __future__ import annotations

import numpy as np
import pytest

from softrank.certifiers import lower as lo
from softrank.checker import check
from softrank.errors import InvalidArgumentError

def _lp_j_linprog(A, B, j):
    """LP_j(span B) = min ||A x||_inf s.t. x = B c, x_j = 1, ||x||_inf <= 1, by scipy's
    linprog on the plain form (variables c, t): independent of softrank's own LP."""
    from scipy.optimize import linprog

    m, N = A.shape
    k = B.shape[1]
    AB = A @ B
    A_ub = np.vstack([np.hstack([AB, -np.ones((m, 1))]), np.hstack([-AB, -np.ones((m, 1))]),
                      np.hstack([B, np.zeros((N, 1))]), np.hstack([-B, np.zeros((N, 1))])])
    b_ub = np.concatenate([np.zeros(2 * m), np.ones(2 * N)])
    r = linprog(np.r_[np.zeros(k), 1.0], A_ub=A_ub, b_ub=b_ub,
                A_eq=np.r_[B[j], 0.0][None], b_eq=[1.0],
                bounds=[(None, None)] * k + [(0, None)], method="highs")
    return r.fun if r.status == 0 else np.inf


def test_climb_values_hand_worked():
    """A = [[.9, .1], [.1, .9]], S = R^2: with x_1 = 1, |x_2| <= 1, ||A x||_inf is least at
    x_2 = -1, where both rows give 0.8; so LP_1 = LP_2 = 0.8 and beta(S) = 0.8."""
    A = np.array([[0.9, 0.1], [0.1, 0.9]])
    vals = lo.SubspaceClimb(A, np.eye(2)).values(np.eye(2), [0, 1])
    assert vals[0][0] == pytest.approx(0.8, abs=1e-12)
    assert vals[1][0] == pytest.approx(0.8, abs=1e-12)


def test_climb_values_gradient_and_bounds():
    """On a random row-stochastic matrix and subspace: every LP_j equals scipy's linprog on
    the plain form; the derivative read off the duals matches central differences; the
    dual lower bounds are tight on the subspace they came from and below the optimum on a
    turned one."""
    rng = np.random.default_rng(5)
    A = rng.dirichlet(np.full(10, 0.4), size=9)
    V = np.linalg.svd(A)[2].T
    B = np.linalg.qr(V[:, :3])[0]
    climb = lo.SubspaceClimb(A, V)
    vals = climb.values(B, range(10))
    for j, (v, _) in vals.items():
        assert v == pytest.approx(_lp_j_linprog(A, B, j), rel=1e-7, abs=1e-9)
    j = min((j for j in vals if vals[j][1] is not None), key=lambda j: vals[j][0])
    v, g = vals[j]
    D = rng.standard_normal(B.shape)
    h = 1e-6
    fd = (_lp_j_linprog(A, B + h * D, j) - _lp_j_linprog(A, B - h * D, j)) / (2 * h)
    assert float((g * D).sum()) == pytest.approx(fd, rel=1e-4, abs=1e-7)
    solved = [j for j in vals if np.isfinite(vals[j][0])]
    lb = climb.lower_bounds(B, solved)
    assert np.allclose(lb, [vals[j][0] for j in solved], atol=1e-9)
    B2 = np.linalg.qr(B + 0.05 * rng.standard_normal(B.shape))[0]
    lb2 = climb.lower_bounds(B2, solved)
    exact2 = np.array([_lp_j_linprog(A, B2, j) for j in solved])
    assert (lb2 <= exact2 + 1e-9).all()


def test_climb_values_stop_at():
    """With stop_at, the keys are solved in the order given and the first whose LP_j is at
    or below it ends the evaluation: the result is that prefix of the keys, each value equal
    to scipy's linprog on the plain form. The threshold lies halfway between two of
    linprog's values, so no value is within rounding of it. Keys proved infeasible by a
    Farkas vector before any solve are answered too (+inf, which never stops it). A
    threshold that is not a finite real number is refused by name."""
    rng = np.random.default_rng(11)
    A = rng.dirichlet(np.full(12, 0.4), size=10)
    V = np.linalg.svd(A)[2].T
    B = np.linalg.qr(V[:, :4])[0]
    keys = list(rng.permutation(12))
    exact = {j: _lp_j_linprog(A, B, j) for j in keys}
    finite = sorted(v for v in exact.values() if np.isfinite(v))
    assert len(finite) >= 4
    gaps = np.diff(finite[:len(finite) // 2 + 1])
    i = int(np.argmax(gaps))  # the widest gap among the lower half of the values
    stop_at = (finite[i] + finite[i + 1]) / 2
    first = next(n for n, j in enumerate(keys) if exact[j] <= stop_at)
    got = lo.SubspaceClimb(A, V).values(B, keys, stop_at=stop_at)
    assert set(keys[:first + 1]) <= set(got)
    assert all(exact[j] == np.inf and got[j][0] == np.inf
               for j in set(got) - set(keys[:first + 1]))
    assert any(np.isfinite(exact[j]) for j in keys[first + 1:])  # some solve was left out
    for j, (v, _) in got.items():
        assert v == pytest.approx(exact[j], rel=1e-7, abs=1e-9)
    assert lo.SubspaceClimb(A, V).values(B, keys, stop_at=-1.0).keys() == set(keys)
    for bad in (np.nan, np.inf, True, "0.5", 10**400, np.array([0.5]), 1j):
        for arg in ("stop_at", "skip_above"):
            with pytest.raises(InvalidArgumentError, match=arg):
                lo.SubspaceClimb(A, V).values(B, keys, **{arg: bad})


def test_farkas_hand_worked():
    """S = span((1, 1/2, 0)) in R^3: every x in S peaks at key 0 only. Key 1 is excluded by
    y = (-2/5, 4/5, 0) (e_2 minus its projection on S: orthogonal to S, 4/5 > 2/5) and
    key 2 by y = e_3; key 0 is feasible (x = (1, 1/2, 0)) and never proved."""
    B = np.array([[1.0], [0.5], [0.0]]) / np.sqrt(1.25)
    climb = lo.SubspaceClimb(np.full((2, 3), 1 / 3), np.eye(3))
    got = climb.farkas(B, [0, 1, 2])
    assert sorted(got) == [1, 2]
    assert np.allclose(got[1], [-0.4, 0.8, 0.0], atol=1e-15)
    assert np.allclose(got[2], [0.0, 0.0, 1.0], atol=1e-15)


def test_farkas_proves_only_infeasible_keys():
    """On random subspaces of a softmax matrix, every key proved is infeasible for scipy's
    linprog, its vector is orthogonal to S and dominated at the key; the reweighted steps
    prove keys that the projected e_j alone does not (14 infeasible keys at k = 2: 8 proved
    by e_j, 12 after the steps; hand-counted once)."""
    rng = np.random.default_rng(7)
    L = 3 * rng.standard_normal((16, 16))
    A = np.exp(L - L.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    climb = lo.SubspaceClimb(A, np.linalg.svd(A)[2].T)
    counts = []
    for k in (2, 4, 6):
        B = np.linalg.qr(rng.standard_normal((16, k)))[0]
        got = climb.farkas(B, range(16))
        infeasible = {j for j in range(16) if np.isinf(_lp_j_linprog(A, B, j))}
        assert set(got) <= infeasible
        for j, y in got.items():
            assert np.abs(B.T @ y).max() <= 1e-12 * np.abs(y).max()
            assert y[j] > (1 + 1e-6) * (np.abs(y).sum() - abs(y[j]))
        counts.append((len(infeasible), len(climb.farkas(B, range(16), iters=0)), len(got)))
    assert counts[0] == (14, 8, 12)


def test_farkas_never_proves_a_key_of_s():
    """A key j with e_j in S is feasible (x = e_j): the projected e_j is rounding noise,
    which the test against sqrt(N) ||B^T y|| rejects. Cases: S = R^4 in a rotated basis
    (every key feasible) and S = span(e_2, v) in R^3 (key 1 feasible, by linprog too)."""
    rng = np.random.default_rng(0)
    climb = lo.SubspaceClimb(np.full((2, 4), 0.25), np.eye(4))
    assert climb.farkas(np.linalg.qr(rng.standard_normal((4, 4)))[0], range(4)) == {}
    A = np.full((2, 3), 1 / 3)
    for seed in range(40):
        v = np.random.default_rng(seed).standard_normal(3)
        R = np.linalg.qr(np.random.default_rng(seed + 100).standard_normal((2, 2)))[0]
        B = np.linalg.qr(np.column_stack([[0.0, 1.0, 0.0], v]))[0] @ R  # a rotated basis
        assert 1 not in lo.SubspaceClimb(A, np.eye(3)).farkas(B, [1])
        assert np.isfinite(_lp_j_linprog(A, B, 1))


@pytest.mark.parametrize("B, keys, iters, needle", [
    (0.5 * np.eye(4)[:, :2], [0], 8, "orthonormal"),
    (np.full((4, 2), np.nan), [0], 8, "finite"),
    (np.eye(3), [0], 8, "finite (4, k)"),
    (np.eye(4)[:, :2], [4], 8, "keys: expected an integer in [0, 3]"),
    (np.eye(4)[:, :2], [-1], 8, "keys: expected an integer in [0, 3]"),
    (np.eye(4)[:, :2], [1.0], 8, "keys: expected an integer in [0, 3]"),
    (np.eye(4)[:, :2], [True], 8, "keys: expected an integer in [0, 3]"),
    (np.eye(4)[:, :2], [0], -1, "iters"),
])
def test_farkas_bad_arguments(B, keys, iters, needle):
    import re

    from softrank.errors import InvalidArgumentError

    climb = lo.SubspaceClimb(np.full((2, 4), 0.25), np.eye(4))
    with pytest.raises(InvalidArgumentError, match=re.escape(needle)):
        climb.farkas(B, keys, iters=iters)


def test_climb_with_farkas_proofs_equals_the_solves():
    """A key proved infeasible gets the value a solve gives (inf) and counts in the budget
    like one. Skipping its solve changes the basis the next solve starts from, so values
    can move by rounding (1e-13 to 1e-10) and a climb can take another path; on this case
    both reach the same subspace dimension after the same number of evaluations."""
    rng = np.random.default_rng(34)
    n = int(rng.integers(8, 14))
    L = float(rng.uniform(1.5, 4)) * rng.standard_normal((n, n))
    A = np.exp(L - L.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    V = np.linalg.svd(A)[2].T
    runs = []
    for proofs in (True, False):
        climb = lo.SubspaceClimb(A, V)
        if not proofs:
            climb.farkas = lambda *args, **kwargs: {}
        cert = climb.best(0.25, 2, n)
        runs.append((cert.rank if cert is not None else None, climb.lps, climb.proofs))
    assert runs[0][:2] == runs[1][:2] and runs[0][0] is not None
    assert runs[0][2] > 0 and runs[1][2] == 0


@pytest.mark.parametrize("seed, n, scale, eps", [(34, 8, 3.68, 0.25), (42, 8, 2.6, 0.25),
                                                  (40, 11, 3.23, 0.1)])
def test_climb_certifies_past_the_singular_subspaces(seed, n, scale, eps):
    """Softmax of random logits where the top singular subspaces and their local search stop
    one rank short: the climb turns a subspace one dimension larger until it certifies, and
    the checker (float64 and interval) accepts it; it never exceeds the bracket's upper
    end."""
    from softrank import Operator, bracket
    from softrank.certifiers.registry import TRAITS

    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 14))
    s = float(rng.uniform(1.5, 4))
    assert (n, round(s, 2)) == (n, scale)  # the case drawn is the one described
    L = s * rng.standard_normal((n, n))
    A = np.exp(L - L.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    V = np.linalg.svd(A)[2].T
    search = lo.SubspaceSearch(A, V, "svd")
    c = search.best(eps, 1, n)
    grown = search.extend(eps, c)
    plain = max(c.rank, grown.rank if grown is not None else 0)
    cert = lo.SubspaceClimb(A, V).best(eps, plain + 1, n)
    assert cert is not None and cert.rank == plain + 1
    assert cert.method == "subspace/svd+climb"
    rep = check(A, cert, interval=True)
    assert rep.ok and not rep.disagree
    (br,) = bracket(Operator(A=A), eps)
    assert br.lower >= cert.rank and cert.rank <= br.upper
    assert br.diagnostics.record("subspace-climb").status in ("ok", "declined")
    assert TRAITS["subspace-climb"].late


def test_climb_at_one_eps_does_not_depend_on_the_others():
    """The climbs at one tolerance keep their own duals: bracketing at eps alone and at eps
    among others gives the same lower end (a case where shared duals changed it)."""
    from softrank import Operator, bracket

    L = 3 * np.random.default_rng(104).standard_normal((24, 24))
    A = np.exp(L - L.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    (alone,) = bracket(Operator(A=A), 0.1)
    among = bracket(Operator(A=A), [0.1, 0.25, 0.5])[0]
    assert among.lower == alone.lower and among.upper == alone.upper
    assert alone.lower_certificate is not None and check(A, alone.lower_certificate).ok


def test_climb_goal_below_one_near_eps_one():
    """On I_10 every subspace is eps-injective for eps < 1 (||x||_inf = ||I x||_inf), so the
    climb certifies the whole space even at eps = 0.99995, where eps (1 + 1e-4) > 1."""
    eye = np.eye(10)
    cert = lo.SubspaceClimb(eye, eye).best(0.99995, 2, 10)
    assert cert is not None and cert.rank == 10 and check(eye, cert).ok


@pytest.mark.parametrize("kwargs, needle", [
    ({"V": np.full((6, 6), np.nan)}, "V must be"),
    ({"V": np.eye(5)}, "V must be"),
    ({"key_order": []}, "key_order"),
    ({"active": 0}, "active"),
    ({"full_every": 0}, "full_every"),
    ({"margin": -1.0}, "margin"),
])
def test_climb_bad_arguments_are_named(kwargs, needle):
    from softrank.errors import InvalidArgumentError

    A = np.full((6, 6), 1 / 6)
    args = {"V": np.eye(6)} | kwargs
    with pytest.raises(InvalidArgumentError, match=needle):
        lo.SubspaceClimb(A, args.pop("V"), **args)
    with pytest.raises(InvalidArgumentError, match="^lo: expected an integer"):
        lo.SubspaceClimb(A, np.eye(6)).best(0.1, 2.5, 6)


def test_climb_starts_hand_worked():
    """``rows`` is the first k rows of A in the given order; each ``random-rows`` start is k
    distinct rows of A; each ``svd-mix`` start lies in the span of the top 2k right singular
    vectors; the draws depend on k and the seed only."""
    rng = np.random.default_rng(5)
    L = 2 * rng.standard_normal((9, 12))
    A = np.exp(L - L.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    V = np.linalg.svd(A)[2].T
    order = lo.row_order(A)
    starts = lo.climb_starts(A, V, order, 3, random_rows=2, svd_mix=1)
    assert [s[0] for s in starts] == ["rows", "random-rows", "svd-mix", "random-rows"]
    assert np.array_equal(starts[0][1], A[order[:3]].T)
    for label, B in starts:
        assert B.shape == (12, 3)
        if label == "random-rows":
            hits = [int(np.flatnonzero((A == col).all(axis=1))[0]) for col in B.T]
            assert len(set(hits)) == 3
        if label == "svd-mix":
            P = V[:, :6] @ V[:, :6].T
            assert np.abs(P @ B - B).max() < 1e-12
            assert np.abs(V[:, 6:].T @ B).max() < 1e-12
    again = lo.climb_starts(A, V, order, 3, random_rows=2, svd_mix=1)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(starts, again))
    other = lo.climb_starts(A, V, order, 3, random_rows=2, svd_mix=1, seed=1)
    assert not np.array_equal(starts[1][1], other[1][1])
    assert len(lo.climb_starts(A, V, order, 3, random_rows=0, svd_mix=0)) == 1


@pytest.mark.parametrize("kwargs, needle", [
    ({"k": 0}, "^k: expected an integer"), ({"k": 10}, "^k: expected an integer"),
    ({"k": True}, "^k: expected an integer"), ({"k": 2.0}, "^k: expected an integer"), ({"random_rows": -1}, "random_rows"),
    ({"svd_mix": 1.5}, "svd_mix"), ({"seed": -1}, "seed"),
    ({"order": np.arange(8)}, "order"), ({"order": np.zeros(9, dtype=int)}, "order"),
    ({"order": np.arange(9.0)}, "order"), ({"V": np.eye(11)}, "V must be"),
    ({"V": np.full((12, 12), np.inf)}, "V must be"), ({"A": np.ones(12)}, "A must be"),
    ({"A": np.full((9, 12), np.nan)}, "A must be"), ({"order": None}, "order")])
def test_climb_starts_bad_arguments(kwargs, needle):
    from softrank.errors import InvalidArgumentError

    args = {"A": np.full((9, 12), 1 / 12), "k": 3, "V": np.eye(12),
            "order": np.arange(9)} | kwargs
    with pytest.raises(InvalidArgumentError, match=needle):
        lo.climb_starts(args.pop("A"), args.pop("V"), args.pop("order"), args.pop("k"),
                        **args)


def _kernel_start_case():
    """A = [e_1; e_2; e_3; (e_4 + e_5 + e_6) / 3], an orthonormal basis of its kernel, and
    climb directions V whose first two columns span that kernel and whose third is e_3."""
    A = np.zeros((4, 6))
    A[0, 0] = A[1, 1] = A[2, 2] = 1.0
    A[3, 3:] = 1 / 3
    kernel = np.array([[0, 0, 0, 1, -1, 0], [0, 0, 0, 1, 1, -2]], dtype=float).T
    kernel /= np.linalg.norm(kernel, axis=0)
    return A, kernel, np.column_stack([kernel, np.eye(6)[:, 2], np.ones(6) / 6 ** 0.5])


def test_climb_continues_from_a_start_where_the_singular_one_fails():
    """A = [e_1; e_2; e_3; (e_4 + e_5 + e_6) / 3]. The climb's own first directions lie in
    the kernel of A (beta = 0 there), and its budget (one evaluation per key) is spent on
    the first evaluation, so it cannot move. A start spanning e_1, e_2 certifies at once
    (||A x||_inf = ||x||_inf on it); the ascent goes on from it with the next direction e_3,
    and its certificates carry the start's label."""
    from softrank.errors import InvalidArgumentError

    A, kernel, V = _kernel_start_case()
    good = np.eye(6)[:, :2]
    assert lo.SubspaceClimb(A, V, lps_per_key=1).best(0.5, 2, 3) is None
    cert = lo.SubspaceClimb(A, V, lps_per_key=1).best(
        0.5, 2, 3, starts=lambda k: [("bad", kernel), ("good", good)])
    assert cert is not None and cert.rank == 3 and cert.method == "subspace/good+climb"
    assert check(A, cert, interval=True).ok
    with pytest.raises(InvalidArgumentError, match="3 columns"):
        lo.SubspaceClimb(A, V, lps_per_key=1).best(0.5, 3, 3,
                                                   starts=lambda k: [("x", good)])


def test_climb_screens_its_further_starts():
    """The screen scores a start by the least LP_j of its span over the hardest keys, hand
    worked on A = [e_1; e_2; e_3; (e_4 + e_5 + e_6) / 3] with every key scored: the kernel
    of A scores 0 (A x = 0 on it, and x peaks at keys 4-6), span(e_1, e_2) scores 1 (x = e_j
    at keys 1, 2; no x of it peaks at keys 3-6, +inf). Listed second, the good start is
    still the one climbed when only one is; screened starts wait for the plain ones."""
    from softrank.errors import InvalidArgumentError

    A, kernel, V = _kernel_start_case()
    good = np.eye(6)[:, :2]
    climb = lo.SubspaceClimb(A, V, lps_per_key=1)
    assert climb.best(0.5, 2, 3, screened=lambda k: [("bad", kernel), ("good", good)],
                      screened_climbs=0, screen_keys=6) is None
    for first in ((("bad", kernel), ("good", good)), (("good", good), ("bad", kernel))):
        cert = lo.SubspaceClimb(A, V, lps_per_key=1).best(
            0.5, 2, 3, screened=lambda k, first=first: list(first), screened_climbs=1,
            screen_keys=6)
        assert cert is not None and cert.rank == 3 and cert.method == "subspace/good+climb"
        assert check(A, cert, interval=True).ok
    # with as many climbs as starts, they are still climbed best first
    climb = lo.SubspaceClimb(A, V, lps_per_key=1)
    order, plain = [], climb.climb
    climb.climb = lambda B, *a, **kw: order.append(bool(abs(B[0]).max() > 0)) or plain(B, *a, **kw)
    cert = climb.best(0.5, 2, 2, screened=lambda k: [("bad", kernel), ("good", good)],
                      screened_climbs=2, screen_keys=6)
    assert cert.method == "subspace/good+climb" and order == [False, True]  # V's, then good's
    seen = []
    cert = lo.SubspaceClimb(A, V, lps_per_key=1).best(
        0.5, 2, 2, starts=lambda k: [("plain", good)],
        screened=lambda k: seen.append(k) or [("other", good)])
    assert cert.method == "subspace/plain+climb" and seen == []
    for kwargs, needle in (({"screened": [("g", good)]}, "screened must be"),
                           ({"screened_climbs": -1}, "^screened_climbs: expected an integer >= 0"),
                           ({"screened_climbs": True}, "^screened_climbs: expected an integer >= 0"),
                           ({"screen_keys": 0}, "^screen_keys: expected an integer >= 1"),
                           ({"screened": lambda k: [("svd", good)]}, r"screened\(2\) must"),
                           ({"screened": lambda k: 3}, r"screened\(2\) must give an"),
                           ({"screened": lambda k: [("huge", good * 1e300)]},
                            "screened start 'huge' must have entries of magnitude"),
                           ({"screened": lambda k: [("wide", np.eye(6))]},
                            "screened start 'wide' at dimension 2")):
        with pytest.raises(InvalidArgumentError, match=needle) as err:
            lo.SubspaceClimb(A, V, lps_per_key=1).best(0.5, 2, 2, **kwargs)
        assert "\n" not in str(err.value)  # one line, even with an array in the item


def test_climb_bad_starts_are_named():
    """What ``starts(k)`` gives must be (label, finite (N, k) array) pairs; anything else is
    an error naming it, not a numpy traceback. A rank-deficient start is only a poor start."""
    from softrank.errors import InvalidArgumentError

    A, kernel, V = _kernel_start_case()
    climb = lo.SubspaceClimb(A, V, lps_per_key=1)
    good = np.eye(6)[:, :2]
    for junk, needle in ((["x"], "pairs"), ([("x", None)], "start 'x'"),
                         ([(1, good)], "pairs"), ([("a", good, 1)], "pairs"),
                         ([("svd", good)], "pairs"), ([("a/b", good)], "pairs"),
                         ([("", good)], "pairs"), (None, "iterable"), (5, "iterable"),
                         ([("cx", good * 1j)], "real"), ([("s", good.astype(str))], "real"),
                         ([("nan", np.full((6, 2), np.nan))], "start 'nan'")):
        with pytest.raises(InvalidArgumentError, match=needle):
            climb.best(0.5, 2, 2, starts=lambda k, junk=junk: junk)
    with pytest.raises(InvalidArgumentError, match="starts must be"):
        climb.best(0.5, 2, 2, starts=[("good", good)])
    with pytest.raises(InvalidArgumentError, match="^lo: expected an integer"):
        climb.best(0.5, True, 2)
    flat = np.column_stack([np.eye(6)[:, 0], np.eye(6)[:, 0]])
    cert = climb.best(0.5, 2, 2, starts=lambda k: iter([("flat", flat)]))
    # the climb orthonormalises the start (QR completes its rank): whatever it certifies is
    # an ordinary certificate for the checker
    assert cert is None or (cert.method == "subspace/flat+climb" and check(A, cert).ok)


def test_climb_stop_is_asked_before_each_dimension():
    """On I_10 the climb certifies every dimension from 2 to 10 (the test above). A stop that
    answers True from its fourth question on ends it after dimensions 2, 3 and 4, with the
    certificate of 4; one that answers True at once gives nothing; a stop that is not
    callable is named."""
    from softrank.errors import InvalidArgumentError

    eye = np.eye(10)
    asked = [0]

    def stop():
        asked[0] += 1
        return asked[0] >= 4

    cert = lo.SubspaceClimb(eye, eye).best(0.25, 2, 10, stop=stop)
    assert cert is not None and cert.rank == 4 and asked[0] == 4 and check(eye, cert).ok
    assert lo.SubspaceClimb(eye, eye).best(0.25, 2, 10, stop=lambda: True) is None
    assert lo.SubspaceClimb(eye, eye).best(0.25, 2, 10, stop=lambda: False).rank == 10
    with pytest.raises(InvalidArgumentError, match="^stop must be a callable or None"):
        lo.SubspaceClimb(eye, eye).best(0.25, 2, 10, stop=1.0)


def test_subspace_search_and_its_local_search_ask_stop():
    """On I_10 every dimension certifies: the search from 2 answers 10, and with a stop
    that answers True after its first probe only that probe, 2; the local search ends before its
    first candidate with nothing grown. So a late subspace test stops at a time limit."""
    from softrank.certifiers.lower.basic import largest_certified

    eye = np.eye(10)
    search = lo.SubspaceSearch(eye, eye, "svd")
    assert search.best(0.25, 2, 10).rank == 10
    # of the certificates the search found (2, 3, 5, 9, 10) only the last stays cached
    assert sorted(k for (k, e), c in search._cache.items() if c is not None) == [10]
    # a stop that answers True once a probe has certified: only the first probe, 2
    fresh = lo.SubspaceSearch(eye, eye, "svd")
    first = fresh.best(0.25, 2, 10, stop=lambda: any(c is not None for c in fresh._cache.values()))
    assert first is not None and first.rank == 2 and check(eye, first).ok
    assert search.extend(0.25, first, stop=lambda: True) is None
    assert search.extend(0.25, first).rank > 2
    asked = []
    assert largest_certified(lambda k: k, 1, 100, stop=lambda: asked.append(1) or False) == 100
    assert len(asked) == 7  # one question per probe after the first: 2, 4, ..., 64, 100
    # holding up to 37 in [1, 100]: steps up from 1 (2, 4, ..., 64 fails), then bisection
    # of [32, 63] (48 and 40 fail, 36 holds, 38 fails, 37 holds)
    probes = []
    assert largest_certified(lambda k: probes.append(k) or (k if k <= 37 else None), 1,
                             100) == 37
    assert probes == [1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37]
    # not integers: refused in one line naming the argument (a lo of 1.5 looped for good)
    from softrank.errors import InvalidArgumentError

    for lo_, hi_, name in ((1.5, 7, "lo"), (1, 7.5, "hi"), (True, 7, "lo")):
        with pytest.raises(InvalidArgumentError, match=name):
            largest_certified(lambda k: k, lo_, hi_)
    with pytest.raises(InvalidArgumentError, match="lo"):
        search.best(0.25, -2, 3)
    probes.clear()  # a lo that fails: nothing else probed
    assert largest_certified(lambda k: probes.append(k) or None, 5, 100) is None
    assert probes == [5]

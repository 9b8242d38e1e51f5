"""A bracket's time limit inside the searches: least_feasible's ``stop``, Context.deadline,
and the searches that probe rank after rank keeping what they proved past it."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from softrank.certifiers.interface import Context
from softrank.certifiers.upper import least_feasible


@given(lo=st.integers(1, 30), span=st.integers(0, 40), t=st.integers(1, 75),
       after=st.integers(1, 12), guess=st.none() | st.integers(-5, 80))
def test_a_stopped_search_answers_a_rank_it_showed_feasible(lo, span, t, after, guess):
    # feasible from t on; stop answers True from its `after`-th question on: the answer is
    # None or a probed feasible rank (so never below t), and the least one probed; a stop
    # that never answers True changes nothing
    hi = lo + span
    probed, asked = [], [0]

    def feasible(k):
        probed.append(k)
        return k >= t

    def stop():
        asked[0] += 1
        return asked[0] >= after

    g = None if guess is None else (lambda: guess)
    got = least_feasible(feasible, lo, hi, guess=g, stop=stop)
    shown = [k for k in probed if k >= t]
    assert got == (min(shown) if shown else None)
    assert len(probed) <= after  # the first probe, then one per question answered False
    probed.clear()
    assert least_feasible(feasible, lo, hi, guess=g, stop=lambda: False) == \
        least_feasible(feasible, lo, hi, guess=g)


def test_context_deadline():
    ctx = Context(np.eye(3))
    assert ctx.deadline is None and not ctx.past_deadline()
    ctx.deadline = time.perf_counter() + 60
    assert not ctx.past_deadline()
    ctx.deadline = time.perf_counter() - 1
    assert ctx.past_deadline()


@pytest.mark.parametrize("name", ["l1-refit", "alternating-l1", "trust-region"])
def test_searches_past_the_deadline_keep_the_rank_they_reached_first(name):
    # past the deadline from the start, a search makes its first probe (the top of its
    # window: it has no prediction yet) and stops there; its witness passes the checker.
    # The alternating l1 asks the stop inside a probe too, before each IRLS iteration, and
    # so does the trust-region polish of its start: the first probe is cut at once and
    # they answer nothing
    from softrank.certifiers.registry import builtin
    from softrank.checker import check
    from softrank.generators.synthetic import gaussian_head

    op = gaussian_head(40, 40, 8, 2.0, seed=3)
    con = builtin(name, "upper")
    free = Context(op.A)
    free.lower, free.upper = 1, 30
    w_free = con.witness(op, 0.25, free)
    late = Context(op.A)
    late.lower, late.upper = 1, 30
    late.deadline = time.perf_counter() - 1.0
    w_late = con.witness(op, 0.25, late)
    if name in ("alternating-l1", "trust-region"):
        assert w_free is not None and w_late is None
        return
    assert w_free is not None and w_late is not None
    assert w_free.rank < w_late.rank <= 29
    assert check(op.A, w_late).ok


def test_a_bracket_whose_time_limit_ends_inside_a_search_is_cut_short():
    # a third-party construction that works until the context's deadline: it sees the
    # bracket's time limit, and its record says the limit ran out while it ran; softrank's
    # own bracket was complete, so the tolerance is not cut short. A built-in search that
    # runs past the limit marks it cut short, with the same message
    from softrank.certifiers.bracket import bracket
    from softrank.generators.synthetic import gaussian_head

    class UntilTheDeadline:
        name = "until-the-deadline"

        def witness(self, operator, eps, context=None):
            while not context.past_deadline():
                time.sleep(0.01)
            return None

    op = gaussian_head(24, 24, 8, 2.0, seed=0)
    (b,) = bracket(op, 0.25, time_limit=4.0, constructions=[UntilTheDeadline()])
    rec = [r for r in b.diagnostics.methods if r.name == "until-the-deadline"]
    assert rec and rec[0].status == "declined" and "time limit ran out" in rec[0].message
    assert not b.cut_short and b.lower <= b.upper
    (b,) = bracket(gaussian_head(48, 48, 16, 2.0, seed=0), 0.25, time_limit=1e-6)
    assert b.cut_short
    # trivial and identity start after the limit (they always run): said so, not that the
    # limit ran out while they ran
    for name in ("trivial", "identity"):
        assert b.diagnostics.record(name).message == "run after the time limit (it always runs)"


def test_an_l1_refit_rank_cut_between_two_lps_is_left_undecided():
    # stop answering True before the first LP: no LP runs, the rank is not shown (False)
    # and nothing is recorded against it; asked again without stop, it gets the answer of
    # a fresh fit
    from softrank.certifiers.upper import L1Refit
    from softrank.generators.synthetic import gaussian_head

    A = gaussian_head(40, 40, 8, 2.0, seed=3).A
    Vt = np.linalg.svd(A, full_matrices=False)[2]

    def decided_by_lps(k):  # a fresh fit solves rows the screening left above the target
        fit = L1Refit(A, Vt)
        return fit.feasible(k, 0.1), (~np.isnan(fit._cache[k]["err"])).any()

    k = next(k for k in range(1, 40) if decided_by_lps(k)[1])
    fit = L1Refit(A, Vt)
    st = fit._state(k)
    assert fit.feasible(k, 0.1, stop=lambda: True) is False
    assert np.isnan(st["err"]).all() and not st["failed"] and not st["complete"]
    assert fit._hardest is None
    assert fit.feasible(k, 0.1) is decided_by_lps(k)[0]


def test_the_l1_refit_screening_stops_at_the_deadline_and_leaves_its_rows_unrefined():
    # the reweighting steps ask stop before each step: never True -> the same candidates as
    # without it; True at once -> the start's; True midway -> the rank is undecided and its
    # rows are left for a later call to refine
    from softrank.certifiers.upper import L1Refit
    from softrank.certifiers.upper.refit import l1_candidates
    from softrank.generators.synthetic import gaussian_head

    A = gaussian_head(40, 40, 8, 2.0, seed=3).A
    Vt = np.linalg.svd(A, full_matrices=False)[2]
    W = Vt[:6]
    U0, e0 = l1_candidates(A, W, iters=0)
    U1, e1 = l1_candidates(A, W, U0=U0, iters=8)
    U2, e2 = l1_candidates(A, W, U0=U0, iters=8, stop=lambda: False)
    assert np.array_equal(U1, U2) and np.array_equal(e1, e2) and (e1 < e0).any()
    U3, e3 = l1_candidates(A, W, U0=U0, iters=8, stop=lambda: True)
    assert np.array_equal(U3, U0) and np.array_equal(e3, e0)

    asked = []

    def after_two():  # True from the third question on
        asked.append(1)
        return len(asked) > 2

    k = 6
    fit = L1Refit(A, Vt)
    assert fit.feasible(k, 0.05, stop=after_two) is False
    st = fit._state(k)
    assert len(asked) >= 3  # the screening ran two steps, then stopped
    assert not st["refined"].any() and np.isnan(st["err"]).all() and not st["complete"]
    assert fit.feasible(k, 0.05) is L1Refit(A, Vt).feasible(k, 0.05)


def test_an_alternating_rank_whose_iterations_the_stop_cut_is_left_undecided():
    # stop answers True from its fourth question on: the IRLS at rank k ends there, the
    # rank is not shown (False) and no basis is cached for it; asked again without stop,
    # it gets the answer and the basis of a fresh search
    from softrank.certifiers.upper import AlternatingL1
    from softrank.generators.synthetic import gaussian_head

    A = gaussian_head(48, 48, 8, 2.0, seed=1).A
    svd = np.linalg.svd(A, full_matrices=False)
    k = 30
    fresh = AlternatingL1(A, svd, iters=10)
    want = fresh.feasible(k, 0.25)
    asked = []

    def stop():
        asked.append(1)
        return len(asked) > 3

    alt = AlternatingL1(A, svd, iters=10)
    assert alt.irls_basis(k, stop=lambda: True) is None
    assert alt.feasible(k, 0.25, stop=stop) is False
    assert len(asked) == 4 and k not in alt._fits
    assert alt.feasible(k, 0.25) is want
    np.testing.assert_array_equal(alt._fits[k].Vt, fresh._fits[k].Vt)


def _fixed(seconds):
    """A Deadline whose limit is always ``seconds`` away (no clock: what it foresees does
    not depend on the machine)."""
    from softrank.certifiers.upper import Deadline

    class Fixed(Deadline):
        __slots__ = ("asked",)

        def __call__(self):
            self.asked += 1
            return super().__call__()

        def left(self):
            return seconds

    d = Fixed(None)
    d.asked = 0
    return d


def test_a_deadline_foresees_work_that_would_pass_it():
    from softrank.certifiers.upper import Deadline

    free = Deadline(None)
    assert not free.foresee(1e12) and not free() and not free.foreseen
    d = Deadline(time.perf_counter() + 600)
    assert not d.foresee(1.0) and not d()  # 1 s of work ends well before the limit
    assert d.foresee(3600.0) and d.foreseen and d()  # an hour would pass it: reached for good
    assert d.foresee(0.0) and d()


@pytest.mark.parametrize("at", [float("nan"), float("inf"), "soon", 1j, [1.0]])
def test_a_deadline_is_a_clock_reading_or_none(at):
    from softrank.certifiers.upper import Deadline
    from softrank.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="at"):
        Deadline(at)
    assert Deadline(None).at is None and Deadline(np.float64(2.5)).at == 2.5


def test_alternating_iterations_that_cannot_end_in_time_stop_after_the_first():
    # with no time left, the 39 iterations after the first would end past the limit at any
    # pace: the run stops before the second (two questions), with no basis, and the stop
    # is reached from then on; with all the time in the world it is the run without a stop,
    # bit for bit
    from softrank.certifiers.upper import AlternatingL1, TrustRegionPolish
    from softrank.generators.synthetic import gaussian_head

    A = gaussian_head(48, 48, 8, 2.0, seed=1).A
    svd = np.linalg.svd(A, full_matrices=False)
    alt = AlternatingL1(A, svd, iters=40)
    none_left = _fixed(0.0)
    assert alt.irls_basis(30, stop=none_left) is None and none_left.asked == 2
    assert none_left.foreseen and none_left()
    plenty = _fixed(np.inf)
    np.testing.assert_array_equal(alt.irls_basis(30, stop=plenty), alt.irls_basis(30))
    assert plenty.asked == 40 and not plenty.foreseen
    # the trust-region polish starts from these iterations: nothing to polish, nothing cached
    tr = TrustRegionPolish(A, AlternatingL1(A, svd, iters=40))
    assert tr.polish(30, 0.2, stop=_fixed(0.0)) is None and not tr._done


def test_a_restart_that_knows_the_pace_does_not_start_when_it_cannot_end_in_time():
    # a run writes its seconds per iteration and rank into the shared pace; a restart on
    # the same pace with no time left stops before its first iteration (one question), one
    # with a pace of its own only after it (two), and with all the time in the world the
    # shared pace changes nothing
    from softrank.certifiers.upper import AlternatingL1
    from softrank.generators.synthetic import gaussian_head

    A = gaussian_head(48, 48, 8, 2.0, seed=1).A
    svd = np.linalg.svd(A, full_matrices=False)
    pace = {}
    AlternatingL1(A, svd, iters=5, pace=pace).irls_basis(30)
    assert pace["rank_seconds"] > 0
    smooth = AlternatingL1(A, svd, iters=40, delta=1e-3, pace=pace)
    none_left = _fixed(0.0)
    assert smooth.irls_basis(30, stop=none_left) is None and none_left.asked == 1
    assert none_left.foreseen and none_left()
    alone = AlternatingL1(A, svd, iters=40, delta=1e-3)
    none_left = _fixed(0.0)
    assert alone.irls_basis(30, stop=none_left) is None and none_left.asked == 2
    np.testing.assert_array_equal(smooth.irls_basis(30, stop=_fixed(np.inf)),
                                  alone.irls_basis(30))


def test_a_rank_search_ends_at_its_first_probe_that_cannot_end_in_time():
    # a probe whose iterations stopped before the limit ends the search like one the limit
    # cut: one IRLS run, no rank, nothing cached; with time enough, the search without stop
    from softrank.certifiers.upper import AlternatingL1
    from softrank.generators.synthetic import gaussian_head

    A = gaussian_head(48, 48, 8, 2.0, seed=1).A
    svd = np.linalg.svd(A, full_matrices=False)
    alt = AlternatingL1(A, svd, iters=10)
    runs = []
    irls = alt.irls_basis
    alt.irls_basis = lambda k, stop=None: runs.append(k) or irls(k, stop=stop)
    assert alt.least_feasible_rank(0.25, 1, 47, stop=_fixed(0.0)) is None
    assert runs == [47] and not alt._fits
    want = AlternatingL1(A, svd, iters=10).least_feasible_rank(0.25, 1, 47)
    assert want is not None
    assert alt.least_feasible_rank(0.25, 1, 47, stop=_fixed(np.inf)) == want


def test_a_search_that_foresees_the_limit_is_recorded_as_cut_by_it(monkeypatch):
    # the alternating l1's iterations foresee the limit (here: told that they would take
    # a day): the search stops long before the limit, and the bracket records it as cut by
    # the limit, cut short; the later methods still run
    from softrank.certifiers.bracket import bracket
    from softrank.certifiers.upper import AlternatingL1
    from softrank.generators.synthetic import gaussian_head

    def a_day(self, k, stop=None):
        assert stop.foresee(86400.0)
        return None

    monkeypatch.setattr(AlternatingL1, "irls_basis", a_day)
    t = time.perf_counter()
    (b,) = bracket(gaussian_head(48, 48, 16, 2.0, seed=0), 0.25, time_limit=600)
    assert time.perf_counter() - t < 300
    rec = b.diagnostics.record("alternating-l1")
    assert rec.status == "declined" and "would pass" in rec.message and b.cut_short
    assert b.diagnostics.record("nystrom").status != "skipped"


def test_the_causal_alternating_l1_stops_at_the_limit():
    # the causal search asks the limit too: with none left it stops after one iteration,
    # nothing cached, and its rank search ends at that probe; in a bracket whose limit its
    # iterations foresee, the record says so and the bracket is cut short
    from softrank.certifiers import causal
    from softrank.generators.synthetic import gaussian_head
    from softrank.operators import causal_mask

    op = gaussian_head(40, 40, 8, 2.0, seed=2, causal=True)
    keep = causal_mask(40)
    search = causal.CausalSearch(op.A, keep, np.zeros_like(keep))
    none_left = _fixed(0.0)
    assert search.irls(20, stop=none_left) is None and none_left.asked == 2
    assert search.polish(20, 0.2, stop=_fixed(0.0)) is None and 20 not in search._irls
    # rank 39's iterations are cached (run without a limit) and hold: the search probes
    # 39, then the midpoint 20, whose iterations foresee the limit; it ends there with 39
    assert search.irls(39) is not None
    probes, stop = [], _fixed(0.0)
    got = search.least(lambda k: probes.append(k) or search.polish(k, 0.2, stop), 0.2, 1, 39,
                       stop=stop)
    assert got is not None and got[0] == 39 and probes == [39, 20] and stop.foreseen
    assert search.polish(20, 0.2) is not None  # without a limit, as before

    class Day(causal.Deadline):
        def left(self):
            return 1.0  # the iterations left take more than a second: never, at this size

        def foresee(self, seconds):
            return super().foresee(seconds + 86400.0)

    import unittest.mock as mock

    with mock.patch.object(causal, "Deadline", Day):
        (b,) = causal.causal_bracket(op, 0.25, time_limit=600)
    rec = b.diagnostics.record("causal-alternating-l1")
    assert rec is not None and "would pass" in rec.message and b.cut_short


def test_the_causal_alternating_l1_keeps_its_pace_between_ranks():
    # after a rank has run, a later rank with no time left stops before its first iteration
    # (one question, where a fresh search asks twice); with time enough the pace changes
    # nothing
    from softrank.certifiers import causal
    from softrank.generators.synthetic import gaussian_head
    from softrank.operators import causal_mask

    op = gaussian_head(40, 40, 8, 2.0, seed=2, causal=True)
    keep = causal_mask(40)
    search = causal.CausalSearch(op.A, keep, np.zeros_like(keep))
    assert search.irls(30) is not None
    none_left = _fixed(0.0)
    assert search.irls(20, stop=none_left) is None and none_left.asked == 1
    assert none_left.foreseen and 20 not in search._irls
    fresh = causal.CausalSearch(op.A, keep, np.zeros_like(keep))
    none_left = _fixed(0.0)
    assert fresh.irls(20, stop=none_left) is None and none_left.asked == 2
    for a, b in zip(search.irls(20, stop=_fixed(np.inf)),
                    causal.CausalSearch(op.A, keep, np.zeros_like(keep)).irls(20)):
        np.testing.assert_array_equal(a, b)


def test_the_subspace_screening_stops_at_the_limit():
    # the screening's reweighting steps ask stop: stopped at once, the candidates are the
    # least-norm ones (the steps of iters=0); a certificate whose screening was stopped is
    # None and not cached, and asked again without stop it is a fresh search's
    from softrank.certifiers.lower import SubspaceSearch, basis_pursuit_candidates
    from softrank.generators.synthetic import gaussian_head

    rng = np.random.default_rng(0)
    G, B = rng.standard_normal((4, 12)), rng.standard_normal((5, 4))
    w = rng.uniform(0.5, 2.0, 12)

    def score(Z, idx):
        return (w * np.abs(Z)).sum(axis=1)

    asked = []
    Z, v = basis_pursuit_candidates(G, w, B, score, 0.0, stop=lambda: asked.append(1) or True)
    Z0, v0 = basis_pursuit_candidates(G, w, B, score, 0.0, iters=0)
    assert len(asked) == 1
    np.testing.assert_array_equal(Z, Z0)
    np.testing.assert_array_equal(v, v0)
    assert (basis_pursuit_candidates(G, w, B, score, 0.0)[1] <= v0).all()

    A = gaussian_head(40, 40, 8, 2.0, seed=3).A
    V = np.linalg.svd(A)[2].T
    k = 6
    calls = []

    def second():  # True from the second question on: the first key's LP runs, no more
        calls.append(1)
        return len(calls) > 1

    sub = SubspaceSearch(A, V, "svd")
    assert sub.certificate(k, 0.25, stop=second) is None and (k, 0.25) not in sub._cache
    assert len(calls) == 3  # before the first key's LP, the first screening step, a key's LP
    fresh = SubspaceSearch(A, V, "svd").certificate(k, 0.25)
    got = sub.certificate(k, 0.25)
    assert (got is None) == (fresh is None)
    assert got is None or got.rank == fresh.rank


def test_the_screening_asks_the_limit_between_its_blocks_of_keys(monkeypatch):
    # one right-hand side per block: with a stop that answers True at its third question
    # (before the first step, then between blocks 1 and 2, 2 and 3), the first reweighting
    # step is cut after two blocks and the candidates are the least-norm ones; with a stop
    # that never answers True the blocks give the steps of one block of every key
    import softrank.certifiers.lower.subspace as sub_mod

    rng = np.random.default_rng(1)
    G, B = rng.standard_normal((4, 12)), rng.standard_normal((5, 4))
    w = rng.uniform(0.5, 2.0, 12)

    def score(Z, idx):
        return (w * np.abs(Z)).sum(axis=1)

    whole = sub_mod.basis_pursuit_candidates(G, w, B, score, 0.0)
    least_norm = sub_mod.basis_pursuit_candidates(G, w, B, score, 0.0, iters=0)
    monkeypatch.setattr(sub_mod, "SCREENING_BLOCK_WORK", 12 * 4 * 4)  # n k^2: one row
    solved = []
    real = sub_mod.weighted_solves
    monkeypatch.setattr(sub_mod, "weighted_solves",
                        lambda X, wt, rhs: solved.append(len(rhs)) or real(X, wt, rhs))
    asked = []
    Z, v = sub_mod.basis_pursuit_candidates(G, w, B, score, 0.0,
                                            stop=lambda: asked.append(1) or len(asked) >= 3)
    assert len(asked) == 3 and solved == [1, 1]
    np.testing.assert_array_equal(v, least_norm[1])
    np.testing.assert_array_equal(Z, least_norm[0])
    solved.clear()
    Zb, vb = sub_mod.basis_pursuit_candidates(G, w, B, score, 0.0, stop=lambda: False)
    assert set(solved) == {1}
    np.testing.assert_allclose(vb, whole[1], rtol=1e-9)
    np.testing.assert_allclose(Zb, whole[0], rtol=1e-9, atol=1e-12)


class _Limit:
    """A stop with ``left()``: True from its ``after``-th question on."""

    def __init__(self, seconds, after):
        self.seconds, self.after, self.asked = seconds, after, 0

    def __call__(self):
        self.asked += 1
        return self.asked >= self.after

    def left(self):
        return self.seconds


@pytest.mark.parametrize("seconds, expected", [(5.0, 5.0), (500.0, 60.0), (None, 60.0)])
def test_a_key_lp_gets_the_seconds_left_and_one_cut_there_decides_nothing(
        monkeypatch, seconds, expected):
    # each key LP gets at most the stop's seconds left (60 s at most, as without a limit);
    # an LP without an answer while the limit is reached leaves the subspace undecided:
    # None, uncached, the key order as it was (a key whose LP failed would move to the front)
    import softrank.certifiers.lower.subspace as sub_mod
    from softrank.generators.synthetic import gaussian_head

    limits = []

    class Cut:
        def __init__(self, G, weights):
            pass

        def solve(self, b, time_limit=60.0):
            limits.append(time_limit)
            return None

    monkeypatch.setattr(sub_mod, "BasisPursuit", Cut)
    A = gaussian_head(40, 40, 8, 2.0, seed=3).A
    V = np.linalg.svd(A)[2].T
    search = sub_mod.SubspaceSearch(A, V, "svd", key_order=[3, 1, 2, 0] + list(range(4, 40)))
    order = list(search.key_order)
    if seconds is None:
        stop = lambda: len(limits) > 0  # noqa: E731
    else:
        stop = _Limit(seconds, after=2)  # False before the first LP, True after it
    assert search.certificate(6, 0.25, stop=stop) is None
    assert limits == [expected] and (6, 0.25) not in search._cache
    assert search.key_order == order
    # without a stop, the same failed LP decides: cached None, its key first
    search2 = sub_mod.SubspaceSearch(A, V, "svd", key_order=[3, 1, 2, 0] + list(range(4, 40)))
    assert search2.certificate(6, 0.25) is None and search2._cache[(6, 0.25)] is None


def test_basis_pursuit_refuses_a_time_limit_that_is_not_positive():
    from softrank.certifiers.lp import BasisPursuit
    from softrank.errors import InvalidArgumentError

    bp = BasisPursuit(np.eye(2))
    np.testing.assert_allclose(bp.solve(np.array([1.0, -2.0]), time_limit=5.0), [1.0, -2.0])
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(InvalidArgumentError, match="time_limit"):
            bp.solve(np.ones(2), time_limit=bad)


def test_the_subspace_tests_probe_no_rank_above_the_upper_end(monkeypatch):
    # on I_10 at eps 0.25 every dimension certifies; with the best witness so far at 4
    # (Context.upper) the search probes ranks 2 to 4 only (a lower end above the upper end
    # cannot exist), where without it it goes to 10
    import softrank.certifiers.lower.subspace as sub_mod
    from softrank.certifiers.registry import LOWER_TESTS
    from softrank.operators import Operator

    probed = []
    real = sub_mod.SubspaceSearch.certificate

    def spy(self, k, eps, stop=None):
        if self.name == "svd":
            probed.append(k)
        return real(self, k, eps, stop)

    monkeypatch.setattr(sub_mod.SubspaceSearch, "certificate", spy)
    op = Operator(A=np.eye(10))
    ctx = Context(op.A)
    ctx.lower, ctx.upper = 1, 4
    LOWER_TESTS["subspace"].certify(op, 0.25, ctx)
    assert probed and max(probed) == 4
    probed.clear()
    ctx = Context(op.A)
    ctx.lower = 1
    assert LOWER_TESTS["subspace"].certify(op, 0.25, ctx).rank == 10
    assert max(probed) == 10


def test_the_largest_row_error_stops_at_the_deadline():
    # the alternating l1's rank prediction asks an l1 refit for its exact largest row error,
    # LP after LP: stopped, it answers None and records no maximum; asked again without
    # stop, the maximum is a fresh fit's
    from softrank.certifiers.upper import AlternatingL1, L1Refit
    from softrank.errors import InvalidArgumentError
    from softrank.generators.synthetic import gaussian_head

    A = gaussian_head(40, 40, 8, 2.0, seed=3).A
    Vt = np.linalg.svd(A, full_matrices=False)[2]
    k = next(k for k in range(1, 40) if L1Refit(A, Vt).feasible(k, 0.1))
    fit = L1Refit(A, Vt)
    assert fit.feasible(k, 0.1)
    assert fit.max_error(k, stop=lambda: True) is None and fit._cache[k]["max"] is None
    fresh = L1Refit(A, Vt)
    fresh.feasible(k, 0.1)
    assert fit.max_error(k) == fresh.max_error(k)
    with pytest.raises(InvalidArgumentError, match="stop"):
        AlternatingL1(A, np.linalg.svd(A, full_matrices=False)).irls_basis(3, stop=1)


@pytest.mark.parametrize("effort", ["full", "fast"])
def test_the_last_share_of_the_time_limit_is_kept_for_the_late_searches(effort):
    # each method records the deadline its context carries when it runs: the lower tests
    # that run first see EARLY_LOWER_SHARE of the limit (at either effort), the
    # constructions that are not late the limit less LATE_LOWER_SHARE of it (at full
    # effort), the late lower tests and constructions the whole limit; without a limit, none
    from softrank.certifiers.bracket import (EARLY_LOWER_SHARE, LATE_LOWER_SHARE, _bracket_one,
                                             _Options)
    from softrank.certifiers.interface import Traits, as_certifier
    from softrank.operators import Operator

    seen = {}

    class Probe:
        def __init__(self, name):
            self.name = name

        def certify(self, operator, eps, context=None):
            seen[self.name] = context.deadline

        def witness(self, operator, eps, context=None):
            seen[self.name] = context.deadline

    def made(name, late):
        return as_certifier(Probe(name), name=name, origin="builtin", traits=Traits(late=late))

    op = Operator(A=np.full((4, 4), 0.25))
    tests = [made("lower", False), made("late-lower", True)]
    cons = [made("upper", False), made("late-upper", True)]
    for limit in (None, 40.0):
        seen.clear()
        deadline = None if limit is None else time.perf_counter() + limit
        _bracket_one(Context(op.A), 0.25, opts=_Options(op, time_limit=limit, effort=effort),
                     lower_tests=tests, constructions=cons, deadline=deadline)
        if limit is None:  # at fast effort the late ones do not run
            names = ["lower", "upper"] + (["late-lower", "late-upper"] if effort == "full" else [])
            assert seen == dict.fromkeys(names)
            continue
        early = deadline - LATE_LOWER_SHARE * limit if effort == "full" else deadline
        assert seen["lower"] == deadline - (1 - EARLY_LOWER_SHARE) * limit
        assert seen["upper"] == early
        if effort == "full":
            assert seen["late-lower"] == deadline and seen["late-upper"] == deadline
        else:
            assert "late-lower" not in seen and "late-upper" not in seen


def test_an_l1_refit_lp_cut_by_the_time_limit_leaves_its_rank_undecided():
    # a stop whose limit has not passed when asked before an LP, with a microsecond left:
    # the LP gets that (HiGHS's time limit) and ends not optimal; the rank is then left
    # undecided (False, not given up), and asked again without a limit it gets the answer
    # of a fresh fit. Deadline.left() is what the searches pass
    from softrank.certifiers.upper import Deadline
    from softrank.certifiers.upper import L1Refit
    from softrank.generators.synthetic import gaussian_head

    A = gaussian_head(160, 160, 16, 2.0, seed=3).A
    Vt = np.linalg.svd(A, full_matrices=False)[2]

    class Nearly:
        def __init__(self):
            self.cut = False

        def __call__(self):
            return self.cut

        def left(self):
            self.cut = True
            return 1e-6

    def decided_by_lps(k):
        fit = L1Refit(A, Vt)
        return fit.feasible(k, 0.1), (~np.isnan(fit._cache[k]["err"])).any()

    k = next(k for k in range(20, 160, 10) if decided_by_lps(k)[1])
    fit = L1Refit(A, Vt)
    stop = Nearly()
    assert fit.feasible(k, 0.1, stop=stop) is False and stop.cut
    st = fit._cache[k]
    assert not st["failed"] and not st["complete"]
    assert fit.feasible(k, 0.1) is decided_by_lps(k)[0]
    # Deadline: never without a limit; past it, True with negative seconds left
    assert not Deadline(None)() and Deadline(None).left() == np.inf
    late = Deadline(time.perf_counter() - 1.0)
    assert late() and late.left() < 0
    soon = Deadline(time.perf_counter() + 60.0)
    assert not soon() and 0 < soon.left() <= 60.0


def test_in_the_share_only_late_tests_that_ask_the_limit_inside_run():
    # the constructions end past the share's start: a late lower test without the trait
    # ``asks_limit`` is skipped (its probes cannot be cut), one with it runs; the bracket
    # is cut short
    from softrank.certifiers.bracket import _bracket_one, _Options
    from softrank.certifiers.interface import Traits, as_certifier
    from softrank.operators import Operator

    ran = []

    class Slow:
        name = "slow-upper"

        def witness(self, operator, eps, context=None):
            while not context.past_deadline():
                time.sleep(0.01)

    class Probe:
        def __init__(self, name):
            self.name = name

        def certify(self, operator, eps, context=None):
            ran.append(self.name)

    def made(obj, late, asks=False):
        return as_certifier(obj, name=obj.name, origin="builtin",
                            traits=Traits(late=late, asks_limit=asks))

    op = Operator(A=np.full((4, 4), 0.25))
    limit = 2.0
    deadline = time.perf_counter() + limit
    diag_owner = _bracket_one(
        Context(op.A), 0.25, opts=_Options(op, time_limit=limit),
        lower_tests=[made(Probe("plain"), True), made(Probe("asks"), True, asks=True)],
        constructions=[made(Slow(), False)], deadline=deadline)
    assert ran == ["asks"]
    rec = diag_owner.diagnostics.record("plain")
    assert rec.status == "skipped" and "kept for searches that ask it inside" in rec.message
    assert diag_owner.cut_short

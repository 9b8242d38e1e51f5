"""The suites' real-size cases, gauge claims and the hybrid construction's plain option."""

import numpy as np
import pytest

from softrank.certifiers.bracket import bracket
from softrank.certifiers.interface import as_certifier
from softrank.certifiers.registry import builtin, builtin_certifiers
from softrank.checker import check
from softrank.errors import InvalidArgumentError
from softrank.generators.synthetic import gaussian_head, planted
from softrank.suites.sizes import parse_sizes, sized_cases, sized_operator


def test_parse_sizes():
    assert parse_sizes("32, 64,minilm:128") == [("synthetic", 32), ("synthetic", 64),
                                                 ("minilm", 128)]
    assert parse_sizes("none") == [] and parse_sizes("") == []
    assert parse_sizes("64,64") == [("synthetic", 64)]


@pytest.mark.parametrize("bad", ["4", "257", "minilm:8", "minilm:513", "qwen:64", "64x64", ":32", "\u00b2",
                                 "-32", "32,", "1e2"])
def test_parse_sizes_refuses(bad):
    with pytest.raises(InvalidArgumentError, match="--softrank-sizes") as e:
        parse_sizes(bad)
    assert repr(bad.split(",")[-1].strip()) in str(e.value) or bad.endswith(",")


def test_sized_cases_of_the_ci_profile():
    cases = sized_cases(parse_sizes("32,64,128,minilm:64,minilm:128"))
    # per synthetic size: a Gaussian head at 0.1 and 0.25 and a planted instance at 0.25;
    # per MiniLM width: two heads at 0.25
    assert len(cases) == 3 * 3 + 2 * 2
    ids = [c.id for c in cases]
    assert len(set(ids)) == len(ids)
    assert ids[:3] == ["gaussian-32-eps0.1", "gaussian-32-eps0.25", "planted-32-eps0.25"]
    assert ids[-1] == "minilm-w128-L5H11-eps0.25"
    op = sized_operator(cases[6])
    assert op.A.shape == (128, 128) and op.Q is not None
    assert np.array_equal(op.A, gaussian_head(128, 128, d=16, temperature=1.0, seed=128).A)
    pl = sized_operator(cases[8])
    assert pl.meta["planted_rank"] == 8 and pl.Q is None


def test_gauge_claims():
    own = builtin_certifiers("own")
    assert own and all(c.gauge_invariant for c in own)
    ref = {c.name: c.gauge_invariant for c in builtin_certifiers("reference")}
    assert ref == {"nystrom": True, "random-features": False, "sinks+random-features": False}
    assert {c.name for c in builtin_certifiers("all")} == {c.name for c in own} | set(ref)

    class NoClaim:
        def witness(self, operator, eps):
            return None

    class BadClaim(NoClaim):
        gauge_invariant = "yes"

    assert as_certifier(NoClaim()).gauge_invariant is False  # the documented default
    with pytest.raises(InvalidArgumentError, match="gauge_invariant: expected True or False"):
        as_certifier(BadClaim())
    with pytest.raises(InvalidArgumentError, match="which"):
        builtin_certifiers("mine")


def test_hybrid_alone_answers_without_heavy_keys():
    """A Gaussian head has no heavy key: alone, hybrid is the l1 refit itself (same rank, a
    checked witness); inside a bracket it declines there, as before (the l1-refit
    construction ran that fit first)."""
    op = gaussian_head(32, 32, d=16, temperature=1.0, seed=32)
    assert op.A.sum(axis=0).max() <= 2.0 * 32 / 32  # no key carries twice a uniform share
    w, v = builtin("hybrid").witness(op, 0.25), builtin("l1-refit").witness(op, 0.25)
    assert w is not None and w.rank == v.rank and check(op.A, w).ok
    rec = bracket(op, 0.25)[0].diagnostics.record("hybrid")
    assert rec.status == "declined"
    # with heavy keys (a planted instance with a sink column), the heavy options stay
    A = planted(24, 24, 3, 0.05, seed=0).A
    A = 0.5 * A + 0.5 * np.eye(24)[[0] * 24]  # every query puts half its mass on key 0
    from softrank.operators import Operator

    w = builtin("hybrid").witness(Operator(A=A), 0.25)
    assert w is not None and check(A, w).ok

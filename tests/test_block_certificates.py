"""Block certificates: ``r_eps(A) >= r_eps(A[rows][:, cols])`` (docs/theory/lower.md),
checked on the block in both arithmetics, and the block climb that makes them."""

from __future__ import annotations

import numpy as np
import pytest

from softrank.certifiers.interface import Context
from softrank.certifiers.registry import (BLOCK_MIN_ROWS, BLOCK_ROWS, CERTIFICATE_METHODS,
                                          LOWER_TESTS, SubspaceBlocksTest)
from softrank.checker import (BlockCertificate, CausalLowerCertificate, KeyGroupCertificate,
                              TrivialCertificate, check, load_certificate, save_certificate)
from softrank.errors import MalformedCertificate
from softrank.generators.synthetic import planted, planted_blocks
from softrank.operators import Operator


def _identity_head(n: int = 6) -> np.ndarray:
    return np.eye(n)


def _groups(keys) -> tuple:
    return tuple(np.array([k]) for k in keys)


def test_a_block_of_the_identity_certifies_its_own_size_by_hand():
    # A = I_6: the block rows {0, 1, 2} x keys {0, 1, 2} is I_3. Each witness query has mass
    # 1 on its own key and 0 on the other two: Varah's margin 1 > eps = 0.25, so the key
    # groups prove r_eps(I_3) >= 3, and the block lemma r_eps(I_6) >= 3.
    A = _identity_head()
    inner = KeyGroupCertificate(0.25, np.arange(3), _groups(range(3)))
    cert = BlockCertificate(0.25, np.arange(3), np.arange(3), inner)
    rep = check(A, cert)
    assert rep.ok and not rep.disagree and cert.rank == 3 and cert.kind == "block"
    assert "block 3x3" in rep.float64.detail and rep.interval.ok
    # the same block read with its rows and keys in another order: still I_3 up to a
    # permutation the witness queries follow
    perm = BlockCertificate(0.25, np.array([2, 0, 1]), np.array([2, 0, 1]), inner)
    assert check(A, perm).ok


def test_a_block_without_the_mass_is_rejected_in_both_arithmetics():
    # rows {0, 1, 2} x keys {3, 4, 5} of I_6 is the zero block: no witness query has mass
    # on its group, so the inner key groups fail and the head claim is refused
    A = _identity_head()
    inner = KeyGroupCertificate(0.25, np.arange(3), _groups(range(3)))
    rep = check(A, BlockCertificate(0.25, np.arange(3), np.arange(3, 6), inner))
    assert not rep.ok and not rep.disagree and not rep.interval.ok


@pytest.mark.parametrize("rows,cols,why", [
    (np.array([0, 0, 1]), np.arange(3), "rows must be distinct"),
    (np.arange(3), np.array([0, 1, 6]), "cols must be distinct key indices in [0, 6)"),
    (np.array([-1, 0, 1]), np.arange(3), "rows must be distinct"),
    (np.arange(0), np.arange(3), "empty block"),
])
def test_malformed_blocks_are_rejected_with_the_reason(rows, cols, why):
    inner = KeyGroupCertificate(0.25, np.arange(3), _groups(range(3)))
    rep = check(_identity_head(), BlockCertificate(0.25, rows, cols, inner))
    assert not rep.ok and why in rep.float64.detail


def test_the_inner_certificate_must_be_about_the_same_eps_and_the_block_shape():
    A = _identity_head()
    other = BlockCertificate(0.25, np.arange(3), np.arange(3), TrivialCertificate(0.5))
    assert not check(A, other).ok  # eps 0.5 inside, 0.25 claimed
    # a key group naming key 3 of a 3-key block is out of the block's range
    wide = KeyGroupCertificate(0.25, np.arange(3), _groups((0, 1, 3)))
    rep = check(A, BlockCertificate(0.25, np.arange(3), np.arange(3), wide))
    assert not rep.ok and "out of range [0, 3)" in rep.float64.detail


def test_blocks_do_not_nest_and_are_not_causal_inners():
    inner = BlockCertificate(0.25, np.arange(3), np.arange(3), TrivialCertificate(0.25))
    with pytest.raises(MalformedCertificate, match="inner"):
        BlockCertificate(0.25, np.arange(3), np.arange(3), inner)
    with pytest.raises(MalformedCertificate, match="inner"):
        CausalLowerCertificate(0.25, np.arange(3), np.arange(3), np.ones((6, 6), bool), inner)


def test_a_block_certificate_file_round_trips(tmp_path):
    A = _identity_head()
    inner = KeyGroupCertificate(0.25, np.arange(3), _groups(range(3)), "key-groups/hand")
    cert = BlockCertificate(0.25, np.array([3, 4, 5]), np.array([3, 4, 5]),
                            KeyGroupCertificate(0.25, np.arange(3), _groups(range(3)),
                                                "key-groups/hand"), "block(hand)")
    path = save_certificate(tmp_path / "b.npz", cert, A)
    back, A2, header = load_certificate(path)
    assert type(back) is BlockCertificate and back.rank == 3 and back.method == "block(hand)"
    assert header["inner"] == {"kind": "key-groups", "method": "key-groups/hand"}
    assert np.array_equal(back.rows, cert.rows) and check(A2, back).ok
    assert inner.rank == back.inner.rank
    # a block file without its inner header is malformed, not read as something else
    import json

    with np.load(path) as z:
        data = dict(z)
    h = json.loads(str(data["header"][()]))
    del h["inner"]
    data["header"] = np.array(json.dumps(h))
    np.savez(tmp_path / "bad.npz", **data)
    with pytest.raises(MalformedCertificate, match="inner belongs to the kinds"):
        load_certificate(tmp_path / "bad.npz")


def test_the_block_climb_declines_below_its_width_and_is_scheduled_last():
    assert list(LOWER_TESTS)[-1] == "subspace-blocks"
    small = planted(BLOCK_MIN_ROWS - 1, 64, 4, 0.05, seed=0)
    assert SubspaceBlocksTest().certify(small, 0.25) is None
    assert max(BLOCK_ROWS) * 2 <= BLOCK_MIN_ROWS  # every block is at most half the head


@pytest.mark.parametrize("make,k", [
    (lambda: planted(256, 64, 8, 0.05, seed=3), 8),
    (lambda: planted_blocks(256, 64, 12, 0.02, seed=1), 12),
])
def test_the_block_climb_never_passes_a_planted_rank(make, k):
    # planted: r_eps <= 8 for eps >= 0.05; planted blocks: r_eps = 12 for eps in [0.04, 0.96]
    import re

    op = make()
    cert = SubspaceBlocksTest().certify(op, 0.25)
    assert cert is not None and type(cert) is BlockCertificate
    assert 1 <= cert.rank <= k
    assert check(op.A, cert).ok
    assert cert.rows.size in BLOCK_ROWS and cert.cols.size == op.shape[1]
    assert re.fullmatch(CERTIFICATE_METHODS["subspace-blocks"], cert.method)


def test_in_a_bracket_the_block_climb_searches_above_the_lower_end():
    # a context whose ends leave nothing between them: the block climb has nothing to try
    op = planted_blocks(256, 64, 12, 0.02, seed=1)  # r_eps = 12 at eps 0.25
    ctx = Context(op.A)
    ctx.lower, ctx.upper = 12, 12
    assert SubspaceBlocksTest().certify(op, 0.25, ctx) is None
    ctx.lower, ctx.upper = 3, 13
    cert = SubspaceBlocksTest().certify(op, 0.25, ctx)
    assert cert is not None and check(op.A, cert).ok and 3 < cert.rank <= 12
    # the block and its context are kept for the next tolerance
    assert any(key.startswith("block-rows") for key in ctx._cache)


def test_a_third_party_lower_test_may_return_a_block_certificate():
    from softrank import bracket

    class Corner:
        name = "corner"

        def certify(self, operator, eps):
            n = operator.shape[0]
            return BlockCertificate(eps, np.arange(n // 2), np.arange(n // 2),
                                    KeyGroupCertificate(eps, np.arange(n // 2),
                                                        _groups(range(n // 2))))

    A = np.eye(8) * 0.9 + 0.1 / 8
    (br,) = bracket(Operator(A=A), 0.25, lower_tests=[Corner()])
    rec = [r for r in br.diagnostics.methods if r.name == "corner"][0]
    assert rec.status == "ok" and rec.rank == 4


def test_a_block_tries_ranks_up_to_half_its_rows_only():
    # lower end 70: the next rank, 71, is above 64 = 128 / 2, so no block is climbed (on a
    # 256-query head of random logits at lower end 93 the 128-row block spent minutes
    # failing at ranks 94-128); at lower end 40 only the 128-row block is tried
    op = planted(256, 64, 8, 0.05, seed=0)
    ctx = Context(op.A)
    ctx.lower, ctx.upper = 70, 200
    assert SubspaceBlocksTest().certify(op, 0.25, ctx) is None
    assert not any(key.startswith("block-rows") for key in ctx._cache)
    ctx.lower = 40
    SubspaceBlocksTest().certify(op, 0.25, ctx)
    assert [key for key in ctx._cache if key.startswith("block-rows")] == ["block-rows128"]
    assert ctx._cache["block-rows128"][2].upper == 64


def test_indices_altered_after_construction_are_rejected_not_raised():
    A = _identity_head()
    cert = BlockCertificate(0.25, np.arange(3), np.arange(3),
                            KeyGroupCertificate(0.25, np.arange(3), _groups(range(3))))
    for rows in (np.array([0.0, 1.0, 2.0]), np.arange(4).reshape(2, 2)):
        object.__setattr__(cert, "rows", rows)
        rep = check(A, cert)
        assert not rep.ok and "1-D arrays of integer indices" in rep.float64.detail
        assert not rep.interval.ok


def test_a_third_party_certificate_that_cannot_be_renamed_is_rejected():
    from softrank import bracket

    class Altered:
        name = "altered"

        def certify(self, operator, eps):
            c = BlockCertificate(eps, np.arange(2), np.arange(2), TrivialCertificate(eps))
            object.__setattr__(c, "inner", None)  # replace() re-validates: it raises
            return c

    (br,) = bracket(Operator(A=np.eye(8) * 0.9 + 0.1 / 8), 0.25, lower_tests=[Altered()])
    rec = [r for r in br.diagnostics.methods if r.name == "altered"][0]
    assert rec.status == "rejected" and "could not read it" in rec.message


def test_a_block_certificate_of_a_causal_block_becomes_a_causal_certificate():
    # the late searches of a causal bracket run on a block A[rows][:, cols] below the
    # diagonal; a block certificate of that block (rows 1, 2 of it, keys 0, 1) is about the
    # smaller block A[rows[[1, 2]]][:, cols[[0, 1]]], which lies inside keep as well
    from softrank.certifiers.causal import _unwrap
    from softrank.operators import causal_mask

    n = 8
    A = np.tril(np.eye(n) * 0.9 + 0.1 / n)
    A = A / A.sum(axis=1, keepdims=True)
    keep = causal_mask(n)
    rows, cols = np.arange(4, 8), np.arange(0, 5)  # inside the lower triangle
    # in the block, rows 1, 2 (queries 5, 6) and keys 0, 1 (keys 0, 1): entries 0.1/8 /
    # row sum each, no diagonal mass -- a trivial certificate needs only a row above eps
    inner = TrivialCertificate(0.01)
    blk = BlockCertificate(0.01, np.array([1, 2]), np.array([0, 1]), inner)
    assert check(A[np.ix_(rows, cols)], blk).ok
    r2, c2, inner2 = _unwrap(rows, cols, blk)
    assert list(r2) == [5, 6] and list(c2) == [0, 1] and inner2 is inner
    cert = CausalLowerCertificate(0.01, r2, c2, keep, inner2)
    assert check(A, cert).ok and cert.rank == 1
    # anything else passes through
    assert _unwrap(rows, cols, inner) == (rows, cols, inner)


def test_block_keys_by_hand():
    # a block of 4 rows (climbed at ranks up to 2: LPs of 3 (8 + c) entries for c keys)
    # whose key masses are 1, 6, 2, 0.5, 0.5 (total 10): every key fits a cap of 39 (c = 5);
    # under 30 two keys fit, but keeping 85 % (8.5) of the mass needs the three largest
    # (6 + 2 + 1 = 9); under 36 four fit, the tie of keys 3 and 4 going to the smaller index
    from softrank.certifiers.climbs import BLOCK_KEY_MASS, block_keys

    assert BLOCK_KEY_MASS == 0.85
    B = np.tile(np.array([1, 6, 2, 0.5, 0.5]) / 4, (4, 1))
    assert block_keys(B, 39).tolist() == [0, 1, 2, 3, 4]
    assert block_keys(B, 30).tolist() == [0, 1, 2]
    assert block_keys(B, 36).tolist() == [0, 1, 2, 3]
    assert block_keys(B, 1).tolist() == [0, 1, 2]  # no key fits: the mass decides


@pytest.mark.parametrize("B, cap, name", [
    (np.ones(4), 10, "B"), (np.ones((0, 3)), 10, "B"), (np.ones((2, 0)), 10, "B"),
    (np.array([[1.0, np.nan]]), 10, "B"), (np.array([[1.0, -0.5]]), 10, "B"),
    (np.array([["a", "b"]]), 10, "B"), (np.ones((2, 3)), 0, "max_entries"),
    (np.ones((2, 3)), 2.5, "max_entries"), (np.ones((2, 3)), True, "max_entries")])
def test_block_keys_refuses_what_is_not_a_block_or_a_cap(B, cap, name):
    from softrank.certifiers.climbs import block_keys
    from softrank.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=name):
        block_keys(B, cap)


def test_a_block_on_the_keys_of_its_mass_certifies_below_the_planted_rank():
    # a cap under which not every key of a 64-row block fits (33 (128 + 64) = 6,336 entries
    # at rank 32): the block keeps the keys of largest mass, at least 85 % of it, and its
    # certificate, of the block of those keys, passes the checker below the planted rank
    class SmallCap(SubspaceBlocksTest):
        max_entries = 33 * (128 + 40)

    op = planted(256, 64, 8, 0.05, seed=3)
    ctx = Context(op.A)
    ctx.lower, ctx.upper = 0, 64
    cert = SmallCap().certify(op, 0.25, ctx)
    assert cert is not None and 1 <= cert.rank <= 8 and check(op.A, cert).ok
    rows, keys, _ = ctx._cache[f"block-rows{cert.rows.size}"]
    assert 40 <= cert.cols.size < 64 and np.array_equal(cert.cols, keys)
    mass = op.A[rows].sum(axis=0)
    assert mass[keys].sum() >= 0.85 * mass.sum()
    assert mass[keys].min() >= np.delete(mass, keys).max()
    assert f"keys={keys.size})" in cert.method


def test_the_block_climb_stops_at_the_deadline():
    import time

    op = planted_blocks(256, 64, 12, 0.02, seed=1)
    ctx = Context(op.A)
    ctx.lower, ctx.upper = 3, 13
    ctx.deadline = time.perf_counter() - 1.0
    assert SubspaceBlocksTest().certify(op, 0.25, ctx) is None

"""Brackets of the causal rank (docs/theory/causal.md): hand-worked causal matrices, planted
causal instances, the certificates' checks and files, and the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from softrank.certifiers.causal import causal_blocks, causal_bracket
from softrank.checker import (CausalLowerCertificate, CausalUpperWitness, TrivialCertificate,
                              check, load_certificate, save_certificate)
from softrank.errors import InvalidArgumentError
from softrank.generators.synthetic import gaussian_head, planted_causal
from softrank.operators import Operator, causal_mask, rank_masks


def _uniform_causal(n: int) -> Operator:
    """Row ``i`` spreads evenly over keys ``0..i``: ``A = tril(u 1^T)`` with ``u_i = 1/(i+1)``."""
    M = causal_mask(n)
    return Operator(A=M / M.sum(axis=1, keepdims=True), mask=M)


def test_uniform_causal_attention_has_causal_rank_one():
    # tril(u 1^T) reproduces A exactly: r^c <= 1; the block A[t:, :t+1] has a row of l1 norm
    # (t+1)/(t+1) = 1 > eps: r^c >= 1. The plain r_eps of this full-rank triangle is larger.
    op = _uniform_causal(8)
    for br in causal_bracket(op, [0.1, 0.25, 0.5]):
        assert (br.lower, br.upper, br.verdict, br.rank) == (1, 1, "resolved", "causal")
        assert isinstance(br.lower_certificate, CausalLowerCertificate)
        assert isinstance(br.upper_witness, CausalUpperWitness)
    from softrank import bracket

    assert bracket(op, [0.1])[0].lower > 1


def test_window_rank_of_uniform_causal_attention_by_hand():
    # window:2 on 4 x 4: the band (last 2 keys) is copied; the kept entries are (2,0) = 1/3,
    # (3,0) = (3,1) = 1/4 -- rank 1 reproduces them (U = (0, 0, 1/3, 1/4), W = (1, 1, ., .)).
    # Rank 0 leaves row 2 with 1/3 and row 3 with 1/2: r = 1 for eps < 1/2, r = 0 above.
    op = _uniform_causal(4)
    lo, hi = causal_bracket(op, [0.25, 0.6], rank="window:2")
    assert (lo.lower, lo.upper) == (1, 1)
    assert (hi.lower, hi.upper, hi.lower_method, hi.lower_certificate) == (0, 0, "none", None)
    keep, exact = rank_masks((4, 4), "window:2")
    assert np.array_equal(hi.upper_witness.keep, keep)
    assert np.array_equal(hi.upper_witness.exact, exact)


@pytest.mark.parametrize("N,k,delta,seed", [(32, 2, 0.05, 0), (32, 4, 0.1, 1),
                                            (48, 3, 0.05, 2)])
@pytest.mark.parametrize("rank", ["causal", "window:6"])
def test_planted_causal_rank_is_never_exceeded_by_the_lower_end(N, k, delta, seed, rank):
    # A is within delta of (1 - delta) tril(U V) with rank(U V) = k: r^c_eps <= k for
    # eps >= delta, and the windowed rank is at most the causal one
    op = planted_causal(N, k, delta, seed=seed)
    for br in causal_bracket(op, [delta + 0.01, 0.25, 0.5], rank=rank, effort="fast"):
        assert br.bounded
        assert br.lower <= k, (br.eps, br.lower, br.lower_method)
        assert br.lower <= br.upper
        if br.lower_certificate is not None:
            assert check(op.A, br.lower_certificate).ok
        assert check(op.A, br.upper_witness).ok


def test_causal_rank_is_at_most_the_plain_one_with_plain_witnesses():
    from softrank import bracket

    op = gaussian_head(24, 24, 6, 2.0, seed=3, causal=True)
    plain = bracket(op, [0.25], effort="fast")[0]
    causal = causal_bracket(op, [0.25], effort="fast", witnesses=[plain.upper_witness])[0]
    assert causal.upper <= plain.upper
    assert causal.lower <= causal.upper


def test_window_rank_is_at_most_the_causal_rank():
    op = gaussian_head(32, 32, 6, 2.0, seed=5, causal=True)
    c = causal_bracket(op, [0.25], effort="fast")[0]
    w = causal_bracket(op, [0.25], rank="window:4", effort="fast",
                       witnesses=[])[0]
    # a causal witness is a window witness (only kept entries count, and fewer are kept)
    keep, exact = rank_masks(op.shape, "window:4")
    moved = CausalUpperWitness(0.25, c.upper_witness.U, c.upper_witness.W, keep, exact)
    assert check(op.A, moved).ok
    assert w.lower <= c.upper


def test_sliding_window_head_has_window_rank_zero():
    op = gaussian_head(20, 20, 4, 2.0, seed=1, causal=True, window=5)
    br = causal_bracket(op, [0.1], rank="window:5")[0]
    assert (br.lower, br.upper) == (0, 0)


def test_lower_certificates_survive_their_file(tmp_path):
    op = gaussian_head(24, 24, 6, 2.0, seed=2, causal=True)
    br = causal_bracket(op, [0.25], effort="fast")[0]
    save_certificate(tmp_path / "l.npz", br.lower_certificate, op.A)
    back, A, header = load_certificate(tmp_path / "l.npz")
    assert header["kind"] == "causal-lower" and header["inner"]["kind"] == back.inner.kind
    assert back.rank == br.lower and check(A, back).ok
    assert np.array_equal(back.rows, br.lower_certificate.rows)


def test_a_block_outside_the_kept_region_is_rejected():
    op = _uniform_causal(6)
    keep, _ = rank_masks(op.shape, "causal")
    ok = CausalLowerCertificate(0.1, np.arange(3, 6), np.arange(0, 4), keep,
                                TrivialCertificate(0.1))
    assert check(op.A, ok).ok
    over = CausalLowerCertificate(0.1, np.arange(3, 6), np.arange(0, 5), keep,
                                  TrivialCertificate(0.1))
    rep = check(op.A, over)
    assert not rep.ok and "outside keep" in rep.float64.detail
    other_eps = CausalLowerCertificate(0.1, np.arange(3, 6), np.arange(0, 4), keep,
                                       TrivialCertificate(0.2))
    assert not check(op.A, other_eps).ok


def test_blocks_lie_inside_keep():
    for rank in ("causal", "window:3"):
        keep, _ = rank_masks((16, 16), rank)
        blocks = causal_blocks(keep)
        assert blocks
        for rows, cols in blocks:
            assert keep[np.ix_(rows, cols)].all()


def test_a_bidirectional_head_is_refused():
    op = gaussian_head(8, 8, 4, seed=0)
    with pytest.raises(InvalidArgumentError, match=r"rank: 'causal' is defined for causal heads"):
        causal_bracket(op, [0.25])
    with pytest.raises(InvalidArgumentError, match="rank"):
        causal_bracket(_uniform_causal(4), [0.25], rank="plain")
    with pytest.raises(InvalidArgumentError, match="window:W"):
        causal_bracket(_uniform_causal(4), [0.25], rank="window:x")


def test_plain_reference_constructions_decline_on_masked_operators():
    from softrank.certifiers.registry import REFERENCE

    op = gaussian_head(16, 16, 4, seed=0, causal=True)
    for c in REFERENCE.values():
        assert c.witness(op, 0.5) is None


def test_validated_enclosure_keeps_the_mask():
    from softrank.checker.validated import enclose_softmax

    op = gaussian_head(10, 10, 4, 2.0, seed=3, causal=True, window=4)
    A, rho = enclose_softmax(op.Q, op.K, op.beta, op.mask)
    assert (A[~op.mask] == 0).all() and np.abs(A - op.A).sum(axis=1).max() <= rho + 1e-15
    assert rho < 1e-12


def test_cli_rank(tmp_path, capsys):
    from softrank.harness.cli import main
    from softrank.operator_files import save_operator

    save_operator(tmp_path / "c.npz", _uniform_causal(6))
    save_operator(tmp_path / "b.npz", gaussian_head(6, 6, 4, seed=0))
    assert main(["bracket", str(tmp_path / "c.npz"), "--eps", "0.25", "--rank", "causal",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["rank"] == "causal" and (rows[0]["lower"], rows[0]["upper"]) == (1, 1)
    assert main(["bracket", str(tmp_path / "b.npz"), "--eps", "0.25", "--rank", "causal"]) == 2
    assert "defined for causal heads" in capsys.readouterr().err


@pytest.mark.parametrize("rank", ["causal", "window:2"])
def test_more_queries_than_keys_names_the_argument_once(rank, tmp_path, capsys):
    """A 5 x 4 row-stochastic matrix has more queries than keys: the causal kinds are not
    defined. The one-line message names the argument once (``--rank`` on the command line,
    ``rank`` in the API), not ``--rank: rank: ...``."""
    from softrank.harness.cli import main

    A = np.random.default_rng(0).random((5, 4))
    A /= A.sum(axis=1, keepdims=True)
    np.save(tmp_path / "a.npy", A)
    assert main(["bracket", str(tmp_path / "a.npy"), "--eps", "0.25", "--rank", rank]) == 2
    err = capsys.readouterr().err
    assert "--rank: " in err and err.count("rank:") == 1, err
    assert "5 x 4" in err
    with pytest.raises(InvalidArgumentError) as info:
        causal_bracket(A, 0.25, rank=rank)
    assert str(info.value).startswith(f"rank: {rank!r} ") and str(info.value).count("rank:") == 1
    with pytest.raises(InvalidArgumentError, match=r"^--rank: 'causal' needs"):
        rank_masks((5, 4), "causal", "--rank")


def test_verify_names_the_rank_and_keeps_ranks_apart(tmp_path, capsys):
    # uniform causal attention: r^c = 1 while r_eps >= 2; a causal witness of rank 1 and a
    # plain lower certificate of rank >= 2 on one matrix are no contradiction
    from softrank.harness.cli import main
    from softrank.operator_files import save_operator

    save_operator(tmp_path / "c.npz", _uniform_causal(8))
    d = tmp_path / "certs"
    for rank in ("plain", "causal"):
        main(["bracket", str(tmp_path / "c.npz"), "--eps", "0.1", "--rank", rank,
              "--save-certificates", str(d), "--no-reference-store", "--effort", "fast"])
    capsys.readouterr()
    assert main(["verify", str(d)]) == 0
    out = capsys.readouterr().out
    assert "r^c_eps <= 1 at eps 0.1" in out and "r^c_eps >= 1" in out
    assert "CONTRADICTION" not in out and "4 of 4 certificates hold" in out


@pytest.mark.parametrize("N,k,seed", [(32, 3, 0), (48, 5, 1)])
def test_planted_segments_bound_both_ranks(N, k, seed):
    # k segments with identical rows in B: rank(B) <= k and B is causal, so r_eps <= k and
    # r^c <= k for eps >= delta; no lower end of either rank may exceed k
    from softrank import bracket
    from softrank.generators.synthetic import planted_segments

    op = planted_segments(N, k, 0.05, seed=seed)
    eps = [0.06, 0.25, 0.5]
    for br in bracket(op, eps, effort="fast"):
        assert br.bounded and br.lower <= k
    for br in causal_bracket(op, eps, effort="fast"):
        assert br.bounded and br.lower <= k
    assert op.meta["planted_rank"] == op.meta["planted_causal_rank"] == k


def test_planted_segments_structure():
    from softrank.generators.synthetic import planted_segments

    op = planted_segments(20, 4, 0.0, seed=3)
    # delta 0: A = B has exactly k distinct rows, every one causal
    assert np.unique(op.A, axis=0).shape[0] == 4
    assert (np.triu(op.A, 1) == 0).all() and np.allclose(op.A.sum(axis=1), 1)


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=12, deadline=None)
@given(N=st.integers(6, 24), k=st.integers(1, 4), delta=st.sampled_from([0.02, 0.05, 0.1]),
       seed=st.integers(0, 2**16), rank=st.sampled_from(["causal", "window:2"]))
def test_no_lower_end_above_a_planted_causal_rank(N, k, delta, seed, rank):
    # planted_causal: A is within delta of the causal part of a rank-k matrix, so r^c and
    # the windowed rank (at most r^c) are <= k from eps = delta on; every end is checked
    op = planted_causal(N, min(k, N), delta, seed=seed)
    for br in causal_bracket(op, [delta + 1e-3, 0.3], rank=rank, effort="fast"):
        assert br.bounded and br.lower <= min(k, N) and br.lower <= br.upper
        assert br.upper_witness is not None and check(op.A, br.upper_witness).ok
        if br.lower_certificate is not None:
            assert check(op.A, br.lower_certificate).ok


def test_a_crash_is_an_error_bracket_never_a_bound():
    from unittest import mock

    from softrank.certifiers import causal

    op = planted_causal(12, 2, 0.05, seed=0)
    with mock.patch.object(causal.CausalSearch, "row_errors", side_effect=RuntimeError("boom")):
        brs = causal.causal_bracket(op, [0.1, 0.25], effort="fast")
    for br in brs:
        assert (br.lower, br.upper, br.verdict, br.rank) == (None, None, "error", "causal")
        assert "boom" in br.diagnostics.error


def test_rank_strings_are_canonical_and_bounded():
    from softrank.validation import parse_rank

    assert parse_rank("window:8") == ("window", 8)
    for bad in ("window:08", "window:+3", "window:0", "window:99999999999999999999", "Causal",
                "window:", ""):
        with pytest.raises(InvalidArgumentError, match="rank"):
            parse_rank(bad)
    # a band wider than the sequence copies every causal key: the windowed rank is 0
    br = causal_bracket(_uniform_causal(6), [0.25], rank="window:1000000000")[0]
    assert (br.lower, br.upper) == (0, 0)


class _Window:
    def __init__(self, window, name):
        self.window, self.name = window, name

    def witness(self, operator, eps):
        return np.ones((operator.shape[0], 1)), np.ones((1, operator.shape[1]))


def test_a_construction_s_window_is_checked_by_name():
    op = _uniform_causal(6)
    br = causal_bracket(op, [0.25], reference=False, effort="fast",
                        constructions=[_Window("8", "str-window"), _Window(8, "wide"),
                                       _Window(None, "plain-causal")])[0]
    rec = {r.name: r for r in br.diagnostics.methods}
    assert rec["str-window"].status == "failed" and "window" in rec["str-window"].message
    assert rec["wide"].status == "skipped" and "band of 8 keys" in rec["wide"].message
    assert rec["plain-causal"].status in ("ok", "rejected")

"""Masked operators (docs/theory/operators.md, *Masked operators*): causal and sliding-window
masks, the masked softmax, the checks an operator with a mask makes, and operator files that
carry the mask."""

import numpy as np
import pytest

from softrank.certifiers.bracket import bracket
from softrank.errors import InvalidArgumentError, InvalidOperatorError
from softrank.operators import Operator, causal_mask, mask_kind, softmax_rows
from softrank.operator_files import load_operator, save_operator


def test_causal_masks_by_hand():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False],
                                       [True, True, True]]
    # the last 2 of 4 positions as queries (a common-prefix view)
    assert causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]
    assert causal_mask(4, window=2).tolist() == [
        [True, False, False, False], [True, True, False, False],
        [False, True, True, False], [False, False, True, True]]
    assert causal_mask(2, 4, offset=0).tolist() == [[True, False, False, False],
                                                    [True, True, False, False]]


@pytest.mark.parametrize("kw, match", [
    (dict(m=0), "m: expected an integer >= 1"), (dict(m=3, N=2), "offset:"),
    (dict(m=2, N=4, offset=3), "offset:"), (dict(m=3, window=0), "window:"),
    (dict(m=3, window=True), "window:"), (dict(m=2.0), "m:")])
def test_bad_mask_arguments_name_the_argument(kw, match):
    with pytest.raises(InvalidArgumentError, match=match):
        causal_mask(**kw)


def test_the_masked_softmax_by_hand():
    # equal logits: each row uniform over the keys it sees
    A = softmax_rows(np.zeros((3, 3)), causal_mask(3))
    assert np.array_equal(A[0], [1.0, 0.0, 0.0])
    assert np.allclose(A[1], [0.5, 0.5, 0.0]) and A[1, 2] == 0.0
    assert np.allclose(A[2], [1 / 3, 1 / 3, 1 / 3])
    # a huge logit on a hidden key changes nothing
    L = np.zeros((3, 3))
    L[0, 2] = 1e300
    assert np.array_equal(softmax_rows(L, causal_mask(3)), A)


def _causal_op(n=12, window=None, seed=0):
    rng = np.random.default_rng(seed)
    Q, K = rng.normal(size=(n, 4)), rng.normal(size=(n, 4))
    return Operator.from_factors(Q, K, 0.8, mask=causal_mask(n, window=window),
                                 family="causal")


def test_an_operator_with_a_causal_mask():
    op = _causal_op()
    assert np.array_equal(np.triu(op.A, 1), np.zeros_like(op.A))
    assert np.allclose(op.A.sum(axis=1), 1.0)
    assert mask_kind(op.mask) == "causal" and not op.mask.flags.writeable
    assert mask_kind(_causal_op(window=3).mask) == "window:3"
    assert mask_kind(None) == "none"
    M = causal_mask(12)
    M[5, 0] = False
    assert mask_kind(M) == "custom"


def test_the_operator_checks_its_mask():
    op = _causal_op()
    with pytest.raises(InvalidOperatorError, match=r"A\[0, 1\] = .* on a key the mask hides"):
        Operator(A=np.full((3, 3), 1 / 3), mask=causal_mask(3))
    with pytest.raises(InvalidOperatorError, match="row 1 sees no key"):
        Operator(A=np.eye(3), mask=np.array([[1, 0, 0], [0, 0, 0], [0, 0, 1]], dtype=bool))
    with pytest.raises(InvalidOperatorError, match="mask: expected a boolean array"):
        Operator(A=np.eye(3), mask=np.eye(3))
    with pytest.raises(InvalidOperatorError, match="mask: expected the shape"):
        Operator(A=np.eye(3), mask=np.ones((3, 2), dtype=bool))
    # the plain softmax of the factors is not A: without its mask, a masked head is refused
    with pytest.raises(InvalidOperatorError, match="differs from softmax_rows"):
        Operator(A=op.A, Q=op.Q, K=op.K, beta=0.8)
    with pytest.raises(InvalidOperatorError, match="on a key the mask hides"):
        Operator(A=softmax_rows(0.8 * op.Q @ op.K.T), Q=op.Q, K=op.K, beta=0.8, mask=op.mask)
    Operator(A=op.A, Q=op.Q, K=op.K, beta=0.8, mask=op.mask)  # with it, it passes


def test_operator_files_carry_the_mask(tmp_path):
    op = _causal_op(window=4)
    save_operator(tmp_path / "op.npz", op)
    back = load_operator(tmp_path / "op.npz")
    assert np.array_equal(back.mask, op.mask) and back.hash == op.hash
    assert back.provenance()["mask"] == "window:4"
    # a mask swapped in the file: the masked softmax of the factors no longer matches A
    data = dict(np.load(tmp_path / "op.npz"))
    data["mask"] = causal_mask(12)
    np.savez(tmp_path / "swapped.npz", **data)
    with pytest.raises(InvalidOperatorError, match="differs from softmax_rows"):
        load_operator(tmp_path / "swapped.npz")
    # without factors, a wider mask fits A's zeros: its hash in the provenance catches it
    save_operator(tmp_path / "bare.npz", Operator(A=op.A, mask=op.mask))
    bare = dict(np.load(tmp_path / "bare.npz"))
    bare["mask"] = causal_mask(12)
    np.savez(tmp_path / "bare-swapped.npz", **bare)
    with pytest.raises(InvalidOperatorError, match="the mask differs"):
        load_operator(tmp_path / "bare-swapped.npz")
    data["mask"] = op.mask.astype(np.int64)
    np.savez(tmp_path / "ints.npz", **data)
    with pytest.raises(InvalidOperatorError, match="mask: expected a boolean array"):
        load_operator(tmp_path / "ints.npz")


def test_r_eps_depends_on_A_alone():
    """The mask adds no constraint to r_eps: a masked operator's bracket is its matrix's."""
    op = _causal_op(n=16)
    plain = Operator(A=op.A)
    for a, b in zip(bracket(op, [0.25, 0.5], effort="fast"),
                    bracket(plain, [0.25, 0.5], effort="fast")):
        assert (a.lower, a.upper) == (b.lower, b.upper)


def test_the_copy_a_method_receives_keeps_the_mask():
    from softrank.certifiers.interface import as_certifier

    seen = []

    class Probe:
        name = "probe"

        def witness(self, operator, eps):
            seen.append(operator.mask)
            return None

    op = _causal_op()
    as_certifier(Probe()).witness(op, 0.25)
    assert np.array_equal(seen[0], op.mask) and seen[0] is not op.mask


def test_a_gauge_keeps_the_mask():
    from softrank.suites.suite import _gauged

    op = _causal_op()
    S = np.diag([2.0, 0.5, 1.0, 3.0])
    g = _gauged(op, S)
    assert np.array_equal(g.mask, op.mask) and np.allclose(g.A, op.A, atol=1e-12)


def test_causal_gaussian_heads():
    from softrank.generators.synthetic import gaussian_head

    op = gaussian_head(16, 16, d=4, causal=True, seed=1)
    assert op.family == "gaussian-causal" and mask_kind(op.mask) == "causal"
    assert np.array_equal(np.triu(op.A, 1), np.zeros((16, 16)))
    w = gaussian_head(16, 16, d=4, causal=True, window=5, seed=1)
    assert mask_kind(w.mask) == "window:5" and w.operator_id.endswith("-w5")
    plain = gaussian_head(16, 16, d=4, seed=1)
    assert plain.mask is None and np.array_equal(plain.Q, op.Q)  # same draws, other mask
    with pytest.raises(InvalidArgumentError, match="window: a sliding window needs causal"):
        gaussian_head(8, 8, window=3)
    with pytest.raises(InvalidArgumentError, match="m: a causal head has at most"):
        gaussian_head(9, 8, causal=True)


@pytest.mark.parametrize("window", [None, 6])
def test_a_planted_causal_instance_is_the_masked_part_of_its_rank_k_matrix(window):
    """The planted factors, kept on the mask, are within delta of A: the causal rank (without
    a window) is at most k (an identity the generator is built on, checked in float64 here)."""
    from softrank.generators.synthetic import _planted_causal_parts, planted_causal

    op = planted_causal(20, 3, 0.05, seed=2, window=window)
    A, M, U, V = _planted_causal_parts(20, 3, 0.05, 2, window, 0.3)
    assert np.array_equal(op.A, A) and np.array_equal(op.mask, M)
    assert U.shape == (20, 3) and np.linalg.matrix_rank(U @ V) == 3
    err = np.abs(A - 0.95 * np.where(M, U @ V, 0.0)).sum(axis=1).max()
    assert err <= 0.05 + 1e-12
    key = "planted_causal_rank" if window is None else "planted_masked_rank"
    assert op.meta[key] == 3 and op.family == "planted-causal"
    # the plain rank of the masked part is far above k: only the causal rank is planted
    assert np.linalg.matrix_rank(np.where(M, U @ V, 0.0)) > 3

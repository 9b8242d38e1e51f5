"""The causal study (softrank.studies.causal): three ranks of the same causal heads."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from softrank.generators.synthetic import gaussian_head
from softrank.studies.causal import CAUSAL_COLUMNS, run_causal_study, study_row, write_causal


def test_a_row_orders_the_ranks_and_checks_them():
    op = gaussian_head(24, 24, 6, 2.0, seed=1, causal=True)
    r = study_row(op, 0.25, effort="fast", model="g")
    assert set(r) == set(CAUSAL_COLUMNS)
    for side in ("full", "causal", "block"):
        assert r[f"{side}_lower"] <= r[f"{side}_upper"]
    # a rank-k matrix within eps of a causal A is a causal witness: r^c <= the full upper end
    assert r["causal_upper"] <= r["full_upper"]
    # the block has 12 queries and 12 keys: no end above 12
    assert r["block_upper"] <= 12 and r["mask"] == "causal" and r["causal_rank"] == "causal"


def test_the_block_is_the_softmax_of_the_prefix_keys():
    from softrank.studies.causal import _block

    op = gaussian_head(20, 20, 4, 1.0, seed=2, causal=True)
    b = _block(op)
    L = op.beta * op.Q[10:] @ op.K[:10].T
    E = np.exp(L - L.max(axis=1, keepdims=True))
    assert np.allclose(b.A, E / E.sum(axis=1, keepdims=True), atol=1e-14)
    # a sliding window that hides keys of the block: no block
    assert _block(gaussian_head(20, 20, 4, 1.0, seed=2, causal=True, window=5)) is None


def test_files(tmp_path):
    heads = [("g", gaussian_head(16, 16, 4, 2.0, seed=0, causal=True)),
             ("w", gaussian_head(16, 16, 4, 2.0, seed=0, causal=True, window=4))]
    rows = run_causal_study(heads, 0.25, effort="fast")
    paths = write_causal(rows, tmp_path)
    assert [p.name for p in paths] == ["causal.csv", "causal.md", "causal.png"]
    back = list(csv.DictReader(open(tmp_path / "causal.csv")))
    assert [r["model"] for r in back] == ["g", "w"]
    assert back[1]["mask"] == "window:4" and back[1]["block_lower"] == ""
    assert "| g | 16 |" in (tmp_path / "causal.md").read_text()


@pytest.mark.slow
def test_the_cli_on_tiny_decoders(tmp_path):
    from softrank.harness.cli import main

    assert main(["study", "causal", "--widths", "16", "--layers", "0", "--heads", "0",
                 "--out", str(tmp_path), "--workers", "1"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "causal.csv")))
    assert {r["model"] for r in rows} >= {"gpt2", "qwen2", "qwen2-window16", "llama"}


def test_workers_are_spawned_and_agree_with_one_process():
    # two spawned workers (a forked child could not use CUDA after its parent had) give the
    # rows of one process, in the order given
    heads = [("g", gaussian_head(16, 16, 4, 2.0, seed=0, causal=True)),
             ("h", gaussian_head(16, 16, 4, 1.0, seed=1, causal=True))]
    one = run_causal_study(heads, 0.25, effort="fast")
    two = run_causal_study(heads, 0.25, effort="fast", workers=2)
    drop = lambda r: {k: v for k, v in r.items() if "seconds" not in k}  # noqa: E731
    assert [drop(r) for r in two] == [drop(r) for r in one]
    assert [r["model"] for r in two] == ["g", "h"]

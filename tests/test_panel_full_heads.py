"""``full = true`` in a panel's ``[[heads]]`` entry: whole masked heads (README, panel format;
docs/theory/heads.md#full-heads).

The expected mask is ``causal_mask(w)``, built independently of the capture: GPT-2 attends
causally on every layer. The capture's agreement with the model's eager attention is
tests/test_capture_full.py's subject; here the panel must hand ``full`` through and keep the
full operators apart from the same checkpoint's common-prefix blocks.
"""

import json

import numpy as np
import pytest

from softrank.errors import PanelError
from softrank.harness.panels import build_panel, materialize
from softrank.operators import causal_mask, mask_kind

W = 24


def _panel(path, entries: str):
    path.write_text(entries)
    return build_panel(str(path))


def _entry(full: str, width: int = W, family: str | None = None) -> str:
    fam = f'family = "{family}"\n' if family else ""
    return (f'[[heads]]\ncheckpoint = "gpt2"\nsources = ["stdlib:json"]\nwidths = [{width}]\n'
            f"layers = [0]\nheads = [0, 1]\n{fam}full = {full}\n")


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    from softrank.generators.tiny import save_tiny_checkpoint

    root = tmp_path_factory.mktemp("panel-full")
    save_tiny_checkpoint("gpt2", root / "gpt2")
    return root


@pytest.mark.models("torch", "transformers")
def test_full_entry_gives_causal_whole_heads(gpt2_dir):
    panel = _panel(gpt2_dir / "p.toml", _entry("true"))
    assert [s["full"] for s in panel.specs] == [True, True]
    ops = materialize(panel.specs)
    assert [op.head for op in ops] == [0, 1]
    M = causal_mask(W)
    for op in ops:
        assert op.shape == (W, W) and mask_kind(op.mask) == "causal"
        assert np.array_equal(op.mask, M)
        assert np.all(op.A[~M] == 0)  # a query never sees a later key
        assert op.block == f"full:0-{W}" and op.meta["full"] is True
        assert op.operator_id == f"gpt2-full{W}-L0H{op.head}-json"


@pytest.mark.models("torch", "transformers")
def test_full_and_block_entries_stay_apart(gpt2_dir):
    # the same checkpoint, width, layer and heads twice: the blocks (keys [0, w), queries
    # [w, 2w), no mask) and the whole heads get distinct ids, the family keeps their groups apart
    panel = _panel(gpt2_dir / "both.toml", _entry("false") + _entry("true", family="gpt2-full"))
    ops = materialize(panel.specs)
    block, full = ops[:2], ops[2:]
    assert [op.operator_id for op in block] == [f"gpt2-w{W}-L0H{h}-json" for h in (0, 1)]
    assert [op.operator_id for op in full] == [f"gpt2-full-full{W}-L0H{h}-json" for h in (0, 1)]
    assert all(op.mask is None and op.block == f"keys:0-{W},queries:{W}-{2 * W}" for op in block)
    assert all(mask_kind(op.mask) == "causal" for op in full)


@pytest.mark.parametrize("value", ['"yes"', "1", "[true]"], ids=["string", "integer", "list"])
def test_full_must_be_boolean(tmp_path, value):
    # a config.json with the counts is enough: the model is loaded only by materialize
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "config.json").write_text(
        json.dumps({"model_type": "gpt2", "n_layer": 2, "n_head": 4}))
    with pytest.raises(PanelError) as ei:
        _panel(tmp_path / "p.toml", _entry(value))
    msg = str(ei.value)
    assert msg.startswith("panel: [[heads]] entry 0: full must be true or false, got "), msg

"""The built-in panels' operator specs (softrank.harness.panels): what each one holds,
worked out by hand from its documented rule."""

import numpy as np
import pytest

from softrank.errors import PanelError
from softrank.harness.panels import PANELS, SHORT_SOURCES, build_panel, wide_specs


def test_wide_panel_seed_0_by_hand():
    # layer l: head 7 l mod 12 at width 256, (7 l + 6) mod 12 at 512; source
    # 12 l + h + 32 w_i mod 64, moved past the sources too short for 512 tokens
    got = [(s["width"], s["layer"], s["head"], s["source_index"])
           for s in build_panel("wide").specs]
    assert got == [
        (256, 0, 0, 0), (256, 1, 7, 19), (256, 2, 2, 26), (256, 3, 9, 45),
        (256, 4, 4, 52), (256, 5, 11, 7),
        # 512: l=0 h=6 -> 38; l=1 h=1 -> 45; l=2 h=8 -> 64 = 0; l=3 h=3 -> 71 = 7;
        # l=4 h=10 -> 90 = 26; l=5 h=5 -> 97 = 33
        (512, 0, 6, 38), (512, 1, 1, 45), (512, 2, 8, 0), (512, 3, 3, 7),
        (512, 4, 10, 26), (512, 5, 5, 33),
    ]
    assert all(s["kind"] == "minilm" for s in build_panel("wide").specs)
    assert "wide" in PANELS


@pytest.mark.parametrize("seed", range(64))
def test_wide_panel_covers_every_head_once_and_skips_short_sources(seed):
    specs = wide_specs(seed)
    assert [s["width"] for s in specs] == [256] * 6 + [512] * 6
    for w in (256, 512):
        assert sorted(s["layer"] for s in specs if s["width"] == w) == list(range(6))
    assert sorted(s["head"] for s in specs) == list(range(12))
    for s in specs:
        if s["width"] == 512:
            assert s["source_index"] not in SHORT_SOURCES
        assert 0 <= s["source_index"] < 64


def test_wide_panel_moves_past_a_short_source():
    # every (seed, layer) where the documented rotation lands on a short source at width
    # 512 takes the next source that is long enough instead
    hits = 0
    for seed in range(64):
        for l in range(6):
            h = (7 * l + 6 + seed) % 12
            idx = (12 * l + h + 32 + seed) % 64
            if idx in SHORT_SOURCES:
                want = idx
                while want in SHORT_SOURCES:
                    want = (want + 1) % 64
                (s,) = [s for s in wide_specs(seed) if s["width"] == 512 and s["layer"] == l]
                assert s["source_index"] == want != idx
                hits += 1
    assert hits > 0


def test_unknown_panel_names_wide_among_the_choices():
    with pytest.raises(PanelError, match="'quick', 'default', 'wide', 'causal', 'paper'"):
        build_panel("widest")


# ------------------------------------------------------------------------ the long panel


def test_long_panel_by_hand():
    from softrank.harness.panels import long_specs

    p = build_panel("long")
    assert "long" in PANELS and p.name == "long" and p.specs == long_specs(0)
    assert p.eps == (0.25,) and p.cell_timeout == 540.0 and p.rank == "plain"
    got = [(s["kind"], s["family"], s.get("m", s.get("width")), s.get("N", s.get("width")),
            s.get("causal", s["kind"] == "tiny"), s["seed"]) for s in p.specs]
    want = []
    for n in (1024, 2048, 4096):
        want += [("synthetic", "gaussian_head", n, n, False, 0),
                 ("synthetic", "gaussian_head", n, n, True, 0),
                 ("synthetic", "planted", n, n, False, 16), ("synthetic", "sphere", n, n, False, 0)]
        if n < 4096:  # the tiny decoders' whole causal heads, at 1,024 and 2,048 tokens
            want += [("tiny", "gpt2", n, n, True, 0), ("tiny", "llama", n, n, True, 0)]
    assert got == want
    assert all(s["k"] == 16 and s["delta"] == 0.04 for s in p.specs if s["family"] == "planted")
    tiny = [s for s in p.specs if s["kind"] == "tiny"]
    assert {(s["max_positions"], s["source"], s["layer"], s["head"]) for s in tiny} == {
        (2048, "stdlib:json", 1, 0)}
    assert [s["seed"] for s in build_panel("long", seed=3).specs][:3] == [3, 3, 19]
    assert [s["seed"] for s in build_panel("long", seed=3).specs if s["kind"] == "tiny"] == [3] * 4


def test_long_panel_materialises_distinct_operators(monkeypatch):
    # at a width of 64 (the rule is the same at every width): 4 operators, distinct ids
    from softrank.harness import panel_specs
    from softrank.harness.panels import materialize

    monkeypatch.setattr(panel_specs, "LONG_WIDTHS", (32, 64))
    monkeypatch.setattr(panel_specs, "LONG_DECODER_WIDTHS", (48,))  # no tiny decoders
    ops = materialize([s for s in panel_specs.long_specs(0) if s["kind"] == "synthetic"])
    assert [op.shape for op in ops] == [(32, 32)] * 4 + [(64, 64)] * 4
    assert [op.operator_id for op in ops[4:]] == [
        "gaussian-d32-t2-s0-n64", "gaussian-d32-t2-s0-causal64", "planted-64x64-k16-d0.04-s16",
        "sphere-d3-b16-s0-n64"]  # every id names the width: none repeats across widths
    assert len({op.operator_id for op in ops}) == 8
    assert ops[1].mask is not None and ops[0].mask is None  # the causal head carries its mask
    # the same matrices as the generators give under their own ids
    from softrank.generators.synthetic import gaussian_head, sphere

    np.testing.assert_array_equal(ops[4].A, gaussian_head(64, 64, 32, 2.0, seed=0).A)
    np.testing.assert_array_equal(ops[7].A, sphere(3, 16.0, m=64, N=64, seed=0).A)


@pytest.mark.models("torch", "transformers", "tokenizers")
def test_long_panels_tiny_decoders_are_the_captures_of_their_checkpoints(monkeypatch, tmp_path):
    # at widths of 24 and 40 tokens (one checkpoint per family, 40 positions): the panel's
    # operators are the whole causal heads that capture gives on the checkpoint the spec
    # names, written here by hand; every id names the family, seed and width
    from softrank.generators.capture import capture, load_checkpoint, read_sources
    from softrank.generators.tiny import save_tiny_checkpoint
    from softrank.harness import panel_specs
    from softrank.harness.panels import materialize
    from softrank.operators import causal_mask

    monkeypatch.setattr(panel_specs, "LONG_WIDTHS", (32,))
    monkeypatch.setattr(panel_specs, "LONG_DECODER_WIDTHS", (24, 40))
    specs = [s for s in panel_specs.long_specs(5) if s["kind"] == "tiny"]
    assert [(s["family"], s["width"], s["max_positions"]) for s in specs] == [
        ("gpt2", 24, 40), ("llama", 24, 40), ("gpt2", 40, 40), ("llama", 40, 40)]
    ops = materialize(specs)
    assert [op.operator_id for op in ops] == [
        "tiny-gpt2-s5-full24-L1H0-json", "tiny-llama-s5-full24-L1H0-json",
        "tiny-gpt2-s5-full40-L1H0-json", "tiny-llama-s5-full40-L1H0-json"]
    for op, s in zip(ops, specs):
        n = s["width"]
        assert op.shape == (n, n) and np.array_equal(op.mask, causal_mask(n))
        # provenance: the seed, and how to write the checkpoint again (its directory is gone)
        assert op.seed == 5 and op.meta["checkpoint_dir"] == ""
        assert op.meta["tiny_checkpoint"] == {"family": s["family"], "seed": 5,
                                              "max_positions": 40}
        ck = load_checkpoint(save_tiny_checkpoint(s["family"], tmp_path / op.operator_id,
                                                  seed=5, max_positions=40))
        (want,) = capture(ck, read_sources(["stdlib:json"]), width=n, layers=[1], heads=[0],
                          full=True)
        np.testing.assert_array_equal(op.A, want.A)
    assert not np.array_equal(ops[2].A[:24, :24], ops[3].A[:24, :24])  # two families


def test_long_panels_tiny_decoders_without_torch_name_the_extra(monkeypatch):
    # without the [models] extra, building the panel's decoders is refused in one line
    import sys

    from softrank.harness.panels import materialize

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    spec = {"kind": "tiny", "family": "gpt2", "seed": 0, "max_positions": 40,
            "source": "stdlib:json", "width": 24, "layer": 1, "head": 0}
    with pytest.raises(PanelError, match=r"tiny gpt2 checkpoint .*softrank\[models\]"):
        materialize([spec])


def test_the_long_panels_time_limit_is_a_default_that_the_option_overrides():
    from softrank.harness.cli.audit_cmd import _config
    from softrank.harness.cli.parser import build_parser

    parse = build_parser().parse_args
    long, default = build_panel("long"), build_panel("default")
    assert _config(parse(["audit", "--panel", "long"]), long).cell_timeout == 540.0
    assert _config(parse(["audit", "--panel", "long", "--cell-timeout", "60"]),
                   long).cell_timeout == 60.0
    assert _config(parse(["audit"]), default).cell_timeout is None
    assert _config(parse(["audit", "--panel", "long"]), long).eps == (0.25,)


def test_a_panel_file_sets_a_time_limit_and_synthetic_ids(tmp_path):
    from softrank.harness.cli.audit_cmd import _config
    from softrank.harness.cli.parser import build_parser
    from softrank.harness.panels import materialize

    f = tmp_path / "p.toml"
    f.write_text('cell_timeout = 30\n'
                 '[[synthetic]]\nfamily = "gaussian_head"\nm = 32\nN = 32\nid = "g-n32"\n'
                 '[[synthetic]]\nfamily = "gaussian_head"\nm = 48\nN = 48\nid = "g-n48"\n')
    p = build_panel(str(f))
    assert p.cell_timeout == 30.0
    assert [op.operator_id for op in materialize(p.specs)] == ["g-n32", "g-n48"]
    parse = build_parser().parse_args
    assert _config(parse(["audit", "--panel", str(f)]), p).cell_timeout == 30.0
    assert _config(parse(["audit", "--panel", str(f), "--cell-timeout", "5"]), p).cell_timeout == 5
    for text, match in (("cell_timeout = 0\n", "cell_timeout"),
                        ('cell_timeout = "long"\n', "cell_timeout"),
                        ('[[synthetic]]\nfamily = "grid"\nd = 1\nn = 8\nid = "a/b"\n',
                         r"\[\[synthetic\]\] entry 0: id")):
        f.write_text(text + ('' if "synthetic" in text else
                             '[[synthetic]]\nfamily = "grid"\nd = 1\nn = 8\n'))
        with pytest.raises(PanelError, match=match):
            build_panel(str(f))

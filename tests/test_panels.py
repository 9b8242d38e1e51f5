"""The built-in panels' operator specs (softrank.harness.panels): what each one holds,
worked out by hand from its documented rule."""

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

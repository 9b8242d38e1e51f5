"""The ``paper`` panel (softrank.harness.panels.paper_specs): its composition worked out by
hand from its documented rule, without materialising its 3,168 MiniLM heads."""

from collections import Counter, defaultdict

import pytest

from softrank.errors import PanelError
from softrank.harness.panels import (DEFAULT_EPS, PANELS, SHORT_SOURCES, build_panel,
                                     materialize)

# ---------------------------------------------------------------------------- the panel


@pytest.fixture(scope="module")
def paper():
    return build_panel("paper")


def _minilm(panel):
    return [s for s in panel.specs if s["kind"] == "minilm"]


def test_paper_panel_counts_and_tolerances(paper):
    # 72 heads x 11 sources at each of 4 widths, and the default panel's 35 synthetic
    # operators at 5 seeds: 3,168 + 175 = 3,343 operators, 10,029 cells at 3 tolerances
    assert "paper" in PANELS and paper.name == "paper"
    assert len(paper) == 3343 and paper.eps == DEFAULT_EPS == (0.1, 0.25, 0.5)
    assert len(paper) * len(paper.eps) == 10029
    assert Counter(s["width"] for s in _minilm(paper)) == {64: 792, 128: 792, 256: 792,
                                                            512: 792}
    assert Counter(s["kind"] for s in paper.specs) == {"minilm": 3168, "synthetic": 175}


def test_paper_panel_heads_sources_and_short_sources(paper):
    specs = _minilm(paper)
    keys = [(s["width"], s["layer"], s["head"], s["source_index"]) for s in specs]
    assert len(set(keys)) == 3168
    per_head = defaultdict(list)
    for w, l, h, src in keys:
        per_head[(w, l, h)].append(src)
    assert set(per_head) == {(w, l, h) for w in (64, 128, 256, 512) for l in range(6)
                             for h in range(12)}
    assert all(len(set(v)) == 11 for v in per_head.values())
    for (w, l, h), srcs in per_head.items():
        assert all(0 <= s < 64 for s in srcs)
        if w == 512:
            assert not set(srcs) & SHORT_SOURCES
    # at each width and source slot s, the 12 heads of a layer see 12 different sources
    for w in (64, 128, 256, 512):
        for l in range(6):
            for s in range(11):
                assert len({per_head[(w, l, h)][s] for h in range(12)}) == 12


def test_paper_panel_rotation_by_hand(paper):
    per_head = defaultdict(list)
    for s in _minilm(paper):
        per_head[(s["width"], s["layer"], s["head"])].append(s["source_index"])
    # widths 64 to 256: (12 l + h + 32 w_i + 7 s) mod 64
    assert per_head[(64, 0, 0)] == [0, 7, 14, 21, 28, 35, 42, 49, 56, 63, 6]
    # layer 1, head 2 at width 128 (w_i = 1): 12 + 2 + 32 = 46, then + 7 s mod 64
    assert per_head[(128, 1, 2)] == [46, 53, 60, 3, 10, 17, 24, 31, 38, 45, 52]
    # width 512 (w_i = 3): entry (96 + 7 s) mod 59 = 37, 44, 51, 58, 6, 13, 20, 27, 34, 41,
    # 48 of the 59 long sources (0-8, 10-13, 15-17, 19-29, 31-57, 59-63)
    assert per_head[(512, 0, 0)] == [41, 48, 55, 63, 6, 15, 23, 31, 38, 45, 52]
    # seed 1 moves every source one place on in its pool: at width 512 entries 38, 45, 52,
    # 0, 7, 14, 21, 28, 35, 42, 49 of the long sources
    one = defaultdict(list)
    for s in _minilm(build_panel("paper", seed=1)):
        one[(s["width"], s["layer"], s["head"])].append(s["source_index"])
    assert one[(64, 0, 0)] == [1, 8, 15, 22, 29, 36, 43, 50, 57, 0, 7]
    assert one[(512, 0, 0)] == [42, 49, 56, 0, 7, 16, 24, 32, 39, 46, 53]


def test_paper_panel_holds_the_default_panel(paper):
    # source slot 0 at widths 64 and 128 is the default panel's rotation, and seed j = 0 its
    # synthetic operators: the default panel's references serve the paper panel's cells
    default = build_panel("default")
    assert all(s in paper.specs for s in _minilm(default))
    syn = [s for s in default.specs if s["kind"] == "synthetic"]
    ours = materialize([s for s in paper.specs if s["kind"] == "synthetic"])
    assert {(o.operator_id, o.hash) for o in materialize(syn)} <= \
        {(o.operator_id, o.hash) for o in ours}


def test_paper_panel_synthetic_ids_are_distinct(paper):
    syn = [s for s in paper.specs if s["kind"] == "synthetic"]
    ops = materialize(syn)
    ids = [o.operator_id for o in ops]
    assert len(ids) == len(set(ids)) == 175
    # grids have no seed: the 8 grid shapes at the 5 scales c = 1, 0.5, 2, 0.25, 4
    grids = sorted(i for i in ids if i.startswith("grid-"))
    assert len(grids) == 40
    assert {g.rsplit("-c", 1)[1] for g in grids} == {"1", "0.5", "2", "0.25", "4"}
    assert "grid-d2-n11-c0.25" in grids and "grid-d1-n128-c4" in grids
    # the sphere family at seeds 0..4 (d 2..4, beta 4, 16, 64)
    assert sum(i.startswith("sphere-") for i in ids) == 45
    assert {i.rsplit("-s", 1)[1] for i in ids if i.startswith("sphere-")} == \
        {"0", "1", "2", "3", "4"}


def test_paper_panel_minilm_ids_are_distinct(paper):
    # minilm-wW-LlHh-SOURCE: distinct (width, layer, head, source index) and distinct
    # source names give distinct ids
    from softrank.generators.text import stdlib_sources

    names = [n for n, _ in stdlib_sources(64)]
    assert len(set(names)) == 64
    ids = {f"minilm-w{s['width']}-L{s['layer']}H{s['head']}-{names[s['source_index']]}"
           for s in _minilm(paper)}
    assert len(ids) == 3168


def test_unknown_panel_names_paper_among_the_choices():
    with pytest.raises(PanelError, match="'quick', 'default', 'wide', 'causal', 'paper'"):
        build_panel("papers")


@pytest.mark.models
def test_paper_panel_materialises_a_slice(paper):
    # the first head (width 64, layer 0, head 0, source 0) and the first width-512 one
    specs = _minilm(paper)
    first, wide = specs[0], next(s for s in specs if s["width"] == 512)
    from softrank.generators.text import stdlib_sources

    names = [n for n, _ in stdlib_sources(64)]
    a, b = materialize([first, wide])
    assert a.shape == (64, 64) and b.shape == (512, 512)
    assert a.operator_id == f"minilm-w64-L0H0-{names[0]}"
    assert b.operator_id == f"minilm-w512-L0H0-{names[41]}"
    assert (b.layer, b.head) == (0, 0)

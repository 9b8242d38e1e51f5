"""The ``paper`` panel (softrank.harness.panels.paper_specs) and the expected cost printed
before an audit (softrank.harness.cost): the panel's composition worked out by hand from its
documented rule, without materialising its 3,168 MiniLM heads; the cost model's curve and
sums on hand-written tables and on a store the real ReferenceStore wrote."""

import json
import math
import statistics
from collections import Counter, defaultdict

import pytest

from softrank.errors import InvalidArgumentError, PanelError
from softrank.generators.synthetic import planted, planted_blocks
from softrank.harness.cost import Cost, WidthMedian, expected_cost, seconds_at
from softrank.harness.panels import (DEFAULT_EPS, PANELS, SHORT_SOURCES, build_panel,
                                     materialize)
from softrank.refstore import ReferenceStore, engine_key

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
    for w, layer, h, src in keys:
        per_head[(w, layer, h)].append(src)
    assert set(per_head) == {(w, layer, h) for w in (64, 128, 256, 512) for layer in range(6)
                             for h in range(12)}
    assert all(len(set(v)) == 11 for v in per_head.values())
    for (w, _, _), srcs in per_head.items():
        assert all(0 <= s < 64 for s in srcs)
        if w == 512:
            assert not set(srcs) & SHORT_SOURCES
    # at each width and source slot s, the 12 heads of a layer see 12 different sources
    for w in (64, 128, 256, 512):
        for layer in range(6):
            for s in range(11):
                assert len({per_head[(w, layer, h)][s] for h in range(12)}) == 12


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


# ---------------------------------------------------------------------------- the curve


def test_seconds_at_interpolates_log_log_by_hand():
    pts = [(128, 4.0), (64, 1.0)]  # slope 2 in log-log, any order
    assert seconds_at(64, pts) == pytest.approx(1.0)
    assert seconds_at(128, pts) == pytest.approx(4.0)
    assert seconds_at(64 * math.sqrt(2), pts) == pytest.approx(2.0)  # the geometric middle
    assert seconds_at(256, pts) == pytest.approx(16.0)  # beyond: the last two's slope
    assert seconds_at(32, pts) == pytest.approx(0.25)  # below: the first two's
    three = pts + [(256, 8.0)]  # slope 1 from 128 on
    assert seconds_at(512, three) == pytest.approx(16.0)
    assert seconds_at(128 * math.sqrt(2), three) == pytest.approx(4 * math.sqrt(2))
    assert seconds_at(90.5, three) == pytest.approx((90.5 / 64) ** 2)
    assert seconds_at(1000, [(64, 3.0)]) == 3.0  # one point: flat


@pytest.mark.parametrize("width, pts, match", [
    (0, [(64, 1.0)], "width: expected a number > 0, got 0"),
    (64, [], "points: expected at least one"),
    (64, [(64, 1.0), (64, 2.0)], "points: a width is repeated"),
    (64, [(64, 0.0)], r"points: expected widths and seconds > 0, got \(64, 0\)"),
])
def test_seconds_at_refuses(width, pts, match):
    with pytest.raises(InvalidArgumentError, match=match):
        seconds_at(width, pts)


# ---------------------------------------------------------------------------- the sums


def _hand_entry(store, op, eps, seconds, effort="full", imported=False):
    """A bracket.json where the store keeps ``op``'s entry at ``eps``, with hand-written
    seconds (the cost model reads only the record)."""
    from softrank.refstore.layout import ENTRY_FORMAT, IMPORTED_NAME, eps_name

    entry = store.group_dir(op, effort, False) / eps_name(eps)
    entry.mkdir(parents=True)
    (entry / "bracket.json").write_text(json.dumps({
        "format": ENTRY_FORMAT, "engine": engine_key(), "operator": op.hash, "eps": eps,
        "effort": effort, "validated": False, "rho": 0.0, "seconds": seconds,
        "files": {"lower.npz": "0" * 64, "upper.npz": "0" * 64}}))
    if imported:
        (entry / IMPORTED_NAME).write_text("{}")


TABLE = {64: 1.0, 128: 4.0}  # slope 2
CHECKS = {64: 0.5}  # flat


def test_expected_cost_by_hand(tmp_path):
    store = ReferenceStore(tmp_path / "store")
    w16 = [planted(16, 16, 2, 0.04, seed=s) for s in range(5)]
    for op, sec in zip(w16, (1.0, 2.0, 3.0, 4.0, 100.0), strict=True):
        _hand_entry(store, op, 0.25, sec)
    w32 = planted(32, 32, 2, 0.04, seed=0)
    w256 = planted(8, 256, 2, 0.04, seed=0)  # width max(m, N) = 256
    done = planted(16, 16, 2, 0.04, seed=9)
    cost = expected_cost(w16 + [w32, w256, done], [0.25, 0.5], store=store,
                         finished={done.operator_id}, table=TABLE, check_table=CHECKS)
    # width 16: the 5 stored seconds' median, 3 s (a store point); then 3 -> 1 from 16 to 64
    # (32 is their geometric middle: sqrt(3 * 1)) and 1 -> 4 -> 16 at 64, 128, 256
    assert cost.medians == (WidthMedian(16, 3.0, "store", 5, 5), WidthMedian(64, 1.0, "table"),
                            WidthMedian(128, 4.0, "table"))
    computed = 5 * 3.0 + 2 * math.sqrt(3) + 2 * 16.0
    checked = 5 * 0.5
    assert cost.core_seconds == pytest.approx(computed + checked)
    assert cost.check_seconds == pytest.approx(checked)
    assert (cost.operators, cost.tolerances, cost.cells) == (8, 2, 16)
    assert (cost.finished, cost.stored, cost.to_compute) == (2, 5, 9)


def test_a_time_limit_per_cell_caps_each_computed_cell():
    # widths 64, 128, 256 (table: 1, 4 and, by its slope, 16 s) at 2 tolerances, limit 5 s:
    # the width-256 cells count 5 s each, the others their curve value
    ops = [planted(64, 64, 2, 0.04, seed=0), planted(128, 128, 2, 0.04, seed=0),
           planted(8, 256, 2, 0.04, seed=0)]
    cost = expected_cost(ops, [0.25, 0.5], table=TABLE, check_table=CHECKS, cell_timeout=5.0)
    assert cost.core_seconds == pytest.approx(2 * (1.0 + 4.0 + 5.0))
    assert (cost.capped, cost.cell_timeout) == (2, 5.0)
    assert "2 cells counted at the 5.0 s time limit per cell" in cost.line(1)
    free = expected_cost(ops, [0.25, 0.5], table=TABLE, check_table=CHECKS)
    assert free.core_seconds == pytest.approx(2 * (1.0 + 4.0 + 16.0)) and free.capped == 0
    assert "time limit" not in free.line(1)
    with pytest.raises(InvalidArgumentError, match="cell_timeout"):
        expected_cost(ops, [0.25], cell_timeout=0)


def test_fewer_than_five_stored_operators_leave_the_table(tmp_path):
    store = ReferenceStore(tmp_path / "store")
    ops = [planted(16, 16, 2, 0.04, seed=s) for s in range(5)]
    for op in ops[:4]:
        _hand_entry(store, op, 0.25, 50.0)
    # an entry imported from a bundle is stored, its seconds (another machine's) unused
    _hand_entry(store, ops[4], 0.25, 50.0, imported=True)
    cost = expected_cost(ops, [0.25, 0.5], store=store, table=TABLE, check_table=CHECKS)
    assert [m.source for m in cost.medians] == ["table", "table"]
    # width 16 below the table: 1 s at 64 with slope 2 gives (16 / 64)^2 = 1/16 s
    assert cost.core_seconds == pytest.approx(5 * (1 / 16) + 5 * 0.5)
    assert cost.stored == 5
    # 6 entries of 2 operators (an interrupted run's first two): still the table
    two = ops[:2]
    for op in two:
        for e in (0.1, 0.5):
            _hand_entry(store, op, e, 50.0)
    cost = expected_cost(two, [0.1, 0.25, 0.5], store=store, table=TABLE, check_table=CHECKS)
    assert cost.stored == 6 and [m.source for m in cost.medians] == ["table", "table"]
    assert cost.core_seconds == pytest.approx(6 * 0.5)


def test_entries_of_another_effort_tolerance_or_operator_are_not_stored(tmp_path):
    store = ReferenceStore(tmp_path / "store")
    a, b = planted(64, 64, 2, 0.04, seed=0), planted(64, 64, 2, 0.04, seed=1)
    _hand_entry(store, a, 0.25, 1.0, effort="fast")  # another effort's directory
    entry = store.group_dir(b, "full", False) / "eps0.25"
    entry.mkdir(parents=True)
    (entry / "bracket.json").write_text(json.dumps({  # b's path, a's record
        "format": 1, "engine": engine_key(), "operator": a.hash, "eps": 0.25,
        "effort": "full", "validated": False, "seconds": 1.0}))
    cost = expected_cost([a, b], [0.25], store=store, table=TABLE, check_table=CHECKS)
    assert cost.stored == 0 and cost.core_seconds == pytest.approx(2 * 1.0)
    # without a store, the same; at effort fast the table is scaled by FAST_FACTOR
    from softrank.harness.cost import FAST_FACTOR

    assert expected_cost([a, b], [0.25], table=TABLE).core_seconds == pytest.approx(2.0)
    fast = expected_cost([a, b], [0.25], effort="fast", store=store, table=TABLE,
                         check_table=CHECKS)
    assert fast.stored == 1  # a's fast entry
    assert fast.core_seconds == pytest.approx(FAST_FACTOR * 1.0 + 0.5)


def test_store_medians_from_entries_the_real_store_wrote(tmp_path):
    # five operators bracketed through the real ReferenceStore: their recorded seconds are
    # the seconds the engine returned, and their median becomes the width-24 point
    from softrank.certifiers.bracket import bracket

    store = ReferenceStore(tmp_path / "store")
    ops = [planted_blocks(24, 24, 4, 0.04, seed=s) for s in range(5)]
    secs = [bracket(op, 0.25, store=store)[0].seconds for op in ops]
    assert store.stored == 5
    cost = expected_cost(ops, [0.25, 0.5], store=ReferenceStore(tmp_path / "store"),
                         table=TABLE, check_table=CHECKS)
    (point,) = [m for m in cost.medians if m.width == 24]
    assert point.source == "store" and point.cells == point.operators == 5
    # (the store keeps seconds to 0.1 ms)
    assert point.seconds == pytest.approx(statistics.median(secs), abs=1e-4)
    assert cost.stored == 5
    assert cost.core_seconds == pytest.approx(5 * point.seconds + 5 * 0.5)


def test_expected_cost_refuses():
    op = planted(16, 16, 2, 0.04, seed=0)
    with pytest.raises(InvalidArgumentError, match="effort: expected 'full' or 'fast', got 'max'"):
        expected_cost([op], [0.25], effort="max")
    with pytest.raises(InvalidArgumentError, match="got 0 operators and 1 tolerances"):
        expected_cost([], [0.25])


# ---------------------------------------------------------------------------- the line


def _cost(**kw):
    base = dict(operators=3343, tolerances=3, cells=10029, finished=0, stored=537,
                effort="full", core_seconds=40 * 3600.0, check_seconds=30.0,
                medians=(WidthMedian(64, 1.32, "store", 216, 72),
                         WidthMedian(512, 310.0, "table")))
    return Cost(**{**base, **kw})


def test_the_line_by_hand():
    assert _cost().line(2) == (
        "expected cost: 10,029 cells (3,343 operators x 3 tolerances), 537 already in the "
        "reference store; about 40 core-hours at effort full (median seconds of a cell by "
        "width: 64: 1.3 s [store, 216 cells], 512: 310 s [table]; table measured on a 2-core "
        "machine, docs/benchmarks.md) -- about 20 h on 2 cores here; on a cluster: "
        "--executor dask --scheduler ADDRESS (README, \"Audits on a cluster\")")
    # small: no cluster; a resumed run's finished cells; no table, no table note
    small = _cost(operators=1, tolerances=1, cells=1, finished=0, stored=0,
                  core_seconds=90.0, medians=(WidthMedian(64, 1.0, "store", 5, 5),))
    assert small.line(1) == (
        "expected cost: 1 cell (1 operator x 1 tolerance); about 90 core-seconds at effort "
        "full (median seconds of a cell by width: 64: 1.0 s [store, 5 cells]) -- about 90 s "
        "on 1 core here")
    resumed = _cost(finished=300, core_seconds=600.0).line(None)
    assert resumed.startswith("expected cost: 10,029 cells (3,343 operators x 3 tolerances), "
                              "300 finished in the ledger, 537 already in the reference "
                              "store; about 10 core-minutes at effort full")
    assert "here" not in resumed  # a cluster of unknown size: core time only
    with pytest.raises(InvalidArgumentError, match="cores: expected an integer >= 1 or None, got 0"):
        _cost().line(0)


# ---------------------------------------------------------------------------- the audit


def _slow_panel(tmp_path, n=4, eps="[0.2, 0.5]"):
    p = tmp_path / f"gaussian{n}.toml"
    p.write_text(f"eps = {eps}\n" + "".join(
        f"[[synthetic]]\nfamily = 'gaussian_head'\nm = 32\nN = 32\nseed = {s}\n"
        for s in range(n)))
    return p


def test_audit_prints_the_cost_first_and_leaves_finished_cells_out_on_resume(tmp_path,
                                                                               capsys):
    import os
    import signal
    import sqlite3
    import subprocess
    import sys

    from softrank.harness.cli import main

    p, out = _slow_panel(tmp_path), tmp_path / "run"
    args = ["--panel", str(p), "--out", str(out), "--workers", "1", "--study-boot", "0",
            "--no-reference-store"]
    proc = subprocess.Popen([sys.executable, "-m", "softrank.harness.cli", "audit", *args],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    seen = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if "cells]" in line:  # one operator committed
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    costs = [i for i, line in enumerate(seen) if line.startswith("expected cost:")]
    assert len(costs) == 1 and costs[0] < len(seen) - 1  # before the first cell
    assert seen[costs[0]].startswith("expected cost: 8 cells (4 operators x 2 tolerances); "
                                     "about ")
    assert "at effort full" in seen[costs[0]] and "on 1 core here" in seen[costs[0]]
    with sqlite3.connect(out / "ledger.sqlite") as conn:
        kept = conn.execute("SELECT COUNT(*) FROM cells").fetchone()[0]
    assert 2 <= kept < 8 and kept % 2 == 0  # whole operators: 2 cells each
    capsys.readouterr()
    assert main(["audit", *args, "--resume"]) == 0
    err = capsys.readouterr().err
    assert (f"expected cost: 8 cells (4 operators x 2 tolerances), {kept} finished in the "
            "ledger; about ") in err
    # --quiet: no cost line
    assert main(["audit", "--panel", str(_slow_panel(tmp_path, 1, "[0.5]")), "--out",
                 str(tmp_path / "q"), *args[4:], "--quiet"]) == 0
    assert "expected cost" not in capsys.readouterr().err


def test_audit_counts_the_cells_in_the_reference_store(tmp_path, capsys):
    from softrank.harness.cli import main

    p, store = _slow_panel(tmp_path, 5, "[0.5]"), tmp_path / "store"
    args = ["--panel", str(p), "--workers", "1", "--study-boot", "0", "--reference-store",
            str(store)]
    assert main(["audit", *args, "--out", str(tmp_path / "a"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["audit", *args, "--out", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("expected cost:"))
    assert line.startswith("expected cost: 5 cells (5 operators x 1 tolerance), 5 already "
                           "in the reference store; about ")
    # 5 stored cells of 5 operators at width 32: their median is the curve's point there
    assert "32: " in line and " [store, 5 cells]" in line and "64: 1.3 s [table]" in line

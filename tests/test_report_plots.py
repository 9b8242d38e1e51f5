"""The report's Constructions plot (softrank.harness.report): one panel per construction."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from softrank.audit.record import read_diagnostics  # noqa: E402
from softrank.harness import report  # noqa: E402


def _row(lower: int, methods: list[tuple[str, str, str, int | None]]) -> dict:
    """A cell as the report reads it (typed, :func:`softrank.audit.record.read_cell`): its
    certified lower end and its upper methods' records ``(name, origin, status, rank)``."""
    return {"verdict": "open", "lower": lower, "diagnostics": read_diagnostics(
        {"diagnostics": {"methods": [{"name": n, "side": "upper", "origin": o, "status": st,
                                      "rank": k} for n, o, st, k in methods]}})}


def _saved_figure(monkeypatch, rows, tmp_path):
    saved = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: saved.append(fig))
    name = report._plot_constructions(rows, tmp_path)
    return name, saved


def test_one_panel_per_construction_with_its_cells(monkeypatch, tmp_path):
    cons = [("truncated-svd", "builtin"), ("l1-refit", "builtin"), ("nystrom", "reference"),
            ("mine", "third-party"), ("identity", "builtin")]
    rows = [_row(4, [(n, o, "ok", 8) for n, o in cons]),
            _row(4, [(n, o, "ok", 8) for n, o in cons[:1]]),   # the same point again
            _row(2, [("mine", "third-party", "ok", 3), ("nystrom", "reference", "declined",
                                                         None)]),
            _row(0, [("identity", "builtin", "ok", 6)])]       # no certified lower end: left out
    name, saved = _saved_figure(monkeypatch, rows, tmp_path)
    assert name == "constructions.png" and len(saved) == 1
    fig = saved[0]
    shown = [ax for ax in fig.axes if ax.get_visible()]
    titles = [ax.get_title() for ax in shown]
    assert titles == ["truncated-svd (built-in): 2 cells", "l1-refit (built-in): 1 cell",
                      "nystrom (reference): 1 cell", "mine (third-party): 2 cells",
                      "identity (built-in): 1 cell"]
    # 5 panels on a 2 x 4 grid: the 3 empty ones hidden, their x labels moved up
    assert len(fig.axes) == 8 and sum(not ax.get_visible() for ax in fig.axes) == 3
    assert all(ax.get_xscale() == "log" and ax.get_yscale() == "log" for ax in shown)
    svd = shown[0]
    grey, own = svd.collections[:2]
    assert len(grey.get_offsets()) == 7  # every construction's checked points, in grey
    # truncated-svd's two cells sit on one point, drawn once and larger than a single cell
    assert [tuple(p) for p in own.get_offsets()] == [(4.0, 8.0)]
    single = shown[1].collections[1].get_sizes()[0]
    assert own.get_sizes()[0] > single


def test_no_checked_witness_no_plot(monkeypatch, tmp_path):
    rows = [_row(3, [("nystrom", "reference", "declined", None)])]
    assert _saved_figure(monkeypatch, rows, tmp_path) == (None, [])

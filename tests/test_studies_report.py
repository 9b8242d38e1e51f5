"""The studies section of the audit report (softrank.studies.report)."""

from __future__ import annotations

import pytest

from softrank.generators import synthetic
from softrank.studies.report import law_rows, report_studies


def _cell(op_id, family, eps, lower, upper, **kw):
    return {"operator_id": op_id, "family": family, "eps": eps, "lower": lower,
            "upper": upper, "verdict": "open", "source": "", "checkpoint": "", "n": 64,
            **kw}


def test_law_rows_read_beta_from_the_generator_ids():
    g = synthetic.grid(2, n=6, c=0.5)
    s = synthetic.sphere(3, beta=16.0, m=8, N=8, seed=2)
    rows = [_cell(g.operator_id, "grid", 0.25, 3, 5), _cell(s.operator_id, "sphere", 0.1, 4, 9),
            _cell("gaussian-d32-t1-s0", "gaussian_head", 0.1, 1, 2)]
    got = law_rows(rows)
    assert got == {("grid", 2, 0.25): [(0.5 * 25, 3, 5)], ("sphere", 3, 0.1): [(16.0, 4, 9)]}
    assert g.beta == pytest.approx(0.5 * 25)  # the id encodes the generator's beta
    assert s.beta == 16.0


def test_report_section_fits_planted_slopes_and_names_what_it_cannot_run(tmp_path):
    # sphere d = 2 predicts slope 1/2: plant lower = beta^0.5 and upper = 2 beta^0.5
    rows = [_cell(f"sphere-d2-b{b:g}-s0", "sphere", 0.25, int(b ** 0.5), int(2 * b ** 0.5))
            for b in (4.0, 16.0, 64.0, 256.0)]
    lines = report_studies(rows, tmp_path, n_boot=200)
    text = "\n".join(lines)
    assert "| sphere | 2 | 0.25 | 4 | 0.5 | 0.50 [0.50, 0.50] | 0.50 [0.50, 0.50] |" in text
    assert (tmp_path / "studies" / "laws.png").is_file()
    assert text.count("Not run on this panel") == 3  # block width, add-on, descriptor
    assert "learned heads at fewer than 2 widths" in text


@pytest.mark.parametrize("families, blocks", [
    (["minilm-w64"], "on 64-token native blocks"),
    (["minilm-w64", "minilm-w128", "grid"], "on 64-token and 128-token native blocks"),
])
def test_the_seed_paper_comparison_names_only_the_widths_audited(families, blocks):
    """The report's "Where we stand" note names the MiniLM block widths of the run (a quick
    panel holds width 64 only), not a fixed list."""
    from softrank.harness.report import _standing

    st = {"resolved_pct": 0.0, "median_ratio": 1.5}
    text = "\n".join(_standing({"families": {f: {"0.25": st} for f in families}}))
    assert blocks in text
    assert ("128-token" in text) == ("minilm-w128" in families)

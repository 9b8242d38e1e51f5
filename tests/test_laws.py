"""Scaling-law fits (docs/theory/families.md): the slope fit recovers planted power laws."""

import csv

import numpy as np
import pytest

from softrank.errors import InvalidArgumentError
from softrank.harness.cli import main
from softrank.studies.laws import fit_slope


def test_fit_slope_recovers_an_exact_power_law():
    x = np.geomspace(2.0, 200.0, 7)
    f = fit_slope(x, 3.0 * x ** 1.5)
    assert f.slope == pytest.approx(1.5, abs=1e-12)
    assert f.intercept == pytest.approx(np.log(3.0), abs=1e-10)
    assert f.ci_low == pytest.approx(1.5, abs=1e-9) and f.ci_high == pytest.approx(1.5, abs=1e-9)


@pytest.mark.parametrize("expo", [0.5, 1.0, 1.5])
def test_fit_slope_interval_covers_a_noisy_planted_law(expo):
    rng = np.random.default_rng(7)
    x = np.geomspace(4.0, 400.0, 15)
    y = 2.0 * x ** expo * np.exp(0.05 * rng.standard_normal(x.size))
    f = fit_slope(x, y, n_boot=2000, seed=1)
    assert f.ci_low < expo < f.ci_high
    assert f.ci_high - f.ci_low < 0.1
    assert abs(f.slope - expo) < 0.05
    # a wrong exponent is outside the interval
    assert not (f.ci_low < expo + 0.25 < f.ci_high)


def test_fit_slope_errors():
    with pytest.raises(InvalidArgumentError, match="^y"):
        fit_slope([1, 2, 3], [1, 0, 2])
    with pytest.raises(InvalidArgumentError, match="^x, y"):
        fit_slope([1, 2], [1, 2])
    with pytest.raises(InvalidArgumentError, match="^x: needs"):
        fit_slope([2, 2, 2], [1, 2, 3])
    with pytest.raises(InvalidArgumentError, match="^n_boot"):
        fit_slope([1, 2, 3], [1, 2, 3], n_boot=10)


@pytest.mark.geometry("cvxpy", "clarabel")  # the sweeps' kappa by its SDP
def test_laws_cli_quick(tmp_path, capsys):
    out = tmp_path / "laws"
    assert main(["laws", "--quick", "--out", str(out), "--n-boot", "200"]) == 0
    assert (out / "laws.png").stat().st_size > 1000
    rows = list(csv.DictReader(open(out / "laws.csv")))
    assert {r["family"] for r in rows} == {"grid", "sphere"}
    for r in rows:
        assert 1 <= int(r["lower"]) <= int(r["upper"])
        assert float(r["kappa"]) > 0 and float(r["tau"]) < 1e-9  # rank-d part is all of C
    table = (out / "laws.md").read_text()
    assert "| grid | 1 | kappa | 0.5 |" in table and "| sphere | 2 | beta | 0.5 |" in table
    # grid d=1: the rank grows with kappa (the upper end strictly increases along the sweep)
    ups = [int(r["upper"]) for r in rows if r["family"] == "grid"]
    assert ups == sorted(ups) and ups[0] < ups[-1]

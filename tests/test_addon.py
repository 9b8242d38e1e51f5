"""Held-out add-on test (softrank.studies.addon) and its feature blocks."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from softrank.audit.record import read_cells
from softrank.errors import InvalidArgumentError, MalformedRecord
from softrank.studies import addon
from softrank.studies.addon import addon_test, aggregate
from softrank.studies.addon_audit import addon_from_rows, write_addon
from softrank.studies.features import (baseline_features, gauge_diagonal, gauged_native,
                                       native_features)

RIDGE = pytest.mark.geometry("sklearn")  # the add-on test's ridge models and folds


def _planted(seed=1, n_src=24, per=6):
    """y = 0.3 + 0.1 B1_0 + 0.08 S_0 + source effect + noise: S carries signal, N none."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_src), per)
    n = groups.size
    B1 = rng.normal(size=(n, 3))
    S = rng.normal(size=(n, 2))
    N = rng.normal(size=(n, 2))
    y = (0.3 + 0.1 * B1[:, 0] + 0.08 * S[:, 0] + 0.05 * rng.normal(size=n_src)[groups]
         + 0.02 * rng.normal(size=n))
    return y, {"B1": B1, "S": S, "N": N}, groups


@RIDGE
def test_signal_block_gains_and_noise_block_does_not():
    y, blocks, groups = _planted()
    sig, noise = addon_test(y, blocks, groups, [("B1", "S"), ("B1", "N")], n_boot=200)
    assert sig.diff > 0 and sig.diff_ci[0] > 0 and sig.excludes_zero
    assert sig.rel_ci[0] > 0
    assert noise.diff_ci[0] < 0 < noise.diff_ci[1] and not noise.excludes_zero
    assert sig.sources == 24 and sig.operators == 144 and sig.n_boot == 200
    assert sig.mae_base == noise.mae_base  # the same base model, the same folds


@RIDGE
def test_ridge_fit_equals_sklearn_ridge_on_standardised_features():
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X, Xte = rng.normal(size=(40, 5)) * [1, 10, 0.1, 3, 1], rng.normal(size=(7, 5))
    y = rng.normal(size=40)
    got = addon._fit_predict(X, y, Xte, [0.01, 1.0, 100.0])
    for j, a in enumerate([0.01, 1.0, 100.0]):
        ref = make_pipeline(StandardScaler(), Ridge(alpha=a)).fit(X, y).predict(Xte)
        np.testing.assert_allclose(got[:, j], ref, rtol=1e-10, atol=1e-12)


@RIDGE
def test_outer_folds_are_source_disjoint():
    # features: a one-hot of the source, response: a constant per source. A fold that put a
    # source on both sides would predict it almost exactly; source-disjoint folds can only
    # predict the training mean (the held-out source's column is constant 0 in training).
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(10), 4)
    y = rng.normal(size=10)[groups]
    X = np.eye(10)[groups]
    pred = addon._heldout(X, y, groups, addon.ALPHAS, 5, 4)
    from sklearn.model_selection import GroupKFold

    for tr, te in GroupKFold(n_splits=5).split(X, y, groups):
        np.testing.assert_allclose(pred[te], y[tr].mean(), atol=1e-12)


@RIDGE
def test_aggregate_is_the_equal_weight_mean():
    y, blocks, groups = _planted()
    a = addon_test(y, blocks, groups, [("B1", "S")], family="a", n_boot=40)[0]
    y2, b2, g2 = _planted(seed=5)
    b = addon_test(y2, b2, g2, [("B1", "S")], family="b", n_boot=40)[0]
    agg = aggregate([a, b])
    assert agg.diff == pytest.approx((a.diff + b.diff) / 2)
    # relative gain = difference / MAE(base), both averaged over families
    assert agg.rel == pytest.approx((a.diff + b.diff) / (a.mae_base + b.mae_base))
    np.testing.assert_allclose(agg.boot_diff, (a.boot_diff + b.boot_diff) / 2)
    np.testing.assert_allclose(agg.boot_base, (a.boot_base + b.boot_base) / 2)
    assert agg.sources == 24  # both families draw on the same 24 source labels


@RIDGE
def test_permutation_within_heads_and_gauge_sensitivity():
    y, blocks, groups = _planted()
    heads = np.arange(y.size) % 12
    same = {4.0: blocks["S"].copy(), 16.0: blocks["S"] * 3.0}
    res = addon_test(y, blocks, groups, [("B1", "S")], n_boot=20, perm_groups=heads,
                     n_perm=5, gauge_blocks=same, resolution=np.full(y.size, 0.01))[0]
    # S permuted within heads carries no operator-level signal any more
    assert res.perm_diff < res.diff / 2
    assert res.gauge[4.0]["median_shift"] == pytest.approx(0.0, abs=1e-9)
    assert res.gauge[16.0]["share_beyond"] > 0.5
    # heads of one operator each: the permutation is the identity and is not reported
    res1 = addon_test(y, blocks, groups, [("B1", "S")], n_boot=20,
                      perm_groups=np.arange(y.size))[0]
    assert np.isnan(res1.perm_diff)


@pytest.mark.parametrize("kw, name", [
    ({"groups": np.repeat(np.arange(3), 10)}, "groups"),
    ({"n_boot": 5}, "n_boot"),
    ({"comparisons": [("B1", "X")]}, "comparisons"),
    ({"blocks": {"B1": np.ones((7, 2)), "S": np.ones((30, 1))}}, "blocks"),
])
def test_bad_input_names_the_argument(kw, name):
    rng = np.random.default_rng(0)
    args = {"y": rng.normal(size=30), "blocks": {"B1": rng.normal(size=(30, 2)),
                                                 "S": rng.normal(size=(30, 1))},
            "groups": np.repeat(np.arange(6), 5), "comparisons": [("B1", "S")], "n_boot": 20}
    args.update(kw)
    with pytest.raises(InvalidArgumentError, match=name):
        addon_test(args.pop("y"), args.pop("blocks"), args.pop("groups"), **args)


def test_baseline_features_hand_worked():
    f = baseline_features(np.eye(4), 0.25)  # every row needs its own rank
    assert f == pytest.approx({"b1_tsvd": 1.0, "b1_stable": 1.0, "b1_erank": 1.0,
                               "b1_entropy": 0.0, "b1_peak": 1.0})
    u = baseline_features(np.full((4, 4), 0.25), 0.25)  # rank 1, maximal entropy
    assert u == pytest.approx({"b1_tsvd": 0.25, "b1_stable": 0.25, "b1_erank": 0.25,
                               "b1_entropy": 1.0, "b1_peak": 0.25})
    with pytest.raises(InvalidArgumentError, match="eps"):
        baseline_features(np.eye(3), 0.0)


def test_tsvd_rank_is_the_least_rank_although_the_error_is_not_monotone():
    A = np.array([[0.12, 0.54, 0.33, 0.01], [0.32, 0.31, 0.18, 0.19], [0.08, 0.26, 0.23, 0.43],
                  [26, 54, 1, 20], [20, 25, 46, 8]], dtype=float)
    A /= A.sum(axis=1, keepdims=True)
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    errs = [np.abs(A - (U[:, :k] * s[:k]) @ Vt[:k]).sum(axis=1).max() for k in range(5)]
    assert errs[1] <= 0.5 < errs[2]  # rank 1 is within 0.5, rank 2 is not
    assert baseline_features(A, 0.5)["b1_tsvd"] * 4 == 1
    least = next(k for k, e in enumerate(errs) if e <= 0.3)
    assert baseline_features(A, 0.3)["b1_tsvd"] * 4 == least


def test_feature_functions_refuse_bad_input():
    from softrank.errors import InvalidOperatorError

    with pytest.raises(InvalidOperatorError):
        baseline_features(np.full((3, 3), 5.0), 0.25)  # not row-stochastic
    with pytest.raises(InvalidArgumentError, match="Q, K"):
        gauged_native(np.ones((4, 3)), np.ones((4, 2)), 1.0)
    with pytest.raises(InvalidArgumentError, match="rho_Q"):
        native_features(float("nan"), 1.0, 1.0, [1.0], [1.0])


@pytest.mark.parametrize("kw, name", [
    ({"outer": 1}, "outer"), ({"inner": 1}, "inner"), ({"alphas": []}, "alphas"),
    ({"alphas": [-1.0]}, "alphas"), ({"comparisons": []}, "comparisons"),
    ({"perm_groups": np.arange(5)}, "perm_groups"), ({"probe": "X", "perm_groups": np.arange(30)}, "probe"),
])
def test_addon_test_refuses_bad_settings(kw, name):
    rng = np.random.default_rng(0)
    args = {"comparisons": [("B1", "S")], "n_boot": np.int64(20), **kw}
    with pytest.raises(InvalidArgumentError, match=name):
        addon_test(rng.normal(size=30), {"B1": rng.normal(size=(30, 2)),
                                         "S": rng.normal(size=(30, 1))},
                   np.repeat(np.arange(6), 5), **args)
    with pytest.raises(InvalidArgumentError, match="groups"):
        addon_test(rng.normal(size=30), {"B1": rng.normal(size=(30, 2)),
                                         "S": rng.normal(size=(30, 1))},
                   np.array([np.nan] * 30), [("B1", "S")], n_boot=20)


def test_gauges_keep_the_logits_and_move_native_geometry():
    rng = np.random.default_rng(0)
    Q, K = rng.normal(size=(16, 8)), rng.normal(size=(20, 8))
    for c in (4.0, 16.0):
        S = gauge_diagonal(8, c)
        assert S.max() / S.min() == pytest.approx(c)
        np.testing.assert_allclose((Q * S) @ (K / S).T, Q @ K.T, atol=1e-12)
    g = gauged_native(Q, K, 0.5)
    rq, rk = np.linalg.norm(Q, axis=1).max(), np.linalg.norm(K, axis=1).max()
    g0 = native_features(rq, rk, 0.5 * rq * rk, np.linalg.svd(Q, compute_uv=False),
                         np.linalg.svd(K, compute_uv=False))
    assert set(g[4.0]) == set(g0)
    for c in (4.0, 16.0):  # native geometry moves under a gauge that keeps A
        assert abs(g[c]["g_log_rho_Q"] - g0["g_log_rho_Q"]) > 0.05


def _rows(n_src=8, heads=2):
    """Audit-like learned-head rows whose response follows B1's truncated-SVD rank."""
    rng = np.random.default_rng(0)
    rows = []
    for s in range(n_src):
        for h in range(heads):
            t = rng.uniform(0.1, 0.5)
            g = {k: float(v) for k, v in zip(
                ("g_log_rho_Q", "g_log_rho_K", "g_log_Gamma", "g_log_spectral", "g_stable_Q",
                 "g_stable_K"), rng.normal(size=6))}
            rows.append({"operator_id": f"x-{s}-{h}", "family": "fam", "source": f"s{s}",
                         "checkpoint": "/ck", "layer": 0, "head": h, "m": 64, "n": 64,
                         "eps": 0.25, "verdict": "open", "lower": 1,
                         "upper": int(round(64 * t)), "rho_Q": rng.uniform(1, 3),
                         "rho_K": rng.uniform(1, 3), "Gamma": rng.uniform(1, 5),
                         "sv_Q": "3 2 1", "sv_K": "2 1 0.5", "b1_tsvd": t,
                         "b1_stable": rng.uniform(), "b1_erank": rng.uniform(),
                         "b1_entropy": rng.uniform(), "b1_peak": rng.uniform(),
                         "gauge_native": json.dumps({"4": g, "16": g})})
    return read_cells(rows)


@RIDGE
def test_addon_from_rows_and_report_files(tmp_path):
    rows = _rows()
    rows.append({**rows[0], "eps": 0.1})  # other tolerances are ignored
    res, skipped = addon_from_rows(rows, n_boot=40, n_perm=3)
    assert [(r.base, r.added) for r in res] == [("B1", "G"), ("B0", "G")]
    assert res[0].operators == 16 and res[0].sources == 8
    assert skipped == ["fam: D not tested, 16 cells lack a finite intrinsic descriptor"]
    assert res[0].mae_base < 0.02  # B1 holds the response up to rounding to whole ranks
    paths = write_addon(res, skipped, tmp_path)
    md = (tmp_path / "addon.md").read_text()
    assert "B1 against B1 + G" in md and "Gauge sensitivity" in md
    assert all(p.is_file() for p in paths)
    # with the intrinsic descriptor in every cell, D is tested against B1 as well
    rng = np.random.default_rng(1)
    rows_d = [{**r, "int_logq": rng.uniform(10, 80), "int_kappa": rng.uniform(1, 9),
               "int_r": rng.integers(5, 30), "int_tau": rng.uniform(0, 0.1)} for r in rows]
    res_d, _ = addon_from_rows(rows_d, n_boot=40, n_perm=3)
    assert [(r.base, r.added) for r in res_d] == [("B1", "G"), ("B0", "G"), ("B1", "D")]
    assert res_d[2].gauge == {} and np.isnan(res_d[2].perm_diff)  # D is gauge-invariant
    assert res_d[0].diff == res[0].diff  # same folds, same G comparison
    few, skipped = addon_from_rows(_rows(n_src=3, heads=4), n_boot=40)
    assert few == [] and "3 sources" in skipped[0]
    with pytest.raises(InvalidArgumentError, match="rows"):
        addon_from_rows([{**r, "checkpoint": ""} for r in rows], n_boot=40)


@pytest.mark.models
@RIDGE
def test_cli_studies_on_minilm_heads(tmp_path):
    """`study descriptor` audits 8 MiniLM heads (4 heads x 2 sources); `study addon --from`
    reuses that audit."""
    import csv

    from softrank.harness.cli import main

    out = tmp_path / "d"
    assert main(["study", "descriptor", "--widths", "16", "--layers", "0", "--heads", "0", "1",
                 "2", "3", "--sources-per-head", "2", "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out / "audit" / "brackets.csv")))
    assert len(rows) == 8 and len({r["source"] for r in rows}) == 8
    assert all(r["int_logq"] and r["b1_tsvd"] and r["gauge_native"] for r in rows)
    assert "| minilm-w16 | 0.25 | 8 | 8 |" in (out / "descriptor.md").read_text()
    assert main(["study", "addon", "--from", str(out / "audit"), "--out", str(tmp_path / "a")]) == 0
    md = (tmp_path / "a" / "addon.md").read_text()
    assert "| minilm | 8 | 8 |" in md and "1000 source-cluster bootstrap refits" in md
    assert "B1 against B1 + D" in md
    with pytest.raises(SystemExit):  # fewer than 1000 refits is refused
        main(["study", "addon", "--n-boot", "50", "--out", str(tmp_path / "c")])


def test_study_cli_checks_arguments_before_running(tmp_path, capsys):
    from softrank.harness.cli import main

    audit = tmp_path / "audit"
    audit.mkdir()
    (audit / "brackets.csv").write_text("a,b\n1,2\n")
    out = tmp_path / "never"
    for argv, msg in (
            (["study", "descriptor", "--from", str(audit)], "not an audit's brackets.csv"),
            (["study", "addon", "--from", str(audit), "--heads", "1"], "--heads: not used with --from"),
            (["study", "addon", "--widths", "16", "--layers", "0", "--heads", "0", "1", "2"],
             "needs >= 8 operators from >= 6 sources"),
            (["study", "descriptor", "--widths", "16", "--layers", "0", "--heads", "0", "1"],
             "needs >= 6 operators per width"),
            (["study", "addon", "--heads", "12"], "--heads: MiniLM has heads 0..11")):
        assert main(argv + ["--out", str(out)]) == 2
        assert msg in capsys.readouterr().err
        assert not out.exists()  # nothing written for a refused selection


def test_malformed_cells_are_named(tmp_path):
    rows = _rows()
    for k, v in (("sv_Q", "1.0 abc"), ("b1_stable", ""),
                 ("gauge_native", json.dumps({"4": {}}))):
        bad = [dict(r) for r in rows]
        bad[3][k] = v
        with pytest.raises(InvalidArgumentError, match="x-1-1"):
            addon_from_rows(read_cells(bad), n_boot=20)
    # a value that is not softrank's record is refused when the cell is read
    for k, v, msg in (("upper", "2.5", "upper '2.5' is not an integer"),
                      ("gauge_native", "{not json", "gauge_native: not softrank's record")):
        bad = [dict(r) for r in rows]
        bad[3][k] = v
        with pytest.raises(MalformedRecord, match=re.escape(msg)):
            read_cells(bad)

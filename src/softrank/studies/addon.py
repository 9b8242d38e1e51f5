"""Held-out add-on test (docs/theory/studies.md#held-out-add-on-test): does native query/key geometry predict the certified upper
budget beyond a calibrated baseline?

Response: the upper end of the bracket at ``eps = 0.25`` over ``min(m, N)``. Feature blocks
(:mod:`softrank.studies.features`): **B0** size and tolerance, **B1** a calibrated,
gauge-invariant baseline from ``A`` alone, **G** native geometry. Per family:

* ridge models (the fit of scikit-learn's ``Ridge`` on features standardised with the
  training part's mean and standard deviation, by one SVD for every penalty) for ``base``
  and ``base + added``;
* **source-disjoint outer folds** (``GroupKFold`` by source, 5 folds) give every operator a
  held-out prediction; the ridge penalty is tuned inside each outer training part by an
  **inner** ``GroupKFold`` grouped by source (4 folds, mean absolute error, penalties
  ``10^-3 .. 10^3``);
* the statistic is the held-out mean absolute error difference ``MAE(base) -
  MAE(base + added)`` (positive: the added block helps) and the relative gain
  ``difference / MAE(base)``;
* 95 % intervals from **source-cluster bootstrap refits**: sources are drawn with
  replacement and the whole procedure (outer folds and inner tuning) is re-run on each
  draw (copies of a source stay in one fold, so no source is ever on both sides);
* the **equal-weight aggregate** averages the family statistics, replicate by replicate;
* **within-head permutation** of the added block (rows of one head permuted among
  themselves) keeps the head-level structure and breaks the operator-level one;
* beside G, the intrinsic descriptor block **D** (``log q``, ``log(1 + kappa)``,
  ``r / min(m, N)``, ``tau``; gauge-invariant) is tested the same way against B1: the
  seed paper never extracted it on learned heads;
* **gauge sensitivity**: the full model, fitted on all operators, is frozen and fed ``G``
  recomputed under diagonal gauges of condition ratio 4 and 16 (``A`` unchanged); its
  predictions move by ``|delta|``, set against the resolution scale ``1 / min(m, N)`` (one
  rank on the response's scale).

The test on an audit's cells and its files (``addon.csv``, ``addon.md``, ``addon.png``) are
in :mod:`softrank.studies.addon_audit`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidArgumentError
from ..validation import check_int

__all__ = ["ALPHAS", "Comparison", "addon_test", "aggregate", "RESPONSE_EPS", "MIN_SOURCES"]

ALPHAS = np.logspace(-3, 3, 13)
RESPONSE_EPS = 0.25
MIN_SOURCES = 6  # sources a family needs
MIN_DRAWN = 3  # distinct sources a bootstrap draw needs (folds, and inner tuning in them)


@dataclass
class Comparison:
    """One comparison ``base`` against ``base + added`` in one family (or the aggregate)."""

    family: str
    base: str
    added: str
    operators: int
    sources: int
    mae_base: float
    mae_full: float
    diff: float
    diff_ci: tuple
    rel: float
    rel_ci: tuple
    n_boot: int
    perm_diff: float = float("nan")
    perm_ci: tuple = (float("nan"), float("nan"))
    gauge: dict = field(default_factory=dict)
    boot_diff: np.ndarray = field(default=None, repr=False)
    boot_base: np.ndarray = field(default=None, repr=False)
    source_labels: frozenset = field(default=frozenset(), repr=False)

    @property
    def excludes_zero(self) -> bool:
        return self.diff_ci[0] > 0 or self.diff_ci[1] < 0


def _ratio(diff, base) -> np.ndarray:
    """Relative gains ``diff / base`` of bootstrap replicates (replicates with a zero base
    MAE have no relative gain and are left out)."""
    ok = base > 0
    return diff[ok] / base[ok]


def _standardise(Xtr, Xte):
    mu = Xtr.mean(axis=0)
    sd = Xtr.std(axis=0)
    sd[sd == 0] = 1.0
    return (Xtr - mu) / sd, (Xte - mu) / sd  # centred: the intercept is the mean response


def _fit_predict(Xtr, ytr, Xte, alphas):
    """Held-out predictions ``(n_te, len(alphas))`` of ridge models with an intercept, one per
    penalty, on the training part centred and scaled: one SVD ``X = U S V^T`` of the
    training features serves every penalty, ``coef = V diag(s / (s^2 + alpha)) U^T y``
    (singular values below 1e-15 dropped, as scikit-learn's ``svd`` solver does; the same
    fit as ``Ridge(alpha)`` on standardised features, checked in the tests). The ridge
    itself is a few lines here because scikit-learn's per-call overhead was most of the
    cost of the tens of thousands of small fits of the bootstrap."""
    from scipy.linalg import svd

    alphas = np.atleast_1d(np.asarray(alphas, dtype=np.float64))
    Xtr, Xte = _standardise(Xtr, Xte)
    ym = ytr.mean()
    U, s, Vt = svd(Xtr, full_matrices=False, check_finite=False)
    keep = s > 1e-15
    s, U, Vt = s[keep], U[:, keep], Vt[keep]
    d = s[:, None] / (s[:, None] ** 2 + alphas[None, :])  # (rank, penalties)
    coef = Vt.T @ (d * (U.T @ (ytr - ym))[:, None])  # (p, penalties)
    return Xte @ coef + ym


def _group_folds(groups, n_splits):
    """``GroupKFold(n_splits)`` train/test index pairs of ``groups`` (a list)."""
    from sklearn.model_selection import GroupKFold

    return list(GroupKFold(n_splits=n_splits).split(np.zeros((groups.size, 1)), None, groups))


def _inner_folds(groups, inner):
    """The inner tuning folds of one training part, or None when it has fewer than two
    sources (then the largest penalty is used)."""
    k = min(inner, np.unique(groups).size)
    return None if k < 2 else _group_folds(groups, k)


def _tune_on(X, y, folds, alphas):
    """Penalty with the least grouped-CV mean absolute error over ``folds`` (ties: the
    larger); the largest penalty when ``folds`` is None."""
    if folds is None:
        return float(alphas[-1])
    err = np.zeros(len(alphas))
    for tr, te in folds:
        err += np.abs(_fit_predict(X[tr], y[tr], X[te], alphas) - y[te, None]).sum(axis=0)
    best = np.flatnonzero(err <= err.min() * (1 + 1e-12))
    return float(alphas[best[-1]])


def _tune(X, y, groups, alphas, inner):
    """Penalty with the least inner grouped-CV mean absolute error (ties: the larger)."""
    return _tune_on(X, y, _inner_folds(groups, inner), alphas)


def _nested_folds(groups, outer, inner):
    """The outer source-disjoint folds, each with its inner tuning folds: computed once per
    draw and shared by every model fitted on it (they depend on the sources only)."""
    out = []
    for tr, te in _group_folds(groups, min(outer, np.unique(groups).size)):
        out.append((tr, te, _inner_folds(groups[tr], inner)))
    return out


def _heldout(X, y, groups, alphas, outer, inner, folds=None):
    """Source-disjoint held-out predictions with grouped inner tuning (``folds``: those of
    :func:`_nested_folds` for ``groups``, computed here when not given)."""
    pred = np.empty_like(y)
    for tr, te, inner_folds in folds or _nested_folds(groups, outer, inner):
        a = _tune_on(X[tr], y[tr], inner_folds, alphas)
        pred[te] = _fit_predict(X[tr], y[tr], X[te], [a])[:, 0]
    return pred


def _maes(models, y, groups, alphas, outer, inner):
    folds = _nested_folds(groups, outer, inner)
    return {name: float(np.abs(_heldout(X, y, groups, alphas, outer, inner, folds) - y).mean())
            for name, X in models.items()}


def _check_inputs(y, blocks, groups, comparisons):
    if not comparisons:
        raise InvalidArgumentError("comparisons: expected at least one (base, added) pair")
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1 or y.size < 8 or not np.isfinite(y).all():
        raise InvalidArgumentError(f"y: expected a finite 1-D array of >= 8 responses, got "
                                   f"shape {y.shape}")
    groups = np.asarray(groups)
    if groups.shape != y.shape:
        raise InvalidArgumentError(f"groups: expected shape {y.shape}, got {groups.shape}")
    if groups.dtype.kind not in "iuU" and not (
            groups.dtype.kind == "f" and np.isfinite(groups).all()):
        raise InvalidArgumentError(f"groups: expected source labels (strings or integers), "
                                   f"got dtype {groups.dtype}")
    if np.unique(groups).size < MIN_SOURCES:
        raise InvalidArgumentError(f"groups: source-disjoint folds need >= {MIN_SOURCES} "
                                   f"sources, got {np.unique(groups).size}")
    out = {}
    for name, X in blocks.items():
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X[:, None]
        if X.ndim != 2 or X.shape[0] != y.size or not np.isfinite(X).all():
            raise InvalidArgumentError(f"blocks[{name!r}]: expected a finite ({y.size}, p) "
                                       f"array, got shape {X.shape}")
        out[name] = X
    for base, added in comparisons:
        for b in (base, added):
            if b not in out:
                raise InvalidArgumentError(f"comparisons: block {b!r} not in blocks "
                                           f"{sorted(out)}")
    return y, out, groups


def addon_test(y, blocks: dict, groups, comparisons=(("B1", "G"), ("B0", "G")), *,
               family: str = "", n_boot: int = 1000, perm_groups=None, n_perm: int = 20,
               gauge_blocks: dict | None = None, resolution=None, probe: str | None = None,
               alphas=ALPHAS, outer: int = 5, inner: int = 4,
               seed: int = 0) -> list[Comparison]:
    """The held-out add-on test of one family (module docstring).

    Parameters
    ----------
    y : (n,) array
        Response (the upper end over ``min(m, N)``).
    blocks : dict name -> (n, p) array
        Feature blocks, e.g. ``{"B0": ..., "B1": ..., "G": ...}``.
    groups : (n,) array
        Source of each operator: folds and bootstrap clusters never split a source.
    comparisons : sequence of (base, added) block names
    n_boot : int >= 20
        Source-cluster bootstrap refits (the study uses >= 1000).
    perm_groups : (n,) array, optional
        Head of each operator: the added block is permuted within heads ``n_perm`` times.
    gauge_blocks : dict ratio -> (n, p) array, optional
        The ``probe`` block recomputed under gauges; needs ``resolution`` (``(n,)``, the
        response's resolution scale, ``1 / min(m, N)``).
    probe : str, optional
        The added block that is permuted and gauged (default: the first comparison's).
    alphas, outer, inner, seed :
        Ridge penalties, outer and inner folds, bootstrap/permutation seed.

    Returns
    -------
    list of :class:`Comparison`, one per comparison.

    Raises
    ------
    InvalidArgumentError
        Naming ``y``, ``groups``, ``blocks[...]``, ``comparisons``, ``n_boot`` or
        ``gauge_blocks``.
    """
    check_int(n_boot, "n_boot", 20)
    check_int(n_perm, "n_perm", 1)
    check_int(outer, "outer (folds)", 2)
    check_int(inner, "inner (folds)", 2)
    alphas = np.atleast_1d(np.asarray(alphas, dtype=np.float64))
    if alphas.ndim != 1 or alphas.size == 0 or not (np.isfinite(alphas) & (alphas > 0)).all():
        raise InvalidArgumentError(f"alphas: expected finite penalties > 0, got {alphas!r}")
    y, blocks, groups = _check_inputs(y, blocks, groups, comparisons)
    comparisons = [tuple(c) for c in comparisons]
    probe = comparisons[0][1] if probe is None else probe
    if (perm_groups is not None or gauge_blocks) and probe not in {a for _, a in comparisons}:
        raise InvalidArgumentError(f"probe: {probe!r} is not an added block of comparisons "
                                   f"{comparisons}")
    if perm_groups is not None:
        heads = np.asarray(perm_groups)
        if heads.shape != y.shape or (heads.dtype.kind == "f" and not np.isfinite(heads).all()):
            raise InvalidArgumentError(f"perm_groups: expected {y.size} finite head labels, got "
                                       f"shape {heads.shape}")
    if gauge_blocks:
        res = np.asarray(resolution if resolution is not None else [], dtype=np.float64)
        if res.shape != y.shape or not (np.isfinite(res) & (res > 0)).all():
            raise InvalidArgumentError(f"resolution: expected {y.size} finite values > 0 with "
                                       f"gauge_blocks (1 / min(m, N)), got shape {res.shape}")
        for ratio, Xg in gauge_blocks.items():
            Xg = np.asarray(Xg, dtype=np.float64)
            if Xg.shape != blocks[probe].shape or not np.isfinite(Xg).all():
                raise InvalidArgumentError(f"gauge_blocks[{ratio!r}]: expected a finite array "
                                           f"of shape {blocks[probe].shape}, got {Xg.shape}")
    try:
        import sklearn
    except ImportError as exc:
        raise InvalidArgumentError("solver: the add-on test needs scikit-learn; install "
                                   "softrank[geometry]") from exc
    # the inputs were validated above: skip scikit-learn's per-call parameter validation,
    # which is most of the cost of tens of thousands of small ridge fits
    with sklearn.config_context(skip_parameter_validation=True, assume_finite=True):
        return _addon_test(y, blocks, groups, comparisons, family, int(n_boot), perm_groups,
                           int(n_perm), gauge_blocks, resolution, probe, alphas, int(outer),
                           int(inner), seed)


def _addon_test(y, blocks, groups, comparisons, family, n_boot, perm_groups, n_perm,
                gauge_blocks, resolution, probe, alphas, outer, inner, seed):

    def models(B, idx=None):
        sel = (lambda X: X) if idx is None else (lambda X: X[idx])
        out = {}
        for base, added in comparisons:
            out[base] = sel(B[base])
            out[f"{base}+{added}"] = np.hstack([sel(B[base]), sel(B[added])])
        return out

    point = _maes(models(blocks), y, groups, alphas, outer, inner)
    srcs = np.unique(groups)
    members = {s: np.flatnonzero(groups == s) for s in srcs}
    rng = np.random.default_rng(seed)
    boot = {c: ([], []) for c in comparisons}
    while len(boot[comparisons[0]][0]) < n_boot:
        draw = rng.choice(srcs, size=srcs.size, replace=True)
        if np.unique(draw).size < MIN_DRAWN:
            continue  # too few distinct sources to form source-disjoint folds (rare)
        idx = np.concatenate([members[s] for s in draw])
        mae = _maes(models(blocks, idx), y[idx], groups[idx], alphas, outer, inner)
        for base, added in comparisons:
            boot[(base, added)][0].append(mae[base] - mae[f"{base}+{added}"])
            boot[(base, added)][1].append(mae[base])
    results = []
    for base, added in comparisons:
        bd, bb = np.array(boot[(base, added)][0]), np.array(boot[(base, added)][1])
        br = _ratio(bd, bb)
        mb, mf = point[base], point[f"{base}+{added}"]
        c = Comparison(family=family, base=base, added=added, operators=int(y.size),
                       sources=int(srcs.size), mae_base=mb, mae_full=mf, diff=mb - mf,
                       diff_ci=tuple(np.quantile(bd, [0.025, 0.975]).tolist()),
                       rel=(mb - mf) / mb if mb > 0 else 0.0,
                       rel_ci=tuple(np.quantile(br, [0.025, 0.975]).tolist()),
                       n_boot=int(bd.size), boot_diff=bd, boot_base=bb,
                       source_labels=frozenset(srcs.tolist()))
        if added == probe and perm_groups is not None and _shared_heads(perm_groups):
            c.perm_diff, c.perm_ci = _permuted(y, blocks, groups, base, added, mb,
                                               np.asarray(perm_groups), n_perm, alphas, outer,
                                               inner, seed)
        if added == probe and gauge_blocks:
            c.gauge = _gauge_sensitivity(y, blocks, groups, base, added, gauge_blocks,
                                         resolution, alphas, inner)
        results.append(c)
    return results


def _shared_heads(heads) -> bool:
    """Whether some head has two or more operators (else a within-head permutation is the
    identity and is not reported)."""
    _, counts = np.unique(np.asarray(heads), return_counts=True)
    return bool((counts > 1).any())


def _permuted(y, blocks, groups, base, added, mb, heads, n_perm, alphas, outer, inner, seed):
    """Mean and 95 % range of ``MAE(base) - MAE(base + added permuted within heads)``;
    ``mb`` is the held-out ``MAE(base)`` (inputs validated by :func:`addon_test`)."""
    rng = np.random.default_rng(seed + 1)
    Xb, Xa = blocks[base], blocks[added]
    diffs = []
    for _ in range(n_perm):
        perm = np.arange(y.size)
        for h in np.unique(heads):
            i = np.flatnonzero(heads == h)
            perm[i] = rng.permutation(i)
        mf = _maes({"f": np.hstack([Xb, Xa[perm]])}, y, groups, alphas, outer, inner)["f"]
        diffs.append(mb - mf)
    diffs = np.array(diffs)
    return float(diffs.mean()), tuple(np.quantile(diffs, [0.025, 0.975]).tolist())


def _gauge_sensitivity(y, blocks, groups, base, added, gauge_blocks, resolution, alphas, inner):
    """Shifts of the frozen ``base + added`` model's predictions when ``added`` is replaced
    by its gauged versions, in units of ``resolution`` (inputs validated by
    :func:`addon_test`)."""
    res = np.asarray(resolution, dtype=np.float64)
    X = np.hstack([blocks[base], blocks[added]])
    a = _tune(X, y, groups, alphas, inner)
    p0 = _fit_predict(X, y, X, [a])[:, 0]
    out = {}
    for ratio, Xg in gauge_blocks.items():
        Xg = np.asarray(Xg, dtype=np.float64)
        p1 = _fit_predict(X, y, np.hstack([blocks[base], Xg]), [a])[:, 0]
        moved = np.abs(p1 - p0) / res
        out[float(ratio)] = {"median_shift": float(np.median(moved)),
                             "max_shift": float(moved.max()),
                             "share_beyond": float((moved > 1).mean())}
    return out


def aggregate(results: list[Comparison]) -> Comparison:
    """Equal-weight aggregate of one comparison over families: the mean of the family
    differences and of the family base MAEs, and the relative gain as their ratio (the
    table's definition), replicate by replicate for the interval. Families are resampled
    independently (strata); ``sources`` counts distinct source labels over the families."""
    if not results:
        raise InvalidArgumentError("results: empty")
    n = min(r.boot_diff.size for r in results)
    bd = np.mean([r.boot_diff[:n] for r in results], axis=0)
    bb = np.mean([r.boot_base[:n] for r in results], axis=0)
    br = _ratio(bd, bb)
    r0 = results[0]
    mb = float(np.mean([r.mae_base for r in results]))
    diff = float(np.mean([r.diff for r in results]))
    perms = [r.perm_diff for r in results if np.isfinite(r.perm_diff)]
    return Comparison(
        family="aggregate (equal weight)", base=r0.base, added=r0.added,
        operators=sum(r.operators for r in results),
        sources=len(frozenset().union(*(r.source_labels for r in results))),
        mae_base=mb, mae_full=float(np.mean([r.mae_full for r in results])), diff=diff,
        diff_ci=tuple(np.quantile(bd, [0.025, 0.975]).tolist()),
        rel=diff / mb if mb > 0 else 0.0,
        rel_ci=tuple(np.quantile(br, [0.025, 0.975]).tolist()) if br.size else (np.nan, np.nan),
        n_boot=n, perm_diff=float(np.mean(perms)) if len(perms) == len(results) else np.nan,
        boot_diff=bd, boot_base=bb)

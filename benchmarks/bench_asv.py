"""asv benchmarks: time, peak memory and tightness of every certifier and of the checker.

Operators: Gaussian-factor heads ``softmax(beta Q K^T)`` (``d = 32``, temperature 2,
seed 0) at sizes ``n x n``, ``n`` in ``SOFTRANK_BENCH_SIZES`` (default 64, 128, 256, 512),
and eps 0.25. Constructions run as the bracket runs them: the least rank between a
certified lower bound and the truncated SVD's rank. ``track_*`` values are gaps
(``upper - lower``): asv treats smaller as better. MiniLM heads are captured once per
session in ``setup_cache`` (model loading is expensive).

Run with ``make bench``; compare two commits with ``asv continuous -E existing A B`` (see
README).
"""

import os

import numpy as np

EPS = 0.25
SIZES = [int(s) for s in os.environ.get("SOFTRANK_BENCH_SIZES", "64,128,256,512").split(",")]


def _operator(n):
    from softrank.generators.synthetic import gaussian_head

    return gaussian_head(n, n, 32, 2.0, seed=0)


def _minilm_heads() -> dict:
    """``{"minilm-w64-L0H0": A, "minilm-w128-L0H0": A}``: layer 0, head 0 of MiniLM on the
    first stdlib source at widths 64 and 128, for a ``setup_cache`` (model loading: once per
    benchmark session); empty without the [models] extra, whose cases are then skipped."""
    try:  # torch and transformers are imported when the model loads, not here
        from softrank.generators.heads import minilm_operators
        from softrank.generators.text import stdlib_sources

        src = stdlib_sources(8)
        return {f"minilm-w{w}-L0H0": minilm_operators(w, [(0, 0, src[0])])[0].A
                for w in (64, 128)}
    except ImportError:
        return {}


def _named(ops: dict, name: str) -> np.ndarray:
    """``ops[name]``; a case whose operator ``setup_cache`` could not build is skipped."""
    if name not in ops:
        raise NotImplementedError(f"{name}: needs the [models] extra")
    return ops[name]


class _Base:
    params = ([], SIZES)
    timeout = 3600
    number = 1
    repeat = (1, 3, 60.0)
    warmup_time = 0.0

    def setup(self, name, n):
        self.A = _operator(n).A
        self.svd = np.linalg.svd(self.A, full_matrices=False)


class Constructions(_Base):
    """Each construction's least-rank search (docs/theory/witnesses.md)."""

    params = (["truncated-svd", "l1-refit", "row-basis", "alternating-l1", "key-support",
               "hybrid"], SIZES)
    param_names = ["construction", "n"]

    def setup(self, name, n):
        from softrank.certifiers import lower as lo_
        from softrank.certifiers import upper as up_

        super().setup(name, n)
        self.hi = up_.TruncatedSVD(self.A, self.svd).least_rank(EPS).rank
        kg = lo_.key_groups(self.A, EPS)
        self.lo = kg.rank if kg is not None else 1

    def _run(self, name):
        from softrank.certifiers import lower as lo_
        from softrank.certifiers import upper as up_

        A, svd, lo, hi = self.A, self.svd, self.lo, self.hi
        if name == "key-support":
            w = up_.key_support(A, EPS)
        else:  # every search: least_rank(eps, lo, hi) -> the witness, or None
            con = {"truncated-svd": lambda: up_.TruncatedSVD(A, svd),
                   "hybrid": lambda: up_.Hybrid(A),
                   "l1-refit": lambda: up_.L1Refit(A, svd[2]),
                   "row-basis": lambda: up_.L1Refit(A, A[lo_.row_order(A)], "row-basis"),
                   "alternating-l1": lambda: up_.AlternatingL1(A, svd)}[name]()
            w = con.least_rank(EPS, 1, None) if name == "truncated-svd" else \
                con.least_rank(EPS, lo, hi)
        return None if w is None else w.rank

    def time_least_rank(self, name, n):
        self._run(name)

    def peakmem_least_rank(self, name, n):
        self._run(name)

    def track_rank_over_lower(self, name, n):
        k = self._run(name)
        return (self.hi if k is None else k) - self.lo


class LowerFamilies(_Base):
    """Each lower-certificate family (docs/theory/lower.md)."""

    params = (["trivial", "frobenius", "key-groups", "truncated-pseudoinverse", "lp-decoder-blocks2",
               "subspace"], SIZES)
    param_names = ["family", "n"]

    def _run(self, name):
        from softrank import Operator
        from softrank.certifiers.registry import LOWER_TESTS

        return LOWER_TESTS[name].certify(Operator(A=self.A), EPS)

    def time_certificate(self, name, n):
        self._run(name)

    def peakmem_certificate(self, name, n):
        self._run(name)

    def track_gap_to_tsvd(self, name, n):
        from softrank.certifiers.upper import TruncatedSVD

        c = self._run(name)
        return TruncatedSVD(self.A, self.svd).least_rank(EPS).rank - (0 if c is None else c)


class WeightedSolves:
    """The reweighted least-squares step shared by the alternating l1 and the screening
    (:func:`softrank.certifiers.linalg.weighted_solves`): ``n`` weighted ``k x k`` systems
    on a seeded ``X (k, n)``, as one half-step of the alternating l1 on an ``n x n`` matrix
    at rank ``k`` (docs/theory/witnesses.md#alternating-l1)."""

    params = ([10, 32, 100], [128, 512])
    param_names = ["k", "n"]
    number = 1
    repeat = (3, 10, 30.0)

    def setup(self, k, n):
        rng = np.random.default_rng(0)
        self.X = rng.standard_normal((k, n))
        self.wt = 1.0 / np.maximum(np.abs(rng.standard_normal((n, n))), 1e-6)
        self.B = rng.standard_normal((n, k))

    def time_weighted_solves(self, k, n):
        from softrank.certifiers.linalg import weighted_solves

        weighted_solves(self.X, self.wt, self.B)


class ReweightedStepByCG:
    """The same half-step at ranks above ``EXACT_MAX_RANK``, by ten conjugate-gradient steps
    from a start (:func:`softrank.certifiers.linalg.weighted_cg`), beside the exact solves of
    the same systems: their ratio is what the conjugate gradients save per half-step
    (docs/theory/witnesses.md#alternating-l1, "Reweighted steps by conjugate gradients")."""

    params = ([100, 300, 600], [512, 1024])
    param_names = ["k", "n"]
    number = 1
    repeat = (3, 10, 60.0)

    def setup(self, k, n):
        rng = np.random.default_rng(0)
        self.X = rng.standard_normal((k, n))
        self.wt = 1.0 / np.maximum(np.abs(rng.standard_normal((n, n))), 1e-3)
        self.B = rng.standard_normal((n, k))
        self.x0 = np.zeros((n, k))

    def time_cg(self, k, n):
        from softrank.certifiers.linalg import weighted_cg

        weighted_cg(self.X, self.wt, self.B, self.x0)

    def time_exact(self, k, n):
        from softrank.certifiers.linalg import weighted_solves

        weighted_solves(self.X, self.wt, self.B)


class ClimbLPs:
    """One step of the subspace climb's LPs (docs/theory/lower.md#subspace-climb): ``LP_j``
    for every key ``j`` on a subspace turned slightly from the one just solved, each key's
    simplex warm from its own last vertex (:meth:`softrank.certifiers.lower.SubspaceClimb.values`).
    Most of these solves take a few simplex iterations or none: since commit 11ba021 the
    compiled simplex (:mod:`softrank.certifiers.lower.simplex`) solves them, with no set-up
    beyond one small inversion, and HiGHS only those it does not finish (before, HiGHS's fixed
    cost per solve was most of this time). ``k = n / 4`` right singular vectors of the seeded
    head (about the climb's dimensions at eps 0.25); the setup's first call compiles the
    simplex if numba's cache does not hold it yet, so no timed call does."""

    params = ([24, 64, 128],)
    param_names = ["n"]
    number = 1
    repeat = (3, 10, 60.0)
    timeout = 600

    def setup(self, n):
        from softrank.certifiers.lower import SubspaceClimb

        A = _operator(n).A
        B = np.linalg.svd(A)[2][: n // 4].T
        turn = np.random.default_rng(0).standard_normal(B.shape)
        self.B2 = np.linalg.qr(B + 1e-3 * turn)[0]
        self.climb = SubspaceClimb(A, B)
        self.climb.values(B, range(n))  # the keys' bases, as after the climb's last step

    def time_values_after_a_step(self, n):
        self.climb.values(self.B2, range(self.B2.shape[0]))


class Climb:
    """The registry's ``subspace-climb`` lower test on its own (docs/theory/lower.md#subspace-climb)
    on MiniLM heads at eps 0.1: the climbs from every start, from one above the singular
    subspaces' certified dimension up to the end where all starts fail. The seeded Gaussian
    heads certify at once from the singular subspace and would not exercise the climb.
    ``track_gap_to_tsvd``: the truncated SVD's rank minus the certified one."""

    params = (["minilm-w64-L0H0", "minilm-w128-L0H0"],)
    param_names = ["operator"]
    number = 1
    repeat = (1, 3, 120.0)
    timeout = 1800

    def setup_cache(self):
        return _minilm_heads()

    def setup(self, ops, name):
        self.A = _named(ops, name)

    def _run(self):
        from softrank import Operator
        from softrank.certifiers.registry import LOWER_TESTS

        return LOWER_TESTS["subspace-climb"].certify(Operator(A=self.A), 0.1)

    def time_certificate(self, ops, name):
        self._run()

    def track_gap_to_tsvd(self, ops, name):
        from softrank.certifiers.upper import TruncatedSVD

        c = self._run()
        svd = np.linalg.svd(self.A, full_matrices=False)
        return TruncatedSVD(self.A, svd).least_rank(0.1).rank - (0 if c is None else c.rank)


class Checker(_Base):
    """The checker on a truncated-SVD witness and a subspace certificate, float64 alone and
    with the interval cross-check (docs/theory/checker.md)."""

    params = (["upper", "subspace"], SIZES)
    param_names = ["certificate", "n"]

    def setup(self, name, n):
        from softrank.certifiers.upper import TruncatedSVD
        from softrank import Operator
        from softrank.certifiers.registry import LOWER_TESTS

        super().setup(name, n)
        if name == "upper":
            t = TruncatedSVD(self.A, self.svd)
            self.cert = t.least_rank(EPS)
        else:
            self.cert = LOWER_TESTS["subspace"].certify(Operator(A=self.A), EPS)

    def time_float64(self, name, n):
        from softrank.checker import check

        check(self.A, self.cert, interval=False)

    def time_float64_and_interval(self, name, n):
        from softrank.checker import check

        check(self.A, self.cert)

    def peakmem_float64_and_interval(self, name, n):
        from softrank.checker import check

        check(self.A, self.cert)


class CheckerAtLength:
    """Both arithmetics of the checker on a rank-``n/4`` witness of an ``n x n`` Gaussian
    head at the long widths, where the interval check is midpoint-radius on BLAS
    (docs/theory/checker.md#midpoint-radius-on-blas); ``flint`` times Arb's check of the
    same witness beside it (skipped above 2,048: minutes and gigabytes)."""

    params = (["float64", "midrad", "flint"], [1024, 2048, 4096])
    param_names = ["arithmetic", "n"]
    timeout = 1800
    number = 1
    repeat = (1, 3, 60.0)
    warmup_time = 0.0

    def setup(self, arithmetic, n):
        from softrank.checker import UpperWitness

        if arithmetic == "flint" and n > 2048:
            raise NotImplementedError("Arb's check at this width: minutes and gigabytes")
        self.A = _operator(n).A
        rng = np.random.default_rng(0)
        Q, _ = np.linalg.qr(self.A @ rng.standard_normal((n, n // 4)))  # a range finder
        U, W = Q, Q.T @ self.A
        err = float(np.abs(self.A - U @ W).sum(axis=1).max())
        self.cert = UpperWitness(err * 1.001, U, W)

    def _run(self, arithmetic):
        from softrank.checker import check_float64, check_interval

        if arithmetic == "float64":
            return check_float64(self.A, self.cert)
        return check_interval(self.A, self.cert, backend=arithmetic)

    def time_check(self, arithmetic, n):
        self._run(arithmetic)

    def peakmem_check(self, arithmetic, n):
        self._run(arithmetic)


class Brackets:
    """Full brackets on fixed seeded operators: time, the gap, and time over one SVD."""

    params = (["gaussian-64", "sphere-d3", "planted-k8", "minilm-w64-L0H0", "minilm-w128-L0H0"],)
    param_names = ["operator"]
    timeout = 3600
    number = 1
    repeat = (1, 3, 60.0)

    def setup_cache(self):
        from softrank.generators import synthetic

        ops = {"gaussian-64": synthetic.gaussian_head(64, 64, 32, 2.0, seed=0).A,
               "sphere-d3": synthetic.sphere(3, 16.0, 64, 64, seed=0).A,
               "planted-k8": synthetic.planted(64, 64, 8, 0.04, seed=0).A}
        ops.update(_minilm_heads())
        return ops

    def setup(self, ops, name):
        self.A = _named(ops, name)

    def time_bracket(self, ops, name):
        from softrank import bracket

        bracket(self.A, EPS)

    def track_gap(self, ops, name):
        from softrank import bracket

        (b,) = bracket(self.A, EPS)
        return b.upper - b.lower

    def track_time_over_svd(self, ops, name):
        import time

        from softrank import bracket

        t = time.perf_counter()
        for _ in range(3):
            np.linalg.svd(self.A)
        svd = (time.perf_counter() - t) / 3
        t = time.perf_counter()
        bracket(self.A, EPS)
        return (time.perf_counter() - t) / svd

    track_time_over_svd.unit = "x one SVD"
    track_gap.unit = "ranks"


class WidthCell:
    """One full-effort cell at each width: MiniLM layer 2, head 9 on the stdlib source
    ``argparse`` (at least 512 tokens), ``w x w`` for ``w`` in ``SIZES`` (default 64, 128, 256,
    512), at eps 0.25: how a cell's time and memory grow with the width
    (docs/benchmarks.md#weighted-solves-compiled-cholesky has the 512 cell before and after
    the compiled solves: 21:06 -> 7:19 on 2 cores). The width-512 cell takes minutes per
    sample; ``SOFTRANK_BENCH_SIZES=64,128`` keeps a run short."""

    params = (SIZES,)
    param_names = ["width"]
    timeout = 3600
    number = 1
    repeat = (1, 1, 0.0)

    def setup_cache(self):
        try:  # torch and transformers are imported when the model loads, not here
            from softrank.generators.heads import minilm_operators
            from softrank.generators.text import stdlib_sources
        except ImportError:
            return {}
        text = dict(stdlib_sources(64))["argparse"]
        return {w: minilm_operators(w, [(2, 9, ("argparse", text))])[0].A for w in SIZES}

    def setup(self, ops, w):
        if w not in ops:
            raise NotImplementedError(f"width {w}: needs the [models] extra")
        self.A = ops[w]

    def time_bracket(self, ops, w):
        from softrank import bracket

        bracket(self.A, EPS)

    def peakmem_bracket(self, ops, w):
        from softrank import bracket

        bracket(self.A, EPS)

    def track_gap(self, ops, w):
        from softrank import bracket

        (b,) = bracket(self.A, EPS)
        return b.upper - b.lower


class LongCell:
    """One full-effort cell of the ``long`` panel's Gaussian head (``d = 32``, temperature
    2) at 1,024 and 2,048 tokens, eps 0.25, under the panel's time limit per cell (540 s),
    beyond :class:`WidthCell`'s MiniLM heads, whose model stops at 512 tokens: how a long
    cell's time, memory and gap move from commit to commit (docs/benchmarks.md, "The long
    panel"). About 10 minutes a sample at 2,048; ``SOFTRANK_BENCH_LONG=1024`` keeps a run
    shorter, ``1024,2048,4096`` adds the 4,096-token head (about 25 minutes a sample)."""

    params = ([int(s) for s in os.environ.get("SOFTRANK_BENCH_LONG", "1024,2048").split(",")],)
    param_names = ["n"]
    timeout = 3600
    number = 1
    repeat = (1, 1, 0.0)

    def setup(self, n):
        from softrank.harness.panel_specs import LONG_CELL_TIMEOUT

        self.A, self.limit = _operator(n).A, LONG_CELL_TIMEOUT

    def _bracket(self):
        from softrank import bracket

        (b,) = bracket(self.A, EPS, time_limit=self.limit)
        return b

    def time_bracket(self, n):
        self._bracket()

    def peakmem_bracket(self, n):
        self._bracket()

    def track_gap(self, n):
        b = self._bracket()
        return b.upper - b.lower

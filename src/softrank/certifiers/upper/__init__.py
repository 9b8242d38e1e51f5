"""Upper witnesses: explicit low-rank matrices within ``eps`` of ``A`` (docs/theory/witnesses.md).

Every function here returns candidate :class:`~softrank.checker.UpperWitness` objects
(``U (m, k)``, ``W (k, N)``) and never a bare number: a rank is reported only after the
checker has proved ``||A - U W||_inf <= eps``. Each construction searches the least rank it
reaches for every tolerance, sharing work across tolerances:

* :class:`TruncatedSVD` -- the error of every truncation, in one pass (errors of all ranks
  from rank-one updates);
* :class:`L1Refit` -- right basis ``V_k^T`` (top right singular vectors) and each row of
  ``U`` by an l1 regression (HiGHS LP, warm-started across rows), after the rows are
  screened by :func:`l1_candidates` (rows already within the target need no LP; its
  reweighting by rank: :func:`screening`), after :func:`l1_dual_bounds` of the rows of
  largest least-squares error (a bound above the target fails the rank without an LP). The
  subspaces are nested, so the best max-row error is non-increasing in ``k`` and a
  bisection is exact; per-rank results are cached and shared by all tolerances;
* :class:`L1Refit` on the rows of ``A`` (greedy farthest-row order) -- the *row basis*;
* :class:`AlternatingL1` -- both factors by iteratively reweighted least squares with a
  minimax row reweighting, rows polished by exact l1 regressions;
* :class:`TrustRegionPolish` -- the alternating factors one rank below the best witness,
  improved by exact LPs: ``W`` by a box-constrained LP on the max row error, ``U`` by l1
  regressions;
* :func:`key_support` -- greedy key cover, ``B = A`` restricted to a key set ``S`` with
  ``sum_{j in S} A_ij >= 1 - eps`` on every row;
* :class:`Hybrid` -- the heaviest key columns exactly (attention sinks) plus an l1 refit of
  the remaining columns; rank adds;
* :func:`identity_witness` -- ``B = A`` itself, rank ``<= min(m, N)``, error 0: the bound
  every tolerance has, checked exactly (no rounding), so no bracket lacks an upper end.

The searches live in one module per family: :mod:`.basic` (what they share, the truncated
SVD, the key cover, the identity), :mod:`.refit` (l1 refit, row basis, hybrid),
:mod:`.alternating` and :mod:`.polish`; every public name is re-exported here.
"""

from __future__ import annotations

from .alternating import AlternatingL1
from .basic import (SAFETY, Deadline, TruncatedSVD, identity_witness, key_support,
                    least_feasible)
from .polish import TrustRegionPolish
from .refit import (DUAL_MIN_ENTRIES, DUAL_ROWS, DUAL_STEPS, Hybrid, L1Refit, l1_candidates,
                    l1_dual_bounds, screening)

__all__ = [
    "least_feasible", "Deadline", "l1_candidates", "l1_dual_bounds", "screening",
    "TruncatedSVD", "L1Refit", "AlternatingL1", "TrustRegionPolish", "key_support", "Hybrid",
    "identity_witness",
    "SAFETY", "DUAL_ROWS", "DUAL_STEPS", "DUAL_MIN_ENTRIES",
]

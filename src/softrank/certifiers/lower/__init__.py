"""Lower certificates: proofs that every ``B`` with ``||A - B||_inf <= eps`` has rank ``>= k``
(docs/theory/lower.md).

Each function returns candidate certificates from :mod:`softrank.checker.certificates`;
none of them is a bound until the checker accepts it. The searches:

* :func:`trivial` -- ``||A||_inf > eps`` gives 1;
* :func:`frobenius` -- the Frobenius tail on the whole matrix and on nested row subsets
  (rows in the order of a column-pivoted QR of ``A^T``: the most linearly independent first);
* :func:`key_groups` -- the decoded inverse with Varah's bound: disjoint key groups
  (singletons; contiguous blocks of several widths and offsets, for local heads; groups of
  keys co-attended by one query, for blocks in any order), each with a witness query,
  chosen greedily so that every witness keeps a diagonal-dominance margin
  above ``eps``;
* :class:`LPDecoder` -- for ``R`` the indicators of the first ``k`` groups of an ordering,
  the decoder ``L`` minimising ``||L||_inf`` subject to ``L A R = I`` (one basis-pursuit LP
  per row of ``L``, HiGHS). The least achievable ``||L||_inf`` is non-decreasing in ``k``
  (each added group adds a constraint to every existing row), so a bisection over ``k`` is
  exact; results are cached per ``k`` and shared by all tolerances;
* :class:`SubspaceSearch` -- subspace certificates on the top right singular vectors (and a
  local search around the best), each key screened by :func:`basis_pursuit_candidates`
  before its LP;
* :class:`SubspaceClimb` -- a subspace one dimension above the best lower end, turned by
  ascent steps on ``beta(S)`` (the least ``||A x||_inf`` over ``x`` in ``S`` with
  ``||x||_inf = 1``) until ``beta(S) > eps``, then certified by :class:`SubspaceSearch`.

The searches live in one module per family: :mod:`.basic` (trivial, Frobenius tail, key
groups, and what the others share), :mod:`.decoders` (truncated pseudoinverse, LP
decoder), :mod:`.subspace` (subspace search), :mod:`.starts` and :mod:`.climb` (the
subspace climb and its starts). Every public name is re-exported here.
"""

from __future__ import annotations

from .basic import (SLACK, coattended_groups, frobenius, group_families, key_groups,  # noqa: F401
                    largest_certified, row_order, trivial)  # SLACK, largest_certified: as before
from .climb import SubspaceClimb
from .decoders import LPDecoder, truncated_pseudoinverse
from .starts import climb_starts
from .subspace import SubspaceSearch, basis_pursuit_candidates

__all__ = [
    "trivial", "frobenius", "row_order", "key_groups", "group_families", "coattended_groups",
    "LPDecoder", "SubspaceSearch", "SubspaceClimb", "truncated_pseudoinverse",
    "basis_pursuit_candidates", "climb_starts",
]

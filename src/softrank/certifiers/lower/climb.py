"""The subspace climb (docs/theory/lower.md, section *Subspace climb*): ascent on
``beta(S)`` to a subspace certificate one dimension above the best lower end.

:meth:`SubspaceClimb.best` returns a candidate :class:`~softrank.checker.SubspaceCertificate`
built by :class:`~softrank.certifiers.lower.subspace.SubspaceSearch`, or None; nothing the
climb computes is a bound until the checker accepts the certificate.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ...checker import SubspaceCertificate
from ...errors import InvalidArgumentError
from ...validation import check_int, check_real
from .key_lp import (active_rows, complete_start, highs_duals, key_lp_model, key_lp_rows,
                     warm)
from .simplex import OPTIMAL, solve_from
from .starts import brief_repr, checked_start, finite_columns
from .subspace import SubspaceSearch

# warm (.key_lp) is re-exported: the command line compiles the engine's kernels through it
__all__ = ["SubspaceClimb", "warm"]


# The climb's fixed settings (docs/theory/lower.md#subspace-climb). The budget, the active
# set and the margin are the constructor's arguments; these shape each step.

#: First trial step of a climb, as a fraction of the ascent direction's norm.
STEP_START = 0.3
#: After an accepted trial step the next one is this much longer, up to :data:`STEP_MAX`.
STEP_GROWTH = 1.5
STEP_MAX = 1.0
#: Halvings of a rejected trial step before the climb gives up.
STEP_HALVINGS = 6
#: After the first evaluation the climb watches the keys whose value was below this many
#: times the goal (and those whose LP had no optimum).
WATCH_FACTOR = 3
#: Keys within this relative distance of the active set's least value add their derivative
#: to the ascent direction.
TIE_RTOL = 1e-3
#: The active set keeps at most this many times ``active`` keys, the most recent.
ACTIVE_CAP = 3
#: Above this dimension a climb's budget shrinks as ``BUDGET_DIMENSION / (k + 1)``: a
#: solve's cost grows with ``k``.
BUDGET_DIMENSION = 16
#: :meth:`SubspaceClimb.best` ends its ascent where the next singular direction has less
#: than this norm off the certified subspace.
DIRECTION_TOL = 1e-8
#: :meth:`SubspaceClimb.farkas`: relative margin of ``y_j`` over the other entries' sum.
FARKAS_MARGIN = 1e-6
#: :meth:`SubspaceClimb.farkas`: absolute slack per unit of ``||y||_1`` in its test.
FARKAS_SLACK = 1e-9
#: :meth:`SubspaceClimb.farkas`: floor of ``|y_i|`` in the reweighting, and the weight of
#: the entry ``y_j`` that its constraint fixes.
IRLS_FLOOR = 1e-9
IRLS_FIXED = 1e6


class SubspaceClimb:
    """Ascent on ``beta(S)`` to a subspace certificate one dimension above the best lower end
    (docs/theory/lower.md#subspace-climb).

    A ``k``-dimensional ``S = span(B)`` certifies ``r_eps >= k`` iff
    ``beta(S) = min_j LP_j(S) > eps``, where
    ``LP_j(S) = min ||A x||_inf  s.t.  x in S, x_j = 1, ||x||_inf <= 1``
    (a ``k + 1``-column LP: ``x = B c``, variables ``c`` and ``t >= |A B c|``; an infeasible
    ``LP_j`` -- no ``x`` in ``S`` peaks at key ``j`` -- counts as ``+inf``). The derivative
    of ``LP_j`` in ``B`` is read off its duals: with ``(c, t)`` optimal and ``y`` the row
    duals, ``d LP_j / d B = -(A^T y_A + y_X) c^T`` (``y_A`` the duals of the rows
    ``|A B c| <= t``, ``y_X`` of the rows of ``B c``); by stationarity in ``c`` that
    direction is orthogonal to ``S``, a rotation of ``S``.

    :meth:`climb` starts from ``B`` and repeats: the sum of these directions over the keys
    at the least value of a small active set moves ``B`` (then re-orthonormalised), with
    the step halved until the active set's least value rises (the active keys are solved
    in the order most likely to fail, and the first at or below that value rejects the
    step without the others: ``values(..., stop_at=)``); every ``full_every`` steps, and
    whenever the active set's least value passes the goal, the watched keys are solved
    again (:meth:`climb`) and the worst join the active set. It stops when ``beta(S)``
    exceeds the goal ``eps + margin min(eps, 1 - eps)`` (then :class:`SubspaceSearch` builds
    the certificate from ``S`` and the checker decides), when no step raises it, when the
    goal is out of reach at the mean rate of ascent so far, or when its deterministic budget
    of ``LP_j`` evaluations is spent (a solve, or a proof of infeasibility by
    :meth:`farkas`; each solve also stops at HiGHS's 60 s time limit, as every LP of
    softrank's does). :meth:`best` climbs from the top ``lo`` right singular vectors and,
    after each certificate, from the certified ``S`` plus the next singular direction; where
    that fails, from the further starts it is given
    (:func:`~softrank.certifiers.lower.starts.climb_starts`), and where those fail, from the
    best of the screened starts it is given.
    The climb is a heuristic: nothing it computes is a bound until the certificate built
    from ``S`` passes the checker.

    Parameters
    ----------
    A : (m, N) float64 ndarray
    V : (N, p) float64 ndarray
        Starting directions, orthonormal columns (the right singular vectors).
    name : str
        Family label in the certificate's method (``subspace/<name>+climb``).
    key_order : list of int, optional
        Shared hardest-first key order of :class:`SubspaceSearch`.
    lps_per_key : int
        The budget of one climb at dimension ``k``: ``lps_per_key * N * min(1, 16 / (k + 1))``
        ``LP_j`` evaluations (a solve's cost grows with ``k``).
    max_entries : int
        No climb at a dimension ``k`` whose LPs have more than ``max_entries`` constraint
        entries, ``(k + 1) (2 m + N)``.
    full_every, active : int
        Steps between evaluations of the watched keys; keys added to the active set each time.
    margin : float
        Relative margin of the goal over ``eps``.

    Raises
    ------
    InvalidArgumentError
        If ``V`` is not a finite ``(N, p)`` array, ``key_order`` not a permutation of the
        keys, an integer setting below 1 or ``margin`` negative or not finite.
    """

    def __init__(self, A: np.ndarray, V: np.ndarray, name: str = "svd",
                 key_order: list | None = None, lps_per_key: int = 12,
                 max_entries: int = 20_000, full_every: int = 10, active: int = 4,
                 margin: float = 1e-4):
        m, N = A.shape
        V = finite_columns("V", V, N, "p")
        lps_per_key = check_int(lps_per_key, "lps_per_key", 1)
        max_entries = check_int(max_entries, "max_entries", 1)
        full_every = check_int(full_every, "full_every", 1)
        active = check_int(active, "active", 1)
        margin = check_real(margin, "margin", 0)
        order = list(range(N)) if key_order is None else key_order
        if sorted(order) != list(range(N)):
            raise InvalidArgumentError(f"key_order must be a permutation of range({N}), got "
                                       f"{len(order)} keys")
        self.A = A
        self.V = V
        self.name = name
        self.key_order = order
        self.budget = lps_per_key * N
        self.max_entries = max_entries
        self.full_every = full_every
        self.n_active = active
        self.margin = margin
        self.lps = 0  # LP_j evaluations spent (all climbs): solves and Farkas proofs
        # key -> row duals of its last exact LP, kept per eps: the climbs at one eps never
        # depend on which other tolerances the same operator is bracketed at
        self._duals_by_eps: dict = {}
        self._duals: dict = {}
        # key -> its last Farkas vector, or None, while its LP_j is infeasible (the key is
        # then tried by farkas() before a solve); kept per eps like the duals
        self._farkas_by_eps: dict = {}
        self._farkas: dict = {}
        self.proofs = 0  # LP_j found infeasible by a Farkas vector, without a solve
        self._last_values: dict = {}  # key -> (LP_j, derivative) of the last climb's end
        # (eps, k) -> {key: the simplex basis of its last solve}: the next solve of the key
        # starts there (the subspace has turned a little since), not from the previous key's
        # basis (docs/theory/lower.md#subspace-climb: 2.4x fewer simplex iterations on
        # MiniLM heads of width 128, and the same ends)
        self._bases_by_eps: dict = {}
        # (eps, k) -> {key: the active rows of its last optimal vertex}: where its next
        # solve starts in simplex.solve_from
        self._actives_by_eps: dict = {}
        self.compiled = 0  # LP_j solved by simplex.solve_from (the rest: HiGHS, Farkas)
        self._eps = None

    def _at_eps(self, eps: float) -> None:
        """Point :meth:`values` at the duals and Farkas vectors kept for ``eps``."""
        self._duals = self._duals_by_eps.setdefault(eps, {})
        self._farkas = self._farkas_by_eps.setdefault(eps, {})
        self._eps = eps

    def beta(self, B: np.ndarray, eps: float) -> float:
        """``beta(span B) = min_j LP_j(span B)`` over every key (``inf`` where no LP has an
        optimum), ``B (N, k)`` orthonormal: the value a subspace certificate of ``span B``
        needs ``eps`` below. The solves start from, and keep, the vertices held for ``eps``
        (which moves no value: the LPs do not depend on it). Nothing here is a bound."""
        self._at_eps(eps)
        vals = self.values(B, range(self.A.shape[1]))
        return min((v for v, _ in vals.values()), default=np.inf)

    def lower_bounds(self, B: np.ndarray, keys) -> np.ndarray:
        """Lower bounds of ``LP_j(span B)`` from the duals of each key's last exact solve
        (on any earlier ``B``; ``-inf`` for a key without one): the box rows' duals are
        corrected by ``B B^T`` so that the stationarity in ``c`` holds again on ``B``, and
        the dual objective of the corrected point bounds the optimum below (weak duality).
        Used only to skip LPs; nothing here is a certificate."""
        m = self.A.shape[0]
        keys = list(keys)
        out = np.full(len(keys), -np.inf)
        have = [i for i, j in enumerate(keys) if j in self._duals]
        if not have:
            return out
        Y = np.stack([self._duals[keys[i]] for i in have])
        y12 = np.minimum(Y[:, :m], 0.0) + np.maximum(Y[:, m:2 * m], 0.0)
        y3 = Y[:, 2 * m:]
        r = -((y12 @ self.A + y3) @ B)
        y3 = y3 + r @ B.T
        own = y3[np.arange(len(have)), [keys[i] for i in have]]
        out[have] = own - (np.abs(y3).sum(axis=1) - np.abs(own))
        return out

    def farkas(self, B: np.ndarray, keys, start: dict | None = None,
               iters: int = 8) -> dict:
        """``{j: y}`` for the keys ``j`` whose ``LP_j(span B)`` is proved infeasible: ``y``
        orthogonal to ``S = span B`` with ``y_j > (1 + 1e-6) sum_{i != j} |y_i|``. Then every
        ``x`` in ``S`` has ``y^T x = 0``, so ``y_j |x_j| <= sum_{i != j} |y_i| |x_i|`` and
        ``|x_j| < max_i |x_i|``: no ``x`` in ``S`` peaks at ``j``, and the LP (``x_j = 1``,
        ``||x||_inf <= 1``) is infeasible beyond its solver's tolerances, so a solve would
        give the same value (``inf``). As computed, ``y`` is orthogonal to ``S`` only up to
        rounding: for ``x = B c`` with ``||x||_inf = 1``, ``|y^T x| <= sqrt(N) ||B^T y||_2``,
        so the test asks ``y_j - (1 + 1e-6) sum_{i != j} |y_i|`` to exceed
        ``sqrt(N) ||B^T y||_2 + 1e-9 ||y||_1`` (a key in ``S`` itself, whose projected
        ``e_j`` is rounding noise, is never proved).

        ``y`` is sought as ``min sum_{i != j} |y_i|`` subject to ``B^T y = 0``, ``y_j = 1``
        by at most ``iters`` steps of reweighted least squares, batched over the keys, from
        ``start[j]`` projected onto ``S``'s complement (a key's vector on an earlier ``B``)
        or from ``e_j`` projected likewise. A key not proved is left out; nothing here is a
        certificate (the climb's result is certified and checked on its own).

        Parameters
        ----------
        B : (N, k) float64 ndarray
            Orthonormal basis of ``S``.
        keys : iterable of int
            The keys to try.
        start : dict, optional
            ``{j: y (N,)}``, a starting vector per key (``None`` values are ignored).
        iters : int
            Reweighted least-squares steps at most.

        Returns
        -------
        dict
            ``{j: y (N,)}`` for the keys proved infeasible (docs/theory/lower.md, "Subspace
            climb").

        Raises
        ------
        InvalidArgumentError
            If ``B`` is not a finite ``(N, k)`` array with orthonormal columns (within
            ``1e-8``), a key is not an integer in ``[0, N)``, or ``iters`` is not an integer
            ``>= 0``.
        """
        N = self.A.shape[1]
        B = finite_columns("B", B, N, "k")
        k = B.shape[1]
        if not np.allclose(B.T @ B, np.eye(k), rtol=0.0, atol=1e-8):
            raise InvalidArgumentError("B must have orthonormal columns (B^T B = I within "
                                       "1e-8)")
        keys = list(keys)
        keys = [check_int(j, "keys", 0, N - 1) for j in keys]
        iters = check_int(iters, "iters", 0)
        if not keys:
            return {}
        start = start or {}
        J = np.asarray(keys)
        Y = np.zeros((J.size, N))
        Y[np.arange(J.size), J] = 1.0
        for i, j in enumerate(keys):
            if start.get(j) is not None:
                Y[i] = start[j]
        Y -= (Y @ B) @ B.T  # onto the orthogonal complement of S
        out = {}
        BB = (B[:, :, None] * B[:, None, :]).reshape(N, k * k)
        todo = np.arange(J.size)
        for it in range(iters + 1):
            Yt, Jt = Y[todo], J[todo]
            own = Yt[np.arange(todo.size), Jt]
            l1 = np.abs(Yt).sum(axis=1)
            slack = np.sqrt(N) * np.linalg.norm(Yt @ B, axis=1) + FARKAS_SLACK * l1
            ok = own - (1 + FARKAS_MARGIN) * (l1 - np.abs(own)) > slack
            for i in todo[ok]:
                out[keys[i]] = Y[i].copy()
            todo = todo[~ok]
            if it == iters or todo.size == 0:
                break
            # one IRLS step for min sum w_i y_i^2 s.t. [B, e_j]^T y = (0, 1), w = 1 / |y|
            Jt = J[todo]
            winv = np.maximum(np.abs(Y[todo]), IRLS_FLOOR)
            winv[np.arange(todo.size), Jt] = IRLS_FIXED  # y_j is fixed by its constraint
            M = np.empty((todo.size, k + 1, k + 1))
            M[:, :k, :k] = (winv @ BB).reshape(todo.size, k, k)
            wj = winv[np.arange(todo.size), Jt]
            M[:, :k, k] = M[:, k, :k] = wj[:, None] * B[Jt]
            M[:, k, k] = wj
            rhs = np.zeros((todo.size, k + 1, 1))
            rhs[:, k, 0] = 1.0
            try:
                lam = np.linalg.solve(M, rhs)[..., 0]
            except np.linalg.LinAlgError:
                break
            Yn = winv * (lam[:, :k] @ B.T)
            Yn[np.arange(todo.size), Jt] += wj * lam[:, k]
            if not np.isfinite(Yn).all():
                break
            Y[todo] = Yn - (Yn @ B) @ B.T
        return out

    def values(self, B: np.ndarray, keys, skip_above: float | None = None,
               stop_at: float | None = None) -> dict:
        """``{j: (LP_j(S), d LP_j / d B)}`` for ``S = span(B)``, ``B (N, k)`` orthonormal;
        ``(inf, None)`` for a key whose LP has no optimal solution. With ``skip_above``, a
        key whose :meth:`lower_bounds` exceeds it is not solved: ``(bound, None)``. A key
        whose LP was infeasible at its last evaluation, or that has not been solved yet, is
        first tried by :meth:`farkas`: a proof of infeasibility answers ``(inf, None)``
        without a solve (and counts in the budget as one); those keys come first in the
        result. The other keys are solved in the order given. With ``stop_at``, the first
        solve whose value is at or below it ends the evaluation: the keys after it are left
        out (the least value is then at most ``stop_at`` whatever theirs are); keys answered
        without a solve never end it. A key's simplex starts from the basis of its own last
        solve at this ``eps`` and dimension (on an earlier ``B``); a
        key without one starts from the basis the instance holds (the previous key's, or the
        all-slack basis for the first solve on this ``B``). The start can move a value by
        rounding, or pick another optimum (and so another derivative) where the optimum is
        not unique. A ``skip_above`` or ``stop_at`` that is not a finite real number
        (:func:`softrank.validation.check_real`) raises
        :class:`~softrank.errors.InvalidArgumentError`."""
        m, N = self.A.shape
        k = B.shape[1]
        keys = list(keys)
        skip_above = None if skip_above is None else check_real(skip_above, "skip_above")
        stop_at = None if stop_at is None else check_real(stop_at, "stop_at")
        out = {}
        if skip_above is not None:
            lb = self.lower_bounds(B, keys)
            for j, v in zip(keys, lb):
                if v > skip_above:
                    out[j] = (float(v), None)
            keys = [j for j in keys if j not in out]
        proved = self.farkas(B, [j for j in keys
                                 if j in self._farkas or j not in self._duals], self._farkas)
        for j, y in proved.items():
            self.lps += 1
            self.proofs += 1
            self._farkas[j] = y
            out[j] = (np.inf, None)
        keys = [j for j in keys if j not in proved]
        if not keys:
            return out
        bases = self._bases_by_eps.setdefault((self._eps, k), {})
        actives = self._actives_by_eps.setdefault((self._eps, k), {})
        lower = self._actives_by_eps.get((self._eps, k - 1), {})
        AB = self.A @ B
        G = h = lp = None
        last = next(iter(actives.values()), None)  # any vertex at this dimension
        for j in keys:
            self.lps += 1
            done = None
            start = actives.get(j)
            if start is None:  # its vertex one dimension down, else the last key's here
                start = lower.get(j, last)
            if start is not None:  # from that vertex, in compiled code
                if G is None:
                    G, h = key_lp_rows(AB, B)
                e = np.zeros(k + 1)
                e[:k] = B[j]
                act = (start.copy() if j in actives
                       else complete_start(start, G, e, j, m, N, k))
                status, x, mult, _ = solve_from(G, h, (2 * m + j, 2 * m + N + j), e, act)
                if status == OPTIMAL:
                    done = x, highs_duals(act, mult, m, N, j)
                    actives[j] = last = act
                    self.compiled += 1
                else:
                    actives.pop(j, None)
            if done is None:  # HiGHS, from the key's last basis
                if lp is None:
                    lp = key_lp_model(self.A, B, AB)
                res = lp.solve([2 * m + j], [1.0], [1.0], start=bases.get(j))
                bases[j] = lp.basis()
                if not res.success:
                    out[j] = (np.inf, None)
                    self._farkas.setdefault(j, None)  # tried by farkas() next time
                    continue
                done = res.x, res.y
                act = active_rows(bases[j][1], m, N, j, k)
                if act is not None:
                    actives[j] = last = act
            x, y = done
            c = x[:k]
            self._duals[j] = y
            self._farkas.pop(j, None)
            g = self.A.T @ (y[:m] + y[m:2 * m]) + y[2 * m:]
            out[j] = (float(x[k]), -np.outer(g, c))
            if stop_at is not None and out[j][0] <= stop_at:
                break
        return out

    def climb(self, B: np.ndarray, eps: float, extra=()) -> np.ndarray | None:
        """``B`` turned until ``beta(span B)`` exceeds the goal on the keys it watches, or
        None (no step raised ``beta``, the goal is out of reach at the rate so far, or the
        budget is spent first). The keys watched: every key at the start; then those whose
        value was below three times the goal there or whose LP had no optimum (no ``x`` in ``S`` peaks at
        the key yet; a turn of ``S`` can change that), and ``extra`` (the certificate built
        from the result covers every key). A full evaluation skips the keys whose
        :meth:`lower_bounds` exceed the goal; the duals behind those bounds come from the
        climbs at the same ``eps`` only."""
        N = self.A.shape[1]
        B = np.linalg.qr(B)[0]
        spent0 = self.lps
        # the budget in LP_j evaluations, fewer above dimension 16 (a solve's cost grows with k)
        budget = int(self.budget * min(1.0, BUDGET_DIMENSION / (B.shape[1] + 1)))
        # beta <= ||A||_inf = 1 on row-stochastic A: near eps = 1 the margin shrinks with 1 - eps
        goal = eps + self.margin * min(eps, 1.0 - eps)
        self._at_eps(eps)
        vals = self.values(B, range(N), skip_above=goal)
        vals.update(self.values(B, extra))
        self._last_values = vals  # updated in place below: the screen of best() reads it
        watch = sorted({j for j, (v, _) in vals.items() if not WATCH_FACTOR * goal <= v < np.inf}
                       | set(extra))
        beta = min(vals[j][0] for j in watch) if watch else np.inf
        active = list(dict.fromkeys(list(extra)
                                    + sorted(watch, key=lambda j: vals[j][0])[:self.n_active]))
        tau = STEP_START
        step = 0
        failed = None  # the key that rejected the last trial step
        beta0 = top = beta
        while beta <= goal:
            spent = self.lps - spent0
            if spent >= budget:
                return None
            low = min(vals[j][0] for j in active)
            if not np.isfinite(low):
                return None
            G = sum(vals[j][1] for j in active
                    if vals[j][1] is not None and vals[j][0] <= low * (1 + TIE_RTOL))
            norm = float(np.linalg.norm(G)) if isinstance(G, np.ndarray) else 0.0
            if not norm > 0:
                return None
            # a trial step is kept only if every active key rises above low, so the first
            # key at or below low decides it: the keys are solved in the order most likely
            # to fail (the key that rejected the last trial, then by value) and those after
            # it are left unsolved (docs/theory/lower.md#subspace-climb)
            order = sorted(active, key=lambda j: (j != failed, vals[j][0]))
            for _ in range(STEP_HALVINGS):
                B2 = np.linalg.qr(B + (tau / norm) * G)[0]
                v2 = self.values(B2, order, stop_at=low)
                least = min(v2.items(), key=lambda kv: kv[1][0])
                if least[1][0] > low:
                    break
                failed = least[0]
                order = sorted(order, key=lambda j: j != failed)
                tau /= 2
            else:
                return None
            B, tau, step = B2, min(STEP_GROWTH * tau, STEP_MAX), step + 1
            vals.update(v2)
            if min(v for v, _ in v2.values()) > goal or step % self.full_every == 0:
                vals.update(self.values(B, watch, skip_above=goal))
                beta = min(vals[j][0] for j in watch)
                worst = sorted(watch, key=lambda j: vals[j][0])[:self.n_active]
                active = list(dict.fromkeys(active + worst))[-ACTIVE_CAP * self.n_active:]
                # out of reach at the mean rate so far (the best beta seen over the
                # evaluations spent): stop, as the budget would (deterministic)
                top = max(top, beta)
                rate = (top - beta0) / max(self.lps - spent0, 1)
                left = budget - (self.lps - spent0)
                if beta <= goal and not (rate > 0 and top + rate * left > goal):
                    return None
        return B

    def best(self, eps: float, lo: int, hi: int, starts=None, screened=None,
             screened_climbs: int = 2, screen_keys: int = 8,
             stop=None) -> SubspaceCertificate | None:
        """The largest ``k`` in ``[lo, hi]`` reached by climbing ``k = lo, lo + 1, ...``, each
        from the last certified subspace plus the next right singular direction (the top
        ``lo`` right singular vectors at ``k = lo``).

        Parameters
        ----------
        eps : float
            Tolerance.
        lo, hi : int
            The dimensions tried: ``lo`` first, then up while certificates hold; ``hi`` is
            also capped by ``min(m, N)``, the columns of ``V`` and ``max_entries``.
        starts : callable, optional
            ``starts(k)`` gives further ``(label, B)`` starts at dimension ``k``, ``B`` a
            real ``(N, k)`` array: tried in order, only where the climb above fails at ``k``;
            the first that certifies continues the ascent (its certificates are named
            ``subspace/<label>+climb``; a label is 1-40 letters, digits, ``.``, ``_`` or
            ``-``, and not ``svd``). Each is one more climb with its own budget, and there is
            no cap on their number. The climb orthonormalises ``B`` by a QR factorisation,
            which completes a rank-deficient ``B`` with other directions: the certificate
            is then for that completed subspace (and checked like any other).
        screened : callable, optional
            ``screened(k)`` gives more starts of the same form, tried only where every start
            of ``starts`` fails at ``k``: each is scored by the least ``LP_j`` of its span over
            the ``screen_keys`` keys with the least values at the end of the climb that
            failed first at ``k`` (from the singular or the carried subspace; an upper bound
            of the start's ``beta``, ``screen_keys`` evaluations of the budget's kind, all
            at this ``eps`` only), and the ``screened_climbs`` best (equal scores in the
            given order) are climbed, best first.
        screened_climbs, screen_keys : int
            Climbs after the screen (``>= 0``) and keys scored per screened start (``>= 1``).
        stop : callable, optional
            Asked before each dimension: when it answers True the climb ends with the
            certificate of the last dimension reached (a bracket's time limit).

        Returns
        -------
        SubspaceCertificate or None
            The certificate of the largest dimension reached; None if none was.

        Raises
        ------
        InvalidArgumentError
            If ``lo`` or ``hi`` is not an integer, ``starts``, ``screened`` or ``stop`` is
            not callable, ``starts(k)`` or ``screened(k)`` is not an iterable of
            ``(label, finite real (N, k) array)`` pairs, ``screened_climbs`` is not an integer
            ``>= 0`` or ``screen_keys`` not one ``>= 1``.
        """
        lo, hi = check_int(lo, "lo"), check_int(hi, "hi")
        for arg, fn in (("starts", starts), ("screened", screened), ("stop", stop)):
            if fn is not None and not callable(fn):
                what = "a callable" if arg == "stop" else "a function of k"
                raise InvalidArgumentError(f"{arg} must be {what} or None, got "
                                           f"{brief_repr(fn)}")
        screened_climbs = check_int(screened_climbs, "screened_climbs", 0)
        screen_keys = check_int(screen_keys, "screen_keys", 1)
        A = self.A
        m, N = A.shape
        # the LP of a key has (k + 1) (2 m + N) entries; past max_entries its solves cost
        # tens of milliseconds each (measured), and the climb is not tried
        hi = min(hi, m, N, self.V.shape[1], self.max_entries // (2 * m + N) - 1)
        if lo < 1 or lo > hi:
            return None

        def certify(B, name, k):
            S = self.climb(B, eps)
            if S is None:
                return None, None
            cert = SubspaceSearch(A, S, f"{name}+climb", self.key_order).certificate(k, eps)
            if cert is None:  # a key the climb did not watch ended it: once more with it
                S = self.climb(S, eps, extra=(self.key_order[0],))
                if S is not None:
                    cert = SubspaceSearch(A, S, f"{name}+climb",
                                          self.key_order).certificate(k, eps)
            return (S, cert) if cert is not None else (None, None)

        B = self.V[:, :lo]
        name = self.name
        best = None
        k = lo

        def given(fn, arg, k):
            items = fn(k)
            if not isinstance(items, Iterable) or isinstance(items, (str, bytes)):
                raise InvalidArgumentError(f"{arg}({k}) must give an iterable of "
                                           f"(label, B) pairs, got {brief_repr(items)}")
            return (checked_start(item, N, k, arg) for item in items)

        def screen(items):
            """The ``screened_climbs`` items whose spans score best: the least ``LP_j``
            over the hardest keys bounds ``beta`` from above."""
            items = list(items)
            if screened_climbs == 0:
                return []
            self._at_eps(eps)
            keys = hardest[:screen_keys]
            score = [min(v for v, _ in self.values(np.linalg.qr(B1)[0], keys).values())
                     for _, B1 in items]
            ranked = sorted(range(len(items)), key=lambda i: -score[i])
            return [items[i] for i in ranked[:screened_climbs]]

        while not (stop is not None and stop()):
            S, cert = certify(B, name, k)
            # the keys hardest for the climb that just failed (its last values, lowest first):
            # they depend only on this eps, where the shared key_order moves with every
            # search of the operator, at any tolerance
            last = self._last_values
            hardest = sorted(last, key=lambda j: (last[j][0], j))
            for fn, arg in ((starts, "starts"), (screened, "screened")):
                if cert is not None or fn is None:
                    continue
                items = given(fn, arg, k)
                for label, B1 in (items if arg == "starts" else screen(items)):
                    S, cert = certify(B1, label, k)
                    if cert is not None:
                        name = label
                        break
            if cert is None:
                return best
            best = cert
            if k >= hi:
                return best
            v = self.V[:, k] - S @ (S.T @ self.V[:, k])
            if not np.linalg.norm(v) > DIRECTION_TOL:
                return best
            B, k = np.column_stack([S, v / np.linalg.norm(v)]), k + 1
        return best

"""Targeted rank-reduction attacks on lower certificates (docs/theory/attacks.md).

A lower certificate claims ``r_eps(A) >= k``. An attack searches hard for the opposite: a
matrix ``B = U W`` of rank ``k - 1`` with ``||A - B||_inf <= eps``. Any candidate that comes
within ``eps`` is handed to the independent checker (float64 with rounding bounds, then
intervals); only a witness the checker accepts is a success, and a success proves the
certificate -- or the claim -- unsound. The seed paper reports 0 successes in 458 attacks.

Methods (each yields right factors ``W``; every ``W`` is finished by an exact row-wise l1
regression, HiGHS, which is the optimal ``U`` for that ``W``):

* ``truncated-svd`` -- the rank ``k - 1`` truncation and its l1 refit;
* ``alternating-l1`` -- iteratively reweighted least squares with minimax row weights,
  from the SVD and from ``starts`` random rotations of it;
* ``smoothed-descent`` -- L-BFGS on a smoothed max-row-l1 objective
  ``t log sum_i exp(f_i / t)``, ``f_i = sum_j sqrt(r_ij^2 + mu^2)``, with continuation in
  ``mu`` and ``t`` (scipy);
* ``witness-perturbation`` -- from an upper witness of rank ``u >= k``: the top ``k - 1``
  right singular vectors of ``B``, and ``B``'s own right factor with one row dropped.

The closest approach (``best_error``, the least max-row error seen, float64, unchecked) is
recorded: ``best_error / eps`` near 1 means a certificate is nearly tight.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import get_args

import numpy as np

from .checker import LowerCertificate, UpperWitness, check
from .errors import InvalidArgumentError, printable
from .validation import check_choice, check_fraction, check_int, check_positive

__all__ = ["AttackResult", "attack", "RankReductionAttack", "EFFORTS"]

#: Effort levels: random restarts of alternating l1, rows dropped from the upper witness,
#: L-BFGS iterations per continuation step.
EFFORTS = {
    "quick": {"starts": 1, "drops": 4, "lbfgs": 60, "irls": 30},
    "standard": {"starts": 3, "drops": 8, "lbfgs": 150, "irls": 40},
    "hard": {"starts": 10, "drops": 32, "lbfgs": 400, "irls": 60},
}


@dataclass
class AttackResult:
    """Outcome of one targeted attack.

    Attributes
    ----------
    claimed : int
        The lower bound attacked (``r_eps(A) >= claimed``).
    target_rank : int
        ``claimed - 1``: the rank of the witnesses searched for.
    eps : float
    succeeded : bool
        True only if the checker accepted a witness of rank ``<= target_rank`` at ``eps``:
        the claim is then false.
    witness : UpperWitness or None
        The checker-confirmed counterexample when ``succeeded``.
    best_error : float
        Least max-row l1 error ``||A - U W||_inf`` seen over all candidates (float64, not
        rigorous); ``inf`` when no candidate was formed.
    best_method : str
    methods : list of str
        Methods that ran.
    failures : list of str
        Methods that raised (recorded; an attack never turns a failure into a verdict).
    seconds : float
    cut_short : bool
        The time limit passed before the plan was done: the methods after it did not run
        (one already going ends its current step first).
    """

    claimed: int
    target_rank: int
    eps: float
    succeeded: bool = False
    witness: UpperWitness | None = None
    best_error: float = float("inf")
    best_method: str = ""
    methods: list = field(default_factory=list)
    failures: list = field(default_factory=list)
    seconds: float = 0.0
    cut_short: bool = False

    def to_dict(self) -> dict:
        return {"claimed": self.claimed, "target_rank": self.target_rank, "eps": self.eps,
                "succeeded": self.succeeded, "best_error": self.best_error,
                "best_method": self.best_method, "methods": list(self.methods),
                "failures": list(self.failures), "seconds": round(self.seconds, 4),
                "cut_short": self.cut_short}


def _row_errors(A, U, W) -> np.ndarray:
    with np.errstate(all="ignore"):
        e = np.abs(A - U @ W).sum(axis=1)
    return np.where(np.isfinite(e), e, np.inf)


def _orth_rows(W: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the row space of ``W`` (same number of rows when full rank)."""
    q, _ = np.linalg.qr(W.T)
    return q.T


def _smoothed_descent(A, U, W, eps, iters, stop=None):
    """L-BFGS on a smoothed max-row-l1 objective with continuation; returns ``(U, W)``
    (``stop``, asked before each continuation step after the first, ends it early)."""
    from scipy.optimize import minimize

    m, N = A.shape
    r = W.shape[0]

    def fg(x, mu, t):
        U_ = x[: m * r].reshape(m, r)
        W_ = x[m * r:].reshape(r, N)
        R = A - U_ @ W_
        S = np.sqrt(R * R + mu * mu)
        f = S.sum(axis=1)
        z = (f - f.max()) / t
        p = np.exp(z)
        tot = p.sum()
        val = f.max() + t * np.log(tot)
        p /= tot
        G = -(p[:, None] * (R / S))  # d val / d (U W)
        return val, np.concatenate([(G @ W_.T).ravel(), (U_.T @ G).ravel()])

    x = np.concatenate([U.ravel(), W.ravel()])
    for step, (mu, t) in enumerate(((1e-3, 0.05 * eps), (1e-4, 0.01 * eps),
                                    (1e-6, 0.002 * eps))):
        if step and stop is not None and stop():
            break
        res = minimize(fg, x, args=(mu, t), jac=True, method="L-BFGS-B",
                       options={"maxiter": iters})
        if np.isfinite(res.x).all():
            x = res.x
    return x[: m * r].reshape(m, r), x[m * r:].reshape(r, N)


def attack(A, eps: float, claimed, *, upper_witness: UpperWitness | None = None,
           effort: str = "standard", seed: int = 0, interval: bool = True,
           constructions=(), operator=None, time_limit: float | None = None) -> AttackResult:
    """Search for a witness of rank ``claimed - 1`` within ``eps`` of ``A`` (docs/theory/attacks.md).

    Parameters
    ----------
    A : (m, N) float64 array_like or Operator
        The matrix (row-stochastic for an attention operator); of an
        :class:`~softrank.Operator`, its ``A`` (and the operator is then the default
        ``operator``).
    eps : float
        Tolerance in ``(0, 1)`` (max-row l1).
    claimed : int or lower certificate
        The lower bound under attack; a certificate's ``rank`` is used, and it must have been
        issued at ``eps`` (one of :data:`softrank.checker.LowerCertificate`).
    upper_witness : UpperWitness, optional
        A known witness of ``A`` (``U`` with ``m`` rows, ``W`` with ``N`` columns) of rank
        ``>= claimed`` to start a perturbation from.
    effort : {"quick", "standard", "hard"}
        Restarts and iterations (:data:`EFFORTS`).
    seed : int
        Seed of the random restarts (results are deterministic given it).
    interval : bool
        Confirm a success with the interval cross-check too (default True).
    constructions : sequence, optional
        Constructions of the one interface (:mod:`softrank.certifiers.interface`: objects
        with ``witness(operator, eps)``, e.g. entries of
        :data:`softrank.certifiers.registry.CONSTRUCTIONS` or a user's own) tried first:
        a witness of rank ``<= claimed - 1`` that the checker accepts refutes the claim.
    operator : Operator, optional
        The operator handed to ``constructions`` (one with ``Q``, ``K``, ``beta`` lets the
        reference constructions run), of ``A``'s shape; default ``A`` when it is an
        Operator, else ``Operator(A=A)``.
    time_limit : float, optional
        Seconds: past them no further method starts, and the exact row polish, the smoothed
        descent's continuation and the witness perturbation stop before their next step
        (an alternating-l1 run already going ends first); the result is then
        ``cut_short``. A cut attack that found nothing has held only as far as it went.
        Default: no limit.

    Returns
    -------
    AttackResult
        ``succeeded`` only with a checker-confirmed witness.

    Raises
    ------
    InvalidArgumentError
        If ``A`` is neither an Operator nor a non-empty 2-D array of finite real numbers;
        ``eps``, ``claimed``, ``effort`` or ``seed`` is out of range; ``claimed`` is neither
        an integer nor a lower certificate, or a certificate issued at another tolerance
        than ``eps``; ``upper_witness`` is not an :class:`~softrank.checker.UpperWitness`
        of a matrix of ``A``'s shape; ``constructions`` is not a list (a string included)
        of objects with ``witness(operator, eps)`` (:func:`softrank.bracket`'s rule);
        ``operator`` is not an Operator of ``A``'s shape; ``time_limit`` is not a number
        ``> 0``.
    """
    # lazy: keeps ``import softrank`` light
    from .certifiers.registry import extra_methods
    from .operators import Operator

    if isinstance(A, Operator):
        operator = A if operator is None else operator
        A = A.A
    else:
        A = _matrix(A)
    eps = check_fraction(eps, "eps")
    k = _claimed_rank(claimed, eps)
    check_choice(effort, "effort", sorted(EFFORTS))
    check_int(seed, "seed", 0)
    m, N = A.shape
    if upper_witness is not None:
        if not isinstance(upper_witness, UpperWitness):
            raise InvalidArgumentError(
                f"upper_witness: expected a softrank.checker.UpperWitness or None, got "
                f"{type(upper_witness).__name__}")
        if upper_witness.U.shape[0] != m or upper_witness.W.shape[1] != N:
            raise InvalidArgumentError(
                f"upper_witness: a witness of a {upper_witness.U.shape[0]} x "
                f"{upper_witness.W.shape[1]} matrix, A is {m} x {N}")
    if operator is not None and (not isinstance(operator, Operator) or operator.shape != (m, N)):
        raise InvalidArgumentError(
            f"operator: expected a softrank Operator of A's shape {m} x {N}, got " + (
                f"one of shape {operator.shape[0]} x {operator.shape[1]}"
                if isinstance(operator, Operator) else type(operator).__name__))
    if time_limit is not None:
        time_limit = check_positive(time_limit, "time_limit")
    constructions = extra_methods(constructions, "upper")
    return RankReductionAttack(A, eps, k, upper_witness=upper_witness, effort=effort,
                               seed=seed, interval=interval, constructions=constructions,
                               operator=operator, time_limit=time_limit).run()


def _matrix(A) -> np.ndarray:
    """``A`` as a float64 array, refused (naming ``A``) unless it is a non-empty 2-D array of
    finite real numbers (:func:`softrank.operators.check_matrix`'s rule)."""
    from .errors import InvalidOperatorError
    from .operators import check_matrix

    try:
        kind = np.asarray(A).dtype.kind
    except Exception:  # noqa: BLE001 - not an array at all: refused below
        kind = "O"
    if kind not in "fiub":
        raise InvalidArgumentError(f"A: expected an (m, N) matrix of real numbers or an Operator, "
                                   f"got {type(A).__name__}" + (
                                       f" of dtype {A.dtype}" if isinstance(A, np.ndarray) else
                                       f" {printable(repr(A))[:60]}"))
    try:
        return check_matrix("A", A)
    except InvalidOperatorError as exc:
        raise InvalidArgumentError(str(exc)) from None


def _claimed_rank(claimed, eps: float) -> int:
    """The rank under attack: ``claimed`` itself (an integer ``>= 1``) or a lower
    certificate's rank, the certificate issued at ``eps``."""
    if isinstance(claimed, get_args(LowerCertificate)):
        if float(claimed.eps) != eps:
            raise InvalidArgumentError(
                f"claimed: the certificate ({type(claimed).__name__}, rank {claimed.rank}) was "
                f"issued at eps={claimed.eps!r}, not at the eps={eps!r} attacked; attack it at "
                "its own tolerance")
        if claimed.rank < 1:
            raise InvalidArgumentError(
                f"claimed: the certificate ({type(claimed).__name__}) claims rank "
                f"{claimed.rank}; there is nothing below rank 1 to attack")
        return int(claimed.rank)
    if isinstance(claimed, bool) or not isinstance(claimed, (int, np.integer)) or claimed < 1:
        got = (repr(claimed) if isinstance(claimed, (str, bytes, int, float, np.number))
               else type(claimed).__name__)
        raise InvalidArgumentError(
            f"claimed: expected an integer >= 1 or a lower certificate of r_eps "
            f"(softrank.checker.LowerCertificate), got {printable(got)[:80]}")
    return int(claimed)


class RankReductionAttack:
    """One targeted attack (:func:`attack`, which validates the arguments and runs it): the
    methods of the module docstring tried in order until one finds a witness of rank
    ``claimed - 1`` that the checker accepts.

    Every candidate ``(U, W)`` goes through :meth:`consider` (the closest approach is
    recorded; one within ``eps`` is :meth:`confirm` ed by the checker); a right factor ``W``
    alone is finished by :meth:`polish`, the exact row-wise l1 regression. :meth:`run` makes
    the plan, runs each method under :meth:`attempt` (an exception is recorded against the
    method, never a verdict) and returns the :class:`AttackResult`.

    Parameters
    ----------
    A : (m, N) float64 ndarray
    eps : float
    claimed : int
        ``>= 1``; the witnesses searched for have rank ``claimed - 1``.
    upper_witness, effort, seed, interval, constructions, operator, time_limit
        As in :func:`attack` (already validated).
    """

    #: A candidate must come this close under ``eps`` (relative) before the checker is asked.
    MARGIN = 1e-12

    def __init__(self, A: np.ndarray, eps: float, claimed: int, *,
                 upper_witness: UpperWitness | None = None, effort: str = "standard",
                 seed: int = 0, interval: bool = True, constructions=(), operator=None,
                 time_limit: float | None = None):
        self.A, self.eps, self.k = A, eps, claimed
        self.deadline = None if time_limit is None else time.perf_counter() + time_limit
        self.r = claimed - 1
        self.upper_witness = upper_witness
        self.cfg = EFFORTS[effort]
        self.rng = np.random.default_rng(seed)
        self.interval = interval
        self.constructions = constructions
        self.operator = operator
        self.target = eps * (1 - self.MARGIN)
        self.result = AttackResult(claimed=claimed, target_rank=self.r, eps=eps)
        self.svd = None  # (U, s, Vt) of A, computed when a method needs it

    def past(self) -> bool:
        """The time limit has passed: the attack is marked cut short."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            self.result.cut_short = True
        return self.result.cut_short

    # -- what every method's candidates go through

    def confirm(self, U, W, method: str) -> bool:
        """Whether the checker accepts ``U W`` at ``eps``: then the attack succeeded."""
        wit = UpperWitness(self.eps, U, W, f"attack:{method}")
        if check(self.A, wit, interval=self.interval).ok:
            self.result.succeeded, self.result.witness = True, wit
            return True
        return False

    def consider(self, U, W, method: str) -> bool:
        """Record ``U W``'s max-row error; confirm it when it is within the target."""
        res = self.result
        err = float(_row_errors(self.A, U, W).max())
        if err < res.best_error:
            res.best_error, res.best_method = err, method
        return err <= self.target and self.confirm(U, W, method)

    def polish(self, W, method: str) -> bool:
        """Exact l1 regression of every row on ``W`` (hardest rows first, early exit)."""
        from .certifiers.lp import L1Regression  # lazy: keeps ``import softrank`` light

        A = self.A
        if W.shape[0] == 0 or not np.isfinite(W).all():
            return False
        solver = L1Regression(W)
        U = np.zeros((A.shape[0], W.shape[0]))
        order = np.argsort(-_row_errors(A, np.linalg.lstsq(W.T, A.T, rcond=None)[0].T, W))
        for i in order:
            if self.past():
                return False
            u = solver.solve(A[i])
            if u is None:
                return False
            U[i] = u
            e = float(np.abs(A[i] - u @ W).sum())
            if not np.isfinite(e) or e > self.target:
                return False
        return self.consider(U, W, method + "+lp")

    def attempt(self, method: str, fn) -> bool:
        """Run one method; an exception is recorded against it, never a verdict."""
        self.result.methods.append(method)
        try:
            return bool(fn())
        except Exception as exc:  # recorded; never a verdict
            self.result.failures.append(f"{method}: {type(exc).__name__}: {exc}")
            return False

    # -- the methods (docs/theory/attacks.md)

    def zero(self) -> bool:
        """Rank 0: ``B = 0``, error ``max_i ||a_i||_1``: the only candidate."""
        m, N = self.A.shape
        return self.consider(np.zeros((m, 0)), np.zeros((0, N)), "zero")

    def identity(self) -> bool:
        """``B = A`` itself, when ``claimed - 1 >= min(m, N)``."""
        from .certifiers.upper import identity_witness

        w = identity_witness(self.A, self.eps)
        return self.consider(w.U, w.W, "identity")

    def truncated_svd(self) -> bool:
        Us, s, Vt = self.svd
        r = self.r
        U, W = Us[:, :r] * s[:r], Vt[:r]
        return self.consider(U, W, "truncated-svd") or self.polish(W, "truncated-svd")

    def alternating(self, start: int) -> bool:
        """Alternating l1 from the SVD (``start = 0``) or from a random rotation of it."""
        from .certifiers.upper import AlternatingL1

        Us, s, Vt = self.svd
        r, N = self.r, self.A.shape[1]
        if start == 0:
            V0 = Vt
        else:
            G = Vt[:r] + 0.5 * self.rng.standard_normal((r, N)) / np.sqrt(N)
            V0 = np.vstack([_orth_rows(G), Vt[r:]])
        con = AlternatingL1(self.A, (Us, s, V0), iters=self.cfg["irls"])
        W = con.irls_basis(r)
        U = np.linalg.lstsq(W.T, self.A.T, rcond=None)[0].T
        name = f"alternating-l1[{start}]"
        return self.consider(U, W, name) or self.polish(W, name)

    def smoothed(self) -> bool:
        Us, s, Vt = self.svd
        r = self.r
        U, W = _smoothed_descent(self.A, Us[:, :r] * s[:r], Vt[:r].copy(), self.eps,
                                 self.cfg["lbfgs"], stop=self.past)
        return (self.consider(U, W, "smoothed-descent")
                or self.polish(_orth_rows(W), "smoothed-descent"))

    def perturb(self) -> bool:
        """From the upper witness: its top right singular vectors, then its own right factor
        with one row dropped (the rows of least weight first)."""
        wit, r = self.upper_witness, self.r
        B = wit.U @ wit.W
        _, _, Vb = np.linalg.svd(B, full_matrices=False)
        if self.polish(Vb[:r], "witness-svd"):
            return True
        Wu = wit.W
        if Wu.shape[0] == self.k:
            weight = np.linalg.norm(wit.U, axis=0) * np.linalg.norm(Wu, axis=1)
            for j in np.argsort(weight)[: self.cfg["drops"]]:
                if self.past():
                    return False
                Wd = np.delete(Wu, j, axis=0)
                if (np.linalg.matrix_rank(Wd) == r
                        and self.polish(_orth_rows(Wd), f"witness-drop[{j}]")):
                    return True
        return False

    def construction(self, con) -> bool:
        """A construction of the one interface, asked for a witness at ``eps``."""
        from .certifiers.interface import as_certifier
        from .operators import Operator

        c = as_certifier(con)
        op = self.operator if self.operator is not None else Operator(A=self.A)
        w = c.witness(op, self.eps)
        return w is not None and w.rank <= self.r and self.consider(w.U, w.W,
                                                                     f"construction:{c.name}")

    # -- the plan

    def plan(self) -> list:
        """``[(method name, callable)]`` in the order they are tried."""
        m, N = self.A.shape
        if self.r == 0:
            return [("zero", self.zero)]
        if self.r >= min(m, N):
            # B = A has rank <= min(m, N) <= r: the claim exceeds what any matrix needs
            return [("identity", self.identity)]
        self.svd = np.linalg.svd(self.A, full_matrices=False)
        plan = [(f"construction:{getattr(c, 'name', type(c).__name__)}",
                 lambda c=c: self.construction(c)) for c in self.constructions]
        plan.append(("truncated-svd", self.truncated_svd))
        plan += [(f"alternating-l1[{i}]", lambda i=i: self.alternating(i))
                 for i in range(self.cfg["starts"] + 1)]
        plan.append(("smoothed-descent", self.smoothed))
        if self.upper_witness is not None and self.upper_witness.rank >= self.k:
            plan.append(("witness-perturbation", self.perturb))
        return plan

    def run(self) -> AttackResult:
        """Try the plan's methods in order until one succeeds."""
        t0 = time.perf_counter()
        for name, fn in self.plan():
            if self.past():
                break
            if self.attempt(name, fn):
                break
        self.result.seconds = time.perf_counter() - t0
        return self.result

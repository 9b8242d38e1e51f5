"""``bracket(A, eps)``: the best sound pair ``lower <= r_eps(A) <= upper``
(docs/theory/quantity.md, docs/theory/witnesses.md, docs/theory/lower.md, docs/theory/checker.md).

For each tolerance the engine runs the registry of lower tests (trivial, Frobenius tail, key
groups, truncated pseudoinverse, subspace, LP decoders) and of constructions (truncated SVD,
key support, l1 refit, row basis, alternating l1, hybrid, ``A`` itself, then the reference
constructions: Nystrom landmarks, positive random features, sinks plus random features) of
:mod:`softrank.certifiers.registry`, then any extra ones a user passes -- all through one
interface (:mod:`softrank.certifiers.interface`). Every answer is checked in float64 with
rounding bounds; the strongest of each side that also passes the interval cross-check is
reported together with the certificate that backs it and the name of the method that made
it. An answer the checker rejects is recorded against its method and the next one tried; no
number reaches a :class:`Bracket` without its certificate having passed.

Work shared across tolerances (the :class:`~softrank.certifiers.interface.Context`): one SVD
of ``A``, the truncation errors of every rank, the per-rank l1-refit and LP-decoder solves,
the singular values of every row subset.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..checker import check, check_float64
from ..errors import InvalidArgumentError, SoftrankError
from ..operators import Operator
from ..stop import check as _check_stop
from ..deprecation import moved
from ..validation import EFFORTS, check_positive
from ..validation import check_effort as _check_effort
from ..validation import validate_eps as _validate_eps
from .interface import Certifier, Context, Diagnostics, MethodRecord
from .linalg import solve_device
from .memory import BASE_MEMORY, memory_estimate
from .registry import (check_unique_names, default_constructions, default_lower_tests,
                       extra_methods)
from .result import Bracket, monotone, set_verdict

# Bracket, monotone (.result), memory_estimate and BASE_MEMORY (.memory) are re-exported:
# what a caller of bracket() reads and sizes
__all__ = ["Bracket", "bracket", "lower_certificate", "monotone", "memory_estimate",
           "own_schedule", "BASE_MEMORY", "EFFORTS", "LATE_LOWER_SHARE", "EARLY_LOWER_SHARE"]

#: The share of a time limit kept for the late searches: under ``time_limit`` the
#: constructions that are not late stop at ``1 - LATE_LOWER_SHARE`` of it, so that the late
#: lower searches (subspace rows, climb and blocks) run on heads whose constructions would
#: take the whole limit (from 1,024 tokens on, the l1 refit and the alternating l1;
#: docs/benchmarks.md, "Blocks on long heads").
LATE_LOWER_SHARE = 0.1

#: The share of a time limit the lower tests that run first may take: under ``time_limit``
#: they stop at this fraction of it, so that the constructions get the rest (the subspace
#: test took 620 s of a 540 s limit on a tiny Llama's head of 2,048 tokens, and every
#: construction but the identity was skipped).
EARLY_LOWER_SHARE = 0.5

# validate_eps and check_effort moved to softrank.validation (kept here for one release)
__getattr__ = moved(__name__, {"validate_eps": "softrank.validation",
                               "check_effort": "softrank.validation"})


def _short(exc: Exception) -> str:
    msg = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {msg[0] if msg else ''}"[:300]


@dataclasses.dataclass(frozen=True)
class _Options:
    """What every tolerance of one :func:`bracket` call is computed with, validated there.

    ``op`` is the operator the methods receive; ``rho`` the enclosure radius of validated
    mode (the lower side is certified at ``eps + rho``, the upper at ``eps - rho``);
    ``time_limit`` seconds per tolerance; ``progress`` called with a line per method."""

    op: Any
    rho: float = 0.0
    interval: bool = True
    time_limit: float | None = None
    effort: str = "full"
    progress: Callable[[str], Any] | None = None


class _Engine:
    """One tolerance of one operator: runs every method, checks every answer in float64,
    reports the strongest end that also passes the interval check."""

    def __init__(self, ctx: Context, eps: float, *, opts: _Options, deadline: float | None,
                 diag: Diagnostics | None = None):
        self.op, self.ctx, self.eps, self.interval = opts.op, ctx, eps, opts.interval
        self.deadline = deadline
        self.progress = opts.progress
        self.diag = Diagnostics() if diag is None else diag

    def _say(self, rec: MethodRecord) -> None:
        if self.progress is not None:
            rank = f" rank {rec.rank}" if rec.rank is not None else ""
            why = f" ({rec.message})" if rec.message else ""
            self.progress(f"eps {self.eps:g}: {rec.side} {rec.name}: {rec.status}{rank}, "
                          f"{rec.seconds:.2f} s{why}")

    def run(self, c: Certifier, side: str, eps: float):
        """Call one method; return its answer if the float64 checker accepts it, else None.
        Every outcome is recorded; an exception costs that method only. Past the deadline
        only the built-in methods marked ``always`` (trivial, identity: O(m N)) still run;
        the others are recorded as skipped and the bracket as cut short."""
        _check_stop()  # a stop whose KeyboardInterrupt was dropped (softrank.stop)
        t = time.perf_counter()
        if (self.deadline is not None and t > self.deadline
                and not (c.origin == "builtin" and c.traits.always)):
            self.diag.cut_short = True
            self.diag.methods.append(MethodRecord(c.name, side, c.origin, "skipped", None, 0.0,
                                                  "time limit"))
            self._say(self.diag.methods[-1])
            return None
        # a built-in upper search looks only below the best witness and above the lower end,
        # a late built-in lower search only above the lower end and below the best witness
        # (a certificate of rank above r_eps cannot pass the checker): with nothing between
        # the ends, neither runs
        if c.origin == "builtin" and (
                (side == "upper" and c.traits.searches
                 and self.ctx.upper <= max(self.ctx.lower, 1))
                or (side == "lower" and c.traits.late and self.ctx.lower >= self.ctx.upper)):
            self.diag.methods.append(MethodRecord(
                c.name, side, c.origin, "skipped", None, 0.0,
                f"the ends cannot move: upper {self.ctx.upper}, lower {self.ctx.lower}"))
            self._say(self.diag.methods[-1])
            return None
        self.ctx.deadline = self.deadline  # the searches stop probing past it
        self.ctx.foreseen = False
        try:
            out = (c.witness if side == "upper" else c.certify)(self.op, eps, self.ctx)
        except Exception as exc:  # noqa: BLE001 - a failure is recorded, never a bound
            self.diag.methods.append(MethodRecord(c.name, side, c.origin, "failed", None,
                                                  time.perf_counter() - t, _short(exc)))
            self._say(self.diag.methods[-1])
            return None
        _check_stop()
        dt = time.perf_counter() - t
        late = "" if not self.ctx.past_deadline() else (
            "run after the time limit (it always runs)" if t > self.deadline
            else "the time limit ran out while it ran")
        if not late and self.ctx.foreseen:
            late = "stopped before the time limit, which the rest of its work would pass"
        if late and c.origin == "builtin":
            self.diag.cut_short = True  # a built-in search may have stopped at the limit
        if out is None:
            self.diag.methods.append(MethodRecord(c.name, side, c.origin, "declined", None, dt,
                                                  late))
            self._say(self.diag.methods[-1])
            return None
        rank = None
        try:
            rank = int(out.rank)
            if c.origin == "third-party" and side == "lower" and out.method != c.name:
                out = dataclasses.replace(out, method=c.name)  # credited by its name
            ok = check_float64(self.ctx.A, out).ok
            msg = late if ok else "the float64 checker rejected it"
        except Exception as exc:  # noqa: BLE001 - a certificate the checker cannot read
            ok, msg = False, f"the checker could not read it ({_short(exc)})"
        self.diag.methods.append(MethodRecord(c.name, side, c.origin, "ok" if ok else "rejected",
                                              rank, dt, msg))
        self._say(self.diag.methods[-1])
        return out if ok else None

    def first_passing(self, cands: list, owner: dict, side: str):
        """The first candidate (in the given order) that the full checker accepts, credited
        to its method; one that fails the interval check is recorded as rejected."""
        for cert in cands:
            rep = check(self.ctx.A, cert, interval=self.interval)
            if rep.ok:
                self.diag.reported[side] = owner[id(cert)].name
                return cert, rep
            rec = owner[id(cert)]
            rec.status = "rejected"
            rec.message = ("the interval check disagrees with float64" if rep.disagree
                           else "the checker rejected it")
            self.diag.checker_disagreements += bool(rep.disagree)
        return None, None


def own_schedule() -> tuple[tuple[str, str, str], ...]:
    """``(name, side, origin)`` of softrank's own methods in the order :func:`bracket` runs
    them at one tolerance, which is the order of their records in the bracket's
    diagnostics (one each): the lower tests that are not late, the constructions that are
    not late (built-in, then reference), the late lower tests, the late constructions. At
    ``effort="fast"`` the late ones are recorded too (skipped, ``"effort fast"``). A stored
    bracket's records must follow it (docs/store.md)."""
    tests, cons = default_lower_tests(), default_constructions()
    late = lambda c: c.origin == "builtin" and c.traits.late  # noqa: E731 - as _bracket_one
    return tuple([(c.name, "lower", c.origin) for c in tests if not late(c)]
                 + [(c.name, "upper", c.origin) for c in cons if not late(c)]
                 + [(c.name, "lower", c.origin) for c in tests if late(c)]
                 + [(c.name, "upper", c.origin) for c in cons if late(c)])


def _bracket_one(ctx: Context, eps_req: float, *, opts: _Options, lower_tests: list[Certifier],
                 constructions: list[Certifier], deadline: float | None = None) -> Bracket:
    """One tolerance; ``opts.rho > 0`` (validated mode) certifies the lower side at ``eps + rho``
    and the upper side at ``eps - rho`` (:mod:`softrank.checker.validated`). ``deadline``
    (``time.perf_counter()`` value) is checked before every method: past it only the
    ``always`` methods run and the bracket is cut short (a method already running is not
    interrupted). At ``effort="fast"`` the late built-in searches are not run: each is
    recorded as skipped, message ``"effort fast"``."""
    eng = _Engine(ctx, eps_req, opts=opts, deadline=deadline)
    rho, effort = opts.rho, opts.effort
    owner: dict = {}
    # the built-in searches marked ``late`` (subspace-rows, subspace-climb, subspace-blocks,
    # trust-region, alternating-l1-smooth, alternating-l1-anneal) run after every other
    # method of both sides: the others see the ends they saw without them, and under a time
    # limit they run first
    late = lambda c: c.origin == "builtin" and c.traits.late  # noqa: E731

    def run(methods, side):
        """Run ``methods`` on one side; their checked-in-float64 answers, strongest first."""
        found = []
        for c in methods:
            if effort == "fast" and late(c):
                eng.diag.methods.append(MethodRecord(c.name, side, c.origin, "skipped", None,
                                                     0.0, "effort fast"))
                eng._say(eng.diag.methods[-1])
                continue
            out = eng.run(c, side, eps_req + rho if side == "lower" else eps_req - rho)
            if out is not None:
                found.append(out)
                owner[id(out)] = eng.diag.methods[-1]
                if side == "lower":
                    ctx.lower = max(ctx.lower, out.rank)
                else:
                    ctx.upper = min(ctx.upper, out.rank)
        # stable: ties keep the order run
        found.sort(key=(lambda c: -c.rank) if side == "lower" else (lambda w: w.rank))
        return found

    # ---- lower side: every test, each raising the bar of the searches after it
    ctx.lower, ctx.upper = 0, ctx.p + 1
    if deadline is not None and opts.time_limit is not None:  # the rest is the constructions'
        eng.deadline = deadline - (1 - EARLY_LOWER_SHARE) * opts.time_limit
    early = run([t for t in lower_tests if not late(t)], "lower")
    eng.deadline = deadline
    lcert, lrep = eng.first_passing(early, owner, "lower")
    # ---- upper side: searches look only below the best witness so far
    ctx.lower = lcert.rank if lcert is not None else 0
    if deadline is not None and effort == "full" and opts.time_limit is not None:
        # the last LATE_LOWER_SHARE of the limit is kept for the late searches: on long
        # heads the constructions would take it all, and the block certificates need it
        eng.deadline = deadline - LATE_LOWER_SHARE * opts.time_limit
    uppers = run([c for c in constructions if not late(c)], "upper")
    share, eng.deadline = eng.deadline, deadline
    # ---- the late searches: lower ones above the checked lower end, then upper ones below
    # the best witness so far (and above the lower end they may have raised); in the share
    # only those that ask the limit inside their probes (Traits.asks_limit): a probe that
    # does not can run minutes past the limit on a long head
    found = []
    for t in (t for t in lower_tests if late(t)):
        if (share != deadline and share < time.perf_counter() <= deadline
                and not t.traits.asks_limit):
            eng.diag.cut_short = True
            eng.diag.methods.append(MethodRecord(
                t.name, "lower", t.origin, "skipped", None, 0.0,
                "time limit (the last tenth is kept for searches that ask it inside)"))
            eng._say(eng.diag.methods[-1])
        else:
            found += run([t], "lower")
    found.sort(key=lambda c: -c.rank)  # stable: ties keep the order run
    better = [c for c in found if lcert is None or c.rank > lcert.rank]
    if better:
        lcert2, lrep2 = eng.first_passing(better, owner, "lower")
        if lcert2 is not None:
            lcert, lrep = lcert2, lrep2
    ctx.lower = lcert.rank if lcert is not None else 0
    uppers += run([c for c in constructions if late(c)], "upper")
    uppers.sort(key=lambda w: w.rank)  # stable: built-ins first among equal ranks
    uwit, urep = eng.first_passing(uppers, owner, "upper")

    br = Bracket(eps=eps_req, lower=lcert.rank if lcert else None,
                 upper=uwit.rank if uwit else None,
                 lower_certificate=lcert, upper_witness=uwit,
                 lower_method=lcert.method if lcert else "",
                 upper_method=uwit.method if uwit else "", diagnostics=eng.diag)
    if lrep is not None:
        br.checks["lower"] = lrep
    if urep is not None:
        br.checks["upper"] = urep
    set_verdict(br)
    return br


def lower_certificate(B: np.ndarray, eps: float, *, interval: bool = True,
                      effort: str = "full", deadline: float | None = None, progress=None,
                      context: Context | None = None, diagnostics: Diagnostics | None = None,
                      late: bool = True):
    """softrank's own lower tests on any finite matrix ``B`` at ``eps``: the strongest lower
    certificate of ``r_eps(B)`` that passes the checker in both arithmetics, or None.

    The lower side of :func:`bracket` without an operator: ``B`` need not have rows that sum
    to 1 (the certificates' conditions hold for any matrix, docs/theory/lower.md); the
    causal brackets run it on blocks below the diagonal (docs/theory/causal.md).

    Parameters
    ----------
    B : (m, N) float64 ndarray
    eps : float
    interval : bool
        Also the interval check (default True).
    effort : {"full", "fast"}
        ``fast``: the late searches (subspace-rows, subspace-climb, subspace-blocks) do
        not run.
    deadline : float, optional
        A ``time.perf_counter()`` value past which only the ``always`` tests run.
    progress : callable, optional
        Called with a line per method.
    context : Context, optional
        Shared work on ``B`` (one SVD, LP caches); a new one by default. ``context.lower``
        is raised to the certified rank.
    diagnostics : Diagnostics, optional
        Where the methods' records go (a new one by default).
    late : bool
        With ``False`` the late tests do not run even at full effort.

    Returns
    -------
    (certificate or None, CheckReport or None, Diagnostics)
    """
    from types import SimpleNamespace

    ctx = Context(np.asarray(B, dtype=np.float64)) if context is None else context
    ctx.lower, ctx.upper = 0, ctx.p + 1
    holder = SimpleNamespace(A=ctx.A)  # the built-in tests read the context only
    opts = _Options(holder, interval=interval, effort=effort, progress=progress)
    eng = _Engine(ctx, eps, opts=opts, deadline=deadline, diag=diagnostics)
    owner: dict = {}
    tests = default_lower_tests()
    is_late = lambda c: c.traits.late  # noqa: E731
    run_late = late and effort == "full"
    found = []
    for c in tests:
        if is_late(c) and not run_late:
            continue
        out = eng.run(c, "lower", eps)
        if out is not None:
            found.append(out)
            owner[id(out)] = eng.diag.methods[-1]
            ctx.lower = max(ctx.lower, out.rank)
    found.sort(key=lambda c: -c.rank)
    cert, rep = eng.first_passing(found, owner, "lower")
    return cert, rep, eng.diag


def _extend_one(br: Bracket, ctx: Context, *, opts: _Options, lower_tests: list[Certifier],
                constructions: list[Certifier], deadline: float | None) -> bool:
    """Run the extra methods (a user's lower tests and constructions) at ``br.eps`` after
    softrank's own bracket ``br`` is made: each answer is checked in float64 and recorded in
    ``br.diagnostics``; the strongest one beyond the bracket's end that also passes the full
    check becomes the end, credited to its method. Returns whether an end moved."""
    eng = _Engine(ctx, br.eps, opts=opts, deadline=deadline, diag=br.diagnostics)
    rho = opts.rho
    owner: dict = {}
    moved = False
    ctx.lower = br.lower or 0
    ctx.upper = br.upper if br.upper is not None else ctx.p + 1
    found = []
    for t in lower_tests:
        out = eng.run(t, "lower", br.eps + rho)
        if out is not None:
            owner[id(out)] = eng.diag.methods[-1]
            if br.lower is None or out.rank > br.lower:
                found.append(out)
    found.sort(key=lambda c: -c.rank)
    lcert, lrep = eng.first_passing(found, owner, "lower")
    if lcert is not None:
        br.lower_certificate, br.lower, br.lower_method = lcert, lcert.rank, lcert.method
        br.checks["lower"] = lrep
        br.diagnostics.carried.pop("lower", None)
        ctx.lower, moved = lcert.rank, True
    found = []
    for c in constructions:
        out = eng.run(c, "upper", br.eps - rho)
        if out is not None:
            owner[id(out)] = eng.diag.methods[-1]
            if br.upper is None or out.rank < br.upper:
                found.append(out)
    found.sort(key=lambda w: w.rank)
    uwit, urep = eng.first_passing(found, owner, "upper")
    if uwit is not None:
        br.upper_witness, br.upper, br.upper_method = uwit, uwit.rank, uwit.method
        br.checks["upper"] = urep
        br.diagnostics.carried.pop("upper", None)
        moved = True
    if moved:
        br.diagnostics.error = ""
        set_verdict(br)
    return moved


def bracket(A, eps, *, interval: bool = True, validated: bool = False,
            time_limit: float | None = None, constructions=None,
            lower_tests=None, progress=None, effort: str = "full",
            store=None) -> list[Bracket]:
    """Certified brackets ``lower <= r_eps(A) <= upper`` (docs/theory/quantity.md, docs/theory/witnesses.md, docs/theory/lower.md).

    Parameters
    ----------
    A : (m, N) array_like or Operator
        Row-stochastic attention matrix (validated as an :class:`~softrank.Operator`).
    eps : float or sequence of float
        Tolerances in ``(0, 1)`` (max-row-l1 error).
    interval : bool
        Run the interval cross-check on every reported certificate (default True).
    validated : bool
        Bracket the exact ``softmax_rows(beta Q K^T)`` of the operator's float64 factors
        instead of its float64 ``A`` (docs/theory/checker.md#validated-input): the softmax is enclosed
        in ball arithmetic, ``A`` replaced by the enclosure's midpoint, and each side
        certified with the tolerance moved by the enclosure radius ``rho``.
    time_limit : float, optional
        Seconds per tolerance (the shared set-up is charged to the first, the largest
        ``eps``). Checked before each method and, inside the searches that probe rank
        after rank (l1 refit, row basis, the alternating l1 and its restarts, hybrid, the
        trust-region polish), before each rank, each exact row solve of a rank, each
        reweighting step of the l1 refit's screening and each iteration of the alternating
        l1 (``Context.past_deadline``; a rank cut there is left undecided; an l1 refit LP
        gets at most the seconds left, other solves already going are not interrupted):
        past it a search stops with the least rank
        it has shown to hold, the remaining methods are skipped except the trivial lower
        test and the identity witness (``O(m N)``), and the tolerance is reported with the
        best checked ends of the methods that ran, ``cut_short`` set. Never an unchecked
        bound. The lower tests that run first stop at
        :data:`~softrank.certifiers.bracket.EARLY_LOWER_SHARE` of the limit (half), which
        leaves the rest to the constructions. At full effort the constructions that are not
        late stop when all but
        :data:`~softrank.certifiers.bracket.LATE_LOWER_SHARE` of the limit (a tenth) is
        spent, which leaves that to the late searches, lower ones first: the subspace
        climb, also on blocks, which asks the limit before each dimension (late lower
        tests that do not ask it inside their probes are skipped there).
    constructions, lower_tests : list, optional
        Extra methods, run at every tolerance after softrank's own bracket is made (so
        softrank's ends never depend on them, and a stored reference bracket serves every
        run): objects with ``witness(operator, eps)`` / ``certify(operator, eps)`` (or
        classes instantiable without arguments, or ``"MODULE:OBJECT"`` strings; see
        :mod:`softrank.certifiers.interface`). Each answer is checked like a built-in one;
        one that the checker accepts and beats softrank's end becomes the reported end,
        credited by the method's name; one that it rejects is recorded as ``rejected`` in
        ``diagnostics`` and never reported. A method that raises is recorded as ``failed``.
        They run on every tolerance with a bracket (an ``error`` bracket without any end is
        left as it is), with a time limit of their own of ``time_limit`` seconds per
        tolerance.
    effort : {"full", "fast"}
        ``"full"`` (default) runs every built-in method. ``"fast"`` skips the late searches
        named above (each recorded in ``diagnostics`` as ``skipped``, message ``"effort
        fast"``; extra methods still run): brackets as sound, from the other methods alone,
        so mostly wider (on the default panel 657 of 1074 ends wider than at ``"full"``,
        none narrower) for about an eighth of the time (README, "Effort"). Unlike with
        ``time_limit``, which methods run does not depend on the machine's speed.

    store : object, optional
        Where softrank's own brackets are kept between runs, e.g. a
        :class:`softrank.refstore.ReferenceStore` (any object with its ``brackets`` method):
        the tolerances it holds for this operator, ``effort`` and ``validated`` are read back
        and checked again in both arithmetics; the others are computed and stored
        (docs/store.md). Default None: everything is computed, nothing kept.

    Returns
    -------
    list of Bracket
        One per tolerance, in the order given (a list of one for a single ``eps``: ``(br,) =
        bracket(A, 0.25)``). Each has an explicit ``verdict``; an ``error`` bracket (a set-up
        failure, a crash, an end that no method could certify) has None for each end without
        a checked certificate and says why in ``diagnostics.error``: never a bound.

    Raises
    ------
    InvalidOperatorError
        If ``A`` is not a valid attention matrix.
    InvalidArgumentError
        If a tolerance is outside ``(0, 1)``, ``validated`` without ``Q``, ``K``, ``beta``, an
        extra method lacks its protocol's method, two methods of one side share a name,
        ``effort`` is not one of :data:`EFFORTS`, or ``$SOFTRANK_DEVICE`` is not a device
        the solves can use (:func:`softrank.certifiers.linalg.solve_device`).

    Other Parameters
    ----------------
    progress : callable, optional
        Called with one line of text after every method of every tolerance (its side,
        name, outcome, rank and seconds): ``softrank bracket --progress`` prints them.
    """
    _check_effort(effort)
    solve_device()  # a bad $SOFTRANK_DEVICE is refused here, not by every search that solves
    op = A if isinstance(A, Operator) else Operator(A=A)
    eps_list = _validate_eps(eps)
    own_cons, own_tests = default_constructions(), default_lower_tests()
    extra_cons, extra_tests = extra_methods(constructions, "upper"), extra_methods(lower_tests, "lower")
    check_unique_names(own_cons + extra_cons, "upper")
    check_unique_names(own_tests + extra_tests, "lower")
    if time_limit is not None:
        check_positive(time_limit, "time_limit (seconds)")
    if store is not None and not callable(getattr(store, "brackets", None)):
        raise InvalidArgumentError(
            f"store: expected a reference store (softrank.refstore.ReferenceStore(path)), got "
            f"{store!r:.80}")
    t0 = time.perf_counter()
    rho = 0.0
    A_used = op.A
    if validated:
        if op.Q is None:
            raise InvalidArgumentError(
                "validated: needs the operator's factors Q, K and beta, got an operator "
                f"{op.operator_id!r} without them")
        from ..checker.validated import enclose_softmax

        A_used, rho = enclose_softmax(op.Q, op.K, op.beta, op.mask)
        if rho >= min(eps_list):
            raise InvalidArgumentError(
                f"eps: the smallest tolerance {min(eps_list)!r} does not exceed the enclosure "
                f"radius rho = {rho!r} of the exact softmax")
    contexts: list = []  # the shared Context, once made
    setup = [time.perf_counter() - t0]  # the enclosure's time: charged to the first bracket
    opts = _Options(op, rho=rho, interval=interval, time_limit=time_limit, effort=effort,
                    progress=progress)

    def own(eps_wanted: list[float]) -> list[Bracket]:
        """softrank's own brackets at ``eps_wanted`` (monotone among themselves)."""
        brs = _own_brackets(A_used, eps_wanted, opts=opts, lower_tests=own_tests,
                            constructions=own_cons, contexts=contexts)
        brs[eps_wanted.index(max(eps_wanted))].seconds += setup.pop() if setup else 0.0
        return brs

    if store is None:
        out = own(eps_list)
    else:
        out = store.brackets(op, A_used, rho, eps_list, effort=effort, validated=validated,
                             interval=interval, compute=own)
        # tolerances read back and computed may come from different runs: carry ends
        monotone(sorted(out, key=lambda b: b.eps), A_used, interval)
    if extra_cons or extra_tests:
        if not contexts:
            try:
                contexts.append(Context(A_used))
            except Exception:  # noqa: BLE001 - only the extras need it; they cannot run
                contexts.append(None)
        ctx = contexts[0]
        moved = False
        for br in sorted(out, key=lambda b: -b.eps):
            if ctx is None or (br.lower_certificate is None and br.upper_witness is None):
                continue  # no bracket to extend: its error says why
            t = time.perf_counter()
            deadline = None if time_limit is None else t + float(time_limit)
            moved |= _extend_one(br, ctx, opts=opts, lower_tests=extra_tests,
                                 constructions=extra_cons, deadline=deadline)
            br.seconds += time.perf_counter() - t
        if moved:
            monotone(sorted(out, key=lambda b: b.eps), A_used, interval)
    by_eps = {b.eps: b for b in out}
    return [by_eps[e] for e in eps_list]


def _own_brackets(A_used: np.ndarray, eps_list: list[float], *, opts: _Options,
                  lower_tests: list[Certifier], constructions: list[Certifier],
                  contexts: list) -> list[Bracket]:
    """softrank's own brackets of ``A_used`` at every tolerance of ``eps_list`` (in that
    order), made monotone in ``eps``; the shared :class:`Context` is appended to
    ``contexts`` (None when its set-up failed)."""
    t0 = time.perf_counter()
    time_limit, rho = opts.time_limit, opts.rho
    try:
        ctx = contexts[0] if contexts else Context(A_used)
        ctx.svd  # noqa: B018 - computed up front: an SVD that does not converge is no bracket
        setup_error = None
    except Exception as exc:  # e.g. an SVD that does not converge: no bound at all
        ctx, setup_error = None, f"{type(exc).__name__}: {exc}"
    if not contexts:
        contexts.append(ctx)
    out = []
    # largest tolerance first: its small ranks give cheap bisection ranges for the rest;
    # the shared set-up time is charged to it
    for e in sorted(set(eps_list), reverse=True):
        try:
            if ctx is None:
                raise SoftrankError(f"set-up failed: {setup_error}")
            deadline = None if time_limit is None else t0 + float(time_limit)
            br = _bracket_one(ctx, e, opts=opts, lower_tests=lower_tests,
                              constructions=constructions, deadline=deadline)
        except Exception as exc:  # a crash is an error verdict, never a bound
            br = Bracket.failed(e, f"{type(exc).__name__}: {exc}")
        t1 = time.perf_counter()
        br.seconds = t1 - t0
        br.rho = rho
        t0 = t1
        out.append(br)
    if ctx is not None:
        monotone(sorted(out, key=lambda b: b.eps), ctx.A, opts.interval)
    by_eps = {b.eps: b for b in out}
    return [by_eps[e] for e in eps_list]

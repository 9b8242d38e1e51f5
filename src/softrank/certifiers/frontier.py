"""The rank-error frontier ``e_k(A) = min { ||A - B||_inf : rank B <= k }`` bracketed for a
range of ranks (docs/theory/frontier.md).

:func:`frontier` returns, for every ``k`` of the range, a band ``lower < e_k <= upper``
(``lower <= e_k`` where no certificate reaches ``k``: then ``lower = 0``), each end backed by a
certificate that passed the checker in both arithmetics at exactly that value:

* the **upper end** at ``k`` is the least error of a checked witness of rank at most ``k``
  (``e_k`` is non-increasing in ``k``): the zero matrix (rank 0, so that no upper end exceeds
  ``e_0 = ||A||_inf`` by more than the checker's rounding allowance), truncated SVDs, the l1
  refit of the singular basis at each rank, the alternating l1 at each rank
  (``effort="full"``), the witnesses of the brackets at ``eps`` and the constructions'
  (``witness_at_rank``). A witness's error is the least tolerance at which the checker
  accepts it (:func:`~softrank.certifiers.tolerances.least_error`);
* the **lower end** at ``k`` is the largest tolerance at which the checker accepts a lower
  certificate of rank ``r >= k + 1``: a certificate of rank ``r`` valid at ``eps`` proves
  ``r_eps >= r``, that is ``e_{r-1} > eps``, hence ``e_k > eps`` for every ``k <= r - 1``.
  Each certificate's condition is monotone in ``eps``, so its largest accepted tolerance is
  found by a search on the checker's own condition
  (:func:`~softrank.certifiers.tolerances.largest_eps`), without new
  searches. Certificates: the subspace certificate of the top ``r`` right singular vectors
  at every ``r``, the Frobenius tail at every ``r``, key groups over a grid of tolerances and
  the lower certificates of the brackets at ``eps``.

Every end is checked against the operator's own ``A``, whatever produced it. The
constructions drawn on the band get a :class:`Curve` with two scores. Where
:func:`softrank.bracket` gives ``[L, U]`` at ``eps`` (the brackets the frontier runs),
the band has ``lower >= eps`` at ``k = L - 1`` and ``upper <= eps`` at ``k = U``: the
bracket's own certificates are among the band's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from ..checker import FrobeniusCertificate, UpperWitness
from ..errors import InvalidArgumentError
from ..operators import Operator
from ..validation import check_int
from ..validation import check_effort, validate_eps
from .bracket import Bracket, bracket
from .interface import Context, as_certifier
from .lower.basic import key_groups, row_order, subset_sizes
from .lower.climb import SubspaceClimb
from .lower.subspace import SubspaceSearch
from .registry import REFERENCE, builtin, load_certifier
from .tolerances import confirm_largest, confirm_least, float64_error, float64_largest_eps
from .upper.alternating import AlternatingL1
from .upper.refit import l1_candidates

__all__ = ["FrontierPoint", "Frontier", "Curve", "frontier", "excess_error", "excess_rank",
           "BEST_BUILTIN", "DEFAULT_MAX_RANK", "KEY_GROUP_EPS"]

#: The curve of softrank's own witnesses: at each rank the least checked-in-float64 error
#: of its searches' and brackets' witnesses (and the zero matrix) of that rank or below.
BEST_BUILTIN = "best built-in"
#: Ranks ``1 .. min(m, N, DEFAULT_MAX_RANK)`` when no range is given.
DEFAULT_MAX_RANK = 64
#: The tolerances at which key-group certificates are sought (each is then pushed to its
#: largest accepted tolerance).
KEY_GROUP_EPS = tuple(float(e) for e in np.round(np.geomspace(0.01, 0.95, 16), 6))


@dataclass(frozen=True)
class FrontierPoint:
    """The band at one rank.

    Attributes
    ----------
    rank : int
        ``k``.
    lower : float
        ``e_k > lower`` (max-row-l1 error, dimensionless), proved by ``lower_method``'s
        certificate at tolerance ``lower``; ``0.0`` with ``lower_method`` empty where no
        certificate reaches ``k`` (then only ``e_k >= 0``).
    upper : float
        ``e_k <= upper``, proved by ``upper_method``'s witness at tolerance ``upper``.
    lower_rank, upper_rank : int or None
        The rank of the certificate (``>= k + 1``) and of the witness (``<= k``) behind the
        ends.
    """

    rank: int
    lower: float
    upper: float
    lower_method: str = ""
    upper_method: str = ""
    lower_rank: int | None = None
    upper_rank: int | None = None

    def to_dict(self) -> dict:
        return {"rank": self.rank, "lower": self.lower, "upper": self.upper,
                "lower_method": self.lower_method, "upper_method": self.upper_method,
                "lower_rank": self.lower_rank, "upper_rank": self.upper_rank}


@dataclass
class Curve:
    """A construction's errors at the ranks of a band (docs/theory/frontier.md).

    Attributes
    ----------
    name : str
    errors : dict
        ``{k: error}``: the float64 checker's rigorous bound of ``||A - U W||_inf`` for the
        construction's witness at rank ``k`` (``witness_at_rank``; the truncated SVD's own),
        where it answered.
    excess_error : float or None
        Median over its ranks with a positive lower end of ``error / lower``: at least
        ``error / e_k`` (``lower < e_k``), so the construction is at most that many times
        the least possible error there. None without such a rank.
    excess_rank : float or None
        Median over its ranks with a positive lower end of ``k / L(error)`` (ranks past every
        certificate, where ``e_k`` may be 0, say nothing of a budget), ``L(e)`` the least
        rank the band does not
        exclude at error ``e`` (one above the last rank with ``lower >= e``, else 1): at
        least ``k / r_e(A)``, so it uses at most that many times the least rank that
        reaches its own error. A point whose error is at least ``||A||_inf = e_0`` (the zero
        matrix does as well) counts as infinite. None without points.
    failed : str
        Why it failed (a raised error, a protocol breach), or empty.
    """

    name: str
    errors: dict = field(default_factory=dict)
    excess_error: float | None = None
    excess_rank: float | None = None
    failed: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "errors": {str(k): v for k, v in self.errors.items()},
                "excess_error": self.excess_error, "excess_rank": self.excess_rank,
                "failed": self.failed}


@dataclass
class Frontier:
    """The band of :func:`frontier` for ranks ``points[0].rank .. points[-1].rank``.

    Attributes
    ----------
    points : list of FrontierPoint
    certificates : dict
        ``{rank r: certificate}``: the lower certificate of each rank that backs an end, at
        its largest accepted tolerance (its ``eps``).
    witnesses : dict
        ``{rank k: UpperWitness}``: the best witness of each rank, at its least accepted
        tolerance (its ``eps``: its checked error).
    brackets : list of Bracket
        The brackets run at the tolerances given.
    curves : list of Curve
        The constructions' errors at each rank (the truncated SVD, the best of softrank's own
        witnesses (:data:`BEST_BUILTIN`), the reference constructions, the ones given), with
        their scores.
    seconds : float
        Wall time, with the brackets' (from a reference store they cost a check).
    timings : dict
        Seconds per source of ends (``brackets``, ``svd``, ``refit``, ``alternating``,
        ``subspace``, ``frobenius``, ``key_groups``, ``search``: the monotone searches
        and their checks).
    """

    points: list
    certificates: dict = field(default_factory=dict, repr=False)
    witnesses: dict = field(default_factory=dict, repr=False)
    brackets: list = field(default_factory=list, repr=False)
    curves: list = field(default_factory=list)
    seconds: float = 0.0
    timings: dict = field(default_factory=dict)

    def to_dicts(self) -> list[dict]:
        """One dict per rank: :meth:`FrontierPoint.to_dict` and ``constructions``, the
        curves' errors at that rank (``{name: error}``, where they answered)."""
        return [{**p.to_dict(), "constructions": {c.name: c.errors[p.rank] for c in self.curves
                                                   if p.rank in c.errors}}
                for p in self.points]

    @property
    def below_band(self) -> list[tuple[str, int]]:
        """``(construction, k)`` where a construction's checked error is at or below the
        band's lower end (``e_k > lower``): a certificate or the checker is wrong."""
        lower = {p.rank: p for p in self.points}
        return [(c.name, k) for c in self.curves for k, e in sorted(c.errors.items())
                if k in lower and lower[k].lower_method and e <= lower[k].lower]

    @property
    def unsound(self) -> list[int]:
        """The ranks whose ends contradict each other (``lower >= upper``: ``e_k > lower``
        and ``e_k <= upper`` cannot both hold): a bug in a certificate or the checker."""
        return [p.rank for p in self.points if p.lower >= p.upper]


def excess_error(points, errors: dict) -> float | None:
    """Median of ``errors[k] / lower_k`` over the ranks with a positive lower end (see
    :class:`Curve`), or None."""
    lower = {p.rank: p.lower for p in points}
    r = [e / lower[k] for k, e in errors.items() if lower.get(k, 0.0) > 0 and np.isfinite(e)]
    return float(np.median(r)) if r else None


def excess_rank(points, errors: dict, norm: float = 1.0) -> float | None:
    """Median of ``k / L(errors[k])`` over the ranks with a positive lower end (see
    :class:`Curve`), or None. An error at or above ``norm`` (``||A||_inf = e_0``: the zero
    matrix does as well) counts as infinite."""
    lower = {p.rank: p.lower for p in points}
    r = []
    for k, e in errors.items():
        if not np.isfinite(e) or not lower.get(k, 0.0) > 0:
            continue  # (where no certificate reaches k, rank k may not be needed at all)
        if e >= norm:
            r.append(np.inf)
            continue
        above = [p.rank for p in points if p.lower >= e]  # e_j > lower >= e: r_e > j
        r.append(k / (max(above) + 1 if above else 1))
    return float(np.median(r)) if r else None


def _constructions(items) -> list:
    """``constructions`` as certifiers (objects, classes or ``MODULE:OBJECT`` strings), each
    with a ``witness`` method."""
    if items is None:
        return []
    if isinstance(items, (str, bytes)) or not isinstance(items, (list, tuple)):
        raise InvalidArgumentError(f"constructions: expected a list of constructions, got "
                                   f"{items!r}")
    out = []
    for it in items:
        c = load_certifier(it, "constructions") if isinstance(it, str) else as_certifier(it)
        if not c.is_construction:
            raise InvalidArgumentError(f"constructions: {c.name!r} has no witness(operator, eps) "
                                       "method")
        out.append(c)
    return out


def _ranks(ranks, p: int) -> list[int]:
    """The ranks asked for, increasing: a tuple ``(first, last)`` means every rank between,
    a list or range exactly its ranks; each in ``[1, p]``."""
    if ranks is None:
        return list(range(1, min(p, DEFAULT_MAX_RANK) + 1))
    if isinstance(ranks, tuple):
        try:
            k1, k2 = ranks
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"ranks: expected (first, last), got {ranks!r}") from None
        k1 = check_int(k1, "ranks", 1)
        k2 = check_int(k2, "ranks", 1)
        if k1 > k2 or k2 > p:
            raise InvalidArgumentError(f"ranks: expected 1 <= first <= last <= {p} (min(m, N)), "
                                       f"got {k1}:{k2}")
        return list(range(k1, k2 + 1))
    if not isinstance(ranks, (list, range)) or len(ranks) == 0:
        raise InvalidArgumentError(f"ranks: expected (first, last) or a non-empty list of "
                                   f"ranks, got {ranks!r:.80}")
    ks = sorted({check_int(k, "ranks", 1, p) for k in ranks})
    return ks


def frontier(A, ranks=None, eps=(0.1, 0.25, 0.5), *, interval: bool = True,
             effort: str = "full", store=None, constructions=None, reference: bool = True,
             brackets=None, progress=None) -> Frontier:
    """The band ``lower < e_k(A) <= upper`` for every ``k`` of ``ranks``
    (docs/theory/frontier.md).

    Parameters
    ----------
    A : (m, N) array_like or Operator
        Row-stochastic attention matrix (validated as an :class:`~softrank.Operator`).
    ranks : (int, int) or list of int, optional
        A tuple: the first and last rank, ``1 <= first <= last <= min(m, N)``, and every
        rank between; a list or range: exactly those ranks (each in ``[1, min(m, N)]``).
        Default ``1`` to ``min(m, N, 64)``.
    eps : float or sequence of float
        Tolerances in ``(0, 1)`` bracketed with :func:`softrank.bracket` first (their
        certificates join the band's; an empty list or tuple for none).
    interval : bool
        Confirm every end with the interval cross-check too (default True).
    effort : {"full", "fast"}
        Passed to the brackets; ``"full"`` also runs the alternating l1 at every rank of the
        range (the costliest source of upper ends).
    store : object, optional
        A reference store for the brackets (:func:`softrank.bracket`).
    constructions : list, optional
        Constructions to draw against the band (objects, classes or ``MODULE:OBJECT``
        strings, as for :func:`softrank.bracket`); those with ``witness_at_rank(operator,
        k)`` (:mod:`softrank.certifiers.interface`) get a :class:`Curve`, and their
        witnesses join the upper ends. They do not run in the brackets.
    reference : bool
        Also draw the reference constructions (Nystrom landmarks, random features, sinks
        plus random features; they need the operator's factors) (default True).
    brackets : list of Bracket, optional
        Brackets of this operator already made (the audit's): used instead of bracketing
        ``eps`` again (their certificates are checked again with the band's ends).
    progress : callable, optional
        Called with one line per finished source.

    Returns
    -------
    Frontier

    Raises
    ------
    InvalidArgumentError
        If ``ranks``, ``eps`` or ``effort`` is invalid (before any work);
        :class:`~softrank.errors.InvalidOperatorError` if ``A`` is not an attention matrix.
    """
    op = A if isinstance(A, Operator) else Operator(np.asarray(A))
    A = op.A
    m, N = A.shape
    p = min(m, N)
    ks = _ranks(ranks, p)
    k1, k2 = ks[0], ks[-1]
    empty = isinstance(eps, (list, tuple, np.ndarray)) and len(eps) == 0
    eps_list = [] if empty else validate_eps(eps)
    effort = check_effort(effort)
    users = _constructions(constructions)
    drawn = ([builtin(n) for n in REFERENCE] if reference else []) + users
    drawn_names = {c.name for c in drawn} | set(REFERENCE)  # not softrank's own witnesses
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    say = progress or (lambda line: None)

    @contextlib.contextmanager
    def timed(name):
        t = time.perf_counter()
        yield
        dt = time.perf_counter() - t
        timings[name] = timings.get(name, 0.0) + dt
        say(f"{name}: {dt:.2f} s")

    # unchecked candidates: (witness, method, the float64 checker's bound of its error)
    uppers: list[tuple[UpperWitness, str, float | None]] = []
    lowers: list = []
    norm = float(np.abs(A).sum(axis=1).max())  # ||A||_inf = e_0

    def add(w: UpperWitness, name: str) -> float | None:
        b = float64_error(A, w) if w.rank <= k2 else None
        uppers.append((w, name, b))
        return b

    # B = 0 (rank 0, error ||A||_inf = e_0): an end at every k. The searches below fit in l2
    # or by reweighted least squares, not by exact l1, and at low rank can end above it (the
    # near one-hot first rows of a causal head)
    add(UpperWitness(1.0, np.zeros((m, 0)), np.zeros((0, N)), "zero"), "zero")
    with timed("brackets"):
        if brackets is not None:
            brs: list[Bracket] = list(brackets)
        else:
            brs = (bracket(op, eps_list, interval=interval, effort=effort, store=store)
                   if eps_list else [])
    for br in brs:
        if br.upper_witness is not None and br.upper is not None:
            add(br.upper_witness, br.upper_method)
        if br.lower_certificate is not None and br.lower is not None:
            lowers.append(br.lower_certificate)
    tsvd_errors: dict[int, float] = {}
    with timed("svd"):
        U0, s0, Vt0 = np.linalg.svd(A, full_matrices=False)
        for k in ks:
            b = add(UpperWitness(1.0, U0[:, :k] * s0[:k], Vt0[:k], "truncated-svd"),
                    "truncated-svd")
            if b is not None:
                tsvd_errors[k] = b
    curves = [Curve("truncated-svd", tsvd_errors)]
    with timed("constructions"):
        ctx = Context(A)
        for c in drawn:
            cur = Curve(c.name)
            curves.append(cur)
            if not c.offers_rank:
                cur.failed = "no witness_at_rank"
                continue
            unbounded = 0
            for k in ks:
                try:
                    w = c.witness_at_rank(op, k, ctx)
                except Exception as exc:  # noqa: BLE001 - recorded, never an end
                    cur.failed = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
                    break
                if w is not None:
                    b = add(w, c.name)
                    if b is not None:
                        cur.errors[k] = b
                    else:
                        unbounded += 1
            if not cur.errors and not cur.failed:
                cur.failed = ("no finite checked error at any rank (U W overflows)" if unbounded
                              else "declined at every rank")
    with timed("refit"):
        # the l1 refit of the singular basis: each row's reweighted least-squares candidate
        # (any U is a witness; the checker bounds its error)
        for k in ks:
            U, _ = l1_candidates(A, Vt0[:k])
            if np.isfinite(U).all():
                add(UpperWitness(1.0, U, Vt0[:k], "l1-refit"), "l1-refit")
    if effort == "full":
        with timed("alternating"):
            alt = AlternatingL1(A, (U0, s0, Vt0))
            for k in ks:
                W = alt.irls_basis(k)
                U, _ = l1_candidates(A, W)
                if np.isfinite(U).all():
                    add(UpperWitness(1.0, U, W, "alternating-l1"), "alternating-l1")
    with timed("subspace"):
        climb = SubspaceClimb(A, Vt0.T, "svd")
        search = SubspaceSearch(A, Vt0.T, "svd")
        for r in sorted({k + 1 for k in ks if k < p}):
            beta = climb.beta(Vt0[:r].T, 0.0)  # its LPs do not depend on eps
            if not (np.isfinite(beta) and beta > 0):
                continue
            for shrink in (1e-6, 1e-4, 1e-2):
                cert = search.certificate(r, float(beta * (1 - shrink)))
                if cert is not None:
                    lowers.append(cert)
                    break
    with timed("frobenius"):
        order = row_order(A)
        tails = []
        for size in subset_sizes(m):
            rows = np.sort(order[:size]) if size < m else np.arange(m)
            s = np.linalg.svd(A[rows], compute_uv=False)
            sq = s * s
            tails.append((rows, np.concatenate([np.cumsum(sq[::-1])[::-1], [0.0]])))
        for k in [k for k in ks if k < p]:  # proves e_k > eps: needs the (k+1)-th value
            # the subset with the largest sum_{j>k} s_j^2 / |I| (0 past its own rank)
            rows, tail = max(tails, key=lambda t: (t[1][k] if k < t[1].size else 0.0)
                             / t[0].size)
            e = float(np.sqrt(max(tail[k] if k < tail.size else 0.0, 0.0) / rows.size)) * 0.5
            if e > 0:
                lowers.append(FrobeniusCertificate(e, rows, k, f"frobenius(rows={rows.size})"))
    with timed("key_groups"):
        seen = set()
        for e in KEY_GROUP_EPS:
            cert = key_groups(A, e)
            if cert is not None and cert.rank >= k1 + 1:
                key = (cert.rank, tuple(cert.queries.tolist()))
                if key not in seen:
                    seen.add(key)
                    lowers.append(cert)
    # the monotone searches: each candidate at its own best tolerance in float64, then the
    # best of each rank confirmed by the full checker (the next best where it is not)
    wit: dict[int, tuple[float, UpperWitness]] = {}
    cer: dict[int, tuple[float, object]] = {}
    with timed("search"):
        by_rank: dict[int, list] = {}
        own: dict[int, float] = {}  # softrank's own witnesses: the best per rank
        for w, name, b in uppers:
            if b is not None:
                by_rank.setdefault(w.rank, []).append((b, w, name))
                if name not in drawn_names:
                    own[w.rank] = min(own.get(w.rank, np.inf), b)
        for k, cands in by_rank.items():
            for b, w, name in sorted(cands, key=lambda t: t[0]):
                got = confirm_least(A, dataclasses.replace(w, method=name), b, interval)
                if got is not None:
                    wit[k] = got
                    break
        by_rank = {}
        for c in lowers:
            if c.rank >= k1 + 1:
                e = float64_largest_eps(A, c, norm)
                if e is not None:
                    by_rank.setdefault(c.rank, []).append((e, c))
        for r, cands in by_rank.items():
            for e, c in sorted(cands, key=lambda t: -t[0]):
                got = confirm_largest(A, c, e, float(c.eps), interval)
                if got is not None:
                    cer[r] = got
                    break
    points = []
    for k in ks:
        ups = [(e, w) for kk, (e, w) in wit.items() if kk <= k]
        lows = [(e, c) for rr, (e, c) in cer.items() if rr >= k + 1]
        ue, uw = min(ups, key=lambda t: (t[0], t[1].rank)) if ups else (float("inf"), None)
        le, lc = max(lows, key=lambda t: (t[0], -t[1].rank)) if lows else (0.0, None)
        points.append(FrontierPoint(
            k, float(le), float(ue), lc.method if lc is not None else "",
            uw.method if uw is not None else "", lc.rank if lc is not None else None,
            uw.rank if uw is not None else None))
    # the best of softrank's own witnesses (searches and brackets) at each rank, as a curve
    best = {}
    for k in ks:
        vals = [e for j, e in own.items() if j <= k]
        if vals:
            best[k] = min(vals)
    curves.insert(1, Curve(BEST_BUILTIN, best))
    for cur in curves:
        cur.excess_error = excess_error(points, cur.errors)
        cur.excess_rank = excess_rank(points, cur.errors, norm)
    return Frontier(points, {r: c for r, (_, c) in cer.items()},
                    {k: w for k, (_, w) in wit.items()}, brs, curves,
                    time.perf_counter() - t0, timings)

"""``causal_bracket(A, eps, rank="causal")``: certified brackets of the causal rank
``lower <= r^c_eps(A) <= upper`` and of its windowed form (docs/theory/causal.md).

An approximation of the causal rank ``k`` is ``B = exact * A + keep * (U W)`` with
``rank(U W) = k`` (:func:`softrank.operators.rank_masks`: ``keep`` the causal keys, or those
before a band of ``W`` keys that ``exact`` copies from ``A``). Both ends are certificates
that the checker verifies in both arithmetics, as for ``r_eps``:

* **upper**: :class:`~softrank.checker.CausalUpperWitness` from searches on the kept part
  ``T = keep * A``: ``A`` itself (rank ``min(m, N)``), the zero matrix (rank 0), the truncated
  SVD of ``T``, masked alternating l1 (reweighted least squares in which only kept entries
  count, with the minimax row weights of :class:`~softrank.certifiers.upper.AlternatingL1`),
  its rows polished by exact l1 regressions on each row's own keys (HiGHS); then any plain
  witnesses handed in (a rank-``k`` matrix within ``eps`` of a causal ``A`` is a causal
  witness), and causal constructions (the reference ones of
  :mod:`softrank.certifiers.causal_reference`, a user's);
* **lower**: :class:`~softrank.checker.CausalLowerCertificate`: a block ``A[t:, :s]`` that lies
  wholly inside ``keep`` (below the diagonal, or below the band), and a certificate of
  ``r_eps`` of that block from softrank's own lower tests
  (:func:`softrank.certifiers.bracket.lower_certificate`); the block's rows need not sum
  to 1. Several splits ``t`` are tried with the fast tests, the late searches run on the
  best block.

A lower end of 0 needs no certificate (every rank is at least 0); it is reported with the
method ``none``.
"""

from __future__ import annotations

import time

import numpy as np

from ..checker import (BlockCertificate, CausalLowerCertificate, CausalUpperWitness, check,
                       check_float64)
from ..errors import InvalidArgumentError
from ..operators import Operator, rank_masks
from ..validation import check_positive
from ..validation import check_effort, parse_rank, validate_eps
from .bracket import Bracket, lower_certificate, monotone
from .interface import Context, Diagnostics, MethodRecord
from .linalg import reweighted_step
from .lp import LP_TIME_LIMIT, L1Regression
from .upper.basic import Deadline, least_feasible, safe_target

__all__ = ["causal_bracket", "CausalSearch", "causal_blocks", "check_causal_operator",
           "UserCausalConstruction"]

#: Splits tried for the lower end with the fast tests (fractions of the block's largest
#: possible rank); the late searches run on the best.
SPLITS = 7


def check_causal_operator(op: Operator, rank: str, arg: str = "rank") -> tuple:
    """``(keep, exact)`` of ``rank`` for ``op``, after checking that ``A`` is 0 wherever the
    form copies nothing and keeps nothing (the causal rank is about causal heads).

    Raises
    ------
    InvalidArgumentError
        An unknown rank, a ``plain`` one, more queries than keys, or an ``A`` with a nonzero
        above the diagonal (one line naming ``arg``, the entry and its value).
    """
    kind, _ = parse_rank(rank, arg)
    if kind == "plain":
        raise InvalidArgumentError(f"{arg}: causal_bracket brackets 'causal' or 'window:W', "
                                   "got 'plain' (softrank.bracket brackets r_eps)")
    keep, exact = rank_masks(op.shape, rank, arg)  # its messages name ``arg`` already
    outside = (op.A != 0) & ~keep & ~exact
    if outside.any():
        i, j = np.argwhere(outside)[0]
        raise InvalidArgumentError(
            f"{arg}: {rank!r} is defined for causal heads, but operator {op.operator_id!r} has "
            f"A[{i}, {j}] = {float(op.A[i, j])!r} above the diagonal ({int(outside.sum())} such "
            "entries; a causal or sliding-window mask has none)")
    return keep, exact


def causal_blocks(keep: np.ndarray, splits: int = SPLITS) -> list[tuple[np.ndarray, np.ndarray]]:
    """Blocks ``(rows, cols)`` = ``([t, m), [0, s(t)))`` inside ``keep`` (``s(t)`` the keys
    every row from ``t`` on keeps, from key 0 on), for up to ``splits`` values of ``t``
    spread over those whose block could certify at least half the largest rank any block
    could (``min(m - t, s(t))``), the most balanced first."""
    m = keep.shape[0]
    lead = np.where(keep.all(axis=1), keep.shape[1], np.argmin(keep, axis=1))  # leading Trues
    s = np.minimum.accumulate(lead[::-1])[::-1]  # s[t] = min_{i >= t} lead[i]
    size = np.minimum(m - np.arange(m), s)
    if size.max() < 1:
        return []
    good = np.flatnonzero(size * 2 >= size.max())
    picks = np.unique(good[np.linspace(0, good.size - 1, min(splits, good.size)).round()
                           .astype(int)])
    picks = sorted(picks, key=lambda t: (-size[t], t))
    return [(np.arange(t, m), np.arange(int(s[t]))) for t in picks if s[t] >= 1]


class CausalSearch:
    """Witness searches for one operator and rank form: ``B = exact * A + keep * (U W)``.

    Parameters
    ----------
    A : (m, N) float64 ndarray
    keep, exact : (m, N) bool ndarrays
        From :func:`softrank.operators.rank_masks`.
    iters : int
        Reweighted least-squares iterations of the masked alternating l1 per rank.
    """

    def __init__(self, A: np.ndarray, keep: np.ndarray, exact: np.ndarray, iters: int = 40):
        self.A, self.keep, self.exact = A, keep, exact
        self.T = np.where(keep, A, 0.0)
        self.rest = np.where(~keep & ~exact, np.abs(A), 0.0).sum(axis=1)
        self.iters = iters
        self.p = int(min(A.shape))
        self._svd = None
        self._irls: dict[int, tuple] = {}
        self._rank_seconds = 0.0  # the latest run's seconds per iteration and rank
        self.context = Context(A)  # the reference constructions' shared work

    @property
    def svd(self):
        if self._svd is None:
            self._svd = np.linalg.svd(self.T, full_matrices=False)
        return self._svd

    def row_errors(self, U: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Each row's error ``||A_i - B_i||_1`` in float64 (the checker bounds it rigorously)."""
        with np.errstate(all="ignore"):
            E = np.abs(self.T - np.where(self.keep, U @ W, 0.0)).sum(axis=1) + self.rest
        return np.where(np.isfinite(E), E, np.inf)

    def identity(self) -> tuple[np.ndarray, np.ndarray]:
        """Rank ``min(m, N)``: ``U W = T`` exactly (``I T`` or ``T I``)."""
        m, N = self.A.shape
        return (np.eye(m), self.T.copy()) if m <= N else (self.T.copy(), np.eye(N))

    def zero(self) -> tuple[np.ndarray, np.ndarray]:
        m, N = self.A.shape
        return np.zeros((m, 0)), np.zeros((0, N))

    def tsvd(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        u, s, vt = self.svd
        return u[:, :k] * s[:k], vt[:k].copy()

    def irls(self, k: int, stop=None) -> tuple[np.ndarray, np.ndarray] | None:
        """Masked alternating l1 at rank ``k``: reweighted least squares on both factors in
        which only kept entries count, minimax row weights; the best factors seen (cached).
        ``stop`` (optional, a :class:`~softrank.certifiers.upper.basic.Deadline`) is asked
        before each iteration and told the time the iterations left would take, as in
        :meth:`softrank.certifiers.upper.AlternatingL1.irls_basis`: None when it ends them
        (nothing cached). The pace of the latest rank run is kept, so a later rank whose
        iterations cannot end in time stops before its first."""
        if k in self._irls:
            return self._irls[k]
        foresee = getattr(stop, "foresee", None)
        A, keep = self.T, self.keep
        U, W = self.tsvd(k)
        rho = np.ones(A.shape[0])
        best = (np.inf, U, W)
        t0 = time.perf_counter()
        for it in range(self.iters):
            if stop is not None and stop():
                return None
            if it:  # seconds per iteration so far, per rank (an iteration's work grows as k)
                per = (time.perf_counter() - t0) / it
                self._rank_seconds = per / k
            else:  # before the first: the pace of the ranks run before, if any
                per = self._rank_seconds * k
            if per and foresee is not None and foresee(per * (self.iters - it)):
                return None
            d = max(1e-6, 1e-2 * 0.8 ** it)
            R = np.where(keep, A - U @ W, 0.0)
            err = np.abs(R).sum(axis=1) + self.rest
            if err.max() < best[0]:
                best = (err.max(), U.copy(), W.copy())
            if not err.max() > 0:
                break
            rho = rho * (err / max(err.mean(), 1e-300))
            rho /= rho.mean()
            try:
                wt = np.where(keep, 1.0 / np.maximum(np.abs(R), d), 0.0)
                U = reweighted_step(W, wt, (wt * A) @ W.T, U)
                R = np.where(keep, A - U @ W, 0.0)
                wt = np.where(keep, rho[:, None] / np.maximum(np.abs(R), d), 0.0)
                W = reweighted_step(U.T, wt.T, (wt * A).T @ U, W.T).T
            except np.linalg.LinAlgError:
                break
            if not (np.isfinite(U).all() and np.isfinite(W).all()):
                break
            nrm = np.linalg.norm(W, axis=1)
            if not (nrm > 0).all():
                break
            W, U = W / nrm[:, None], U * nrm
        e = self.row_errors(U, W).max()
        if e < best[0]:
            best = (e, U, W)
        self._irls[k] = best[1:]
        return self._irls[k]

    def polish(self, k: int, target: float, stop=None) -> tuple[np.ndarray, np.ndarray] | None:
        """The masked alternating l1 at rank ``k`` with every row above ``target`` replaced
        by its exact l1 regression on its own kept keys (``min_u sum_{j in keep_i}
        |A_ij - u W_j|``, HiGHS); rows already within it are kept. ``stop`` as in
        :meth:`irls`, asked also before each row's LP, which gets at most the seconds it
        has left: None when it ends the polish."""
        got = self.irls(k, stop)
        if got is None:
            return None
        U, W = got
        U = U.copy()
        err = self.row_errors(U, W)
        left = getattr(stop, "left", None)
        for i in np.flatnonzero(err > target):
            cols = np.flatnonzero(self.keep[i])
            if cols.size == 0:
                continue
            if stop is not None and stop():
                return None
            u = L1Regression(W[:, cols]).solve(self.T[i, cols], time_limit=(
                LP_TIME_LIMIT if left is None else min(LP_TIME_LIMIT, max(left(), 1e-3))))
            if u is None and stop is not None and stop():
                return None  # the LP was cut at the limit: the rank is undecided
            if u is not None and np.isfinite(u).all():
                e = np.abs(self.T[i, cols] - u @ W[:, cols]).sum() + self.rest[i]
                if e < err[i]:
                    U[i], err[i] = u, e
                    if e > target:
                        break  # this row cannot meet the target: the rank fails here
            else:
                break
        return U, W

    def least(self, make, target: float, lo: int, hi: int, stop=None):
        """Least ``k`` in ``[lo, hi]`` whose factors ``make(k)`` are within ``target``
        (bisection, :func:`~softrank.certifiers.upper.basic.least_feasible`), with them.
        ``make(k)`` may answer None (cut by ``stop``, which ends the search there with the
        least rank shown so far)."""
        got: dict = {}

        def ok(k):
            f = make(k)
            if f is not None and self.row_errors(*f).max() <= target:
                got[k] = f
                return True
            return False

        k = least_feasible(ok, lo, hi, stop=stop)
        return None if k is None else (k, got[k])


def _unwrap(rows, cols, cert):
    """``(rows, cols, inner)`` of a causal lower certificate for ``cert``, a certificate of
    the block ``A[rows][:, cols]``: a block certificate of that block (the late searches
    make them on blocks of 256 rows and more) is one of the smaller block
    ``A[rows[cert.rows]][:, cols[cert.cols]]``, inside the first, so inside ``keep`` too."""
    if isinstance(cert, BlockCertificate):
        return rows[cert.rows], cols[cert.cols], cert.inner
    return rows, cols, cert


def _block_name(rows, cols) -> str:
    return f"block {rows[0]}:{rows[-1] + 1}x0:{cols[-1] + 1}"


def _tag(diag: Diagnostics, start: int, rows, cols) -> None:
    """Name the block in the lower tests' records from ``start`` on."""
    for r in diag.methods[start:]:
        r.message = f"{_block_name(rows, cols)}" + (f"; {r.message}" if r.message else "")


def _witness(eps, f, keep, exact, method) -> CausalUpperWitness:
    return CausalUpperWitness(eps, f[0], f[1], keep, exact, method=method)


class UserCausalConstruction:
    """A user's construction (a :class:`~softrank.certifiers.interface.Certifier` of the
    upper side, e.g. from :func:`~softrank.certifiers.registry.load_certifiers`) as a causal
    one for :func:`causal_bracket`: its witness's ``(U, W)`` is checked as ``keep * (U W)``;
    the ``window`` it copies exactly is its object's ``window`` attribute, if any
    (docs/theory/causal.md). ``softrank bracket --rank`` wraps every ``--certifier``; the
    audit's causal stage those that declare ``causal = True``.

    Parameters
    ----------
    certifier : Certifier
        The wrapped construction (its ``name``, ``obj`` and ``witness``).
    """

    origin = "third-party"

    def __init__(self, certifier):
        self.certifier, self.name = certifier, certifier.name
        self.window = getattr(certifier.obj, "window", None)

    def witness(self, operator, eps):
        """``(U, W)`` of the wrapped construction's witness at ``eps``, or None."""
        w = self.certifier.witness(operator, eps)
        return None if w is None else (w.U, w.W)


def causal_bracket(A, eps, *, rank: str = "causal", interval: bool = True,
                   effort: str = "full", time_limit: float | None = None,
                   constructions=None, witnesses=None, reference: bool = True,
                   progress=None) -> list[Bracket]:
    """Certified brackets ``lower <= r^c_eps(A) <= upper`` of the causal rank (or its
    windowed form) at each tolerance (docs/theory/causal.md).

    Parameters
    ----------
    A : Operator or (m, N) array_like
        A causal head: ``A`` is 0 above the diagonal (the queries are the last ``m`` of the
        ``N`` positions).
    eps : float or sequence of float
        Tolerances in ``(0, 1)``.
    rank : str
        ``causal`` (default) or ``window:W``: the band of each query's last ``W`` keys is
        copied exactly and only the keys before it are approximated.
    interval : bool
        Check both ends in interval arithmetic too (default True).
    effort : {"full", "fast"}
        ``fast``: no polish of the alternating l1 by exact LPs, no late lower searches.
    time_limit : float, optional
        Seconds for all tolerances; past it only the cheap methods run and the bracket is
        cut short (``diagnostics.cut_short``).
    constructions : sequence, optional
        Causal constructions: objects with ``witness(operator, eps, context=None)`` returning
        ``(U, W)`` or None and an attribute ``window`` (None, or the band width ``W'`` they
        copy exactly); each one applies to the ranks ``causal`` (``window`` None) and
        ``window:W`` with ``W >= W'``, and is recorded as skipped (with the reason) for the
        others, as failed when ``window`` is not None or an integer ``>= 1``. Their answers
        are checked like the others' and recorded in ``diagnostics``; the best checked one
        may become the upper end.
    reference : bool
        Also run the reference causal constructions (default True;
        :mod:`softrank.certifiers.causal_reference`: causal random features and the Taylor
        feature map for both kinds, sinks plus the window plus random features for
        ``window:W``, with that ``W``). They need the operator's factors and decline without.
    witnesses : sequence of UpperWitness, optional
        Plain witnesses of ``A`` (e.g. of :func:`softrank.bracket`): each ``U W`` is tried as a
        causal witness at every tolerance.
    progress : callable, optional
        Called with a line per method.

    Returns
    -------
    list of Bracket
        In the order of ``eps``; ``rank`` set, ``lower_certificate`` a
        :class:`~softrank.checker.CausalLowerCertificate` (None for a lower end of 0),
        ``upper_witness`` a :class:`~softrank.checker.CausalUpperWitness`, monotone in ``eps``.

    Raises
    ------
    InvalidArgumentError
        A bad ``eps``, ``rank``, ``effort`` or ``time_limit``, or an operator that is not causal.
    InvalidOperatorError
        If ``A`` is not an attention matrix.
    """
    check_effort(effort)
    op = A if isinstance(A, Operator) else Operator(A=A)
    eps_list = validate_eps(eps)
    keep, exact = check_causal_operator(op, rank)
    _, W_band = parse_rank(rank)
    if time_limit is not None:
        check_positive(time_limit, "time_limit (seconds)")
    cons = list(constructions or ())
    if reference:
        from .causal_reference import CausalRandomFeatures, CausalTaylorFeatures, SinkWindowLowRank

        ours = [CausalRandomFeatures(), CausalTaylorFeatures()] + (
            [SinkWindowLowRank(window=W_band)] if W_band else [])
        for c in ours:
            c.origin = "reference"
        cons = ours + cons
    t_start = time.perf_counter()
    deadline = None if time_limit is None else t_start + float(time_limit)
    search = CausalSearch(op.A, keep, exact, iters=40 if effort == "full" else 15)
    blocks = causal_blocks(keep)
    contexts = [Context(np.ascontiguousarray(op.A[np.ix_(r, c)])) for r, c in blocks]
    out = []
    t0 = time.perf_counter()
    for e in sorted(set(eps_list), reverse=True):
        try:
            br = _one(op, search, keep, exact, rank, e, blocks, contexts, interval, effort,
                      deadline, cons, witnesses or (), progress)
        except Exception as exc:  # a crash is an error verdict, never a bound
            br = Bracket.failed(e, f"{type(exc).__name__}: {exc}")
            br.rank = rank
        t1 = time.perf_counter()
        br.seconds, t0 = t1 - t0, t1
        out.append(br)
    monotone(sorted(out, key=lambda b: b.eps), op.A, interval, verdict=_verdict)
    by_eps = {b.eps: b for b in out}
    return [by_eps[e] for e in eps_list]


def _one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (a third party's traceback stays out of records)."""
    msg = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {msg[0] if msg else ''}"[:300]


def _record(diag: Diagnostics, progress, eps, name, side, status, rank=None, seconds=0.0,
            message="", origin="builtin"):
    rec = MethodRecord(name, side, origin, status, rank, seconds, message)
    diag.methods.append(rec)
    if progress is not None:
        r = f" rank {rank}" if rank is not None else ""
        progress(f"eps {eps:g}: {side} {name}: {status}{r}, {seconds:.2f} s"
                 + (f" ({message})" if message else ""))
    return rec


def _one(op, search: CausalSearch, keep, exact, rank, eps, blocks, contexts, interval,
         effort, deadline, cons, plain, progress) -> Bracket:
    diag = Diagnostics()
    W_band = parse_rank(rank)[1]
    target = safe_target(eps)
    late_ok = lambda: deadline is None or time.perf_counter() <= deadline  # noqa: E731

    # ---- lower: the fast tests on every block, the late ones on the best
    best = (None, None, None)  # (inner certificate, block index, report)
    for b, ((rows, cols), ctx) in enumerate(zip(blocks, contexts)):
        if not late_ok() and best[0] is not None:
            diag.cut_short = True
            break
        n0 = len(diag.methods)
        cert, _, _ = lower_certificate(ctx.A, eps, interval=False, effort="fast", context=ctx,
                                       diagnostics=diag, late=False,
                                       deadline=deadline, progress=progress)
        _tag(diag, n0, rows, cols)
        if cert is not None and (best[0] is None or cert.rank > best[0].rank):
            best = (cert, b, None)

    # ---- upper: zero, identity, truncated SVD, plain witnesses, then the searches
    cands: list = []  # (rank, factors, method)

    def offer(name, f, origin="builtin", t=None):
        """A candidate's record: softrank's own within the safe target (checked in full
        once, if it is the best); a construction's checked in both arithmetics now, so that
        its recorded rank is a checked witness of its own."""
        k = int(f[0].shape[1])
        dt = 0.0 if t is None else time.perf_counter() - t
        if origin == "builtin":
            e = search.row_errors(*f).max()
            ok, msg = e <= target, f"error {e:.4g} > eps"
        else:
            rep = check(op.A, _witness(eps, f, keep, exact, name), interval=interval)
            ok, msg = rep.ok, "the checker rejected it"
            diag.checker_disagreements += bool(rep.disagree)
        _record(diag, progress, eps, name, "upper",
                "ok" if ok else ("declined" if origin == "builtin" else "rejected"), k, dt,
                "" if ok else msg, origin)
        if ok:
            cands.append((k, f, name))
        return ok

    lower_now = lambda: best[0].rank if best[0] is not None else 0  # noqa: E731
    upper_now = lambda: min((c[0] for c in cands), default=search.p + 1)  # noqa: E731
    offer("zero", search.zero())
    if not cands:
        offer("identity", search.identity())
        t = time.perf_counter()
        got = search.least(search.tsvd, target, max(lower_now(), 1), upper_now() - 1)
        if got is not None:
            cands.append((got[0], got[1], "causal-tsvd"))
        _record(diag, progress, eps, "causal-tsvd", "upper", "ok" if got else "declined",
                got[0] if got else None, time.perf_counter() - t)
    for w in plain:
        if w.U.shape[0] == op.shape[0] and w.W.shape[1] == op.shape[1]:
            offer(f"plain {w.method}".strip(), (w.U, w.W), origin="builtin")
    if upper_now() - 1 >= max(lower_now(), 1) and late_ok():
        t = time.perf_counter()
        stop = Deadline(deadline)
        make = ((lambda k: search.polish(k, target, stop)) if effort == "full"
                else (lambda k: search.irls(k, stop)))
        got = search.least(make, target, max(lower_now(), 1), upper_now() - 1, stop=stop)
        if got is not None:
            cands.append((got[0], got[1], "causal-alternating-l1"))
        msg = "" if not stop() else (
            "the time limit ran out while it ran" if not late_ok()
            else "stopped before the time limit, which the rest of its work would pass")
        diag.cut_short |= bool(msg)
        _record(diag, progress, eps, "causal-alternating-l1", "upper",
                "ok" if got else "declined", got[0] if got else None,
                time.perf_counter() - t, msg)
    elif upper_now() - 1 >= max(lower_now(), 1):
        diag.cut_short = True
        _record(diag, progress, eps, "causal-alternating-l1", "upper", "skipped",
                message="time limit")
    for c in cons:
        t = time.perf_counter()
        name = getattr(c, "name", type(c).__name__)
        origin = getattr(c, "origin", "third-party")
        cw = getattr(c, "window", None)
        if cw is not None and (isinstance(cw, bool) or not isinstance(cw, (int, np.integer))
                               or cw < 1):
            _record(diag, progress, eps, name, "upper", "failed", message=(
                f"window: expected None or an integer >= 1 (the band it copies), got "
                f"{cw!r:.40}"), origin=origin)
            continue
        if cw is not None and cw > (W_band or 0):
            _record(diag, progress, eps, name, "upper", "skipped", message=(
                f"it copies a band of {cw} keys; rank {rank!r} copies "
                + (f"{W_band}" if W_band else "none")), origin=origin)
            continue
        try:
            f = (c.witness(op, eps, context=search.context) if origin == "reference"
                 else c.witness(op, eps))
        except Exception as exc:  # noqa: BLE001 - a failure is recorded, never a bound
            _record(diag, progress, eps, name, "upper", "failed", None,
                    time.perf_counter() - t, _one_line(exc), origin)
            continue
        if f is None:
            _record(diag, progress, eps, name, "upper", "declined", None,
                    time.perf_counter() - t, origin=origin)
            continue
        f = (np.asarray(f[0], dtype=np.float64), np.asarray(f[1], dtype=np.float64))
        if f[0].ndim != 2 or f[1].ndim != 2 or f[0].shape[0] != op.shape[0] or \
                f[1].shape[1] != op.shape[1] or f[0].shape[1] != f[1].shape[0]:
            _record(diag, progress, eps, name, "upper", "failed", None,
                    time.perf_counter() - t, f"expected U (m, k), W (k, N), got "
                    f"{f[0].shape}, {f[1].shape}", origin)
            continue
        offer(name, f, origin=origin, t=t)

    # ---- the late lower searches on the best block, while the ends can still move
    if effort == "full" and best[1] is not None and lower_now() < upper_now() and late_ok():
        b = best[1]
        n0 = len(diag.methods)
        cert, _, _ = lower_certificate(contexts[b].A, eps, interval=False, effort="full",
                                       context=contexts[b], diagnostics=diag,
                                       deadline=deadline, progress=progress)
        _tag(diag, n0, *blocks[b])
        if cert is not None and cert.rank > best[0].rank:
            best = (cert, b, None)
    elif effort == "full" and best[1] is not None:
        _record(diag, progress, eps, "late lower searches", "lower", "skipped",
                message="the ends met" if lower_now() >= upper_now() else "time limit")
        diag.cut_short |= lower_now() < upper_now()

    # ---- check the strongest of each side in both arithmetics
    lcert = lrep = None
    if best[0] is not None:
        rows, cols = blocks[best[1]]
        r_in, c_in, inner = _unwrap(rows, cols, best[0])
        lcert = CausalLowerCertificate(eps, r_in, c_in, keep, inner,
                                       method=f"{_block_name(rows, cols)} {best[0].method}")
        lrep = check(op.A, lcert, interval=interval)
        if not lrep.ok:
            diag.checker_disagreements += bool(lrep.disagree)
            lcert = None
    uwit = urep = None
    for k, f, name in sorted(cands, key=lambda c: c[0]):
        w = _witness(eps, f, keep, exact, name)
        if not check_float64(op.A, w).ok:
            continue
        rep = check(op.A, w, interval=interval)
        if rep.ok:
            uwit, urep = w, rep
            diag.reported["upper"] = name
            break
        diag.checker_disagreements += bool(rep.disagree)
    if lcert is not None:
        diag.reported["lower"] = lcert.method
    br = Bracket(eps=eps, lower=lcert.rank if lcert is not None else 0,
                 upper=uwit.rank if uwit is not None else None,
                 lower_certificate=lcert, upper_witness=uwit,
                 lower_method=lcert.method if lcert is not None else "none",
                 upper_method=uwit.method if uwit is not None else "", diagnostics=diag,
                 rank=rank)
    if lrep is not None and lcert is not None:
        br.checks["lower"] = lrep
    if urep is not None:
        br.checks["upper"] = urep
    _verdict(br)
    return br


def _verdict(br: Bracket) -> None:
    """As for ``r_eps``, except that a lower end of 0 needs no certificate."""
    if br.lower is None or br.upper_witness is None:
        br.verdict = "error"
        br.diagnostics.error = br.diagnostics.error or f"no checked witness at eps {br.eps!r}"
    elif br.lower > br.upper:
        br.verdict = "unsound"
    else:
        br.verdict = "resolved" if br.lower == br.upper else "open"

"""``bracket(A, eps)``: the best sound pair ``lower <= r_eps(A) <= upper`` (SPEC 2, 4-6).

For each tolerance the lower candidates (trivial, Frobenius tail, key groups, truncated
pseudoinverse, subspace, LP decoder) and the upper candidates (truncated SVD, key support,
l1 refit, row basis, alternating l1, hybrid, ``A`` itself) are generated, and
the strongest of each side that the checker accepts -- float64 with rounding bounds *and*
the interval cross-check -- is reported together with the certificate that backs it. A
candidate the checker rejects is dropped and the next one tried; no number reaches a
:class:`Bracket` without its certificate having passed.

Work shared across tolerances: one SVD of ``A``, the truncation errors of every rank, the
per-rank l1-refit and LP-decoder solves, the singular values of every row subset.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

from ..checker import check, check_float64
from ..errors import InvalidArgumentError
from ..operators import Operator
from . import lower as lo_
from . import upper as up_

__all__ = ["Bracket", "bracket", "validate_eps"]


@dataclass
class Bracket:
    """A certified bracket at one tolerance.

    Attributes
    ----------
    eps : float
        Tolerance (max-row-l1 error, dimensionless: rows of ``A`` have l1 norm 1).
    lower, upper : int
        ``lower <= r_eps(A) <= upper``; both backed by checked certificates.
    lower_certificate, upper_witness :
        The certificates (see :mod:`softrank.checker.certificates`).
    lower_method, upper_method : str
        Which certificate family / construction won.
    verdict : str
        ``resolved`` (lower == upper), ``open`` (lower < upper), ``unsound`` (lower > upper:
        a bug), ``error`` (no certified end could be produced).
    seconds : float
        Wall time spent on this tolerance (shared work is charged to the first one).
    checks : dict
        The checker's reports for the two reported certificates.
    candidates : dict
        Rank reached by each method tried (``lower:*`` and ``upper:*``), checked or not,
        and the methods whose certificates the checker rejected.
    rho : float
        Validated mode: the enclosure radius; the lower certificate holds at ``eps + rho``
        and the upper witness at ``eps - rho`` for the enclosure's midpoint, so the bracket
        holds for the exact softmax of the exact logits. 0 otherwise.
    """

    eps: float
    lower: int
    upper: int
    lower_certificate: object = field(default=None, repr=False)
    upper_witness: object = field(default=None, repr=False)
    lower_method: str = ""
    upper_method: str = ""
    verdict: str = "open"
    seconds: float = 0.0
    checks: dict = field(default_factory=dict, repr=False)
    candidates: dict = field(default_factory=dict, repr=False)
    rho: float = 0.0

    @property
    def resolved(self) -> bool:
        return self.verdict == "resolved"

    def to_dict(self) -> dict:
        return {
            "eps": self.eps,
            "lower": self.lower,
            "upper": self.upper,
            "lower_method": self.lower_method,
            "upper_method": self.upper_method,
            "verdict": self.verdict,
            "seconds": round(self.seconds, 4),
            "checks": {k: v.summary() for k, v in self.checks.items()},
            "candidates": self.candidates,
            "rho": self.rho,
        }


def _is_scalar_eps(eps) -> bool:
    return isinstance(eps, (int, float, np.integer, np.floating)) or (
        isinstance(eps, np.ndarray) and eps.ndim == 0)


def validate_eps(eps) -> list[float]:
    """Tolerances as a list of floats in ``(0, 1)``.

    ``eps = 0`` asks for the exact rank, which floating-point witnesses cannot certify (a
    rank-k witness is checked with a strictly positive rounding bound), and ``eps >= 1``
    gives ``r_eps = 0`` on a row-stochastic ``A``; both are rejected, and so is a tolerance
    given twice.

    Raises
    ------
    InvalidArgumentError
        Naming ``eps`` and the offending value.
    """
    if _is_scalar_eps(eps):
        vals = [eps]
    elif isinstance(eps, (list, tuple)) or (isinstance(eps, np.ndarray) and eps.ndim == 1):
        vals = list(eps)
    else:
        raise InvalidArgumentError(f"eps: expected a number or a sequence of numbers, got {eps!r}")
    if not vals:
        raise InvalidArgumentError("eps: expected at least one tolerance, got none")
    out = []
    for e in vals:
        if isinstance(e, bool) or not _is_scalar_eps(e):
            raise InvalidArgumentError(f"eps: expected a number, got {e!r}")
        f = float(e)
        if not np.isfinite(f) or f <= 0 or f >= 1:
            raise InvalidArgumentError(
                f"eps: expected a tolerance with 0 < eps < 1 (r_eps = 0 for eps >= 1 on a "
                f"row-stochastic A; eps = 0 is the exact rank), got {f!r}"
            )
        if f in out:
            raise InvalidArgumentError(f"eps: tolerances repeat, {f!r} is given twice")
        out.append(f)
    return out


class _Workspace:
    """Per-operator state shared by all tolerances."""

    def __init__(self, A: np.ndarray):
        self.A = A
        m, N = A.shape
        self.p = min(m, N)
        self.svd = np.linalg.svd(A, full_matrices=False)
        self.tsvd = up_.TruncatedSVD(A, self.svd)
        self.refit = up_.L1Refit(A, self.svd[2])
        self.alt = up_.AlternatingL1(A, self.svd, tsvd_errors=self.tsvd.errors)
        self._hybrid = None
        self.rows = lo_.row_order(A)
        self.rowbasis = up_.L1Refit(A, A[self.rows], method="row-basis")
        self.subspaces = [lo_.SubspaceSearch(A, self.svd[2].T, "svd")]
        self.sv_cache: dict = {}
        _, _, kpiv = scipy.linalg.qr(A, mode="economic", pivoting=True)
        singles = [np.array([j]) for j in kpiv]
        self.decoders = [lo_.LPDecoder(A, singles, "singletons")]
        for w in (2, 4):
            if w < N:
                groups = [np.arange(a, min(a + w, N)) for a in range(0, N, w)]
                AG = np.stack([A[:, g].sum(axis=1) for g in groups], axis=1)
                _, _, gpiv = scipy.linalg.qr(AG, mode="economic", pivoting=True)
                self.decoders.append(
                    lo_.LPDecoder(A, [groups[i] for i in gpiv], f"blocks(w={w})")
                )


    @property
    def hybrid(self) -> up_.Hybrid:
        """Built on first use: its SVDs are wasted when a bracket resolves earlier."""
        if self._hybrid is None:
            self._hybrid = up_.Hybrid(self.A)
        return self._hybrid


def _first_passing(A, cands, interval, rejected):
    """The first candidate (in the given order) that the full checker accepts."""
    for cert in cands:
        if not check_float64(A, cert).ok:
            rejected.append(cert.method)
            continue
        rep = check(A, cert, interval=interval)
        if rep.ok:
            return cert, rep
        rejected.append(cert.method + (" (arithmetics disagree)" if rep.disagree else ""))
    return None, None


class CellTimeout(Exception):
    """A cell ran past its time limit: an ``error`` verdict, never a bound."""


def _bracket_one(ws: _Workspace, eps_req: float, interval: bool, rho: float = 0.0,
                 deadline: float | None = None) -> Bracket:
    """One tolerance; ``rho > 0`` (validated mode) certifies the lower side at ``eps + rho``
    and the upper side at ``eps - rho`` (:mod:`softrank.checker.validated`). ``deadline``
    (``time.perf_counter()`` value) is checked before every method: past it the cell raises
    :class:`CellTimeout` (a method already running is not interrupted)."""
    A = ws.A
    eps = eps_req + rho  # the lower side's tolerance
    cand_ranks: dict = {}
    rejected: list[str] = []
    failures: list[str] = []

    timings: dict = {}

    def attempt(name, fn, *args):
        """Run one certifier; an exception costs that method only, and is recorded."""
        t = time.perf_counter()
        if deadline is not None and t > deadline:
            raise CellTimeout(f"time limit reached before {name}")
        try:
            return fn(*args)
        except Exception as exc:
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
            return None
        finally:
            timings[name] = round(timings.get(name, 0.0) + time.perf_counter() - t, 4)

    # ---- lower side
    lowers = []
    for name, fn, args in (("trivial", lo_.trivial, (A, eps)),
                           ("frobenius", lo_.frobenius, (A, eps, ws.rows, ws.sv_cache)),
                           ("key-groups", lo_.key_groups, (A, eps))):
        c = attempt(name, fn, *args)
        if c is not None:
            lowers.append(c)
            cand_ranks[f"lower:{name}"] = c.rank
    c = attempt("truncated-pseudoinverse", lo_.truncated_pseudoinverse, A, eps, ws.svd, ws.p)
    if c is not None:
        lowers.append(c)
        cand_ranks["lower:truncated-pseudoinverse"] = c.rank
    best_unchecked = max((c.rank for c in lowers), default=0)
    for sub in ws.subspaces:
        c = attempt(f"subspace/{sub.name}", sub.best, eps, max(best_unchecked, 1) + 1, ws.p)
        if c is None:
            c = attempt(f"subspace/{sub.name}", sub.certificate, max(best_unchecked, 1), eps)
        if c is not None:
            if c.rank >= best_unchecked:
                lowers.append(c)
                cand_ranks[f"lower:subspace/{sub.name}"] = c.rank
                best_unchecked = c.rank
            g = attempt(f"subspace/{sub.name}+local", sub.extend, eps, c)
            if g is not None and g.rank > best_unchecked:
                lowers.append(g)
                cand_ranks[f"lower:subspace/{sub.name}+local"] = g.rank
                best_unchecked = g.rank
    for dec in ws.decoders:
        c = attempt(f"lp-decoder/{dec.name}", dec.best, eps, max(best_unchecked, 1) + 1, ws.p)
        if c is not None:
            lowers.append(c)
            cand_ranks[f"lower:lp-decoder/{dec.name}"] = c.rank
            best_unchecked = max(best_unchecked, c.rank)
    lowers.sort(key=lambda c: -c.rank)
    lcert, lrep = attempt("check:lower", _first_passing, A, lowers, interval, rejected) or (None, None)

    # ---- upper side
    eps = eps_req - rho
    lower_val = lcert.rank if lcert is not None else 0
    uppers = []
    k = ws.tsvd.least_rank(eps)
    if k is not None:
        uppers.append(ws.tsvd.witness(eps, k))
        cand_ranks["upper:truncated-svd"] = k
    ks = attempt("key-support", up_.key_support, A, eps)
    if ks is not None:
        uppers.append(ks)
        cand_ranks["upper:key-support"] = ks.rank
    best = min((w.rank for w in uppers), default=ws.p + 1)
    if best > max(lower_val, 1):
        kr = attempt("l1-refit", ws.refit.least_rank, eps, max(lower_val, 1), min(best, ws.p) - 1)
        if kr is not None:
            uppers.append(ws.refit.witness(eps, kr))
            cand_ranks["upper:l1-refit"] = kr
            best = kr
    for name, con in (("row-basis", ws.rowbasis), ("alternating-l1", ws.alt)):
        if best > max(lower_val, 1):
            kr = attempt(name, con.least_rank, eps, max(lower_val, 1), min(best, ws.p) - 1)
            if kr is not None:
                uppers.append(con.witness(eps, kr))
                cand_ranks[f"upper:{name}"] = kr
                best = kr
    if best > max(lower_val, 1):
        hy = attempt("hybrid", ws.hybrid.least_rank, eps, max(lower_val, 1),
                     min(best, ws.p + 1) - 1)
        if hy is not None:
            uppers.append(hy[1])
            cand_ranks["upper:hybrid"] = hy[0]
    uppers.append(up_.identity_witness(A, eps))  # always holds: rank min(m, N), error 0
    uppers.sort(key=lambda w: w.rank)  # stable: ties keep the order above
    uwit, urep = attempt("check:upper", _first_passing, A, uppers, interval, rejected) or (None, None)

    if rejected:
        cand_ranks["rejected_by_checker"] = rejected
    cand_ranks["checker_disagreements"] = sum("disagree" in r for r in rejected)
    if failures:
        cand_ranks["failed"] = failures
    cand_ranks["seconds"] = timings
    br = Bracket(eps=eps_req, lower=lcert.rank if lcert else 0, upper=uwit.rank if uwit else -1,
                 lower_certificate=lcert, upper_witness=uwit,
                 lower_method=lcert.method if lcert else "",
                 upper_method=uwit.method if uwit else "", candidates=cand_ranks)
    if lrep is not None:
        br.checks["lower"] = lrep
    if urep is not None:
        br.checks["upper"] = urep
    _set_verdict(br)
    return br


def _set_verdict(br: Bracket) -> None:
    if br.lower_certificate is None or br.upper_witness is None:
        br.verdict = "error"
    elif br.lower > br.upper:
        br.verdict = "unsound"
    elif br.lower == br.upper:
        br.verdict = "resolved"
    else:
        br.verdict = "open"


def _monotone(brs: list[Bracket], A: np.ndarray, interval: bool) -> None:
    """Make brackets monotone in ``eps`` (``brs`` in increasing ``eps``), in place.

    ``r_eps`` is non-increasing in ``eps``: a lower certificate issued at ``eps2`` also proves
    its rank at every ``eps1 < eps2`` (every condition only gets easier), and an upper
    witness at ``eps1`` holds at ``eps2 > eps1``. Each certificate carried over is re-stamped
    with its new tolerance and re-checked by the full checker before it is adopted.
    """
    for i, small in enumerate(brs):
        for big in brs[i + 1:]:
            # lower side: carry a larger tolerance's certificate down
            c = big.lower_certificate
            if c is not None and big.lower > small.lower and "error" not in small.candidates:
                moved = dataclasses.replace(c, eps=small.eps + small.rho,
                                            method=f"{c.method} (from eps {big.eps:g})")
                rep = check(A, moved, interval=interval)
                if rep.ok:
                    small.lower_certificate, small.lower = moved, moved.rank
                    small.lower_method, small.checks["lower"] = moved.method, rep
                    small.candidates["lower:carried-from-larger-eps"] = moved.rank
            # upper side: carry a smaller tolerance's witness up
            w = small.upper_witness
            if w is not None and (big.upper_witness is None or w.rank < big.upper) and (
                    "error" not in big.candidates):
                moved = dataclasses.replace(w, eps=big.eps - big.rho,
                                            method=f"{w.method} (from eps {small.eps:g})")
                rep = check(A, moved, interval=interval)
                if rep.ok:
                    big.upper_witness, big.upper = moved, moved.rank
                    big.upper_method, big.checks["upper"] = moved.method, rep
                    big.candidates["upper:carried-from-smaller-eps"] = moved.rank
    for br in brs:
        _set_verdict(br)


def bracket(A, eps, *, interval: bool = True, validated: bool = False,
            time_limit: float | None = None) -> Bracket | list[Bracket]:
    """Certified brackets ``lower <= r_eps(A) <= upper`` (SPEC 2, 4, 5).

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
        instead of its float64 ``A`` (SPEC 6, validated input mode): the softmax is enclosed
        in ball arithmetic, ``A`` replaced by the enclosure's midpoint, and each side
        certified with the tolerance moved by the enclosure radius ``rho``.
    time_limit : float, optional
        Seconds per tolerance (the shared set-up is charged to the first, the largest
        ``eps``). Checked before each method; a tolerance past it gets an ``error``
        verdict (``candidates["error"]`` says so), never a bound.

    Returns
    -------
    Bracket or list of Bracket
        One per tolerance (a list when ``eps`` is a sequence), in the order given.

    Raises
    ------
    InvalidOperatorError
        If ``A`` is not a valid attention matrix.
    InvalidArgumentError
        If a tolerance is outside ``(0, 1)``, or ``validated`` without ``Q``, ``K``, ``beta``.
    """
    op = A if isinstance(A, Operator) else Operator(A=A)
    eps_list = validate_eps(eps)
    if time_limit is not None and not (isinstance(time_limit, (int, float)) and
                                       not isinstance(time_limit, bool) and time_limit > 0):
        raise InvalidArgumentError(f"time_limit: expected seconds > 0 or None, got {time_limit!r}")
    t0 = time.perf_counter()
    rho = 0.0
    A_used = op.A
    if validated:
        if op.Q is None:
            raise InvalidArgumentError(
                "validated: needs the operator's factors Q, K and beta, got an operator "
                f"{op.operator_id!r} without them")
        from ..checker.validated import enclose_softmax

        A_used, rho = enclose_softmax(op.Q, op.K, op.beta)
        if rho >= min(eps_list):
            raise InvalidArgumentError(
                f"eps: the smallest tolerance {min(eps_list)!r} does not exceed the enclosure "
                f"radius rho = {rho!r} of the exact softmax")
    try:
        ws = _Workspace(A_used)
        setup_error = None
    except Exception as exc:  # e.g. an SVD that does not converge: no bound at all
        ws, setup_error = None, f"{type(exc).__name__}: {exc}"
    out = []
    # largest tolerance first: its small ranks give cheap bisection ranges for the rest;
    # the shared set-up time is charged to it
    for e in sorted(set(eps_list), reverse=True):
        try:
            if ws is None:
                raise RuntimeError(f"set-up failed: {setup_error}")
            deadline = None if time_limit is None else t0 + float(time_limit)
            br = _bracket_one(ws, e, interval, rho, deadline)
        except Exception as exc:  # a crash is an error verdict, never a bound
            br = Bracket(eps=e, lower=0, upper=-1, verdict="error",
                         candidates={"error": f"{type(exc).__name__}: {exc}"})
        t1 = time.perf_counter()
        br.seconds = t1 - t0
        br.rho = rho
        t0 = t1
        out.append(br)
    if ws is not None:
        _monotone(sorted(out, key=lambda b: b.eps), ws.A, interval)
    by_eps = {b.eps: b for b in out}
    res = [by_eps[e] for e in eps_list]
    return res[0] if _is_scalar_eps(eps) else res

"""Blocked linear algebra shared by the certifiers' reweighted least-squares steps.

Many small weighted least-squares systems, one per row of ``A`` or per key, solved in blocks
so that no temporary grows with the number of rows (docs/theory/witnesses.md#l1-refit,
docs/theory/witnesses.md#alternating-l1, docs/theory/lower.md#subspace-certificate); where
forming the systems would cost too much, the reweighted steps of the searches take
conjugate-gradient steps instead (:func:`reweighted_step`, :func:`weighted_cg`).
"""

from __future__ import annotations

import functools
import os

import numba
import numpy as np
from scipy.linalg import lapack

from ..errors import InvalidArgumentError
from ..validation import check_int

__all__ = ["BLOCK_ENTRIES", "CG_STEPS", "DEVICES", "EXACT_MAX_RANK", "GPU_MIN_WORK", "compiled",
           "reweighted_step", "solve_device", "weighted_cg", "weighted_solves"]

#: Entries (float64) of the largest temporary a blocked step forms at once: 4 Mi (32 MiB).
BLOCK_ENTRIES = 2**22

#: Entries of the largest table of products of pairs of rows of ``X`` (``n x k(k+1)/2``)
#: formed at once: 16 Mi (128 MiB); beyond it the systems are formed by broadcasting.
TABLE_ENTRIES = 2**24


#: Values of ``$SOFTRANK_DEVICE``: where :func:`weighted_solves` runs its larger calls.
DEVICES = ("auto", "cpu", "cuda")

#: Multiply-adds (``r n k^2``) below which a call stays on the CPU even with a GPU, where
#: copying the weights over and the answers back and a few kernel launches would cost about
#: as much as the compiled code's fraction of a millisecond (a MiniLM head of width 64 at
#: rank 20 is ``1.6e6``; a width-128 head at rank 35 is ``2e7``, 1-2 ms on one CPU
#: core). Set without a GPU to measure on (docs/benchmarks.md#gpu): a first guess.
GPU_MIN_WORK = 2e7

#: The largest rank ``k`` whose reweighted steps are solved exactly on the CPU; above it
#: (:func:`reweighted_step`) each step is :data:`CG_STEPS` conjugate-gradient steps
#: (:func:`weighted_cg`, ``2 r n k`` multiply-adds a step) instead of forming and factorising
#: every system (``r n k^2 / 2 + r k^3 / 3``): at ``k = 128`` that is about a third of the
#: work, at ``k = 600`` about a fifteenth. Every head of width 128 or less (the default,
#: causal and quick panels) stays at or below it, so its steps are the exact ones as before
#: (docs/theory/witnesses.md#alternating-l1, "Reweighted steps by conjugate gradients").
EXACT_MAX_RANK = 128

#: Conjugate-gradient steps per reweighted step (:func:`weighted_cg`).
CG_STEPS = 10


def _nvidia_present() -> bool:
    """An NVIDIA driver is loaded (read without importing torch, which costs a second and
    hundreds of MiB: ``auto`` imports it only where it can find a GPU)."""
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


@functools.lru_cache(maxsize=None)
def _device_for(setting: str):
    if setting == "cpu":
        return None
    if setting == "auto" and not _nvidia_present():
        return None
    try:
        import torch
    except ImportError:
        if setting == "cuda":
            raise InvalidArgumentError(
                "SOFTRANK_DEVICE: 'cuda' needs torch (the [models] extra), which does not "
                "import here") from None
        return None
    if not torch.cuda.is_available():
        if setting == "cuda":
            raise InvalidArgumentError("SOFTRANK_DEVICE: 'cuda' asked for, but "
                                       "torch.cuda.is_available() is False (use 'auto' or "
                                       "'cpu' on a machine without a GPU)")
        return None
    return torch.device("cuda")


def solve_device():
    """The torch device on which :func:`weighted_solves` runs its larger calls, or None (the
    CPU, in compiled code).

    Read from ``$SOFTRANK_DEVICE`` on every call (case and surrounding spaces ignored; unset
    or empty is ``auto``): ``auto`` is the GPU when an NVIDIA driver is loaded, torch
    imports and ``torch.cuda.is_available()``, else the CPU; ``cpu`` never imports torch;
    ``cuda`` insists on the GPU (docs/benchmarks.md#gpu).

    Raises
    ------
    InvalidArgumentError
        If ``$SOFTRANK_DEVICE`` is not one of :data:`DEVICES`, or is ``cuda`` where torch
        does not import or sees no GPU.
    """
    raw = os.environ.get("SOFTRANK_DEVICE", "")
    setting = raw.strip().lower() or "auto"
    if setting not in DEVICES:
        raise InvalidArgumentError(f"SOFTRANK_DEVICE: expected one of "
                                   f"{', '.join(map(repr, DEVICES))}, got {raw!r}")
    return _device_for(setting)


@functools.lru_cache(maxsize=None)
def _packing(k: int):
    """Row and column of each of the ``k(k+1)/2`` entries on or above the diagonal of a
    ``k x k`` matrix, the packed position of each entry ``(a, b)`` (row-major, both
    triangles)."""
    iu, ju = np.triu_indices(k)
    packed = np.empty((k, k), dtype=np.intp)
    packed[iu, ju] = packed[ju, iu] = np.arange(iu.size)
    out = (iu, ju, packed.ravel())
    for a in out:
        a.flags.writeable = False
    return out


@functools.lru_cache(maxsize=None)
def _whole(k: int) -> np.ndarray:
    """``packed`` for a ``k x k`` matrix stored whole, row-major: entry ``(a, b)`` at
    ``a k + b``."""
    out = np.arange(k * k, dtype=np.intp)
    out.flags.writeable = False
    return out


def compiled(fn=None, *, fastmath=False):
    """``fn`` compiled by numba (``nopython`` mode), its machine code cached on disk (beside
    its source file, else in the user's cache directory, else in ``$NUMBA_CACHE_DIR``);
    where numba finds none of them writable it refuses the cache at decoration, and ``fn``
    is compiled in each process instead (a few seconds, once per process). Used bare
    (``@compiled``) or with numba's ``fastmath`` flags (``@compiled(fastmath={"reassoc",
    "contract"})`` lets sums be vectorised and multiply-adds fused: the same arithmetic in
    another order, so results may differ in the last bits between machines, as BLAS's do)."""
    def wrap(f):
        try:
            return numba.njit(cache=True, fastmath=fastmath)(f)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            return numba.njit(fastmath=fastmath)(f)
    return wrap if fn is None else wrap(fn)


@compiled(fastmath={"reassoc", "contract"})
def _cholesky_solves(P, packed, B, out, fail):  # pragma: no cover - compiled
    """Row ``i``: ``out[i] = G_i^{-1} B[i]`` by Cholesky, with ``G_i[a, b] = P[i, packed[a k
    + b]]`` (only ``a >= b`` is read) plus the ridge ``1e-12 max(trace / k, 1e-300)`` on the
    diagonal; ``fail[i] = 1`` (``out[i]`` unset) where a pivot is not positive and finite or
    an entry or the ridge is not finite."""
    r = P.shape[0]
    k = B.shape[1]
    L = np.empty((k, k))
    y = np.empty(k)
    for i in range(r):
        fail[i] = 0
        tr = 0.0
        for c in range(k):
            tr += P[i, packed[c * k + c]]
        ridge = 1e-12 * max(tr / k, 1e-300)
        ok = np.isfinite(ridge)
        if ok:
            for c in range(k):
                s = P[i, packed[c * k + c]] + ridge
                for p in range(c):
                    s -= L[c, p] * L[c, p]
                if not (s > 0.0 and np.isfinite(s)):
                    ok = False
                    break
                d = np.sqrt(s)
                L[c, c] = d
                for q in range(c + 1, k):
                    s2 = P[i, packed[q * k + c]]
                    for p in range(c):
                        s2 -= L[q, p] * L[c, p]
                    L[q, c] = s2 / d
        if not ok:
            fail[i] = 1
            continue
        for c in range(k):
            s = B[i, c]
            for p in range(c):
                s -= L[c, p] * y[p]
            y[c] = s / L[c, c]
        for c in range(k - 1, -1, -1):
            s = y[c]
            for p in range(c + 1, k):
                s -= L[p, c] * out[i, p]
            out[i, c] = s / L[c, c]


def _solve_packed(P: np.ndarray, packed: np.ndarray, B: np.ndarray,
                  first: int = 0) -> np.ndarray:
    """``G_i x_i = B[i]`` for the symmetric systems ``G_i[a, b] = P[i, packed[a k + b]]``
    with the ridge of :func:`weighted_solves` on the diagonal: Cholesky in compiled code,
    LU (LAPACK ``dgesv``) for a system whose Cholesky fails (not numerically positive
    definite); a system with an entry that is not finite gets a NaN answer, which the
    callers see. Raises numpy.linalg.LinAlgError if a system is singular, naming it as
    system ``first + i``."""
    P = np.ascontiguousarray(P, dtype=np.float64)
    B = np.ascontiguousarray(B, dtype=np.float64)
    r, k = B.shape
    out = np.empty((r, k))
    fail = np.zeros(r, dtype=np.int8)
    _cholesky_solves(P, packed, B, out, fail)
    for i in np.nonzero(fail)[0]:
        G = P[i, packed].reshape(k, k)
        if not np.isfinite(G).all():
            out[i] = np.nan  # no answer, and the callers see it
            continue
        G[np.diag_indices(k)] += 1e-12 * max(G.trace() / k, 1e-300)
        _, _, x, info = lapack.dgesv(G, B[i], overwrite_a=1, overwrite_b=0)
        if info != 0:
            raise np.linalg.LinAlgError(f"weighted_solves: system {first + i} is singular")
        out[i] = x
    return out


def _torch_solves(X: np.ndarray, wt: np.ndarray, B: np.ndarray, device) -> np.ndarray:
    """:func:`weighted_solves` in torch on ``device``, float64 throughout: each block of
    systems formed whole by a batched product, factorised by ``torch.linalg.cholesky_ex``
    and solved by ``torch.cholesky_solve``; a system whose factorisation fails or that has
    an entry that is not finite goes to :func:`_solve_packed` on the CPU (LU there, a NaN
    answer for a non-finite one, as in the compiled path)."""
    import torch

    # torch takes neither negative strides nor read-only arrays: contiguous float64 copies
    X, wt, B = (np.array(v, dtype=np.float64, order="C") for v in (X, wt, B))
    k, n = X.shape
    r = wt.shape[0]
    out = np.empty((r, k))
    Xt = torch.as_tensor(X, device=device)
    # systems per block: the (s, k, n) product and the (s, k, k) systems in BLOCK_ENTRIES
    step = max(1, BLOCK_ENTRIES // max(k * max(k, n), 1))
    for a in range(0, r, step):
        w = torch.as_tensor(wt[a:a + step], device=device)
        G = (Xt[None, :, :] * w[:, None, :]) @ Xt.T  # (s, k, k)
        tr = G.diagonal(dim1=-2, dim2=-1).sum(dim=-1)
        ridge = 1e-12 * torch.clamp(tr / k, min=1e-300)
        G.diagonal(dim1=-2, dim2=-1).add_(ridge[:, None])
        L, info = torch.linalg.cholesky_ex(G)
        x = torch.cholesky_solve(torch.as_tensor(B[a:a + step], device=device)[:, :, None],
                                 L)[:, :, 0]
        finite = torch.isfinite(G).all(dim=2).all(dim=1)
        bad = (info != 0) | ~finite | ~torch.isfinite(x).all(dim=1)
        out[a:a + step] = x.cpu().numpy()
        finite = finite.cpu().numpy()
        for i in torch.nonzero(bad).flatten().tolist():
            if not finite[i]:
                out[a + i] = np.nan  # no answer, and the callers see it
                continue
            Gi = G[i].cpu().numpy()
            Gi[np.diag_indices(k)] -= float(ridge[i])  # _solve_packed adds it again
            out[a + i] = _solve_packed(Gi.reshape(1, k * k), _whole(k), B[a + i:a + i + 1],
                                       first=a + i)[0]
    return out


def weighted_solves(X: np.ndarray, wt: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Row ``i``: the solution ``u`` of ``(X diag(wt_i) X^T + r_i I) u = B_i`` for every row
    of ``wt (r, n)`` and ``B (r, k)``, with ``X (k, n)`` and a relative ridge
    ``r_i = 1e-12 trace / k``: the weighted least-squares steps of the alternating l1
    (:meth:`softrank.certifiers.upper.AlternatingL1.irls_basis`, both factors) and of the
    screening (:func:`softrank.certifiers.upper.l1_candidates`,
    :func:`softrank.certifiers.lower.basis_pursuit_candidates`); the first two call it
    through :func:`reweighted_step`, which takes conjugate-gradient steps instead above rank
    :data:`EXACT_MAX_RANK`.

    The systems are symmetric: their ``k(k+1)/2`` distinct entries are formed by one matrix
    product ``wt @ T`` with the ``(n, k(k+1)/2)`` table ``T`` of products of pairs of ``X``'s
    rows when that table is at most ``TABLE_ENTRIES`` entries, else by broadcasting;
    both in blocks of rows, so that no temporary other than the table (which takes twice
    its size while it is built) exceeds about 32 MiB. Each system is solved by Cholesky in
    compiled code (numba; on MiniLM-sized systems, 128 rows of ``k = 8-90``, the steps ran
    0.4-0.6x the time of numpy's batched LU and LAPACK's ``dposv`` one system at a time,
    docs/benchmarks.md), by LU where it is not numerically positive definite.

    On a GPU (:func:`solve_device`), a call of at least :data:`GPU_MIN_WORK` multiply-adds
    runs in torch instead, in float64: the same systems (formed whole, in another order of
    summation), the same ridge and fallbacks, so the answers agree with the CPU's to
    rounding, not bit for bit (docs/benchmarks.md#gpu).

    Parameters
    ----------
    X : (k, n) float64 ndarray
    wt : (r, n) float64 ndarray
        The weights, one row per system (non-negative).
    B : (r, k) float64 ndarray
        The right-hand sides.

    Returns
    -------
    (r, k) float64 ndarray

    Raises
    ------
    InvalidArgumentError
        If ``X``, ``wt`` or ``B`` is not 2-D or their shapes do not match.
    numpy.linalg.LinAlgError
        If a system is singular.
    """
    X, wt, B = (np.asarray(v, dtype=np.float64) for v in (X, wt, B))
    if X.ndim != 2 or wt.ndim != 2 or B.ndim != 2:
        raise InvalidArgumentError(f"X, wt and B must be 2-D, got shapes {X.shape}, "
                                   f"{wt.shape} and {B.shape}")
    k, n = X.shape
    r = wt.shape[0]
    if wt.shape != (r, n) or B.shape != (r, k):
        raise InvalidArgumentError(f"wt and B must have shapes ({r}, {n}) and ({r}, {k}) for "
                                   f"X of shape {X.shape}, got {wt.shape} and {B.shape}")
    out = np.empty((r, k))
    if k == 0 or r == 0:  # no unknowns, or no systems
        return out
    if float(r) * n * k * k >= GPU_MIN_WORK:
        device = solve_device()
        if device is not None:
            return _torch_solves(X, wt, B, device)
    iu, ju, packed = _packing(k)  # entry (a, b) of G is column packed[a k + b]
    table = None
    if n * iu.size <= TABLE_ENTRIES:
        table = X[iu]
        table *= X[ju]
        table = table.T  # (n, k(k+1)/2)
    # rows per block: the products (k(k+1)/2 a row) or the broadcast systems (k n and k k)
    step = max(1, BLOCK_ENTRIES // max(k * (k if table is not None else max(k, n)), 1))
    for a in range(0, r, step):
        w = wt[a:a + step]
        if table is not None:
            out[a:a + step] = _solve_packed(w @ table, packed, B[a:a + step], first=a)
        else:  # each system whole, entry (a, b) at column a k + b
            G = ((X[None, :, :] * w[:, None, :]) @ X.T).reshape(-1, k * k)
            out[a:a + step] = _solve_packed(G, _whole(k), B[a:a + step], first=a)
    return out


def weighted_cg(X: np.ndarray, wt: np.ndarray, B: np.ndarray, x0: np.ndarray,
                steps: int = CG_STEPS) -> np.ndarray:
    """The systems of :func:`weighted_solves`, ``(X diag(wt_i) X^T + r_i I) u = B_i`` with the
    same ridge, solved approximately by ``steps`` steps of Jacobi-preconditioned conjugate
    gradients from ``x0``, all systems at once: no system is formed, each step costs two
    matrix products of ``r n k`` multiply-adds where forming the systems costs ``r n k^2 / 2``
    and factorising them ``r k^3 / 3``.

    Started from the current iterate, conjugate gradients minimise the quadratic
    ``q_i(u) = u^T G_i u / 2 - B_i^T u`` over a growing subspace that contains the start, so
    ``q_i`` never increases: a reweighted step solved this way is still a descent step of
    the majorised (smoothed) l1 loss, which is all that the alternating l1 and the screening
    need (their answers are candidates, checked exactly afterwards;
    docs/theory/witnesses.md#alternating-l1, "Reweighted steps by conjugate gradients").
    A system whose curvature along a search direction is not positive and finite stops
    moving (its step length is 0); a system whose start, right-hand side or weights are
    not all finite (or every system, where ``X`` is not) gets a NaN answer, which the
    callers see, whatever ``steps``.

    Parameters
    ----------
    X : (k, n) float64 ndarray
    wt : (r, n) float64 ndarray
        The weights, one row per system (non-negative).
    B : (r, k) float64 ndarray
        The right-hand sides.
    x0 : (r, k) float64 ndarray
        The start, one row per system (the current iterate).
    steps : int
        Conjugate-gradient steps (at least 0; 0 returns a copy of ``x0``, NaN rows as
        above). A system whose preconditioned residual vanishes stops early.

    Returns
    -------
    (r, k) float64 ndarray

    Raises
    ------
    InvalidArgumentError
        If ``X``, ``wt``, ``B`` or ``x0`` is not 2-D, their shapes do not match, or
        ``steps`` is not an integer >= 0.
    """
    steps = check_int(steps, "steps", 0)
    X, wt, B, x0 = (np.asarray(v, dtype=np.float64) for v in (X, wt, B, x0))
    if X.ndim != 2 or wt.ndim != 2 or B.ndim != 2 or x0.ndim != 2:
        raise InvalidArgumentError(f"X, wt, B and x0 must be 2-D, got shapes {X.shape}, "
                                   f"{wt.shape}, {B.shape} and {x0.shape}")
    k, n = X.shape
    r = wt.shape[0]
    if wt.shape != (r, n) or B.shape != (r, k) or x0.shape != (r, k):
        raise InvalidArgumentError(f"wt, B and x0 must have shapes ({r}, {n}), ({r}, {k}) and "
                                   f"({r}, {k}) for X of shape {X.shape}, got {wt.shape}, "
                                   f"{B.shape} and {x0.shape}")
    out = np.array(x0, dtype=np.float64)
    if k == 0 or r == 0:
        return out
    finite_X = bool(np.isfinite(X).all())
    X2t = (X * X).T  # (n, k)
    # systems per block: the (s, n) products of a step within BLOCK_ENTRIES
    step_rows = max(1, BLOCK_ENTRIES // max(n, k, 1))
    with np.errstate(all="ignore"):
        for a in range(0, r, step_rows):
            w = wt[a:a + step_rows]
            diag = w @ X2t  # (s, k): the diagonals of the systems
            ridge = 1e-12 * np.maximum(diag.sum(axis=1) / k, 1e-300)
            diag += ridge[:, None]
            # Jacobi; an all-zero row of weights has the diagonal 1e-312 (the ridge's
            # floor), whose inverse overflows: a NaN answer, as the exact solve's
            inv = np.where(diag > 0, 1.0 / diag, 0.0)

            def apply(V, w=w, ridge=ridge):
                return ((V @ X) * w) @ X.T + ridge[:, None] * V

            x = out[a:a + step_rows]
            res = B[a:a + step_rows] - apply(x)
            z = res * inv
            p = z.copy()
            rz = np.einsum("ij,ij->i", res, z)
            for _ in range(steps):
                live = rz > 0
                if not live.any():
                    break
                q = apply(p)
                pq = np.einsum("ij,ij->i", p, q)
                ok = live & (pq > 0) & np.isfinite(pq)
                alpha = np.where(ok, rz / np.where(ok, pq, 1.0), 0.0)
                x += alpha[:, None] * p
                res -= alpha[:, None] * q
                z = res * inv
                rz_new = np.einsum("ij,ij->i", res, z)
                beta = np.where(ok, rz_new / np.where(ok, rz, 1.0), 0.0)
                p = z + beta[:, None] * p
                rz = np.where(ok, rz_new, 0.0)
            bad = ~(np.isfinite(x).all(axis=1) & np.isfinite(B[a:a + step_rows]).all(axis=1)
                    & np.isfinite(w).all(axis=1)) | (not finite_X)
            x[bad] = np.nan  # no answer, and the callers see it
    return out


def reweighted_step(X: np.ndarray, wt: np.ndarray, B: np.ndarray,
                    x0: np.ndarray) -> np.ndarray:
    """One reweighted least-squares step of the alternating l1 and the screening: the systems
    of :func:`weighted_solves` solved exactly at ranks ``k`` up to :data:`EXACT_MAX_RANK` or
    where a GPU takes the call (:func:`solve_device`), else :data:`CG_STEPS`
    conjugate-gradient steps from the current iterate ``x0`` (:func:`weighted_cg`).

    Shapes as :func:`weighted_cg`; raises what :func:`weighted_solves` raises (a singular
    system in the exact path, numpy.linalg.LinAlgError) and, above the rank,
    what :func:`weighted_cg` raises."""
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] <= EXACT_MAX_RANK or solve_device() is not None:
        return weighted_solves(X, wt, B)
    return weighted_cg(X, wt, B, x0)

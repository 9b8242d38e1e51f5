"""The geometry stages: the factors' native geometry and the intrinsic descriptor beside every
cell (docs/theory/studies.md). Descriptors, never bounds.
"""

from __future__ import annotations

from ..geometry import intrinsic_descriptors
from .record import count, number, register_column

__all__ = ["NativeGeometryStage", "IntrinsicDescriptorStage"]


class NativeGeometryStage:
    """The audit stage that writes the native geometry of the factors beside every cell
    (:meth:`softrank.operators.Operator.native_geometry`; see :mod:`softrank.audit.pipeline`).

    Columns ``rho_Q``, ``rho_K``, ``Gamma`` and ``sv_Q``, ``sv_K`` (singular values,
    space-separated, descending); empty without factors. Gauge-dependent by design: they
    describe the model's chosen factorisation, not ``A``.
    """

    name = "native-geometry"
    columns = ("rho_Q", "rho_K", "Gamma", "sv_Q", "sv_K")

    def run(self, cells) -> list[dict]:
        g = cells.operator.native_geometry()
        if g is None:
            return [{} for _ in cells.eps]
        row = {**{k: g[k] for k in ("rho_Q", "rho_K", "Gamma")},
               **{k: " ".join(f"{x:.6g}" for x in g[k]) for k in ("sv_Q", "sv_K")}}
        return [dict(row) for _ in cells.eps]


class IntrinsicDescriptorStage:
    """The audit stage that writes the intrinsic descriptor
    (:func:`~softrank.geometry.intrinsic_descriptors`) of every cell: ``int_r`` (the retained rank), ``int_tau``, ``int_kappa`` and
    ``int_logq`` (``log`` of the profile ``q``); see :mod:`softrank.audit.pipeline`.

    A descriptor, never a bound. It needs a common positive support or the factors; where
    it cannot be computed the stage fails and its columns stay empty, with the reason in
    the ``stages`` column. A masked operator (a decoder's head, docs/theory/causal.md) has
    none by construction: its columns stay empty without a failure.
    """

    name = "intrinsic-descriptor"
    columns = ("int_r", "int_tau", "int_kappa", "int_logq")

    def run(self, cells) -> list[dict]:
        if cells.operator.mask is not None:
            # a masked head (a decoder's) has no common positive support: no descriptor, and
            # no failure either -- it is undefined there, not broken
            return [{} for _ in cells.eps]
        ds = intrinsic_descriptors(cells.operator, list(cells.eps))
        return [{"int_r": d.r, "int_tau": round(d.tau, 6), "int_kappa": round(d.kappa, 6),
                 "int_logq": round(d.log_q, 6)} for d in ds]


for _col in ("rho_Q", "rho_K", "Gamma", "int_tau", "int_kappa", "int_logq"):
    register_column(_col, number, "native-geometry" if _col in ("rho_Q", "rho_K", "Gamma")
                    else "intrinsic-descriptor")
register_column("int_r", count, "intrinsic-descriptor")

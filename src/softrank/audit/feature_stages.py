"""The feature stages: the add-on study's baseline features (B1) and the gauged native
features (G) beside every cell (docs/theory/studies.md). Descriptors, never bounds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..studies.features import B1, baseline_features, gauged_native
from .record import json_column, number, register_column

__all__ = ["BaselineFeaturesStage", "GaugeFeaturesStage", "GaugedNative"]


@dataclass(frozen=True)
class GaugedNative:
    """The gauge stage's result on one operator (the ``gauge_native`` column): the native
    features G under each fixed diagonal gauge.

    Attributes
    ----------
    by_ratio : tuple of (float, dict)
        ``(gauge ratio, {feature: value})`` in the order of
        :data:`~softrank.studies.features.GAUGE_RATIOS`.
    """

    by_ratio: tuple = ()

    def at(self, ratio: float) -> dict:
        """``{feature: value}`` under the gauge of ``ratio``.

        Raises
        ------
        KeyError
            For a ratio that was not measured."""
        for c, g in self.by_ratio:
            if c == float(ratio):
                return g
        raise KeyError(f"no gauge ratio {ratio!r}")

    def encode(self) -> str:
        """The column: JSON ``{ratio as %g: {feature: value}}``."""
        return json.dumps({f"{c:g}": v for c, v in self.by_ratio})

    @classmethod
    def decode(cls, text) -> "GaugedNative":
        """``gauge_native`` read back by :func:`~softrank.audit.record.read_cell`; raises
        ``ValueError``/``TypeError`` on a value that is not the gauge stage's."""
        d = json_column(text, cls)
        if isinstance(d, cls):
            return d
        if not isinstance(d, dict) or not all(isinstance(v, dict) for v in d.values()):
            raise ValueError(f"expected {{ratio: {{feature: value}}}}, got {text!r:.80}")
        return cls(tuple((float(c), {k: float(x) for k, x in v.items()}) for c, v in d.items()))


register_column("gauge_native", GaugedNative.decode, "gauge-features")
for _col in B1:
    register_column(_col, number, "b1-features")


class BaselineFeaturesStage:
    """The audit stage that writes B1 (:func:`~softrank.studies.features.baseline_features`)
    beside every cell (columns :data:`~softrank.studies.features.B1`; see
    :mod:`softrank.audit.pipeline`). Descriptors, never bounds."""

    name = "b1-features"
    columns = B1

    def run(self, cells) -> list[dict]:
        A = cells.operator.A
        return [{k: round(v, 6) for k, v in baseline_features(A, e).items()} for e in cells.eps]


class GaugeFeaturesStage:
    """The audit stage that writes G under the fixed diagonal gauges of
    :data:`~softrank.studies.features.GAUGE_RATIOS`
    (:func:`~softrank.studies.features.gauged_native`) as JSON in the column
    ``gauge_native`` (empty without factors; see :mod:`softrank.audit.pipeline`). The add-on
    test reads it to show that native geometry moves under a gauge while ``A`` does not."""

    name = "gauge-features"
    columns = ("gauge_native",)

    def run(self, cells) -> list[dict]:
        op = cells.operator
        if op.Q is None:
            return [{} for _ in cells.eps]
        value = GaugedNative(tuple(gauged_native(op.Q, op.K, op.beta).items())).encode()
        return [{"gauge_native": value} for _ in cells.eps]

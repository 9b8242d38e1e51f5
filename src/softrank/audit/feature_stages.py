"""The feature stages: the add-on study's baseline features (B1) and the gauged native
features (G) beside every cell (docs/theory/studies.md). Descriptors, never bounds.
"""

from __future__ import annotations

import json

from ..studies.features import B1, baseline_features, gauged_native

__all__ = ["BaselineFeaturesStage", "GaugeFeaturesStage"]


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
        value = json.dumps({f"{c:g}": v for c, v in gauged_native(op.Q, op.K, op.beta).items()})
        return [{"gauge_native": value} for _ in cells.eps]

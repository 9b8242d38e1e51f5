"""Saved counterexamples: every suite failure leaves files that replay it (SPEC 6, 10).

``DIR/<certifier>/<test>/`` holds ``case.json`` (tolerance, reason, how to replay),
``A.npy`` (and ``Q.npy``, ``K.npy`` with ``beta`` in ``case.json`` when known), and the
certificates involved as ``.npz`` files that ``softrank verify DIR/<certifier>/<test>``
re-checks: a witness saved as a counterexample carries the claim it refutes in its header,
and ``verify`` exits non-zero when the refutation holds. A directory is rewritten on each
failure of its test, so after hypothesis has shrunk an example it holds the shrunk one.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np

from ..checker import save_certificate

__all__ = ["FailureStore"]


def _slug(s: str) -> str:
    return re.sub(r"[^\w.-]+", "_", s)[:80] or "_"


class FailureStore:
    """Writes counterexamples under ``root`` (created on first use)."""

    def __init__(self, root):
        self.root = Path(root)
        self.saved: list[Path] = []

    def save(self, certifier: str, test: str, operator, eps: float, reason: str, *,
             lower=None, witness=None, refutes: dict | None = None) -> Path:
        """Save one failing case; returns its directory.

        ``lower``: the lower certificate involved; ``witness``: an upper witness (a
        counterexample when ``refutes`` names the claim ``r_eps >= claimed`` it beats).
        """
        d = self.root / _slug(certifier) / _slug(test)
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        np.save(d / "A.npy", operator.A)
        case = {"certifier": certifier, "test": test, "eps": float(eps), "reason": reason,
                "operator_id": operator.operator_id, "shape": list(operator.A.shape),
                "meta": {k: v for k, v in operator.meta.items()
                         if isinstance(v, (int, float, str, list))},
                "replay": [f"softrank bracket {d / 'A.npy'} --eps {float(eps)!r}"]}
        if operator.Q is not None:
            np.save(d / "Q.npy", operator.Q)
            np.save(d / "K.npy", operator.K)
            case["beta"] = float(operator.beta)
        if lower is not None:
            save_certificate(d / "lower.npz", lower, operator.A, producer=certifier)
        if witness is not None:
            save_certificate(d / "witness.npz", witness, operator.A, producer=certifier,
                             refutes=refutes)
        if lower is not None or witness is not None:
            case["replay"].insert(0, f"softrank verify {d}")
        (d / "case.json").write_text(json.dumps(case, indent=2, sort_keys=True))
        if d not in self.saved:
            self.saved.append(d)
        return d

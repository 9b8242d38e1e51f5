"""Saved counterexamples: every suite failure leaves files that replay it (docs/theory/checker.md, docs/theory/attacks.md).

``DIR/<certifier>/<test>/<tag>/`` (``tag``: the kind of failure), or
``DIR/<certifier>/<test>/<case>/<tag>/`` for the fixed real-size cases (``case``: the case's
id, one directory each, so the failures of several cases of one test are all kept), holds
``case.json`` (tolerance, reason, the certifier's ``MODULE:OBJECT``, how to replay), ``A.npy`` (and
``Q.npy``, ``K.npy`` with ``beta`` in ``case.json`` when known), and the certificates
involved as ``.npz`` files. ``python -m softrank.suites.replay DIR/...`` calls the certifier
again on the saved operator and re-checks what it returns (every kind of failure);
``softrank verify DIR/...`` re-checks the saved certificates without the certifier: a
witness saved as a counterexample carries the claim it refutes in its header, and
``verify`` exits non-zero when the refutation holds. A directory is rewritten on each
failure of its kind (and case), so after hypothesis has shrunk an example it holds the shrunk
one.
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
    """A safe single path component (no dots, separators or empty names)."""
    return re.sub(r"[^\w-]+", "_", str(s))[:80].strip("_") or "_"


class FailureStore:
    """Writes counterexamples under ``root`` (created on first use)."""

    def __init__(self, root):
        self.root = Path(root)
        self.saved: list[Path] = []

    def save(self, certifier: str, test: str, operator, eps: float, reason: str, *,
             tag: str = "failure", spec: str = "", case: str = "", lower=None, witness=None,
             refutes: dict | None = None, arrays: dict | None = None) -> Path:
        """Save one failing case; returns its directory ``root/certifier/test/tag``, or
        ``root/certifier/test/case/tag`` with ``case``.

        ``tag`` names the kind of failure (one directory each, so that distinct failures of
        one test are all kept); ``case`` names a fixed case of a parametrized test (the
        real-size cases: each keeps its own directory); ``spec`` is the certifier's
        ``MODULE:OBJECT`` (for ``python -m softrank.suites.replay``); ``lower``: the lower
        certificate involved; ``witness``: an upper witness (a counterexample when
        ``refutes`` names the claim ``r_eps >= claimed`` it beats).
        """
        root = self.root.resolve()
        d = root / _slug(certifier) / _slug(test)
        d = (d / _slug(case) if case else d) / _slug(tag)
        if root not in d.resolve().parents:  # _slug makes this impossible; belt and braces
            raise ValueError(f"failure directory {d} escapes {root}")
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        np.save(d / "A.npy", operator.A)
        info = {"certifier": certifier, "spec": spec, "test": test, "tag": tag,
                "case": case, "eps": float(eps), "reason": reason,
                "operator_id": operator.operator_id, "shape": list(operator.A.shape),
                "meta": {k: v for k, v in operator.meta.items()
                         if isinstance(v, (int, float, str, list))},
                "replay": [f"python -m softrank.suites.replay {d}"]}
        if operator.Q is not None:
            np.save(d / "Q.npy", operator.Q)
            np.save(d / "K.npy", operator.K)
            info["beta"] = float(operator.beta)
        for name, X in (arrays or {}).items():  # e.g. the gauge S of a gauge test
            np.save(d / f"{_slug(name)}.npy", X)
            info.setdefault("arrays", []).append(f"{_slug(name)}.npy")
        if lower is not None:
            save_certificate(d / "lower.npz", lower, operator.A, producer=certifier)
        if witness is not None:
            save_certificate(d / "witness.npz", witness, operator.A, producer=certifier,
                             refutes=refutes)
        if lower is not None or witness is not None:
            info["replay"].insert(0, f"softrank verify {d}")
        (d / "case.json").write_text(json.dumps(info, indent=2, sort_keys=True))
        if d not in self.saved:
            self.saved.append(d)
        return d

"""A stage with a setting of its own: each operator's largest row mass outside its top-k keys.

The worked example of README, *Stages*: a new audit setting (``top_k``) is declared in the
config (a field, validated once, part of the run's identity) and in the stage that uses it
(``parameters``); the stage receives it by keyword, already validated. On the command line
it would also take an option in ``softrank audit``'s parser; nothing else changes.

    from softrank.harness.runner import run_audit
    config = TopKConfig(eps=(0.25,), top_k=4, stages=("examples.topk_stage:TopKMassStage",))
    if __name__ == "__main__":                # the workers import the script again
        run_audit(operators, config, "out")   # brackets.csv gains the column top_k_tail
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from softrank.audit import AuditConfig
from softrank.validation import check_int


@dataclass(frozen=True)
class TopKConfig(AuditConfig):
    """The audit's settings and ``top_k``: how many keys of each row are kept (>= 1)."""

    top_k: int = 8

    def __post_init__(self):
        object.__setattr__(self, "top_k", check_int(self.top_k, "top_k", lo=1))
        super().__post_init__()  # the audit's own settings; builds the stages once

    def identity(self) -> dict:
        return {**super().identity(), "top_k": self.top_k}  # a resumed run must match it


class TopKMassStage:
    """``top_k_tail``: the largest, over the operator's rows, of the mass outside the row's
    ``top_k`` largest entries (the error, in each row's l1 norm, of keeping only those keys:
    a sparse approximation, not a low-rank one). The same on every cell of the operator."""

    name = "top-k-mass"
    parameters = ("top_k",)  # received by keyword from the config, validated there
    columns = ("top_k_tail",)

    def __init__(self, *, top_k: int):
        self.top_k = top_k

    def run(self, cells) -> list[dict]:
        A = cells.operator.A
        k = min(self.top_k, A.shape[1])
        tail = 1.0 - np.sort(A, axis=1)[:, A.shape[1] - k:].sum(axis=1)
        return [{"top_k_tail": round(float(tail.max()), 9)} for _ in cells.eps]

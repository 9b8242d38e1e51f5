"""Replay a saved suite failure: ``python -m softrank.suites.replay DIR``.

``DIR`` is a directory written by :class:`softrank.suites.failures.FailureStore`
(``softrank-failures/<certifier>/<test>/[<case>/]<tag>/``). The certifier named by ``spec`` in
``case.json`` is loaded again (run from the directory where its module is importable) and
the failing suite test is run once, without hypothesis, on the saved operator, tolerance
and gauge. Exit status: 1 if the failure reproduces (its message is printed), 0 if it does
not, 2 if the case cannot be replayed (the reason is printed). Counterexample files written
during the replay go to a temporary directory, never over the saved case.

For the saved certificates alone (no certifier needed), use ``softrank verify DIR``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

__all__ = ["replay", "main"]

_PER_CERTIFIER = ("construction_stress", "construction_gauge", "lower_soundness",
                  "lower_attack_resistance", "lower_gauge", "construction_sizes", "lower_sizes")
#: the real-size tests run the checks of these hypothesis tests on their fixed cases
_SAME_CHECKS = {"construction_sizes": "construction_stress", "lower_sizes": "lower_soundness"}


def replay(directory) -> tuple[bool, str]:
    """Run the saved case once; returns ``(reproduced, message)``.

    Raises
    ------
    InvalidArgumentError
        If ``directory`` is not a saved case or its test cannot be replayed.
    """
    import numpy as np

    from ..errors import InvalidArgumentError
    from ..operators import Operator
    from . import suite
    from .config import CONFIG
    from .protocol import load_certifier

    d = Path(directory)
    try:
        case = json.loads((d / "case.json").read_text())
        A = np.load(d / "A.npy", allow_pickle=False)
    except Exception as exc:
        raise InvalidArgumentError(f"directory: {str(d)!r} is not a saved suite failure "
                                   f"(case.json, A.npy): {exc}") from exc
    test, spec, eps = case.get("test", ""), case.get("spec", ""), float(case["eps"])
    if test not in _PER_CERTIFIER:
        raise InvalidArgumentError(f"directory: test {test!r} is replayed by its pytest run, not "
                                   f"here (replayable: {list(_PER_CERTIFIER)})")
    if not spec:
        raise InvalidArgumentError("directory: case.json names no certifier spec")
    if (d / "Q.npy").exists():
        op = Operator(A=A, Q=np.load(d / "Q.npy"), K=np.load(d / "K.npy"), beta=case["beta"],
                      operator_id=case.get("operator_id", ""), meta=case.get("meta", {}))
    else:
        op = Operator(A=A, operator_id=case.get("operator_id", ""), meta=case.get("meta", {}))
    cert = load_certifier(spec)
    CONFIG.certifiers = [cert]
    fn = getattr(suite, f"test_{_SAME_CHECKS.get(test, test)}").hypothesis.inner_test
    if test.endswith("gauge"):
        args = {"case": (op, np.load(d / "S.npy"), eps)}
    else:
        args = {"case": (op, eps)}
    with tempfile.TemporaryDirectory() as tmp:
        saved, CONFIG.failures_dir = CONFIG.failures_dir, tmp
        try:
            fn(softrank_certifier=cert, **args)
        except suite.SuiteFailure as exc:
            return True, str(exc).split("\n  counterexample saved in")[0]
        finally:
            CONFIG.failures_dir = saved
    return False, "does not reproduce: the certifier now passes this case"


def main(argv=None) -> int:
    import argparse

    from ..errors import SoftrankError

    p = argparse.ArgumentParser(prog="python -m softrank.suites.replay",
                                description="replay a saved softrank suite failure")
    p.add_argument("directory", help="softrank-failures/<certifier>/<test>/[<case>/]<tag>")
    args = p.parse_args(argv)
    try:
        reproduced, msg = replay(args.directory)
    except SoftrankError as exc:
        print(f"replay: error: {exc}", file=sys.stderr)
        return 2
    print(("REPRODUCED: " if reproduced else "") + msg)
    return 1 if reproduced else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

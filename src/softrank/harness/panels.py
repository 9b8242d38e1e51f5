"""Panels: which operators an audit brackets, at which tolerances.

A panel is a list of *operator specs* plus default tolerances. Specs are small dicts that
:func:`materialize` turns into :class:`~softrank.Operator` values, so a panel is cheap to
build and print before any model is loaded.

Built-in panels (``softrank audit --panel NAME``):

* ``quick`` -- 9 MiniLM heads at width 64 and 6 small synthetic operators; about 30 s on
  2 cores.
* ``default`` -- all 72 MiniLM heads (6 layers x 12 heads) at widths 64 and 128 (one
  standard-library source per head and width, rotating over 64 modules), plus the synthetic
  families of SPEC 8: grids (``d`` = 1, 2, 3), sphere and ball supports (``d`` = 2..4, ``beta``
  in 4, 16, 64), Gaussian random heads, planted instances.

A panel file (TOML) lists the same things::

    eps = [0.1, 0.25, 0.5]          # optional: default tolerances

    [[minilm]]                      # MiniLM heads (needs the [models] extra)
    widths = [64]
    layers = [0, 5]                 # default: all 6
    heads = [0, 1, 2]               # default: all 12
    sources_per_head = 1            # stdlib modules per (layer, head, width)

    [[synthetic]]                   # one entry per operator; keyword arguments of the
    family = "grid"                 # generator in softrank.generators.synthetic
    d = 2
    n = 8

    [[matrix]]                      # a saved matrix (.npy, float64, rows summing to 1)
    path = "my_head.npy"            # relative to the panel file
    family = "mine"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..certifiers.bracket import validate_eps
from ..errors import PanelError, SoftrankError
from ..operators import Operator

__all__ = ["Panel", "build_panel", "materialize", "DEFAULT_EPS", "PANELS"]

DEFAULT_EPS = (0.1, 0.25, 0.5)
PANELS = ("quick", "default")
N_SOURCES = 64

_SYNTHETIC = ("grid", "sphere", "ball", "gaussian_head", "planted", "planted_blocks")


@dataclass
class Panel:
    """A named list of operator specs and its default tolerances."""

    name: str
    specs: list = field(default_factory=list)
    eps: tuple = DEFAULT_EPS

    def __len__(self) -> int:
        return len(self.specs)


def _minilm_specs(widths, layers, heads, sources_per_head, seed):
    specs = []
    for w_i, w in enumerate(widths):
        for l in layers:
            for h in heads:
                for s in range(sources_per_head):
                    idx = (12 * l + h + 32 * w_i + 7 * s + seed) % N_SOURCES
                    specs.append({"kind": "minilm", "width": int(w), "layer": int(l),
                                  "head": int(h), "source_index": int(idx)})
    return specs


def _synthetic_default(seed: int, quick: bool):
    S = []
    if quick:
        S += [{"family": "grid", "d": 1, "n": 32}, {"family": "grid", "d": 2, "n": 6},
              {"family": "sphere", "d": 3, "beta": 16.0, "m": 48, "N": 48, "seed": seed},
              {"family": "gaussian_head", "m": 48, "N": 48, "seed": seed},
              {"family": "planted", "m": 48, "N": 48, "k": 4, "delta": 0.04, "seed": seed},
              {"family": "planted_blocks", "m": 48, "N": 48, "k": 6, "delta": 0.05, "seed": seed}]
        return [{"kind": "synthetic", **s} for s in S]
    S += [{"family": "grid", "d": 1, "n": n} for n in (32, 64, 128)]
    S += [{"family": "grid", "d": 2, "n": n} for n in (6, 8, 11)]
    S += [{"family": "grid", "d": 3, "n": n} for n in (4, 5)]
    for fam in ("sphere", "ball"):
        for d in (2, 3, 4):
            for beta in (4.0, 16.0, 64.0):
                S.append({"family": fam, "d": d, "beta": beta, "m": 64, "N": 64, "seed": seed})
    S += [{"family": "gaussian_head", "m": 64, "N": 64, "d": 32, "temperature": t, "seed": seed + i}
          for i, t in enumerate((1.0, 2.0, 4.0))]
    S += [{"family": "planted", "m": 64, "N": 64, "k": k, "delta": 0.04, "seed": seed + k}
          for k in (2, 4, 8, 16)]
    S += [{"family": "planted_blocks", "m": 64, "N": 64, "k": k, "delta": 0.04, "seed": seed + k}
          for k in (4, 16)]
    return [{"kind": "synthetic", **s} for s in S]


def _tables(data: dict, key: str, path: Path) -> list[dict]:
    """``[[key]]`` entries: a list of tables (a single ``[key]`` table is a mistake)."""
    val = data.get(key, [])
    if not isinstance(val, list) or not all(isinstance(t, dict) for t in val):
        raise PanelError(f"panel: {str(path)!r}: {key!r} must be written as [[{key}]] tables "
                         f"(an array of tables), got {type(val).__name__}")
    return val


def _int_list(where: str, name: str, vals, lo: int, hi: int) -> list[int]:
    if not isinstance(vals, list) or not vals or not all(
            isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi for v in vals):
        raise PanelError(f"panel: {where}: {name} must be a non-empty list of integers in "
                         f"[{lo}, {hi}], got {vals!r}")
    return vals


def _panel_file(path: Path, seed: int) -> Panel:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise PanelError(f"panel: file {str(path)!r} not found") from exc
    except IsADirectoryError as exc:
        raise PanelError(f"panel: {str(path)!r} is a directory, expected a .toml file") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PanelError(f"panel: {str(path)!r} is not valid TOML ({exc})") from exc
    except OSError as exc:
        raise PanelError(f"panel: cannot read {str(path)!r} ({exc})") from exc
    known = {"eps", "minilm", "synthetic", "matrix", "name"}
    extra = set(data) - known
    if extra:
        raise PanelError(f"panel: {str(path)!r} has unknown keys {sorted(extra)}; expected {sorted(known)}")
    specs = []
    for i, m in enumerate(_tables(data, "minilm", path)):
        where = f"[[minilm]] entry {i}"
        bad = set(m) - {"widths", "layers", "heads", "sources_per_head"}
        if bad:
            raise PanelError(f"panel: {where} has unknown keys {sorted(bad)}")
        widths = _int_list(where, "widths", m.get("widths", [64]), 2, 512)
        layers = _int_list(where, "layers", m.get("layers", list(range(6))), 0, 5)
        heads = _int_list(where, "heads", m.get("heads", list(range(12))), 0, 11)
        (sph,) = _int_list(where, "sources_per_head", [m.get("sources_per_head", 1)], 1, N_SOURCES)
        specs += _minilm_specs(widths, layers, heads, sph, seed)
    for i, s in enumerate(_tables(data, "synthetic", path)):
        if s.get("family") not in _SYNTHETIC:
            raise PanelError(f"panel: [[synthetic]] entry {i}: family must be one of {_SYNTHETIC}, "
                             f"got {s.get('family')!r}")
        specs.append({"kind": "synthetic", "entry": i, **s})
    for i, s in enumerate(_tables(data, "matrix", path)):
        bad = set(s) - {"path", "family"}
        if bad:
            raise PanelError(f"panel: [[matrix]] entry {i} has unknown keys {sorted(bad)}; "
                             "expected 'path' and optionally 'family'")
        if not isinstance(s.get("path"), str) or not s["path"]:
            raise PanelError(f"panel: [[matrix]] entry {i} needs 'path', a file name, got "
                             f"{s.get('path')!r}")
        if not isinstance(s.get("family", "matrix"), str):
            raise PanelError(f"panel: [[matrix]] entry {i}: family must be a string, got "
                             f"{s['family']!r}")
        p = Path(s["path"])
        if not p.is_absolute():
            p = path.parent / p
        specs.append({"kind": "matrix", "path": str(p), "family": s.get("family", "matrix")})
    if not specs:
        raise PanelError(f"panel: {str(path)!r} lists no operators")
    eps = data.get("eps", list(DEFAULT_EPS))
    if not isinstance(eps, list):
        raise PanelError(f"panel: {str(path)!r}: eps must be a list of tolerances, got {eps!r}")
    try:
        eps = validate_eps(eps)
    except SoftrankError as exc:
        raise PanelError(f"panel: {str(path)!r}: {exc}") from exc
    return Panel(str(data.get("name", path.stem)), specs, tuple(eps))


def build_panel(panel: str, seed: int = 0) -> Panel:
    """A built-in panel (``quick``, ``default``) or a TOML panel file.

    Raises
    ------
    PanelError
        Unknown name, missing or malformed file (the message names the entry and key).
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise PanelError(f"seed: expected an integer >= 0, got {seed!r}")
    if panel in ("quick", "default"):
        quick = panel == "quick"
        if quick:
            specs = _minilm_specs([64], [0, 2, 5], [0, 5, 11], 1, seed)
        else:
            specs = _minilm_specs([64, 128], range(6), range(12), 1, seed)
        return Panel(panel, specs + _synthetic_default(seed, quick))
    p = Path(panel)
    if p.suffix.lower() != ".toml" and not p.is_file():
        raise PanelError(f"panel: expected 'quick', 'default' or a .toml file, got {panel!r}")
    return _panel_file(p, seed)


def materialize(specs: list[dict]) -> list[Operator]:
    """Turn specs into operators (MiniLM specs share one model load and one forward pass
    per source and width). Raises PanelError (wrapping the generator's error) on a bad spec."""
    from ..generators import synthetic

    out: list[Operator | None] = [None] * len(specs)
    minilm = [(i, s) for i, s in enumerate(specs) if s["kind"] == "minilm"]
    if minilm:
        from ..generators.heads import minilm_operators
        from ..generators.text import stdlib_sources

        sources = stdlib_sources(N_SOURCES)
        for w in sorted({s["width"] for _, s in minilm}):
            group = [(i, s) for i, s in minilm if s["width"] == w]
            ops = minilm_operators(
                w, [(s["layer"], s["head"], sources[s["source_index"]]) for _, s in group])
            for (i, _), op in zip(group, ops):
                out[i] = op
    for i, s in enumerate(specs):
        if s["kind"] == "synthetic":
            kw = {k: v for k, v in s.items() if k not in ("kind", "family", "entry")}
            where = f"[[synthetic]] entry {s.get('entry', i)} ({s['family']})"
            try:
                out[i] = getattr(synthetic, s["family"])(**kw)
            except TypeError as exc:  # unknown keyword
                raise PanelError(f"panel: {where}: {exc}") from exc
            except SoftrankError as exc:
                raise PanelError(f"panel: {where}: {exc}") from exc
        elif s["kind"] == "matrix":
            p = Path(s["path"])
            try:
                A = np.load(p, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise PanelError(f"panel: [[matrix]] {str(p)!r} is not a readable .npy array "
                                 f"({exc})") from exc
            if not isinstance(A, np.ndarray):
                raise PanelError(f"panel: [[matrix]] {str(p)!r} is an .npz archive, expected .npy")
            try:
                out[i] = Operator(A=A, family=s.get("family", "matrix"), source=p.name,
                                  operator_id=f"{s.get('family', 'matrix')}-{p.stem}")
            except SoftrankError as exc:
                raise PanelError(f"panel: [[matrix]] {str(p)!r}: {exc}") from exc
    return out  # type: ignore[return-value]

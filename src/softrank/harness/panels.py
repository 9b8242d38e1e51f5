"""Panels: which operators an audit brackets, at which tolerances.

A panel is a list of *operator specs* plus default tolerances. Specs are small dicts that
:func:`materialize` turns into :class:`~softrank.Operator` values, so a panel is cheap to
build and print before any model is loaded.

Built-in panels (``softrank audit --panel NAME``):

* ``quick`` -- 9 MiniLM heads at width 64 and 6 small synthetic operators; about 30 s on
  2 cores.
* ``default`` -- all 72 MiniLM heads (6 layers x 12 heads) at widths 64 and 128 (one
  standard-library source per head and width, rotating over 64 modules), plus the synthetic
  families of docs/theory/families.md: grids (``d`` = 1, 2, 3), sphere and ball supports (``d`` = 2..4, ``beta``
  in 4, 16, 64), Gaussian random heads, planted instances.
* ``wide`` -- 12 MiniLM heads at the widths users run: 6 at width 256 and 6 at width 512,
  one per layer at each width and each of the 12 heads once (:func:`wide_specs`).
* ``causal`` -- causal Gaussian, sliding-window and planted causal heads at widths 64 and
  128, bracketed for the causal rank too.
* ``paper`` -- the seed paper's size (:func:`paper_specs`): 3,343 operators, 10,029 cells at
  the default tolerances. 3,168 MiniLM heads: every one of the 72 heads at widths 64, 128,
  256 and 512, 792 per width (11 sources per head and width, rotated so that the heads of a
  layer see different sources; width 512 only over the 59 sources with at least 512 tokens),
  plus 175 synthetic operators: the ``default`` panel's 35 families at 5 seeds (``seed`` to
  ``seed + 4``), the grids (which have no seed) at scales ``c`` = 1, 0.5, 2, 0.25, 4. Days
  of work on one machine: ``softrank audit`` prints the expected cost first
  (:mod:`softrank.harness.cost`).
* ``long`` -- heads at the lengths users run (:func:`long_specs`): Gaussian (plain and
  causal), planted and sphere heads of 1,024, 2,048 and 4,096 tokens, and the whole causal
  heads of two tiny random-initialised decoders (``gpt2``, ``llama``) at 1,024 and 2,048
  tokens, 16 operators at eps 0.25 only, each cell's bracket limited to 540 s and its
  attack to as much again (``--eps`` and ``--cell-timeout`` override both): at most about
  2.5 hours with 2 workers on 2 cores.

A panel file (TOML) lists the same things::

    eps = [0.1, 0.25, 0.5]          # optional: default tolerances

    [[minilm]]                      # MiniLM heads (needs the [models] extra)
    widths = [64]
    layers = [0, 5]                 # default: all 6
    heads = [0, 1, 2]               # default: all 12
    sources_per_head = 1            # stdlib modules per (layer, head, width)

    cell_timeout = 540              # optional: seconds per cell (--cell-timeout wins)

    [[synthetic]]                   # one entry per operator; keyword arguments of the
    family = "grid"                 # generator in softrank.generators.synthetic
    d = 2
    n = 8
    id = "grid-d2-n8-mine"          # optional: the operator's id instead of the generator's
                                    # (which may not name every argument, e.g. the size)

    [[matrix]]                      # a saved matrix (.npy, float64, rows summing to 1) or
    path = "my_head.npy"            # an operator file (.npz from `softrank heads`),
    family = "mine"                 # relative to the panel file

    [[heads]]                       # heads of a local checkpoint (BERT, GPT-2, Qwen2,
    checkpoint = "ckpt/qwen2"       # Llama, ViT; softrank.generators.capture), relative
    sources = ["stdlib:json", "texts/"]   # to the panel file; inputs as for `softrank heads`
    widths = [32, 64]               # default: the whole input; causal models give
    layers = [0, 1]                 # keys [0, w), queries [w, 2w); default all layers
    heads = [0, 3]                  # default all (query) heads
    family = "qwen2-tiny"           # default: the config's model_type
    full = false                    # true: whole heads with the model's own mask

    [[certifier]]                   # a third-party construction or lower test run in every
    spec = "mypkg.certifiers:Mine"  # cell (as `softrank audit --certifier`); `path`, relative
    path = "src"                    # to the panel file, is put on sys.path to import it

Every (source, width, layer, head) of a ``[[heads]]`` entry is one operator; each
checkpoint is loaded once and every operator verified against the model's eager attention.
With ``full = true`` (default false) each operator is a whole head
(docs/theory/heads.md#full-heads): for each width ``w`` of ``widths`` the first ``w``
tokens of every source (when ``widths`` is omitted: all of its ``T`` tokens, up to the
model's maximum, so ``T`` may differ between sources) are the queries and the keys, and the
``(w, w)`` operator carries the model's own mask of that layer (causal, a sliding window,
none for BERT and ViT); ids ``{family}-full{w}-L{l}H{h}-{source}``, block ``full:0-w``. The
audit report groups heads by family and width (:func:`softrank.ids.group_key`), so an entry
with ``full`` and one without, on the same family and width, share a group unless one of
them is given its own ``family`` (e.g. ``"gpt2-full"``).
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path


from ..errors import PanelError, SoftrankError
from ..ids import check_id_part
from ..operators import Operator
from ..operator_files import load_operator
from ..validation import check_positive, parse_rank, validate_eps
from .panel_specs import (LONG_CELL_TIMEOUT, LONG_EPS, N_SOURCES, PAPER_GRID_SCALES,
                          PAPER_SOURCES_PER_HEAD, PAPER_WIDTHS, SHORT_SOURCES, causal_specs,
                          long_specs, minilm_specs, paper_specs, synthetic_specs, wide_specs)

__all__ = ["Panel", "build_panel", "materialize", "minilm_specs", "wide_specs", "paper_specs",
           "long_specs", "DEFAULT_EPS", "PANELS", "SHORT_SOURCES", "PAPER_WIDTHS",
           "PAPER_SOURCES_PER_HEAD", "PAPER_GRID_SCALES", "N_SOURCES"]

DEFAULT_EPS = (0.1, 0.25, 0.5)
PANELS = ("quick", "default", "wide", "causal", "paper", "long")

_SYNTHETIC = ("grid", "sphere", "ball", "gaussian_head", "planted", "planted_blocks",
              "planted_causal", "planted_segments")


@dataclass
class Panel:
    """A named list of operator specs and its default tolerances."""

    name: str
    specs: list = field(default_factory=list)
    eps: tuple = DEFAULT_EPS
    certifiers: tuple = ()
    certifier_paths: tuple = ()
    #: The rank bracketed beside ``r_eps`` on causal heads (``plain``: none; ``causal``,
    #: ``window:W``; ``softrank audit --rank`` overrides it).
    rank: str = "plain"
    #: Seconds per cell when ``softrank audit --cell-timeout`` is not given (None: no limit).
    cell_timeout: float | None = None

    def __len__(self) -> int:
        return len(self.specs)


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


def _config_counts(ckdir: Path, where: str) -> tuple[int, int]:
    """(layers, query heads) from a checkpoint's config.json, without loading the model."""
    import json

    try:
        cfg = json.loads((ckdir / "config.json").read_text())
    except FileNotFoundError as exc:
        raise PanelError(f"panel: {where}: checkpoint {str(ckdir)!r} has no config.json") from exc
    except (OSError, ValueError) as exc:
        raise PanelError(f"panel: {where}: checkpoint {str(ckdir)!r}: config.json is not "
                         f"readable JSON ({exc})") from exc
    n_l = cfg.get("num_hidden_layers", cfg.get("n_layer"))
    n_h = cfg.get("num_attention_heads", cfg.get("n_head"))
    if not (isinstance(n_l, int) and isinstance(n_h, int) and n_l > 0 and n_h > 0):
        raise PanelError(f"panel: {where}: checkpoint {str(ckdir)!r}: config.json gives no "
                         "layer and head counts")
    return n_l, n_h


def _heads_specs(h: dict, i: int, path: Path) -> list[dict]:
    """One spec per (source, width, layer, head) of a ``[[heads]]`` entry."""
    from ..generators.capture import read_sources

    where = f"[[heads]] entry {i}"
    bad = set(h) - {"checkpoint", "sources", "widths", "layers", "heads", "family", "full"}
    if bad:
        raise PanelError(f"panel: {where} has unknown keys {sorted(bad)}; expected checkpoint, "
                         "sources, widths, layers, heads, family, full")
    full = h.get("full", False)
    if not isinstance(full, bool):
        raise PanelError(f"panel: {where}: full must be true or false, got {full!r}")
    if not isinstance(h.get("checkpoint"), str) or not h["checkpoint"]:
        raise PanelError(f"panel: {where} needs 'checkpoint', a directory, got "
                         f"{h.get('checkpoint')!r}")
    ck = Path(h["checkpoint"])
    if not ck.is_absolute():
        ck = path.parent / ck
    if h["checkpoint"] == "minilm" and not ck.exists():  # the packaged MiniLM checkpoint
        ck = Path("minilm")
        n_l, n_h = 6, 12
    elif not ck.is_dir():
        raise PanelError(f"panel: {where}: checkpoint {str(ck)!r} is not an existing directory")
    else:
        n_l, n_h = _config_counts(ck, where)
    srcs = h.get("sources")
    if not isinstance(srcs, list) or not srcs or not all(isinstance(x, str) for x in srcs):
        raise PanelError(f"panel: {where}: sources must be a non-empty list of inputs (files, "
                         f"directories, 'stdlib[:MODULE]', 'skimage:NAME'), got {srcs!r}")
    try:
        names = [s.name for s in read_sources(srcs, base=path.parent)]
    except SoftrankError as exc:
        raise PanelError(f"panel: {where}: {exc}") from exc
    widths = h.get("widths")
    widths = [None] if widths is None else _int_list(where, "widths", widths, 2, 1 << 16)
    layers = _int_list(where, "layers", h.get("layers", list(range(n_l))), 0, n_l - 1)
    heads = _int_list(where, "heads", h.get("heads", list(range(n_h))), 0, n_h - 1)
    for name, vals in (("layers", layers), ("heads", heads), ("widths", widths)):
        if len(set(vals)) != len(vals):
            raise PanelError(f"panel: {where}: {name} repeat, got {vals!r}")
    fam = h.get("family")
    if fam is not None:
        check_id_part(fam, f"panel: {where}: family", PanelError)
    group = {"checkpoint": str(ck), "sources": [str(x) for x in srcs], "base": str(path.parent),
             "family": fam, "layers": layers, "heads": heads, "full": full, "entry": i}
    return [{"kind": "heads", **group, "width": w, "source": n, "layer": l, "head": hd}
            for w in widths for n in names for l in layers for hd in heads]


def _materialize_heads(specs: list[tuple[int, dict]], out: list) -> None:
    """Capture the operators of ``[[heads]]`` specs: one load per checkpoint, one capture
    per (entry, width); an entry with ``full`` captures whole heads with their masks."""
    from ..generators.capture import capture, read_sources, resolve_checkpoint

    loaded: dict = {}
    groups: dict = {}
    for i, s in specs:
        groups.setdefault((s["entry"], s["width"]), []).append((i, s))
    for (entry, width), items in groups.items():
        s0 = items[0][1]
        where = f"[[heads]] entry {entry}"
        try:
            got = loaded.get(s0["checkpoint"])
            if got is None:
                got = loaded[s0["checkpoint"]] = resolve_checkpoint(s0["checkpoint"])
            ck, default_family = got
            sources = read_sources(s0["sources"], base=Path(s0["base"]))
            ops = capture(ck, sources, width=width, layers=s0["layers"], heads=s0["heads"],
                          family=s0["family"] or default_family,
                          full=s0.get("full", False))
        except SoftrankError as exc:
            what = f"width {width}" if width is not None else "the whole input"
            raise PanelError(f"panel: {where} ({what}{', full' if s0.get('full') else ''}): "
                             f"{exc}") from exc
        by = {(op.source, op.layer, op.head): op for op in ops}
        for i, s in items:
            out[i] = by[(s["source"], s["layer"], s["head"])]


def _materialize_tiny(specs: list[tuple[int, dict]], out: list) -> None:
    """Capture the whole causal heads of ``tiny`` specs (the ``long`` panel's decoders): each
    checkpoint written once, in a temporary directory removed after its captures
    (:func:`softrank.generators.tiny.save_tiny_checkpoint`, nothing downloaded)."""
    import tempfile

    from ..generators.capture import capture, load_checkpoint, read_sources
    from ..generators.tiny import save_tiny_checkpoint

    groups: dict = {}
    for i, s in specs:
        groups.setdefault((s["family"], s["seed"], s["max_positions"]), []).append((i, s))
    for (fam, seed, positions), items in groups.items():
        where = f"tiny {fam} checkpoint (seed {seed}, {positions} positions)"
        try:
            with tempfile.TemporaryDirectory(prefix="softrank-tiny-") as tmp:
                ck = load_checkpoint(save_tiny_checkpoint(
                    fam, Path(tmp) / fam, seed=seed, max_positions=positions))
                for i, s in items:
                    (op,) = capture(ck, read_sources([s["source"]]), width=s["width"],
                                    layers=[s["layer"]], heads=[s["head"]],
                                    family=f"tiny-{fam}-s{seed}", full=True)
                    # the directory is gone after this: the provenance says how to write
                    # the same checkpoint again instead
                    meta = {**op.meta, "checkpoint_dir": "", "tiny_checkpoint": {
                        "family": fam, "seed": seed, "max_positions": positions}}
                    out[i] = dataclasses.replace(op, seed=seed, meta=meta)
        except SoftrankError as exc:
            raise PanelError(f"panel: {where}: {exc}") from exc
        except ImportError as exc:  # writing one needs the [models] extra
            raise PanelError(f"panel: {where}: writing it needs torch, transformers and "
                             f"tokenizers ({exc}); install softrank[models]") from exc


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
    known = {"eps", "minilm", "synthetic", "matrix", "heads", "name", "certifier", "rank",
             "cell_timeout"}
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
        specs += minilm_specs(widths, layers, heads, sph, seed)
    for i, s in enumerate(_tables(data, "synthetic", path)):
        if s.get("family") not in _SYNTHETIC:
            raise PanelError(f"panel: [[synthetic]] entry {i}: family must be one of {_SYNTHETIC}, "
                             f"got {s.get('family')!r}")
        if "id" in s:
            check_id_part(s["id"], f"panel: [[synthetic]] entry {i}: id", PanelError)
        specs.append({"kind": "synthetic", "entry": i, **s})
    for i, s in enumerate(_tables(data, "matrix", path)):
        bad = set(s) - {"path", "family"}
        if bad:
            raise PanelError(f"panel: [[matrix]] entry {i} has unknown keys {sorted(bad)}; "
                             "expected 'path' and optionally 'family'")
        if not isinstance(s.get("path"), str) or not s["path"]:
            raise PanelError(f"panel: [[matrix]] entry {i} needs 'path', a file name, got "
                             f"{s.get('path')!r}")
        if "family" in s:
            check_id_part(s["family"], f"panel: [[matrix]] entry {i}: family", PanelError)
        p = Path(s["path"])
        # the file's stem names the operator (FAMILY-STEM)
        check_id_part(p.stem, f"panel: [[matrix]] entry {i}: path {s['path']!r} (its stem)",
                      PanelError)
        if not p.is_absolute():
            p = path.parent / p
        specs.append({"kind": "matrix", "path": str(p), "family": s.get("family", "matrix"),
                      "family_given": "family" in s})
    for i, h in enumerate(_tables(data, "heads", path)):
        specs += _heads_specs(h, i, path)
    if not specs:
        raise PanelError(f"panel: {str(path)!r} lists no operators")
    certs, cpaths = [], []
    for i, c in enumerate(_tables(data, "certifier", path)):
        bad = set(c) - {"spec", "path"}
        if bad:
            raise PanelError(f"panel: [[certifier]] entry {i} has unknown keys {sorted(bad)}; "
                             "expected 'spec' and optionally 'path'")
        spec = c.get("spec")
        if not isinstance(spec, str) or not re.fullmatch(r"[\w.]+:[\w.-]+", spec):
            raise PanelError(f"panel: [[certifier]] entry {i}: spec must be 'MODULE:OBJECT', "
                             f"got {spec!r}")
        if spec in certs:
            raise PanelError(f"panel: [[certifier]] entry {i}: {spec!r} is listed twice")
        certs.append(spec)
        if "path" in c:
            if not isinstance(c["path"], str) or not c["path"]:
                raise PanelError(f"panel: [[certifier]] entry {i}: path must be a directory "
                                 f"name, got {c['path']!r}")
            d = Path(c["path"])
            d = d if d.is_absolute() else path.parent / d
            if not d.is_dir():
                raise PanelError(f"panel: [[certifier]] entry {i}: path {str(d)!r} is not a "
                                 "directory")
            cpaths.append(str(d.resolve()))
    eps = data.get("eps", list(DEFAULT_EPS))
    if not isinstance(eps, list):
        raise PanelError(f"panel: {str(path)!r}: eps must be a list of tolerances, got {eps!r}")
    try:
        eps = validate_eps(eps)
    except SoftrankError as exc:
        raise PanelError(f"panel: {str(path)!r}: {exc}") from exc
    name = data.get("name", path.stem)
    check_id_part(name, f"panel: {str(path)!r}: name", PanelError)  # headings, identity
    rank = data.get("rank", "plain")
    try:
        parse_rank(rank, "rank")
    except SoftrankError as exc:
        raise PanelError(f"panel: {str(path)!r}: {exc}") from exc
    timeout = data.get("cell_timeout")
    if timeout is not None:
        try:
            timeout = check_positive(timeout, "cell_timeout")
        except SoftrankError as exc:
            raise PanelError(f"panel: {str(path)!r}: {exc}") from exc
    return Panel(name, specs, tuple(eps), tuple(certs), tuple(cpaths), rank, timeout)


def build_panel(panel: str, seed: int = 0) -> Panel:
    """A built-in panel (module docstring) or a TOML panel file.

    Parameters
    ----------
    panel : str
        ``quick``, ``default``, ``wide``, ``causal``, ``paper``, ``long`` (:data:`PANELS`)
        or the path of a ``.toml`` panel file. ``paper`` is the seed paper's size, 3,343 operators
        (:func:`paper_specs`: 792 MiniLM heads at each of the widths 64, 128, 256 and 512,
        and the ``default`` panel's 35 synthetic operators at 5 seeds).
    seed : int, >= 0
        Seed of the synthetic operators and of the source rotation.

    Returns
    -------
    Panel
        Its specs (nothing is materialised), default tolerances (0.1, 0.25, 0.5 for every
        built-in panel but ``long``'s 0.25) and time limit per cell (none but ``long``'s
        540 s).

    Raises
    ------
    PanelError
        Unknown name, missing or malformed file (the message names the entry and key).
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise PanelError(f"seed: expected an integer >= 0, got {seed!r}")
    if panel == "causal":
        return Panel(panel, causal_specs(seed), rank="causal")
    if panel == "wide":
        return Panel(panel, wide_specs(seed))
    if panel == "paper":
        return Panel(panel, paper_specs(seed))
    if panel == "long":
        return Panel(panel, long_specs(seed), eps=LONG_EPS, cell_timeout=LONG_CELL_TIMEOUT)
    if panel in ("quick", "default"):
        quick = panel == "quick"
        if quick:
            specs = minilm_specs([64], [0, 2, 5], [0, 5, 11], 1, seed)
        else:
            specs = minilm_specs([64, 128], range(6), range(12), 1, seed)
        return Panel(panel, specs + synthetic_specs(seed, quick))
    p = Path(panel)
    if p.suffix.lower() != ".toml" and not p.is_file():
        raise PanelError(f"panel: expected 'quick', 'default', 'wide', 'causal', 'paper', "
                         f"'long' or a .toml file, got {panel!r}")
    return _panel_file(p, seed)


def materialize(specs: list[dict], cache=None) -> list[Operator]:
    """Turn specs into operators (MiniLM specs share one model load and one forward pass
    per source and width).

    Parameters
    ----------
    specs : list of dict
        From a :class:`Panel`.
    cache : softrank.generators.cache.OperatorCache, optional
        MiniLM operators are read from it when present and stored in it when captured
        (:mod:`softrank.generators.cache`); the model is loaded only when some operator is
        missing.

    Raises
    ------
    PanelError
        Wrapping the generator's error, on a bad spec.
    """
    from ..generators import synthetic

    out: list[Operator | None] = [None] * len(specs)
    minilm = [(i, s) for i, s in enumerate(specs) if s["kind"] == "minilm"]
    if minilm:
        from ..generators.heads import cached_minilm_operators
        from ..generators.text import stdlib_sources

        sources = stdlib_sources(N_SOURCES)
        for w in sorted({s["width"] for _, s in minilm}):
            group = [(i, s) for i, s in minilm if s["width"] == w]
            ops = cached_minilm_operators(
                w, [(s["layer"], s["head"], sources[s["source_index"]]) for _, s in group],
                cache)
            for (i, _), op in zip(group, ops):
                out[i] = op
    heads = [(i, s) for i, s in enumerate(specs) if s["kind"] == "heads"]
    if heads:
        _materialize_heads(heads, out)
    tiny = [(i, s) for i, s in enumerate(specs) if s["kind"] == "tiny"]
    if tiny:
        _materialize_tiny(tiny, out)
    for i, s in enumerate(specs):
        if s["kind"] == "synthetic":
            kw = {k: v for k, v in s.items() if k not in ("kind", "family", "entry", "id")}
            where = f"[[synthetic]] entry {s.get('entry', i)} ({s['family']})"
            try:
                out[i] = getattr(synthetic, s["family"])(**kw)
                if "id" in s:  # the long panel's: the generator's id with the width
                    out[i] = dataclasses.replace(out[i], operator_id=s["id"])
            except TypeError as exc:  # unknown keyword
                raise PanelError(f"panel: {where}: {exc}") from exc
            except SoftrankError as exc:
                raise PanelError(f"panel: {where}: {exc}") from exc
        elif s["kind"] == "matrix":
            p = Path(s["path"])
            try:
                op = load_operator(p, "path")
            except SoftrankError as exc:
                raise PanelError(f"panel: [[matrix]] {exc}") from exc
            if p.suffix.lower() != ".npz" or s.get("family_given"):
                # a bare matrix (or a family set in the panel) takes the panel's naming
                fam = s.get("family", "matrix")
                try:
                    op = dataclasses.replace(op, family=fam, operator_id=f"{fam}-{p.stem}")
                except SoftrankError as exc:  # e.g. FAMILY-STEM longer than an id may be
                    raise PanelError(f"panel: [[matrix]] path: {str(p)!r}: {exc}") from exc
            out[i] = op
    return out  # type: ignore[return-value]

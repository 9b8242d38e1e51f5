"""The operator cache (softrank.generators.cache): a second run reads every MiniLM operator
back bit for bit without loading the model; the key changes with everything an operator
depends on; a damaged or foreign entry is refused and captured again; a cache that cannot be
used never stops a run."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from softrank.errors import InvalidArgumentError
from softrank.generators import cache as cache_mod
from softrank.generators.cache import OperatorCache
from softrank.harness.cli import main
from softrank.harness.panels import materialize, minilm_specs

SPECS = minilm_specs([16], [0, 5], [3], 1, 0)  # two heads, width 16: quick to capture


def _same(a, b):
    assert np.array_equal(a.A, b.A) and np.array_equal(a.Q, b.Q) and np.array_equal(a.K, b.K)
    assert a.beta == b.beta and a.operator_id == b.operator_id
    assert a.provenance() == b.provenance() and a.meta == b.meta


def _no_model(monkeypatch):
    import softrank.generators.heads as heads

    def refuse(*a, **kw):
        raise AssertionError("the model was loaded although every operator is cached")

    monkeypatch.setattr(heads, "minilm_operators", refuse)


@pytest.mark.models
def test_second_materialize_reads_every_operator_back_without_the_model(tmp_path, monkeypatch):
    c1 = OperatorCache(tmp_path / "c")
    first = materialize(SPECS, c1)
    assert (c1.hits, c1.misses) == (0, 2) and len(list((tmp_path / "c").glob("*.npz"))) == 2
    _no_model(monkeypatch)
    c2 = OperatorCache(tmp_path / "c")
    second = materialize(SPECS, c2)
    assert (c2.hits, c2.misses, c2.notes) == (2, 0, [])
    for a, b in zip(first, second):
        _same(a, b)
    # and the same as a run without any cache
    monkeypatch.undo()
    for a, b in zip(materialize(SPECS), second):
        _same(a, b)


@pytest.mark.models
def test_a_damaged_or_foreign_entry_is_refused_and_captured_again(tmp_path):
    d = tmp_path / "c"
    ref = materialize(SPECS, OperatorCache(d))
    files = sorted(d.glob("*.npz"))
    by_head = {}
    for f in files:
        prov = json.loads(str(np.load(f)["provenance"]))
        by_head[prov["layer"]] = f
    # layer 0's entry truncated; layer 5's entry replaced by layer 0's operator
    good0 = by_head[0].read_bytes()
    by_head[0].write_bytes(good0[: len(good0) // 2])
    by_head[5].write_bytes(good0)
    c = OperatorCache(d)
    again = materialize(SPECS, c)
    assert (c.hits, c.misses) == (0, 2) and len(c.notes) == 2
    assert any("provenance differs" in n for n in c.notes), c.notes
    for a, b in zip(ref, again):
        _same(a, b)
    c3 = OperatorCache(d)  # the entries were written again, whole
    materialize(SPECS, c3)
    assert (c3.hits, c3.misses) == (2, 0)


def test_the_key_changes_with_everything_an_operator_depends_on(monkeypatch):
    base = {"kind": "minilm", "checkpoint": "c" * 64, "source": "json", "text": "t" * 64,
            "width": 64, "layer": 2, "head": 5, "versions": {"torch": "2.13.0",
                                                              "transformers": "5.0.0"}}
    k0 = OperatorCache.key(base)
    assert len(k0) == 64 and OperatorCache.key(dict(base)) == k0
    changed = [{**base, "checkpoint": "d" * 64}, {**base, "source": "csv"},
               {**base, "text": "u" * 64}, {**base, "width": 128}, {**base, "layer": 3},
               {**base, "head": 6}, {**base, "versions": {"torch": "2.13.1",
                                                          "transformers": "5.0.0"}}]
    keys = {OperatorCache.key(p) for p in changed}
    assert len(keys) == len(changed) and k0 not in keys
    monkeypatch.setattr(cache_mod, "CAPTURE_VERSION", cache_mod.CAPTURE_VERSION + 1)
    assert OperatorCache.key(base) != k0


def test_checkpoint_digest_follows_the_files(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 10)
    d0 = cache_mod.checkpoint_digest(tmp_path)
    assert d0 == cache_mod.checkpoint_digest(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"\1" * 10)
    assert cache_mod.checkpoint_digest(tmp_path) != d0
    with pytest.raises(InvalidArgumentError, match="checkpoint"):
        cache_mod.checkpoint_digest(tmp_path / "config.json")


def test_a_cache_path_that_is_a_file_is_refused_naming_the_option(tmp_path, capsys):
    f = tmp_path / "notadir"
    f.write_text("mine")
    with pytest.raises(InvalidArgumentError, match="--operator-cache"):
        OperatorCache(f)
    p = tmp_path / "s.toml"
    p.write_text("eps = [0.5]\n[[synthetic]]\nfamily = 'grid'\nd = 1\nn = 8\n")
    assert main(["audit", "--panel", str(p), "--out", str(tmp_path / "o"), "--quiet",
                 "--operator-cache", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--operator-cache" in err[0] and "not a directory" in err[0]
    assert f.read_text() == "mine"  # nothing the user wrote is overwritten


def test_an_unwritable_cache_is_noted_and_the_run_goes_on(tmp_path, monkeypatch):
    from softrank.generators.synthetic import grid

    c = OperatorCache(tmp_path / "c")

    def denied(path, op):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cache_mod, "save_operator", denied)
    op = grid(1, 8)
    c.put("a" * 64, op)
    c.put("b" * 64, op)
    assert len(c.notes) == 1 and "cannot write" in c.notes[0]
    assert c.get("a" * 64) is None and c.misses == 1


@pytest.mark.models
def test_audit_reports_the_cache_and_its_second_run_loads_no_model(tmp_path, capsys):
    p = tmp_path / "m.toml"
    p.write_text("eps = [0.5]\n[[minilm]]\nwidths = [16]\nlayers = [5]\nheads = [3]\n")
    cdir = tmp_path / "cache"
    args = ["audit", "--panel", str(p), "--workers", "1", "--study-boot", "0",
            "--operator-cache", str(cdir)]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    assert "0 of 1 MiniLM operators from the cache" in capsys.readouterr().err
    assert main(args + ["--out", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    assert "1 of 1 MiniLM operators from the cache" in err and "Loading weights" not in err
    s = json.loads((tmp_path / "b" / "summary.json").read_text())["operator_build"]
    assert (s["hits"], s["misses"], s["directory"]) == (1, 0, str(cdir))
    rows = [list(csv.DictReader(open(tmp_path / d / "brackets.csv"))) for d in ("a", "b")]
    assert [(r["operator_id"], r["lower"], r["upper"]) for r in rows[0]] == [
        (r["operator_id"], r["lower"], r["upper"]) for r in rows[1]]
    assert main(args[:-2] + ["--no-operator-cache", "--out", str(tmp_path / "c")]) == 0
    assert "no operator cache" in capsys.readouterr().err


@pytest.mark.models
def test_the_suites_minilm_cases_go_through_the_default_cache(tmp_path, monkeypatch):
    """The suites' real-size MiniLM cases use the audits' default cache: a second session
    (the in-process operators cleared) reads them back without loading the model, equal to
    the captured ones."""
    from softrank.suites import sizes

    monkeypatch.setenv("SOFTRANK_OPERATOR_CACHE", str(tmp_path / "c"))
    monkeypatch.setattr(sizes, "_OPERATORS", {})
    cases = [c for c in sizes.sized_cases([("minilm", 16)])]
    first = [sizes.sized_operator(c, cases) for c in cases]
    assert len(list((tmp_path / "c").glob("*.npz"))) == len(cases) == 2
    monkeypatch.setattr(sizes, "_OPERATORS", {})
    _no_model(monkeypatch)
    for c, op in zip(cases, first):
        _same(sizes.sized_operator(c, cases), op)


def test_the_suites_capture_without_a_cache_when_its_path_is_a_file(tmp_path, monkeypatch):
    from softrank.suites import sizes

    f = tmp_path / "file"
    f.write_text("mine")
    monkeypatch.setenv("SOFTRANK_OPERATOR_CACHE", str(f))
    assert sizes._operator_cache() is None and f.read_text() == "mine"

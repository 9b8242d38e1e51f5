"""The suites' reference cache (softrank.suites.refcache): a stored bracket is read back only
when both its certificates pass the checker again with the stored ends; anything else is
computed afresh."""

import json

import numpy as np
import pytest

from softrank.certifiers.bracket import Bracket, bracket
from softrank.checker import UpperWitness, check, load_certificate, save_certificate
from softrank.errors import InvalidArgumentError
from softrank.generators.synthetic import planted_blocks
from softrank.suites import refcache
from softrank.suites.refcache import ReferenceCache


class Counting:
    def __init__(self):
        self.calls = 0

    def __call__(self, op, eps):
        self.calls += 1
        return bracket(op, eps)[0]


@pytest.fixture(scope="module")
def op():
    # 4 uniform blocks of 6 keys: r_eps = 4 at eps 0.25 (the bracket resolves it)
    return planted_blocks(24, 24, 4, 0.0, seed=0)


def _same(a, b):
    assert (a.lower, a.upper, a.lower_method, a.upper_method, a.verdict) == \
        (b.lower, b.upper, b.lower_method, b.upper_method, b.verdict)


def test_a_stored_bracket_is_read_back_and_rechecked(op, tmp_path):
    f = Counting()
    first = ReferenceCache(tmp_path).get(op, 0.25, f)
    again = ReferenceCache(tmp_path)  # another session
    second = again.get(op, 0.25, f)
    assert f.calls == 1 and (again.loaded, again.stored, again.refused) == (1, 0, 0)
    _same(first, second)
    assert second.lower == 4 == second.upper and second.verdict == "resolved"
    assert check(op.A, second.lower_certificate).ok and check(op.A, second.upper_witness).ok
    # another tolerance is another key
    ReferenceCache(tmp_path).get(op, 0.1, f)
    assert f.calls == 2


def _entry(root):
    (entry,) = [p for p in root.iterdir() if p.is_dir()]
    return entry


def test_an_edited_witness_is_refused_and_recomputed(op, tmp_path):
    f = Counting()
    ReferenceCache(tmp_path).get(op, 0.25, f)
    entry = _entry(tmp_path)
    w, A, _ = load_certificate(entry / "upper.npz")
    # the same rank, but every row's error well above eps: the checker rejects it
    save_certificate(entry / "upper.npz", UpperWitness(w.eps, 0.5 * w.U, w.W, w.method), A)
    c = ReferenceCache(tmp_path)
    br = c.get(op, 0.25, f)
    assert f.calls == 2 and (c.loaded, c.stored, c.refused) == (0, 1, 1)
    assert br.upper == 4 and check(op.A, br.upper_witness).ok
    c2 = ReferenceCache(tmp_path)  # the entry was stored again
    c2.get(op, 0.25, f)
    assert f.calls == 2 and c2.loaded == 1


@pytest.mark.parametrize("edit", [
    {"lower": 5},  # claims more than the certificate proves
    {"upper": 3},  # claims less than the witness has
    {"eps": 0.3},
    None,  # ends.json unreadable
])
def test_stored_ends_that_differ_from_the_certificates_are_refused(op, tmp_path, edit):
    f = Counting()
    ReferenceCache(tmp_path).get(op, 0.25, f)
    path = _entry(tmp_path) / "ends.json"
    ends = json.loads(path.read_text())
    path.write_text("{" if edit is None else json.dumps({**ends, **edit}))
    c = ReferenceCache(tmp_path)
    br = c.get(op, 0.25, f)
    assert f.calls == 2 and c.refused == 1 and (br.lower, br.upper) == (4, 4)


def test_a_certificate_of_another_matrix_is_refused(op, tmp_path):
    f = Counting()
    ReferenceCache(tmp_path).get(op, 0.25, f)
    other = planted_blocks(24, 24, 3, 0.0, seed=1)
    entry = _entry(tmp_path)
    (br,) = bracket(other, 0.25)  # rank 3 at 0.25: its witness does not hold for op
    save_certificate(entry / "upper.npz", br.upper_witness, other.A)
    ends = json.loads((entry / "ends.json").read_text())
    (entry / "ends.json").write_text(json.dumps({**ends, "upper": br.upper}))
    c = ReferenceCache(tmp_path)
    assert c.get(op, 0.25, f).upper == 4 and c.refused == 1 and f.calls == 2


def test_another_engine_is_another_key(op, tmp_path, monkeypatch):
    f = Counting()
    ReferenceCache(tmp_path).get(op, 0.25, f)
    monkeypatch.setattr(refcache, "_ENGINE", ["0" * 16])
    ReferenceCache(tmp_path).get(op, 0.25, f)
    assert f.calls == 2


def test_an_error_bracket_is_not_stored(op, tmp_path):
    def failing(o, eps):
        return Bracket.failed(eps, "RuntimeError: the engine crashed")

    c = ReferenceCache(tmp_path)
    assert c.get(op, 0.25, failing).verdict == "error" and c.stored == 0
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]


def test_engine_key_names_the_installed_sources():
    k = refcache.engine_key()
    assert len(k) == 16 and int(k, 16) >= 0 and k == refcache.engine_key()


def _garbage_entry(entry, how):
    import os
    import shutil

    if how == "entry is a file":
        shutil.rmtree(entry)
        entry.write_text("x")
    elif how == "entry is a dangling link":
        shutil.rmtree(entry)
        entry.symlink_to(entry.parent / "nowhere")
    elif how == "ends.json is a directory":
        (entry / "ends.json").unlink()
        (entry / "ends.json").mkdir()
    elif how == "upper.npz is a directory":
        (entry / "upper.npz").unlink()
        (entry / "upper.npz").mkdir()
    elif how == "ends.json is a FIFO":
        (entry / "ends.json").unlink()
        os.mkfifo(entry / "ends.json")
    elif how == "ends.json nested 100000 deep":
        (entry / "ends.json").write_text("[" * 100000 + "]" * 100000)
    elif how == "ends.json deleted":
        (entry / "ends.json").unlink()


@pytest.mark.parametrize("how", ["entry is a file", "entry is a dangling link",
                                 "ends.json is a directory", "upper.npz is a directory",
                                 "ends.json is a FIFO", "ends.json nested 100000 deep",
                                 "ends.json deleted"])
def test_a_garbage_entry_is_refused_recomputed_and_replaced(op, tmp_path, how):
    """Never a crash or a hang (a FIFO is not opened), counted as refused, and the entry is
    written again whole."""
    f = Counting()
    ReferenceCache(tmp_path).get(op, 0.25, f)
    _garbage_entry(_entry(tmp_path), how)
    c = ReferenceCache(tmp_path)
    br = c.get(op, 0.25, f)
    assert (c.loaded, c.stored, c.refused, c.notes) == (0, 1, 1, []) and f.calls == 2
    assert (br.lower, br.upper) == (4, 4)
    c2 = ReferenceCache(tmp_path)
    c2.get(op, 0.25, f)
    assert (c2.loaded, f.calls) == (1, 2)


def test_the_methods_are_the_certificates_own(op, tmp_path):
    f = Counting()
    first = ReferenceCache(tmp_path).get(op, 0.25, f)
    again = ReferenceCache(tmp_path).get(op, 0.25, f)
    assert again.lower_method == again.lower_certificate.method == first.lower_method
    assert again.upper_method == again.upper_witness.method == first.upper_method


def test_an_empty_path_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgumentError, match="--softrank-reference-cache: expected a "
                                                   "directory path"):
        ReferenceCache("")
    assert list(tmp_path.iterdir()) == []


def test_a_file_is_refused_and_left_alone(tmp_path):
    f = tmp_path / "file"
    f.write_text("mine")
    with pytest.raises(InvalidArgumentError, match="--softrank-reference-cache: .* is not a "
                                                   "directory"):
        ReferenceCache(f)
    assert f.read_text() == "mine"

"""The reference store (softrank.refstore): softrank's own brackets are read back only when
every check passes again (both certificates, both arithmetics, against the operator in hand);
anything else is named, computed afresh and stored again. Bundles carry them between stores,
and nothing unsound can come out of either."""

import json
import os
import shutil

import numpy as np
import pytest

from softrank.certifiers.bracket import Bracket, bracket
from softrank.checker import UpperWitness, check, load_certificate, save_certificate
from softrank.errors import InvalidArgumentError
from softrank.generators.synthetic import planted_blocks
from softrank.operators import Operator
from softrank.refstore import ReferenceStore, engine_key, export_bundle, import_bundle
from softrank.refstore import keys as keys_mod
from softrank.refstore import store as store_mod


@pytest.fixture(scope="module")
def op():
    # 4 uniform blocks of 6 keys: r_eps = 4 at eps 0.25 (the bracket resolves it)
    return planted_blocks(24, 24, 4, 0.0, seed=0)


@pytest.fixture(scope="module")
def op3():
    return planted_blocks(24, 24, 3, 0.0, seed=1)


class Counting:
    """Counts the tolerances softrank's engine is asked to compute."""

    def __init__(self, monkeypatch):
        import softrank.certifiers.bracket as engine

        self.eps: list = []
        real = engine._own_brackets

        def counted(A, eps_list, **kw):
            self.eps += list(eps_list)
            return real(A, eps_list, **kw)

        monkeypatch.setattr(engine, "_own_brackets", counted)


def _entry(store, op, eps=0.25, effort="full"):
    return store.group_dir(op, effort, False) / f"eps{eps!r}"


def _ends(br):
    return (br.lower, br.upper, br.lower_method, br.upper_method, br.verdict)


def test_a_stored_bracket_is_read_back_and_checked_again(op, tmp_path, monkeypatch):
    n = Counting(monkeypatch)
    (first,) = bracket(op, 0.25, store=ReferenceStore(tmp_path))
    again = ReferenceStore(tmp_path)  # another run
    (second,) = bracket(op, 0.25, store=again)
    assert n.eps == [0.25] and (again.loaded, again.stored, again.refused) == (1, 0, [])
    assert _ends(first) == _ends(second) == (4, 4, first.lower_method, first.upper_method,
                                             "resolved")
    assert first.diagnostics.reference["source"] == "computed"
    assert second.diagnostics.reference["source"] == "store"
    assert second.checks["lower"].ok and second.checks["upper"].ok
    assert second.checks["upper"].interval is not None  # checked in both arithmetics
    assert second.lower_method == second.lower_certificate.method
    assert second.seconds == pytest.approx(first.seconds, abs=1e-4)  # the computed cost
    assert [r.to_dict() for r in second.diagnostics.methods] == \
        [r.to_dict() for r in first.diagnostics.methods]
    # a tolerance not stored is computed alone, the stored one read back
    brs = bracket(op, [0.25, 0.1], store=ReferenceStore(tmp_path))
    assert n.eps == [0.25, 0.1]
    assert [b.diagnostics.reference["source"] for b in brs] == ["store", "computed"]


def test_without_a_store_nothing_is_written_and_diagnostics_are_as_before(op, tmp_path):
    (br,) = bracket(op, 0.25)
    assert br.diagnostics.reference == {} and "reference" not in br.diagnostics.to_dict()


def _rewrite(entry, **fields):
    rec = json.loads((entry / "bracket.json").read_text())
    rec.update(fields)
    (entry / "bracket.json").write_text(json.dumps(rec))


def _redigest(entry):
    """An editor who also fixes the digests: only the checker stands in the way."""
    rec = json.loads((entry / "bracket.json").read_text())
    rec["files"] = {n: store_mod.file_sha256(entry / n) for n in ("lower.npz", "upper.npz")}
    (entry / "bracket.json").write_text(json.dumps(rec))


def _refused_once(op, tmp_path, monkeypatch, match):
    n = Counting(monkeypatch)
    s = ReferenceStore(tmp_path)
    (br,) = bracket(op, 0.25, store=s)
    assert n.eps == [0.25] and s.loaded == 0 and s.stored == 1 and len(s.refused) == 1
    assert match in s.refused[0] and match in br.diagnostics.reference["refused"]
    assert (br.lower, br.upper) == (4, 4)
    s2 = ReferenceStore(tmp_path)  # stored again, whole
    bracket(op, 0.25, store=s2)
    assert s2.loaded == 1 and n.eps == [0.25]


def test_an_edited_file_is_refused_by_its_digest(op, tmp_path, monkeypatch):
    bracket(op, 0.25, store=ReferenceStore(tmp_path))
    entry = _entry(ReferenceStore(tmp_path), op)
    w, A, _ = load_certificate(entry / "upper.npz")
    save_certificate(entry / "upper.npz", UpperWitness(w.eps, 0.5 * w.U, w.W, w.method), A)
    _refused_once(op, tmp_path, monkeypatch, "upper.npz differs from the file that was stored")


def test_a_witness_the_checker_rejects_is_refused(op, tmp_path, monkeypatch):
    bracket(op, 0.25, store=ReferenceStore(tmp_path))
    entry = _entry(ReferenceStore(tmp_path), op)
    w, A, _ = load_certificate(entry / "upper.npz")
    # the same rank, every row's error well above eps, the digest fixed up
    save_certificate(entry / "upper.npz", UpperWitness(w.eps, 0.5 * w.U, w.W, w.method), A)
    _redigest(entry)
    _refused_once(op, tmp_path, monkeypatch, "the checker rejects upper.npz")


def test_a_lower_certificate_claiming_more_is_refused(op, tmp_path, monkeypatch):
    """An edited lower end: the rank in bracket.json must be the certificate's."""
    bracket(op, 0.25, store=ReferenceStore(tmp_path))
    _rewrite(_entry(ReferenceStore(tmp_path), op), lower=5)
    _refused_once(op, tmp_path, monkeypatch, "expected rank 5")


@pytest.mark.parametrize("field, value, match", [
    ("eps", 0.3, "eps is 0.3"), ("engine", "0" * 16, "engine is"),
    ("operator", "f" * 16, "operator is"), ("effort", "fast", "effort is"),
    ("rho", 0.01, "rho is")])
def test_an_edited_record_is_refused_by_name(op, tmp_path, monkeypatch, field, value, match):
    bracket(op, 0.25, store=ReferenceStore(tmp_path))
    _rewrite(_entry(ReferenceStore(tmp_path), op), **{field: value})
    _refused_once(op, tmp_path, monkeypatch, match)


def test_a_record_of_another_format_is_refused_and_left_alone(op, tmp_path, monkeypatch):
    """A bracket.json that is not of the store's format is not the store's to delete: the
    entry is refused by name, the bracket computed and not kept."""
    bracket(op, 0.25, store=ReferenceStore(tmp_path))
    entry = _entry(ReferenceStore(tmp_path), op)
    _rewrite(entry, format=2)
    n = Counting(monkeypatch)
    s = ReferenceStore(tmp_path)
    (br,) = bracket(op, 0.25, store=s)
    assert n.eps == [0.25] and "format is 2" in s.refused[0] and s.stored == 0
    assert "left alone" in br.diagnostics.reference["not_kept"]
    assert json.loads((entry / "bracket.json").read_text())["format"] == 2


def test_a_certificate_of_another_matrix_is_refused(op, op3, tmp_path, monkeypatch):
    bracket(op, 0.25, store=ReferenceStore(tmp_path))
    entry = _entry(ReferenceStore(tmp_path), op)
    (other,) = bracket(op3, 0.25)  # rank 3 at 0.25: its witness does not hold for op
    save_certificate(entry / "upper.npz", other.upper_witness, op3.A)
    _rewrite(entry, upper=other.upper)
    _redigest(entry)
    _refused_once(op, tmp_path, monkeypatch, "is about another matrix")


def test_swapped_operators_and_other_tolerances_are_refused(op, op3, tmp_path, monkeypatch):
    """The entry of another operator, or of another eps, moved into place."""
    s = ReferenceStore(tmp_path)
    bracket(op3, 0.25, store=s)
    bracket(op, 0.5, store=s)
    mine = _entry(s, op)
    mine.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(_entry(s, op3), mine)
    _refused_once(op, tmp_path, monkeypatch, "operator is")
    shutil.rmtree(mine)
    shutil.copytree(_entry(s, op, 0.5), mine)
    n = Counting(monkeypatch)
    s2 = ReferenceStore(tmp_path)
    (br,) = bracket(op, 0.25, store=s2)
    assert n.eps == [0.25] and "eps is 0.5" in s2.refused[0] and br.lower == br.upper == 4


def test_another_engine_is_another_directory(op, tmp_path, monkeypatch):
    n = Counting(monkeypatch)
    bracket(op, 0.25, store=ReferenceStore(tmp_path))
    monkeypatch.setattr(keys_mod, "_ENGINE", ["0" * 16])
    s = ReferenceStore(tmp_path)
    bracket(op, 0.25, store=s)
    assert n.eps == [0.25, 0.25] and s.refused == [] and s.stored == 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == sorted(
        ["0" * 16, engine_key()]) or engine_key() == "0" * 16


def test_engine_key_names_the_engine_sources():
    k = engine_key()
    assert len(k) == 16 and int(k, 16) >= 0 and k == engine_key()
    assert {"softrank", "numpy", "scipy", "highspy", "python-flint"} <= set(
        store_mod.engine_versions())


def test_only_checked_complete_brackets_are_stored(op, tmp_path, monkeypatch):
    import softrank.certifiers.bracket as engine

    def crash(*a, **kw):
        raise RuntimeError("the engine crashed")

    s = ReferenceStore(tmp_path)
    (br,) = bracket(op, 0.25, store=s, interval=False)  # not interval-checked: not kept
    assert s.stored == 0 and br.verdict == "resolved"
    monkeypatch.setattr(engine, "_bracket_one", crash)
    (br,) = bracket(op, 0.5, store=s)
    assert br.verdict == "error" and s.stored == 0
    assert not list(s.group_dir(op, "full", False).glob("eps*"))


def test_a_bracket_cut_short_is_not_stored(tmp_path):
    rng = np.random.default_rng(3)
    big = Operator.from_factors(rng.normal(size=(48, 8)), rng.normal(size=(48, 8)), 0.5)
    s = ReferenceStore(tmp_path)
    (br,) = bracket(big, 0.1, time_limit=1e-6, store=s)
    assert br.cut_short and br.bounded and s.stored == 0


def _garbage(entry, how):
    if how == "entry is a file":
        shutil.rmtree(entry)
        entry.write_text("x")
    elif how == "entry is a dangling link":
        shutil.rmtree(entry)
        entry.symlink_to(entry.parent / "nowhere")
    elif how == "bracket.json is a directory":
        (entry / "bracket.json").unlink()
        (entry / "bracket.json").mkdir()
    elif how == "upper.npz is a directory":
        (entry / "upper.npz").unlink()
        (entry / "upper.npz").mkdir()
    elif how == "bracket.json is a FIFO":
        (entry / "bracket.json").unlink()
        os.mkfifo(entry / "bracket.json")
    elif how == "bracket.json nested 100000 deep":
        (entry / "bracket.json").write_text("[" * 100000 + "]" * 100000)
    elif how == "bracket.json deleted":
        (entry / "bracket.json").unlink()
    elif how == "lower.npz truncated":
        data = (entry / "lower.npz").read_bytes()
        (entry / "lower.npz").write_bytes(data[:len(data) // 2])
        _redigest(entry)


@pytest.mark.parametrize("how", ["lower.npz truncated"])
def test_a_damaged_entry_is_refused_recomputed_and_replaced(op, tmp_path, monkeypatch, how):
    """Never a crash; named, and written again whole (its record names the damaged file:
    the store's own entry)."""
    bracket(op, 0.25, store=ReferenceStore(tmp_path))
    _garbage(_entry(ReferenceStore(tmp_path), op), how)
    n = Counting(monkeypatch)
    s = ReferenceStore(tmp_path)
    (br,) = bracket(op, 0.25, store=s)
    assert (s.loaded, s.stored, len(s.refused), s.notes) == (0, 1, 1, []) and n.eps == [0.25]
    assert (br.lower, br.upper) == (4, 4)
    s2 = ReferenceStore(tmp_path)
    bracket(op, 0.25, store=s2)
    assert s2.loaded == 1 and n.eps == [0.25]


@pytest.mark.parametrize("how", ["entry is a file", "entry is a dangling link",
                                 "bracket.json is a directory", "upper.npz is a directory",
                                 "bracket.json is a FIFO", "bracket.json nested 100000 deep",
                                 "bracket.json deleted"])
def test_what_the_store_did_not_write_is_refused_and_left_alone(op, tmp_path, monkeypatch,
                                                                how):
    """Never a crash or a hang (a FIFO is not opened); named, computed, and left where it
    is: a file, a link, a directory, a FIFO, a directory without a record of the store's is
    not what the store writes, so it is not removed to make room (the bracket is not kept,
    and the note says why)."""
    bracket(op, 0.25, store=ReferenceStore(tmp_path))
    entry = _entry(ReferenceStore(tmp_path), op)
    _garbage(entry, how)
    before = sorted(os.listdir(entry)) if entry.is_dir() and not entry.is_symlink() else None
    n = Counting(monkeypatch)
    s = ReferenceStore(tmp_path)
    (br,) = bracket(op, 0.25, store=s)
    assert (s.loaded, s.stored, len(s.refused)) == (0, 0, 1) and n.eps == [0.25]
    assert (br.lower, br.upper) == (4, 4)
    assert "left alone" in br.diagnostics.reference["not_kept"] and len(s.notes) == 1
    assert os.path.lexists(entry)
    if before is not None:
        assert sorted(os.listdir(entry)) == before


class Truncated:
    """A user's construction: the rank-``k`` truncated SVD."""

    def __init__(self, k):
        self.k, self.name = k, f"svd{k}"

    def witness(self, operator, eps):
        U, s, Vt = np.linalg.svd(operator.A)
        return UpperWitness(eps, U[:, :self.k] * s[:self.k], Vt[:self.k], self.name)


def test_a_users_methods_run_on_top_of_the_stored_reference(tmp_path, monkeypatch):
    """Cold and warm give the same cell: softrank's ends do not depend on the user's
    methods, which run after them, are checked like any, and win an end only by beating
    softrank's. (softrank's constructions are cut down to the identity here, so that the
    user's can win.)"""
    import softrank.certifiers.bracket as engine

    real = engine.default_constructions
    monkeypatch.setattr(engine, "default_constructions",
                        lambda: [c for c in real() if c.name == "identity"])
    rng = np.random.default_rng(5)
    A = rng.dirichlet(np.full(20, 0.3), size=20)
    U, sv, Vt = np.linalg.svd(A)
    err = [np.abs(A - (U[:, :k] * sv[:k]) @ Vt[:k]).sum(1).max() for k in range(21)]
    k = next(k for k in range(21) if err[k] < 0.45)  # within 0.5, not within 0.1
    assert 1 < k < 20 and err[k] > 0.1
    user = [Truncated(k)]
    cold = bracket(A, [0.1, 0.5], constructions=user, store=ReferenceStore(tmp_path / "s"))
    n = Counting(monkeypatch)
    warm = bracket(A, [0.1, 0.5], constructions=user, store=ReferenceStore(tmp_path / "s"))
    assert n.eps == []
    for c, w in zip(cold, warm):
        assert _ends(c) == _ends(w)
        assert c.diagnostics.record(user[0].name).rank == k == w.diagnostics.record(
            user[0].name).rank
    assert [c.diagnostics.record(user[0].name).status for c in cold] == ["rejected", "ok"]
    assert (cold[0].upper, cold[0].upper_method) == (20, "identity")
    assert (cold[1].upper, cold[1].upper_method) == (k, user[0].name)
    assert check(A, warm[1].upper_witness).ok
    # the stored reference is softrank's own, never the user's witness
    (ref,) = bracket(A, 0.5, store=ReferenceStore(tmp_path / "s"))
    assert (ref.upper, ref.upper_method) == (20, "identity")
    assert ref.diagnostics.record(user[0].name) is None


def test_a_side_record_is_kept_only_with_its_entry(op, tmp_path):
    s = ReferenceStore(tmp_path)
    (br,) = bracket(op, 0.25, store=s)
    assert s.side_record(br, "probe-x") is None
    assert s.put_side_record(br, "probe-x", {"probe": "held", "n": 2})
    (again,) = bracket(op, 0.25, store=ReferenceStore(tmp_path))
    assert s.side_record(again, "probe-x") == {"probe": "held", "n": 2}
    moved = Bracket(**{**again.__dict__, "lower": 3})  # an end a user's method moved
    assert s.side_record(moved, "probe-x") is None
    (plain,) = bracket(op, 0.25)  # no entry of its own
    assert s.side_record(plain, "probe-x") is None and not s.put_side_record(
        plain, "probe-x", {})
    # a rewritten entry (other files) drops the record
    w, A, _ = load_certificate(_entry(s, op) / "upper.npz")
    _rewrite(_entry(s, op), files={"lower.npz": "0", "upper.npz": "0"})
    assert s.side_record(again, "probe-x") is None


def test_validated_references_are_their_own_group(tmp_path):
    rng = np.random.default_rng(7)
    vop = Operator.from_factors(rng.normal(size=(16, 4)), rng.normal(size=(16, 4)), 0.5)
    s = ReferenceStore(tmp_path)
    (a,) = bracket(vop, 0.25, validated=True, store=s)
    (b,) = bracket(vop, 0.25, validated=True, store=ReferenceStore(tmp_path))
    (c,) = bracket(vop, 0.25, store=ReferenceStore(tmp_path))
    assert a.rho > 0 and b.rho == a.rho and _ends(a) == _ends(b)
    assert b.diagnostics.reference["source"] == "store"
    assert c.diagnostics.reference["source"] == "computed" and c.rho == 0


def test_the_store_path_is_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgumentError, match="--reference-store: expected a directory"):
        ReferenceStore("")
    f = tmp_path / "file"
    f.write_text("mine")
    with pytest.raises(InvalidArgumentError, match="--reference-store: .* is not a directory"):
        ReferenceStore(f)
    assert f.read_text() == "mine"


def test_the_default_store_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SOFTRANK_REFERENCE_STORE", str(tmp_path / "s"))
    assert ReferenceStore.default().root == tmp_path / "s"
    monkeypatch.setenv("SOFTRANK_REFERENCE_STORE", "off")
    assert ReferenceStore.default() is None
    monkeypatch.delenv("SOFTRANK_REFERENCE_STORE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert store_mod.default_store_dir() == tmp_path / "xdg" / "softrank" / "references"


# ------------------------------------------------------------------------------ bundles


def test_a_bundle_carries_every_entry_to_a_clean_store(op, op3, tmp_path, monkeypatch):
    s = ReferenceStore(tmp_path / "a")
    brs = {o.hash: bracket(o, [0.25, 0.5], store=s) for o in (op, op3)}
    assert s.put_side_record(brs[op.hash][0], "attack-quick-x", {"attack": "held", "attack_closest": 1.5, "attack_seconds": 0.1})
    rep = export_bundle(s, [op, op3], [0.25, 0.5], tmp_path / "bundle", panel="t")
    assert (rep.done, rep.problems) == (4, [])
    m = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert m["engine"] == engine_key() and len(m["entries"]) == 4 and len(m["operators"]) == 2
    clean = ReferenceStore(tmp_path / "b")
    rep = import_bundle(clean, tmp_path / "bundle")
    assert (rep.done, rep.already, rep.problems) == (4, 0, [])
    n = Counting(monkeypatch)
    for o in (op, op3):
        got = bracket(o, [0.25, 0.5], store=clean)
        assert n.eps == [] and [_ends(b) for b in got] == [_ends(b) for b in brs[o.hash]]
    (br,) = bracket(op, 0.25, store=clean)
    # an attack's outcome is a claim no check covers: not imported (the audit attacks the
    # entry again and keeps its own); the entry says which bundle it came from
    assert clean.side_record(br, "attack-quick-x") is None
    ref = br.diagnostics.reference
    assert str((tmp_path / "bundle").resolve()) in ref["bundle"] and "panel t" in ref["bundle"]
    assert ref["claims"] == ["seconds", "method records", "checker disagreements"]
    again = import_bundle(clean, tmp_path / "bundle")
    assert (again.done, again.already) == (0, 4)
    with pytest.raises(InvalidArgumentError, match="not an empty directory"):
        export_bundle(s, [op], [0.25], tmp_path / "bundle")


def test_a_partial_export_names_the_missing_cells(op, op3, tmp_path):
    s = ReferenceStore(tmp_path / "a")
    bracket(op, 0.25, store=s)
    rep = export_bundle(s, [op, op3], [0.25], tmp_path / "bundle")
    assert rep.done == 1 and len(rep.problems) == 1 and "not in the store" in rep.problems[0]


def test_a_tampered_bundle_is_refused_entry_by_entry(op, op3, tmp_path):
    s = ReferenceStore(tmp_path / "a")
    for o in (op, op3):
        bracket(o, 0.25, store=s)
    export_bundle(s, [op, op3], [0.25], tmp_path / "bundle")
    m = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    # op3's witness replaced by a scaled one, every digest fixed up: only the checker refuses
    e = tmp_path / "bundle" / "entries" / m["entries"][1]["group"] / "eps0.25"
    w, A, _ = load_certificate(e / "upper.npz")
    save_certificate(e / "upper.npz", UpperWitness(w.eps, 0.5 * w.U, w.W, w.method), A)
    _redigest(e)
    m["entries"][1]["files"] = {n: store_mod.file_sha256(e / n)
                                for n in ("bracket.json", "lower.npz", "upper.npz")}
    (tmp_path / "bundle" / "manifest.json").write_text(json.dumps(m))
    clean = ReferenceStore(tmp_path / "b")
    rep = import_bundle(clean, tmp_path / "bundle")
    assert rep.done == 1 and len(rep.problems) == 1 and "the checker rejects" in rep.problems[0]
    # an operator file swapped for another matrix: its entries go with it
    (tmp_path / "bundle" / "operators" / f"{op.hash}.npz").write_bytes(
        (tmp_path / "bundle" / "operators" / f"{op3.hash}.npz").read_bytes())
    rep = import_bundle(ReferenceStore(tmp_path / "c"), tmp_path / "bundle")
    assert rep.done == 0 and any("differs from the manifest" in p for p in rep.problems)


def test_a_bundle_of_another_engine_is_refused_by_name_or_kept_apart(op, tmp_path,
                                                                     monkeypatch):
    s = ReferenceStore(tmp_path / "a")
    bracket(op, 0.25, store=s)
    export_bundle(s, [op], [0.25], tmp_path / "bundle")
    mine = engine_key()
    monkeypatch.setattr(keys_mod, "_ENGINE", ["0" * 16])
    with pytest.raises(InvalidArgumentError, match=f"made by engine {mine}"):
        import_bundle(ReferenceStore(tmp_path / "b"), tmp_path / "bundle")
    rep = import_bundle(ReferenceStore(tmp_path / "b"), tmp_path / "bundle", keep_engine=True)
    assert rep.done == 1 and (tmp_path / "b" / mine).is_dir()
    assert not (tmp_path / "b" / ("0" * 16)).exists()  # this engine never reads them


def test_not_a_bundle_is_refused(tmp_path):
    with pytest.raises(InvalidArgumentError, match="not a reference bundle"):
        import_bundle(ReferenceStore(tmp_path / "s"), tmp_path)
    (tmp_path / "manifest.json").write_text('{"format": "x"}')
    with pytest.raises(InvalidArgumentError, match="not a softrank reference bundle"):
        import_bundle(ReferenceStore(tmp_path / "s"), tmp_path)


def _bracket_in_a_process(root):
    from softrank.certifiers.bracket import bracket as br_
    from softrank.generators.synthetic import planted_blocks as pb
    from softrank.refstore import ReferenceStore as RS

    s = RS(root)
    (b,) = br_(pb(24, 24, 4, 0.0, seed=0), 0.25, store=s)
    return b.diagnostics.reference["source"], (b.lower, b.upper), s.refused


def test_concurrent_runs_compute_once_and_read_back(tmp_path):
    """Two processes ask for the same bracket at once: one computes and stores it under the
    operator's lock, the other waits and reads it back; nothing half-written is seen."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as ex:
        got = list(ex.map(_bracket_in_a_process, [str(tmp_path)] * 2))
    assert sorted(g[0] for g in got) == ["computed", "store"]
    assert all(g[1] == (4, 4) and g[2] == [] for g in got)
    assert not list(tmp_path.rglob("*.tmp"))


# ------------------------------------------------ what a new user's trial found (2026-12-04)


@pytest.mark.parametrize("edit, match", [
    (lambda d: d["methods"][1].update(rank=99, status="ok", side="lower"), "beyond the checked"),
    (lambda d: d.update(cut_short=True), "complete bracket"),
    (lambda d: d.update(error="boom"), "complete bracket"),
    (lambda d: d["methods"][0].update(seconds=float("nan")), "malformed method"),
    (lambda d: d["methods"].append([1]), "malformed method"),
    (lambda d: d.update(carried={"lower": "x"}), "complete bracket"),
])
def test_diagnostics_that_claim_more_than_the_certificates_are_refused(op, tmp_path,
                                                                       monkeypatch, edit, match):
    bracket(op, 0.25, store=ReferenceStore(tmp_path))
    entry = _entry(ReferenceStore(tmp_path), op)
    rec = json.loads((entry / "bracket.json").read_text())
    edit(rec["diagnostics"])
    (entry / "bracket.json").write_text(json.dumps(rec))
    _refused_once(op, tmp_path, monkeypatch, match)


@pytest.mark.parametrize("value", [float("nan"), -5.0, "1", None, True])
def test_stored_seconds_must_be_a_duration(op, tmp_path, monkeypatch, value):
    bracket(op, 0.25, store=ReferenceStore(tmp_path))
    _rewrite(_entry(ReferenceStore(tmp_path), op), seconds=value)
    _refused_once(op, tmp_path, monkeypatch, "seconds is")


def test_diagnostics_that_are_not_an_object_are_refused(op, tmp_path, monkeypatch):
    bracket(op, 0.25, store=ReferenceStore(tmp_path))
    _rewrite(_entry(ReferenceStore(tmp_path), op), diagnostics=[1])
    _refused_once(op, tmp_path, monkeypatch, "not a JSON object")


@pytest.mark.parametrize("spoil", ["fifo lock", "directory lock", "engine is a file",
                                   "group is a link"])
def test_a_store_that_cannot_be_used_computes_and_says_so(op, tmp_path, spoil):
    """Never a hang (a FIFO lock is not waited on) nor an error cell: the bracket is
    computed, and why it was not kept is named."""
    s = ReferenceStore(tmp_path)
    group = s.group_dir(op, "full", False)
    lock = group.parent / f"{group.name}.lock"
    if spoil == "engine is a file":
        group.parent.write_text("x")
    else:
        group.parent.mkdir(parents=True)
        if spoil == "fifo lock":
            os.mkfifo(lock)
        elif spoil == "directory lock":
            lock.mkdir()
        else:
            (tmp_path / "elsewhere").mkdir()
            group.symlink_to(tmp_path / "elsewhere")
    (br,) = bracket(op, 0.25, store=s)
    assert (br.lower, br.upper, br.verdict) == (4, 4, "resolved")
    assert br.diagnostics.reference["source"] == "computed"
    why = ("cannot be written here" if spoil.endswith("lock") else "cannot be used")
    assert why in br.diagnostics.reference["not_kept"] and s.notes
    assert not list((tmp_path / "elsewhere").iterdir()) if spoil == "group is a link" else True


def test_a_lock_that_cannot_be_taken_leaves_the_entries_readable(op, tmp_path):
    bracket(op, [0.25], store=ReferenceStore(tmp_path))
    s = ReferenceStore(tmp_path)
    group = s.group_dir(op, "full", False)
    lock = group.parent / f"{group.name}.lock"
    lock.unlink()
    os.mkfifo(lock)
    a, b = bracket(op, [0.25, 0.5], store=s)
    assert a.diagnostics.reference["source"] == "store"
    assert "cannot be written here" in b.diagnostics.reference["not_kept"]


def test_a_store_this_process_cannot_write_is_read_only(op, tmp_path):
    bracket(op, [0.25], store=ReferenceStore(tmp_path))
    s = ReferenceStore(tmp_path)
    s.writable = False  # (as a directory without write permission; the tests may run as root)
    a, b = bracket(op, [0.25, 0.5], store=s)
    assert a.diagnostics.reference["source"] == "store"
    assert b.diagnostics.reference["not_kept"] == "the store is not writable here"
    assert not (s.group_dir(op, "full", False) / "eps0.5").exists() and s.stored == 0


def test_the_store_argument_must_be_a_store(op):
    with pytest.raises(InvalidArgumentError, match="store: expected a reference store"):
        bracket(op, 0.25, store="/tmp/somewhere")


def test_a_missing_store_is_not_created_unless_asked(tmp_path):
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        ReferenceStore(tmp_path / "a" / "b", create=False)
    assert not (tmp_path / "a").exists()


def test_an_empty_environment_variable_is_unset(tmp_path, monkeypatch):
    monkeypatch.setenv("SOFTRANK_REFERENCE_STORE", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert store_mod.default_store_dir() == tmp_path / "softrank" / "references"
    for off in ("off", "None", " NO ", "false", "0"):
        assert store_mod.turned_off(off)


def test_a_side_record_must_be_well_formed(op, tmp_path):
    s = ReferenceStore(tmp_path)
    (br,) = bracket(op, 0.25, store=s)
    assert s.put_side_record(br, "attack-quick-x", {"attack": "held", "attack_closest": 1.5, "attack_seconds": 0.1})
    assert s.side_record(br, "attack-quick-x") == {"attack": "held", "attack_closest": 1.5, "attack_seconds": 0.1}
    path = _entry(s, op) / "attack-quick-x.json"
    rec = json.loads(path.read_text())
    for bad in ([1, 2], "x" * 81, float("inf"), None, -5.0, "1.5"):
        rec["value"]["attack_closest"] = bad
        path.write_text(json.dumps(rec))
        assert s.side_record(br, "attack-quick-x") is None, bad


def test_a_bundle_with_a_forged_side_record_or_ends_is_refused(op, tmp_path):
    s = ReferenceStore(tmp_path / "a")
    (br,) = bracket(op, 0.25, store=s)
    s.put_side_record(br, "attack-quick-x", {"attack": "held", "attack_closest": 1.5, "attack_seconds": 0.1})
    export_bundle(s, [op], [0.25], tmp_path / "bundle")
    m = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    e = tmp_path / "bundle" / "entries" / m["entries"][0]["group"] / "eps0.25"
    rec = json.loads((e / "attack-quick-x.json").read_text())
    rec["value"]["attack"] = "SUCCEEDED"  # well formed, but not what softrank keeps
    (e / "attack-quick-x.json").write_text(json.dumps(rec))
    m["entries"][0]["files"]["attack-quick-x.json"] = store_mod.file_sha256(
        e / "attack-quick-x.json")
    (tmp_path / "bundle" / "manifest.json").write_text(json.dumps(m))
    rep = import_bundle(ReferenceStore(tmp_path / "b"), tmp_path / "bundle")
    assert rep.done == 0 and "attack-quick-x.json is not a record" in rep.problems[0]
    m["entries"][0]["lower"] = 99  # the manifest's ends must be the certificates'
    (e / "attack-quick-x.json").unlink()
    del m["entries"][0]["files"]["attack-quick-x.json"]
    (tmp_path / "bundle" / "manifest.json").write_text(json.dumps(m))
    rep = import_bundle(ReferenceStore(tmp_path / "c"), tmp_path / "bundle")
    assert rep.done == 0 and "the manifest says [99, 4]" in rep.problems[0]


def test_a_validated_export_takes_operators_without_factors_as_the_audit_does(op, tmp_path):
    s = ReferenceStore(tmp_path / "a")
    assert op.Q is None
    bracket(op, 0.25, store=s)  # the audit brackets it plainly, validated or not
    rep = export_bundle(s, [op], [0.25], tmp_path / "bundle", validated=True)
    assert (rep.done, rep.problems) == (1, [])


def test_import_never_writes_through_a_link(op, tmp_path):
    """A group directory that is a link in the importing store: refused by name, nothing
    outside the store touched (found by a second trial)."""
    s = ReferenceStore(tmp_path / "a")
    bracket(op, 0.25, store=s)
    export_bundle(s, [op], [0.25], tmp_path / "bundle")
    outside = tmp_path / "precious" / "eps0.25"
    outside.mkdir(parents=True)
    (outside / "mine.txt").write_text("mine")
    t = ReferenceStore(tmp_path / "b")
    t.group_dir(op, "full", False).parent.mkdir(parents=True)
    t.group_dir(op, "full", False).symlink_to(tmp_path / "precious")
    rep = import_bundle(t, tmp_path / "bundle")
    assert rep.done == 0 and "is not a directory" in rep.problems[0]
    assert (outside / "mine.txt").read_text() == "mine" and len(list(outside.iterdir())) == 1


def test_diagnostics_naming_a_method_softrank_did_not_run_are_refused(op, tmp_path,
                                                                      monkeypatch):
    bracket(op, 0.25, store=ReferenceStore(tmp_path))
    entry = _entry(ReferenceStore(tmp_path), op)
    rec = json.loads((entry / "bracket.json").read_text())
    rec["diagnostics"]["methods"].append({"name": "mypkg:Mine", "side": "upper",
                                          "origin": "third-party", "status": "declined",
                                          "rank": None, "seconds": 0.0})
    (entry / "bracket.json").write_text(json.dumps(rec))
    _refused_once(op, tmp_path, monkeypatch, "not softrank's")


def test_why_a_computed_bracket_was_not_kept_is_said(op, tmp_path):
    (br,) = bracket(op, 0.25, store=ReferenceStore(tmp_path), interval=False)
    assert br.diagnostics.reference["not_kept"] == "made without the interval check"

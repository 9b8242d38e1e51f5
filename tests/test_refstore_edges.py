"""The reference store's edges (docs/store.md): prune deletes only what the store wrote,
recognised by content; a bundle's claims that no check covers are refused or labelled as the
bundle's; files are measured before they are hashed or read; nothing of a bundle is changed
and a refused one creates nothing; a path that cannot be written is one line, exit 2."""

import errno
import json
import os
import time

import numpy as np
import pytest

from softrank.certifiers.bracket import bracket, own_schedule
from softrank.errors import InvalidArgumentError
from softrank.generators.synthetic import planted_blocks
from softrank.harness.cli import main
from softrank.operators import Operator
from softrank.refstore import ReferenceStore, engine_key, export_bundle, import_bundle
from softrank.refstore import bundle as bundle_mod
from softrank.refstore import layout
from softrank.refstore import store as store_mod


@pytest.fixture(scope="module")
def op():
    # 4 uniform blocks of 6 keys: r_eps = 4 at eps 0.25
    return planted_blocks(24, 24, 4, 0.0, seed=0)


@pytest.fixture(scope="module")
def head():
    """A Gaussian head whose ends come from several methods."""
    rng = np.random.default_rng(5)
    return Operator.from_factors(rng.normal(size=(20, 4)), rng.normal(size=(20, 4)), 1.2)


def _tree(root):
    """Every path under ``root`` (relative; directories with a trailing /)."""
    out = set()
    for d, dirs, files in os.walk(root):
        for n in dirs:
            out.add(os.path.relpath(os.path.join(d, n), root) + "/")
        for n in files:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


def _mtimes(root):
    return {p: os.lstat(os.path.join(root, p.rstrip("/"))).st_mtime_ns for p in _tree(root)}


# ------------------------------------------------------------------ prune

def test_prune_refuses_a_directory_that_is_not_a_store_and_removes_nothing(tmp_path, capsys):
    """The issue's reproduction: a lock of the user's and a thesis in directories named as
    the store names its own. Every mode refuses, naming the first foreign path."""
    v = tmp_path / "v"
    (v / "fedcba9876543210").mkdir(parents=True)
    (v / "fedcba9876543210" / "mine.lock").write_text("x\n")
    thesis = v / "0123456789abcdef" / "0123456789abcdef-full" / "eps1" / "thesis.tex"
    thesis.parent.mkdir(parents=True)
    thesis.write_text("t\n")
    old = time.time() - 10 * 86400
    os.utime(thesis.parent, (old, old))
    before = _tree(v)
    for extra in ([], ["--older-than", "1"], ["--all"], ["--dry-run"],
                  ["--older-than", "1", "--dry-run"]):
        assert main(["cache", "prune", "--reference-store", str(v), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "nothing removed" in err[0]
        assert "0123456789abcdef/0123456789abcdef-full/eps1/thesis.tex" in err[0]
    assert _tree(v) == before and thesis.read_text() == "t\n"
    # the lock alone is named too
    thesis.unlink()
    thesis.parent.rmdir()
    assert main(["cache", "prune", "--reference-store", str(v), "--all"]) == 2
    assert "fedcba9876543210/mine.lock" in capsys.readouterr().err
    assert (v / "fedcba9876543210" / "mine.lock").read_text() == "x\n"


def _entry_of_engine(store, op, engine, eps=0.25):
    """An entry as engine ``engine`` would have written it: this engine's, relabelled."""
    src = store.group_dir(op, "full", False) / f"eps{eps!r}"
    dst = store.root / engine / src.parent.name / src.name
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.mkdir()
    for n in os.listdir(src):
        (dst / n).write_bytes((src / n).read_bytes())
    rec = json.loads((dst / "bracket.json").read_text())
    (dst / "bracket.json").write_text(json.dumps({**rec, "engine": engine}))
    return dst


@pytest.mark.parametrize("mode", [[], ["--older-than", "30"], ["--all"]])
def test_a_dry_run_lists_exactly_what_the_prune_removes(op, tmp_path, capsys, mode):
    s = ReferenceStore(tmp_path / "s")
    bracket(op, [0.25, 0.5], store=s)
    other = "0" * 16
    e1 = _entry_of_engine(s, op, other)
    (s.root / other / f"{e1.parent.name}.lock").write_bytes(b"")
    ancient = time.time() - 100 * 86400
    os.utime(e1 / "bracket.json", (ancient, ancient))  # last used 100 days ago
    # an entry a killed writer left half-made (stale) and one being written now (fresh)
    group = s.group_dir(op, "full", False)
    stale = group / ".eps0.1.4242.tmp"
    stale.mkdir()
    (stale / "lower.npz.tmp.npz").write_bytes(b"PK\x03\x04")
    os.utime(stale, (ancient, ancient))
    fresh = group / ".eps0.3.4243.tmp"
    fresh.mkdir()
    # an operator of this engine that was locked but never stored
    orphan = s.root / engine_key() / f"{'a' * 16}-full.lock"
    orphan.write_bytes(b"")
    before = _tree(s.root)
    assert main(["cache", "prune", "--reference-store", str(s.root), "--dry-run", *mode]) == 0
    out = capsys.readouterr().out.splitlines()
    listed = {line.strip() for line in out[1:]}
    assert _tree(s.root) == before  # a dry run removes nothing
    assert main(["cache", "prune", "--reference-store", str(s.root), *mode]) == 0
    gone = before - _tree(s.root)
    # every path listed is gone, and nothing else but what a listed directory held
    assert listed <= gone
    assert all(p in listed or any(p.startswith(d) for d in listed if d.endswith("/"))
               for p in gone)
    assert f"{engine_key()}/{group.name}/.eps0.1.4242.tmp/" in listed
    assert f"{engine_key()}/{group.name}/.eps0.3.4243.tmp/" not in listed  # fresh: kept
    assert os.path.isdir(fresh)
    assert f"{other}/{e1.parent.name}/eps0.25/" in listed  # in every mode
    assert f"{engine_key()}/{'a' * 16}-full.lock" in listed
    kept_own = (group / "eps0.25").is_dir()
    assert kept_own == (mode != ["--all"])  # used just now, of this engine


def test_prune_leaves_an_operator_whose_lock_is_held(op, tmp_path, capsys):
    import fcntl

    s = ReferenceStore(tmp_path / "s")
    bracket(op, 0.25, store=s)
    group = s.group_dir(op, "full", False)
    fd = os.open(group.parent / f"{group.name}.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert main(["cache", "prune", "--reference-store", str(s.root), "--all"]) == 0
        out = capsys.readouterr().out
        assert "removed 0 brackets" in out and "in use by another run" in out
        assert (group / "eps0.25" / "bracket.json").is_file()
    finally:
        os.close(fd)
    assert main(["cache", "prune", "--reference-store", str(s.root), "--all"]) == 0
    assert os.listdir(s.root) == []


def test_an_entry_is_recognised_by_its_content(op, tmp_path):
    s = ReferenceStore(tmp_path)
    (br,) = bracket(op, 0.25, store=s)
    assert s.put_side_record(br, "attack-quick-x", {"attack": "held", "attack_closest": 1.5,
                                                    "attack_seconds": 0.1})
    group = s.group_dir(op, "full", False)
    entry = group / "eps0.25"
    assert layout.entry_problem(entry) is None
    (entry / "lower.npz").write_bytes(b"cut")  # damaged, still named by its record
    assert layout.entry_problem(entry) is None
    rec = json.loads((entry / "bracket.json").read_text())
    (entry / "bracket.json").write_text(json.dumps({**rec, "format": 2}))
    assert "not a record of the store's" in layout.entry_problem(entry)
    (entry / "bracket.json").write_text(json.dumps(rec))
    for name, text in (("thesis.json", "my draft"), ("mine.json", '{"files": 1, "value": 2}'),
                       ("lower.npz.tmp.npz", "mine")):
        (entry / name).write_text(text)
        assert name in layout.entry_problem(entry)
        (entry / name).unlink()
    (entry / "notes.md").write_text("mine")
    assert layout.entry_problem(entry) == "eps0.25/notes.md is not a file the store writes"
    found = layout.scan(tmp_path)
    assert found.entries == [] and found.foreign == [
        f"{engine_key()}/{group.name}/eps0.25/notes.md is not a file the store writes"]


def test_a_bracket_run_never_deletes_what_prune_calls_foreign(op, tmp_path):
    """A damaged entry holding a file of the user's: the run refuses it and leaves it."""
    s = ReferenceStore(tmp_path)
    bracket(op, 0.25, store=s)
    entry = s.group_dir(op, "full", False) / "eps0.25"
    (entry / "thesis.json").write_text("my draft, not JSON")
    (entry / "lower.npz").write_bytes((entry / "lower.npz").read_bytes()[:50])
    (br,) = bracket(op, 0.25, store=ReferenceStore(tmp_path))
    assert "left alone" in br.diagnostics.reference["not_kept"]
    assert (entry / "thesis.json").read_text() == "my draft, not JSON"


# ------------------------------------------------------------------ claims

def _bundle(tmp_path, ops, eps, effort="full"):
    s = ReferenceStore(tmp_path / "src")
    for o in ops:
        bracket(o, eps, store=s, effort=effort)
    rep = export_bundle(s, ops, eps, tmp_path / "bundle", effort=effort, panel="t")
    assert rep.problems == []
    return tmp_path / "bundle"


def _reheader(path, method):
    """Rewrite a certificate file's header to name ``method`` (the arrays as they were)."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    h = json.loads(str(arrays["header"]))
    h["method"] = method
    arrays["header"] = np.array(json.dumps(h, sort_keys=True))
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def _redigest_bundle(bundle):
    """An editor who recomputes every digest: bracket.json's and the manifest's."""
    m = json.loads((bundle / "manifest.json").read_text())
    for rec in m["entries"]:
        entry = bundle / "entries" / rec["group"] / f"eps{rec['eps']!r}"
        br = json.loads((entry / "bracket.json").read_text())
        br["files"] = {n: store_mod.file_sha256(entry / n) for n in ("lower.npz", "upper.npz")}
        (entry / "bracket.json").write_text(json.dumps(br))
        rec["files"] = {n: store_mod.file_sha256(entry / n) for n in rec["files"]}
    (bundle / "manifest.json").write_text(json.dumps(m))


def _forge(bundle, edit_record=None, lower_method=None, upper_method=None):
    for entry in sorted((bundle / "entries").glob("*/eps*")):
        if lower_method:
            _reheader(entry / "lower.npz", lower_method)
        if upper_method:
            _reheader(entry / "upper.npz", upper_method)
        if edit_record:
            rec = json.loads((entry / "bracket.json").read_text())
            edit_record(rec)
            (entry / "bracket.json").write_text(json.dumps(rec))
    _redigest_bundle(bundle)


def _record(rec, name):
    return next(m for m in rec["diagnostics"]["methods"] if m["name"] == name)


def _credit(side, name):
    def edit(rec):
        rec["diagnostics"]["reported"][side] = name
        m = _record(rec, name)
        m.update(status="ok", rank=rec[side], seconds=0.0)
        m.pop("message", None)
    return edit


FORGERIES = {
    "a construction of the forger's own": (
        dict(upper_method="my-evil-construction"), "certificate was made by 'my-evil-construction'"),
    "its own, credited to trust-region": (
        dict(upper_method="my-evil-construction", edit_record=_credit("upper", "trust-region")),
        "certificate was made by 'my-evil-construction'"),
    "trust-region at fast effort": (
        dict(upper_method="trust-region", edit_record=_credit("upper", "trust-region")),
        "that effort 'fast' does not make"),
    "an anneal that never ran": (
        dict(edit_record=lambda r: _record(r, "alternating-l1-anneal").update(
            status="ok", rank=r["upper"] + 1, seconds=3.0, message="")),
        "that effort 'fast' does not make"),
    "five disagreements without a record": (
        dict(edit_record=lambda r: r["diagnostics"].update(checker_disagreements=5)),
        "count 5 checker disagreements, 0 records"),
    "a method not among softrank's": (
        dict(edit_record=lambda r: r["diagnostics"]["methods"].append(
            {"name": "my-evil-construction", "side": "upper", "origin": "builtin",
             "status": "rejected", "rank": 1, "seconds": 0.0})),
        "not the records of softrank's own methods"),
    "the records in another order": (
        dict(edit_record=lambda r: r["diagnostics"]["methods"].reverse()),
        "not the records of softrank's own methods"),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_forged_bundle_is_refused_entry_by_entry(head, tmp_path, forgery):
    """Each of the issue's forgeries, digests recomputed: refused, naming why; the store
    directory is not even created."""
    bundle = _bundle(tmp_path, [head], [0.25, 0.5], effort="fast")
    how, why = FORGERIES[forgery]
    _forge(bundle, **how)
    store = ReferenceStore(tmp_path / "dst", create="later")
    rep = import_bundle(store, bundle)
    assert rep.done == 0 and len(rep.problems) == 2, rep.problems
    assert all(why in p for p in rep.problems), rep.problems
    assert not (tmp_path / "dst").exists()


def test_what_no_check_covers_is_the_bundles_claim(head, tmp_path, capsys):
    """Seconds of 0 and a rejected record consistent with the rest: imported, and every
    reader says so (bracket --json, the human output); the ends and the credited methods
    are checked."""
    bundle = _bundle(tmp_path, [head], [0.25])

    def edit(rec):
        rec["seconds"] = 0.0
        m = next(m for m in rec["diagnostics"]["methods"] if m["status"] == "declined")
        m.update(status="rejected", rank=1, message="the float64 checker rejected it")

    _forge(bundle, edit_record=edit)
    dst = tmp_path / "dst"
    assert main(["reference", "import", str(bundle), "--reference-store", str(dst)]) == 0
    from softrank.operator_files import save_operator

    save_operator(tmp_path / "head.npz", head)
    cmd = ["bracket", str(tmp_path / "head.npz"), "--eps", "0.25", "--reference-store",
           str(dst)]
    capsys.readouterr()
    assert main(cmd + ["--json"]) == 0
    (b,) = json.loads(capsys.readouterr().out)
    ref = b["diagnostics"]["reference"]
    assert ref["source"] == "store" and str(bundle.resolve()) in ref["bundle"]
    assert ref["claims"] == ["seconds", "method records", "checker disagreements"]
    assert main(cmd) == 0
    assert f"came from bundle {bundle.resolve()}" in capsys.readouterr().out


def test_a_stored_bracket_follows_the_engines_schedule(head):
    """The records of a computed bracket are own_schedule(), at both efforts (what the store
    holds every entry to)."""
    for effort in ("full", "fast"):
        for br in bracket(head, [0.1, 0.5], effort=effort):
            got = tuple((m.name, m.side, m.origin) for m in br.diagnostics.methods)
            assert got == own_schedule()


def test_every_builtin_writes_the_method_its_pattern_names(head, op):
    """Each of softrank's methods, called alone, signs its certificates as
    CERTIFICATE_METHODS says (the pattern a stored end's certificate must fit)."""
    import re

    from softrank.certifiers.registry import CERTIFICATE_METHODS, builtin

    rng = np.random.default_rng(2)
    mini = Operator.from_factors(rng.normal(size=(12, 3)), rng.normal(size=(12, 3)), 2.0)
    seen = set()
    for name, pattern in CERTIFICATE_METHODS.items():
        c = builtin(name)
        for o in (head, op, mini):
            for eps in (0.1, 0.3):
                out = (c.witness if c.is_construction else c.certify)(o, eps)
                if out is not None:
                    assert re.fullmatch(pattern, out.method), (name, out.method)
                    seen.add(name)
    # every method answered at least once here but those that need Q, K or a wide gap
    assert len(seen) >= len(CERTIFICATE_METHODS) - 4, set(CERTIFICATE_METHODS) - seen


def test_a_bundles_rejections_are_not_gated_on(tmp_path, capsys):
    """softrank diff neither fails nor passes on a bundle's claim: the same rejected record
    fails the gate as a measurement and is left out as a claim."""
    from softrank.harness.ledger import Ledger

    def row(rejected, bundle):
        methods = [{"name": "l1-refit", "side": "upper", "origin": "builtin",
                    "status": "rejected" if rejected else "declined", "rank": 3,
                    "seconds": 0.1, "message": ""}]
        diag = {"methods": methods, **({"reference": {"source": "store", "bundle": "B",
                                                       "claims": ["seconds"]}}
                                       if bundle else {})}
        return {"operator_id": "g-1", "family": "gaussian", "n": 16, "m": 16, "eps": 0.25,
                "lower": 2, "upper": 5, "verdict": "open", "seconds": 1.0,
                "lower_method": "frobenius", "upper_method": "truncated-svd",
                "diagnostics": json.dumps(diag)}

    ident = {"panel": "hand", "seed": 0, "eps": [0.25], "attacks": "none", "certifiers": [],
             "operators": ["g-1:aaaa"]}

    def audit(name, r):
        path = tmp_path / name
        path.mkdir()
        ledger = Ledger(path, ident)
        ledger.add(0, [r])
        ledger.mark_complete()
        ledger.close()
        return str(path)

    a = audit("a", row(False, False))
    assert main(["diff", a, audit("b", row(True, False))]) == 1
    assert "more answers rejected" in capsys.readouterr().out
    assert main(["diff", a, audit("c", row(True, True))]) == 0
    assert "1 cells took their own bracket from a reference bundle" in capsys.readouterr().out


# ------------------------------------------------------------------ measured before read

def _sparse(path, size):
    path.unlink(missing_ok=True)
    with open(path, "wb") as fh:
        fh.truncate(size)


@pytest.mark.parametrize("which", ["certificate", "operator"])
def test_a_huge_file_is_refused_before_it_is_hashed(op, tmp_path, monkeypatch, which):
    """200 GB (sparse) where a certificate or an operator file belongs: refused by its size,
    never hashed (hashing it would take minutes)."""
    bundle = _bundle(tmp_path, [op], [0.25])
    m = json.loads((bundle / "manifest.json").read_text())
    if which == "certificate":
        rec = m["entries"][0]
        big = bundle / "entries" / rec["group"] / "eps0.25" / "lower.npz"
    else:
        big = bundle / "operators" / f"{op.hash}.npz"
    _sparse(big, 200 * 10**9)
    real = store_mod.file_sha256

    def never_the_big_one(path):
        assert os.path.realpath(path) != os.path.realpath(big), "hashed before measured"
        return real(path)

    monkeypatch.setattr(store_mod, "file_sha256", never_the_big_one)
    monkeypatch.setattr(bundle_mod, "file_sha256", never_the_big_one)
    rep = import_bundle(ReferenceStore(tmp_path / "dst", create="later"), bundle)
    assert rep.done == 0 and "200000000000 bytes, more than" in rep.problems[0]


def test_a_huge_certificate_in_the_store_is_refused_before_it_is_hashed(op, tmp_path,
                                                                         monkeypatch):
    s = ReferenceStore(tmp_path)
    bracket(op, 0.25, store=s)
    big = s.group_dir(op, "full", False) / "eps0.25" / "upper.npz"
    _sparse(big, 200 * 10**9)
    real = store_mod.file_sha256
    monkeypatch.setattr(store_mod, "file_sha256",
                        lambda p: pytest.fail("hashed") if p == big else real(p))
    with pytest.raises(store_mod.Refused, match="200000000000 bytes, more than"):
        s.read(big.parent, op, op.A, 0.0, 0.25, "full", False)


@pytest.mark.parametrize("spoil, why", [
    ("entries is a link", "is a symbolic link, not a directory"),
    ("operators is a link", "is a symbolic link, not a directory"),
    ("group is a link", "is a symbolic link, not a directory"),
    ("entry is a link", "is a symbolic link, not a directory"),
    ("lower.npz is a link", "lower.npz is a symbolic link, not a regular file"),
    ("bracket.json is a FIFO", "bracket.json is a FIFO, not a regular file"),
    ("a side file named badly", "is not a name softrank writes beside an entry"),
])
def test_each_refusal_names_the_file_and_the_reason(op, tmp_path, spoil, why):
    """Links at every level of a bundle are refused, not followed; a FIFO is never opened."""
    bundle = _bundle(tmp_path, [op], [0.25])
    m = json.loads((bundle / "manifest.json").read_text())
    rec = m["entries"][0]
    group = bundle / "entries" / rec["group"]
    entry = group / "eps0.25"
    elsewhere = tmp_path / "elsewhere"

    def relink(path):
        os.rename(path, elsewhere)
        path.symlink_to(elsewhere)

    if spoil == "entries is a link":
        relink(bundle / "entries")
    elif spoil == "operators is a link":
        relink(bundle / "operators")
    elif spoil == "group is a link":
        relink(group)
    elif spoil == "entry is a link":
        relink(entry)
    elif spoil == "lower.npz is a link":
        relink(entry / "lower.npz")
    elif spoil == "bracket.json is a FIFO":
        (entry / "bracket.json").unlink()
        os.mkfifo(entry / "bracket.json")
    else:
        rec["files"]["my notes.json"] = "0" * 64
        (bundle / "manifest.json").write_text(json.dumps(m))
    store = ReferenceStore(tmp_path / "dst", create="later")
    if spoil in ("entries is a link", "operators is a link"):
        with pytest.raises(InvalidArgumentError, match=why):
            import_bundle(store, bundle)
    else:
        rep = import_bundle(store, bundle)
        assert rep.done == 0 and len(rep.problems) == 1 and why in rep.problems[0]
        assert "entries/" in rep.problems[0] or "operators/" in rep.problems[0]
    assert not (tmp_path / "dst").exists()


def test_import_leaves_the_bundle_as_it_was(op, tmp_path):
    bundle = _bundle(tmp_path, [op], [0.25, 0.5])
    old = time.time() - 5 * 86400
    for p in _tree(bundle):
        os.utime(bundle / p.rstrip("/"), (old, old))
    before = _mtimes(bundle)
    contents = {p: (bundle / p).read_bytes() for p in _tree(bundle) if not p.endswith("/")}
    rep = import_bundle(ReferenceStore(tmp_path / "dst"), bundle)
    assert rep.done == 2
    assert _mtimes(bundle) == before
    assert {p: (bundle / p).read_bytes() for p in contents} == contents


def test_a_refused_bundle_creates_nothing(op, tmp_path, capsys):
    bundle = _bundle(tmp_path, [op], [0.25])
    m = json.loads((bundle / "manifest.json").read_text())
    m["entries"][0]["lower"] += 1  # the manifest lies about the ends
    (bundle / "manifest.json").write_text(json.dumps(m))
    dst = tmp_path / "a" / "store"
    assert main(["reference", "import", str(bundle), "--reference-store", str(dst)]) == 1
    assert "refused" in capsys.readouterr().out and not (tmp_path / "a").exists()
    (tmp_path / "notabundle").mkdir()
    assert main(["reference", "import", str(tmp_path / "notabundle"), "--reference-store",
                 str(dst)]) == 2
    assert not (tmp_path / "a").exists()


# ------------------------------------------------------------------ paths that cannot be written

@pytest.mark.parametrize("dest", ["/proc/x/bundle", "/etc/passwd/bundle", "FILE/bundle"])
def test_export_to_a_path_that_cannot_be_created_is_one_line(op, tmp_path, capsys, dest):
    s = ReferenceStore(tmp_path / "s")
    (tmp_path / "FILE").write_text("mine")
    dest = dest.replace("FILE", str(tmp_path / "FILE"))
    assert main(["reference", "export", "--panel", "quick", "--reference-store",
                 str(s.root), dest]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"DIR: cannot create {dest!r}" in err
    assert (tmp_path / "FILE").read_text() == "mine"


def test_a_read_only_store_is_one_line(op, tmp_path, capsys, monkeypatch):
    bundle = _bundle(tmp_path, [op], [0.25, 0.5])
    dst = tmp_path / "dst"
    dst.mkdir()
    real = os.access
    monkeypatch.setattr(store_mod.os, "access", lambda p, mode: False
                        if str(p) == str(dst) and mode & os.W_OK else real(p, mode))
    assert main(["reference", "import", str(bundle), "--reference-store", str(dst)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be written here (read-only)" in err
    assert os.listdir(dst) == []


def test_a_store_that_refuses_writes_midway_is_one_line(op, tmp_path, capsys, monkeypatch):
    """A store whose writes fail (a read-only mount, an immutable directory: EPERM) stops
    the import at the first failed write, with one line, instead of one per entry."""
    bundle = _bundle(tmp_path, [op], [0.25, 0.5])

    def refuse(*a, **kw):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(ReferenceStore, "copy_entry", refuse)
    dst = tmp_path / "dst"
    assert main(["reference", "import", str(bundle), "--reference-store", str(dst)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Operation not permitted" in err
    assert "0 of 2 entries were added before it stopped" in err


def test_a_repeated_tolerance_of_export_names_the_option(tmp_path, capsys):
    s = ReferenceStore(tmp_path / "s")
    assert main(["reference", "export", "--panel", "quick", "--eps", "0.1", "0.1",
                 "--reference-store", str(s.root), str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "--eps: tolerances repeat, 0.1 is given twice" in err and err.count("\n") == 1
    assert not (tmp_path / "b").exists()


# ------------------------------------------------------------------ found by a trial as a hostile user

@pytest.mark.parametrize("spoil, where", [
    ("reported is a list", "entry"), ("operator is a list", "manifest"),
    ("versions is a list", "manifest")])
def test_a_field_of_another_type_is_refused_not_a_crash(op, tmp_path, spoil, where):
    bundle = _bundle(tmp_path, [op], [0.25, 0.5])
    if spoil == "reported is a list":
        _forge(bundle, edit_record=lambda r: r["diagnostics"]["reported"].update(
            lower=["key-groups"]))
        rep = import_bundle(ReferenceStore(tmp_path / "dst", create="later"), bundle)
        assert rep.done == 0 and all("malformed" in p or "not softrank's" in p
                                     for p in rep.problems), rep.problems
        # and in a store: refused, computed, replaced
        s = ReferenceStore(tmp_path / "src")
        entry = s.group_dir(op, "full", False) / "eps0.25"
        rec = json.loads((entry / "bracket.json").read_text())
        rec["diagnostics"]["reported"]["lower"] = {"x": 1}
        (entry / "bracket.json").write_text(json.dumps(rec))
        (br,) = bracket(op, 0.25, store=s)
        assert br.bounded and "not softrank's" in br.diagnostics.reference["refused"]
        return
    m = json.loads((bundle / "manifest.json").read_text())
    if spoil == "operator is a list":
        m["entries"][0]["operator"] = [m["entries"][0]["operator"]]
        (bundle / "manifest.json").write_text(json.dumps(m))
        rep = import_bundle(ReferenceStore(tmp_path / "dst", create="later"), bundle)
        assert rep.done == 1 and "not an entry record" in rep.problems[0]
    else:
        m["engine"], m["versions"] = "0123456789abcdef", ["x"]
        (bundle / "manifest.json").write_text(json.dumps(m))
        with pytest.raises(InvalidArgumentError, match="made by engine 0123456789abcdef"):
            import_bundle(ReferenceStore(tmp_path / "dst", create="later"), bundle)


def test_prune_counts_what_it_removed_and_keeps_the_lock_of_what_stays(op, head, tmp_path,
                                                                        capsys, monkeypatch):
    s = ReferenceStore(tmp_path / "s")
    bracket(op, [0.25, 0.5], store=s)
    bracket(head, 0.25, store=s)
    stuck = s.group_dir(op, "full", False) / "eps0.25" / "upper.npz"
    real = os.unlink

    def unlink(path, *a, **kw):
        if str(path) == str(stuck):
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real(path, *a, **kw)

    monkeypatch.setattr(layout.os, "unlink", unlink)
    assert main(["cache", "prune", "--reference-store", str(s.root), "--all"]) == 1
    out = capsys.readouterr().out
    assert "removed 2 brackets" in out and "could not remove" in out
    group = s.group_dir(op, "full", False)
    assert (group / "eps0.25").is_dir() and not (group / "eps0.5").exists()
    assert (group.parent / f"{group.name}.lock").is_file()  # its operator is still there
    assert not s.group_dir(head, "full", False).exists()


def test_a_write_that_fails_midway_is_one_line_and_leaves_no_part(tmp_path, capsys,
                                                                   monkeypatch):
    """A full disk in the middle of a command (the write names no file): one line naming
    the command's output, exit 2, and no half-written certificate (nor the directory the
    run made for them, left empty)."""
    import softrank.checker.certificates as certs

    np.save(tmp_path / "u.npy", np.full((4, 4), 0.25))
    real = np.savez

    def full(path, *a, **kw):
        real(path, *a, **kw)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(certs.np, "savez", full)
    out = tmp_path / "c"
    assert main(["bracket", str(tmp_path / "u.npy"), "--eps", "0.25", "--no-reference-store",
                 "--save-certificates", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--save-certificates {str(out)!r}" in err
    assert "No space left on device" in err and not out.exists()


def test_a_ledger_that_cannot_be_written_is_one_line(tmp_path, capsys, monkeypatch):
    import sqlite3

    from softrank.harness.cli import audit_cmd

    def full(args):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(audit_cmd, "run", full)
    monkeypatch.setitem(main.__globals__["_COMMANDS"], "audit", full)
    assert main(["audit", "--panel", "quick", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err and "disk is full" in err


def test_a_store_inside_the_bundle_or_a_bundle_inside_the_store_is_refused(op, tmp_path,
                                                                            capsys):
    bundle = _bundle(tmp_path, [op], [0.25])
    before = _tree(bundle)
    for store in (bundle, bundle / "operators", bundle / "new"):
        with pytest.raises(InvalidArgumentError, match="inside the bundle"):
            import_bundle(ReferenceStore(store, create="later"), bundle)
    assert _tree(bundle) == before
    assert main(["reference", "export", "--panel", "quick", "--reference-store",
                 str(tmp_path / "src"), str(tmp_path / "src" / "b")]) == 2
    assert "inside the reference store" in capsys.readouterr().err
    assert not (tmp_path / "src" / "b").exists()


@pytest.mark.parametrize("store", ["/proc/x/store", "FILE/store"])
def test_an_uncreatable_store_is_refused_before_any_work(op, tmp_path, capsys, store):
    bundle = _bundle(tmp_path, [op], [0.25])
    (tmp_path / "FILE").write_text("mine")
    store = store.replace("FILE", str(tmp_path / "FILE"))
    assert main(["reference", "import", str(bundle), "--reference-store", store]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be created" in err and "nothing imported" in err


def test_what_a_bundle_or_a_name_says_is_one_line(op, tmp_path, capsys):
    """A newline in a bundle's panel, or in a file name, cannot start a line of its own."""
    bundle = _bundle(tmp_path, [op], [0.25])
    m = json.loads((bundle / "manifest.json").read_text())
    m["panel"] = "t)\n  entry at eps 0.25 was computed on this machine ("
    (bundle / "manifest.json").write_text(json.dumps(m))
    dst = tmp_path / "dst"
    assert main(["reference", "import", str(bundle), "--reference-store", str(dst)]) == 0
    from softrank.operator_files import save_operator

    save_operator(tmp_path / "op.npz", op)
    capsys.readouterr()
    assert main(["bracket", str(tmp_path / "op.npz"), "--eps", "0.25", "--reference-store",
                 str(dst)]) == 0
    out = capsys.readouterr().out
    assert "computed on this machine" in out and not any(
        line.lstrip().startswith("entry at eps 0.25 was computed") for line in out.splitlines())
    (dst / "notes\nsoftrank cache prune: removed 0 brackets").write_text("mine")
    assert main(["cache", "prune", "--reference-store", str(dst)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("kind", ["link", "FIFO", "directory"])
def test_a_manifest_that_is_not_a_regular_file_is_named(op, tmp_path, kind):
    bundle = _bundle(tmp_path, [op], [0.25])
    manifest = bundle / "manifest.json"
    os.rename(manifest, tmp_path / "elsewhere.json")
    if kind == "link":
        manifest.symlink_to(tmp_path / "elsewhere.json")
    elif kind == "FIFO":
        os.mkfifo(manifest)
    else:
        manifest.mkdir()
    label = {"link": "symbolic link", "FIFO": "FIFO", "directory": "directory"}[kind]
    with pytest.raises(InvalidArgumentError, match=f"is a {label}, not a regular file"):
        import_bundle(ReferenceStore(tmp_path / "dst", create="later"), bundle)


@pytest.mark.parametrize("argv", [
    ["audit", "--panel", "quick", "--out", ""], ["reference", "export", "--panel", "quick", ""],
    ["reference", "import", ""], ["verify", ""], ["bracket", "u.npy", "--eps", "0.25",
                                                  "--save-certificates", " "],
    ["audit", "--panel", "quick", "--operator-cache", ""], ["cache", "info",
                                                            "--reference-store", "  "]])
def test_an_empty_path_is_not_the_current_directory(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOFTRANK_REFERENCE_STORE", str(tmp_path / "s"))
    (tmp_path / "s").mkdir()
    np.save(tmp_path / "u.npy", np.full((4, 4), 0.25))
    with pytest.raises(SystemExit) as ex:  # refused by the parser, before any work
        main(argv)
    assert ex.value.code == 2
    err = capsys.readouterr().err
    assert "expected a path, got" in err and err.count("\n") == 1
    assert sorted(os.listdir(tmp_path)) == ["s", "u.npy"] and os.listdir(tmp_path / "s") == []


def test_a_users_file_at_a_side_records_name_is_never_replaced(op, tmp_path, monkeypatch):
    s = ReferenceStore(tmp_path)
    (br,) = bracket(op, 0.25, store=s)
    entry = s.group_dir(op, "full", False) / "eps0.25"
    mine = entry / "attack-quick-x.json"
    mine.write_text('{"my": "notes"}')
    assert not s.put_side_record(br, "attack-quick-x", {"attack": "held",
                                                        "attack_closest": 1.5,
                                                        "attack_seconds": 0.1})
    assert mine.read_text() == '{"my": "notes"}'
    mine.unlink()
    real = os.replace  # a full disk at the rename: no empty record is left behind

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_mod.Path, "replace", lambda self, dst: full(self, dst))
    assert not s.put_side_record(br, "attack-quick-x", {"attack": "held",
                                                        "attack_closest": 1.5,
                                                        "attack_seconds": 0.1})
    monkeypatch.setattr(os, "replace", real)
    assert sorted(os.listdir(entry)) == ["bracket.json", "lower.npz", "upper.npz"]


def test_a_removal_cut_short_leaves_an_entry_its_record_accounts_for(op, tmp_path, capsys,
                                                                       monkeypatch):
    s = ReferenceStore(tmp_path / "s")
    bracket(op, 0.25, store=s)
    entry = s.group_dir(op, "full", False) / "eps0.25"
    real = os.unlink

    def unlink(path, *a, **kw):
        if str(path) == str(entry / "lower.npz"):
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real(path, *a, **kw)

    monkeypatch.setattr(layout.os, "unlink", unlink)
    assert main(["cache", "prune", "--reference-store", str(s.root), "--all"]) == 1
    assert "lower.npz: Operation not permitted" in capsys.readouterr().out
    monkeypatch.setattr(layout.os, "unlink", real)
    assert (entry / "bracket.json").is_file() and layout.entry_problem(entry) is None
    assert main(["cache", "prune", "--reference-store", str(s.root), "--all"]) == 0
    assert os.listdir(s.root) == []


def test_a_newline_in_a_record_cannot_start_a_line(head, tmp_path, capsys):
    bundle = _bundle(tmp_path, [head], [0.25])

    def edit(rec):
        rec["diagnostics"]["methods"][0]["name"] = "trivial\nsoftrank reference import: ok"

    _forge(bundle, edit_record=edit)
    assert main(["reference", "import", str(bundle), "--reference-store",
                 str(tmp_path / "dst")]) == 1
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 2 and "trivial" in out.splitlines()[1]  # summary, refusal


def test_export_carries_only_the_entrys_own_records(op, tmp_path):
    s = ReferenceStore(tmp_path / "s")
    (br,) = bracket(op, 0.25, store=s)
    assert s.put_side_record(br, "attack-quick-x", {"attack": "held", "attack_closest": 1.5,
                                                    "attack_seconds": 0.1})
    entry = s.group_dir(op, "full", False) / "eps0.25"
    (entry / "notes.json").write_text('{"secret": "x"}')
    rep = export_bundle(s, [op], [0.25], tmp_path / "b")
    assert rep.done == 1
    got = sorted(os.listdir(tmp_path / "b" / "entries" / entry.parent.name / "eps0.25"))
    assert got == ["attack-quick-x.json", "bracket.json", "lower.npz", "upper.npz"]


@pytest.mark.parametrize("how", ["a side record of any value", "an import record with more",
                                 "format true"])
def test_a_record_looser_than_the_stores_is_foreign(op, tmp_path, how):
    s = ReferenceStore(tmp_path)
    bracket(op, 0.25, store=s)
    entry = s.group_dir(op, "full", False) / "eps0.25"
    rec = json.loads((entry / "bracket.json").read_text())
    if how == "a side record of any value":
        (entry / "thesis.json").write_text(json.dumps({"files": rec["files"],
                                                       "value": {"draft": [1, 2]}}))
    elif how == "an import record with more":
        (entry / "imported.json").write_text(json.dumps(
            {"bundle": "b", "manifest_sha256": "0", "imported": "t", "files": rec["files"],
             "mine": "x"}))
    else:
        (entry / "bracket.json").write_text(json.dumps({**rec, "format": True}))
    assert layout.entry_problem(entry) is not None


def test_a_store_that_cannot_be_created_says_how_to_run_without_one(tmp_path):
    (tmp_path / "f").write_text("mine")
    with pytest.raises(InvalidArgumentError, match=r"\(--no-reference-store runs without"):
        ReferenceStore(tmp_path / "f" / "s")
    with pytest.raises(InvalidArgumentError, match="SOFTRANK_REFERENCE_STORE=off"):
        ReferenceStore(tmp_path / "f" / "s", arg="SOFTRANK_REFERENCE_STORE (default store)")

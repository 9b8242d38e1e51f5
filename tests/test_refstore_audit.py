"""The reference store behind the audit and the CLI: a second audit reads every cell's own
bracket back (checked again) and writes the same cells; its attacks are read back with
them; a user's construction is measured on top in both runs alike; ``softrank cache`` and
``softrank reference`` see and carry the store."""

import csv
import json
import os
import shutil

import numpy as np
import pytest

from softrank.audit import AuditConfig
from softrank.generators.synthetic import planted_blocks
from softrank.harness.runner import run_audit
from softrank.harness.cli import main
from softrank.operators import Operator
from softrank.operator_files import save_operator
from softrank.refstore import ReferenceStore, engine_key

#: Columns that measure this run's machine or time, not the cell.
TIMINGS = {"svd_seconds", "stages", "reference", "diagnostics"}


def _ops():
    rng = np.random.default_rng(11)
    return [planted_blocks(16, 16, 3, 0.05, seed=0),
            Operator.from_factors(rng.normal(size=(16, 4)), rng.normal(size=(16, 4)), 0.7)]


def _rows(path):
    return {(r["operator_id"], r["eps"]): r for r in csv.DictReader(open(path))}


def test_a_second_audit_reads_every_cell_from_the_store(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "refstore_user_cons.py").write_text(
        "import numpy as np\nfrom softrank.checker import UpperWitness\n"
        "class SvdFour:\n    name = 'svd-four'\n"
        "    def witness(self, operator, eps):\n"
        "        U, s, Vt = np.linalg.svd(operator.A)\n"
        "        return UpperWitness(eps, U[:, :4] * s[:4], Vt[:4], self.name)\n")
    store = str(tmp_path / "store")
    user = ("refstore_user_cons:SvdFour",)
    cfg = AuditConfig(eps=(0.1, 0.5), attacks="quick", certifiers=user, reference_store=store)
    assert cfg.identity() == AuditConfig(eps=(0.1, 0.5), attacks="quick",
                                         certifiers=user).identity()
    ops = _ops()
    cold = run_audit(ops, cfg, tmp_path / "cold", workers=1, progress=False)
    warm = run_audit(ops, cfg, tmp_path / "warm", workers=1, progress=False)
    assert [r["reference"] for r in cold] == ["computed"] * 4
    assert [r["reference"] for r in warm] == ["store"] * 4
    a, b = _rows(tmp_path / "cold" / "brackets.csv"), _rows(tmp_path / "warm" / "brackets.csv")
    assert a.keys() == b.keys()
    for k in a:
        differ = {c for c in a[k] if a[k][c] != b[k][c]}
        # seconds: the stored bracket's, plus the user's method's time in each run
        assert differ <= TIMINGS | {"seconds"}, (k, differ)
        assert abs(float(a[k]["seconds"]) - float(b[k]["seconds"])) < 0.5
        da, db = json.loads(a[k]["diagnostics"]), json.loads(b[k]["diagnostics"])
        da.pop("reference"), db.pop("reference")
        for d in (da, db):  # the user's method ran in each run: its time differs
            for m in d["methods"]:
                if m["origin"] == "third-party":
                    m.pop("seconds")
        assert da == db  # every method's record, the user's included
        assert any(m["name"] == "svd-four" for m in db["methods"])
    # the attacks held in the cold run and were read back, not run again
    attacked = [k for k in a if a[k]["attack"]]
    assert attacked and all(b[k]["attack_seconds"] == a[k]["attack_seconds"] for k in attacked)
    assert all(json.loads(b[k]["stages"])["attack"]["seconds"] < 0.05 for k in attacked)
    assert not list((tmp_path / "store").rglob("*.tmp"))


def test_the_report_counts_the_cells_from_the_store(tmp_path, capsys):
    ops = _ops()
    panel = tmp_path / "panel.toml"
    for i, op in enumerate(ops):
        save_operator(tmp_path / f"op{i}.npz", op)
    panel.write_text("eps = [0.25]\n" + "".join(
        f'[[matrix]]\npath = "op{i}.npz"\nfamily = "mine"\n' for i in range(len(ops))))
    store = str(tmp_path / "store")
    base = ["audit", "--panel", str(panel), "--study-boot", "0", "--workers", "1",
            "--attacks", "none"]
    args = base + ["--reference-store", store]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    assert main(args + ["--out", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    assert "0 cells read back and checked" in err and "2 cells read back and checked" in err
    s = json.loads((tmp_path / "b" / "summary.json").read_text())["reference_store"]
    assert (s["from_store"], s["computed"], s["refused"], s["directory"]) == (2, 0, [], store)
    assert "**2 cells read back**" in (tmp_path / "b" / "report.md").read_text()
    assert main(base + ["--no-reference-store", "--out", str(tmp_path / "c")]) == 0
    s = json.loads((tmp_path / "c" / "summary.json").read_text())["reference_store"]
    assert s["without_store"] == 2 and s["directory"] is None
    assert "reference store: off" in (tmp_path / "c" / "report.md").read_text()

    # softrank reference export / import, then an audit from the imported store alone
    capsys.readouterr()
    assert main(["reference", "export", "--panel", str(panel), "--reference-store", store,
                 str(tmp_path / "bundle")]) == 0
    assert "2 of 2 cells" in capsys.readouterr().out
    clean = str(tmp_path / "clean")
    assert main(["reference", "import", str(tmp_path / "bundle"),
                 "--reference-store", clean]) == 0
    assert "2 brackets added" in capsys.readouterr().out
    assert main(base + ["--reference-store", clean, "--out", str(tmp_path / "d")]) == 0
    a, d = _rows(tmp_path / "a" / "brackets.csv"), _rows(tmp_path / "d" / "brackets.csv")
    assert all(r["reference"] == "store" for r in d.values())
    for k in a:
        assert {c for c in a[k] if a[k][c] != d[k][c]} <= TIMINGS
    # the cells say they came from the bundle; the report leaves their claims out of its
    # time and method figures, and says so
    label = str((tmp_path / "bundle").resolve())
    assert all(label in json.loads(r["diagnostics"])["reference"]["bundle"] for r in d.values())
    s = json.loads((tmp_path / "d" / "summary.json").read_text())
    assert list(s["reference_store"]["from_bundles"].values()) == [2]
    assert s["overall"]["total_seconds"] == 0 and s["constructions"] == {}
    assert f"**2 cells from bundle {label}" in (tmp_path / "d" / "report.md").read_text()

    # softrank cache info / prune
    capsys.readouterr()
    assert main(["cache", "info", "--reference-store", store, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)["reference_store"]
    assert info["engines"][engine_key()]["entries"] == 2
    assert info["engines"][engine_key()]["operators"] == 2
    # an entry of another engine, as that engine wrote it
    other = tmp_path / "store" / ("0" * 16)
    mine = ReferenceStore(store).group_dir(ops[0], "full", False)
    shutil.copytree(mine, other / mine.name)
    rec = json.loads((other / mine.name / "eps0.25" / "bracket.json").read_text())
    (other / mine.name / "eps0.25" / "bracket.json").write_text(
        json.dumps({**rec, "engine": "0" * 16}))
    (tmp_path / "store" / "notes.txt").write_text("mine")  # never touched: prune refuses
    assert main(["cache", "prune", "--reference-store", store, "--dry-run"]) == 2
    assert "notes.txt" in capsys.readouterr().err
    assert main(["cache", "prune", "--reference-store", store]) == 2
    assert other.exists() and (tmp_path / "store" / "notes.txt").read_text() == "mine"
    (tmp_path / "store" / "notes.txt").unlink()
    assert main(["cache", "prune", "--reference-store", store, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would remove 1 bracket " in out and other.exists()
    listed = {line.strip() for line in out.splitlines()[1:]}
    assert listed == {f"{'0' * 16}/{mine.name}/eps0.25/", f"{'0' * 16}/{mine.name}/",
                      f"{'0' * 16}/"}
    assert main(["cache", "prune", "--reference-store", store]) == 0
    assert not other.exists()
    assert ReferenceStore(store).group_dir(ops[0], "full", False).is_dir()
    old = ReferenceStore(store).group_dir(ops[0], "full", False) / "eps0.25"
    os.utime(old / "bracket.json", (0, 1e9))  # last used in 2001
    capsys.readouterr()
    assert main(["cache", "prune", "--reference-store", store, "--older-than", "30"]) == 0
    assert "removed 1 bracket " in capsys.readouterr().out and not old.exists()
    assert ReferenceStore(store).group_dir(ops[1], "full", False).is_dir()
    bracket_again = main(base + ["--reference-store", store, "--out", str(tmp_path / "e")])
    assert bracket_again == 0  # the pruned cell is computed and stored again
    assert main(["cache", "prune", "--reference-store", store, "--all"]) == 0
    assert "removed 2 brackets" in capsys.readouterr().out
    assert os.listdir(tmp_path / "store") == []


def test_bracket_command_reads_the_store(tmp_path, capsys):
    op = planted_blocks(16, 16, 3, 0.05, seed=0)
    save_operator(tmp_path / "op.npz", op)
    cmd = ["bracket", str(tmp_path / "op.npz"), "--eps", "0.25", "0.5",
           "--reference-store", str(tmp_path / "s")]
    assert main(cmd) == 0
    assert "0 of 2 tolerances read back" in capsys.readouterr().out
    assert main(cmd + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [b["diagnostics"]["reference"]["source"] for b in out] == ["store", "store"]


@pytest.mark.parametrize("argv, match", [
    (["cache", "info", "--reference-store", ""], "argument --reference-store: expected a path"),
    (["reference", "import", "."], "not a reference bundle"),
])
def test_bad_store_arguments_name_the_argument(tmp_path, monkeypatch, capsys, argv, match):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOFTRANK_REFERENCE_STORE", str(tmp_path / "s"))
    try:
        code = main(argv)
    except SystemExit as exc:  # the parser's refusal
        code = exc.code
    assert code == 2
    assert match in capsys.readouterr().err


def test_an_export_into_a_used_directory_is_refused(tmp_path, capsys):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "mine.txt").write_text("mine")
    assert main(["reference", "export", "--panel", "quick", "--reference-store",
                 str(tmp_path / "s"), str(tmp_path / "b")]) == 2
    assert "not an empty directory" in capsys.readouterr().err
    assert (tmp_path / "b" / "mine.txt").read_text() == "mine"


def test_a_turned_off_default_store_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SOFTRANK_REFERENCE_STORE", "off")
    assert main(["cache", "info"]) == 2
    assert "SOFTRANK_REFERENCE_STORE=off" in capsys.readouterr().err


def test_a_refuted_reference_is_never_kept(tmp_path, monkeypatch):
    """An attack that succeeds (here a stand-in: the real ones have never succeeded) leaves
    no 'held' record and removes the refuted entry; the next run computes it again and the
    real attack holds."""
    from types import SimpleNamespace

    import softrank.audit.attack_stage as stage
    from softrank.audit import run_operator

    op = planted_blocks(16, 16, 3, 0.05, seed=0)
    cfg = AuditConfig(eps=(0.25,), attacks="quick", reference_store=str(tmp_path / "s"))
    real = stage.attack

    def fake(A, eps, claimed, **kw):
        return SimpleNamespace(succeeded=True, failures=[], best_error=0.0, seconds=0.0,
                               witness=SimpleNamespace(rank=claimed.rank - 1),
                               cut_short=False)

    monkeypatch.setattr(stage, "attack", fake)
    (row,) = run_operator(op, cfg)
    assert row["verdict"] == "unsound" and row["attack"] == "SUCCEEDED"
    assert not list((tmp_path / "s").rglob("attack-*.json"))
    assert not list((tmp_path / "s").rglob("bracket.json"))  # the entry was removed
    monkeypatch.setattr(stage, "attack", real)
    (row,) = run_operator(op, cfg)
    assert row["reference"] == "computed" and row["attack"] == "held"
    (row,) = run_operator(op, cfg)
    assert row["reference"] == "store" and row["attack"] == "held"

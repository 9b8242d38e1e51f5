"""Loose ends: a stored entry refused is said on stderr under ``--quiet`` too;
:func:`softrank.attacks.attack` checks its arguments; an unknown option is named with its
subcommand; ``softrank heads --layers`` is checked against the model's config before the
weights load; a refused run leaves no empty ``--out`` directory behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from softrank.generators.synthetic import planted_blocks
from softrank.harness.cli import main
from softrank.operator_files import save_operator

#: What the store says of an entry whose certificate file changed since it was stored
#: (tests/test_refstore.py, test_an_edited_file_is_refused_by_its_digest).
EDITED = "upper.npz differs from the file that was stored (sha256)"
REFUSED = "stored entry refused and recomputed: "


def _tamper_one_entry(store):
    """Flip the last byte of the one stored entry's witness file (its digest no longer
    matches the record)."""
    (upper,) = list(store.rglob("upper.npz"))
    data = bytearray(upper.read_bytes())
    data[-1] ^= 0xFF
    upper.write_bytes(bytes(data))


@pytest.fixture
def one_operator(tmp_path):
    op = planted_blocks(16, 16, 3, 0.05, seed=0)
    save_operator(tmp_path / "op.npz", op)
    (tmp_path / "panel.toml").write_text(
        'eps = [0.25]\n[[matrix]]\npath = "op.npz"\nfamily = "mine"\n')
    return op


def _refusals(err: str, command: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(f"softrank {command}: {REFUSED}")]


def test_a_tampered_entry_is_said_on_stderr_under_audit_quiet(tmp_path, one_operator, capsys):
    base = ["audit", "--panel", str(tmp_path / "panel.toml"), "--study-boot", "0",
            "--workers", "1", "--attacks", "none", "--reference-store", str(tmp_path / "s"),
            "--quiet"]
    assert main(base + ["--out", str(tmp_path / "a")]) == 0
    assert _refusals(capsys.readouterr().err, "audit") == []  # nothing stored yet
    _tamper_one_entry(tmp_path / "s")
    assert main(base + ["--out", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    # a panel names a matrix file's operator FAMILY-STEM (softrank.harness.panels)
    assert _refusals(err, "audit") == [f"softrank audit: {REFUSED}mine-op eps 0.25: {EDITED}"]
    (row,) = json.loads((tmp_path / "b" / "summary.json").read_text())["reference_store"][
        "refused"]
    assert row == f"mine-op eps 0.25: {EDITED}"  # the same news as summary.json
    # computed again and stored whole: a third run reads it back and says nothing
    assert main(base + ["--out", str(tmp_path / "c")]) == 0
    assert _refusals(capsys.readouterr().err, "audit") == []


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_a_tampered_entry_is_said_on_stderr_by_bracket(tmp_path, one_operator, capsys, extra):
    cmd = ["bracket", str(tmp_path / "op.npz"), "--eps", "0.25", "--reference-store",
           str(tmp_path / "s")] + extra
    assert main(cmd) == 0
    capsys.readouterr()
    _tamper_one_entry(tmp_path / "s")
    assert main(cmd) == 0
    out, err = capsys.readouterr()
    (line,) = _refusals(err, "bracket")
    assert line == (f"softrank bracket: {REFUSED}{one_operator.operator_id} eps 0.25: "
                    f"{EDITED}")
    assert REFUSED not in out  # said once, on stderr
    if extra:
        (b,) = json.loads(out)  # stdout stays the JSON alone
        assert b["diagnostics"]["reference"]["refused"] == EDITED


def test_a_tampered_entry_is_said_on_stderr_by_frontier(tmp_path, one_operator, capsys):
    cmd = ["frontier", str(tmp_path / "op.npz"), "--eps", "0.25", "--ranks", "1:2",
           "--no-plot", "--json", "--reference-store", str(tmp_path / "s")]
    assert main(cmd) == 0
    assert _refusals(capsys.readouterr().err, "frontier") == []
    _tamper_one_entry(tmp_path / "s")
    assert main(cmd) == 0
    out, err = capsys.readouterr()
    assert _refusals(err, "frontier") == [
        f"softrank frontier: {REFUSED}{one_operator.operator_id} eps 0.25: {EDITED}"]
    json.loads(out)  # stdout stays the JSON alone


# ------------------------------------------------------------------ attack()'s arguments


def _attack_case():
    """A 6 x 6 planted instance and a key-group certificate of rank 2 at eps 0.15 (queries 0
    and 3 put >= 1 - delta = 0.95 on their own block of 3 keys: margin 0.9 > eps)."""
    import numpy as np

    from softrank.checker import KeyGroupCertificate, check

    op = planted_blocks(6, 6, 2, 0.05, seed=2)
    cert = KeyGroupCertificate(0.15, np.array([0, 3]), (np.arange(3), np.arange(3, 6)), "hand")
    assert check(op.A, cert).ok
    return op, cert


def _refused(call, arg):
    from softrank.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError) as ei:
        call()
    msg = str(ei.value)
    assert msg.startswith(f"{arg}: ") and "\n" not in msg, msg
    return msg


def test_attack_refuses_a_certificate_of_another_tolerance():
    from softrank.attacks import attack

    op, cert = _attack_case()
    msg = _refused(lambda: attack(op.A, 0.2, cert), "claimed")
    assert "eps=0.15" in msg and "eps=0.2" in msg
    res = attack(op.A, 0.15, cert, effort="quick")  # at its own tolerance: attacked
    assert res.claimed == 2 and not res.succeeded


def test_attack_refuses_what_is_not_a_lower_certificate_of_r_eps():
    import numpy as np

    from softrank.attacks import attack
    from softrank.checker import CausalLowerCertificate, UpperWitness

    op, cert = _attack_case()
    wit = UpperWitness(0.15, op.A.copy(), np.eye(6), "identity")  # has a rank and an eps
    assert "UpperWitness" in _refused(lambda: attack(op.A, 0.15, wit), "claimed")
    # bounds r^c_eps, not r_eps: the whole matrix as its block, every entry kept
    causal = CausalLowerCertificate(0.15, np.arange(6), np.arange(6), np.ones((6, 6), bool),
                                    cert, "causal")
    _refused(lambda: attack(op.A, 0.15, causal), "claimed")


def test_attack_refuses_an_upper_witness_that_is_not_a_witness_of_A():
    import numpy as np

    from softrank.attacks import attack
    from softrank.checker import UpperWitness

    op, cert = _attack_case()
    U, W = op.A.copy(), np.eye(6)
    for bad in [(U, W), {"U": U, "W": W}, "identity"]:
        msg = _refused(lambda bad=bad: attack(op.A, 0.15, cert, upper_witness=bad),
                       "upper_witness")
        assert "UpperWitness" in msg
    small = UpperWitness(0.15, U[:4], W, "rows 0-3")  # a witness of a 4 x 6 matrix
    assert "4 x 6" in _refused(lambda: attack(op.A, 0.15, cert, upper_witness=small),
                               "upper_witness")
    res = attack(op.A, 0.15, cert, upper_witness=UpperWitness(0.15, U, W, "identity"),
                 effort="quick")
    assert "witness-perturbation" in res.methods and not res.succeeded


@pytest.mark.parametrize("A, words", [
    ("not a matrix", "got str 'not a matrix'"),
    (None, "got NoneType"),
    ({"A": 1}, "got dict"),
    ([[0.5, "x"], [0.5, 0.5]], "got list"),
    ([[0.5, float("nan")], [0.5, 0.5]], "A[0, 1] = nan"),
])
def test_attack_refuses_an_A_that_is_not_a_matrix_or_an_operator(A, words):
    from softrank.attacks import attack

    assert words in _refused(lambda: attack(A, 0.25, 1), "A")


def test_attack_takes_an_operator_as_A():
    from softrank.attacks import attack

    op, cert = _attack_case()
    res = attack(op, 0.15, cert, effort="quick")
    # the same attack as on its matrix (the seed fixes the restarts)
    same = attack(op.A, 0.15, cert, effort="quick")
    assert (res.methods, res.best_error) == (same.methods, same.best_error)
    assert not res.succeeded and res.best_error >= 0.9 * (1 - 1e-9)  # the block margin


@pytest.mark.parametrize("constructions", ["truncated-svd", b"x", "mod:Obj"])
def test_attack_refuses_a_string_as_constructions(constructions):
    from softrank.attacks import attack

    op, cert = _attack_case()
    msg = _refused(lambda: attack(op.A, 0.15, cert, constructions=constructions),
                   "constructions")
    assert "expected a list" in msg


def test_attack_refuses_an_operator_argument_that_is_not_one_of_A():
    from softrank.attacks import attack

    op, cert = _attack_case()
    _refused(lambda: attack(op.A, 0.15, cert, operator=op.A), "operator")
    other = planted_blocks(4, 6, 2, 0.05, seed=2)
    assert "4 x 6" in _refused(lambda: attack(op.A, 0.15, cert, operator=other), "operator")


# ------------------------------------------------------------------ unknown options


@pytest.mark.parametrize("argv, line", [
    (["audit", "--bogus"],
     "softrank audit: error: unrecognized argument --bogus (see softrank audit --help)"),
    (["bracket", "op.npy", "--eps", "0.25", "--bogus", "7"],
     "softrank bracket: error: unrecognized arguments --bogus 7 (see softrank bracket --help)"),
    (["cache", "info", "--bogus"],
     ("softrank cache info: error: unrecognized argument --bogus (see softrank cache info "
      "--help)")),
    # given before any subcommand: softrank's own
    (["--bogus", "audit"],
     "softrank: error: unrecognized argument --bogus (see softrank --help)"),
])
def test_an_unknown_option_is_named_with_its_subcommand(argv, line, capsys):
    with pytest.raises(SystemExit) as ei:
        main(argv)
    assert ei.value.code == 2
    assert capsys.readouterr().err == line + "\n"


# ------------------------------------------------------------------ heads --layers


class _Loaded(Exception):
    """Raised in place of loading a checkpoint's weights."""


@pytest.fixture
def no_weights(monkeypatch):
    """Every way to the weights raises :class:`_Loaded` and is counted."""
    import transformers

    from softrank.generators.capture import checkpoints

    calls = []

    def refuse(*a, **k):
        calls.append(a)
        raise _Loaded

    monkeypatch.setattr(checkpoints, "load_checkpoint", refuse)
    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", refuse)
    return calls


@pytest.mark.models("torch", "transformers")
@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_heads_layers_out_of_range_is_refused_before_the_weights_load(tmp_path, capsys, family,
                                                                      no_weights):
    from softrank.generators.tiny import save_tiny_checkpoint

    ck = tmp_path / "ck"
    save_tiny_checkpoint(family, ck)  # 2 layers x 4 heads (softrank tiny-checkpoint)
    out = tmp_path / "out"
    base = ["heads", str(ck), "--source", "stdlib:json", "--out", str(out), "--quiet"]
    for layers, got in ((["0", "2"], "got 2"), (["1", "1"], "1 is given twice")):
        assert main(base + ["--layers", *layers]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("softrank heads: error: --layers: "), err
        assert got in err and f"{str(ck)!r} has 2 layers" in err
        if got == "got 2":
            assert "in [0, 2)" in err
        assert no_weights == [] and not out.exists()
    # in range: the weights are what comes next
    with pytest.raises(_Loaded):
        main(base + ["--layers", "0", "1"])
    assert len(no_weights) == 1


@pytest.mark.models
def test_heads_layers_of_minilm_come_from_its_config(tmp_path, capsys, no_weights):
    # all-MiniLM-L6-v2: 6 layers (its model card; docs/theory/heads.md)
    assert main(["heads", "minilm", "--source", "stdlib:json", "--layers", "6", "--out",
                 str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "--layers: expected integers in [0, 6), got 6" in err and no_weights == []


# ------------------------------------------------------------------ no empty --out left behind


def _exit_code(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # the parser's refusal
        return exc.code


@pytest.fixture
def spaces(tmp_path, one_operator):
    """A directory the user had (empty), one with the user's file, and a tiny audit's
    brackets.csv with too little for any study."""
    (tmp_path / "had").mkdir()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    (tmp_path / "aud").mkdir()
    (tmp_path / "aud" / "brackets.csv").write_text(
        "operator_id,family,source,checkpoint,m,n,eps,lower,upper,verdict\n"
        "u,mine,,,4,4,0.25,1,1,resolved\n")
    return tmp_path


def _refusals_after_the_directory(t, out):
    """Each command that writes into a directory it makes, with ``out`` as that directory
    and a refusal that comes only after the directory is made."""
    panel = str(t / "panel.toml")
    return {
        "audit --certifier": ["audit", "--panel", panel, "--out", str(out), "--certifier",
                              "no_such_module_xyz:X", "--no-reference-store", "--quiet"],
        "audit --max-memory": ["audit", "--panel", panel, "--out", str(out), "--max-memory",
                               "1MiB", "--no-reference-store", "--no-operator-cache",
                               "--quiet"],
        "bracket --save-certificates": ["bracket", str(t / "op.npz"), "--eps", "0.25",
                                        "--save-certificates", str(out), "--certifier",
                                        "no_such_module_xyz:X", "--no-reference-store"],
        "study addon": ["study", "addon", "--from", str(t / "aud"), "--out", str(out)],
        "study block-width": ["study", "block-width", "--from", str(t / "aud"), "--out",
                              str(out)],
        "reference export": ["reference", "export", "--panel", "no-such-panel",
                             "--reference-store", str(t / "had"), str(out)],
    }


@pytest.mark.parametrize("command", list(_refusals_after_the_directory(Path("."), Path("."))))
@pytest.mark.parametrize("where", ["new", "new/a/b", "had/a/b", "had"])
def test_a_refused_run_leaves_no_directory_it_made(spaces, capsys, command, where):
    t = spaces
    out = t / where
    argv = _refusals_after_the_directory(t, out)[command]
    if command == "reference export" and where == "had":
        argv[argv.index("--reference-store") + 1] = str(t / "mine")  # DIR must not be the store
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("softrank ") and " error: " in err, err
    assert not (t / "new").exists()  # nothing this run made is left
    assert (t / "had").is_dir() and list((t / "had").iterdir()) == []  # the user's stays
    assert (t / "mine" / "notes.txt").read_text() == "mine"


def test_a_refused_laws_run_leaves_no_directory_it_made(tmp_path, capsys, monkeypatch):
    from softrank.errors import SoftrankError
    from softrank.studies import laws

    def refuse(*a, **k):
        raise SoftrankError("--eps: refused here (a stand-in for a refusal mid-run)")

    monkeypatch.setattr(laws, "run_laws", refuse)
    assert main(["laws", "--quick", "--out", str(tmp_path / "new" / "a")]) == 2
    assert "stand-in" in capsys.readouterr().err and not (tmp_path / "new").exists()


@pytest.mark.parametrize("argv", [
    ["heads", "{t}/no-checkpoint", "--source", "stdlib:json", "--out", "{t}/new/a/b"],
    ["tiny-checkpoint", "llama", "{t}/new/a/b", "--sliding-window", "8"],
])
def test_heads_and_tiny_checkpoint_leave_no_parent_they_made(tmp_path, capsys, argv):
    assert main([a.format(t=tmp_path) for a in argv]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "new").exists()


def test_only_empty_directories_this_run_made_are_removed(tmp_path):
    import os

    from softrank.harness.cli.common import missing_dirs, remove_made

    (tmp_path / "had").mkdir()
    made = missing_dirs(tmp_path / "had" / "a" / "b" / "c")
    assert made == [tmp_path / "had" / "a" / "b" / "c", tmp_path / "had" / "a" / "b",
                    tmp_path / "had" / "a"]  # deepest first, not the one that was there
    (tmp_path / "had" / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "had" / "a" / "kept.txt").write_text("x")  # written by the run: not empty
    remove_made(made)
    assert not (tmp_path / "had" / "a" / "b").exists()
    assert (tmp_path / "had" / "a" / "kept.txt").read_text() == "x"
    # a name made a link to someone's directory in the meantime: never followed or removed
    (tmp_path / "theirs").mkdir()
    made = missing_dirs(tmp_path / "link")
    os.symlink(tmp_path / "theirs", tmp_path / "link")
    remove_made(made)
    assert (tmp_path / "link").is_symlink() and (tmp_path / "theirs").is_dir()
    # "." and ".." are never among them
    assert all(p.name not in (".", "..") for p in missing_dirs(tmp_path / "x" / ".." / "y"))

"""Loose ends: a stored entry refused is said on stderr under ``--quiet`` too;
:func:`softrank.attacks.attack` checks its arguments; an unknown option is named with its
subcommand; ``softrank heads --layers`` is checked against the model's config before the
weights load; a refused run leaves no empty ``--out`` directory behind."""

from __future__ import annotations

import json

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

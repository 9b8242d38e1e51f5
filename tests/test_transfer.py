"""A store's entries packed for a worker, laid out there, and received home again
(softrank.refstore.transfer, docs/store.md "A store on a cluster"), and the cluster client's
own writes (softrank.harness.cluster)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from softrank.audit.record import Refutation, StageRecord, encode_stages, read_stages
from softrank.certifiers.bracket import bracket
from softrank.errors import SoftrankError
from softrank.generators.synthetic import planted_blocks
from softrank.refstore import ReferenceStore
from softrank.refstore.transfer import (Harvest, harvest_entries, pack_entries,
                                        receive_entries, unpack_entries)

EPS = (0.25, 0.5)


@pytest.fixture(scope="module")
def op():
    # 4 uniform blocks of 6 keys: r_eps = 4 at eps 0.25 and 0.5 (resolved)
    return planted_blocks(24, 24, 4, 0.0, seed=0)


@pytest.fixture
def client(op, tmp_path):
    store = ReferenceStore(tmp_path / "client")
    bracket(op, list(EPS), store=store)
    return store


def _worker_run(op, parcel, root: Path, change=None) -> Harvest:
    """A worker's side: the parcel laid out as a private store, the engine run against it
    (reading every entry back), ``change(store)`` and the harvest."""
    unpack_entries(root, parcel)
    store = ReferenceStore(root)
    brs = bracket(op, list(EPS), store=store)
    if change is not None:
        change(store, brs)
    return harvest_entries(root, parcel)


def test_a_packed_entry_is_read_back_on_the_worker_and_nothing_comes_home(op, client, tmp_path):
    parcel = pack_entries(client, op, EPS, effort="full", validated=False)
    assert sorted(parcel.entries) == ["eps0.25", "eps0.5"]
    assert all(sorted(f) == ["bracket.json", "lower.npz", "upper.npz"]
               for f in parcel.entries.values())
    root = tmp_path / "worker"
    unpack_entries(root, parcel)
    brs = bracket(op, list(EPS), store=ReferenceStore(root))
    assert [b.diagnostics.reference["source"] for b in brs] == ["store", "store"]
    h = harvest_entries(root, parcel)
    assert h.entries == {} and h.removed == {}


def test_entries_made_on_a_worker_are_checked_and_stored(op, tmp_path):
    empty = ReferenceStore(tmp_path / "client")
    parcel = pack_entries(empty, op, EPS, effort="full", validated=False)
    assert parcel.entries == {}
    h = _worker_run(op, parcel, tmp_path / "worker")
    assert sorted(h.entries) == ["eps0.25", "eps0.5"]
    assert receive_entries(empty, op, op.A, 0.0, EPS, effort="full", validated=False,
                           harvest=h) == (2, [], {})
    brs = bracket(op, list(EPS), store=empty)
    assert [b.diagnostics.reference["source"] for b in brs] == ["store", "store"]
    assert [(b.lower, b.upper) for b in brs] == [(4, 4), (4, 4)]


def test_a_side_record_made_on_a_worker_comes_home(op, client, tmp_path):
    parcel = pack_entries(client, op, EPS, effort="full", validated=False)

    held = {"attack": "held", "attack_closest": 1.5, "attack_seconds": 0.1}

    def attack_held(store, brs):
        assert store.put_side_record(brs[0], "attack-quick-x", held)

    h = _worker_run(op, parcel, tmp_path / "worker", attack_held)
    assert sorted(h.entries) == ["eps0.25"] and "attack-quick-x.json" in h.entries["eps0.25"]
    assert receive_entries(client, op, op.A, 0.0, EPS, effort="full", validated=False,
                           harvest=h) == (1, [], {})
    (br,) = bracket(op, [0.25], store=client)
    assert client.side_record(br, "attack-quick-x") == held


def test_a_tampered_entry_is_refused_and_named(op, tmp_path):
    client = ReferenceStore(tmp_path / "client")
    parcel = pack_entries(client, op, EPS, effort="full", validated=False)
    h = _worker_run(op, parcel, tmp_path / "worker")
    rec = json.loads(h.entries["eps0.25"]["bracket.json"])
    rec["lower"] = rec["upper"] = 5  # a claim its certificates do not make
    h.entries["eps0.25"]["bracket.json"] = json.dumps(rec).encode()
    h.entries["eps0.5"]["lower.npz"] = b"not a certificate"
    placed, notes, lost = receive_entries(client, op, op.A, 0.0, EPS, effort="full",
                                          validated=False, harvest=h)
    assert placed == 0 and len(notes) == 2 and sorted(lost) == [0.25, 0.5]
    assert "eps 0.25: the entry made on a worker was refused" in notes[0]
    assert "lower.npz differs from the file that was stored" in notes[1]
    assert not list(client.root.rglob("bracket.json"))


def test_only_the_cells_own_entries_are_received(op, tmp_path):
    client = ReferenceStore(tmp_path / "client")
    h = _worker_run(op, pack_entries(client, op, EPS, effort="full", validated=False),
                    tmp_path / "worker")
    # at a tolerance this audit did not ask for
    placed, notes, _ = receive_entries(client, op, op.A, 0.0, (0.25,), effort="full",
                                       validated=False, harvest=h)
    assert placed == 1 and "'eps0.5' is not at a tolerance of this audit" in notes[0]
    # for another operator's group
    other = planted_blocks(24, 24, 3, 0.0, seed=1)
    placed, notes, _ = receive_entries(client, other, other.A, 0.0, EPS, effort="full",
                                       validated=False, harvest=h)
    assert placed == 0 and "not this operator's" in notes[0]
    # a file an entry does not hold
    h.entries["eps0.5"]["../../escape.json"] = b"{}"
    placed, notes, lost = receive_entries(client, op, op.A, 0.0, EPS, effort="full",
                                          validated=False, harvest=h)
    assert "holds another" in notes[-1] and "holds another" in lost[0.5]
    assert not list(tmp_path.rglob("escape.json"))


def test_an_entry_removed_on_a_worker_is_removed_where_it_is_unchanged(op, client, tmp_path):
    parcel = pack_entries(client, op, EPS, effort="full", validated=False)

    def refuted(store, brs):
        assert store.discard(brs[0], "refuted") and store.discard(brs[1], "refuted")

    h = _worker_run(op, parcel, tmp_path / "worker", refuted)
    assert sorted(h.removed) == ["eps0.25", "eps0.5"] and h.entries == {}
    # the client's eps 0.5 entry changed since it was sent: kept
    (br,) = bracket(op, [0.5], store=client)
    assert client.put_side_record(br, "attack-quick-y", {"attack": "held", "attack_closest": 1.0,
                                                         "attack_seconds": 0.0})
    placed, notes, _ = receive_entries(client, op, op.A, 0.0, EPS, effort="full",
                                       validated=False, harvest=h)
    assert placed == 0
    assert notes[0].startswith(f"{op.operator_id} eps 0.25: removed ")
    assert "has changed since" in notes[1]
    left = sorted(p.parent.name for p in client.root.rglob("bracket.json"))
    assert left == ["eps0.5"]


def test_a_store_that_cannot_be_written_receives_nothing(op, tmp_path):
    client = ReferenceStore(tmp_path / "client")
    h = _worker_run(op, pack_entries(client, op, EPS, effort="full", validated=False),
                    tmp_path / "worker")
    client.writable = False
    placed, notes, lost = receive_entries(client, op, op.A, 0.0, EPS, effort="full",
                                          validated=False, harvest=h)
    assert placed == 0 and notes == []
    assert lost == {0.25: "the store is not writable here", 0.5: "the store is not writable here"}


def test_a_cell_whose_entry_was_not_kept_says_so():
    """The row of a cell whose worker-made entry did not reach the client's store reads as
    a local one does: no entry, ``not_kept`` saying why (the report and summary count it)."""
    from softrank.audit.record import encode_diagnostics, read_diagnostics
    from softrank.certifiers.interface import Diagnostics
    from softrank.harness.cluster import _not_kept

    d = Diagnostics()
    d.reference = {"source": "computed", "entry": "e/g/eps0.5"}
    row = {"eps": 0.5, "diagnostics": encode_diagnostics(d)}
    ref = read_diagnostics(_not_kept(row, "the store is not writable here")).reference
    assert ref == {"source": "computed", "not_kept": "the store is not writable here"}
    assert _not_kept(row, None) is row


def test_counterexample_paths_are_rehomed_and_confined(tmp_path):
    from softrank.harness.cluster import _rehome, _write_home

    tmp_out = tmp_path / "w" / "out"
    ref = Refutation("attack", 4, 3, tmp_out / "counterexamples" / "op-eps0.25")
    row = {"stages": encode_stages({"attack": StageRecord(0.5, "", {0.25: ref})})}
    moved = read_stages(_rehome(row, tmp_out, "runs/a"))["attack"].refuted[0.25]
    assert moved.saved == Path("runs/a/counterexamples/op-eps0.25")
    assert (moved.claimed, moved.found) == (4, 3)
    assert _rehome({"stages": encode_stages({"x": StageRecord(0.1)})}, tmp_out, "a") == \
        {"stages": encode_stages({"x": StageRecord(0.1)})}
    out = tmp_path / "client"
    _write_home(out, "counterexamples/op-eps0.25/lower.npz", b"abc")
    assert (out / "counterexamples/op-eps0.25/lower.npz").read_bytes() == b"abc"
    for bad in ("../x/y/z", "counterexamples/../../z", "/etc/x/y", "report.md", "other/a/b"):
        with pytest.raises(SoftrankError, match="not a counterexample file"):
            _write_home(out, bad, b"x")
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == ["lower.npz"]


def _unaligned(op):
    """A copy of ``op`` whose ``A`` sits 4 bytes off alignment, read-only: as a Dask worker
    may receive it."""
    import copy

    import numpy as np

    buf = np.zeros(op.A.nbytes + 4, dtype=np.uint8)
    A = np.frombuffer(buf.data, dtype=np.float64, count=op.A.size, offset=4).reshape(op.A.shape)
    buf[4:] = np.frombuffer(op.A.tobytes(), dtype=np.uint8)
    A.flags.writeable = False
    out = copy.copy(op)
    object.__setattr__(out, "A", A)
    return out


def test_a_cell_on_unaligned_arrays_gives_the_local_ends():
    """Arrays a worker receives may be unaligned; BLAS and the compiled kernels take other
    paths there. The grid below got lower end 6 at eps 0.5 on a Dask worker and 5 in a local
    process: a worker's cell must run on aligned copies."""
    from softrank.audit import AuditConfig, run_operator
    from softrank.generators.synthetic import grid
    from softrank.harness.cluster import CellTask, _aligned, run_cell_task

    op = grid(d=3, n=4)
    odd = _unaligned(op)
    assert not odd.A.flags.aligned and odd.hash == op.hash
    fixed = _aligned(odd)
    assert fixed.A.flags.aligned and fixed.A.flags.c_contiguous
    assert not fixed.A.flags.writeable and fixed.hash == op.hash and _aligned(op) is op
    cfg = AuditConfig(eps=(0.5,), attacks="none")
    ends = [(r["lower"], r["upper"]) for r in run_operator(op, cfg)]
    home = run_cell_task(CellTask(0, odd, cfg, None, "out"))
    assert [(r["lower"], r["upper"]) for r in home.rows] == ends == [(5, 8)]

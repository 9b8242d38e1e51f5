"""The audit's cell record (softrank.audit.record): rows written once, read back typed."""

import json
from pathlib import Path

import pytest

from softrank.audit.record import (STATUSES, VERDICTS, Refutation, StageRecord,
                                   encode_diagnostics, encode_stages, read_cell,
                                   read_diagnostics, read_stages)
from softrank.certifiers.interface import Diagnostics, MethodRecord
from softrank.errors import MalformedRecord


def _row(**kw):
    row = {"operator_id": "grid-d1-n8", "family": "grid", "n": 8, "eps": "0.25",
           "lower": "2", "upper": "3", "verdict": "open", "seconds": "0.5",
           "diagnostics": "", "stages": ""}
    row.update(kw)
    return row


def test_the_literals_are_the_interfaces():
    assert VERDICTS == ("resolved", "open", "unsound", "error")
    assert set(STATUSES) == {"ok", "declined", "skipped", "failed", "rejected"}


def test_diagnostics_and_stages_round_trip():
    d = Diagnostics(methods=[MethodRecord("truncated-svd", "upper", "builtin", "ok", 4, 0.01),
                             MethodRecord("mine", "upper", "third-party", "failed", None, 0.2,
                                          "ValueError: no")],
                    checker_disagreements=1, carried={"lower": 0.5},
                    reported={"upper": "truncated-svd"}, cut_short=True)
    st = {"bracket": StageRecord(1.25), "mine": StageRecord(0.5, "RuntimeError: x"),
          "attack": StageRecord(2.0, "", {0.25: Refutation("attack", 4, 3, Path("ce/x"))})}
    row = _row(diagnostics=encode_diagnostics(d), stages=encode_stages(st))
    back = read_diagnostics(row)
    assert back.to_dict() == d.to_dict()
    assert back.record("mine").message == "ValueError: no"
    assert read_stages(row) == st
    assert list(json.loads(row["stages"])) == ["bracket", "mine", "attack"]  # in the order run


def test_read_cell_types_a_row():
    c = read_cell(_row())
    assert (c["lower"], c["upper"], c["eps"], c["seconds"]) == (2, 3, 0.25, 0.5)
    # ends a tool rewrote as floats (a column with empty error ends read as float)
    assert read_cell(_row(lower="2.0", upper=3.0))["lower"] == 2
    assert read_cell(_row(upper=3.0))["upper"] == 3
    assert isinstance(c["diagnostics"], Diagnostics) and c["stages"] == {}
    assert c["family"] == "grid"  # every other column kept as it is


@pytest.mark.parametrize("ends, want", [
    (("", ""), (None, None)),             # no end certified (a crash)
    (("3", ""), (3, None)),               # a lower certificate, no witness
    (("", "5"), (None, 5)),               # a witness, no lower certificate
    (("0", "-1"), (None, None)),          # as older audits wrote an error cell
    ((0, -1), (None, None)),
])
def test_an_error_cell_has_none_for_an_end_without_certificate(ends, want):
    c = read_cell(_row(lower=ends[0], upper=ends[1], verdict="error"))
    assert (c["lower"], c["upper"]) == want


def test_a_refuted_cell_is_unsound_whatever_its_ends():
    c = read_cell(_row(lower="3", upper="3", verdict="unsound", attack="SUCCEEDED"))
    assert (c["lower"], c["upper"], c["verdict"]) == (3, 3, "unsound")


@pytest.mark.parametrize("kw, words", [
    ({"verdict": "maybe"}, "verdict 'maybe'"),
    ({"lower": "two"}, "lower 'two' is not an integer"),
    ({"lower": 2.5}, "lower 2.5 is not an integer"),
    ({"lower": True}, "lower True"),
    ({"lower": "3", "upper": "3"}, "do not fit the verdict 'open'"),
    ({"lower": "4", "upper": "3", "verdict": "resolved"}, "do not fit"),
    ({"lower": "2", "upper": "3", "verdict": "unsound"}, "do not fit"),
    ({"lower": "2", "upper": "3", "verdict": "error"}, "both ends"),
    ({"lower": "x", "upper": "", "verdict": "error"}, "not an integer"),
    ({"eps": "1.5"}, "0 < eps < 1"),
    ({"eps": "abc"}, "not a number"),
    ({"seconds": "-1"}, "finite number >= 0"),
    ({"seconds": "nan"}, "finite number >= 0"),
    ({"diagnostics": "{not json"}, "not JSON"),
    ({"diagnostics": json.dumps({"methods": [{"name": "x", "side": "middle", "status": "ok",
                                              "rank": 1, "seconds": 0}]})},
     "not softrank's record"),
    ({"diagnostics": json.dumps({"methods": [{"name": "x", "side": "upper",
                                              "status": "great", "rank": 1}]})}, "not softrank's"),
    ({"diagnostics": "[1, 2]"}, "expected a JSON object with a list of methods"),
    ({"stages": json.dumps({"bracket": {"error": "x"}})}, "record of 'bracket'"),
    ({"stages": "[]"}, "expected a JSON object"),
    ({"stages": json.dumps({"a": {"seconds": 1, "refuted": [{"eps": 0.25}]}})}, "record of 'a'"),
    ({"lower": "2.5"}, "lower '2.5' is not an integer"),
])
def test_read_cell_refuses_what_is_not_softranks_record(kw, words):
    with pytest.raises(MalformedRecord, match=words):
        read_cell(_row(**kw))


def test_read_cell_needs_the_key_and_ends():
    row = _row()
    del row["upper"]
    with pytest.raises(MalformedRecord, match="no column 'upper'"):
        read_cell(row)

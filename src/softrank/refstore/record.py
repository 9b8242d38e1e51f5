"""What a stored entry says, checked against what its certificates prove (docs/store.md).

An entry's ``bracket.json`` holds more than its two ends: the seconds its bracket took, every
method's record, the checker disagreements. :func:`check_diagnostics` refuses what
contradicts the checked certificates or is not softrank's own record of a complete bracket
made at the entry's effort; :func:`side_record_ok` does the same for a record kept beside an
entry; :func:`imported_from` names the bundle an entry came from, whose remaining
statements (:data:`BUNDLE_CLAIMS`) are shown as that bundle's claims.
:func:`certificate_bytes_bound` is the size a certificate file is measured against before it
is hashed or read.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..certifiers.bracket import own_schedule
from ..certifiers.interface import Diagnostics
from ..certifiers.registry import CERTIFICATE_METHODS, TRAITS
from ..errors import printable
from .layout import (IMPORTED_NAME, MAX_RECORD_BYTES, imported_record_ok, is_seconds,
                     side_record_ok)

__all__ = ["Refused", "check_diagnostics", "side_record_ok", "imported_from",
           "certificate_bytes_bound", "BUNDLE_CLAIMS", "is_seconds"]


class Refused(Exception):
    """An entry that is not read back; the message says why (one line: what it quotes of
    the entry is :func:`~softrank.refstore.layout.printable`)."""

    def __init__(self, message: str):
        super().__init__(printable(message))


#: What an entry imported from a bundle says that no check covers (docs/store.md): shown
#: as that bundle's claim (``diagnostics.reference.claims``), never as softrank's own
#: measurement. Its ends, the certificates behind them and the methods credited with them
#: are checked.
BUNDLE_CLAIMS = ("seconds", "method records", "checker disagreements")


def certificate_bytes_bound(m: int, N: int) -> int:
    """Most bytes a certificate file of an ``m x N`` operator can hold (the file's size is
    checked against it before it is hashed or read): the embedded ``A`` (``8 m N``) and the
    largest certificate's arrays (a subspace certificate's ``R``, ``Lam``, ``M``: ``8 (N k +
    N m + N^2)``; a witness ``8 (m k + k N)``; ``k <= min(m, N)``), all within
    ``16 (m + N)^2``, plus 1 MiB for the archive's headers and the JSON header."""
    return 16 * (int(m) + int(N)) ** 2 + (1 << 20)


def imported_from(entry: Path, files) -> str | None:
    """The bundle an entry was imported from (its
    :data:`~softrank.refstore.layout.IMPORTED_NAME`), or None for an entry computed here. A
    record of an import that cannot be read still marks the entry as a bundle's."""
    path = entry / IMPORTED_NAME
    if not os.path.lexists(path):
        return None
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_RECORD_BYTES:
            raise ValueError
        doc = json.loads(path.read_bytes())
        if not imported_record_ok(doc, files):
            raise ValueError
        return printable(doc["bundle"][:300])
    except (OSError, ValueError, RecursionError):
        return "an unknown bundle (its record of the import cannot be read)"


_SIDES = ("lower", "upper")
_ORIGINS = ("builtin", "reference", "third-party")
_STATUSES = ("ok", "declined", "skipped", "failed", "rejected")
_CARRIED = re.compile(r" \(from eps ([0-9.e+-]+)\)$")
#: The message of a record rejected because the two arithmetics disagreed (the engine's).
_DISAGREES = "the interval check disagrees with float64"


def check_diagnostics(d, lower: int, upper: int, effort: str, certs: dict,
                      current: bool) -> Diagnostics:
    """The stored diagnostics of a bracket ``[lower, upper]``, checked field by field and
    against its checked ends (docs/store.md): what they say can be no more than the
    certificates prove (a method accepted on the lower side never above ``lower``, on the
    upper side never below ``upper``); the method credited with each end is softrank's, its
    record (unless the end was carried from another tolerance) accepted at that rank, and it
    is the method named in that end's certificate; a stored bracket is never cut short and
    has no error. Of this engine (``current``) the records are exactly those of
    softrank's own methods in the order they run, each as the ``effort`` runs it (at
    ``fast`` the late searches skipped, ``"effort fast"``), and the checker disagreements as
    many as the records rejected for one. Else :class:`Refused`."""
    def bad(what):
        return Refused(f"bracket.json: diagnostics {what}")

    if not isinstance(d, dict):
        raise bad("are not a JSON object")
    methods = d.get("methods")
    if not isinstance(methods, list):
        raise bad("have no list of methods")
    for m in methods:
        if not (isinstance(m, dict) and isinstance(m.get("name"), str)
                and m.get("side") in _SIDES and m.get("origin") in _ORIGINS
                and m.get("status") in _STATUSES and is_seconds(m.get("seconds"))
                and isinstance(m.get("message", ""), str) and len(m.get("message", "")) <= 400
                and (m.get("rank") is None or (type(m.get("rank")) is int and m["rank"] >= 0))
                and set(m) <= {"name", "side", "origin", "status", "rank", "seconds",
                               "message"}):
            raise bad(f"hold a malformed method record {str(m)[:80]}")
        if m["origin"] == "third-party" or len(m["name"]) > 200:
            raise bad(f"name a method that is not softrank's ({m['name'][:60]!r})")
        if m["status"] == "ok" and m["rank"] is None:
            raise bad(f"hold an accepted answer of {m['name']} without a rank")
        if m["status"] == "ok" and (m["side"] == "lower" and m["rank"] > lower
                                    or m["side"] == "upper" and m["rank"] < upper):
            raise bad(f"claim {m['name']} reached rank {m['rank']} beyond the checked "
                      f"ends [{lower}, {upper}]")
    carried, reported = d.get("carried", {}), d.get("reported", {})
    if (not isinstance(carried, dict) or not set(carried) <= set(_SIDES)
            or not all(isinstance(v, float) and 0 < v < 1 for v in carried.values())
            or not isinstance(reported, dict) or set(reported) != set(_SIDES)
            or not all(isinstance(v, str) for v in reported.values())
            or type(d.get("checker_disagreements", 0)) is not int
            or d.get("checker_disagreements", 0) < 0
            or d.get("error", "") != "" or d.get("cut_short", False) is not False
            or not set(d) <= {"methods", "checker_disagreements", "carried", "error",
                              "reported", "cut_short"}):
        raise bad("are not softrank's record of a complete bracket")
    records = {(m["name"], m["side"]): m for m in methods}
    for side, end in (("lower", lower), ("upper", upper)):
        name, cert = reported[side], certs[side]
        if name not in CERTIFICATE_METHODS or (name, side) not in records:
            raise bad(f"credit the {side} end to {str(name)[:60]!r}, not one of softrank's "
                      f"{side} methods that ran")
        method, hops = cert.method, []
        while (hop := _CARRIED.search(method)) is not None:
            hops.append(hop.group(1))
            method = method[:hop.start()]
        if not re.fullmatch(CERTIFICATE_METHODS[name], method):
            raise bad(f"credit the {side} end to {name}, but its certificate was made by "
                      f"{cert.method[:80]!r}")
        if bool(hops) != (side in carried) or (hops and hops[0] != f"{carried[side]:g}"):
            raise bad(f"say the {side} end was {'not ' * (side not in carried)}carried from "
                      f"another tolerance, its certificate ({cert.method[:80]!r}) otherwise")
        rec = records[(name, side)]
        if side not in carried and (rec["status"] != "ok" or rec["rank"] != end):
            raise bad(f"credit the {side} end {end} to {name}, whose record says "
                      f"{rec['status']} at rank {rec['rank']}")
    if current:
        got = tuple((m["name"], m["side"], m["origin"]) for m in methods)
        want = own_schedule()
        if got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                      min(len(got), len(want)))
            raise bad(f"are not the records of softrank's own methods as they run (record "
                      f"{at}: {got[at] if at < len(got) else 'none'}, expected "
                      f"{want[at] if at < len(want) else 'none'})")
        late = {n for n, _, o in want if o == "builtin" and TRAITS[n].late}
        for m in methods:
            fast_skip = (m["status"] == "skipped" and m.get("message") == "effort fast"
                         and m["rank"] is None and m["seconds"] == 0)
            if (effort == "fast" and m["name"] in late) != fast_skip or (
                    m["status"] == "skipped" and not fast_skip
                    and not m.get("message", "").startswith("the ends cannot move")):
                raise bad(f"hold a record of {m['name']} ({m['status']}"
                          f"{', ' + m['message'][:60] if m.get('message') else ''}) that "
                          f"effort {effort!r} does not make")
        disagree = sum(m["status"] == "rejected" and m.get("message") == _DISAGREES
                       for m in methods)
        if d.get("checker_disagreements", 0) != disagree:
            raise bad(f"count {d.get('checker_disagreements', 0)} checker disagreements, "
                      f"{disagree} records rejected for one")
    return Diagnostics.from_dict(d)

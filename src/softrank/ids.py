"""Operator ids and the names they are made of.

An operator id (``Operator.operator_id``) is built from names: a family (``minilm``,
``grid``, a ``[[matrix]]`` entry's ``family``, ``softrank heads --family``), a source name
(a text or token-id file's stem, a standard-library module) and a matrix file's stem. Ids key
the result store, name operator and certificate files and fill cells of the report's
Markdown tables, so every part of an id, and the id itself, passes :func:`check_id_part`.

A valid part is a non-empty string of at most :data:`MAX_ID_BYTES` bytes in UTF-8 without

* control or format characters (newline, tab, carriage return, ...; Unicode categories
  ``Cc``, ``Cf``, ``Cs``) or line and paragraph separators (``Zl``, ``Zp``): they split the
  report's table rows and log lines;
* ``|``: it splits Markdown table cells;
* path separators ``/`` and ``\\`` and ``..``: ids become file names;
* leading or trailing whitespace.

Anything else is kept as given, e.g. ``.``, ``,``, ``:``, ``=``, ``+``, brackets, interior
spaces and non-ASCII letters (``grid-d2-n8-c0.5``, ``gpt2-wk0-8q[9,11]-L0H1-os.path``,
``matrix-my head``). A refused value is refused, never rewritten.

It also names a cell's family group in an audit (:func:`group_key`). This module depends
on :mod:`softrank.errors` only.
"""

from __future__ import annotations

import unicodedata

from .errors import InvalidArgumentError

__all__ = ["MAX_ID_BYTES", "check_id_part", "group_key"]

#: Longest accepted id or id part, in bytes of UTF-8: ids name files (``ID.npz``, certificate
#: directories ``ID-epsE``), and file names are limited to 255 bytes on common file systems.
MAX_ID_BYTES = 200

_BAD_CATEGORIES = {"Cc": "control character", "Cf": "format character",
                   "Cs": "surrogate (an undecodable byte)", "Zl": "line separator",
                   "Zp": "paragraph separator"}


def _problem(value: str) -> str | None:
    """Why ``value`` is not a valid id part, or None."""
    if not value:
        return "expected a non-empty name"
    for i, ch in enumerate(value):
        cat = unicodedata.category(ch)
        if cat in _BAD_CATEGORIES:
            return f"contains the {_BAD_CATEGORIES[cat]} {ch!r} at position {i}"
    for bad, what in (("|", "'|' (a table cell separator)"),
                      ("..", "'..' (a parent directory in file names)"),
                      ("/", "the path separator '/'"), ("\\", "the path separator '\\\\'")):
        if bad in value:
            return f"contains {what} at position {value.index(bad)}"
    if value != value.strip():
        return "has leading or trailing whitespace"
    size = len(value.encode("utf-8"))
    if size > MAX_ID_BYTES:
        return f"is {size} bytes long in UTF-8, more than {MAX_ID_BYTES}"
    return None


def check_id_part(value: object, arg: str,
                  error: type[Exception] = InvalidArgumentError) -> str:
    """Check a name that becomes (part of) an operator id; refuse it, never repair it.

    Parameters
    ----------
    value : object
        The name: a family, a source name, a file stem or a whole operator id.
    arg : str
        What the value is, for the message: an argument or field name such as
        ``"family"``, ``"--family"`` or ``"panel: [[matrix]] entry 0: family"``.
    error : type of Exception
        Raised on a bad value (default :class:`~softrank.errors.InvalidArgumentError`; e.g.
        :class:`~softrank.errors.PanelError` for panel files,
        :class:`~softrank.errors.InvalidOperatorError` for :class:`~softrank.Operator`).

    Returns
    -------
    str
        ``value``, unchanged.

    Raises
    ------
    error
        One line ``"{arg}: {reason} (it becomes part of operator ids and file names), got
        {value!r}"`` when ``value`` is not a string, is empty, holds a control, format or
        line-separator character, ``|``, ``/``, ``\\`` or ``..``, has leading or trailing
        whitespace, or is longer than :data:`MAX_ID_BYTES` bytes in UTF-8 (then only its
        first 60 characters are shown).
    """
    if not isinstance(value, str):
        raise error(f"{arg}: expected a string (it becomes part of operator ids and file "
                    f"names), got {type(value).__name__} {value!r:.80}")
    why = _problem(value)
    if why is None:
        return value
    shown = repr(value) if len(value) <= 80 else f"{value[:60]!r}... ({len(value)} characters)"
    raise error(f"{arg}: {why} (it becomes part of operator ids and file names), got {shown}")


def group_key(row) -> str:
    """The report's family group of an audit cell.

    Parameters
    ----------
    row : mapping
        A cell row with at least ``family`` and ``n`` (the number of keys); ``checkpoint``
        is non-empty for heads of a user's checkpoint.

    Returns
    -------
    str
        ``FAMILY-wN`` for learned heads (one group per width ``N``), ``FAMILY-fullN`` for
        whole masked heads of ``N`` tokens (``softrank heads --full``, ``block``
        ``full:0-N``), the family otherwise.
    """
    fam = row["family"]
    if fam == "minilm" or row.get("checkpoint"):  # learned heads: one group per width
        if str(row.get("block", "")).startswith("full:"):
            return f"{fam}-full{row['n']}"
        return f"{fam}-w{row['n']}"
    return fam

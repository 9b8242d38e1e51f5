"""Real text every machine has: standard-library docstrings (docs/theory/heads.md).

One module is one source. A source's text is the module docstring followed by the
docstrings of its public functions, classes and methods, so it is in English prose with some code, is
the same on every Linux machine with the same Python minor version, and needs no download.
"""

from __future__ import annotations

import importlib
import inspect
import warnings

from ..errors import InvalidArgumentError
from ..validation import check_int

__all__ = ["stdlib_sources", "CANDIDATE_MODULES", "MIN_CHARS", "MAX_CHARS"]

#: A source qualifies when its text has at least this many characters. Docstring English
#: tokenises at about 4-5 characters per WordPiece token, so this is >= 300 tokens with margin.
MIN_CHARS = 1500

#: Texts are cut at the last whitespace before this many characters.
MAX_CHARS = 6000

#: Fixed, sorted candidates: well-documented standard-library modules that import without side
#: effects (no output, windows, network or files) and without deprecation warnings on Linux.
#: Left out on purpose: ``antigravity``, ``this``, ``tkinter``, ``idlelib``, ``turtle*``,
#: test modules, modules removed by PEP 594, modules whose ``__all__`` or docstrings depend
#: on the platform or on optional C libraries (``os``, ``locale``, ``lzma``, ``bz2``,
#: ``sqlite3``, ``ctypes``, ``curses``, ``readline``, ``decimal``, ``datetime``).
CANDIDATE_MODULES: tuple[str, ...] = (
    "abc",
    "argparse",
    "ast",
    "base64",
    "bdb",
    "calendar",
    "cmd",
    "code",
    "codecs",
    "codeop",
    "collections",
    "compileall",
    "configparser",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "difflib",
    "dis",
    "doctest",
    "email.message",
    "email.utils",
    "enum",
    "filecmp",
    "fileinput",
    "ftplib",
    "functools",
    "getopt",
    "graphlib",
    "gzip",
    "hmac",
    "http.client",
    "http.cookiejar",
    "http.cookies",
    "http.server",
    "imaplib",
    "importlib.metadata",
    "inspect",
    "ipaddress",
    "json",
    "logging",
    "mailbox",
    "mimetypes",
    "operator",
    "optparse",
    "pathlib",
    "pdb",
    "pickle",
    "pickletools",
    "pkgutil",
    "plistlib",
    "poplib",
    "profile",
    "pstats",
    "py_compile",
    "pyclbr",
    "queue",
    "random",
    "runpy",
    "sched",
    "secrets",
    "selectors",
    "shelve",
    "shutil",
    "smtplib",
    "socketserver",
    "statistics",
    "subprocess",
    "symtable",
    "tarfile",
    "tempfile",
    "textwrap",
    "threading",
    "timeit",
    "tokenize",
    "traceback",
    "types",
    "typing",
    "urllib.parse",
    "urllib.request",
    "uuid",
    "warnings",
    "wave",
    "weakref",
    "zipfile",
)


def _public_objects(module) -> list:
    """Public functions and classes of ``module``: ``__all__`` order, else sorted ``dir``."""
    names = getattr(module, "__all__", None)
    from_all = names is not None
    if not from_all:
        names = sorted(n for n in dir(module) if not n.startswith("_"))
    objs = []
    for name in names:
        obj = getattr(module, name, None)
        if not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj)):
            continue
        # Without __all__, skip names merely imported from elsewhere.
        if not from_all and getattr(obj, "__module__", None) != module.__name__:
            continue
        objs.append(obj)
    return objs


def _documented(module):
    """Yield the module, then each public object and, for a class, its public methods."""
    yield module
    for obj in _public_objects(module):
        yield obj
        if not inspect.isclass(obj):
            continue
        for name, attr in vars(obj).items():  # definition order
            if name.startswith("_"):
                continue
            if isinstance(attr, (staticmethod, classmethod)):
                yield attr.__func__
            elif isinstance(attr, property) or inspect.isroutine(attr):
                yield attr


def _module_text(module) -> str:
    """Module docstring, then public docstrings, cut at whitespace before MAX_CHARS."""
    parts: list[str] = []
    length = 0
    for doc in (inspect.getdoc(obj) for obj in _documented(module)):
        doc = (doc or "").strip()
        if not doc or doc in parts:
            continue
        parts.append(doc)
        length += len(parts[-1]) + 2
        if length > MAX_CHARS:
            break
    text = "\n\n".join(parts)
    if len(text) > MAX_CHARS:
        cut = text.rfind(" ", 0, MAX_CHARS)
        cut = max(cut, text.rfind("\n", 0, MAX_CHARS))
        text = text[: cut if cut > 0 else MAX_CHARS].rstrip()
    return text


def stdlib_sources(n: int = 64) -> list[tuple[str, str]]:
    """The first ``n`` standard-library docstring sources (docs/theory/heads.md).

    Candidates are taken from :data:`CANDIDATE_MODULES` in order; a module is used when it
    imports and its text has at least :data:`MIN_CHARS` characters (>= 379 MiniLM WordPiece
    tokens for every candidate on CPython 3.11). The text is the module docstring followed by
    the ``inspect.getdoc`` docstrings of its public functions and classes (``__all__`` order
    when the module defines it, else sorted ``dir`` order restricted to objects defined in the
    module), each class followed by its public methods and properties in definition order;
    blank-line separated, duplicates dropped, cut at the last whitespace before
    :data:`MAX_CHARS` characters.

    Parameters
    ----------
    n : int, default 64
        Number of sources, ``1 <= n <= len(CANDIDATE_MODULES)``.

    Returns
    -------
    sources : list of (module_name, text) tuples, length ``n``
        Distinct module names; the same on every call, and on every Linux machine with the
        same Python minor version (the texts are the docstrings of that version).

    Raises
    ------
    InvalidArgumentError
        If ``n`` is not an int >= 1, or fewer than ``n`` candidates import and give enough
        text.
    """
    n = check_int(n, "n", 1)
    sources: list[tuple[str, str]] = []
    for name in CANDIDATE_MODULES:
        if len(sources) == n:
            break
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(name)
        except ImportError:
            continue
        text = _module_text(module)
        if len(text) >= MIN_CHARS:
            sources.append((name, text))
    if len(sources) < n:
        raise InvalidArgumentError(
            f"n: asked for {n} standard-library sources, only {len(sources)} of the "
            f"{len(CANDIDATE_MODULES)} candidates import and give >= {MIN_CHARS} characters"
        )
    return sources

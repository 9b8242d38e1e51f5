"""Sphinx configuration of softrank's documentation.

Build: ``make docs`` (installs the ``[docs]`` extra into .venv, then
``sphinx-build -n -W --keep-going -b html docs docs/_build/html``: every warning and every
unresolved cross-reference fails the build; CI runs it).
The build is offline: no intersphinx inventory is fetched, the API reference is generated
from the package's docstrings (numpydoc), the CLI reference from its argparse parser, and
the gallery uses the PNGs committed under docs/gallery/ (``make gallery`` refreshes them).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The package is installed editable into .venv; src/ first also lets a bare
# `sphinx-build` from a checkout document the sources in front of it.
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE / "_ext"))  # softrank_mathjax, the site's own MathJax
# Matplotlib never opens a window while modules are imported for autodoc.
os.environ.setdefault("MPLBACKEND", "Agg")

import softrank  # noqa: E402

project = "softrank"
author = "the softrank authors"
copyright = "softrank authors"
release = softrank.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",  # the Markdown pages (README-style docs/*.md, the theory section)
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",  # docstring sections (Parameters, Returns, ...), the SciPy convention
    "sphinx.ext.mathjax",  # math is typeset in the browser by the MathJax of the next line
    "softrank_mathjax",  # MathJax 3.2.2 (tex-chtml, its fonts) in _static/mathjax: _ext/
    "sphinx.ext.viewcode",
    "sphinxarg.ext",  # the CLI reference, generated from softrank's argparse parser
]
# Math without a network. Sphinx's default MathJax comes from a CDN, so a page opened offline
# (an air-gapped cluster, CI) showed raw TeX. sphinx-mathjax-offline, a PyPI package pinned in
# the lock, ships MathJax 3.2.2's files (the tex-chtml component, its TeX extensions and the
# woff fonts): it sets mathjax_path to "mathjax/tex-chtml.js" and copies the files into
# _static/mathjax after a successful build, so the site carries its renderer (24 MB);
# _ext/softrank_mathjax.py wraps it to declare parallel builds safe and to ship MathJax's
# licence notice. Chosen over KaTeX rendered at build time (sphinxcontrib-katex's prerender
# needs Node.js for every build and KaTeX's CSS and fonts from npm) and over MathJax from npm
# (a second lock, and files copied by hand): the pages keep the TeX that MathJax reads, and
# the build needs only Python. tests/test_docs_site.py opens the built pages in headless Chromium and checks that
# every formula was typeset and that no page loads anything from another host.
#
# An undefined macro is a TeX error, not red text: MathJax's noundefined package (loaded by
# default) would draw "\Reals" in red where the browser test sees a typeset formula.
mathjax3_config = {"tex": {"packages": {"[-]": ["noundefined"]}}}

# No sphinx.ext.intersphinx: the build must not download inventories. References to
# numpy, scipy, the standard library, ... are therefore unresolvable and ignored below
# (nitpick_ignore_regex), not linked.

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]
# Curly quotes and ellipses, but no dashes: `--eps` in prose and in the CLI's help strings
# stays two hyphens (Sphinx's default would print the option as an en dash).
smartquotes_action = "qe"

# -- MyST (Markdown) ------------------------------------------------------------------------
myst_enable_extensions = [
    "dollarmath",  # $...$ and $$...$$ in the theory pages
    "amsmath",  # \begin{align} ... environments
    "colon_fence",
    "deflist",
]
myst_heading_anchors = 3  # [text](page.md#a-heading) links between the Markdown pages
myst_dmath_double_inline = True

# -- autodoc / autosummary / numpydoc --------------------------------------------------------
# The stubs are regenerated from the package at every build; removing the old ones first
# keeps a module that was moved or deleted from leaving an orphan page behind.
shutil.rmtree(HERE / "api" / "generated", ignore_errors=True)
autosummary_generate = True  # stubs under docs/api/generated/ (git-ignored), rebuilt each time
autosummary_generate_overwrite = True
autosummary_ignore_module_all = False  # a module's __all__ is its public API
autosummary_imported_members = False


def _origin(module: str, name: str) -> str:
    """Where ``module.name`` is documented in full, if not on ``module``'s own page.

    A package re-exports names from its submodules (``softrank.Operator`` is
    ``softrank.operators.Operator``), and a module can bind a second name to an object
    (``ArrayFileError = InvalidFileError``). Documenting the object again would render its
    docstring where its relative cross-references (``:data:`ROW_SUM_TOL```) do not resolve,
    so such a name keeps its signature and gets a one-line pointer to the defining module's
    page instead of the docstring (the module template and _point_to_home below). Returns
    that object's full name, or "" to document it here (defined here, or its home is
    private or does not list it as public).
    """
    import importlib

    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return ""
    home, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not home or not qual or "." in qual or (home == module and qual == name):
        return ""
    if any(part.startswith("_") for part in home.split(".")):
        return ""
    try:
        public = getattr(importlib.import_module(home), "__all__", None)
    except ImportError:
        return ""
    if (public is not None and qual not in public) or qual.startswith("_"):
        return ""
    return f"{home}.{qual}"


autosummary_context = {"origin": _origin}
suppress_warnings = [
    # autosummary_context holds a function (_origin above); Sphinx only notes that it cannot
    # cache it, so the next build re-reads every page, which it does anyway for the API.
    "config.cache",
]
autodoc_default_options: dict = {}  # members and bases: set per object by the module template
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
# numpydoc renders the docstrings; autodoc lists the members (no second member table).
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False


def _fix_autosummary_summaries() -> None:
    """Make autosummary's one-line summaries stop at a sentence end, not inside markup.

    autosummary cuts a docstring's first sentence at the first ". "; its check that the cut
    leaves the inline markup intact re-parses the whole paragraph instead of the cut
    (Sphinx 7-9, ``extract_summary``), so ``"``min c^T z  s.t.  G z = b``"`` is cut after
    ``s.t.`` into an unterminated literal, a warning on a valid docstring. This wrapper
    keeps autosummary's summary when it parses cleanly and otherwise extends it sentence
    by sentence until it does (or the paragraph ends).
    """
    import re

    from docutils import nodes
    from docutils.utils import Reporter, new_document
    from sphinx.ext import autosummary as _as

    if not all(hasattr(_as, n) for n in ("extract_summary", "RSTStateMachine", "state_classes")):
        return  # another Sphinx: keep its own behaviour
    original = _as.extract_summary

    def clean(text: str, settings) -> bool:
        doc = new_document("", settings)
        doc.reporter = Reporter("", Reporter.SEVERE_LEVEL + 1, Reporter.SEVERE_LEVEL + 1)
        _as.RSTStateMachine(_as.state_classes, "Body").run([text], doc)
        return not any(doc.findall(nodes.system_message))

    def extract_summary(doc, settings) -> str:
        summary = original(doc, settings)
        if clean(summary, settings):
            return summary
        stanza = []
        for line in doc:
            if line.strip():
                stanza.append(line.strip())
            elif stanza:
                break
        sentences = re.split(r"\.\s+", " ".join(stanza))
        for i in range(1, len(sentences) + 1):
            candidate = ". ".join(sentences[:i]).rstrip(".") + "."
            if len(candidate) > len(summary) and clean(candidate, settings):
                return candidate
        return summary

    _as.extract_summary = extract_summary


_fix_autosummary_summaries()


def _cli_help_as_plain_text_when_not_rest() -> None:
    """Render an argparse help string that is not valid reST as the plain text it is.

    sphinx-argparse parses every help string as reST, but help strings are written for the
    terminal: ``config.json, *.safetensors`` opens an emphasis that never closes, which
    docutils reports on stderr (outside Sphinx's warnings, so ``-W`` never sees it) and
    renders as a red "problematic" marker. A help string that parses cleanly keeps its
    markup, with `single backticks` (the help strings' mark for a command) as literals; one
    that does not is shown verbatim.
    """
    try:
        from sphinxarg import ext as argext
    except ImportError:
        return
    from docutils import nodes
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.utils import Reporter, new_document

    original = getattr(argext, "render_list", None)
    if original is None:
        return

    def render_list(items, markdown_help, settings=None):
        if markdown_help:
            return original(items, markdown_help, settings)
        out = []
        for element in items:
            if not isinstance(element, str):
                out += original([element], markdown_help, settings)
                continue
            doc = new_document("", settings or get_default_settings(Parser))
            doc.reporter = Reporter("", Reporter.SEVERE_LEVEL + 1, Reporter.SEVERE_LEVEL + 1)
            Parser().parse(element + "\n", doc)
            if any(doc.findall(nodes.system_message)) or any(doc.findall(nodes.problematic)):
                out.append(nodes.paragraph(element, element))
            else:
                for ref in list(doc.findall(nodes.title_reference)):
                    ref.replace_self(nodes.literal(ref.astext(), ref.astext()))
                out += doc.children
        return out

    argext.render_list = render_list


_cli_help_as_plain_text_when_not_rest()

# -- nitpicky references (sphinx-build -n) ---------------------------------------------------
# Unresolved Python references that are not softrank's: ignored. Unresolved references to
# softrank's own names are first retried at the object's home (_resolve_through_python).
nitpick_ignore_regex = [
    # Third-party and standard-library objects: linked through intersphinx in an online
    # build; this build is offline, so they stay plain text.
    (r"py:.*", r"(numpy|np|scipy|mpmath|flint|highspy|torch|transformers|pandas|pyarrow"
               r"|distributed|dask|hypothesis|pytest|_pytest|matplotlib|cvxpy|sklearn"
               r"|pathlib|os|io|typing|collections|dataclasses|argparse|sqlite3|subprocess"
               r"|concurrent|threading|multiprocessing|enum|abc|types|json|csv)(\..*)?"),
    (r"py:class", r"(Path|PathLike|ndarray|NDArray|ArrayLike|Callable|Iterable|Iterator"
                  r"|Sequence|Mapping|Generator|Any|Self)"),
    # softrank's private base classes (named in "Bases:"), not part of the documented API
    (r"py:class", r"softrank(\.\w+)*\._\w+"),
]

# -- HTML ------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"softrank {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 8,
}
html_static_path = ["_static"]  # docs/_static: softrank.css, nothing fetched at view time
html_css_files = ["softrank.css"]
# The primary sidebar lists a section's pages; the top-level pages outside the theory and the
# API have none, and an empty sidebar narrowed their column until code blocks and tables
# scrolled sideways. Those pages go without it.
html_sidebars = {page.stem: [] for page in HERE.glob("*.md") if page.stem not in ("api", "index")}
html_show_sourcelink = False


def _drop_type_docstrings(app, what, name, obj, options, lines):
    """An undocumented module constant (no ``#:`` comment) would show the docstring of its
    value's type (``tuple``, ``dict``, numpy's ``ndarray``, ...); show its value only."""
    if what not in ("data", "attribute") or isinstance(obj, type) or not lines:
        return
    from sphinx.util.docstrings import prepare_docstring

    text = "\n".join(l.strip() for l in lines if l.strip())
    for doc in (getattr(obj, "__doc__", None), getattr(type(obj), "__doc__", None)):
        if isinstance(doc, str) and text and text in "\n".join(
                l.strip() for l in prepare_docstring(doc) if l.strip()):
            lines.clear()  # (autodoc may have cut a signature line off the docstring)
            return


def _point_to_home(app, what, name, obj, options, lines):
    """The docstring of a re-exported or aliased module-level name: a link to its home."""
    if what not in ("function", "class", "exception"):
        return
    module, _, item = name.rpartition(".")
    if module not in sys.modules:  # a nested name (a class's member), not a module's
        return
    home = _origin(module, item)
    if home:
        role = "func" if what == "function" else "class"
        lines[:] = [f"The same object as :{role}:`{home}`, documented there."]


def _canonical(target: str, module: str | None) -> str | None:
    """The full name under which ``target`` is documented, following Python's own lookup.

    ``target`` as written in ``module`` (a docstring's ``:class:`Certifier```, a signature's
    ``list[Certifier]`` under ``from __future__ import annotations``, or a public path
    through a re-export such as ``softrank.Operator.native_geometry``) is looked up in
    ``module``'s namespace, then as an absolute path; the first class or function on the way
    gives its home (``__module__``, ``__qualname__``) and the rest of the path is appended.
    None when nothing on the path has a home (module constants, unknown names).
    """
    import importlib

    parts = target.split(".")
    for base in ([module] if module else []) + [""]:
        full = (base.split(".") if base else []) + parts
        for i in range(len(full), 0, -1):
            try:
                obj = importlib.import_module(".".join(full[:i]))
            except Exception:  # not a module (or not importable): a shorter prefix
                continue
            rest = full[i:]
            break
        else:
            continue
        for j, name in enumerate(rest):
            obj = getattr(obj, name, None)
            if obj is None:
                break
            home, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
            if isinstance(home, str) and isinstance(qual, str):  # a class or a function
                return ".".join([home, qual] + rest[j + 1:])
    return None


def _resolve_through_python(app, env, node, contnode):
    """A Python cross-reference Sphinx did not find: retry it at the object's home
    (:func:`_canonical`). Names imported into a module, annotations and re-exported
    paths resolve; a name that is documented nowhere still warns."""
    if node.get("refdomain") != "py" or not node.get("reftarget"):
        return None
    target = node["reftarget"].lstrip("~.")
    home = _canonical(target, node.get("py:module"))
    if not home or home == target:
        return None
    py = env.domains["py"] if hasattr(env, "domains") else env.get_domain("py")
    return py.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], home, node,
                           contnode)


def setup(app):
    app.connect("missing-reference", _resolve_through_python)
    # before numpydoc (priority 500), which would otherwise parse the type's docstring
    app.connect("autodoc-process-docstring", _drop_type_docstrings, priority=100)
    app.connect("autodoc-process-docstring", _point_to_home, priority=100)

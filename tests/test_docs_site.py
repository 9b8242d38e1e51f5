"""The built documentation site as a reader sees it: opened from ``file://`` in a real browser
with no network, every formula typeset and nothing loaded from another host.

The browser tests (marker ``docs_site``) open the site that ``make docs`` built
(``docs/_build/html``, or ``$SOFTRANK_DOCS_SITE``) in headless Chromium with every host name
unresolvable (``--host-resolver-rules``: no network, whatever the machine has), let its
scripts run (``--virtual-time-budget``), read the rendered DOM (``--dump-dom``) and the
requests the page made (``--log-net-log``). ``make docs-check`` builds the site and runs them
(CI does: ``.ci/run``); ``make test`` leaves them out, since it builds no site. Chromium is
Debian's ``chromium`` (``$SOFTRANK_CHROMIUM`` names another binary); where it is missing the
tests install it with apt-get when they run as root, and are skipped with the reason when
they cannot -- unless ``SOFTRANK_DOCS_CHECK=required`` (set by ``make docs-check``), where a
missing site or browser fails them.

The helpers that read a page (:func:`math_report`, :func:`remote_assets`) are tested here on
hand-written pages, without a browser, in every ``make test``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

bs4 = pytest.importorskip("bs4", reason="needs beautifulsoup4 (the [docs] extra)")

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("SOFTRANK_DOCS_SITE") or ROOT / "docs" / "_build" / "html")
REQUIRED = os.environ.get("SOFTRANK_DOCS_CHECK", "") == "required"

#: The pages the issue that moved MathJax into the site measured: 488, 173 and 112 formulas.
NAMED_PAGES = ("theory/lower.html", "theory/checker.html", "theory/quantity.html")

#: Chromium's flags as this machine runs it headless as root with no network (no sandbox
#: for root; no background connections, which the closed network refuses many at a time).
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--mute-audio",
    # no host name resolves: nothing can be fetched even on a machine with a network
    "--host-resolver-rules=MAP * ~NOTFOUND",
)
#: Virtual milliseconds the page's scripts get before the DOM is read: MathJax typesets the
#: 488 formulas of theory/lower.html in well under this (virtual time runs as fast as the
#: page's work allows; it is not a wall-clock wait).
VIRTUAL_TIME_MS = 60_000

#: What a formula looks like when it was never typeset: Sphinx writes inline math as
#: ``\(...\)`` and display math as ``\[...\]`` for MathJax to replace; MyST's amsmath blocks
#: are bare ``\begin{...}`` environments. One match per formula: its opening delimiter.
RAW_TEX = re.compile(r"\\\(|\\\[|\\begin\{|\$\$")
#: Elements whose text is not prose: code shows TeX on purpose, scripts and styles are not
#: shown, and MathJax's own output holds no TeX.
_NOT_PROSE = ["script", "style", "code", "pre", "kbd", "samp", "textarea", "mjx-container"]
#: Elements and attributes through which a page loads something.
_LOADS = (("script", "src"), ("img", "src"), ("img", "srcset"), ("source", "src"),
          ("source", "srcset"), ("iframe", "src"), ("video", "src"), ("video", "poster"),
          ("audio", "src"), ("embed", "src"), ("object", "data"), ("track", "src"),
          ("input", "src"))
#: ``<link rel=...>`` values that load the target (``canonical``, ``next``, ... only name it).
_LINK_LOADS = {"stylesheet", "preload", "modulepreload", "prefetch", "preconnect",
               "dns-prefetch", "icon", "shortcut", "apple-touch-icon", "manifest",
               "mask-icon"}
_CSS_URL = re.compile(r"""url\(\s*(['"]?)(.*?)\1\s*\)|@import\s+(['"])(.*?)\3""", re.S)


# -- reading a page (no browser) -------------------------------------------------------------

@dataclass
class MathReport:
    """What a rendered page shows of its math.

    ``formulas``: Sphinx's math elements (``span.math``, ``div.math``); ``typeset``: those
    holding MathJax's output (``mjx-container``); ``errors``: MathJax's TeX errors
    (``mjx-merror``, with their messages); ``raw``: raw TeX delimiters left in the page's
    prose, with a little context each.
    """

    formulas: int = 0
    typeset: int = 0
    errors: list[str] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)


def math_report(html: str) -> MathReport:
    """Count the formulas of a rendered page and what is left of raw TeX in its prose."""
    soup = bs4.BeautifulSoup(html, "html.parser")
    out = MathReport()
    for el in soup.find_all(["span", "div"], class_="math"):
        out.formulas += 1
        out.typeset += el.find("mjx-container") is not None
    out.errors = [e.get("data-mjx-error") or e.get_text(" ", strip=True)
                  for e in soup.find_all("mjx-merror")]
    for text in soup.find_all(string=True):
        if isinstance(text, (bs4.Comment, bs4.Doctype, bs4.ProcessingInstruction)):
            continue
        if text.find_parent(_NOT_PROSE) is not None:
            continue
        for m in RAW_TEX.finditer(str(text)):
            out.raw.append(str(text)[max(0, m.start() - 30):m.end() + 30].strip())
    return out


def is_remote(url: str) -> bool:
    """Whether ``url`` names another host: an absolute http(s)/ws(s) address or a
    scheme-relative ``//host/...``; ``data:``, ``file:`` and relative paths are local."""
    url = url.strip()
    if url.startswith("//"):
        return True
    parts = urlsplit(url)
    return parts.scheme.lower() in ("http", "https", "ws", "wss", "ftp") or bool(
        parts.scheme.lower() not in ("", "data", "file", "blob", "about", "javascript",
                                     "mailto") and parts.netloc)


def _srcset_urls(value: str) -> list[str]:
    return [part.strip().split()[0] for part in value.split(",") if part.strip()]


def css_remote_urls(css: str) -> list[str]:
    """The remote ``url(...)`` and ``@import`` targets of a style sheet."""
    urls = [m.group(2) or m.group(4) or "" for m in _CSS_URL.finditer(css)]
    return [u for u in urls if is_remote(u)]


def remote_assets(html: str) -> list[str]:
    """Every script, style, font, image or frame a page loads from another host:
    ``<tag attr=...>`` of the loading elements, ``<link rel=stylesheet|preload|icon|...>``,
    and ``url()``/``@import`` in ``<style>`` elements and ``style`` attributes."""
    soup = bs4.BeautifulSoup(html, "html.parser")
    out = []
    for tag, attr in _LOADS:
        for el in soup.find_all(tag, attrs={attr: True}):
            urls = _srcset_urls(el[attr]) if attr == "srcset" else [el[attr]]
            out += [f"<{tag} {attr}={u}>" for u in urls if is_remote(u)]
    for el in soup.find_all("link", href=True):
        rel = {r.lower() for r in (el.get("rel") or [])}
        if rel & _LINK_LOADS and is_remote(el["href"]):
            out.append(f"<link rel={' '.join(sorted(rel))} href={el['href']}>")
    for el in soup.find_all("style"):
        out += [f"<style> {u}" for u in css_remote_urls(el.get_text())]
    for el in soup.find_all(style=True):
        out += [f"<{el.name} style> {u}" for u in css_remote_urls(el["style"])]
    return out


def page_requests(netlog: str) -> list[str]:
    """The URLs a page asked for, other than ``file:``, ``data:`` and ``blob:`` ones, from a
    Chromium net log (``--log-net-log``): every request job a document started (its
    ``initiator`` is the page's origin, ``"null"`` for a ``file://`` page), leaving out the
    browser's own background requests (initiator ``"not an origin"``)."""
    try:
        log = json.loads(netlog)
    except ValueError:  # a log cut short: Chromium closes the JSON when it exits cleanly
        log = json.loads(netlog.rstrip().rstrip(",") + "]}")
    kinds = log.get("constants", {}).get("logEventTypes", {})
    start = kinds.get("URL_REQUEST_START_JOB")
    out = []
    for event in log.get("events", []):
        params = event.get("params") or {}
        if event.get("type") != start or "url" not in params:
            continue
        if params.get("initiator", "not an origin") == "not an origin":
            continue
        if urlsplit(params["url"]).scheme.lower() not in ("file", "data", "blob"):
            out.append(params["url"])
    return out


# -- the helpers on hand-written pages ---------------------------------------------------------

RAW_PAGE = r"""<html><head>
<script defer src="https://cdn.jsdelivr.net/npm/mathjax@4/tex-mml-chtml.js"></script>
</head><body><p>Let <span class="math notranslate nohighlight">\(r_\varepsilon(A)\)</span> be
the rank.</p><div class="math notranslate nohighlight">\[\|A - B\|_\infty \le \varepsilon\]</div>
<pre>print(r"\(x\)")</pre><p>Code: <code>"\[y\]"</code></p></body></html>"""

TYPESET_PAGE = r"""<html><head><script src="../_static/mathjax/tex-chtml.js"></script>
<style>@font-face{src:url(../_static/mathjax/output/chtml/fonts/woff-v2/MathJax_Main.woff)}</style>
</head><body><p>Let <span class="math notranslate nohighlight"><mjx-container class="MathJax"
jax="CHTML"><mjx-math><mjx-mi>r</mjx-mi></mjx-math></mjx-container></span> be the rank.</p>
<div class="math notranslate nohighlight"><mjx-container display="true"><mjx-math>
<mjx-merror data-mjx-error="Undefined control sequence \foo"><mjx-mtext>\foo</mjx-mtext>
</mjx-merror></mjx-math></mjx-container></div>
<pre>print(r"\(x\)")</pre></body></html>"""


def test_math_report_counts_raw_tex_outside_code():
    r = math_report(RAW_PAGE)
    assert (r.formulas, r.typeset, r.errors) == (2, 0, [])
    # the inline formula's \( and the display's \[; the TeX in <pre> and <code> is code
    assert len(r.raw) == 2
    assert any("r_\\varepsilon(A)" in c for c in r.raw)


def test_math_report_counts_typeset_formulas_and_tex_errors():
    r = math_report(TYPESET_PAGE)
    assert (r.formulas, r.typeset, r.raw) == (2, 2, [])
    assert r.errors == ["Undefined control sequence \\foo"]


@pytest.mark.parametrize("url, remote", [
    ("https://cdn.jsdelivr.net/npm/mathjax@4/tex-mml-chtml.js", True),
    ("http://example.org/a.css", True),
    ("//fonts.example.org/a.woff2", True),
    ("HTTPS://EXAMPLE.ORG/x.js", True),
    ("wss://example.org/socket", True),
    ("../_static/mathjax/tex-chtml.js", False),
    ("_static/pygments.css?v=1", False),
    ("/abs/path.js", False),
    ("data:font/woff2;base64,AAAA", False),
    ("file:///work/site/x.js", False),
    ("#top", False),
])
def test_is_remote(url, remote):
    assert is_remote(url) is remote


def test_remote_assets_finds_every_way_a_page_loads_from_another_host():
    page = """<html><head>
    <script src="https://cdn.example.org/a.js"></script><script src="_static/b.js"></script>
    <link rel="stylesheet" href="https://fonts.example.org/css?family=X">
    <link rel="preload" as="font" href="//fonts.example.org/x.woff2">
    <link rel="icon" href="https://example.org/favicon.ico">
    <link rel="canonical" href="https://docs.example.org/page.html">
    <style>@import url("https://example.org/more.css"); .a{background:url(img/a.png)}</style>
    </head><body><a href="https://example.org/paper.pdf">a paper</a>
    <img src="_images/plot.png" srcset="_images/p.png 1x, https://example.org/p2.png 2x">
    <div style="background-image: url('https://example.org/bg.png')"></div>
    <iframe src="https://example.org/embed"></iframe></body></html>"""
    found = remote_assets(page)
    assert len(found) == 8, found  # links to other hosts (a href, canonical) load nothing
    assert not any("paper.pdf" in f or "docs.example.org" in f for f in found)
    assert remote_assets(TYPESET_PAGE) == []
    assert remote_assets(RAW_PAGE) == [
        "<script src=https://cdn.jsdelivr.net/npm/mathjax@4/tex-mml-chtml.js>"]


def test_css_remote_urls():
    css = """@import "../basic.css"; @import 'https://example.org/x.css';
    @font-face{src:url(fonts/a.woff2) format("woff2"),url("https://example.org/b.woff")}"""
    assert css_remote_urls(css) == ["https://example.org/x.css", "https://example.org/b.woff"]


def _netlog(*requests: tuple[str, str]) -> str:
    """A Chromium net log holding one request job per ``(initiator, url)``."""
    events = [{"type": 7, "source": {"id": i, "type": 1},
               "params": {"initiator": ini, "url": url, "method": "GET"}}
              for i, (ini, url) in enumerate(requests)]
    events.append({"type": 3, "source": {"id": 99, "type": 1},
                   "params": {"url": "https://cdn.example.org/not-a-job.js"}})
    return json.dumps({"constants": {"logEventTypes": {"URL_REQUEST_START_JOB": 7,
                                                        "REQUEST_ALIVE": 3}},
                       "events": events})


def test_page_requests_keeps_what_the_page_asked_for():
    log = _netlog(("null", "file:///site/_static/mathjax/tex-chtml.js"),
                  ("null", "https://tracker.example.org/hit"),
                  ("null", "data:font/woff2;base64,AAAA"),
                  ("not an origin", "https://accounts.google.com/ListAccounts"),
                  ("https://docs.example.org", "https://fonts.example.org/a.css"))
    assert page_requests(log) == ["https://tracker.example.org/hit",
                                  "https://fonts.example.org/a.css"]
    # a log cut short after an event (no closing brackets) is still read
    cut = log[:log.rindex("]")].rstrip() + ","
    assert page_requests(cut) == page_requests(log)
    assert page_requests(_netlog()) == []


# -- the built site in Chromium ----------------------------------------------------------------

def _unavailable(reason: str):
    """Skip with ``reason``, or fail where the check is required (``make docs-check``)."""
    __tracebackhide__ = True
    if REQUIRED:
        pytest.fail(f"SOFTRANK_DOCS_CHECK=required: {reason}", pytrace=False)
    pytest.skip(reason)


def _find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _install_chromium() -> str:
    """Install Debian's chromium with apt-get; returns why it could not ("" on success)."""
    if not shutil.which("apt-get"):
        return "Chromium is not installed and there is no apt-get to install it"
    if os.geteuid() != 0:
        return ("Chromium is not installed and the tests are not root to install it: "
                "apt-get install chromium (or SOFTRANK_CHROMIUM=/path/to/chrome)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
        try:
            run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            return f"{' '.join(cmd)} did not finish within 900 s"
        if run.returncode != 0:
            tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["no output"]
            return f"{' '.join(cmd)} failed ({run.returncode}): {tail[0]}"
    return ""


@pytest.fixture(scope="session")
def chromium() -> str:
    named = os.environ.get("SOFTRANK_CHROMIUM")
    if named:  # the caller's browser, or nothing: never installed over
        path = shutil.which(named)
        if path is None:
            _unavailable(f"SOFTRANK_CHROMIUM={named!r} is not an executable")
        return path
    path = _find_chromium()
    if path is None:
        why = _install_chromium()
        path = _find_chromium()
        if path is None:
            _unavailable(why or "apt-get installed chromium, but no chromium binary is on PATH")
    return path


@pytest.fixture(scope="session")
def site() -> Path:
    if not (SITE / "index.html").is_file():
        _unavailable(f"no built site at {SITE}: run `make docs` first")
    return SITE


@dataclass
class Rendered:
    """A page after its scripts ran: its DOM and the URLs it asked for beyond ``file:``."""

    dom: str
    requests: list[str]


def render(chromium: str, page: Path) -> Rendered:
    """``page`` (a file of the site) opened from ``file://`` in headless Chromium with no
    network: the DOM after its scripts ran and the requests it made (:func:`page_requests`)."""
    with tempfile.TemporaryDirectory(prefix="softrank-chromium-") as tmp:
        netlog = Path(tmp) / "net.json"
        run = subprocess.run(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp}/profile",
             f"--log-net-log={netlog}", f"--virtual-time-budget={VIRTUAL_TIME_MS}",
             "--dump-dom", page.resolve().as_uri()],
            capture_output=True, text=True, timeout=300)
        if run.returncode != 0 or "</html>" not in run.stdout or not netlog.is_file():
            tail = "\n".join(run.stderr.strip().splitlines()[-5:])
            pytest.fail(f"chromium could not render {page} (exit {run.returncode}):\n{tail}")
        return Rendered(run.stdout, page_requests(netlog.read_text("utf-8", errors="replace")))


@pytest.fixture(scope="session")
def rendered(site, chromium):
    """``rendered(name)``: the page ``name`` of the site, rendered once per session."""
    cache: dict[str, Rendered] = {}

    def get(name: str) -> Rendered:
        if name not in cache:
            cache[name] = render(chromium, site / name)
        return cache[name]

    return get


def _pages_with_math(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                  if 'class="math' in p.read_text("utf-8"))


@pytest.mark.docs_site
def test_every_page_with_math_is_typeset_offline(site, rendered):
    """Each page that holds a formula, opened from file:// with no network: every formula
    typeset by MathJax, none of them a TeX error (an undefined macro is one), and no raw TeX
    delimiter left in its prose. With MathJax from a CDN (the site before it shipped its
    own), theory/lower.html showed 0 of its 488 formulas typeset."""
    names = _pages_with_math(site)
    assert set(NAMED_PAGES) <= set(names), f"pages with math: {names}"
    bad, counts = [], {}
    for name in names:
        r = math_report(rendered(name).dom)
        counts[name] = (r.typeset, r.formulas)
        if r.formulas == 0 or r.typeset != r.formulas or r.errors or r.raw:
            bad.append(f"{name}: {r.typeset} of {r.formulas} formulas typeset, "
                       f"{len(r.errors)} TeX errors {r.errors[:3]}, {len(r.raw)} raw TeX "
                       f"formulas left {r.raw[:3]}")
    assert not bad, "\n".join(bad)
    # the three pages the offline fix was measured on hold their hundreds of formulas
    assert all(counts[n][0] >= 100 for n in NAMED_PAGES), {n: counts[n] for n in NAMED_PAGES}


@pytest.mark.docs_site
def test_rendered_pages_load_nothing_from_another_host(site, rendered):
    """Every page with math, and the index, tutorial and gallery, after their scripts ran:
    no request to anything but the site's own files (from Chromium's net log), and nothing
    in the rendered DOM (what MathJax adds: its components' scripts, the @font-face rules of
    its fonts) that names another host."""
    bad = []
    for name in _pages_with_math(site) + ["index.html", "tutorial.html", "gallery.html"]:
        page = rendered(name)
        bad += [f"{name}: requested {u}" for u in page.requests]
        bad += [f"{name}: {f}" for f in remote_assets(page.dom)]
    assert not bad, "\n".join(bad)


@pytest.mark.docs_site
def test_no_page_or_style_sheet_of_the_site_loads_from_another_host(site):
    """Every HTML page and every style sheet of the built site, as files: no script, style,
    font or image from another host (links to papers and repositories are fine)."""
    bad = []
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20, f"only {len(pages)} pages under {site}"
    for page in pages:
        found = remote_assets(page.read_text("utf-8", errors="replace"))
        bad += [f"{page.relative_to(site)}: {f}" for f in found]
    for sheet in sorted(site.rglob("*.css")):
        found = css_remote_urls(sheet.read_text("utf-8", errors="replace"))
        bad += [f"{sheet.relative_to(site)}: {f}" for f in found]
    assert not bad, f"{len(bad)} remote assets:\n" + "\n".join(bad[:40])


@pytest.mark.docs_site
def test_pages_without_math_hold_no_raw_tex(site):
    """A page without a formula element loads no MathJax, so TeX delimiters in its prose
    (a docstring's ``\\(x\\)`` outside a literal) would be shown raw."""
    with_math = set(_pages_with_math(site))
    bad = []
    for page in sorted(site.rglob("*.html")):
        name = page.relative_to(site).as_posix()
        if name not in with_math:
            raw = math_report(page.read_text("utf-8", errors="replace")).raw
            bad += [f"{name}: {c}" for c in raw]
    assert not bad, f"{len(bad)} raw TeX formulas:\n" + "\n".join(bad[:40])

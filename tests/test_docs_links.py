"""Every reference to the docs from code, tests and docs points at a page and section that
exist; nothing cites a document outside the repository."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [*(ROOT / "src" / "softrank").rglob("*.py"), *(ROOT / "tests").rglob("*.py"),
           *(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts),
           ROOT / "README.md", *(ROOT / "benchmarks").rglob("*.py"),
           *(ROOT / "examples").rglob("*.py")]
LINK = re.compile(r"docs/((?:[\w.-]+/)*[\w.-]+\.md)(?:#([\w-]+))?")


def slug(heading: str) -> str:
    """The anchor MyST (myst_heading_anchors) and GitHub give a heading."""
    text = re.sub(r"[`*_]", lambda m: "_" if m.group(0) == "_" else "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    out = set()
    for line in page.read_text().splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            out.add(slug(m.group(1)))
        m = re.match(r"\(([\w-]+)\)=\s*$", line)
        if m:
            out.add(m.group(1))
    return out


def _links():
    for path in SOURCES:
        text = path.read_text()
        for m in LINK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            yield f"{path.relative_to(ROOT)}:{line}", m.group(1), m.group(2)


def test_slug_matches_hand_worked_headings():
    assert slug("Subspace certificate") == "subspace-certificate"
    assert slug("l1 refit") == "l1-refit"
    assert slug("Size kappa") == "size-kappa"
    assert slug("Held-out add-on test") == "held-out-add-on-test"
    assert slug("Upper: witness (`kind = \"upper\"`)") == "upper-witness-kind--upper"  # as GitHub and MyST


def test_there_are_links_to_check():
    assert sum(1 for _ in _links()) > 100


def test_every_docs_link_resolves():
    bad = []
    cache: dict = {}
    for where, page, anchor in _links():
        target = ROOT / "docs" / page
        if not target.is_file():
            bad.append(f"{where}: docs/{page} does not exist")
            continue
        if anchor is not None:
            names = cache.setdefault(target, anchors(target))
            if anchor not in names:
                bad.append(f"{where}: docs/{page} has no section #{anchor}")
    assert bad == []


#: A citation of the specification the repository does not have, by a section number (with or
#: without a section sign or the word section), by its file name or as "the" specification.
OUTSIDE = [r"\bSPEC\b[\s,(]*(?:§|sections?\b|sec\.)?\s*\d", r"\bSPEC\.md\b", r"\bthe SPEC\b"]


def _cites_outside(line: str) -> bool:
    return any(re.search(pattern, line) for pattern in OUTSIDE)


@pytest.mark.parametrize("line", [
    "({S} section 14; docs/theory/families.md)", "The causal witness ({S} section 14): ...",
    "see {S} §14", "{S}§3.2", "{S} 14", "{S}, section 2", "{S} sec. 7", "as in {S}.md",
    "the {S} says so", "({S} sections 3-4)",
])
def test_the_outside_citations_are_recognised(line):
    # the name filled in here, so that this file's own scan does not match its examples
    assert _cites_outside(line.format(S="SPEC"))


@pytest.mark.parametrize("line", [
    "SPECS = minilm_specs([16], [0, 5], [3], 1, 0)", "_BERT_SPECIALS = (...)",
    "(docs/theory/causal.md#upper-witnesses)", "a spec section 14 in lower case is prose",
])
def test_names_that_only_look_like_a_citation_are_not(line):
    assert not _cites_outside(line)


def test_the_scan_covers_src_tests_docs_benchmarks_and_examples():
    tops = {p.relative_to(ROOT).parts[0] for p in SOURCES}
    assert {"src", "tests", "docs", "benchmarks", "examples", "README.md"} <= tops


def test_nothing_cites_a_document_outside_the_repository():
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in SOURCES
            for i, line in enumerate(p.read_text().splitlines(), 1)
            if _cites_outside(line)]
    assert hits == []


#: Dotted names in the docs that are files, not Python objects.
NOT_OBJECTS = {"softrank.lock"}


def test_every_softrank_name_in_the_docs_exists():
    import importlib

    bad = []
    for path in (ROOT / "docs").rglob("*.md"):
        if "_build" in path.parts:
            continue
        for name in sorted(set(re.findall(r"softrank(?:\.[A-Za-z_]\w*)+", path.read_text()))):
            if name in NOT_OBJECTS:
                continue
            parts = name.split(".")
            for i in range(len(parts), 0, -1):
                try:
                    obj, rest = importlib.import_module(".".join(parts[:i])), parts[i:]
                    break
                except ImportError:
                    continue
            for attr in rest:
                if not hasattr(obj, attr):
                    bad.append(f"{path.relative_to(ROOT)}: {name}")
                    break
                obj = getattr(obj, attr)
    assert bad == []

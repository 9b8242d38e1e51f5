"""One-way imports: the layering of softrank's modules (docs: the README's Layout).

The contracts live in pyproject.toml ([tool.importlinter]) and are checked by import-linter;
this file also asserts, on the import graph grimp builds (lazy imports inside functions
included), that no module imports itself back through others, that no private name crosses a
module boundary, and the two rules the checker's trust rests on.
"""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp", reason="import-linter is in the [dev] extra: "
                            "pip install -e '.[dev]'")

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "softrank"


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("softrank", include_external_packages=False)


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph.modules):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles(graph):
    assert _cycles(graph) == []


def test_cycle_detector_finds_a_planted_cycle(graph):
    g = grimp.build_graph("softrank", include_external_packages=False)
    g.add_import(importer="softrank.checker.float64", imported="softrank.harness.cli")
    assert any("softrank.harness.cli" in c and "softrank.checker.float64" in c
               for c in _cycles(g))


def test_the_checker_imports_only_itself_and_errors(graph):
    for m in graph.find_children("softrank.checker") | {"softrank.checker"}:
        for imported in graph.find_modules_directly_imported_by(m):
            assert imported.startswith("softrank.checker") or imported == "softrank.errors", (
                f"{m} imports {imported}")


def test_nothing_outside_the_harness_imports_it(graph):
    for m in graph.modules:
        if m.startswith("softrank.harness"):
            continue
        bad = [i for i in graph.find_modules_directly_imported_by(m)
               if i.startswith("softrank.harness")]
        assert bad == [], f"{m} imports {bad}"


def _private_imports() -> list[str]:
    """``from softrank.x import _name`` (or relative) where ``_name`` is not a module."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        pkg = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = pkg[:len(pkg) - (node.level - 1)] if node.level > 1 else pkg
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("softrank"):
                continue
            for alias in node.names:
                name = alias.name
                target = SRC.parent / (mod.replace(".", "/") + "/" + name)
                is_module = target.with_suffix(".py").exists() or target.is_dir()
                if name.startswith("_") and not name.startswith("__") and not is_module:
                    found.append(f"{rel}: from {mod} import {name}")
    return found


def test_no_private_name_crosses_a_module():
    assert _private_imports() == []


def test_import_linter_contracts_hold():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is in the [dev] extra: pip install -e '.[dev]'")
    res = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "0 broken" in res.stdout

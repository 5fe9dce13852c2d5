"""The core's layers form a DAG: its import graph, read with ast, has no cycle.

Every import counts: module-level ones, `TYPE_CHECKING` blocks and imports inside functions, because a
deferred import only hides a cycle until someone moves it, and no function may import. The calculator
registry imports the modules under calcs/ at run time (importlib, found by pkgutil); the graph adds an
edge from the registry to every calculator, so a calculator importing the registry is still a cycle.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

import calculators

PACKAGE = Path(calculators.__file__).parent
REGISTRY = "calculators.api"  # imports every calculator module at run time


@dataclass(frozen=True)
class Import:
    source: str  # importing module, dotted
    target: str  # imported module of the core, dotted
    function: str | None  # the enclosing function's name; None at module level


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _base(source: str, node: ast.ImportFrom) -> str:
    """The dotted module `from ... import` names, relative levels resolved against `source`."""
    if not node.level:
        return node.module or ""
    package = source if _is_package(source) else source.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _targets(source: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """Modules of the core this statement imports: a submodule named in `from pkg import name` counts as
    itself, not as its package (importing a submodule initialises its package in any case)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in MODULES}
    base = _base(source, node)
    subs = {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES}
    rest = len(subs) < len(node.names) and base in MODULES
    return subs | ({base} if rest else set())


def _imports_in(source: str, tree: ast.AST, function: str | None = None):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _imports_in(source, node, function or node.name)
        elif isinstance(node, ast.Lambda):
            yield from _imports_in(source, node, function or "<lambda>")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, function
        else:
            yield from _imports_in(source, node, function)


def imports() -> list[Import]:
    found = []
    for source, path in MODULES.items():
        for node, function in _imports_in(source, ast.parse(path.read_text(encoding="utf-8"))):
            found += [Import(source, target, function) for target in sorted(_targets(source, node))]
            if function and not _targets(source, node):  # a stdlib import in a function counts too
                found.append(Import(source, "<stdlib>", function))
    return found


def _defines_schema(path: Path) -> bool:
    return any(
        isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "SCHEMA" for t in n.targets)
        for n in ast.parse(path.read_text(encoding="utf-8")).body
    )


CALCULATOR_MODULES = sorted(m for m, p in MODULES.items() if m.startswith("calculators.calcs.") and _defines_schema(p))


def graph() -> dict[str, set[str]]:
    edges = {m: set() for m in MODULES}
    for imp in imports():
        if imp.target in MODULES and imp.target != imp.source:
            edges[imp.source].add(imp.target)
    edges[REGISTRY] |= set(CALCULATOR_MODULES)  # what the registry imports at run time
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_the_core():
    edges = graph()
    assert len(MODULES) > 25 and sum(map(len, edges.values())) > 50
    assert "calculators.model" in edges["calculators.params"]  # a plain `from .model import`
    assert "calculators.errors" in edges["calculators.calcs.ring"]  # `from ..errors import`


def test_finds_a_cycle_when_there_is_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


# Cycles still to remove, each with the change that removes it. The test fails both ways: on a new cycle,
# and on one of these once it is gone (then delete it here).
PENDING: list[list[str]] = []


def test_import_graph_is_acyclic():
    found = cycles(graph())
    assert [c for c in found if c not in PENDING] == []
    assert [c for c in PENDING if c not in found] == [], "a pending cycle is gone: delete it from PENDING"


def test_no_module_imports_inside_a_function():
    assert [imp for imp in imports() if imp.function] == []


def test_loading_sits_below_validation_and_resolution():
    # review §4 item 1: checks turns a dict into a record; the catalog reads and checks the data files;
    # resolve turns an id, a dict, a Hugging Face config or a record into a Model or Accelerator
    edges = graph()
    assert edges["calculators.checks"] <= {"calculators.model", "calculators.formats", "calculators.errors"}
    assert "calculators.checks" in edges["calculators.catalog"]
    assert edges["calculators.hf_import"] & {"calculators.resolve", "calculators.catalog"} == set()
    assert {"calculators.catalog", "calculators.checks", "calculators.hf_import"} <= edges["calculators.resolve"]


FILE_READERS = {"tomllib", "importlib.resources", "pathlib", "io", "open()"}


def _absolute_names(tree: ast.AST) -> set[str]:
    """What a module takes from outside the core: `import a.b` is a.b, `from a import b` is a and a.b;
    a call of the builtin open() is open()."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "open":
            names.add("open()")
    return names


def test_only_the_catalog_reads_files():
    # the browser's memory snapshot has no files: what the catalog has read by then is all there is
    readers = {
        m: sorted(_absolute_names(ast.parse(p.read_text(encoding="utf-8"))) & FILE_READERS) for m, p in MODULES.items()
    }
    assert {m: r for m, r in readers.items() if r} == {"calculators.catalog": ["importlib.resources", "tomllib"]}


def test_every_calculator_module_is_registered():
    names = calculators.calculator_names()
    assert len(CALCULATOR_MODULES) == len(names)
    for name in CALCULATOR_MODULES:
        module = importlib.import_module(name)
        assert module.SCHEMA["name"] in names, f"{name} defines SCHEMA but is not registered"
        assert calculators.schema(module.SCHEMA["name"]) == module.SCHEMA

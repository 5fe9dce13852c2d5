"""The project's shape (#12): hooks handle MkDocs events only, the build functions import no MkDocs,
no function anywhere is over 40 lines, the browser code is at most six modules of at most 200 lines,
and the DOM contract the calculator HTML writes is the one `sitegen.dom` declares."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from sitegen import markup, pages
from sitegen.dom import DOM

ROOT = Path(__file__).resolve().parents[2]
HOOKS = sorted((ROOT / "hooks").glob("*.py"))
SITEGEN = sorted((ROOT / "sitegen").glob("*.py"))
CORE = sorted((ROOT / "calculators").rglob("*.py"))
BROWSER = sorted((ROOT / "docs" / "assets").rglob("*.js"))


def _imports(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", HOOKS, ids=lambda p: p.name)
def test_a_hook_file_is_short_typed_and_says_when_it_runs(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 80
    assert "When it runs" in (ast.get_docstring(tree) or "")
    events = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("on_")]
    assert events and all(f.returns is not None for f in events), "typed MkDocs events"
    assert "sys" not in _imports(tree), "no sys.path surgery: sitegen is a package"


@pytest.mark.parametrize("path", SITEGEN, ids=lambda p: p.name)
def test_the_build_functions_import_no_mkdocs(path):
    assert "mkdocs" not in _imports(ast.parse(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("path", HOOKS + SITEGEN + CORE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_function_over_40_lines(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    long = [
        f"{f.name}: {f.end_lineno - f.lineno + 1}"
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.end_lineno - f.lineno + 1 > 40
    ]
    assert long == []


def test_the_browser_code_is_six_modules_or_fewer_none_over_200_lines():
    assert 0 < len(BROWSER) <= 6, [p.name for p in BROWSER]
    lengths = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in BROWSER}
    assert max(lengths.values()) <= 200, lengths


def test_the_calculator_html_uses_only_the_declared_data_attributes():
    block = markup.parse_block("name: memory\ninputs: {model: llama-3.1-8b}\nplot: by_tensor_parallel\n")
    html = pages.block_html(block, "calc-x")
    used = set(re.findall(r"\s(data-[a-z-]+)", html))
    assert used <= set(DOM.values())
    assert set(DOM.values()) - used == {"data-error"}  # the one the script makes, on an input's first error
    assert all(v == f"data-{k}" for k, v in DOM.items()) and len(DOM) == 15

"""Generated HTML compared with committed files, as pymdown-extensions' tests/test_syntax.py does.

A changed template, chart or hub renderer fails here with a diff; an intended change regenerates the
files (`UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/sitegen/test_golden_html.py`) in the same
commit, whose message says what changed. Files keep one tag per line (`><` split) so diffs read.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from calculators import page
from sitegen import blocks, hub, markup, pages, series, svgplot

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
RUNTIME = {
    "worker": "../assets/calculators/worker.js",
    "pyodide": "../assets/vendor/pyodide/0/",
    "wheel": "../assets/wheels/x/core.whl",
    "snapshot": "../assets/snapshots/x/calculators.snapshot",
    "plotly": "../assets/vendor/plotly/0/plotly-cartesian.min.js",
}

BLOCKS = {  # a plot and a model select; two preset selects and a bar chart; defaults, no plot
    "block-kv-cache-plot": "name: kv_cache\ntitle: KV cache of Llama 3.1 70B\n"
    "inputs: {model: llama-3.1-70b, context_tokens: 32768}\nplot: kv_vs_context\n",
    "block-memory-bar": "name: memory\ninputs: {model: llama-3.1-8b, hardware: h100-sxm}\nplot: by_tensor_parallel\n",
    "block-cost-defaults": "name: cost\n",
}
CHARTS = {  # one of each series kind the core emits, and a log-axis line with operating points
    "svg-line": ("kv_cache", {}, "kv_vs_context"),
    "svg-bar": ("memory", {}, "by_tensor_parallel"),
    "svg-scatter": ("roofline", {}, "tokens_per_user_vs_gpu"),
    "svg-line-log-points": ("roofline", {}, "roofline"),
}


def readable(html: str) -> str:
    return html.replace("><", ">\n<").rstrip("\n") + "\n"


def check(name: str, html: str, update: bool = UPDATE) -> None:
    path, now = GOLDEN / f"{name}.html", readable(html)
    if update:
        path.write_text(now, encoding="utf-8")
    before = path.read_text(encoding="utf-8") if path.exists() else ""
    if before != now:
        diff = "".join(list(difflib.unified_diff(before.splitlines(True), now.splitlines(True), name, "now"))[:60])
        pytest.fail(f"{path.name} differs from the golden file:\n{diff}")


def _fake_href(src: str, anchor: str) -> str:
    return ("/" + src if src != series.HOME else "/") + (f"#{anchor}" if anchor else "")


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_calculator_block(name):
    block = markup.parse_block(BLOCKS[name])
    check(name, pages.block_html(block, f"calc-{name}"))


@pytest.mark.parametrize("name", sorted(CHARTS))
def test_svg_chart(name):
    calc, inputs, plot = CHARTS[name]
    check(name, svgplot.svg_chart(page.present(calc, inputs)["result"]["series"][plot]))


def test_page_config():
    check("page-config", blocks.page_config_html(RUNTIME, pages.preset_choices()))


def test_hub():
    s, written = series.load_series(), frozenset({1, 2, 3, 4, 5})
    check(
        "hub",
        "\n".join(f(s, written, _fake_href) for f in (hub.render_diagram, hub.render_part_list, hub.render_routes)),
    )


def test_a_changed_template_fails(monkeypatch):
    """The check itself bites: one changed word in the results table fails it (never rewrites the file)."""
    original = blocks.results_html
    monkeypatch.setattr(blocks, "results_html", lambda shown: original(shown).replace("Results", "Outputs"))
    block = markup.parse_block(BLOCKS["block-cost-defaults"])
    html = pages.block_html(block, "calc-block-cost-defaults")
    with pytest.raises(pytest.fail.Exception, match="differs from the golden file"):
        check("block-cost-defaults", html, update=False)

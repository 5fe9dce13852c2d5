"""The sizing verdict embeds in any part as a ```calculator block: its verdict in words comes first,
under the title and above the form; a calculator without one writes none."""

from __future__ import annotations

import re

from calculators.api import run
from sitegen import markup, pages


def test_a_sizing_block_in_a_part_leads_with_its_verdict():
    block = markup.parse_block("name: sizing\ninputs: {model: llama-3.1-70b, target_users: 50}\n")
    html = pages.block_html(block, "calc-sizing-1")
    verdict = run("sizing", {"model": "llama-3.1-70b", "target_users": 50})["headline"]
    found = re.search(r'<p class="calc__headline"[^>]*>([^<]*)</p>', html)
    assert found and found.group(1) == verdict.replace("'", "&#x27;")
    assert html.index("calc__headline") < html.index("calc__desc") < html.index("<form")


def test_a_calculator_without_a_verdict_writes_none():
    html = pages.block_html(markup.parse_block("name: memory\n"), "calc-memory-1")
    assert "calc__headline" not in html

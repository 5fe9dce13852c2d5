"""The sizing verdict embeds in any part as a ```calculator block: its verdict in words comes first,
under the title and above the form; every other calculator leads with its headline results."""

from __future__ import annotations

import re

import calculators
from calculators import page
from calculators.api import run
from sitegen import markup, pages


def test_a_sizing_block_in_a_part_leads_with_its_verdict():
    block = markup.parse_block("name: sizing\ninputs: {model: llama-3.1-70b, target_users: 50}\n")
    html = pages.block_html(block, "calc-sizing-1")
    verdict = run("sizing", {"model": "llama-3.1-70b", "target_users": 50})["headline"]
    found = re.search(r'<p class="calc__headline"[^>]*>([^<]*)</p>', html)
    assert found and found.group(1) == verdict.replace("'", "&#x27;")
    assert html.index("calc__headline") < html.index("calc__desc") < html.index("<form")


def test_every_calculator_leads_with_its_headline_results():
    """Reader walk #35: the answer before the form (on a phone, eleven inputs came first)."""
    html = pages.block_html(markup.parse_block("name: memory\n"), "calc-memory-1")
    found = re.search(r'<p class="calc__headline"[^>]*>([^<]*)</p>', html)
    assert found and found.group(1).startswith("Sequences that fit at this context: ")
    assert html.index("calc__headline") < html.index("<form")


def test_every_headline_names_outputs_its_calculator_has():
    for name, keys in page.HEADLINE.items():
        outputs = {o["key"] for o in calculators.schema(name)["outputs"]}
        assert set(keys) <= outputs, name
    for name in calculators.calculator_names():
        assert page.present(name, {})["headline"], name

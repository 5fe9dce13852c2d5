"""A block's data-inputs: the inputs its worked example sets away from the defaults, as compact JSON that an
HTML parser gives back unchanged (the attribute is single-quoted, so JSON's double quotes stand bare)."""

from __future__ import annotations

import json
from html.parser import HTMLParser

from calculators.api import schema
from sitegen import blocks, markup, pages
from sitegen.dom import DOM


class _RootAttrs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.attrs: dict = {}

    def handle_starttag(self, tag, attrs):
        self.attrs = self.attrs or dict(attrs)  # the first tag: the block's root


def _root_inputs(html: str) -> dict:
    parser = _RootAttrs()
    parser.feed(html)
    return json.loads(parser.attrs[DOM["inputs"]])


def _html(yaml: str) -> str:
    return pages.block_html(markup.parse_block(yaml), "calc-x")


def test_only_the_inputs_set_away_from_their_defaults_are_written():
    assert _root_inputs(_html("name: goodput\n")) == {}
    set_two = _html("name: goodput\ninputs: {seed: 7, request_rate_per_s: 3.5}\n")
    assert _root_inputs(set_two) == {"seed": 7, "request_rate_per_s": 3.5}
    default = next(s["default"] for s in schema("goodput")["inputs"] if s["key"] == "seed")
    assert _root_inputs(_html(f"name: goodput\ninputs: {{seed: '{default}'}}\n")) == {}  # "0" is the default 0


def test_quotes_apostrophes_and_markup_in_a_value_survive_the_attribute():
    tricky = {"model": {"name": "O'Brien's \"7B\" <fork> & co"}, "n": 1}
    text = json.dumps(tricky, separators=(",", ":"))
    html = f"<div {DOM['inputs']}='{blocks._single_quoted(text)}'></div>"
    assert _root_inputs(html) == tricky
    assert "&quot;" not in html and "'O" not in html

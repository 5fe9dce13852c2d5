"""The search index holds what readers search for, not the calculators' controls.

Every calculator carries its presets' names in its selects and its results in tables;
indexed, they would make a search for "Llama 3.1 70B" hit every calculator on every page,
and they made the index a quarter bigger, which Material's search worker rebuilds on
each page load. The build marks those parts `data-search-exclude`.
"""
from __future__ import annotations

import json

from calculators import schema


def _docs(site) -> list[dict]:
    return json.loads((site / "search" / "search_index.json").read_text())["docs"]


def _text(site, page: str) -> str:
    return " ".join(d["title"] + " " + d["text"] for d in _docs(site) if d["location"].split("#")[0] == page)


def test_calculator_controls_and_results_are_not_indexed(built_site):
    for page in ("workbench/", "parts/04-kv-cache/"):
        text = _text(built_site, page)
        assert text, f"{page} is missing from the search index"
        for control_text in ("Copy link", "Download CSV", "Show the work", "Results computed for these",
                             "Llama 2 13BOPT-13B", "KV per additional token (full-attention layers)"):
            assert control_text not in text, f"{control_text!r} from a calculator is in {page}'s search entry"


def test_calculator_titles_and_descriptions_stay_findable(built_site):
    text = _text(built_site, "workbench/")
    assert schema("kv_cache")["description"][:60] in text

"""The search index holds what readers search for, not the calculators' controls.

Every calculator carries its presets' names in its selects and its results in tables;
indexed, they would make a search for "Llama 3.1 70B" hit every calculator on every page,
and they made the index a quarter bigger, which Material's search worker rebuilds on
each page load. The build marks those parts `data-search-exclude`.
"""
from __future__ import annotations

import json

from calculators import schema
from conftest import watch


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


# ---- Material's index is built after Python has started (overrides/partials/search-later.html) ----

# Logs when the index reaches Material's search worker (its "setup" message, type 0).
LOG_SETUP = """const post = Worker.prototype.postMessage;
Worker.prototype.postMessage = function (message, ...rest) {
  if (message && message.type === 0) window.__indexPostedAt = performance.now();
  return post.call(this, message, ...rest);
};"""


def _slow_snapshot(route):
    import time
    time.sleep(3)   # Python stays busy starting for 3 s more
    route.continue_()


def _open(browser, server, path, slow_python=False):
    context = browser.new_context()
    context.add_init_script(LOG_SETUP)
    if slow_python:
        context.route("**/calculators.snapshot", _slow_snapshot)
    page = context.new_page()
    log = watch(context, page, server.origin)
    page.goto(server.origin + path, wait_until="load")
    return context, page, log.errors


def _search_finds(page, query: str, expect: str):
    page.click(".md-search__input")
    page.keyboard.type(query, delay=30)   # a reader's keystrokes, at once, index ready or not
    page.wait_for_function("([q]) => [...document.querySelectorAll('.md-search-result__item')]"
                           ".some(i => i.textContent.includes(q))", arg=[expect], timeout=30_000)


def test_search_index_waits_for_python_then_works(browser, server):
    context, page, errors = _open(browser, server, "/workbench/", slow_python=True)
    page.wait_for_timeout(1500)
    assert page.evaluate("window.__indexPostedAt") is None, "the index was built while Python was starting"
    page.wait_for_function("() => [...document.querySelectorAll('[data-calc-status]')]"
                           ".some(s => s.textContent.startsWith('Live'))", timeout=120_000)
    page.wait_for_function("() => window.__indexPostedAt !== undefined", timeout=10_000)
    _search_finds(page, "paged attention", "PagedAttention")
    assert errors == []
    context.close()


def test_search_index_is_built_at_load_on_pages_without_python(browser, server):
    context, page, errors = _open(browser, server, "/glossary/")
    page.wait_for_function("() => window.__indexPostedAt !== undefined", timeout=10_000)
    _search_finds(page, "goodput", "Goodput")
    assert errors == []
    context.close()


def test_going_to_search_builds_the_index_at_once(browser, server):
    context, page, errors = _open(browser, server, "/workbench/", slow_python=True)
    page.click(".md-search__input")
    page.wait_for_function("() => window.__indexPostedAt !== undefined", timeout=2_000)
    _search_finds(page, "KV cache", "KV cache")
    assert errors == []
    context.close()

"""The search index holds what readers search for, not the calculators' controls.

Every calculator carries its presets' names in its selects and its results in tables;
indexed, they would make a search for "Llama 3.1 70B" hit every calculator on every page,
and they made the index a quarter bigger, which Material's search worker rebuilds on
each page load. The build marks those parts `data-search-exclude`.
"""
from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

from calculators import schema
from conftest import watch


def _docs(site) -> list[dict]:
    return json.loads((site / "search" / "search_index.json").read_text())["docs"]


def _text(site, page: str) -> str:
    return " ".join(d["title"] + " " + d["text"] for d in _docs(site) if d["location"].split("#")[0] == page)


def test_calculator_controls_and_results_are_not_indexed(built_site):
    for page in ("workbench/memory/", "parts/04-kv-cache/"):
        text = _text(built_site, page)
        assert text, f"{page} is missing from the search index"
        for control_text in ("Copy link", "Download CSV", "Show the work", "Results computed for these",
                             "Llama 2 13BOPT-13B", "KV per additional token (full-attention layers)"):
            assert control_text not in text, f"{control_text!r} from a calculator is in {page}'s search entry"


def test_calculator_titles_and_descriptions_stay_findable(built_site):
    text = _text(built_site, "workbench/memory/")
    assert schema("kv_cache")["description"][:60] in text


# ---- Material's index is built after Python has started (overrides/partials/search-later.html) ----

def test_search_deferral_matches_pinned_material():
    """The hack in search-later.html holds Material's search worker by its URL in #__config and its
    index by the setup message's type, 0: both must still be so in the installed Material."""
    assert version("mkdocs-material") == "9.8.2", "Material changed: re-check overrides/partials/search-later.html"
    import material
    templates = Path(material.__file__).parent / "templates"
    assert re.search(r'"search": "assets/javascripts/workers/search\.\w+\.min\.js" \| url',
                     (templates / "base.html").read_text()), "the search worker's URL left #__config"
    bundle = next((templates / "assets" / "javascripts").glob("bundle.*.min.js")).read_text()
    assert re.search(r"\w+\(\w+\.search,\w+\)", bundle), "mountSearch: setupSearchWorker(config.search, index$)"
    assert re.search(r"function \w+\(\w+,\w+=new Worker\(\w+\)\)", bundle), "watchWorker(url, new Worker(url))"
    assert ".next({type:0,data:{config:" in bundle, "the index is no longer sent as {type: 0 (SETUP), data}"


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
    context, page, errors = _open(browser, server, "/workbench/memory/", slow_python=True)
    page.wait_for_timeout(1500)
    assert page.evaluate("window.__indexPostedAt") is None, "the index was built while Python was starting"
    page.wait_for_function("() => [...document.querySelectorAll('[data-calc-status]')]"
                           ".some(s => s.textContent.startsWith('Live'))", timeout=120_000)
    page.wait_for_function("() => window.__indexPostedAt !== undefined", timeout=10_000)
    assert page.evaluate("Object.getPrototypeOf(window.llmsi.runtime.worker) === Worker.prototype"), \
        "the calculators' worker went through the search worker's patch"
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
    context, page, errors = _open(browser, server, "/workbench/memory/", slow_python=True)
    page.click(".md-search__input")
    page.wait_for_function("() => window.__indexPostedAt !== undefined", timeout=2_000)
    _search_finds(page, "KV cache", "KV cache")
    assert errors == []
    context.close()

"""The glossary page in a browser: its tables sort and filter (tables.js)."""
from __future__ import annotations


# ---- in the browser ---------------------------------------------------------------------

def test_tables_sort_and_filter(open_page):
    page, log = open_page("/glossary/")
    wrapper = page.locator('.data-table[data-caption="Models"]')
    wrapper.get_by_label("Filter models").fill("llama")
    visible = wrapper.locator("tbody tr:not([hidden])")
    assert 0 < visible.count() < wrapper.locator("tbody tr").count()
    header = wrapper.locator("th").nth(1)
    header.locator("button").click()
    assert header.get_attribute("aria-sort") == "ascending"
    layers = [int(t.replace(",", "")) for t in visible.locator("td:nth-child(2)").all_inner_texts()]
    assert layers == sorted(layers)
    header.locator("button").click()
    assert header.get_attribute("aria-sort") == "descending"
    assert log.errors == []

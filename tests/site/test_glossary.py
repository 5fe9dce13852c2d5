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


def test_a_rows_page_filter_keeps_the_engines_name_and_finds_its_rows(open_page):
    # the calibration's SGLang rows page: the filter's label keeps "SGLang" (a leading capital is lowered only when
    # the first word is a plain one), and filtering by a chip leaves that chip's rows
    from calculators import calibration

    page, log = open_page("/calibration-rows-sglang/")
    wrapper = page.locator('.data-table[data-caption="Every row of SGLang, predicted"]')
    wrapper.get_by_label("Filter every row of SGLang, predicted").fill("B300")
    b300 = sum(1 for r in calibration.rows() if r["engine"] == "SGLang" and r["hardware"] == "b300")
    assert b300 > 0 and wrapper.locator("tbody tr:not([hidden])").count() == b300
    assert log.errors == []

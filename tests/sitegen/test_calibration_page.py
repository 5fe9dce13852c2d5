"""The calibration page's tables (sitegen/calibration.py): every ledger row appears once, the summary has a
line per kind, and a misspelt marker fails the build instead of printing as text."""

from __future__ import annotations

import re

import pytest

from calculators import calibration
from sitegen.calibration import ROWS_PAGES, SHORT_KIND, rows_page, render_calibration


def _body_lines(markdown: str) -> list[str]:
    """A rendered table's data lines (the head and the |---| line dropped)."""
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    return lines[2:]


def test_every_row_and_kind_is_on_the_page():
    assert len(_body_lines(render_calibration("<!-- calibration:summary -->"))) == len(calibration.KINDS) + 1
    sources = calibration.ledger()["source"]
    page = render_calibration("<!-- calibration:sources -->")
    assert len(_body_lines(page)) == len(sources) and all(s["url"] in page for s in sources)
    per_page = [_body_lines(render_calibration(f"<!-- calibration:rows-{f} -->")) for f in ROWS_PAGES]
    assert sum(len(lines) for lines in per_page) == len(calibration.rows()) and all(per_page)


def test_each_rows_page_holds_its_engine_family_only():
    # SGLang's rows on their page, every other engine's on the other: the two tables split the ledger between them
    sglang = _body_lines(render_calibration("<!-- calibration:rows-sglang -->"))
    other = _body_lines(render_calibration("<!-- calibration:rows-other -->"))
    assert all(line.split("|")[3].strip().startswith("SGLang") for line in sglang)
    assert not any(line.split("|")[3].strip().startswith("SGLang") for line in other)
    assert len(sglang) == sum(1 for r in calibration.rows() if rows_page(r["engine"]) == "sglang")


def test_unknown_marker_fails():
    with pytest.raises(ValueError, match="unknown markers"):
        render_calibration("<!-- calibration:summry -->")
    with pytest.raises(ValueError, match="calibration-rows-sglang.md: unknown markers"):
        render_calibration("<!-- calibration:rows-sglng -->", "calibration-rows-sglang.md")


def test_the_rows_table_marks_the_chat_template_parse_on_its_rows_only():
    # the "Not in the core's model" column: DeepSeek-R1's v0.11.0 chat runs carry it, gpt-oss's (harmony) do not
    lines = _body_lines(render_calibration("<!-- calibration:rows-other -->"))
    marked = [line for line in lines if "template parse" in line.split("|")[-3]]
    assert len(marked) == sum(1 for r in calibration.rows() if calibration.parses_chat_template(r))
    assert any("deepseek-r1" in line and "v0.11.0" in line for line in marked)
    assert not any("gpt-oss" in line for line in marked)


def test_every_rows_group_link_lands_on_a_line_of_the_groups_table():
    # the rows table names each row's group by a link; the groups table holds the publication, where in it, the engine
    # build and the parallelism once per group (the page stays under its byte budget: tests/bench.py)
    every_target = set()
    for family in ROWS_PAGES:
        rows = _body_lines(render_calibration(f"<!-- calibration:rows-{family} -->"))
        groups = render_calibration(f"<!-- calibration:groups-{family} -->")
        targets = set(re.findall(r'<span id="(g\d+)"></span>', groups))
        links = [re.search(r"\(#(g\d+)\)", line.split("|")[-2]).group(1) for line in rows]
        assert set(links) == targets and not targets & every_target
        every_target |= targets
    assert len(every_target) == len(calibration.ledger()["group"])
    assert set(SHORT_KIND) == set(calibration.KINDS)

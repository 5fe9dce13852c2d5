"""The workbench's families: every calculator on exactly one page, every family with its page."""

from __future__ import annotations

from collections import Counter

import calculators
from sitegen import pages, workbench
from sitegen.series import build_nav, load_series

DOCS = workbench.DATA.parents[2] / "docs"


def test_every_calculator_is_in_exactly_one_family():
    counts = Counter(name for f in workbench.families() for name in f.calculators)
    assert set(counts) == set(calculators.calculator_names()), "add a new calculator to sitegen/data/workbench.toml"
    assert all(n == 1 for n in counts.values()), [name for name, n in counts.items() if n > 1]


def test_each_family_has_its_page_with_its_marker():
    for family in workbench.families():
        text = (DOCS / family.src).read_text(encoding="utf-8")
        assert f"<!-- workbench:{family.slug} -->" in text, family.src
    assert "<!-- workbench:index -->" in (DOCS / workbench.INDEX).read_text(encoding="utf-8")


def test_a_family_page_gets_a_block_per_calculator_with_the_shared_link_id():
    family = workbench.families()[0]
    markdown = pages.expand_workbench(f"<!-- workbench:{family.slug} -->")
    for name in family.calculators:
        assert f"name: {name}\n" in markdown and f"id: workbench-{workbench.anchor(name)}\n" in markdown
    assert markdown.count("```calculator") == len(family.calculators)


def test_the_index_links_every_calculator_to_its_family_page():
    markdown = pages.expand_workbench("<!-- workbench:index -->")
    for family in workbench.families():
        for name in family.calculators:
            assert f"({family.src}#{workbench.anchor(name)})" in markdown


def test_an_unknown_family_is_named():
    try:
        pages.expand_workbench("<!-- workbench:nope -->")
    except KeyError as e:
        assert "nope" in str(e)
    else:
        raise AssertionError("an unknown family was accepted")


def test_the_nav_lists_the_index_then_each_family():
    series = load_series()
    nav = build_nav(series, frozenset(), DOCS)
    entry = next(e["Workbench"] for e in nav if "Workbench" in e)
    assert entry[0] == {"All calculators": workbench.INDEX}
    assert [list(e.values())[0] for e in entry[1:]] == [f.src for f in workbench.families()]


def test_every_calculator_has_one_home_where_chained_results_open():
    """A chained result for a calculator not on the page opens its block on its first family page (tables.js)."""
    from calculators.api import calculator_names

    homes = workbench.homes()
    assert set(homes) == set(calculator_names())
    for name, (path, block) in homes.items():
        family = next(f for f in workbench.families() if name in f.calculators)
        assert path == f"workbench/{family.slug}/" and block == f"workbench-{workbench.anchor(name)}"

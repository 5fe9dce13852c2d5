"""The glossary's terms: anchors in both directions, abbreviations, slugs from the series (no browser)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sitegen import series as S
from sitegen import terms as G

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def terms():
    return G.load_terms()


# ---- checks on Markdown sources (also run against fake parts below) -------------------


def heading_ids(markdown: str) -> set[str]:
    """Ids Markdown gives the headings of a part: `{#id}` if pinned, else the toc slug."""
    ids = set()
    for line in re.sub(r"```.*?```", "", markdown, flags=re.S).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*(?:\{[^}]*#([\w-]+)[^}]*\})?\s*$", line)
        if m:
            ids.add(m.group(2) or G.slugify(m.group(1)))
    return ids


def anchor_ids(markdown: str) -> set[str]:
    """Heading ids plus inline ids pinned on a defining phrase: `**term**{#id}` (attr_list)."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return heading_ids(markdown) | set(re.findall(r"\*{1,2}[^*\n]+\*{1,2}\{#([\w-]+)\}", text))


ABBR = re.compile(r"(?<![\w/.-])([A-Z][A-Z0-9]*[A-Z]s?|[A-Z]{2,}/[a-zA-Z]+)(?![\w-])")


def abbreviations_used(markdown: str) -> set[str]:
    """All-capitals tokens in prose (code, maths, links, HTML and attributes removed)."""
    text = re.sub(r"```.*?```|~~~.*?~~~", "", markdown, flags=re.S)
    text = re.sub(r"^\*\[[^\]]+\]:.*$", "", text, flags=re.M)  # abbreviation definitions
    for pattern in (
        r"`[^`]*`",
        r"\$\$.*?\$\$",
        r"\$[^$\n]*\$",
        r"\]\([^)]*\)",
        r"\{[#.:][^}]*\}",
        r"<[^>]+>",
        r"\{\{.*?\}\}",
        r"https?://\S+",
    ):
        text = re.sub(pattern, " ", text, flags=re.S)
    return {w for w in ABBR.findall(text) if not any(c.isdigit() for c in w)}


def missing_anchors(terms, part: int, markdown: str) -> list[str]:
    ids = anchor_ids(markdown)
    return sorted({t.anchor for t in terms.terms if t.part == part} - ids)


def undefined_abbreviations(terms, markdown: str) -> list[str]:
    known = {t.abbr for t in terms.terms if t.abbr} | {a for a, _ in terms.expansions} | terms.ignore
    return sorted(w for w in abbreviations_used(markdown) if w not in known and w.rstrip("s") not in known)


def written(terms) -> dict[int, str]:
    series = S.load_series()
    return {n: (DOCS / series.part(n).src).read_text(encoding="utf-8") for n in S.written_parts(series, DOCS)}


# ---- the term list ---------------------------------------------------------------------


def test_core_terms_are_in_the_glossary(terms):
    names = {t.term.lower() for t in terms.terms} | {t.abbr for t in terms.terms}
    for word in (
        "decode",
        "prefill",
        "memory wall",
        "arithmetic intensity",
        "roofline",
        "ridge point",
        "HBM",
        "TTFT",
        "TPOT",
        "ITL",
        "goodput",
        "SLO",
        "percentile",
        "kv cache",
        "GQA",
        "MQA",
        "MLA",
        "SWA",
        "pagedattention",
        "block table",
        "internal fragmentation",
        "external fragmentation",
        "copy-on-write",
        "preemption",
        "recompute",
        "swap",
        "continuous batching",
        "TP",
        "all-reduce",
        "nvlink",
        "MoE",
    ):
        assert word in names, word


def test_every_part_terms_name_is_a_part_of_the_series(terms):
    numbers = {p.number for p in S.load_series().parts}
    assert set(terms.headings) <= numbers and {t.part for t in terms.terms} <= numbers
    data = {"part": [{"number": 21, "headings": []}], "term": []}
    with pytest.raises(ValueError, match="part 21 is not a part of the series"):
        G.parse_terms(data, frozenset(numbers))


def test_the_glossary_covers_every_written_part(terms):
    """Issue #17: the glossary covers all twenty parts: each written part defines terms of its own (at least
    five) and lists the headings the glossary links to."""
    parts = written(terms)
    assert len(parts) == len(S.load_series().parts) == 20
    for n in parts:
        assert sum(t.part == n for t in terms.terms) >= 5, f"part {n}"
        assert terms.headings.get(n), f"part {n} has no headings block"


def test_every_term_anchor_exists_in_its_written_part(terms):
    for n, markdown in written(terms).items():
        assert missing_anchors(terms, n, markdown) == [], f"part {n}"


def test_every_abbreviation_a_written_part_uses_is_in_the_glossary(terms):
    problems = {n: undefined_abbreviations(terms, md) for n, md in written(terms).items()}
    assert {n: words for n, words in problems.items() if words} == {}


def test_the_checks_catch_a_bad_part(terms):
    good = "# T\n\n## Prefill and decode\n\nThe TTFT and the KV cache. `XYZ` in code.\n"
    assert "prefill-and-decode" in heading_ids(good)
    assert "prefill-and-decode" in heading_ids("## Other words {#prefill-and-decode}\n")
    assert "the-ridge-point" in missing_anchors(terms, 1, good)
    assert "tpot" not in missing_anchors(terms, 3, "## Time per output token {#tpot}\n")
    assert "itl" in missing_anchors(terms, 3, "The inter-token latency (ITL) is {#itl} a gap.\n")
    assert "itl" not in missing_anchors(terms, 3, "**Inter-token latency (ITL)**{#itl} is a gap.\n")
    assert undefined_abbreviations(terms, good) == []
    assert undefined_abbreviations(terms, good + "\nThe QQZ budget.\n") == ["QQZ"]


def test_links_are_markdown_for_written_parts_and_plain_otherwise(terms):
    table = G.render_terms(terms, S.load_series(), frozenset({3}))
    assert "[Part 3](parts/03-ttft-tpot-goodput.md#" in table
    assert "Part 5 (not yet written)" in table
    assert '<dfn id="kv-cache">KV cache</dfn> (KV)' in table


def test_abbreviation_lines_feed_the_tooltips(terms):
    lines = G.abbreviations(terms).splitlines()
    assert "*[TTFT]: Time to first token" in lines  # the expansion, not the definition
    assert "*[KV]: Key–value (cache)" in lines  # an explicit expansion wins
    assert all(re.match(r"^\*\[[^\]]+\]: [^\[\]]+$", line) for line in lines)
    assert any(line.startswith("*[OSDI]: ") for line in lines)  # tooltip-only expansions too
    table = G.render_abbreviations(terms)
    assert "| TTFT | [Time to first token](#time-to-first-token) |" in table


def test_term_wording_follows_the_review(terms):
    # Review parts-4-5-glossary rows 11, 13, 15, 16.
    d = {t.term: t.definition for t in terms.terms}
    assert "5.13 billion" in d["Active parameters"] and "5.1 billion of 117" not in d["Active parameters"]
    assert "several steps" in d["Prefill"] and "all prompt tokens pass through the model together" not in d["Prefill"]
    assert "Alpaca" in d["Block size"] and "ShareGPT" in d["Block size"]  # Kwon et al. §7.2
    assert "(V0)" in d["Swap"] and "V1" in d["Swap"] and "(V0)" in d["Preemption"]


def test_a_tooltip_is_on_an_abbreviations_first_use_only():
    html = '<p><abbr title="Key-value">KV</abbr> and <abbr title="Key-value">KV</abbr>, <abbr title="G">GPU</abbr></p>'
    assert G.first_tooltips(html) == '<p><abbr title="Key-value">KV</abbr> and KV, <abbr title="G">GPU</abbr></p>'

"""The glossary: terms and anchors in both directions, tables from the numeric core."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hooks"))
import glossary as G  # noqa: E402
import series as S  # noqa: E402

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
    text = re.sub(r"^\*\[[^\]]+\]:.*$", "", text, flags=re.M)      # abbreviation definitions
    for pattern in (r"`[^`]*`", r"\$\$.*?\$\$", r"\$[^$\n]*\$", r"\]\([^)]*\)", r"\{[#.:][^}]*\}",
                    r"<[^>]+>", r"\{\{.*?\}\}", r"https?://\S+"):
        text = re.sub(pattern, " ", text, flags=re.S)
    return {w for w in ABBR.findall(text) if not any(c.isdigit() for c in w)}


def missing_anchors(terms, part: int, markdown: str) -> list[str]:
    ids = anchor_ids(markdown)
    return sorted({t.anchor for t in terms.terms if t.part == part} - ids)


def undefined_abbreviations(terms, markdown: str) -> list[str]:
    known = {t.abbr for t in terms.terms if t.abbr} | {a for a, _ in terms.expansions} | terms.ignore
    return sorted(w for w in abbreviations_used(markdown)
                  if w not in known and w.rstrip("s") not in known)


def written(terms) -> dict[int, str]:
    out = {}
    for n, slug in terms.slugs.items():
        path = DOCS / "parts" / f"{slug}.md"
        if path.exists():
            out[n] = path.read_text(encoding="utf-8")
    return out


# ---- the term list ---------------------------------------------------------------------

def test_core_terms_are_in_the_glossary(terms):
    names = {t.term.lower() for t in terms.terms} | {t.abbr for t in terms.terms}
    for word in ("decode", "prefill", "memory wall", "arithmetic intensity", "roofline", "ridge point", "HBM",
                 "TTFT", "TPOT", "ITL", "goodput", "SLO", "percentile", "kv cache", "GQA", "MQA", "MLA", "SWA",
                 "pagedattention", "block table", "internal fragmentation", "external fragmentation",
                 "copy-on-write", "preemption", "recompute", "swap", "continuous batching", "TP", "all-reduce",
                 "nvlink", "MoE"):
        assert word in names, word


def test_part_slugs_agree_with_the_series(terms):
    series = S.load_series()
    for n, slug in terms.slugs.items():
        assert series.part(n).slug == slug


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
    table = G.render_terms(terms, frozenset({3}))
    assert "[Part 3](parts/03-ttft-tpot-goodput.md#" in table
    assert "Part 5 (not yet written)" in table
    assert '<dfn id="kv-cache">KV cache</dfn> (KV)' in table


def test_abbreviation_lines_feed_the_tooltips(terms):
    lines = G.abbreviations(terms).splitlines()
    assert "*[TTFT]: Time to first token" in lines            # the expansion, not the definition
    assert "*[KV]: Key–value (cache)" in lines                 # an explicit expansion wins
    assert all(re.match(r"^\*\[[^\]]+\]: [^\[\]]+$", line) for line in lines)
    assert any(line.startswith("*[OSDI]: ") for line in lines)     # tooltip-only expansions too
    table = G.render_abbreviations(terms)
    assert "| TTFT | [Time to first token](#time-to-first-token) |" in table


# ---- tables from the numeric core -----------------------------------------------------

def _first_row(table: str, name: str) -> list[str]:
    for line in table.splitlines():
        if line.startswith(f"| {name} |"):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"no row {name}")


def _patched(monkeypatch, filename: str, edit):
    """Point the core at edited data (a temp override) and clear its caches."""
    from calculators import catalog
    original = catalog._load.__wrapped__

    def load(name):
        data = original(name)
        return edit(data) if name == filename else data
    for fn in (catalog.model_presets, catalog.accelerator_presets, catalog.formats, catalog.format_index,
               catalog.model_info):
        fn.cache_clear()
    monkeypatch.setattr(catalog, "_load", load)


def test_model_table_follows_the_core(monkeypatch):
    import calculators
    from calculators import catalog
    before = _first_row(G.render_models(), "Llama 3.1 8B")
    expected = calculators.run("kv_cache", {"model": "llama-3.1-8b"})["kv_bytes_per_token"]
    assert before[1] == "32" and before[12] == G.num(expected, 6) == "131,072"

    def fewer_layers(data):
        data = {**data, "model": [dict(m) for m in data["model"]]}
        entry = next(m for m in data["model"] if m["id"] == "llama-3.1-8b")
        entry["num_layers"] = 16
        entry.pop("layer_pattern", None)
        return data
    _patched(monkeypatch, "models.toml", fewer_layers)
    try:
        after = _first_row(G.render_models(), "Llama 3.1 8B")
        assert after[1] == "16" and after[12] == "65,536"
        assert after[7] != before[7]         # total parameters recomputed by the core
    finally:
        monkeypatch.undo()
        for fn in (catalog.model_presets, catalog.accelerator_presets, catalog.formats, catalog.format_index,
                   catalog.model_info):
            fn.cache_clear()


def test_accelerator_table_follows_the_core(monkeypatch):
    from calculators import catalog
    name = catalog.accelerator_presets()["h100-sxm"].name
    before = _first_row(G.render_accelerators(), name)

    def faster(data):
        data = {**data, "accelerator": [dict(a) for a in data["accelerator"]]}
        next(a for a in data["accelerator"] if a["id"] == "h100-sxm")["memory_bandwidth_bytes_per_s"] = 4.0e12
        return data
    _patched(monkeypatch, "accelerators.toml", faster)
    try:
        after = _first_row(G.render_accelerators(), name)
        assert before[4] == "3.35" and after[4] == "4"
        assert after != before
    finally:
        monkeypatch.undo()
        for fn in (catalog.model_presets, catalog.accelerator_presets, catalog.formats, catalog.format_index,
                   catalog.model_info):
            fn.cache_clear()


def test_model_table_shows_both_kv_figures_and_both_parameter_counts():
    # Review parts-4-5-glossary row 10: Gemma 3 27B (HF config: 62 layers, 16 KV heads × 128, window 1,024,
    # 5 local : 1 global) keeps 507,904 B per token on all layers and 81,920 B on its 10 global layers.
    head = next(line for line in G.render_models().splitlines() if line.startswith("| Model"))
    assert "below every window" in head and "beyond every window" in head
    row = _first_row(G.render_models(), "Gemma 3 27B")
    assert (row[11], row[12]) == ("507,904", "81,920")
    # Row 11: gpt-oss-120b card (arXiv 2508.10925) 5.13B active beside the core's count with the vocabulary matrix.
    row = _first_row(G.render_models(), "gpt-oss-120b")
    assert row[10] == "5.13" and float(row[9]) > 5.13


def test_accelerator_table_states_its_memory_policy_and_links_every_row():
    table = G.render_accelerators()
    assert "driver reports" in table and "GiB = 2^30 B" in table
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| Accelerator")]
    assert rows and all("([link](https://" in r for r in rows)
    mi300x = _first_row(table, "AMD Instinct MI300X")
    assert mi300x[2] == "192" and mi300x[3] == "vendor"       # GiB column


def test_term_wording_follows_the_review(terms):
    # Review parts-4-5-glossary rows 11, 13, 15, 16.
    d = {t.term: t.definition for t in terms.terms}
    assert "5.13 billion" in d["Active parameters"] and "5.1 billion of 117" not in d["Active parameters"]
    assert "several steps" in d["Prefill"] and "all prompt tokens pass through the model together" not in d["Prefill"]
    assert "Alpaca" in d["Block size"] and "ShareGPT" in d["Block size"]      # Kwon et al. §7.2
    assert "(V0)" in d["Swap"] and "V1" in d["Swap"] and "(V0)" in d["Preemption"]


def test_tgi_row_carries_its_maintenance_status():
    row = _first_row(G.render_engines(), "Text Generation Inference (TGI)")
    assert "maintenance mode since 2025-12-11" in " ".join(row).lower()


def test_format_table_has_block_scaled_effective_bits():
    row = _first_row(G.render_formats(), "MXFP4")
    assert row[4] == "4.25"


def test_engines_and_prices_are_sourced_and_dated():
    engines = G.load_data("engines.toml")["engine"]
    assert {"vllm", "sglang", "tensorrt-llm", "dynamo"} <= {e["id"] for e in engines}
    for e in engines:
        assert e["url"].startswith("https://") and e["as_of"] and e["source"] and e["version"]
        assert set(e["features"]) == {k for k, _ in G.FEATURES}
    G.render_engines()  # validates every value
    bad = {"engine": [{**engines[0], "features": {**engines[0]["features"], "paged_kv": "probably"}}]}
    with pytest.raises(ValueError):
        G.render_engines(bad)
    for p in G.load_data("prices.toml")["price"]:
        assert p["usd"] > 0 and p["as_of"] and p["source"] and p["kind"] in ("gpu-hour", "api")


def test_number_formatting():
    assert [G.num(x) for x in (3.35, 989.4, 70272, 0.5, None, 1979)] == ["3.35", "989.4", "70,272", "0.5", "—", "1,979"]


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

"""The glossary's tables: numbers from the core (`calculators.tables`), text from `calculators.display`."""

from __future__ import annotations

import pytest

from calculators import display, tables
from sitegen import glossary as G


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

    for fn in (
        catalog.model_presets,
        catalog.accelerator_presets,
        catalog.formats,
        catalog.format_index,
        catalog.model_info,
    ):
        fn.cache_clear()
    monkeypatch.setattr(catalog, "_load", load)


def test_model_table_follows_the_core(monkeypatch):
    import calculators
    from calculators import catalog

    before = _first_row(G.render_models(), "Llama 3.1 8B")
    expected = calculators.run("kv_cache", {"model": "llama-3.1-8b"})["kv_bytes_per_token"]
    assert before[1] == "32" and before[12] == G.fig(expected, 6) == "131,072"

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
        assert after[7] != before[7]  # total parameters recomputed by the core
    finally:
        monkeypatch.undo()
        for fn in (
            catalog.model_presets,
            catalog.accelerator_presets,
            catalog.formats,
            catalog.format_index,
            catalog.model_info,
        ):
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
        for fn in (
            catalog.model_presets,
            catalog.accelerator_presets,
            catalog.formats,
            catalog.format_index,
            catalog.model_info,
        ):
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
    assert mi300x[2] == "192" and mi300x[3] == "vendor"  # GiB column


def test_tgi_row_carries_its_maintenance_status():
    row = _first_row(G.render_engines(), "Text Generation Inference (TGI)")
    assert "maintenance mode since 2025-12-11" in " ".join(row).lower()


def test_format_table_has_block_scaled_effective_bits():
    row = _first_row(G.render_formats(), "MXFP4")
    assert row[4] == "4.25"


def test_engines_and_prices_are_sourced_and_dated():
    engines = tables.engines()
    assert {"vllm", "sglang", "tensorrt-llm", "dynamo"} <= {e["id"] for e in engines}
    for e in engines:
        assert e["url"].startswith("https://") and e["as_of"] and e["source"] and e["version"]
        assert set(e["features"]) == set(tables.ENGINE_FEATURES) == set(G.FEATURE_LABELS)
    G.render_engines()  # validates every value
    bad = {"engine": [{**engines[0], "features": {**engines[0]["features"], "paged_kv": "probably"}}]}
    with pytest.raises(ValueError):
        G.render_engines(bad)
    for p in tables.prices():
        assert p["usd"] > 0 and p["as_of"] and p["source"] and p["kind"] in ("gpu-hour", "api")


def test_number_formatting():
    figures = [G.fig(x) for x in (3.35, 989.4, 70272, 0.5, None, 1979)]
    assert figures == ["3.35", "989.4", "70,272", "0.5", "—", "1,979"]
    # One formatter: the glossary's own num() gave "12,346" here, display.sig (every result) "12,350".
    assert G.fig(12345.678) == display.sig(12345.678) == "12,350"
    assert G.fig(3.35e12, scale=1e12) == "3.35"


def test_tables_are_numbers_with_units_in_their_names():
    row = next(a for a in tables.accelerators() if a["id"] == "h100-sxm")
    assert row["memory_bandwidth_bytes_per_s"] == 3.35e12 and row["ridge_bf16_flops_per_byte"] > 290
    model = next(m for m in tables.models() if m["id"] == "llama-3.1-70b")
    assert (model["num_layers"], model["num_kv_heads"]) == (80, 8)
    assert model["kv_bytes_per_token_full_layers_bf16"] == 327680
    assert all(isinstance(v, (int, float)) for v in row["dense_flops_per_s"].values() if v is not None)

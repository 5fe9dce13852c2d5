"""Issue #18's reader walk, rows left open or unproven after the first pass (row numbers are the report's,
/work/shared/reviews/reader-walk.md): #25 inputs for a choice not made are hidden; #33 tabbing out of the
reader-settings panel closes it."""

from __future__ import annotations

from sitegen import workbench as families

MEMORY_PAGE = next(f"/workbench/{f.slug}/" for f in families.families() if "memory" in f.calculators)


def visible(page, root, key):
    return page.locator(f"#{root} [data-field='{key}']").is_visible()


def test_25_engine_inputs_show_only_under_their_rule(open_page):
    page, log = open_page(MEMORY_PAGE)
    root = "workbench-memory"
    assert visible(page, root, "gpu_memory_utilization") and visible(page, root, "activation_reserve_gib")
    assert not visible(page, root, "mem_fraction_static")  # SGLang's, under the vLLM rule
    page.select_option(f"#{root}-engine_rule", "sglang")
    assert visible(page, root, "mem_fraction_static")
    assert not visible(page, root, "gpu_memory_utilization") and not visible(page, root, "activation_reserve_gib")
    assert log.errors == []


def test_25_link_inputs_show_only_for_the_link_that_uses_them(open_page):
    page, _ = open_page(next(f"/workbench/{f.slug}/" for f in families.families() if "allreduce" in f.calculators))
    root = "workbench-allreduce"
    for key in ("link_bandwidth_gb_per_s", "gpus_per_node", "nics_per_node", "latency_per_hop_us"):
        assert not visible(page, root, key), key
    page.select_option(f"#{root}-link", "custom")
    assert visible(page, root, "link_bandwidth_gb_per_s") and visible(page, root, "gpus_per_node")
    page.select_option(f"#{root}-latency_source", "custom")
    assert visible(page, root, "latency_per_hop_us") and visible(page, root, "base_latency_us")


def test_33_tabbing_past_the_last_control_closes_the_settings_panel(open_page):
    page, log = open_page("/")
    toggle = page.locator("[data-rs-toggle]")
    toggle.focus()
    page.keyboard.press("Enter")
    assert page.is_visible("#rs-panel")
    inside = "() => document.getElementById('rs-panel').contains(document.activeElement)"
    page.keyboard.press("Tab")
    assert page.evaluate(inside)
    for _ in range(40):  # every control of the panel, then out of it
        page.keyboard.press("Tab")
        if not page.evaluate(inside):
            break
    assert not page.evaluate(inside), "focus never left the panel"
    assert page.is_hidden("#rs-panel") and toggle.get_attribute("aria-expanded") == "false"
    assert log.errors == []


def test_35_on_a_phone_the_headline_result_comes_before_the_form(open_page):
    page, log = open_page("/parts/04-kv-cache/", viewport={"width": 390, "height": 844}, is_mobile=True)
    block = page.locator(".calc[data-calc='memory']").first
    block.scroll_into_view_if_needed()
    page.evaluate("el => el.scrollIntoView({block: 'start'})", block.element_handle())
    headline = block.locator(".calc__headline").bounding_box()
    form = block.locator("form").bounding_box()
    assert headline["y"] < form["y"] and 0 <= headline["y"] and headline["y"] + headline["height"] <= 844, headline
    assert block.locator(".calc__headline").text_content().startswith("Sequences that fit at this context: ")
    assert log.errors == []

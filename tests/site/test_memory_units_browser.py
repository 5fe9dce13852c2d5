"""The reader's GiB ⇄ GB setting (issue #18, "human units everywhere, with a GiB ⇄ GB toggle") in a real
browser: choosing GB in the settings panel rewrites what the live calculators show, as Python computes it
with decimal memory units, and the choice persists across a reload; bandwidths are unchanged."""

from __future__ import annotations

from calculators.page import present
from sitegen import workbench as families

PAGE = next(f"/workbench/{f.slug}/" for f in families.families() if "memory" in f.calculators)
ROOT = "workbench-memory"
CELLS = (
    "id => Object.fromEntries([...document.querySelectorAll(`#${id} tr[data-out]`)]"
    ".map(r => [r.dataset.out, r.querySelector('td').textContent]))"
)


def live(page):
    page.wait_for_function("() => window.llmsi && window.llmsi.runtime")
    page.evaluate("() => window.llmsi.runtime.start()")
    page.wait_for_function("() => window.llmsi.runtime.state === 'ready'", timeout=120_000)
    page.locator(f"#{ROOT}").scroll_into_view_if_needed()
    page.wait_for_function(f"() => window.llmsi.calcs.find(c => c.id === '{ROOT}')?.shown", timeout=60_000)


def texts(units: str) -> dict:
    return {o["key"]: o["text"] for o in present("memory", None, units)["outputs"]}


def test_choosing_gb_rewrites_the_live_results_and_survives_a_reload(open_page):
    page, log = open_page(PAGE)
    live(page)
    binary, decimal = texts("binary"), texts("decimal")
    assert binary["weight_bytes_per_gpu"].endswith("GiB") and decimal["weight_bytes_per_gpu"].endswith("GB")
    cells = page.evaluate(CELLS, ROOT)
    assert all(cells[k] == v for k, v in binary.items() if k in cells)
    page.click("[data-rs-toggle]")
    page.check('#rs-panel input[name="units"][value="decimal"]')
    assert page.text_content('[data-rs-value="units"]') == "GB"
    page.wait_for_function(
        f"([id, want]) => ({CELLS})(id).weight_bytes_per_gpu === want",
        arg=[ROOT, decimal["weight_bytes_per_gpu"]],
        timeout=60_000,
    )
    cells = page.evaluate(CELLS, ROOT)
    assert all(cells[k] == v for k, v in decimal.items() if k in cells)
    work = page.text_content(f"#{ROOT} [data-calc-work]")
    assert " GB" in work and "GiB" not in work
    page.reload(wait_until="load")
    live(page)
    page.wait_for_function(
        f"([id, want]) => ({CELLS})(id).weight_bytes_per_gpu === want",
        arg=[ROOT, decimal["weight_bytes_per_gpu"]],
        timeout=60_000,
    )
    assert log.errors == []

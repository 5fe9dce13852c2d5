"""Issue #18's "Compare A and B" in a real browser: pin the result on screen as A, change an input, see B
beside it with the change; a shared link carries both, and opening it shows the same comparison."""

from __future__ import annotations

from calculators.page import present
from sitegen import workbench as families

PAGE = next(f"/workbench/{f.slug}/" for f in families.families() if "memory" in f.calculators)
ROOT = "workbench-memory"
A = {"context_tokens": 8192}
B = {"context_tokens": 32768}
# The compare table as [[label, A, B, change], ...], read in the page.
ROWS = (
    "id => [...document.querySelectorAll(`#${id} .calc__compare tbody tr`)]"
    ".map(r => [...r.cells].map(c => c.textContent))"
)


def live(page):
    page.wait_for_function("() => window.llmsi && window.llmsi.runtime")
    page.evaluate("() => window.llmsi.runtime.start()")
    page.wait_for_function("() => window.llmsi.runtime.state === 'ready'", timeout=120_000)
    page.locator(f"#{ROOT}").scroll_into_view_if_needed()
    page.wait_for_function(f"() => window.llmsi.calcs.find(c => c.id === '{ROOT}')?.shown", timeout=60_000)


def expected_rows():
    a, b = present("memory", A), present("memory", B)
    rows = []
    for oa, ob in zip(a["outputs"], b["outputs"]):
        x, y = a["result"][oa["key"]], b["result"][ob["key"]]
        pct = float(f"{abs(100 * (y - x) / x):.3g}") if x else abs(y)  # JS: Number(p.toPrecision(3))
        change = "same" if x == y else ("+" if y > x else "−") + (f"{pct:g}%" if x else f"{pct:g}")
        rows.append([ob["label"], oa["text"], ob["text"], change])
    return rows


def comparison(page):
    page.wait_for_function(
        f"([id, n]) => ({ROWS})(id).length === n && !document.querySelector(`#${{id}} .calc__compare`).hidden",
        arg=[ROOT, len(expected_rows())],
        timeout=60_000,
    )
    return page.evaluate(ROWS, ROOT), page.text_content(f"#{ROOT} .calc__compare p")


def test_pin_a_change_an_input_see_b_beside_it_and_share_both(open_page, browser):
    page, log = open_page(PAGE, permissions=["clipboard-read", "clipboard-write"])
    live(page)
    page.click(f"#{ROOT} [data-action='pin']")
    assert page.text_content(f"#{ROOT} [data-action='pin']") == "Unpin A"
    page.fill(f"#{ROOT}-context_tokens", "32768")
    page.wait_for_function(
        f"() => window.llmsi.calcs.find(c => c.id === '{ROOT}').shownInputs.context_tokens === '32768'", timeout=60_000
    )
    rows, said = comparison(page)
    sequences = next(r for r in rows if r[0] == "Sequences that fit at this context")
    assert sequences[3].startswith("−") and rows == expected_rows()  # 4× the context: fewer sequences
    assert "context_tokens 8192 → 32768" in said
    # The shared link carries A as a.<input>; opened afresh, it shows the same comparison.
    page.click(f"#{ROOT} [data-action='link']")
    box = page.locator(f"#{ROOT} .calc__link")
    link = box.input_value() if box.count() else page.evaluate("navigator.clipboard.readText()")
    assert "a.context_tokens=8192" in link and "context_tokens=32768" in link
    fresh = browser.new_context()
    other = fresh.new_page()
    other.goto(link)
    live(other)
    assert comparison(other) == (rows, said)
    assert "Ignored" not in other.text_content(f"#{ROOT} [data-calc-status]")
    fresh.close()
    page.click(f"#{ROOT} [data-action='pin']")  # unpinned: the comparison goes
    assert page.locator(f"#{ROOT} .calc__compare").is_hidden()
    assert log.errors == []

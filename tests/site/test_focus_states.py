"""States axe's default check does not see (reader walk rows 5-7): the invalid-field border, a visible
focus ring on text inputs, and readable action buttons on hover and keyboard focus, in both themes."""

from __future__ import annotations

import pytest

WORKBENCH = "/workbench/memory/"  # workbench-kv-cache is on it
ROOT = "workbench-kv-cache"

# Contrast of an element's text against what is behind it: its background blended over its ancestors'
# (WCAG 2.2 relative luminance). Colours come from getComputedStyle, so hover and focus styles count.
CONTRAST = """(el) => {
  const rgba = (c) => {
    const m = c.match(/[\\d.]+/g).map(Number);
    return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1];
  };
  const over = (top, under) => top.slice(0, 3).map((v, i) => v * top[3] + under[i] * (1 - top[3])).concat(1);
  const chain = [];
  for (let e = el; e; e = e.parentElement) chain.push(rgba(getComputedStyle(e).backgroundColor));
  let bg = [255, 255, 255, 1];
  for (const c of chain.reverse()) bg = over(c, bg);
  const fg = over(rgba(getComputedStyle(el).color), bg);
  const linear = (v) => (v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  const lum = (c) => 0.2126 * linear(c[0]) + 0.7152 * linear(c[1]) + 0.0722 * linear(c[2]);
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_focused_text_input_shows_a_ring(open_page, scheme):
    page, log = open_page(WORKBENCH, scheme)
    field = page.locator(f"#{ROOT}-context_tokens")
    field.focus()
    style = field.evaluate(
        "e => { const s = getComputedStyle(e); return [s.outlineStyle, parseFloat(s.outlineWidth)]; }"
    )
    assert style[0] != "none" and style[1] >= 2, style
    assert log.errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_action_buttons_stay_readable_on_hover_and_focus(open_page, scheme):
    page, log = open_page(WORKBENCH, scheme)
    button = page.locator(f"#{ROOT} .calc__actions .md-button").first
    button.scroll_into_view_if_needed()
    button.hover()
    assert button.evaluate(CONTRAST) >= 4.5
    page.mouse.move(0, 0)
    button.focus()
    assert button.evaluate(CONTRAST) >= 4.5
    ring = button.evaluate("e => getComputedStyle(e).outlineStyle")
    assert ring != "none"
    assert log.errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_an_invalid_field_shows_its_red_border(open_page, scheme):
    page, log = open_page(WORKBENCH, scheme)
    page.wait_for_function("() => window.llmsi && window.llmsi.runtime")
    page.evaluate("() => window.llmsi.runtime.start()")
    page.wait_for_function("() => window.llmsi.runtime.state === 'ready'", timeout=120_000)
    field = page.locator(f"#{ROOT}-context_tokens")
    field.fill("abc")
    page.wait_for_function(
        f"() => document.getElementById('{ROOT}-context_tokens').getAttribute('aria-invalid') === 'true'",
        timeout=30_000,
    )
    width, colour = field.evaluate(
        "e => { const s = getComputedStyle(e); return [s.borderTopWidth, s.borderTopColor]; }"
    )
    error = page.evaluate("() => getComputedStyle(document.body).getPropertyValue('--calc-error').trim()")
    assert width == "2px"
    assert colour != field.evaluate("e => getComputedStyle(e.closest('.calc')).color")  # not the grey default
    assert error
    assert log.errors == []


RING = "e => [getComputedStyle(e).outlineStyle, getComputedStyle(e).outlineWidth]"
MINE = {
    "/.llmsi-custom:v1": '{"v": 1, "model": {"mine": {"name": "Mine", "definition": {"name": "Mine"}}}, '
    '"accelerator": {}}'
}


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_define_dialogs_fields_and_buttons_show_focus_and_stay_readable(open_page, scheme):
    """Issue #18: a visible focus ring on every dialog field, hover and focus states of its buttons (the
    manager's included) at AA contrast, in both themes."""
    page, log = open_page(WORKBENCH, scheme, storage=MINE)
    page.click(f"#{ROOT} [data-define='model']")
    page.wait_for_selector("dialog.calc-define[open] #calc-define-yours li")
    for field in ("#calc-define-name", "#calc-define-json"):
        page.focus(field)
        style = page.eval_on_selector(field, RING)
        assert style[0] != "none" and float(style[1].rstrip("px")) >= 2, (field, style)
    buttons = page.locator("dialog.calc-define button.md-button")
    assert buttons.count() >= 6  # prefill, save, cancel, the manager's three, export all
    for i in range(buttons.count()):
        button = buttons.nth(i)
        button.hover()
        assert button.evaluate(CONTRAST) >= 4.5, button.text_content()
        button.focus()
        page.keyboard.press("Shift+Tab")  # arrive by keyboard: focus-visible, as a keyboard reader sees it
        page.keyboard.press("Tab")
        assert button.evaluate("e => e === document.activeElement")
        assert button.evaluate(CONTRAST) >= 4.5 and button.evaluate("e => getComputedStyle(e).outlineStyle") != "none"
    assert log.errors == []


def test_an_advanced_input_in_error_opens_its_group(open_page):
    """A link that sets an Advanced input out of range: the group opens and the field says why."""
    path = "/workbench/slos-and-cost/?calc=workbench-goodput&bandwidth_efficiency=7#workbench-goodput"
    page, log = open_page(path)
    group = page.locator("#workbench-goodput details.calc__advanced")
    assert group.get_attribute("open") is None or group.get_attribute("open") == ""
    page.wait_for_function(
        "id => document.getElementById(id).getAttribute('aria-invalid') === 'true'",
        arg="workbench-goodput-bandwidth_efficiency",
        timeout=120_000,
    )
    assert group.get_attribute("open") == ""
    assert group.locator("[data-field='bandwidth_efficiency']").is_visible()
    assert log.errors == []

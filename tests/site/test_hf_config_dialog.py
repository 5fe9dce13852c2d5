"""A published config.json pasted into the "Define your own…" dialog (issue 14, any decoder config.json):
the dialog says which keys were read and what was assumed, and a config the site cannot size is refused
with the key named."""

import pytest

from harness import ROOT
from test_calculators import _ready, page_of, wait_live

FIXTURES = ROOT / "tests" / "fixtures" / "hf_configs"
ROOT_ID = "workbench-kv-cache"


def paste(page, name: str, title: str):
    page.click(f"#{ROOT_ID} [data-define='model']")
    page.wait_for_function("() => document.querySelector('#calc-define-json').value.length > 10", timeout=60_000)
    page.fill("#calc-define-json", (FIXTURES / name).read_text())
    page.fill("#calc-define-name", title)
    page.click("dialog [data-do='save']")
    message = page.locator("#calc-define-error")
    message.wait_for(state="visible", timeout=30_000)
    return message.text_content()


@pytest.fixture
def kv_page(open_page):
    page, log = _ready(open_page, page_of("kv_cache"))
    return page, log


def test_pasted_config_shows_the_keys_read_and_the_assumptions(kv_page):
    page, log = kv_page
    text = paste(page, "phi-3-mini-128k.json", "Phi-3 mini (pasted)")
    assert text.startswith(
        'Saved "Phi-3 mini (pasted)". Note: Read: model_type, architectures, num_hidden_layers, hidden_size'
    )
    assert "model_type 'phi3' is not one this site knows" in text
    assert "sliding_window is off or covers the whole context" in text
    assert page.input_value(f"#{ROOT_ID}-model") == "custom:phi-3-mini-pasted"
    wait_live(page, ROOT_ID)
    assert log.errors == []


def test_a_config_that_cannot_be_sized_is_refused_naming_the_key(kv_page):
    page, _ = kv_page
    text = paste(page, "nemotron-super-49b.json", "Nemotron Super (pasted)")
    assert "block_configs" in text and "cannot be sized correctly" in text
    assert not text.startswith("Saved")
    assert page.evaluate("() => document.querySelector('dialog.calc-define').open")

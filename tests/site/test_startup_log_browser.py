"""Paste your startup log, in a real browser: published logs re-derived as the CPython core does, a log in vLLM
v0.34.0's formats, and a damaged log refused with a message naming the missing lines (issue #14, acceptance 2)."""
from pathlib import Path

import pytest

from test_calculators import _ready, expected_outputs, shown_outputs, wait_for_outputs, wait_live

PAGE = "/workbench/startup-log/"
ROOT_ID = "workbench-startup-log"
LOGS = Path(__file__).parent.parent / "fixtures" / "startup_logs"

# (fixture, the inputs the reader sets besides the log): an SGLang TP 4 FP8 log, a vLLM FP8-KV log, a vLLM
# start that failed its KV check (pipeline-parallel, its 'estimated maximum model length' re-derived) and a v0.27.1
# log that names its release (the rules are picked from it).
CASES = [
    ("sglang-qwen3-235b-a22b-fp8-tp4", {"model": "qwen3-235b-a22b", "tensor_parallel": 4}),
    ("vllm-qwen3-30b-a3b-fp8-kvfp8", {"model": "qwen3-30b-a3b", "kv_dtype": "fp8"}),
    ("vllm-qwen3-coder-30b-a3b-fp8-pp2-failed", {"model": "qwen3-30b-a3b"}),
    ("vllm-v0271-qwen3-8b-rtx4090-cold", {"model": "qwen3-8b"}),
]


def _set(page, key, value):
    control = page.locator(f"#{ROOT_ID} [data-field='{key}'] :is(input, select, textarea)").first
    if control.evaluate("e => e.tagName") == "SELECT":
        control.select_option(str(value))
    else:
        control.fill(str(value))


@pytest.fixture
def startup_page(open_page):
    page, log = _ready(open_page, PAGE)
    wait_live(page, ROOT_ID)
    return page, log


@pytest.mark.parametrize("name, inputs", CASES, ids=[c[0] for c in CASES])
def test_a_pasted_log_is_rederived_as_cpython_does(startup_page, name, inputs):
    page, log = startup_page
    text = (LOGS / f"{name}.log").read_text()
    for key, value in inputs.items():
        _set(page, key, value)
    _set(page, "log", text)
    wait_for_outputs(page, ROOT_ID, expected_outputs("startup_log", {"log": text, **inputs}))
    shown = dict(shown_outputs(page, ROOT_ID))
    assert shown["log_kv_tokens"] and shown["core_kv_tokens"]
    notes = page.inner_text(f"#{ROOT_ID}")
    assert "core" in notes and "%" in notes  # the side-by-side note with its difference
    assert log.errors == []


def test_a_truncated_log_gets_a_message_naming_what_is_missing(startup_page):
    page, log = startup_page
    truncated = "\n".join((LOGS / "vllm-v0-llama31-8b-3090-20k.log").read_text().splitlines()[:2])
    good = shown_outputs(page, ROOT_ID)
    _set(page, "log", truncated)
    error = page.locator(f"#{ROOT_ID} [data-field='log'] [data-error]")
    error.wait_for(state="visible", timeout=30_000)
    assert "GPU KV cache size" in error.text_content() and "truncated" in error.text_content()
    assert shown_outputs(page, ROOT_ID) == good  # the last valid result stays
    for word in ("NaN", "undefined", "Traceback"):
        assert word not in page.inner_text(f"#{ROOT_ID}")
    assert log.errors == []


def test_a_v034_log_sized_after_warmup_is_rederived_in_the_browser(startup_page):
    """vLLM v0.34.0's line formats (tests/fixtures/log_formats, figures chosen there: no published v0.34.0 log has
    been found): the page picks v0.34.0's rules and re-derives the block count after warmup."""
    v034_log = (LOGS.parent / "log_formats" / "vllm-0.34.0-after-warmup.log").read_text()
    page, log = startup_page
    _set(page, "model", "llama-3.1-8b")
    _set(page, "log", v034_log)
    wait_for_outputs(page, ROOT_ID, expected_outputs("startup_log", {"log": v034_log, "model": "llama-3.1-8b"}))
    text = page.inner_text(f"#{ROOT_ID}")
    assert "v0.34.0's rules" in text and "KV cache blocks after warmup: log 7,629 blocks, core 7,629" in text
    assert log.errors == []

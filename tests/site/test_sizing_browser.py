"""Issue #18's sizing verdict in a real browser: "will Llama 3.1 70B serve 50 users at 32K on H100s, and
how many do I need?" answered in words on one screen, recomputed by Python in the page, and the same
TP and count as the core computes directly."""

from __future__ import annotations

import pytest

from calculators.api import run

PAGE = "/workbench/sizing/"
ROOT = "#workbench-sizing"
QUESTION = {"model": "llama-3.1-70b", "hardware": "h100-sxm", "context_tokens": 32768, "target_users": 50}


def live(open_page, **options):
    page, log = open_page(PAGE, **options)
    page.wait_for_function("() => window.llmsi && window.llmsi.runtime")
    page.evaluate("() => window.llmsi.runtime.start()")
    page.wait_for_function("() => window.llmsi.runtime.state === 'ready'", timeout=120_000)
    return page, log


def recomputed(page, key, value):
    page.fill(f"{ROOT}-{key}", str(value))
    page.wait_for_function(
        "([root, v]) => window.llmsi.calcs.find(c => '#' + c.id === root)?.shownInputs?.target_users === v",
        arg=[ROOT, str(value)],
        timeout=60_000,
    )
    return page.locator(f"{ROOT} .calc__headline").text_content()


@pytest.mark.parametrize(
    "viewport", [{"width": 1280, "height": 900}, {"width": 390, "height": 844}], ids=["desktop", "phone"]
)
def test_the_issues_question_is_answered_on_one_screen(open_page, viewport):
    page, log = live(open_page, viewport=viewport)
    core = run("sizing", dict(QUESTION, target_users=49))
    text = recomputed(page, "target_users", 49)
    assert text == core["headline"]
    assert f"need TP {core['single_replica_tp']}" in text
    assert (
        f"fewest GPUs: {core['best_gpus']} ({core['best_replicas']} replicas of TP {core['best_tensor_parallel']})"
        in text
    )
    # One screen: with the calculator's title at the top of the viewport, the verdict is wholly in view.
    page.locator(f"{ROOT} .calc__title").scroll_into_view_if_needed()
    page.evaluate(f"document.querySelector('{ROOT} .calc__title').scrollIntoView({{block: 'start'}})")
    box = page.locator(f"{ROOT} .calc__headline").bounding_box()
    assert box and 0 <= box["y"] and box["y"] + box["height"] <= viewport["height"], box
    cells = {
        k: page.locator(f"{ROOT} tr[data-out='{k}'] td").text_content() for k in ("best_gpus", "single_replica_tp")
    }
    assert cells == {"best_gpus": f"{core['best_gpus']} GPUs", "single_replica_tp": f"{core['single_replica_tp']} GPUs"}
    assert log.errors == []


def test_a_target_no_tp_meets_reads_in_words(open_page):
    page, _ = live(open_page)
    page.fill(f"{ROOT}-tpot_slo_s", "0.0001")
    text = recomputed(page, "target_users", 50)
    page.wait_for_function(
        f"() => document.querySelector('{ROOT} .calc__headline').textContent.includes('No TP')", timeout=60_000
    )
    text = page.locator(f"{ROOT} .calc__headline").text_content()
    assert "No TP up to 1,024 meets the SLO" in text
    assert page.locator(f"{ROOT} tr[data-out='best_gpus'] td").text_content() == "n/a: no TP meets the SLO"

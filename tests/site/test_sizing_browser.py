"""Issue #18's sizing verdict in a real browser: "will Llama 3.1 70B serve 50 users at 32K on H100s, and
how many do I need?" answered in words on one screen, recomputed by Python in the page, and the same
TP and count as the core computes directly."""

from __future__ import annotations

import pytest

from calculators import page as calc_page
from calculators.api import run
from sitegen import workbench as families

PAGE = "/workbench/sizing/"
MEMORY_PAGE = next(f"/workbench/{f.slug}/" for f in families.families() if "memory" in f.calculators)
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
    # 20 users: one replica of TP 8 serves them (49 now needs replicas: TP 16's all-reduces cross servers)
    core = run("sizing", dict(QUESTION, target_users=20))
    text = recomputed(page, "target_users", 20)
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


def test_the_verdict_feeds_cost_without_retyping(open_page):
    """A chained pair: the sized deployment and its throughput into the cost calculator on the same page."""
    page, log = live(open_page)
    recomputed(page, "target_users", 49)
    core = calc_page.present("sizing", dict(QUESTION, target_users=49))
    button = page.locator(f"{ROOT} .calc__chain button")
    assert button.text_content() == core["chain"][0]["label"]
    button.click()
    expected = [[o["key"], o["text"]] for o in calc_page.present("cost", core["chain"][0]["inputs"])["outputs"]]
    page.wait_for_function(
        "([id, exp]) => JSON.stringify([...document.querySelectorAll(`#${id} [data-calc-results] tr`)]"
        ".map(r => [r.dataset.out, r.querySelector('td').textContent])) === JSON.stringify(exp)",
        arg=["sizing-cost", expected],
        timeout=60_000,
    )
    gpus = page.locator("#sizing-cost tr[data-out='gpus_needed'] td").text_content()
    assert gpus == f"{core['result']['best_gpus']} GPUs"
    assert page.input_value("#sizing-cost-num_gpus") == str(core["result"]["best_gpus"])
    assert log.errors == []


def test_memorys_kv_budget_feeds_paging(open_page):
    page, log = open_page(MEMORY_PAGE)
    page.wait_for_function("() => window.llmsi && window.llmsi.runtime")
    page.locator("#workbench-memory").scroll_into_view_if_needed()
    page.wait_for_function("() => window.llmsi.calcs.find(c => c.id === 'workbench-memory')?.shown", timeout=120_000)
    chain = calc_page.present("memory", {})["chain"][0]
    page.click("#workbench-memory .calc__chain button")
    page.wait_for_function(
        "v => window.llmsi.calcs.find(c => c.id === 'workbench-paging')?.shownInputs?.kv_budget_gib === v",
        arg=str(chain["inputs"]["kv_budget_gib"]),
        timeout=60_000,
    )
    assert page.input_value("#workbench-paging-model") == chain["inputs"]["model"]
    assert log.errors == []


def test_a_chain_to_a_calculator_on_another_page_is_a_link_that_carries_the_inputs(open_page):
    """Part 4 has the memory calculator but not paging: its KV budget goes to paging's workbench page by a
    link whose parameters are the chained inputs, and that page opens with them applied (issue #18)."""
    page, log = open_page("/parts/04-kv-cache/")
    page.wait_for_function("() => window.llmsi && window.llmsi.calcs")
    root = page.evaluate("() => window.llmsi.calcs.find(c => c.name === 'memory').id")
    page.locator(f"#{root}").scroll_into_view_if_needed()
    page.wait_for_function(f"() => window.llmsi.calcs.find(c => c.id === '{root}')?.shown", timeout=120_000)
    inputs = page.evaluate(f"() => window.llmsi.calcs.find(c => c.id === '{root}').shownInputs")
    chain = calc_page.present("memory", inputs)["chain"][0]
    link = page.locator(f"#{root} .calc__chain a")
    assert page.locator(f"#{root} .calc__chain button").count() == 0   # paging is not on this page
    assert link.text_content() == chain["label"] + " →"
    href = link.get_attribute("href")
    assert "/workbench/" in href and "calc=workbench-paging" in href and href.endswith("#workbench-paging")
    link.click()
    page.wait_for_function(
        "v => window.llmsi.calcs?.find(c => c.id === 'workbench-paging')?.shownInputs?.kv_budget_gib === v",
        arg=str(chain["inputs"]["kv_budget_gib"]),
        timeout=120_000,
    )
    model = page.input_value("#workbench-paging-model")
    assert model == chain["inputs"]["model"] or model.startswith("shared:")
    assert page.input_value("#workbench-paging-max_context_tokens") == str(chain["inputs"]["max_context_tokens"])
    assert "Ignored" not in page.text_content("#workbench-paging [data-calc-status]")
    assert log.errors == []

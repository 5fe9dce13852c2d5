"""Live calculators in a real browser, against the CPython core (issue: live calculators)."""
import json
import re

import pytest

import calculators
from calculators import catalog, page as calc_page
from conftest import run_axe
from harness import ROOT, calculator_worker
from sitegen import dom, workbench as families

PAGES = [f"/workbench/{f.slug}/" for f in families.families()]  # every calculator, a family a page


def page_of(name: str) -> str:
    return next(f"/workbench/{f.slug}/" for f in families.families() if name in f.calculators)


WORKBENCH = page_of("kv_cache")  # the page most tests use (workbench-kv-cache is on it)
LIVE = "el => el.textContent.startsWith('Live')"


def wait_live(page, root_id, timeout=120_000):
    page.wait_for_function(f"() => {{ const s = document.querySelector('#{root_id} [data-calc-status]');"
                           f" return s && s.textContent.startsWith('Live'); }}", timeout=timeout)


# The results table as [[output key, text shown], ...], read in the page.
ROWS = "id => [...document.querySelectorAll(`#${id} [data-calc-results] tr`)]" \
       ".map(r => [r.dataset.out, r.querySelector('td').textContent])"


def shown_outputs(page, root_id):
    return page.evaluate(ROWS, root_id)


def wait_for_outputs(page, root_id, expected, timeout=60_000):
    """Wait until the results table shows exactly `expected` (a recompute has landed)."""
    page.wait_for_function(f"([id, exp]) => JSON.stringify(({ROWS})(id)) === JSON.stringify(exp)",
                           arg=[root_id, expected], timeout=timeout)


def expected_outputs(name, inputs):
    return [[o["key"], o["text"]] for o in calc_page.present(name, inputs)["outputs"]]


def with_defaults(name, given):
    """A block's inputs: those its data-inputs sets, over the schema's defaults."""
    return {**{f["key"]: f["default"] for f in calculators.schema(name)["inputs"]}, **given}


def roots(page):
    found = page.eval_on_selector_all(
        ".calc[data-calc]", "els => els.map(e => [e.id, e.dataset.calc, JSON.parse(e.dataset.inputs)])")
    return [(root_id, name, with_defaults(name, given)) for root_id, name, given in found]


# The DOM contract between sitegen/blocks.py and the scripts, by role (attribute without "data-").
DOM_ROLES = dom.NAMES


def test_the_scripts_spell_no_dom_name_of_their_own():
    """The scripts read the contract's data-* names from the page config ("dom"), declared once, in
    Python; none spells one, as an attribute or a dataset key."""
    longest_first = sorted(DOM_ROLES, key=len, reverse=True)
    camel = [re.sub(r"-(\w)", lambda m: m.group(1).upper(), r) for r in longest_first]
    spelt = re.compile(r"data-(%s)(?![-\w])|dataset\.(%s)\b" % ("|".join(longest_first), "|".join(camel)))
    scripts = sorted((ROOT / "docs" / "assets").rglob("*.js"))
    assert len(scripts) >= 6
    for path in scripts:
        found = spelt.findall(path.read_text())
        assert not found, f"{path.relative_to(ROOT)} spells {found}"


def test_results_are_in_the_html_before_any_script(browser, server):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    names = set()
    for path in PAGES:
        page.goto(server.origin + path)
        found = roots(page)
        names |= {name for _, name, _ in found}
        for root_id, name, inputs in found:
            assert shown_outputs(page, root_id) == expected_outputs(name, inputs), name
            assert page.locator(f"#{root_id} [data-calc-work] li").count() > 0
    assert names == set(calculators.calculator_names())
    context.close()


SELECTS = """() => [...document.querySelectorAll('.calc select[data-kind]')].map(s => [
    s.closest('.calc').id, s.dataset.kind, s.name, s.value,
    s.querySelectorAll('optgroup:not([data-custom]) option').length])"""


def test_each_select_offers_every_preset_and_keeps_the_chosen_one(browser, server):
    """The build writes only the chosen preset into each select; the page's script adds the rest
    from the one list per page."""
    counts = {"model": len(catalog.model_presets(include_hidden=False)),
              "accelerator": len(catalog.accelerator_presets())}
    for js, expect_all in ((False, False), (True, True)):
        context = browser.new_context(java_script_enabled=js)
        page = context.new_page()
        for path in PAGES:
            page.goto(server.origin + path)
            inputs = {root_id: values for root_id, _, values in roots(page)}
            found = page.evaluate(SELECTS)
            assert found, f"no model or accelerator selects on {path}"
            for root_id, kind, key, value, options in found:
                assert value == inputs[root_id][key], (root_id, key)
                assert options == (counts[kind] if expect_all else 1), (root_id, kind, js)
        context.close()


def _ready(open_page, path):
    page, log = open_page(path)
    page.wait_for_function("() => window.llmsi && window.llmsi.runtime")
    page.evaluate("() => window.llmsi.runtime.start()")
    page.wait_for_function("() => window.llmsi.runtime.state === 'ready'", timeout=120_000)
    return page, log


@pytest.fixture
def workbench(open_page):
    return _ready(open_page, WORKBENCH)


@pytest.fixture(params=PAGES)
def family_page(open_page, request):
    return _ready(open_page, request.param)


def _valid(name, inputs):
    try:
        calculators.run(name, inputs)
        return True
    except calculators.InputError:
        return False


def _candidates(field):
    if field["type"] in ("number", "integer"):
        lo, hi, d = field["min"], field["max"], field["default"]
        values = [d * 2, (d + lo) / 2, (d + hi) / 2]
        return [int(v) if field["type"] == "integer" else v for v in values if lo <= v <= hi and v != d]
    if field["type"] in ("choice", "dtype"):
        return [c["value"] for c in field["choices"] if c["value"] != field["default"]]
    return []


def sample_inputs(name):
    """Defaults, then one valid change per input (invalid ones have their own tests)."""
    cases = [{}]
    for field in calculators.schema(name)["inputs"]:
        change = next(({field["key"]: v} for v in _candidates(field) if _valid(name, {field["key"]: v})), None)
        if change:
            cases.append(change)
    return cases


def test_browser_equals_cpython_exactly(workbench):
    page, log = workbench
    for name in calculators.calculator_names():
        for inputs in sample_inputs(name):
            got = page.evaluate("([n, i]) => window.llmsi.runtime.call({op: 'present', name: n, inputs: i})",
                                [name, inputs])
            assert got == calc_page.present_json(name, json.dumps(inputs)), (name, inputs)
    assert log.errors == [] and log.foreign() == []


def set_field(page, root_id, key, value):
    control = page.locator(f"#{root_id} [data-field='{key}'] input, #{root_id} [data-field='{key}'] select").first
    if not control.is_visible():  # hidden until its choice is made (reader walk #25): set it as a link would
        control.evaluate("(e, v) => { e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); }", str(value))
        return
    if control.evaluate("e => e.tagName") == "SELECT":
        control.select_option(str(value))
    else:
        control.fill(str(value))


def test_changing_each_input_updates_the_results(family_page):
    page, _ = family_page
    for root_id, name, base in roots(page):
        for change in sample_inputs(name)[1:]:
            (key, value), = change.items()
            set_field(page, root_id, key, value)
            inputs = {**base, **change}
            wait_for_outputs(page, root_id, expected_outputs(name, inputs), timeout=30_000)
            set_field(page, root_id, key, base[key])  # roots() gives every input, defaults merged in


def open_block(open_page, name):
    """The workbench page of calculator `name`, its log and the id of its block there."""
    page, log = open_page(page_of(name))
    return page, log, next(r for r, n, _ in roots(page) if n == name)


def test_the_figure_title_follows_an_input_that_changes_it(open_page):
    # the calibration calculator's scatter is of the chosen kind of estimate: its caption (the chart's accessible
    # name) was the build's TPOT title whatever kind the reader then chose
    page, log, root_id = open_block(open_page, "calibration")
    caption = page.locator(f"#{root_id} figcaption")
    caption.scroll_into_view_if_needed()
    assert caption.text_content().startswith("Time per output token")
    set_field(page, root_id, "metric", "ttft_s")
    wait_live(page, root_id)
    page.wait_for_function("id => document.querySelector(`#${id} figcaption`).textContent.startsWith('Time to first')",
                           arg=root_id, timeout=60_000)
    assert log.errors == [] and log.foreign() == []


def test_a_result_without_a_chart_hides_the_last_one(open_page):
    # no ledger row of GB200 has an estimate: the calibration calculator returns no series, and the chart of the
    # inputs before (all accelerators) must not stay on screen as if it were this selection's; with rows it returns
    page, log, root_id = open_block(open_page, "calibration")
    figure = page.locator(f"#{root_id} figure")
    figure.scroll_into_view_if_needed()
    set_field(page, root_id, "hardware", "gb200")
    wait_for_outputs(page, root_id, expected_outputs("calibration", with_defaults("calibration", {"hardware": "gb200"})))
    page.wait_for_function("id => document.querySelector(`#${id} figure`).hidden", arg=root_id, timeout=30_000)
    assert page.text_content(f"#{root_id} [data-calc-status]").startswith("Live")
    set_field(page, root_id, "hardware", "any")
    page.wait_for_function("id => !document.querySelector(`#${id} figure`).hidden", arg=root_id, timeout=30_000)
    assert log.errors == [] and log.foreign() == []


def test_every_mode_of_the_calibration_ledger_answers_within_the_call_timeout(open_page):
    # computing a mode's predictions in Pyodide outlasted the worker's 15 s call timeout: the worker was restarted
    # and asked again, forever. The wheel carries every mode (sitegen/predictions.py); these two were computed then.
    page, log, root_id = open_block(open_page, "calibration")
    page.locator(f"#{root_id} figure").scroll_into_view_if_needed()
    wait_live(page, root_id)
    for given in ({"step_overhead": "eager", "communication": "none"}, {"step_overhead": "none"}):
        for key, value in given.items():
            set_field(page, root_id, key, value)
        inputs = with_defaults("calibration", given)
        wait_for_outputs(page, root_id, expected_outputs("calibration", inputs), timeout=10_000)
        for key in given:
            set_field(page, root_id, key, with_defaults("calibration", {})[key])
    assert "restarted" not in page.text_content(f"#{root_id} [data-calc-status]")
    assert page.evaluate("() => window.llmsi.runtime.state") == "ready"
    assert log.errors == [] and log.foreign() == []


def test_the_latency_band_in_the_eager_mode_answers_within_the_call_timeout(open_page):
    # the band beside the latency calculator's results reads the ledger's predictions at the chosen overhead mode
    page, log, root_id = open_block(open_page, "latency")
    page.locator(f"#{root_id}").scroll_into_view_if_needed()
    wait_live(page, root_id)
    set_field(page, root_id, "step_overhead", "eager")
    inputs = with_defaults("latency", {"step_overhead": "eager"})
    wait_for_outputs(page, root_id, expected_outputs("latency", inputs), timeout=10_000)
    page.wait_for_function(
        "([id, note]) => document.querySelector(`#${id}`).textContent.includes(note)",
        arg=[root_id, calc_page.present("latency", inputs)["notes"][-1][:120]], timeout=10_000)
    assert "restarted" not in page.text_content(f"#{root_id} [data-calc-status]")
    assert log.errors == [] and log.foreign() == []


BAD_NUMBERS = ["", "abc", "-5", "0", "1e400"]


@pytest.mark.parametrize("bad", BAD_NUMBERS)
def test_bad_input_gets_a_message_and_keeps_the_last_result(workbench, bad):
    page, log = workbench
    root = "workbench-kv-cache"
    set_field(page, root, "context_tokens", 4096)
    good = expected_outputs("kv_cache", {"model": "llama-3.1-70b", "context_tokens": 4096})
    wait_for_outputs(page, root, good)
    set_field(page, root, "context_tokens", bad)
    error = page.locator(f"#{root} [data-field='context_tokens'] [data-error]")
    error.wait_for(state="visible", timeout=30_000)
    assert "1 and 10,000,000" in error.text_content()
    assert page.get_attribute(f"#{root}-context_tokens", "aria-invalid") == "true"
    assert shown_outputs(page, root) == good
    text = page.inner_text(f"#{root}")
    for word in ("NaN", "undefined", "Infinity", "Traceback"):
        assert word not in text
    assert log.errors == []


def test_shared_link_restores_the_same_results(workbench, browser):
    page, _ = workbench
    root = "workbench-kv-cache"
    set_field(page, root, "model", "qwen3-32b")
    set_field(page, root, "context_tokens", 65536)
    wait_for = {"model": "qwen3-32b", "context_tokens": 65536}
    wait_for_outputs(page, root, expected_outputs("kv_cache", wait_for))
    page.click(f"#{root} [data-action='link']")
    link = page.evaluate("id => window.llmsi.calcs.find(c => c.id === id) && "
                         f"new URL(location.href).origin + '{WORKBENCH}?' + new URLSearchParams({{calc: id, model: 'qwen3-32b', "
                         "context_tokens: '65536', bogus: '<img src=x onerror=alert(1)>'}).toString()", root)
    fresh = browser.new_context()
    other = fresh.new_page()
    errors = []
    other.on("pageerror", lambda e: errors.append(str(e)))
    other.on("dialog", lambda d: errors.append("dialog opened: " + d.message))
    other.goto(link)
    wait_live(other, root)
    assert shown_outputs(other, root) == expected_outputs("kv_cache", wait_for)
    assert "Ignored link parameter(s)" in other.text_content(f"#{root} [data-calc-status]")
    assert other.locator("img[src=x]").count() == 0 and errors == []
    fresh.close()


def test_a_custom_accelerator_appears_on_another_page(open_page):
    page, _ = _ready(open_page, page_of("roofline"))
    root = "workbench-roofline"
    page.click(f"#{root} [data-define='accelerator']")
    page.wait_for_function("() => document.querySelector('#calc-define-json').value.includes('memory_bandwidth')",
                           timeout=60_000)
    definition = json.loads(page.input_value("#calc-define-json"))
    definition["memory_bandwidth_bytes_per_s"] = 5.0e12
    page.fill("#calc-define-json", json.dumps(definition))
    page.fill("#calc-define-name", "Test chip 5 TB/s")
    page.click("dialog [data-do='save']")
    # the confirmation reads the raw JSON in units (reader walk #27), and keeps the dialog open until read
    page.wait_for_function("() => document.querySelector('#calc-define-error').textContent.startsWith('Saved')")
    said = page.text_content("#calc-define-error")
    assert "5 TB/s memory bandwidth" in said and "989.4 TFLOP/s BF16 dense" in said and "5000000000000" not in said
    page.click("dialog [data-do='cancel']")
    page.wait_for_function("() => !document.querySelector('dialog.calc-define').open")
    assert page.input_value(f"#{root}-hardware") == "custom:test-chip-5-tb-s"
    # Kept under the site-path-scoped key, as Material keeps its own ("<site path>.<key>").
    assert "Test chip 5 TB/s" in page.evaluate("() => localStorage.getItem('/.llmsi-custom:v1')")
    wait_live(page, root)
    again = page.context.new_page()
    again.goto(page.url.split("/workbench/")[0] + page_of("memory"))  # another family's page
    options = again.eval_on_selector_all("#workbench-memory select[data-kind='accelerator'] option",
                                         "os => os.map(o => o.textContent)")
    assert "Test chip 5 TB/s" in options


@pytest.mark.parametrize("definition, field_word", [
    ('{"num_hidden_layers": 32, "model_type": "llama"', "JSON"),                         # truncated paste
    ('{"model_type": "llama", "num_hidden_layers": 0, "hidden_size": 4096}', "definition"),
])
def test_a_broken_config_json_is_explained(workbench, definition, field_word):
    page, _ = workbench
    page.click("#workbench-kv-cache [data-define='model']")
    page.wait_for_function("() => document.querySelector('#calc-define-json').value.length > 10", timeout=60_000)
    page.fill("#calc-define-json", definition)
    page.fill("#calc-define-name", "Broken")
    page.click("dialog [data-do='save']")
    error = page.locator("#calc-define-error")
    error.wait_for(state="visible", timeout=30_000)
    assert field_word in error.text_content()
    assert page.evaluate("() => document.querySelector('dialog.calc-define').open")


def test_a_hung_worker_is_replaced_and_the_reader_told(workbench):
    page, log = workbench
    root = "workbench-memory"
    page.evaluate("""() => { const rt = window.llmsi.runtime; rt.callTimeoutMs = 1000;
                             rt.worker.postMessage = () => {}; }""")   # the worker stops answering
    set_field(page, root, "tensor_parallel", 2)
    page.wait_for_function(f"() => document.querySelector('#{root} [data-calc-status]').textContent.includes('restarted')"
                           f" || document.querySelector('#{root} [data-calc-status]').textContent.startsWith('Live')",
                           timeout=30_000)
    wait_live(page, root)
    assert page.evaluate("() => window.llmsi.runtime.state") == "ready"


def test_python_loads_only_when_a_calculator_comes_into_view(open_page):
    page, log = open_page("/parts/01-decode-loop/")
    first = page.locator(".calc[data-calc]").first
    assert first.evaluate("el => el.getBoundingClientRect().top > innerHeight + 200"), \
        "precondition: Part 1's first calculator starts below the fold"
    page.wait_for_timeout(1500)
    python = lambda: [u for u in log.requests if "/vendor/pyodide/" in u or "/snapshots/" in u]
    assert python() == [], "Python was fetched before any calculator was in view"
    first.scroll_into_view_if_needed()
    wait_live(page, first.get_attribute("id"))
    assert python()


def boot_marks(page) -> dict:
    return calculator_worker(page).evaluate("() => self.llmsi.bootMarks()")


def test_python_starts_from_the_build_snapshot_without_the_wheel(workbench):
    page, log = workbench
    marks = boot_marks(page)
    assert marks["via"] == "snapshot" and "snapshotError" not in marks, marks
    assert any(u.endswith("/calculators.snapshot") for u in log.requests)
    assert not any("/assets/wheels/" in u for u in log.requests), "the snapshot already holds the core"
    assert log.errors == []


def _truncated(route):
    body = route.fetch().body()
    route.fulfill(status=200, body=body[: len(body) // 2], content_type="application/gzip")


@pytest.mark.parametrize("damage", [
    lambda route: route.fulfill(status=404, body="gone"),   # a partial deploy
    _truncated,                                             # a damaged file: gzip's check fails
], ids=["missing", "truncated"])
def test_without_a_usable_snapshot_python_starts_from_the_wheel(browser, server, damage):
    context = browser.new_context()
    context.route("**/calculators.snapshot", damage)
    page = context.new_page()
    page.goto(server.origin + WORKBENCH)
    wait_live(page, "workbench-kv-cache")
    marks = boot_marks(page)
    assert marks["via"] == "wheel" and marks["snapshotError"], marks
    inputs = with_defaults("kv_cache", json.loads(page.get_attribute("#workbench-kv-cache", "data-inputs")))
    assert shown_outputs(page, "workbench-kv-cache") == expected_outputs("kv_cache", inputs)
    context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_with_calculators_live_and_unfolded(open_page, scheme):
    page, log = open_page(WORKBENCH, scheme=scheme)
    page.evaluate("() => document.querySelectorAll('.calc details').forEach(d => d.open = true)")
    page.evaluate("() => window.llmsi.runtime.start()")
    wait_live(page, "workbench-kv-cache")
    assert run_axe(page) == []
    assert log.errors == [] and log.foreign() == []

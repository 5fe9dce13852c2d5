"""Issue #18's reader walk (/work/shared/reviews/reader-walk.md) in a real browser: the rows of the
"Define your own…" dialog, links, exports and charts. Each test failed on the site before its fix; row
numbers are the report's."""

from __future__ import annotations

import base64
import json

import pytest
from playwright.sync_api import expect

from sitegen import workbench as families


def page_of(name: str) -> str:
    """The workbench family page a calculator is on."""
    return next(f"/workbench/{f.slug}/" for f in families.families() if name in f.calculators)


WORKBENCH = page_of("kv_cache")  # workbench-kv-cache and workbench-memory are on it
KV = "workbench-kv-cache"
STORED = "() => JSON.parse(localStorage.getItem('/.llmsi-custom:v1') || '{}')"
LLAMA_8B = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
}


def ready(open_page, path=WORKBENCH, scheme="light"):
    page, log = open_page(path, scheme)
    page.wait_for_function("() => window.llmsi && window.llmsi.runtime")
    page.evaluate("() => window.llmsi.runtime.start()")
    page.wait_for_function("() => window.llmsi.runtime.state === 'ready'", timeout=120_000)
    return page, log


def settle(page):
    """Every call the worker had before this one has been answered (it answers in order)."""
    page.evaluate("() => window.llmsi.runtime.describe('model', 'llama-3.1-8b')")


def open_define(page, root=KV, kind="model"):
    page.click(f"#{root} [data-define='{kind}']")
    page.wait_for_function("() => document.querySelector('#calc-define-json').value.length > 10", timeout=60_000)


def save_definition(page, name, definition):
    page.fill("#calc-define-json", definition if isinstance(definition, str) else json.dumps(definition))
    page.fill("#calc-define-name", name)
    page.click("dialog [data-do='save']")


def saved(page):
    """A save went through: the dialog says 'Saved' (with the import's note of what it read and assumed,
    it stays open to show it) and is closed."""
    assert message(page).startswith("Saved")
    page.click("dialog [data-do='cancel']")
    page.wait_for_function("() => !document.querySelector('dialog.calc-define').open")


def message(page):
    error = page.locator("#calc-define-error")
    error.wait_for(state="visible", timeout=30_000)
    return error.text_content()


# ---- row 2: a message beside the field, never an internal error ---------------------------------
@pytest.mark.parametrize(
    "definition, key",
    [
        ({"model_type": "foo", "architectures": 5}, "architectures"),
        (dict(LLAMA_8B, num_hidden_layers=1_000_000_000), "num_hidden_layers"),
    ],
)
def test_a_bad_config_gets_a_message_on_its_key(open_page, definition, key):
    page, log = ready(open_page)
    open_define(page)
    save_definition(page, "Bad", definition)
    text = message(page)
    assert key in text and "internal error" not in text and "Traceback" not in text, text
    assert log.errors == []


# ---- row 3: Python's prefill never replaces what the reader typed -------------------------------
def test_what_the_reader_types_before_python_answers_is_kept(open_page):
    page, log = open_page(WORKBENCH)
    page.wait_for_function("() => window.llmsi && window.llmsi.runtime")
    assert page.evaluate("() => window.llmsi.runtime.state") != "ready"
    page.click(f"#{KV} [data-define='model']")
    page.fill("#calc-define-name", "Pasted first")
    page.fill("#calc-define-json", json.dumps(LLAMA_8B))
    page.wait_for_function("() => window.llmsi.runtime.state === 'ready'", timeout=120_000)
    settle(page)
    assert page.input_value("#calc-define-name") == "Pasted first"
    assert json.loads(page.input_value("#calc-define-json")) == LLAMA_8B
    page.click("dialog [data-do='prefill']")  # asked for: it does replace them
    page.wait_for_function("() => document.querySelector('#calc-define-name').value.endsWith('(mine)')")
    assert log.errors == []


# ---- row 4: unique ids; replacing one asks first -----------------------------------------------
def test_names_that_slug_alike_ask_before_replacing(open_page):
    page, log = ready(open_page)
    for name in ("!!!", "我的模型", "Collide"):
        open_define(page)
        save_definition(page, name, LLAMA_8B)
        saved(page)
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    open_define(page)
    save_definition(page, "collide", LLAMA_8B)
    assert "Not saved" in message(page) and "Collide" in asked[0]
    names = sorted(e["name"] for e in page.evaluate(STORED)["model"].values())
    assert names == sorted(["!!!", "我的模型", "Collide"])
    assert log.errors == []


# ---- rows 8 and 24: Phi-3 is accepted; what was assumed is said --------------------------------
def test_phi3_is_accepted_and_an_assumed_mha_is_said(open_page):
    page, log = ready(open_page)
    phi3 = dict(
        LLAMA_8B,
        model_type="phi3",
        architectures=["Phi3ForCausalLM"],
        hidden_size=3072,
        intermediate_size=8192,
        num_key_value_heads=32,
        vocab_size=32064,
    )
    open_define(page)
    save_definition(page, "Phi-3 mini", phi3)
    assert "'phi3' is not one this site knows" in message(page)
    page.click("dialog [data-do='cancel']")  # the note keeps the dialog open until read
    no_kv = dict(LLAMA_8B)
    del no_kv["num_key_value_heads"]
    open_define(page)
    save_definition(page, "No KV heads", no_kv)
    assert "multi-head attention assumed" in message(page)
    assert page.input_value(f"#{KV}-model").startswith("custom:")
    assert log.errors == []


# ---- row 12: a short, counted notice for unknown link parameters ----------------------------------
def test_unknown_link_parameters_are_counted_not_echoed(open_page):
    junk = "&".join(f"k{i}{'x' * 40}=1" for i in range(300))
    page, _ = open_page(f"{WORKBENCH}?calc={KV}&{junk}#{KV}")
    status = page.locator(f"#{KV} [data-calc-status]")
    page.wait_for_function(
        f"() => document.querySelector('#{KV} [data-calc-status]').textContent.includes('Ignored')", timeout=120_000
    )
    text = status.text_content()
    notice = text[text.index("Ignored") :]
    assert "(300)" in notice and "297 more" in notice and len(notice) < 160, text


# ---- row 14: the dialog's buttons are buttons; a success is not said as an error -----------------
def test_dialog_buttons_are_styled_and_import_success_is_neutral(open_page, tmp_path):
    page, log = ready(open_page)
    open_define(page)
    save = page.locator("dialog [data-do='save']")
    style = save.evaluate("e => { const s = getComputedStyle(e); return [s.backgroundColor, s.borderTopWidth]; }")
    assert style[0] not in ("rgba(0, 0, 0, 0)", "transparent") and float(style[1].rstrip("px")) > 0, style
    cancel = page.locator("dialog [data-do='cancel']").evaluate("e => getComputedStyle(e).borderTopStyle")
    assert cancel == "solid"
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"v": 1, "model": {"mine": {"name": "Mine", "definition": LLAMA_8B}}}))
    page.set_input_files("dialog [data-do='import']", str(good))
    assert message(page) == "Imported 1 definition."
    weight = page.locator("#calc-define-error").evaluate("e => getComputedStyle(e).fontWeight")
    assert int(weight) < 700
    assert log.errors == []


# ---- row 28: import says "not JSON" and checks every entry ----------------------------------------
def test_import_refuses_broken_files_and_bad_entries(open_page, tmp_path):
    page, log = ready(open_page)
    open_define(page)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    page.set_input_files("dialog [data-do='import']", str(broken))
    assert message(page) == "Import failed: the file is not JSON."
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "v": 1,
                "model": {
                    "ok": {"name": "Fine", "definition": LLAMA_8B},
                    "evil": {"name": "Evil", "definition": dict(LLAMA_8B, num_hidden_layers=0)},
                },
            }
        )
    )
    page.set_input_files("dialog [data-do='import']", str(bad))
    page.wait_for_function("() => document.querySelector('#calc-define-error').textContent.includes('Evil')")
    text = message(page)
    assert text.startswith("Import failed") and "Evil" in text and "num_hidden_layers" in text, text
    assert page.evaluate(STORED).get("model", {}) == {}  # all or nothing
    assert log.errors == []


# ---- row 27: a definition started from a preset does not keep the preset's provenance -------------
def test_a_prefilled_accelerator_leaves_the_presets_id_and_notes_out(open_page):
    page, _ = ready(open_page, page_of("roofline"))
    open_define(page, "workbench-roofline", "accelerator")
    started = json.loads(page.input_value("#calc-define-json"))
    assert not {"id", "source", "notes", "memory_note", "url"} & set(started), sorted(started)


# ---- rows 1 and 31: exports fit for reuse -----------------------------------------------------
PIXELS = """async (b64) => {
  const img = await createImageBitmap(await (await fetch(`data:image/png;base64,${b64}`)).blob());
  const canvas = new OffscreenCanvas(img.width, img.height);
  const ctx = canvas.getContext("2d");
  ctx.drawImage(img, 0, 0);
  const data = ctx.getImageData(0, 0, img.width, img.height).data;
  let clear = 0, dark = 0;
  for (let i = 0; i < data.length; i += 4) {
    if (data[i + 3] < 255) clear += 1;
    if (data[i] + data[i + 1] + data[i + 2] < 150) dark += 1;
  }
  return { clear, dark, total: data.length / 4, width: img.width };
}"""


def download(page, root, action):
    with page.expect_download(timeout=60_000) as info:
        page.click(f"#{root} [data-action='{action}']")
    return open(info.value.path(), "rb").read()


def test_a_dark_mode_png_is_opaque_with_dark_text(open_page):
    page, log = ready(open_page, scheme="dark")
    root = "workbench-memory"
    page.locator(f"#{root}").scroll_into_view_if_needed()
    png = download(page, root, "png")
    pixels = page.evaluate(PIXELS, base64.b64encode(png).decode())
    assert pixels["clear"] == 0, pixels  # no transparent pixel
    assert pixels["dark"] > 0.002 * pixels["total"], pixels  # text and axes drawn dark on white
    assert log.errors == []


def test_json_inputs_are_typed_and_csv_inputs_labelled(open_page):
    page, _ = ready(open_page)
    root = "workbench-memory"
    page.locator(f"#{root}").scroll_into_view_if_needed()
    data = json.loads(download(page, root, "json"))
    assert data["inputs"]["tensor_parallel"] == 1 or isinstance(data["inputs"]["tensor_parallel"], int)
    assert isinstance(data["inputs"]["gpu_memory_utilization"], float)
    assert isinstance(data["inputs"]["model"], str)
    rows = [line.split(",") for line in download(page, root, "csv").decode().splitlines()]
    inputs = [r for r in rows if r[0] == "input"]
    assert inputs and all(r[2] for r in inputs), inputs[:3]


# ---- rows 10 and 11: charts -----------------------------------------------------------------
LAYOUT = (
    "sel => { const c = document.querySelector(sel); return c && c._fullLayout && {"
    "x: c._fullLayout.xaxis.type, y: c._fullLayout.yaxis.range, y2: !!c._fullLayout.yaxis2} }"
)


def live_layout(page, root):
    page.locator(f"#{root} .calc__plot, #{root} figure").first.scroll_into_view_if_needed()
    page.wait_for_function(f"() => !!document.querySelector('#{root} .js-plotly-plot')", timeout=120_000)
    return page.evaluate(LAYOUT, f"#{root} .js-plotly-plot")


def test_attainment_axis_is_0_to_100_and_tp_axis_categorical(open_page):
    page, log = ready(open_page, page_of("goodput"))
    goodput = live_layout(page, "workbench-goodput")
    assert -5 <= goodput["y"][0] <= 0 and goodput["y"][1] >= 100, goodput  # room for a marker at 0
    page.goto(page.url.split("/workbench/")[0] + WORKBENCH)
    memory = live_layout(page, "workbench-memory")
    assert memory["x"] == "category" and memory["y2"], memory
    page.goto(page.url.split("/workbench/")[0] + page_of("roofline"))
    live_layout(page, "workbench-roofline")  # row 34: one notation on a log axis, 10ⁿ
    fmt = page.evaluate(
        "() => { const y = document.querySelector('#workbench-roofline .js-plotly-plot')._fullLayout.yaxis;"
        " return { type: y.type, exponentformat: y.exponentformat }; }"
    )
    assert fmt["type"] == "log" and fmt["exponentformat"] == "power", fmt
    assert log.errors == []


# ---- row 33: tabbing out of the reader-settings panel closes it ------------------------------------
def test_tabbing_past_the_settings_panel_closes_it(open_page):
    page, log = open_page("/")
    toggle = page.locator("[data-rs-toggle]")
    toggle.focus()
    page.keyboard.press("Enter")
    assert page.is_visible("#rs-panel")
    page.focus("#rs-panel [data-rs-reset]")
    page.keyboard.press("Tab")
    assert not page.evaluate("document.getElementById('rs-panel').contains(document.activeElement)")
    assert page.is_hidden("#rs-panel") and toggle.get_attribute("aria-expanded") == "false"
    assert log.errors == []


# ---- row 13: the title's permalink stays on the title's line ---------------------------------------
@pytest.mark.parametrize("path, width", [("/parts/04-kv-cache/", 1280), ("/parts/03-ttft-tpot-goodput/", 390)])
def test_a_one_line_title_is_one_line_tall(open_page, path, width):
    page, _ = open_page(path, viewport={"width": width, "height": 900})
    lines = page.evaluate("""() => {
      const h = document.querySelector('.md-typeset h1');
      const range = document.createRange();
      range.selectNodeContents(h);
      range.setEndBefore(h.querySelector('.headerlink'));
      const text = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
      const lineHeight = parseFloat(getComputedStyle(h).lineHeight);
      return { textLines: text.size, height: h.getBoundingClientRect().height, lineHeight,
               scroll: document.documentElement.scrollWidth - document.documentElement.clientWidth };
    }""")
    expected = lines["lineHeight"] * lines["textLines"]
    assert lines["height"] <= expected + 2, lines
    assert lines["scroll"] <= 0, lines


# ---- row 26: a manager lists yours, to rename, delete or export each ---------------------------------
YOURS = "() => [...document.querySelectorAll('#calc-define-yours li > span')].map(s => s.textContent)"


def test_the_manager_renames_exports_and_deletes_one_of_yours(open_page, tmp_path):
    page, log = ready(open_page)
    open_define(page)
    assert page.is_visible("#calc-define-none") and page.evaluate(YOURS) == []
    save_definition(page, "To rename", LLAMA_8B)
    saved(page)
    open_define(page)
    save_definition(page, "Kept", dict(LLAMA_8B, num_hidden_layers=16))
    saved(page)
    assert page.input_value(f"#{KV}-model") == "custom:kept"
    page.select_option(f"#{KV}-model", "custom:to-rename")
    open_define(page)
    assert page.evaluate(YOURS) == ["To rename", "Kept"] and page.is_hidden("#calc-define-none")
    # Rename: the list, every select and the selection follow the new name; the old id is gone.
    page.once("dialog", lambda d: d.accept("Renamed 8B"))
    page.click("#calc-define-yours [aria-label='Rename your model \"To rename\"']")
    assert message(page) == 'Renamed "To rename" to "Renamed 8B".'
    assert page.evaluate(YOURS) == ["Kept", "Renamed 8B"]
    assert set(page.evaluate(STORED)["model"]) == {"kept", "renamed-8b"}
    assert page.input_value(f"#{KV}-model") == "custom:renamed-8b"
    names = page.eval_on_selector_all("#workbench-memory-model optgroup[label='Yours'] option", "os => os.map(o => o.text)")
    assert names == ["Kept", "Renamed 8B"]
    # Export one: a file the import takes back, holding that one only.
    with page.expect_download() as got:
        page.click("#calc-define-yours [aria-label='Export your model \"Kept\"']")
    exported = json.loads(open(got.value.path()).read())
    assert exported["v"] == 1 and list(exported["model"]) == ["kept"] and exported["model"]["kept"]["name"] == "Kept"
    # Delete, after asking: gone from the list, the storage and the selects.
    page.once("dialog", lambda d: d.accept())
    page.click("#calc-define-yours [aria-label='Delete your model \"Kept\"']")
    assert message(page) == 'Deleted "Kept".'
    assert page.evaluate(YOURS) == ["Renamed 8B"] and list(page.evaluate(STORED)["model"]) == ["renamed-8b"]
    # The exported file comes back through the import, checked by Python.
    path = tmp_path / "kept.json"
    path.write_text(json.dumps(exported))
    page.set_input_files("#calc-define-yours ~ .calc__actions input[type=file]", str(path))
    # the delete's message is still showing: wait for the import's (Python checks the file first)
    expect(page.locator("#calc-define-error")).to_have_text("Imported 1 definition.", timeout=30_000)
    assert page.evaluate(YOURS) == ["Renamed 8B", "Kept"]
    assert log.errors == []


# ---- row 29: the reader's point is marked on a chart whose x axis is an input ---------------------
TRACES = "sel => document.querySelector(sel).data.map(t => [t.name, t.type, t.mode, t.x.length])"


def test_the_readers_point_is_a_marker_on_bars_and_lines(open_page):
    page, log = ready(open_page)
    for root in ("workbench-memory", "workbench-kv-cache"):
        live_layout(page, root)
        traces = page.evaluate(TRACES, f"#{root} .js-plotly-plot")
        mine = [t for t in traces if t[0].startswith("yours")]
        assert len(mine) == 1 and mine[0][1:3] == ["scatter", "markers"], traces
        assert all(t[1] == "bar" for t in traces if t not in mine) or root != "workbench-memory", traces
    assert log.errors == []

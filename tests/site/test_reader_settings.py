"""Reader settings: header button, panel, storage, pre-paint application, live sync, a11y, layout.

Each test opens the built site in Chromium through the suite's `open_page` fixture.
"""
from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

import pytest

from conftest import run_axe
from harness import ROOT, SITE, sitemap_paths

# Scoped by site path as Material scopes its own keys ("<site path>.<key>"); the test server serves
# the site at "/". OLD_KEY is the unscoped key used before issue #12.
OLD_KEY = "reader-settings:v1"
KEY = "/." + OLD_KEY
DEFAULTS = {"appearance": "system", "text": 100, "width": 70, "leading": 1.6,
            "density": "comfortable", "motion": "system", "units": "binary"}
WIDE = {"text": 200, "leading": 2.2, "density": "spacious", "width": 90}


def seeded(**settings):
    """open_page(storage=...) value: the settings, stored as the site stores them."""
    return {KEY: json.dumps({"v": 1, **settings})}


def open_panel(page):
    page.click("[data-rs-toggle]")
    page.wait_for_selector("#rs-panel", state="visible")


def html_data(page):
    return page.evaluate("({...document.documentElement.dataset})")


def body_scheme(page):
    return page.evaluate("document.body.getAttribute('data-md-color-scheme')")


def stored(page):
    return page.evaluate("k => localStorage.getItem(k)", KEY)


# ---- what each setting promises, measured in computed style -------------------------------------

PROBE = """() => {
  const art = document.querySelector('.md-content__inner');
  let p = art.querySelector(':scope > p');
  if (!p) { p = document.createElement('p'); p.textContent = 'probe'; art.append(p); }
  let cell = document.getElementById('rs-probe-cell');
  if (!cell) {
    const t = document.createElement('table');
    t.innerHTML = '<tr><td id="rs-probe-cell">x</td></tr>';
    art.append(t);
    cell = t.querySelector('td');
  }
  const cs = e => getComputedStyle(e);
  const px = v => parseFloat(v);
  const bodyFont = px(cs(p).fontSize);
  return {
    rootFont: px(cs(document.documentElement).fontSize),
    measure: px(cs(p).maxWidth),
    leading: px(cs(p).lineHeight) / bodyFont,
    cellPadding: px(cs(cell).paddingTop),
    headerTransition: cs(document.querySelector('.md-header__button')).transitionDuration,
    bodyBg: cs(document.body).backgroundColor,
    scheme: document.body.getAttribute('data-md-color-scheme'),
  };
}"""

# setting -> (how to change it in the panel, value, value shown, check(before, after))
SETTINGS = {
    "appearance": ("radio", "dark", "Dark",
                   lambda a, b: a["scheme"] == "default" and b["scheme"] == "slate" and a["bodyBg"] != b["bodyBg"]),
    "text": ("range", "150", "150%", lambda a, b: a["rootFont"] == 20 and b["rootFont"] == 30),
    "width": ("range", "50", "50ch", lambda a, b: abs(b["measure"] / a["measure"] - 50 / 70) < 0.01),
    "leading": ("range", "2", "2.0", lambda a, b: abs(a["leading"] - 1.6) < 0.01 and abs(b["leading"] - 2.0) < 0.01),
    "density": ("radio", "spacious", "Spacious", lambda a, b: abs(b["cellPadding"] / a["cellPadding"] - 1.4) < 0.02),
    "motion": ("radio", "reduced", "Reduced", lambda a, b: a["headerTransition"] != "0s" and b["headerTransition"] == "0s"),
}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_setting_changes_style_and_persists(open_page, name):
    kind, value, shown, check = SETTINGS[name]
    page, log = open_page("/", scheme="light")
    before = page.evaluate(PROBE)
    open_panel(page)
    if kind == "radio":
        page.check(f'#rs-panel input[name="{name}"][value="{value}"]')
    else:
        page.fill(f'#rs-panel input[name="{name}"]', value)
    after = page.evaluate(PROBE)
    assert check(before, after), (before, after)
    assert json.loads(stored(page))[name] == (value if kind == "radio" else float(value))
    # the panel shows the current value
    assert page.text_content(f'[data-rs-value="{name}"]') == shown

    page.reload(wait_until="load")
    assert check(before, page.evaluate(PROBE)), "lost on reload"
    page.goto(page.url.split("#")[0] + "404.html", wait_until="load")
    assert check(before, page.evaluate(PROBE)), "lost on navigation"
    assert log.errors == []


# Settings as stored -> what must hold at DOMContentLoaded, with reader-settings.js blocked: the
# inline scripts alone apply them, before the first paint.
def test_seeded_settings_apply_before_first_paint(browser, server):
    context = browser.new_context(color_scheme="light")
    try:
        context.add_init_script("localStorage.setItem(%s, %s);" % (
            json.dumps(KEY), json.dumps(json.dumps({"v": 1, "appearance": "dark", "text": 150, "width": 55,
                                                    "leading": 1.9, "density": "compact", "motion": "reduced"}))))
        # Record the state at DOMContentLoaded, before any load-time script could catch up.
        context.add_init_script("""document.addEventListener('DOMContentLoaded', () => { window.__dcl = {
            data: {...document.documentElement.dataset},
            rootFont: parseFloat(getComputedStyle(document.documentElement).fontSize),
            leading: getComputedStyle(document.documentElement).getPropertyValue('--rs-leading').trim(),
            measure: getComputedStyle(document.documentElement).getPropertyValue('--rs-measure').trim(),
            scheme: document.body.getAttribute('data-md-color-scheme'),
            headerTransition: getComputedStyle(document.querySelector('.md-header__button')).transitionDuration,
        }; });""")
        # And at the moment the header element is parsed (the body script must already have run).
        context.add_init_script("""new MutationObserver((ms, obs) => {
            const h = document.querySelector('header.md-header');
            if (h && !window.__atHeader) { window.__atHeader = document.body.getAttribute('data-md-color-scheme'); obs.disconnect(); }
        }).observe(document, {childList: true, subtree: true});""")
        page = context.new_page()
        page.route("**/reader-settings.js", lambda route: route.abort())
        page.goto(server.origin + "/", wait_until="load")
        dcl = page.evaluate("window.__dcl")
        assert dcl["data"]["rsAppearance"] == "dark" and dcl["data"]["rsScheme"] == "dark"
        assert dcl["data"]["rsMotion"] == "reduced" and dcl["data"]["rsDensity"] == "compact"
        assert dcl["scheme"] == "slate"
        assert dcl["rootFont"] == 30
        assert dcl["leading"] == "1.9" and dcl["measure"] == "55ch"
        assert dcl["headerTransition"] == "0s"
        assert page.evaluate("window.__atHeader") == "slate"
        assert page.evaluate("typeof window.llmsi.settings.state") == "undefined", "the JS file was meant to be blocked"
    finally:
        context.close()


def test_prepaint_scripts_are_classic_and_early(open_page):
    page, _ = open_page("/")
    info = page.evaluate("""() => {
      const head = [...document.head.querySelectorAll('script')];
      const mine = head.findIndex(s => s.textContent.includes('llmsi.settings = {'));
      const firstBody = document.body.querySelector('script');
      return {mine, type: mine >= 0 ? head[mine].type : null, module: head[mine] && head[mine].type === 'module',
              headerAfter: firstBody.compareDocumentPosition(document.querySelector('header')) & Node.DOCUMENT_POSITION_FOLLOWING,
              firstBody: firstBody.textContent};
    }""")
    assert info["mine"] >= 0 and not info["module"] and info["type"] == ""
    # The body script is the first script in <body> and comes before the header.
    assert "data-md-color-scheme" in info["firstBody"] and info["headerAfter"]


# ---- system following, events, motion -----------------------------------------------------------

def test_system_appearance_follows_os_live(open_page):
    page, log = open_page("/", scheme="light")
    page.evaluate("""window.__events = [];
        document.addEventListener('reader-settings', e => window.__events.push(e.detail));""")
    assert body_scheme(page) == "default" and html_data(page)["rsScheme"] == "light"
    page.emulate_media(color_scheme="dark")
    page.wait_for_function("document.body.getAttribute('data-md-color-scheme') === 'slate'")
    assert html_data(page)["rsScheme"] == "dark"
    events = page.evaluate("window.__events")
    assert events and events[-1]["scheme"] == "dark" and events[-1]["appearance"] == "system"
    page.emulate_media(color_scheme="light")
    page.wait_for_function("document.body.getAttribute('data-md-color-scheme') === 'default'")
    assert page.evaluate("window.__events.at(-1).scheme") == "light"
    # An explicit choice no longer follows the OS.
    page.click("[data-rs-cycle]")  # system -> light
    page.emulate_media(color_scheme="dark")
    page.wait_for_timeout(100)
    assert body_scheme(page) == "default"
    assert log.errors == []


def test_header_button_cycles_and_names_its_states(open_page):
    page, _ = open_page("/", scheme="dark")
    btn = page.locator("[data-rs-cycle]")
    seen = []
    for _ in range(4):
        label = btn.get_attribute("aria-label")
        visible = page.evaluate("""[...document.querySelectorAll('[data-rs-cycle] .rs-icon')]
            .filter(e => getComputedStyle(e).display !== 'none').map(e => e.className)""")
        seen.append((html_data(page)["rsAppearance"], body_scheme(page), label, visible))
        btn.click()
    assert [s[0] for s in seen] == ["system", "light", "dark", "system"]
    assert [s[1] for s in seen] == ["slate", "default", "slate", "slate"]
    assert seen[0][2] == "Appearance: system (dark now). Switch to light"
    assert seen[1][2] == "Appearance: light. Switch to dark"
    assert seen[2][2] == "Appearance: dark. Switch to system"
    assert [s[3] for s in seen] == [["rs-icon rs-icon--system"], ["rs-icon rs-icon--light"],
                                    ["rs-icon rs-icon--dark"], ["rs-icon rs-icon--system"]]


ANIMATED = """() => {
  if (!document.getElementById('rs-anim-probe')) {
    const s = document.createElement('style');
    s.textContent = '@keyframes rs-spin { to { transform: rotate(1turn); } }';
    document.head.append(s);
    const d = document.createElement('div');
    d.id = 'rs-anim-probe';
    d.style.cssText = 'animation: rs-spin 1s linear infinite; transition: opacity 2s';
    document.querySelector('.md-content__inner').append(d);
  }
  const cs = e => getComputedStyle(e);
  const probe = document.getElementById('rs-anim-probe');
  const mine = document.querySelector('[data-rs-cycle]');
  return {
    running: document.getAnimations().filter(a => a.playState === 'running').length,
    probeAnimation: cs(probe).animationName, probeTransition: cs(probe).transitionDuration,
    material: [...document.querySelectorAll('.md-header__button, .md-nav__link, .md-search__input, .md-top')]
      .map(e => cs(e).transitionDuration),
    mine: [cs(mine).transitionDuration, cs(mine).animationName,
           cs(document.getElementById('rs-panel')).transitionDuration],
    motion: document.documentElement.dataset.rsMotion,
  };
}"""


def _all_still(s):
    return (s["running"] == 0 and s["probeAnimation"] == "none" and s["probeTransition"] == "0s"
            and set(s["material"]) == {"0s"} and s["mine"] == ["0s", "none", "0s"] and s["motion"] == "reduced")


def test_reduced_motion_setting_stops_everything(open_page):
    page, _ = open_page("/", reduced_motion="no-preference")
    full = page.evaluate(ANIMATED)
    assert full["motion"] == "full" and full["running"] >= 1 and full["probeAnimation"] == "rs-spin"
    assert full["material"][0] == "0.25s"  # .md-header__button
    page.evaluate("""window.__events = [];
        document.addEventListener('reader-settings', e => window.__events.push(e.detail.motion));""")
    open_panel(page)
    page.check('#rs-panel input[name="motion"][value="reduced"]')
    reduced = page.evaluate(ANIMATED)
    assert _all_still(reduced), reduced
    assert page.evaluate("window.__events") == ["reduced"]


def test_reduced_motion_from_os_live(open_page):
    page, _ = open_page("/", reduced_motion="no-preference")
    assert page.evaluate(ANIMATED)["running"] >= 1
    page.emulate_media(reduced_motion="reduce")
    page.wait_for_function("document.documentElement.dataset.rsMotion === 'reduced'")
    assert _all_still(page.evaluate(ANIMATED))


def test_full_motion_under_os_reduce_is_what_the_panel_says(open_page):
    """'Full' adds no reduction of its own; Material still drops its own transitions (its
    !important rule under the OS request), exactly as the panel's explanation says."""
    page, _ = open_page("/", reduced_motion="reduce", storage=seeded(motion="full"))
    s = page.evaluate(ANIMATED)
    assert s["motion"] == "full" and s["probeAnimation"] == "rs-spin" and s["running"] >= 1
    assert set(s["material"]) == {"0s"}
    assert "theme still keeps its menu and search transitions off" in page.text_content("#rs-help-motion")


# ---- layout at the extremes -------------------------------------------------------------------------

WIDE_TABLE = """() => {
  const art = document.querySelector('.md-content__inner');
  const wrap = document.createElement('div');
  wrap.className = 'md-typeset__scrollwrap';
  const cells = n => Array.from({length: n}, (_, i) => '<td>column number ' + i + '</td>').join('');
  wrap.innerHTML = '<div class="md-typeset__table"><table><tr>' + cells(20) + '</tr></table></div>';
  art.append(wrap);
}"""

OVERFLOW = """() => {
  const out = [];
  for (const t of document.querySelectorAll('.md-content table')) {
    const box = t.closest('.md-typeset__scrollwrap') || t.parentElement;
    const s = getComputedStyle(box).overflowX;
    const r = box.getBoundingClientRect();
    if (!(s === 'auto' || s === 'scroll') && t.scrollWidth > box.clientWidth + 1) out.push('unwrapped wide table');
    if (r.right > innerWidth + 1 || r.left < -1) out.push('table wrapper outside viewport');
  }
  return {page: document.documentElement.scrollWidth, body: document.body.scrollWidth,
          width: innerWidth, problems: out,
          rootFont: parseFloat(getComputedStyle(document.documentElement).fontSize)};
}"""


@pytest.mark.parametrize("page_path", sitemap_paths(SITE) if (SITE / "sitemap.xml").exists() else ["/"])
def test_no_horizontal_scroll_at_200_percent(open_page, page_path):
    page, log = open_page(page_path, viewport={"width": 1280, "height": 800}, storage=seeded(**WIDE))
    page.wait_for_load_state("networkidle")
    page.evaluate(WIDE_TABLE)
    r = page.evaluate(OVERFLOW)
    assert r["rootFont"] == 40
    assert r["page"] <= r["width"] and r["body"] <= r["width"], r
    assert r["problems"] == [], r
    # the wide table scrolls inside its own wrapper
    assert page.evaluate("""() => { const w = [...document.querySelectorAll('.md-typeset__scrollwrap')].at(-1);
        return w.scrollWidth > w.clientWidth && getComputedStyle(w).overflowX === 'auto'; }""")
    # the open panel fits the viewport too, and scrolls inside itself
    open_panel(page)
    box = page.evaluate("(() => { const r = document.getElementById('rs-panel').getBoundingClientRect();"
                        " return [r.left, r.right, r.bottom, innerWidth, innerHeight]; })()")
    assert box[0] >= 0 and box[1] <= box[3] and box[2] <= box[4]
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    assert log.errors == []


# ---- storage ------------------------------------------------------------------------------------

CORRUPT = [
    "not json {",
    "null",
    "[]",
    '"dark"',
    "42",
    json.dumps({"v": 2, "appearance": "dark", "text": 150}),          # another version
    json.dumps({"appearance": "dark", "text": 150}),                  # no version
    json.dumps({"v": 1, "appearance": "purple", "text": "150", "width": 1e9, "leading": -1,
                "density": None, "motion": {"x": 1}}),
    '{"v": 1, "text": 1e999, "width": NaN}',
    json.dumps({"v": 1, "text": 500, "width": 10, "leading": 9, "density": "cozy", "motion": "always"}),
]


@pytest.mark.parametrize("raw", CORRUPT)
def test_corrupt_storage_falls_back_to_defaults(open_page, raw):
    page, log = open_page("/", storage={KEY: raw})
    assert page.evaluate("window.llmsi.settings.state()") == {
        **{k: v for k, v in DEFAULTS.items() if k not in ("motion",)},
        "motionSetting": "system", "scheme": "light", "motion": "full", "textScale": 1.0}
    assert page.evaluate(PROBE)["rootFont"] == 20 and body_scheme(page) == "default"
    assert log.errors == []


def test_storage_that_throws_is_harmless(open_page):
    # Every storage call for our key throws, as with storage disabled. (Only ours: Material's own
    # __md_get has no try/catch, so a blanket trap reports Material's error, not ours.)
    page, log = open_page("/")
    page.context.add_init_script("""for (const m of ['getItem', 'setItem', 'removeItem']) {
        const orig = Storage.prototype[m];
        Storage.prototype[m] = function (k, ...rest) {
            if (k === %s) throw new DOMException('denied', 'SecurityError');
            return orig.call(this, k, ...rest);
        };
    }""" % json.dumps(KEY))
    page.reload(wait_until="load")
    assert html_data(page)["rsAppearance"] == "system"
    page.click("[data-rs-cycle]")
    assert html_data(page)["rsAppearance"] == "light"
    open_panel(page)
    page.click("[data-rs-reset]")
    assert html_data(page)["rsAppearance"] == "system"
    assert log.errors == []


def test_settings_under_the_old_unscoped_key_move_once(open_page):
    old = json.dumps({"v": 1, "appearance": "dark", "text": 150})
    page, log = open_page("/", scheme="no-preference", storage={OLD_KEY: old})
    assert html_data(page)["rsAppearance"] == "dark" and page.evaluate(PROBE)["rootFont"] == 30
    assert stored(page) == old
    assert page.evaluate("k => localStorage.getItem(k)", OLD_KEY) is None, "the old key stays behind"
    assert log.errors == []


def test_the_scoped_key_wins_over_an_old_unscoped_one(open_page):
    page, log = open_page("/", scheme="no-preference", storage={
        OLD_KEY: json.dumps({"v": 1, "appearance": "dark"}), KEY: json.dumps({"v": 1, "appearance": "light"})})
    assert html_data(page)["rsAppearance"] == "light"
    assert page.evaluate("k => localStorage.getItem(k)", OLD_KEY) is not None, "only a missing scoped key migrates"
    assert log.errors == []


def test_reset_restores_defaults(open_page):
    page, log = open_page("/")
    open_panel(page)
    page.check('#rs-panel input[name="density"][value="compact"]')
    page.fill('#rs-panel input[name="text"]', "180")
    assert stored(page) is not None
    page.click("[data-rs-reset]")
    assert stored(page) is None
    assert page.evaluate(PROBE)["rootFont"] == 20
    assert page.is_checked('#rs-panel input[name="density"][value="comfortable"]')
    assert page.input_value('#rs-panel input[name="text"]') == "100"
    assert page.text_content('[data-rs-value="text"]') == "100%"


def test_other_tabs_follow(open_page):
    page, log = open_page("/", scheme="light")
    other = page.context.new_page()
    other.goto(page.url, wait_until="load")
    other.evaluate("""window.__events = [];
        document.addEventListener('reader-settings', e => window.__events.push(e.detail));""")
    open_panel(page)
    page.check('#rs-panel input[name="appearance"][value="dark"]')
    page.fill('#rs-panel input[name="text"]', "130")
    other.wait_for_function("document.body.getAttribute('data-md-color-scheme') === 'slate'")
    other.wait_for_function("getComputedStyle(document.documentElement).fontSize === '26px'")
    events = other.evaluate("window.__events")
    assert events[-1]["scheme"] == "dark" and events[-1]["text"] == 130
    other.close()


# ---- keyboard, labels, axe ------------------------------------------------------------------------

def wait_for_search_shortcut(page):
    """Material binds its search hotkeys once search has started (its status line stops saying
    "Initializing search"); until then "s" does nothing anywhere, and a check that it does nothing
    inside the panel would prove nothing."""
    page.wait_for_function("() => { const m = document.querySelector('.md-search-result__meta');"
                           " return m && m.textContent.trim() && !/initializ/i.test(m.textContent); }", timeout=60_000)


def test_panel_keyboard_flow(open_page):
    page, log = open_page("/")
    wait_for_search_shortcut(page)
    toggle = page.locator("[data-rs-toggle]")
    toggle.focus()
    page.keyboard.press("Enter")
    assert toggle.get_attribute("aria-expanded") == "true" and page.is_visible("#rs-panel")
    page.keyboard.press("Tab")
    assert page.evaluate("document.getElementById('rs-panel').contains(document.activeElement)")
    # Material's single-key shortcuts do not fire from inside the panel.
    for key in ["f", "s", "/", "p", "n", ",", "."]:
        page.keyboard.press(key)
        assert not page.evaluate("document.getElementById('__search').checked"), key
        assert page.evaluate("document.getElementById('rs-panel').contains(document.activeElement)"), key
    page.wait_for_timeout(300)   # Material applies the toggle a moment after the key: give it time to (wrongly) fire
    assert not page.evaluate("document.getElementById('__search').checked")
    # Arrow keys work on the native controls.
    page.focus('#rs-panel input[name="text"]')
    page.keyboard.press("ArrowRight")
    assert page.text_content('[data-rs-value="text"]') == "110%"
    # Escape closes and returns focus to the button.
    page.keyboard.press("Escape")
    assert page.is_hidden("#rs-panel") and toggle.get_attribute("aria-expanded") == "false"
    assert page.evaluate("document.activeElement === document.querySelector('[data-rs-toggle]')")
    # Space reopens; a click elsewhere closes.
    page.keyboard.press(" ")
    assert page.is_visible("#rs-panel")
    page.mouse.click(5, 400)
    assert page.is_hidden("#rs-panel")
    # Control: outside the panel the shortcut does fire, so the check above means something.
    page.focus("[data-rs-cycle]")
    page.keyboard.press("s")
    page.wait_for_function("() => document.getElementById('__search').checked", timeout=3000)
    assert log.errors == []


def test_every_control_is_labelled(open_page):
    page, _ = open_page("/")
    open_panel(page)
    names = page.evaluate("""() => [...document.querySelectorAll('[data-rs-header] button, #rs-panel input')]
        .map(e => e.labels && e.labels.length ? e.labels[0].textContent.trim() : (e.getAttribute('aria-label') || e.textContent.trim()))""")
    assert all(names), names
    assert page.get_attribute("[data-rs-toggle]", "aria-controls") == "rs-panel"


def test_control_ranges_match_the_validator(open_page):
    page, _ = open_page("/")
    r = page.evaluate("""() => Object.entries(window.llmsi.settings.ranges).map(([k, [lo, hi, step]]) => {
        const i = document.querySelector('#rs-panel input[name="' + k + '"]');
        return [k, +i.min === lo, +i.max === hi, +i.step === step, +i.defaultValue === window.llmsi.settings.defaults[k]]; })""")
    assert all(all(x[1:]) for x in r), r
    e = page.evaluate("""() => Object.entries(window.llmsi.settings.enums).map(([k, vals]) =>
        [k, JSON.stringify([...document.querySelectorAll('#rs-panel input[name="' + k + '"]')].map(i => i.value)) === JSON.stringify(vals)])""")
    assert all(x[1] for x in e), e
    assert page.evaluate("window.llmsi.settings.defaults") == DEFAULTS


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_with_panel_open(open_page, scheme):
    page, log = open_page("/", scheme=scheme)
    assert body_scheme(page) == ("slate" if scheme == "dark" else "default")
    open_panel(page)
    assert run_axe(page) == []
    assert log.errors == []


# ---- the copied Material partial -----------------------------------------------------------------

def test_header_partial_matches_pinned_material():
    """overrides/partials/header.html is Material's own file plus our marked include: nothing else."""
    assert version("mkdocs-material") == "9.8.2", "Material changed: re-copy partials/header.html and re-mark"
    import material
    upstream = (Path(material.__file__).parent / "templates" / "partials" / "header.html").read_text()
    ours = (ROOT / "overrides" / "partials" / "header.html").read_text()
    marked = re.compile(r"[ \t]*\{#- reader-settings: begin -#\}\n.*?\{#- reader-settings: end -#\}\n", re.S)
    assert len(marked.findall(ours)) == 1
    assert marked.sub("", ours) == upstream

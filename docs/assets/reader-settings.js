/* Reader settings: the header's appearance button, the settings panel, storage and live sync.
 *
 * INTERFACE FOR OTHER SCRIPTS (plots, calculators)
 *
 *   Effective state, always current (also before this file runs: the pre-paint script sets it):
 *     document.documentElement.dataset.rsScheme   "light" | "dark"     (what is on screen)
 *     document.documentElement.dataset.rsMotion   "reduced" | "full"   (what to honour)
 *     CSS: var(--rs-text-scale) (1 = 100 %), var(--rs-density) (0.7 | 1 | 1.4) on <html>
 *
 *   Changes: document.addEventListener("reader-settings", e => { ... e.detail ... })
 *     fired whenever the state changes: a setting in this tab or another tab, or the OS colour
 *     scheme / reduced-motion preference while the matching setting is "system". Once more at load.
 *     e.detail = {
 *       scheme: "light" | "dark",            effective
 *       motion: "reduced" | "full",          effective (plots: no transitions when "reduced")
 *       appearance: "system" | "light" | "dark",     the setting
 *       motionSetting: "system" | "reduced" | "full", the setting
 *       text: 80..200 (%), textScale: 0.8..2, width: 45..90 (ch), leading: 1.2..2.2,
 *       density: "compact" | "comfortable" | "spacious"
 *     }
 *   window.readerSettings.state() returns the same object at any time.
 *
 * Storage: one localStorage key ("reader-settings:v1", JSON with v: 1), validated on every read
 * by window.__rs (defined by the inline script in overrides/partials/reader-settings.html);
 * anything invalid falls back to the defaults. Every storage access is in try/catch.
 */
(function () {
  "use strict";
  var rs = window.__rs;
  if (!rs || window.readerSettings) return;

  var root = document.documentElement;
  var settings = rs.read();
  var lastSent = "";
  var NAMES = {system: "System", light: "Light", dark: "Dark", compact: "Compact", comfortable: "Comfortable",
               spacious: "Spacious", reduced: "Reduced", full: "Full"};
  var CYCLE = ["system", "light", "dark"];

  var header = document.querySelector("[data-rs-header]");
  var cycle = header && header.querySelector("[data-rs-cycle]");
  var disclosure = header && header.querySelector("[data-rs-disclosure]");
  var toggle = header && header.querySelector("[data-rs-toggle]");
  var panel = document.getElementById("rs-panel");
  var form = panel && panel.querySelector("[data-rs-form]");

  function copy(s) { var o = {}, k; for (k in s) o[k] = s[k]; return o; }

  function state() {
    var e = rs.effective(settings);
    return {scheme: e.scheme, motion: e.motion, appearance: settings.appearance, motionSetting: settings.motion,
            text: settings.text, textScale: settings.text / 100, width: settings.width,
            leading: settings.leading, density: settings.density};
  }

  function save() {
    var o = copy(settings);
    o.v = rs.V;
    try { window.localStorage.setItem(rs.KEY, JSON.stringify(o)); } catch { /* storage off: session only */ }
  }

  function forget() {
    try { window.localStorage.removeItem(rs.KEY); } catch { /* nothing stored then */ }
  }

  /* Like Material's own palette switch: no transitions while the colours change. */
  function quietly(fn) {
    var body = document.body;
    body.setAttribute("data-md-color-switching", "");
    fn();
    requestAnimationFrame(function () {
      requestAnimationFrame(function () { body.removeAttribute("data-md-color-switching"); });
    });
  }

  function render() {
    var s = state();
    if (cycle) {
      var next = CYCLE[(CYCLE.indexOf(s.appearance) + 1) % CYCLE.length];
      var now = s.appearance === "system" ? "system (" + s.scheme + " now)" : s.appearance;
      var label = "Appearance: " + now + ". Switch to " + next;
      cycle.setAttribute("aria-label", label);
      cycle.setAttribute("title", label);
    }
    if (!form) return;
    ["appearance", "density", "motion"].forEach(function (name) {
      Array.prototype.forEach.call(form.elements[name], function (input) {
        input.checked = input.value === settings[name];
      });
    });
    form.elements.text.value = settings.text;
    form.elements.width.value = settings.width;
    form.elements.leading.value = settings.leading;
    var shown = {
      appearance: settings.appearance === "system" ? "System (" + s.scheme + " now)" : NAMES[settings.appearance],
      text: settings.text + "%", width: settings.width + "ch", leading: settings.leading.toFixed(1),
      density: NAMES[settings.density],
      motion: settings.motion === "system" ? "System (" + s.motion + " now)" : NAMES[settings.motion]
    };
    Object.keys(shown).forEach(function (name) {
      var out = form.querySelector('[data-rs-value="' + name + '"]');
      if (out) out.textContent = shown[name];
    });
    form.elements.text.setAttribute("aria-valuetext", shown.text);
    form.elements.width.setAttribute("aria-valuetext", settings.width + " characters");
  }

  /* Apply the current settings, refresh the controls, tell other scripts if anything changed. */
  function update(switching) {
    var before = root.dataset.rsScheme;
    var go = function () { rs.apply(settings); };
    if (switching && before !== rs.effective(settings).scheme) quietly(go); else go();
    render();
    var s = state(), key = JSON.stringify(s);
    if (key !== lastSent) {
      lastSent = key;
      document.dispatchEvent(new CustomEvent("reader-settings", {detail: s}));
    }
  }

  function set(name, value) {
    var next = copy(settings);
    next[name] = value;
    next.v = rs.V;
    settings = rs.valid(next);  /* the same validation as on read */
    save();
    update(true);
  }

  /* ---- header: appearance cycle ---- */
  if (cycle) cycle.addEventListener("click", function () {
    set("appearance", CYCLE[(CYCLE.indexOf(settings.appearance) + 1) % CYCLE.length]);
  });

  /* ---- panel: a non-modal disclosure ---- */
  function isOpen() { return panel && !panel.hidden; }
  function open() { panel.hidden = false; toggle.setAttribute("aria-expanded", "true"); render(); }
  function close(refocus) {
    if (!isOpen()) return;
    panel.hidden = true;
    toggle.setAttribute("aria-expanded", "false");
    if (refocus) toggle.focus();
  }

  if (toggle && panel && form) {
    toggle.addEventListener("click", function () { if (isOpen()) close(false); else open(); });

    /* Material's single-key shortcuts (f, s, /, p, n, ",", ".") listen on window: keep keys typed
       here from reaching them. Escape closes the panel and returns focus to its button. */
    disclosure.addEventListener("keydown", function (ev) {
      if (ev.key === "Escape" && isOpen()) {
        ev.preventDefault();
        close(true);
      }
      ev.stopPropagation();
    });

    document.addEventListener("click", function (ev) {
      if (isOpen() && !disclosure.contains(ev.target)) close(false);
    });

    form.addEventListener("submit", function (ev) { ev.preventDefault(); });
    form.addEventListener("input", function (ev) {
      var t = ev.target;
      if (!t.name || !(t.name in rs.defaults)) return;
      if (t.type === "range") set(t.name, Number(t.value));
      else if (t.type === "radio" && t.checked) set(t.name, t.value);
    });
    form.querySelector("[data-rs-reset]").addEventListener("click", function () {
      settings = rs.valid(null);
      forget();
      update(true);
    });
  }

  /* ---- the OS, other tabs ---- */
  function watch(query) {
    try {
      var mq = window.matchMedia(query);
      var fn = function () { update(true); };
      if (mq.addEventListener) mq.addEventListener("change", fn); else mq.addListener(fn);
    } catch { /* no matchMedia: settings still work */ }
  }
  watch("(prefers-color-scheme: dark)");
  watch("(prefers-reduced-motion: reduce)");

  window.addEventListener("storage", function (ev) {
    if (ev.key !== null && ev.key !== rs.KEY) return;
    settings = rs.read();
    update(true);
  });
  /* Back/forward cache: the page may come back after settings changed elsewhere. */
  window.addEventListener("pageshow", function (ev) {
    if (ev.persisted) { settings = rs.read(); update(false); }
  });

  window.readerSettings = {state: state};
  update(false);
})();

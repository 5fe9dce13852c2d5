/* Reader settings: the header's appearance button, the settings panel, storage and live sync.
 *
 * INTERFACE FOR OTHER SCRIPTS (plots, calculators)
 *
 *   Effective state, always current (also before this module runs: the pre-paint script sets it):
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
 *   window.llmsi.settings.state() returns the same object at any time.
 *
 * Storage: one localStorage key ("reader-settings:v1", JSON with v: 1, scoped by site path through
 * window.llmsi.store as Material scopes its own), validated on every read by window.llmsi.settings
 * (both defined by the inline script in overrides/partials/reader-settings.html); anything invalid
 * falls back to the defaults. Every storage access is in try/catch.
 */
const rs = window.llmsi?.settings;
const store = window.llmsi?.store;
const NAMES = { system: "System", light: "Light", dark: "Dark", compact: "Compact", comfortable: "Comfortable",
                spacious: "Spacious", reduced: "Reduced", full: "Full", binary: "GiB", decimal: "GB" };
const CYCLE = ["system", "light", "dark"];
const nextAppearance = (now) => CYCLE[(CYCLE.indexOf(now) + 1) % CYCLE.length];

const header = document.querySelector("[data-rs-header]");
const cycle = header?.querySelector("[data-rs-cycle]");
const disclosure = header?.querySelector("[data-rs-disclosure]");
const toggle = header?.querySelector("[data-rs-toggle]");
const panel = document.getElementById("rs-panel");
const form = panel?.querySelector("[data-rs-form]");
let settings = rs?.read();
let lastSent = "";

function state() {
  const { scheme, motion } = rs.effective(settings);
  const { appearance, motion: motionSetting, text, width, leading, density, units } = settings;
  return { scheme, motion, appearance, motionSetting, text, textScale: text / 100, width, leading, density, units };
}

function save() {
  try {
    store.write(rs.KEY, JSON.stringify({ ...settings, v: rs.V }));
  } catch { /* storage off: session only */ }
}

function forget() {
  try { store.remove(rs.KEY); } catch { /* nothing stored then */ }
}

// Like Material's own palette switch: no transitions while the colours change.
function quietly(fn) {
  document.body.setAttribute("data-md-color-switching", "");
  fn();
  requestAnimationFrame(() => requestAnimationFrame(() => document.body.removeAttribute("data-md-color-switching")));
}

function renderCycle(s) {
  const now = s.appearance === "system" ? `system (${s.scheme} now)` : s.appearance;
  const label = `Appearance: ${now}. Switch to ${nextAppearance(s.appearance)}`;
  cycle.setAttribute("aria-label", label);
  cycle.setAttribute("title", label);
}

function renderPanel(s) {
  for (const name of ["appearance", "density", "motion", "units"]) {
    for (const input of form.elements[name]) input.checked = input.value === settings[name];
  }
  for (const name of ["text", "width", "leading"]) form.elements[name].value = settings[name];
  const shown = {
    appearance: settings.appearance === "system" ? `System (${s.scheme} now)` : NAMES[settings.appearance],
    text: `${settings.text}%`, width: `${settings.width}ch`, leading: settings.leading.toFixed(1),
    density: NAMES[settings.density], units: NAMES[settings.units],
    motion: settings.motion === "system" ? `System (${s.motion} now)` : NAMES[settings.motion],
  };
  for (const [name, text] of Object.entries(shown)) {
    const out = form.querySelector(`[data-rs-value="${name}"]`);
    if (out) out.textContent = text;
  }
  form.elements.text.setAttribute("aria-valuetext", shown.text);
  form.elements.width.setAttribute("aria-valuetext", `${settings.width} characters`);
}

function render() {
  const s = state();
  if (cycle) renderCycle(s);
  if (form) renderPanel(s);
}

// Apply the current settings, refresh the controls, tell other scripts if anything changed.
function update(switching) {
  const go = () => rs.apply(settings);
  if (switching && document.documentElement.dataset.rsScheme !== rs.effective(settings).scheme) quietly(go);
  else go();
  render();
  const s = state();
  const key = JSON.stringify(s);
  if (key === lastSent) return;
  lastSent = key;
  document.dispatchEvent(new CustomEvent("reader-settings", { detail: s }));
}

function set(name, value) {
  settings = rs.valid({ ...settings, [name]: value, v: rs.V });   // the same validation as on read
  save();
  update(true);
}

// ---- the panel: a non-modal disclosure ----
const isOpen = () => panel && !panel.hidden;

function open() {
  panel.hidden = false;
  toggle.setAttribute("aria-expanded", "true");
  render();
}

function close(refocus) {
  if (!isOpen()) return;
  panel.hidden = true;
  toggle.setAttribute("aria-expanded", "false");
  if (refocus) toggle.focus();
}

function mountPanel() {
  toggle.addEventListener("click", () => (isOpen() ? close(false) : open()));
  // Material's single-key shortcuts (f, s, /, p, n, ",", ".") listen on window: keep keys typed
  // here from reaching them. Escape closes the panel and returns focus to its button.
  disclosure.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && isOpen()) { ev.preventDefault(); close(true); }
    ev.stopPropagation();
  });
  document.addEventListener("click", (ev) => { if (isOpen() && !disclosure.contains(ev.target)) close(false); });
  // Tabbing past its last control closes it too: a non-modal panel does not stay open over the page.
  const leaves = (to) => to && !disclosure.contains(to);
  disclosure.addEventListener("focusout", ({ relatedTarget }) => { if (leaves(relatedTarget)) close(false); });
  form.addEventListener("submit", (ev) => ev.preventDefault());
  form.addEventListener("input", ({ target: t }) => {
    if (!t.name || !(t.name in rs.defaults)) return;
    if (t.type === "range") set(t.name, Number(t.value));
    else if (t.type === "radio" && t.checked) set(t.name, t.value);
  });
  form.querySelector("[data-rs-reset]").addEventListener("click", () => {
    settings = rs.valid(null);
    forget();
    update(true);
  });
}

// ---- the OS, other tabs, the back/forward cache ----
function watchOutside() {
  for (const query of ["(prefers-color-scheme: dark)", "(prefers-reduced-motion: reduce)"]) {
    try {
      matchMedia(query).addEventListener("change", () => update(true));
    } catch { /* no matchMedia: settings still work */ }
  }
  window.addEventListener("storage", (ev) => {
    if (ev.key !== null && ev.key !== store.key(rs.KEY)) return;
    settings = rs.read();
    update(true);
  });
  // The page may come back from the back/forward cache after settings changed elsewhere.
  window.addEventListener("pageshow", (ev) => { if (ev.persisted) { settings = rs.read(); update(false); } });
}

if (rs && !rs.state) {
  if (cycle) cycle.addEventListener("click", () => set("appearance", nextAppearance(settings.appearance)));
  if (toggle && panel && form) mountPanel();
  watchOutside();
  rs.state = state;
  update(false);
}

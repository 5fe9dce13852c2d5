// What the reader brings: their own models and accelerators, and links to a calculator's inputs.
// Definitions come from the "Define your own…" dialog (a pasted Hugging Face config.json, or the
// project's JSON shape), are checked by Python before they are stored, kept in this browser and
// offered in every calculator on every page. Links are ?calc=<id>&<input>=<value>…#<id>; their
// values only ever go into form controls (never into markup), and Python validates them like typed
// input. A calculator is used only through inputs(), setInput(key, value) and recompute().
import { dom, download } from "./figures.js";

const KEY = "llmsi-custom:v1";
const KINDS = ["model", "accelerator"];
const NAME_MAX = 48;

// ---- the reader's definitions, in this browser ---------------------------------------------
const empty = () => ({ v: 1, model: {}, accelerator: {} });
const valid = (entry) => entry && typeof entry === "object" && typeof entry.name === "string"
  && entry.definition && typeof entry.definition === "object";
const slug = (name) => name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "").slice(0, NAME_MAX)
  || "custom";

// Copies the well-formed entries of `from` into `into`; returns how many.
function merge(into, from, idFor = (id) => id) {
  let count = 0;
  for (const kind of KINDS) {
    for (const [id, entry] of Object.entries(from[kind] || {})) {
      if (valid(entry)) { into[kind][idFor(id)] = entry; count += 1; }
    }
  }
  return count;
}

// Through the site's scoped storage (window.llmsi.store, set up by the page's head script).
const storage = () => window.llmsi.store;

function load() {
  const data = empty();
  // Storage may be disabled, full or hold a foreign value: any of those means "none yet".
  try {
    const stored = JSON.parse(storage().read(KEY));
    if (stored?.v === 1) merge(data, stored);
  } catch { /* none yet */ }
  return data;
}

function save(data) {
  try { storage().write(KEY, JSON.stringify(data)); return true; } catch { return false; }
}

// What a model or accelerator select's value stands for when it is not a preset: the reader's own
// definition, or one that came with a link (`shared`: the calculator's, by input key); else null.
export function definitionOf(kind, value, shared) {
  if (value.startsWith("custom:")) return load()[kind][value.slice(7)]?.definition ?? null;
  return value.startsWith("shared:") ? shared[value.slice(7)] ?? null : null;
}

// Imported entries still go through Python's validation before use; here only their shape.
function importAll(text) {
  const incoming = JSON.parse(text);
  if (incoming?.v !== 1) throw new Error("not an export of this site (expected \"v\": 1)");
  const data = load();
  const count = merge(data, incoming, slug);
  if (!save(data)) throw new Error("this browser refused to store them");
  return count;
}

// ---- the model and accelerator selects -------------------------------------------------------
// The page's preset lists, {model: [[id, name], …], accelerator: […]}: the build writes only the
// chosen preset into each <select>, and one list per page (see calc_html.page_config_html).
let presets = { model: [], accelerator: [] };

// Fills the "Presets" group and rebuilds the "Yours" group of one select, keeping the selection.
function populate(select, mine) {
  const kind = dom.get(select, "kind");
  const keep = select.value;
  const group = select.querySelector("optgroup:not([data-custom])");
  if (group && group.children.length < presets[kind].length) {
    group.replaceChildren(...presets[kind].map(([id, name]) => new Option(name, id)));
  }
  select.querySelectorAll("optgroup[data-custom]").forEach((g) => g.remove());
  const entries = Object.entries(mine[kind]);
  if (entries.length) {
    const yours = Object.assign(document.createElement("optgroup"), { label: "Yours" });
    yours.dataset.custom = "";
    yours.append(...entries.map(([id, entry]) => new Option(entry.name, `custom:${id}`)));
    select.append(yours);
  }
  if ([...select.options].some((o) => o.value === keep)) select.value = keep;
}

function refreshSelects() {
  const mine = load();
  document.querySelectorAll(`.calc select${dom.sel("kind")}`).forEach((select) => populate(select, mine));
}

// Once per page: every select offers every preset and the reader's own, also after another tab adds one.
export function setupSelects(lists) {
  presets = lists;
  refreshSelects();
  window.addEventListener("storage", (event) => {
    if (event.key === storage().key(KEY) || event.key === null) refreshSelects();
  });
}

// ---- the "Define your own…" dialog -----------------------------------------------------------
let dialog = null;
const $ = (selector) => dialog.querySelector(selector);

// The dialog's markup is in the page (overrides/partials/calc-define.html): one dialog for every calculator.
function build() {
  const d = document.getElementById("calc-define-template").content.firstElementChild.cloneNode(true);
  d.addEventListener("keydown", (e) => { if (e.key !== "Escape") e.stopPropagation(); });
  document.body.append(d);
  return d;
}

function tell(message) {
  $("#calc-define-error").textContent = message;
  $("#calc-define-error").hidden = !message;
}

async function prefill({ calc, runtime, kind, key }) {
  const found = await runtime.describe(kind, calc.inputs()[key]);
  $("#calc-define-json").value = JSON.stringify(found, null, 2);
  $("#calc-define-name").value = `${found.name || "Mine"} (mine)`;
}

async function store({ calc, runtime, kind, key }) {
  const name = $("#calc-define-name").value.trim().slice(0, NAME_MAX);
  if (!name) return tell(`Name: give it a name (up to ${NAME_MAX} characters).`);
  let value;
  try { value = JSON.parse($("#calc-define-json").value); } catch (err) {
    return tell(`Definition: not valid JSON (${err.message}).`);
  }
  const checked = await runtime.describe(kind, value);
  const data = load();
  const id = slug(name);
  data[kind][id] = { name, definition: { ...checked, name } };
  if (!save(data)) return tell("This browser refused to store it (storage is full or disabled).");
  refreshSelects();
  calc.setInput(key, `custom:${id}`);
  dialog.close();
  calc.recompute();
}

async function importFile(input) {
  if (!input.files[0]) return;
  const count = importAll(await input.files[0].text());
  refreshSelects();
  tell(`Imported ${count} definition(s).`);
}

export function openDefine(calc, runtime, button) {
  dialog = dialog || build();
  const kind = dom.get(button, "define");
  const job = { calc, runtime, kind, key: dom.get(button.closest(dom.sel("field")), "field") };
  for (const part of ["#calc-define-title", "#calc-define-hint"]) $(part).textContent = $(part).dataset[kind];
  tell("");
  const run = (fn) => fn().catch((err) => tell(err.message));
  const actions = {
    prefill: () => run(() => prefill(job)), save: () => run(() => store(job)), cancel: () => dialog.close(),
    export: () => download("llm-serving-definitions.json", JSON.stringify(load(), null, 2), "application/json"),
  };
  dialog.onclick = (e) => actions[e.target.dataset.do]?.();
  dialog.onchange = (e) => { if (e.target.dataset.do === "import") run(() => importFile(e.target)); };
  dialog.onclose = () => button.focus();
  dialog.showModal();
  actions.prefill();
}

// ---- links -----------------------------------------------------------------------------------
export function linkFor(id, inputs) {
  const url = new URL(window.location.href);
  url.search = "";
  url.hash = id;
  url.searchParams.set("calc", id);
  for (const [key, value] of Object.entries(inputs)) {
    url.searchParams.set(key, typeof value === "object" ? JSON.stringify(value) : String(value));
  }
  return url.href;
}

// Applies this page's link to the calculator it names; returns what to tell the reader ("" if all was
// used), or null if the link is not for this calculator.
export function applyLink(calc) {
  const params = new URLSearchParams(window.location.search);
  if (params.get("calc") !== calc.id) return null;
  params.delete("calc");
  const known = calc.inputs();
  const ignored = [];
  for (const [key, raw] of params) {
    if (!(key in known) || !calc.setInput(key, fromLink(raw))) ignored.push(key);
  }
  return ignored.length ? `Ignored link parameter(s) that this calculator cannot use: ${ignored.join(", ")}.` : "";
}

// A shared definition travels as its JSON text; anything else is the control's value.
function fromLink(raw) {
  if (!raw.startsWith("{")) return raw;
  try { return JSON.parse(raw); } catch { return raw; }
}

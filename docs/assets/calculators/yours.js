// What the reader brings: their own models and accelerators, from the "Define your own…" dialog (a Hugging Face
// config.json, or the project's JSON shape), checked by Python, kept in this browser, offered in every calculator
// and listed in the dialog to rename, delete or export. A calculator is used through inputs(), setInput(), recompute().
import { dom } from "./figures.js";
import { download, element } from "../tables.js";

const [KEY, KINDS, NAME_MAX] = ["llmsi-custom:v1", ["model", "accelerator"], 48];

// ---- the reader's definitions, in this browser ---------------------------------------------
const empty = () => ({ v: 1, model: {}, accelerator: {} });
const valid = (entry) => entry && typeof entry === "object" && typeof entry.name === "string"
  && entry.definition && typeof entry.definition === "object";
// A name's id: its Latin letters and digits; a name with none ("我的模型") is spelled by its code points.
const slug = (name) => name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "").slice(0, NAME_MAX)
  || `u-${[...name].map((ch) => ch.codePointAt(0).toString(36)).join("-")}`.slice(0, NAME_MAX);

// Copies the well-formed entries of `from` into `into`; returns how many.
function merge(into, from, idFor = (id) => id) {
  const found = KINDS.flatMap((kind) => Object.entries(from[kind] || {}).map(([id, entry]) => [kind, id, entry]));
  const good = found.filter(([, , entry]) => valid(entry));
  good.forEach(([kind, id, entry]) => { into[kind][idFor(id)] = entry; });
  return good.length;
}

// Through the site's scoped storage (window.llmsi.store, set up by the page's head script). Storage may
// be disabled, full or hold a foreign value: any of those means "none yet".
const storage = () => window.llmsi.store;
function load() {
  const data = empty();
  try { const stored = JSON.parse(storage().read(KEY)); if (stored?.v === 1) merge(data, stored); } catch { /* none */ }
  return data;
}
const save = (data) => { try { storage().write(KEY, JSON.stringify(data)); return true; } catch { return false; } };

// What a model or accelerator select's value stands for when it is not a preset: the reader's own
// definition, or one that came with a link (`shared`: the calculator's, by input key); else null.
export function definitionOf(kind, value, shared) {
  if (value.startsWith("custom:")) return load()[kind][value.slice(7)]?.definition ?? null;
  return value.startsWith("shared:") ? shared[value.slice(7)] ?? null : null;
}

// An export file, each entry checked by Python as a saved one is; the file is taken whole or not at all.
async function importAll(text, runtime) {
  let incoming;
  try { incoming = JSON.parse(text); } catch { throw new Error("Import failed: the file is not JSON."); }
  if (incoming?.v !== 1) throw new Error("Import failed: not an export of this site (expected \"v\": 1).");
  const [checked, data] = [empty(), load()], count = merge(checked, incoming);
  for (const kind of KINDS) {
    for (const [id, entry] of Object.entries(checked[kind])) {
      try { await runtime.describe(kind, entry.definition); } catch (err) {
        throw new Error(`Import failed: ${kind} "${entry.name}": ${err.message}`);
      }
      checked[kind][id] = { name: entry.name, definition: { ...entry.definition, name: entry.name } };
    }
  }
  merge(data, checked, slug);
  if (!save(data)) throw new Error("Import failed: this browser refused to store them.");
  return count;
}

// ---- the model and accelerator selects -------------------------------------------------------
// The page's preset lists ({model: [[id, name], …], accelerator: […]}, one per page): a <select> holds its choice.
let presets = { model: [], accelerator: [] };

// Fills the "Presets" group and rebuilds the "Yours" group of a select, keeping (or renaming) the selection.
function populate(select, mine, renamed) {
  const kind = dom.get(select, "kind");
  const keep = renamed[select.value] ?? select.value;
  const group = select.querySelector("optgroup:not([data-custom])");
  if (group && group.children.length < presets[kind].length) {
    group.replaceChildren(...presets[kind].map(([id, name]) => new Option(name, id)));
  }
  select.querySelectorAll("optgroup[data-custom]").forEach((g) => g.remove());
  const entries = Object.entries(mine[kind]);
  const yours = element("optgroup", { label: "Yours" }, ...entries.map(([id, e]) => new Option(e.name, `custom:${id}`)));
  yours.dataset.custom = "";
  if (entries.length) select.append(yours);
  if ([...select.options].some((o) => o.value === keep)) select.value = keep;
}

function refreshSelects(renamed = {}, mine = load()) {
  document.querySelectorAll(`.calc select${dom.sel("kind")}`).forEach((select) => populate(select, mine, renamed));
}

// Once per page: every select offers every preset and the reader's own, also after another tab adds one.
export function setupSelects(lists) {
  presets = lists;
  refreshSelects();
  window.addEventListener("storage", ({ key }) => (key === storage().key(KEY) || key === null) && refreshSelects());
}

// ---- the "Define your own…" dialog -----------------------------------------------------------
let dialog = null;  // built on first use
const $ = (selector) => dialog.querySelector(selector);

// The dialog's markup is in the page (overrides/partials/calc-define.html): one dialog for every calculator.
function build() {
  const d = document.getElementById("calc-define-template").content.firstElementChild.cloneNode(true);
  d.addEventListener("keydown", (e) => { if (e.key !== "Escape") e.stopPropagation(); });
  return document.body.appendChild(d);
}

const tell = (message, ok = false) =>
  Object.assign($("#calc-define-error"), { textContent: message, hidden: !message }).classList.toggle("calc__ok", ok);

// The selected one's definition as a start, without what only the preset can claim (its id, source, notes).
// On opening (`asked` false) it fills only fields still empty when Python answers: nothing typed is lost.
async function prefill({ calc, runtime, kind, key }, asked) {
  const found = await runtime.describe(kind, calc.inputs()[key]);
  const { id, source, notes, memory_note, url, as_of, price_source, price_as_of, ...mine } = found;  // eslint-disable-line no-unused-vars
  const fill = (sel, value) => { if (asked || !$(sel).value.trim()) $(sel).value = value; };
  fill("#calc-define-json", JSON.stringify(mine, null, 2));
  fill("#calc-define-name", `${found.name || "Mine"} (mine)`);
}

async function store({ calc, runtime, kind, key }) {
  const name = $("#calc-define-name").value.trim().slice(0, NAME_MAX);
  if (!name) return tell(`Name: give it a name (up to ${NAME_MAX} characters).`);
  let value;
  try { value = JSON.parse($("#calc-define-json").value); } catch (err) {
    return tell(`Definition: not valid JSON (${err.message}).`);
  }
  const checked = await runtime.describe(kind, value);
  const data = load(), id = slug(name), old = data[kind][id];
  if (old && !window.confirm(`Replace your ${kind} "${old.name}" with this one?`)) {
    return tell(`Not saved: your "${old.name}" is kept. Give this one another name.`);
  }
  data[kind][id] = { name, definition: { ...checked, name } };
  if (!save(data)) return tell("This browser refused to store it (storage is full or disabled).");
  refreshSelects();
  calc.setInput(key, `custom:${id}`);
  calc.recompute();
  const said = [`Saved "${name}"`, checked.reads].filter(Boolean).join(": ") + (checked.notes ? `. Note: ` : ".");
  return checked.reads || checked.notes ? tell(said + (checked.notes ?? ""), true) : dialog.close();  // units; assumed
}

// ---- the manager: every one of yours of this kind, each to rename, delete or export (reader walk #26) ----
function list(job) {
  const entries = Object.entries(load()[job.kind]);
  const verbs = { Rename: rename, Delete: remove, Export: exportOne };
  $("#calc-define-yours").replaceChildren(...entries.map(([id, { name }]) => element("li", {},
    element("span", { textContent: name }), ...Object.entries(verbs).map(([verb, act]) => element("button", {
      type: "button", className: "md-button", textContent: verb, ariaLabel: `${verb} your ${job.kind} "${name}"`,
      onclick: () => { act(job, id); list(job); } })))));
  $("#calc-define-none").hidden = entries.length > 0;
}

// Renamed under the id its new name gives, selections following it; replacing another of yours asks first.
function rename({ calc, kind }, id) {
  const data = load(), entry = data[kind][id];
  const name = window.prompt(`A new name for your ${kind} "${entry.name}":`, entry.name)?.trim().slice(0, NAME_MAX);
  const to = name && slug(name), taken = to !== id && data[kind][to];
  if (!name || name === entry.name) return;
  if (taken && !window.confirm(`Replace your ${kind} "${taken.name}" with "${entry.name}", renamed?`)) return;
  delete data[kind][id];
  data[kind][to] = { name, definition: { ...entry.definition, name } };
  changed(calc, data, `Renamed "${entry.name}" to "${name}".`, { [`custom:${id}`]: `custom:${to}` });
}

function remove({ calc, kind }, id) {
  const data = load(), { name } = data[kind][id];
  if (!window.confirm(`Delete your ${kind} "${name}" from this browser?`)) return;
  delete data[kind][id];
  changed(calc, data, `Deleted "${name}".`);
}
// Stores the changed definitions, updates every select (renamed: old value to new) and says so.
function changed(calc, data, said, renamed) {
  if (!save(data)) return tell("This browser refused to store the change.");
  refreshSelects(renamed);
  calc.recompute();
  tell(said, true);
}
// One of yours as a file the import takes back.
const exportOne = ({ kind }, id) => download(`${id}.json`,
  JSON.stringify({ v: 1, [kind]: { [id]: load()[kind][id] } }, null, 2), "application/json");

async function importFile(input, job) {
  if (!input.files[0]) return;
  const count = await importAll(await input.files[0].text(), job.runtime);
  [refreshSelects(), list(job), tell(`Imported ${count} definition${count === 1 ? "" : "s"}.`, true)];
}

export function openDefine(calc, runtime, button) {
  dialog = dialog || build();
  const job = { calc, runtime, kind: dom.get(button, "define"), key: dom.get(button.closest(dom.sel("field")), "field") };
  for (const part of ["#calc-define-title", "#calc-define-hint"]) $(part).textContent = $(part).dataset[job.kind];
  tell("");
  const run = (fn) => fn().catch((err) => tell(err.message));
  const actions = {
    prefill: () => run(() => prefill(job, true)), save: () => run(() => store(job)), cancel: () => dialog.close(),
    "export-all": () => download("llm-serving-definitions.json", JSON.stringify(load(), null, 2), "application/json"),
  };
  dialog.onclick = (e) => actions[e.target.dataset.do]?.();
  dialog.onchange = (e) => e.target.dataset.do === "import" && run(() => importFile(e.target, job));
  dialog.onclose = () => button.focus();
  for (const sel of ["#calc-define-json", "#calc-define-name"]) $(sel).value = "";
  list(job);
  dialog.showModal();
  run(() => prefill(job, false));
}

// "Define your own…": a dialog to paste a Hugging Face config.json or edit a definition in the
// project's JSON shape. Python checks it before it is stored; errors show next to the field.
import * as custom from "./custom.js";
import { download } from "./export.js";

const WORDS = {
  model: { title: "Define your own model", hint: "Paste a Hugging Face config.json as published, or edit the selected preset's definition." },
  accelerator: { title: "Define your own accelerator", hint: "Edit the selected preset's definition: bytes, bytes/s and dense FLOP/s per format." },
};
let dialog = null;

function element(tag, props = {}, ...children) {
  const el = Object.assign(document.createElement(tag), props);
  el.append(...children);
  return el;
}

function build() {
  const d = element("dialog", { className: "calc-define" });
  d.setAttribute("aria-labelledby", "calc-define-title");
  d.innerHTML = `
    <form method="dialog" class="calc-define__form">
      <h2 id="calc-define-title"></h2>
      <p id="calc-define-hint" class="calc__help"></p>
      <label for="calc-define-name">Name</label>
      <input id="calc-define-name" type="text" autocomplete="off" required>
      <label for="calc-define-json">Definition (JSON)</label>
      <textarea id="calc-define-json" rows="12" spellcheck="false" aria-describedby="calc-define-hint calc-define-error"></textarea>
      <p id="calc-define-error" class="calc__error" hidden></p>
      <div class="calc__actions">
        <button type="button" class="md-button" data-do="prefill">Start from the selected one</button>
        <button type="button" class="md-button md-button--primary" data-do="save">Save</button>
        <button type="button" class="md-button" data-do="cancel">Cancel</button>
      </div>
      <div class="calc__actions">
        <button type="button" class="md-button" data-do="export">Export yours (JSON)</button>
        <label class="md-button calc-define__import">Import (JSON file)<input type="file" accept="application/json,.json" data-do="import"></label>
      </div>
    </form>`;
  d.addEventListener("keydown", (e) => { if (e.key !== "Escape") e.stopPropagation(); });
  document.body.append(d);
  return d;
}

function showError(message) {
  const error = dialog.querySelector("#calc-define-error");
  error.textContent = message;
  error.hidden = !message;
}

async function describe(calc, kind, value) {
  const reply = JSON.parse(await calc.runtime.call({ op: "describe", kind, value }));
  if (reply.error) throw new Error(`${reply.error.field}: ${reply.error.message}`);
  return reply.definition;
}

async function prefill(calc, select, kind) {
  const value = calc.inputs()[select.name];
  const definition = await describe(calc, kind, value);
  dialog.querySelector("#calc-define-json").value = JSON.stringify(definition, null, 2);
  dialog.querySelector("#calc-define-name").value = `${definition.name || "Mine"} (mine)`;
}

async function save(calc, select, kind) {
  const name = dialog.querySelector("#calc-define-name").value.trim();
  if (!name) return showError("Name: give it a name (up to 48 characters).");
  let value;
  try { value = JSON.parse(dialog.querySelector("#calc-define-json").value); } catch (err) {
    return showError(`Definition: not valid JSON (${err.message}).`);
  }
  const definition = await describe(calc, kind, value);
  const id = custom.put(kind, name.slice(0, 48), { ...definition, name: name.slice(0, 48) });
  if (!id) return showError("This browser refused to store it (storage is full or disabled).");
  document.querySelectorAll(`.calc select[data-kind="${kind}"]`).forEach(custom.populate);
  select.value = `custom:${id}`;
  dialog.close();
  calc.compute();
}

async function importFile(input) {
  const file = input.files[0];
  if (!file) return;
  const count = custom.importAll(await file.text());
  document.querySelectorAll(".calc select[data-kind]").forEach(custom.populate);
  showError(`Imported ${count} definition(s).`);
}

export function openDefine(calc, button) {
  dialog = dialog || build();
  const kind = button.dataset.define;
  const select = calc.form.querySelector(`select[data-kind="${kind}"]`);
  dialog.querySelector("#calc-define-title").textContent = WORDS[kind].title;
  dialog.querySelector("#calc-define-hint").textContent = WORDS[kind].hint;
  showError("");
  const run = (fn) => fn().catch((err) => showError(err.message));
  dialog.onclick = (e) => {
    const what = e.target.dataset.do;
    if (what === "prefill") run(() => prefill(calc, select, kind));
    if (what === "save") run(() => save(calc, select, kind));
    if (what === "cancel") dialog.close();
    if (what === "export") download("llm-serving-definitions.json", custom.exportAll(), "application/json");
  };
  dialog.onchange = (e) => { if (e.target.dataset.do === "import") run(() => importFile(e.target)); };
  dialog.onclose = () => button.focus();
  dialog.showModal();
  run(() => prefill(calc, select, kind));
}

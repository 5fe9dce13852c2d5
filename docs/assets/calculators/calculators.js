// Live calculators. The build wrote each calculator's form and results into the page; this
// module makes them recompute in the tab's Python worker as the reader types.
import { Runtime } from "./runtime.js";
import * as custom from "./custom.js";
import * as share from "./share.js";
import { download, toCsv, toJson } from "./export.js";
import { draw, downloadPng } from "./plots.js";
import { openDefine } from "./define.js";

const DEBOUNCE_MS = 150;
const NEAR_PX = 200;   // a calculator this close to the viewport counts as in view
const STATUS = {
  loading: "Loading Python in your browser…",
  live: "Live: these results were recomputed in your browser.",
  invalid: "Check the highlighted input. The results shown are for the last valid inputs.",
  failed: "Python could not start in this browser, so the results shown are the ones computed when the page was built.",
  restarted: "The Python worker stopped responding and was restarted.",
};

class Calculator {
  constructor(root, runtime, urls) {
    Object.assign(this, { root, runtime, urls, name: root.dataset.calc, latest: 0, shown: null, shared: {} });
    this.form = root.querySelector("form");
    this.status = root.querySelector("[data-calc-status]");
    this.form.querySelectorAll("select[data-kind]").forEach(custom.populate);
    this.form.addEventListener("input", () => this.schedule());
    this.form.addEventListener("change", () => this.schedule());
    this.form.addEventListener("submit", (e) => { e.preventDefault(); this.compute(); });
    root.addEventListener("click", (e) => this.onClick(e));
  }

  fields() {
    return [...this.form.querySelectorAll("[data-field]")];
  }

  inputs() {
    const out = {};
    for (const field of this.fields()) {
      const control = field.querySelector("input, select");
      const value = control.type === "checkbox" ? control.checked : control.value;
      out[field.dataset.field] = this.definitionFor(control, value) ?? value;
    }
    return out;
  }

  definitionFor(control, value) {
    if (typeof value !== "string") return null;
    if (value.startsWith("custom:")) return custom.get(control.dataset.kind, value.slice(7))?.definition ?? null;
    if (value.startsWith("shared:")) return this.shared[value.slice(7)] ?? null;
    return null;
  }

  addShared(select, key, definition) {
    this.shared[key] = definition;
    const name = typeof definition.name === "string" ? definition.name : "from the link";
    select.append(new Option(`Shared: ${name}`, `shared:${key}`));
    select.value = `shared:${key}`;
    return true;
  }

  say(text, { retry = false } = {}) {
    this.status.textContent = text;
    if (retry) {
      const button = Object.assign(document.createElement("button"), { type: "button", textContent: "Retry" });
      button.className = "md-button calc__retry";
      button.addEventListener("click", () => this.compute());
      this.status.append(" ", button);
    }
  }

  schedule() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.compute(), DEBOUNCE_MS);
  }

  async compute() {
    const seq = ++this.latest;
    const inputs = this.inputs();
    if (this.runtime.state !== "ready") this.say(STATUS.loading);
    let text;
    try {
      text = await this.runtime.call({ op: "present", name: this.name, inputs });
    } catch (err) {
      if (seq !== this.latest) return;
      if (err.lost && this.runtime.state === "restarted") { this.say(STATUS.restarted); this.schedule(); }
      else this.say(STATUS.failed, { retry: true });
      return;
    }
    if (seq !== this.latest) return;   // a newer request is under way: this reply is stale
    const shown = JSON.parse(text);
    if (shown.error) return this.showError(shown.error);
    this.clearErrors();
    this.render(shown, inputs);
    this.say(STATUS.live);
    window.llmsiReleaseSearch?.();   // the first live result is up: Material may build its search index now
  }

  showError({ field, message }) {
    this.clearErrors();
    const key = (field || "").split(".")[0];
    const target = this.fields().find((f) => f.dataset.field === key);
    if (!target) return this.say(`${STATUS.invalid} ${field ? field + ": " : ""}${message}`);
    const error = target.querySelector("[data-error]") || errorFor(target);
    error.textContent = field === key ? message : `${field.slice(key.length + 1)}: ${message}`;
    error.hidden = false;
    target.querySelector("input, select").setAttribute("aria-invalid", "true");
    this.say(STATUS.invalid);
  }

  clearErrors() {
    for (const field of this.fields()) {
      const error = field.querySelector("[data-error]");
      if (error) error.hidden = true;
      field.querySelector("input, select").removeAttribute("aria-invalid");
    }
  }

  render(shown, inputs) {
    this.shown = shown;
    this.shownInputs = inputs;
    for (const o of shown.outputs) {
      const cell = this.root.querySelector(`tr[data-out="${CSS.escape(o.key)}"] td`);
      if (cell) cell.textContent = o.text;
    }
    fill(this.root.querySelector("[data-calc-notes]"), shown.notes.map((n) => li(n)));
    fill(this.root.querySelector("[data-calc-work]"), shown.work.map(workItem));
    const figure = this.root.querySelector("[data-plot]");
    if (figure) {
      fill(figure.querySelector("[data-plot-table]"), [dataTable(shown.tables[figure.dataset.plot])]);
      if (this.plotVisible) this.drawPlot();
    }
  }

  drawPlot() {
    const figure = this.root.querySelector("[data-plot]");
    const plot = this.shown && this.shown.result.series[figure.dataset.plot];
    if (plot) draw(figure.querySelector(".calc__chart"), plot, this.urls.plotly).catch(() => {});
  }

  async ensureLive() {
    if (!this.shown) await this.compute();
    return this.shown;
  }

  async onClick(event) {
    const define = event.target.closest("[data-define]");
    if (define) return openDefine(this, define);
    const action = event.target.closest("[data-action]")?.dataset.action;
    if (!action) return;
    if (action === "link") return this.copyLink();
    const shown = await this.ensureLive();
    if (!shown) return;
    const base = `${this.root.id}`;
    if (action === "csv") download(`${base}.csv`, toCsv(this.name, this.shownInputs, shown), "text/csv");
    if (action === "json") download(`${base}.json`, toJson(this.name, this.shownInputs, shown), "application/json");
    if (action === "png") {
      const figure = this.root.querySelector("[data-plot]");
      await downloadPng(figure.querySelector(".calc__chart"), shown.result.series[figure.dataset.plot],
        this.urls.plotly, base);
    }
  }

  async copyLink() {
    const link = share.linkFor(this);
    if (await share.copy(link)) return this.say("Link copied. Opening it restores these inputs.");
    this.say("Copy this link to share these inputs: ");
    const box = Object.assign(document.createElement("input"), { type: "text", value: link, readOnly: true });
    box.className = "calc__link";
    box.setAttribute("aria-label", "Link to these inputs");
    this.status.append(box);
    box.select();
  }
}

// A field's error message, made on its first error (the build leaves it out to keep pages light)
// and named in the control's aria-describedby so that screen readers read it with the field.
function errorFor(field) {
  const control = field.querySelector("input, select");
  const error = Object.assign(document.createElement("p"), { className: "calc__error", id: `${control.id}-error` });
  error.dataset.error = "";
  field.append(error);
  const described = control.getAttribute("aria-describedby");
  control.setAttribute("aria-describedby", described ? `${described} ${error.id}` : error.id);
  return error;
}

function li(text) {
  return Object.assign(document.createElement("li"), { textContent: text });
}

function workItem(w) {
  const item = document.createElement("li");
  const label = Object.assign(document.createElement("span"), { className: "calc__step", textContent: w.label });
  const code = (t) => Object.assign(document.createElement("code"), { textContent: t });
  const strong = Object.assign(document.createElement("strong"), { textContent: w.text });
  item.append(label, " ", code(w.formula), " = ", code(String(w.substituted)), " = ", strong);
  return item;
}

function dataTable(table) {
  const el = document.createElement("table");
  const head = el.createTHead().insertRow();
  for (const h of table.head) head.append(Object.assign(document.createElement("th"), { scope: "col", textContent: h }));
  const body = el.createTBody();
  for (const row of table.rows) {
    const tr = body.insertRow();
    for (const cell of row) tr.insertCell().textContent = cell;
  }
  return el;
}

function fill(container, children) {
  if (!container) return;
  container.replaceChildren(...children);
  if (container.matches("[data-calc-notes]")) container.hidden = children.length === 0;
}

function nearView(el) {
  const { top, bottom } = el.getBoundingClientRect();
  return top < innerHeight + NEAR_PX && bottom > -NEAR_PX;
}

function watchVisibility(calcs, runtime) {
  const observer = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting) continue;
      const calc = calcs.find((c) => c.root.contains(entry.target));
      if (entry.target.matches("[data-plot]")) { calc.plotVisible = true; calc.drawPlot(); }
      else if (!calc.started) { calc.started = true; calc.compute(); }
    }
  }, { rootMargin: `${NEAR_PX}px` });
  for (const calc of calcs) {
    observer.observe(calc.root);
    const figure = calc.root.querySelector("[data-plot]");
    if (figure) observer.observe(figure);
    calc.root.addEventListener("focusin", () => runtime.start().catch(() => {}), { once: true });
  }
}

function init() {
  const roots = [...document.querySelectorAll(".calc[data-calc]")];
  if (!roots.length) return;
  const config = JSON.parse(document.getElementById("calc-page-config").textContent);
  custom.setPresets(config.presets);
  const runtime = new Runtime(config.runtime);
  const calcs = roots.map((root) => new Calculator(root, runtime, config.runtime));
  runtime.addEventListener("state", ({ detail }) => {
    if (detail.state === "loading") calcs.forEach((c) => c.started && c.say(STATUS.loading));
    else if (detail.state === "failed") window.llmsiReleaseSearch?.();   // no Python: nothing to wait for
  });
  for (const calc of calcs) {
    const params = share.sharedFor(calc.root);
    if (!params) continue;
    const { unknown, invalid } = share.apply(calc, params);
    const ignored = [...unknown, ...invalid];
    calc.notice = ignored.length ? `Ignored link parameter(s) that this calculator cannot use: ${ignored.join(", ")}.` : "";
    calc.started = true;
    calc.compute().then(() => calc.notice && calc.status.append(" ", calc.notice));
  }
  custom.onChange(() => document.querySelectorAll(".calc select[data-kind]").forEach(custom.populate));
  // A calculator already on screen starts Python now, not one frame later when the observer reports it.
  if (roots.some(nearView)) {
    window.llmsiPythonStarting = true;   // search waits for Python (overrides/partials/search-later.html)
    runtime.start().catch(() => {});
  }
  watchVisibility(calcs, runtime);
  window.llmsiCalculators = { runtime, calcs };   // for tests and the curious
}

init();

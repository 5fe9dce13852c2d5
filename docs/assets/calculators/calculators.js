// Live calculators. The build wrote each calculator's form and results into the page; this
// module makes them recompute in the tab's Python worker as the reader types.
import { Runtime } from "./worker.js";
import { applyLink, clearFieldErrors, controlOf, dom, draw, exportAs, linkFor, pageConfig, showFieldError }
  from "./figures.js";
import { element, offerLink, showResult } from "../tables.js";
import { definitionOf, openDefine, setupSelects } from "./yours.js";

const DEBOUNCE_MS = 150;
const NEAR_PX = 200;   // a calculator this close to the viewport counts as in view
const STATUS = {
  loading: "Loading Python in your browser…",
  live: "Live: these results were recomputed in your browser.",
  invalid: "Check the highlighted input. The results shown are for the last valid inputs.",
  failed: "Python could not start in this browser, so the results shown are the ones computed when the page was built.",
  restarted: "The Python worker stopped responding and was restarted.",
};

// One calculator block. Others use it through inputs(), setInput(key, value) and recompute().
class Calculator {
  constructor(root, runtime, urls) {
    Object.assign(this, { root, id: root.id, name: dom.get(root, "calc"), runtime, plotlyUrl: urls.plotly });
    this.form = root.querySelector("form");
    this.fields = new Map([...this.form.querySelectorAll(dom.sel("field"))].map((f) => [dom.get(f, "field"), f]));
    this.status = root.querySelector(dom.sel("calc-status"));
    this.figure = root.querySelector(dom.sel("plot"));
    this.chart = this.figure?.querySelector(".calc__chart");
    this.plotId = this.figure && dom.get(this.figure, "plot");
    // latest: the newest request (older replies are stale); timer: the debounce; started: has asked Python at
    // least once; plotVisible: the figure has been on screen (keep its chart drawn); shared: a link's definitions.
    Object.assign(this, { latest: 0, timer: null, started: false, plotVisible: false, shared: {} });
    this.shown = this.shownInputs = this.pinned = null;   // the last live result, its inputs, a pinned A
    for (const type of ["input", "change"]) this.form.addEventListener(type, () => this.schedule());
    this.form.addEventListener("submit", (e) => { e.preventDefault(); this.recompute(); });
    root.addEventListener("click", (e) => this.onClick(e));
    runtime.addEventListener("state", (e) => e.detail.state === "loading" && this.started && this.say(STATUS.loading));
    // Python starts when a calculator nears the viewport (or gets focus); a chart when its figure does.
    root.addEventListener("focusin", () => runtime.start().catch(() => {}), { once: true });
    const seen = new IntersectionObserver((entries) => {
      for (const { isIntersecting, target } of entries) {
        if (isIntersecting && target === this.figure) this.drawPlot(true);
        else if (isIntersecting) this.start();
      }
    }, { rootMargin: `${NEAR_PX}px` });
    [root, this.figure].forEach((el) => el && seen.observe(el));
  }

  inputs() {
    const out = {};
    for (const [key, field] of this.fields) {
      const control = controlOf(field);
      const value = control.type === "checkbox" ? control.checked : control.value;
      const kind = dom.get(control, "kind");
      out[key] = (kind && definitionOf(kind, value, this.shared)) || value;
    }
    return out;
  }

  // A control's value (an option's value for a select), or a model or accelerator definition for
  // a preset select, offered as "Shared: <name>". Returns whether the value was taken.
  setInput(key, value) {
    const control = controlOf(this.fields.get(key));
    if (control.type === "checkbox") control.checked = value === true || value === "true";
    else if (control.tagName !== "SELECT") {
      control.value = (typeof value === "string" ? value : JSON.stringify(value)).slice(0, 200);
    }
    else if (typeof value === "string") {
      if (![...control.options].some((o) => o.value === value)) return false;
      control.value = value;
    } else if (dom.get(control, "kind") && value && typeof value === "object" && !Array.isArray(value)) {
      this.shared[key] = value;
      const name = typeof value.name === "string" ? value.name : "from the link";
      control.append(new Option(`Shared: ${name}`, `shared:${key}`));
      control.value = `shared:${key}`;
    } else return false;
    return true;
  }

  say(text, extra = null) {
    this.status.replaceChildren(text, ...(extra ? [" ", extra] : []));
  }

  schedule() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.recompute(), DEBOUNCE_MS);
  }

  // Asks Python for the results now; `notice` is said after the first live result, then a link's A is pinned.
  start(notice = "") {
    if (!this.started) this.recompute().then(() => (notice && this.status.append(" ", notice), this.pinLinked()));
  }

  // Pins the result on screen as A, or unpins it: each later result is shown against it. pinLinked: a
  // link's A (applyLink's linkedA: its inputs over these, as a link carries them all), computed and pinned.
  pin(pinned = this.pinned ? null : { inputs: this.shownInputs, shown: this.shown }) {
    this.pinned = pinned;
    this.root.querySelector(dom.sel("action", "pin")).textContent = pinned ? "Unpin A" : "Pin as A";
    showResult(this.root, this.shown, dom, pinned, this.shownInputs);
  }

  async pinLinked(inputs = this.linkedA && { ...this.shownInputs, ...this.linkedA }) {
    const shown = inputs && this.shown && await this.runtime.present(this.name, inputs);
    if (shown && !shown.error) this.pin({ inputs, shown });
  }

  async recompute() {
    this.started = true;
    const seq = ++this.latest;
    const inputs = this.inputs();
    if (this.runtime.state !== "ready") this.say(STATUS.loading);
    let shown;
    try {
      shown = await this.runtime.present(this.name, inputs);
    } catch (err) {
      if (seq !== this.latest) return;
      if (err.lost && this.runtime.state === "restarted") { this.say(STATUS.restarted); this.schedule(); }
      else this.say(STATUS.failed, this.retryButton());
      return;
    }
    if (seq !== this.latest) return;   // a newer request is under way: this reply is stale
    if (shown.error) return this.showError(shown.error);
    clearFieldErrors(this.fields.values());
    Object.assign(this, { shown, shownInputs: inputs });
    showResult(this.root, shown, dom, this.pinned, inputs);
    if (this.plotVisible) this.drawPlot();
    this.say(STATUS.live);
    window.llmsi.releaseSearch?.();   // the first live result is up: Material may build its search index now
  }

  retryButton() {
    return element("button", { type: "button", textContent: "Retry", className: "md-button calc__retry",
      onclick: () => this.recompute() });
  }

  showError({ field, message }) {
    clearFieldErrors(this.fields.values());
    const key = (field || "").split(".")[0];
    const target = this.fields.get(key);
    if (!target) return this.say(`${STATUS.invalid} ${field ? field + ": " : ""}${message}`);
    target.closest("details")?.setAttribute("open", "");   // an Advanced input in error is shown
    showFieldError(target, field === key ? message : `${field.slice(key.length + 1)}: ${message}`);
    this.say(STATUS.invalid);
  }

  // Called when the figure comes on screen, then after every result while it has been.
  drawPlot(visible = this.plotVisible) {
    this.plotVisible = visible;
    const plot = this.shown?.result.series?.[this.plotId];   // none where no row has an estimate
    this.figure.hidden = Boolean(this.shown) && !plot;   // so no chart of other inputs stays on screen
    if (plot) this.figure.querySelector("figcaption").textContent = plot.title;   // the inputs can change it
    if (plot) draw(this.chart, plot, this.plotlyUrl).catch(() => {});
  }

  async onClick(event) {
    const define = event.target.closest(dom.sel("define"));
    if (define) return openDefine(this, this.runtime, define);
    const button = event.target.closest(dom.sel("action"));
    const action = button && dom.get(button, "action");
    if (action === "link") return this.copyLink();
    if (!action) return;
    if (!this.shown) await this.recompute();
    if (!this.shown) return;
    if (action === "pin") return this.pin();
    const { id: base, name, shownInputs: inputs, shown, plotlyUrl } = this;
    await exportAs(action, { base, name, inputs, shown, plot: shown.result.series?.[this.plotId], plotlyUrl });
  }

  async copyLink() {
    const { text, box } = await offerLink(linkFor(this.id, this.inputs(), this.pinned?.inputs));
    this.say(text, box);
    box?.select();
  }
}

const nearView = ({ top, bottom }) => top < innerHeight + NEAR_PX && bottom > -NEAR_PX;

function init() {
  const config = pageConfig();   // written once, before a page's first calculator
  if (!config) return;
  const roots = [...document.querySelectorAll(`.calc${dom.sel("calc")}`)];
  setupSelects(config.presets);
  const runtime = new Runtime(config.runtime);
  const calcs = roots.map((root) => new Calculator(root, runtime, config.runtime));
  runtime.addEventListener("state", ({ detail }) => detail.state === "failed" && window.llmsi.releaseSearch?.());
  let units = document.documentElement.dataset.rsUnits;   // a new memory unit rewrites what Python has shown
  document.addEventListener("reader-settings", ({ detail: d }) => units !== (units = d.units) && calcs.forEach(
    (c) => c.shown && c.recompute()));
  for (const calc of calcs) {
    const notice = applyLink(calc);   // null: the page's link is not for this calculator
    if (notice !== null) calc.start(notice);
  }
  // A calculator already on screen starts Python now, not one frame later when the observer reports it.
  if (roots.some((root) => nearView(root.getBoundingClientRect()))) {
    window.llmsi.pythonStarting = true;   // search waits for Python (overrides/partials/search-later.html)
    runtime.start().catch(() => {});
  }
  Object.assign(window.llmsi, { runtime, calcs, homes: config.homes });   // homes: where chained results open
}

init();

// The build-time tables that scripts fill in or enhance (without JavaScript the HTML the build wrote stays): a
// live calculator's results, notes, worked steps, plot data, a pinned A and chained results, rewritten from a
// present() result; the same as a CSV file, a download, a link to copy. The glossary's tables: sort and filter.
export const element = (tag, props = {}, ...children) => {
  const el = Object.assign(document.createElement(tag), props);
  el.append(...children);
  return el;
};

// ---- a calculator's results ------------------------------------------------------------------
function workItem(w) {
  const code = (text) => element("code", { textContent: text });
  return element("li", {}, element("span", { className: "calc__step", textContent: w.label }), " ",
    code(w.formula), " = ", code(String(w.substituted)), " = ", element("strong", { textContent: w.text }));
}

function dataTable(table) {
  const el = document.createElement("table");
  el.createTHead().insertRow().append(...table.head.map((h) => element("th", { scope: "col", textContent: h })));
  const body = el.createTBody();
  for (const row of table.rows) body.insertRow().append(...row.map((c) => element("td", { textContent: c })));
  return el;
}

// A change from A to B in words: "+12.5%", "−3" from zero, "same".
const change = (x, y) => (typeof x !== "number" || typeof y !== "number" || x === y ? "same"
  : `${y > x ? "+" : "−"}${x ? `${Number(Math.abs((100 * (y - x)) / x).toPrecision(3))}%` : Math.abs(y)}`);

// A pinned result (A: {inputs, shown}) beside this one (B), after the results: the inputs that differ,
// then each output's two texts and the change. No A: the comparison is hidden.
function showCompare(root, a, b, inputs) {
  let box = root.querySelector(".calc__compare");
  if (!box) root.querySelector(".calc__results").after(box = element("div", { className: "calc__compare" }));
  if ((box.hidden = !a)) return;
  const text = (v) => (typeof v === "object" ? v.name ?? "custom" : String(v));
  const moved = Object.keys(inputs).filter((k) => text(inputs[k]) !== text(a.inputs[k] ?? ""))
    .map((k) => `${k} ${text(a.inputs[k] ?? "")} → ${text(inputs[k])}`);
  const rows = b.outputs.map((o, i) => [o.label, a.shown.outputs[i]?.text ?? "", o.text,
    change(a.shown.result[o.key], b.result[o.key])]);
  box.replaceChildren(element("p", { textContent: `A (pinned) against B (now). Inputs changed: ${
    moved.join("; ") || "none"}.` }), dataTable({ head: ["Result", "A (pinned)", "B (now)", "Change"], rows }));
}

// A chained result into the first calculator of its name on this page: its inputs set there, recomputed, shown.
function feed({ to, inputs }) {
  const target = window.llmsi.calcs.find((c) => c.name === to);
  Object.entries(inputs).forEach(([key, value]) => target.setInput(key, value));
  target.recompute();
  target.root.scrollIntoView({ block: "start" });
}

// A chained result for a calculator on another page: a link to it there (its home: page#block id), inputs in it.
function away(home, inputs) {
  const url = new URL(home, window.location.href), text = (v) => (typeof v === "object" ? JSON.stringify(v) : `${v}`);
  url.search = new URLSearchParams([["calc", url.hash.slice(1)], ...Object.entries(inputs).map(([k, v]) => [k, text(v)])]);
  return url.href;
}

// Writes a present() result into a calculator's block, as the build wrote the first one. `dom`: the
// block's data-* names (calculators/figures.js); `pinned`: a result to compare with, and the inputs.
export function showResult(root, shown, dom, pinned = null, inputs = {}) {
  showCompare(root, pinned, shown, inputs);
  for (const o of shown.outputs) {
    const cell = root.querySelector(`tr${dom.sel("out", o.key)} td`);
    if (cell) cell.textContent = o.text;
  }
  const headline = root.querySelector(".calc__headline");   // a verdict in words, above the form
  if (headline) Object.assign(headline, { textContent: shown.headline || "", hidden: !shown.headline });
  const chain = root.querySelector(".calc__chain");   // each result that feeds a calculator: here, or on its page
  const homes = window.llmsi.homes || {}, here = (c) => document.querySelector(`.calc${dom.sel("calc", c.to)}`);
  chain?.replaceChildren(...(shown.chain || []).filter((c) => here(c) || homes[c.to]).map((c) => (here(c)
    ? element("button", { type: "button", className: "md-button", textContent: c.label, onclick: () => feed(c) })
    : element("a", { className: "md-button", href: away(homes[c.to], c.inputs), textContent: `${c.label} →` }))));
  if (chain) chain.hidden = !chain.children.length;
  const notes = root.querySelector(dom.sel("calc-notes"));
  notes.replaceChildren(...shown.notes.map((n) => element("li", { textContent: n })));
  notes.hidden = shown.notes.length === 0;
  root.querySelector(dom.sel("calc-work")).replaceChildren(...shown.work.map(workItem));
  const figure = root.querySelector(dom.sel("plot"));
  const table = figure && shown.tables[dom.get(figure, "plot")];
  if (table) figure.querySelector(dom.sel("plot-table")).replaceChildren(dataTable(table));
}


// ---- a calculator's files and link: CSV of its inputs, outputs and plot data; typed inputs -------
const csvCell = (value) => (/[",\n]/.test(String(value ?? "")) ? `"${String(value).replace(/"/g, '""')}"`
  : String(value ?? ""));

// An input's label and unit, as its form shows them (the control's id is <calculator id>-<key>).
function labelOf(base, key) {
  const label = document.querySelector(`label[for="${CSS.escape(`${base}-${key}`)}"]`);
  const unit = label?.querySelector(".calc__unit")?.textContent.replace(/^\(|\)$/g, "") ?? "";
  return [label?.firstChild?.textContent.trim() ?? "", unit];
}

// A form's value as its type: numbers as numbers (a number typed with thousands commas too).
const typed = (v) => (typeof v === "string" && /^[+-]?[\d.,]+(e[+-]?\d+)?$/i.test(v.trim())
  && Number.isFinite(Number(v.replace(/,/g, ""))) ? Number(v.replace(/,/g, "")) : v);
export const typedInputs = (inputs) => Object.fromEntries(Object.entries(inputs).map(([k, v]) => [k, typed(v)]));

// Inputs, outputs and plot data, one value a row.
export function toCsv(base, inputs, shown) {
  const rows = [["section", "key", "label", "value", "unit", "shown as"]];
  for (const [key, value] of Object.entries(typedInputs(inputs))) {
    const [label, unit] = labelOf(base, key);
    rows.push(["input", key, label, typeof value === "object" ? JSON.stringify(value) : value, unit, ""]);
  }
  for (const o of shown.outputs) rows.push(["output", o.key, o.label, shown.result[o.key], o.unit, o.text]);
  for (const [id, plot] of Object.entries(shown.result.series || {})) {
    plot.x.values.forEach((x, i) => {
      for (const y of plot.y) rows.push([`plot ${id}`, y.name, `${plot.x.label} = ${x}`, y.values[i], y.unit, ""]);
    });
  }
  return rows.map((r) => r.map(csvCell).join(",")).join("\n") + "\n";
}

// A file for the reader: text of a type, or (no type) a data: URL as it is.
export function download(filename, data, type) {
  const url = type ? URL.createObjectURL(new Blob([data], { type })) : data;
  const link = document.body.appendChild(element("a", { href: url, download: filename }));
  [link.click(), link.remove()];
  if (type) setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// The link goes to the clipboard; where there is none (outside secure contexts), into a box to copy it
// from. Returns what to tell the reader, and the box.
export async function offerLink(link) {
  const copied = await navigator.clipboard?.writeText(link).then(() => true, () => false);   // none: the box instead
  if (copied) return { text: "Link copied. Opening it restores these inputs.", box: null };
  const box = element("input", { type: "text", value: link, readOnly: true, className: "calc__link",
    ariaLabel: "Link to these inputs" });
  return { text: "Copy this link to share these inputs: ", box };
}

// ---- the glossary's tables: sorting and filtering -------------------------------------------
const numeric = (text, t = text.replace(/[,\s–—]/g, "")) => (t && Number.isFinite(+t) ? +t : null);

// Numbers in numeric order with blanks last in both directions; text in natural order. `sign`: 1 ascending, -1 not.
function compare(x, y, allNumeric, sign) {
  if (!allNumeric) return sign * x.localeCompare(y, undefined, { numeric: true, sensitivity: "base" });
  const nx = numeric(x), ny = numeric(y);
  if (nx === null || ny === null) return nx === ny ? 0 : nx === null ? 1 : -1;
  return sign * (nx - ny);
}

function sortBy(table, index, direction) {
  const body = table.tBodies[0], rows = Array.from(body.rows);
  const key = (row) => (row.cells[index] ? row.cells[index].textContent.trim() : "");
  const allNumeric = rows.every((r) => key(r) === "" || key(r) === "—" || numeric(key(r)) !== null);
  rows.sort((a, b) => compare(key(a), key(b), allNumeric, direction === "ascending" ? 1 : -1));
  rows.forEach((r) => body.appendChild(r));
}

function sortButtons(table) {
  const headers = Array.from(table.tHead.rows[0].cells);
  headers.forEach((th, index) => {
    th.setAttribute("scope", "col");
    const name = th.textContent.trim();
    const button = element("button", { type: "button", textContent: name, ariaLabel: `${name}: sort` });
    th.replaceChildren(button);
    button.addEventListener("click", () => {
      const next = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
      headers.forEach((h) => h.removeAttribute("aria-sort"));
      th.setAttribute("aria-sort", next);
      sortBy(table, index, next);
    });
    // Material's shortcuts (n, p, s, f) listen on window; keep them away from these buttons.
    button.addEventListener("keydown", (event) => event.key.length === 1 && event.stopPropagation());
  });
}

let counter = 0;
function filterBar(wrapper, rows) {
  const id = `data-table-${++counter}`;
  const caption = (wrapper.dataset.caption || "table").replace(/^[A-Z](?=[a-z]*\b)/, (c) => c.toLowerCase());
  const label = element("label", { htmlFor: `${id}-filter`, textContent: `Filter ${caption}` });
  const input = element("input", { type: "search", id: `${id}-filter`, autocomplete: "off" });
  const count = element("span", { className: "data-table__count", id: `${id}-count`, ariaLive: "polite" });
  input.setAttribute("aria-describedby", count.id);
  input.addEventListener("input", () => {
    const q = input.value.trim().toLowerCase();
    rows.forEach((r) => { r.hidden = Boolean(q) && !r.textContent.toLowerCase().includes(q); });
    count.textContent = q ? `${rows.filter((r) => !r.hidden).length} of ${rows.length} rows` : "";
  });
  wrapper.insertBefore(element("div", { className: "data-table__filter" }, label, input, count), wrapper.firstChild);
}

function enhance(wrapper) {
  const table = wrapper.querySelector("table");
  if (!table || wrapper.dataset.enhanced || !table.tHead || !table.tBodies[0]) return;
  wrapper.dataset.enhanced = "true";
  sortButtons(table);
  filterBar(wrapper, Array.from(table.tBodies[0].rows));
}

const init = () => document.querySelectorAll(".data-table[data-table]").forEach(enhance);

if (typeof window.document$?.subscribe === "function") window.document$.subscribe(init);
else if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();

// What a calculator shows beside its results and hands out: errors next to the fields they are
// about; Plotly charts (loaded only when a figure is on screen, coloured from the theme's CSS
// variables, redrawn when the theme changes, never animated); CSV, JSON and PNG files; links to its
// inputs (?calc=<id>&<input>=<value>…#<id>: values only ever go into form controls, never into markup).
// Also the page's contract with the build: its calculator config and the blocks' data-* names.
import { download, element, toCsv, typedInputs } from "../tables.js";

// ---- the page's contract with the build ----------------------------------------------------
let config;

// The page's calculator config (#calc-page-config, once per page that has calculators), or null.
export function pageConfig() {
  const script = document.getElementById("calc-page-config");
  config ??= script && JSON.parse(script.textContent);
  return config;
}

// The data-* names the build writes into a calculator block (hooks/calc_html.py), declared once, in
// Python: the page config's "dom" maps each role to its attribute, the role with "data-" before it.
const attr = (role) => pageConfig().dom[role];
export const dom = {
  sel: (role, value) => (value === undefined ? `[${attr(role)}]` : `[${attr(role)}="${CSS.escape(value)}"]`),
  get: (el, role) => el.getAttribute(attr(role)),
  mark: (el, role) => el.setAttribute(attr(role), ""),
};

// ---- field errors ----------------------------------------------------------------------------
export const controlOf = (field) => field.querySelector("input, select, textarea");

// A field's error message, made on its first error (the build leaves it out to keep pages light)
// and named in the control's aria-describedby so that screen readers read it with the field.
function errorFor(field) {
  const control = controlOf(field);
  const error = element("p", { className: "calc__error", id: `${control.id}-error` });
  dom.mark(error, "error");
  field.append(error);
  const described = control.getAttribute("aria-describedby");
  control.setAttribute("aria-describedby", described ? `${described} ${error.id}` : error.id);
  return error;
}

export function showFieldError(field, message) {
  const error = field.querySelector(dom.sel("error")) || errorFor(field);
  error.textContent = message;
  error.hidden = false;
  controlOf(field).setAttribute("aria-invalid", "true");
}

export function clearFieldErrors(fields) {
  for (const field of fields) {
    const error = field.querySelector(dom.sel("error"));
    if (error) error.hidden = true;
    controlOf(field).removeAttribute("aria-invalid");
  }
}

// ---- charts ----------------------------------------------------------------------------------
let plotly = null;
const DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"];
const SYMBOLS = ["circle", "square", "diamond", "triangle-up", "cross", "x"];
const drawn = new Map();   // chart element -> last plot spec, for theme redraws

function loadPlotly(url) {
  plotly = plotly || new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = url;
    script.onload = () => resolve(window.Plotly);
    script.onerror = () => { plotly = null; reject(new Error("Plotly failed to load")); };
    document.head.appendChild(script);
  });
  return plotly;
}

function themeColours() {
  const css = getComputedStyle(document.body);
  const v = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
  const series = [0, 1, 2, 3, 4, 5].map((i) => v(`--calc-series-${i}`, "#3f51b5"));
  return { fg: v("--md-default-fg-color", "#000"), grid: v("--md-default-fg-color--lightest", "#ddd"), series };
}

// A percentage axis runs from 0 (to 100 or the largest value); a log axis labels every tick 10ⁿ (not
// "10¹⁵" beside "100T"); a bar chart's x values are categories.
function axis(spec, log, c, values = [], category = false) {
  const title = spec.unit ? `${spec.label} (${spec.unit})` : spec.label;
  const top = Math.max(100, ...values.filter((v) => v !== null));
  const range = log ? { exponentformat: "power" } : spec.unit === "%" ? { range: [-top * 0.03, top * 1.04] } : {};
  return { title: { text: title }, type: category ? "category" : log ? "log" : "linear", gridcolor: c.grid,
           zerolinecolor: c.grid, linecolor: c.fg, automargin: true, ...range };
}

// The y units in order of first use: one is the left axis, a second the right; more: each series names its own.
const units = (plot) => [...new Set(plot.y.map((y) => y.unit))];

function traces(plot, c) {
  const [, right, more] = units(plot), stack = plot.kind === "stack"; // stacked bars share one offset group
  return plot.y.map((y, i) => {
    // A series that is mostly gaps marks operating points: draw it as large markers.
    const points = y.values.filter((v) => v !== null).length <= 3 || plot.kind === "scatter";
    return {
      type: ["bar", "stack"].includes(plot.kind) && !y.marker ? "bar" : "scatter", mode: points ? "markers" : "lines",
      x: plot.x.values, y: y.values, name: right !== undefined && y.unit ? `${y.name} (${y.unit})` : y.name,
      yaxis: !more && right !== undefined && y.unit === right ? "y2" : "y", offsetgroup: stack ? "" : String(i),
      line: { color: c.series[i % 6], dash: DASHES[i % 6], width: 2 },
      marker: { color: c.series[i % 6], symbol: SYMBOLS[i % 6], size: points ? 12 : 6 },
    };
  });
}

function layout(plot, c) {
  const [left, right, more] = units(plot);
  const on = (unit) => plot.y.filter((y) => y.unit === unit).flatMap((y) => y.values);
  const y = (unit) => axis({ label: "", unit }, plot.log_axes, c, on(unit));
  return {
    paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)", font: { color: c.fg, size: 12 },
    margin: { t: 10, r: 10, b: 50, l: 60 }, showlegend: plot.y.length > 1, legend: { orientation: "h", y: -0.25 },
    barmode: plot.kind === "stack" ? "stack" : "group", transition: { duration: 0 },
    xaxis: axis(plot.x, plot.log_axes, c, [], ["bar", "stack"].includes(plot.kind)), yaxis: y(more ? "" : left),
    ...(right !== undefined && !more ? { yaxis2: { ...y(right), overlaying: "y", side: "right" } } : {}),
  };
}

export async function draw(chart, plot, plotlyUrl) {
  const Plotly = await loadPlotly(plotlyUrl);
  const c = themeColours();
  chart.classList.add("is-live");   // sizes the box first: Plotly measures it when drawing
  await Plotly.react(chart, traces(plot, c), layout(plot, c),
    { responsive: true, displayModeBar: false, displaylogo: false });
  drawn.set(chart, { plot, plotlyUrl });
}

function redrawAll() {
  for (const [chart, { plot, plotlyUrl }] of drawn) {
    if (chart.isConnected) draw(chart, plot, plotlyUrl);
    else drawn.delete(chart);
  }
}

// Theme changes: the reader-settings panel announces them; the body attribute is the fallback.
document.addEventListener("reader-settings", redrawAll);
new MutationObserver(redrawAll).observe(document.body,
  { attributes: true, attributeFilter: ["data-md-color-scheme"] });

// ---- files -----------------------------------------------------------------------------------
// `action` is a calculator button's action: csv, json or png. `shown` is the result on screen.
export async function exportAs(action, { base, name, inputs, shown, plot, plotlyUrl }) {
  if (action === "csv") download(`${base}.csv`, toCsv(base, inputs, shown), "text/csv");
  if (action === "json") {
    const text = JSON.stringify({ calculator: name, inputs: typedInputs(inputs), result: shown.result }, null, 2);
    download(`${base}.json`, `${text}\n`, "application/json");
  }
  if (action === "png") await downloadPng(base, inputs, plot, await loadPlotly(plotlyUrl));
}

// The chart on white in the light theme's colours, whatever the page's theme, titled, with the inputs under it.
async function downloadPng(base, inputs, plot, Plotly) {
  const c = { fg: "#1f1f1f", grid: "#e0e0e0", series: themeColours().series };
  const esc = (t) => String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const said = Object.entries(inputs).map(([k, v]) => `${k} ${typeof v === "object" ? v.name ?? "custom" : v}`);
  const caption = esc(said.join(" · ")).replace(/(.{1,150})(?: · |$)/g, "$1<br>");
  const lines = (caption.match(/<br>/g) || []).length;
  const figure = { data: traces(plot, c), layout: { ...layout(plot, c), paper_bgcolor: "#fff", plot_bgcolor: "#fff",
    title: { text: `<b>${esc(plot.title)}</b><br><span style="font-size:10px">${caption}</span>`, x: 0.02 },
    margin: { t: 70 + 12 * lines, r: 60, b: 50, l: 60 } } };
  download(`${base}.png`, await Plotly.toImage(figure, { format: "png", width: 960, height: 540 }));
}

// ---- links -----------------------------------------------------------------------------------
// The inputs, and a pinned A's as a.<input> (A against B travels in one link).
export function linkFor(id, inputs, pinned = null) {
  const url = Object.assign(new URL(window.location.href), { search: "", hash: id });
  url.searchParams.set("calc", id);
  const put = (prefix, given) => Object.entries(given || {}).forEach(([key, value]) =>
    url.searchParams.set(prefix + key, typeof value === "object" ? JSON.stringify(value) : String(value)));
  [["", inputs], ["a.", pinned]].forEach(([prefix, given]) => put(prefix, given));
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
    if (key.startsWith("a.") && key.slice(2) in known) (calc.linkedA ??= {})[key.slice(2)] = fromLink(raw);
    else if (!(key in known) || !calc.setInput(key, fromLink(raw))) ignored.push(key);
  }
  if (!ignored.length) return "";
  const named = ignored.slice(0, 3).map((k) => (k.length > 24 ? `${k.slice(0, 24)}…` : k)).join(", ");
  const more = ignored.length > 3 ? ` and ${ignored.length - 3} more` : "";
  return `Ignored link parameter(s) this calculator cannot use (${ignored.length}): ${named}${more}.`;
}

// A shared definition travels as its JSON text; anything else is the control's value.
function fromLink(raw) {
  if (!raw.startsWith("{")) return raw;
  try { return JSON.parse(raw); } catch { return raw; }
}

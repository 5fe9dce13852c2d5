// What a calculator shows beside its results and hands out: errors next to the fields they are
// about; Plotly charts (loaded only when a figure is on screen, coloured from the theme's CSS
// variables, redrawn when the theme changes, never animated); CSV, JSON and PNG files; its link.
// Also the page's contract with the build: its calculator config and the blocks' data-* names.
import { element } from "../tables.js";

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
export const controlOf = (field) => field.querySelector("input, select");

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

function axis(spec, log, c) {
  const title = spec.unit ? `${spec.label} (${spec.unit})` : spec.label;
  return { title: { text: title }, type: log ? "log" : "linear", gridcolor: c.grid, zerolinecolor: c.grid,
           linecolor: c.fg, automargin: true };
}

// One y unit for the axis when all series share it; otherwise each series names its own.
function sharedUnit(plot) {
  const units = new Set(plot.y.map((y) => y.unit));
  return units.size === 1 ? [...units][0] : "";
}

function traces(plot, c) {
  const shared = sharedUnit(plot);
  return plot.y.map((y, i) => {
    // A series that is mostly gaps marks operating points: draw it as large markers.
    const points = y.values.filter((v) => v !== null).length <= 3 || plot.kind === "scatter";
    return {
      type: plot.kind === "bar" ? "bar" : "scatter", mode: points ? "markers" : "lines",
      x: plot.x.values, y: y.values, name: shared || !y.unit ? y.name : `${y.name} (${y.unit})`,
      line: { color: c.series[i % 6], dash: DASHES[i % 6], width: 2 },
      marker: { color: c.series[i % 6], symbol: SYMBOLS[i % 6], size: points ? 12 : 6 },
    };
  });
}

function layout(plot, c) {
  return {
    paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)", font: { color: c.fg, size: 12 },
    margin: { t: 10, r: 10, b: 50, l: 60 }, showlegend: plot.y.length > 1,
    legend: { orientation: "h", y: -0.25 }, transition: { duration: 0 },
    xaxis: axis(plot.x, plot.log_axes, c), yaxis: axis({ label: "", unit: sharedUnit(plot) }, plot.log_axes, c),
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
function csvCell(value) {
  const text = String(value ?? "");
  return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

// Inputs, outputs and plot data, one value a row.
function toCsv(inputs, shown) {
  const rows = [["section", "key", "label", "value", "unit", "shown as"]];
  for (const [key, value] of Object.entries(inputs)) {
    rows.push(["input", key, "", typeof value === "object" ? JSON.stringify(value) : value, "", ""]);
  }
  for (const o of shown.outputs) rows.push(["output", o.key, o.label, shown.result[o.key], o.unit, o.text]);
  for (const [id, plot] of Object.entries(shown.result.series || {})) {
    plot.x.values.forEach((x, i) => {
      for (const y of plot.y) rows.push([`plot ${id}`, y.name, `${plot.x.label} = ${x}`, y.values[i], y.unit, ""]);
    });
  }
  return rows.map((r) => r.map(csvCell).join(",")).join("\n") + "\n";
}

export function download(filename, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = Object.assign(document.createElement("a"), { href: url, download: filename });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// `action` is a calculator button's action: csv, json or png. `shown` is the result on screen.
export async function exportAs(action, { base, name, inputs, shown, chart, plot, plotlyUrl }) {
  if (action === "csv") download(`${base}.csv`, toCsv(inputs, shown), "text/csv");
  if (action === "json") {
    const text = JSON.stringify({ calculator: name, inputs, result: shown.result }, null, 2) + "\n";
    download(`${base}.json`, text, "application/json");
  }
  if (action !== "png") return;
  if (!drawn.has(chart)) await draw(chart, plot, plotlyUrl);
  await window.Plotly.downloadImage(chart, { format: "png", filename: base, width: 960, height: 480 });
}

// The link goes to the clipboard; where there is none (outside secure contexts), into a box to copy it
// from. Returns what to tell the reader, and the box.
export async function offerLink(link) {
  try {
    await navigator.clipboard.writeText(link);
    return { text: "Link copied. Opening it restores these inputs.", box: null };
  } catch { /* shown instead */ }
  const box = element("input", { type: "text", value: link, readOnly: true, className: "calc__link" });
  box.setAttribute("aria-label", "Link to these inputs");
  return { text: "Copy this link to share these inputs: ", box };
}

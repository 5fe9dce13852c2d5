// Plotly charts for calculator figures: loaded only when a figure is on screen, coloured
// from the theme's CSS variables, redrawn when the theme changes, never animated.
let plotly = null;
const DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"];
const SYMBOLS = ["circle", "square", "diamond", "triangle-up", "cross", "x"];
const drawn = new Map();   // chart element -> last plot spec, for theme redraws

export function loadPlotly(url) {
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
  const yUnit = sharedUnit(plot);
  return {
    paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)", font: { color: c.fg, size: 12 },
    margin: { t: 10, r: 10, b: 50, l: 60 }, showlegend: plot.y.length > 1,
    legend: { orientation: "h", y: -0.25 }, transition: { duration: 0 },
    xaxis: axis(plot.x, plot.log_axes, c), yaxis: axis({ label: "", unit: yUnit }, plot.log_axes, c),
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

export function redrawAll() {
  for (const [chart, { plot, plotlyUrl }] of drawn) {
    if (chart.isConnected) draw(chart, plot, plotlyUrl);
    else drawn.delete(chart);
  }
}

export async function downloadPng(chart, plot, plotlyUrl, filename) {
  if (!drawn.has(chart)) await draw(chart, plot, plotlyUrl);
  await window.Plotly.downloadImage(chart, { format: "png", filename, width: 960, height: 480 });
}

// Theme changes: the reader-settings panel announces them; the body attribute is the fallback.
document.addEventListener("reader-settings", redrawAll);
new MutationObserver(redrawAll).observe(document.body, { attributes: true, attributeFilter: ["data-md-color-scheme"] });

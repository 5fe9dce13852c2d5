// Results as files: CSV (inputs, outputs and plot data) and JSON (inputs and the raw result).
function csvCell(value) {
  const text = String(value ?? "");
  return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function toCsv(name, inputs, shown) {
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

export function toJson(name, inputs, shown) {
  return JSON.stringify({ calculator: name, inputs, result: shown.result }, null, 2) + "\n";
}

export function download(filename, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = Object.assign(document.createElement("a"), { href: url, download: filename });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

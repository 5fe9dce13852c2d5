// The reader's own models and accelerators: defined once, kept in this browser, offered in
// every calculator's list on every page, exportable and importable as JSON.
const KEY = "llmsi-custom:v1";
const KINDS = ["model", "accelerator"];

function empty() {
  return { v: 1, model: {}, accelerator: {} };
}

function valid(entry) {
  return entry && typeof entry === "object" && typeof entry.name === "string"
    && entry.definition && typeof entry.definition === "object";
}

export function load() {
  // Storage may be disabled, full or hold a foreign value: any of those means "none yet".
  try {
    const data = JSON.parse(localStorage.getItem(KEY));
    if (!data || data.v !== 1) return empty();
    const out = empty();
    for (const kind of KINDS) {
      for (const [id, entry] of Object.entries(data[kind] || {})) if (valid(entry)) out[kind][id] = entry;
    }
    return out;
  } catch {
    return empty();
  }
}

function save(data) {
  try {
    localStorage.setItem(KEY, JSON.stringify(data));
    return true;
  } catch {
    return false;
  }
}

export function slug(name) {
  return name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "").slice(0, 48) || "custom";
}

export function put(kind, name, definition) {
  const data = load();
  const id = slug(name);
  data[kind][id] = { name, definition };
  return save(data) ? id : null;
}

export function get(kind, id) {
  return load()[kind][id] || null;
}

export function exportAll() {
  return JSON.stringify(load(), null, 2);
}

// Imported entries still go through Python's validation before use; here only their shape.
export function importAll(text) {
  const incoming = JSON.parse(text);
  if (!incoming || incoming.v !== 1) throw new Error("not an export of this site (expected \"v\": 1)");
  const data = load();
  let count = 0;
  for (const kind of KINDS) {
    for (const [id, entry] of Object.entries(incoming[kind] || {})) {
      if (valid(entry)) { data[kind][slug(id)] = entry; count += 1; }
    }
  }
  if (!save(data)) throw new Error("this browser refused to store them");
  return count;
}

// The page's preset lists, {model: [[id, name], …], accelerator: […]}: the build writes only
// the chosen preset into each <select>, and one list per page (see calc_html.page_config_html).
let presets = { model: [], accelerator: [] };

export function setPresets(lists) {
  presets = lists;
}

// Fills the "Presets" group and rebuilds the "Yours" group of a model or accelerator <select>,
// keeping the selection.
export function populate(select) {
  const kind = select.dataset.kind;
  const keep = select.value;
  const group = select.querySelector("optgroup:not([data-custom])");
  if (group && group.children.length < presets[kind].length) {
    group.replaceChildren(...presets[kind].map(([id, name]) => new Option(name, id)));
  }
  select.querySelectorAll("optgroup[data-custom]").forEach((g) => g.remove());
  const entries = Object.entries(load()[kind]);
  if (entries.length) {
    const group = document.createElement("optgroup");
    group.label = "Yours";
    group.dataset.custom = "";
    for (const [id, entry] of entries) group.append(new Option(entry.name, `custom:${id}`));
    select.append(group);
  }
  if ([...select.options].some((o) => o.value === keep)) select.value = keep;
}

export function onChange(callback) {
  window.addEventListener("storage", (event) => { if (event.key === KEY || event.key === null) callback(); });
}

// Calculator state in the URL: ?calc=<id>&<input>=<value>…#<id>. Values only ever go into
// form controls' .value (never into markup), and Python validates them like typed input.
export function linkFor(calc) {
  const url = new URL(window.location.href);
  url.search = "";
  url.hash = calc.root.id;
  url.searchParams.set("calc", calc.root.id);
  for (const [key, value] of Object.entries(calc.inputs())) {
    url.searchParams.set(key, typeof value === "object" ? JSON.stringify(value) : String(value));
  }
  return url.href;
}

export function sharedFor(root) {
  const params = new URLSearchParams(window.location.search);
  if (params.get("calc") !== root.id) return null;
  params.delete("calc");
  return params;
}

function setSelect(select, raw, calc, key) {
  if ([...select.options].some((o) => o.value === raw)) {
    select.value = raw;
    return true;
  }
  if (!select.dataset.kind) return false;
  let definition;
  try { definition = JSON.parse(raw); } catch { return false; }
  if (!definition || typeof definition !== "object" || Array.isArray(definition)) return false;
  return calc.addShared(select, key, definition);
}

// Applies shared values; returns {unknown: [...], invalid: [...]} for the notice.
export function apply(calc, params) {
  const unknown = [];
  const invalid = [];
  for (const [key, raw] of params) {
    const field = [...calc.form.querySelectorAll("[data-field]")].find((f) => f.dataset.field === key);
    if (!field) { unknown.push(key); continue; }
    const control = field.querySelector("input, select");
    if (control.type === "checkbox") control.checked = raw === "true";
    else if (control.tagName === "SELECT") { if (!setSelect(control, raw, calc, key)) invalid.push(key); }
    else control.value = raw.slice(0, 200);
  }
  return { unknown, invalid };
}

export async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;   // no clipboard outside secure contexts: the caller shows the link instead
  }
}

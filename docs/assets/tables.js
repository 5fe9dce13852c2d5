// Sorting and filtering for the build-time tables in `.data-table` wrappers (glossary).
// Progressive: without JavaScript the plain HTML tables stay as they are.
// Each header cell gets a button (aria-sort on the <th>); each table gets a labelled filter.

const numeric = (text) => {
  const t = text.replace(/[,\s]/g, "").replace(/[–—]/g, "");
  if (t === "") return null;
  const n = Number(t);
  return Number.isFinite(n) ? n : null;
};

function sortBy(table, index, direction) {
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const key = (row) => (row.cells[index] ? row.cells[index].textContent.trim() : "");
  const allNumeric = rows.every((r) => key(r) === "" || key(r) === "—" || numeric(key(r)) !== null);
  rows.sort((a, b) => {
    const x = key(a), y = key(b);
    let order;
    if (allNumeric) {
      const nx = numeric(x), ny = numeric(y);
      if (nx === null && ny === null) order = 0;
      else if (nx === null) return 1;            // blanks last in both directions
      else if (ny === null) return -1;
      else order = nx - ny;
    } else {
      order = x.localeCompare(y, undefined, { numeric: true, sensitivity: "base" });
    }
    return direction === "ascending" ? order : -order;
  });
  rows.forEach((r) => body.appendChild(r));
}

let counter = 0;

function enhance(wrapper) {
  const table = wrapper.querySelector("table");
  if (!table || wrapper.dataset.enhanced || !table.tHead || !table.tBodies[0]) return;
  wrapper.dataset.enhanced = "true";
  const caption = wrapper.dataset.caption || "table";
  const id = `data-table-${++counter}`;

  const headers = Array.from(table.tHead.rows[0].cells);
  headers.forEach((th, index) => {
    th.setAttribute("scope", "col");
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = th.textContent.trim();
    button.setAttribute("aria-label", `${button.textContent}: sort`);
    th.textContent = "";
    th.appendChild(button);
    button.addEventListener("click", () => {
      const next = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
      headers.forEach((h) => h.removeAttribute("aria-sort"));
      th.setAttribute("aria-sort", next);
      sortBy(table, index, next);
    });
    // Material's shortcuts (n, p, s, f) listen on window; keep them away from these buttons.
    button.addEventListener("keydown", (event) => {
      if (event.key.length === 1) event.stopPropagation();
    });
  });

  const bar = document.createElement("div");
  bar.className = "data-table__filter";
  const label = document.createElement("label");
  label.htmlFor = `${id}-filter`;
  label.textContent = `Filter ${caption.toLowerCase()}`;
  const input = document.createElement("input");
  input.type = "search";
  input.id = `${id}-filter`;
  input.autocomplete = "off";
  const count = document.createElement("span");
  count.className = "data-table__count";
  count.id = `${id}-count`;
  count.setAttribute("aria-live", "polite");
  input.setAttribute("aria-describedby", count.id);
  bar.append(label, input, count);
  wrapper.insertBefore(bar, wrapper.firstChild);

  const rows = Array.from(table.tBodies[0].rows);
  const update = () => {
    const q = input.value.trim().toLowerCase();
    let shown = 0;
    rows.forEach((r) => {
      const hit = !q || r.textContent.toLowerCase().includes(q);
      r.hidden = !hit;
      if (hit) shown += 1;
    });
    count.textContent = q ? `${shown} of ${rows.length} rows` : "";
  };
  input.addEventListener("input", update);
}

function init() {
  document.querySelectorAll(".data-table[data-table]").forEach(enhance);
}

if (window.document$ && typeof window.document$.subscribe === "function") {
  window.document$.subscribe(init);
} else if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", init);
} else {
  init();
}

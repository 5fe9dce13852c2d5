"""HTML for a calculator block, from its schema and a `present()` result. Pure functions.

The form, the results, the worked derivation and the plot's data table are all in the
HTML the build writes, so the page is right before any script runs; the browser's
script then recomputes in place, keyed by the data-* attributes of the DOM contract (`dom.DOM`).
Controls and results are marked ``data-search-exclude``: search finds a calculator by
its title and description, not by every preset name in its selects.
"""

from __future__ import annotations

import json
from html import escape

from calculators.calcs.parallel_fields import DEGREE_KEYS, SCALE_OUT_KEYS
from calculators.display import plain

from .dom import DOM

EXCLUDE = DOM["search-exclude"]


def _attr(value) -> str:
    return escape(str(value), quote=True)


def range_text(spec: dict) -> str:
    if spec["type"] not in ("number", "integer") or spec.get("min") is None:
        return ""
    unit = f" {spec['unit']}" if spec.get("unit") else ""
    kind = "Whole number" if spec["type"] == "integer" else "Number"
    # plain(), as the range error says it (reader walk #21: help 2,147,000,000, error 2,147,483,647)
    return f"{kind} from {plain(spec['min'])} to {plain(spec['max'])}{unit}."


def _options(choices: list[tuple[str, str]], selected) -> str:
    return "".join(
        f'<option value="{_attr(v)}"{" selected" if v == selected else ""}>{escape(label)}</option>'
        for v, label in choices
    )


TEXTAREA_CHARS = 10_000  # a text input longer than this is a textarea (a pasted startup log)


def _control(spec: dict, value, fid: str, presets: dict, described: bool = True) -> str:
    # The error message is made by the page's script on the first error (and added to aria-describedby).
    common = f'id="{fid}" name="{_attr(spec["key"])}"' + (f' aria-describedby="{fid}-help"' if described else "")
    t = spec["type"]
    if t in ("model", "accelerator"):
        # Only the chosen preset: the page's script fills in the rest from the page config
        # (one list per page, not one per select); without scripts nothing can change anyway.
        chosen = [(v, label) for v, label in presets[t] if v == value] or presets[t]
        group = _options(chosen, value)
        return (
            f'<select {common} {DOM["kind"]}="{t}"><optgroup label="Presets">{group}</optgroup></select>'
            f'<button type="button" class="calc__define" {DOM["define"]}="{t}" aria-controls="{fid}">'
            f"Define your own…</button>"
        )
    if t in ("choice", "dtype"):
        return f"<select {common}>{_options([(c['value'], c['label']) for c in spec['choices']], value)}</select>"
    if t == "boolean":
        return f'<input type="checkbox" {common}{" checked" if value else ""}>'
    if t == "text" and spec["max"] > TEXTAREA_CHARS:  # a pasted log keeps its lines
        return f'<textarea rows="8" spellcheck="false" {common}>{escape(value)}</textarea>'
    if t == "text":
        return f'<input type="text" {common} value="{_attr(value)}">'
    mode = "numeric" if t == "integer" else "decimal"
    return f'<input type="text" inputmode="{mode}" {common} value="{_attr(value)}">'


def _field(spec: dict, value, root: str, presets: dict) -> str:
    fid = f"{root}-{spec['key']}"
    # No "(sequences)" after "Concurrent sequences": a unit the label already names is not repeated.
    said = spec.get("unit") and spec["unit"] in spec["label"].replace("(", " ").replace(")", " ").split()
    unit = f' <span class="calc__unit">({escape(spec["unit"])})</span>' if spec.get("unit") and not said else ""
    help_text = " ".join(t for t in (spec.get("help", ""), range_text(spec)) if t)
    return (
        f'<div class="calc__field" {DOM["field"]}="{_attr(spec["key"])}">'
        f'<label for="{fid}">{escape(spec["label"])}{unit}</label>'
        f"{_control(spec, value, fid, presets, bool(help_text))}"
        + (f'<p class="calc__help" id="{fid}-help">{escape(help_text)}</p>' if help_text else "")
        + "</div>"
    )


def results_html(shown: dict) -> str:
    rows = "".join(
        f'<tr {DOM["out"]}="{_attr(o["key"])}"><th scope="row">{escape(o["label"])}</th>'
        f"<td>{escape(o['text'])}</td></tr>"
        for o in shown["outputs"]
    )
    notes = "".join(f"<li>{escape(n)}</li>" for n in shown["notes"])
    return (
        f'<table class="calc__results" {EXCLUDE}><caption>Results</caption>'
        f"<tbody {DOM['calc-results']}>{rows}</tbody></table>"
        f'<ul class="calc__notes" {DOM["calc-notes"]} {EXCLUDE}{"" if notes else " hidden"}>{notes}</ul>'
        # Results that feed another calculator (memory's KV budget into paging): the page's script adds a
        # button for each whose calculator is on the page.
        + (f'<div class="calc__chain" {EXCLUDE} hidden></div>' if shown.get("chain") else "")
    )


def headline_html(shown: dict) -> str:
    """A verdict in words (the sizing calculator's), under the title and above the form; none without one."""
    if not shown.get("headline"):
        return ""
    return f'<p class="calc__headline" aria-live="polite" {EXCLUDE}>{escape(shown["headline"])}</p>'


def work_html(shown: dict) -> str:
    items = "".join(
        f'<li><span class="calc__step">{escape(w["label"])}</span> '
        f"<code>{escape(w['formula'])}</code> = <code>{escape(str(w['substituted']))}</code> "
        f"= <strong>{escape(w['text'])}</strong></li>"
        for w in shown["work"]
    )
    return (
        f'<details class="calc__work" {EXCLUDE}><summary>Show the work</summary>'
        f"<ol {DOM['calc-work']}>{items}</ol></details>"
    )


def table_html(table: dict) -> str:
    head = "".join(f'<th scope="col">{escape(h)}</th>' for h in table["head"])
    rows = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in table["rows"])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def figure_html(root: str, plot_id: str, shown: dict, svg: str) -> str:
    plot = shown["result"]["series"][plot_id]
    title = escape(plot["title"])
    return (
        f'<figure class="calc__figure" {EXCLUDE} {DOM["plot"]}="{_attr(plot_id)}">'
        f'<figcaption id="{root}-plot-title">{title}</figcaption>'
        f'<div class="calc__chart" role="img" aria-labelledby="{root}-plot-title" '
        f'aria-describedby="{root}-plot-data">{svg}</div>'
        f'<details class="calc__data" id="{root}-plot-data"><summary>The data as a table</summary>'
        f'<div class="calc__scroll" {DOM["plot-table"]}>{table_html(shown["tables"][plot_id])}</div>'
        "</details></figure>"
    )


def actions_html(has_plot: bool) -> str:
    # Pin as A: the result on screen is kept, and each later one is shown against it (a link carries both).
    buttons = [("pin", "Pin as A"), ("link", "Copy link"), ("csv", "Download CSV"), ("json", "Download JSON")]
    if has_plot:
        buttons.append(("png", "Download PNG"))
    return (
        f'<div class="calc__actions" {EXCLUDE}>'
        + "".join(
            f'<button type="button" class="md-button" {DOM["action"]}="{a}">{label}</button>' for a, label in buttons
        )
        + "</div>"
    )


def page_config_html(runtime: dict, presets: dict, homes: dict | None = None) -> str:
    """Once per page, before its first calculator: what every calculator's script shares. `homes`: each
    calculator's workbench block as a URL from this page, where a chained result for it opens (tables.js)."""
    data = json.dumps({"runtime": runtime, "presets": presets, "dom": DOM, "homes": homes or {}}, separators=(",", ":"))
    data = data.replace("</", "<\\/")
    return f'<script type="application/json" id="calc-page-config">{data}</script>'


# Inputs a first reading leaves at their defaults (issue #18: "efficiencies, seeds and reserves sit under
# Advanced"): after the others in a <details>, open when the block sets one of them away from its default.
ADVANCED = frozenset(
    {
        "bandwidth_efficiency",
        "compute_efficiency",
        "efficiency_of",
        "host_cpu",
        "link_efficiency",
        "tier_efficiency",
        "seed",
        "num_requests",
        "activation_reserve_gib",
        "gpu_memory_utilization",
        "mem_fraction_static",
        "engine_rule",
        "step_overhead",
        "step_overhead_ms",
        "expert_weight_dtype",
        "state_dtype",
        "decode_context_parallel",
        "burstiness",
        "input_tokens_cv",
        "output_tokens_cv",
        "replica_model",
        "shape_turns",
    }
)
# ...but not in the calculators that are about them.
PRIMARY = {
    "memory": {
        "gpu_memory_utilization",
        "mem_fraction_static",
        "engine_rule",
        "activation_reserve_gib",
        "decode_context_parallel",
    },
    "kv_tiers": {"tier_efficiency"},
    "allreduce": {"link_efficiency"},
    "calibration": {"step_overhead"},
}


# ...and the multi-GPU degrees where a calculator is about one replica's serving, not its sharding (Part 12's are).
ALSO_ADVANCED = {name: frozenset(SCALE_OUT_KEYS) for name in ("latency", "goodput", "autoscale_ramp")}
ALSO_ADVANCED["memory"] = frozenset(DEGREE_KEYS)  # memory has no links


def advanced(schema: dict) -> list[str]:
    """The keys of the block's Advanced group, in the schema's order."""
    keep, also = PRIMARY.get(schema["name"], set()), ALSO_ADVANCED.get(schema["name"], frozenset())
    return [s["key"] for s in schema["inputs"] if (s["key"] in ADVANCED or s["key"] in also) and s["key"] not in keep]


def _set_by_block(schema: dict, values: dict) -> dict:
    """The inputs a block sets away from their defaults: the worked example, with the schema's defaults for the rest."""
    return {s["key"]: values[s["key"]] for s in schema["inputs"] if not _same(values[s["key"]], s["default"])}


def _single_quoted(text: str) -> str:
    # JSON's double quotes may stand bare in a single-quoted attribute; &quot; for each would cost five bytes.
    return escape(text, quote=False).replace("'", "&#x27;")


def _same(a, b) -> bool:
    """A block's value and a default are the same input (0.9 and "0.9", 1 and 1.0; a definition by equality)."""
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return a == b


def _fields_html(schema: dict, values: dict, root: str, presets: dict) -> str:
    later = set(advanced(schema))
    html = {s["key"]: _field(s, values[s["key"]], root, presets) for s in schema["inputs"]}
    first = "".join(h for k, h in html.items() if k not in later)
    if not later:
        return first
    moved = any(not _same(values[s["key"]], s["default"]) for s in schema["inputs"] if s["key"] in later)
    labels = ", ".join(s["label"].split(" (")[0].lower() for s in schema["inputs"] if s["key"] in later)
    return (
        f'{first}<details class="calc__advanced"{" open" if moved else ""}>'
        f"<summary>Advanced: {len(later)} input{'s' if len(later) > 1 else ''} most readers leave as they are"
        f'</summary><p class="calc__help">{escape(labels[:1].upper() + labels[1:])}.</p>'
        f'<div class="calc__advanced-fields">{"".join(html[k] for k in html if k in later)}</div></details>'
    )


def calculator_html(
    *, root: str, schema: dict, title: str, values: dict, shown: dict, presets: dict, plot: str | None, svg: str = ""
) -> str:
    """The whole calculator block. `values` are the block's inputs merged over defaults."""
    fields = _fields_html(schema, values, root, presets)
    return (
        f'<div class="calc" id="{root}" {DOM["calc"]}="{_attr(schema["name"])}" '
        f"{DOM['inputs']}='{_single_quoted(json.dumps(_set_by_block(schema, values), separators=(',', ':')))}'>"
        f'<p class="calc__title"><strong>{escape(title or schema["title"])}</strong></p>'
        f"{headline_html(shown)}"
        f'<p class="calc__desc">{escape(schema["description"])}</p>'
        f'<form class="calc__form" {EXCLUDE} novalidate autocomplete="off" spellcheck="false" '
        f'aria-label="{_attr(title or schema["title"])}: inputs">{fields}</form>'
        f'<p class="calc__status" role="status" {DOM["calc-status"]} {EXCLUDE}>'
        "Results computed for these inputs when the page was built. "
        "Change a value and Python recomputes them in your browser.</p>"
        f"{results_html(shown)}{work_html(shown)}"
        f"{figure_html(root, plot, shown, svg) if plot else ''}{actions_html(bool(plot))}</div>"
    )

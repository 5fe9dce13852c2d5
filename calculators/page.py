"""What a calculator on a page shows: outputs, the worked derivation and plot tables, as text;
and the browser's two entries, `present_json` and `describe_json`, in the JSON envelope.

`present` is called at build time (to write the HTML) and by the browser's worker after
each change, so both show identical text. Raw results ride along for exports and tests.
"""

from __future__ import annotations

import importlib
import pkgutil

from . import calibration, display
from .api import calculator_names, envelope, run, schema
from .catalog import load_every_data_file
from .errors import InputError
from .resolve import accelerator_to_json, model_to_json, resolve_accelerator, resolve_model
from .vocab import AssetNeeded


# Each calculator's headline results (reader walk #35, issue #18 "lead with one headline result"): shown in
# words under its title, above the form, so a phone shows the answer before eleven inputs. A calculator not
# named leads with its first output; one that returns its own "headline" (sizing's verdict) leads with that.
HEADLINE = {
    "kv_cache": ("kv_bytes_per_sequence",),
    "memory": ("max_concurrent_sequences", "kv_budget_bytes_per_gpu"),
    "roofline": ("decode_tokens_per_s_per_user_upper_bound",),
    "latency": ("ttft_s", "tpot_s"),
    "goodput": ("max_rate_meeting_slo_requests_per_s",),
    "cost": ("usd_per_million_output_tokens",),
    "percentiles": ("p99_s",),
    "decode_limits": ("max_batch_in_memory",),
    "allreduce": ("time_per_allreduce_s",),
    "sram": ("sram_chips_total",),
    "paging": ("paged_concurrency", "contiguous_concurrency"),
    "preemption": ("swap_time_s", "recompute_time_s"),
    "batching": ("continuous_output_tokens_per_s", "static_output_tokens_per_s"),
    "chunking": ("chunked_ttft_s",),
    "kv_tiers": ("recompute_s",),
    "prefix_cache": ("hit_rate",),
    "radix_tree": ("hit_rate",),
    "scheduling": ("capacity_requests_per_s",),
    "shedding": ("goodput_shed_requests_per_s",),
    "regex_mask": ("allowed_tokens", "state"),
    "mask_cost": ("tax_share", "exposed_s"),
}


def _headline(name: str, result: dict, outputs: list[dict]) -> str:
    if result.get("headline"):
        return result["headline"]
    by_key = {o["key"]: o for o in outputs}
    keys = HEADLINE.get(name, (outputs[0]["key"],) if outputs else ())
    return " · ".join(f"{by_key[k]['label']}: {by_key[k]['text']}" for k in keys)


def _outputs(spec: dict, result: dict) -> list[dict]:
    return [
        {
            "key": o["key"],
            "label": o["label"],
            "unit": o["unit"],
            "text": display.output_text(result[o["key"]], o),
        }
        for o in spec["outputs"]
        if o.get("shown", True)
    ]


def _substituted(step: dict) -> str:
    """The formula with the reader's numbers in it: each term by the rules of the results."""
    return step["template"].format(*(display.by_unit(value, unit) for value, unit in step["terms"]))


def _work(result: dict) -> list[dict]:
    return [
        {
            "label": s["label"],
            "formula": s["formula"],
            "substituted": _substituted(s),
            "text": display.by_unit(s["value"], s.get("unit", "")),
        }
        for s in result.get("derivation", [])
    ]


def _table(plot: dict) -> dict:
    """A plot's data as a table: the text alternative, and what a reader can copy."""
    x = plot["x"]
    head = [f"{x['label']} ({x['unit']})" if x["unit"] else x["label"]]
    head += [f"{y['name']} ({y['unit']})" if y["unit"] else y["name"] for y in plot["y"]]

    def cell(v):
        return "—" if v is None else display.sig(v)  # None: no value at this x (a gap)

    rows = [[cell(xv)] + [cell(y["values"][i]) for y in plot["y"]] for i, xv in enumerate(x["values"])]
    return {"head": head, "rows": rows}


# The calculators a result is chained to (memory → paging, sizing → cost): the pages link to these when they are
# elsewhere (tables.js); a test checks every chain names one of them.
CHAIN_TARGETS = frozenset({"paging", "cost"})


def present(name: str, inputs: dict | None = None, units: str = "binary") -> dict:
    """Everything a calculator block displays for these inputs (raises InputError), memory sizes in `units`
    (display.MEMORY_UNITS: the reader's setting)."""
    with display.memory_units(units):
        return _present(name, inputs)


def _plot_in_units(plot: dict) -> dict:
    """A plot whose axes in binary memory units are restated in the reader's units (a copy)."""

    def axis(a: dict, key: str) -> dict:
        factor, unit = display.in_memory_units(1.0, a["unit"])
        return a if unit == a["unit"] else {**a, "unit": unit, key: [None if v is None else v * factor for v in a[key]]}

    return {**plot, "x": axis(plot["x"], "values"), "y": [axis(y, "values") for y in plot["y"]]}


def _present(name: str, inputs: dict | None) -> dict:
    spec = schema(name)
    result = run(name, inputs)
    if "series" in result:
        result["series"] = {sid: _plot_in_units(p) for sid, p in result["series"].items()}
    chain = result.pop("chain", [])  # results that feed another calculator: [{to, label, inputs}]
    outputs = _outputs(spec, result)
    return {
        "name": name,
        "result": result,
        "outputs": outputs,
        "work": _work(result),
        "notes": result.get("notes", []) + calibration.notes_for(name, inputs),
        "headline": _headline(name, result, outputs),  # shown under the title, above the form
        "chain": chain,
        "tables": {sid: _table(p) for sid, p in result.get("series", {}).items()},
    }


def present_json(name: str, inputs_json: str | None, units: str = "binary") -> str:
    """The browser's entry for a calculator block: present() in the JSON envelope (api.envelope)."""
    units = units if units in display.MEMORY_UNITS else "binary"  # a stored setting is validated, but never raise
    return envelope(lambda n, inputs: present(n, inputs, units), name, inputs_json)


def describe(kind: str, value) -> dict:
    """A reader's model or accelerator, checked and normalised to the project's JSON shape."""
    if kind == "model":
        return {"definition": model_to_json(resolve_model(value, "definition"))}
    if kind == "accelerator":
        acc = resolve_accelerator(value, "definition")
        return {"definition": accelerator_to_json(acc), "reads": accelerator_reads(acc)}
    raise InputError("kind", "must be model or accelerator")


def accelerator_reads(acc) -> str:
    """A definition's figures in units (reader walk #27): its JSON keeps raw bytes and FLOP/s, as the core reads."""
    parts = [
        f"{display.sig(acc.memory_bytes / 1e9)} GB ({display.auto_bytes(acc.memory_bytes)}) memory",
        f"{display.auto_byte_rate(acc.memory_bandwidth_bytes_per_s)} memory bandwidth",
    ]
    parts += [f"{display.auto_flops(r)} {k.upper()} dense" for k, r in acc.dense_flops_per_s.items()]
    if acc.scale_up_bandwidth_bytes_per_s:
        parts.append(f"{display.auto_byte_rate(acc.scale_up_bandwidth_bytes_per_s)} scale-up link per direction")
    if acc.power_watts:
        parts.append(f"{display.sig(acc.power_watts)} W")
    return ", ".join(parts)


def describe_json(kind: str, value_json: str | None) -> str:
    """The browser's entry for the "define your own" dialog: describe() in the JSON envelope."""
    return envelope(describe, kind, value_json, field="definition")


def warm_up() -> list[str]:
    """Import every module of the core and read every data file, then present every
    calculator once. A memory snapshot taken after this answers any request without the
    file system or the import system: the browser's worker starts from one. Returns the
    names of the modules imported, for tests."""
    package = __name__.rpartition(".")[0]
    names = [m.name for m in pkgutil.walk_packages(importlib.import_module(package).__path__, package + ".")]
    for name in names:
        importlib.import_module(name)
    load_every_data_file()
    for name in calculator_names():
        try:
            present(name, {})
        except AssetNeeded:  # a static file of the site (a vocabulary), fetched when that calculator first runs
            pass
    # every mode of the calibration ledger's predictions is read from the wheel's table (calibration.SHIPPED), which
    # presenting the calibration calculator above loaded: a mode is then milliseconds, never a step model
    return names

"""The calibration pages' tables: `<!-- calibration:NAME -->` markers in docs/calibration.md become the
error summary per kind and the sources with their row counts, and in the two rows pages (SGLang's, and vLLM's with
the other engines') every ledger row with the core's estimate, its error and its bound. Every figure comes from
calculators.calibration at build time.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import partial

from calculators import calibration, catalog, display
from calculators.calcs.steptime import achievable_share, matmul_share, measured_format

from .terms import cell, wrap

PAGE = "calibration.md"
# Every ledger row, a page per engine family: a table too long to share a page with the prose, and one table of every
# row would outgrow a page's byte budget (tests/bench.py).
ROWS_PAGES = {"other": "calibration-rows.md", "sglang": "calibration-rows-sglang.md"}
FAMILY_NAMES = {"other": "vLLM and the other engines", "sglang": "SGLang"}
PAGES = (PAGE, *ROWS_PAGES.values())
MARKER = re.compile(r"<!-- calibration:([\w-]+) -->")


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.0f}%"


def _abs_pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:.0f}%"


def _value(metric: str, x: float | None) -> str:
    if x is None:
        return "—"
    unit = calibration.KINDS[metric][1]
    return display.auto_seconds(x) if unit == "s" else f"{display.sig(x, 4)} {unit}"


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


SUMMARY_HEAD = [
    "Kind of estimate",
    "Rows",
    "Estimates",
    "Median \\|error\\|",
    "80th pct \\|error\\|",
    "Signed median",
    "Within ±25%",
    "Bounds on the wrong side",
]


def _summary_line(label: str, chosen: list[dict], s: dict) -> list[str]:
    has = s["count"] > 0
    return [
        label,
        str(len(chosen)),
        str(s["count"]),
        _abs_pct(s.get("median_abs_error")),
        _abs_pct(s.get("p80_abs_error")),
        _pct(s.get("signed_median_error")),
        _abs_pct(s["within_share"]) if has else "—",
        str(sum(not p["bound_holds"] for p in chosen)),
    ]


def _summary(mode: str, held_out: bool) -> list[list[str]]:
    preds = [p for p in calibration.predictions(mode) if calibration.held_out(p) or not held_out]
    rows = [
        _summary_line(
            cell(label), [p for p in preds if p["metric"] == metric], calibration.summary(metric, mode, held_out)
        )
        for metric, (label, _, _) in calibration.KINDS.items()
    ]
    rows.append(_summary_line("**Every estimate**", preds, calibration.summary(None, mode, held_out)))
    return rows


def render_summary() -> str:
    title = "Error per kind over every row, the training rows included (the default step model)"
    return wrap(title, _table(SUMMARY_HEAD, _summary(calibration.DEFAULT_MODE, False)))


def render_fitted() -> str:
    title = "Error per kind on the held-out rows only (the default step model, with the fitted kernel floor)"
    return wrap(title, _table(SUMMARY_HEAD, _summary(calibration.DEFAULT_MODE, True)))


FIT_VALUES = {  # a fitted constant's value key in fitted.toml, and how the table shows it
    "per_kernel_s": lambda v: f"{v * 1e6:.2f} µs per kernel",
    "per_sequence_layer_s": lambda v: f"{v * 1e6:.2f} µs per sequence per layer",
    "factor": lambda v: f"{v:.2f}",
    "flops_per_s": lambda v: f"{v / 1e12:.0f} TFLOP/s (dense) per GPU",
    "per_request_s": lambda v: f"{v * 1e3:.1f} ms per request",
}


def render_fits() -> str:
    """Each fitted constant, its value, the ledger groups it was fitted on and how."""
    rows = []
    for name, entry in catalog.fitted().items():
        key = next(k for k in FIT_VALUES if k in entry)
        shown = FIT_VALUES[key](entry[key])
        if "share_of" in entry:
            shown += " of " + entry["share_of"]
        if "accelerators" in entry:
            shown += " on " + ", ".join(entry["accelerators"])
        rows.append([cell(name.replace("_", " ")), shown, ", ".join(entry["fitted_on"]), cell(entry["method"])])
    return wrap("The fitted constants", _table(["Constant", "Value", "Fitted on (ledger groups)", "Method"], rows))


MATMUL_FORMATS = ("bf16", "fp8", "fp4")  # the matmul formats a chip lists a peak for, FP16 and INT8 as BF16 and FP8


def _matmul_row(acc, fmt: str, borrowed: str) -> list[str]:
    """One chip and format: the measured rate (or which measured format stands in), the share, s_chip."""
    measured = measured_format(acc, fmt)
    rate = acc.achievable_matmul_flops_per_s[measured]
    shown = f"{rate / 1e12:,.1f}" if measured == fmt else f"— ({measured.upper()}'s share)"
    return [cell(acc.name), fmt.upper(), shown, f"{acc.dense_flops_per_s[fmt] / 1e12:,.1f}",
            f"{achievable_share(acc, fmt) * 100:.1f}%", f"{matmul_share(acc, fmt):.3f}", cell(borrowed)]  # fmt: skip


def render_matmul() -> str:
    """Each measured chip's achievable matmul rate by format, its share of the datasheet peak, the factor estimates
    take, and where a figure is another chip's row; the chips without a measurement named below."""
    source, chips = catalog.achievable_matmul(), catalog.accelerator_presets().values()
    rows = [
        _matmul_row(acc, fmt, source["borrowed"].get(acc.id, "its own row"))
        for acc in chips
        if acc.achievable_matmul_flops_per_s
        for fmt in MATMUL_FORMATS
        if fmt in acc.dense_flops_per_s
    ]
    unmeasured = ", ".join(acc.name for acc in chips if not acc.achievable_matmul_flops_per_s)
    head = ["Chip", "Format", "Measured (TFLOP/s)", "Datasheet, dense (TFLOP/s)", "Share of peak", "s_chip", "Row"]
    note = (
        f"Source: [{cell(source['source'])}]({source['url']}). The share divides by the catalogue's datasheet peak, "
        f"{cell(source['peak_note'])}; s_chip is the same either way. Not measured, s_chip 1: {cell(unmeasured)}."
    )
    return wrap("The chips' measured matmul rates", _table(head, rows), note)


def render_sources() -> str:
    counts = Counter(r["source"] for r in calibration.rows())
    estimates = Counter(p["source"] for p in calibration.predictions() if "error" in p)
    rows = [
        [
            f'<span id="{_anchor(s["id"])}"></span>[{cell(s["title"])}]({s["url"]})',
            cell(s["publisher"]),
            s["published"],
            cell(s["read"]),
            str(counts[s["id"]]),
            str(estimates[s["id"]]),
        ]
        for s in calibration.ledger()["source"]
    ]
    head = ["Source", "Publisher", "Published", "Version read", "Rows", "Estimates"]
    return wrap("The ledger's sources", _table(head, rows))


def _anchor(source_id: str) -> str:
    """The sources table's row of one source: every ledger row links to it (the publication's address is there once)."""
    return f"source-{source_id}"


LEFT_OUT_NOTE = (
    "Every estimate leaves out the CPU work between steps (taken as overlapped; an SGLang row's prefill steps pay "
    "the fitted time per kernel of its eager dispatch). The column names what else the "
    "step model leaves out that the row's conditions contain (facts, not a diagnosis): *comm overlap*, the overlap "
    "of communication with compute (more than one GPU); *routing skew*, tokens routed evenly across the experts "
    "(a mixture-of-experts model); *serving path*, the HTTP server, tokenisation and the hand-off of a request to "
    "the scheduler (a TTFT); *template parse*, the chat template parsed anew for every request on the API "
    "server's event loop (vLLM v0.11.0 with a chat client, ledger.toml [chat_template_parse]). The Group column "
    "links to the group's line in the table of groups below: its publication, where in it, the engine build and the "
    "parallelism."
)


def _left_out(p: dict) -> str:
    """What else the step model leaves out that this row's conditions contain (LEFT_OUT_NOTE defines each)."""
    model = calibration.resolve_model(calibration._model(p["model"]))
    out = [
        name
        for name, applies in (
            ("comm overlap", p["num_gpus"] > 1),
            ("routing skew", model.moe is not None),
            ("serving path", p["metric"] == "ttft_s"),
            ("template parse", calibration.parses_chat_template(p)),
        )
        if applies
    ]
    return ", ".join(out) or "—"


def _conditions(p: dict) -> str:
    """The row's own conditions, short: the group's parallelism and engine build are in the groups table."""
    acc = catalog.accelerator_presets()[p["hardware"]]
    fmt = p["weight_dtype"].upper() + (
        f" + {p['expert_weight_dtype'].upper()} experts" if p.get("expert_weight_dtype") else ""
    )
    lengths = f"{p.get('input_tokens', '?')} in / {p.get('output_tokens', '?')} out"
    batch = f"batch {p['batch']:,}" if "batch" in p else "batch not stated"
    return cell(f"{p['model']}, {acc.name} × {p['num_gpus']}, {fmt}, {batch} ({p['batch_is']}), {lengths}")


def rows_page(engine: str) -> str:
    """The rows page a row or group is on (ROWS_PAGES): SGLang's, or vLLM's with the other engines'."""
    return "sglang" if calibration.engine_family(engine) == "SGLang" else "other"


def _group_anchors() -> dict[str, str]:
    """Each ledger group's line in the groups table, named by its place in the ledger (short: every row links to it)."""
    return {g["id"]: f"g{k}" for k, g in enumerate(calibration.ledger()["group"], 1)}


# the rows table's Kind column, short (the page's head says what each is)
SHORT_KIND = {
    "tpot_s": "TPOT",
    "ttft_s": "TTFT",
    "e2e_latency_s": "E2E latency",
    "output_tokens_per_s": "Output tokens/s per GPU",
    "input_tokens_per_s": "Prefill tokens/s per GPU",
    "tokens_per_s_per_user": "Tokens/s per user",
}


def render_rows(family: str) -> str:
    """The rows of one engine family (rows_page), each linking to its line in the same page's groups table."""
    graphs = {p["id"]: p for p in calibration.predictions(calibration.LAUNCHES_ONLY)}
    anchors, rows = _group_anchors(), []
    for p in calibration.predictions():
        if rows_page(p["engine"]) != family:
            continue
        role = "held out" if calibration.held_out(p) else "fitted on"
        rows.append(
            [
                SHORT_KIND[p["metric"]],
                _conditions(p),
                cell(f"{p['engine']} {p['engine_version'].split(' (')[0]}"),
                _value(p["metric"], p["value"]),
                _value(p["metric"], p.get("predicted")),
                _pct(p.get("error")) + ("" if "error" not in p else f" ({role})"),
                _pct(graphs[p["id"]].get("error")),
                _value(p["metric"], p["bound"]) + ("" if p["bound_holds"] else " ✗"),
                cell(_left_out(p)) if "error" in p else cell(p.get("estimate_note", "")),
                f"[{p['group']}](#{anchors[p['group']]})",
            ]
        )
    head = [
        "Kind",
        "Conditions",
        "Engine",
        "Measured",
        "Core's estimate",
        "Error",
        "Error, launches only",
        "Bound",
        "Not in the core's model (or why no estimate)",
        "Group",
    ]
    return LEFT_OUT_NOTE + "\n" + wrap(f"Every row of {FAMILY_NAMES[family]}, predicted", _table(head, rows))


def render_groups(family: str) -> str:
    """One line per ledger group of one engine family: where its figures are in the publication, the engine build and
    the parallelism, which the rows table would otherwise repeat on every row."""
    srcs, anchors, rows = calibration.sources(), _group_anchors(), []
    for g in calibration.ledger()["group"]:
        if rows_page(g["engine"]) != family:
            continue
        s = srcs[g["source"]]
        rows.append(
            [
                f'<span id="{anchors[g["id"]]}"></span>{g["id"]}',
                f"[{cell(s['publisher'].split(',')[0])}]({PAGE}#{_anchor(s['id'])})",
                cell(g.get("where", "")),
                cell(f"{g.get('engine', '')} ({g.get('engine_version', '')})"),
                cell(g.get("parallelism", "")),
            ]
        )
    head = ["Group", "Source", "Where in it", "Engine", "Parallelism"]
    return wrap(f"The groups of {FAMILY_NAMES[family]}", _table(head, rows))


RENDER = {
    "summary": render_summary,
    "fitted": render_fitted,
    "fits": render_fits,
    "matmul": render_matmul,
    "sources": render_sources,
    **{f"rows-{family}": partial(render_rows, family) for family in ROWS_PAGES},
    **{f"groups-{family}": partial(render_groups, family) for family in ROWS_PAGES},
}


def render_calibration(markdown: str, page: str = PAGE) -> str:
    """The page's Markdown with every marker replaced (an unknown marker raises ValueError naming the page)."""
    unknown = sorted(set(MARKER.findall(markdown)) - set(RENDER))
    if unknown:
        raise ValueError(f"{page}: unknown markers {unknown}")
    return MARKER.sub(lambda m: RENDER[m.group(1)](), markdown)

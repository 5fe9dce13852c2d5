"""Calibration: how far the core's estimates have been from published measurements (data/ledger.toml).

Every row of the ledger is predicted by calculators/calibration.py with the step model the latency and
roofline calculators use, at the latency calculator's default efficiencies; nothing is fitted to the
ledger except the seven constants in data/fitted.toml, each fitted on named groups (the row choice "held
out" leaves those groups out). Error = predicted speed ÷ measured speed − 1 (+: the core faster than
measured). The plot puts each estimate against its measurement on log axes, with the line where they would be
equal.
"""

from __future__ import annotations

import re

from .. import calibration
from ..catalog import accelerator_presets, model_presets
from ..schema import choice, output, series, step
from .overhead import DEFAULT_MODE, LEDGER_MODE_CHOICES

METRICS = [(k, label) for k, (label, _, _) in calibration.KINDS.items()]
GPUS = [("any", "Any"), ("single", "One GPU"), ("multi", "More than one GPU")]
MODEL_KINDS = [("any", "Any"), ("dense", "Dense"), ("moe", "Mixture of experts")]
VENDORS = [("any", "Any"), ("nvidia", "NVIDIA"), ("amd", "AMD")]
LOADS = [
    ("any", "Any"),
    ("bounded", "A static batch or a capped concurrency"),
    ("all_at_once", "Every request sent at once (a throughput run)"),
]
ROW_SETS = [
    ("all", "Every row"),
    ("held_out", "Held out: rows of no group a constant was fitted on"),
]


def _measured(key: str, presets: dict) -> list[tuple[str, str]]:
    """The models or accelerators (a group's `key`) the ledger measured, by the preset's name (a ledger variant of a
    model by its id)."""
    ids = sorted({g[key] for g in calibration.ledger()["group"]})
    return [("any", "Any")] + [(i, presets[i].name if i in presets else i) for i in ids]


def _engine_id(engine: str) -> str:
    """An engine's choice value: its family's name in lower case, other characters as hyphens ("sglang")."""
    return re.sub(r"[^a-z0-9]+", "-", calibration.engine_family(engine).lower().replace("'", "")).strip("-")


def _engines() -> list[tuple[str, str]]:
    """The engine families the ledger's rows ran, by name (a family's every build together)."""
    families = sorted({calibration.engine_family(g["engine"]) for g in calibration.ledger()["group"]})
    return [("any", "Any")] + [(_engine_id(f), f) for f in families]


COMM_CHOICES = [("priced", "Priced (the site's estimates)"), ("none", "Left out (kernels only)")]


def _keep(v: dict, p: dict) -> bool:
    f = calibration.row_features(p)
    return (
        v["metric"] == p["metric"]
        and v["gpus"] in ("any", "single" if f["gpus"] == 1 else "multi")
        and v["model_kind"] in ("any", "moe" if f["moe"] else "dense")
        and v["measured_model"] in ("any", p["model"])
        and v["vendor"] in ("any", f["vendor"])
        and v["hardware"] in ("any", f["hardware"])
        and v["engine"] in ("any", _engine_id(p["engine"]))
        and v["load"] in ("any", f["load"])
        and (v["row_set"] == "all" or calibration.held_out(p))
    )


SCHEMA = {
    "name": "calibration",
    "title": "Calibration against published measurements",
    "description": (
        "The calibration ledger's rows of one kind, each predicted by the core at the latency "
        "calculator's default efficiencies: the error statistics and predicted against measured. "
        "Error = predicted speed ÷ measured speed − 1, so + means the core was faster than "
        "the measurement. Seven constants were fitted to a few groups of rows (the kernel floor of the fitted "
        "per-step overhead, the rate of the GEMM that dequantises 4-bit float weights on a chip without FP4, "
        "the share of the BF16 rate kept by routed experts that tensor parallelism slices, the time per "
        "decode sequence per layer on AMD's CDNA3 chips, and the share of the attention rate Triton's kernel "
        "keeps where vLLM runs it for a model with attention sinks below Hopper, a served request's time "
        "outside the engine core, which a benchmark client counts in its TTFT, and the time each kernel of "
        "SGLang's eagerly run prefill adds); "
        "choose held-out rows to see the error on rows no fit has seen."
    ),
    "inputs": [
        choice("metric", "Kind of estimate", "tpot_s", METRICS),
        choice("gpus", "GPUs in the measurement", "any", GPUS),
        choice("model_kind", "Model", "any", MODEL_KINDS),
        choice("measured_model", "Measured model", "any", _measured("model", model_presets())),
        choice("vendor", "Accelerator vendor", "any", VENDORS),
        choice("hardware", "Accelerator", "any", _measured("hardware", accelerator_presets())),
        choice("engine", "Engine", "any", _engines(), "Every build of the engine: vLLM includes AMD's ROCm builds."),
        choice(
            "load",
            "Load",
            "any",
            LOADS,
            "How the measurement loaded the engine: a batch or a concurrency the benchmark set, or every request at "
            "once, where the engine's KV pool and token budget set the running batch.",
        ),
        choice(
            "row_set",
            "Rows",
            "all",
            ROW_SETS,
            "The fitted constants (fitted.toml) were fitted on a few ledger groups; held out leaves those groups "
            "out, so the statistics are on rows no fit has seen.",
        ),
        choice(
            "step_overhead",
            "Per-step overhead in the estimates",
            DEFAULT_MODE,
            LEDGER_MODE_CHOICES,
            "The latency calculator's per-step overhead model the rows are predicted with; fitted: each row at its "
            "engine's (SGLang's rows with its eager prefill). Bounds never include it.",
        ),
        choice(
            "communication",
            "Communication in the estimates",
            "priced",
            COMM_CHOICES,
            "Priced: each multi-GPU row's all-reduces and all-to-alls on the critical path, and a DP-attention row "
            "as its deployment (Part 12's model). Left out: the kernels alone, as the core priced them before.",
        ),
    ],
    "outputs": [
        output("rows", "Rows of this kind in the ledger", "", "integer"),
        output("estimate_rows", "Rows with every condition an estimate needs", "", "integer"),
        output("median_abs_error", "Median |error|", "", "percent"),
        output("p80_abs_error", "80th percentile of |error|", "", "percent"),
        output("signed_median_error", "Signed median error (+: the core faster)", "", "percent"),
        output("within_share", "Share of estimates within ±25%", "", "percent"),
        output("bound_violations", "Rows where the bound is on the wrong side of the measurement", "", "integer"),
    ],
}


def _steps(stats: dict, n_rows: int) -> list[dict]:
    return [
        step(
            "Median |error|",
            "median of |predicted speed ÷ measured speed − 1|",
            "{} estimates of {} rows",
            [stats["count"], n_rows],
            100 * stats["median_abs_error"],
            "%",
        ),
        step(
            "80th percentile of |error|",
            "linear interpolation between order statistics",
            "{} values",
            [stats["count"]],
            100 * stats["p80_abs_error"],
            "%",
        ),
    ]


def compute(v: dict) -> dict:
    metric = v["metric"]
    label, unit, _ = calibration.KINDS[metric]
    chosen = [p for p in calibration.predictions(v["step_overhead"], v["communication"] == "priced") if _keep(v, p)]
    estimates = [p for p in chosen if "error" in p]
    stats = calibration.summarize([p["error"] for p in estimates])
    empty = stats["count"] == 0
    out = {
        "rows": len(chosen),
        "estimate_rows": len(estimates),
        "median_abs_error": 0.0 if empty else stats["median_abs_error"],
        "p80_abs_error": 0.0 if empty else stats["p80_abs_error"],
        "signed_median_error": 0.0 if empty else stats["signed_median_error"],
        "within_share": 0.0 if empty else stats["within_share"],
        "bound_violations": sum(not p["bound_holds"] for p in chosen),
        "notes": []
        if not empty
        else [
            "no row of this kind and selection has every condition an estimate needs (its rows, if any, are "
            "used for the bound check only)"
        ],
        "derivation": [] if empty else _steps(stats, len(chosen)),
    }
    if estimates:
        measured = [p["value"] for p in estimates]
        out["series"] = {
            "predicted_vs_measured": series(
                f"{label}: predicted against measured",
                f"Measured {label[0].lower()}{label[1:]}",
                unit,
                measured,
                [
                    ("core's estimate", unit, [p["predicted"] for p in estimates]),
                    ("equal to the measurement", unit, measured),
                ],
                kind="scatter",
                log_axes=True,
            )
        }
    return out

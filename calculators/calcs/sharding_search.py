"""Sharding search: every way to split a model over a cluster, ranked by decode tokens/s per GPU under a
TPOT limit, each loser with the reason it lost (calculators/parallel.py's search)."""

from __future__ import annotations

from ..parallel_search import search
from ..schema import boolean, integer, number, output, series, step
from .deployment import deployment_fields, efficiency_steps
from .memory import engine_fields
from .sharding import cluster_fields, comm_fields, decode_steps, deployment_model

SHOWN = 12  # options on the plot and in the notes


def _fields() -> list[dict]:
    dep = [f for f in deployment_fields(0.8, 0.6, {"model": {"default": "llama-3.1-405b"}}) if f["key"] != "num_gpus"]
    return (
        dep
        + engine_fields()
        + cluster_fields()
        + comm_fields()
        + [
            integer(
                "context_tokens",
                "Context per sequence",
                8192,
                1,
                10_000_000,
                "tokens",
                "Every sequence at this context: it sets the KV per sequence and the attention work.",
            ),
            number("tpot_limit_ms", "TPOT limit", 50.0, 0.1, 100_000.0, "ms", "The SLO on time per output token."),
            integer(
                "max_batch",
                "Largest batch per scheduler",
                256,
                1,
                100_000,
                "sequences",
                "The most sequences one scheduler runs at once (an engine's max_num_seqs); a deployment with "
                "attention-DP ranks has one scheduler per rank, so it may run this many times its ranks.",
            ),
            boolean(
                "search_dcp",
                "Include decode context parallel",
                True,
                "Also try each TP group with its KV striped over 2, 4, … of its ranks where the model allows.",
            ),
        ]
    )


SCHEMA = {
    "name": "sharding_search",
    "title": "Sharding search: TP, PP, DP attention, EP and DCP",
    "description": (
        "Every sharding of the model whose GPUs divide the cluster (replicas fill the rest): tensor, "
        "pipeline and attention-data parallel degrees, expert parallelism on or off for MoE models, "
        "decode context parallel. Each is run at the largest batch that fits its KV memory and keeps "
        "TPOT within the limit (bisection), and ranked by decode tokens/s per GPU. Step times: the "
        "roofline per GPU at the efficiencies plus the per-step overhead, plus communication on the "
        "critical path over the links it crosses (NCCL's cost model for all-reduces; all-to-all at "
        "link bandwidth). Decode only; prefill context parallel is not searched."
    ),
    "inputs": _fields(),
    "outputs": [
        output("best_tokens_per_s_per_gpu", "Best decode tokens/s per GPU", "tokens/s", "rate"),
        output("best_tpot_s", "Its TPOT", "s", "seconds"),
        output("best_batch", "Its batch (sequences per deployment)", "sequences", "integer"),
        output("best_gpus", "GPUs per deployment", "GPUs", "integer"),
        output("best_tp", "Its tensor-parallel degree", "GPUs", "integer"),
        output("best_pp", "Its pipeline stages", "stages", "integer"),
        output("best_dp", "Its attention data-parallel ranks", "ranks", "integer"),
        output("best_ep", "Its expert-parallel degree", "GPUs", "integer", words={1: "off"}),
        output("best_dcp", "Its decode context parallel", "ranks", "integer"),
        output("best_comm_share", "Communication share of its step", "", "percent"),
        output("best_weights_per_gpu", "Its weights per GPU", "B", "bytes"),
        output("runner_up_gap", "How far the runner-up is behind", "", "percent"),
        output("options_feasible", "Shardings that fit and meet TPOT", "", "integer"),
        output("options_tried", "Shardings tried", "", "integer"),
    ],
}


def _plot(good: list) -> dict:
    shown = good[:SHOWN]
    key = " · ".join(f"{i} {o.parallelism.label()}" for i, o in enumerate(shown, 1))
    xs = list(range(1, len(shown) + 1))
    return series(
        "Shardings that fit and meet the TPOT limit, best first",
        key,
        "",
        xs,
        [
            ("decode tokens/s per GPU", "tokens/s", [o.tokens_per_s_per_gpu for o in shown]),
            ("TPOT", "ms", [o.decode.tpot_s * 1e3 for o in shown]),
        ],
        kind="bar",
    )


def _note(o) -> str:
    p = o.parallelism
    where = f"{p.label()} ({p.gpus} GPU{'s' if p.gpus > 1 else ''}, {o.replicas} cop{'ies' if o.replicas > 1 else 'y'})"
    if o.rank:
        return (
            f"{o.rank}. {where}: {o.tokens_per_s_per_gpu:,.0f} tokens/s per GPU at batch {o.batch}, "
            f"TPOT {o.decode.tpot_s * 1e3:.1f} ms; {o.why}"
        )
    return f"{where}: {o.why}"


def _steps(v: dict, dm, best) -> list[dict]:
    mem = dm.memory(best.parallelism, v["context_tokens"])
    weights = [(mem.dense_weights, "B"), (mem.expert_weights, "B")]
    return (
        efficiency_steps(dm.base)
        + [
            step(
                "Weights per GPU",
                "non-expert ÷ tp + experts ÷ (tp × dp) (worst stage)",
                "{} + {}",
                weights,
                mem.weights,
                "B",
            )
        ]
        + decode_steps(best.parallelism, best.decode)
    )


BEST_KEYS = (
    "best_tokens_per_s_per_gpu",
    "best_tpot_s",
    "best_batch",
    "best_gpus",
    "best_tp",
    "best_pp",
    "best_dp",
    "best_ep",
    "best_dcp",
    "best_comm_share",
    "best_weights_per_gpu",
    "runner_up_gap",
)


def _ranked(good: list) -> list[dict]:
    """The feasible options, best first, as plain values (inline expressions and tests read them)."""
    return [
        {
            "label": o.parallelism.label(),
            "gpus": o.parallelism.gpus,
            "batch": o.batch,
            "tokens_per_s_per_gpu": o.tokens_per_s_per_gpu,
            "tpot_s": o.decode.tpot_s,
            "why": o.why,
            "comm_share": o.decode.stage.comm_s / o.decode.stage.time_s,
        }
        for o in good
    ]


def _best(dm, best, good: list) -> dict:
    p, d = best.parallelism, best.decode
    gap = 1 - good[1].tokens_per_s_per_gpu / d.tokens_per_s_per_gpu if len(good) > 1 else 0.0
    values = (
        d.tokens_per_s_per_gpu,
        d.tpot_s,
        best.batch,
        p.gpus,
        p.tp,
        p.pp,
        p.dp,
        p.ep,
        p.dcp,
        d.stage.comm_s / d.stage.time_s,
        dm.memory(p, 1).weights,
        gap,
    )
    head = (
        f"Best: {p.label()} on {p.gpus} GPUs, {d.tokens_per_s_per_gpu:,.0f} decode tokens/s per GPU at batch "
        f"{best.batch} (TPOT {d.tpot_s * 1e3:.1f} ms)"
    )
    return {**dict(zip(BEST_KEYS, values)), "headline": head, "best_label": p.label()}


def compute(v: dict) -> dict:
    dm = deployment_model(v)
    r = search(dm, v["context_tokens"], v["tpot_limit_ms"] * 1e-3, v["max_batch"], v["search_dcp"])
    good = [o for o in r.options if o.rank]
    # losers that fit but miss TPOT first, then the largest that do not fit: the cut (SHOWN) drops the least telling
    bad = sorted((o for o in r.options if not o.rank), key=lambda o: (not o.fits, -o.parallelism.gpus))
    out = {
        "options_feasible": len(good),
        "options_tried": len(r.options),
        "notes": [_note(o) for o in good[:SHOWN]] + [_note(o) for o in bad[:SHOWN]],
    }
    if r.best is None:
        none = "No sharding of this model on this cluster fits and meets the TPOT limit"
        return {**out, **dict.fromkeys(BEST_KEYS, 0), "headline": none, "derivation": [], "series": {}}
    return {
        **out,
        **_best(dm, r.best, good),
        "ranked": _ranked(good),
        "derivation": _steps(v, dm, r.best),
        "series": {"options": _plot(good)},
    }

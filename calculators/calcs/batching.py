"""Static against continuous batching: one seeded workload, run twice on the engine simulator.

Static batching (the pre-Orca baseline, engine.config batching="static") admits a batch only when the
engine is idle and runs it until its longest member finishes; continuous batching (Orca, OSDI 2022:
iteration-level scheduling) re-plans every step, admitting waiting requests into the running batch as
soon as the token budget, the sequence cap and the KV pool allow, with chunked prefill on or off, as
vLLM V1 does. Both runs see the same requests (common random numbers) and the same step-time model
(steptime.StepModel, priced by engine.steps.StepTimes), so the difference is the scheduler alone.

The timeline is the engine's trace of its first steps: for each step, which of the first few requests
prefill (a chunk of prompt tokens), decode (one token) or wait (arrived, not yet admitted). The step-time
curve is the decode step of B sequences at the workload's mean context, split into the time to read
the weights (the same for any B) and the time to read the KV (growing with B).
"""

from __future__ import annotations

from ..engine import workload as engine_workload
from ..engine.config import EngineConfig, Request
from ..engine.metrics import Gaps, percentile
from ..engine.run import simulate
from ..engine.steps import StepTimes
from ..engine.workload import Workload
from ..schema import choice, integer, number, output, series, step
from .deployment import deployment_fields, efficiency_steps
from .lengths import length_fields
from .memory import engine_fields, kv_pool_tokens
from .overhead import EXTRA_OVERHEAD_HELP
from .steptime import StepModel, deployment
from .sharding import steps_for

ON_OFF = [("on", "On"), ("off", "Off")]
BATCHINGS = [("continuous", "Continuous"), ("static", "Static")]
CURVE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
KINDS = ("static", "continuous")
ARRIVALS = [("open", "Open loop at the request rate"), ("together", "All at once (an offline batch)")]


def _fields() -> list[dict]:
    return (
        deployment_fields(0.8, 0.6)
        + engine_fields()
        + [
            choice(
                "arrivals",
                "Arrivals",
                "open",
                ARRIVALS,
                "All at once is an offline batch job: every request waits at time 0, so static batching forms full "
                "batches; the open loop sends them at the rate below.",
            ),
            number(
                "request_rate_per_s",
                "Request rate",
                20.0,
                0.01,
                1e5,
                "requests/s",
                "Arrivals are gamma-distributed (shape = burstiness; 1 is Poisson), as vLLM's benchmark draws them.",
            ),
            number("burstiness", "Arrival burstiness (gamma shape)", 1.0, 0.05, 100.0, "", step=0.05),
            integer(
                "num_requests",
                "Requests",
                80,
                2,
                2000,
                "requests",
                "Every request is measured; both batchings run the same ones.",
            ),
            integer("seed", "Random seed", 0, 0, 2**31 - 1),
        ]
        + _length_fields()
        + _engine_fields()
    )


def _length_fields() -> list[dict]:
    return length_fields(
        512,
        128,
        output_cv=1.0,
        input_max=200_000,
        output_cv_help="Static batching loses most when lengths differ: a batch runs as long as its longest member.",
    )


def _engine_fields() -> list[dict]:
    return [
        integer(
            "max_num_seqs",
            "Running-sequence cap (max_num_seqs; the static batch size)",
            256,
            1,
            4096,
            "sequences",
            "vLLM V1 v0.33.0 defaults to 1,024 on an H100 and 256 on an A100 or a GPU under 70 GiB.",
        ),
        integer(
            "max_num_batched_tokens",
            "Token budget per step (max_num_batched_tokens)",
            8192,
            16,
            1_048_576,
            "tokens",
            "vLLM V1 v0.33.0's API server: 8,192 on an H100 (vllm/engine/arg_utils.py).",
        ),
        choice(
            "chunked_prefill",
            "Chunked prefill (continuous run)",
            "on",
            ON_OFF,
            "Off: a prompt that does not fit in the budget left waits for a step where it does.",
        ),
        number(
            "step_overhead_ms",
            "Extra overhead per step",
            0.0,
            0.0,
            100.0,
            "ms",
            EXTRA_OVERHEAD_HELP,
        ),
        choice("timeline_of", "Timeline shows", "continuous", BATCHINGS),
        integer("timeline_requests", "Requests in the timeline", 8, 1, 24, "requests"),
        integer("timeline_steps", "Steps in the timeline", 40, 1, 200, "steps"),
    ]


def _metric_outputs() -> list[dict]:
    out = []
    for kind in KINDS:
        name = kind.capitalize()
        out += [
            output(f"{kind}_output_tokens_per_s", f"{name}: output tokens/s", "tokens/s", "rate"),
            output(f"{kind}_ttft_p50_s", f"{name}: TTFT p50", "s", "seconds"),
            output(f"{kind}_ttft_p99_s", f"{name}: TTFT p99", "s", "seconds"),
            output(f"{kind}_tpot_p50_s", f"{name}: TPOT p50", "s", "seconds"),
            output(f"{kind}_tpot_p99_s", f"{name}: TPOT p99", "s", "seconds"),
            output(f"{kind}_itl_p50_s", f"{name}: inter-token latency p50 (pooled gaps)", "s", "seconds"),
            output(f"{kind}_itl_p99_s", f"{name}: inter-token latency p99 (pooled gaps)", "s", "seconds"),
            output(f"{kind}_e2e_p50_s", f"{name}: end-to-end latency p50", "s", "seconds"),
            output(f"{kind}_mean_batch", f"{name}: mean running sequences (time-weighted)", "sequences", "number"),
            output(f"{kind}_steps", f"{name}: engine steps", "steps", "integer"),
        ]
    return out


SCHEMA = {
    "name": "batching",
    "title": "Static against continuous batching (simulated)",
    "description": (
        "One seeded workload run twice on the engine simulator: static batching (a batch is admitted only "
        "when the engine is idle, with every member's whole length reserved, and runs until its longest "
        "member finishes) and continuous batching (every step, running sequences first, then waiting "
        "requests while the token budget, the sequence cap and the KV pool allow, as vLLM V1's scheduler "
        "does). Assumptions: one replica; first come first served; step times from the roofline model "
        "scaled by the efficiency factors plus the per-step overhead (by default CUDA graphs plus a fitted "
        "GPU floor per kernel) and any extra overhead you set; the KV pool from the engine's "
        "memory rule; no network, tokenisation or sampling time. The timeline shows the first steps of the "
        "run you pick."
    ),
    "inputs": _fields(),
    "outputs": _metric_outputs()
    + [
        output("throughput_ratio", "Continuous ÷ static, output tokens/s", "×", "number"),
        output("ttft_p99_ratio", "Static ÷ continuous, TTFT p99", "×", "number"),
        output("kv_capacity_tokens", "KV pool", "tokens", "integer"),
        output("mean_context_tokens", "Mean context during decode (for the step-time curve)", "tokens", "integer"),
        output("step_time_batch_1_s", "Decode step, 1 sequence", "s", "seconds"),
        output("step_time_batch_64_s", "Decode step, 64 sequences", "s", "seconds"),
        output("step_time_batch_256_s", "Decode step, 256 sequences", "s", "seconds"),
        output("weights_share_batch_64", "Share of the 64-sequence step spent reading weights", "", "percent"),
    ],
}


def _requests(v: dict) -> list:
    draws = Workload(v).first(v["num_requests"])
    if v["arrivals"] == "together":
        return [Request(0.0, prompt, out) for _, prompt, out in draws]
    return engine_workload.open_loop(draws, v["request_rate_per_s"])


def _config(v: dict, kind: str, blocks: int, trace: int, longest: int = 0) -> EngineConfig:
    """Static batching prefills its whole batch in one step and ignores the token budget, so its run gets a
    budget that holds the longest request: the engine rejects an unchunked request longer than the budget,
    which would otherwise drop long requests from the static run alone."""
    tokens = v["max_num_batched_tokens"]
    return EngineConfig(
        kv_blocks=blocks,
        block_size_tokens=16,
        max_num_seqs=v["max_num_seqs"],
        max_num_batched_tokens=max(tokens, longest) if kind == "static" else tokens,
        chunked_prefill=kind == "continuous" and v["chunked_prefill"] == "on",
        batching=kind,
        trace_steps=trace,
    )


def mean_batch(occupancy) -> float:
    """Running sequences averaged over time (each scheduling turn weighted by how long it lasted)."""
    area = sum((b[0] - a[0]) * a[1] for a, b in zip(occupancy, occupancy[1:]))
    span = occupancy[-1][0] - occupancy[0][0] if len(occupancy) > 1 else 0.0
    return area / span if span > 0 else float(occupancy[0][1] if occupancy else 0)


def _metrics(r) -> dict:
    gaps = Gaps()
    gaps.values.extend(r.gap_values_s)
    gaps.weights.extend(r.gap_weights)
    itl50, itl99 = gaps.percentiles((50, 99))
    ttft, tpot, e2e = sorted(r.ttft_s), sorted(r.tpot_s), sorted(r.e2e_s)
    return {
        "output_tokens_per_s": r.output_tokens_per_s,
        "ttft_p50_s": percentile(ttft, 50),
        "ttft_p99_s": percentile(ttft, 99),
        "tpot_p50_s": percentile(tpot, 50),
        "tpot_p99_s": percentile(tpot, 99),
        "itl_p50_s": itl50,
        "itl_p99_s": itl99,
        "e2e_p50_s": percentile(e2e, 50),
        "mean_batch": mean_batch(r.occupancy),
        "steps": r.steps,
    }


def timeline(trace, requests, shown: int) -> tuple[list, dict]:
    """Points (step start in ms, request number from 1) for the first `shown` requests in each traced
    step, by state: a prefill chunk while the request's computed tokens are still inside its prompt,
    a decode after, waiting while it sits in the queue. Preempted requests are not marked apart."""
    computed: dict[int, int] = {}
    xs, states = [], {"prefill": [], "decode": [], "waiting": []}
    for start, _took, plan, waiting in trace:
        cells = {}
        for i, tokens in plan:
            if i < shown:
                before = computed.get(i, 0)
                cells[i] = "prefill" if before < requests[i].prompt_tokens else "decode"
                computed[i] = before + tokens
        for i in waiting:
            if i < shown:
                cells.setdefault(i, "waiting")
        for i in sorted(cells):
            xs.append(start * 1e3)
            for state, ys in states.items():
                ys.append(i + 1 if cells[i] == state else None)
    return xs, states


def _timeline_series(v: dict, trace, requests) -> dict:
    xs, states = timeline(trace, requests, v["timeline_requests"])
    names = {"prefill": "prefill chunk", "decode": "decode (one token)", "waiting": "waiting in the queue"}
    out = series(
        f"Step timeline, {v['timeline_of']} batching: first {v['timeline_steps']} steps, "
        f"first {v['timeline_requests']} requests",
        "Step start",
        "ms",
        xs,
        [(names[s], "request", ys) for s, ys in states.items()],
        kind="scatter",
    )
    return out


def _curve(steps: StepModel, context: int) -> tuple[dict, dict]:
    costs = {b: steps.decode(b, context) for b in CURVE_BATCHES}
    bw = steps.dep.accelerator.memory_bandwidth_bytes_per_s * steps.dep.bandwidth_efficiency
    weights = [c.weight_bytes_per_gpu / bw * 1e3 for c in costs.values()]
    kv = [c.kv_bytes_per_gpu / bw * 1e3 for c in costs.values()]
    total = [c.time_s * 1e3 for c in costs.values()]
    plot = series(
        f"Decode step time against batch size at {context:,} tokens of context",
        "Sequences in the batch",
        "sequences",
        list(CURVE_BATCHES),
        [("step time", "ms", total), ("reading the weights", "ms", weights), ("reading the KV", "ms", kv)],
        log_axes=True,
    )
    return plot, costs


def _runs(v: dict, times: StepTimes, requests: list, blocks: int) -> tuple[dict, dict]:
    """Both batchings on the same requests: (their results, their outputs keyed by batching)."""
    out, results = {}, {}
    longest = max(q.prompt_tokens + q.output_tokens for q in requests)
    for kind in KINDS:
        trace = v["timeline_steps"] if kind == v["timeline_of"] else 0
        results[kind] = r = simulate(times, requests, _config(v, kind, blocks, trace, longest))
        out.update({f"{kind}_{k}": x for k, x in _metrics(r).items()})
    return results, out


def _ratios(out: dict) -> dict:
    s, c, ttft = out["static_output_tokens_per_s"], out["continuous_output_tokens_per_s"], out["continuous_ttft_p99_s"]
    return {
        "throughput_ratio": c / s if s else 0.0,
        "ttft_p99_ratio": out["static_ttft_p99_s"] / ttft if ttft else 0.0,
    }


def _derivation(dep, capacity: float, context: int, c64, out: dict) -> list[dict]:
    s, c = out["static_output_tokens_per_s"], out["continuous_output_tokens_per_s"]
    return efficiency_steps(dep) + [
        step("KV pool", "engine budget ÷ KV per token (all layers)", "{}", [(capacity, "tokens")], capacity, "tokens"),
        step(
            "Decode step, 64 sequences",
            "max((weights + 64 × KV(T)) ÷ (BW × η_bw), FLOPs ÷ (peak × η × s_chip))",
            "T = {}",
            [(context, "tokens")],
            c64.time_s,
            "s",
        ),
        step(
            "Throughput gain",
            "continuous tokens/s ÷ static tokens/s",
            "{} ÷ {}",
            [(c, "tokens/s"), (s, "tokens/s")],
            out["throughput_ratio"],
            "×",
        ),
    ]


def compute(v: dict) -> dict:
    dep = deployment(v)
    steps = steps_for(v, dep)
    capacity = kv_pool_tokens(v)
    requests = _requests(v)
    results, out = _runs(v, StepTimes(steps, v["step_overhead_ms"] / 1e3), requests, max(1, int(capacity // 16)))
    context = max(1, round(sum(r.prompt_tokens + r.output_tokens / 2 for r in requests) / len(requests)))
    plot, costs = _curve(steps, context)
    c64 = costs[64]
    bw = dep.accelerator.memory_bandwidth_bytes_per_s * dep.bandwidth_efficiency
    out.update(_ratios(out))
    out.update(
        {
            "kv_capacity_tokens": int(capacity),
            "mean_context_tokens": context,
            "step_time_batch_1_s": costs[1].time_s,
            "step_time_batch_64_s": c64.time_s,
            "step_time_batch_256_s": costs[256].time_s,
            "weights_share_batch_64": (c64.weight_bytes_per_gpu / bw) / c64.time_s,
        }
    )
    out["notes"] = [
        f"{results[k].rejected} requests rejected under {k} batching (longer than the KV pool or, unchunked, "
        "the token budget)"
        for k in KINDS
        if results[k].rejected
    ]
    out["derivation"] = _derivation(dep, capacity, context, c64, out)
    out["series"] = {
        "timeline": _timeline_series(v, results[v["timeline_of"]].trace, requests),
        "step_time_vs_batch": plot,
    }
    return out

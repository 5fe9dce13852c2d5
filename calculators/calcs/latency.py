"""Latency: TTFT, TPOT and end-to-end time for a batch, and the throughput–latency curve.

  TTFT = queueing + prefill of the batch's prompts            (NVIDIA NIM metrics: TTFT includes queueing)
         with a token budget per step (vLLM's max_num_batched_tokens), the prompts are prefilled in order,
         at most that many tokens a step: the first request's TTFT ends with its step, the last's with
         the last step (decodes that would share those steps in vLLM are not counted)
  TPOT = decode step time at the mean context over generation (steptime.decode_step)
  E2E  = TTFT + TPOT × (output tokens − 1)
         (Databricks, 'LLM Inference Performance Engineering: Best Practices', 2023-10-12)
With a workload shape (workload_shape.py), B tasks of that shape run in lockstep, turn by turn, priced by
task_cost's per-turn model (task_cost.Pricer, _run): turn t's TTFT = queueing + one prefill of the B prompts'
uncached tokens after their cached prefix (no token budget), its TPOT = the TPOT above at the turn's mean
context, and task latency = Σ_t (TTFT_t + TPOT_t × (decoded_t − 1)) + (turns − 1) × wait.
Default efficiencies (bandwidth 0.8, compute 0.6) make these estimates, not bounds: FlashMLA reaches
~0.9 of HBM bandwidth (deepseek-ai/FlashMLA README), FlashAttention-3 0.75 of H100 BF16 peak (arXiv 2407.08608).
"""
from __future__ import annotations

import math

from ..schema import choice, integer, number, output, series, step
from .engine_defaults import vllm_max_num_batched_tokens
from .deployment import deployment_fields, efficiency_steps, time_step
from .speculative_decoding import speculation_fields, speculative_decode
from .parallel_fields import scale_out_fields
from .sharding import comm_notes, sharded_steps
from .steptime import StepModel, deployment
from .task_cost import Pricer, _run
from .workload_shape import shape_fields, shape_of

BATCHES = tuple(2 ** k for k in range(11))
TP_HELP = ("The tensor-parallel group. FLOPs and bytes split evenly; with more than one GPU each step also pays "
           "its all-reduces. Advanced: pipeline, attention-data and expert parallelism, and the links.")
BUDGET_RULES = [("none", "None: every prompt in one pass"),
                ("vllm", "vLLM V1 API-server default for this accelerator"), ("set", "The value below")]


def stream_pieces(batch: int, input_tokens: int, start: int, count: int) -> list[int]:
    """The prompt pieces in tokens [start, start + count) of the batch's prompts laid end to end."""
    pieces, end = [], min(start + count, batch * input_tokens)
    while start < end:
        piece = min(end, (start // input_tokens + 1) * input_tokens) - start
        pieces.append(piece)
        start += piece
    return pieces


def prefill_schedule(steps, batch: int, input_tokens: int, budget: int | None, whole_s: float) -> dict:
    """Prefill steps of at most `budget` tokens over the prompts in order (None: one step, `whole_s`: the
    caller's one pass of every prompt, steps.prefill_alone). Every full step is timed as the first one (exact
    when the budget holds whole prompts or whole chunks of one). With pipeline stages consecutive steps overlap
    (vLLM pipelines them, PR #42187), each costing its share of a full pipeline, but a prompt's first token waits
    for its last step to cross every stage (steps.prefill_alone)."""
    total = batch * input_tokens
    alone = steps.prefill_alone
    if budget is None or budget >= total:
        return {"steps": 1, "first_s": whole_s, "total_s": whole_s}
    full, rem = divmod(total, budget)
    pieces = stream_pieces(batch, input_tokens, 0, budget)
    t_full, t_full_alone = steps.prefill(pieces).time_s, alone(pieces).time_s
    t_rem = 0.0
    if rem:  # a short last step still leaves the last stage after the full one ahead of it
        last = stream_pieces(batch, input_tokens, full * budget, rem)
        t_rem = max(alone(last).time_s, steps.prefill(last).time_s + t_full_alone - t_full)
    first = -(-input_tokens // budget)            # steps until the first prompt is in
    first_s = (first - 1) * t_full + t_full_alone if first <= full else full * t_full + t_rem
    total_s = full * t_full + t_rem if rem else (full - 1) * t_full + t_full_alone
    return {"steps": full + (rem > 0), "first_s": first_s, "total_s": total_s}


def token_budget(v: dict, accelerator) -> int | None:
    rule = v.get("prefill_budget_rule", "none")
    return None if rule == "none" else vllm_max_num_batched_tokens(accelerator) if rule == "vllm" \
        else v["max_num_batched_tokens"]


def batch_latency(steps, batch: int, input_tokens: int, output_tokens: int, queueing_s: float,
                  budget: int | None = None, v: dict | None = None) -> dict:
    """Times for `batch` requests that arrive together, are prefilled in order (within the token budget)
    and decode together once every prompt is in, on `steps` (a StepModel, or sharded_steps.ShardedSteps for
    a multi-GPU deployment). With speculation on in `v` (speculation_fields), TPOT is a speculative step ÷
    the tokens it keeps (Part 11)."""
    prefill = steps.prefill_alone([input_tokens] * batch)  # one pass through every stage
    plan = prefill_schedule(steps, batch, input_tokens, budget, prefill.time_s)
    context = input_tokens + output_tokens / 2
    decode = steps.decode(batch, context)
    spec = speculative_decode(steps, v, batch, context) if v else None
    tpot = decode.time_s if spec is None else spec.time_s / spec.tokens_per_step
    ttft = queueing_s + plan["total_s"]
    e2e = ttft + tpot * (output_tokens - 1)
    return {"prefill": prefill, "decode": decode, "ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "spec": spec,
            "ttft_first_s": queueing_s + plan["first_s"], "prefill_steps": plan["steps"],
            "prefill_total_s": plan["total_s"],
            "tokens_per_s_per_gpu": batch * output_tokens / e2e / steps.num_gpus,
            "decode_tokens_per_s_per_gpu": batch / tpot / steps.num_gpus}


NO_SHAPE_WORDS = {0: "no workload shape chosen"}
SHAPE_OUTPUTS = [("task_ttft_first_turn_s", "Workload shape: TTFT, first turn"),
                 ("task_ttft_last_turn_s", "Workload shape: TTFT, last turn"),
                 ("task_tpot_last_turn_s", "Workload shape: TPOT, last turn"),
                 ("task_latency_s", "Workload shape: task latency (every turn end to end, plus waits)")]

SCHEMA = {
    "name": "latency",
    "title": "Latency: TTFT, TPOT and end-to-end",
    "description": ("A batch of requests with equal prompt and output lengths arrives together, is "
                    "prefilled in one pass and decodes together. Step times come from the roofline "
                    "model scaled by the efficiency factors plus each step's overhead (by default CUDA "
                    "graphs plus a fitted GPU floor per kernel); on more than one GPU, plus the deployment's "
                    "communication on the "
                    "critical path (tensor-parallel all-reduces, expert all-to-alls, pipeline sends: Part 12's "
                    "deployment model, NCCL's ring by default). CPU scheduling is not counted. Queueing delay is "
                    "an input."),
    "inputs": deployment_fields(0.8, 0.6, {"num_gpus": {"help": TP_HELP}}) + scale_out_fields() + [
        integer("batch_size", "Batch size", 16, 1, 100_000, "requests"),
        integer("input_tokens", "Prompt length", 1024, 1, 10_000_000, "tokens"),
        integer("output_tokens", "Output length", 256, 1, 1_000_000, "tokens"),
        number("queueing_s", "Queueing delay", 0.0, 0.0, 86_400.0, "s"),
        choice("prefill_budget_rule", "Token budget per prefill step", "none", BUDGET_RULES,
               "vLLM V1's max_num_batched_tokens for the API server (vllm/engine/arg_utils.py, v0.33.0): 16,384 on "
               "GPUs with at least 160 GiB; 8,192 with at least 70 GiB other than A100; 2,048 otherwise."),
        integer("max_num_batched_tokens", "Token budget (when set)", 8192, 1, 10_000_000, "tokens"),
    ] + speculation_fields() + shape_fields(
        "A named task run by B sessions in lockstep: per-turn TTFT and TPOT at its growing context (its cached "
        "prefix not prefilled again; no token budget) and the task's latency, below. The outputs above stay "
        "those of the lengths above."),
    "outputs": [
        output("ttft_s", "Time to first token (last request of the batch)", "s", "seconds"),
        output("ttft_first_s", "Time to first token, first request of the batch", "s", "seconds"),
        output("prefill_steps", "Prefill steps", "steps", "integer"),
        output("prefill_time_s", "Prefill time", "s", "seconds"),
        output("tpot_s", "Time per output token", "s", "seconds"),
        output("e2e_latency_s", "End-to-end latency", "s", "seconds"),
        output("tokens_per_s_per_user", "Tokens/s per user while decoding", "tokens/s", "rate"),
        output("tokens_per_s_per_gpu", "Output tokens/s per GPU, prefill included", "tokens/s", "rate"),
        output("decode_tokens_per_s_per_gpu", "Output tokens/s per GPU while decoding", "tokens/s", "rate"),
        *[output(k, label, "s", "seconds", words=NO_SHAPE_WORDS) for k, label in SHAPE_OUTPUTS],
    ],
}


def _curve(steps, v, budget) -> dict:
    batches = sorted(set(BATCHES) | {v["batch_size"]})
    rows = [batch_latency(steps, b, v["input_tokens"], v["output_tokens"], v["queueing_s"], budget, v) for b in batches]
    out = series("Throughput vs latency across batch sizes", "Output tokens/s per GPU", "tokens/s",
                 [r["tokens_per_s_per_gpu"] for r in rows],
                 [("end-to-end latency", "s", [r["e2e_s"] for r in rows]),
                  ("TTFT", "s", [r["ttft_s"] for r in rows]),
                  ("TPOT", "ms", [1000 * r["tpot_s"] for r in rows])])   # its own axis (reader walk #29)
    out["point_labels"] = [f"batch {b}" for b in batches]
    return out


def _steps(v: dict, r: dict, budget: int | None) -> list[dict]:
    pre, dec, queueing = r["prefill"], r["decode"], (v["queueing_s"], "s")
    return [
        time_step(pre, "Prefill time", "max(bytes ÷ BW, B × (2 × P_active × T_in + attention) ÷ peak)"),
        # no budget is the text "none": every prompt goes in one pass
        step("Prefill steps", "one pass, or ⌈B × T_in ÷ token budget⌉ steps", "budget {}",
             [(budget, "tokens") if budget else "none"], r["prefill_steps"], "steps"),
        step("TTFT, last request", "queueing + every prefill step", "{} + {}", [queueing, (r["prefill_total_s"], "s")],
             r["ttft_s"], "s"),
        step("TTFT, first request", "queueing + first prefill step", "{} + {}",
             [queueing, (r["ttft_first_s"] - v["queueing_s"], "s")], r["ttft_first_s"], "s"),
        time_step(dec, "TPOT", "decode step at context T_in + T_out ÷ 2") if r["spec"] is None else
        step("TPOT, speculative", "(k draft steps + verification of k + 1 tokens) ÷ E[tokens kept]",
             "({} + {}) ÷ {}", [(r["spec"].draft_time_s, "s"), (r["spec"].verify.time_s, "s"),
                               r["spec"].tokens_per_step], r["tpot_s"], "s"),
        step("End-to-end latency", "TTFT + TPOT × (T_out − 1)", "{} + {} × {}",
             [(r["ttft_s"], "s"), (r["tpot_s"], "s"), v["output_tokens"] - 1], r["e2e_s"], "s"),
    ]


def shape_task(v: dict, model) -> tuple[dict, list[dict]]:
    """The workload shape's per-task outputs and their derivation (zeros, no steps, without a shape), on
    `model`, the step model batch_latency prices with."""
    shape = shape_of(v)
    if shape is None:
        return dict.fromkeys((k for k, _ in SHAPE_OUTPUTS), 0.0), []
    batch = v["batch_size"]

    def tpot(context: float) -> float:  # the same TPOT as batch_latency's, speculation included
        spec = speculative_decode(model, v, batch, context)
        return model.decode(batch, context).time_s if spec is None else spec.time_s / spec.tokens_per_step

    run = _run(Pricer(v, batch, batch, tpot, model), shape)
    ttfts = [v["queueing_s"] + p for p in run["prefills"]]
    e2e = math.fsum(f + s * (t.decoded - 1) for f, s, t in zip(ttfts, run["steps"], run["turns"]))
    wait = shape.wait_s * (shape.turns - 1)
    out = {"task_ttft_first_turn_s": ttfts[0], "task_ttft_last_turn_s": ttfts[-1],
           "task_tpot_last_turn_s": run["steps"][-1], "task_latency_s": e2e + wait}
    return out, _shape_steps(v, shape, run, out, (e2e, wait))


def _shape_steps(v: dict, shape, run: dict, out: dict, parts: tuple[float, float]) -> list[dict]:
    last = run["turns"][-1]
    return [
        step("Shape: last turn's TTFT", "queueing + prefill of B prompts' uncached tokens after their cached prefix",
             "{} + B = {} × {} after {} cached", [(v["queueing_s"], "s"), v["batch_size"], (last.prefilled, "tokens"),
                                                  (last.cached, "tokens")], out["task_ttft_last_turn_s"], "s"),
        step("Shape: last turn's TPOT", "TPOT at context prompt + decoded ÷ 2", "context {}",
             [(last.prompt + last.decoded / 2, "tokens")], out["task_tpot_last_turn_s"], "s"),
        step("Shape: task latency", "Σ_t (TTFT_t + TPOT_t × (decoded_t − 1)) + (turns − 1) × wait",
             "{} over {} + {}", [(parts[0], "s"), (shape.turns, "turns"), (parts[1], "s")], out["task_latency_s"], "s"),
    ]


def compute(v: dict) -> dict:
    dep = deployment(v)
    steps = sharded_steps(v, dep) or StepModel(dep)
    budget = token_budget(v, dep.accelerator)
    r = batch_latency(steps, v["batch_size"], v["input_tokens"], v["output_tokens"], v["queueing_s"], budget, v)
    task, task_steps = shape_task(v, steps)
    return {
        "ttft_s": r["ttft_s"], "ttft_first_s": r["ttft_first_s"], "prefill_steps": r["prefill_steps"],
        "prefill_time_s": r["prefill"].time_s, "tpot_s": r["tpot_s"], "e2e_latency_s": r["e2e_s"],
        "tokens_per_s_per_user": 1 / r["tpot_s"],
        "tokens_per_s_per_gpu": r["tokens_per_s_per_gpu"],
        "decode_tokens_per_s_per_gpu": r["decode_tokens_per_s_per_gpu"],
        "notes": comm_notes(v, steps),
        **task,
        "derivation": efficiency_steps(dep) + _steps(v, r, budget) + task_steps,
        "series": {"throughput_latency": _curve(steps, v, budget)},
    }

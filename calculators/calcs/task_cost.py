"""Cost and latency per task for a workload shape (workload_shape.py): an agent run, a reasoning chat, a
multimodal session, priced on one replica by the core's step model.

  prefill_t  = StepTimes.mixed(0, 0, [(cached_t, prefilled_t)])   the uncached tokens after the cached
               prefix, one step (the engine simulator's price for a chunk after a cache hit)
  step_t     = StepModel.decode_time(B, prompt_t + decode_t ÷ 2)  one decode step of B sequences at this
               turn's mean context (the batch is assumed to sit at the same context)
  latency    = Σ_t (prefill_t + decode_t × step_t) + (turns − 1) × wait       no queueing, no network
  GPU-s      = N × Σ_t (prefill_t + decode_t × step_t ÷ B)                  a prefill is the task's alone;
               a decode step is shared by the B sequences in it
  $ per task = GPU-s ÷ 3600 × $ per GPU-hour
The same sums with no prefix reuse (every turn prefills its whole prompt) give what the cache saves.
"""

from __future__ import annotations

import math

from ..engine.steps import StepTimes
from ..schema import integer, output, series, step
from .deployment import deployment_fields
from .memory import engine_fields, kv_pool_tokens, sequence_pool_tokens
from .steptime import deployment
from .workload_shape import SHAPE_FIELDS, Shape, shape_from, totals, turns
from .cost import gpu_hour_field
from .sharding import steps_for


SCHEMA = {
    "name": "task_cost",
    "title": "Cost and latency per task for a workload shape",
    "description": (
        "One task of the shape you describe (turns, a shared context, new input, visible output and thinking "
        "per turn, images and audio by each model's token rule, waits between turns, prefix reuse) on one "
        "replica: tokens read, cached, prefilled and decoded, GPU-seconds, dollars and latency per task, and "
        "the same without prefix reuse. Each turn's prefill is one step of its uncached tokens after the "
        "cached prefix; its decode runs in a batch of B sequences at the turn's context, each step shared "
        "by them. An estimate: no queueing, no chunking, no preemption, no network or tool time beyond the "
        "wait you enter."
    ),
    "inputs": deployment_fields(0.8, 0.6, {"model": {"default": "qwen3-32b"}, "hardware": {"default": "h200"}})
    + engine_fields()
    + SHAPE_FIELDS
    + [
        integer(
            "decode_batch",
            "Sequences per decode step (B)",
            4,
            1,
            4096,
            "sequences",
            "Concurrent sequences decoding with this task's, at its context; each decode step's time is "
            "shared by them. More than fit in the KV pool at the task's context is flagged.",
        ),
        gpu_hour_field("DeepSeek's Day-6 costing uses $2/GPU-h for H800 (deepseek-ai/open-infra-index)."),
    ],
    "outputs": [
        output("usd_per_task", "Cost per task", "USD", "usd"),
        output("image_tokens_each", "Tokens per image", "tokens", "integer"),
        output("audio_tokens_per_turn", "Audio tokens per turn", "tokens", "integer"),
        output("tokens_read", "Input tokens read over the task", "tokens", "integer"),
        output("tokens_cached", "… served by the prefix cache", "tokens", "integer"),
        output("tokens_prefilled", "… prefilled", "tokens", "integer"),
        output("tokens_decoded", "Tokens decoded (output + thinking)", "tokens", "integer"),
        output("thinking_tokens_total", "… of which thinking", "tokens", "integer"),
        output("read_per_decoded", "Input read per token decoded", "×", "number"),
        output("final_context_tokens", "Context at the end of the task", "tokens", "integer"),
        output("kv_pool_tokens", "KV pool of the replica", "tokens", "integer"),
        output("sessions_fit_at_end", "Sessions of this context the pool holds", "sessions", "integer"),
        output("prefill_gpu_s", "GPU-seconds in prefill", "s", "seconds"),
        output("decode_gpu_s", "GPU-seconds in decode (share of batched steps)", "s", "seconds"),
        output("gpu_s_per_task", "GPU-seconds per task", "s", "seconds"),
        output("usd_per_task_no_reuse", "Cost per task with no prefix reuse", "USD", "usd"),
        output("reuse_saving_fraction", "Share of the cost prefix reuse saves", "", "percent"),
        output("ttft_first_s", "Time to first token, first turn", "s", "seconds"),
        output("ttft_last_s", "Time to first token, last turn", "s", "seconds"),
        output("ttft_last_no_reuse_s", "Time to first token, last turn, no reuse", "s", "seconds"),
        output("generation_s", "Time generating over the task", "s", "seconds"),
        output("waiting_s", "Time waiting between turns", "s", "seconds"),
        output("task_latency_s", "Task latency (model time + waits)", "s", "seconds"),
    ],
}


class Pricer:
    """Prefill and decode seconds of a turn on one deployment. Here a turn's prefill is the task's alone and
    a decode step has decode_batch sequences; the latency calculator prices `sessions` tasks in lockstep
    (their prompts prefilled together, a decode step of `batch`) with its own TPOT, `tpot(context)`, on its
    own step model (`model`, v's deployment's)."""

    def __init__(self, v: dict, batch: int | None = None, sessions: int = 1, tpot=None, model=None):
        self.dep = deployment(v)
        self.model = steps_for(v, self.dep) if model is None else model
        self.times = StepTimes(self.model)
        self.batch = v["decode_batch"] if batch is None else batch
        self.sessions, self.tpot = sessions, tpot

    def prefill(self, cached: int, prefilled: int) -> float:
        if not prefilled:
            return 0.0
        if self.sessions == 1:
            return self.times.mixed(0, 0.0, [(cached, prefilled)])
        # StepTimes.mixed over `sessions` equal chunks, as one product instead of a sum over up to 100,000
        model, n = self.model, self.sessions
        end_flops, end_kv = model.per_prompt(cached + prefilled)
        flops = end_flops - (model.per_prompt(cached)[0] if cached else 0.0)
        return model.step_time(n * flops, n * prefilled, n * end_kv, n) + self.times.overhead_s

    def step(self, prompt: int, decoded: int) -> float:
        if self.tpot is not None:
            return self.tpot(prompt + decoded / 2)
        return self.model.decode_time(self.batch, round(prompt + decoded / 2))


def _run(p: Pricer, shape: Shape, reuse: bool = True) -> dict:
    ts = turns(shape)
    prefills = [p.prefill(t.cached, t.prefilled) if reuse else p.prefill(0, t.prompt) for t in ts]
    steps = [p.step(t.prompt, t.decoded) for t in ts]
    decode_s = [t.decoded * s for t, s in zip(ts, steps)]
    n = p.dep.num_gpus
    return {
        "turns": ts,
        "prefills": prefills,
        "steps": steps,
        "prefill_gpu_s": n * math.fsum(prefills),
        "decode_gpu_s": n * math.fsum(decode_s) / p.batch,
        "generation_s": math.fsum(prefills) + math.fsum(decode_s),
    }


def compute(v: dict) -> dict:
    shape, p = shape_from(v), Pricer(v)
    tot = totals(shape)
    run, bare = _run(p, shape), _run(p, shape, reuse=False)
    price = v["usd_per_gpu_hour"] / 3600
    gpu_s = run["prefill_gpu_s"] + run["decode_gpu_s"]
    bare_s = bare["prefill_gpu_s"] + bare["decode_gpu_s"]
    usd, usd_bare = gpu_s * price, bare_s * price
    out = {
        "image_tokens_each": shape.tokens_per_image,
        "audio_tokens_per_turn": shape.audio_tokens_per_turn,
        "tokens_read": tot.prompt,
        "tokens_cached": tot.cached,
        "tokens_prefilled": tot.prefilled,
        "tokens_decoded": tot.decoded,
        "thinking_tokens_total": tot.thinking,
        "read_per_decoded": tot.prompt / tot.decoded,
        "final_context_tokens": tot.final_context,
        "prefill_gpu_s": run["prefill_gpu_s"],
        "decode_gpu_s": run["decode_gpu_s"],
        "gpu_s_per_task": gpu_s,
        "usd_per_task": usd,
        "usd_per_task_no_reuse": usd_bare,
        "reuse_saving_fraction": 1 - usd / usd_bare if usd_bare else 0.0,
        "ttft_first_s": run["prefills"][0],
        "ttft_last_s": run["prefills"][-1],
        "ttft_last_no_reuse_s": bare["prefills"][-1],
        "generation_s": run["generation_s"],
        "waiting_s": tot.wait_s,
        "task_latency_s": run["generation_s"] + tot.wait_s,
    }
    pool = kv_pool_tokens(v)
    out["kv_pool_tokens"] = int(pool)
    held = sequence_pool_tokens(v, tot.final_context)
    out["sessions_fit_at_end"] = int(pool // held) if tot.final_context else 0
    out["notes"] = _notes(p, tot, pool, out["sessions_fit_at_end"])
    out["derivation"] = _derivation(v, shape, p, tot, run, out)
    out["series"] = _series(shape, p, run, bare)
    return out


def _notes(p: Pricer, tot, pool: float, fit: int) -> list[str]:
    notes = []
    if p.batch > fit:
        notes.append(
            f"B = {p.batch} sequences at the task's final context need more KV than the pool's "
            f"{int(pool):,} tokens: fewer fit, so the late turns run a smaller batch (or are preempted) "
            "and cost more than priced"
        )
    limit = p.dep.model.max_context_tokens
    if limit and tot.final_context > limit:
        notes.append(f"the task's context reaches {tot.final_context:,} tokens, past the model's {limit:,}")
    return notes


def _derivation(v: dict, shape: Shape, p: Pricer, tot, run: dict, out: dict) -> list[dict]:
    return [*_token_steps(shape, tot, out), *_time_steps(v, shape, p, run, out), *_cost_steps(v, shape, p, run, out)]


def _token_steps(shape: Shape, tot, out: dict) -> list[dict]:
    return [
        step(
            "Input read over the task",
            "Σ_t (context_t + new_t)",
            "{}, {} + {} new each",
            [(shape.turns, "turns"), (shape.shared_tokens, "tokens"), (shape.new_tokens, "tokens")],
            tot.prompt,
            "tokens",
        ),
        step(
            "Prefilled (not cached)",
            "Σ_t (prompt_t − cached_t)",
            "{} − {}",
            [(tot.prompt, "tokens"), (tot.cached, "tokens")],
            tot.prefilled,
            "tokens",
        ),
        step(
            "Decoded",
            "turns × (output + thinking)",
            "{} × ({} + {})",
            [(shape.turns, "turns"), (shape.output_tokens, "tokens"), (shape.thinking_tokens, "tokens")],
            tot.decoded,
            "tokens",
        ),
        step(
            "Input read per token decoded",
            "read ÷ decoded",
            "{} ÷ {}",
            [(tot.prompt, "tokens"), (tot.decoded, "tokens")],
            out["read_per_decoded"],
        ),
    ]


def _time_steps(v: dict, shape: Shape, p: Pricer, run: dict, out: dict) -> list[dict]:
    n, b, last = p.dep.num_gpus, p.batch, run["turns"][-1]
    return [
        step(
            "Last turn's prefill",
            "prefill(cached, new)",
            "{} after {} cached",
            [(last.prefilled, "tokens"), (last.cached, "tokens")],
            run["prefills"][-1],
            "s",
        ),
        step(
            "Last turn's decode step",
            "decode_time(B, context)",
            "B = {}, context {}",
            [b, (round(last.prompt + last.decoded / 2), "tokens")],
            run["steps"][-1],
            "s",
        ),
        step(
            "GPU-seconds in prefill",
            "N × Σ prefill_t",
            "{} × Σ over {}",
            [(n, "GPUs"), (shape.turns, "turns")],
            run["prefill_gpu_s"],
            "s",
        ),
    ]


def _cost_steps(v: dict, shape: Shape, p: Pricer, run: dict, out: dict) -> list[dict]:
    gpu_s, usd, tot_wait = out["gpu_s_per_task"], out["usd_per_task"], out["waiting_s"]
    n, b = p.dep.num_gpus, p.batch
    return [
        step(
            "GPU-seconds in decode",
            "N × Σ decode_t × step_t ÷ B",
            "{} × Σ ÷ {}",
            [(n, "GPUs"), b],
            run["decode_gpu_s"],
            "s",
        ),
        step(
            "Cost per task",
            "GPU-s ÷ 3600 × $/GPU-h",
            "{} ÷ 3600 × {}",
            [(gpu_s, "s"), (v["usd_per_gpu_hour"], "USD")],
            usd,
            "USD",
        ),
        step(
            "Task latency",
            "Σ (prefill_t + decode_t × step_t) + (turns − 1) × wait",
            "{} + {}",
            [(run["generation_s"], "s"), (tot_wait, "s")],
            out["task_latency_s"],
            "s",
        ),
    ]


def _series(shape: Shape, p: Pricer, run: dict, bare: dict) -> dict:
    n, b, ts = p.dep.num_gpus, p.batch, run["turns"]
    xs = list(range(1, shape.turns + 1))
    return {
        "per_turn": series(
            "Tokens per turn: read, prefilled and decoded",
            "Turn",
            "",
            xs,
            [
                ("read (prompt)", "tokens", [t.prompt for t in ts]),
                ("prefilled", "tokens", [t.prefilled for t in ts]),
                ("decoded", "tokens", [t.decoded for t in ts]),
            ],
        ),
        "gpu_time": series(
            "GPU-seconds per turn: prefill and decode",
            "Turn",
            "",
            xs,
            [
                ("prefill", "s", [n * s for s in run["prefills"]]),
                ("prefill, no reuse", "s", [n * s for s in bare["prefills"]]),
                ("decode (share)", "s", [n * t.decoded * s / b for t, s in zip(ts, run["steps"])]),
            ],
        ),
    }

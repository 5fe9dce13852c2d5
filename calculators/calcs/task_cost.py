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

from ..engine.steps import StepTimes
from ..schema import boolean, choice, integer, number, output, series, step
from .deployment import deployment_fields
from .memory import engine_fields, kv_pool_tokens
from .steptime import deployment
from .workload_shape import AUDIO_RULES, IMAGE_RULES, Shape, audio_tokens, image_tokens, totals, turns
from .cost import gpu_hour_field
from .sharding import steps_for

WORKED = {"turns": 20, "shared": 30_000, "input": 1_500, "output": 300, "thinking": 1_000, "wait": 5.0}


# The inputs that describe a workload shape (shared with other calculators that take one).
SHAPE_FIELDS = [
    integer(
        "turns",
        "Turns per task",
        WORKED["turns"],
        1,
        500,
        "turns",
        "Model calls in one task: an agent's steps, a chat's exchanges.",
    ),
    integer(
        "shared_tokens",
        "Shared context (read by every turn)",
        WORKED["shared"],
        0,
        1_000_000,
        "tokens",
        "System prompt, tool schemas, the files an agent loaded: the first turn's context.",
    ),
    integer("input_tokens", "New input per turn (message or tool result)", WORKED["input"], 0, 1_000_000, "tokens"),
    integer("output_tokens", "Visible output per turn", WORKED["output"], 1, 1_000_000, "tokens"),
    integer(
        "thinking_tokens",
        "Thinking tokens per turn",
        WORKED["thinking"],
        0,
        1_000_000,
        "tokens",
        "Reasoning generated before the visible output: decoded and billed like output.",
    ),
    boolean(
        "keep_thinking",
        "Later turns re-read the thinking",
        True,
        "On in an agent loop: Qwen3's template keeps the reasoning of assistant turns after the last user "
        "message. Off for chat turns: DeepSeek-R1's template drops every earlier turn's reasoning, and "
        "the cached prefix then ends where the previous prompt did.",
    ),
    integer("images_per_turn", "Images per turn", 0, 0, 100, "images"),
    choice(
        "image_rule",
        "Image tokens by",
        "qwen2.5-vl",
        list(IMAGE_RULES.items()),
        "Each model's published rule (see the part's table).",
    ),
    integer("image_width", "Image width", 1280, 1, 16_384, "px"),
    integer("image_height", "Image height", 720, 1, 16_384, "px"),
    number("audio_seconds_per_turn", "Audio per turn", 0.0, 0.0, 3600.0, "s"),
    choice("audio_rule", "Audio tokens by", "qwen2-audio", [(k, e[0]) for k, e in AUDIO_RULES.items()]),
    number("wait_s", "Wait between turns (tool call, user)", WORKED["wait"], 0.0, 86_400.0, "s"),
    number(
        "reuse",
        "Prefix reuse (share of re-read context cached)",
        1.0,
        0.0,
        1.0,
        "",
        "1: the prefix cache serves every token an earlier turn already computed; 0: no cache.",
        0.05,
    ),
]


def shape_from(v: dict) -> Shape:
    return Shape(
        turns=v["turns"],
        shared_tokens=v["shared_tokens"],
        input_tokens=v["input_tokens"],
        output_tokens=v["output_tokens"],
        thinking_tokens=v["thinking_tokens"],
        keep_thinking=v["keep_thinking"],
        images_per_turn=v["images_per_turn"],
        tokens_per_image=image_tokens(v["image_rule"], v["image_width"], v["image_height"]),
        audio_tokens_per_turn=audio_tokens(v["audio_rule"], v["audio_seconds_per_turn"]),
        wait_s=v["wait_s"],
        reuse=v["reuse"],
    )


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
    """Prefill and decode seconds of a turn on one deployment."""

    def __init__(self, v: dict):
        self.dep = deployment(v)
        self.model = steps_for(v, self.dep)
        self.times = StepTimes(self.model)
        self.batch = v["decode_batch"]

    def prefill(self, cached: int, prefilled: int) -> float:
        return self.times.mixed(0, 0.0, [(cached, prefilled)]) if prefilled else 0.0

    def step(self, prompt: int, decoded: int) -> float:
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
        "prefill_gpu_s": n * sum(prefills),
        "decode_gpu_s": n * sum(decode_s) / p.batch,
        "generation_s": sum(prefills) + sum(decode_s),
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
    out["sessions_fit_at_end"] = int(pool // tot.final_context) if tot.final_context else 0
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

"""Chunked prefill: one long prompt arrives into a decoding batch; TTFT against the batch's inter-token gaps.

The scene (Sarathi-Serve, OSDI 2024, arXiv 2403.02310, abstract: stall-free schedules add requests
without pausing ongoing decodes): B sequences are decoding at a context of C tokens when a prompt of
P tokens arrives. vLLM V1 (v0.33.0; SGLang 0.5.23 only with --enable-mixed-chunk) schedules the
running decodes first and fills the rest of the step's token budget (max_num_batched_tokens) with
prompt tokens, so the prompt is prefilled in chunks of budget − B tokens, one chunk a step, each step
carrying every decode; the engine simulator does exactly this. Without chunking the whole prompt goes
in one step (which must hold P + B tokens); vLLM V0's default scheduler ran it in a step of its own,
the decodes waiting (engine mixed_batches False). SGLang 0.5.23's default chunks it but runs each chunk in a
step of its own, the whole budget the prompt's, and the decodes wait through all of its chunks (chunked_alone:
engine mixed_batches False with chunked prefill, EngineConfig).

Measured on the simulator, per budget: the long prompt's TTFT (arrival at a step boundary to its first
token) and the gaps between tokens of the decoding sequences over their next `window` tokens after the
arrival (p50, p99, max). The sweep is budgets of 2^k tokens from the first above B up to the one that
holds the whole prompt, plus the reader's; the best budget is the one with the lowest TTFT whose ITL
(the chosen statistic) meets the target.

Setup: the B sequences arrive at 0 and are prefilled under the same budget; the long prompt arrives
the moment the last of them has its first token (a first run of the batch alone finds that time), so
the batch is wholly decoding, with its context within a few tokens of C, when it lands.
"""

from __future__ import annotations

from functools import partial

from ..engine.config import EngineConfig, Request
from ..engine.metrics import percentile
from ..engine.run import simulate
from ..engine.steps import StepTimes
from ..errors import InputError
from ..schema import choice, integer, mark, number, output, series, step
from .deployment import deployment_fields, efficiency_steps
from .memory import engine_fields, kv_pool_tokens, sequence_pool_tokens
from .overhead import EXTRA_OVERHEAD_HELP
from .steptime import deployment
from .sharding import steps_for

METRICS = [("max", "Longest gap"), ("p99", "p99 of the gaps")]
MODES = ("chunked", "unchunked", "prefill_first", "chunked_alone")
CHUNKED = ("chunked", "chunked_alone")  # the prompt cut to the budget; chunked_alone: in steps without the decodes
LONG_OUTPUT = 2
ARRIVAL_LAG_S = 1e-6  # the prompt lands just after a step began: it waits for it (V1: and the next, planned then)
SWEEP_FROM = 512


def _fields() -> list[dict]:
    return (
        deployment_fields(0.8, 0.6)
        + engine_fields()
        + [
            integer("decode_batch", "Sequences decoding when the prompt arrives", 32, 1, 1024, "sequences"),
            integer("decode_context_tokens", "Their context (prompt) length", 1024, 1, 131_072, "tokens"),
            integer("prompt_tokens", "Long prompt arriving", 8192, 1, 131_072, "tokens"),
            integer(
                "max_num_batched_tokens",
                "Your token budget per step (max_num_batched_tokens)",
                2048,
                2,
                1_048_576,
                "tokens",
                "vLLM V1 v0.33.0's API server default on an H100: 8,192; SGLang 0.5.23's "
                "chunked_prefill_size on an 80 GB GPU: 8,192.",
            ),
            integer("window_tokens", "Gaps counted: each decoding sequence's next", 64, 1, 4096, "tokens"),
            choice("itl_metric", "ITL target applies to", "max", METRICS),
            number("itl_target_ms", "ITL target", 25.0, 0.1, 10_000.0, "ms"),
            number("step_overhead_ms", "Extra overhead per step", 0.0, 0.0, 100.0, "ms", EXTRA_OVERHEAD_HELP),
        ]
    )


def _mode_outputs() -> list[dict]:
    names = {
        "chunked": "At your budget, chunked",
        "unchunked": "Unchunked (one mixed step)",
        "prefill_first": "Prefill-only step (vLLM V0)",
        "chunked_alone": "At your budget, chunked, prefill-only steps (SGLang's default)",
    }
    out = []
    for m in MODES:
        out += [
            output(f"{m}_ttft_s", f"{names[m]}: long prompt's TTFT", "s", "seconds"),
            output(f"{m}_itl_p50_s", f"{names[m]}: batch ITL p50", "s", "seconds"),
            output(f"{m}_itl_p99_s", f"{names[m]}: batch ITL p99", "s", "seconds"),
            output(f"{m}_itl_max_s", f"{names[m]}: batch's longest gap", "s", "seconds"),
        ]
    return out


SCHEMA = {
    "name": "chunking",
    "title": "Chunked prefill: a long prompt into a decoding batch (simulated)",
    "description": (
        "A batch of sequences is decoding when one long prompt arrives. The engine simulator schedules the "
        "decodes first and fills the rest of each step's token budget with prompt tokens (chunked prefill, "
        "as vLLM V1 does, and SGLang with --enable-mixed-chunk), or runs the whole prompt in one step "
        "(unchunked), or in a step of its own while the decodes wait (vLLM V0's default), or in chunks of "
        "the budget in steps of their own while the decodes wait for all of them (SGLang's default). It reports the "
        "prompt's time to first token and the decoding sequences' gaps between tokens over a window after "
        "it arrives, for token budgets from small to whole-prompt, and the budget with the best TTFT that "
        "meets your ITL target. Step times from the roofline model scaled by the efficiency factors, plus the "
        "per-step overhead (by default CUDA graphs plus a fitted GPU floor per kernel) and any extra overhead you set."
    ),
    "inputs": _fields(),
    "outputs": _mode_outputs()
    + [
        output(
            "best_budget_tokens", "Budget meeting the ITL target with the best TTFT (0 = none)", "tokens", "integer"
        ),
        output("best_ttft_s", "Its TTFT", "s", "seconds"),
        output("best_itl_s", "Its ITL (the chosen statistic)", "s", "seconds"),
        output("decode_step_s", "Decode step of the batch alone", "s", "seconds"),
        output("prefill_alone_s", "The prompt's prefill alone (one step, no batch)", "s", "seconds"),
        output("chunk_tokens", "Prompt tokens per chunk at your budget", "tokens", "integer"),
        output("chunks", "Chunks at your budget", "chunks", "integer"),
    ],
}


class Scene:
    """The batch, the long prompt and the engine's fixed settings; run(budget, mode) measures one case."""

    def __init__(self, v: dict):
        self.v = v
        dep = self.dep = deployment(v)
        self.model = steps_for(v, dep)
        self.times = StepTimes(self.model, v["step_overhead_ms"] / 1e3)
        capacity = kv_pool_tokens(v)
        self.blocks = max(1, int(capacity // 16))
        self.capacity = capacity
        self.b, self.c, self.p, self.w = (
            v["decode_batch"],
            v["decode_context_tokens"],
            v["prompt_tokens"],
            v["window_tokens"],
        )

    def _batch(self, tokens: int) -> list:
        """The decoding sequences, with answers long enough to outlive their own warm-up (at most
        ⌈B × C ÷ (budget − B)⌉ + B steps: each step gives prompts at least budget − B tokens, or one whole
        prompt unchunked), the long prompt's chunks and the window."""
        b, chunk = self.b, max(1, tokens - self.b)
        out = -(-b * self.c // chunk) + b + 2 + -(-self.p // chunk) + self.w + LONG_OUTPUT + 4
        held = partial(sequence_pool_tokens, self.v)  # a windowed layer holds only its window, plus any state
        need = round(b * held(self.c + out) + held(self.p + LONG_OUTPUT))
        if need > self.capacity:
            raise InputError(
                "decode_batch",
                f"the batch and the prompt need {need:,} tokens of KV at a budget of {tokens:,}; the pool holds "
                f"{int(self.capacity):,}",
            )
        return [Request(0.0, self.c, out) for _ in range(b)]

    def _config(self, tokens: int, mode: str, trace: int) -> EngineConfig:
        return EngineConfig(
            kv_blocks=self.blocks,
            max_num_seqs=max(256, self.b + 1),
            max_num_batched_tokens=tokens,
            chunked_prefill=mode in CHUNKED,
            mixed_batches=mode in ("chunked", "unchunked"),
            schedule_ahead=True if mode == "chunked_alone" else None,  # SGLang's overlap scheduler, on by default
            trace_steps=trace,
        )

    def run(self, tokens: int, mode: str) -> dict:
        """TTFT and the window's gaps for a budget of `tokens` (unchunked modes: at least P + B)."""
        if mode not in CHUNKED:  # unchunked, the engine admits only a request whose prompt + output fit the budget
            tokens = max(tokens, self.p + self.b, self.p + LONG_OUTPUT)
            tokens = max(tokens, self.c + self._batch(tokens)[0].output_tokens)
        batch = self._batch(tokens)
        warm = simulate(self.times, batch, self._config(tokens, mode, 0))
        ready = max(warm.ttft_s)  # every sequence of the batch has its first token: a step starts
        before = sum(1 for o in warm.occupancy if o[0] < ready)  # steps so far (none stretched: prefilling)
        chunks = {"chunked": -(-self.p // max(1, tokens - self.b)), "chunked_alone": -(-self.p // tokens)}.get(mode, 1)
        reqs = [*batch, Request(ready + ARRIVAL_LAG_S, self.p, LONG_OUTPUT)]
        r = simulate(
            self.times, reqs, self._config(tokens, mode, before + chunks + self.w + 4), measured=(0, self.b + 1)
        )
        gaps = window_gaps(r.trace, ready, self.b, self.w)
        return {
            "ttft": r.ttft_s[-1],
            "p50": percentile(gaps, 50),
            "p99": percentile(gaps, 99),
            "max": gaps[-1] if gaps else 0.0,
            "tokens": tokens,
            "gaps": len(gaps),
        }


def window_gaps(trace, ready: float, batch: int, window: int) -> list[float]:
    """Sorted gaps of sequences 0 … batch − 1 over their first `window` gaps that start at or after
    `ready`, the end of the step that gave the last of them its first token: from then on every step
    that plans a token for one of them gives it a token at the step's end."""
    last, counted, gaps, edge = [-1.0] * batch, [0] * batch, [], ready - 1e-12
    for start, took, plan, _waiting in trace:
        end = start + took
        if end < edge:
            continue
        for i, _tokens in plan:
            if i < batch:
                if last[i] >= edge and counted[i] < window:
                    gaps.append(end - last[i])
                    counted[i] += 1
                last[i] = end
    return sorted(gaps)


def budgets(v: dict) -> list[int]:
    """2^k tokens from the first power above the batch to the first that holds batch + prompt, and yours."""
    lo, top = max(SWEEP_FROM, v["decode_batch"] + 1), v["decode_batch"] + v["prompt_tokens"]
    grid, k = set(), 1
    while True:
        k *= 2
        if k >= lo:
            grid.add(k)
        if k >= top:
            break
    if v["max_num_batched_tokens"] > v["decode_batch"]:
        grid.add(v["max_num_batched_tokens"])
    return sorted(grid)


def _mode_values(modes: dict) -> dict:
    out = {}
    for m, res in modes.items():
        out.update({f"{m}_ttft_s": res["ttft"], f"{m}_itl_p50_s": res["p50"], f"{m}_itl_p99_s": res["p99"]})
        out[f"{m}_itl_max_s"] = res["max"]
    return out


def _series(v: dict, sweep: dict) -> dict:
    xs = sorted(sweep)
    return mark(
        series(
            f"TTFT of a {v['prompt_tokens']:,}-token prompt and the batch's gaps, against the token budget",
            "Token budget per step",
            "tokens",
            xs,
            [
                ("prompt's TTFT", "ms", [sweep[t]["ttft"] * 1e3 for t in xs]),
                ("batch ITL max", "ms", [sweep[t]["max"] * 1e3 for t in xs]),
                ("batch ITL p99", "ms", [sweep[t]["p99"] * 1e3 for t in xs]),
                ("batch ITL p50", "ms", [sweep[t]["p50"] * 1e3 for t in xs]),
                ("ITL target", "ms", [v["itl_target_ms"] for _ in xs]),
            ],
            log_axes=True,
        ),
        "max_num_batched_tokens",
        v["max_num_batched_tokens"],
    )


def _derivation(v: dict, scene: Scene, out: dict, ttft: float) -> list[dict]:
    b, chunk, best, metric = scene.b, out["chunk_tokens"], out["best_budget_tokens"], v["itl_metric"]
    budget_tokens, prompt = (v["max_num_batched_tokens"], "tokens"), (v["prompt_tokens"], "tokens")
    return efficiency_steps(scene.dep) + [
        step(
            "Decode step of the batch",
            "step(B, C)",
            "step({}, {})",
            [b, (scene.c + 1, "tokens")],
            out["decode_step_s"],
            "s",
        ),
        step(
            "Prompt tokens per chunk", "budget − B (decodes go first)", "{} − {}", [budget_tokens, b], chunk, "tokens"
        ),
        step("Chunks", "⌈P ÷ chunk⌉", "⌈{} ÷ {}⌉", [prompt, (chunk, "tokens")], out["chunks"], "chunks"),
        step(
            "TTFT at your budget",
            "simulated: arrival to the end of the last chunk's step",
            "{} chunks",
            [out["chunks"]],
            ttft,
            "s",
        ),
        step(
            "Best budget",
            f"lowest TTFT with ITL {metric} ≤ target",
            "target {}",
            [(v["itl_target_ms"] / 1e3, "s")],
            best,
            "tokens",
        ),
    ]


def _sweep(scene: Scene, v: dict) -> tuple[dict, list]:
    """The chunked runs over the budget grid, and the budgets left out: at a small budget the batch's
    warm-up can outgrow the KV pool (its answers must outlive it); only the reader's own budget must fit."""
    sweep, skipped = {}, []
    for t in budgets(v):
        try:
            sweep[t] = scene.run(t, "chunked")
        except InputError:
            if t == v["max_num_batched_tokens"]:
                raise
            skipped.append(t)
    return sweep, skipped


def compute(v: dict) -> dict:
    if v["max_num_batched_tokens"] <= v["decode_batch"]:
        raise InputError(
            "max_num_batched_tokens",
            f"must be more than the decoding batch ({v['decode_batch']}): "
            "the decodes take one token each before any prompt token",
        )
    scene, yours_t = Scene(v), v["max_num_batched_tokens"]
    sweep, skipped = _sweep(scene, v)
    modes = {
        "chunked": sweep[yours_t],
        "unchunked": scene.run(yours_t, "unchunked"),
        "prefill_first": scene.run(yours_t, "prefill_first"),
        "chunked_alone": scene.run(yours_t, "chunked_alone"),
    }
    out = _mode_values(modes)
    target, metric = v["itl_target_ms"] / 1e3, v["itl_metric"]
    meeting = [(res["ttft"], t) for t, res in sweep.items() if res[metric] <= target]
    best = min(meeting)[1] if meeting else 0
    chunk = yours_t - v["decode_batch"]
    out.update(
        {
            "best_budget_tokens": best,
            "best_ttft_s": sweep[best]["ttft"] if best else 0.0,
            "best_itl_s": sweep[best][metric] if best else 0.0,
            "decode_step_s": scene.times.decode(scene.b, scene.b * (scene.c + 1)),
            "prefill_alone_s": scene.model.prefill([scene.p]).time_s + scene.times.overhead_s,
            "chunk_tokens": chunk,
            "chunks": -(-v["prompt_tokens"] // chunk),
        }
    )
    out["series"] = {"ttft_itl_vs_budget": _series(v, sweep)}
    out["notes"] = [] if best else [f"no budget in the sweep meets the ITL target ({metric} ≤ {v['itl_target_ms']} ms)"]
    if skipped:
        out["notes"].append(
            "budgets left out of the sweep (the batch's warm-up at them needs more KV than the pool holds): "
            + ", ".join(f"{t:,}" for t in skipped)
        )
    out["derivation"] = _derivation(v, scene, out, sweep[yours_t]["ttft"])
    return out

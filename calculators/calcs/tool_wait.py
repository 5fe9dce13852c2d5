"""Keep, offload or recompute: what to do with an agent session's KV while it waits for a tool.

A session of L tokens of context stops for w seconds (a tool call, a user). Its KV can:
  keep       stay in HBM: it holds L ÷ P of the replica's KV pool (P tokens; sliding-window layers count only their
             window, and a hybrid model's state counts as the tokens of pool it takes) that other sequences cannot use
             for w seconds; priced at that share of the replica's hourly price (an opportunity cost, which
             is real when the pool is the binding limit, as it is for long contexts):
             k = (L ÷ P) × N × $/GPU-h ÷ 3600 per second;        keep(w) = k × w
  offload    copy out to host memory and back: x = KV per GPU ÷ (B_link × η) each way (DMA copy engines,
             not the SMs); HBM is held while each copy runs, host DRAM for the wait:
             offload(w) = k × 2x + h × bytes × w;   resume delay x (the copy in, if not prefetched)
  recompute  drop it, prefill L tokens again on return: R = N × prefill(L) × $/GPU-h ÷ 3600 (StepModel
             prefill_time: the replica is busy for that step); resume delay prefill(L)
Break-even waits: keep = recompute at w = R ÷ k; keep = offload at w = 2kx ÷ (k − h × bytes); offload =
recompute at w = (R − 2kx) ÷ (h × bytes). Per task: × the task's waits. Host DRAM's price per GB-hour is an
input (an assumption); no queueing behind other copies or prefills, no contention for the link.
"""

from __future__ import annotations

import math

from ..catalog import host_links
from ..errors import InputError
from ..schema import choice, integer, number, output, series, step, mark
from .deployment import deployment_fields
from .kv_cache import kv_bytes_per_sequence, kv_fraction_per_gpu
from .memory import engine_fields, kv_pool_tokens, sequence_pool_tokens
from .steptime import deployment
from .cost import gpu_hour_field
from .sharding import steps_for

HOST_LINKS = host_links()
WAITS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 3600.0)
NEVER = -1.0
STRATEGIES = {1: "keep", 2: "offload", 3: "recompute"}

SCHEMA = {
    "name": "tool_wait",
    "title": "Keep, offload or recompute an agent session's KV during a tool wait",
    "description": (
        "A session of L tokens waits w seconds between turns. Keep: its KV stays in HBM, costing the share "
        "of the KV pool it holds × the replica's price for the wait. Offload: copied to host memory over the "
        "host link and back (HBM held only while the copies run; host DRAM at the price you enter). "
        "Recompute: dropped, and the context prefilled again when the tool returns. Dollars per wait and per "
        "task, the delay each adds to the next turn's first token, and the waits at which they break even. "
        "An estimate: the keep price assumes the pool is the binding limit (someone else would use the space)."
    ),
    "inputs": deployment_fields(0.8, 0.6, {"model": {"default": "qwen3-32b"}, "hardware": {"default": "h200"}})
    + engine_fields()
    + [
        integer("context_tokens", "Session context at the wait (L)", 48_000, 1, 10_000_000, "tokens"),
        number("wait_s", "Tool wait (w)", 5.0, 0.0, 86_400.0, "s"),
        integer("waits_per_task", "Waits per task", 19, 0, 10_000, "waits"),
        gpu_hour_field("DeepSeek's Day-6 costing uses $2/GPU-h for H800 (deepseek-ai/open-infra-index)."),
        choice(
            "host_link",
            "Host link (GPU ↔ CPU memory)",
            "pcie5-x16",
            [(k, e["name"]) for k, e in HOST_LINKS.items()] + [("custom", "Custom (the field below)")],
        ),
        number(
            "host_link_gb_per_s",
            "Custom host link bandwidth, per direction",
            64.0,
            0.1,
            10_000.0,
            "GB/s",
            "Used only when the host link is custom (e.g. a CPU–GPU coherent link).",
        ),
        number(
            "link_efficiency",
            "Host link efficiency",
            0.8,
            0.01,
            1.0,
            "",
            "Fraction of the link's per-direction peak a copy achieves; small scattered blocks achieve less.",
            0.01,
        ),
        number(
            "host_usd_per_gb_hour",
            "Host DRAM price",
            0.0002,
            0.0,
            1.0,
            "USD per GB-hour",
            "An assumption: server DRAM at about $5 per GB amortised over three years (26,280 h) is about "
            "$0.0002 per GB-hour; 0 treats idle host memory as free.",
        ),
    ],
    "outputs": [
        output("cheapest", "Cheapest at this wait", "", "integer", words=STRATEGIES),
        output("kv_bytes_session", "KV of the session (all GPUs)", "B", "bytes"),
        output("kv_bytes_per_gpu", "KV each GPU holds or copies", "B", "bytes"),
        output("kv_pool_tokens", "KV pool of the replica (P)", "tokens", "integer"),
        output("pool_share", "Share of the pool the session holds", "", "percent"),
        output("keep_usd_per_s", "Keep: price per second held", "USD", "usd"),
        output("copy_s", "Offload: one copy (out or in)", "s", "seconds"),
        output("recompute_s", "Recompute: prefill of the context", "s", "seconds"),
        output("keep_usd", "Keep: cost per wait", "USD", "usd"),
        output("offload_usd", "Offload: cost per wait", "USD", "usd"),
        output("recompute_usd", "Recompute: cost per wait", "USD", "usd"),
        output("keep_usd_per_task", "Keep: cost per task", "USD", "usd"),
        output("offload_usd_per_task", "Offload: cost per task", "USD", "usd"),
        output("recompute_usd_per_task", "Recompute: cost per task", "USD", "usd"),
        output("offload_resume_delay_s", "Offload: delay to the next turn's first token", "s", "seconds"),
        output("recompute_resume_delay_s", "Recompute: delay to the next turn's first token", "s", "seconds"),
        output(
            "break_even_keep_recompute_s",
            "Wait at which keep and recompute cost the same",
            "s",
            "seconds",
            words={-1: "never"},
        ),
        output(
            "break_even_keep_offload_s",
            "Wait at which keep and offload cost the same",
            "s",
            "seconds",
            words={-1: "never"},
        ),
        output(
            "break_even_offload_recompute_s",
            "Wait beyond which recompute beats offload",
            "s",
            "seconds",
            words={0: "always", -1: "never"},
        ),
    ],
}


class Wait:
    """The three prices for one deployment and session."""

    def __init__(self, v: dict):
        self.dep = dep = deployment(v)
        self.n, self.tokens = dep.num_gpus, v["context_tokens"]
        self.kv = kv_bytes_per_sequence(dep.model, self.tokens, dep.kv_elem_bytes)
        self.kv_gpu = self.kv * kv_fraction_per_gpu(dep.model, dep.num_gpus)
        self.pool = kv_pool_tokens(v)
        if self.pool < 1:
            raise InputError(
                "num_gpus", "the weights leave no KV pool on these GPUs: add GPUs or use a smaller weight format"
            )
        self.price_s = v["usd_per_gpu_hour"] / 3600
        self.held = sequence_pool_tokens(v, self.tokens)  # pool tokens: windowed layers' window, plus any state
        self.share = self.held / self.pool
        self.k = self.share * self.n * self.price_s  # $ per second of HBM held
        if v["host_link"] == "custom":
            self.link = v["host_link_gb_per_s"] * 1e9 * v["link_efficiency"]
        else:
            self.link = HOST_LINKS[v["host_link"]]["bandwidth_bytes_per_s"] * v["link_efficiency"]
        self.copy = self.kv_gpu / self.link
        self.h = v["host_usd_per_gb_hour"] / 3600 * self.kv / 1e9  # $ per second of host DRAM held
        self.prefill = steps_for(v, dep).prefill_time([self.tokens])
        self.r = self.n * self.prefill * self.price_s

    def keep(self, w: float) -> float:
        return self.k * w

    def offload(self, w: float) -> float:
        return self.k * 2 * self.copy + self.h * w

    def recompute(self, w: float) -> float:
        return self.r


def _wait_until(cost: float, rate: float) -> float:
    """The wait at which a rate of spending (USD/s) reaches a cost (USD), or NEVER where it never does in a float."""
    wait = cost / rate if rate > 0 else math.inf
    return wait if math.isfinite(wait) else NEVER


def compute(v: dict) -> dict:
    c, w, waits = Wait(v), v["wait_s"], v["waits_per_task"]
    keep, off, rec = c.keep(w), c.offload(w), c.recompute(w)
    costs = {1: keep, 2: off, 3: rec}
    cheapest = min(costs, key=lambda s: (costs[s], s))
    # -1: they never tie (no price on HBM or host memory, or too small a one); 0: recompute is cheaper at every wait
    even_kr = _wait_until(c.r, c.k)
    even_ko = _wait_until(2 * c.k * c.copy, c.k - c.h)
    gap = c.r - 2 * c.k * c.copy
    even_or = _wait_until(gap, c.h) if gap > 0 else 0.0
    out = {
        "kv_bytes_session": c.kv,
        "kv_bytes_per_gpu": c.kv_gpu,
        "kv_pool_tokens": int(c.pool),
        "pool_share": c.share,
        "keep_usd_per_s": c.k,
        "copy_s": c.copy,
        "recompute_s": c.prefill,
        "keep_usd": keep,
        "offload_usd": off,
        "recompute_usd": rec,
        "keep_usd_per_task": keep * waits,
        "offload_usd_per_task": off * waits,
        "recompute_usd_per_task": rec * waits,
        "cheapest": cheapest,
        "offload_resume_delay_s": c.copy,
        "recompute_resume_delay_s": c.prefill,
        "break_even_keep_recompute_s": even_kr,
        "break_even_keep_offload_s": even_ko,
        "break_even_offload_recompute_s": even_or,
    }
    notes = []
    if c.share > 1:
        notes.append(f"the session's {c.tokens:,} tokens exceed the KV pool of {int(c.pool):,}: it cannot be kept")
    if w < 2 * c.copy:
        notes.append("the wait is shorter than the two copies: an offload would not finish before the tool returns")
    out["notes"] = notes
    out["derivation"] = _derivation(v, c, out)
    out["series"] = _series(c, w, cheapest)
    return out


def _derivation(v: dict, c: Wait, out: dict) -> list[dict]:
    keep, off, rec = out["keep_usd"], out["offload_usd"], out["recompute_usd"]
    even_kr, even_ko = out["break_even_keep_recompute_s"], out["break_even_keep_offload_s"]
    per_hour, host_hour = c.k * 3600, c.h * 3600  # $ per hour of HBM held, of host DRAM held
    return [
        step(
            "Share of the pool held",
            "L ÷ P (L in pool tokens: windowed layers' share capped at the window, plus a hybrid's state)",
            "{} ÷ {}",
            [(round(c.held), "tokens"), (int(c.pool), "tokens")],
            c.share,
            "share",
        ),
        *_keep_offload_steps(v, c, per_hour, host_hour, keep, off),
        *_recompute_steps(v, c, per_hour, host_hour, rec, even_kr, even_ko),
    ]


def _keep_offload_steps(v: dict, c: Wait, per_hour: float, host_hour: float, keep: float, off: float) -> list[dict]:
    w = v["wait_s"]
    return [
        step(
            "Keep: price per hour held",
            "K = (L ÷ P) × N × $/GPU-h",
            "{} × {} × {}",
            [c.share, (c.n, "GPUs"), (v["usd_per_gpu_hour"], "USD")],
            per_hour,
            "USD",
        ),
        step("Keep: cost of the wait", "K × w ÷ 3600", "{} × {} ÷ 3600", [(per_hour, "USD"), (w, "s")], keep, "USD"),
        step(
            "Offload: one copy",
            "x = KV per GPU ÷ (B_link × η)",
            "{} ÷ {}",
            [(c.kv_gpu, "B"), (c.link, "B/s")],
            c.copy,
            "s",
        ),
        step(
            "Host DRAM per hour held",
            "H = bytes ÷ 10⁹ × $/GB-h",
            "{} ÷ 10⁹ × {}",
            [(c.kv, "B"), (v["host_usd_per_gb_hour"], "USD")],
            host_hour,
            "USD",
        ),
        step(
            "Offload: cost of the wait",
            "(K × 2x + H × w) ÷ 3600",
            "({} × 2 × {} + {} × {}) ÷ 3600",
            [(per_hour, "USD"), (c.copy, "s"), (host_hour, "USD"), (w, "s")],
            off,
            "USD",
        ),
    ]


def _recompute_steps(
    v: dict, c: Wait, per_hour: float, host_hour: float, rec: float, even_kr: float, even_ko: float
) -> list[dict]:
    return [
        step("Recompute: prefill of L", "prefill_time(L)", "{}", [(c.tokens, "tokens")], c.prefill, "s"),
        step(
            "Recompute: cost",
            "N × prefill × $/GPU-h ÷ 3600",
            "{} × {} × {} ÷ 3600",
            [(c.n, "GPUs"), (c.prefill, "s"), (v["usd_per_gpu_hour"], "USD")],
            rec,
            "USD",
        ),
        step(
            "Break-even, keep vs recompute",
            "R ÷ K × 3600",
            "{} ÷ {} × 3600",
            [(rec, "USD"), (per_hour, "USD")],
            even_kr,
            "s",
        ),
        step(
            "Break-even, keep vs offload",
            "2x × K ÷ (K − H)",
            "2 × {} × {} ÷ ({} − {})",
            [(c.copy, "s"), (per_hour, "USD"), (per_hour, "USD"), (host_hour, "USD")],
            even_ko,
            "s",
        ),
    ]


def _series(c: Wait, w: float, cheapest: int) -> dict:
    xs = sorted(set(WAITS) | ({w} if w > 0 else set()))
    plot = series(
        "Cost of one wait: keep, offload, recompute",
        "Wait w",
        "s",
        xs,
        [
            ("keep", "USD", [c.keep(x) for x in xs]),
            ("offload", "USD", [c.offload(x) for x in xs]),
            ("recompute", "USD", [c.recompute(x) for x in xs]),
        ],
        log_axes=True,
    )
    return {"by_wait": mark(plot, "wait_s", w, on=STRATEGIES[cheapest]) if w > 0 else plot}

"""Preemption: swap a sequence's KV to host memory and back, or drop it and recompute the prefill.

Kwon et al. (SOSP 2023, arXiv 2309.06180) §4.5 evict all of a sequence's blocks at once and
recover them by swapping (copy to CPU memory, copy back) or by recomputation (one prefill over
prompt + generated tokens); §7.3 measures both. Here:
  swap time      = KV bytes per GPU ÷ (link bandwidth × η_link), once out and once back in
  recompute time = the prefill of the whole context, from steptime.StepModel.prefill:
                   'compute'    FLOPs ÷ (N_gpu × peak × η_prefill): the marginal cost when the
                                recomputation is batched into steps that read the weights anyway;
                   'standalone' max(bytes ÷ BW, FLOPs ÷ peak): a prefill run on its own.
The break-even context is where the two are equal. Recompute FLOPs grow faster than linearly
(causal attention), swap bytes linearly (or stop growing for windowed layers).

Who waits (the swap schedule). 'serialised' is what vLLM V0 shipped: `Worker.execute_worker`
issues `cache_engine.swap_in` / `swap_out` / `copy` before `model_runner.execute_model`, on the
same CUDA stream (vLLM v0.6.6, vllm/worker/worker.py and worker_base.py), so every running
request waits for the copies, the request whose allocation triggered the preemption included.
'overlapped' runs the copies on their own streams (as vLLM v0.19.1's CPU offloading does,
vllm/v1/kv_offload/worker/cpu_gpu.py): only the preempted request stalls, and the trigger waits
for the swap-out to free its blocks. Recompute runs on the compute stream in both, so every
running request waits for it (its FLOP time in 'compute' mode: an upper bound when the step has
spare compute). Batch cost = request-seconds of delay summed over the preempted request and the
R others running with it.

Offload tiers: a prefix already held in host memory is reloaded one way (KV ÷ link) or
recomputed (the same prefill); the same schedule decides who waits for the load.
"""
from __future__ import annotations

from ..catalog import host_links
from ..schema import choice, integer, mark, number, output, series, step
from .kv_cache import kv_bytes_per_sequence, kv_fraction_per_gpu
from .deployment import deployment_fields, time_step
from .steptime import compute_rate, compute_share, deployment
from .sharding import steps_for

HOST_LINKS = host_links()
MAX_SEARCH_TOKENS = 10_000_000


def _fields() -> list[dict]:
    fields = deployment_fields(1.0, 0.5, {"compute_efficiency": {
        "label": "Prefill efficiency (fraction of dense peak)",
        "help": "An assumption: FlashAttention-3 reaches 0.75 of H100 peak in its attention "
                "kernel (arXiv 2407.08608); whole prefills usually do less."}})
    links = [(k, e["name"]) for k, e in HOST_LINKS.items()] + [("custom", "Custom (the field below)")]
    return fields + [
        integer("context_tokens", "Context of the preempted sequence", 8192, 1, MAX_SEARCH_TOKENS, "tokens",
                "Prompt plus tokens generated so far: all of it is swapped or recomputed."),
        choice("host_link", "Host link (GPU ↔ CPU memory)", "pcie5-x16", links),
        number("host_link_gb_per_s", "Custom host link bandwidth, per direction", 64.0, 0.1, 10_000.0, "GB/s",
               "Used only when the host link is custom (e.g. a CPU–GPU coherent link)."),
        number("link_efficiency", "Host link efficiency", 1.0, 0.01, 1.0, "",
               "Fraction of the link's per-direction peak a swap achieves; small blocks achieve less "
               "(arXiv 2309.06180 §7.3).", 0.01),
        choice("recompute_cost", "Recompute counted as", "compute",
               [("compute", "FLOPs only (batched with other work)"),
                ("standalone", "A prefill on its own (max of memory and compute)")]),
        choice("swap_schedule", "Copies scheduled", "serialised",
               [("serialised", "Serialised with the step (vLLM V0)"),
                ("overlapped", "Overlapped on copy streams")],
               "vLLM V0 issued swap_in / swap_out before the forward pass on the same stream "
               "(v0.6.6, vllm/worker/worker.py execute_worker)."),
        integer("batch_requests", "Other requests running in the batch", 32, 1, 100_000, "requests",
                "R: the requests that share GPU steps with the preempted one; one of them is the "
                "request whose new block triggered the preemption."),
    ]


SCHEMA = {
    "name": "preemption",
    "title": "Preemption: swap versus recompute",
    "description": ("Time to swap a preempted sequence's KV cache out to host memory and back in, "
                    "against the time to recompute it with one prefill, and the context length "
                    "where the two are equal. Swap times use the link's peak times an efficiency; "
                    "recompute uses the prefill model of the roofline calculator with a prefill "
                    "efficiency. The swap schedule sets who waits for the copies: the whole batch "
                    "(serialised, as vLLM V0 ran them) or only the preempted request and the one "
                    "whose allocation triggered it (overlapped); batch costs sum the delay over "
                    "everyone running. The reload rows answer the offload-tier question: load a "
                    "prefix from host memory once, or recompute it. All are estimates; none counts "
                    "scheduling or queueing."),
    "inputs": _fields(),
    "outputs": [
        output("kv_bytes_per_sequence", "KV of the sequence (all GPUs)", "B", "bytes"),
        output("kv_bytes_per_gpu", "KV each GPU moves", "B", "bytes"),
        output("link_bandwidth_bytes_per_s", "Host link used, per direction per GPU", "B/s", "rate"),
        output("swap_out_time_s", "Swap out (GPU → host)", "s", "seconds"),
        output("swap_in_time_s", "Swap in (host → GPU)", "s", "seconds"),
        output("swap_time_s", "Swap out + in", "s", "seconds"),
        output("recompute_time_s", "Recompute (prefill of the context)", "s", "seconds"),
        output("recompute_to_swap_ratio", "Recompute ÷ swap", "×", "number"),
        output("break_even_context_tokens", "Break-even context", "tokens", "integer",
               words={0: "none below 10M"}),
        output("tie_link_efficiency", "Link efficiency at which swap and recompute tie (this context)", "",
               "number"),
        output("swap_time_per_token_s", "Swap out + in per token", "s", "seconds"),
        output("recompute_time_per_token_s", "Recompute per token at this context", "s", "seconds"),
        output("swap_batch_delay_s", "Swap: delay to each other running request", "s", "seconds"),
        output("swap_trigger_delay_s", "Swap: delay to the request that triggered it", "s", "seconds"),
        output("recompute_batch_delay_s", "Recompute: delay to each other running request (at most)", "s",
               "seconds"),
        output("swap_batch_cost_s", "Swap: batch cost (request-seconds)", "s", "seconds"),
        output("recompute_batch_cost_s", "Recompute: batch cost (request-seconds)", "s", "seconds"),
        output("batch_cost_ratio", "Recompute ÷ swap, batch cost", "×", "number"),
        output("break_even_batch_context_tokens", "Break-even context on batch cost", "tokens",
               "integer", words={0: "none"}),
        output("reload_time_s", "Offload tier: reload this context from host (one way)", "s", "seconds"),
        output("reload_batch_cost_s", "Offload tier: reload batch cost (request-seconds)", "s", "seconds"),
        output("recompute_to_reload_ratio", "Recompute ÷ reload, batch cost", "×", "number"),
        output("break_even_reload_context_tokens", "Reload-vs-recompute break-even context",
               "tokens", "integer", words={0: "none"}),
    ],
}


def _link_bytes_per_s(v: dict) -> tuple[float, str]:
    if v["host_link"] == "custom":
        return v["host_link_gb_per_s"] * 1e9 * v["link_efficiency"], "custom link"
    e = HOST_LINKS[v["host_link"]]
    return e["bandwidth_bytes_per_s"] * v["link_efficiency"], e["name"]


class Costs:
    """Swap and recompute seconds at any context, for one deployment and link."""

    def __init__(self, v: dict):
        self.dep = deployment(v)
        self.steps = steps_for(v, self.dep)
        self.link, self.link_name = _link_bytes_per_s(v)
        self.share = kv_fraction_per_gpu(self.dep.model, self.dep.num_gpus)
        self.standalone = v["recompute_cost"] == "standalone"
        self.serialised = v["swap_schedule"] == "serialised"
        self.batch = v["batch_requests"]

    def kv_per_gpu(self, tokens: int) -> float:
        return kv_bytes_per_sequence(self.dep.model, tokens, self.dep.kv_elem_bytes) * self.share

    def swap(self, tokens: int) -> float:
        return 2 * self.kv_per_gpu(tokens) / self.link

    def recompute(self, tokens: int) -> float:
        cost = self.steps.prefill([tokens])
        return cost.time_s if self.standalone else cost.compute_time_s

    def gap(self, tokens: int) -> float:
        return self.recompute(tokens) - self.swap(tokens)

    # ---- who waits: request-seconds over the preempted request and the R others ----
    def copy_batch_cost(self, copy_s: float, trigger_s: float) -> float:
        """Own stall + the others' wait: all R wait when serialised, else only the trigger."""
        return copy_s + (self.batch * copy_s if self.serialised else trigger_s)

    def swap_cost(self, tokens: int) -> float:
        s = self.swap(tokens)
        return self.copy_batch_cost(s, s / 2)          # the trigger waits for the swap-out

    def recompute_cost(self, tokens: int) -> float:
        return (1 + self.batch) * self.recompute(tokens)

    def reload(self, tokens: int) -> float:
        return self.kv_per_gpu(tokens) / self.link

    def reload_cost(self, tokens: int) -> float:
        return self.copy_batch_cost(self.reload(tokens), 0.0)

    def batch_gap(self, tokens: int) -> float:
        return self.recompute_cost(tokens) - self.swap_cost(tokens)

    def reload_gap(self, tokens: int) -> float:
        return self.recompute_cost(tokens) - self.reload_cost(tokens)


def break_even(c: Costs, hi: int = MAX_SEARCH_TOKENS, gap=None) -> int:
    """First context where the sign of `gap` (default recompute − swap) flips (0 if it never
    does below `hi`)."""
    gap = gap or c.gap
    grid = sorted({2 ** k for k in range(25) if 2 ** k < hi} | {hi})
    lo_t, first = grid[0], gap(grid[0]) < 0
    for t in grid[1:]:
        if (gap(t) < 0) != first:
            a, b = lo_t, t
            while b - a > 1:      # integer bisection keeps the result exact and reproducible
                mid = (a + b) // 2
                a, b = (mid, b) if (gap(mid) < 0) == first else (a, mid)
            return b
        lo_t = t
    return 0


def _series(c: Costs, context: int, top: int) -> dict:
    xs = sorted({2 ** k for k in range(8, 25) if 2 ** k <= top} | {context})
    return mark(series("Swap, recompute and reload time vs context length", "Context", "tokens", xs,
                  [("swap out + in", "ms", [c.swap(x) * 1e3 for x in xs]),
                   ("recompute", "ms", [c.recompute(x) * 1e3 for x in xs]),
                   ("reload (one way)", "ms", [c.reload(x) * 1e3 for x in xs])], log_axes=True),
                "context_tokens", context, on="recompute")


def _recompute_step(c: Costs, t: int, rec: float) -> dict:
    cost, dep = c.steps.prefill([t]), c.dep
    if c.standalone:
        return time_step(cost, "Recompute", "max(bytes ÷ (N × BW), FLOPs ÷ (N × peak × η × s_chip))")
    if c.steps.attention_weight == 1.0:
        return step("Recompute", "FLOPs ÷ (N × peak × η_prefill × s_chip)", "{} ÷ ({} × {} × {})",
                    [(cost.flops, "FLOP"), dep.num_gpus, (dep.peak_flops_per_s, "FLOP/s"), compute_share(dep)],
                    rec, "s")
    # attention at its own rate (steptime.attention_peak_flops): its FLOPs count × matmul peak ÷ attention peak
    equivalent = cost.compute_time_s * dep.num_gpus * compute_rate(dep)
    return step("Recompute",
                "(matmul FLOPs + attention FLOPs × peak ÷ attention peak) ÷ (N × peak × η_prefill × s_chip)",
                "{} ÷ ({} × {} × {})",
                [(equivalent, "FLOP"), dep.num_gpus, (dep.peak_flops_per_s, "FLOP/s"), compute_share(dep)],
                rec, "s")


def _derivation(c: Costs, t: int, swap: float, rec: float, even: int) -> list[dict]:
    kv_gpu = c.kv_per_gpu(t)
    return [
        step("KV each GPU holds", "KV(T) × ⌈H_kv/N⌉ ÷ H_kv", "KV({}) × {}", [(t, "tokens"), c.share], kv_gpu, "B"),
        step("Swap out + in", "2 × KV per GPU ÷ (B_link × η_link)", "2 × {} ÷ {}", [(kv_gpu, "B"), (c.link, "B/s")],
             swap, "s"),
        step("Prefill FLOPs of the context", "2 × P_active × T + causal attention", "T = {}", [(t, "tokens")],
             c.steps.prefill([t]).flops, "FLOP"),
        _recompute_step(c, t, rec),
        step("Break-even context", "T where recompute(T) = swap(T)", "integer bisection", [], even, "tokens"),
    ] + _batch_derivation(c, t, swap, rec)


def _batch_derivation(c: Costs, t: int, swap: float, rec: float) -> list[dict]:
    b = c.batch
    if c.serialised:
        swap_f, swap_t, swap_terms = "(1 + R) × swap (serialised: every running request waits)", "{} × {}", [
            1 + b, (swap, "s")]
        load_f = "(1 + R) × KV per GPU ÷ (B_link × η_link)"
    else:
        swap_f, swap_t, swap_terms = "swap + swap-out (overlapped: only the trigger waits)", "{} + {}", [
            (swap, "s"), (swap / 2, "s")]
        load_f = "KV per GPU ÷ (B_link × η_link)"
    return [
        step("Swap batch cost", swap_f, swap_t, swap_terms, c.swap_cost(t), "s"),
        step("Recompute batch cost", "(1 + R) × recompute", "{} × {}", [1 + b, (rec, "s")], c.recompute_cost(t), "s"),
        step("Reload from host, batch cost", load_f, "R = {}", [b], c.reload_cost(t), "s"),
    ]


def _batch_outputs(c: Costs, t: int, swap: float, rec: float) -> dict:
    swap_cost, rec_cost, load_cost = c.swap_cost(t), c.recompute_cost(t), c.reload_cost(t)
    return {
        "swap_batch_delay_s": swap if c.serialised else 0.0,
        "swap_trigger_delay_s": swap if c.serialised else swap / 2,
        "recompute_batch_delay_s": rec,
        "swap_batch_cost_s": swap_cost,
        "recompute_batch_cost_s": rec_cost,
        "batch_cost_ratio": rec_cost / swap_cost,
        "break_even_batch_context_tokens": break_even(c, gap=c.batch_gap),
        "reload_time_s": c.reload(t),
        "reload_batch_cost_s": load_cost,
        "recompute_to_reload_ratio": rec_cost / load_cost,
        "break_even_reload_context_tokens": break_even(c, gap=c.reload_gap),
    }


def _schedule_notes(c: Costs) -> list[str]:
    if c.serialised:
        return ["serialised copies: every running request waits for the swap, as in vLLM V0; "
                "the batch break-even is then the same as the stall break-even"]
    return ["overlapped copies: only the preempted request and the trigger wait for the swap; "
            "recompute still lengthens every running request's step"]


def compute(v: dict) -> dict:
    c, t = Costs(v), v["context_tokens"]
    if c.dep.model.max_context_tokens and t > c.dep.model.max_context_tokens:
        notes = [f"context exceeds the model's maximum of {c.dep.model.max_context_tokens:,} tokens"]
    else:
        notes = []
    kv_gpu, swap, rec = c.kv_per_gpu(t), c.swap(t), c.recompute(t)
    even = break_even(c)
    faster = "recompute" if rec < swap else "swap"
    if even:
        below = "recompute" if c.gap(1) < 0 else "swap"
        notes.append(f"{below} is faster below {even:,} tokens of context, the other above it")
    else:
        notes.append(f"{'recompute' if c.gap(1) < 0 else 'swap'} is faster at every context up to "
                     f"{MAX_SEARCH_TOKENS:,} tokens")
    notes += _schedule_notes(c)
    return {
        "kv_bytes_per_sequence": kv_bytes_per_sequence(c.dep.model, t, c.dep.kv_elem_bytes),
        "kv_bytes_per_gpu": kv_gpu,
        "link_bandwidth_bytes_per_s": c.link,
        "swap_out_time_s": swap / 2,
        "swap_in_time_s": swap / 2,
        "swap_time_s": swap,
        "recompute_time_s": rec,
        "recompute_to_swap_ratio": rec / swap,
        "break_even_context_tokens": even,
        "tie_link_efficiency": v["link_efficiency"] * swap / rec,
        "swap_time_per_token_s": swap / t,
        "recompute_time_per_token_s": rec / t,
        **_batch_outputs(c, t, swap, rec),
        "faster": faster,
        "link_name": c.link_name,
        "derivation": _derivation(c, t, swap, rec, even),
        "series": {"swap_vs_recompute": _series(c, t, max(t, c.dep.model.max_context_tokens or 131_072))},
        "notes": notes,
    }

"""Long context: prefill time, KV, decode TPOT and cost per request against context length, with context
parallelism (ring attention) for prefill.

Prefill of one prompt of T tokens (steptime.StepModel.prefill, the step every other calculator prices):
  linear  = 2 × P_active × T                                  (Kaplan et al., arXiv 2001.08361 §2.1)
  attention = Σ_layer kinds 2 × H × (d_qk + d_v) × Σ_{t=1..T} min(t, window)
          a causal mask: query t sees t keys, so Σ t = T(T + 1)/2, half of the T² a bidirectional pass would do;
          sliding-window layers see at most their window, so their share grows linearly past it.
  time = max(memory time, compute time) + the per-step overhead, compute time split into the two terms.
KV per sequence: kv_cache.kv_bytes_per_sequence (real layer groups: full, sliding, chunked, linear state);
sequences that fit: memory.budget under the engine rule; decode TPOT: StepModel.decode(batch, T).
Cost per request: GPU-seconds × USD per GPU-hour ÷ 3600, through cost.usd_per_million (the same rule as
the cost calculator): prefill on CP × N GPUs, decode on the N-GPU group shared by the decode batch.

Context parallelism (ring attention, Liu et al. arXiv 2310.01889 §3; inference: Yang et al., arXiv
2411.01783 §3 "pass-KV"): CP ranks, each a TP group of N GPUs, hold T ÷ CP tokens (load-balanced so each
does 1/CP of the causal work). The linear layers split CP ways with no communication. For every
full-attention layer the KV blocks circulate around the ring: CP steps, each computing one block of
attention while the next block arrives, so a layer takes (CP − 1) × max(c, x) + c, where c is one block's
attention compute and x one block's transfer over the link, priced by ring.py (an all-gather of the
layer's KV, CP − 1 steps of a block each, Simple protocol). Windowed layers need only the previous rank's
last window of tokens and are priced as compute only. Decode after a CP prefill is priced on one
N-GPU group (where the KV is kept or moved to); its communication is not modelled.
"""

from __future__ import annotations

from ..catalog import links
from ..errors import InputError
from ..formats import bytes_per_element
from ..schema import choice, integer, mark, number, output, series, step
from .cost import gpu_hour_field, usd_per_million
from .deployment import deployment_fields, efficiency_steps
from .kv_cache import kv_bytes_per_sequence, kv_bytes_per_token_per_layer, layer_groups
from .memory import budget, engine_fields, footprint, usable_bytes_per_gpu
from .ring import link_name, ring_time, scale_up_domain, scale_up_ring
from .steptime import StepModel, compute_rate, deployment
from ..units import GIB

GRID = [4096 * 2**k for k in range(9)]  # 4K … 1M tokens
LINKS = links()


def _link_choices():
    return [("accelerator", "The accelerator's own scale-up link")] + [(k, e["name"]) for k, e in LINKS.items()]


SCHEMA = {
    "name": "long_context",
    "title": "Long-context cost: prefill, KV, TPOT and dollars against context length",
    "description": (
        "For one request of a given context on your model and hardware: prefill time split into its linear "
        "(2 × active params per token) and quadratic (attention under a causal mask) terms, the KV it holds and "
        "how many such sequences fit, decode time per output token at that context, and what the request costs "
        "at your price per GPU-hour. Sliding-window, chunked and hybrid models are priced by their real layer "
        "groups. Context parallelism splits the prefill over CP groups of N GPUs with ring attention (KV blocks "
        "passed around the ring, each step the slower of one block's attention and one block's transfer). "
        "Estimates at the efficiencies entered, not measurements."
    ),
    "inputs": deployment_fields(
        0.8,
        0.6,
        {
            "model": {"default": "llama-3.1-70b"},
            "num_gpus": {
                "label": "GPUs per group (tensor parallel) N",
                "default": 8,
                "help": "One tensor-parallel group: it holds the weights and the KV and runs decode.",
            },
        },
    )
    + [
        integer(
            "context_tokens",
            "Context length T",
            131_072,
            1,
            10_000_000,
            "tokens",
            "Prompt tokens prefilled (the context the decode then runs at).",
        ),
        integer("output_tokens", "Output tokens per request", 1000, 0, 1_000_000, "tokens"),
        integer(
            "decode_batch",
            "Decode batch (sequences sharing each step)",
            16,
            1,
            100_000,
            "sequences",
            "Capped at the sequences of this context that fit in the KV budget.",
        ),
        gpu_hour_field(),
        integer(
            "context_parallel",
            "Context-parallel degree CP (prefill)",
            1,
            1,
            1024,
            "groups",
            "Groups of N GPUs that split one prompt by tokens with ring attention; 1 = none.",
        ),
        choice(
            "cp_link",
            "Link between CP groups",
            "ib-ndr-400",
            _link_choices(),
            "A network link: one NIC per GPU, each GPU exchanging with the same TP rank of the next group. "
            "The accelerator's own link: only while CP × N fits in one scale-up domain.",
        ),
        number("link_efficiency", "Link efficiency", 0.8, 0.01, 1.0, "", "Fraction of the link's peak achieved.", 0.01),
    ]
    + engine_fields(),
    "outputs": [
        output("prefill_time_s", "Prefill time (TTFT floor) on N GPUs", "s", "seconds"),
        output("prefill_linear_time_s", "of which linear layers (compute)", "s", "seconds"),
        output("prefill_attention_time_s", "of which attention (compute, causal)", "s", "seconds"),
        output("attention_share", "Attention share of prefill compute", "", "percent"),
        output("prefill_flops", "Prefill FLOPs", "FLOP", "number", shown=False),
        output("attention_flops", "Attention FLOPs (causal)", "FLOP", "number", shown=False),
        output("prefill_pflop", "Prefill FLOPs, in PFLOP (10^15)", "PFLOP", "number", shown=False),
        output("attention_pflop", "Attention FLOPs, in PFLOP (10^15)", "PFLOP", "number", shown=False),
        output("cp_prefill_time_s", "Prefill time with context parallelism (CP × N GPUs)", "s", "seconds"),
        output("cp_speedup", "Speed-up from context parallelism", "×", "number"),
        output("cp_transfer_bound", "Ring steps bound by the link, not compute", "", "percent"),
        output("kv_bytes_per_sequence", "KV per sequence", "B", "bytes"),
        output(
            "sequences_fit",
            "Sequences of this context that fit (N GPUs)",
            "sequences",
            "integer",
            words={0: "none: not even one"},
        ),
        output("decode_batch_used", "Decode batch used", "sequences", "integer"),
        output("tpot_s", "Decode time per output token at this context", "s", "seconds"),
        output("usd_prefill", "Cost of the prefill", "USD", "usd"),
        output("usd_decode", "Cost of the decode (this request's share)", "USD", "usd"),
        output("usd_per_request", "Cost per request", "USD", "usd"),
        output("usd_per_million_input_tokens", "Prefill cost per million input tokens at this context", "USD", "usd"),
        output("max_context_tokens", "The model's maximum context", "tokens", "integer", words={0: "not listed"}),
    ],
}


def _rate(sm: StepModel) -> float:
    """Effective FLOP/s of one N-GPU group."""
    return sm.dep.num_gpus * compute_rate(sm.dep)


def _cp_ring(v: dict, cp: int):
    """The ring the CP groups pass KV around: each GPU to the same TP rank of the next group."""
    n = v["num_gpus"]
    if v["cp_link"] == "accelerator":
        domain = scale_up_domain(v["hardware"])  # PCIe's where the chip has no scale-up link
        if domain and cp * n > domain:
            raise InputError(
                "context_parallel",
                f"CP × N must be at most {domain} GPUs on {v['hardware'].name}'s "
                f"{link_name(v['hardware'])}; pick a network link between CP groups",
            )
        w = {**v, "link": "accelerator"}
    else:
        w = {**v, "link": v["cp_link"], "gpus_per_node": 1, "nics_per_node": 0, "link_bandwidth_gb_per_s": 0.0}
    try:
        return scale_up_ring(w, cp)
    except InputError as exc:  # the ring's own fields are not this calculator's: name the link choice
        raise InputError("cp_link", exc.message.split(";")[0] + "; pick a network link between CP groups") from exc


def context_parallel(v: dict, sm: StepModel, t: int) -> dict:
    """Prefill time of one prompt of t tokens over CP groups of N GPUs with ring attention (pass-KV)."""
    cp, model, rate = v["context_parallel"], sm.dep.model, _rate(sm)
    full, windowed, _ = sm.prefill_attention(t)
    linear = sm.matmul_per_token * t / rate
    prefill = sm.prefill([t])
    if cp == 1:
        return {"time": prefill.time_s, "bound": 0.0, "x": 0.0, "c": 0.0, "layers": 0}
    layers = sum(g.layers for g in layer_groups(model) if g.cap_tokens is None)
    kv_b = bytes_per_element(v["kv_dtype"], "kv_dtype")
    layer_kv = kv_bytes_per_token_per_layer(model.attention, kv_b) * t * sm.kv_share  # one layer, one GPU's heads
    x = c = 0.0
    if layers:
        ring = _cp_ring(v, cp)
        x = ring_time(layer_kv, cp, ring, v["link_efficiency"], {"base": None, "hop": None}, "simple", 1).time
        x /= cp - 1
        c = full / rate / cp / layers / cp  # one block of one layer on one group
    attention = layers * ((cp - 1) * max(c, x) + c) + windowed / rate / cp
    return {
        "time": linear / cp + attention + prefill.overhead_s,
        "bound": 1.0 if x > c else 0.0,
        "x": x,
        "c": c,
        "layers": layers,
    }


def _sequences(v: dict, t: int) -> int:
    b = budget(footprint(v), usable_bytes_per_gpu(v), v["num_gpus"], t)
    return b.sequences


def _point(v: dict, sm: StepModel, t: int) -> dict:
    """Every quantity at one context length."""
    prefill = sm.prefill([t])
    rate = _rate(sm)
    full, windowed, true_attention = sm.prefill_attention(t)
    fit = _sequences(v, t)
    batch = max(1, min(v["decode_batch"], fit))
    tpot = sm.decode(batch, t).time_s
    n, price, out = v["num_gpus"], v["usd_per_gpu_hour"], v["output_tokens"]
    cp = context_parallel(v, sm, t)
    pre_usd = t * usd_per_million(price, n * v["context_parallel"], t / cp["time"]) / 1e6
    dec_usd = out * usd_per_million(price, n, batch / tpot) / 1e6 if out else 0.0
    return {
        "prefill": prefill,
        "linear_s": sm.matmul_per_token * t / rate,
        "attention_s": (full + windowed) / rate,
        "attention_flops": true_attention,
        "cp": cp,
        "kv": kv_bytes_per_sequence(model := sm.dep.model, t, bytes_per_element(v["kv_dtype"], "kv_dtype")),
        "fit": fit,
        "batch": batch,
        "tpot": tpot,
        "usd_prefill": pre_usd,
        "usd_decode": dec_usd,
        "model": model,
    }


def _grid(v: dict) -> list[int]:
    top = v["model"].max_context_tokens
    return sorted({*GRID, v["context_tokens"], *([top] if top else [])})


def _series(v: dict, sm: StepModel, here: dict) -> dict:
    xs = _grid(v)
    pts = [here if x == v["context_tokens"] else _point(v, sm, x) for x in xs]
    top = v["model"].max_context_tokens
    specs = {
        "prefill_vs_context": ("Prefill time vs context", [
            ("total (N GPUs)", "s", lambda p: p["prefill"].time_s),
            ("linear layers", "s", lambda p: p["linear_s"]),
            ("attention (causal)", "s", lambda p: p["attention_s"]),
            (f"with CP {v['context_parallel']}", "s", lambda p: p["cp"]["time"]),
        ]),
        "kv_vs_context": ("KV per sequence vs context", [("KV per sequence", "GiB", lambda p: p["kv"] / GIB)]),
        "cost_vs_context": ("Cost per request vs context", [
            ("per request", "USD", lambda p: p["usd_prefill"] + p["usd_decode"]),
            ("prefill", "USD", lambda p: p["usd_prefill"]),
            ("decode", "USD", lambda p: p["usd_decode"]),
        ]),
    }  # fmt: skip
    out = {}
    for key, (title, curves) in specs.items():
        ys = [(name, unit, [f(p) for p in pts]) for name, unit, f in curves]
        plot = series(title, "Context length", "tokens", xs, ys, log_axes=True)
        if top:
            mark(plot, "context_tokens", top, name=f"model's maximum context ({top:,} tokens)")
        out[key] = mark(plot, "context_tokens", v["context_tokens"])
    return out


def _widths(m) -> tuple[int, int]:
    """(d_qk, d_v) of prefill attention (MLA: the expanded form)."""
    a = m.attention
    if a.kind == "mla":
        return a.qk_nope_head_dim + a.qk_rope_head_dim, a.v_head_dim
    return a.head_dim, a.v_head_dim or a.head_dim


def _prefill_steps(v: dict, sm: StepModel, p: dict) -> list[dict]:
    t, rate, m = v["context_tokens"], _rate(sm), sm.dep.model
    qk, vd = _widths(m)
    groups = ", ".join(
        f"{g.layers} {g.kind}" + (f" (window {g.cap_tokens:,})" if g.cap_tokens else "") for g in layer_groups(m)
    )
    pre, linear = p["prefill"], 2 * sm.active * t
    rows = [
        ("Linear FLOPs", "2 × P_active × T", "2 × {} × {}", [sm.active, (t, "tokens")], linear, "FLOP"),
        ("Attention FLOPs (causal)",
         "Σ layers 2 × H × (d_qk + d_v) × Σ_t min(t, window); full layers: T(T + 1)/2 keys, half of T²",
         "layers: {}; H = {}, d_qk = {}, d_v = {}, T = {}", [groups, m.attention.num_heads, qk, vd, (t, "tokens")],
         p["attention_flops"], "FLOP"),
        ("Linear time", "linear FLOPs ÷ (N × peak × η)", "{} ÷ {}", [(linear, "FLOP"), (rate, "FLOP/s")],
         p["linear_s"], "s"),
        ("Attention time", "attention FLOPs at the attention rate ÷ (N × peak × η)", "{} at the attention rate",
         [(p["attention_flops"], "FLOP")], p["attention_s"], "s"),
        ("Prefill time", "max(memory time, linear + attention time) + overhead", "max({}, {}) + {}",
         [(pre.memory_time_s, "s"), (pre.compute_time_s, "s"), (pre.overhead_s, "s")], pre.time_s, "s"),
    ]  # fmt: skip
    cp = p["cp"]
    if v["context_parallel"] > 1:
        terms = [v["context_parallel"], cp["layers"], (cp["c"], "s"), (cp["x"], "s")]
        rows.append(("Prefill with context parallelism",
                     "linear ÷ CP + L_full × ((CP − 1) × max(c, x) + c) + windowed ÷ CP + overhead",
                     "CP = {}, L_full = {}, c = {}, x = {}", terms, cp["time"], "s"))  # fmt: skip
    return [step(*row) for row in rows]


def _request_steps(v: dict, p: dict, total: float) -> list[dict]:
    t, n, price = v["context_tokens"], v["num_gpus"], (v["usd_per_gpu_hour"], "USD")
    rows = [
        ("KV per sequence", "Σ layer kinds bytes per token × min(T, window) (+ state)", "T = {}", [(t, "tokens")],
         p["kv"], "B"),
        ("Sequences that fit", "⌊KV budget ÷ KV per sequence per GPU⌋", "T = {}", [(t, "tokens")], p["fit"],
         "sequences"),
        ("Decode time per token", "decode step of min(batch, fit) sequences at T", "batch {}, T = {}",
         [p["batch"], (t, "tokens")], p["tpot"], "s"),
        ("Cost of the prefill", "CP × N × prefill time × USD/GPU-h ÷ 3600", "{} × {} × {} × {} ÷ 3600",
         [v["context_parallel"], n, (p["cp"]["time"], "s"), price], p["usd_prefill"], "USD"),
        ("Cost of the decode", "N × output tokens × TPOT ÷ batch × USD/GPU-h ÷ 3600", "{} × {} × {} ÷ {} × {} ÷ 3600",
         [n, v["output_tokens"], (p["tpot"], "s"), p["batch"], price], p["usd_decode"], "USD"),
        ("Cost per request", "prefill + decode", "{} + {}", [(p["usd_prefill"], "USD"), (p["usd_decode"], "USD")],
         total, "USD"),
    ]  # fmt: skip
    return [step(*row) for row in rows]


def compute(v: dict) -> dict:
    sm = StepModel(deployment(v))
    t = v["context_tokens"]
    p = _point(v, sm, t)
    compute_s = p["linear_s"] + p["attention_s"]
    top = v["model"].max_context_tokens or 0
    notes = []
    if top and t > top:
        notes.append(f"context exceeds the model's maximum of {top:,} tokens")
    if p["fit"] == 0:
        notes.append("not one sequence of this context fits the KV budget: decode is priced at batch 1 anyway")
    out = {
        "prefill_time_s": p["prefill"].time_s,
        "prefill_linear_time_s": p["linear_s"],
        "prefill_attention_time_s": p["attention_s"],
        "attention_share": p["attention_s"] / compute_s,
        "prefill_flops": 2 * sm.active * t + p["attention_flops"],
        "attention_flops": p["attention_flops"],
        "prefill_pflop": (2 * sm.active * t + p["attention_flops"]) / 1e15,
        "attention_pflop": p["attention_flops"] / 1e15,
        "cp_prefill_time_s": p["cp"]["time"],
        "cp_speedup": p["prefill"].time_s / p["cp"]["time"],
        "cp_transfer_bound": p["cp"]["bound"],
        "kv_bytes_per_sequence": p["kv"],
        "sequences_fit": p["fit"],
        "decode_batch_used": p["batch"],
        "tpot_s": p["tpot"],
        "usd_prefill": p["usd_prefill"],
        "usd_decode": p["usd_decode"],
        "usd_per_request": p["usd_prefill"] + p["usd_decode"],
        "usd_per_million_input_tokens": p["usd_prefill"] / t * 1e6,
        "max_context_tokens": top,
        "notes": notes,
        "series": _series(v, sm, p),
    }
    out["derivation"] = (
        efficiency_steps(sm.dep) + _prefill_steps(v, sm, p) + _request_steps(v, p, out["usd_per_request"])
    )
    return out

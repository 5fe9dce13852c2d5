"""GPU memory: weights per GPU under tensor parallelism, the KV budget an engine leaves, and
how many sequences of a given context fit.

Engine rules (the reader picks one; reserves are explicit inputs):
  vLLM:   budget = gpu_memory_utilization × memory − weights − activation/graph reserve
          (vLLM profiles the reserve with a dummy forward pass; default utilization 0.92 from
          v0.20.0 through v0.33.0, 0.9 up to v0.19: vllm/config/cache.py at those tags)
  SGLang: budget = mem_fraction_static × memory − weights   (default mem_fraction_static 0.88 here;
          SGLang picks it from GPU size and TP when unset)
Weights split evenly over TP ranks (replicated norms and embeddings ignored). KV heads split
over ranks, but a rank holds at least one head, so TP beyond H_kv replicates KV; MLA's latent
is not split by head, so every rank holds all of it. Decode context parallelism (vLLM
--decode-context-parallel-size, SGLang --dcp-size) stripes each sequence's KV by token over
DCP ranks of the TP group, removing that replication: each rank holds 1/DCP of what plain TP
leaves it (kv_cache.kv_fraction_per_gpu, the one rule steptime.py uses too; vLLM
docs/serving/context_parallel_deployment.md and vllm/config/parallel.py at
commits 020505c and 00193b8; docs.sglang.io "Decode Context Parallelism").
"""
from __future__ import annotations

import math

from ..errors import InputError
from ..formats import bytes_per_element
from ..params import weight_bytes
from ..schema import (accelerator_field, choice, dtype_field, expert_dtype, expert_dtype_field, integer, model_field,
                      number, output, series, step)
from .kv_cache import (check_decode_context_parallel, decode_context_parallel_allowed, kv_bytes_per_sequence,
                       kv_bytes_per_token_all_layers, kv_fraction_per_gpu, state_bytes_per_sequence, state_dtype_field,
                       state_fraction_per_gpu)

GIB = 2 ** 30
TP_SERIES = (1, 2, 4, 8)


def usable_bytes_per_gpu(v: dict) -> float:
    total = v["hardware"].memory_bytes
    if v["engine_rule"] == "vllm":
        return v["gpu_memory_utilization"] * total - v["activation_reserve_gib"] * GIB
    return v["mem_fraction_static"] * total


# Each engine's rule, as the derivation writes it: the memory it may use, and what that leaves for KV.
USABLE_RULE = {"vllm": "gpu_memory_utilization × memory − reserve", "sglang": "mem_fraction_static × memory"}
BUDGET_RULE = {"vllm": "gpu_memory_utilization × memory − weights − reserve",
               "sglang": "mem_fraction_static × memory − weights"}


def _usable_step(v: dict, usable: float) -> dict:
    memory = (v["hardware"].memory_bytes, "B")
    if v["engine_rule"] == "vllm":
        template, terms = "{} × {} − {}", [v["gpu_memory_utilization"], memory, (v["activation_reserve_gib"] * GIB, "B")]
    else:
        template, terms = "{} × {}", [v["mem_fraction_static"], memory]
    return step("Usable memory per GPU", USABLE_RULE[v["engine_rule"]], template, terms, usable, "B")


def budget(v: dict, tensor_parallel: int) -> dict:
    """Weights, KV budget and capacity per GPU at one TP degree (and the input's DCP)."""
    model, kv_b = v["model"], bytes_per_element(v["kv_dtype"], "kv_dtype")
    weights = weight_bytes(model, v["weight_dtype"], "weight_dtype", expert_dtype(v)) / tensor_parallel
    kv_budget = max(0.0, usable_bytes_per_gpu(v) - weights)
    share = kv_fraction_per_gpu(model, tensor_parallel, v.get("decode_context_parallel", 1))
    state_b = bytes_per_element(v.get("state_dtype", "bf16"), "state_dtype")
    state = state_bytes_per_sequence(model, state_b)
    attention_kv = kv_bytes_per_sequence(model, v["context_tokens"], kv_b, state_b) - state
    per_seq = attention_kv * share + state * state_fraction_per_gpu(model, tensor_parallel)
    per_token = kv_bytes_per_token_all_layers(model, kv_b) * share
    return {"weights": weights, "kv_budget": kv_budget, "per_seq": per_seq,
            "sequences": math.floor(kv_budget / per_seq), "tokens": math.floor(kv_budget / per_token)}


def kv_budget_bytes_per_gpu(v: dict) -> float:
    """For goodput and others: the KV bytes one GPU may hold under the chosen engine rule."""
    return budget(v, v["tensor_parallel"])["kv_budget"]


def engine_fields() -> list[dict]:
    return [
        choice("engine_rule", "Engine memory rule", "vllm", [("vllm", "vLLM"), ("sglang", "SGLang")]),
        number("gpu_memory_utilization", "vLLM gpu_memory_utilization", 0.92, 0.05, 1.0, "",
               "Fraction of GPU memory vLLM may use. vLLM's default: 0.92 from v0.20.0 (still in v0.33.0), 0.9 up to "
               "v0.19 (vllm/config/cache.py).", 0.01),
        number("activation_reserve_gib", "vLLM activation and CUDA-graph reserve", 2.0, 0.0, 1024.0, "GiB",
               "An assumption: vLLM measures this by profiling; a few GiB is typical."),
        number("mem_fraction_static", "SGLang mem_fraction_static", 0.88, 0.05, 1.0, "",
               "Fraction for weights plus KV pool.", 0.01),
    ]


SCHEMA = {
    "name": "memory",
    "title": "GPU memory: weights, KV budget and concurrency",
    "description": ("Weights per GPU under tensor parallelism, the KV-cache budget an engine leaves, "
                    "and the sequences of a given context that fit. When weights exceed memory the "
                    "result says so (fits = 0) instead of failing."),
    "inputs": [
        model_field(), accelerator_field(),
        dtype_field("weight_dtype", "Weight format", "bf16"),
        expert_dtype_field(),
        dtype_field("kv_dtype", "KV-cache format", "bf16"),
        integer("tensor_parallel", "Tensor-parallel GPUs", 4, 1, 1024, "GPUs"),
        integer("decode_context_parallel", "Decode context-parallel size", 1, 1, 1024, "ranks",
                "vLLM --decode-context-parallel-size, SGLang --dcp-size: stripes each sequence's KV by token "
                "over this many ranks of the TP group (no extra GPUs). Must divide TP and be at most "
                "TP ÷ KV heads (MLA: TP)."),
        integer("context_tokens", "Context per sequence", 8192, 1, 10_000_000, "tokens"),
        state_dtype_field(),
    ] + engine_fields(),
    "outputs": [
        output("fits", "Fits (1 = yes, 0 = no)", "", "integer"),
        output("weight_bytes_total", "Weights, all GPUs", "B", "bytes"),
        output("weight_bytes_per_gpu", "Weights per GPU", "B", "bytes"),
        output("usable_bytes_per_gpu", "Memory the engine may use per GPU", "B", "bytes"),
        output("kv_budget_bytes_per_gpu", "KV budget per GPU", "B", "bytes"),
        output("kv_bytes_per_sequence_per_gpu", "KV per sequence per GPU", "B", "bytes"),
        output("max_concurrent_sequences", "Sequences that fit at this context", "sequences", "integer"),
        output("kv_tokens_capacity", "Tokens the KV pool holds", "tokens", "integer"),
        output("min_tensor_parallel_to_fit", "Smallest power-of-two TP that fits at this DCP (0 = none up to 1024)",
               "GPUs", "integer"),
    ],
}


def _dcp_allows(v: dict, tensor_parallel: int) -> bool:
    return decode_context_parallel_allowed(v["model"], tensor_parallel, v.get("decode_context_parallel", 1))


def _derivation(v: dict, b: dict, usable: float) -> list[dict]:
    tp = v["tensor_parallel"]
    share = kv_fraction_per_gpu(v["model"], tp, v["decode_context_parallel"])
    return [
        step("Weights per GPU", "params × b_w ÷ TP", "{} ÷ {}", [(b["weights"] * tp, "B"), tp], b["weights"], "B"),
        _usable_step(v, usable),
        step("KV budget per GPU", BUDGET_RULE[v["engine_rule"]], "max(0, {} − {})", [(usable, "B"), (b["weights"], "B")],
             b["kv_budget"], "B"),
        step("KV per sequence per GPU", "KV(T) × share of KV heads on one rank ÷ DCP (+ state ÷ TP)", "KV({}) × {}",
             [(v["context_tokens"], "tokens"), share], b["per_seq"], "B"),
        step("Sequences that fit", "⌊KV budget ÷ KV per sequence⌋", "⌊{} ÷ {}⌋",
             [(b["kv_budget"], "B"), (b["per_seq"], "B")], b["sequences"], "sequences"),
    ]


def compute(v: dict) -> dict:
    tp = v["tensor_parallel"]
    b = budget(v, tp)
    usable = usable_bytes_per_gpu(v)
    fits = b["sequences"] >= 1
    min_tp = next((t for t in (2 ** k for k in range(11))
                   if _dcp_allows(v, t) and budget(v, t)["sequences"] >= 1), 0)
    notes = [] if fits else [f"does not fit: {b['weights'] / GIB:.1f} GiB of weights per GPU leave room for "
                             f"{b['sequences']} sequences of {v['context_tokens']:,} tokens"]
    tps = sorted(t for t in set(TP_SERIES) | {tp} if _dcp_allows(v, t))
    rows = [budget(v, t) for t in tps]
    return {
        "fits": int(fits),
        "weight_bytes_total": b["weights"] * tp,
        "weight_bytes_per_gpu": b["weights"],
        "usable_bytes_per_gpu": usable,
        "kv_budget_bytes_per_gpu": b["kv_budget"],
        "kv_bytes_per_sequence_per_gpu": b["per_seq"],
        "max_concurrent_sequences": b["sequences"],
        "kv_tokens_capacity": b["tokens"],
        "min_tensor_parallel_to_fit": min_tp,
        "notes": notes,
        "derivation": _derivation(v, b, usable),
        "series": {"by_tensor_parallel": series(
            "Capacity by tensor-parallel degree", "Tensor-parallel GPUs", "GPUs", tps,
            [("sequences that fit", "sequences", [r["sequences"] for r in rows]),
             ("KV budget per GPU", "GiB", [r["kv_budget"] / GIB for r in rows]),
             ("weights per GPU", "GiB", [r["weights"] / GIB for r in rows])], kind="bar")},
    }

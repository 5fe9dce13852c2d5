"""Latency: TTFT, TPOT and end-to-end time for a batch, and the throughput–latency curve.

  TTFT = queueing + prefill of the batch's prompts            (NVIDIA NIM metrics: TTFT includes queueing)
  TPOT = decode step time at the mean context over generation (steptime.decode_step)
  E2E  = TTFT + TPOT × (output tokens − 1)                    (Databricks, 'LLM Inference Performance Engineering: Best Practices', 2023-10-12)
Default efficiencies (bandwidth 0.8, compute 0.6) make these estimates, not bounds: FlashMLA reaches
~0.9 of HBM bandwidth (deepseek-ai/FlashMLA README), FlashAttention-3 0.75 of H100 BF16 peak (arXiv 2407.08608).
"""
from __future__ import annotations

from ..schema import integer, number, output, series, step
from .steptime import decode_step, deployment, deployment_fields, efficiency_steps, prefill_step

BATCHES = tuple(2 ** k for k in range(11))


def batch_latency(dep, batch: int, input_tokens: int, output_tokens: int, queueing_s: float) -> dict:
    """Times for `batch` requests that arrive together, are prefilled together and decode together."""
    prefill = prefill_step(dep, [input_tokens] * batch)
    decode = decode_step(dep, batch, input_tokens + output_tokens / 2)
    ttft = queueing_s + prefill.time_s
    e2e = ttft + decode.time_s * (output_tokens - 1)
    return {"prefill": prefill, "decode": decode, "ttft_s": ttft, "tpot_s": decode.time_s, "e2e_s": e2e,
            "tokens_per_s_per_gpu": batch * output_tokens / e2e / dep.num_gpus,
            "decode_tokens_per_s_per_gpu": batch / decode.time_s / dep.num_gpus}


SCHEMA = {
    "name": "latency",
    "title": "Latency: TTFT, TPOT and end-to-end",
    "description": ("A batch of requests with equal prompt and output lengths arrives together, is "
                    "prefilled in one pass and decodes together. Step times come from the roofline "
                    "model scaled by the efficiency factors; communication and scheduling overheads "
                    "are not counted. Queueing delay is an input."),
    "inputs": deployment_fields(0.8, 0.6) + [
        integer("batch_size", "Batch size", 16, 1, 100_000, "requests"),
        integer("input_tokens", "Prompt length", 1024, 1, 10_000_000, "tokens"),
        integer("output_tokens", "Output length", 256, 1, 1_000_000, "tokens"),
        number("queueing_s", "Queueing delay", 0.0, 0.0, 86_400.0, "s"),
    ],
    "outputs": [
        output("ttft_s", "Time to first token", "s", "seconds"),
        output("prefill_time_s", "Prefill time", "s", "seconds"),
        output("tpot_s", "Time per output token", "s", "seconds"),
        output("e2e_latency_s", "End-to-end latency", "s", "seconds"),
        output("tokens_per_s_per_user", "Tokens/s per user while decoding", "tokens/s", "rate"),
        output("tokens_per_s_per_gpu", "Output tokens/s per GPU, prefill included", "tokens/s", "rate"),
        output("decode_tokens_per_s_per_gpu", "Output tokens/s per GPU while decoding", "tokens/s", "rate"),
    ],
}


def _curve(dep, v) -> dict:
    batches = sorted(set(BATCHES) | {v["batch_size"]})
    rows = [batch_latency(dep, b, v["input_tokens"], v["output_tokens"], v["queueing_s"]) for b in batches]
    out = series("Throughput vs latency across batch sizes", "Output tokens/s per GPU", "tokens/s",
                 [r["tokens_per_s_per_gpu"] for r in rows],
                 [("end-to-end latency", "s", [r["e2e_s"] for r in rows]),
                  ("TTFT", "s", [r["ttft_s"] for r in rows]),
                  ("TPOT", "s", [r["tpot_s"] for r in rows])])
    out["point_labels"] = [f"batch {b}" for b in batches]
    return out


def compute(v: dict) -> dict:
    dep = deployment(v)
    r = batch_latency(dep, v["batch_size"], v["input_tokens"], v["output_tokens"], v["queueing_s"])
    pre, dec = r["prefill"], r["decode"]
    return {
        "ttft_s": r["ttft_s"], "prefill_time_s": pre.time_s, "tpot_s": r["tpot_s"], "e2e_latency_s": r["e2e_s"],
        "tokens_per_s_per_user": 1 / r["tpot_s"],
        "tokens_per_s_per_gpu": r["tokens_per_s_per_gpu"],
        "decode_tokens_per_s_per_gpu": r["decode_tokens_per_s_per_gpu"],
        "derivation": efficiency_steps(dep) + [
            step("Prefill time", "max(bytes ÷ BW, B × (2 × P_active × T_in + attention) ÷ peak)",
                 f"max({pre.memory_time_s:.6g}, {pre.compute_time_s:.6g})", pre.time_s, "s"),
            step("TTFT", "queueing + prefill", f"{v['queueing_s']} + {pre.time_s:.6g}", r["ttft_s"], "s"),
            step("TPOT", "decode step at context T_in + T_out ÷ 2",
                 f"max({dec.memory_time_s:.6g}, {dec.compute_time_s:.6g})", r["tpot_s"], "s"),
            step("End-to-end latency", "TTFT + TPOT × (T_out − 1)",
                 f"{r['ttft_s']:.6g} + {r['tpot_s']:.6g} × {v['output_tokens'] - 1}", r["e2e_s"], "s"),
        ],
        "series": {"throughput_latency": _curve(dep, v)},
    }

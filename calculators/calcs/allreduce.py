"""All-reduce tax of tensor parallelism: ring all-reduce time per step and per token.

  Megatron-style TP does 2 all-reduces per layer in the forward pass (after attention and
  after the MLP; Shoeybi et al., arXiv 1909.08053 §3), each of tokens × hidden × b bytes.
  Ring all-reduce of M bytes over n ranks, per-direction link bandwidth B, per-hop latency α:
      t = t_base + 2(n − 1) × α + 2(n − 1)/n × M / B
  (bandwidth term: NCCL-tests doc/PERFORMANCE.md; latency term: NCCL src/graph/tuning.cc,
  latency = baseLat + nsteps × hwLat with nsteps = 2(n − 1) for a ring all-reduce).
  Bus bandwidth = algbw × 2(n − 1)/n with algbw = M / t (NCCL-tests), so busbw = B when α = 0.
With efficiency 1.0 and t_base = 0 the times are lower bounds. Compute/communication overlap
is not modelled: the tax is reported as if the all-reduces sit on the critical path, as they
do in a plain TP forward pass.
"""
from __future__ import annotations

import math

from ..errors import InputError
from ..formats import bytes_per_element
from ..params import weight_bytes
from ..presets import _load
from ..schema import choice, dtype_field, integer, number, output, series, step
from .steptime import decode_step, deployment, deployment_fields

LINKS = {e["id"]: e for e in _load("interconnects.toml")["link"]}
SRAM_PARTS = {e["id"]: e for e in _load("interconnects.toml")["sram_part"]}
PLOT_DEGREES = (2, 4, 8, 16, 32, 64, 72)


def ring_allreduce_time(message_bytes: float, n: int, link_bytes_per_s: float,
                        hop_latency_s: float, base_latency_s: float = 0.0) -> float:
    """Seconds for one ring all-reduce of `message_bytes` across n ranks (0 when n == 1)."""
    if n <= 1:
        return 0.0
    return base_latency_s + 2 * (n - 1) * hop_latency_s + 2 * (n - 1) / n * message_bytes / link_bytes_per_s


def bus_bandwidth(message_bytes: float, n: int, time_s: float) -> float:
    """NCCL-tests bus bandwidth: algbw × 2(n − 1)/n, algbw = bytes ÷ time."""
    return message_bytes / time_s * 2 * (n - 1) / n if time_s > 0 else 0.0


def _fields() -> list[dict]:
    fields = deployment_fields(1.0, 1.0)
    for f in fields:
        if f["key"] == "model":
            f["default"] = "llama-3.1-70b"
        if f["key"] == "num_gpus":
            f.update(label="Tensor-parallel degree n", default=8,
                     help="GPUs the weights are split across; each layer all-reduces across all of them.")
    links = ([("accelerator", "The accelerator's own scale-up link")] + [(k, e["name"]) for k, e in LINKS.items()]
             + [("custom", "Custom (the two fields below)")])
    return fields + [
        integer("batch_size", "Tokens per step", 1, 1, 1_000_000, "tokens",
                "Decode: the batch (one token per sequence). Prefill: the prompt tokens in the step."),
        integer("context_tokens", "Context per sequence", 4096, 1, 10_000_000, "tokens"),
        dtype_field("activation_dtype", "Activation format (all-reduce payload)", "bf16"),
        choice("link", "Link", "accelerator", links),
        number("link_bandwidth_gb_per_s", "Custom link bandwidth, per direction", 450.0, 0.1, 100_000.0, "GB/s",
               "Used only when Link is custom."),
        number("latency_per_hop_us", "Latency per ring step", 0.6, 0.0, 1000.0, "µs",
               "Used with 'accelerator' and 'custom' links. NCCL's model: NVLink 0.6, PCIe 1.0, network 2.7 µs.", 0.1),
        number("base_latency_us", "Fixed latency per all-reduce call", 0.0, 0.0, 1000.0, "µs",
               "Launch and synchronisation. NCCL's ring/LL model adds 6.6 µs; 0 gives a lower bound.", 0.1),
        number("link_efficiency", "Link efficiency", 1.0, 0.01, 1.0, "",
               "Fraction of the link's peak an all-reduce achieves.", 0.01),
        choice("sram_part", "SRAM-only part for the chip count", "groq-lpu",
               [(k, e["name"]) for k, e in SRAM_PARTS.items()]),
    ]


SCHEMA = {
    "name": "allreduce",
    "title": "All-reduce tax of tensor parallelism",
    "description": ("Ring all-reduce time for tensor parallelism: 2 all-reduces per layer of tokens × "
                    "hidden × bytes, each taking 2(n − 1) latency hops plus 2(n − 1)/n × bytes ÷ link "
                    "bandwidth. Compared with the decode step's own lower bound to give the tax. No "
                    "overlap of communication with compute is assumed."),
    "inputs": _fields(),
    "outputs": [
        output("allreduce_bytes_per_token_per_layer", "All-reduce payload per token per layer (2 × hidden × b)",
               "B", "bytes"),
        output("message_bytes", "Message per all-reduce (tokens × hidden × b)", "B", "bytes"),
        output("allreduces_per_step", "All-reduces per forward pass (2 × layers)", "", "integer"),
        output("link_bandwidth_bytes_per_s", "Link bandwidth used, per direction", "B/s", "rate"),
        output("latency_per_hop_s", "Latency per ring step", "s", "seconds"),
        output("time_per_allreduce_s", "Time per all-reduce", "s", "seconds"),
        output("latency_fraction", "Share of all-reduce time that is latency", "", "percent"),
        output("bus_bandwidth_bytes_per_s", "Bus bandwidth achieved (NCCL-tests definition)", "B/s", "rate"),
        output("bytes_sent_per_gpu_per_step", "Bytes each GPU sends per step", "B", "bytes"),
        output("allreduce_time_per_step_s", "All-reduce time per step", "s", "seconds"),
        output("allreduce_time_per_token_s", "All-reduce time per token", "s", "seconds"),
        output("decode_step_time_s_lower_bound", "Decode step without communication (lower bound)", "s", "seconds"),
        output("step_time_with_allreduce_s", "Step time with all-reduce (no overlap)", "s", "seconds"),
        output("allreduce_tax_fraction", "All-reduce share of the step (the tax)", "", "percent"),
        output("tokens_per_s_per_user_with_allreduce", "Tokens/s per user with all-reduce", "tokens/s", "rate"),
        output("joules_per_token_at_board_power", "Energy per token at board power (P × n × step ÷ tokens)",
               "J", "number"),
        output("weight_bytes", "Weight bytes (all parameters)", "B", "bytes"),
        output("min_gpus_for_weights", "Accelerators needed just to hold the weights", "chips", "integer"),
        output("sram_chips_for_weights", "SRAM-only chips needed just to hold the weights", "chips", "integer"),
    ],
}


def _link(v: dict) -> tuple[float, float, str]:
    """(bytes/s per direction, seconds per hop, name) for the chosen link."""
    if v["link"] == "accelerator":
        acc = v["hardware"]
        if not acc.scale_up_bandwidth_bytes_per_s:
            raise InputError("link", f"{acc.name} lists no scale-up link bandwidth; pick a link preset or custom")
        return acc.scale_up_bandwidth_bytes_per_s, v["latency_per_hop_us"] * 1e-6, f"{acc.name} scale-up"
    if v["link"] == "custom":
        return v["link_bandwidth_gb_per_s"] * 1e9, v["latency_per_hop_us"] * 1e-6, "custom link"
    e = LINKS[v["link"]]
    return e["bandwidth_bytes_per_s"], e["latency_per_hop_s"], e["name"]


def _tp_series(per_token_msg: float, layers: int, tokens: int, v: dict) -> dict:
    base, eff = v["base_latency_us"] * 1e-6, v["link_efficiency"]
    ys = []
    for e in LINKS.values():
        t = [2 * layers * ring_allreduce_time(per_token_msg * tokens, n, e["bandwidth_bytes_per_s"] * eff,
                                              e["latency_per_hop_s"], base) * 1e3 for n in PLOT_DEGREES]
        ys.append((e["name"], "ms", t))
    return series(f"All-reduce time per step vs TP degree ({tokens} tokens per step)", "TP degree n", "GPUs",
                  PLOT_DEGREES, ys)


def _steps(v, n, layers, hidden, b_act, msg, bw, hop, t_ar, per_step, dec, tax):
    dec_t = dec.time_s
    return [
        step("Message per all-reduce", "M = tokens × hidden × b", f"{v['batch_size']} × {hidden} × {b_act:g}", msg, "B"),
        step("Time per all-reduce", "t_base + 2(n − 1) × α + 2(n − 1)/n × M ÷ B",
             f"{v['base_latency_us'] * 1e-6:.6g} + 2 × {n - 1} × {hop:.6g} + 2 × {n - 1}/{n} × {msg:.6g} ÷ {bw:.6g}",
             t_ar, "s"),
        step("All-reduce time per step", "2 × L × t", f"2 × {layers} × {t_ar:.6g}", per_step, "s"),
        step("Decode step without communication", "max(bytes ÷ (n × HBM BW), FLOPs ÷ (n × peak))",
             f"max({dec.memory_time_s:.6g}, {dec.compute_time_s:.6g})", dec_t, "s"),
        step("All-reduce tax", "t_AR ÷ (t_step + t_AR)", f"{per_step:.6g} ÷ ({dec_t:.6g} + {per_step:.6g})", tax, ""),
    ]


def compute(v: dict) -> dict:
    dep, n, tokens = deployment(v), v["num_gpus"], v["batch_size"]
    model = dep.model
    layers, hidden = model.num_layers, model.hidden_size
    b_act = bytes_per_element(v["activation_dtype"], "activation_dtype")
    link_bw, hop, link_name = _link(v)
    bw = link_bw * v["link_efficiency"]
    msg = tokens * hidden * b_act
    t_ar = ring_allreduce_time(msg, n, bw, hop, v["base_latency_us"] * 1e-6)
    per_step = 2 * layers * t_ar
    dec = decode_step(dep, tokens, v["context_tokens"])
    dec_t = dec.time_s
    tax = per_step / (dec_t + per_step)
    w_bytes = weight_bytes(model, v["weight_dtype"], "weight_dtype")
    sram = SRAM_PARTS[v["sram_part"]]
    latency = t_ar - (2 * (n - 1) / n * msg / bw if n > 1 else 0.0)
    return {
        "allreduce_bytes_per_token_per_layer": 2 * hidden * b_act,
        "message_bytes": msg,
        "allreduces_per_step": 2 * layers,
        "link_bandwidth_bytes_per_s": bw,
        "latency_per_hop_s": hop,
        "time_per_allreduce_s": t_ar,
        "latency_fraction": latency / t_ar if t_ar > 0 else 0.0,
        "bus_bandwidth_bytes_per_s": bus_bandwidth(msg, n, t_ar),
        "bytes_sent_per_gpu_per_step": 2 * layers * (2 * (n - 1) / n * msg if n > 1 else 0.0),
        "allreduce_time_per_step_s": per_step,
        "allreduce_time_per_token_s": per_step / tokens,
        "decode_step_time_s_lower_bound": dec_t,
        "step_time_with_allreduce_s": dec_t + per_step,
        "allreduce_tax_fraction": tax,
        "tokens_per_s_per_user_with_allreduce": 1 / (dec_t + per_step),
        "joules_per_token_at_board_power": (dep.accelerator.power_watts or 0.0) * n * (dec_t + per_step) / tokens,
        "weight_bytes": w_bytes,
        "min_gpus_for_weights": math.ceil(w_bytes / dep.accelerator.memory_bytes),
        "sram_chips_for_weights": math.ceil(w_bytes / sram["sram_bytes"]),
        "link_name": link_name,
        "derivation": _steps(v, n, layers, hidden, b_act, msg, bw, hop, t_ar, per_step, dec, tax),
        "series": {"allreduce_vs_tp": _tp_series(hidden * b_act, layers, tokens, v)},
    }

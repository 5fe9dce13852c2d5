"""All-reduce tax of tensor parallelism: ring all-reduce time per step and per token.

  Megatron-style TP does 2 all-reduces per layer in the forward pass (after attention and
  after the MLP; Shoeybi et al., arXiv 1909.08053 §3), each of tokens × hidden × b bytes.
  Ring all-reduce of M bytes over n ranks, per-direction link bandwidth B, per-hop latency α:
      t = t_base + 2(n − 1) × α + 2(n − 1)/n × M / B
  (bandwidth term: NCCL-tests doc/PERFORMANCE.md; latency term: NCCL src/graph/tuning.cc,
  latency = baseLat + nsteps × hwLat with nsteps = 2(n − 1) for a ring all-reduce).
  Bus bandwidth = algbw × 2(n − 1)/n with algbw = M / t (NCCL-tests), so busbw = B when α = 0.

B on the accelerator's own link depends on how it is wired (accelerators.toml scale_up_topology):
  switched (NVSwitch): the chip's whole per-direction bandwidth;
  mesh (MI300X, Gaudi 3): rings over n GPUs can use the n − 1 direct links to the other members,
      B = min(total, (n − 1) × one link) (the complete directed graph on n nodes splits into
      n − 1 rings; AMD measures RCCL all-reduce at 8 GPUs near 7 links' worth);
  torus (TPU ICI): a ring along one dimension uses that dimension's two links, B = min(total,
      2 × one link); where the per-link figure is not sourced the chip total is used (upper bound).

Multi-server rings (a network link, e.g. InfiniBand, with gpus_per_node GPUs per server), after
NCCL's own cost model (src/graph/tuning.cc): the ring spans N = ceil(n / gpus_per_node) servers;
of its 2(n − 1) steps only 2(N − 1) cross servers and pay the network latency; the others run over
the scale-up link and pay max(α, the network post overhead, 1 µs). Several rings cross the server
boundary through different NICs, so the cross-server bandwidth per GPU is NIC bandwidth × NICs per
server, and the ring moves at the slower of that and the in-server B:
  t = t_base + 2(N − 1) α_net + [2(n − 1) − 2(N − 1)] max(α, α_ovh)
        + 2(n − 1)/n × M / min(B, NICs × B_NIC)
One GPU per server (gpus_per_node = 1) makes every step a network step with one NIC's bandwidth.
With efficiency 1.0 and t_base = 0 the times are lower bounds. Compute/communication overlap
is not modelled: the tax is reported as if the all-reduces sit on the critical path, as they
do in a plain TP forward pass.
"""
from __future__ import annotations

import math

from ..formats import bytes_per_element
from ..params import weight_bytes
from ..presets import _load
from ..schema import choice, dtype_field, integer, number, output, series, step
from .ring import LINKS, bus_bandwidth, ring_allreduce_time, ring_bandwidth, ring_time, scale_up_ring  # noqa: F401 (re-exported)
from .steptime import decode_step, deployment, deployment_fields

SRAM_PARTS = {e["id"]: e for e in _load("interconnects.toml")["sram_part"]}
PLOT_DEGREES = (2, 4, 8, 16, 32, 64, 72)



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
        choice("link", "Link", "accelerator", links,
               "A network link (InfiniBand) joins servers of 'GPUs per server'; the steps inside a server "
               "use the accelerator's own link."),
        integer("gpus_per_node", "GPUs per server (network links)", 8, 1, 1024, "GPUs",
                "Used only with a network link. Of the ring's 2(n − 1) steps, the 2(servers − 1) that cross "
                "servers pay the network latency (NCCL's model); 1 puts every GPU in its own server."),
        integer("nics_per_node", "NICs per server (network links)", 0, 0, 1024, "NICs",
                "Rings cross servers through all of them; 0 means one per GPU."),
        number("link_bandwidth_gb_per_s", "Custom link bandwidth, per direction", 450.0, 0.1, 100_000.0, "GB/s",
               "Used only when Link is custom."),
        number("latency_per_hop_us", "Latency per ring step", 0.6, 0.0, 1000.0, "µs",
               "Used with 'accelerator' and 'custom' links, and for the steps inside a server with a network "
               "link. NCCL's model: NVLink 0.6, PCIe 1.0, network 2.7 µs.", 0.1),
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
                    "bandwidth. On the accelerator's own link the bandwidth follows its wiring: all of it "
                    "through a switch, the n − 1 peer links on a mesh (MI300X, Gaudi 3). Over a network "
                    "(NCCL's ring model) only the 2(servers − 1) steps that cross servers pay network "
                    "latency, the rest run over the scale-up link, and cross-server bandwidth is NIC "
                    "bandwidth × NICs per server. Compared with the decode step's own lower bound to give "
                    "the tax. No overlap of communication with compute is assumed."),
    "inputs": _fields(),
    "outputs": [
        output("allreduce_bytes_per_token_per_layer", "All-reduce payload per token per layer (2 × hidden × b)",
               "B", "bytes"),
        output("message_bytes", "Message per all-reduce (tokens × hidden × b)", "B", "bytes"),
        output("allreduces_per_step", "All-reduces per forward pass (2 × layers)", "", "integer"),
        output("link_bandwidth_bytes_per_s", "Link bandwidth used, per direction", "B/s", "rate"),
        output("latency_per_hop_s", "Latency per ring step (average over the steps)", "s", "seconds"),
        output("servers_spanned", "Servers the ring spans", "", "integer"),
        output("network_steps", "Ring steps that cross servers", "", "integer"),
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


def _tp_series(per_token_msg: float, layers: int, tokens: int, v: dict) -> dict:
    base, eff = v["base_latency_us"] * 1e-6, v["link_efficiency"]
    ys = []
    for k, e in LINKS.items():
        if e.get("kind") == "network" and v["gpus_per_node"] > 1 and not v["hardware"].scale_up_bandwidth_bytes_per_s:
            continue                     # the steps inside a server need the accelerator's own link
        rings = [scale_up_ring({**v, "link": k}, n) for n in PLOT_DEGREES]
        t = [2 * layers * ring_time(per_token_msg * tokens, n, r, eff, base)[0] * 1e3
             for n, r in zip(PLOT_DEGREES, rings)]
        name = e["name"] + (f" (servers of {v['gpus_per_node']})" if e.get("kind") == "network" else "")
        ys.append((name, "ms", t))
    return series(f"All-reduce time per step vs TP degree ({tokens} tokens per step)", "TP degree n", "GPUs",
                  PLOT_DEGREES, ys)


def _steps(v, n, layers, hidden, b_act, msg, bw, r, t_ar, per_step, dec, tax):
    dec_t = dec.time_s
    eff, base = v["link_efficiency"], v["base_latency_us"] * 1e-6
    out = [step("Message per all-reduce", "M = tokens × hidden × b", f"{v['batch_size']} × {hidden} × {b_act:g}",
                msg, "B")]
    if r["rule"]:
        out.append(step("Ring bandwidth on the chip's links", r["rule"],
                        f"{v['hardware'].name}, n = {n}, × efficiency {eff:g}", bw, "B/s"))
    if r["nodes"] > 1:
        intra_steps = 2 * (n - 1) - r["net_steps"]
        in_bw = "" if intra_steps == 0 else f"{r['intra_bw'] * eff:.6g}, "
        out += [
            step("Servers spanned", "N = ceil(n ÷ GPUs per server)", f"ceil({n} ÷ {v['gpus_per_node']})",
                 r["nodes"], ""),
            step("Ring bandwidth", "min(B scale-up, NICs × B NIC)" if intra_steps else "B NIC",
                 f"min({in_bw}{r['nics']} × {r['inter_bw'] / r['nics'] * eff:.6g})" if intra_steps
                 else f"{bw:.6g}", bw, "B/s"),
            step("Time per all-reduce",
                 "t_base + 2(N − 1) × α_net + [2(n − 1) − 2(N − 1)] × max(α, α_ovh) + 2(n − 1)/n × M ÷ B",
                 f"{base:.6g} + {r['net_steps']} × {r['net_hop']:.6g} + {intra_steps} × "
                 f"max({r['hop']:.6g}, {r['ovh']:.6g}) + 2 × {n - 1}/{n} × {msg:.6g} ÷ {bw:.6g}", t_ar, "s"),
        ]
    else:
        out.append(step("Time per all-reduce", "t_base + 2(n − 1) × α + 2(n − 1)/n × M ÷ B",
                        f"{base:.6g} + 2 × {n - 1} × {r['hop']:.6g} + 2 × {n - 1}/{n} × {msg:.6g} ÷ {bw:.6g}",
                        t_ar, "s"))
    return out + [
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
    r = scale_up_ring(v, n)
    msg = tokens * hidden * b_act
    t_ar, bw, hop_total = ring_time(msg, n, r, v["link_efficiency"], v["base_latency_us"] * 1e-6)
    hop = hop_total / (2 * (n - 1)) if n > 1 else r["hop"]
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
        "servers_spanned": r["nodes"],
        "network_steps": r["net_steps"],
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
        "link_name": r["name"],
        "derivation": _steps(v, n, layers, hidden, b_act, msg, bw, r, t_ar, per_step, dec, tax),
        "series": {"allreduce_vs_tp": _tp_series(hidden * b_act, layers, tokens, v)},
    }

"""All-reduce tax of tensor parallelism: TP communication time per step and per token.

  Megatron-style TP does 2 all-reduces per layer in the forward pass (after attention and
  after the MLP; Shoeybi et al., arXiv 1909.08053 §3), each of tokens × hidden × b bytes, plus
  one after the vocab-parallel input embedding (vLLM `VocabParallelEmbedding.forward`: "Reduce
  across all the model parallel GPUs", commit 7f5d141) and a gather of the vocab-parallel
  logits (vLLM `LogitsProcessor._gather_logits`, commit 307e086: gather, or all-gather on
  TPU), one row per sequence: 2L + 1 all-reduces and one gather per forward pass (L + 1 where FFNs are layers of
  their own, as Nemotron-H's MLP blocks: one all-reduce a layer), and one more of tokens × (dt_rank + 2N) × b inside
  each Mamba-1 layer (Jamba), whose x_proj is row-parallel (vLLM v0.34.0 layers/mamba/mamba_mixer.py), or of
  tokens × 2 × 4 B inside each attention layer whose q/k RMSNorm spans all heads (MiniMax-M2: SGLang 0.5.8
  models/minimax_m2.py MiniMaxM2RMSNormTP.forward_qk, q's and k's FP32 sums of squares). The gather
  is costed as a ring all-gather of rows × vocab × b bytes (NCCL: n − 1 steps).
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
the scale-up link and pay max(α, the network post overhead: 1 µs, 2 on AMD hosts). Several rings cross the server
boundary through different NICs, so the cross-server bandwidth per GPU is NIC bandwidth × NICs per
server, and the ring moves at the slower of that and the in-server B:
  t = t_base + 2(N − 1) α_net + [2(n − 1) − 2(N − 1)] max(α, α_ovh)
        + 2(n − 1)/n × M / min(B, NICs × B_NIC)
One GPU per server (gpus_per_node = 1) makes every step a network step with one NIC's bandwidth.
Protocols (NCCL v2.30.7-1 src/graph/tuning.cc, constants in interconnects.toml [nccl]): each of
LL, LL128 and Simple has its own base and per-step latency; ring LL moves at min(llMaxBw,
0.5 × B) (llMaxBw 141 GB/s on Hopper, 282 on Blackwell, 39 / 20.4 GB/s across 2 / 3+ servers on Intel hosts,
22.5 / 19.0 on AMD ones),
LL128 at 0.92 × B, Simple at B. 'auto' takes the fastest, as NCCL's tuner does. With one GPU
per server NCCL charges the Tree network latency per network step (5.0 us for LL). Other
algorithms (one-shot, two-shot, fused, NVLS) are in direct.py. The NCCL latencies are the constants
of its tuning model, not measurements; 'custom' latencies with t_base = 0 give a floor. Compute/communication overlap
is not modelled: the tax is reported as if the all-reduces sit on the critical path, as they
do in a plain TP forward pass.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InputError
from ..formats import bytes_per_element
from ..params import (
    has_mamba1_mixer,
    inner_allreduce_layers,
    layer_allreduces,
    mixer_inner_allreduce,
    moe_layer_count,
    weight_bytes,
)
from ..schema import choice, dtype_field, integer, mark, number, output, series, step
from .direct import ALGORITHMS, direct_time
from .deployment import deployment_fields
from .ring import (LINKS, NCCL, PROTOCOL_NAMES, PROTOCOLS, Ring, Transfer, _check_domain, bus_bandwidth, host_cpu_field,
                   joins_gpus, ring_time, scale_up_ring)
from .steptime import Deployment, StepCost, decode_step, deployment, without_overhead

PLOT_DEGREES = (2, 4, 8, 16, 32, 64, 72)
VENDOR_NAMES = {"intel": "Intel", "amd": "AMD"}  # the host CPU's vendor, which sets NCCL's figures across servers
ALGORITHM_NAMES = {"ring": "Ring (NCCL)", "one-shot": "One-shot (custom all-reduce)",
                   "two-shot": "Two-shot (custom all-reduce, MultiShot)",
                   "fused": "Fused with residual add and RMSNorm (FlashInfer; SGLang, vLLM)",
                   "nvls": "NVLink SHARP (NCCL NVLS)"}

ALGORITHM_HELP = ("One-shot, two-shot, fused and NVLS run inside one scale-up domain; NVLS needs NVSwitch (Hopper or "
                  "later). Fused is FlashInfer's all-reduce with the norm after it, one measured kernel (SGLang's "
                  "--enable-flashinfer-allreduce-fusion; vLLM's fuse_allreduce_rms at -O2).")


OWN_LINK = ("accelerator", "The accelerator's own link (its PCIe where it has no scale-up link)")


# the tax is against kernel time only, the decode step a lower bound at the defaults (the chip's own peak)
DEPLOYMENT_OVERRIDES = {
    "model": {"default": "llama-3.1-70b"},
    "efficiency_of": {"default": "chip"},
    "num_gpus": {"label": "Tensor-parallel degree n", "default": 8,
                 "help": "GPUs the weights are split across; each layer all-reduces across all of them."},
}


def _fields() -> list[dict]:
    fields = deployment_fields(1.0, 1.0, overhead_field=False, overrides=DEPLOYMENT_OVERRIDES)
    links = ([OWN_LINK] + [(k, e["name"]) for k, e in LINKS.items()]
             + [("custom", "Custom (the bandwidth field below)")])
    return fields + [
        integer("batch_size", "Tokens per step", 1, 1, 1_000_000, "tokens",
                "Decode: the batch (one token per sequence). Prefill: the prompt tokens in the step."),
        choice("phase", "Step", "decode", [("decode", "Decode (one logits row per token)"),
                                           ("prefill", "Prefill of one prompt (one logits row)")],
               "Sets the rows of the logits gather: engines compute logits only for each sequence's last token."),
        integer("context_tokens", "Context per sequence", 4096, 1, 10_000_000, "tokens"),
        dtype_field("activation_dtype", "Activation format (all-reduce payload)", "bf16"),
        choice("link", "Link", "accelerator", links,
               "A network link (InfiniBand) joins servers of 'GPUs per server'; the steps inside a server "
               "use the accelerator's own link."),
        choice("algorithm", "All-reduce algorithm", "ring", [(k, ALGORITHM_NAMES[k]) for k in ALGORITHMS],
               ALGORITHM_HELP),
        choice("protocol", "NCCL protocol (ring)", "auto",
               [("auto", "Fastest for this message (NCCL's tuner)")] + [(p, PROTOCOL_NAMES[p]) for p in PROTOCOLS],
               "LL: lowest latency, at most half the bandwidth; LL128: 92%; Simple: full bandwidth, most latency."),
        choice("latency_source", "Latencies", "nccl", [("nccl", "NCCL v2.30.7 cost-model constants"),
                                                       ("custom", "Custom (the two fields below)")]),
        integer("gpus_per_node", "GPUs per server (network links)", 8, 1, 1024, "GPUs",
                "Used only with a network link. Of the ring's 2(n − 1) steps, the 2(servers − 1) that cross "
                "servers pay the network latency (NCCL's model); 1 puts every GPU in its own server."),
        integer("nics_per_node", "NICs per server (network links)", 0, 0, 1024, "NICs",
                "Rings cross servers through all of them; 0 means one per GPU."),
        number("link_bandwidth_gb_per_s", "Custom link bandwidth, per direction", 450.0, 0.1, 100_000.0, "GB/s",
               "Used only when Link is custom."),
        number("latency_per_hop_us", "Custom latency per step", 0.6, 0.0, 1000.0, "µs",
               "Used with custom latencies, for every step inside a scale-up domain (network steps keep "
               "NCCL's constants). NCCL's ring LL values: NVLink 0.6, PCIe 1.0 µs.", 0.1),
        number("base_latency_us", "Custom fixed latency per call", 0.0, 0.0, 1000.0, "µs",
               "Used with custom latencies. 0 with the NVLink step latency gives a floor.", 0.1),
        number("link_efficiency", "Link efficiency", 1.0, 0.01, 1.0, "",
               "Fraction of the link's peak an all-reduce achieves.", 0.01),
        host_cpu_field(),
    ]


SCHEMA = {
    "name": "allreduce",
    "title": "All-reduce tax of tensor parallelism",
    "description": ("TP communication per forward pass: 2 all-reduces per layer (1 where FFNs are layers of their "
                    "own, as Nemotron-H's) plus one after the vocab-parallel embedding, each of tokens × hidden × "
                    "bytes, one more of tokens × (dt_rank + 2N) × bytes inside each of Jamba's Mamba layers (its "
                    "row-parallel x_proj) or of tokens × 2 FP32 sums inside each of MiniMax-M2's attention layers "
                    "(its q/k norm over all heads), and a gather of the logits. Ring all-reduce as "
                    "NCCL v2.30.7 models it: per-protocol base and step latencies, LL capped at min(llMaxBw, half "
                    "the link), only the 2(servers − 1) steps that cross servers paying network latency, the Tree "
                    "network latency with one GPU per server; on PCIe in one server, past one CPU socket's 4 GPUs, "
                    "capped by the link between the sockets. One-shot, two-shot, fused and NVLS as alternatives "
                    "inside one scale-up domain. Compared with the step's own lower bound to give the tax; no "
                    "overlap of communication with compute."),
    "inputs": _fields(),
    "outputs": [
        output("allreduce_bytes_per_token_per_layer",
               "All-reduce payload per token per layer (2 × hidden × b; 1 × where FFNs are layers of their own)",
               "B", "bytes"),
        output("message_bytes", "Message per all-reduce (tokens × hidden × b)", "B", "bytes"),
        output("allreduces_per_step", "All-reduces of the hidden state per forward pass (2 × layers + 1; layers + 1 "
               "where FFNs are layers of their own; Jamba's x_proj and MiniMax-M2's q/k norm ones apart)", "",
               "integer"),
        output("link_bandwidth_bytes_per_s", "Bandwidth used, per direction, after the protocol's derating",
               "B/s", "rate"),
        output("latency_per_hop_s", "Latency per ring step, base latency included (total latency ÷ steps)", "s",
               "seconds"),
        output("servers_spanned", "Servers the ring spans", "", "integer"),
        output("network_steps", "Ring steps that cross servers", "", "integer"),
        output("time_per_allreduce_s", "Time per all-reduce", "s", "seconds"),
        output("latency_fraction", "Share of all-reduce time that is latency", "", "percent"),
        output("transfer_time_per_allreduce_s", "Bandwidth term of one all-reduce (bytes received ÷ B)", "s",
               "seconds"),
        output("bus_bandwidth_bytes_per_s", "Bus bandwidth achieved (NCCL-tests definition)", "B/s", "rate"),
        output("logits_gather_time_s", "Logits gather per forward pass (rows × vocab × b)", "s", "seconds"),
        output("bytes_sent_per_gpu_per_step", "Bytes each GPU receives per step (all-reduces)", "B", "bytes"),
        output("allreduce_time_per_step_s", "TP communication per step (all-reduces + logits gather)", "s",
               "seconds"),
        output("allreduce_time_per_token_s", "TP communication per token", "s", "seconds"),
        output("decode_step_time_s_lower_bound", "Step without communication (lower bound)", "s", "seconds"),
        output("step_time_with_allreduce_s", "Step time with communication (no overlap)", "s", "seconds"),
        output("allreduce_tax_fraction", "Communication share of the step (the tax)", "", "percent"),
        output("tokens_per_s_per_user_with_allreduce", "Tokens/s per user with communication", "tokens/s", "rate"),
        output("weight_sweep_time_per_gpu_s", "Weight sweep per GPU (weight bytes ÷ (n × HBM BW))", "s", "seconds"),
        output("largest_tp_with_allreduce_below_sweep",
               "Largest TP degree whose communication per step stays under the weight sweep", "GPUs", "integer"),
        output("joules_per_token_at_board_power",
               "Energy per token, estimate at board power (TDP × n × step ÷ tokens; not a bound)", "J", "number"),
        output("hbm_sweep_time_s", "HBM sweep time of one accelerator (capacity ÷ bandwidth)", "s", "seconds"),
        output("weight_bytes", "Weight bytes (all parameters)", "B", "bytes"),
        output("min_gpus_for_weights", "Accelerators needed just to hold the weights", "chips", "integer"),
    ],
}


def _latencies(v: dict) -> dict:
    if v["latency_source"] == "custom":
        return {"base": v["base_latency_us"] * 1e-6, "hop": v["latency_per_hop_us"] * 1e-6}
    return {"base": None, "hop": None}


def one_allreduce(msg: float, n: int, r: Ring, v: dict) -> Transfer:
    """One all-reduce by the chosen algorithm (ring: with the chosen or fastest protocol)."""
    if v["algorithm"] == "ring":
        return ring_time(msg, n, r, v["link_efficiency"], _latencies(v), v["protocol"])
    return direct_time(msg, n, r, v["link_efficiency"], _latencies(v), v["algorithm"])


def gather_time(rows: int, vocab: int, b: float, n: int, r: Ring, v: dict) -> float:
    """Logits gather, costed as a ring all-gather of rows × vocab × b bytes (NCCL: n − 1 steps)."""
    return ring_time(rows * vocab * b, n, r, v["link_efficiency"], _latencies(v), v["protocol"], passes=1).time


def comm_per_step(v: dict, n: int, tokens: int, r: Ring | None = None) -> float:
    """Seconds of TP communication in one forward pass at degree n: the layers' all-reduces (2L, or L where FFNs are
    layers of their own) and the embedding's, + the gather."""
    model, b = v["model"], bytes_per_element(v["activation_dtype"], "activation_dtype")
    r = r or scale_up_ring(v, n)
    rows = tokens if v["phase"] == "decode" else 1
    t = one_allreduce(tokens * model.hidden_size * b, n, r, v).time
    count, inner = mixer_allreduces(model, tokens, b, n, r, v)
    return allreduces_per_step(model) * t + count * inner.time + gather_time(rows, model.vocab_size, b, n, r, v)


def allreduces_per_step(model) -> int:
    """A forward pass's all-reduces under plain TP: one after each mixer and each FFN (params.layer_allreduces: 2L,
    L where FFNs are layers of their own) and the embedding's."""
    return layer_allreduces(model, model.num_layers, moe_layer_count(model), True) + 1


def mixer_allreduces(model, tokens: int, b: float, n: int, r: Ring, v: dict) -> tuple[int, Transfer]:
    """(count, one) of the all-reduces mixers run inside themselves (params.mixer_inner_allreduce: Jamba's x_proj,
    dt_rank + 2N activations of b bytes a token; MiniMax-M2's q/k norm, two FP32 sums a token), one a layer that runs
    one. No norm of the residual follows them, so the fused algorithm's are priced as the ring. (0, a zero transfer)
    for every other model."""
    per_token = mixer_inner_allreduce(model, b)
    if not per_token:
        return 0, Transfer(0.0, 0.0, 0.0, 0.0)
    algo = {**v, "algorithm": "ring"} if v["algorithm"] == "fused" else v
    return inner_allreduce_layers(model), one_allreduce(tokens * per_token, n, r, algo)


def _ring_in_domain(v: dict, n: int) -> Ring:
    """The ring over n GPUs, or InputError where n is past what the link joins."""
    r = scale_up_ring(v, n)
    _check_domain(n, r.domain, r.name)
    return r


def _point(v: dict, link: str, n: int, tokens: int) -> float | None:
    """All-reduce ms per step at degree n on a link, or None where the link or algorithm cannot go."""
    try:
        w = {**v, "link": link}
        return comm_per_step(w, n, tokens, _ring_in_domain(w, n)) * 1e3
    except InputError:
        return None


def _tp_series(tokens: int, v: dict) -> dict:
    ys, degrees = [], sorted({*PLOT_DEGREES, v["num_gpus"]} - {1})
    for k, e in LINKS.items():
        if e.get("kind") == "network" and v["gpus_per_node"] > 1 and not joins_gpus(v["hardware"]):
            continue                     # the steps inside a server need the accelerator's own link (or its PCIe)
        name = e["name"] + (f" (servers of {v['gpus_per_node']})" if e.get("kind") == "network" else "")
        ys.append((name, "ms", [_point(v, k, n, tokens) for n in degrees]))
    per_step = f"{tokens:,} token{'' if tokens == 1 else 's'} per step"
    plot = series(f"TP communication per step vs TP degree ({per_step}; gaps: past the link's "
                  "domain or not possible with this algorithm)", "TP degree n", "GPUs", degrees, ys)
    n = v["num_gpus"]
    if n == 1:
        return plot
    return mark(plot, "num_gpus", n, y=_point(v, v["link"], n, tokens), name=f"your link at {n} GPUs")


ENERGY_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def _energy_series(v: dict, dep, r: Ring) -> dict:
    """J per token at board power against batch: an estimate (TDP × modelled step ÷ tokens), not a bound."""
    n, watts = v["num_gpus"], dep.accelerator.power_watts or 0.0
    batches = sorted({*ENERGY_BATCHES, v["batch_size"]})
    ys = [watts * n * (decode_step(dep, b, v["context_tokens"]).time_s + comm_per_step(v, n, b, r)) / b
          if watts else None for b in batches]        # no published power: gaps, not zeros
    return mark(series("Energy per token at board power vs batch (estimate: TDP × modelled step ÷ tokens)",
                       "Batch", "sequences", batches, [("J per token", "J", ys)], log_axes=True),
                "batch_size", v["batch_size"])


def largest_tp_below_sweep(v: dict, tokens: int, w_bytes: float) -> int:
    """Largest n (2 ..  the link's domain, at most 72) whose communication per step ≤ W ÷ (n × BW)."""
    bw_hbm = v["hardware"].memory_bandwidth_bytes_per_s * v["bandwidth_efficiency"]
    best = 1
    for n in range(2, 73):
        try:
            if comm_per_step(v, n, tokens, _ring_in_domain(v, n)) <= w_bytes / (n * bw_hbm):
                best = n
        except InputError:
            break
    return best


@dataclass(frozen=True)
class Communication:
    """TP communication in one forward pass at the reader's degree, and the step it is added to."""
    n: int
    tokens: int
    allreduces: int       # per forward pass (allreduces_per_step)
    b_act: float          # bytes per activation element
    ring: Ring
    msg: float            # bytes per all-reduce: tokens × hidden × b
    ar: Transfer          # one all-reduce
    gather: float         # s, the logits gather
    dec: StepCost         # the step without communication
    mixer_ars: int = 0    # per forward pass, inside mixers (mixer_allreduces)
    mixer_ar: Transfer = Transfer(0.0, 0.0, 0.0, 0.0)

    @property
    def per_step(self) -> float:
        return self.allreduces * self.ar.time + self.mixer_ars * self.mixer_ar.time + self.gather

    @property
    def tax(self) -> float:
        return self.per_step / (self.dec.time_s + self.per_step)


def communication(v: dict, dep: Deployment) -> Communication:
    n, tokens, model = v["num_gpus"], v["batch_size"], dep.model
    b_act = bytes_per_element(v["activation_dtype"], "activation_dtype")
    r = _ring_in_domain(v, n)
    msg = tokens * model.hidden_size * b_act
    gather = gather_time(tokens if v["phase"] == "decode" else 1, model.vocab_size, b_act, n, r, v)
    inner = mixer_allreduces(model, tokens, b_act, n, r, v)
    return Communication(n, tokens, allreduces_per_step(model), b_act, r, msg, one_allreduce(msg, n, r, v), gather,
                         decode_step(dep, tokens, v["context_tokens"]), *inner)


def _ar_step(v: dict, c: Communication) -> dict:
    algo, n, ar, r = v["algorithm"], c.n, c.ar, c.ring
    if algo == "ring":
        proto = PROTOCOL_NAMES[ar.protocol] + (" (fastest)" if v["protocol"] == "auto" else "")
        terms = [(ar.latency, "s"), n - 1, n, (c.msg, "B"), (ar.bw, "B/s")]
        if r.nodes > 1:
            return _network_ar_step(proto, ar, r, terms)
        return step(f"Time per all-reduce, ring {proto}", "t_base + 2(n − 1) × α + 2(n − 1)/n × M ÷ B",
                    "{} + 2 × {}/{} × {} ÷ {}", terms, ar.time, "s")
    formula = {"one-shot": "t0 + α + (n − 1) × M ÷ B", "two-shot": "t0 + 2α + 2(n − 1)/n × M ÷ B",
               "fused": "t_fused + 2(n − 1)/n × M ÷ B", "nvls": "t_NVLS + M ÷ (η × B)"}[algo]
    return step(f"Time per all-reduce, {ALGORITHM_NAMES[algo]}", formula, "{} + {} ÷ {}",
                [(ar.latency, "s"), (ar.volume, "B"), (ar.bw, "B/s")], ar.time, "s")


def _network_ar_step(proto: str, ar: Transfer, r: Ring, terms: list) -> dict:
    """The ring across servers: its network steps and, by the host CPU's vendor, the post overhead its in-server steps
    pay (Simple 3 ×) and, under LL, the row of LL's cap across servers."""
    by_host, ovh = [], []  # what the host CPU's vendor sets here, and the overhead's term
    if r.ppn1:
        tree = ", Tree network latency: one GPU per server"
    else:
        tree, simple = "", ar.protocol == "simple"
        by_host.append(f"α_ovh {{}}{' (3 × for Simple)' if simple else ''}")
        ovh = [(r.ovh * (NCCL["simple_net_overhead_factor"] if simple else 1.0), "s")]
    if ar.protocol == "ll":
        by_host.append("its row of LL's cap across servers")
    host = tree + (f"; {VENDOR_NAMES[r.vendor]} host: " + ", ".join(by_host) if by_host else "")
    return step(f"Time per all-reduce, ring {proto}",
                "t_base + 2(N − 1) × α_net + [2(n − 1) − 2(N − 1)] × max(α, α_ovh) + 2(n − 1)/n × M ÷ B",
                "{} + 2 × {}/{} × {} ÷ {} ({} servers, {} network steps" + host + ")",
                terms + [r.nodes, r.net_steps] + ovh, ar.time, "s")


def _bandwidth_steps(v: dict, c: Communication) -> list[dict]:
    # names (the chip, the protocol) stay text terms: they say which rule the number follows
    out = []
    if c.ring.rule:
        out.append(step("Ring bandwidth on the chip's links", c.ring.rule, "{}, n = {}, × efficiency {}",
                        [v["hardware"].name, c.n, v["link_efficiency"]], c.ring.intra_bw * v["link_efficiency"],
                        "B/s"))
    return out + [step("Bandwidth after the protocol", "LL: min(llMaxBw, 0.5 B); LL128: 0.92 B; Simple: B; "
                       "NVLS: η B" if v["algorithm"] in ("ring", "nvls") else "B", "{}",
                       [PROTOCOL_NAMES.get(c.ar.protocol, ALGORITHM_NAMES[v["algorithm"]])], c.ar.bw, "B/s")]


def _steps(v: dict, c: Communication) -> list[dict]:
    dec_t, comm = c.dec.time_s, (c.per_step, "s")
    return [step("Message per all-reduce", "M = tokens × hidden × b", "{} × {} × {}",
                 [c.tokens, v["model"].hidden_size, c.b_act], c.msg, "B")] + _bandwidth_steps(v, c) + [
        _ar_step(v, c),
        step("Logits gather", "ring all-gather of rows × vocab × b", "vocab {}", [v["model"].vocab_size], c.gather,
             "s"),
        *_mixer_steps(v, c),
        _total_step(c, v["model"]),
        step("Step without communication", "max(bytes ÷ (n × HBM BW), FLOPs ÷ (n × peak))", "max({}, {})",
             [(c.dec.memory_time_s, "s"), (c.dec.compute_time_s, "s")], dec_t, "s"),
        step("All-reduce tax", "t_comm ÷ (t_step + t_comm)", "{} ÷ ({} + {})", [comm, (dec_t, "s"), comm], c.tax,
             "share"),
    ]


def _inner_words(model) -> tuple[str, str, str]:
    """(what, rule, layers) naming the all-reduce the model's mixers run inside themselves."""
    if has_mamba1_mixer(model):
        return "Mamba x_proj all-reduce, inside each Mamba layer", "row-parallel x_proj: tokens × (dt_rank + 2N) × b", \
            "Mamba layers"
    return ("q/k norm all-reduce, inside each attention layer",
            "one RMSNorm over all heads: tokens × 2 sums of squares × 4 B (FP32)", "attention layers")


def _mixer_steps(v: dict, c: Communication) -> list[dict]:
    if not c.mixer_ars:
        return []
    msg = c.tokens * mixer_inner_allreduce(v["model"], c.b_act)
    what, rule, layers = _inner_words(v["model"])
    fused = ", as the ring: no norm of the residual follows it" if v["algorithm"] == "fused" else ""
    return [step(what, rule, "{} " + layers + ", a message of {} each" + fused, [c.mixer_ars, (msg, "B")],
                 c.mixer_ar.time, "s")]


def _total_step(c: Communication, model) -> dict:
    rule = "A = 2L + 1 (L + 1 where FFNs are layers of their own)"
    if c.mixer_ars:
        return step("TP communication per step", f"A × t + A_x × t_x + t_gather, {rule}, A_x {_inner_words(model)[2]}",
                    "{} × {} + {} × {} + {}", [c.allreduces, (c.ar.time, "s"), c.mixer_ars, (c.mixer_ar.time, "s"),
                                               (c.gather, "s")], c.per_step, "s")
    return step("TP communication per step", f"A × t + t_gather, {rule}", "{} × {} + {}",
                [c.allreduces, (c.ar.time, "s"), (c.gather, "s")], c.per_step, "s")


def _transfer_outputs(c: Communication) -> dict:
    ar = c.ar
    return {
        "message_bytes": c.msg,
        "allreduces_per_step": c.allreduces,
        "link_bandwidth_bytes_per_s": ar.bw,
        "latency_per_hop_s": ar.latency / ar.steps if ar.steps else 0.0,
        "servers_spanned": c.ring.nodes,
        "network_steps": c.ring.net_steps,
        "time_per_allreduce_s": ar.time,
        "latency_fraction": ar.latency / ar.time if ar.time > 0 else 0.0,
        "transfer_time_per_allreduce_s": ar.time - ar.latency,
        "bus_bandwidth_bytes_per_s": bus_bandwidth(c.msg, c.n, ar.time),
        "logits_gather_time_s": c.gather,
        "bytes_sent_per_gpu_per_step": c.allreduces * ar.volume + c.mixer_ars * c.mixer_ar.volume,
        "allreduce_time_per_step_s": c.per_step,
        "allreduce_time_per_token_s": c.per_step / c.tokens,
    }


def compute(v: dict) -> dict:
    dep = without_overhead(deployment(v))  # a lower bound: kernel time only
    c = communication(v, dep)
    n, tokens, acc, dec_t, per_step = c.n, c.tokens, dep.accelerator, c.dec.time_s, c.per_step
    w_bytes = weight_bytes(dep.model, v["weight_dtype"], "weight_dtype")
    return {
        # the layers' all-reduces (all but the embedding's) per layer: 2, or 1 where FFNs are layers of their own
        "allreduce_bytes_per_token_per_layer": (c.allreduces - 1) / dep.model.num_layers * dep.model.hidden_size
        * c.b_act,
        **_transfer_outputs(c),
        "decode_step_time_s_lower_bound": dec_t,
        "step_time_with_allreduce_s": dec_t + per_step,
        "allreduce_tax_fraction": c.tax,
        "tokens_per_s_per_user_with_allreduce": 1 / (dec_t + per_step),
        "weight_sweep_time_per_gpu_s": w_bytes / (n * acc.memory_bandwidth_bytes_per_s * v["bandwidth_efficiency"]),
        "largest_tp_with_allreduce_below_sweep": largest_tp_below_sweep(v, tokens, w_bytes),
        "joules_per_token_at_board_power": (acc.power_watts or 0.0) * n * (dec_t + per_step) / tokens,
        "hbm_sweep_time_s": acc.memory_bytes / acc.memory_bandwidth_bytes_per_s,
        "weight_bytes": w_bytes,
        "min_gpus_for_weights": math.ceil(w_bytes / acc.memory_bytes),
        "protocol_chosen": c.ar.protocol,
        "link_name": c.ring.name,
        "derivation": _steps(v, c),
        "series": {"allreduce_vs_tp": _tp_series(tokens, v),
                   "energy_vs_batch": _energy_series({**v, "phase": "decode"}, dep, c.ring)},
    }

"""All-to-all dispatch and combine of an expert-parallel MoE layer: bytes, time over the EP group's links, and
its share of the step.

Per GPU and MoE layer (T tokens on this GPU, top_k copies each, hidden d):
    dispatch bytes = T × k × d × b_dispatch   (FP8: 1 B + one FP32 scale per 128 channels, DeepEP
                                               csrc/kernels/legacy/internode_ll.cu kNumPerChannels = 128)
    combine bytes  = T × k × d × b_combine    (BF16, 2 B: DeepEP README "FP8 dispatching and BF16 combining")
Of the N GPUs in the EP group, 1/N of the copies stay on this GPU, (g − 1)/N cross the scale-up link to the
g − 1 others in its domain (g = min(GPUs per domain, N)), and (N − g)/N leave the domain over the NICs:
    t = α + max(in-domain bytes ÷ (B_up × η), cross-domain bytes ÷ (B_NIC per GPU × η)) × imbalance + t_0
That is the deployment model's all-to-all (cluster.py alltoall_s, from the Part 12 branch; α is one NCCL LL step
latency, 0.6 µs on NVLink, 1.0 µs on PCIe or 2.7 µs on the network, a floor), sent at imbalance × the mean
payload: the hottest GPU receives imbalance × the mean (expert_load.py's max ÷ mean), and both phases wait for it.
B_up: the accelerator's per-direction scale-up bandwidth (accelerators.toml), on a chip without one its PCIe link as
NCCL models it (ring.pcie_only: L40S, L4), or a custom figure. On PCIe past one CPU socket's GPUs (a two-socket
server of 4 a socket, an assumption), what the a GPUs behind one socket send to the b behind the other also crosses
the link between the sockets, a × b ÷ N of one GPU's bytes each way, at B_socket (NCCL's figure for the host CPU),
and the in-domain term is the slower of the two paths (cluster.alltoall_s). Under imbalance that link carries
L = a × (imbalance + (b − 1)(N − imbalance) ÷ (N − 1)) ÷ N of one GPU's bytes (cluster.socket_share): the hottest GPU
behind the receiving socket, the other N − 1 sharing the rest evenly. B_NIC per GPU:
NICs per server × one NIC (interconnects.toml) ÷ GPUs per server. One copy per (token, expert): no per-node
de-duplication (DeepEP's normal kernels send a token once per node and forward over NVLink, which lowers the
RDMA bytes; its low-latency kernels send per expert, as here). t_0 (a further fixed latency per call) defaults to
0, which makes the time a bound.
Compute per GPU (the step the all-to-all is added to), with attention data-parallel: every GPU holds the non-expert
weights whole and its share of the experts; memory = (non-expert weights + touched experts on it + KV of its T
sequences at the context) ÷ BW, compute = T × 2 × active params ÷ peak; attention FLOPs are left out (an estimate
of the step's floor). Share = comm ÷ (comm + compute); with two micro-batches overlapped (DeepSeek's dual-batch
overlap, open-infra-index day 6) the step is max(comm, compute).
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..errors import InputError
from ..formats import bytes_per_element
from ..params import _expert_params, active_params, expert_params, moe_layer_count, total_params
from ..cluster import Cluster, alltoall_s, check_cluster, ring, socket_share
from ..schema import choice, integer, mark, number, output, series, step
from .deployment import ep_deployment_fields
from .kv_cache import kv_bytes_per_sequence
from .ring import LINKS, host_cpu_field, joins_gpus, own_link_bandwidth, pcie_only
from .sharding import pcie_note
from .steptime import compute_rate, deployment, experts_touched

NETWORKS = {k: e for k, e in LINKS.items() if e.get("kind") == "network"}
DEGREES = (8, 16, 32, 64, 72, 128, 144, 256, 320)
FP8_SCALE_BYTES = 4 / 128  # one FP32 scale per 128 channels
NVL72 = 72
NVLINK5_GB_PER_S = LINKS["nvlink5"]["bandwidth_bytes_per_s"] / 1e9


_INPUTS = [
    integer(
        "tokens_per_gpu",
        "Tokens per GPU per step",
        128,
        1,
        65_536,
        "tokens",
        "Decode: one per sequence on this GPU; prefill: the prompt tokens in the step.",
    ),
    integer(
        "context_tokens",
        "Context per sequence (decode)",
        4096,
        1,
        10_000_000,
        "tokens",
        "KV read per sequence in the compute estimate.",
    ),
    integer(
        "gpus_per_domain",
        "GPUs per scale-up domain",
        8,
        1,
        1024,
        "GPUs",
        "GPUs joined by NVLink (an HGX server: 8; GB200 NVL72: 72), or by PCIe on a chip without it (L40S, L4: 8); at "
        "most the accelerator's domain.",
    ),
    number(
        "scale_up_gb_per_s",
        "Scale-up bandwidth per GPU, per direction (0: the accelerator's)",
        0.0,
        0.0,
        100_000.0,
        "GB/s",
        "H800: about 160 GB/s (DeepEP docs/legacy.md); 0 takes accelerators.toml's figure, or on a chip without a "
        "scale-up link (L40S, L4) its PCIe as NCCL models it.",
    ),
    host_cpu_field(),
    choice("network", "Scale-out link (NIC)", "ib-ndr-400", [(k, e["name"]) for k, e in NETWORKS.items()]),
    integer("nics_per_domain", "NICs per domain (0: one per GPU)", 0, 0, 4096, "NICs"),
    choice("dispatch_dtype", "Dispatch format", "fp8", [("fp8", "FP8 + per-128 scales (DeepEP)"), ("bf16", "BF16")]),
    choice("combine_dtype", "Combine format", "bf16", [("bf16", "BF16 (DeepEP)"), ("fp8", "FP8 + scales")]),
    number(
        "imbalance",
        "Receive imbalance (max ÷ mean)",
        1.0,
        1.0,
        64.0,
        "",
        "The hottest GPU receives this times the mean; expert_load gives it for a skew and placement.",
        0.01,
    ),
    number("link_efficiency", "Link efficiency", 1.0, 0.01, 1.0, "", "Fraction of link peak achieved.", 0.01),
    number(
        "latency_us",
        "Fixed latency per dispatch or combine",
        0.0,
        0.0,
        10_000.0,
        "µs",
        "0 gives the bandwidth bound.",
        0.1,
    ),
]


def _fields() -> list[dict]:
    return ep_deployment_fields("GPUs in one EP group; each brings its own batch (attention data-parallel).") + _INPUTS


SCHEMA = {
    "name": "moe_alltoall",
    "title": "All-to-all dispatch and combine of expert parallelism",
    "description": (
        "Bytes each GPU sends per MoE layer (tokens × top-k × hidden × bytes; FP8 dispatch, BF16 combine "
        "as DeepEP), split between the scale-up domain (NVLink) and the NICs, the time at the hottest "
        "GPU, and the all-to-all's share of a decode step against the EP degree and the link: why "
        "rack-scale NVLink domains exist."
    ),
    "inputs": _fields(),
    "outputs": [
        output("alltoall_share", "All-to-all share of the step (no overlap)", "", "percent"),
        output("dispatch_bytes_per_layer", "Dispatch bytes each GPU sends per MoE layer", "B", "bytes"),
        output("combine_bytes_per_layer", "Combine bytes each GPU sends per MoE layer", "B", "bytes"),
        output("cross_domain_fraction", "Share of copies that leave the scale-up domain", "", "percent"),
        output("scale_up_bandwidth_bytes_per_s", "Scale-up bandwidth per GPU, per direction", "B/s", "rate"),
        output("nic_bandwidth_bytes_per_s", "NIC bandwidth per GPU, per direction", "B/s", "rate"),
        output("dispatch_time_s", "Dispatch time per layer", "s", "seconds"),
        output("combine_time_s", "Combine time per layer", "s", "seconds"),
        output("alltoall_time_per_step_s", "All-to-all per step (MoE layers × (dispatch + combine))", "s", "seconds"),
        output("compute_time_per_step_s", "Step without communication, per GPU (estimate)", "s", "seconds"),
        output("step_time_no_overlap_s", "Step with all-to-all, no overlap", "s", "seconds"),
        output("step_time_overlap_s", "Step with two micro-batches overlapped (max of the two)", "s", "seconds"),
        output("scale_up_to_nic_ratio", "Scale-up ÷ NIC bandwidth per GPU", "×", "number"),
        output("expert_weight_bytes_per_gpu", "Routed-expert weights per GPU", "B", "bytes"),
    ],
}


def _bytes_per_elem(fmt: str) -> float:
    return 1.0 + FP8_SCALE_BYTES if fmt == "fp8" else bytes_per_element(fmt, "combine_dtype")


def cluster(v: dict, g: int) -> Cluster:
    """The deployment model's Cluster (cluster.py) for these inputs: servers (scale-up domains) of g GPUs on
    the accelerator's own link, or on a custom per-direction bandwidth (on a PCIe card, its PCIe at the reader's
    figure, PCI's latencies; in the NVL72 comparison, NVLink), joined by the chosen NICs."""
    acc = v["hardware"]
    if v["scale_up_gb_per_s"]:
        acc = replace(
            acc,
            scale_up_bandwidth_bytes_per_s=v["scale_up_gb_per_s"] * 1e9,
            scale_up_domain=None,
            scale_up_topology=None,
            scale_up_link_bandwidth_bytes_per_s=None,
            pcie_link="" if v.get("nvlink_domain") else acc.pcie_link,
        )
    return Cluster(
        acc,
        nodes=1,
        gpus_per_node=g,
        network=v["network"],
        nics_per_node=v["nics_per_domain"],
        link_efficiency=v["link_efficiency"],
        host_cpu=v["host_cpu"],
    )


def phase_time(payload: float, n: int, c: Cluster, v: dict) -> float:
    """One dispatch or combine at the hottest GPU: cluster.alltoall_s (the in-domain part over the scale-up
    link and the rest over the GPU's NIC share, in parallel, plus one NCCL step latency), imbalance × the mean
    payload on the hottest GPU's links (the sockets' link carries the mean), plus the fixed latency."""
    return alltoall_s(c, payload, n, v["imbalance"]) + v["latency_us"] * 1e-6


def compute_step(v: dict, dep, n: int) -> float:
    """Per-GPU floor of a decode step under EP with attention data-parallel (no communication)."""
    m, t = dep.model, v["tokens_per_gpu"]
    b_e = dep.weight_elem_bytes if dep.expert_elem_bytes is None else dep.expert_elem_bytes
    routed = expert_params(m)
    share = experts_touched(m.moe.num_experts, m.moe.experts_per_token, t * n) / m.moe.num_experts
    held = max(1.0 / n, 1.0 / m.moe.num_experts)  # beyond E GPUs each still holds one expert (a replica)
    weights = (total_params(m) - routed) * dep.weight_elem_bytes + routed * held * share * b_e
    kv = t * kv_bytes_per_sequence(m, v["context_tokens"], dep.kv_elem_bytes)
    bw = dep.accelerator.memory_bandwidth_bytes_per_s * dep.bandwidth_efficiency
    flops = t * 2 * active_params(m, include_embedding=False)
    return max((weights + kv) / bw, flops / compute_rate(dep))


def _check(v: dict, dep, c: Cluster) -> None:
    m = dep.model
    if m.moe is None:
        raise InputError("model", f"{m.name} is dense: pick a mixture-of-experts model")
    if c.gpus_per_node > 1 and not joins_gpus(c.accelerator):
        raise InputError(
            "scale_up_gb_per_s",
            f"{v['hardware'].name} lists no scale-up link and no GPU peer-to-peer over PCIe (GeForce cards have "
            "none, NVIDIA/nccl #1309): give a bandwidth, or one GPU per domain",
        )
    if 0 < v["scale_up_gb_per_s"] < 1:  # hypothesis: 1e-308 GB/s overflowed the transfer time to inf, then nan
        raise InputError("scale_up_gb_per_s", "must be 0 (the accelerator's figure) or from 1 to 100,000 GB/s")
    try:
        check_cluster(c)
    except InputError as e:
        raise InputError("gpus_per_domain" if e.field == "gpus_per_node" else e.field, e.message) from None


def _pcie_notes(v: dict, g: int) -> list[str]:
    """On a chip whose GPUs exchange over PCIe: what that prices, and the socket link an all-to-all also crosses."""
    if v["scale_up_gb_per_s"] or g < 2 or not pcie_only(v["hardware"]):
        return []
    notes = pcie_note(v["hardware"])
    r = ring(cluster(v, g), g)
    if r.socket_bw:
        notes.append(
            f"More than {r.socket_gpus} GPUs span the server's two CPU sockets: what the GPUs behind one send to those "
            "behind the other crosses the link between the sockets, which they share, priced at the Host CPU field's "
            "figure (NCCL v2.30.7's topology model, src/graph/topo.h); NCCL sends it through host memory, not peer to "
            "peer (src/graph/paths.cc)"
        )
    return notes


def alltoall(v: dict, dep, n: int, g: int) -> dict:
    m = dep.model
    c = cluster(v, g)
    _check(v, dep, c)
    copies = v["tokens_per_gpu"] * m.moe.experts_per_token * m.hidden_size
    d_bytes, c_bytes = copies * _bytes_per_elem(v["dispatch_dtype"]), copies * _bytes_per_elem(v["combine_dtype"])
    t_d, t_c = phase_time(d_bytes, n, c, v), phase_time(c_bytes, n, c, v)
    layers = moe_layer_count(m)
    comm = layers * (t_d + t_c)
    comp = compute_step(v, dep, n)
    # what the in-domain exchange runs at (a mesh's links to the domain's peers; PCIe as NCCL models it on a chip
    # without a scale-up link); with one GPU a domain, the chip's own link for reference
    r = ring(c, g) if g > 1 else None
    up = r.intra_bw if r and not r.socket_bw else own_link_bandwidth(c.accelerator)
    share = socket_share(c, n, v["imbalance"])  # as phase_time priced it: none where the n GPUs stay behind one socket
    return {
        "up": up,
        "socket": r.socket_bw if share else None,
        "socket_load": share,
        "nic": c.nic_bandwidth_per_gpu,
        "d_bytes": d_bytes,
        "c_bytes": c_bytes,
        "t_d": t_d,
        "t_c": t_c,
        "cross": max(n - g, 0) / n,
        "layers": layers,
        "comm": comm,
        "comp": comp,
        "share": comm / (comm + comp),
    }


def _share_series(v: dict, dep) -> dict:
    degrees = sorted({*DEGREES, v["num_gpus"]})
    g = v["gpus_per_domain"]
    ys = []
    setups = [  # (name, GPUs per domain, scale-up GB/s, whether an NVLink domain stands in for the chip's own link)
        (f"servers of {g} over the NICs", g, v["scale_up_gb_per_s"], False),
        ("72-GPU NVLink 5 domains (NVL72-class, 900 GB/s; this GPU's compute)", NVL72, NVLINK5_GB_PER_S, True),
    ]
    for name, dom, up, nvlink in setups:
        w = {**v, "gpus_per_domain": dom, "scale_up_gb_per_s": up, "nvlink_domain": nvlink}
        ys.append((name, "%", [alltoall(w, dep, n, dom)["share"] * 100 for n in degrees]))
    plot = series("All-to-all share of a decode step vs EP degree (no overlap)", "EP degree N", "GPUs", degrees, ys)
    return mark(plot, "num_gpus", v["num_gpus"])


def _byte_steps(v: dict, r: dict, m) -> list[dict]:
    k, d = m.moe.experts_per_token, m.hidden_size
    return [
        step(
            "Dispatch bytes per GPU per layer",
            "T × k × d × b_dispatch",
            "{} × {} × {} × {}",
            [v["tokens_per_gpu"], k, d, _bytes_per_elem(v["dispatch_dtype"])],
            r["d_bytes"],
            "B",
        ),
        step(
            "Combine bytes per GPU per layer",
            "T × k × d × b_combine",
            "{} × {} × {} × {}",
            [v["tokens_per_gpu"], k, d, _bytes_per_elem(v["combine_dtype"])],
            r["c_bytes"],
            "B",
        ),
        step(
            "Share leaving the scale-up domain",
            "(N − g) ÷ N",
            "({} − {}) ÷ {}",
            [v["num_gpus"], min(v["gpus_per_domain"], v["num_gpus"]), v["num_gpus"]],
            r["cross"],
            "share",
        ),
    ]


def _phase_step(label: str, r: dict, t: float) -> dict:
    if r["socket"]:
        return step(
            label,
            "α + max(in-domain × imbalance ÷ B_up, L × bytes ÷ B_socket, cross × imbalance ÷ B_NIC) + t_0, "
            "L = a × (imbalance + (b − 1)(N − imbalance) ÷ (N − 1)) ÷ N",
            "B_up {}, L = {}, B_socket {}, B_NIC {}",
            [(r["up"], "B/s"), r["socket_load"], (r["socket"], "B/s"), (r["nic"], "B/s")],
            t,
            "s",
        )
    return step(
        label,
        "α + max(in-domain ÷ B_up, cross ÷ B_NIC) × imbalance + t_0",
        "B_up {}, B_NIC {}",
        [(r["up"], "B/s"), (r["nic"], "B/s")],
        t,
        "s",
    )


def _time_steps(r: dict) -> list[dict]:
    return [
        _phase_step("Dispatch time", r, r["t_d"]),
        _phase_step("Combine time", r, r["t_c"]),
        step(
            "All-to-all per step",
            "L_moe × (t_dispatch + t_combine)",
            "{} × ({} + {})",
            [r["layers"], (r["t_d"], "s"), (r["t_c"], "s")],
            r["comm"],
            "s",
        ),
    ] + _share_steps(r)


def _share_steps(r: dict) -> list[dict]:
    return [
        step(
            "Step without communication (estimate)",
            "max((W_shared + W_experts/N + KV) ÷ BW, 2 P_active T ÷ peak)",
            "{}",
            [(r["comp"], "s")],
            r["comp"],
            "s",
        ),
        step(
            "All-to-all share",
            "t_a2a ÷ (t_a2a + t_step)",
            "{} ÷ ({} + {})",
            [(r["comm"], "s"), (r["comm"], "s"), (r["comp"], "s")],
            r["share"],
            "share",
        ),
    ]


def compute(v: dict) -> dict:
    dep = deployment({**v, "step_overhead": "none"})
    n, g = v["num_gpus"], v["gpus_per_domain"]
    m = dep.model
    if m.moe is None:
        raise InputError("model", f"{m.name} is dense: pick a mixture-of-experts model")
    r = alltoall(v, dep, n, g)
    b_e = dep.weight_elem_bytes if dep.expert_elem_bytes is None else dep.expert_elem_bytes
    per_gpu = (
        math.ceil(m.moe.num_experts / n)
        * moe_layer_count(m)
        * _expert_params(m, m.moe.expert_intermediate_size, m.moe.expert_bias)
        * b_e
    )
    return {
        "dispatch_bytes_per_layer": r["d_bytes"],
        "combine_bytes_per_layer": r["c_bytes"],
        "cross_domain_fraction": r["cross"],
        "scale_up_bandwidth_bytes_per_s": r["up"],
        "nic_bandwidth_bytes_per_s": r["nic"],
        "dispatch_time_s": r["t_d"],
        "combine_time_s": r["t_c"],
        "alltoall_time_per_step_s": r["comm"],
        "compute_time_per_step_s": r["comp"],
        "alltoall_share": r["share"],
        "step_time_no_overlap_s": r["comm"] + r["comp"],
        "step_time_overlap_s": max(r["comm"], r["comp"]),
        "scale_up_to_nic_ratio": r["up"] / r["nic"] if r["nic"] else 0.0,
        "expert_weight_bytes_per_gpu": per_gpu,
        "derivation": _byte_steps(v, r, m) + _time_steps(r),
        "series": {"share_vs_ep": _share_series(v, dep)},
        "notes": _pcie_notes(v, g),
    }

"""The multi-GPU deployment's inputs and their reading (no calculator here): a cluster, the sharding degrees, the
communication settings, and the DeploymentModel they build (calculators/parallel.py). Part 12's calculators
use them; any calculator can add `cluster_fields() + parallelism_fields()` and call `deployment_model(v)` and
`parallelism(v)`. A calculator whose GPU count is the TP degree (latency, goodput, memory) adds
`scale_out_fields()` and prices its steps with `sharded_steps(v)`: the same deployment model behind
steptime.StepModel's interface (calculators/sharded_steps.py), communication included."""

from __future__ import annotations

from dataclasses import replace

from ..formats import bytes_per_element
from ..errors import InputError
from ..cluster import NETWORK_LINKS, Cluster, pipeline_socket_crossings
from ..parallel import (
    DeploymentModel,
    Formats,
    Parallelism,
    check_parallelism,
    cut_of,
    pipeline_micro_batches,
)
from ..sharded_steps import ShardedSteps
from ..schema import step
from .memory import usable_bytes_per_gpu
from .direct import fused_max_tokens
from .overhead import DEFAULT_MODE, SGLANG_MODES, sglang_fusion_from
from .ring import LINKS, host_cpu, joins_gpus, link_name, pcie_only, scale_up_domain
from .parallel_fields import check_scale_out, scale_out
from .parallel_fields import cluster_fields, comm_fields, parallelism_fields  # noqa: F401 (re-exported)
from .steptime import StepModel, deployment


def cluster(v: dict) -> Cluster:
    return Cluster(
        v["hardware"],
        v["nodes"],
        v["gpus_per_node"],
        v["network"],
        v["nics_per_node"],
        v["link_efficiency"],
        v["algorithm"],
        "auto",
        v.get("host_cpu", ""),
    )


def formats(v: dict) -> Formats:
    expert = v.get("expert_weight_dtype", "same")
    return Formats(
        bytes_per_element(v["weight_dtype"], "weight_dtype"),
        bytes_per_element(v["kv_dtype"], "kv_dtype"),
        None if expert in (None, "same") else bytes_per_element(expert, "expert_weight_dtype"),
        bytes_per_element(v["activation_dtype"], "activation_dtype"),
        bytes_per_element(v["dispatch_dtype"], "dispatch_dtype"),
    )


def deployment_model(v: dict) -> DeploymentModel:
    """The model on the cluster at v's formats, efficiencies, overhead and engine memory rule."""
    return DeploymentModel(
        deployment({**v, "num_gpus": 1}), cluster(v), formats(v), usable_bytes_per_gpu(v), v["overlap"]
    )


def parallelism(v: dict, dm: DeploymentModel | None = None) -> Parallelism:
    p = Parallelism(v["tp"], v["pp"], v["dp"], v["ep"], v["cp"], v["dcp"], v["micro_batches"])
    check_parallelism(v["model"], p, dm.cluster if dm else None)
    return p


def _stage_row(st) -> tuple:
    """The stage step's derivation row under its overlap: formula, template and terms (under two-batch overlap the
    MoE all-to-all the kernels hide apart from the rest of the communication)."""
    s = "s"
    if st.overlap == "two-batch":
        terms = [(st.kernel_s, s), (st.moe_comm_s, s), (st.comm_s - st.moe_comm_s, s), (st.overhead_s, s)]
        formula = "max(kernels, MoE all-to-all) + other communication + overhead"
        return "Stage step", formula, "max({}, {}) + {} + {}", terms, st.time_s, s
    formula = "kernels + communication + overhead" if st.overlap == "none" else "max(kernels, communication) + overhead"
    return "Stage step", formula, "{}, {}, {}", [(st.kernel_s, s), (st.comm_s, s), (st.overhead_s, s)], st.time_s, s


def decode_steps(p: Parallelism, d) -> list[dict]:
    """The derivation of one decode stage step, TPOT and tokens/s per GPU (parallel.Decode `d`)."""
    st, s = d.stage, "s"
    comm = [(st.tp_comm_s, s), (st.moe_comm_s, s), (st.dcp_comm_s, s), (st.pp_comm_s, s)]
    m, cut = pipeline_micro_batches(p), cut_of(st.overlap)
    rows = [
        (
            "Kernel time per stage step",
            "max(bytes ÷ (BW η), FLOPs ÷ (peak η))",
            "max({} ÷ BW, {} ÷ peak)",
            [(st.bytes, "B"), (st.flops, "FLOP")],
            st.kernel_s,
            s,
        ),
        ("Communication per stage step", "TP + MoE + DCP + PP", "{} + {} + {} + {}", comm, st.comm_s, s),
        _stage_row(st),
        (
            "TPOT",
            "max(micro-batches, stages) × halves (two-batch overlap) × stage step",
            "max({}, {}) × {} × {}",
            [m, p.pp, cut, (st.time_s, s)],
            d.tpot_s,
            s,
        ),
        (
            "Tokens/s per GPU",
            "batch ÷ TPOT ÷ GPUs",
            "{} ÷ {} ÷ {}",
            [d.batch, (d.tpot_s, s), p.gpus],
            d.tokens_per_s_per_gpu,
            "tokens/s",
        ),
    ]
    return [step(*row) for row in rows]


def sharded_steps(v: dict, dep, tp_key: str = "num_gpus", overlap: str = "none") -> ShardedSteps | None:
    """The steps of v's deployment with its communication, or None where steptime.StepModel(dep) prices it
    exactly: one GPU, or TP alone on an accelerator that lists neither a scale-up link nor the PCIe its GPUs talk over
    (the caller says so; a chip with a pcie_link is priced on it). `dep` is steptime.deployment(v); `overlap` one of
    parallel.OVERLAPS ("none": communication adds to each step; "full": hidden under the kernels; "two-batch": two
    half-batch micro-batches, each hiding the other's communication)."""
    p = scale_out(v, v[tp_key])
    check_scale_out(v, p, tp_key)
    if p.gpus == 1:
        return None
    acc = v["hardware"]
    if not joins_gpus(acc):
        if p.gpus > p.tp:
            raise InputError(
                "pp",
                f"{acc.name} lists no scale-up link: pipeline, data or expert parallelism "
                "across its GPUs is not modelled; set them to 1",
            )
        return None
    per_node = min(server_gpus(v), p.gpus)
    c = Cluster(
        acc,
        -(-p.gpus // per_node),
        per_node,
        v.get("network", NETWORK_LINKS[0]),
        0,
        1.0,
        v.get("algorithm", "ring"),
        "auto",
        v.get("host_cpu", ""),
    )
    f = Formats(dep.weight_elem_bytes, dep.kv_elem_bytes, dep.expert_elem_bytes)
    base = replace(dep, num_gpus=1, decode_context_parallel=1)
    usable = usable_bytes_per_gpu(v) if "engine_rule" in v else 0.0  # the steps need no memory budget
    return ShardedSteps(DeploymentModel(base, c, f, usable, overlap), p)


def steps_for(v: dict, dep=None, tp_key: str = "num_gpus", overlap: str = "none"):
    """The step model of v's deployment, for every calculator whose step times are estimates: sharded_steps'
    (communication on the critical path unless `overlap` hides some) on more than one GPU, else
    steptime.StepModel. Bounds keep StepModel."""
    dep = dep or deployment(v)
    return sharded_steps(v, dep, tp_key, overlap) or StepModel(dep)


def server_gpus(v: dict) -> int:
    """GPUs per server: v's, at most the accelerator's scale-up domain (the GPUs its own link joins: PCIe's where it
    has no scale-up link)."""
    domain = scale_up_domain(v["hardware"])
    return min(v.get("gpus_per_node", 8), domain) if domain else v.get("gpus_per_node", 8)


def comm_notes(v: dict, steps) -> list[str]:
    """What the reader should know of the communication priced: none at all on an accelerator with no scale-up
    link nor PCIe link (sharded_steps returned None for more than one GPU), or priced over PCIe; GPUs per server cut
    to the scale-up domain; a group crossing servers that the chip's link could hold in one (GPUs per server defaults
    to 8, an HGX board)."""
    acc = v["hardware"]
    if steps.num_gpus > 1 and not isinstance(steps, ShardedSteps):
        return [
            f"{acc.name} lists no scale-up link: the all-reduces between its GPUs (over PCIe, through host memory "
            "where they cannot reach each other's memory, as on GeForce cards) are not priced, so these times are "
            "optimistic"
        ]
    if steps.num_gpus == 1:
        return _server_notes(v, steps)
    return deployment_pcie_note(v, steps.dm.model, steps.p, server_gpus(v)) + _server_notes(v, steps)


def widest_group(model, p) -> int:
    """The most GPUs one of a deployment's collectives joins: its TP group, or its MoE layers' wider group (their
    all-reduce or all-to-all over tp × cp × dp)."""
    return max(p.tp, p.moe_group if model.moe else p.tp)


def deployment_pcie_note(v: dict, model, p, per_server: int) -> list[str]:
    """pcie_note for deployment p on servers of per_server GPUs: whether its widest collective spans more GPUs of one
    server than a CPU socket's, or a pipeline boundary inside one server sends across the sockets (on the Host CPU
    field's host)."""
    acc = v["hardware"]
    per_socket = socket_gpus(acc)
    crossing = bool(per_socket) and (
        min(widest_group(model, p), per_server) > per_socket
        or pipeline_socket_crossings(p.stage_gpus, p.pp, per_server, per_socket) > 0
    )
    return pcie_note(acc, crossing, host_cpu(v))


def socket_gpus(acc) -> int:
    """GPUs behind each CPU socket of a server of this chip's PCIe link (0: none given, or no PCIe link)."""
    return (LINKS[acc.pcie_link].get("socket_gpus") or 0) if pcie_only(acc) else 0


def pcie_note(acc, crossing: bool = False, host: dict | None = None) -> list[str]:
    """Where a chip's GPUs talk over PCIe: what that prices and what it leaves out; where the deployment's
    communication crosses the link between a server's CPU sockets (`crossing`), that too, on `host` (ring.host_cpu)."""
    if not pcie_only(acc):
        return []
    per_socket = socket_gpus(acc)
    sockets = (
        f"; a collective over more than {per_socket} GPUs (one CPU socket's, of a two-socket server: an assumption), "
        "and a pipeline stage's send from one socket's GPUs to the other's, also cross the link between the sockets, "
        f"in one server at the figure NCCL gives the Host CPU field's choice, {host['name']} (across servers at most "
        "twice it, where NCCL alternates its channels)"
        if crossing and per_socket and host and host.get("bandwidth_bytes_per_s")
        else ""
    )
    return [
        f"{acc.name} has no scale-up link: its GPUs' collectives are priced as NCCL models {link_name(acc)} (its PCI "
        "latencies and bandwidth), peer to peer through the server's PCIe switches; where GPUs hang off separate root "
        "ports (on Intel hosts NCCL's model charges that path's PCIe a fifth more) or the platform does not allow peer "
        f"access, NCCL goes through the CPU and host memory, which is slower than this{sockets}"
    ]


def _server_notes(v: dict, steps) -> list[str]:
    """GPUs per server cut to what the chip's link joins, or a group spread over servers the link could hold."""
    acc = v["hardware"]
    per_server, domain = server_gpus(v), scale_up_domain(acc) or 0
    if steps.num_gpus > per_server and per_server < v.get("gpus_per_node", 8):
        return [
            f"GPUs per server taken as {per_server}, the GPUs {acc.name}'s {link_name(acc)} joins; the rest of the "
            "deployment is priced over the network link (where those groups share one server over PCIe, as bridged "
            "pairs do, that PCIe is not modelled)"
        ]
    if steps.num_gpus > per_server and per_server < domain:
        return [
            f"The {steps.num_gpus} GPUs span servers of {per_server} (GPUs per server) joined by the network, though "
            f"{acc.name}'s {link_name(acc)} joins up to {domain}: where a server, instance, rack or TPU slice joins "
            f"more of them on that link, set GPUs per server to its size (at most {domain})"
        ]
    return _fusion_note(v, steps)


def _fusion_note(v: dict, steps) -> list[str]:
    """Where the modelled engine would fuse this TP group's all-reduces with the norms after them by itself and the
    reader priced them otherwise: SGLang (the first release read that fuses the model's class on the chip) in an SGLang
    mode, vLLM v0.33.0 in the others."""
    tp = steps.p.tp if isinstance(steps, ShardedSteps) else 1
    mode = v.get("step_overhead", DEFAULT_MODE)
    if mode == "none" or v.get("algorithm", "ring") == "fused" or not 1 < tp <= server_gpus(v):
        return []
    acc, model = v["hardware"], v["model"]
    if mode in SGLANG_MODES:
        first = sglang_fusion_from(model.architecture, acc.id)
        if v.get("dp", 1) > 1 or first is None:
            return []
        return [
            f"SGLang (from v{first}) runs this model's all-reduces on {acc.name} fused with the RMSNorm after each "
            "(FlashInfer's kernel, on by default without DP attention): set TP all-reduce algorithm to fused to "
            "price that"
        ]
    largest = fused_max_tokens("vllm", acc.id, tp, model.hidden_size, model.architecture)
    if not largest:
        return []
    return [
        f"vLLM v0.33.0 (the release modelled) runs these all-reduces fused with the RMSNorm after each in steps of "
        f"up to {largest:,} tokens at TP {tp} on {acc.name} (FlashInfer's kernel, on by default at -O2): set TP "
        "all-reduce algorithm to fused to price that"
    ]

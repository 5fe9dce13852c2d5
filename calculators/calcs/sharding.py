"""The multi-GPU deployment's inputs and their reading (no calculator here): a cluster, the sharding degrees, the
communication settings, and the DeploymentModel they build (calculators/parallel.py). Part 12's calculators
use them; any calculator can add `cluster_fields() + parallelism_fields()` and call `deployment_model(v)` and
`parallelism(v)`."""

from __future__ import annotations

from ..formats import bytes_per_element
from ..parallel import NETWORK_LINKS, Cluster, DeploymentModel, Formats, Parallelism, check_parallelism
from ..schema import choice, dtype_field, integer, number, step
from .direct import ALGORITHMS
from .memory import usable_bytes_per_gpu
from .ring import LINKS
from .steptime import deployment

OVERLAP_CHOICES = [
    ("none", "None: communication adds to the step (a plain forward pass)"),
    ("full", "Full: hidden under the kernels (two-micro-batch overlap), max(kernels, comm)"),
]


def cluster_fields(nodes: int = 2, gpus_per_node: int = 8) -> list[dict]:
    return [
        integer("nodes", "Servers", nodes, 1, 1024, "servers"),
        integer(
            "gpus_per_node",
            "GPUs per server (one scale-up domain)",
            gpus_per_node,
            1,
            72,
            "GPUs",
            "The accelerator's own link joins these; at most its scale-up domain (8 on HGX, 72 on NVL72).",
        ),
        choice(
            "network",
            "Network between servers",
            NETWORK_LINKS[0],
            [(k, LINKS[k]["name"]) for k in NETWORK_LINKS],
            "Groups larger than a server cross it; each GPU gets NICs × NIC bandwidth ÷ GPUs per server.",
        ),
        integer("nics_per_node", "NICs per server", 0, 0, 1024, "NICs", "0 means one per GPU (HGX H100: 8)."),
        number("link_efficiency", "Link efficiency", 1.0, 0.01, 1.0, "", "Fraction of each link's peak reached.", 0.01),
        choice(
            "algorithm",
            "TP all-reduce algorithm",
            "ring",
            [(a, a) for a in ALGORITHMS],
            "Inside one server; a group across servers always uses NCCL's ring (allreduce.py).",
        ),
    ]


# key, label, unit, minimum, help: the degrees (parallel.Parallelism), each an integer input up to 1,024
DEGREES = (
    (
        "tp",
        "Tensor parallel (attention and dense layers)",
        "GPUs",
        1,
        "vLLM --tensor-parallel-size; must divide the attention heads.",
    ),
    ("pp", "Pipeline stages", "stages", 1, "vLLM --pipeline-parallel-size."),
    (
        "dp",
        "Attention data parallel",
        "ranks",
        1,
        "vLLM --data-parallel-size with an MoE model; SGLang --attn-dp-size. Each rank runs attention for its own "
        "sequences; the MoE layers span tp × cp × dp GPUs.",
    ),
    (
        "ep",
        "Expert parallel",
        "GPUs",
        1,
        "1 (experts split by tensor parallelism) or tp × cp × dp (vLLM --enable-expert-parallel).",
    ),
    (
        "cp",
        "Prefill context parallel",
        "ranks",
        1,
        "vLLM --prefill-context-parallel-size: splits each prompt's tokens; adds GPUs.",
    ),
    (
        "dcp",
        "Decode context parallel",
        "ranks",
        1,
        "vLLM --decode-context-parallel-size: stripes each sequence's KV over this many TP ranks.",
    ),
    (
        "micro_batches",
        "Decode micro-batches (PP)",
        "",
        0,
        "Batches in flight through the pipeline; 0 = one per stage (as vLLM runs PP).",
    ),
)


def parallelism_fields(tp: int = 8, pp: int = 1, dp: int = 1, ep: int = 1, cp: int = 1, dcp: int = 1) -> list[dict]:
    defaults = {"tp": tp, "pp": pp, "dp": dp, "ep": ep, "cp": cp, "dcp": dcp, "micro_batches": 0}
    return [integer(key, label, defaults[key], low, 1024, unit, help) for key, label, unit, low, help in DEGREES]


def comm_fields() -> list[dict]:
    return [
        dtype_field("activation_dtype", "Activation format (TP and PP payloads)", "bf16"),
        dtype_field(
            "dispatch_dtype",
            "EP dispatch format",
            "bf16",
            "Bytes per element of the tokens an all-to-all sends to the experts (FP8 dispatch halves "
            "them); the combine returns in the activation format.",
        ),
        choice("overlap", "Communication overlap", "none", OVERLAP_CHOICES),
    ]


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


def decode_steps(p: Parallelism, d) -> list[dict]:
    """The derivation of one decode stage step, TPOT and tokens/s per GPU (parallel.Decode `d`)."""
    st, s = d.stage, "s"
    comm = [(st.tp_comm_s, s), (st.moe_comm_s, s), (st.dcp_comm_s, s), (st.pp_comm_s, s)]
    over = "kernels + communication + overhead" if st.overlap == "none" else "max(kernels, communication) + overhead"
    m = p.m if p.pp > 1 else 1
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
        ("Stage step", over, "{}, {}, {}", [(st.kernel_s, s), (st.comm_s, s), (st.overhead_s, s)], st.time_s, s),
        ("TPOT", "max(micro-batches, stages) × stage step", "max({}, {}) × {}", [m, p.pp, (st.time_s, s)], d.tpot_s, s),
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

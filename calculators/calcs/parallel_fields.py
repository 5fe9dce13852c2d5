"""The inputs of a multi-GPU deployment (parallel.py): a cluster of servers and the links between them, the
sharding degrees, the communication settings, and the compact group of degrees beyond TP that calculators whose
GPU count is the TP degree add (latency, goodput, memory). sharding.py reads them into the deployment model."""

from __future__ import annotations

from ..errors import InputError
from ..cluster import NETWORK_LINKS
from ..parallel import Parallelism, check_parallelism
from ..schema import choice, dtype_field, integer, number
from .direct import ALGORITHMS
from .ring import LINKS, host_cpu_field

OVERLAP_CHOICES = [
    ("none", "None: communication adds to the step (a plain forward pass)"),
    ("full", "Full: hidden under the kernels, max(kernels, comm) (the best any overlap can do)"),
    ("two-batch", "Two-batch: each half of the batch hides the other's MoE all-to-all"),
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
            "Inside one server; a group across servers always uses NCCL's ring (allreduce.py). fused: FlashInfer's "
            "all-reduce with the RMSNorm after it, one measured kernel, in the steps the engine fuses (SGLang: up to "
            "2,048 tokens; vLLM: by chip and TP size).",
        ),
        host_cpu_field(),
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
        choice(
            "overlap",
            "Communication overlap",
            "none",
            OVERLAP_CHOICES,
            "Two-batch is SGLang's two-batch overlap and DeepSeek's dual micro-batch overlap: the weights are read "
            "twice, and a step with fewer than two sequences per attention rank is not cut.",
        ),
    ]


# The degrees beyond TP and the links they cross, for a calculator whose num_gpus (or tensor_parallel) is the TP
# degree; the other settings take cluster_fields' and comm_fields' defaults (a NIC per GPU, links at peak, no
# overlap, BF16 payloads). Advanced inputs (sitegen/blocks.py).
SCALE_OUT_KEYS = ("pp", "dp", "ep", "gpus_per_node", "network", "algorithm", "host_cpu")
DEGREE_KEYS = SCALE_OUT_KEYS[:3]  # the degrees alone, for a calculator with no links (memory)


def scale_out_fields(keys: tuple = SCALE_OUT_KEYS) -> list[dict]:
    """These of the degrees beyond TP and the links (all of them by default; memory needs no links)."""
    by_key = {f["key"]: f for f in parallelism_fields(tp=1) + cluster_fields(nodes=1)}
    return [by_key[k] for k in keys]


def scale_out(v: dict, tensor_parallel: int, ep_follows: bool = False) -> Parallelism:
    """The Parallelism v names at this TP degree: PP, DP and EP from scale_out_fields (1 where v has none), its
    DCP where it has one. ep_follows keeps EP on (tp × dp) or off as v has it while TP varies (a sweep)."""
    dp, ep = v.get("dp", 1), v.get("ep", 1)
    if ep_follows and ep > 1:
        ep = tensor_parallel * dp
    return Parallelism(tensor_parallel, v.get("pp", 1), dp, ep, 1, v.get("decode_context_parallel", 1))


def beyond_tp(p: Parallelism) -> bool:
    """p has pipeline, attention-data or expert parallelism (more than a TP group)."""
    return p.pp > 1 or p.dp > 1 or p.ep > 1


def check_scale_out(v: dict, p: Parallelism, tp_key: str) -> None:
    """parallel.check_parallelism, its message next to this calculator's own field (TP is `tp_key` here, DCP
    decode_context_parallel)."""
    try:
        check_parallelism(v["model"], p)
    except InputError as e:
        raise InputError({"tp": tp_key, "dcp": "decode_context_parallel"}.get(e.field, e.field), e.message) from None

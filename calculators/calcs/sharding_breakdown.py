"""Sharding breakdown: for one choice of degrees, what each GPU holds and what crosses which link per step
(calculators/parallel.py), with the same choice at other TP degrees for comparison."""

from __future__ import annotations

from ..display import auto_bytes
from ..errors import InputError
from ..parallel import Parallelism, check_parallelism, max_sequences
from ..schema import integer, mark, output, series, step
from .deployment import deployment_fields
from .engine_defaults import vllm_max_num_batched_tokens
from .memory import engine_fields
from .sharding import (
    cluster_fields,
    comm_fields,
    decode_steps,
    deployment_model,
    deployment_pcie_note,
    parallelism,
    parallelism_fields,
)
from ..units import GIB

TP_AXIS = (1, 2, 4, 8, 16, 32, 64)


def _fields() -> list[dict]:
    dep = [f for f in deployment_fields(0.8, 0.6, {"model": {"default": "llama-3.1-405b"}}) if f["key"] != "num_gpus"]
    return (
        dep
        + engine_fields()
        + cluster_fields()
        + parallelism_fields(tp=8, pp=2)
        + comm_fields()
        + [
            integer("batch_size", "Sequences in flight (whole deployment)", 64, 1, 1_000_000, "sequences"),
            integer("context_tokens", "Context per sequence", 8192, 1, 10_000_000, "tokens"),
            integer("prompt_tokens", "Prompt for the prefill figures", 8192, 1, 10_000_000, "tokens"),
        ]
    )


SCHEMA = {
    "name": "sharding_breakdown",
    "title": "Sharding breakdown: memory and communication per GPU",
    "description": (
        "One sharding of the model over the cluster: each GPU's weights (dense layers ÷ TP, experts ÷ "
        "the MoE group, layers ÷ PP), its KV (MLA's latent whole on every TP rank, each attention-DP "
        "rank its own sequences, DCP striping), and one decode step's kernels and communication: TP "
        "all-reduces (an MoE layer's too beside TP attention alone), EP all-to-all with DP attention, PP sends, "
        "DCP gathers, on the link each group spans. "
        "Communication sits on the critical path unless overlap hides it (full: all of it; two-batch: the "
        "all-to-all, each half of the batch under the other's kernels). Prefill: one prompt on each DP rank, "
        "FLOPs ÷ (TP × CP), in chunks of vLLM's default token budget that flow through the PP stages as "
        "micro-batches (one chunk crosses them one stage after another), with a step's communication and "
        "the CP ranks gathering its KV."
    ),
    "inputs": _fields(),
    "outputs": [
        output("gpus", "GPUs in the deployment", "GPUs", "integer"),
        output("fits", "Fits", "", "integer", words={1: "yes", 0: "no"}),
        output("dense_weights_per_gpu", "Dense and attention weights per GPU", "B", "bytes"),
        output("expert_weights_per_gpu", "Routed-expert weights per GPU", "B", "bytes"),
        output("kv_per_sequence_per_gpu", "KV per sequence per GPU", "B", "bytes"),
        output("kv_at_batch_per_gpu", "KV per GPU at this batch", "B", "bytes"),
        output("kv_budget_per_gpu", "KV budget per GPU", "B", "bytes"),
        output("max_sequences", "Sequences of this context the deployment holds", "sequences", "integer"),
        output("kernel_time_s", "Kernel time per stage step", "s", "seconds"),
        output("tp_comm_s", "TP all-reduces and logits gather per stage step", "s", "seconds"),
        output("moe_comm_s", "MoE-layer communication per stage step", "s", "seconds"),
        output("pp_comm_s", "Pipeline send per stage step", "s", "seconds"),
        output("dcp_comm_s", "DCP gathers per stage step", "s", "seconds"),
        output("overhead_s", "Per-step overhead per stage step", "s", "seconds"),
        output("stage_step_s", "Stage step", "s", "seconds"),
        output("comm_share", "Communication share of the step (what the overlap leaves exposed)", "", "percent"),
        output("bubble", "Pipeline idle share", "", "percent"),
        output("tpot_s", "TPOT", "s", "seconds"),
        output("tokens_per_s_per_gpu", "Decode tokens/s per GPU", "tokens/s", "rate"),
        output("two_batch_gain", "Two-batch overlap's decode gain over none at this layout", "", "percent"),
        output("prefill_s", "Prefill of one prompt (TTFT without queueing)", "s", "seconds"),
        output("prefill_comm_s", "Its communication not hidden (TP, MoE, PP, CP)", "s", "seconds"),
    ],
}


def _at_tp(v: dict, p: Parallelism, tp: int, cluster=None) -> Parallelism | None:
    """The reader's choice at another TP degree (EP follows the MoE group; DCP kept where allowed)."""
    q = Parallelism(tp, p.pp, p.dp, 1 if p.ep == 1 else tp * p.cp * p.dp, p.cp, p.dcp, p.micro_batches)
    try:
        check_parallelism(v["model"], q, cluster)
    except InputError:
        return None
    return q


STEP_PARTS = (  # the stacked plot's series: name, StageStep attribute
    ("kernels", "kernel_s"),
    ("per-step overhead", "overhead_s"),
    ("TP all-reduce", "tp_comm_s"),
    ("MoE all-to-all / all-reduce", "moe_comm_s"),
    ("PP send", "pp_comm_s"),
    ("DCP gathers", "dcp_comm_s"),
)


def _plots(v: dict, dm, p: Parallelism) -> dict:
    tps = sorted({t for t in TP_AXIS if _at_tp(v, p, t, dm.cluster)} | {p.tp})
    rows = []
    for t in tps:
        q = _at_tp(v, p, t)
        rows.append((dm.memory(q, v["context_tokens"]), dm.decode(q, v["batch_size"], v["context_tokens"]).stage, q))
    s = v["batch_size"]
    parts = [
        ("dense and attention weights", "GiB", [m.dense_weights / GIB for m, _, _ in rows]),
        ("routed experts", "GiB", [m.expert_weights / GIB for m, _, _ in rows]),
        ("KV at the batch", "GiB", [m.kv_per_sequence * s / q.attention_ranks / GIB for m, _, q in rows]),
    ]
    memory = series(
        "Memory per GPU by TP degree (the other degrees as set)", "Tensor parallel", "GPUs", tps, parts, kind="stack"
    )
    times = [(name, "ms", [getattr(st, key) * 1e3 for _, st, _ in rows]) for name, key in STEP_PARTS]
    time = series(
        "Decode stage step by TP degree: kernels and communication", "Tensor parallel", "GPUs", tps, times, kind="stack"
    )
    i = tps.index(p.tp)
    return {
        "memory_by_tp": mark(memory, "tp", p.tp, y=sum(c["values"][i] for c in memory["y"]), name="yours"),
        "step_by_tp": mark(time, "tp", p.tp, y=sum(c["values"][i] for c in time["y"]), name="yours"),
    }


def _steps(p: Parallelism, mem, d, pre: dict) -> list[dict]:
    per_rank = d.batch / p.attention_ranks
    weights = [(mem.dense_weights, "B"), (mem.expert_weights, "B")]
    prefill = [pre["chunks"], (pre["kernel_s"], "s"), (pre["comm_s"], "s"), (pre["cp_comm_s"], "s")]
    return (
        [
            step("Weights per GPU", "dense ÷ tp + experts × share (worst stage)", "{} + {}", weights, mem.weights, "B"),
            step(
                "KV per GPU at the batch",
                "sequences per attention rank × KV(T) per GPU",
                "{} × {}",
                [per_rank, (mem.kv_per_sequence, "B")],
                mem.kv_per_sequence * per_rank,
                "B",
            ),
        ]
        + decode_steps(p, d)
        + [
            step(
                "Prefill of one prompt",
                "c chunks of vLLM's default token budget for the chip, each a stage slot (max(FLOPs ÷ (tp × cp), "
                "bytes) + overhead + exposed comm.): c slots of the mean chunk + (pp − 1) of the largest, + CP gather",
                "{} chunks: {} + {} + {}",
                prefill,
                pre["time_s"],
                "s",
            )
        ]
    )


def two_batch_gain(v: dict, p: Parallelism) -> float:
    """Decode tokens/s with two-batch overlap over that with none, minus one, at v's layout and batch: what
    cutting the step in two buys (hidden communication) less what it costs (weights read and kernels launched
    twice, each at half the batch)."""
    ctx, batch = v["context_tokens"], v["batch_size"]
    rates = [
        deployment_model({**v, "overlap": o}).decode(p, batch, ctx).tokens_per_s_per_gpu for o in ("none", "two-batch")
    ]
    return rates[1] / rates[0] - 1


def _outputs(p: Parallelism, mem, d, pre: dict, held: int) -> dict:
    st = d.stage
    return {
        "gpus": p.gpus,
        "fits": int(mem.fits_weights and held >= d.batch),
        "dense_weights_per_gpu": mem.dense_weights,
        "expert_weights_per_gpu": mem.expert_weights,
        "kv_per_sequence_per_gpu": mem.kv_per_sequence,
        "kv_at_batch_per_gpu": mem.kv_per_sequence * d.batch / p.attention_ranks,
        "kv_budget_per_gpu": mem.kv_budget,
        "max_sequences": held,
        "kernel_time_s": st.kernel_s,
        "tp_comm_s": st.tp_comm_s,
        "moe_comm_s": st.moe_comm_s,
        "pp_comm_s": st.pp_comm_s,
        "dcp_comm_s": st.dcp_comm_s,
        "overhead_s": st.overhead_s,
        "stage_step_s": st.time_s,
        "comm_share": d.comm_share,
        "bubble": d.bubble,
        "tpot_s": d.tpot_s,
        "tokens_per_s_per_gpu": d.tokens_per_s_per_gpu,
        "prefill_s": pre["time_s"],
        "prefill_comm_s": pre["comm_s"] + pre["cp_comm_s"],
    }


def compute(v: dict) -> dict:
    dm = deployment_model(v)
    p = parallelism(v, dm)
    ctx, batch = v["context_tokens"], v["batch_size"]
    mem = dm.memory(p, ctx)
    d = dm.decode(p, batch, ctx)
    held = max_sequences(v["model"], p, mem) if mem.fits_weights else 0
    pre = dm.prefill_s(p, v["prompt_tokens"], vllm_max_num_batched_tokens(dm.base.accelerator))
    out = _outputs(p, mem, d, pre, held) | {"two_batch_gain": two_batch_gain(v, p)}
    weights = auto_bytes(mem.weights)  # in the reader's memory units (display.memory_units)
    notes = (
        []
        if out["fits"]
        else [
            f"does not fit: {weights} of weights per GPU leave room for {held:,} sequences of {ctx:,} tokens, "
            f"not {batch:,}"
        ]
    )
    if p.gpus > 1:  # on a chip whose GPUs talk over PCIe: what that prices, and the sockets' link where crossed
        notes += deployment_pcie_note(v, dm.model, p, dm.cluster.gpus_per_node)
    head = (
        f"{p.label()} on {p.gpus} GPUs: {weights} of weights per GPU, TPOT {d.tpot_s * 1e3:.1f} ms, "
        f"communication {out['comm_share']:.0%} of the step"
    )
    return {**out, "headline": head, "notes": notes, "derivation": _steps(p, mem, d, pre), "series": _plots(v, dm, p)}

"""GPU memory: weights per GPU under tensor parallelism, the KV budget an engine leaves, and
how many sequences of a given context fit.

Engine rules (the reader picks one; reserves are explicit inputs):
  vLLM:   budget = gpu_memory_utilization × memory − weights − activation/graph reserve
          (vLLM profiles the reserve with a dummy forward pass; default utilization 0.92 from
          v0.20.0 through v0.33.0, 0.9 up to v0.19: vllm/config/cache.py at those tags)
  SGLang: budget = mem_fraction_static × memory − weights   (default mem_fraction_static 0.88 here;
          SGLang picks it from GPU size and TP when unset)
Weights split evenly over TP ranks (replicated norms and embeddings ignored), as the engine holds them: under the
vLLM rule gpt-oss's MXFP4 experts are padded to the tiles of the MoE kernel vLLM v0.33.0 picks for it on the chip,
each GPU's slice of them (weight_layouts.toml; expert_layout). The parallelism calculators' step model (parallel.py,
sharding.py) reads the checkpoint's bytes. With pipeline, attention-data
or expert parallelism (Advanced), a GPU holds what parallel.gpu_memory gives the worst stage (its layers'
share, the larger of embedding and LM head, its routed experts), and the KV of its stage's layers. KV heads split
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
from dataclasses import dataclass

from ..catalog import weight_layouts
from ..display import auto_bytes
from ..formats import bytes_per_element
from ..model import Model
from ..params import expert_params, total_params, weight_bytes
from ..parallel import Formats, Parallelism, gpu_memory, stage_fraction
from .parallel_fields import DEGREE_KEYS, beyond_tp, check_scale_out, scale_out, scale_out_fields
from ..resolve import as_input
from ..schema import (
    accelerator_field,
    choice,
    dtype_field,
    expert_dtype,
    expert_dtype_field,
    integer,
    model_field,
    number,
    output,
    series,
    step,
    mark,
)
from .kv_cache import (
    decode_context_parallel_allowed,
    kv_bytes_per_sequence,
    kv_bytes_per_token_all_layers,
    kv_fraction_per_gpu,
    pool_tokens_held,
    state_bytes_per_sequence,
    state_dtype_field,
    state_fraction_per_gpu,
    state_pool_tokens,
)
from ..units import GIB

TP_SERIES = (1, 2, 4, 8)


def usable_bytes_per_gpu(v: dict) -> float:
    total = v["hardware"].memory_bytes
    if v["engine_rule"] == "vllm":
        return v["gpu_memory_utilization"] * total - v["activation_reserve_gib"] * GIB
    return v["mem_fraction_static"] * total


# Each engine's rule, as the derivation writes it: the memory it may use, and what that leaves for KV.
USABLE_RULE = {"vllm": "gpu_memory_utilization × memory − reserve", "sglang": "mem_fraction_static × memory"}
BUDGET_RULE = {
    "vllm": "gpu_memory_utilization × memory − weights − reserve",
    "sglang": "mem_fraction_static × memory − weights",
}


def _usable_step(v: dict, usable: float) -> dict:
    memory = (v["hardware"].memory_bytes, "B")
    if v["engine_rule"] == "vllm":
        reserve = (v["activation_reserve_gib"] * GIB, "B")
        template, terms = "{} × {} − {}", [v["gpu_memory_utilization"], memory, reserve]
    else:
        template, terms = "{} × {}", [v["mem_fraction_static"], memory]
    return step("Usable memory per GPU", USABLE_RULE[v["engine_rule"]], template, terms, usable, "B")


@dataclass(frozen=True)
class Footprint:
    """What a model asks of each GPU's memory, whatever the GPU: its formats and the DCP split."""

    model: Model
    weight_dtype: str
    kv_dtype: str
    expert_dtype: str | None = None  # routed experts' format; None = the weight format
    state_dtype: str = "bf16"  # hybrid models' recurrent state
    decode_context_parallel: int = 1
    expert_padding: tuple[int, int] | None = None  # multiples the engine's MoE kernel pads each expert matrix to


def footprint(v: dict) -> Footprint:
    """The footprint named by validated inputs; calculators without state or DCP inputs get the defaults."""
    return Footprint(
        v["model"],
        v["weight_dtype"],
        v["kv_dtype"],
        expert_dtype(v),
        v.get("state_dtype", "bf16"),
        v.get("decode_context_parallel", 1),
        expert_padding(v),
    )


def expert_layout(v: dict) -> dict | None:
    """The weight_layouts.toml [[layout]] an engine's MoE kernel holds a gpt-oss checkpoint's routed experts in, where
    they take more room than the checkpoint: the first whose engine is the inputs' rule, whose formats hold the
    experts' and whose chips hold the accelerator. None elsewhere (another model, the SGLang rule, another format, a
    chip no layout names). A layout that names engine versions applies only to those (the engine-faithful mode's
    engine_version); the others to any. A gpt-oss checkpoint is known by its learned attention sinks (hf_import reads
    them from the gpt_oss family only); vLLM sends other MXFP4 MoE checkpoints down another path, not modelled."""
    if v["model"].moe is None or not v["model"].attention.sinks:
        return None
    experts = expert_dtype(v) or v["weight_dtype"]
    rule, chip, version = v.get("engine_rule", "vllm"), v["hardware"].id, v.get("engine_version")
    matches = (x for x in weight_layouts()["layout"] if x["engine"] == rule and chip in x["chips"])
    return next((x for x in matches if experts in x["formats"] and version in x.get("versions", [version])), None)


def expert_padding(v: dict) -> tuple[int, int] | None:
    """The (intermediate, hidden) multiples the experts' layout pads each expert matrix to (expert_layout), or None."""
    layout = expert_layout(v)
    return None if layout is None else (layout["intermediate_multiple"], layout["hidden_multiple"])


def expert_layout_ratio(f: Footprint, slices: int) -> float:
    """The routed experts' elements as the kernel holds them ÷ the checkpoint's, each expert sliced across `slices`
    GPUs (the kernel pads each GPU's slice of the intermediate size, vLLM's intermediate_size_per_partition)."""
    if f.expert_padding is None:
        return 1.0
    inner_multiple, hidden_multiple = f.expert_padding
    inner, hidden = f.model.moe.expert_intermediate_size, f.model.hidden_size
    padded = _round_up(-(-inner // slices), inner_multiple) * slices * _round_up(hidden, hidden_multiple)
    return padded / (inner * hidden)


def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def checkpoint_weight_bytes(f: Footprint) -> float:
    """All the weights' bytes in the checkpoint, each part at its own format."""
    return weight_bytes(f.model, f.weight_dtype, "weight_dtype", f.expert_dtype)


def loaded_weight_bytes(f: Footprint, slices: int) -> float:
    """All the weights' bytes as the engine holds them: the checkpoint's, the routed experts × their layout."""
    extra = (expert_layout_ratio(f, slices) - 1.0) * expert_params(f.model) * _expert_bytes(f)
    return checkpoint_weight_bytes(f) + extra


def _expert_bytes(f: Footprint) -> float:
    """Bytes per routed-expert parameter in the checkpoint: the experts' own format, else the weights'."""
    if f.expert_dtype is None:
        return bytes_per_element(f.weight_dtype, "weight_dtype")
    return bytes_per_element(f.expert_dtype, "expert_weight_dtype")


@dataclass(frozen=True)
class Budget:
    """One GPU's memory at one TP degree: the weights it holds, the KV budget left, and what each token
    and each sequence of the context asked for take of it."""

    weights: float
    kv_budget: float
    per_token: float  # KV bytes per token, all layers
    per_seq: float | None = None  # KV bytes per sequence per GPU at the context; None when no context was asked for
    ranks: int = 1  # attention ranks (DP attention), each holding its own sequences in its own budget

    @property
    def sequences(self) -> int:
        """Sequences of the context the deployment holds: each rank's, times the ranks."""
        return math.floor(self.kv_budget / self.per_seq) * self.ranks

    @property
    def tokens(self) -> int:
        return math.floor(self.kv_budget / self.per_token) * self.ranks


def _per_sequence(f: Footprint, tensor_parallel: int, context_tokens: int, share: float) -> float:
    """KV per sequence per GPU: attention KV × its share on one rank, plus linear-layer state ÷ its own split."""
    kv_b, state_b = bytes_per_element(f.kv_dtype, "kv_dtype"), bytes_per_element(f.state_dtype, "state_dtype")
    state = state_bytes_per_sequence(f.model, state_b)
    attention_kv = kv_bytes_per_sequence(f.model, context_tokens, kv_b, state_b) - state
    return attention_kv * share + state * state_fraction_per_gpu(f.model, tensor_parallel)


def budget(
    f: Footprint, usable: float, tensor_parallel: int, context_tokens: int | None = None, p: Parallelism | None = None
) -> Budget:
    """Weights, KV budget and capacity per GPU at one TP degree, with `usable` bytes per GPU. With `p` (pipeline,
    attention-data or expert parallelism too) the GPU is one of the worst stage's (parallel.gpu_memory): its
    share of the weights, and KV × the stage's share of the layers; its rank holds its own sequences."""
    share = kv_fraction_per_gpu(f.model, tensor_parallel, f.decode_context_parallel)
    per_token = kv_bytes_per_token_all_layers(f.model, bytes_per_element(f.kv_dtype, "kv_dtype")) * share
    per_seq = None if context_tokens is None else _per_sequence(f, tensor_parallel, context_tokens, share)
    if p is None:
        weights = loaded_weight_bytes(f, tensor_parallel) / tensor_parallel
        return Budget(weights, max(0.0, usable - weights), per_token, per_seq)
    weights = gpu_memory(f.model, p, _formats(f, p.expert_slices), usable, context_tokens or 1).weights
    frac = stage_fraction(f.model, p.pp)
    per_seq = None if per_seq is None else per_seq * frac
    return Budget(weights, max(0.0, usable - weights), per_token * frac, per_seq, p.attention_ranks)


def _formats(f: Footprint, slices: int) -> Formats:
    """Bytes per element for parallel.gpu_memory, the routed experts' × their layout ratio at `slices`."""
    layout = expert_layout_ratio(f, slices)
    experts = None if f.expert_dtype is None and layout == 1.0 else _expert_bytes(f) * layout
    return Formats(
        bytes_per_element(f.weight_dtype, "weight_dtype"), bytes_per_element(f.kv_dtype, "kv_dtype"), experts
    )


def deployment_of(v: dict, tensor_parallel: int) -> Parallelism | None:
    """v's degrees beyond TP at this TP degree (EP following TP), or None for a TP group alone."""
    p = scale_out(v, tensor_parallel, ep_follows=True)
    return p if beyond_tp(p) else None


def total_weight_bytes(v: dict, b: Budget, tensor_parallel: int) -> float:
    """Weights over every GPU of the deployment: TP alone splits one copy; attention DP keeps a copy of the
    non-expert weights per rank, while the experts are stored once over the MoE group."""
    p = deployment_of(v, tensor_parallel)
    if p is None:
        return b.weights * tensor_parallel
    f = footprint(v)
    dense = (total_params(f.model) - expert_params(f.model)) * bytes_per_element(f.weight_dtype, "weight_dtype")
    return loaded_weight_bytes(f, p.expert_slices) + (p.attention_ranks - 1) * dense


def engine_budget(v: dict, tensor_parallel: int) -> Budget:
    """budget() for validated inputs: their footprint, the engine rule's usable memory, their context and
    their degrees beyond TP (scale_out)."""
    return budget(
        footprint(v), usable_bytes_per_gpu(v), tensor_parallel, v["context_tokens"], deployment_of(v, tensor_parallel)
    )


def draft_budget(v: dict, tensor_parallel: int, context_tokens: int | None = None) -> tuple[float, Budget]:
    """A speculative draft model's share of each GPU (Part 11): (its weights per GPU, the target's Budget with
    those weights taken out of the KV budget and the draft's KV per token and per sequence added to the
    target's). The draft shares the target's formats and tensor-parallel degree."""
    usable, f = usable_bytes_per_gpu(v), footprint(v)
    mine = budget(f, usable, tensor_parallel, context_tokens)
    draft = budget(
        Footprint(v["draft_model"], f.weight_dtype, f.kv_dtype, None, f.state_dtype),
        usable,
        tensor_parallel,
        context_tokens,
    )
    per_seq = None if context_tokens is None else mine.per_seq + draft.per_seq
    left = max(0.0, usable - mine.weights - draft.weights)
    return draft.weights, Budget(mine.weights, left, mine.per_token + draft.per_token, per_seq)


def kv_pool_tokens(v: dict) -> float:
    """The KV pool, in tokens, of one replica of v's deployment under its engine rule (what a simulated
    replica holds; no context length)."""
    return budget(footprint(v), usable_bytes_per_gpu(v), v["num_gpus"], None, deployment_of(v, v["num_gpus"])).tokens


def sequence_pool_tokens(v: dict, tokens: float) -> float:
    """Tokens of kv_pool_tokens(v)'s pool that one sequence of `tokens` tokens holds in v's deployment: its windowed
    layers keep only their window and a hybrid model's linear-layer state counts in the same unit, so that the
    pool ÷ this is budget(...).sequences (the simulator's pool charges the same: engine/pool.py)."""
    f = footprint(v)
    kv_b, state_b = bytes_per_element(f.kv_dtype, "kv_dtype"), bytes_per_element(f.state_dtype, "state_dtype")
    state = state_pool_tokens(f.model, kv_b, state_b, v["num_gpus"], f.decode_context_parallel)
    return pool_tokens_held(f.model, tokens, state)


def engine_fields() -> list[dict]:
    return [
        choice("engine_rule", "Engine memory rule", "vllm", [("vllm", "vLLM"), ("sglang", "SGLang")]),
        number(
            "gpu_memory_utilization",
            "vLLM gpu_memory_utilization",
            0.92,
            0.05,
            1.0,
            "",
            "Fraction of GPU memory vLLM may use. vLLM's default: 0.92 from v0.20.0 (still in v0.33.0), 0.9 up to "
            "v0.19 (vllm/config/cache.py).",
            0.01,
        ),
        number(
            "activation_reserve_gib",
            "vLLM activation and CUDA-graph reserve",
            2.0,
            0.0,
            1024.0,
            "GiB",
            "An assumption: vLLM measures this by profiling; a few GiB is typical.",
        ),
        number(
            "mem_fraction_static",
            "SGLang mem_fraction_static",
            0.88,
            0.05,
            1.0,
            "",
            "Fraction for weights plus KV pool.",
            0.01,
        ),
    ]


SCHEMA = {
    "name": "memory",
    "title": "GPU memory: weights, KV budget and concurrency",
    "description": (
        "Weights per GPU under tensor parallelism (under Advanced, with pipeline stages, attention data "
        "parallelism and expert parallelism too: a GPU of the worst stage), the KV-cache budget an engine "
        "leaves, and the sequences of a given context that fit (each attention DP rank holds its own). When "
        "weights exceed memory the result says so (fits = 0) instead of failing."
    ),
    "inputs": [
        model_field(),
        accelerator_field(),
        dtype_field("weight_dtype", "Weight format", "bf16"),
        expert_dtype_field(),
        dtype_field("kv_dtype", "KV-cache format", "bf16"),
        integer("tensor_parallel", "Tensor-parallel GPUs", 4, 1, 1024, "GPUs"),
        integer(
            "decode_context_parallel",
            "Decode context-parallel size",
            1,
            1,
            1024,
            "ranks",
            "vLLM --decode-context-parallel-size, SGLang --dcp-size: stripes each sequence's KV by token "
            "over this many ranks of the TP group (no extra GPUs). Must divide TP and be at most "
            "TP ÷ KV heads (MLA: TP).",
        ),
        integer("context_tokens", "Context per sequence", 8192, 1, 10_000_000, "tokens"),
        state_dtype_field(),
    ]
    + scale_out_fields(DEGREE_KEYS)
    + engine_fields()
    + [
        choice(
            "speculative_draft",
            "Speculative draft model",
            "none",
            [("none", "None"), ("draft_model", "The model below, on the same GPUs")],
            "Part 11: a draft model's weights and its KV per sequence come out of the KV budget.",
        ),
        model_field("draft_model", "Draft model", "llama-3.1-8b", "Used when a draft model is on."),
    ],
    "outputs": [
        output("fits", "Fits", "", "integer", words={1: "yes", 0: "no"}),
        output("weight_bytes_total", "Weights, all GPUs", "B", "bytes"),
        output("weight_bytes_per_gpu", "Weights per GPU", "B", "bytes"),
        output("checkpoint_bytes", "Weights in the checkpoint", "B", "bytes"),
        output("usable_bytes_per_gpu", "Memory the engine may use per GPU", "B", "bytes"),
        output("kv_budget_bytes_per_gpu", "KV budget per GPU", "B", "bytes"),
        output("kv_bytes_per_sequence_per_gpu", "KV per sequence per GPU", "B", "bytes"),
        output("max_concurrent_sequences", "Sequences that fit at this context", "sequences", "integer"),
        output("kv_tokens_capacity", "Tokens the KV pool holds", "tokens", "integer"),
        output(
            "min_tensor_parallel_to_fit",
            "Smallest power-of-two TP that fits at this DCP",
            "GPUs",
            "integer",
            words={0: "none to 1,024"},
        ),
        output("draft_weight_bytes_per_gpu", "Draft model weights per GPU", "B", "bytes"),
        output(
            "max_concurrent_sequences_with_draft", "Sequences that fit with the draft model", "sequences", "integer"
        ),
    ],
}


def _dcp_allows(v: dict, tensor_parallel: int) -> bool:
    return decode_context_parallel_allowed(v["model"], tensor_parallel, v.get("decode_context_parallel", 1))


def _weights_step(v: dict, per_gpu: float, tp: int) -> dict:
    """Weights per GPU with the parameter count shown (reader walk #20): params × bytes each ÷ TP, or, with
    the experts in a format of their own, the two parts' bytes."""
    model, experts, f, layout = v["model"], expert_dtype(v), footprint(v), expert_layout(v)
    padded = f", the experts padded for {layout['kernel']}" if layout else ""
    p = deployment_of(v, tp)
    if p is not None:
        m = gpu_memory(model, p, _formats(f, p.expert_slices), 0.0, 1)
        return step(
            "Weights per GPU",
            "non-expert on the worst stage ÷ TP + its experts (÷ TP × DP, or whole with EP" + padded + ")",
            "{} + {}",
            [(m.dense_weights, "B"), (m.expert_weights, "B")],
            per_gpu,
            "B",
        )
    if experts is None and not layout:
        terms = [(total_params(model), "params"), (bytes_per_element(v["weight_dtype"], "weight_dtype"), "B"), tp]
        return step("Weights per GPU", "params × b_w ÷ TP", "{} × {} ÷ {}", terms, per_gpu, "B")
    rule = "(non-expert + expert weight bytes" + padded + ") ÷ TP"
    return step("Weights per GPU", rule, "{} ÷ {}", [(per_gpu * tp, "B"), tp], per_gpu, "B")


def _derivation(v: dict, b: Budget, usable: float) -> list[dict]:
    tp = v["tensor_parallel"]
    share = kv_fraction_per_gpu(v["model"], tp, v["decode_context_parallel"])
    return [
        _weights_step(v, b.weights, tp),
        _usable_step(v, usable),
        step(
            "KV budget per GPU",
            BUDGET_RULE[v["engine_rule"]],
            "max(0, {} − {})",
            [(usable, "B"), (b.weights, "B")],
            b.kv_budget,
            "B",
        ),
        step(
            "KV per sequence per GPU",
            "KV(T) × share of KV heads on one rank ÷ DCP (+ state ÷ TP)"
            + (" × the worst stage's share of the layers" if v.get("pp", 1) > 1 else ""),
            "KV({}) × {}",
            [(v["context_tokens"], "tokens"), share],
            b.per_seq,
            "B",
        ),
        _sequences_step(b),
    ]


def _sequences_step(b: Budget) -> dict:
    terms = [(b.kv_budget, "B"), (b.per_seq, "B")]
    if b.ranks == 1:
        return step("Sequences that fit", "⌊KV budget ÷ KV per sequence⌋", "⌊{} ÷ {}⌋", terms, b.sequences, "sequences")
    return step(
        "Sequences that fit",
        "⌊KV budget ÷ KV per sequence⌋ × attention DP ranks",
        "⌊{} ÷ {}⌋ × {}",
        terms + [b.ranks],
        b.sequences,
        "sequences",
    )


def _tp_series(v: dict) -> dict:
    tps = sorted(t for t in set(TP_SERIES) | {v["tensor_parallel"]} if _dcp_allows(v, t))
    rows = [engine_budget(v, t) for t in tps]
    plot = series(
        "Capacity by tensor-parallel degree",
        "Tensor-parallel GPUs",
        "GPUs",
        tps,
        [
            ("sequences that fit", "sequences", [r.sequences for r in rows]),
            ("KV budget per GPU", "GiB", [r.kv_budget / GIB for r in rows]),
            ("weights per GPU", "GiB", [r.weights / GIB for r in rows]),
        ],
        kind="bar",
    )
    return mark(plot, "tensor_parallel", v["tensor_parallel"]) if v["tensor_parallel"] in tps else plot


def _with_draft(v: dict, b: Budget) -> dict:
    if v["speculative_draft"] == "none":
        return {"draft_weight_bytes_per_gpu": 0.0, "max_concurrent_sequences_with_draft": b.sequences}
    weights, with_draft = draft_budget(v, v["tensor_parallel"], v["context_tokens"])
    return {"draft_weight_bytes_per_gpu": weights, "max_concurrent_sequences_with_draft": with_draft.sequences}


def compute(v: dict) -> dict:
    tp = v["tensor_parallel"]
    if beyond_tp(scale_out(v, tp)):  # TP alone is sized for any degree, as before (a what-if)
        check_scale_out(v, scale_out(v, tp), "tensor_parallel")
    b = engine_budget(v, tp)
    usable = usable_bytes_per_gpu(v)
    fits = b.sequences >= 1
    min_tp = next((t for t in (2**k for k in range(11)) if _dcp_allows(v, t) and engine_budget(v, t).sequences >= 1), 0)
    notes = (
        []
        if fits
        else [
            f"does not fit: {auto_bytes(b.weights)} of weights per GPU leave room for "
            f"{b.sequences} sequences of {v['context_tokens']:,} tokens"
        ]
    )
    return {
        "fits": int(fits),
        "weight_bytes_total": total_weight_bytes(v, b, tp),
        "weight_bytes_per_gpu": b.weights,
        "checkpoint_bytes": checkpoint_weight_bytes(footprint(v)),
        "usable_bytes_per_gpu": usable,
        "kv_budget_bytes_per_gpu": b.kv_budget,
        "kv_bytes_per_sequence_per_gpu": b.per_seq,
        "max_concurrent_sequences": b.sequences,
        "kv_tokens_capacity": b.tokens,
        "min_tensor_parallel_to_fit": min_tp,
        **_with_draft(v, b),
        "notes": notes,
        "derivation": _derivation(v, b, usable),
        "series": {"by_tensor_parallel": _tp_series(v)},
        "chain": _chain(v, b, tp),
    }


def _chain(v: dict, b: Budget, tp: int) -> list[dict]:
    """This KV budget into the paging calculator: the replica's pool in logical bytes (per-GPU budget ÷
    the share of each token's KV one GPU holds), the same model, KV format and context."""
    share = kv_fraction_per_gpu(v["model"], tp, v["decode_context_parallel"])
    gib = b.kv_budget / share / GIB
    if gib < 0.01 or v["context_tokens"] < 2:  # below paging's ranges: nothing to hand on
        return []
    inputs = {
        "model": as_input(v["model"]),
        "kv_dtype": v["kv_dtype"],
        "max_context_tokens": v["context_tokens"],
        "kv_budget_gib": round(gib, 3),
    }
    return [{"to": "paging", "label": "Use this KV budget in Paging", "inputs": inputs}]

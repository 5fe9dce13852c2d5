"""LoRA capacity: one base model, many adapters. What an adapter weighs, what the engine's GPU slots
cost the KV pool, what a batch of mixed adapters adds to a step, and what a swap from host costs.

  adapter     = Σ_modules r × (d_in + d_out) × layers × bytes          (lora.adapter_bytes)
  slot        = the same at max_lora_rank over the wrapped modules, per GPU (lora.slot_bytes_per_gpu),
                + 2 r (vocab + d) for the embedding and LM head when every module is wrapped and the
                model's vLLM class lists them (lora.vllm_wraps_vocab)
  KV lost     = max_loras × slot ÷ KV bytes per token                   (tokens of the pool)
  step extra  = max(a × adapter per GPU ÷ (BW × η), T × 2 r (d_in + d_out) ÷ (N × peak × η × s_chip))
  swap        = adapter per GPU ÷ (host link × η_link)

T tokens in the step touch a distinct adapters (Punica's SGMV, arXiv 2310.18547 §4, reads each
adapter's A and B once per step however many tokens use it). The step term is a roofline bound for
the LoRA kernels alone, beside the base decode step at the same batch; measured kernels do worse at
small ranks (launches, padding). An estimate: no queueing for slots, no overlap of the swap with compute.
"""

from __future__ import annotations

import math

from ..catalog import host_links
from ..errors import InputError
from ..schema import choice, integer, mark, number, output, series, step
from . import lora
from .deployment import deployment_fields
from .memory import budget, engine_fields, footprint, usable_bytes_per_gpu
from .steptime import compute_rate, deployment
from .sharding import steps_for

HOST_LINKS = host_links()
LORA_ELEM_BYTES = 2.0  # BF16/FP16: vLLM's lora_dtype "auto" is the model's activation dtype
SLOT_SERIES = (1, 2, 4, 8, 16, 32, 64, 128)


LINKS = [(k, e["name"]) for k, e in HOST_LINKS.items()]
RANKS = [(str(r), str(r)) for r in lora.VLLM_MAX_LORA_RANKS]
LORA_FIELDS = [
    integer("adapter_rank", "Adapter rank r", 16, 1, 512, "", "The rank each adapter was trained at."),
    choice("target_modules", "Adapter target modules", "qkvo", lora.TARGET_CHOICES),
    choice(
        "slot_modules",
        "Modules given GPU slots",
        "all",
        [
            ("all", "Every supported module (vLLM, target_modules unset)"),
            ("adapter", "Only the adapter's modules (target_modules set)"),
        ],
        "vLLM v0.33.0 wraps every supported linear layer unless LoRAConfig.target_modules (--lora-target-modules) "
        "restricts it, and the embedding and LM head too for models that list them (Llama, Qwen3) "
        "(vllm/lora/model_manager.py _create_lora_modules).",
    ),
    integer(
        "max_loras",
        "GPU adapter slots (--max-loras)",
        16,
        1,
        4096,
        "adapters",
        "Adapters that can run in one batch; vLLM's default is 1 (vllm/config/lora.py).",
    ),
    choice(
        "max_lora_rank",
        "Slot rank (--max-lora-rank)",
        "64",
        RANKS,
        "Every slot is sized at this rank whatever the adapter's own; vLLM's default is 16.",
    ),
    integer(
        "max_cpu_loras",
        "Adapters cached in host memory (--max-cpu-loras)",
        64,
        1,
        1_000_000,
        "adapters",
        "vLLM's LRU cache of loaded adapters in CPU memory; it defaults to max_loras.",
    ),
    integer(
        "batch_tokens",
        "Tokens in a decode step",
        64,
        1,
        1_000_000,
        "tokens",
        "T: one per running sequence in a decode step.",
    ),
    integer(
        "adapters_in_batch",
        "Distinct adapters in that step",
        8,
        1,
        4096,
        "adapters",
        "a: each is read once per step, however many tokens use it; at most the GPU slots.",
    ),
    integer("context_tokens", "Context per sequence (for the base step)", 2048, 1, 10_000_000, "tokens"),
    choice("host_link", "Host link (GPU ↔ CPU memory)", "pcie5-x16", LINKS),
    number(
        "link_efficiency",
        "Host link efficiency",
        0.8,
        0.01,
        1.0,
        "",
        "Fraction of the link's per-direction peak a copy achieves (an assumption).",
        0.01,
    ),
]


SCHEMA = {
    "name": "lora_capacity",
    "title": "LoRA capacity: adapters beside the KV pool",
    "description": (
        "One base model serving many LoRA adapters: the size of one adapter from the model's real shapes, "
        "the GPU slots the engine reserves (max_loras × max_lora_rank over the wrapped modules, vLLM's rule) "
        "and the KV-cache tokens they take from the pool, the extra time a step of mixed adapters costs "
        "(a roofline bound on the batched LoRA kernels, Punica's SGMV), and the time to copy an adapter "
        "from host memory into a slot. Estimates: no queueing for slots, no overlap of copies with compute."
    ),
    "inputs": deployment_fields(0.8, 0.6) + engine_fields() + LORA_FIELDS,
    "outputs": [
        output("adapter_params", "Parameters of one adapter", "", "integer"),
        output("adapter_bytes", "One adapter (BF16, all GPUs)", "B", "bytes"),
        output("adapter_file_bytes_fp32", "The same adapter in FP32 (as PEFT saves it)", "B", "bytes"),
        output("base_weight_bytes", "The base model's weights (all GPUs)", "B", "bytes"),
        output("adapter_share_of_weights", "One adapter ÷ the base weights", "", "percent"),
        output("slot_bytes_per_gpu", "One GPU slot, per GPU (at the slot rank)", "B", "bytes"),
        output("slots_bytes_per_gpu", "All GPU slots, per GPU", "B", "bytes"),
        output("kv_tokens_without_lora", "KV pool without LoRA", "tokens", "integer"),
        output("kv_tokens_with_lora", "KV pool with the slots", "tokens", "integer"),
        output("kv_tokens_per_slot", "KV tokens each slot costs", "tokens", "integer"),
        output("kv_share_lost", "Share of the KV pool the slots take", "", "percent"),
        output(
            "adapters_per_kv_pool",
            "Adapters the whole KV budget could hold instead (unified paging)",
            "adapters",
            "integer",
        ),
        output("host_bytes", "Host memory for the cached adapters", "B", "bytes"),
        output("swap_time_s", "Copy one adapter into a slot", "s", "seconds"),
        output("lora_flops_per_token", "Extra FLOPs per token", "FLOP", "flops"),
        output("lora_step_s", "Extra time for the LoRA kernels in the step (bound)", "s", "seconds"),
        output("base_step_s", "Base decode step at that batch", "s", "seconds"),
        output("lora_step_share", "LoRA kernels ÷ base step", "", "percent"),
        output("swap_in_steps", "One copy, in base decode steps", "steps", "number"),
    ],
}


class Capacity:
    def __init__(self, v: dict):
        self.dep, self.tp = deployment(v), v["num_gpus"]
        self.model = self.dep.model
        self.targets = lora.TARGETS[v["target_modules"]]
        self.slot_targets = lora.MODULES if v["slot_modules"] == "all" else self.targets
        # vLLM then wraps embed_tokens and lm_head too, for the model classes that list them
        self.slot_vocab = v["slot_modules"] == "all" and lora.vllm_wraps_vocab(self.model)
        self.rank, self.slot_rank = v["adapter_rank"], int(v["max_lora_rank"])
        self.budget = budget(footprint(v), usable_bytes_per_gpu(v), self.tp)
        self.link = HOST_LINKS[v["host_link"]]["bandwidth_bytes_per_s"] * v["link_efficiency"]

    def adapter_per_gpu(self) -> float:
        return lora.adapter_bytes_per_gpu(self.model, self.rank, self.targets, LORA_ELEM_BYTES, self.tp)

    def slot(self) -> float:
        linear = lora.slot_bytes_per_gpu(self.model, self.slot_rank, self.slot_targets, LORA_ELEM_BYTES, self.tp)
        if not self.slot_vocab:
            return linear
        return linear + lora.vocab_slot_bytes_per_gpu(self.model, self.slot_rank, LORA_ELEM_BYTES)

    def kv_tokens(self, slots: int) -> int:
        left = max(0.0, self.budget.kv_budget - slots * self.slot())
        return math.floor(left / self.budget.per_token)


def _series(c: Capacity, slots: int) -> dict:
    xs = sorted(set(SLOT_SERIES) | {slots})
    plot = series(
        "KV pool left beside the adapter slots",
        "GPU adapter slots (max_loras)",
        "adapters",
        xs,
        [("KV pool", "tokens", [c.kv_tokens(x) for x in xs])],
    )
    return mark(plot, "max_loras", slots, on="KV pool")


def _memory(c: Capacity, v: dict) -> dict:
    """What the adapters weigh and what the slots take from the KV pool."""
    slots, per_token = v["max_loras"], c.budget.per_token
    params = lora.adapter_params(c.model, c.rank, c.targets)
    whole, slot = params * LORA_ELEM_BYTES, c.slot()
    without, with_slots = c.kv_tokens(0), c.kv_tokens(slots)
    weights = c.budget.weights * c.tp
    return {
        "adapter_params": params,
        "adapter_bytes": whole,
        "adapter_file_bytes_fp32": params * 4.0,
        "base_weight_bytes": weights,
        "adapter_share_of_weights": whole / weights if weights else 0.0,
        "slot_bytes_per_gpu": slot,
        "slots_bytes_per_gpu": slots * slot,
        "kv_tokens_without_lora": without,
        "kv_tokens_with_lora": with_slots,
        "kv_tokens_per_slot": math.floor(slot / per_token),
        "kv_share_lost": 1 - with_slots / without if without else 0.0,
        "adapters_per_kv_pool": math.floor(c.budget.kv_budget / c.adapter_per_gpu()),
        "host_bytes": v["max_cpu_loras"] * whole,
    }


def _time(c: Capacity, v: dict) -> tuple[dict, float, float]:
    """The LoRA kernels' bound in a step, the base step, and one swap; also the bound's two terms."""
    a = min(v["adapters_in_batch"], v["max_loras"])
    flops_tok = lora.flops_per_token(c.model, c.rank, c.targets)
    bw = c.dep.accelerator.memory_bandwidth_bytes_per_s * c.dep.bandwidth_efficiency
    peak = compute_rate(c.dep)
    memory_s, compute_s = a * c.adapter_per_gpu() / bw, v["batch_tokens"] * flops_tok / c.tp / peak
    lora_s = max(memory_s, compute_s)
    base_s = steps_for(v, c.dep).decode(v["batch_tokens"], v["context_tokens"]).time_s
    swap_s = lora.swap_time_s(c.adapter_per_gpu(), c.link)
    out = {
        "swap_time_s": swap_s,
        "lora_flops_per_token": flops_tok,
        "lora_step_s": lora_s,
        "base_step_s": base_s,
        "lora_step_share": lora_s / base_s,
        "swap_in_steps": swap_s / base_s,
    }
    return out, memory_s, compute_s


def _notes(v: dict, out: dict) -> list[str]:
    slots, notes = v["max_loras"], []
    if v["adapters_in_batch"] > slots:
        notes.append(f"a step can hold at most {slots} distinct adapters (the GPU slots): counted as {slots}")
    if v["max_cpu_loras"] < slots:
        notes.append("vLLM requires max_cpu_loras ≥ max_loras (vllm/config/lora.py)")
    if out["kv_tokens_with_lora"] == 0:
        notes.append("the slots take the whole KV budget: no KV pool is left")
    return notes


def compute(v: dict) -> dict:
    c = Capacity(v)
    if c.rank > c.slot_rank:
        raise InputError("adapter_rank", f"must be ≤ the slot rank (--max-lora-rank {c.slot_rank}) to load")
    out = _memory(c, v)
    times, memory_s, compute_s = _time(c, v)
    out.update(times)
    out["notes"] = _notes(v, out)
    out["derivation"] = _memory_steps(c, v, out) + _kv_steps(c, v, out) + _time_steps(c, v, memory_s, compute_s)
    out["series"] = {"kv_vs_slots": _series(c, v["max_loras"])}
    return out


def _memory_steps(c: Capacity, v: dict, out: dict) -> list[dict]:
    slot = out["slot_bytes_per_gpu"]
    return [
        step(
            "Adapter parameters",
            "Σ r × (d_in + d_out) × layers",
            "r = {} over {}",
            [c.rank, ", ".join(c.targets)],
            out["adapter_params"],
            "",
        ),
        step(
            "Adapter per GPU",
            "column: r(d_in + d_out ÷ N), row: r(d_in ÷ N + d_out), × 2 B",
            "N = {}",
            [c.tp],
            c.adapter_per_gpu(),
            "B",
        ),
        step(
            "One GPU slot",
            "the same at max_lora_rank over the wrapped modules",
            "rank {} over {}",
            [c.slot_rank, ", ".join(c.slot_targets) + (", embedding, LM head" if c.slot_vocab else "")],
            slot,
            "B",
        ),
    ]


def _kv_steps(c: Capacity, v: dict, out: dict) -> list[dict]:
    kv, per_token = (c.budget.kv_budget, "B"), (c.budget.per_token, "B")
    slot = out["slot_bytes_per_gpu"]
    return [
        step(
            "KV pool without LoRA",
            "KV budget ÷ KV bytes per token",
            "{} ÷ {}",
            [kv, per_token],
            out["kv_tokens_without_lora"],
            "tokens",
        ),
        step(
            "KV pool with the slots",
            "(KV budget − max_loras × slot) ÷ KV bytes per token",
            "({} − {} × {}) ÷ {}",
            [kv, v["max_loras"], (slot, "B"), per_token],
            out["kv_tokens_with_lora"],
            "tokens",
        ),
    ]


def _time_steps(c: Capacity, v: dict, memory_s: float, compute_s: float) -> list[dict]:
    a, per_gpu = min(v["adapters_in_batch"], v["max_loras"]), c.adapter_per_gpu()
    return [
        step("LoRA kernels, memory", "a × adapter per GPU ÷ (BW × η)", "{} × {}", [a, (per_gpu, "B")], memory_s, "s"),
        step(
            "LoRA kernels, compute",
            "T × 2 r (d_in + d_out) ÷ (N × peak × η)",
            "{} tokens",
            [v["batch_tokens"]],
            compute_s,
            "s",
        ),
        step(
            "Copy one adapter in",
            "adapter per GPU ÷ (host link × η)",
            "{} ÷ {}",
            [(per_gpu, "B"), (c.link, "B/s")],
            lora.swap_time_s(per_gpu, c.link),
            "s",
        ),
    ]

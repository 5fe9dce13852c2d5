"""Engine-faithful capacity: the memory calculator's startup accounting as a named engine version does it.

The plain memory calculator (memory.py) applies one budget rule and divides by the KV bytes of a
token. An engine does more, and differently by version; this mode follows it line by line, with every
version's defaults and rules in data/engine_versions.toml (each with its file:line at the tag):

  vLLM   requested  = gpu_memory_utilization × total device memory (torch's total)
         available  = requested − weights − activation peak − non-torch − CUDA graphs (from v0.20, on the
                      platforms each release estimates them on, and not for the models v0.22 to v0.28 serve on
                      Model Runner V2, which estimates none): the "Available KV cache memory" line, the budget
                      itself up to v0.33
         v0.34+     on CUDA and ROCm the cache is sized after warmup and graph capture (the extensible KV cache,
                    gpu_memory_utilization 1.0 by default): the estimate has no graph term, and the budget is the
                    smaller of it and min(requested − in use, total − in use at start − in use − margin) − peak,
                    in use = weights + non-torch + graphs, margin = max(1 GiB (3 on ROCm), 0.75 × the peak)
         groups     = one per attention type, split to a common layer count (hybrid and
                      sliding-window models), padded; page = block_size × bytes per token per layer
         num_blocks = ⌊available ÷ (group_size × page)⌋
         concurrency = num_blocks ÷ Σ groups' blocks for one max_model_len request
         "GPU KV cache size" = num_blocks ÷ groups × block_size (to v0.20.0) or ⌊concurrency × max_model_len⌋
  SGLang budget = free memory after the weights − memory before loading × (1 − mem_fraction_static), the fraction
         the reader's or, where none is given, the one the release sets (sglang_memory.py)
         max_total_num_tokens = ⌊budget ÷ cell_size⌋, floored to page_size; cell = KV bytes per token, all layers

The activation peak, non-torch memory and CUDA-graph memory are not derivable from a config: they are
fitted constants (said so beside each number), and a startup log's own figures replace them
(calcs/startup_log.py). The weights are the checkpoint's, or as vLLM's MoE kernel holds them where it pads
gpt-oss's MXFP4 experts (memory.expert_layout, loaded_weight_bytes: the kernel v0.33.0 picks by chip, which
v0.19.0, v0.20.0, v0.22.0 and v0.26.0 pick too, padded by each version's rule; v0.34.0's selection, not read, is
taken as v0.33.0's).
Hybrid models with linear-attention (Mamba, DeltaNet) layers are refused: their state pages follow rules this mode
does not model.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

from ..catalog import engine_versions
from ..errors import InputError
from ..model import Model, vendor_in
from ..schema import (
    accelerator_field,
    choice,
    dtype_field,
    expert_dtype_field,
    integer,
    model_field,
    number,
    output,
    step,
)
from .engine_defaults import LARGEST_TIER_FROM, vllm_max_num_batched_tokens
from .kv_pages import layout, sglang_capacity, sglang_cell_bytes, vllm_capacity
from .memory import checkpoint_weight_bytes, expert_layout, footprint, loaded_weight_bytes
from .sglang_memory import DefaultFraction, aiter_scaled, default_fraction
from ..units import GIB, MIB


def versions() -> dict[str, dict]:
    """Every engine version's rules, by id (engine_versions.toml, as written)."""
    return engine_versions()


def version(vid: str) -> dict:
    try:
        return versions()[vid]
    except KeyError:
        raise InputError("engine_version", f"unknown engine version {vid!r}; known: {', '.join(versions())}") from None


def release(text: str) -> tuple[int, ...]:
    """A release as numbers, (major, minor, patch): '0.15.2rc1.dev93+g11a4c9d30' is (0, 15, 2), '0' is (0,)."""
    return tuple(int(x) for x in re.findall(r"\d+", text.split("+")[0])[:3])


def vllm_versions() -> list[dict]:
    """vLLM's entries, oldest rules first (by the release each holds from, `since`)."""
    return sorted((v for v in versions().values() if v["engine"] == "vllm"), key=lambda v: release(v["since"]))


def rules_for_release(text: str) -> dict:
    """The vLLM entry a release follows: the latest `since` at or below it, else the oldest (the nearest)."""
    ordered = vllm_versions()
    held = [v for v in ordered if release(v["since"]) <= release(text)]
    return held[-1] if held else ordered[0]


def version_choices() -> list[tuple[str, str]]:
    return [(v["id"], v["label"]) for v in versions().values()]


def non_torch_bytes(ver: dict, tensor_parallel: int) -> float:
    """Fitted non-torch memory per GPU at a TP degree (the nearest tabulated degree at or below it)."""
    table = {int(k): v for k, v in ver["non_torch_gib"].items()}
    key = max((t for t in table if t <= tensor_parallel), default=min(table))
    return table[key] * GIB


def activation_bytes(ver: dict, model: Model, max_num_batched_tokens: int) -> float:
    """Fitted profiling-run activation peak: a × batched tokens ÷ 1,024 × hidden ÷ 4,096 GiB."""
    return ver["activation_gib_per_ktoken"] * max_num_batched_tokens / 1024 * model.hidden_size / 4096 * GIB


# ---- the forward accounting (no log) -----------------------------------------------------------


@dataclass(frozen=True)
class Accounting:
    total: float  # device memory as torch sees it
    requested: float  # what the engine may use (vLLM) or its static share (SGLang)
    weights: float  # per GPU as the engine holds them
    activation: float
    non_torch: float
    cudagraph: float
    available: float  # the KV budget
    checkpoint: float  # the checkpoint's weights per GPU (= weights where a log gave them)
    estimate: float  # vLLM's "Available KV cache memory" line (the budget itself unless sized after warmup)
    after_warmup: bool = False  # sized from the memory measured after warmup (v0.34.0 on CUDA and ROCm)
    measured: float = 0.0  # after warmup: what that memory leaves
    margin: float = 0.0  # after warmup: max(floor, fraction × the transient peak)
    in_use_at_start: float = 0.0  # after warmup: memory in use at vLLM's first snapshot
    at_start_entered: bool = False  # after warmup: the reader gave that figure


def loaded_weights(v: dict, ver: dict) -> tuple[float, float]:
    """(weights per GPU as the engine holds them, the checkpoint's share per GPU): a log's figure for both where one
    was given; else vLLM's MoE kernels pad 4-bit float experts by chip (memory.expert_layout, weight_layouts.toml),
    SGLang is not modelled so."""
    if v.get("weights_gib"):
        return v["weights_gib"] * GIB, v["weights_gib"] * GIB
    f, tp = footprint({**v, "engine_rule": ver["engine"]}), v["tensor_parallel"]
    return loaded_weight_bytes(f, tp) / tp, checkpoint_weight_bytes(f) / tp


def _fitted(v: dict, key: str, rule: float) -> float:
    """A log's figure in GiB where the reader gave one (≥ 0), else the fitted rule's bytes."""
    return v[key] * GIB if v.get(key, -1) >= 0 else rule


def measured_kv_bytes(requested: float, in_use: float, free_at_start: float, margin: float, kept: float) -> float:
    """What sizing after warmup gives the cache (v0.34.0's measure_kv_cache_bytes, extensible_kv_cache.py:592-618):
    min(requested − memory in use but the cache, memory free at start − that − margin) − what it keeps free for
    transients. The capacity mode passes its accounting's figures, the log reader the log's."""
    return min(requested - in_use, free_at_start - in_use - margin) - kept


def accounting(v: dict, ver: dict) -> Accounting:
    m, tp = v["model"], v["tensor_parallel"]
    total = with_memory(v["hardware"], v.get("device_memory_gib")).memory_bytes
    weights, checkpoint = loaded_weights(v, ver)
    base = {"total": total, "weights": weights, "checkpoint": checkpoint}
    if ver["engine"] == "sglang":
        requested = v["mem_fraction_static"] * total
        budget = max(0.0, requested - weights)
        return Accounting(
            **base, requested=requested, activation=0.0, non_torch=0.0, cudagraph=0.0, available=budget, estimate=budget
        )
    after_warmup = sized_after_warmup(ver, v["hardware"].vendor)
    default = ver["gpu_memory_utilization_after_warmup"] if after_warmup else ver["gpu_memory_utilization"]
    requested = math.ceil((v["gpu_memory_utilization"] or default) * total)
    act = _fitted(v, "activation_gib", activation_bytes(ver, m, v["max_num_batched_tokens"]))
    non_torch = _fitted(v, "non_torch_gib", non_torch_bytes(ver, tp))
    graphs = graph_bytes(ver, v)
    held = {**base, "requested": requested, "activation": act, "non_torch": non_torch, "cudagraph": graphs}
    if not after_warmup:
        estimate = requested - weights - act - non_torch - graphs
        return Accounting(**held, available=estimate, estimate=estimate)
    # the estimate has no graph term (measured after capture instead); what warmup leaves is the budget where smaller
    estimate = requested - weights - act - non_torch
    entered = v.get("in_use_at_start_gib", -1) >= 0
    at_start = v["in_use_at_start_gib"] * GIB if entered else ver["in_use_at_start_gib"] * GIB
    margin = warmup_margin(ver, v["hardware"].vendor, act)
    measured = measured_kv_bytes(requested, weights + non_torch + graphs, total - at_start, margin, act)
    return Accounting(
        **held,
        available=min(estimate, measured),
        estimate=estimate,
        after_warmup=True,
        measured=measured,
        margin=margin,
        in_use_at_start=at_start,
        at_start_entered=entered,
    )


def graphs_in_budget(ver: dict, vendor: str) -> bool:
    """Whether this release takes its CUDA-graph estimate out of the budget on this vendor's GPUs (it estimates them
    on the platforms cudagraph_vendors names only: v0.20.x not on ROCm, v0.21.0 to v0.25 on CUDA alone, v0.26.0 on
    both)."""
    return ver["cudagraph_in_budget"] and vendor_in(vendor, ver["cudagraph_vendors"])


UNQUANTIZED = ("bf16", "fp16", "fp32")


def on_v2_runner(ver: dict, model: Model, weight_dtype: str) -> bool:
    """Whether the release's Model Runner V2, which estimates no CUDA-graph memory, serves this model by default
    (the entry's v2_runner): a listed model class with no experts, or with every_dense any model without experts
    too; never a hybrid model (linear-attention layers); with unquantized_only, BF16, FP16 or FP32 weights only, any
    other format taken as a quantized checkpoint (v0.22.0 tests for a quantization_config, so a BF16 checkpoint that
    vLLM quantizes as it loads still runs on V2 there: not told apart)."""
    rule = ver.get("v2_runner")
    if not rule or model.linear_mixer is not None:
        return False
    if rule["unquantized_only"] and weight_dtype not in UNQUANTIZED:
        return False
    listed = model.architecture in rule["architectures"]
    return (listed or model.moe is None) if rule["every_dense"] else (listed and model.moe is None)


def graph_bytes(ver: dict, v: dict) -> float:
    """The CUDA-graph estimate a vLLM budget takes out: where the release estimates it on this platform and its
    model runner for this model does (V2 in v0.22.0 to v0.28 estimates none)."""
    if not graphs_in_budget(ver, v["hardware"].vendor) or on_v2_runner(ver, v["model"], v["weight_dtype"]):
        return 0.0
    return ver["cudagraph_gib"] * GIB


def sized_after_warmup(ver: dict, vendor: str) -> bool:
    """Whether this release sizes the KV cache from memory measured after warmup on this vendor's chips (v0.34.0's
    extensible KV cache: CUDA and ROCm, after_warmup_vendors), rather than from its profiling estimate."""
    return ver.get("kv_sizing") == "after_warmup" and vendor_in(vendor, ver["after_warmup_vendors"])


def warmup_margin(ver: dict, vendor: str, transient_peak: float) -> float:
    """The after-warmup sizing's margin: max(the platform's floor, fraction × the transient peak); CUDA's floor for a
    vendor with none (a log sized after warmup came from CUDA or ROCm)."""
    floors = ver["warmup_margin_floor_gib"]
    floor = next((f for name, f in floors.items() if vendor_in(vendor, [name])), floors["NVIDIA"])
    return max(floor * GIB, ver["warmup_margin_fraction"] * transient_peak)


def with_memory(hardware, gib: float | None):
    """The accelerator as the engine sees it: with the device memory a reader entered or a log printed (GiB), if any."""
    return dataclasses.replace(hardware, memory_bytes=gib * GIB) if gib else hardware


def default_batched_tokens(ver: dict, hardware, of_release: str | None = None) -> int:
    """`vllm serve`'s max_num_batched_tokens where the reader sets none: engine_defaults' tiers by device memory, the
    160 GiB one from v0.28.0 (by the log's release where known, else the entry's own); SGLang's budget does not use
    it here: 0."""
    if ver["engine"] != "vllm":
        return 0
    largest_tier = release(of_release or ver["id"]) >= LARGEST_TIER_FROM
    return vllm_max_num_batched_tokens(hardware, largest_tier)


def default_block_size(ver: dict, model: Model, vendor: str) -> int:
    """The version's block size; vLLM v0.34.0 on ROCm keeps ROCM_ATTN's 16 where that one backend serves every layer
    (no MLA, no attention sinks, no chunked local attention, whose layers take a backend class of their own, so that
    the default 64, which every class accepts, wins)."""
    rocm_attn = (
        vendor_in(vendor, ["AMD"])
        and model.attention.kind != "mla"
        and not model.attention.sinks
        and "chunked" not in model.layer_kinds
    )
    return ver["block_size_rocm_attn"] if rocm_attn and "block_size_rocm_attn" in ver else ver["block_size"]


TOKENS_RULE = {
    "blocks_per_group": "blocks ÷ groups × block size",
    "concurrency_x_len": "⌊concurrency × max_model_len⌋",
}

# ---- the calculator ------------------------------------------------------------------------------

SCHEMA = {
    "name": "engine_capacity",
    "title": "Engine-faithful KV capacity, by engine version",
    "description": (
        "The startup accounting of a named vLLM or SGLang release, line by line: memory the engine may use, "
        "weights, activation peak, non-torch and CUDA-graph memory, the KV budget, the KV-cache groups and pages, "
        "and the lines the engine prints: GPU KV cache size, maximum concurrency, max_total_num_tokens. "
        "Activation, non-torch and CUDA-graph memory are fitted constants, not derived."
    ),
    "inputs": [
        choice("engine_version", "Engine version", "vllm-0.34.0", version_choices()),
        model_field(default="llama-3.1-8b"),
        accelerator_field(default="h100-sxm"),
        dtype_field("weight_dtype", "Weight format", "bf16"),
        expert_dtype_field(),
        dtype_field("kv_dtype", "KV-cache format", "bf16"),
        integer("tensor_parallel", "Tensor-parallel GPUs", 1, 1, 64, "GPUs"),
        integer("max_model_len", "max_model_len (SGLang context_len)", 32768, 16, 10_000_000, "tokens"),
        integer(
            "max_num_batched_tokens",
            "max_num_batched_tokens (0 = the version's default for the chip)",
            0,
            0,
            1_000_000,
            "tokens",
            "vllm serve's default by device memory: 2,048 tokens below 70 GiB and on A100s, 8,192 from 70 GiB, from "
            "v0.28 16,384 from 160 GiB (B200, MI300X; TPU and other platforms' own rules are not modelled). It sizes "
            "the fitted activation peak and the tokens in flight a sliding-window request holds.",
        ),
        integer(
            "block_size",
            "Block size (SGLang page_size; 0 = the version's default)",
            0,
            0,
            1024,
            "tokens",
            "vLLM v0.34.0 defaults to 64 tokens (16 on ROCm where its ROCM_ATTN backend serves the model), v0.19.0 to "
            "v0.33.0 to 16 on CUDA attention backends; SGLang to 1.",
        ),
        number(
            "gpu_memory_utilization",
            "vLLM gpu_memory_utilization (0 = the version's default)",
            0.0,
            0.0,
            1.0,
            "",
            step=0.01,
        ),
        number(
            "mem_fraction_static",
            "SGLang mem_fraction_static (0 = SGLang's own)",
            0.0,
            0.0,
            1.0,
            "",
            "0: SGLang's own rule by the GPU's memory, TP and model (arg_groups/memory_hook.py:281-344 at v0.5.23). "
            "Otherwise the value passed to --mem-fraction-static: on ROCm, with aiter attention and context_len above "
            "8,192, SGLang uses 85% of it (the value its log prints).",
            0.01,
        ),
        number("device_memory_gib", "Device memory as reported (0 = catalogue)", 0.0, 0.0, 4096.0, "GiB"),
        number("weights_gib", "Weights per GPU as loaded (0 = from the model)", 0.0, 0.0, 4096.0, "GiB"),
        number("activation_gib", "Activation peak (−1 = fitted rule)", -1.0, -1.0, 1024.0, "GiB"),
        number("non_torch_gib", "Non-torch memory (−1 = fitted rule)", -1.0, -1.0, 1024.0, "GiB"),
        number(
            "in_use_at_start_gib",
            "Memory in use at start (vLLM v0.34.0; −1 = the version's assumption)",
            -1.0,
            -1.0,
            1024.0,
            "GiB",
            "What the GPU held when vLLM started (the CUDA context, other processes): total − free on the log's "
            "'Free memory on device (free/total GiB) on startup' line. Only v0.34.0's sizing after warmup uses it.",
        ),
    ],
    "outputs": [
        output("requested_bytes", "Memory the engine may use per GPU", "B", "bytes"),
        output("weight_bytes", "Weights per GPU", "B", "bytes"),
        output("activation_bytes", "Activation peak (fitted)", "B", "bytes"),
        output("non_torch_bytes", "Non-torch memory (fitted)", "B", "bytes"),
        output("cudagraph_bytes", "CUDA-graph memory in the budget (fitted)", "B", "bytes"),
        output("estimate_bytes", "Available KV cache memory as vLLM prints it (SGLang: the budget)", "B", "bytes"),
        output("available_bytes", "KV budget per GPU", "B", "bytes"),
        output("kv_bytes_per_token", "KV bytes per token per GPU", "B", "integer"),
        output("kv_groups", "KV-cache groups", "groups", "integer"),
        output("padding_layers", "Padding layers", "layers", "integer"),
        output("num_blocks", "KV blocks (pages)", "blocks", "integer"),
        output("kv_tokens", "GPU KV cache size / max_total_num_tokens", "tokens", "integer"),
        output("max_concurrency", "Maximum concurrency at max_model_len", "×", "number"),
    ],
}


def cite(ver: dict, key: str) -> str:
    """The file:line a rule comes from (the first word of its source in engine_versions.toml), with the tag."""
    return f"{ver['label']} {ver['sources'][key].split(' ')[0].rstrip(':')}"


def _derive_sglang(v: dict, ver: dict, acc: Accounting) -> dict:
    cell = sglang_cell_bytes(v["model"], v["kv_dtype"], v["tensor_parallel"])
    cap = sglang_capacity(cell, acc.available, v["block_size"], v["max_model_len"])
    steps = [
        step(
            "KV bytes per token (cell_size)",
            "KV heads per rank × head dim × 2 × layers × bytes; " + cite(ver, "cell_size"),
            "{}",
            [(cell, "B")],
            cell,
            "B",
        ),
        step(
            "max_total_num_tokens",
            "⌊budget ÷ cell⌋ to a page multiple; " + cite(ver, "tokens"),
            "⌊{} ÷ {}⌋ floored to {}",
            [(acc.available, "B"), (cell, "B"), v["block_size"]],
            cap.tokens,
            "tokens",
        ),
    ]
    return {"capacity": cap, "groups": 1, "padding": 0, "per_token": cell, "steps": steps}


def _derive_vllm(v: dict, ver: dict, acc: Accounting) -> dict:
    lay = layout(v["model"], v["kv_dtype"], v["tensor_parallel"], v["block_size"])
    cap = vllm_capacity(ver, lay, acc.available, v["max_model_len"], v["max_num_batched_tokens"])
    per_block = "group size × block size × bytes per token per layer; " + cite(ver, "num_blocks")
    per_request = "blocks ÷ Σ groups' blocks per max_model_len request; " + cite(ver, "concurrency")
    tokens_rule = TOKENS_RULE[ver["tokens_rule"]] + "; " + cite(ver, "tokens")
    steps = [
        step(
            "Bytes per block",
            per_block,
            "{} layers × {} tokens × {}",
            [lay.group_size, lay.block_size, (lay.per_layer_token, "B")],
            lay.bytes_per_block,
            "B",
        ),
        step(
            "KV blocks",
            "⌊available ÷ bytes per block⌋",
            "⌊{} ÷ {}⌋",
            [(acc.available, "B"), (lay.bytes_per_block, "B")],
            cap.num_blocks,
            "blocks",
        ),
        step(
            "Maximum concurrency",
            per_request,
            "{} ÷ {}",
            [cap.num_blocks, cap.blocks_per_request],
            cap.concurrency,
            "×",
        ),
        step("GPU KV cache size", tokens_rule, "{}", [cap.tokens], cap.tokens, "tokens"),
    ]
    groups, padding = len(lay.groups), lay.padding_layers
    return {"capacity": cap, "groups": groups, "padding": padding, "per_token": lay.bytes_per_token, "steps": steps}


def derive(v: dict, ver: dict, acc: Accounting) -> dict:
    """Capacity and its derivation steps from an accounting."""
    return _derive_sglang(v, ver, acc) if ver["engine"] == "sglang" else _derive_vllm(v, ver, acc)


def _weight_steps(v: dict, ver: dict, acc: Accounting) -> list[dict]:
    """The weights as loaded, where the engine's kernel holds more than the checkpoint (never with a log's figure,
    which is both; nor where the experts' sizes are already on the kernel's tiles)."""
    loaded, checkpoint = acc.weights, acc.checkpoint
    if loaded == checkpoint:
        return []
    layout = expert_layout({**v, "engine_rule": ver["engine"]})
    return [
        step(
            "Weights per GPU as loaded",
            f"the checkpoint's share per GPU + the padding {layout['kernel']} adds to each GPU's slice of every routed "
            f"expert (the kernel this version picks for gpt-oss on this chip: weight_layouts.toml, "
            f"{layout['source'].split(' (')[0]})",
            "{} + {}",
            [(checkpoint, "B"), (loaded - checkpoint, "B")],
            loaded,
            "B",
        )
    ]


def _accounting_steps(ver: dict, acc: Accounting) -> list[dict]:
    if ver["engine"] == "sglang":
        return [
            step(
                "KV budget per GPU",
                "mem_fraction_static × memory − weights; " + cite(ver, "budget"),
                "{} − {}",
                [(acc.requested, "B"), (acc.weights, "B")],
                acc.available,
                "B",
            )
        ]
    if not acc.after_warmup:
        return [
            step(
                "Available KV cache memory (the KV budget per GPU)",
                "requested − weights − activation − non-torch − CUDA graphs; " + cite(ver, "budget"),
                "{} − {} − {} (fitted) − {} (fitted) − {} (fitted)",
                [(acc.requested, "B"), (acc.weights, "B"), (acc.activation, "B"), (acc.non_torch, "B")]
                + [(acc.cudagraph, "B")],
                acc.estimate,
                "B",
            )
        ]
    return _after_warmup_steps(ver, acc)


def _after_warmup_steps(ver: dict, acc: Accounting) -> list[dict]:
    """v0.34.0's estimate (no graph term), what warmup leaves, and the smaller of the two."""
    in_use = acc.weights + acc.non_torch + acc.cudagraph
    return [
        step(
            "Available KV cache memory (the profiling estimate)",
            "requested − weights − activation − non-torch, no CUDA-graph term; " + cite(ver, "budget_after_warmup"),
            "{} − {} − {} (fitted) − {} (fitted)",
            [(acc.requested, "B"), (acc.weights, "B"), (acc.activation, "B"), (acc.non_torch, "B")],
            acc.estimate,
            "B",
        ),
        step(
            "What warmup leaves",
            "min(requested − in use, memory − in use at start − in use − margin) − activation peak; in use = weights + "
            f"non-torch + CUDA graphs, margin = max(floor, {ver['warmup_margin_fraction']} × the peak); "
            + cite(ver, "after_warmup"),
            "min({} − {}, {} − {}" + ("" if acc.at_start_entered else " (assumed)") + " − {} − {}) − {}",
            [(acc.requested, "B"), (in_use, "B"), (acc.total, "B"), (acc.in_use_at_start, "B"), (in_use, "B")]
            + [(acc.margin, "B"), (acc.activation, "B")],
            acc.measured,
            "B",
        ),
        step(
            "KV budget per GPU, sized after warmup",
            "the smaller of the two; " + cite(ver, "min_over_ranks"),
            "min({}, {})",
            [(acc.estimate, "B"), (acc.measured, "B")],
            acc.available,
            "B",
        ),
    ]


def _graph_notes(ver: dict, v: dict) -> list[str]:
    """Why no CUDA-graph memory is in a vLLM budget: captured after sizing, not estimated on this platform, or not by
    the model runner that serves this model."""
    hardware, model = v["hardware"], v["model"]
    if ver["engine"] != "vllm":
        return []
    if graphs_in_budget(ver, hardware.vendor):
        if not on_v2_runner(ver, model, v["weight_dtype"]):
            return []
        return [
            f"{ver['label']} serves {model.name} on its Model Runner V2 by default ({cite(ver, 'v2_runner')}), whose "
            "profiling run estimates no CUDA-graph memory: none is taken out of this budget. Its log then says "
            "'Using V2 Model Runner'; where it does not (V2 declines a launch that asks for a feature it lacks, an "
            "installed logits-processor plugin among them), V1 served the model and took the graph term out."
        ]
    if not ver["cudagraph_in_budget"]:
        return [f"{ver['label']} captures CUDA graphs after sizing the KV cache: they are not in this budget."]
    return [
        f"{ver['label']} estimates CUDA-graph memory on {' and '.join(ver['cudagraph_vendors'])} GPUs only: none is "
        f"taken out of the budget on {hardware.name}."
    ]


FITTED_NOTE = (
    "Activation peak, non-torch and CUDA-graph memory are fitted constants (engine_versions.toml), not derived: "
    "paste a startup log to use its own figures."
)


def _notes(v: dict, ver: dict, acc: Accounting, d: dict, padded: bool) -> list[str]:
    notes = [FITTED_NOTE] if ver["engine"] == "vllm" else []
    if acc.after_warmup:
        notes.append(
            f"{ver['label']} sizes the KV cache after warmup and CUDA-graph capture (its extensible KV cache, on by "
            f"default for {' and '.join(ver['after_warmup_vendors'])} GPUs, with gpu_memory_utilization "
            f"{ver['gpu_memory_utilization_after_warmup']} when unset): its 'Available KV cache memory' line is the "
            "profiling estimate (without the CUDA graphs, measured after capture instead), and the cache is the "
            "smaller of it and what the memory measured after warmup leaves (the 'Memory after warmup' line gives "
            "those figures). The core keeps back the fitted activation peak; the engine keeps back the peak it "
            "measured in warmup, or torch's reservation growth where larger, so read this budget as an upper bound. "
            + ("" if acc.at_start_entered else "The memory in use at start is assumed unless you enter it.")
        )
    elif ver.get("kv_sizing") == "after_warmup":
        notes.append(
            f"{ver['label']} sizes the KV cache after warmup on {' and '.join(ver['after_warmup_vendors'])} GPUs only: "
            f"on {v['hardware'].name} it keeps the profiling estimate, at gpu_memory_utilization "
            f"{ver['gpu_memory_utilization']} when unset."
        )
    notes += _graph_notes(ver, v)
    if d["padding"]:
        notes.append(f"{d['groups']} KV-cache groups with {d['padding']} padding layers (hybrid attention).")
    if padded:
        notes.append(
            "The weights as loaded are more than the checkpoint's: vLLM pads every routed expert of an MXFP4 "
            "checkpoint to the tiles of the MoE kernel it picks on the chip, the kernel v0.33.0 and v0.19.0 to v0.26.0 "
            "pick, padded by each version's rule (weight_layouts.toml; older releases differ, and v0.34.0's selection, "
            "not read here, is taken as v0.33.0's); on Hopper, where those releases run Triton's kernel, Marlin's "
            "padding is kept. A log's 'Model loading took' line gives your engine's own figure: enter it as the "
            "weights as loaded."
        )
    if acc.available <= 0:
        notes.append("no memory is left for the KV cache: the engine would refuse to start")
    return notes


def _sglang_fraction(v: dict, ver: dict, seen) -> tuple[float, list[dict], list[str]]:
    """The mem_fraction_static the engine uses, with its derivation line and notes: vLLM's input untouched; SGLang's
    the reader's (× 0.85 where ROCm's aiter attention cuts it) or, given none, the release's own on the memory seen."""
    given = v["mem_fraction_static"]
    if ver["engine"] != "sglang":
        return given, [], []
    if not given:
        f = default_fraction(ver, v["model"], seen, v["tensor_parallel"], v["max_model_len"])
        notes = _sglang_platform_note(ver, v["hardware"]) + _default_fraction_notes(ver, f, v)
        return f.fraction, [_default_fraction_line(ver, f)], notes
    rule = ver["default_fraction"]
    if not aiter_scaled(rule, v["model"], v["hardware"], v["tensor_parallel"], v["max_model_len"]):
        return given, [], []
    scale = rule["aiter_scale"]
    used = given * scale
    line = step(
        "mem_fraction_static as SGLang uses it",
        f"the value given {aiter_cut_text(rule)}{_spared_by(rule)}; " + cite(ver, "aiter_cut"),
        f"{{}} × {scale:g}",
        [given],
        used,
        "",
    )
    return used, [line], [f"mem_fraction_static: {given:g} given, {used:g} as {ver['label']} uses it (× {scale:g})."]


def aiter_cut_text(rule: dict) -> str:
    return (
        f"× {rule['aiter_scale']:g} (ROCm's aiter attention, context_len above {rule['aiter_above_context']:,} tokens)"
    )


def _spared_by(rule: dict) -> str:
    return f", unless {rule['aiter_given_spared_by']} is set" if rule["aiter_given_spared_by"] else ""


def _reserve_rule(rule: dict) -> str:
    return (
        f"reserved = {rule['base_mib']:,} + {rule['activation_mib_per_token']:g} × max(chunked_prefill_size, "
        f"{rule['min_activation_tokens']:,}) + TP ÷ 8 × {rule['parallel_mib_per_8_gpus']:,} + CUDA graphs, at least "
        f"{rule['floor_mib']:,} above {rule['floor_above_mib'] / 1024:g} GiB, in MiB"
    )


def _sglang_platform_note(ver: dict, hardware) -> list[str]:
    if vendor_in(hardware.vendor, ver["default_fraction"]["platforms"]):
        return []
    return [
        f"{ver['label']} has no memory reading for {hardware.name} (it reads the memory of CUDA, ROCm, Gaudi, Intel "
        "XPU and a few other platforms): its GPUs' rule is shown, not one it applies there."
    ]


def _default_fraction_line(ver: dict, f: DefaultFraction) -> dict:
    rule = ver["default_fraction"]
    scaled = " " + aiter_cut_text(rule) if f.aiter_scaled else ""
    return step(
        "mem_fraction_static (SGLang's own, none given)",
        f"round((memory − reserved) ÷ memory, 3); {_reserve_rule(rule)}{scaled}; " + cite(ver, "default_fraction"),
        "round(({} − {}) ÷ {}, 3)" + (f" × {rule['aiter_scale']:g}" if f.aiter_scaled else ""),
        [(f.gpu_mib * MIB, "B"), (f.reserved_mib * MIB, "B"), (f.gpu_mib * MIB, "B")],
        f.fraction,
        "",
    )


def _default_fraction_notes(ver: dict, f: DefaultFraction, v: dict) -> list[str]:
    rule = ver["default_fraction"]
    notes = [
        f"mem_fraction_static: {f.fraction:g}, {ver['label']}'s own for {v['hardware'].name} at TP "
        f"{v['tensor_parallel']} (chunked_prefill_size {f.chunked_prefill_size:,}, decode CUDA graphs to batch "
        f"{f.decode_max_bs}, {f.graph_mib:,.0f} MiB reserved for graphs); {rule['not_modelled']}, not modelled: "
        "enter the value that launch passes to --mem-fraction-static, or paste its log into the log reader."
    ]
    if v["model"].architecture in rule["text_only_unless_enabled"]:
        graphs = " no prefill graphs are reserved for and" if f.prefill_graph_mib else ""
        notes.append(
            f"{ver['label']} serves {v['model'].name} text-only unless --enable-multimodal is given; with it,{graphs} "
            "the vision tower takes more (adjust_mem_fraction_for_vlm), not modelled here."
        )
    if f.multimodal:
        notes.append(
            f"{v['model'].name} is served as a multimodal model: SGLang lowers mem_fraction_static further by its "
            "vision tower's size (adjust_mem_fraction_for_vlm), not modelled here."
        )
    return notes


def _batched_note(v: dict, ver: dict, defaulted: bool) -> list[str]:
    """Which max_num_batched_tokens the version's default gave, where the reader left it at 0 (vLLM only)."""
    if not defaulted or ver["engine"] != "vllm":
        return []
    return [
        f"max_num_batched_tokens: {v['max_num_batched_tokens']:,} tokens, {ver['label']}'s vllm serve default for "
        f"{v['hardware'].name} (engine/arg_utils.py get_batch_defaults, by device memory)."
    ]


def compute(v: dict) -> dict:
    ver = version(v["engine_version"])
    defaulted = not v["max_num_batched_tokens"]
    seen = with_memory(v["hardware"], v.get("device_memory_gib"))
    fraction, fraction_steps, fraction_notes = _sglang_fraction(v, ver, seen)
    v = {
        **v,
        "block_size": v["block_size"] or default_block_size(ver, v["model"], v["hardware"].vendor),
        "max_num_batched_tokens": v["max_num_batched_tokens"] or default_batched_tokens(ver, seen),
        "mem_fraction_static": fraction,
    }
    acc = accounting(v, ver)
    d = derive(v, ver, acc)
    cap = d["capacity"]
    weight_steps = _weight_steps(v, ver, acc)
    return {
        "requested_bytes": acc.requested,
        "weight_bytes": acc.weights,
        "activation_bytes": acc.activation,
        "non_torch_bytes": acc.non_torch,
        "cudagraph_bytes": acc.cudagraph,
        "estimate_bytes": acc.estimate,
        "available_bytes": acc.available,
        "kv_bytes_per_token": d["per_token"],
        "kv_groups": d["groups"],
        "padding_layers": d["padding"],
        "num_blocks": cap.num_blocks,
        "kv_tokens": cap.tokens,
        "max_concurrency": cap.concurrency,
        "notes": _notes(v, ver, acc, d, bool(weight_steps)) + _batched_note(v, ver, defaulted) + fraction_notes,
        "derivation": weight_steps + fraction_steps + _accounting_steps(ver, acc) + d["steps"],
    }

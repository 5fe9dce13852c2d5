"""Per-step overhead: the fixed time an engine step costs beyond its kernels' roofline time.

  eager step         = kernels per step × t_k
  CUDA graphs        decode-only step of T ≤ T_full tokens: one full-graph replay = 1 × t_k
                     any step of T ≤ T_max tokens otherwise: piecewise graphs, (M + 1) replays plus the
                     mixer kernels that run between the pieces (2 per mixer layer) = (3M + 1) × t_k, M the layers
                     with a mixer (every layer but Nemotron-H's MLP blocks)
                     T > T_max: eager (vLLM replays no graph for a step above the largest captured size)
  kernels per step   = Σ over layers (norms + attention + MLP [+ 2 all-reduces at TP > 1]) + head and tail
                       (counted from vLLM v0.33.0's model code; step_overheads.toml says how); a layer that holds a
                       mixer or an FFN alone (Nemotron-H's blocks) has one norm and one all-reduce
  t_k                = (eager − graphs) ÷ (forward passes × kernels per step), from vLLM PR #10058's
                       Llama 3.1 8B BF16 measurement (step_overheads.toml [measured]): the launch cost a step
                       waits for, not hidden behind GPU work
  T_max              = the largest capture size: min(2 × max_num_seqs × (1 + spec), 512), 1,024 on
                       data-center Blackwell; T_full = min(max_num_seqs × (1 + spec), T_max) (vLLM v0.33.0)

  kernel floor       = kernels per step × t_g, in the fitted modes only ("fitted", the default, and "sglang"; the
                       others price launches alone): the GPU time each kernel costs beyond its share of the step's
                       roofline time (a small kernel's ramp-up and tail, the gap between kernels that a graph replay
                       shortens but does not remove). t_g is fitted, not measured: the median over the calibration
                       ledger's training rows (fitted.toml [gpu_kernel_floor] names them;
                       calibration.fit_gpu_per_kernel_s recomputes it) of (measured TPOT − TPOT without the floor) ÷
                       kernels per step; the calibration page reports the error on the other rows.
  decode rows        = sequences (tokens) of a decode-only step × layers × t_r, in the fitted modes only and on
                       the accelerators fitted.toml [decode_row_floor] names (AMD's CDNA3 chips): the time each
                       row of a decode step costs per layer there beyond the roofline and the kernel floor.
                       Fitted on one ledger group, like t_g; steps with prefill in them do not pay it (the
                       evidence is decode of static batches)
  SGLang's prefill   = kernels per step × t_s on every step with prefill in it, in the "sglang" mode only: the fitted
                       mode as SGLang runs a step up to 0.5.9 (read in 0.5.3.post3 to 0.5.9): decode graphs but none
                       for a step with prefill in it (server_args.py: enable_piecewise_cuda_graph off by default), so
                       such a step launches every kernel eagerly, and t_s more per kernel (0.5.23 captures breakable
                       prefill graphs by default on CUDA up to the chunk size, but not for DeepSeek-V3/R1 on
                       trtllm_mla, the B200 default, nor with pipeline parallelism, two-batch overlap or DeepEP's
                       normal mode, nor on ROCm). t_s is fitted, like t_g, on one SGLang sweep's TTFT (fitted.toml
                       [sglang_prefill]): the time each kernel of SGLang's eager prefill adds that the GPU's work
                       does not hide, its Python dispatch or syncs it waits on (a kernel count cannot tell them
                       apart). Its decode steps replay one graph up to SGLang's cuda_graph_max_bs
                       (step_overheads.toml [sglang_graphs], by engine_versions.toml's SGLang v0.5.9 tiers: 512 on
                       B200, 256 below TP 4 on 60-160 GiB chips) and run eagerly above it. Two simplifications: the
                       size is taken at the TP group's size, where SGLang's DP attention takes it at TP × DP; and a
                       speculative verify step is compared by its tokens, as vLLM counts them, where SGLang counts
                       sequences (such a step of more than cuda_graph_max_bs ÷ (k + 1) sequences is priced eager
                       where SGLang replays a graph)
  SGLang ≥ 0.5.10    = the "sglang-piecewise" mode: as "sglang", but a step with prefill in it up to SGLang's largest
                       piecewise prefill graph replays it (piecewise launches, no t_s): 2,048 tokens for an MLA model,
                       every step for others (their cap is the chunk); none off NVIDIA, for DeepSeek-V3.2 and
                       Qwen3-Next, or on Blackwell where SGLang runs the flashinfer_trtllm MoE runner
                       (step_overheads.toml [sglang_piecewise]: disable_piecewise_cuda_graph off by default from 0.5.10)
  a pipeline stage   = the same terms for its share of the layers' kernels (a full-graph replay stays one)
  fused all-reduces  = where each TP all-reduce runs fused with the residual add and RMSNorm after it (the "fused"
                       all-reduce algorithm: FlashInfer's fusion, SGLang's by step_overheads.toml
                       [sglang_allreduce_fusion], vLLM's from v0.17.0), a step of up to the engine's largest fused step
                       (direct.fused_max_tokens) launches each fused all-reduce's norm inside it: a kernel fewer each
                       (fused_norms); the fused kernel's own time is communication (direct.py)

Assumptions, not measurements: a graph replay is priced as one launch; the CPU work of scheduling,
sampling and detokenisation adds nothing, because vLLM v0.33.0's async scheduling and separate API
process overlap it with the GPU (the pre-v0.6.0 vLLM breakdown in step_overheads.toml is what that removed);
padding a batch up to the next capture size costs FLOPs that `padded_tokens` counts but the step time
does not add. The same t_k is used for every accelerator (the measurement does not name its GPU).
Bounds never include this term (steptime.bound_deployment drops it).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from functools import cache

from ..catalog import engine_versions, fitted, fused_allreduce, model_presets, step_overheads
from ..model import Accelerator, Model
from ..params import (
    is_moe_layer,
    last_ffn_over_tp,
    layer_allreduces,
    layer_parts,
    mixer_layer_count,
    runs_inner_allreduce,
)
from .engine_defaults import vllm_max_num_seqs
from ..units import MIB

FITTED_MODE = "fitted"  # graphs plus every kernel's GPU floor (fitted.toml)
SGLANG_MODE = "sglang"  # the fitted mode as SGLang ≤ 0.5.9 runs a step: prefill eager, t_s per kernel (fitted.toml)
# as SGLang 0.5.10 and later run a step on an NVIDIA chip: prefill steps graphed up to SGLang's largest piecewise graph
SGLANG_PIECEWISE_MODE = "sglang-piecewise"
MODES = ("graphs", "eager", "none", FITTED_MODE, SGLANG_MODE, SGLANG_PIECEWISE_MODE)
# The modes of the calibration page, where "fitted" prices each row as its own engine runs (calibration.row_mode)
LEDGER_MODE_CHOICES = [
    (FITTED_MODE, "CUDA graphs + each kernel's GPU floor (fitted to the calibration ledger)"),
    ("graphs", "CUDA graphs (vLLM v0.33.0 default), launches only"),
    ("eager", "Eager, no graphs (enforce_eager), launches only"),
    ("none", "None (kernel time only)"),
]
MODE_CHOICES = (
    LEDGER_MODE_CHOICES[:1]
    + [
        (
            SGLANG_PIECEWISE_MODE,
            "SGLang 0.5.10 and later: decode graphs, prefill graphs up to SGLang's largest (2,048 "
            "tokens for MLA models; none off NVIDIA), eager above + a fitted time per kernel",
        ),
        (SGLANG_MODE, "SGLang 0.5.9 and before: decode graphs, eager prefill + a fitted time per kernel"),
    ]
    + LEDGER_MODE_CHOICES[1:]
)
SGLANG_MODES = (SGLANG_MODE, SGLANG_PIECEWISE_MODE)  # SGLang's decode graphs and eager prefill (t_s)
FITTED_MODES = (FITTED_MODE, *SGLANG_MODES)  # the modes with the fitted terms
GRAPHS = ("graphs", FITTED_MODE, *SGLANG_MODES)  # the modes that replay CUDA graphs for decode
PREFILL_GRAPHS = ("graphs", FITTED_MODE)  # and those that replay piecewise graphs for a step with prefill (vLLM's)
DEFAULT_MODE = FITTED_MODE  # the calibration page: fitted on some rows, scored on the rest
# The help of the engine calculators' step_overhead_ms input, which adds to the modelled overhead.
EXTRA_OVERHEAD_HELP = (
    "Added to every step on top of the per-step overhead model (the Per-step overhead field): "
    "CPU work your engine does not overlap, say. To replace the model with your own figure, "
    "set Per-step overhead to none and enter it here."
)


def data() -> dict:
    return step_overheads()


def kernels_per_layer(model: Model, layer: int, num_gpus: int = 1) -> int:
    """Kernels one decoder layer launches in vLLM's eager path (our count; see step_overheads.toml): a norm and, at TP
    > 1, an all-reduce for each of its sublayers (layer_parts: a mixer and an FFN, or one of the two), and one more
    in a mixer that runs one inside itself (params.runs_inner_allreduce: Jamba's Mamba x_proj, MiniMax-M2's q/k
    norm)."""
    k = data()["kernels"]
    mixer, ffn = layer_parts(model, layer)
    # a norm before each sublayer and, at TP > 1, an all-reduce after it (the counts are per two sublayers)
    per_sublayer = (k["norms_per_layer"] + (k["tp_collectives_per_layer"] if num_gpus > 1 else 0)) // 2
    n = per_sublayer * (mixer + ffn)
    if mixer:
        n += k["mla_attention_per_layer"] if model.attention.kind == "mla" else k["attention_per_layer"]
        if num_gpus > 1 and runs_inner_allreduce(model, layer):
            n += 1
    if ffn and is_moe_layer(model, layer):
        n += k["moe_mlp_per_layer"] + (k["shared_expert_per_layer"] if model.moe.num_shared_experts else 0)
    elif ffn:
        n += k["dense_mlp_per_layer"]
    return n


def kernels_per_step(model: Model, num_gpus: int = 1) -> int:
    """Kernels of one eager forward pass: every layer plus the head and tail (embedding, final norm,
    LM head, sampling)."""
    k = data()["kernels"]
    head = k["head_tail"] + (k["tp_head_tail"] if num_gpus > 1 else 0)
    return sum(kernels_per_layer(model, i, num_gpus) for i in range(model.num_layers)) + head


def fused_norms(model: Model, moe_over_tp: bool, engine: str) -> int:
    """Kernels a step's fused all-reduces absorb, a norm each: fused_pairs over the whole model, by `engine`'s rule."""
    moe = sum(is_moe_layer(model, i) for i in range(model.num_layers))
    allreduces = layer_allreduces(model, model.num_layers, moe, moe_over_tp)
    return fused_pairs(allreduces, last_ffn_over_tp(model, moe_over_tp), engine, model.architecture)


def fused_pairs(layer_allreduces: int, last_ffn_over_tp: bool, engine: str, architecture: str = "") -> int:
    """Of a step's all-reduces over the TP group (the layers', params.layer_allreduces, and the embedding's), those that
    run fused with the norm after them. SGLang fuses the layers' but the last layer's, which runs plain before the final
    norm, as the embedding's runs before the first layer's norm (0.5.12 models/deepseek_v2.py, is_last_layer). vLLM's
    pass fuses every all-reduce an RMSNorm follows, those two too (v0.34.0
    compilation/passes/fusion/allreduce_rms_fusion.py: AllReduceRMSNormPattern, "allreduce + rmsnorm before attn in the
    first Transformer block", and AllReduceFusedAddRMSNormPattern's variant "for end of graph where residual is not used
    again"), but the embedding's of a class whose embeddings the graph does not compute or scales before the norm
    (interconnects.toml [fused_allreduce] vllm_embedding_plain_architectures)."""
    if engine == "vllm":
        return layer_allreduces + (0 if architecture in fused_allreduce()["vllm_embedding_plain_architectures"] else 1)
    return layer_allreduces - (1 if last_ffn_over_tp else 0)


def fusion_engine(mode: str | None) -> str:
    """Whose fusion rules and cap a step-overhead mode prices: SGLang's in an SGLang mode, vLLM's in every other."""
    return "sglang" if mode in SGLANG_MODES else "vllm"


def piecewise_launches(model: Model) -> int:
    """Launches of one piecewise-graph step: a graph piece after each mixer layer and one before the first, and the
    mixer's kernels that run between them (Nemotron-H's MLP blocks have no mixer to split at)."""
    outside = data()["kernels"]["attention_outside_piecewise_graphs"]
    mixers = mixer_layer_count(model)
    return mixers + 1 + outside * mixers


@cache
def per_kernel_s() -> float:
    """t_k: (eager − graphs) ÷ (forward passes × kernels per step) of the measurement in step_overheads.toml."""
    m = data()["measured"]
    kernels = kernels_per_step(model_presets()[m["model"]], 1)
    return (m["eager_s"] - m["graphs_s"]) / (m["output_tokens"] * kernels)


def max_capture_tokens(accelerator: Accelerator, tokens_per_sequence: int = 1) -> int:
    """vLLM v0.33.0's largest CUDA-graph size: min(2 × max_num_seqs × (1 + spec), 512 or 1,024)."""
    d = data()["vllm"]
    ceiling = d["max_capture_tokens_blackwell"] if accelerator.id in d["blackwell"] else d["max_capture_tokens"]
    return min(2 * vllm_max_num_seqs(accelerator) * tokens_per_sequence, ceiling)


def sglang_max_graph_batch(accelerator: Accelerator, tp: int) -> int:
    """SGLang's cuda_graph_max_bs in the releases step_overheads.toml [sglang_graphs] names (0.5.3 to 0.5.9): the
    largest decode batch it replays a graph for, by the GPU's memory and TP, as the engine_versions.toml entry it names
    (SGLang v0.5.9's) sets it beside mem_fraction_static."""
    tiers = engine_versions()[data()["sglang_graphs"]["rules"]]["default_fraction"]
    _, small_tp, large_tp = memory_tier(accelerator.memory_bytes / MIB, tiers["tiers_below_mib"], tiers["tier_above"])
    return small_tp if tp < 4 else large_tp


def memory_tier(mib: float, tiers: list[list], above: list) -> list:
    """A row of one of SGLang's tables by GPU memory: the values of the first [below_mib, *values] row whose bound
    the memory (MiB) is under, else the values above every bound."""
    return next((row[1:] for row in tiers if mib < row[0]), above)


def capture_sizes(largest: int) -> list[int]:
    """vLLM's default capture list: 1, 2, 4, multiples of 8 below 256, multiples of 16 from 256 to the largest."""
    sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, largest + 1, 16))
    return [s for s in sizes if s <= largest]


def padded_tokens(tokens: int, largest: int) -> int:
    """The captured size a step of `tokens` tokens is padded up to; `tokens` itself above the largest."""
    sizes = capture_sizes(largest)
    if tokens > sizes[-1]:
        return tokens
    return sizes[bisect_left(sizes, tokens)]


def graph_memory_bytes(max_batch: int) -> float:
    """GPU memory SGLang 0.5.23 reserves for decode CUDA graphs: 2 MB per unit of the largest batch."""
    return max_batch * data()["sglang"]["graph_reserve_mb_per_batch"] * MIB


@cache
def gpu_per_kernel_s() -> float:
    """t_g: the GPU time each kernel of a step costs beyond its roofline share (fitted.toml [gpu_kernel_floor])."""
    return float(fitted()["gpu_kernel_floor"]["per_kernel_s"])


@cache
def sglang_prefill_kernel_s() -> float:
    """t_s: the time each kernel of SGLang's eager prefill adds beyond its launch and floor (fitted.toml
    [sglang_prefill])."""
    return float(fitted()["sglang_prefill"]["per_kernel_s"])


@cache
def decode_row_floor() -> tuple[float, frozenset[str]]:
    """t_r and the accelerators it applies to (fitted.toml [decode_row_floor])."""
    entry = fitted()["decode_row_floor"]
    return float(entry["per_sequence_layer_s"]), frozenset(entry["accelerators"])


def decode_row_s(accelerator: Accelerator) -> float:
    """t_r on this accelerator: the fitted value on the chips it was fitted for, else 0."""
    t_r, chips = decode_row_floor()
    return t_r if accelerator.id in chips else 0.0


@dataclass(frozen=True)
class StepOverhead:
    """The fixed time of one step, by kind of step and tokens in it: its launches plus every kernel's floor."""

    mode: str  # one of MODES
    per_kernel_s: float
    eager_kernels: int
    piecewise_launches: int
    full_graph_tokens: int  # decode-only steps up to this many tokens replay one full graph
    max_capture_tokens: int  # any step up to this many tokens replays graphs; above it runs eager
    gpu_kernel_s: float = 0.0  # t_g, each kernel's GPU floor (0: launches only)
    row_layer_s: float = 0.0  # t_r, each decode row's time per layer (0 but on the chips it was fitted for)
    layers: int = 0
    prefill_kernel_s: float = 0.0  # t_s, each kernel's time on a step with prefill in it (SGLang's eager prefill)
    prefill_graph_tokens: int = 0  # SGLang's piecewise prefill graphs: steps up to this many tokens replay them
    fused_kernels: int = 0  # kernels a fused all-reduce absorbs (the norms after each TP all-reduce), 0: none
    fused_max_tokens: int = 0  # the largest step that fuses them

    def kernels(self, tokens: float) -> int:
        """The step's kernels: fewer where its all-reduces absorb the norms after them (a step small enough)."""
        return self.eager_kernels - (self.fused_kernels if tokens <= self.fused_max_tokens else 0)

    def eager_s(self, share: float = 1.0, tokens: float = math.inf) -> float:
        """Every kernel launched from the CPU (`share` of the step's kernels: a pipeline stage runs its layers') for a
        step of `tokens` tokens (by default one too large to fuse anything)."""
        return self.kernels(tokens) * share * self.per_kernel_s

    def floor_s(self, share: float = 1.0, tokens: float = math.inf) -> float:
        """Every kernel's GPU floor: kernels per step × t_g (the same with or without graphs)."""
        return self.kernels(tokens) * share * self.gpu_kernel_s

    def launch_decode_s(self, tokens: float, share: float = 1.0) -> float:
        """The launches of a decode-only step of `tokens` tokens: one replay, piecewise replays, or eager.
        A full graph is one replay whatever share of the layers it holds."""
        if self.mode in GRAPHS:
            if tokens <= self.full_graph_tokens:
                return self.per_kernel_s * data()["vllm"]["graph_launches_full"]
            if tokens <= self.max_capture_tokens:
                return self.piecewise_launches * share * self.per_kernel_s
        return self.eager_s(share, tokens)

    def prefill_graphed(self, tokens: float) -> bool:
        """Whether a step with prefill in it of `tokens` tokens replays piecewise graphs: up to the largest graph in
        vLLM's modes; in SGLang's, up to its largest piecewise prefill graph (0.5.10 and later; none before)."""
        if self.mode in SGLANG_MODES:
            return tokens <= self.prefill_graph_tokens
        return self.mode in PREFILL_GRAPHS and tokens <= self.max_capture_tokens

    def launch_mixed_s(self, tokens: float, share: float = 1.0) -> float:
        """The launches of a step with prefill in it: piecewise replays where it is graphed, else eager."""
        if self.prefill_graphed(tokens):
            return self.piecewise_launches * share * self.per_kernel_s
        return self.eager_s(share, tokens)

    def decode_s(self, tokens: float, share: float = 1.0) -> float:
        """A decode-only step of `tokens` tokens (sequences × tokens each): launches + kernel floor + its rows' time,
        for `share` of the step's layers (a pipeline stage's; 1: the whole model)."""
        if self.mode == "none":
            return 0.0
        rows = tokens * self.layers * share * self.row_layer_s
        return self.launch_decode_s(tokens, share) + self.floor_s(share, tokens) + rows

    def mixed_s(self, tokens: float, share: float = 1.0) -> float:
        """A step with prefill in it (alone or mixed with decodes) of `tokens` tokens: launches + kernel floor (+ each
        kernel's t_s, in an SGLang mode where the step is not graphed)."""
        if self.mode == "none":
            return 0.0
        eager = 0.0 if self.prefill_graphed(tokens) else self.prefill_kernel_s  # SGLang's t_s, on an eager step
        per_kernel = self.gpu_kernel_s + eager  # every kernel's floor and, in SGLang, its t_s
        return self.launch_mixed_s(tokens, share) + self.kernels(tokens) * share * per_kernel


def step_overhead(
    model: Model, accelerator: Accelerator, num_gpus: int = 1, mode: str = DEFAULT_MODE, tokens_per_sequence: int = 1
) -> StepOverhead | None:
    """The overhead model for a deployment in one of MODES; None for "none"."""
    if mode == "none":
        return None
    if mode not in MODES:
        raise ValueError(f"step overhead mode must be one of {MODES}, not {mode!r}")
    if mode in SGLANG_MODES:  # a full graph per decode batch up to SGLang's own largest, eager above
        full = largest = sglang_max_graph_batch(accelerator, num_gpus) * tokens_per_sequence
    else:
        largest = max_capture_tokens(accelerator, tokens_per_sequence)
        full = min(vllm_max_num_seqs(accelerator) * tokens_per_sequence, largest)
    return StepOverhead(
        mode,
        per_kernel_s(),
        kernels_per_step(model, num_gpus),
        piecewise_launches(model),
        full,
        largest,
        gpu_per_kernel_s() if mode in FITTED_MODES else 0.0,
        decode_row_s(accelerator) if mode in FITTED_MODES else 0.0,
        model.num_layers,
        sglang_prefill_kernel_s() if mode in SGLANG_MODES else 0.0,
        sglang_prefill_graph_tokens(model, accelerator) if mode == SGLANG_PIECEWISE_MODE else 0,
    )


def sglang_prefill_graph_tokens(model: Model, accelerator: Accelerator) -> int:
    """The largest step with prefill in it SGLang 0.5.10 and later replay piecewise graphs for by default
    (step_overheads.toml [sglang_piecewise]): 2,048 tokens for an MLA model (a model's own cap where it has one);
    none off NVIDIA, for the architectures without them, and on Blackwell where SGLang picks the flashinfer_trtllm
    MoE runner. Above the chunk no prefill step goes, so every other model's prefill steps are graphed: the cap is
    then unbounded. What turns them off that the overhead cannot see (DP attention, pipeline parallelism, an MoE
    all-to-all backend, Llama 4's FP8 on Blackwell) the table's comment lists."""
    rules = data()["sglang_piecewise"]
    if accelerator.vendor != "NVIDIA" or model.id in rules["off_models"] or model.attention.index_topk:
        return 0
    if accelerator.id in rules["blackwell"] and model.id in rules["off_on_blackwell"]:
        return 0
    cap = rules["model_max_tokens"].get(model.id, 2**31 - 1)
    return min(cap, rules["mla_max_tokens"]) if model.attention.kind == "mla" else cap


def _fusion_rules() -> list[tuple[tuple[int, ...], frozenset[str], frozenset[str]]]:
    """[sglang_allreduce_fusion]'s rules as (release key, chips, architectures), oldest first."""
    table = data()["sglang_allreduce_fusion"]
    chips = {"hopper": table["hopper"], "blackwell": table["blackwell"], "both": table["hopper"] + table["blackwell"]}
    return [
        (tuple(int(n) for n in r["from"].split(".")), frozenset(chips[r["chips"]]), frozenset(r["architectures"]))
        for r in table["rules"]
    ]


def sglang_fuses_allreduce(release: tuple[int, ...], architecture: str, accelerator_id: str) -> bool:
    """Whether SGLang of this release (steptime.release_key's tuple) turns on its FlashInfer all-reduce fusion by
    itself for a model class on a chip (step_overheads.toml [sglang_allreduce_fusion]: the newest rule from a release
    at or before it). More than one GPU in the TP group, one server, no DP attention and no all-to-all backend are the
    caller's to check."""
    rules = [r for r in _fusion_rules() if r[0] <= release]
    return bool(rules) and accelerator_id in rules[-1][1] and architecture in rules[-1][2]


def sglang_fusion_from(architecture: str, accelerator_id: str) -> str | None:
    """The first SGLang release read that fuses this model class's all-reduces on this chip by itself, or None."""
    first = next((r for r in _fusion_rules() if accelerator_id in r[1] and architecture in r[2]), None)
    return ".".join(map(str, first[0])) if first else None

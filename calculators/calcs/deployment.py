"""The fields and derivation steps of a deployment, shared by the calculators built on steptime.py
(roofline, latency, goodput, decode_limits, allreduce, preemption). steptime.py is the physics and
knows nothing of forms or derivations; this module is where they meet."""
from __future__ import annotations

from ..schema import (DTYPE_CHOICES, accelerator_field, choice, dtype_field, expert_dtype_field, integer,
                      model_field, number, step)
from .overhead import DEFAULT_MODE, MODE_CHOICES
from .steptime import Deployment, StepCost, compute_rate, experts_sliced, matmul_shares, reference_chip

# int4 formats have no native matmul rate; MXFP8's block-scaled MMA is priced as FP8 (choose fp8)
COMPUTE_DTYPES = tuple(c for c in DTYPE_CHOICES if c[0] not in ("int4", "int4-awq", "mxfp8"))


def deployment_fields(bandwidth_efficiency: float, compute_efficiency: float,
                      overrides: dict[str, dict] | None = None, overhead_field: bool = True) -> list[dict]:
    """The deployment's inputs at these default efficiencies; `overrides` maps a field's key to the
    parts of its spec a calculator words or defaults differently (label, default, help, ...).
    overhead_field False leaves out the per-step overhead choice (a calculator that prices kernel time only)."""
    changes = overrides or {}
    fields = _fields(bandwidth_efficiency, compute_efficiency)
    if not overhead_field:
        fields = [f for f in fields if f["key"] != "step_overhead"]
    return [dict(f, **changes.get(f["key"], {})) for f in fields]


def ep_deployment_fields(group_help: str) -> list[dict]:
    """The deployment of one expert-parallel group (Part 14's calculators): DeepSeek-V3 in FP8 on N = 32 GPUs,
    priced at the bound (efficiencies 1.0, no overhead field); `group_help` says what N means to the calculator."""
    return deployment_fields(1.0, 1.0, overhead_field=False, overrides={
        "model": {"default": "deepseek-v3"},
        "num_gpus": {"label": "Expert-parallel degree N", "default": 32, "help": group_help},
        "weight_dtype": {"default": "fp8"},
        "compute_dtype": {"default": "fp8"},
    })


def _fields(bandwidth_efficiency: float, compute_efficiency: float) -> list[dict]:
    return [
        model_field(default="llama-3.1-8b"),
        accelerator_field(),
        integer("num_gpus", "GPUs (tensor parallel)", 1, 1, 1024, "GPUs",
                  "FLOPs and bytes split evenly across them. Estimates add each step's all-reduces over the GPUs' "
                  "link (NCCL's ring, Part 12's deployment model); bounds leave communication out."),
        dtype_field("weight_dtype", "Weight format", "bf16"),
        expert_dtype_field(),
        dtype_field("kv_dtype", "KV-cache format", "bf16"),
        dtype_field("compute_dtype", "Matmul format", "bf16", "Selects the accelerator's dense FLOP/s figure.",
                choices=COMPUTE_DTYPES),
        number("bandwidth_efficiency", "Bandwidth efficiency", bandwidth_efficiency, 0.01, 1.0, "",
                 "Fraction of peak memory bandwidth achieved (FlashMLA reaches ~0.9 on H800, "
                 "deepseek-ai/FlashMLA README).", 0.01),
        number("compute_efficiency", "Compute efficiency", compute_efficiency, 0.01, 1.0, "",
                 "Fraction of dense peak FLOP/s achieved (FlashAttention-3: 0.75 on H100, arXiv 2407.08608), on the "
                 "chip the next field names. Bounds use 1.",
                 0.01),
        choice("efficiency_of", "Compute efficiency as reached on", "reference", EFFICIENCY_OF,
               "If your efficiency is an MFU you measured on the selected chip, choose the selected chip. Otherwise "
               f"a chip whose largest measured matmul rate is a smaller share of its peak than the "
               f"{reference_chip().name}'s runs at the efficiency × that share ÷ the reference's (s_chip; every "
               "chip's on the calibration page)."),
        choice("step_overhead", "Per-step overhead", DEFAULT_MODE, MODE_CHOICES,
               "Launch time each step adds to its kernels' time, as vLLM v0.33.0 runs: with CUDA graphs one "
               "replay per decode step (piecewise graphs for steps with prefill, eager above 512 tokens); "
               "eager, every kernel's launch (about 2.6 µs each, from vLLM PR #10058); fitted, the graphs' launches "
               "plus every kernel's GPU floor and, on AMD's MI300X and MI325X, a time per decode sequence per layer, "
               "both fitted to the calibration ledger (see the calibration page); SGLang 0.5.9 and before, the same "
               "with every step that holds prefill run eagerly and a fitted time per kernel more (its prefill "
               "dispatch); SGLang 0.5.10 and later, the same but with prefill steps up to its largest piecewise graph "
               "replayed (2,048 tokens for MLA models, every chunk for others; none off NVIDIA, nor where SGLang turns "
               "them off: the calibration page). Bounds never include it."),
    ]


def _effective(dep: Deployment) -> tuple[float, float]:
    """(bandwidth × η_bw, peak × η_compute × s_chip) per GPU: the rates the step times divide by."""
    return dep.accelerator.memory_bandwidth_bytes_per_s * dep.bandwidth_efficiency, compute_rate(dep)


# the chip's measured achievable matmul share ÷ the reference chip's (steptime.matmul_share)
SHARE_FORMULA = ("peak × η_compute × s_chip, s_chip = (MAMF ÷ peak) ÷ the reference chip's, at most 1: MAMF the "
                 "largest matmul rate measured on the chip (stas00/ml-engineering's table; accelerators.toml)")
EFFICIENCY_OF = [
    ("reference", f"the {reference_chip().name} (other chips × their measured matmul share ÷ its, at most 1)"),
    ("chip", "the selected chip (the efficiency of its datasheet peak, as given)"),
]
# the sliced experts keep a fitted share s_sliced of the BF16 rate whatever the format (steptime.sliced_expert_factor)
SLICED_FORMULA = "peak × η_compute × s_chip × s_sliced × peak_BF16 ÷ peak (s_sliced fitted; 1 under expert parallelism)"
# the dequantising GEMM runs at a fitted rate R_dequant (steptime.dequant_factors), a share of the peak at most 1
DEQUANT_FORMULA = "peak × η_compute × s_chip × min(1, R_dequant ÷ peak) (R_dequant fitted: no FP4 rate on this chip)"


def efficiency_steps(dep: Deployment) -> list[dict]:
    bandwidth, flops = _effective(dep)
    steps = [
        step("Effective bandwidth per GPU", "BW × η_bw", "{} × {}",
             [(dep.accelerator.memory_bandwidth_bytes_per_s, "B/s"), dep.bandwidth_efficiency], bandwidth, "B/s"),
        step("Effective FLOP/s per GPU", "peak × η_compute", "{} × {}",
             [(dep.peak_flops_per_s, "FLOP/s"), dep.compute_efficiency], flops / dep.matmul_share, "FLOP/s"),
    ]
    if dep.matmul_share != 1.0:  # the chip's matmuls reach less of its peak than the reference chip's
        steps.append(step("Effective FLOP/s per GPU at the chip's achievable matmul share", SHARE_FORMULA, "{} × {}",
                          [(flops / dep.matmul_share, "FLOP/s"), dep.matmul_share], flops, "FLOP/s"))
    dense, routed = matmul_shares(dep)
    moe = dep.model.moe is not None
    if dense != 1.0:
        steps.append(step("Effective FLOP/s of the 4-bit float weights' matmuls" if moe and routed == dense
                          else "Effective FLOP/s of the non-expert weights' matmuls (4-bit float, dequantised)",
                          DEQUANT_FORMULA,
                          "{} × {}", [(flops, "FLOP/s"), dense], flops * dense, "FLOP/s"))
    if moe and routed != 1.0 and routed != dense:
        sliced = experts_sliced(dep)
        steps.append(step("Effective FLOP/s of the routed experts' matmuls"
                          + (" (experts sliced by TP)" if sliced else " (4-bit float, dequantised)"),
                          SLICED_FORMULA if sliced else DEQUANT_FORMULA,
                          "{} × {}", [(flops, "FLOP/s"), routed], flops * routed, "FLOP/s"))
    return steps


def decode_steps(dep: Deployment, batch: int, context: int, cost: StepCost) -> list[dict]:
    n, (bandwidth, flops) = dep.num_gpus, _effective(dep)
    return [
        step("Weight bytes read per step", "params touched × b_w (input embedding: one row per token)", "{}",
             [(cost.weight_bytes, "B")], cost.weight_bytes, "B"),
        step("KV bytes read per step per GPU", "B × KV per sequence(T) × share of KV on one GPU", "{} × KV({}) × {}",
             [batch, (context, "tokens"), cost.kv_share], cost.kv_bytes_per_gpu, "B"),
        step("Memory time", "(weights ÷ N_gpu + KV per GPU) ÷ (BW × η_bw)", "({} ÷ {} + {}) ÷ {}",
             [(cost.weight_bytes, "B"), n, (cost.kv_bytes_per_gpu, "B"), (bandwidth, "B/s")], cost.memory_time_s, "s"),
        step("Compute time", "B × (2 × P_active + attention FLOPs) ÷ (N_gpu × peak × η_compute × s_chip)",
             "{} ÷ ({} × {})", [(cost.flops, "FLOP"), n, (flops, "FLOP/s")], cost.compute_time_s, "s"),
        time_step(cost, "Decode step time"),
    ]


def time_step(cost: StepCost, label: str, formula: str = "max(memory time, compute time)") -> dict:
    """The step's time: max(memory, compute), plus the per-step overhead and the communication on the critical
    path (a multi-GPU deployment, sharded_steps.py) when the step carries them."""
    terms = [(cost.memory_time_s, "s"), (cost.compute_time_s, "s")]
    extra = [(name, t) for name, t in (("per-step overhead", cost.overhead_s), ("communication", cost.comm_s)) if t]
    template = " + ".join(["max({}, {})"] + ["{}"] * len(extra))
    return step(label, " + ".join([formula] + [name for name, _ in extra]), template,
                terms + [(t, "s") for _, t in extra], cost.time_s, "s")

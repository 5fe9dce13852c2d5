"""Expert load under expert parallelism: how routing skew sets the step time, and what EPLB buys back.

Routing. Each token picks top_k of E routed experts. Expert popularity p_i (Σ p_i = 1) is either a Zipf
  law, p ∝ rank^(−s), scattered over the expert ids by a fixed stride (hot experts carry no id order), or a
  measured vector of per-expert token counts (in expert-id order). A token includes expert i with
  probability q_i = top_k × p_i, capped at 1 (the excess re-spread over the others, Σ q_i = top_k).
  With T tokens in the step (every EP rank's batch together):
      tokens to expert i      = T × q_i
      experts touched         = Σ_i [1 − (1 − q_i)^T]     (uniform q_i = k/E: E × (1 − (1 − k/E)^T),
                                                            steptime.experts_touched)
Placement. Without EPLB expert j sits on GPU ⌊j ÷ (E/N)⌋ (contiguous blocks, as vLLM and SGLang place them).
  With EPLB (DeepSeek's global policy, github.com/deepseek-ai/EPLB eplb.py @d52c72d, `replicate_experts` then
  `balanced_packing`): R redundant slots go one at a time to the expert with the highest load per replica
  (load ÷ replicas); the E + R replicas, each carrying load ÷ replicas, are then sorted heaviest first and each
  put on the lightest GPU that still has a free slot, (E + R) ÷ N slots per GPU. The hierarchical policy
  (groups packed to nodes first) is not modelled. Re-implemented here from the algorithm; no code copied.
Imbalance = max over GPUs of tokens received ÷ mean (TensorRT-LLM's report_load_statistics.py reports max ÷ mean − 1).
Step time. The MoE layer waits for its slowest GPU (dispatch and combine synchronise the EP group):
      t_gpu = max(touched experts on the GPU × expert bytes ÷ (BW × η_bw),
                  tokens on the GPU × 2 × expert params ÷ (peak × η_compute × s_chip))
      MoE time per step = MoE layers × max over GPUs of t_gpu; the balanced reference uses the mean GPU.
  Routed experts only: attention, shared experts and communication are not in it (moe_alltoall.py has the
  all-to-all). Expected loads: the finite-batch noise of one step is not modelled, so measured per-step
  imbalance sits above these figures.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from ..errors import InputError
from ..params import _expert_params, active_params, expert_params, moe_layer_count, total_params, weight_bytes
from ..schema import expert_dtype
from ..schema import boolean, choice, integer, mark, number, output, series, step, text
from .deployment import ep_deployment_fields
from .steptime import compute_rate, deployment, experts_touched

SKEWS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.5)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096, 16384)
MAX_VECTOR_CHARS = 8000


# ---- the model -------------------------------------------------------------------------------------------


def zipf_shares(num_experts: int, s: float) -> list[float]:
    """Zipf popularity by rank (rank 1 hottest), normalised to sum 1; s = 0 is uniform."""
    w = [(r + 1) ** -s for r in range(num_experts)]
    total = sum(w)
    return [x / total for x in w]


def scatter_stride(num_experts: int) -> int:
    """A stride coprime to E near 0.618 E: rank r sits at expert id (r × stride) mod E, so hot ranks spread
    over the id range instead of sitting together in GPU 0's block."""
    start = max(1, round(0.618 * num_experts))
    for d in range(num_experts):
        for c in (start + d, start - d):
            if 0 < c < num_experts and math.gcd(c, num_experts) == 1:
                return c
    return 1


def scattered(shares_by_rank: list[float]) -> list[float]:
    """Shares by expert id: rank r's share at id (r × stride) mod E."""
    e = len(shares_by_rank)
    stride, out = scatter_stride(e), [0.0] * e
    for r, p in enumerate(shares_by_rank):
        out[(r * stride) % e] = p
    return out


def parse_vector(raw: str, num_experts: int, field: str = "measured_loads") -> list[float]:
    """Per-expert token counts from text (commas, spaces or new lines between numbers), normalised to sum 1."""
    parts = [p for p in raw.replace(",", " ").split() if p]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise InputError(field, "must be numbers separated by commas or spaces (one per expert)") from None
    if len(values) != num_experts:
        raise InputError(field, f"must list one load per routed expert: {num_experts} numbers, got {len(values)}")
    if any(not math.isfinite(x) or x < 0 for x in values) or sum(values) <= 0:
        raise InputError(field, "must be finite, non-negative, and not all zero")
    total = sum(values)
    return [x / total for x in values]


def inclusion(shares: list[float], top_k: int) -> list[float]:
    """q_i = top_k × p_i, capped at 1 with the excess re-spread in proportion over the uncapped (Σ q = top_k)."""
    q, capped = [top_k * p for p in shares], set()
    while True:
        over = [i for i, x in enumerate(q) if x > 1.0 and i not in capped]
        if not over:
            return q
        capped.update(over)
        free = sum(shares[i] for i in range(len(q)) if i not in capped)
        rest = top_k - len(capped)
        q = [1.0 if i in capped else (shares[i] / free * rest if free > 0 else 0.0) for i in range(len(q))]


def touched(q: list[float], tokens: float) -> float:
    """Expected distinct experts T tokens touch: Σ 1 − (1 − q_i)^T."""
    return sum(1.0 - (1.0 - x) ** tokens for x in q)


@dataclass(frozen=True)
class Placement:
    """Where the replicas sit and what each GPU receives (tokens per layer)."""

    gpu_of: tuple[tuple[int, ...], ...]  # per GPU, the expert id of each of its replicas
    replicas: tuple[int, ...]  # per expert, how many replicas it has
    loads: tuple[float, ...]  # per GPU, expected tokens received per layer

    @property
    def max_load(self) -> float:
        return max(self.loads)

    @property
    def mean_load(self) -> float:
        return math.fsum(self.loads) / len(self.loads)

    @property
    def imbalance(self) -> float:
        return self.max_load / self.mean_load if self.mean_load > 0 else 1.0


def static_placement(expert_tokens: list[float], n: int) -> Placement:
    """Contiguous blocks: the first E mod N GPUs hold one expert more (E not a multiple of N)."""
    e = len(expert_tokens)
    base, extra = divmod(e, n)
    gpus, start = [], 0
    for g in range(n):
        size = base + (1 if g < extra else 0)
        gpus.append(tuple(range(start, start + size)))
        start += size
    loads = tuple(sum(expert_tokens[j] for j in ids) for ids in gpus)
    return Placement(tuple(gpus), (1,) * e, loads)


def eplb_placement(expert_tokens: list[float], n: int, redundant: int) -> Placement:
    """DeepSeek EPLB's global policy: replicate the heaviest per replica R times, then pack the replicas
    heaviest first onto the lightest GPU with a free slot ((E + R) ÷ N slots each). Ties: lowest index."""
    e = len(expert_tokens)
    slots = e + redundant
    if slots % n:
        raise InputError("redundant_experts", f"E + R must be a multiple of the EP degree: {e} + R divisible by {n}")
    count = [1] * e
    heap = [(-w, i) for i, w in enumerate(expert_tokens)]
    heapq.heapify(heap)
    for _ in range(redundant):
        _, i = heapq.heappop(heap)
        count[i] += 1
        heapq.heappush(heap, (-expert_tokens[i] / count[i], i))
    items = sorted(((expert_tokens[i] / count[i], i) for i in range(e) for _ in range(count[i])), key=lambda t: -t[0])
    per_gpu = slots // n
    gpus: list[list[int]] = [[] for _ in range(n)]
    loads = [0.0] * n
    free = [(0.0, g) for g in range(n)]
    for w, i in items:
        _, g = heapq.heappop(free)
        gpus[g].append(i)
        loads[g] += w
        if len(gpus[g]) < per_gpu:
            heapq.heappush(free, (loads[g], g))
    return Placement(tuple(tuple(x) for x in gpus), tuple(count), tuple(loads))


def shares_for(v: dict, num_experts: int, skew: float | None = None) -> list[float]:
    """Per-expert popularity by expert id from the inputs (a Zipf exponent overrides the source)."""
    if skew is None and v["skew_source"] == "measured":
        return parse_vector(v["measured_loads"], num_experts)
    return scattered(zipf_shares(num_experts, v["zipf_exponent"] if skew is None else skew))


@dataclass(frozen=True)
class ExpertCosts:
    """One routed expert of one layer: bytes to read it once, FLOPs per token it serves."""

    bytes: float
    flops_per_token: float
    bw: float  # B/s per GPU after η
    peak: float  # FLOP/s per GPU after η

    def gpu_time(self, touched_experts: float, tokens: float) -> float:
        return max(touched_experts * self.bytes / self.bw, tokens * self.flops_per_token / self.peak)


def gpu_times(p: Placement, q: list[float], tokens: float, c: ExpertCosts) -> list[float]:
    """Each GPU's expert time per layer: its touched replicas' bytes, its tokens' FLOPs (a replica gets
    1/replicas of its expert's tokens)."""
    out = []
    for g, ids in enumerate(p.gpu_of):
        t_experts = sum(1.0 - (1.0 - q[i] / p.replicas[i]) ** tokens for i in ids)
        out.append(c.gpu_time(t_experts, p.loads[g]))
    return out


@dataclass(frozen=True)
class Load:
    e: int
    k: int
    n: int
    tokens: float
    q: list
    expert_tokens: list
    static: Placement
    eplb: Placement | None
    costs: ExpertCosts

    def layer_times(self, p: Placement) -> list[float]:
        return gpu_times(p, self.q, self.tokens, self.costs)


def expert_costs(v: dict, dep) -> ExpertCosts:
    m = dep.model
    per_expert = _expert_params(m, m.moe.expert_intermediate_size, m.moe.expert_bias)
    b = dep.weight_elem_bytes if dep.expert_elem_bytes is None else dep.expert_elem_bytes
    return ExpertCosts(
        per_expert * b,
        2.0 * per_expert,
        dep.accelerator.memory_bandwidth_bytes_per_s * dep.bandwidth_efficiency,
        compute_rate(dep),
    )


def load(v: dict, dep, skew: float | None = None, eplb: bool | None = None) -> Load:
    m = dep.model
    e, k, n = m.moe.num_experts, m.moe.experts_per_token, v["num_gpus"]
    if n > e:
        raise InputError("num_gpus", f"must be at most the {e} routed experts (one expert per GPU at least)")
    tokens = v["tokens_per_gpu"] * n
    q = inclusion(shares_for(v, e, skew), k)
    expert_tokens = [tokens * x for x in q]
    use_eplb = v["eplb"] if eplb is None else eplb
    return Load(
        e,
        k,
        n,
        tokens,
        q,
        expert_tokens,
        static_placement(expert_tokens, n),
        eplb_placement(expert_tokens, n, v["redundant_experts"]) if use_eplb else None,
        expert_costs(v, dep),
    )


def top_share(q: list[float], k: int, fraction: float) -> float:
    """Share of all routed picks that go to the hottest ⌈fraction × E⌉ experts."""
    top = sorted(q, reverse=True)[: max(1, math.ceil(fraction * len(q) - 1e-9))]
    return sum(top) / k


# ---- the calculator ---------------------------------------------------------------------------------------


def _require_moe(model) -> None:
    if model.moe is None:
        raise InputError("model", f"{model.name} is dense: pick a mixture-of-experts model")


_INPUTS = [
    integer(
        "tokens_per_gpu",
        "Tokens per GPU per step",
        4096,
        1,
        65_536,
        "tokens",
        "Each EP rank's batch: decode, one token per sequence; prefill, the prompt tokens in the step. "
        "The step routes N times this.",
    ),
    choice(
        "skew_source",
        "Routing skew",
        "zipf",
        [("zipf", "Zipf law (exponent below)"), ("measured", "Measured loads (the list below)")],
    ),
    number(
        "zipf_exponent",
        "Zipf exponent s",
        0.66,
        0.0,
        3.0,
        "",
        "Popularity ∝ rank^(−s); 0 is uniform routing. 0.66 reproduces the EP32 imbalance (max ÷ mean 2.56) "
        "in TensorRT-LLM's DeepSeek-R1 example (examples/ep_load_balancer/README.md).",
        0.01,
    ),
    text(
        "measured_loads",
        "Measured tokens per expert (in expert-id order)",
        "",
        MAX_VECTOR_CHARS,
        "One number per routed expert of one layer, e.g. from SGLang's expert distribution recorder or "
        "TensorRT-LLM's expert statistics. Used when the skew is measured.",
    ),
    boolean("eplb", "EPLB (redundant experts, balanced placement)", True),
    integer(
        "redundant_experts",
        "Redundant experts R",
        32,
        0,
        4096,
        "experts",
        "Extra replicas of hot experts; E + R must be a multiple of N (DeepSeek-V3 serves with 32).",
    ),
]


def _fields() -> list[dict]:
    fields = ep_deployment_fields(
        "GPUs the routed experts are spread over (one EP group); each GPU brings its own batch (attention "
        "data-parallel)."
    )
    return [f for f in fields if f["key"] != "kv_dtype"] + _INPUTS


SCHEMA = {
    "name": "expert_load",
    "title": "Expert load and the step time it sets",
    "description": (
        "Tokens per expert under skewed top-k routing, the experts a batch touches, the tokens each GPU "
        "of an expert-parallel group receives with contiguous placement and with DeepSeek's EPLB "
        "(redundant replicas of hot experts, packed greedily), the max/mean imbalance, and the routed-"
        "expert time per step that the slowest GPU sets. Expected loads (no per-step sampling noise); "
        "routed experts only."
    ),
    "inputs": _fields(),
    "outputs": [
        output(
            "slowdown_static", "Slowdown from imbalance, contiguous placement (slowest GPU ÷ balanced)", "", "number"
        ),
        output("slowdown_eplb", "Slowdown from imbalance, EPLB (slowest GPU ÷ balanced)", "", "number"),
        output("total_params", "Total parameters (all must sit in memory)", "params", "number"),
        output("active_params", "Active parameters per token", "params", "number"),
        output(
            "expert_weight_bytes_per_gpu", "Routed-expert weights per GPU (its replicas, all MoE layers)", "B", "bytes"
        ),
        output("experts_per_gpu", "Expert slots per GPU per layer", "experts", "integer"),
        output("tokens_per_layer", "Tokens routed per MoE layer (N × tokens per GPU)", "tokens", "integer"),
        output("hottest_expert_share", "Share of routed picks to the hottest expert", "", "percent"),
        output("top4pct_share", "Share of routed picks to the hottest 4% of experts", "", "percent"),
        output("experts_touched_uniform", "Experts touched per layer, uniform routing", "experts", "number"),
        output("experts_touched", "Experts touched per layer, this skew", "experts", "number"),
        output("mean_tokens_per_gpu", "Tokens each GPU receives per layer, balanced (T × k ÷ N)", "tokens", "number"),
        output("max_tokens_per_gpu_static", "Most tokens one GPU receives, contiguous placement", "tokens", "number"),
        output("max_tokens_per_gpu_eplb", "Most tokens one GPU receives, EPLB", "tokens", "number"),
        output("imbalance_static", "Imbalance max ÷ mean, contiguous placement", "", "number"),
        output("imbalance_eplb", "Imbalance max ÷ mean, EPLB", "", "number"),
        output("moe_time_per_step_balanced_s", "Routed-expert time per step, perfectly balanced", "s", "seconds"),
        output(
            "moe_time_per_step_static_s",
            "Routed-expert time per step, contiguous placement (slowest GPU)",
            "s",
            "seconds",
        ),
        output("moe_time_per_step_eplb_s", "Routed-expert time per step, EPLB (slowest GPU)", "s", "seconds"),
    ],
}


def _imbalance_series(v: dict, dep) -> dict:
    skews = sorted({*SKEWS, v["zipf_exponent"]})
    stat, bal = [], []
    for s in skews:
        ld = load(v, dep, skew=s, eplb=v["eplb"])
        stat.append(ld.static.imbalance)
        bal.append(ld.eplb.imbalance if ld.eplb else None)
    ys = [("contiguous placement", "×", stat)] + ([("EPLB", "×", bal)] if v["eplb"] else [])
    plot = series(
        f"GPU imbalance (max ÷ mean tokens) vs routing skew, EP{v['num_gpus']}", "Zipf exponent s", "", skews, ys
    )
    return mark(plot, "zipf_exponent", v["zipf_exponent"]) if v["skew_source"] == "zipf" else plot


def _touched_series(v: dict, ld: Load) -> dict:
    per_gpu = sorted({*BATCHES, v["tokens_per_gpu"]})
    n = ld.n
    return mark(
        series(
            f"Experts touched per MoE layer vs tokens per GPU (EP{n}: the layer routes {n} × this)",
            "Tokens per GPU",
            "tokens",
            per_gpu,
            [
                ("uniform routing", "experts", [experts_touched(ld.e, ld.k, n * b) for b in per_gpu]),
                ("this skew", "experts", [touched(ld.q, n * b) for b in per_gpu]),
            ],
            log_axes=True,
        ),
        "tokens_per_gpu",
        v["tokens_per_gpu"],
        on="this skew",
    )


def _gpu_series(ld: Load) -> dict:
    xs = list(range(ld.n))
    ys = [("contiguous placement", "tokens", list(ld.static.loads))]
    if ld.eplb:
        ys.append(("EPLB", "tokens", list(ld.eplb.loads)))
    ys.append(("balanced", "tokens", [ld.static.mean_load] * ld.n))
    return series("Tokens each GPU receives per MoE layer", "GPU", "", xs, ys, kind="bar")


def _load_steps(v: dict, ld: Load) -> list[dict]:
    k, n = ld.k, ld.n
    out = [
        step(
            "Tokens routed per layer",
            "T = N × tokens per GPU",
            "{} × {}",
            [n, v["tokens_per_gpu"]],
            ld.tokens,
            "tokens",
        ),
        step("Hottest expert's inclusion", "q_max = min(1, k × p_max)", "{} × {}", [k, max(ld.q) / k], max(ld.q), ""),
        step(
            "Experts touched per layer",
            "Σ 1 − (1 − q_i)^T",
            "over {} experts, T = {}",
            [ld.e, ld.tokens],
            touched(ld.q, ld.tokens),
            "experts",
        ),
    ]
    return out + _imbalance_steps(ld)


def _imbalance_steps(ld: Load) -> list[dict]:
    k, n = ld.k, ld.n
    out = [
        step("Mean tokens per GPU", "T × k ÷ N", "{} × {} ÷ {}", [ld.tokens, k, n], ld.static.mean_load, "tokens"),
        step(
            "Imbalance, contiguous",
            "max_g load ÷ mean",
            "{} ÷ {}",
            [(ld.static.max_load, "tokens"), (ld.static.mean_load, "tokens")],
            ld.static.imbalance,
            "×",
        ),
    ]
    if ld.eplb:
        out.append(
            step(
                "Imbalance, EPLB",
                "max_g load ÷ mean ((E + R) ÷ N slots per GPU)",
                "{} ÷ {}",
                [(ld.eplb.max_load, "tokens"), (ld.eplb.mean_load, "tokens")],
                ld.eplb.imbalance,
                "×",
            )
        )
    return out


def _time_steps(ld: Load, layers: int, t_bal: float, t_stat: float, t_eplb: float | None) -> list[dict]:
    c = ld.costs
    out = [
        step("One expert's bytes", "3 × d × d_ff × b", "{}", [(c.bytes, "B")], c.bytes, "B"),
        step(
            "Expert time per step, balanced",
            "L_moe × max(touched ÷ N × bytes ÷ BW, T k ÷ N × 2P_e ÷ peak)",
            "{} layers",
            [layers],
            t_bal,
            "s",
        ),
        step("Expert time per step, contiguous", "L_moe × max_g t_gpu", "{} layers", [layers], t_stat, "s"),
    ]
    if t_eplb is not None:
        out.append(step("Expert time per step, EPLB", "L_moe × max_g t_gpu", "{} layers", [layers], t_eplb, "s"))
    return out


def _times(ld: Load, layers: int) -> tuple[float, float, float | None]:
    """Routed-expert time per step: balanced (the mean GPU), contiguous and EPLB (the slowest GPU)."""
    t_bal = layers * ld.costs.gpu_time(touched(ld.q, ld.tokens) / ld.n, ld.static.mean_load)
    t_stat = layers * max(ld.layer_times(ld.static))
    t_eplb = layers * max(ld.layer_times(ld.eplb)) if ld.eplb else None
    return t_bal, t_stat, t_eplb


def compute(v: dict) -> dict:
    _require_moe(v["model"])
    dep = deployment({**v, "kv_dtype": "bf16", "step_overhead": "none"})  # no KV in the routed experts' time
    ld = load(v, dep)
    model, layers = dep.model, moe_layer_count(dep.model)
    c = ld.costs
    t_bal, t_stat, t_eplb = _times(ld, layers)
    slots = max(len(ids) for ids in (ld.eplb or ld.static).gpu_of)
    return {
        "total_params": total_params(model),
        "active_params": active_params(model, include_embedding=False),
        "total_params_billions": total_params(model) / 1e9,
        "active_params_billions": active_params(model, include_embedding=False) / 1e9,
        "expert_share_of_params": expert_params(model) / total_params(model),
        "weight_bytes": weight_bytes(model, v["weight_dtype"], "weight_dtype", expert_dtype(v)),
        "expert_weight_bytes_per_gpu": slots * layers * c.bytes,
        "experts_per_gpu": slots,
        "tokens_per_layer": int(ld.tokens),
        "hottest_expert_share": max(ld.q) / ld.k,
        "top4pct_share": top_share(ld.q, ld.k, 0.04),
        "experts_touched_uniform": experts_touched(ld.e, ld.k, ld.tokens),
        "experts_touched": touched(ld.q, ld.tokens),
        "mean_tokens_per_gpu": ld.static.mean_load,
        "max_tokens_per_gpu_static": ld.static.max_load,
        "max_tokens_per_gpu_eplb": ld.eplb.max_load if ld.eplb else ld.static.max_load,
        "imbalance_static": ld.static.imbalance,
        "imbalance_eplb": ld.eplb.imbalance if ld.eplb else ld.static.imbalance,
        "moe_time_per_step_balanced_s": t_bal,
        "moe_time_per_step_static_s": t_stat,
        "moe_time_per_step_eplb_s": t_eplb if t_eplb is not None else t_stat,
        "slowdown_static": t_stat / t_bal,
        "slowdown_eplb": (t_eplb if t_eplb is not None else t_stat) / t_bal,
        "expert_params": expert_params(model),
        "derivation": _load_steps(v, ld) + _time_steps(ld, layers, t_bal, t_stat, t_eplb),
        "series": {
            "gpu_load": _gpu_series(ld),
            "imbalance_vs_skew": _imbalance_series(v, dep),
            "touched_vs_batch": _touched_series(v, ld),
        },
    }

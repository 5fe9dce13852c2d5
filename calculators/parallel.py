"""A multi-GPU deployment: how a model is sharded over a cluster, what each GPU holds, what crosses which
link per step, and the step time, TPOT and tokens/s per GPU that follow. Pure functions, frozen dataclasses.

Degrees (vLLM v0.33.0 vllm/config/parallel.py names; SGLang v0.5.23 in brackets):
  tp   attention/dense tensor parallel (--tensor-parallel-size) [--tp-size ÷ --dp-size with DP attention]
  dp   attention data parallel: each rank runs attention for its own sequences (--data-parallel-size
       with an MoE model; a dense model's DP ranks are independent replicas) [--dp-size, --enable-dp-attention]
  pp   pipeline stages, consecutive layers each (--pipeline-parallel-size) [--pp-size]
  cp   prefill context parallel: splits a prompt's tokens; PCP "expands the process world size but does
       not increase the KV-cache shard count" and PCP alone replicates each sequence's KV, so in decode
       each request has one PCP owner (parallel.py ParallelConfig, pcp_shard_decode_requests)
  ep   expert parallel: 1 (experts tensor-sharded) or the whole MoE group G = tp × cp × dp, since vLLM's
       --enable-expert-parallel shards MoE layers over "the product of the tensor, prefill-context, and
       data parallel sizes" (parallel.py data_parallel_size docstring)
  dcp  decode context parallel: stripes each sequence's KV by token over dcp of the TP ranks (no extra
       GPUs; kv_cache.kv_fraction_per_gpu has the rule)
GPUs per deployment = tp × dp × cp × pp. Placement: TP innermost (consecutive GPUs), then CP and DP (the
MoE group), then PP; a group that fits in one server uses the scale-up link, else the network (ring.py).

Per GPU (worst pipeline stage: ceil(L ÷ pp) of the L layers' share of the weights and KV; embedding
and LM head both counted, which is exact at pp = 1):
  non-expert weights ÷ tp (replicated over the dp × cp attention ranks); routed experts ÷ G
  (with EP: ceil(E ÷ G) whole experts); KV: each attention rank (dp × cp of them) holds its own
  sequences, KV(T) × kv_fraction_per_gpu(tp, dcp) per sequence. KV budget: memory.py's engine rule.
Decode step of one stage for a micro-batch of b sequences (s = b ÷ (dp × cp) per attention rank), at
steptime.StepModel's rates and overhead, bit-compatible with it at tp only:
  bytes = (W_dense − unread embedding rows) ÷ tp + W_experts ÷ G × touched(b) + s × KV per GPU
  FLOPs = s × (2 P_dense + attention) ÷ tp + b × 2 P_experts,active ÷ G
  kernel = max(bytes ÷ (BW η_bw), FLOPs ÷ (peak η_c)); + overhead(s tokens)
Communication per stage step (on the critical path; overlap "full" hides all of it under the kernels, the
best any overlap can do; "two-batch" cuts each (pipeline) micro-batch in two halves whose MoE all-to-all
runs under the other half's kernels, as SGLang's two-batch overlap and DeepSeek's dual micro-batch overlap
do: twice the weight reads and launches, each half max(kernels, all-to-all) + the rest of its
communication + overhead; a step whose attention ranks have fewer than two sequences each is not cut):
  TP: 2 all-reduces per layer (attention, FFN; one where FFNs are layers of their own, params.layer_allreduces)
      + one after the embedding + the logits gather (allreduce.py's 2L + 1 rule), over tp at s tokens, an MoE
      layer's too where G = tp (no DP or CP ranks), a Jamba Mamba layer's x_proj (dt_rank + 2N wide) and a
      MiniMax-M2 attention layer's q/k norm (two FP32 sums a token),
      with or without EP (the engines dispatch by all-to-all only with DP ranks); with DP ranks an MoE layer
      without EP all-reduces over G at b tokens, and with EP does an all-to-all dispatch and combine over G
      instead, each GPU sending its b ÷ G tokens × top_k × hidden × bytes, and an all-gather over tp when
      tp > 1; under the "fused" algorithm (FlashInfer's fusion, SGLang's and vLLM's, inside one server) each
      fused all-reduce is one kernel that also runs the norm after it, up to the engine's largest fused step
      (direct.fused_max_tokens): in SGLang every layer's but the last layer's FFN one, the embedding's plain; in
      vLLM all of them (overhead.fused_pairs)
  PP: each boundary sends s × hidden × b_act, 1/tp per rank then all-gathered (vLLM
      parallel_state.py send_tensor_dict all_gather_group)
  DCP: per attention layer an all-gather of the queries and a reduce-scatter of the partial outputs
      over dcp (vLLM's default "ag_rs" DCP backend)
Pipeline in decode: a sequence's next token needs its last, so m micro-batches cycle through pp stages;
  TPOT = max(m, pp) × stage slot, and each stage idles 1 − m ÷ max(m, pp) of the time (m < pp: bubble).
Each transfer's time is cluster.py's; the search over shardings that ranks deployments is parallel_search.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from .cluster import (
    Cluster,
    allgather_s,
    allreduce_s,
    alltoall_s,
    check_cluster,
    fused_allreduces,
    p2p_s,
    pipeline_send_s,
)
from .calcs.direct import fused_max_tokens
from .calcs.overhead import fused_norms, fused_pairs, fusion_engine, step_overhead
from .calcs.kv_cache import (
    check_decode_context_parallel,
    kv_bytes_per_sequence,
    kv_fraction_per_gpu,
    state_bytes_per_sequence,
    state_fraction_per_gpu,
)
from .calcs.steptime import (
    STATE_ELEM_BYTES,
    Deployment,
    StepModel,
    compute_rate,
    embedding_lookup_saving,
    experts_touched,
)
from .errors import InputError
from .model import Model
from .params import (
    active_params,
    embedding_params,
    expert_params,
    is_moe_layer,
    last_ffn_over_tp,
    layer_allreduces,
    lm_head_params,
    mixer_inner_allreduce,
    runs_inner_allreduce,
    total_params,
)

OVERLAPS = ("none", "full", "two-batch")


def halves(overlap: str, sequences_per_rank: float) -> int:
    """What two-batch overlap cuts each (pipeline) micro-batch into: two halves where every attention rank has
    two sequences or more to share between them, else one (SGLang splits a batch by sequences, so a single
    sequence or prompt leaves the other half empty and nothing overlaps)."""
    return 2 if overlap == "two-batch" and sequences_per_rank >= 2 else 1


def step_overlap(overlap: str, cut: int) -> str:
    """The overlap a slot runs under: two-batch only when the step was cut in two, else none."""
    return "none" if overlap == "two-batch" and cut == 1 else overlap


def with_overlap(st: StageStep, overlap: str) -> StageStep:
    """The slot under `overlap` (step_overlap's: none for a step two-batch overlap could not cut)."""
    return st if st.overlap == overlap else replace(st, overlap=overlap)


def pipeline_micro_batches(p: Parallelism) -> int:
    """The pipeline's micro-batches in flight: m with stages, else 1."""
    return p.m if p.pp > 1 else 1


def pipeline_slots(p: Parallelism) -> int:
    """Stage slots one step takes: max(m, pp) with stages (a bubble when m < pp), else 1."""
    return max(p.m, p.pp) if p.pp > 1 else 1


def cut_of(overlap: str) -> int:
    """Halves per pipeline micro-batch of a slot that runs under `overlap` (step_overlap's result)."""
    return 2 if overlap == "two-batch" else 1


@dataclass(frozen=True)
class Parallelism:
    tp: int = 1
    pp: int = 1
    dp: int = 1  # attention data parallel
    ep: int = 1  # 1, or tp × cp × dp (expert parallel over the whole MoE group)
    cp: int = 1  # prefill context parallel
    dcp: int = 1  # decode context parallel, inside the TP group
    micro_batches: int = 0  # decode micro-batches in flight with PP; 0 = pp (one per stage)

    @property
    def gpus(self) -> int:
        return self.tp * self.dp * self.cp * self.pp

    @property
    def stage_gpus(self) -> int:
        """GPUs of one pipeline stage: tp × cp × dp."""
        return self.tp * self.cp * self.dp

    @property
    def moe_group(self) -> int:
        """GPUs one stage's MoE layers are sharded over: all of the stage's, tp × cp × dp."""
        return self.stage_gpus

    @property
    def expert_slices(self) -> int:
        """GPUs each routed expert is sliced across: the MoE group without expert parallelism, 1 with it."""
        return 1 if self.ep > 1 else self.moe_group

    @property
    def attention_ranks(self) -> int:
        """Ranks that each run attention for their own sequences in decode: dp × cp."""
        return self.dp * self.cp

    @property
    def m(self) -> int:
        return self.micro_batches or self.pp

    def label(self) -> str:
        parts = [f"TP{self.tp}"] + [
            f"{k}{n}" for k, n in (("DP", self.dp), ("PP", self.pp), ("CP", self.cp), ("DCP", self.dcp)) if n > 1
        ]
        return " ".join(parts) + (" EP" if self.ep > 1 else "")


def check_parallelism(model: Model, p: Parallelism, cluster: Cluster | None = None) -> None:
    """InputError, naming the field, for a combination no engine runs (vLLM v0.33.0's rules)."""
    for key in ("tp", "pp", "dp", "ep", "cp", "dcp"):
        if getattr(p, key) < 1:
            raise InputError(key, "must be at least 1")
    a = model.attention
    if a.num_heads % p.tp:
        raise InputError("tp", f"must divide the {a.num_heads} attention heads (vLLM config/model.py)")
    if a.kind != "mla" and p.tp > a.num_kv_heads and p.tp % a.num_kv_heads:
        raise InputError(
            "tp",
            f"above the {a.num_kv_heads} KV heads it must be a multiple of them: each KV head "
            "is then replicated tp ÷ KV heads times (vLLM QKVParallelLinear)",
        )
    if p.pp > model.num_layers:
        raise InputError("pp", f"must be at most the {model.num_layers} layers")
    if p.ep > 1:
        _check_ep(model, p)
    check_decode_context_parallel(model, p.tp, p.dcp, "dcp")
    if p.micro_batches < 0:
        raise InputError("micro_batches", "must be 0 (one per stage) or more")
    if cluster is not None and p.gpus > cluster.gpus:
        raise InputError("tp", f"tp × dp × cp × pp = {p.gpus} GPUs is more than the cluster's {cluster.gpus}")


def allowed(model: Model, p: Parallelism) -> bool:
    """check_parallelism passes: an engine runs the model this way."""
    try:
        check_parallelism(model, p)
    except InputError:
        return False
    return True


def _check_ep(model: Model, p: Parallelism) -> None:
    if model.moe is None:
        raise InputError("ep", f"{model.name} has no experts; expert parallelism needs an MoE model")
    if p.ep != p.moe_group:
        raise InputError(
            "ep",
            f"must be 1 or tp × cp × dp = {p.moe_group}: vLLM's --enable-expert-parallel "
            "shards the experts over that whole group",
        )
    if p.ep > model.moe.num_experts:
        raise InputError("ep", f"must be at most the {model.moe.num_experts} experts")


@lru_cache(maxsize=64)
def _split(model: Model) -> tuple[int, int, int, int]:
    """(non-expert params, routed-expert params, active routed-expert params, active params w/o embedding)."""
    total, experts = total_params(model), expert_params(model)
    k_share = model.moe.experts_per_token / model.moe.num_experts if model.moe else 0.0
    return total - experts, experts, experts * k_share, active_params(model, include_embedding=False)


def stage_layers(model: Model, pp: int) -> int:
    return -(-model.num_layers // pp)


def stage_fraction(model: Model, pp: int) -> float:
    """Share of the body's weights and KV on the worst stage: ceil(L ÷ pp) ÷ L (1 at pp = 1)."""
    return 1.0 if pp == 1 else stage_layers(model, pp) / model.num_layers


@dataclass(frozen=True)
class Formats:
    weight: float  # bytes per element
    kv: float
    expert: float | None = None  # None = weight
    activation: float = 2.0
    dispatch: float = 2.0  # EP dispatch payload (FP8 in DeepSeek's and DeepEP's recipe)


@dataclass(frozen=True)
class GpuMemory:
    dense_weights: float
    expert_weights: float
    kv_per_sequence: float  # on one GPU, worst stage
    usable: float

    @property
    def weights(self) -> float:
        return self.dense_weights + self.expert_weights

    @property
    def kv_budget(self) -> float:
        return max(0.0, self.usable - self.weights)

    @property
    def fits_weights(self) -> bool:
        return self.weights < self.usable


def expert_share(model: Model, p: Parallelism) -> float:
    """Share of the routed experts one GPU stores: 1/G tensor-sharded, ceil(E ÷ G)/E whole with EP."""
    if model.moe is None:
        return 0.0
    if p.ep > 1:
        return -(-model.moe.num_experts // p.ep) / model.moe.num_experts
    return 1.0 / p.moe_group


def kv_per_sequence_per_gpu(model: Model, p: Parallelism, context: float, kv_b: float) -> float:
    """One sequence's KV on each GPU that holds it: attention KV × kv_fraction_per_gpu(tp, dcp) + state ÷ its
    split, × the stage's share of layers."""
    state = state_bytes_per_sequence(model, STATE_ELEM_BYTES)
    attention = kv_bytes_per_sequence(model, context, kv_b, STATE_ELEM_BYTES) - state
    per = attention * kv_fraction_per_gpu(model, p.tp, p.dcp) + state * state_fraction_per_gpu(model, p.tp)
    return per * stage_fraction(model, p.pp)


def gpu_memory(model: Model, p: Parallelism, f: Formats, usable: float, context: float) -> GpuMemory:
    dense, experts, _, _ = _split(model)
    frac = stage_fraction(model, p.pp)
    if p.pp > 1:  # the body splits by layers; embedding (first stage) or LM head (last), whichever is larger
        ends = embedding_params(model) + lm_head_params(model)
        body = dense - ends
        dense_on_stage = body * frac + max(embedding_params(model), lm_head_params(model) or 0)
    else:
        dense_on_stage = dense
    eb = f.weight if f.expert is None else f.expert
    return GpuMemory(
        dense_on_stage * f.weight / p.tp,
        experts * eb * expert_share(model, p) * frac,
        kv_per_sequence_per_gpu(model, p, context, f.kv),
        usable,
    )


def max_sequences(model: Model, p: Parallelism, mem: GpuMemory) -> int:
    """Sequences of the context the deployment holds: each attention rank's floor(budget ÷ KV per sequence)."""
    if mem.kv_per_sequence <= 0:
        return 0
    return math.floor(mem.kv_budget / mem.kv_per_sequence) * p.attention_ranks


@dataclass(frozen=True)
class StageStep:
    """One pipeline stage's decode step for one micro-batch, per GPU."""

    bytes: float
    flops: float  # matmul-rate equivalent
    memory_s: float
    compute_s: float
    overhead_s: float
    tp_comm_s: float
    moe_comm_s: float
    dcp_comm_s: float
    pp_comm_s: float
    overlap: str = "none"

    @property
    def kernel_s(self) -> float:
        return max(self.memory_s, self.compute_s)

    @property
    def comm_s(self) -> float:
        return self.tp_comm_s + self.moe_comm_s + self.dcp_comm_s + self.pp_comm_s

    @property
    def hidden_comm_s(self) -> float:
        """The communication the overlap runs under the kernels: all of it ("full"), the MoE all-to-all alone
        ("two-batch": SGLang's and vLLM's two-batch overlap target the expert dispatch and combine), or none."""
        if self.overlap == "full":
            return self.comm_s
        return self.moe_comm_s if self.overlap == "two-batch" else 0.0

    @property
    def exposed_comm_s(self) -> float:
        """Communication on the critical path: what is not hidden, and what the kernels are too short to hide."""
        hidden = self.hidden_comm_s
        return max(0.0, hidden - self.kernel_s) + (self.comm_s - hidden)

    @property
    def time_s(self) -> float:
        return self.kernel_s + self.exposed_comm_s + self.overhead_s


@dataclass(frozen=True)
class Decode:
    parallelism: Parallelism
    batch: int  # sequences in flight on the whole deployment
    stage: StageStep
    micro_batch: float

    @property
    def tpot_s(self) -> float:
        return pipeline_slots(self.parallelism) * cut_of(self.stage.overlap) * self.stage.time_s

    @property
    def bubble(self) -> float:
        """Share of time each stage waits: 1 − m ÷ max(m, pp)."""
        p = self.parallelism
        return 1.0 - p.m / max(p.m, p.pp) if p.pp > 1 else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.batch / self.tpot_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.parallelism.gpus

    @property
    def comm_share(self) -> float:
        """The step's share spent in communication the kernels do not hide."""
        return self.stage.exposed_comm_s / self.stage.time_s


class DeploymentModel:
    """Memory, step time and communication for one model on one cluster, any Parallelism; memoised per
    degree so that the sharding search stays fast."""

    def __init__(self, base: Deployment, cluster: Cluster, formats: Formats, usable: float, overlap: str = "none"):
        check_cluster(cluster)
        if overlap not in OVERLAPS:
            raise InputError("overlap", f"must be one of {', '.join(OVERLAPS)}")
        self.base, self.cluster, self.f, self.usable, self.overlap = base, cluster, formats, usable, overlap
        self.model = base.model
        self._steps: dict[int, StepModel] = {}
        self._bw = base.accelerator.memory_bandwidth_bytes_per_s * base.bandwidth_efficiency
        self._peak = compute_rate(base)
        self._comm: dict = {}
        self._params = _split(self.model)  # hashing a Model per step is not free: the per-model constants, once
        self._stage_layers: dict[int, tuple[int, int]] = {}  # by pp: _stage_counts

    def stage_counts(self, pp: int) -> tuple[int, int]:
        """(MoE layers, layers whose mixer runs an all-reduce inside itself) of the stage that prices a step at pp
        stages (_stage_counts)."""
        found = self._stage_layers.get(pp)
        if found is None:
            found = self._stage_layers[pp] = _stage_counts(self.model, pp)
        return found

    def fused_tokens(self, tp: int) -> int:
        """The largest step whose TP all-reduces over tp GPUs run fused with the norms after them (0: none): under
        the "fused" algorithm inside one server, the engine's cap (an SGLang step-overhead mode: SGLang's; else
        vLLM's, by chip and TP size)."""
        if not fused_allreduces(self.cluster, tp):
            return 0
        engine = self.fusion_engine
        return fused_max_tokens(engine, self.base.accelerator.id, tp, self.model.hidden_size, self.model.architecture)

    @property
    def fusion_engine(self) -> str:
        """The engine whose fusion rules the step-overhead mode prices (overhead.fusion_engine)."""
        return fusion_engine(self.base.overhead.mode if self.base.overhead else None)

    def group_model(self, p: Parallelism) -> StepModel:
        """step_model of p's TP group: its MoE layers' output all-reduces over that group where no DP or CP rank
        shares them (moe_group = tp), with or without expert parallelism."""
        return self.step_model(p.tp, p.dcp, p.expert_slices, p.moe_group == p.tp)

    def step_model(self, tp: int, dcp: int = 1, expert_slices: int = 0, moe_over_tp: bool = True) -> StepModel:
        """steptime.StepModel of one TP group of tp GPUs, dcp of them striping each sequence's KV (its
        per-sequence sums, overhead and rates; its kv_share is one GPU's part of a sequence's KV); each routed
        expert sliced across expert_slices GPUs (Parallelism.expert_slices; 0: the tp of the group)."""
        key = (tp, dcp, expert_slices, moe_over_tp)
        if key not in self._steps:
            dep = replace(
                self.base,
                num_gpus=tp,
                overhead=_overhead(self.base, tp, self.fused_tokens(tp), moe_over_tp),
                decode_context_parallel=dcp,
                expert_slices=expert_slices,
            )
            self._steps[key] = StepModel(dep)
        return self._steps[key]

    def memory(self, p: Parallelism, context: float) -> GpuMemory:
        return gpu_memory(self.model, p, self.f, self.usable, context)

    def _cached(self, key, fn):
        found = self._comm.get(key)
        if found is None:
            found = self._comm[key] = fn()
        return found

    def _tp_comm(self, p: Parallelism, s: float, b: float, rows: float | None = None) -> tuple[float, float]:
        """(TP all-reduces + gather, MoE-layer communication) for one stage step of s tokens per attention rank
        and b on the stage; `rows` the logits rows gathered per rank (s when every token samples, as in decode)."""
        m, c, act = self.model, self.cluster, self.f.activation
        layers = stage_layers(m, p.pp)
        moe_layers = self.stage_counts(p.pp)[0]
        msg = s * m.hidden_size * act
        # without DP or CP ranks the MoE layers' output all-reduces over the TP group too, expert parallelism or not:
        # vLLM v0.33.0 and v0.34.0 dispatch by all-to-all only with DP, PCP or sequence parallelism (fused_moe/config.py
        # use_all2all_kernels), SGLang only with an all-to-all backend (--moe-a2a-backend)
        over_tp = p.moe_group == p.tp
        layer_ars = layer_allreduces(m, layers, moe_layers, over_tp)
        rows = s if rows is None else rows
        gather = self._cached(("g", p.tp, rows), lambda: allgather_s(c, math.ceil(rows) * m.vocab_size * act, p.tp))
        ar = self._cached(("ar", p.tp, s), lambda: allreduce_s(c, msg, p.tp))
        fused = c.algorithm == "fused"
        if fused:  # fused all-reduces absorb the norms after them; the rest run plain, priced as NCCL's ring
            plain = self._cached(("ar-ring", p.tp, s), lambda: allreduce_s(c, msg, p.tp, "ring"))
            last_ffn = not moe_layers or last_ffn_over_tp(m, over_tp)  # a stage of no MoE layers ends plain
            engine = self.fusion_engine
            n = fused_pairs(layer_ars, last_ffn, engine, m.architecture) if s <= self.fused_tokens(p.tp) else 0
            tp_part = n * ar + (layer_ars + 1 - n) * plain + gather  # + 1: the embedding's
        else:
            tp_part = (layer_ars + 1) * ar + gather
        tp_part += self._mixer_inner_comm(p, s, fused)
        if not moe_layers or over_tp:
            return tp_part, 0.0
        g = p.moe_group
        if p.ep == 1:  # a wider MoE group's all-reduce has no norm after it to fuse
            moe = self._cached(
                ("arg", g, b), lambda: allreduce_s(c, b * m.hidden_size * act, g, "ring" if fused else None)
            )
            return tp_part, moe_layers * moe
        k = m.moe.experts_per_token
        out = b / g * k * m.hidden_size
        a2a = self._cached(("a2a", g, b), lambda: alltoall_s(c, out * self.f.dispatch, g) + alltoall_s(c, out * act, g))
        regather = self._cached(("ag", p.tp, s), lambda: allgather_s(c, s * m.hidden_size * act, p.tp))
        return tp_part, moe_layers * (a2a + regather)

    def _mixer_inner_comm(self, p: Parallelism, s: float, fused: bool) -> float:
        """The all-reduces mixers run inside themselves on a stage (params.mixer_inner_allreduce: Jamba's x_proj,
        MiniMax-M2's q/k norm), one a layer that runs one; no norm of the residual follows them, so under "fused" they
        run as NCCL's ring."""
        per_token = mixer_inner_allreduce(self.model, self.f.activation)
        if not per_token or p.tp <= 1:
            return 0.0
        one = self._cached(
            ("ar-mixer", p.tp, s),
            lambda: allreduce_s(self.cluster, s * per_token, p.tp, "ring" if fused else None),
        )
        return self.stage_counts(p.pp)[1] * one

    def _dcp_comm(self, p: Parallelism, s: float) -> float:
        if p.dcp <= 1:
            return 0.0
        a, act = self.model.attention, self.f.activation
        heads = a.num_heads / p.tp
        if a.kind == "mla":
            qk, vd = a.kv_lora_rank + a.qk_rope_head_dim, a.kv_lora_rank
        else:
            qk, vd = a.head_dim, a.v_head_dim or a.head_dim
        n, c = p.dcp, self.cluster
        one = allgather_s(c, s * heads * qk * act, n) + allgather_s(c, s * heads * (vd + 1) * act, n)
        return stage_layers(self.model, p.pp) * one

    def _pp_comm(self, p: Parallelism, s: float) -> float:
        if p.pp <= 1:
            return 0.0
        msg = s * self.model.hidden_size * self.f.activation
        return pipeline_send_s(self.cluster, msg / p.tp, p.stage_gpus, p.pp) + allgather_s(self.cluster, msg, p.tp)

    def cut(self, p: Parallelism, sequences: float) -> int:
        """Halves (1 or 2) a step of `sequences` is cut into under this model's overlap, per pipeline micro-batch."""
        return halves(self.overlap, sequences / pipeline_micro_batches(p) / p.attention_ranks)

    def stage_step(self, p: Parallelism, batch: float, context: float) -> StageStep:
        """One stage's decode step for a micro-batch of batch ÷ m sequences (÷ 2 more when two-batch overlap cuts
        it in halves), per GPU."""
        cut = self.cut(p, batch)
        b = batch / (pipeline_micro_batches(p) * cut)
        flops, kv = self.group_model(p).per_sequence(context)
        return with_overlap(self.slot(p, b, b * flops, b * kv), step_overlap(self.overlap, cut))

    def slot(
        self, p: Parallelism, tokens: float, flops: float, kv: float, rows: float | None = None, prefill: bool = False
    ) -> StageStep:
        """One stage's step for one micro-batch of `tokens` tokens doing `flops` (matmul-rate equivalent, the
        whole model) and reading `kv` bytes of KV (every sequence's logical total, steptime.StepModel's units),
        per GPU: the micro-batch spreads over the dp × cp attention ranks; each GPU reads its TP share of the
        dense weights, its experts that some token picks and its ranks' KV × kv_share; FLOPs split over the
        stage's tp × cp × dp GPUs; `rows` tokens sample (None: all). prefill prices the overhead of a step with
        prefill in it and leaves DCP's per-query exchange to the decode tokens (rows)."""
        m, sm = self.model, self.group_model(p)
        s = tokens / p.attention_ranks
        frac = stage_fraction(m, p.pp)
        dense, experts, _, _ = self._params
        weight_bytes = (dense - embedding_lookup_saving(m, s)) * self.f.weight / p.tp
        if m.moe is not None:
            e, k = m.moe.num_experts, m.moe.experts_per_token
            touched = 1.0 if e <= k else experts_touched(e, k, tokens) / e
            eb = self.f.weight if self.f.expert is None else self.f.expert
            weight_bytes += experts * eb * expert_share(m, p) * touched
        byts = (weight_bytes + kv / p.attention_ranks * sm.kv_share) * frac
        flops_gpu = flops / p.moe_group * frac
        rank_rows = None if rows is None else rows / p.attention_ranks
        tp_c, moe_c = self._tp_comm(p, s, tokens, rank_rows)
        overhead = sm.stage_overhead(s, frac, prefill)  # a stage launches its own layers' kernels
        dcp_tokens = s if rank_rows is None else rank_rows
        return StageStep(
            byts,
            flops_gpu,
            byts / self._bw,
            flops_gpu / self._peak,
            overhead,
            tp_c,
            moe_c,
            self._dcp_comm(p, dcp_tokens),
            self._pp_comm(p, s),
            self.overlap,
        )

    def decode(self, p: Parallelism, batch: int, context: float) -> Decode:
        st = self.stage_step(p, batch, context)  # its overlap says whether two-batch overlap cut it
        return Decode(p, batch, st, batch / (pipeline_micro_batches(p) * cut_of(st.overlap)))

    def prefill_s(self, p: Parallelism, prompt: int, chunk: int | None = None) -> dict:
        """One prompt on every DP rank at once (CP splits each over its ranks; the MoE load balanced), in
        c = ⌈prompt ÷ chunk⌉ chunks (one without a chunk size) that flow through the PP stages as micro-batches,
        each crossing the stages one after another: c stage slots of the mean chunk, plus pp − 1 of the largest
        (the last chunk cannot leave the last stage before the one ahead of it), × dp tokens (one row each
        samples). vLLM's V2 model runner pipelines a prompt's chunks in consecutive steps (vllm-project/vllm PR
        #42187, merged May 2026), so PP shortens a long prompt's prefill and not one that fits a chunk. Each slot
        pays its communication (TP all-reduces, MoE all-to-all or all-reduce, the stage send) under the model's
        overlap; the CP ranks then all-gather the prompt's KV (PCP replicates it)."""
        sm = self.group_model(p)
        flops, kv = sm.per_prompt(prompt)
        c = 1 if not chunk or prompt <= chunk else math.ceil(prompt / chunk)
        cut = self.cut(p, p.dp)
        n = p.dp / cut  # prompts per slot: one per DP rank, halved where two-batch overlap cuts them
        overlap = step_overlap(self.overlap, cut)

        def slot_of(tokens: float) -> StageStep:  # a chunk of `tokens`, its FLOPs and KV the prompt's mean share
            share = tokens / prompt * n
            return with_overlap(self.slot(p, tokens * n, flops * share, kv * share, n, True), overlap)

        mean, largest = slot_of(prompt / c), slot_of(min(prompt, chunk) if c > 1 else prompt)
        cp_comm = _cp_ring(self.cluster, kv * sm.kv_share, p) if p.cp > 1 else 0.0
        kernel = ((mean.kernel_s + mean.overhead_s) * c + (largest.kernel_s + largest.overhead_s) * (p.pp - 1)) * cut
        comm = (mean.exposed_comm_s * c + largest.exposed_comm_s * (p.pp - 1)) * cut
        time = kernel + comm + cp_comm
        return {"kernel_s": kernel, "comm_s": comm, "cp_comm_s": cp_comm, "time_s": time, "chunks": c}


def _cp_ring(c: Cluster, kv_gpu: float, p: Parallelism) -> float:
    """The prompt's KV all-gathered over the cp ranks (each receives (cp − 1)/cp of it), over the link the CP
    group spans (its ranks sit tp apart)."""
    span = p.tp * p.cp
    if span <= c.gpus_per_node:
        return allgather_s(c, kv_gpu, p.cp)
    return p2p_s(c, kv_gpu * (p.cp - 1) / p.cp, True)


def _overhead(dep: Deployment, tp: int, fused_tokens: int = 0, moe_over_tp: bool = True):
    """The deployment's overhead model with what depends on a tp-wide group (its kernels, the collectives among them,
    the norms its fused all-reduces absorb, and its largest graphs) taken from step_overhead at that TP; its other
    terms kept (a fit may have set them)."""
    if dep.overhead is None:
        return None
    group = step_overhead(dep.model, dep.accelerator, tp, dep.overhead.mode)
    return replace(
        dep.overhead,
        eager_kernels=group.eager_kernels,
        full_graph_tokens=group.full_graph_tokens,
        max_capture_tokens=group.max_capture_tokens,
        fused_kernels=fused_norms(dep.model, moe_over_tp, fusion_engine(dep.overhead.mode)) if fused_tokens else 0,
        fused_max_tokens=fused_tokens,
    )


@lru_cache(maxsize=256)
def _stage_counts(model: Model, pp: int) -> tuple[int, int]:
    """(MoE layers, layers whose mixer runs an all-reduce inside itself: params.runs_inner_allreduce) of the stage
    with the most MoE layers, then the most of the others: one stage for both counts (stages take consecutive layers,
    ceil(L ÷ pp) each)."""
    size = stage_layers(model, pp)
    moe = [is_moe_layer(model, i) for i in range(model.num_layers)]
    inner = [runs_inner_allreduce(model, i) for i in range(model.num_layers)]
    return max((sum(moe[i : i + size]), sum(inner[i : i + size])) for i in range(0, model.num_layers, size))

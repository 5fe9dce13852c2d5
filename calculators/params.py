"""Parameter counts derived from the architecture, never copied from a model card.

Counted: token embedding, untied LM head, attention projections (incl. MLA's low-rank
projections and their norms, QKV/O biases, DeepSeek-V3.2's indexer, Qwen3-Next's output gate),
linear-attention / SSM mixers on "linear" layers, dense FFN (gated: gate+up+down; plain:
up+down), MoE routed and shared experts plus the router, and RMSNorm/LayerNorm weights
(two per layer plus the final norm). Not counted, each well under 0.1% of any preset:
QK-norm weights, Qwen3-Next's shared-expert gate (hidden_size per layer), attention sinks, LayerNorm
biases, FFN biases of dense models and learned position tables (OPT, GPT-2).
"""

from __future__ import annotations

from .formats import bytes_per_element
from .model import Model


def _indexer_params(a, d: int) -> int:
    """DeepSeek-V3.2 lightning indexer: wq_b, wk, k_norm (LayerNorm weight and bias), weights_proj
    (DeepSeek-V3.2-Exp inference/model.py, class Indexer)."""
    if not a.index_head_dim:
        return 0
    return (
        a.q_lora_rank * a.index_n_heads * a.index_head_dim
        + d * a.index_head_dim
        + 2 * a.index_head_dim
        + d * a.index_n_heads
    )


def _attention_params(model: Model) -> int:
    a, d = model.attention, model.hidden_size
    v_dim = a.v_head_dim or a.head_dim
    if a.kind == "mla":
        qk_dim = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank:
            q = d * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * a.num_heads * qk_dim
        else:
            q = d * a.num_heads * qk_dim
        kv_down = d * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank
        kv_up = a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + v_dim)
        return q + kv_down + kv_up + a.num_heads * v_dim * d + _indexer_params(a, d)
    q_out, kv_out = a.num_heads * a.head_dim, a.num_kv_heads * a.head_dim
    v_out = a.num_kv_heads * v_dim
    gate = a.num_heads * a.head_dim if a.output_gate else 0  # Qwen3-Next: q_proj emits query and gate
    n = d * (q_out + gate + kv_out + v_out) + a.num_heads * v_dim * d
    if a.qkv_bias:
        n += q_out + kv_out + v_out
    if a.o_bias:
        n += d
    return n


def linear_mixer_params(model: Model) -> int:
    """One linear-attention / SSM mixer, as the published modelling code defines it:
    Qwen3NextGatedDeltaNet, NemotronHMamba2Mixer, JambaMambaMixer (transformers)."""
    m, d = model.linear_mixer, model.hidden_size
    if m is None:
        return 0
    if m.kind == "gated_deltanet":
        k_dim, v_dim = m.num_key_heads * m.key_head_dim, m.num_heads * m.value_head_dim
        conv_dim = 2 * k_dim + v_dim
        return (
            d * (2 * k_dim + 2 * v_dim)
            + d * 2 * m.num_heads
            + conv_dim * m.conv_kernel
            + 2 * m.num_heads
            + m.value_head_dim
            + v_dim * d
        )
    if m.kind == "mamba2":
        conv_dim = m.inner_size + 2 * m.n_groups * m.state_size
        return (
            d * (m.inner_size + conv_dim + m.num_heads)
            + conv_dim * (m.conv_kernel + m.conv_bias)
            + 3 * m.num_heads
            + m.inner_size
            + m.inner_size * d
        )
    inner, n = m.inner_size, m.state_size  # mamba1 (Jamba: with dt/B/C RMSNorms)
    return (
        d * 2 * inner
        + inner * (m.conv_kernel + m.conv_bias)
        + inner * (m.dt_rank + 2 * n)
        + m.dt_rank * inner
        + inner
        + inner * n
        + inner
        + inner * d
        + m.dt_rank
        + 2 * n
    )


def _ffn_params(model: Model, width: int) -> int:
    mats = 3 if model.ffn_kind == "gated" else 2
    return mats * model.hidden_size * width


def _expert_params(model: Model, width: int, bias: bool) -> int:
    n = _ffn_params(model, width)
    if bias:  # gpt-oss: bias on the fused gate/up output and on the down output
        n += (2 if model.ffn_kind == "gated" else 1) * width + model.hidden_size
    return n


def is_moe_layer(model: Model, layer: int) -> bool:
    """MoE layers: after the leading dense ones, every layer_interval-th layer.

    Matches DeepSeek (first_k_dense_replace) and Llama 4 (interleave step 2: layers 1, 3, ...).
    """
    m = model.moe
    if m is None or layer < m.first_dense_layers:
        return False
    return (layer + 1 - m.first_dense_layers) % m.layer_interval == 0


def moe_layer_count(model: Model) -> int:
    return sum(is_moe_layer(model, i) for i in range(model.num_layers))


def layer_parts(model: Model, layer: int) -> tuple[bool, bool]:
    """(mixer, FFN): whether a layer has an attention or linear mixer, and whether it has an FFN: each a sublayer with
    a norm before it and, under tensor parallelism, an all-reduce after it. Where FFNs are layers of their own
    (Nemotron-H's MLP blocks: ffn_in_mixer_layers false) a layer has one of the two; in every other model both."""
    if model.ffn_in_mixer_layers:
        return True, True
    ffn = model.layer_kinds[layer] == "mlp"
    return not ffn, ffn


def layer_allreduces(model: Model, layers: int, moe_layers: int, moe_over_tp: bool) -> int:
    """All-reduces over the TP group after the sublayers of `layers` layers, `moe_layers` of them MoE: one after each
    mixer and each FFN (layer_parts), an MoE FFN's only where it all-reduces over the TP group (not under expert
    parallelism with all-to-all dispatch, nor over a wider MoE group); one a layer where FFNs are layers of their own
    (Nemotron-H, whose blocks have no MoE)."""
    if not model.ffn_in_mixer_layers:
        return layers
    return 2 * layers - moe_layers + (moe_layers if moe_over_tp else 0)


def mixer_inner_allreduce(model: Model, activation_bytes: float) -> float:
    """Bytes per token of the all-reduce a mixer runs inside itself under tensor parallelism, besides the one after it
    (runs_inner_allreduce says which layers); 0 where none. Mamba-1's x_proj is row-parallel (vLLM v0.34.0
    model_executor/layers/mamba/mamba_mixer.py, MambaMixer.__init__), so a Jamba Mamba layer sums its Δ, B and C
    projections (dt_rank + 2N activations per token) over the TP group before dt_proj; a step with prefill and decode
    tokens runs it twice (forward_impl calls _ssm_transform for each part), priced once. A q/k RMSNorm over all heads
    (MiniMax-M2) needs each token's sum of squares across the ranks that hold its heads: two FP32 values, q's and k's,
    all-reduced in one call (SGLang 0.5.8 models/minimax_m2.py MiniMaxM2RMSNormTP.forward_qk). No catalogue model has
    both; one that had would need a width per layer kind."""
    if has_mamba1_mixer(model):
        return (model.linear_mixer.dt_rank + 2 * model.linear_mixer.state_size) * activation_bytes
    return 2 * 4.0 if model.attention.qk_norm_over_heads else 0.0


def has_mamba1_mixer(model: Model) -> bool:
    """Whether the model's linear mixer is Mamba-1 (Jamba's), whose x_proj all-reduces inside it."""
    return model.linear_mixer is not None and model.linear_mixer.kind == "mamba1"


def runs_inner_allreduce(model: Model, layer: int) -> bool:
    """Whether the layer's mixer runs the all-reduce mixer_inner_allreduce prices: a Mamba-1 layer, or an attention
    layer of a model whose q/k norm spans all heads."""
    if not layer_parts(model, layer)[0]:
        return False
    if model.layer_kinds[layer] == "linear":
        return has_mamba1_mixer(model)
    return model.attention.qk_norm_over_heads


def inner_allreduce_layers(model: Model) -> int:
    """Layers whose mixer runs an all-reduce inside itself (runs_inner_allreduce)."""
    return sum(runs_inner_allreduce(model, i) for i in range(model.num_layers))


def last_ffn_over_tp(model: Model, moe_over_tp: bool) -> bool:
    """Whether the model's last layer ends in an all-reduce over the TP group: it does unless that layer is MoE and its
    MoE output goes elsewhere (expert parallelism's all-to-all, a wider MoE group)."""
    return moe_over_tp or not is_moe_layer(model, model.num_layers - 1)


def mixer_layer_count(model: Model) -> int:
    """Layers with an attention or linear mixer: every layer but Nemotron-H's MLP blocks."""
    return sum(layer_parts(model, i)[0] for i in range(model.num_layers))


def _moe_layer_params(model: Model, experts: int) -> int:
    m = model.moe
    routed = experts * _expert_params(model, m.expert_intermediate_size, m.expert_bias)
    shared_width = m.shared_intermediate_size or m.expert_intermediate_size
    shared = m.num_shared_experts * _ffn_params(model, shared_width)
    router = m.num_experts * model.hidden_size + (m.num_experts if m.expert_bias else 0)
    return routed + shared + router


def _body_params(model: Model, active: bool) -> int:
    """All transformer layers plus the final norm."""
    d = model.hidden_size
    n_moe = moe_layer_count(model)
    n_linear, n_mlp = model.layer_kinds.count("linear"), model.layer_kinds.count("mlp")
    n_attention = model.num_layers - n_linear - n_mlp
    mixers = n_attention * _attention_params(model) + n_linear * linear_mixer_params(model)
    if model.ffn_in_mixer_layers:
        n_dense, norms = model.num_layers - n_moe, 2
    else:  # Nemotron-H: one norm per block, FFN only in the mlp blocks
        n_dense, norms = n_mlp, 1
    n = mixers + model.num_layers * norms * d + d + n_dense * _ffn_params(model, model.intermediate_size)
    if n_moe:
        experts = model.moe.experts_per_token if active else model.moe.num_experts
        n += n_moe * _moe_layer_params(model, experts)
    return n


def embedding_params(model: Model) -> int:
    return model.vocab_size * model.hidden_size


def lm_head_params(model: Model) -> int:
    return 0 if model.tie_embeddings else model.vocab_size * model.hidden_size


def total_params(model: Model) -> int:
    """Every stored parameter (DeepSeek-V3: the 671B main model; its MTP module is not in the config's layers)."""
    return embedding_params(model) + lm_head_params(model) + _body_params(model, active=False)


def active_params(model: Model, include_embedding: bool = True) -> int:
    """Parameters one token uses: shared weights plus top-k routed and all shared experts.

    The input embedding is a row lookup, not a matmul; pass include_embedding=False to
    leave the table out (an untied LM head is always counted; a tied one is the table).
    Vendors differ here: Mistral and Meta count it, DeepSeek and OpenAI do not.
    """
    n = lm_head_params(model) + _body_params(model, active=True)
    if include_embedding or model.tie_embeddings:
        n += embedding_params(model)
    return n


def expert_params(model: Model) -> int:
    """Routed-expert weights over all MoE layers (biases included): the part MoE checkpoints
    often store in their own format (gpt-oss: MXFP4 experts, everything else BF16). 0 for dense."""
    m = model.moe
    if m is None:
        return 0
    return moe_layer_count(model) * m.num_experts * _expert_params(model, m.expert_intermediate_size, m.expert_bias)


def weight_bytes(model: Model, dtype: str = "bf16", field: str = "dtype", expert_dtype: str | None = None) -> float:
    """Bytes to store all weights (block scales included); expert_dtype, when given, prices the
    routed experts in their own format and `dtype` the rest."""
    if not expert_dtype:
        return total_params(model) * bytes_per_element(dtype, field)
    experts = expert_params(model)
    return (total_params(model) - experts) * bytes_per_element(dtype, field) + experts * bytes_per_element(
        expert_dtype, "expert_weight_dtype"
    )

"""KV-cache groups, pages and capacities as the engines size them at startup: vLLM's groups of layers sharing a block
table (one page per layer, sliding-window and chunked groups beside full ones, padded to a common size), the blocks one
request takes from each, the "GPU KV cache size" and "Maximum concurrency" that follow, and the longest request a budget
holds; SGLang's cell of one token over every layer and its max_total_num_tokens. Attention-only models (hybrid models
with linear-attention layers are refused). engine_capacity.py and startup_log.py size the budget they divide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InputError
from ..formats import bytes_per_element
from ..model import Model
from .kv_cache import kv_bytes_per_token_per_layer, kv_fraction_per_gpu, layer_groups


@dataclass(frozen=True)
class Group:
    kind: str  # "full", "sliding" or "chunked"
    layers: int  # real layers in this group (a padded group holds fewer than group_size)
    cap_tokens: int | None  # the window or chunk; None for full attention


@dataclass(frozen=True)
class Layout:
    """How an engine lays one rank's KV out: groups of layers sharing a block table, one page per layer."""

    per_layer_token: float  # bytes one token adds to one layer's cache on one rank
    block_size: int
    groups: tuple[Group, ...]
    group_size: int  # layers per group, padding included

    @property
    def page_bytes(self) -> float:
        return self.block_size * self.per_layer_token

    @property
    def bytes_per_block(self) -> float:
        return self.group_size * self.page_bytes

    @property
    def padding_layers(self) -> int:
        return len(self.groups) * self.group_size - sum(g.layers for g in self.groups)

    @property
    def bytes_per_token(self) -> float:
        """KV bytes per token on one rank, every storing attention layer (the exact per-token cost)."""
        return sum(g.layers for g in self.groups) * self.per_layer_token


def _attention_only(model: Model) -> None:
    if any(k in ("linear",) for k in model.layer_kinds):
        raise InputError(
            "model",
            f"{model.name} has linear-attention (state-space) layers; the engine-faithful mode models "
            "attention-only models (full, sliding-window, chunked and MLA)",
        )


def layout(model: Model, kv_dtype: str, tensor_parallel: int, block_size: int) -> Layout:
    """vLLM's KV-cache groups (kv_cache_planning.py:416-556 at v0.33.0; the same rule at v0.19.0 and v0.34.0):
    one bucket per attention type; group size = the smallest bucket's layer count, or the largest's when
    that is under 1.5 × the smallest; each bucket split into ⌈layers ÷ group size⌉ groups (the last padded).
    A model with one attention type is one group of every layer."""
    _attention_only(model)
    per_layer = kv_bytes_per_token_per_layer(model.attention, bytes_per_element(kv_dtype, "kv_dtype"))
    per_layer *= kv_fraction_per_gpu(model, tensor_parallel)
    buckets = layer_groups(model, storing=True)
    smallest, largest = min(b.layers for b in buckets), max(b.layers for b in buckets)
    size = largest if largest < smallest * 1.5 else smallest
    groups = []
    for b in buckets:
        n = math.ceil(b.layers / size)
        # layers[i::n] per group (kv_cache_planning.py:553-555): sizes differ by at most one
        groups += [Group(b.kind, len(range(i, b.layers, n)), b.cap_tokens) for i in range(n)]
    return Layout(per_layer, block_size, tuple(groups), size)


def blocks_per_request(ver: dict, g: Group, block: int, max_model_len: int, max_num_batched_tokens: int) -> int:
    """Blocks one request of max_model_len tokens takes from one group (kv_cache_interface.py)."""
    if g.cap_tokens is None:
        return math.ceil(max_model_len / block)
    in_flight = ver.get("in_flight_batches", 1) * max_num_batched_tokens
    if g.kind == "sliding":
        tokens = min(g.cap_tokens - 1 + in_flight, max_model_len)
        return math.ceil(tokens / block) + (1 if ver["sliding_extra_block"] else 0)
    return math.ceil(min(g.cap_tokens + in_flight, max_model_len) / block)


@dataclass(frozen=True)
class Capacity:
    num_blocks: int
    tokens: int  # the "GPU KV cache size" (vLLM) or max_total_num_tokens (SGLang) line
    concurrency: float  # requests of max_model_len the pool holds
    blocks_per_request: int


def vllm_capacity(
    ver: dict, lay: Layout, available: float, max_model_len: int, max_num_batched_tokens: int
) -> Capacity:
    blocks = max(0, int(available // lay.bytes_per_block))
    per_request = sum(
        blocks_per_request(ver, g, lay.block_size, max_model_len, max_num_batched_tokens) for g in lay.groups
    )
    concurrency = blocks / per_request
    if ver["tokens_rule"] == "blocks_per_group":
        tokens = blocks // len(lay.groups) * lay.block_size
    else:
        tokens = int(concurrency * max_model_len)
    return Capacity(blocks, tokens, concurrency, per_request)


def vllm_request_bytes(ver: dict, lay: Layout, max_model_len: int, max_num_batched_tokens: int) -> float:
    """KV bytes one request of max_model_len claims at start-up: bytes per block × Σ groups' blocks, the
    'X GiB KV cache is needed' of a failed start (the version's max_len_estimate source)."""
    blocks = sum(blocks_per_request(ver, g, lay.block_size, max_model_len, max_num_batched_tokens) for g in lay.groups)
    return lay.bytes_per_block * blocks


def vllm_max_len_estimate(
    ver: dict, lay: Layout, available: float, max_model_len: int, max_num_batched_tokens: int
) -> int:
    """'The estimated maximum model length is N': the longest request (1 … max_model_len) whose start-up
    claim fits the budget the check was given, by the engine's binary search; 0 when one token does not fit."""

    def fits(length: int) -> bool:
        return vllm_request_bytes(ver, lay, length, max_num_batched_tokens) <= available

    if not fits(1):
        return 0
    low, high = 1, max_model_len  # the claim grows with the length: the largest that fits
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return low


def sglang_cell_bytes(model: Model, kv_dtype: str, tensor_parallel: int) -> float:
    """SGLang's cell_size: KV bytes of one token over every attention layer on one rank
    (pool_configurator.py:340-535); sliding-window layers counted as full (its SWA pool split is not modelled)."""
    _attention_only(model)
    per_layer = kv_bytes_per_token_per_layer(model.attention, bytes_per_element(kv_dtype, "kv_dtype"))
    layers = sum(g.layers for g in layer_groups(model, storing=True))
    return per_layer * kv_fraction_per_gpu(model, tensor_parallel) * layers


def sglang_capacity(cell: float, budget: float, page_size: int, context_len: int) -> Capacity:
    tokens = max(0, int(budget // cell)) // page_size * page_size
    return Capacity(tokens // page_size, tokens, tokens / context_len, math.ceil(context_len / page_size))

"""The paged KV pool of one replica: blocks each sequence holds, and the prefix cache when it is on.

Own blocks (blocks[i]) belong to one sequence; cached blocks (held[i]) are named and may be shared,
and count once in the pool however many hold them. `free` counts empty blocks and cached ones nobody
holds (those are evicted, oldest released first, when a sequence needs the room).

Windowed layers. EngineConfig.kv_blocks counts blocks of every layer's KV (the pool as the engine prints it, in
tokens ÷ block size). A model that mixes full-attention layers with sliding-window (or chunked local) layers keeps
only the last window of the latter: vLLM V1 frees a sequence's blocks once they leave the window
(SlidingWindowManager.remove_skipped_blocks, vllm/v1/core/single_type_kv_cache_manager.py, read at commit 002f349
of the main branch; only with the hybrid KV-cache manager on, which some releases turn off for chunked local
attention). While a prompt is prefilled vLLM holds a whole chunk's blocks of those layers for a step; this charge
is the window only. For such a model (a PoolCharge) the pool counts blocks of the full-attention layers alone,
`total` of them (kv_blocks × all layers' bytes ÷ full layers' bytes), and each running sequence also holds a fixed
charge for its windowed layers: per windowed kind, min(its blocks at its final length, ⌈(window − 1) ÷ block⌉ + 1)
blocks of that kind, in full-layer blocks. The charge is taken whole at admission (what the sequence holds at its
longest, so a short one reserves a little early) and given back when it leaves, so the blocks a sequence takes as
it grows stay one per block of tokens.

Linear-attention and SSM layers (hybrid models: Qwen3-Next, Jamba, Nemotron-H) keep a constant state per sequence in
the same paged pool (vLLM v0.33.0 aligns the state's page with the attention blocks': Part 4, "The engine pads").
The charge adds that state as tokens of the pool (StepModel.state_pool_tokens: the state per GPU ÷ one token's KV
per GPU, as memory.budget splits them), rounded up to whole blocks with the window's. The engine's padding of the
state's page (and the larger attention blocks that come with it) is not modelled; engine_capacity.py refuses hybrid
models.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ..calcs.kv_cache import windowed_layers
from .config import EngineConfig, Request
from .prefix import BlockNames, PrefixCache


class PoolCharge(NamedTuple):
    """What a sequence holds beyond a block per block of tokens. A model's windowed layers against its full-attention
    ones (kv_cache.windowed_layers): all storing layers ÷ the full-attention ones, and per windowed kind (its layers
    ÷ the full-attention ones, its window in tokens); and a hybrid model's linear-layer state in pool tokens."""

    all_over_full: float
    kinds: tuple[tuple[float, int], ...]
    state_tokens: float = 0.0


def pool_charge(step_model) -> PoolCharge | None:
    """The PoolCharge of the deployment a StepModel (or ShardedSteps) prices; None where every layer keeps every
    token and there is no state (a model whose every layer is windowed is counted at every token)."""
    w, state = windowed_layers(step_model.dep.model), step_model.state_pool_tokens
    if w is None:
        return PoolCharge(1.0, (), state) if state else None
    full, windowed = w
    kinds = tuple((n / full, cap) for n, cap in windowed)
    return PoolCharge(1.0 + sum(n for n, _ in windowed) / full, kinds, state)


class KvPool:
    __slots__ = (
        "block_size",
        "total",
        "free",
        "blocks",
        "held",
        "names",
        "cache",
        "block_names",
        "host_copy_s",
        "layout",
        "charge",
        "charged",
        "block_bytes",
    )

    def __init__(self, cfg: EngineConfig, n: int, layout: PoolCharge | None = None):
        """`layout`: the windowed layers and state (pool_charge), None for full-attention layers without state."""
        self.layout = layout
        scale = layout.all_over_full if layout else 1.0
        self.block_size, self.blocks = cfg.block_size_tokens, [0] * n
        self.total = self.free = math.floor(cfg.kv_blocks * scale + 1e-9)  # full-layer blocks
        self.block_bytes = cfg.kv_bytes_per_block / scale  # bytes of one of them (a swap moves these)
        self.charge, self.charged = [0] * n, [0] * n  # each sequence's charge (window, state), and what it holds of it
        self.cache = PrefixCache(cfg.host_cache_blocks) if cfg.prefix_caching else None
        self.held = [[] for _ in range(n)] if self.cache else [()] * n
        self.names, self.block_names = [()] * n, BlockNames()
        self.host_copy_s = self.block_bytes / cfg.host_cache_bytes_per_s if cfg.host_cache_blocks else 0.0

    def extend(self, count: int, final_tokens: list[int] | None = None) -> None:
        """Room for `count` more sequences (requests joining a run: Engine.extend), each `final_tokens` long at
        the end (prompt + output: what sets its windowed-layer charge; the state is the same for all)."""
        self.blocks += [0] * count
        self.held += [[] for _ in range(count)] if self.cache else [()] * count
        self.names += [()] * count
        self.charged += [0] * count
        if self.layout is None or final_tokens is None:
            self.charge += [0] * count
        else:
            self.charge += [self._charge_for(t) for t in final_tokens]

    def _charge_for(self, tokens: int) -> int:
        """Full-layer blocks a sequence of `tokens` tokens holds for its windowed layers at most, and its state."""
        w, bs, longest = self.layout, self.block_size, self.blocks_for(tokens)
        held = math.fsum(share * min(longest, -(-(cap - 1) // bs) + 1) for share, cap in w.kinds)
        return math.ceil(held + w.state_tokens * w.all_over_full / bs - 1e-9)  # fsum: CPython 3.11 and 3.14 agree

    def blocks_for(self, tokens: int) -> int:
        """Full-layer blocks for `tokens` tokens (the window and state charge apart: whole())."""
        return -(-tokens // self.block_size)

    def whole(self, i: int, tokens: int) -> int:
        """Blocks sequence i holds at `tokens` tokens, its charge (window, state) included (what a waiting sequence,
        which holds none of its charge, must find free)."""
        return self.blocks_for(tokens) + self.charge[i]

    def name(self, i: int, request: Request) -> None:
        """Name the full blocks of request i's whole sequence (on arrival, when caching), its own tokens' too."""
        whole = (request.prompt_tokens + request.output_tokens) // self.block_size
        self.names[i] = self.block_names.chain(request.pieces(), self.block_size, whole)

    def need(self, i: int, tokens: int) -> int:
        """Blocks sequence i still lacks for `tokens` computed tokens (its own and its cached ones count, and
        the charge (window, state) it does not hold yet)."""
        return self.blocks_for(tokens) - self.blocks[i] - len(self.held[i]) + self.charge[i] - self.charged[i]

    def allocate(self, i: int, tokens: int) -> None:
        """Blocks for `tokens` computed tokens of sequence i (and its charge for window and state, once)."""
        owed = self.charge[i] - self.charged[i]
        if owed:
            self.take(owed)
            self.charged[i] = self.charge[i]
        need = self.blocks_for(tokens) - self.blocks[i] - len(self.held[i])
        if need > 0:
            self.take(need)
            self.blocks[i] += need

    def take(self, count: int) -> None:
        """Take blocks from the free pool; cached blocks nobody holds are evicted when no empty one is left."""
        if self.cache is not None:
            short = count - (self.free - len(self.cache.evictable))
            if short > 0:
                self.cache.evict(short)
        self.free -= count

    def release(self, i: int) -> int:
        """Give back i's blocks (its own and its window and state charge to the pool, its cached ones to the cache);
        returns how many it held."""
        own, shared, charged, self.blocks[i], self.charged[i] = self.blocks[i], self.held[i], self.charged[i], 0, 0
        self.free += own + charged + (self.cache.release(shared) if shared else 0)
        if shared:
            self.held[i] = []
        return own + charged + len(shared)

    def register(self, ids, done: list[int]) -> None:
        """Blocks a sequence has filled with tokens that have a name become cached (still held)."""
        bs, cache, names, held, blocks = self.block_size, self.cache, self.names, self.held, self.blocks
        for i in ids:
            h, full = held[i], min(done[i] // bs, len(names[i]))
            if len(h) < full and cache.add_new(names[i][len(h) : full]):  # none cached yet: all at once
                blocks[i] -= full - len(h)
                h.extend(names[i][len(h) : full])
                continue
            while len(h) < full:
                if not cache.add(names[i][len(h)]):  # computed twice at once: this copy stays i's own
                    names[i] = names[i][: len(h)]
                    break
                h.append(names[i][len(h)])
                blocks[i] -= 1

    def hits(self, i: int, done: int, tokens: int) -> tuple[int, int, int]:
        """(GPU hits, host hits, evictable GPU hits) in blocks for i's next admission: never its whole
        sequence (the last token is computed to give the next one), none for a swapped-out request."""
        if self.cache is None or done:
            return 0, 0, 0
        names = self.names[i][: (tokens - 1) // self.block_size]
        gpu, host = self.cache.match(names)
        refs = self.cache.refs
        return gpu, host, sum(1 for name in names[:gpu] if refs[name] == 0)

    def reuse(self, i: int, gpu: int, host: int) -> float:
        """Hold i's cached leading blocks, copying host-tier ones back; returns the copy time in seconds."""
        cache, names = self.cache, self.names[i]
        self.free -= cache.acquire(names[:gpu])
        for name in names[gpu : gpu + host]:
            self.take(1)
            cache.add(name)
        self.held[i] = list(names[: gpu + host])
        return host * self.host_copy_s

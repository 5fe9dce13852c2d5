"""The paged KV pool of one replica: blocks each sequence holds, and the prefix cache when it is on.

Own blocks (blocks[i]) belong to one sequence; cached blocks (held[i]) are named and may be shared,
and count once in the pool however many hold them. `free` counts empty blocks and cached ones nobody
holds (those are evicted, oldest released first, when a sequence needs the room).
"""

from __future__ import annotations

from .config import EngineConfig, Request
from .prefix import BlockNames, PrefixCache


class KvPool:
    __slots__ = ("block_size", "free", "blocks", "held", "names", "cache", "block_names", "host_copy_s")

    def __init__(self, cfg: EngineConfig, n: int):
        self.block_size, self.free, self.blocks = cfg.block_size_tokens, cfg.kv_blocks, [0] * n
        self.cache = PrefixCache(cfg.host_cache_blocks) if cfg.prefix_caching else None
        self.held = [[] for _ in range(n)] if self.cache else [()] * n
        self.names, self.block_names = [()] * n, BlockNames()
        self.host_copy_s = cfg.kv_bytes_per_block / cfg.host_cache_bytes_per_s if cfg.host_cache_blocks else 0.0

    def extend(self, count: int) -> None:
        """Room for `count` more sequences (requests joining a run: Engine.extend)."""
        self.blocks += [0] * count
        self.held += [[] for _ in range(count)] if self.cache else [()] * count
        self.names += [()] * count

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def name(self, i: int, request: Request) -> None:
        """Name the full blocks of request i's whole sequence (on arrival, when caching), its own tokens' too."""
        whole = (request.prompt_tokens + request.output_tokens) // self.block_size
        self.names[i] = self.block_names.chain(request.pieces(), self.block_size, whole)

    def need(self, i: int, tokens: int) -> int:
        """Blocks sequence i still lacks for `tokens` computed tokens (its own and its cached ones count)."""
        return self.blocks_for(tokens) - self.blocks[i] - len(self.held[i])

    def allocate(self, i: int, tokens: int) -> None:
        """Blocks for `tokens` computed tokens of sequence i."""
        need = self.need(i, tokens)
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
        """Give back i's blocks (its own to the pool, its cached ones to the cache); returns how many it held."""
        own, shared, self.blocks[i] = self.blocks[i], self.held[i], 0
        self.free += own + (self.cache.release(shared) if shared else 0)
        if shared:
            self.held[i] = []
        return own + len(shared)

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

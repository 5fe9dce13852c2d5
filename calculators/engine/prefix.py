"""A prefix cache over block-aligned token prefixes, with LRU eviction and an optional host tier.

A request's tokens are named by pieces of shared streams: `Request.prefix` lists (stream, start,
length) segments that open its prompt (a system prompt, a conversation so far, a few-shot template),
and `Request.output_stream` = (stream, start) names its output, so that a later turn that re-reads it
can hit. Tokens outside those are the request's own. Block j of a sequence is named by the chain
(name of block j − 1, the pieces block j holds): two sequences share block j exactly when their first
(j + 1) × block_size tokens are the same pieces, which is what vLLM's hashed blocks (v0.33.0,
vllm/v1/core/kv_cache_utils.py, hash_block_tokens: parent hash and the block's tokens) and SGLang's
radix tree over token ids decide. Names are small ints, interned, so runs are deterministic.

Tiers: a block no running sequence holds stays cached on the GPU and can be evicted, oldest released
first (vLLM's free-block queue hands out its least recently freed block; of blocks a sequence releases
together, the chain's tail first, as vLLM frees them in reverse); an evicted block moves to the
host tier when one is configured (capacity in blocks, LRU), where a later hit costs a copy back.
"""

from __future__ import annotations

from collections import OrderedDict


class BlockNames:
    """Interned names of block-aligned prefixes."""

    __slots__ = ("names", "chains", "fresh")

    def __init__(self):
        self.names: dict = {}
        self.chains: dict = {}  # (shared pieces, block size) → names: many requests open alike
        self.fresh = -2  # the next name of a block only its own request holds (-1 is the chain's root)

    def chain(self, pieces: list, block_size: int, blocks: int) -> list[int]:
        """Names of the first `blocks` full blocks of a sequence made of pieces [(stream, start, length)];
        a stream of None is the request's own. Contiguous pieces of one stream are one run, however the request
        split them (a prompt and the answer it continues). The shared pieces before the first own one are named
        once for every request that opens with them (a slice: a copy callers may cut). The blocks after them are
        named too, by names no other request gets, as vLLM hashes every full block a request computes,
        not only shared ones (v0.33.0: v1/request.py update_block_hashes, for every new full block, with
        v1/core/kv_cache_utils.py get_request_block_hasher): nobody else can hit them, but the request itself
        finds them again when it is readmitted after a preemption."""
        shared = []
        for piece in pieces:
            if piece[0] is None:
                break
            shared.append(piece)
        key = (tuple(shared), block_size)
        if key not in self.chains:  # every full block the shared pieces fill, whatever `blocks` asks
            self.chains[key] = self._chain(shared, block_size, sum(length for _, _, length in shared))
        opening = self.chains[key]
        if blocks <= len(opening):
            return opening[:blocks]
        # every block from the first own token on holds this request's own tokens, so no other sequence can name
        # it: fresh names (negative, apart from the interned ones) say as much without hashing its pieces
        own, self.fresh = self.fresh, self.fresh - (blocks - len(opening))
        return opening + list(range(own, self.fresh, -1))

    def tokens(self, tokens: list, block_size: int) -> list[int]:
        """Names of the full blocks of a list of token ids: block j is named by (name of block j − 1,
        its tokens), the rule vLLM's hashed blocks follow (v0.33.0, vllm/v1/core/kv_cache_utils.py,
        hash_block_tokens), in the same table as the pieces' names (the radix-tree calculator)."""
        out, parent = [], -1
        for j in range(len(tokens) // block_size):
            block = ("tokens", tuple(tokens[j * block_size : (j + 1) * block_size]))
            parent = self.names.setdefault((parent, block), len(self.names))
            out.append(parent)
        return out

    def _chain(self, pieces: list, block_size: int, blocks: int) -> list[int]:
        out, parent, at, span = [], -1, 0, []
        for stream, start, length in pieces:
            if stream is None:
                return out
            while length and len(out) < blocks:
                take = min(length, block_size - at)
                if span and span[-1][0] == stream and span[-1][1] + span[-1][2] == start:  # one run of a stream
                    span[-1] = (stream, span[-1][1], span[-1][2] + take)
                else:
                    span.append((stream, start, take))
                start, length, at = start + take, length - take, at + take
                if at == block_size:
                    parent = self.names.setdefault((parent, tuple(span)), len(self.names))
                    out.append(parent)
                    span, at = [], 0
        return out


class PrefixCache:
    """Which named blocks are cached, on the GPU (held or evictable) and on the host."""

    __slots__ = ("refs", "evictable", "host", "host_blocks")

    def __init__(self, host_blocks: int = 0):
        self.refs: dict[int, int] = {}  # GPU-resident names → holders (0: evictable)
        self.evictable: OrderedDict = OrderedDict()  # names with no holder, least recently released first
        self.host: OrderedDict = OrderedDict()  # names on the host tier, least recently used first
        self.host_blocks = host_blocks

    def match(self, names: list[int]) -> tuple[int, int]:
        """(GPU hits, host hits): the longest run of leading names cached, GPU first, then host."""
        gpu = 0
        while gpu < len(names) and names[gpu] in self.refs:
            gpu += 1
        host = gpu
        while host < len(names) and names[host] in self.host:
            host += 1
        return gpu, host - gpu

    def acquire(self, names: list[int]) -> int:
        """Hold these GPU-resident names; returns how many were evictable (now taken from the free pool)."""
        taken = 0
        for name in names:
            if self.refs[name] == 0:
                del self.evictable[name]
                taken += 1
            self.refs[name] += 1
        return taken

    def add(self, name: int) -> bool:
        """A block just computed (or copied back from the host) becomes cached and held once; False if
        the name is already on the GPU (computed twice at once: the copy stays the request's own)."""
        if name in self.refs:
            return False
        self.host.pop(name, None)
        self.refs[name] = 1
        return True

    def add_new(self, names: list[int]) -> bool:
        """add() for each of these names at once, when none is on the GPU or the host (a sequence's fresh blocks,
        the common case); False, adding none, otherwise."""
        if self.host or not self.refs.keys().isdisjoint(names):
            return False
        self.refs.update(dict.fromkeys(names, 1))
        return True

    def release(self, names: list[int]) -> int:
        """Drop one hold on each name; returns how many became evictable (back in the free pool)."""
        refs = self.refs
        if list(map(refs.__getitem__, names)).count(1) == len(names):  # held by this sequence alone: all at once
            refs.update(dict.fromkeys(names, 0))
            self.evictable.update(dict.fromkeys(reversed(names)))
            return len(names)
        freed = 0
        for name in reversed(names):  # the chain's tail first, so it is evicted first (vLLM's order)
            self.refs[name] -= 1
            if self.refs[name] == 0:
                self.evictable[name] = None
                freed += 1
        return freed

    def evict(self, count: int) -> None:
        """Evict `count` evictable blocks, least recently released first, to the host tier if any."""
        evictable, refs = self.evictable, self.refs
        if not self.host_blocks:
            for _ in range(count):
                del refs[evictable.popitem(last=False)[0]]
            return
        for _ in range(count):
            name, _ = evictable.popitem(last=False)
            del refs[name]
            self.host[name] = None
            self.host.move_to_end(name)
            if len(self.host) > self.host_blocks:
                self.host.popitem(last=False)

"""A prefix tree that grows as prompts arrive: block-aligned, as the engines cache them.

The reader's prompts are split on whitespace, one word standing for one token (an honest stand-in:
a real tokenizer splits differently, but the tree's shape depends only on where prompts stop
agreeing). Each full block of B tokens is named by (the name of the block before it, its tokens),
engine.prefix.BlockNames.tokens, the rule vLLM's hashed blocks follow; a trailing partial block is
never cached. Prompts arrive in order and nothing is evicted: prompt i's hit is the longest run of
leading blocks an earlier prompt computed, capped one token short of the whole prompt (the last
token is computed to produce the first output token, as the engine simulator and vLLM do).

The tree: one node per distinct block (vLLM's view: a hash table whose keys chain to their parents),
and the radix tree SGLang keeps (RadixAttention): chains of blocks that every prompt through them
shares, merged into one node whose edge is their tokens.
"""

from __future__ import annotations

from ..engine.prefix import BlockNames
from ..errors import InputError
from ..schema import integer, output, series, step, text

MAX_CHARS, MAX_PROMPTS = 2000, 40
SEPARATOR = "|"
DEFAULT = (
    "You are a helpful assistant for Acme . Summarise this report | "
    "You are a helpful assistant for Acme . Summarise this email | "
    "You are a helpful assistant for Acme . Translate this report | "
    "Write a haiku about the sea"
)

SCHEMA = {
    "name": "radix_tree",
    "title": "A prefix tree over your prompts",
    "description": (
        "Type prompts separated by | and watch the block-aligned prefix tree they build: one word stands for "
        "one token (whitespace split), blocks hold B tokens, a partial last block is not cached, and prompts "
        "arrive in the order typed with nothing evicted. A prompt's hit is the run of leading blocks an "
        "earlier prompt computed, one token short of the whole prompt at most."
    ),
    "inputs": [
        text(
            "prompts", "Prompts, separated by |", DEFAULT, MAX_CHARS, f"Up to {MAX_PROMPTS} prompts; words are tokens."
        ),
        integer(
            "block_size_tokens",
            "Block size B",
            2,
            1,
            64,
            "tokens",
            "vLLM's default is 16 tokens (SGLang's radix cache: 1); small blocks suit word-sized examples.",
        ),
    ],
    "outputs": [
        output("prompts", "Prompts", "prompts", "integer"),
        output("prompt_tokens", "Tokens in all prompts", "tokens", "integer"),
        output("block_nodes", "Distinct blocks cached (hash-table entries)", "blocks", "integer"),
        output("radix_nodes", "Radix-tree nodes (shared runs merged)", "nodes", "integer"),
        output("shared_blocks", "Blocks that two or more prompts use", "blocks", "integer"),
        output("hit_tokens", "Tokens found cached on arrival", "tokens", "integer"),
        output("hit_rate", "Hit rate (hit tokens ÷ prompt tokens)", "", "percent"),
        output("blocks_saved", "Blocks of KV memory saved by sharing", "blocks", "integer"),
    ],
}


def _prompts(v: dict) -> list[list[str]]:
    prompts = [p.split() for p in v["prompts"].split(SEPARATOR)]
    prompts = [p for p in prompts if p]
    if not prompts:
        raise InputError("prompts", "type at least one prompt (words separated by spaces, prompts by |)")
    if len(prompts) > MAX_PROMPTS:
        raise InputError("prompts", f"at most {MAX_PROMPTS} prompts")
    return prompts


class Tree:
    """Blocks by name: their tokens, parent, and which prompts use them, in order of first use."""

    def __init__(self, prompts: list[list[str]], block: int):
        names = BlockNames()
        self.chains = [names.tokens(p, block) for p in prompts]
        self.tokens, self.parent, self.users = {}, {}, {}
        for i, (p, chain) in enumerate(zip(prompts, self.chains)):
            for j, name in enumerate(chain):
                self.tokens.setdefault(name, p[j * block : (j + 1) * block])
                self.parent.setdefault(name, chain[j - 1] if j else None)
                self.users.setdefault(name, []).append(i)
        self.hits = []
        seen: set = set()
        for p, chain in zip(prompts, self.chains):
            cap, hit = (len(p) - 1) // block, 0
            while hit < min(cap, len(chain)) and chain[hit] in seen:
                hit += 1
            self.hits.append(hit * block)
            seen.update(chain)

    def children(self) -> dict:
        out: dict = {}
        for name, parent in self.parent.items():
            out.setdefault(parent, []).append(name)
        return out

    def radix(self) -> list[tuple[int, list[int]]]:
        """Radix nodes as (parent radix node index or -1, [block names]): a block joins its parent's node
        when it is the parent's only child and used by the same prompts."""
        kids, nodes = self.children(), []

        def walk(name, parent_node):
            run = [name]
            while len(kids.get(run[-1], ())) == 1 and self.users[kids[run[-1]][0]] == self.users[run[-1]]:
                run.append(kids[run[-1]][0])
            nodes.append((parent_node, run))
            here = len(nodes) - 1
            for child in kids.get(run[-1], ()):
                walk(child, here)

        for root in kids.get(None, ()):
            walk(root, -1)
        return nodes


def _who(users: list[int]) -> str:
    return "prompt " + str(users[0] + 1) if len(users) == 1 else "prompts " + ", ".join(str(u + 1) for u in users)


def _lines(tree: Tree, nodes: list) -> list[str]:
    lines = []
    for k, (parent, run) in enumerate(nodes):
        words = " ".join(w for name in run for w in tree.tokens[name])
        under = "root" if parent < 0 else f"node {parent + 1}"
        count = f"{len(run)} block" + ("s" if len(run) > 1 else "")
        lines.append(f"node {k + 1} (under {under}): “{words}”, {count}, {_who(tree.users[run[0]])}")
    return lines


def _notes(tree: Tree, nodes: list, prompts: list, block: int) -> list[str]:
    lines = _lines(tree, nodes) or ["no prompt fills one block: nothing is cached"]
    return lines + [
        f"prompt {i + 1}: {hit} of {len(p)} tokens found cached; {len(p) % block} in a partial last block (not cached)"
        for i, (p, hit) in enumerate(zip(prompts, tree.hits))
    ]


def _derivation(tree: Tree, prompts: list, block: int) -> list[dict]:
    used, distinct, total, hits = sum(map(len, tree.chains)), len(tree.tokens), sum(map(len, prompts)), sum(tree.hits)
    return [
        step("Full blocks the prompts fill", "Σ ⌊tokens ÷ B⌋", "Σ ⌊tokens ÷ {}⌋ over {} prompts",
             [(block, "tokens"), len(prompts)], used, "blocks"),
        step("Distinct blocks", "blocks named by (parent, tokens), counted once", "{} − {} shared copies",
             [(used, "blocks"), (used - distinct, "blocks")], distinct, "blocks"),
        step("Hit rate", "Σ cached leading blocks × B ÷ Σ tokens", "{} ÷ {}", [(hits, "tokens"), (total, "tokens")],
             hits / total, "share"),
    ]


def compute(v: dict) -> dict:
    prompts, block = _prompts(v), v["block_size_tokens"]
    tree = Tree(prompts, block)
    nodes = tree.radix()
    total, hits = sum(map(len, prompts)), sum(tree.hits)
    lengths = [len(p) for p in prompts]
    return {
        "prompts": len(prompts),
        "prompt_tokens": total,
        "block_nodes": len(tree.tokens),
        "radix_nodes": len(nodes),
        "shared_blocks": sum(1 for u in tree.users.values() if len(u) > 1),
        "hit_tokens": hits,
        "hit_rate": hits / total,
        "blocks_saved": sum(map(len, tree.chains)) - len(tree.tokens),
        "notes": _notes(tree, nodes, prompts, block),
        "derivation": _derivation(tree, prompts, block),
        "series": {"hits_by_prompt": series(
            "Tokens found cached, by prompt", "Prompt", "", list(range(1, len(prompts) + 1)),
            [("hit tokens", "tokens", tree.hits), ("prompt tokens", "tokens", lengths)], kind="bar")},
    }

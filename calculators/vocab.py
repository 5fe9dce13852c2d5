"""A real tokenizer vocabulary as a character trie, and the per-state token masks of a DFA over it.

The vocabulary is GPT-2's byte-level BPE `encoder.json` (50,257 tokens; OpenAI's GPT-2 release, MIT
licence), shipped as the site's static file `docs/assets/vocab/gpt2/encoder.json` (its README.txt says
where it comes from). It is read only when a calculator asks for it: under CPython from the docs folder; in
the browser's worker by a synchronous request to the site itself (same origin, beside the worker's script)
the first time the calculator runs, never with a page. Where neither is possible (Node, making the start-up
snapshot) it raises `AssetNeeded`, which warm_up() skips.

A token is allowed in DFA state s when running its characters from s never reaches the dead state (it is a
prefix of some string the DFA accepts from s): the precomputed per-state mask of Outlines (Willard & Louf,
arXiv 2307.09702 §3, Algorithm 3) and XGrammar's context-independent tokens (arXiv 2411.15100 §3.1). The
mask of a state is found by one walk of the vocabulary's trie from s, cutting a branch at the first dead
transition, and taking a whole subtree at once when every character in it keeps s where it is (s loops on
them): exact, and what keeps a `\\d+` or `.*` state from visiting all of the trie.

GPT-2's tokens are byte strings. The ones whose bytes are not valid UTF-8 on their own (pieces of a
multi-byte character) have no characters to run: they are left out of the trie and counted
(`partial_tokens`); a byte-level DFA, as Outlines and XGrammar build, would allow some of them.
The end-of-text token is allowed exactly in accepting states.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections import deque
from dataclasses import dataclass
from .catalog import site_asset_text
from .errors import InputError

GPT2_ASSET = "vocab/gpt2/encoder.json"
EOS = "<|endoftext|>"


class AssetNeeded(InputError):
    """A static file of the site that this Python cannot reach (no docs folder, no site to fetch from)."""

    def __init__(self, asset: str):
        super().__init__("asset", f"needs the site's file assets/{asset}, which this Python cannot reach")
        self.asset = asset

    def to_json(self) -> dict:
        return super().to_json() | {"asset": self.asset}


def asset_text(asset: str) -> str:
    """A static file of the site, as text: from the docs folder under CPython; in the browser's worker,
    fetched from the site itself (next to assets/calculators/worker.js) the first time it is needed."""
    text = site_asset_text(asset)
    if text is not None:
        return text
    if sys.platform == "emscripten":
        return _fetch_from_site(asset)
    raise AssetNeeded(asset)


def _fetch_from_site(asset: str) -> str:
    js = sys.modules.get("js") or importlib.import_module("js")  # Pyodide's bridge to the worker's globals
    if not hasattr(js, "XMLHttpRequest"):  # Node, making the start-up snapshot: no site to fetch from
        raise AssetNeeded(asset)
    url = js.URL.new(f"../{asset}", js.location.href).href
    request = js.XMLHttpRequest.new()
    request.open("GET", url, False)  # synchronous: allowed in a worker, and Python waits for it anyway
    request.overrideMimeType("application/json; charset=utf-8")
    request.send(None)
    if request.status != 200:
        raise InputError("asset", f"could not load the site's file assets/{asset} (HTTP {request.status})")
    return request.responseText


def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-ins for the 256 byte values (its encoder.py `bytes_to_unicode`), reversed."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars, extra = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(keep, chars, strict=True)}


@dataclass
class Trie:
    """Node 0 is the root. children[n]: char → node; token[n]: token id ending at n or -1; below[n]: tokens
    strictly under n; chars[n]: bitmask of the characters on edges under n (bit = alphabet index)."""

    children: list[dict]
    token: list[int]
    below: list[int]
    chars: list[int]
    alphabet: dict[str, int]
    strings: list[str | None]  # token id → its text (None: partial UTF-8)
    eos_id: int | None
    partial_tokens: int

    @property
    def size(self) -> int:
        return sum(s is not None for s in self.strings)


def build_trie(strings: list[str | None], eos_id: int | None = None) -> Trie:
    children, token = [{}], [-1]
    seen = set()
    for tid, s in enumerate(strings):
        if s is None or tid == eos_id or not s:
            continue
        seen.update(s)
        node = 0
        for ch in s:
            nxt = children[node].get(ch)
            if nxt is None:
                nxt = len(children)
                children[node][ch] = nxt
                children.append({})
                token.append(-1)
            node = nxt
        token[node] = tid
    alphabet = {ch: i for i, ch in enumerate(sorted(seen))}
    bit = {ch: 1 << i for ch, i in alphabet.items()}
    n = len(children)
    below, chars = [0] * n, [0] * n
    for node in range(n - 1, -1, -1):  # children have larger indices than their parent
        b, m = 0, 0
        for ch, c in children[node].items():
            b += below[c] + (token[c] >= 0)
            m |= chars[c] | bit[ch]
        below[node], chars[node] = b, m
    partial = sum(s is None for s in strings)
    return Trie(children, token, below, chars, alphabet, list(strings), eos_id, partial)


_CACHE: dict[str, Trie] = {}


def gpt2_trie() -> Trie:
    """The shipped GPT-2 vocabulary's trie, built once per process (per browser worker)."""
    if GPT2_ASSET not in _CACHE:
        encoder = json.loads(asset_text(GPT2_ASSET))
        as_latin1 = str.maketrans({c: chr(b) for c, b in _byte_decoder().items()})
        strings: list[str | None] = [None] * len(encoder)
        for text, tid in encoder.items():
            if text == EOS:
                strings[tid] = EOS
                continue
            try:
                strings[tid] = text.translate(as_latin1).encode("latin-1").decode("utf-8")
            except UnicodeDecodeError:
                strings[tid] = None
        _CACHE[GPT2_ASSET] = build_trie(strings, encoder.get(EOS))
    return _CACHE[GPT2_ASSET]


def _class_masks(trie: Trie, dfa) -> list[int]:
    masks = [0] * dfa.num_classes
    for ch, bit in trie.alphabet.items():
        masks[dfa.char_class(ch)] |= 1 << bit
    return masks


DIRECT_MAX = 48


class BudgetExceeded(Exception):
    pass


class Masker:
    """Per-state token masks of one DFA over one trie."""

    def __init__(self, trie: Trie, dfa):
        self.trie, self.dfa = trie, dfa
        self.cls = {ch: dfa.char_class(ch) for ch in trie.alphabet}
        class_masks = _class_masks(trie, dfa)
        self.loop = [0] * dfa.num_states
        for s, row in enumerate(dfa.delta):
            for c, t in row.items():
                if t == s:
                    self.loop[s] |= class_masks[c]
        self.visits = 0
        # per state, the (character, next state) pairs it allows when they are few: a node's children are
        # then looked up by those characters instead of scanned (a literal's state allows one)
        by_class: dict[int, list[str]] = {}
        for ch, c in self.cls.items():
            by_class.setdefault(c, []).append(ch)
        self.direct = []
        for row in dfa.delta:
            pairs = [(ch, t) for c, t in row.items() for ch in by_class.get(c, ())]
            self.direct.append(pairs if len(pairs) <= DIRECT_MAX else None)

    def count(self, state: int, budget: int | None = None) -> int:
        """Allowed tokens in `state` (end-of-text included where the state accepts). `budget`: the most edge
        checks this walk may make (raises BudgetExceeded past it); `self.visits` adds up the checks made."""
        t, cls, delta, loop, direct = self.trie, self.cls, self.dfa.delta, self.loop, self.direct
        children, token, below, chars = t.children, t.token, t.below, t.chars
        total = 1 if (t.eos_id is not None and state in self.dfa.accepting) else 0
        stack = [(state, 0)]
        expanded = 0
        while stack:
            s, node = stack.pop()
            kids = children[node]
            expanded += len(kids) if direct[s] is None else len(direct[s])
            if budget is not None and expanded > budget:
                raise BudgetExceeded(expanded)
            if direct[s] is not None:
                pairs = [(kids[ch], nxt) for ch, nxt in direct[s] if ch in kids]
            else:
                row = delta[s]
                pairs = [(child, row[cls[ch]]) for ch, child in kids.items() if cls[ch] in row]
            for child, nxt in pairs:
                if token[child] >= 0:
                    total += 1
                if not below[child]:
                    continue
                if not (chars[child] & ~loop[nxt]):
                    total += below[child]  # every character under it keeps the DFA in nxt
                else:
                    stack.append((nxt, child))
        self.visits += expanded
        return total

    def moves(self, s: int, node: int) -> list[tuple[int, int]]:
        """(child node, next state) for each edge out of `node` that state `s` survives."""
        kids = self.trie.children[node]
        if self.direct[s] is not None:
            return [(kids[ch], nxt) for ch, nxt in self.direct[s] if ch in kids]
        row, cls = self.dfa.delta[s], self.cls
        return [(child, row[cls[ch]]) for ch, child in kids.items() if cls[ch] in row]

    def allowed(self, state: int, limit: int | None = None) -> list[int]:
        """Allowed token ids, end-of-text first, then shortest first and by id; at most `limit` of them."""
        t = self.trie
        out = [t.eos_id] if (t.eos_id is not None and state in self.dfa.accepting) else []
        queue = deque([(state, 0)])
        while queue and (limit is None or len(out) < limit):
            s, node = queue.popleft()
            for child, nxt in self.moves(s, node):
                if t.token[child] >= 0:
                    out.append(t.token[child])
                if t.below[child]:
                    queue.append((nxt, child))
        eos = out[:1] if out and out[0] == t.eos_id else []
        rest = sorted(out[len(eos) :], key=lambda i: (len(t.strings[i]), i))  # shortest first, then by id
        out = eos + rest
        return out if limit is None else out[:limit]


def brute_force_allowed(strings: list[str | None], dfa, state: int, eos_id: int | None = None) -> set[int]:
    """The definition, token by token (for tests): ids whose text never reaches the dead state from `state`."""
    out = set()
    for tid, s in enumerate(strings):
        if tid == eos_id:
            if state in dfa.accepting:
                out.add(tid)
        elif s and dfa.run(s, state) is not None:
            out.add(tid)
    return out


def check_prefix(dfa, prefix: str) -> int:
    state = dfa.run(prefix)
    if state is None:
        raise InputError("prefix", "this prefix has already left the pattern (the DFA is in its dead state)")
    return state


def json_escape_tokens(trie: Trie, ids: list[int]) -> str:
    return ", ".join(json.dumps(trie.strings[i], ensure_ascii=False) for i in ids)

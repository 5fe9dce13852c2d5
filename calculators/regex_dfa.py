"""A regular expression compiled the way structured-output engines compile one: pattern → Thompson NFA →
DFA by subset construction → minimised DFA (Moore's partition refinement), with the dead state left
implicit (a missing transition is the dead state).

The subset supported (anything else is refused with an InputError that lists this):
  literals; escapes \\d \\w \\s \\D \\W \\S and an escaped metacharacter (\\. \\* \\\\ …); `.` (any
  character but a newline); classes [a-z0-9_] and [^…]; alternation |; groups ( ) and (?: ); the
  quantifiers * + ? {m} {m,} {m,n}.
The matching is whole-string (as `re.fullmatch`) with ASCII meanings of \\d \\w \\s (as `re.ASCII`):
\\d = [0-9], \\w = [A-Za-z0-9_], \\s = [ \\t\\n\\r\\f\\v]. Anchors, backreferences, lookaround, lazy
quantifiers and flags are not regular-language constructs an FSM-based engine accepts in this form.

The alphabet is split into character classes: maximal runs of code points that every set in the pattern
treats alike (the interval boundaries of all its sets); the DFA's transitions are per class, so its
tables stay small whatever the vocabulary's alphabet (Outlines' "interegular" FSMs and XGrammar do the
same with byte or character ranges).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from .errors import InputError

MAX_CODEPOINT = 0x10FFFF
MAX_REPEAT = 50  # {m,n} bounds
MAX_NFA_STATES = 4000
MAX_DFA_STATES = 400
MAX_WORK = 2_000_000  # steps of the class split and the subset construction: a recompute stays interactive
SUPPORTED = (
    "supported: literals, \\d \\w \\s \\D \\W \\S, escaped metacharacters, . , classes like [a-z0-9] and [^…], "
    "| , groups ( ) and (?: ), and * + ? {m} {m,} {m,n} (m, n ≤ 50)"
)
_DIGIT = [(48, 57)]
_WORD = [(48, 57), (65, 90), (95, 95), (97, 122)]
_SPACE = [(9, 13), (32, 32)]
_META = set("\\.[]()|*+?{}^$-/")


def _merge(ranges):
    out = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _negate(ranges):
    out, at = [], 0
    for lo, hi in _merge(ranges):
        if lo > at:
            out.append((at, lo - 1))
        at = hi + 1
    if at <= MAX_CODEPOINT:
        out.append((at, MAX_CODEPOINT))
    return out


_NAMED = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
_NAMED |= {k.upper(): _negate(v) for k, v in list(_NAMED.items())}
_ESCAPED = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11}


# ---- parser: pattern → syntax tree -------------------------------------------------------------
# Nodes: ("set", ranges) | ("cat", [nodes]) | ("alt", [nodes]) | ("rep", node, min, max|None) | ("empty",)


class _Parser:
    def __init__(self, pattern: str):
        self.p, self.i = pattern, 0

    def fail(self, what: str):
        raise InputError("regex", f"{what} at position {self.i}; {SUPPORTED}")

    def peek(self):
        return self.p[self.i] if self.i < len(self.p) else None

    def parse(self):
        node = self.alt()
        if self.i < len(self.p):
            self.fail(f"unexpected {self.p[self.i]!r}")
        return node

    def alt(self):
        branches = [self.cat()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.cat())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def cat(self):
        items = []
        while self.peek() not in (None, "|", ")"):
            items.append(self.repeat(self.atom()))
        return ("empty",) if not items else items[0] if len(items) == 1 else ("cat", items)

    def atom(self):
        c = self.peek()
        if c == "(":
            self.i += 1
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.peek() == "?":
                self.fail("group extensions (?…) other than (?:…) are not supported")
            node = self.alt()
            if self.peek() != ")":
                self.fail("missing )")
            self.i += 1
            return node
        if c == "[":
            return ("set", self.klass())
        if c == ".":
            self.i += 1
            return ("set", _negate([(10, 10)]))
        if c == "\\":
            return ("set", self.escape(in_class=False))
        if c in "^$":
            self.fail(f"anchor {c!r} is not supported (the whole string must match, as re.fullmatch)")
        if c in "*+?{":
            self.fail(f"nothing to repeat before {c!r}")
        if c in "]}":
            self.fail(f"unbalanced {c!r}")
        self.i += 1
        return ("set", [(ord(c), ord(c))])

    def escape(self, in_class: bool):
        self.i += 1
        c = self.peek()
        if c is None:
            self.fail("pattern ends with a backslash")
        self.i += 1
        if c in _NAMED:
            return _NAMED[c]
        if c in _ESCAPED:
            return [(_ESCAPED[c], _ESCAPED[c])]
        if c in _META or (in_class and c == "]"):
            return [(ord(c), ord(c))]
        self.i -= 1
        self.fail(f"escape \\{c} is not supported")

    def klass(self):
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        ranges, first = [], True
        while True:
            c = self.peek()
            if c is None:
                self.fail("missing ]")
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "\\":
                got = self.escape(in_class=True)
                if len(got) != 1 or got[0][0] != got[0][1]:
                    ranges += got
                    continue
                lo = got[0][0]
            elif c == "[":
                self.fail("nested [ in a class is not supported")
            else:
                lo = ord(c)
                self.i += 1
            ranges.append((lo, self.range_end(lo)))
        ranges = _merge(ranges)
        return _negate(ranges) if negated else ranges

    def range_end(self, lo: int) -> int:
        """The end of a class range a-z after its start, or the start itself when no range follows."""
        if not (self.peek() == "-" and self.i + 1 < len(self.p) and self.p[self.i + 1] != "]"):
            return lo
        self.i += 1
        if self.peek() == "\\":
            got = self.escape(in_class=True)
            if len(got) != 1 or got[0][0] != got[0][1]:
                self.fail("a class range must end in one character")
            hi = got[0][0]
        else:
            hi = ord(self.peek())
            self.i += 1
        if hi < lo:
            self.fail("class range out of order")
        return hi

    def repeat(self, node):
        while True:
            c = self.peek()
            if c == "*":
                lo, hi = 0, None
            elif c == "+":
                lo, hi = 1, None
            elif c == "?":
                lo, hi = 0, 1
            elif c == "{":
                lo, hi = self.braces()
                node = ("rep", node, lo, hi)
                self._no_lazy()
                continue
            else:
                return node
            self.i += 1
            node = ("rep", node, lo, hi)
            self._no_lazy()

    def _no_lazy(self):
        if self.peek() in ("?", "+") and self.p[self.i - 1] in "*+?}":
            self.fail("lazy or possessive quantifiers (*? +? ?? {…}? *+) are not supported")

    def braces(self):
        end = self.p.find("}", self.i)
        body = self.p[self.i + 1 : end] if end > 0 else ""
        parts = body.split(",")
        ok = (
            end > 0
            and len(parts) in (1, 2)
            and parts[0].isdigit()
            and (len(parts) == 1 or not parts[1] or parts[1].isdigit())
        )
        if not ok:
            self.fail("a repeat must read {m}, {m,} or {m,n}")
        lo = int(parts[0])
        hi = lo if len(parts) == 1 else (int(parts[1]) if parts[1] else None)
        if lo > MAX_REPEAT or (hi is not None and (hi > MAX_REPEAT or hi < lo)):
            self.fail(f"repeat bounds must satisfy m ≤ n ≤ {MAX_REPEAT}")
        self.i = end + 1
        return lo, hi


def parse(pattern: str):
    """The syntax tree of `pattern` (raises InputError naming what is supported)."""
    return _Parser(pattern).parse()


# ---- Thompson NFA --------------------------------------------------------------------------------


class _NFA:
    def __init__(self):
        self.eps: list[list[int]] = []
        self.moves: list[list[tuple[list, int]]] = []  # (ranges, target)

    def state(self) -> int:
        if len(self.eps) >= MAX_NFA_STATES:
            raise InputError(
                "regex", f"the pattern expands to more than {MAX_NFA_STATES} NFA states; use smaller repeats"
            )
        self.eps.append([])
        self.moves.append([])
        return len(self.eps) - 1

    def build(self, node) -> tuple[int, int]:
        """A fragment (start, accept) for the node, Thompson's construction."""
        kind = node[0]
        if kind == "empty":
            s = self.state()
            return s, s
        if kind == "set":
            s, t = self.state(), self.state()
            self.moves[s].append((node[1], t))
            return s, t
        if kind == "cat":
            start, end = self.build(node[1][0])
            for child in node[1][1:]:
                s, t = self.build(child)
                self.eps[end].append(s)
                end = t
            return start, end
        if kind == "alt":
            s, t = self.state(), self.state()
            for child in node[1]:
                a, b = self.build(child)
                self.eps[s].append(a)
                self.eps[b].append(t)
            return s, t
        return self.repeat(*node[1:])

    def repeat(self, child, lo: int, hi: int | None) -> tuple[int, int]:
        """{lo,hi} as lo mandatory copies, then a starred copy (hi = None) or hi − lo optional ones."""
        s = self.state()
        end = s
        for _ in range(lo):  # the mandatory copies
            a, b = self.build(child)
            self.eps[end].append(a)
            end = b
        if hi is None:  # a starred copy
            a, b = self.build(child)
            t = self.state()
            self.eps[end] += [a, t]
            self.eps[b] += [a, t]
            return s, t
        t = self.state()
        self.eps[end].append(t)
        for _ in range(hi - lo):  # optional copies, each may skip to the end
            a, b = self.build(child)
            self.eps[end].append(a)
            self.eps[b].append(t)
            end = b
        return s, t


# ---- DFA ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DFA:
    """A minimised DFA over character classes. State 0 is the start; a missing transition is the dead
    state. `bounds[i]` is the first code point of interval i and `interval_class[i]` its class."""

    pattern: str
    bounds: tuple[int, ...]
    interval_class: tuple[int, ...]
    num_classes: int
    delta: tuple[dict, ...]  # per state: class → next state (live states only)
    accepting: frozenset
    nfa_states: int
    subset_states: int  # DFA states before minimisation (dead state not counted)

    @property
    def num_states(self) -> int:
        return len(self.delta)

    def char_class(self, ch: str) -> int:
        return self.interval_class[bisect_right(self.bounds, ord(ch)) - 1]

    def step(self, state: int | None, ch: str) -> int | None:
        """The next state, or None for the dead state."""
        return None if state is None else self.delta[state].get(self.char_class(ch))

    def run(self, text: str, state: int | None = 0) -> int | None:
        for ch in text:
            state = self.step(state, ch)
            if state is None:
                return None
        return state

    def fullmatch(self, text: str) -> bool:
        return self.run(text) in self.accepting

    def forced_char(self, state: int) -> str | None:
        """The one character the DFA allows in `state`, if it allows exactly one and cannot stop there."""
        row = self.delta[state]
        if state in self.accepting or len(row) != 1:
            return None
        (c,) = row
        spans = [k for k, cls in enumerate(self.interval_class) if cls == c]
        if len(spans) != 1:
            return None
        k = spans[0]
        hi = self.bounds[k + 1] if k + 1 < len(self.bounds) else MAX_CODEPOINT + 1
        return chr(self.bounds[k]) if hi - self.bounds[k] == 1 else None

    def jump_forward(self, state: int) -> tuple[str, int]:
        """The characters forced from `state` on (a compressed FSM's jump-forward string) and the state after."""
        out, seen = [], {state}
        while (ch := self.forced_char(state)) is not None:
            out.append(ch)
            state = self.delta[state][self.char_class(ch)]
            if state in seen:
                break
            seen.add(state)
        return "".join(out), state


def _classes(nfa: _NFA):
    cuts = {0}
    for moves in nfa.moves:
        for ranges, _ in moves:
            for lo, hi in ranges:
                cuts.add(lo)
                if hi < MAX_CODEPOINT:
                    cuts.add(hi + 1)
    bounds = sorted(cuts)
    # every interval's signature: which moves it enables (intervals alike form one class)
    move_ids = [(s, j) for s, moves in enumerate(nfa.moves) for j in range(len(moves))]
    sig_of = [set() for _ in bounds]
    work = 0
    for mid, (s, j) in enumerate(move_ids):
        for lo, hi in nfa.moves[s][j][0]:
            a = bisect_right(bounds, lo) - 1
            b = bisect_right(bounds, hi) - 1
            work += b - a + 1
            if work > MAX_WORK:
                raise InputError("regex", "the pattern is too complex to compile in the page; simplify it")
            for k in range(a, b + 1):
                sig_of[k].add(mid)
    classes: dict[frozenset, int] = {}
    interval_class = [classes.setdefault(frozenset(sig), len(classes)) for sig in sig_of]
    # per class, per NFA state: targets
    rep = {}
    for k, c in enumerate(interval_class):
        rep.setdefault(c, bounds[k])
    return bounds, interval_class, len(classes), rep


def _closure(nfa: _NFA, states) -> frozenset:
    seen, stack = set(states), list(states)
    while stack:
        for t in nfa.eps[stack.pop()]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return frozenset(seen)


def _subsets(nfa: _NFA, start: int, num_classes: int, rep: dict) -> tuple[list[dict], list[frozenset]]:
    """The subset construction: DFA rows (class → state) and the NFA states each DFA state stands for."""
    first = _closure(nfa, [start])
    index, subsets, raw = {first: 0}, [first], []
    work = 0
    while len(raw) < len(subsets):
        cur, row = subsets[len(raw)], {}
        work += len(cur) * num_classes
        if work > MAX_WORK:
            raise InputError("regex", "the pattern is too complex to compile in the page; simplify it")
        for c in range(num_classes):
            cp = rep[c]
            targets = [t for s in cur for ranges, t in nfa.moves[s] if any(lo <= cp <= hi for lo, hi in ranges)]
            if not targets:
                continue
            nxt = _closure(nfa, targets)
            if nxt not in index:
                if len(subsets) >= MAX_DFA_STATES:
                    raise InputError("regex", f"the DFA would have more than {MAX_DFA_STATES} states; simplify it")
                index[nxt] = len(subsets)
                subsets.append(nxt)
            row[c] = index[nxt]
        raw.append(row)
    return raw, subsets


def compile_regex(pattern: str) -> DFA:
    """Pattern → NFA → DFA → minimised DFA (raises InputError for unsupported syntax or a blow-up)."""
    if len(pattern) > 300:
        raise InputError("regex", "at most 300 characters")
    nfa = _NFA()
    start, accept = nfa.build(parse(pattern))
    bounds, interval_class, num_classes, rep = _classes(nfa)
    raw, subsets = _subsets(nfa, start, num_classes, rep)
    acc = {i for i, s in enumerate(subsets) if accept in s}
    delta, accepting = _minimise(raw, acc, num_classes)
    return DFA(pattern, tuple(bounds), tuple(interval_class), num_classes, delta, accepting, len(nfa.eps), len(raw))


def _live(raw: list[dict], acc: set) -> set:
    """States from which an accepting state can be reached (the others are dead)."""
    back = [[] for _ in raw]
    for s, row in enumerate(raw):
        for t in row.values():
            back[t].append(s)
    live, stack = set(acc), list(acc)
    while stack:
        for s in back[stack.pop()]:
            if s not in live:
                live.add(s)
                stack.append(s)
    return live


def _blocks(rows: list, live: set, acc: set, num_classes: int) -> dict:
    """Moore's refinement: split blocks by (block, each class's target block) until nothing splits."""
    block = {s: (s in acc) for s in live}
    per_round, work = sum(len(rows[s]) + 1 for s in live), 0
    while True:
        work += per_round
        if work > MAX_WORK:
            raise InputError("regex", "the pattern is too complex to compile in the page; simplify it")
        # a row's transitions as (class, target block) pairs: a missing class is the dead state
        sig = {s: (block[s], tuple(sorted((c, block[t]) for c, t in rows[s].items()))) for s in live}
        names: dict = {}
        new = {s: names.setdefault(sig[s], len(names)) for s in sorted(live)}
        if len(names) == len(set(block.values())):
            return new
        block = new


def _minimise(raw: list[dict], acc: set, num_classes: int):
    """Moore's partition refinement after dropping states that cannot reach acceptance (they are dead)."""
    live = _live(raw, acc)
    if 0 not in live:  # the empty language: the start is dead; keep one state with no moves
        return (({},), frozenset())
    rows = [{c: t for c, t in raw[s].items() if t in live} if s in live else None for s in range(len(raw))]
    block = _blocks(rows, live, acc, num_classes)
    rep = {}
    for s in sorted(live):
        rep.setdefault(block[s], s)
    # renumber with the start first, in breadth-first order
    order, seen, i = [block[0]], {block[0]}, 0
    while i < len(order):
        row = rows[rep[order[i]]]
        for c in sorted(row):
            b = block[row[c]]
            if b not in seen:
                seen.add(b)
                order.append(b)
        i += 1
    number = {b: k for k, b in enumerate(order)}
    delta = tuple({c: number[block[t]] for c, t in rows[rep[b]].items()} for b in order)
    accepting = frozenset(number[block[s]] for s in acc if s in live)
    return delta, accepting

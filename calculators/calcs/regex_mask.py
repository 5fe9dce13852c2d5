"""Regex → DFA → per-state token masks over a real vocabulary (GPT-2's 50,257-token byte-level BPE).

  the pattern compiles as an FSM-based engine compiles it (calculators/regex_dfa.py): Thompson NFA,
  subset construction, Moore minimisation; a missing transition is the dead state
  allowed(s) = { tokens t : running t's characters from state s never reaches the dead state }
           (Willard & Louf, arXiv 2307.09702 §3: the index over the vocabulary for every FSM state;
           the end-of-text token is allowed exactly in accepting states)
  found by one walk of the vocabulary's character trie per state (calculators/vocab.py), cut at the
  first dead transition; a subtree is taken whole where every character under it keeps the state.

The prefix is text the model has produced so far; the state after it is the one whose mask the next
step applies. The vocabulary is the site's static file assets/vocab/gpt2/encoder.json, read when this
calculator first runs (in the browser: fetched from the site then, never with the page).
Limits: character-level, so GPT-2's tokens that are pieces of a UTF-8 character are left out (counted);
ASCII meanings of \\d \\w \\s; whole-string matching (re.fullmatch).
"""

from __future__ import annotations

import json
from functools import lru_cache

from ..errors import InputError
from ..regex_dfa import compile_regex
from ..schema import integer, output, series, step, text
from ..vocab import BudgetExceeded, Masker, check_prefix, gpt2_trie, json_escape_tokens

DEFAULT_REGEX = r'\{"name": "[A-Z][a-z]+", "age": \d{1,3}\}'
DEFAULT_PREFIX = '{"name": "Ada", "age": '
MAX_LISTED_STATES = 40
SHORT = 18  # characters of a text result (a results cell does not wrap; 200% text must fit a phone)
# Trie edges the per-state masks may check in all: keeps a recompute in the page under its budget (a
# bounded repeat over a broad class, [a-z ]{1,40}, walks the same large subtree from each of its states).
VISIT_BUDGET = 300_000

SCHEMA = {
    "name": "regex_mask",
    "title": "Regex to DFA to token masks over GPT-2's vocabulary",
    "description": (
        "Compiles a regular expression to a minimised DFA in your browser, then finds, for every DFA state, "
        "which of GPT-2's 50,257 tokens may come next (a token is allowed if its characters never reach the "
        "dead state). Type a prefix to see the state the model is in and the tokens its mask allows."
    ),
    "inputs": [
        text(
            "regex",
            "Regular expression (whole output must match)",
            DEFAULT_REGEX,
            300,
            help="Literals, \\d \\w \\s, [a-z0-9] and [^…] classes, ., |, ( ), (?: ), * + ? {m} {m,} {m,n}.",
        ),
        text("prefix", "Output so far (prefix)", DEFAULT_PREFIX, 300, help="Text already generated; may be empty."),
        integer("samples", "Allowed tokens to list in the notes", 16, 1, 64, "tokens"),
    ],
    "outputs": [
        output("state", "DFA state after the prefix", "", "integer"),
        output("accepting", "Could the output stop here (accepting state)?", "", "number"),
        output("allowed_tokens", "Tokens the mask allows in this state", "tokens", "integer"),
        output("allowed_share", "Share of the vocabulary allowed", "", "percent"),
        output("sample", "First allowed tokens (all listed below)", "", "number"),
        output("jump_forward", "Forced text from here (jump-forward string)", "", "number"),
        output("jump_forward_chars", "Characters the engine could append without the model", "characters", "integer"),
        output("forced_states", "DFA states that allow exactly one character", "states", "integer"),
        output("dfa_states", "DFA states (minimised; dead state not counted)", "states", "integer"),
        output("subset_states", "DFA states before minimisation", "states", "integer"),
        output("nfa_states", "Thompson NFA states", "states", "integer"),
        output("char_classes", "Character classes the DFA's transitions use", "classes", "integer"),
        output("vocab_tokens", "Vocabulary size (GPT-2 encoder.json)", "tokens", "integer"),
        output("partial_tokens", "Tokens left out: pieces of a UTF-8 character", "tokens", "integer"),
        output("trie_nodes", "Nodes in the vocabulary's character trie", "nodes", "integer"),
        output("trie_nodes_per_token", "Trie nodes per vocabulary token", "nodes", "number"),
        output("mean_allowed", "Mean allowed tokens over the DFA's states", "tokens", "number"),
        output("single_token_states", "States where exactly one token is allowed", "states", "integer"),
    ],
}


def compute(v: dict) -> dict:
    trie = gpt2_trie()
    dfa, masker, counts = _masks(v["regex"])
    state = check_prefix(dfa, v["prefix"])
    vocab = len(trie.strings)
    sample_ids = masker.allowed(state, v["samples"])
    plot = series("Allowed tokens in each DFA state", "DFA state", "", list(range(dfa.num_states)),
                  [("allowed tokens", "tokens", counts)], kind="bar")  # fmt: skip
    forced, _ = dfa.jump_forward(state)
    return {
        "state": state,
        "accepting": state in dfa.accepting,
        "allowed_tokens": counts[state],
        "allowed_share": counts[state] / vocab,
        "sample": _short(json_escape_tokens(trie, sample_ids[:4])),
        "jump_forward": _short(json.dumps(forced, ensure_ascii=False)) if forced else "none",
        "jump_forward_chars": len(forced),
        "forced_states": sum(dfa.forced_char(s) is not None for s in range(dfa.num_states)),
        "dfa_states": dfa.num_states,
        "subset_states": dfa.subset_states,
        "nfa_states": dfa.nfa_states,
        "char_classes": dfa.num_classes,
        "vocab_tokens": vocab,
        "partial_tokens": trie.partial_tokens,
        "trie_nodes": len(trie.children),
        "trie_nodes_per_token": len(trie.children) / vocab,
        "mean_allowed": sum(counts) / len(counts),
        "single_token_states": sum(c == 1 for c in counts),
        "counts": list(counts),
        "derivation": _derivation(v, dfa, state, counts[state], vocab),
        "series": {"allowed_per_state": plot},
        "notes": [f"allowed after the prefix, shortest first: {json_escape_tokens(trie, sample_ids)}"]
        + ([f"forced text from here (jump-forward): {json.dumps(forced, ensure_ascii=False)}"] if forced else [])
        + _state_notes(dfa, masker, trie, counts, state),
    }


def _derivation(v: dict, dfa, state: int, allowed: int, vocab: int) -> list[dict]:
    return [
        step(
            "Automaton",
            "pattern → Thompson NFA → subset construction → Moore minimisation",
            "{} → {} → {}",
            [(dfa.nfa_states, "NFA states"), (dfa.subset_states, "states"), (dfa.num_states, "states")],
            dfa.num_states,
            "states",
        ),
        step(
            "State after the prefix",
            "δ*(start, prefix)",
            "δ*(0, {} characters)",
            [len(v["prefix"])],
            state,
        ),
        step(
            "Allowed in this state",
            "tokens whose characters never reach the dead state from s",
            "of {}",
            [(vocab, "tokens")],
            allowed,
            "tokens",
        ),
        step(
            "Share of the vocabulary",
            "allowed ÷ V",
            "{} ÷ {}",
            [(allowed, "tokens"), (vocab, "tokens")],
            allowed / vocab,
            "share",
        ),
    ]


def _short(text: str, limit: int = SHORT) -> str:
    """A result cell's text: results do not wrap, so a long one is cut (the notes carry it whole)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


@lru_cache(maxsize=8)
def _masks(pattern: str):
    """The DFA, its masker and every state's allowed count: computed once per pattern, so typing a prefix
    only walks the DFA."""
    dfa = compile_regex(pattern)
    if not dfa.accepting:
        raise InputError("regex", "this pattern matches no string at all")
    masker = Masker(gpt2_trie(), dfa)
    counts = []
    try:
        for s in range(dfa.num_states):
            counts.append(masker.count(s, VISIT_BUDGET - masker.visits))
    except BudgetExceeded:
        raise InputError(
            "regex",
            f"masking all {dfa.num_states} states would check more than {VISIT_BUDGET:,} trie edges, over this "
            "page's budget; a bounded repeat over a broad class ({1,40}) is the usual cause: use a smaller bound, "
            "or + or *",
        ) from None
    return dfa, masker, tuple(counts)


@lru_cache(maxsize=512)
def _examples(pattern: str, state: int) -> str:
    """A few of a state's allowed tokens, kept per pattern: typing a prefix then walks no trie at all."""
    _, masker, _ = _masks(pattern)
    return json_escape_tokens(masker.trie, masker.allowed(state, 4))


def _state_notes(dfa, masker, trie, counts, current) -> list[str]:
    notes = []
    for s in range(min(dfa.num_states, MAX_LISTED_STATES)):
        tag = " (accepting)" if s in dfa.accepting else ""
        here = " ← after the prefix" if s == current else ""
        eg = _examples(dfa.pattern, s)
        notes.append(f"state {s}{tag}: {counts[s]:,} allowed, e.g. {eg}{here}")
    if dfa.num_states > MAX_LISTED_STATES:
        notes.append(f"… and {dfa.num_states - MAX_LISTED_STATES} more states (see the chart).")
    notes.append(
        f"{trie.partial_tokens} of GPT-2's tokens are pieces of a multi-byte UTF-8 character: a character-level "
        "DFA cannot run them, so they are left out (a byte-level DFA, as Outlines and XGrammar build, would allow "
        "some of them where the pattern admits non-ASCII text)."
    )
    return notes

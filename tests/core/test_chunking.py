"""Chunked prefill: one long prompt into a decoding batch (calculators/calcs/chunking.py).

Sarathi-Serve (Agrawal et al., OSDI 2024, arXiv 2403.02310 §3, §4.3): a prefill sharing a step with
decodes stretches that step (a "generation stall"); cutting the prompt into chunks bounds the stretch
by the chunk, at a small cost in the prompt's own latency. The tests check the mechanism on cases
that can be worked by hand against the step model, and the trade-off's direction."""

import pytest

from calculators import run
from calculators.calcs import chunking
from calculators.engine.steps import StepTimes
from calculators.calcs.steptime import StepModel, deployment
from calculators.errors import InputError
from calculators.schema import validate


def _run(**kw):
    return run("chunking", kw)


def _times(**kw):
    return StepTimes(StepModel(deployment(validate(chunking.SCHEMA["inputs"], kw))))


def test_window_gaps_by_hand():
    # Two sequences (0, 1); request 2 is the long prompt. Ready at 0.10: both have their first token.
    trace = [
        (0.00, 0.10, ((0, 100), (1, 100)), ()),  # both prefill, first tokens at 0.10
        (0.10, 0.01, ((0, 1), (1, 1)), ()),  # gap 0.01
        (0.11, 0.05, ((0, 1), (1, 1), (2, 500)), ()),  # a chunk of the prompt: gap 0.05
        (0.16, 0.01, ((0, 1), (1, 1), (2, 1)), ()),  # gap 0.01; past the window of 2 for seq 0 and 1
    ]
    assert chunking.window_gaps(trace, 0.10, 2, 2) == pytest.approx([0.01, 0.01, 0.05, 0.05])
    assert chunking.window_gaps(trace, 0.10, 2, 3) == pytest.approx([0.01, 0.01, 0.01, 0.01, 0.05, 0.05])
    assert chunking.window_gaps(trace, 0.11, 1, 5) == pytest.approx([0.01, 0.05])  # gaps starting ≥ 0.11


@pytest.mark.parametrize(
    "tokens, mode",
    [(512, "chunked"), (40, "chunked"), (2048, "unchunked"), (2048, "prefill_first"), (512, "chunked_alone")],
)
def test_the_whole_batch_is_still_decoding_through_the_window(tokens, mode):
    """Every one of the B sequences gives `window` gaps after the prompt lands: none has finished (its
    answer outlives its own warm-up, even at a budget that prefills the batch a few tokens a step)."""
    v = validate(chunking.SCHEMA["inputs"], {"decode_context_tokens": 256})
    res = chunking.Scene(v).run(tokens, mode)
    assert res["gaps"] == 32 * 64


def test_budget_grid():
    v = {"decode_batch": 32, "prompt_tokens": 8192, "max_num_batched_tokens": 3000}
    assert chunking.budgets(v) == [512, 1024, 2048, 3000, 4096, 8192, 16384]
    v = {"decode_batch": 600, "prompt_tokens": 1000, "max_num_batched_tokens": 600}  # yours ≤ B: not added
    assert chunking.budgets(v) == [1024, 2048]


def test_unchunked_stall_is_one_step_of_prompt_and_decodes():
    """Without chunking, the longest gap is the step that carries the whole prompt and every decode."""
    r = _run()
    times = _times()
    b, c, p = 32, 1024, 8192
    # The batch's contexts when the prompt runs: prompt + 1 (first token) + the two steps it waited for (the one it
    # landed in, and the one planned as that began)
    step = times.mixed(b, b * (c + 4), [(0, p)])
    assert r["unchunked_itl_max_s"] == pytest.approx(step, rel=0.002)
    # it lands just after a step began, and the step after that was planned as that one began (async
    # scheduling): it waits out both
    assert r["unchunked_ttft_s"] == pytest.approx(2 * r["decode_step_s"] + step, rel=0.01)


def test_vllm_v0_runs_the_prompt_alone_and_the_decodes_wait_for_it():
    r = _run()
    times = _times()
    alone = times.mixed(0, 0, [(0, 8192)])
    assert r["prefill_first_itl_max_s"] == pytest.approx(alone + r["decode_step_s"], rel=0.01)
    assert r["prefill_first_itl_max_s"] > r["unchunked_itl_max_s"]  # the mixed step hides the decodes


def test_sglang_runs_every_chunk_alone_and_the_decodes_wait_for_all_of_them():
    # SGLang 0.5.23's default (chunked, prefill-only steps: EngineConfig): 8,192 tokens at a budget of 2,048 are four
    # prompt-only steps of 2,048, back to back; the decodes' longest gap spans all four and their own step after
    r = _run()
    times = _times()
    chunks = [times.mixed(0, 0, [(k * 2048, 2048)]) for k in range(4)]
    assert r["chunked_alone_itl_max_s"] == pytest.approx(sum(chunks) + r["decode_step_s"], rel=0.01)
    assert r["chunked_alone_itl_max_s"] > 3 * r["chunked_itl_max_s"]  # V1's mixed chunks stall one step each
    assert r["chunked_alone_ttft_s"] < r["chunked_ttft_s"]  # the whole budget is the prompt's: fewer steps


def test_smaller_chunks_cut_the_stall_and_cost_the_prompt_a_little():
    r = _run()
    plot = r["series"]["ttft_itl_vs_budget"]
    xs = plot["x"]["values"]
    ttft, itl_max = plot["y"][0]["values"], plot["y"][1]["values"]
    assert itl_max == sorted(itl_max)  # a bigger budget never shortens the longest gap
    assert itl_max[0] * 4 < itl_max[-1]
    assert ttft[0] > min(ttft)  # the smallest chunks cost the prompt the most
    assert xs[0] == 512 and xs[-1] >= 8192 + 32
    # the smallest budget's longest gap is about a chunk's step: prompt tokens of 512 − 32
    assert r["chunked_itl_p50_s"] == pytest.approx(r["decode_step_s"], rel=0.02)


def test_best_budget_is_the_lowest_ttft_meeting_the_target():
    loose = _run(itl_target_ms=1000.0)
    assert loose["best_budget_tokens"] >= 8192  # everything meets it: the fastest TTFT is unchunked-sized
    tight = _run(itl_target_ms=20.0)
    assert tight["best_budget_tokens"] == 512 and tight["best_itl_s"] <= 0.020
    none = _run(itl_target_ms=1.0)
    assert none["best_budget_tokens"] == 0 and none["notes"]


def test_a_per_step_overhead_makes_small_chunks_cost_more():
    base, slow = _run(), _run(step_overhead_ms=3.0)
    extra_512 = (
        slow["series"]["ttft_itl_vs_budget"]["y"][0]["values"][0]
        - base["series"]["ttft_itl_vs_budget"]["y"][0]["values"][0]
    )
    extra_16k = (
        slow["series"]["ttft_itl_vs_budget"]["y"][0]["values"][-1]
        - base["series"]["ttft_itl_vs_budget"]["y"][0]["values"][-1]
    )
    assert extra_512 > 4 * extra_16k  # 18 chunks pay the overhead 18 times; one step pays it once


def test_chunk_count_by_hand():
    r = _run(max_num_batched_tokens=2048)
    assert r["chunk_tokens"] == 2048 - 32 and r["chunks"] == 5  # ⌈8192 ÷ 2016⌉


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"max_num_batched_tokens": 32}, "max_num_batched_tokens"),
        ({"decode_batch": 1024, "decode_context_tokens": 131072}, "decode_batch"),
    ],
)
def test_bad_input_names_the_field(kw, field):
    with pytest.raises(InputError) as e:
        _run(**kw)
    assert e.value.field == field


def test_a_budget_whose_warm_up_outgrows_the_pool_leaves_the_sweep_not_the_page():
    """256 sequences at 1,024 tokens: at a budget of 512 their warm-up (256 prompt tokens a step) needs
    answers so long that the batch outgrows the KV pool; that budget leaves the sweep, with a note, and the
    reader's own budget (2,048) still runs."""
    r = _run(decode_batch=256)
    assert any("512" in note for note in r["notes"])
    assert 512 not in r["series"]["ttft_itl_vs_budget"]["x"]["values"]
    assert r["chunk_tokens"] == 2048 - 256 and r["chunked_itl_max_s"] > 0

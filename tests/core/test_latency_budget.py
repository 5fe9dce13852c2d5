"""latency: a token budget per prefill step (review parts-1-3 row 22).

vLLM V1's API server defaults max_num_batched_tokens to 8,192 on GPUs with at least 70 GiB other
than A100 and 2,048 otherwise (vllm/engine/arg_utils.py at commit 99d7eb5d, EngineArgs._set_default_args), so Part 3's
16 x 1,024-token batch takes two prefill steps on an H100, and the first half of the requests see
about half the TTFT that one unbounded pass gives all of them.
"""

import pytest

from calculators import run
from calculators.calcs.latency import stream_pieces

PART3 = dict(model="llama-3.1-8b", hardware="h100-sxm", batch_size=16, input_tokens=1024, output_tokens=256)


def test_no_budget_is_one_pass_as_before():
    out = run("latency", PART3)
    assert out["prefill_steps"] == 1 and out["ttft_first_s"] == out["ttft_s"] == out["prefill_time_s"]


def test_vllm_default_budget_on_an_h100_halves_the_first_requests_ttft():
    one = run("latency", PART3)
    out = run("latency", dict(PART3, prefill_budget_rule="vllm"))
    assert out["prefill_steps"] == 2
    assert out["ttft_first_s"] == pytest.approx(one["ttft_s"] / 2, rel=0.05)
    assert out["ttft_s"] == pytest.approx(one["ttft_s"], rel=0.05)


def test_a100_default_budget_is_2048_tokens():
    out = run("latency", dict(PART3, hardware="a100-80gb", prefill_budget_rule="vllm"))
    assert out["prefill_steps"] == 8


def test_prompts_are_cut_into_pieces_at_step_boundaries():
    assert stream_pieces(3, 1000, 0, 2048) == [1000, 1000, 48]
    assert stream_pieces(3, 1000, 2048, 952) == [952]
    assert stream_pieces(1, 5000, 2048, 2048) == [2048]


def test_a_long_prompt_takes_several_steps_before_its_first_token():
    out = run("latency", dict(PART3, batch_size=1, input_tokens=20000, prefill_budget_rule="vllm"))
    assert out["prefill_steps"] == 3 and out["ttft_first_s"] == out["ttft_s"]


def test_a_tiny_budget_on_a_huge_batch_is_computed_not_enumerated():
    out = run(
        "latency",
        dict(PART3, batch_size=100_000, input_tokens=10_000_000, prefill_budget_rule="set", max_num_batched_tokens=1),
    )
    assert out["prefill_steps"] == 10**12


def test_pipeline_stages_shorten_a_queue_of_prompts_but_not_the_first():
    """With stages, consecutive prefill steps overlap (vLLM pipelines them, PR #42187) but a prompt's last step
    crosses every stage before its first token: one 8,192-token prompt takes as long on TP8 x PP2 as on TP8
    (plus the stage send), while the last of 16, one step each, waits (16 + 1) half-model steps, not 16 whole."""
    base = dict(model="llama-3.1-70b", hardware="h100-sxm", num_gpus=8, input_tokens=8192, output_tokens=128)
    one = run("latency", dict(base, batch_size=1))
    one_pp = run("latency", dict(base, batch_size=1, pp=2))
    assert one_pp["ttft_s"] == pytest.approx(one["ttft_s"], rel=0.02) and one_pp["ttft_s"] >= one["ttft_s"]
    many = run("latency", dict(base, batch_size=16, prefill_budget_rule="vllm"))
    many_pp = run("latency", dict(base, batch_size=16, prefill_budget_rule="vllm", pp=2))
    assert many_pp["ttft_first_s"] == pytest.approx(one_pp["ttft_s"], rel=1e-9)
    # at least (16 + 1) ÷ 32 of TP8's, plus what half-size micro-batches pay in overhead and sends
    assert many["ttft_s"] * 17 / 32 <= many_pp["ttft_s"] <= many["ttft_s"] * 0.6


@pytest.mark.parametrize("pp", [1, 2])
def test_one_token_past_the_budget_never_shortens_ttft(pp):
    base = dict(
        model="llama-3.1-70b",
        hardware="h100-sxm",
        num_gpus=8,
        output_tokens=128,
        pp=pp,
        prefill_budget_rule="vllm",
        batch_size=1,
    )
    for boundary in (8192, 16384):
        at, past = (run("latency", dict(base, input_tokens=t))["ttft_s"] for t in (boundary, boundary + 1))
        assert at < past < at * 1.1

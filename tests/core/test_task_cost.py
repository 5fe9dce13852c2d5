"""Cost and latency per task: the totals are the shape's, the prices the step model's, and the
properties that could fail (reuse, thinking, batch) hold."""

from __future__ import annotations

import pytest

from calculators import run
from calculators.calcs import task_cost
from calculators.calcs.steptime import StepModel, deployment
from calculators.engine.steps import StepTimes
from calculators.schema import validate


def _v(**kw):
    return validate(task_cost.SCHEMA["inputs"], kw)


def test_defaults_are_the_worked_agent():
    out = run("task_cost", {})
    # 20 turns over a 30K shared context, 1,500 new + 300 visible + 1,000 thinking (kept) per turn
    assert out["tokens_decoded"] == 20 * 1300
    assert out["thinking_tokens_total"] == 20_000
    assert out["final_context_tokens"] == 30_000 + 19 * 2800 + 1500 + 1300
    assert out["tokens_read"] == sum(30_000 + t * 2800 + 1500 for t in range(20))
    assert out["tokens_prefilled"] == 20 * 1500  # every re-read hits: only the new input is prefilled
    assert out["waiting_s"] == 19 * 5.0


def test_prices_are_the_step_models():
    v = _v(turns=1, shared_tokens=8000, input_tokens=500, output_tokens=100, thinking_tokens=0)
    out = run("task_cost", v)
    model = StepModel(deployment(v))
    prefill = StepTimes(model).mixed(0, 0.0, [(8000, 500)])
    step = model.decode_time(4, 8500 + 50)
    assert out["ttft_first_s"] == pytest.approx(prefill)
    assert out["generation_s"] == pytest.approx(prefill + 100 * step)
    assert out["gpu_s_per_task"] == pytest.approx(prefill + 100 * step / 4)
    assert out["usd_per_task"] == pytest.approx(out["gpu_s_per_task"] / 3600 * 2.0)


def test_reuse_lowers_cost_and_the_last_ttft():
    on, off = run("task_cost", {"reuse": 1.0}), run("task_cost", {"reuse": 0.0})
    assert on["usd_per_task"] < off["usd_per_task"]
    assert on["ttft_last_s"] < off["ttft_last_s"]
    assert off["usd_per_task"] == pytest.approx(off["usd_per_task_no_reuse"])
    assert on["usd_per_task_no_reuse"] == pytest.approx(off["usd_per_task"])


def test_thinking_is_decode_cost():
    drop = {"keep_thinking": False}
    lo, hi = run("task_cost", {"thinking_tokens": 0, **drop}), run("task_cost", {"thinking_tokens": 4000, **drop})
    assert hi["decode_gpu_s"] > 3 * lo["decode_gpu_s"]
    assert hi["tokens_read"] == lo["tokens_read"]  # dropped from later prompts
    kept = run("task_cost", {"thinking_tokens": 4000})
    assert kept["tokens_read"] > hi["tokens_read"]


def test_a_bigger_batch_shares_each_step():
    one, four = run("task_cost", {"decode_batch": 1}), run("task_cost", {"decode_batch": 4})
    assert four["decode_gpu_s"] < one["decode_gpu_s"]
    assert four["generation_s"] > one["generation_s"]  # each step is slower for the session


def test_images_add_their_rule_tokens():
    out = run("task_cost", {"images_per_turn": 1, "image_rule": "gemma-3", "turns": 2})
    base = run("task_cost", {"turns": 2})
    assert out["image_tokens_each"] == 256
    # turn 1 reads one image, turn 2 re-reads it and reads another
    assert out["tokens_read"] - base["tokens_read"] == 256 + 2 * 256


def test_a_batch_that_does_not_fit_is_flagged():
    out = run("task_cost", {"decode_batch": 64})
    assert any("more KV than the pool" in n for n in out["notes"])

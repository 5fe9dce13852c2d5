"""Speculative decoding in the engine simulator (engine/speculation.py): tokens per step, pricing, and the
engine's invariants with several tokens per step."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from calculators.calcs.speculative import draft_heads, speculative_step
from calculators.calcs.steptime import Deployment, StepModel
from calculators.engine.config import EngineConfig, Request
from calculators.engine.core import Engine
from calculators.engine.result import summarise
from calculators.engine.run import simulate
from calculators.engine.speculation import Speculation
from calculators.engine.steps import StepTimes
from calculators.resolve import resolve_accelerator, resolve_model


class SpecStub:
    """Decode steps 10 ms, steps with a prefill chunk 50 ms; each decoding sequence keeps `per_step` tokens."""

    speculation = "on"  # not None: the engine asks tokens_per_step and decode_tokens
    pool_charge = None  # every layer keeps every token, no state (StepTimes.pool_charge)

    def __init__(self, per_step: float, k: int = 3):
        self.per_step, self.k = per_step, k

    def tokens_per_step(self, batch):
        return self.per_step

    def decode_tokens(self, batch):
        return self.k + 1

    def decode(self, batch, context_sum, speculative=True):
        return 0.010

    def mixed(self, decodes, context_sum, chunks, speculative=True):
        return 0.050


def test_a_lone_request_keeps_floor_of_the_running_sum_per_step():
    # 11 tokens: the first from the prefill step, then 10 at 2.5 per step: ⌊2.5⌋, ⌊5⌋−2, ⌊7.5⌋−5, ⌊10⌋−7 =
    # 2, 3, 2, 3 tokens in 4 decode steps of 10 ms.
    r = simulate(SpecStub(2.5), [Request(0.0, 10, 11)], EngineConfig(kv_blocks=100))
    assert r.ttft_s[0] == pytest.approx(0.050)
    assert r.e2e_s[0] == pytest.approx(0.050 + 4 * 0.010)


def test_the_last_step_may_pass_the_last_token_without_counting_it():
    # 4 tokens after the first at 3 per step: 2 steps (3, then the 1 left of the next 3).
    engine = Engine(SpecStub(3.0), [Request(0.0, 10, 5)], EngineConfig(kv_blocks=100), (0, 1))
    engine.run()
    assert engine.gen[0] == 5 and engine.tokens[0] == 15
    assert engine.finished[0] == pytest.approx(0.050 + 2 * 0.010)


def test_one_token_per_step_is_the_plain_engine():
    reqs = [Request(0.01 * i, 50 + 7 * i, 20 + 3 * i) for i in range(30)]
    cfg = EngineConfig(kv_blocks=60, block_size_tokens=4, max_num_seqs=6, max_num_batched_tokens=64)
    a, b = simulate(SpecStub(1.0, k=0), reqs, cfg), simulate(SpecStub(1.0, k=0), reqs, cfg)
    assert a.e2e_s == b.e2e_s


def test_each_decode_asks_the_budget_for_k_plus_one_tokens():
    # Budget 8, 2 decoding sequences at k = 3 ask 8: a third arrival cannot start its prefill beside them.
    reqs = [Request(0.0, 4, 30), Request(0.0, 4, 30), Request(0.06, 4, 2)]
    cfg = EngineConfig(kv_blocks=100, max_num_batched_tokens=8)
    plain = simulate(SpecStub(1.0, k=0), reqs, cfg)
    spec = simulate(SpecStub(1.0, k=3), reqs, cfg)
    assert spec.queue_s[2] > plain.queue_s[2]


def _llama8b(**kw) -> StepModel:
    model, h100 = resolve_model("llama-3.1-8b"), resolve_accelerator("h100-sxm")
    return StepModel(Deployment(model, h100, 2.0, 2.0, h100.dense_flops_per_s["bf16"], 1, 0.8, 0.6, **kw))


def test_a_lone_sequence_decodes_at_the_closed_form_speed():
    """The simulated TPOT of one long answer equals calcs/speculative.py's step time ÷ E at its mean context."""
    steps = _llama8b()
    spec = Speculation(draft_heads(0.05), 0.7, 4)
    prompt, out = 2000, 801
    r = simulate(StepTimes(steps, speculation=spec), [Request(0.0, prompt, out)], EngineConfig(kv_blocks=10_000))
    closed = speculative_step(steps, spec.drafter, 1, prompt + out / 2, 0.7, 4)
    assert r.tpot_s[0] == pytest.approx(1 / closed.tokens_per_s_per_sequence, rel=0.01)
    plain = simulate(StepTimes(steps), [Request(0.0, prompt, out)], EngineConfig(kv_blocks=10_000))
    assert plain.tpot_s[0] / r.tpot_s[0] == pytest.approx(closed.speedup, rel=0.01)


def test_speculation_pays_at_low_load_and_costs_once_compute_bound():
    """Short prompts, α 0.6, k 4: the closed form's break-even batch is ~111 at 200 tokens of context; the
    simulator agrees in direction on either side of it."""
    steps = _llama8b()
    spec = Speculation(draft_heads(0.05), 0.6, 4)
    light = [Request(0.5 * i, 100, 200) for i in range(6)]
    heavy = [Request(0.0, 100, 200 + i % 7) for i in range(256)]
    cfg = EngineConfig(kv_blocks=40_000, max_num_seqs=256, max_num_batched_tokens=32_768)

    def tpot(reqs, times):
        r = simulate(times, reqs, cfg)
        return sum(r.tpot_s) / len(r.tpot_s)

    assert tpot(light, StepTimes(steps, speculation=spec)) < 0.8 * tpot(light, StepTimes(steps))
    assert tpot(heavy, StepTimes(steps, speculation=spec)) > 1.2 * tpot(heavy, StepTimes(steps))


def test_a_batch_schedule_turns_speculation_off_from_a_batch_on():
    spec = Speculation(draft_heads(0.05), 0.7, 4, schedule=((1, 8, 4), (9, 100_000, 0)))
    assert spec.k(8) == 4 and spec.k(9) == 0 and spec.tokens_per_step(9) == 1.0
    assert spec.tokens_per_step(1) == pytest.approx((1 - 0.7**5) / (1 - 0.7))
    steps = _llama8b()
    times = StepTimes(steps, speculation=spec)
    assert times.decode(9, 9 * 1000) == pytest.approx(StepTimes(steps).decode(9, 9 * 1000))
    assert times.decode(8, 8 * 1000) > StepTimes(steps).decode(8, 8 * 1000)


def test_general_path_decodes_are_priced_plainly():
    steps = _llama8b()
    times = StepTimes(steps, speculation=Speculation(draft_heads(0.05), 0.7, 4))
    plain = StepTimes(steps)
    assert times.decode(4, 4000, speculative=False) == plain.decode(4, 4000)
    assert times.mixed(4, 4000, [(0, 512)], speculative=False) == plain.mixed(4, 4000, [(0, 512)])
    assert times.mixed(4, 4000, [(0, 512)]) > plain.mixed(4, 4000, [(0, 512)])


def test_a_bad_schedule_is_refused():
    with pytest.raises(ValueError, match="schedule"):
        Speculation(draft_heads(0.05), 0.7, 4, schedule=((0, 8, 4),))


request = st.tuples(st.floats(0.0, 0.2), st.integers(1, 80), st.integers(1, 40), st.sampled_from([0, 16, 40]))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(request, min_size=1, max_size=25),
    st.floats(1.0, 4.0),
    st.integers(4, 40),
    st.sampled_from([4, 16]),
    st.integers(1, 8),
    st.booleans(),
    st.sampled_from(["recompute", "swap"]),
)
def test_every_request_ends_and_the_pool_balances_at_several_tokens_per_step(
    rows, per_step, blocks, block_size, seqs, caching, preemption
):
    extra = {"swap_bytes_per_s": 1e9, "kv_bytes_per_block": 1e5} if preemption == "swap" else {}
    cfg = EngineConfig(
        kv_blocks=blocks,
        block_size_tokens=block_size,
        max_num_seqs=seqs,
        max_num_batched_tokens=64,
        prefix_caching=caching,
        preemption=preemption,
        **extra,
    )
    reqs, t = [], 0.0
    for gap, p, o, shared in rows:
        t += gap
        reqs.append(Request(t, p, o, prefix=(("system", 0, min(shared, p)),) if shared else ()))
    engine = Engine(SpecStub(per_step, k=math.ceil(per_step) - 1), reqs, cfg, (0, len(reqs)))
    engine.run()
    r = summarise(engine)
    assert len(r.e2e_s) + r.rejected == len(reqs)
    for i, x in enumerate(reqs):
        if engine.state[i] == "finished":
            assert engine.gen[i] == x.output_tokens and engine.tokens[i] == x.prompt_tokens + x.output_tokens
    pool = engine.pool
    assert all(b == 0 for b in pool.blocks) and all(not h for h in pool.held)
    assert pool.free == cfg.kv_blocks
    assert all(0 <= q <= tt <= e for q, tt, e in zip(r.queue_s, r.ttft_s, r.e2e_s))


def test_a_schedule_fills_gaps_and_the_tail_as_vllm_does():
    # vLLM v0.33.0 v1/spec_decode/dynamic/utils.py build_dynamic_sd_schedule_lookup: a gap carries the previous
    # range's k ("[(1, 16, 3), (32, 128, 2)] should map batch sizes 17-31 to K=3"), the tail after the last range
    # carries the last k, and every k is capped at num_speculative_tokens.
    spec = Speculation(draft_heads(0.05), 0.7, 3, schedule=((1, 16, 3), (32, 128, 2)))
    assert [spec.k(b) for b in (1, 16, 17, 31, 32, 128, 129, 10_000)] == [3, 3, 3, 3, 2, 2, 2, 2]
    assert Speculation(draft_heads(0.05), 0.7, 2, schedule=((1, 8, 5),)).k(4) == 2

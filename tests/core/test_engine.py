"""The engine simulator on hand-computable cases, and against queueing theory.

A stub step time (prefill 50 ms a step, decode 10 ms) makes every timestamp checkable by hand; the
queueing tests use the core's real step model.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import replace

import pytest

from calculators.calcs import goodput
from calculators.calcs.steptime import StepModel, deployment
from calculators.engine import workload
from calculators.engine.config import EngineConfig, Request
from calculators.engine.core import Engine
from calculators.engine.run import simulate
from calculators.engine.steps import StepTimes
from calculators.errors import InputError
from calculators.schema import validate


class Stub:
    """Decode-only steps take 10 ms; any step with a prefill chunk 50 ms; one token per decode step."""

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


def cfg(**kw):
    return EngineConfig(**{"kv_blocks": 1000, "block_size_tokens": 16, **kw})


def test_two_requests_prefill_together_then_decode():
    r = simulate(Stub(), [Request(0.0, 10, 3), Request(0.0, 10, 3)], cfg())
    assert r.ttft_s == pytest.approx((0.05, 0.05))
    assert r.tpot_s == pytest.approx((0.01, 0.01))
    assert r.e2e_s == pytest.approx((0.07, 0.07))
    assert r.steps == 3 and r.preemptions == (0, 0)


def test_chunked_prefill_splits_a_prompt_over_the_token_budget():
    r = simulate(Stub(), [Request(0.0, 10, 2)], cfg(max_num_batched_tokens=8))
    assert r.ttft_s == pytest.approx((0.10,))  # chunks of 8 and 2 tokens; the first token ends the second
    assert r.e2e_s == pytest.approx((0.11,))


def test_without_chunking_a_prompt_waits_for_a_step_with_room():
    # 0 runs a 6-token prefill; 1's 6 tokens do not fit the 8 left in that step's budget of 8 − 6 = 2
    reqs = [Request(0.0, 6, 2), Request(0.0, 6, 2)]
    r = simulate(Stub(), reqs, cfg(max_num_batched_tokens=8, chunked_prefill=False))
    assert r.ttft_s == pytest.approx((0.05, 0.10))  # 1 prefills in step 2 beside 0's decode


def test_one_block_too_few_preempts_the_last_admitted_and_recomputes():
    # blocks of 4 tokens, a pool of 5; each request grows to 4 + 6 − 1 = 9 tokens of KV (3 blocks). At
    # t = 0.09 request 0 takes the last free block and 1 has none: 1 is preempted (it is the last admitted),
    # 0 finishes at 0.10, then 1 prefills its 9 tokens again (50 ms) and emits its last token at 0.15.
    reqs = [Request(0.0, 4, 6), Request(0.0, 4, 6)]
    r = simulate(Stub(), reqs, cfg(kv_blocks=5, block_size_tokens=4))
    assert r.preemptions == (0, 1)
    assert r.e2e_s == pytest.approx((0.10, 0.15))
    assert r.ttft_s == pytest.approx((0.05, 0.05))  # the first token was out before the preemption
    assert max(v for v, w in zip(r.gap_values_s, r.gap_weights)) == pytest.approx(0.06)  # 0.09 → 0.15


def test_swap_keeps_the_kv_and_pays_the_host_link_each_way():
    # the same case with swap: 2 blocks × 10 kB ÷ 10 MB/s = 2 ms out (added to the step at 0.09) and 2 ms
    # back in (added to 1's next step, a 10 ms decode instead of a 50 ms re-prefill)
    reqs = [Request(0.0, 4, 6), Request(0.0, 4, 6)]
    swap = cfg(kv_blocks=5, block_size_tokens=4, preemption="swap", swap_bytes_per_s=1e7, kv_bytes_per_block=1e4)
    r = simulate(Stub(), reqs, swap)
    assert r.preemptions == (0, 1)
    assert r.e2e_s == pytest.approx((0.102, 0.114))


def test_a_sequence_swapped_out_mid_prefill_resumes_its_prefill():
    # blocks of 4, a pool of 7, a budget of 8 tokens: at t = 0.15 request 1 has 18 of its 24 prompt tokens
    # and asks for 6 more (6 blocks) while 0 needs its 2nd block: 1 is swapped out (5 blocks). Back at
    # 0.325, after 0 finishes, its last 6 prompt tokens are a prefill chunk (50 ms) plus 5 blocks × 10 kB
    # ÷ 10 MB/s = 5 ms of swap-in, so its first token comes at 0.38 (priced as a 10 ms decode it was 0.34)
    reqs = [Request(0.0, 4, 20), Request(0.0, 24, 2)]
    swap = cfg(
        kv_blocks=7,
        block_size_tokens=4,
        max_num_batched_tokens=8,
        preemption="swap",
        swap_bytes_per_s=1e7,
        kv_bytes_per_block=1e4,
    )
    r = simulate(Stub(), reqs, swap)
    assert r.preemptions == (0, 1)
    assert r.ttft_s == pytest.approx((0.05, 0.38))


def test_static_batching_admits_nothing_until_the_batch_drains():
    reqs = [Request(0.0, 10, 5), Request(0.001, 10, 2)]
    static = simulate(Stub(), reqs, cfg(batching="static"))
    continuous = simulate(Stub(), reqs, cfg(schedule_ahead=False))
    assert static.queue_s[1] == pytest.approx(0.05 + 4 * 0.01 - 0.001)  # waits for request 0's last token
    assert continuous.queue_s[1] == pytest.approx(0.05 - 0.001)  # joins at the next step
    # by default the step from 0.05 was planned at 0 (async scheduling), before 1 came: it joins the one after
    assert simulate(Stub(), reqs, cfg()).queue_s[1] == pytest.approx(0.06 - 0.001)


@pytest.mark.parametrize("policy, order", [("fcfs", [0, 1, 2]), ("priority", [1, 2, 0]), ("sjf", [2, 0, 1])])
def test_policies_order_the_queue(policy, order):
    reqs = [Request(0.0, 8, 5, priority=2), Request(0.0, 8, 9, priority=0), Request(0.0, 8, 2, priority=1)]
    r = simulate(Stub(), reqs, cfg(max_num_seqs=1, policy=policy))
    assert sorted(range(3), key=lambda i: r.queue_s[i]) == order


def test_ageing_lets_an_old_low_priority_request_go_first():
    # request 0 (priority 1) arrived 2 s before request 1 (priority 0); ageing 1 s per level: 0 ranks first
    reqs = [Request(0.0, 8, 400, priority=0), Request(0.5, 8, 3, priority=1), Request(2.5, 8, 3, priority=0)]
    plain = simulate(Stub(), reqs, cfg(max_num_seqs=1, policy="priority"))
    aged = simulate(Stub(), reqs, cfg(max_num_seqs=1, policy="priority", ageing_s=1.0))
    assert plain.queue_s[1] > plain.queue_s[2] - 2.0  # without ageing the later, higher class goes first
    assert aged.e2e_s[1] + 0.5 < aged.e2e_s[2] + 2.5  # with it the older request finishes first


def test_load_shedding_rejects_arrivals_beyond_the_queue_limit():
    reqs = [Request(0.0, 8, 5)] + [Request(0.01, 8, 5)] * 3  # 0 runs; 1 and 2 wait; 3 is turned away
    r = simulate(Stub(), reqs, cfg(max_num_seqs=1, max_waiting=2))
    assert r.rejected == 1 and len(r.e2e_s) == 3


def test_shedding_on_predicted_ttft_turns_away_the_arrival_that_would_wait_too_long():
    # the stub prefills any chunk in 50 ms, so 8,192 tokens go at 163,840 tokens/s: with 0 running,
    # arrival 1 predicts 0.05 s, 2 (one prompt ahead) 0.10 s, 3 (two ahead) 0.15 s > 0.12 s: a 429
    reqs = [Request(0.0, 8192, 5)] + [Request(0.01, 8192, 5)] * 3
    r = simulate(Stub(), reqs, cfg(max_num_seqs=1, max_predicted_ttft_s=0.12))
    assert r.rejected == 1 and r.ids == (0, 1, 2)


def test_a_waiting_request_is_admitted_only_when_its_whole_prompt_fits():
    # blocks of 4, a pool of 8: 0 holds 6 blocks (a 24-token prompt); 1's 16-token prompt needs 4 blocks
    # but its first 8-token chunk only 2. vLLM V1 (scheduler_reserve_full_isl) waits until 0 is done;
    # checking the chunk alone admits 1 at once, and one of the two is preempted when they grow
    reqs = [Request(0.0, 24, 3), Request(0.0, 16, 3)]
    whole = simulate(Stub(), reqs, cfg(kv_blocks=8, block_size_tokens=4, max_num_batched_tokens=32))
    chunk = simulate(
        Stub(), reqs, cfg(kv_blocks=8, block_size_tokens=4, max_num_batched_tokens=32, whole_prompt_must_fit=False)
    )
    assert whole.preemptions == (0, 0) and whole.queue_s[1] > 0.05
    assert chunk.queue_s[1] == 0.0


def test_results_split_by_tenant():
    reqs = [Request(0.0, 8, 3, tenant="a"), Request(0.0, 8, 3, tenant="b"), Request(0.5, 8, 3, tenant="a")]
    r = simulate(Stub(), reqs, cfg())
    assert r.tenants == ("a", "b", "a") and r.by_tenant() == {"a": [0, 2], "b": [1]}


def test_a_request_that_can_never_fit_is_rejected():
    r = simulate(Stub(), [Request(0.0, 100, 100)], cfg(kv_blocks=4, block_size_tokens=16))
    assert r.rejected == 1 and r.e2e_s == ()


def _real_times(model="llama-3.1-8b", hardware="h100-sxm"):
    dep = deployment(validate(goodput.SCHEMA["inputs"], {"model": model, "hardware": hardware, "num_gpus": 1}))
    return StepTimes(StepModel(dep)), StepModel(dep)


def _poisson(rate, n, prompt, output, seed=1):
    rng, t, out = random.Random(seed), 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(Request(t, prompt, max(2, round(rng.expovariate(1 / output)))))
    return out


def test_a_decode_step_costs_what_the_step_model_says():
    times, model = _real_times()
    r = simulate(times, [Request(0.0, 512, 3)], cfg(trace_steps=10))
    decode_step = r.trace[1][1]
    assert decode_step == pytest.approx(model.decode(1, 513).time_s, rel=1e-12)
    prefill_step = r.trace[0][1]
    assert prefill_step == pytest.approx(model.prefill([512]).time_s, rel=1e-9)


def test_stretches_match_step_by_step():
    times, _ = _real_times()
    reqs = _poisson(20.0, 200, 512, 128)
    fast = simulate(times, reqs, cfg(kv_blocks=20000))
    slow = simulate(times, reqs, cfg(kv_blocks=20000, trace_steps=10**9))
    assert fast.steps == slow.steps
    for a, b in ((fast.e2e_s, slow.e2e_s), (fast.ttft_s, slow.ttft_s)):
        assert statistics.mean(a) == pytest.approx(statistics.mean(b), rel=0.005)


def test_littles_law_holds():
    """L = λW: the time-averaged number of requests in the system equals rate × mean time in it, with the rate
    the run's own (arrivals over the span the occupancy covers, drain included), not the nominal 25/s."""
    times, _ = _real_times()
    reqs = _poisson(25.0, 3000, 512, 128)
    r = simulate(times, reqs, cfg(kv_blocks=20000))
    occ = r.occupancy
    area = sum((b[0] - a[0]) * (a[1] + a[2]) for a, b in zip(occ, occ[1:]))
    span = occ[-1][0] - occ[0][0]
    assert area / span == pytest.approx(len(reqs) / span * statistics.mean(r.e2e_s), rel=0.01)


def test_one_sequence_at_a_time_is_an_m_g_1_queue():
    """max_num_seqs = 1 makes the engine a single server: Pollaczek–Khinchine's mean wait,
    λ E[S²] ÷ (2 (1 − ρ)), holds for Poisson arrivals (within 8% over 20,000 requests at ρ ≈ 0.6)."""
    times, _ = _real_times()
    probe = simulate(times, [Request(0.0, 256, 64)], cfg())
    rate = 0.6 / probe.e2e_s[0]
    reqs = _poisson(rate, 20000, 256, 64, seed=3)
    r = simulate(times, reqs, cfg(max_num_seqs=1, kv_blocks=20000))
    service = [e - q for e, q in zip(r.e2e_s, r.queue_s)]
    es, es2 = statistics.mean(service), statistics.mean(s * s for s in service)
    rho = rate * es
    assert 0.5 < rho < 0.7
    assert statistics.mean(r.queue_s) == pytest.approx(rate * es2 / (2 * (1 - rho)), rel=0.08)


# ---- prefix caching -----------------------------------------------------------------------------------

SYSTEM = ("system", 0, 64)  # a 64-token system prompt: 4 blocks of 16


def cached(**kw):
    return cfg(prefix_caching=True, trace_steps=10**6, **kw)


def test_a_shared_system_prompt_is_prefilled_once():
    reqs = [Request(0.0, 100, 3, prefix=(SYSTEM,)), Request(1.0, 100, 3, prefix=(SYSTEM,))]
    r = simulate(Stub(), reqs, cached())
    assert (r.prompt_tokens, r.hit_tokens_gpu, r.hit_tokens_host) == (200, 64, 0)
    second_prefill = next(t for t in r.trace if t[0] >= 1.0)
    assert second_prefill[2] == ((1, 36),)  # only its own 36 tokens are computed


def test_a_whole_prompt_hit_still_computes_the_last_token():
    # two identical 64-token prompts: 3 of the 4 blocks hit, so the last token gives the first output
    reqs = [Request(0.0, 64, 3, prefix=(SYSTEM,)), Request(1.0, 64, 3, prefix=(SYSTEM,))]
    r = simulate(Stub(), reqs, cached())
    assert r.hit_tokens_gpu == 48


def test_a_preempted_request_finds_its_own_computed_blocks_again():
    # the preemption case above with caching on: vLLM hashes every full block a request computes, its own too,
    # so at 0.10 request 1 (4 prompt + 5 output tokens, 8 of them in KV: 2 full blocks of 4) finds both
    # blocks cached and computes its 9th token alone, a 10 ms step, instead of prefilling all 9 again (50 ms)
    reqs = [Request(0.0, 4, 6), Request(0.0, 4, 6)]
    r = simulate(Stub(), reqs, cached(kv_blocks=5, block_size_tokens=4))
    assert r.preemptions == (0, 1)
    assert r.e2e_s == pytest.approx((0.10, 0.11))
    assert r.trace[-1][2] == ((1, 1),)


def test_own_blocks_are_never_hit_by_another_request():
    # two different 64-token prompts with caching on: each names its own blocks, nobody else's
    reqs = [Request(0.0, 64, 3), Request(1.0, 64, 3)]
    r = simulate(Stub(), reqs, cached())
    assert r.hit_tokens_gpu == 0


def test_without_caching_nothing_hits():
    reqs = [Request(0.0, 100, 3, prefix=(SYSTEM,)), Request(1.0, 100, 3, prefix=(SYSTEM,))]
    r = simulate(Stub(), reqs, cfg())
    assert r.hit_tokens_gpu == 0 and r.steps == 6


def _evicting(host_blocks=0):
    """A's 4 system blocks are released at its end; B (no shared prefix, 8 blocks) needs the whole pool of
    8, so they are evicted (to the host tier when there is one); C then asks for the system prompt."""
    reqs = [Request(0.0, 64, 2, prefix=(SYSTEM,)), Request(1.0, 120, 8), Request(2.0, 100, 2, prefix=(SYSTEM,))]
    extra = {"host_cache_blocks": host_blocks, "host_cache_bytes_per_s": 1e6, "kv_bytes_per_block": 1e4}
    return simulate(Stub(), reqs, cached(kv_blocks=8, **(extra if host_blocks else {})))


def test_released_blocks_stay_cached_until_the_pool_needs_them():
    r = _evicting()
    assert (r.hit_tokens_gpu, r.hit_tokens_host) == (0, 0)  # evicted by B: C misses


def test_an_evicted_block_is_found_on_the_host_tier_and_copied_back():
    r = _evicting(host_blocks=16)
    assert (r.hit_tokens_gpu, r.hit_tokens_host) == (0, 64)
    c_prefill = next(t for t in r.trace if t[0] >= 2.0)
    assert c_prefill[1] == pytest.approx(0.05 + 4 * 1e4 / 1e6)  # a 50 ms step plus 4 blocks × 10 ms


def test_a_second_turn_hits_the_first_turns_prompt_and_answer():
    # turn 1: system prompt + a 36-token message, answered with 28 tokens that continue the conversation
    # stream; it ends with 127 tokens of KV (the last token is never fed back), so 7 full blocks. Turn 2
    # re-reads system + the 64 conversation tokens and adds 20 more: its first 7 blocks (112 tokens) hit,
    # including block 6, which holds the end of the message and the start of the answer.
    turn1 = Request(0.0, 100, 28, prefix=(SYSTEM, ("chat", 0, 36)), output_stream=("chat", 36))
    turn2 = Request(5.0, 148, 4, prefix=(SYSTEM, ("chat", 0, 84)))
    r = simulate(Stub(), [turn1, turn2], cached())
    assert r.hit_tokens_gpu == 112


def test_a_closed_loop_client_sends_its_next_request_after_thinking():
    # one client, three requests, 1 s of thinking between an answer and the next question
    reqs = [Request(0.0, 10, 3), Request(0.0, 10, 3, after=0, think_s=1.0), Request(0.0, 10, 3, after=1, think_s=1.0)]
    r = simulate(Stub(), reqs, cfg())
    assert r.e2e_s == pytest.approx((0.07, 0.07, 0.07))
    assert r.queue_s == pytest.approx((0.0, 0.0, 0.0))
    assert r.occupancy[-1][0] == pytest.approx(2 * (0.07 + 1.0) + 0.05 + 0.0, abs=0.011)


def test_closed_loop_throughput_is_clients_over_cycle_time():
    """The interactive response time law (Denning and Buzen 1978): X = N ÷ (R + Z) for N clients that
    think Z between an answer and the next question; 8 clients × 60 requests, Z = 2 s, within 2%."""
    times, _ = _real_times()
    reqs = []
    for c in range(8):
        reqs.append(Request(0.1 * c, 512, 64))
        reqs += [Request(0.0, 512, 64, after=len(reqs) + k - 1, think_s=2.0) for k in range(59)]
    r = simulate(times, reqs, cfg(kv_blocks=20000))
    assert len(r.e2e_s) == 480
    finish = [a + e for a, e in zip(r.arrival_s, r.e2e_s)]
    throughput = len(finish) / (max(finish) - min(r.arrival_s))
    assert throughput == pytest.approx(8 / (statistics.mean(r.e2e_s) + 2.0), rel=0.02)


# ---- workloads ----------------------------------------------------------------------------------------


def test_a_pasted_trace_becomes_requests_sharing_named_prefixes():
    reqs = workload.parse_trace(
        "# t, in, out, prefix, tokens\n0.0, 100, 5, sys, 64\n0.5, 80, 3\n\n1.0, 90, 4, sys, 64\n"
    )
    assert [r.prompt_tokens for r in reqs] == [100, 80, 90]
    assert reqs[0].prefix == reqs[2].prefix and reqs[1].prefix == ()
    r = simulate(Stub(), reqs, cached())
    assert r.hit_tokens_gpu == 64


@pytest.mark.parametrize(
    "text, says",
    [
        ("", "no requests"),
        ("0, 10", "line 1: expected"),
        ("0, 10, x", "whole numbers"),
        ("1, 10, 2\n0.5, 10, 2", "line 2: arrivals"),
        ("0, 10, 2, p, 11", "prefix tokens"),
    ],
)
def test_a_bad_trace_names_the_line_and_the_rule(text, says):
    with pytest.raises(InputError, match=says) as err:
        workload.parse_trace(text)
    assert err.value.field == "trace"


def test_conversations_reuse_every_earlier_turn():
    draws = [(1.0, 50, 30)] * 3  # three chats, 50-token messages, 30-token answers
    reqs = workload.conversations(draws, 1.0, turns=4, think_s=5.0, system_tokens=64)
    assert [r.prompt_tokens for r in reqs[:4]] == [114, 194, 274, 354]
    r = simulate(Stub(), reqs, cached())
    assert len(r.e2e_s) == 12
    # turn 2..4 of each chat find the earlier turns cached; only the first turns miss (but share the system)
    assert r.hit_tokens_gpu > 0.6 * r.prompt_tokens


def test_open_loop_cuts_a_shared_prefix_to_short_prompts():
    reqs = workload.open_loop([(1.0, 10, 2), (1.0, 100, 2)], 2.0, prefix=(("system", 0, 64),))
    assert [r.arrival_s for r in reqs] == [0.5, 1.0]
    assert reqs[0].prefix == (("system", 0, 10),) and reqs[1].prefix == (("system", 0, 64),)


def test_vllm_v0_prefills_alone_and_decodes_stall():
    # request 1 arrives while 0 decodes: V0 runs 1's prefill as a step of its own (0 gets no token in
    # it); V1 (mixed) runs 0's decode in the same step as 1's prefill
    reqs = [Request(0.0, 10, 5), Request(0.055, 10, 2)]
    v0 = simulate(Stub(), reqs, cfg(mixed_batches=False, chunked_prefill=False, trace_steps=100))
    v1 = simulate(Stub(), reqs, cfg(chunked_prefill=False, schedule_ahead=False, trace_steps=100))  # steps aligned
    assert v0.trace[2][2] == ((1, 10),) and v1.trace[2][2] == ((0, 1), (1, 10))
    assert v0.e2e_s[0] == pytest.approx(v1.e2e_s[0] + 0.01)  # one step longer for request 0


def test_sglang_reads_new_requests_every_recv_interval_decode_steps():
    # SGLang's --scheduler-recv-interval 5 (scheduler_recv_skipper.py): 0's prefill step (to 0.05) makes the next
    # read immediate (it finds nothing); 1 arrives at 0.055, during the first decode step, and is read only after
    # the fifth (0.10), so it prefills 0.10-0.15 where every-step reading would prefill it 0.06-0.11
    reqs = [Request(0.0, 10, 20), Request(0.055, 10, 2)]
    sglang = dict(mixed_batches=False, chunked_prefill=False)
    skipping = simulate(Stub(), reqs, cfg(recv_interval_steps=5, **sglang))
    every_step = simulate(Stub(), reqs, cfg(**sglang))
    assert skipping.ttft_s[1] == pytest.approx(0.15 - 0.055)
    assert every_step.ttft_s[1] == pytest.approx(0.11 - 0.055)


def test_an_idle_engine_reads_an_arrival_at_once_whatever_the_recv_interval():
    reqs = [Request(0.0, 10, 3), Request(1.0, 10, 3)]
    r = simulate(Stub(), reqs, cfg(recv_interval_steps=30))
    assert r.ttft_s == pytest.approx((0.05, 0.05))


def test_stretches_match_step_by_step_with_a_recv_interval():
    times, _ = _real_times()
    reqs = _poisson(20.0, 200, 512, 128)
    sglang = dict(kv_blocks=20000, recv_interval_steps=10, mixed_batches=False, chunked_prefill=False)
    fast = simulate(times, reqs, cfg(**sglang))
    slow = simulate(times, reqs, cfg(trace_steps=10**9, **sglang))
    assert fast.steps == slow.steps
    for a, b in ((fast.e2e_s, slow.e2e_s), (fast.ttft_s, slow.ttft_s)):
        assert statistics.mean(a) == pytest.approx(statistics.mean(b), rel=0.005)
    every_step = simulate(times, reqs, cfg(**{**sglang, "recv_interval_steps": 1}))
    assert statistics.mean(fast.ttft_s) > statistics.mean(every_step.ttft_s)


def test_an_arrival_is_read_on_time_while_the_batch_is_full():
    # two sequences fill the batch; 2 arrives at 0.055 and is read after the fifth decode step (0.10), so it is
    # admitted as soon as 0 finishes (after step 19, 0.24) and its prefill ends at 0.29; left unread until the
    # first read after 0 finishes it would start later. A stretch and single steps must agree.
    reqs = [Request(0.0, 10, 20), Request(0.0, 10, 40), Request(0.055, 10, 2)]
    sglang = dict(mixed_batches=False, chunked_prefill=False, max_num_seqs=2, recv_interval_steps=5)
    fast = simulate(Stub(), reqs, cfg(**sglang))
    slow = simulate(Stub(), reqs, cfg(trace_steps=10**9, **sglang))
    assert fast.ttft_s == pytest.approx(slow.ttft_s)
    assert fast.ttft_s[2] == pytest.approx(0.29 - 0.055)


def test_a_step_planned_ahead_sees_an_arrival_a_step_later():
    # 1 arrives at 0.055, during the decode step 0.05-0.06. Planned as each step ends, it joins the next step
    # (0.06-0.11); planned while the step before runs (vLLM's async scheduling, SGLang's overlap scheduler), the
    # step from 0.06 was planned at 0.05, before it came, so it joins the one after (0.07-0.12)
    reqs = [Request(0.0, 10, 20), Request(0.055, 10, 2)]
    assert simulate(Stub(), reqs, cfg(schedule_ahead=False)).ttft_s[1] == pytest.approx(0.11 - 0.055)
    assert simulate(Stub(), reqs, cfg()).ttft_s[1] == pytest.approx(0.12 - 0.055)  # the default, as vLLM V1


def test_an_arrival_not_yet_seen_by_the_plan_is_counted_as_waiting():
    # 1 arrives at 0.055; the step from 0.06 was planned at 0.05 without it, yet it is in the system: the trace and
    # the occupancy show it waiting there, and it runs in the step from 0.07
    reqs = [Request(0.0, 10, 20), Request(0.055, 10, 2)]
    r = simulate(Stub(), reqs, cfg(trace_steps=10))
    at = {round(start, 6): (plan, waiting) for start, _took, plan, waiting in r.trace}
    assert at[0.06] == (((0, 1),), (1,))
    assert (1, 10) in at[0.07][0]
    assert [o[2] for o in r.occupancy if round(o[0], 6) == 0.06] == [1]


def test_a_closed_loop_request_sent_after_an_answer_waits_one_step_or_two_planned_ahead():
    # 0 ends at 0.07; its user's next request (2) comes 1 ms later, after the engine began the step 0.07-0.08:
    # planned as steps end, 2 joins the step from 0.08; planned ahead, that step was planned at 0.07 and 2 joins
    # the one from 0.09
    reqs = [Request(0.0, 10, 3), Request(0.0, 10, 10), Request(0.0, 10, 2, after=0, think_s=0.001)]
    assert simulate(Stub(), reqs, cfg(schedule_ahead=False)).ttft_s[2] == pytest.approx(0.13 - 0.071)
    assert simulate(Stub(), reqs, cfg()).ttft_s[2] == pytest.approx(0.14 - 0.071)


def test_planning_ahead_is_the_default_of_the_engine_each_config_models():
    # vLLM V1 schedules asynchronously by default (v0.14.0 on); V0's prefill-first steps and static batching did not
    assert cfg().plans_ahead and cfg(chunked_prefill=False).plans_ahead
    assert not cfg(mixed_batches=False, chunked_prefill=False).plans_ahead
    assert not cfg(batching="static").plans_ahead
    assert not replace(cfg(), batching="static").plans_ahead  # resolved when read, so a copy follows its fields
    assert cfg(mixed_batches=False, chunked_prefill=False, schedule_ahead=True).plans_ahead  # SGLang's overlap
    assert not cfg(schedule_ahead=False).plans_ahead


def test_an_idle_engine_planning_ahead_plans_an_arrival_at_once():
    reqs = [Request(0.0, 10, 3), Request(1.0, 10, 3)]
    r = simulate(Stub(), reqs, cfg(schedule_ahead=True))
    assert r.ttft_s == pytest.approx((0.05, 0.05))


def test_planning_ahead_no_step_begins_at_or_after_until():
    # run(until) stops before the first step that would begin at or after `until`: the decode stretch from 0.05
    # would run to 0.12 for 1's arrival at 0.105 (seen one step late) but is cut at the step ending 0.11
    engine = Engine(Stub(), [Request(0.0, 10, 20), Request(0.105, 10, 2)], cfg(schedule_ahead=True), (0, 2))
    engine.run(0.108)
    assert engine.now == pytest.approx(0.11)


def test_with_a_recv_interval_no_step_begins_at_or_after_until():
    # 1 arrives at 0.055 and would be read after the fifth decode step from 0.05 (0.10); run(0.075) cuts the
    # stretch at the step ending 0.08 instead
    reqs = [Request(0.0, 10, 20), Request(0.055, 10, 2)]
    engine = Engine(Stub(), reqs, cfg(recv_interval_steps=5, mixed_batches=False, chunked_prefill=False), (0, 2))
    engine.run(0.075)
    assert engine.now == pytest.approx(0.08)


@pytest.mark.parametrize("batching", ["continuous", "static"])
def test_a_full_batch_stretch_stops_at_until_too(batching):
    # one seat, taken by 0 (decoding 0.05-0.24): 1 cannot join, yet run(0.085) must stop before the first step
    # that would begin at or after 0.085, so the stretch ends with the step 0.08-0.09
    reqs = [Request(0.0, 10, 20), Request(0.001, 10, 2)]
    engine = Engine(Stub(), reqs, cfg(max_num_seqs=1, batching=batching), (0, 2))
    engine.run(0.085)
    assert engine.now == pytest.approx(0.09)


@pytest.mark.parametrize("recv_interval_steps", [1, 10])
def test_stretches_match_step_by_step_when_planning_ahead(recv_interval_steps):
    times, _ = _real_times()
    reqs = _poisson(20.0, 200, 512, 128)
    server = dict(kv_blocks=20000, schedule_ahead=True, recv_interval_steps=recv_interval_steps)
    fast = simulate(times, reqs, cfg(**server))
    slow = simulate(times, reqs, cfg(trace_steps=10**9, **server))
    assert fast.steps == slow.steps
    for a, b in ((fast.e2e_s, slow.e2e_s), (fast.ttft_s, slow.ttft_s)):
        assert statistics.mean(a) == pytest.approx(statistics.mean(b), rel=0.005)
    at_once = simulate(times, reqs, cfg(**{**server, "schedule_ahead": False}))
    assert statistics.mean(fast.ttft_s) > statistics.mean(at_once.ttft_s)


def test_a_recv_interval_below_one_is_refused():
    with pytest.raises(ValueError, match="recv_interval_steps"):
        cfg(recv_interval_steps=0)


def test_reserving_the_whole_length_never_preempts():
    reqs = [Request(0.0, 4, 6), Request(0.0, 4, 6)]
    r = simulate(Stub(), reqs, cfg(kv_blocks=5, block_size_tokens=4, reserve_full_length=True))
    assert r.preemptions == (0, 0)
    assert r.queue_s[1] == pytest.approx(0.05 + 5 * 0.01)  # waits for request 0's 3 blocks to come back


def test_a_noisy_length_predictor_costs_shortest_job_first_its_edge():
    times, _ = _real_times()
    reqs = [Request(r.arrival_s, 256, r.output_tokens) for r in _poisson(9.0, 600, 256, 256, seed=5)]
    mean_e2e = {}
    for label, cv in (("exact", 0.0), ("noisy", 2.0)):
        guessed = workload.with_predictions(reqs, cv, seed=1)
        mean_e2e[label] = statistics.mean(simulate(times, guessed, cfg(max_num_seqs=4, policy="sjf")).e2e_s)
    fcfs = statistics.mean(simulate(times, reqs, cfg(max_num_seqs=4)).e2e_s)
    assert mean_e2e["exact"] < mean_e2e["noisy"] < fcfs * 1.05


def test_percentiles_carry_an_order_statistic_interval():
    from calculators.engine.metrics import percentile_with_ci

    values = [float(i) for i in range(1, 1001)]
    p99, lo, hi = percentile_with_ci(values, 99)
    assert p99 == 990.0 and lo < 990.0 < hi <= 1000.0
    assert percentile_with_ci(values[:50], 99)[2] == float("inf")  # 50 requests cannot bound a p99


def test_a_sequence_holding_cached_blocks_is_not_preempted_for_blocks_it_has():
    # 0 holds its 4 system-prompt blocks as cached ones while 1 prefills in 8-token chunks, so 0's decodes
    # go through the general path; the pool (18 blocks) holds both at their peak (7 + 11), so nobody is
    # preempted (counting 0's own blocks only asked for 4 it already held, and preempted 1 once)
    reqs = [Request(0.0, 16, 10, prefix=(("system", 0, 16),)), Request(0.06, 40, 2)]
    r = simulate(Stub(), reqs, cached(kv_blocks=18, block_size_tokens=4, max_num_batched_tokens=8))
    assert r.preemptions == (0, 0)


def test_sglang_chunks_a_long_prompt_in_steps_of_its_own_and_the_decodes_wait():
    # SGLang 0.5.23's default (chunked prefill on, mixed chunks off: EngineConfig): request 1's 300-token prompt,
    # seen at 0.06 while 0 decodes, is prefilled in three 100-token chunks, each a step of its own (0.06-0.21: 0 gets
    # no token in them, a gap of 0.16 s); vLLM V1 runs 0's decode beside every chunk (99 + 99 + 99 + 3 tokens: four
    # 50 ms steps to 0.26, 0 getting a token in each)
    reqs = [Request(0.0, 10, 10), Request(0.055, 300, 2)]
    budget = dict(max_num_batched_tokens=100, schedule_ahead=False, trace_steps=100)
    sglang = simulate(Stub(), reqs, cfg(mixed_batches=False, chunked_prefill=True, **budget))
    v1 = simulate(Stub(), reqs, cfg(**budget))
    chunks = [ran for _, _, ran, _ in sglang.trace if any(i == 1 and n > 1 for i, n in ran)]
    assert chunks == [((1, 100),), ((1, 100),), ((1, 100),)]
    assert sglang.ttft_s[1] == pytest.approx(0.21 - 0.055) and v1.ttft_s[1] == pytest.approx(0.26 - 0.055)
    # 0's last 8 tokens after the chunks (0.22-0.29); under V1 its last 5 after the fourth chunk step (0.27-0.30)
    assert sglang.e2e_s[0] == pytest.approx(0.29) and v1.e2e_s[0] == pytest.approx(0.30)
    assert max(sglang.gap_values_s) == pytest.approx(0.16) and max(v1.gap_values_s) == pytest.approx(0.05)


def test_sglang_continues_the_chunked_prompt_before_admitting_the_next():
    # two long prompts at once, a budget of 100: the first is chunked to the end before the second starts
    reqs = [Request(0.0, 250, 2), Request(0.0, 250, 2)]
    sglang = cfg(mixed_batches=False, chunked_prefill=True, max_num_batched_tokens=100, trace_steps=20)
    r = simulate(Stub(), reqs, sglang)
    plans = [dict(ran) for _, _, ran, _ in r.trace[:5]]
    assert plans == [{0: 100}, {0: 100}, {0: 50, 1: 50}, {1: 100}, {1: 100}]

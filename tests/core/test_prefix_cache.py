"""The prefix-cache calculator on the engine: cases whose hit counts can be worked out by hand, and
directions that could fail (a hit must not slow a request, a smaller pool must not hit more)."""

from __future__ import annotations

import pytest

from calculators import InputError, run
from calculators.calcs import prefix_cache as pc
from calculators.schema import validate

SMALL = {"num_requests": 40}


def test_no_shared_prefix_means_no_hits_and_the_same_latency():
    out = run("prefix_cache", {**SMALL, "shared_share": 0.0})
    assert out["hit_rate"] == 0.0
    assert out["ttft_p50_on_s"] == pytest.approx(out["ttft_p50_off_s"])
    assert out["capacity_on_requests_per_s"] == pytest.approx(out["capacity_off_requests_per_s"])


def test_one_system_prompt_hits_its_whole_blocks_for_every_request_after_the_first():
    """S = 2,000 tokens is 125 full 16-token blocks: at 4 requests/s each request finds the first one's
    blocks (a prefill takes tens of ms), so hits = (n − 1) × 2,000 of all prompt tokens, exactly."""
    v = {**SMALL, "shared_share": 1.0, "system_prompt_tokens": 2000}
    out = run("prefix_cache", v)
    reqs = pc.requests(validate(pc.SCHEMA["inputs"], v))
    prompts = sum(r.prompt_tokens for r in reqs)
    assert out["hit_rate"] == pytest.approx((len(reqs) - 1) * 2000 / prompts)
    assert out["hit_rate_host"] == 0.0


def test_a_partial_block_of_the_system_prompt_is_not_shared():
    v = {**SMALL, "shared_share": 1.0, "system_prompt_tokens": 2008}  # 125 blocks and 8 tokens
    out = run("prefix_cache", v)
    reqs = pc.requests(validate(pc.SCHEMA["inputs"], v))
    assert out["hit_rate"] == pytest.approx((len(reqs) - 1) * 2000 / sum(r.prompt_tokens for r in reqs))


def test_the_cache_cuts_ttft_and_raises_capacity_and_the_cost_follows_capacity():
    out = run("prefix_cache", SMALL)
    assert out["ttft_p50_on_s"] < out["ttft_p50_off_s"]
    assert out["ttft_p99_on_s"] <= out["ttft_p99_off_s"]
    assert out["capacity_gain"] > 1.0
    # cost per request = price × GPUs ÷ capacity: the cost ratio is the capacity ratio inverted
    ratio = out["usd_per_m_requests_off"] / out["usd_per_m_requests_on"]
    assert ratio == pytest.approx(out["capacity_gain"], rel=1e-9)
    # $2 per GPU-hour, one GPU: 10⁶ requests cost 2 ÷ 3,600 ÷ capacity × 10⁶ dollars
    assert out["usd_per_m_requests_on"] == pytest.approx(2 / 3600 / out["capacity_on_requests_per_s"] * 1e6)


def test_eviction_a_small_pool_loses_hits_and_a_host_tier_wins_some_back():
    """Twenty system prompts of 4,000 tokens (250 blocks each, 80,000 tokens in all) against a pool of
    20,000 tokens: most prefixes are evicted before they are asked for again."""
    base = {
        **SMALL,
        "num_requests": 120,
        "shared_share": 1.0,
        "num_prefixes": 20,
        "system_prompt_tokens": 4000,
        "request_rate_per_s": 8.0,
    }
    full = run("prefix_cache", base)
    small = run("prefix_cache", {**base, "kv_pool_cap_tokens": 20000})
    tiered = run("prefix_cache", {**base, "kv_pool_cap_tokens": 20000, "host_cache_gib": 64.0})
    assert small["hit_rate"] < full["hit_rate"]
    assert tiered["hit_rate_host"] > 0.0
    assert tiered["hit_rate"] > small["hit_rate"]
    # The bound is every request after the first of its prompt hitting that prompt's whole blocks. The
    # full pool need not reach it (two requests opening a prompt not yet cached can prefill it at once),
    # so a queued, tiered run may hit as much as the full pool or slightly more, never more than this.
    requests = pc.requests(validate(pc.SCHEMA["inputs"], base))
    seen, ideal = set(), 0
    for r in requests:
        for stream, _, length in r.prefix:
            ideal += (min(length, r.prompt_tokens - 1) // 16) * 16 if stream in seen else 0
            seen.add(stream)
    bound = ideal / sum(r.prompt_tokens for r in requests)
    assert max(full["hit_rate"], tiered["hit_rate"]) <= bound + 1e-12


def test_conversations_hit_more_the_more_turns_they_have():
    one = run("prefix_cache", {**SMALL, "shape": "chat", "turns": 1, "system_prompt_tokens": 0})
    four = run("prefix_cache", {**SMALL, "shape": "chat", "turns": 4, "system_prompt_tokens": 0})
    assert one["hit_rate"] == 0.0
    assert four["hit_rate"] > 0.3


def test_a_model_whose_weights_fill_the_gpu_names_the_gpu_count():
    with pytest.raises(InputError) as exc:
        run("prefix_cache", {**SMALL, "model": "llama-3.1-405b", "weight_dtype": "bf16"})
    assert exc.value.field == "num_gpus"


def test_a_pool_cap_below_one_block_names_the_cap_not_the_gpu_count():
    with pytest.raises(InputError) as exc:
        run("prefix_cache", {**SMALL, "kv_pool_cap_tokens": 10})
    assert exc.value.field == "kv_pool_cap_tokens"


def test_percentile_plot_is_ordered_and_matches_the_outputs():
    out = run("prefix_cache", SMALL)
    s = out["series"]["ttft_by_percentile"]
    on = s["y"][0]["values"]
    assert on == sorted(on)
    assert on[s["x"]["values"].index(50)] == pytest.approx(out["ttft_p50_on_s"] * 1e3)


def test_blocks_released_together_are_evicted_tail_first_as_vllm_frees_them():
    """vLLM frees a request's blocks in reverse (kv_cache_utils.FreeKVCacheBlockQueue: of blocks last
    used together, the chain's tail goes first), so evicting one block keeps the rest of the prefix."""
    from calculators.engine.prefix import PrefixCache

    cache = PrefixCache()
    chain = [101, 102, 103]
    for name in chain:
        cache.add(name)
    cache.release(chain)
    cache.evict(1)
    assert cache.match(chain) == (2, 0)

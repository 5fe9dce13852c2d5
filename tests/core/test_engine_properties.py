"""Invariants of the engine simulator over random small workloads and settings (Hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from calculators.engine.config import EngineConfig, Request
from calculators.engine.core import Engine
from calculators.engine.result import summarise


class Stub:
    # one token per decode step, as engine.steps.StepTimes without speculation
    speculation = None
    pool_charge = None  # every layer keeps every token, no state (StepTimes.pool_charge)

    def tokens_per_step(self, batch):
        return 1.0

    def decode_tokens(self, batch):
        return 1

    def decode(self, batch, context_sum, speculative=True):
        return 0.01 + 1e-6 * context_sum

    def mixed(self, decodes, context_sum, chunks, speculative=True):
        return 0.02 + 1e-6 * context_sum + 1e-5 * sum(length for _, length in chunks)


request = st.builds(
    lambda gap, p, o, prio, shared: (gap, p, o, prio, shared),
    st.floats(0.0, 0.2),
    st.integers(1, 80),
    st.integers(1, 40),
    st.integers(0, 2),
    st.sampled_from([0, 16, 40]),
)
config = st.fixed_dictionaries(
    {
        "kv_blocks": st.integers(4, 40),
        "block_size_tokens": st.sampled_from([4, 16]),
        "max_num_seqs": st.integers(1, 8),
        "max_num_batched_tokens": st.integers(8, 200),
        "chunked_prefill": st.booleans(),
        "policy": st.sampled_from(["fcfs", "priority", "sjf"]),
        "preemption": st.sampled_from(["recompute", "swap"]),
        "ageing_s": st.sampled_from([0.0, 0.5]),
        "max_waiting": st.sampled_from([0, 3]),
        "max_predicted_ttft_s": st.sampled_from([0.0, 0.1]),
        "prefix_caching": st.booleans(),
        "mixed_batches": st.booleans(),
        "reserve_full_length": st.booleans(),
    }
)


def _requests(rows):
    out, t = [], 0.0
    for gap, p, o, prio, shared in rows:
        t += gap
        prefix = (("system", 0, min(shared, p)),) if shared else ()
        out.append(Request(t, p, o, priority=prio, prefix=prefix))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(request, min_size=1, max_size=25), config, st.booleans())
def test_every_request_ends_and_the_pool_balances(rows, settings_, static):
    extra = {"swap_bytes_per_s": 1e9, "kv_bytes_per_block": 1e5} if settings_["preemption"] == "swap" else {}
    if static:
        settings_ = dict(settings_, prefix_caching=False)
    cfg = EngineConfig(batching="static" if static else "continuous", **settings_, **extra)
    reqs = _requests(rows)
    engine = Engine(Stub(), reqs, cfg, (0, len(reqs)))
    engine.run()
    r = summarise(engine)
    assert len(r.e2e_s) + r.rejected == len(reqs)  # nothing is lost or stuck
    assert all(0 <= q <= t <= e for q, t, e in zip(r.queue_s, r.ttft_s, r.e2e_s))
    assert all(w > 0 for w in r.gap_weights) and all(v > 0 for v in r.gap_values_s)
    pool = engine.pool
    assert all(b == 0 for b in pool.blocks) and all(not h for h in pool.held)  # every block given back
    evictable = len(pool.cache.evictable) if pool.cache else 0
    assert pool.free == cfg.kv_blocks and evictable <= cfg.kv_blocks
    if pool.cache:
        assert all(count == 0 for count in pool.cache.refs.values())
    assert sum(r.gap_weights) == sum(o - 1 for o in (x.output_tokens for x in reqs) if o > 1) - sum(
        x.output_tokens - 1 for i, x in enumerate(reqs) if engine.state[i] == "rejected" and x.output_tokens > 1
    )

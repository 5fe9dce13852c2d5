"""Static against continuous batching on the engine simulator (calculators/calcs/batching.py).

Orca (Yu et al., OSDI 2022, §5) reports iteration-level scheduling beating request-level batching on
throughput at the same latency; the direction is what the simulator must reproduce (the size depends
on the length spread, which the tests below vary)."""

import math

import pytest

from calculators import run
from calculators.calcs import batching
from calculators.calcs.steptime import StepModel, deployment
from calculators.engine.config import Request
from calculators.errors import InputError
from calculators.schema import validate


def _run(**kw):
    return run("batching", kw)


def test_continuous_beats_static_on_throughput_and_tail_ttft():
    r = _run()
    assert r["continuous_output_tokens_per_s"] > 1.2 * r["static_output_tokens_per_s"]
    assert r["continuous_ttft_p99_s"] * 5 < r["static_ttft_p99_s"]
    assert r["throughput_ratio"] == pytest.approx(r["continuous_output_tokens_per_s"] / r["static_output_tokens_per_s"])


def test_equal_lengths_arriving_together_leave_nothing_to_gain():
    """All requests at once, one batch that holds them all, every output the same length: static and
    continuous run the same steps, so throughput and TTFT agree."""
    r = _run(
        arrivals="together",
        num_requests=16,
        input_distribution="fixed",
        output_distribution="fixed",
        output_tokens_mean=64,
        max_num_seqs=16,
        max_num_batched_tokens=16 * 512,
    )
    assert r["continuous_output_tokens_per_s"] == pytest.approx(r["static_output_tokens_per_s"], rel=0.01)
    assert r["continuous_ttft_p99_s"] == pytest.approx(r["static_ttft_p99_s"], rel=0.01)
    assert r["static_steps"] == r["continuous_steps"] == 64


def test_static_keeps_requests_longer_than_the_token_budget():
    """Static batching prefills its batch in one step whatever the budget: a request longer than the budget
    (here every prompt, 10,000 tokens against 8,192) must run under static batching too, not be rejected
    from the static run alone (which would compare the two batchings on different requests)."""
    r = _run(input_distribution="fixed", input_tokens_mean=10_000, num_requests=20, request_rate_per_s=1.0)
    assert r["notes"] == []
    assert r["static_steps"] > 0 and r["static_output_tokens_per_s"] > 0


def test_a_wider_length_spread_widens_the_gap():
    narrow = _run(output_tokens_cv=0.1, arrivals="together", num_requests=64, max_num_seqs=16)
    wide = _run(output_tokens_cv=1.5, arrivals="together", num_requests=64, max_num_seqs=16)
    assert wide["throughput_ratio"] > narrow["throughput_ratio"] > 0.99


def test_the_timeline_marks_prefill_decode_and_waiting_by_hand():
    reqs = [Request(0.0, 100, 3), Request(0.0, 50, 2), Request(0.0, 10, 2)]
    trace = [  # (start, took, plan, waiting)
        (0.0, 0.05, ((0, 60),), (1, 2)),  # request 0's first chunk; 1 and 2 wait
        (0.05, 0.05, ((0, 40), (1, 50)), (2,)),  # 0 finishes its prompt, 1 prefills whole
        (0.10, 0.01, ((0, 1), (1, 1)), (2,)),  # both decode
    ]
    xs, states = batching.timeline(trace, reqs, 3)
    assert xs == [0.0, 0.0, 0.0, 50.0, 50.0, 50.0, 100.0, 100.0, 100.0]
    assert states["prefill"] == [1, None, None, 1, 2, None, None, None, None]
    assert states["waiting"] == [None, 2, 3, None, None, 3, None, None, 3]
    assert states["decode"] == [None, None, None, None, None, None, 1, 2, None]
    xs, _ = batching.timeline(trace, reqs, 1)  # only request 0 shown
    assert xs == [0.0, 50.0, 100.0]


def test_mean_batch_is_time_weighted():
    occ = [(0.0, 2, 0, 0), (1.0, 4, 0, 0), (4.0, 0, 0, 0)]  # 2 for 1 s, 4 for 3 s
    assert batching.mean_batch(occ) == pytest.approx((2 * 1 + 4 * 3) / 4)


def test_step_time_curve_weights_flat_kv_linear():
    r = _run()
    plot = r["series"]["step_time_vs_batch"]
    xs = plot["x"]["values"]
    total, weights, kv = (y["values"] for y in plot["y"])
    assert max(weights) == pytest.approx(min(weights), rel=1e-3)  # one embedding row per token on top
    for b, k in zip(xs, kv):
        assert k == pytest.approx(kv[0] * b / xs[0], rel=1e-9)
    assert all(t >= w + k - 1e-9 or t >= w for t, w, k in zip(total, weights, kv))
    assert total == sorted(total)
    dep = deployment(validate(batching.SCHEMA["inputs"], {}))
    assert r["step_time_batch_64_s"] == pytest.approx(StepModel(dep).decode(64, r["mean_context_tokens"]).time_s)
    assert 0.5 < r["weights_share_batch_64"] < 1.0  # Llama 3.1 8B at ~600 tokens: weights still dominate


def test_a_per_step_overhead_slows_both():
    base, slow = _run(), _run(step_overhead_ms=2.0)
    for kind in batching.KINDS:
        assert slow[f"{kind}_tpot_p50_s"] > base[f"{kind}_tpot_p50_s"] + 0.0019


def test_every_output_is_finite_and_the_plots_line_up():
    r = _run()
    for o in batching.SCHEMA["outputs"]:
        assert math.isfinite(r[o["key"]]), o["key"]
    for plot in r["series"].values():
        for y in plot["y"]:
            assert len(y["values"]) == len(plot["x"]["values"])


@pytest.mark.parametrize("field, value", [("num_requests", 1), ("max_num_seqs", 0), ("timeline_requests", 99)])
def test_bad_input_names_the_field(field, value):
    with pytest.raises(InputError) as e:
        _run(**{field: value})
    assert e.value.field == field

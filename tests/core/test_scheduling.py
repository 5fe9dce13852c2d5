"""Scheduling and shedding calculators (calcs/scheduling.py, calcs/shedding.py, calcs/scheduler_sim.py):
policies on the same seeded requests on the engine simulator, hand cases and properties that could fail."""

import pytest

from calculators import run
from calculators.calcs import scheduler_sim
from calculators.errors import InputError
from calculators.schema import validate

POLICIES = tuple(scheduler_sim.POLICY_NAMES)


def _setup(**kw):
    v = validate(scheduler_sim.fields(5.5, 50), kw)
    return v, scheduler_sim.setup(v)


def test_defaults_run_and_every_share_is_a_share():
    for name in ("scheduling", "shedding"):
        r = run(name, {})
        shares = [v for k, v in r.items() if k.startswith(("attainment", "high_attainment", "rejected_share"))]
        assert shares and all(0.0 <= s <= 1.0 for s in shares)
        assert r["capacity_requests_per_s"] > 0


def test_with_an_empty_queue_the_order_does_not_matter():
    # At 20% of capacity no two requests wait at once in this draw, so every policy gives the same schedule
    v, s = _setup(num_requests=40)
    runs = [scheduler_sim.run(v, s, p, 0.2 * s.capacity) for p in POLICIES]
    assert all(r["queue_mean"] == runs[0]["queue_mean"] and r["ttft_p99"] == runs[0]["ttft_p99"] for r in runs)


def test_oracle_sjf_waits_less_on_average_than_fcfs_in_overload():
    # Shortest job first minimises the mean wait of a single queue; here with an oracle predictor at 140% load
    for seed in (0, 1, 2):
        v, s = _setup(num_requests=150, seed=seed, predictor_error_cv=0.0)
        fcfs, sjf = (scheduler_sim.run(v, s, p, 1.4 * s.capacity) for p in ("fcfs", "sjf"))
        assert sjf["queue_mean"] < fcfs["queue_mean"]


def test_sjf_starves_the_long_and_ageing_bounds_the_longest_wait():
    # 200 requests at 140% load: SJF's longest wait exceeds FCFS's; strong ageing brings it back down
    v, s = _setup(num_requests=200, ageing_s=0.0005)
    rate = 1.4 * s.capacity
    fcfs, sjf, aged = (scheduler_sim.run(v, s, p, rate) for p in ("fcfs", "sjf", "sjf_ageing"))
    assert sjf["queue_max"] > 1.5 * fcfs["queue_max"]
    assert aged["queue_max"] < sjf["queue_max"]


def test_ageing_so_strong_that_arrival_decides_is_fcfs():
    # key = predicted tokens + arrival ÷ ageing_s: with ageing_s tiny the arrival term decides (no preemptions here)
    v, s = _setup(num_requests=60, ageing_s=1e-9)
    rate = 1.3 * s.capacity
    fcfs, aged = (scheduler_sim.run(v, s, p, rate) for p in ("fcfs", "sjf_ageing"))
    assert fcfs["preemptions"] == 0
    assert aged["queue_mean"] == pytest.approx(fcfs["queue_mean"], rel=1e-12)


def test_priority_serves_the_high_class_better_than_fcfs():
    r = run("scheduling", {"num_requests": 120, "request_rate_per_s": 8.0})
    assert r["high_attainment_priority"] > r["high_attainment_fcfs"]


def test_shedding_everything_arriving_at_once_by_hand():
    # At 10^6 requests/s the first arrival starts a step and the other 49 arrive during it; at the next turn
    # max_waiting of them join the queue and the rest are rejected: 49 − 4 = 45 of 50
    r = run("shedding", {"request_rate_per_s": 1e6, "max_waiting": 4})
    assert r["rejected_share_shed"] == pytest.approx(45 / 50)
    assert r["attainment_shed"] <= 1 - r["rejected_share_shed"] + 1e-12


def test_goodput_is_rate_times_attainment_and_no_threshold_sheds_nothing():
    r = run("shedding", {"max_waiting": 0})
    assert r["rejected_share_shed"] == 0.0
    assert r["goodput_shed_requests_per_s"] == pytest.approx(8.0 * r["attainment_shed"])
    assert r["goodput_no_shed_requests_per_s"] == r["goodput_shed_requests_per_s"]


def test_shedding_in_overload_raises_goodput():
    # 140% of capacity: without shedding the queue (and TTFT) grows for the whole run
    r = run("shedding", {"num_requests": 150})
    assert r["goodput_shed_requests_per_s"] > r["goodput_no_shed_requests_per_s"]
    assert r["ttft_p99_served_shed_s"] < r["ttft_p99_no_shed_s"]


def test_a_worse_predictor_waits_longer_but_beats_fcfs_here():
    r = run("shedding", {"num_requests": 200})
    queue = dict(zip(*(lambda s: (s["x"]["values"], s["y"][0]["values"]))(r["series"]["predictor_queue"])))
    assert queue[0.0] < queue[1.0] < queue[4.0] < r["queue_mean_fcfs_s"]


def test_capacity_grows_with_the_running_sequence_cap():
    caps = [
        scheduler_sim.setup(validate(scheduler_sim.fields(5.5, 50), {"max_num_seqs": c})).capacity for c in (4, 8, 16)
    ]
    assert caps[0] < caps[1] < caps[2]


def test_the_same_inputs_give_the_same_result_warm_or_cold():
    first = run("scheduling", {"seed": 7})
    scheduler_sim._capacities.clear()
    assert run("scheduling", {"seed": 7}) == first


@pytest.mark.parametrize(
    "name,field,value",
    [("scheduling", "max_num_seqs", 0), ("shedding", "max_waiting", -1), ("scheduling", "predictor_error_cv", 5.0)],
)
def test_bad_input_names_its_field(name, field, value):
    with pytest.raises(InputError) as e:
        run(name, {field: value})
    assert field in str(e.value)


def test_littles_law_threshold_is_capacity_times_the_ttft_target():
    # A request that finds k waiting waits about k ÷ capacity; k = ⌊capacity × TTFT target⌋
    r = run("shedding", {"ttft_slo_s": 2.0})
    assert r["little_threshold"] == int(r["capacity_requests_per_s"] * 2.0)


def test_predicted_ttft_shedding_rejects_more_as_the_threshold_falls():
    # The engine's max_predicted_ttft_s: prompt tokens waiting ahead plus the arrival's own, at the rate of a
    # full-budget prefill chunk; a lower threshold can only reject more of the same arrivals in this run
    r = run("shedding", {"num_requests": 200})
    plot = r["series"]["ttft_shedding_vs_threshold"]
    rejected = dict(zip(plot["x"]["values"], plot["y"][1]["values"]))
    assert rejected[0.05] > rejected[0.2] > rejected[1.0] > 0
    off = run("shedding", {"num_requests": 200, "max_predicted_ttft_s": 0.0})
    assert off["rejected_share_ttft_shed"] == 0.0 and off["attainment_ttft_shed"] == off["attainment_no_shed"]

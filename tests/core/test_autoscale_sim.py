"""Replicas over time, simulated (engine/fleet.py) and pinned to the fluid model (engine/autoscale.py): the ramp's
clock by hand, one replica at a constant rate against goodput's server run on the same requests, no scale-up under
the target, the scale-up at the first poll past the target plus the lag, the engine stepped in pieces against one
run, and the fluid model against the simulator on the worked example's ramp and on a two-minute one."""

import math

import pytest

from calculators import run
from calculators.calcs import autoscale_ramp
from calculators.calcs.goodput import server, simulation
from calculators.calcs.steptime import deployment
from calculators.engine import fleet
from calculators.engine.autoscale import Ramp, Scaler, run as fluid_run
from calculators.engine.config import Request
from calculators.engine.core import Engine
from calculators.engine.result import summarise
from calculators.engine.run import simulate
from calculators.engine.workload import open_loop
from calculators.errors import InputError
from calculators.schema import validate

# The pin: the worked example's replica and ramp (20 → 60 requests/s) squeezed into two minutes, with a 30 s cold
# start, so that the SLO is at stake and the run stays a few thousand requests.
PIN = {"duration_s": 120.0, "ramp_start_s": 10.0, "ramp_s": 60.0, "lag_s": 30.0}


def _inputs(**kw):
    return validate(autoscale_ramp.SCHEMA["inputs"], kw)


def _setup(v):
    sim = simulation(dict(v, num_requests=autoscale_ramp.NUM_REQUESTS), deployment(v))
    return sim, server(sim.capacity, sim.max_seqs)


def test_ramp_clock_by_hand():
    ramp = Ramp(20, 60, 60, 120, 600)
    assert ramp.arrivals(60) == pytest.approx(1200)
    assert ramp.arrivals(180) == pytest.approx(1200 + (20 + 60) / 2 * 120)
    assert ramp.arrivals(600) == pytest.approx(6000 + 60 * 420)
    for t in (0.0, 30.0, 60.0, 61.0, 120.0, 179.0, 180.0, 400.0):
        assert ramp.time_of(ramp.arrivals(t)) == pytest.approx(t, abs=1e-9)
    down, step = Ramp(60, 20, 10, 30, 100), Ramp(10, 40, 5, 0, 100)
    for t in (0.0, 10.0, 25.0, 40.0, 90.0):
        assert down.time_of(down.arrivals(t)) == pytest.approx(t, abs=1e-9)
    assert step.arrivals(15) == pytest.approx(50 + 400)


def test_one_replica_at_a_constant_rate_is_goodputs_server():
    # one replica that never scales, 30 requests/s for a minute: the same requests through goodput's server in one
    # simulate() run give the same attainment and mean TTFT (the fleet only cuts decode stretches at its meetings)
    v = _inputs()
    sim, cfg = _setup(v)
    ramp = Ramp(30.0, 30.0, 0.0, 0.0, 60.0)
    requests = fleet.ramp_requests(sim.workload, ramp)
    single = open_loop(sim.workload.first(len(requests)), 30.0)
    assert [r.arrival_s for r in requests] == pytest.approx([r.arrival_s for r in single], rel=1e-12)
    trace = fleet.run(sim.times, cfg, requests, autoscale_ramp._replica(v), ramp, Scaler("inflight", 0.3, 15, 60, 1),
                      (0.5, 0.1))  # fmt: skip
    alone = simulate(sim.times, single, cfg)
    met = sum(1 for a, b in zip(alone.ttft_s, alone.tpot_s) if a <= 0.5 and b <= 0.1) / len(single)
    assert trace.requests == len(single) == len(alone.ttft_s)
    assert trace.attainment == pytest.approx(met, abs=0.002)
    assert trace.mean_ttft == pytest.approx(sum(alone.ttft_s) / len(alone.ttft_s), rel=0.01)


def test_no_scale_up_while_the_signal_stays_under_target():
    # 20 requests/s on one replica of 55/s (ρ 0.36) against a target at ρ 0.7: no poll asks for more
    v = _inputs(base_rate_per_s=20.0, peak_rate_per_s=20.0, duration_s=120.0)
    trace = autoscale_ramp.simulated(v)
    assert trace.initial == 1
    assert set(trace.desired) == set(trace.ready) == {1}
    assert autoscale_ramp.first_scale_up(trace.desired, trace.initial) == autoscale_ramp.NO_SCALE_UP


def test_scale_up_at_the_first_poll_past_target_plus_the_lag():
    # a step from 20 to 60 requests/s at t = 20 s, past one replica's 55/s: polls every 15 s, so the first that
    # sees the backlog is at 30 s; the replicas it asks for serve 40 s later, at 70 s
    v = _inputs(base_rate_per_s=20.0, peak_rate_per_s=60.0, ramp_start_s=20.0, ramp_s=0.0, duration_s=100.0,
                sync_s=15.0, lag_s=40.0)  # fmt: skip
    trace = autoscale_ramp.simulated(v)
    assert autoscale_ramp.first_scale_up(trace.desired, trace.initial) == 30.0
    assert trace.ready[69] == 1 < trace.ready[70]
    assert trace.ready[70] == trace.desired[29]


def test_an_engine_stepped_in_pieces_matches_one_run():
    # the fleet's way of running a replica (requests handed over between run(until) calls) against one run over
    # the same requests: the same requests finish, with TTFTs within a step
    v = _inputs()
    sim, cfg = _setup(v)
    requests = open_loop(sim.workload.first(600), 40.0)
    whole = simulate(sim.times, requests, cfg)
    pieces = Engine(sim.times, [], cfg, (0, len(requests)))
    t, k = 0.0, 0
    while k < len(requests):
        t += 0.37
        j = k
        while j < len(requests) and requests[j].arrival_s < t + 0.37:
            j += 1
        pieces.extend(requests[k:j])
        pieces.run(t + 0.37)
        k = j
    pieces.run()
    stepped = summarise(pieces)
    assert stepped.ids == whole.ids
    # one step: 63 decodes and the longest prompt's prefill in it (the longest step this run takes)
    longest = max(r.prompt_tokens for r in requests)
    step_s = sim.times.mixed(63, 63 * 600, [(0, longest)])
    assert max(abs(a - b) for a, b in zip(stepped.ttft_s, whole.ttft_s)) < step_s


def test_extend_keeps_a_request_list_the_same_as_at_construction():
    # extend is how the constructor takes its requests: one list given either way runs the same
    v = _inputs()
    sim, cfg = _setup(v)
    requests = open_loop(sim.workload.first(200), 20.0)
    later = Engine(sim.times, [], cfg, (0, 200))
    later.extend(requests)
    later.run()
    assert summarise(later) == simulate(sim.times, requests, cfg)


def _timeline_within(a: tuple, b: tuple, shift: int) -> bool:
    """Each timeline reaches every count no later than `shift` steps after the other."""
    return all(a[max(0, t - shift)] <= b[t] and b[max(0, t - shift)] <= a[t] for t in range(len(a)))


def _both(v):
    """The simulator's fleet and the fluid model on the same inputs."""
    sim = autoscale_ramp.simulated(v)
    fluid = fluid_run(autoscale_ramp._replica(v), autoscale_ramp._ramp(v), autoscale_ramp._scaler(v, v["headroom"]),
                      v["ttft_slo_s"], v["tpot_slo_s"])  # fmt: skip
    return sim, fluid


def test_fluid_model_is_pinned_to_the_simulator_over_the_worked_examples_first_five_minutes():
    # Measured (commit of this test): attainment 80.1% fluid, 80.4% simulated; both autoscalers first ask for a
    # replica at 120 s. Tolerances: 2 points, one polling period. (Mean TTFT differs more: 0.36 s fluid, 0.51 s
    # simulated, so it is not pinned.)
    v = _inputs(duration_s=300.0)
    sim, fluid = _both(v)
    assert 10_000 < sim.requests < 20_000
    assert fluid.attainment == pytest.approx(sim.attainment, abs=0.02)
    assert fluid.attainment < sim.attainment < v["slo_target_percent"] / 100
    up = autoscale_ramp.first_scale_up
    assert abs(up(sim.desired, sim.initial) - up(fluid.desired, fluid.initial)) <= v["sync_s"]


def test_fluid_model_is_pessimistic_on_a_short_ramp_until_a_poll_moves():
    # Part 19 (#autoscale-simulated): the worked example's ramp squeezed into two minutes with a 30 s cold start.
    # At 30% headroom both autoscalers first ask at the same poll, and the fluid model's attainment is lower (84.5%
    # against 97.1% when measured) because Kingman's single-server wait overstates a continuous-batching engine's
    # (mean TTFT 165 ms against 43 ms). At 25% the simulator's first request comes one poll later and the order
    # flips (75.8% simulated against 84.5% fluid): the fluid model is not conservative by construction.
    up = autoscale_ramp.first_scale_up
    v = _inputs(**PIN)
    sim, fluid = _both(v)
    assert 3000 < sim.requests < 10_000
    assert up(sim.desired, sim.initial) == up(fluid.desired, fluid.initial)
    assert fluid.attainment < sim.attainment - 0.05
    assert autoscale_ramp.mean_ttft(fluid) > 2 * sim.mean_ttft
    v = _inputs(**PIN, headroom=0.25)
    sim, fluid = _both(v)
    assert up(sim.desired, sim.initial) == up(fluid.desired, fluid.initial) + v["sync_s"]
    assert sim.attainment < fluid.attainment


def test_the_worked_example_holds_its_target_when_simulated():
    # Part 19 (#autoscale-simulated) says so: over the worked example's whole ten minutes (31,200 requests, past
    # what the page simulates) the engines meet the 90% target at 30% headroom and miss it at 25%, as the fluid
    # model does (measured: 91.7% and 88.7% simulated, 91.6% and 88.3% fluid).
    goal = _inputs()["slo_target_percent"] / 100
    for headroom, holds in ((0.3, True), (0.25, False)):
        v = _inputs(headroom=headroom)
        sim, cfg = _setup(v)
        ramp, slo = autoscale_ramp._ramp(v), (v["ttft_slo_s"], v["tpot_slo_s"])
        requests = fleet.ramp_requests(sim.workload, ramp)
        scaler = autoscale_ramp._scaler(v, headroom)
        trace = fleet.run(sim.times, cfg, requests, autoscale_ramp._replica(v), ramp, scaler, slo)
        assert (trace.attainment >= goal) == holds == (autoscale_ramp.attainment(v) >= goal), headroom


def test_calculator_simulated_mode_and_its_range():
    fluid = run("autoscale_ramp", PIN)
    assert fluid["simulated_attainment"] == autoscale_ramp.NOT_SIMULATED
    both = run("autoscale_ramp", dict(PIN, replica_model="simulated"))
    assert both["attainment"] == fluid["attainment"] and both["headroom_needed"] == fluid["headroom_needed"]
    assert 0 < both["simulated_attainment"] <= 1
    assert both["simulated_requests"] == autoscale_ramp.simulated(_inputs(**PIN)).requests
    names = [s["name"] for s in both["series"]["ttft_vs_time"]["y"]]
    assert any("simulated" in n for n in names)
    with pytest.raises(InputError) as err:
        run("autoscale_ramp", {"replica_model": "simulated"})  # the worked example's 600 s: 31,200 requests
    limit = Ramp(20, 60, 60, 120, 600).time_of(autoscale_ramp.MAX_SIMULATED)
    assert err.value.field == "duration_s" and f"{limit:,.0f} s" in err.value.message
    assert math.isclose(Ramp(20, 60, 60, 120, 600).arrivals(limit), autoscale_ramp.MAX_SIMULATED)
    with pytest.raises(InputError, match="lower rates"):  # not even the shortest run fits
        run("autoscale_ramp", {"replica_model": "simulated", "base_rate_per_s": 5000, "peak_rate_per_s": 9000})


def test_a_request_too_long_for_the_pool_misses():
    # attainment counts every arrival: one that never fits the KV pool is rejected by its replica and misses
    v = _inputs()
    sim, cfg = _setup(v)
    ramp = Ramp(5.0, 5.0, 0.0, 0.0, 10.0)
    requests = fleet.ramp_requests(sim.workload, ramp)
    requests[3] = Request(requests[3].arrival_s, sim.capacity + 1, 10)
    trace = fleet.run(sim.times, cfg, requests, autoscale_ramp._replica(v), ramp, Scaler("inflight", 0.3, 15, 60, 1),
                      (10.0, 1.0))  # fmt: skip
    assert trace.attainment == pytest.approx(1 - 1 / len(requests))

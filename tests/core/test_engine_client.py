"""The serving benchmark's client on the simulator (engine/client.py): benchmark_serving.py's random lengths, its
closed loop and its metrics, by hand on small cases."""

from dataclasses import replace
from pathlib import Path

import pytest

from calculators.calcs.steptime import StepModel, deployment
from calculators.engine.client import TURNAROUND_S, Client, draws, run_client
from calculators.engine.config import EngineConfig
from calculators.engine.steps import StepTimes
from calculators.schema import validate
from calculators.api import schema

TIMES = StepTimes(StepModel(deployment(validate(schema("roofline")["inputs"], {"model": "llama-3.1-8b"}))))
SERVER = EngineConfig(kv_blocks=100_000, max_num_seqs=256, max_num_batched_tokens=8192)


def test_lengths_are_uniform_integers_in_the_ratio_range():
    # benchmark_serving.py: np.random.randint(int(L × ratio), L + 1) for input and output alike
    d = draws(Client(8, 1024, 512, range_ratio=0.8, prompts_per_user=10))
    assert len(d) == 80
    assert all(819 <= p <= 1024 and 409 <= o <= 512 for _, p, o in d)
    assert len({p for _, p, _ in d}) > 20  # drawn, not fixed
    assert draws(Client(2, 100, 10))[0][1:] == (100, 10)  # ratio 1: the nominal lengths


def test_draws_scaled_to_a_runs_printed_means_keep_their_spread():
    # SGLang's bench_serving at its default range ratio 0.0 printed 6,101 input and 4,220 output tokens for 10 requests
    # of at most 1,000/1,000 (sgl-cookbook Llama3.1.md): the client's own draws are scaled to those means
    plain = draws(Client(1, 1000, 1000, range_ratio=0.0, prompts_per_user=10))
    scaled = draws(Client(1, 1000, 1000, range_ratio=0.0, prompts_per_user=10, means=(610.1, 422.0)))
    assert sum(p for _, p, _ in scaled) == pytest.approx(6101, abs=5) and sum(o for *_, o in scaled) == pytest.approx(
        4220, abs=5
    )
    assert sum(p for _, p, _ in plain) != pytest.approx(6101, abs=5)  # the seed's own draws are not the run's
    ranks = sorted(range(10), key=lambda k: plain[k][1])
    assert ranks == sorted(range(10), key=lambda k: scaled[k][1])  # the same spread, each draw scaled alike
    assert all(p >= 1 and o >= 1 for _, p, o in scaled)


def test_the_clients_means_are_the_engines_per_request_figures():
    # one request on an idle server: TTFT is its prefill step, TPOT its decode gaps, e2e the two together
    r = run_client(TIMES, SERVER, Client(1, 256, 64, prompts_per_user=1))
    assert r["completed"] == 1
    assert r["e2e_latency_s"] == pytest.approx(r["ttft_s"] + 63 * r["tpot_s"])
    assert r["ttft_s"] == pytest.approx(TIMES.mixed(0, 0.0, [(0, 256)]))


def test_throughput_counts_every_output_token_over_the_run():
    c = Client(4, 128, 32, prompts_per_user=3)
    r = run_client(TIMES, SERVER, c)
    assert r["completed"] == 12
    assert r["output_tokens_per_s"] * r["e2e_latency_s"] > 4 * 32 * 0.9  # four users' tokens per mean latency


def test_a_users_next_request_comes_a_turnaround_after_the_answer():
    # one user, two requests: the second is sent TURNAROUND_S after the first answer ends, finds the engine idle and
    # is planned at once; the run lasts both answers and the turnaround (the engine tests time the busy case)
    r = run_client(TIMES, SERVER, Client(1, 256, 8, prompts_per_user=2))
    assert r["ttft_s"] == pytest.approx(TIMES.mixed(0, 0.0, [(0, 256)]))
    assert r["output_tokens_per_s"] == pytest.approx(16 / (2 * r["e2e_latency_s"] + TURNAROUND_S))
    assert 0 < TURNAROUND_S < TIMES.decode(1, 256)  # later than the engine's turn, shorter than a step


def test_a_run_after_others_on_one_server_finds_their_prompts_in_the_prefix_cache():
    # the same seed sends the same prompts: a run of 1 user then one of 4 users, each request a prompt of 1,024 tokens,
    # on a server that keeps its prefix cache: the 4-user run's first prompt is the first run's, found whole (all but
    # its last block's tokens are hits, so its TTFT is a 16-token prefill's), the others are new
    cached = replace(SERVER, prefix_caching=True)
    first, second = Client(1, 1024, 8, prompts_per_user=1), Client(4, 1024, 8, prompts_per_user=1)
    cold = run_client(TIMES, cached, second)
    warm = run_client(TIMES, cached, second, earlier=(first,))
    assert warm["completed"] == cold["completed"] == 4
    assert warm["ttft_s"] < cold["ttft_s"]
    uncached = run_client(TIMES, SERVER, second, earlier=(first,))  # no cache kept: the earlier run changes nothing
    assert uncached == pytest.approx(cold, rel=1e-12)  # (the same run, later: times differ in the last bits)
    # the earlier run ends long before this one starts: the throughput is over this run's own span
    assert warm["output_tokens_per_s"] == pytest.approx(cold["output_tokens_per_s"], rel=0.2)


def test_the_calibration_page_states_the_turnaround():
    page = (Path(__file__).resolve().parents[2] / "docs" / "calibration.md").read_text()
    assert TURNAROUND_S == 1e-3 and "assumes a millisecond for that round trip" in page

"""Named workload shapes in the latency, cost and goodput calculators: without a shape nothing moves; a
one-turn shape of lengths (a, b) is the plain calculator at (a, b); a multi-turn shape's tokens are
workload_shape.totals'; goodput runs the shape's conversations; a bad shape is named."""

from __future__ import annotations

import pytest

from calculators import catalog, run
from calculators.api import schema
from calculators.calcs import cost, goodput, latency, workload_shape as ws
from calculators.calcs.steptime import StepModel, deployment
from calculators.engine.steps import StepTimes
from calculators.engine import run as engine_run
from calculators.errors import InputError
from calculators.schema import validate

SHAPED = ("latency", "cost", "goodput")


def test_every_named_shape_is_checked_and_offered():
    shapes = ws.named_shapes()
    assert set(shapes) == set(catalog.shapes())
    for name in SHAPED:
        spec = next(f for f in schema(name)["inputs"] if f["key"] == "workload_shape")
        assert [c["value"] for c in spec["choices"]] == [ws.NO_SHAPE, *shapes]
    # the coding agent is Part 18's worked example, task_cost's defaults
    assert shapes["coding-agent"] == ws.shape_from(validate(ws.SHAPE_FIELDS, {}))
    # a multimodal shape's images come in tokens by its rule: 1280 × 720 → 46 × 26 Qwen2.5-VL squares
    assert shapes["multimodal-chat"].tokens_per_image == 46 * 26


@pytest.mark.parametrize("name", SHAPED)
def test_no_shape_is_the_calculator_as_it_was(name):
    # "none" and leaving the inputs out are the same result, and the turns override alone changes nothing
    plain = run(name, {"num_requests": 200} if name == "goodput" else {})  # a shorter run: the same code
    extra = {"num_requests": 200} if name == "goodput" else {}
    named = run(name, {"workload_shape": "none", "shape_turns": 7, **extra})
    assert named == plain


def test_latency_without_a_shape_says_so():
    out = run("latency", {})
    assert all(out[k] == 0.0 for k, _ in latency.SHAPE_OUTPUTS)


@pytest.fixture
def one_turn(monkeypatch):
    """A one-turn shape of 700 tokens in and 215 out, no shared context: the plain calculators' request."""
    shapes = dict(ws.named_shapes(), one=ws.Shape(turns=1, shared_tokens=0, input_tokens=700, output_tokens=215))
    monkeypatch.setattr(ws, "named_shapes", lambda: shapes)
    return "one"


@pytest.mark.parametrize(
    ("model", "gpus", "batch"), [("llama-3.1-8b", 1, 1), ("llama-3.1-8b", 1, 16), ("llama-3.1-70b", 4, 8)]
)  # 4 GPUs: the sharded step model
def test_latency_one_turn_shape_is_the_plain_request(one_turn, model, gpus, batch):
    lengths = {"input_tokens": 700, "output_tokens": 215, "queueing_s": 0.25}
    v = validate(latency.SCHEMA["inputs"], {"model": model, "num_gpus": gpus, "batch_size": batch, **lengths})
    plain = latency.compute(v)
    shaped = latency.compute(dict(v, workload_shape=one_turn))
    assert shaped["task_ttft_first_turn_s"] == shaped["task_ttft_last_turn_s"] == pytest.approx(plain["ttft_s"])
    assert shaped["task_tpot_last_turn_s"] == pytest.approx(plain["tpot_s"])
    assert shaped["task_latency_s"] == pytest.approx(plain["e2e_latency_s"])


def test_latency_one_turn_shape_with_speculation(one_turn):
    v = validate(latency.SCHEMA["inputs"], {"input_tokens": 700, "output_tokens": 215, "spec_method": "eagle"})
    plain, shaped = latency.compute(v), latency.compute(dict(v, workload_shape=one_turn))
    assert shaped["task_tpot_last_turn_s"] == pytest.approx(plain["tpot_s"])


def test_latency_multi_turn_sums_the_turns():
    v = validate(latency.SCHEMA["inputs"], {"workload_shape": "chat-turn", "batch_size": 1, "queueing_s": 0.0})
    out = latency.compute(v)
    shape = ws.named_shapes()["chat-turn"]
    ts = ws.turns(shape)
    dep = deployment(v)
    # each turn by hand: the prefill of its uncached tokens after the cached ones (turn 1: 70 tokens, nothing
    # cached; turn 2: 70 after 285), then (decoded − 1) TPOTs at its mean context
    assert [(t.cached, t.prefilled) for t in ts] == [(0, 70), (285, 70)]
    ttfts = [StepModel(dep).prefill([70]).time_s, StepTimes(StepModel(dep)).mixed(0, 0.0, [(285, 70)])]
    tpots = [StepModel(dep).decode(1, t.prompt + t.decoded / 2).time_s for t in ts]
    assert ttfts[0] == pytest.approx(out["task_ttft_first_turn_s"])
    assert ttfts[1] == pytest.approx(out["task_ttft_last_turn_s"]) and ttfts[1] > ttfts[0]  # attention over 285
    assert tpots[-1] == pytest.approx(out["task_tpot_last_turn_s"])
    model_s = sum(ttfts) + sum(s * (t.decoded - 1) for s, t in zip(tpots, ts))
    assert out["task_latency_s"] == pytest.approx(model_s + shape.wait_s * (shape.turns - 1))


def test_latency_turns_override_and_growing_context():
    base = run("latency", {"workload_shape": "coding-agent"})
    longer = run("latency", {"workload_shape": "coding-agent", "shape_turns": 30})
    assert longer["task_latency_s"] > base["task_latency_s"]
    assert longer["task_tpot_last_turn_s"] > base["task_tpot_last_turn_s"]  # a longer context per step
    assert base["task_ttft_first_turn_s"] == longer["task_ttft_first_turn_s"]
    assert base["ttft_s"] == longer["ttft_s"]  # the batch outputs stay the lengths above


def test_cost_one_turn_shape_is_the_plain_task(one_turn):
    v = validate(cost.SCHEMA["inputs"], {"input_tokens_per_s": 50_000.0})
    plain = cost.compute(dict(v, input_tokens_per_task=700, output_tokens_per_task=215, reasoning_tokens_per_task=0))
    one = cost.compute(dict(v, workload_shape=one_turn))
    for key in ("usd_per_task", "gpus_needed", "usd_per_month", "tokens_read_per_task"):
        assert one[key] == plain[key], key
    assert one["tokens_cached_per_task"] == 0


def test_cost_multi_turn_shape_prices_the_totals():
    tot = ws.totals(ws.named_shapes()["coding-agent"])
    out = run("cost", {"input_tokens_per_s": 50_000.0, "workload_shape": "coding-agent"})
    assert out["tokens_read_per_task"] == tot.prompt == 1_162_000
    assert out["tokens_cached_per_task"] == tot.cached
    # input priced = read − cached; output and thinking at the output rate
    usd = tot.decoded * out["usd_per_million_output_tokens"] + tot.prefilled * out["usd_per_million_input_tokens"]
    assert out["usd_per_task"] == pytest.approx(usd / 1e6)
    assert tot.prefilled == tot.prompt - tot.cached == 20 * 1500


def test_goodput_runs_the_shapes_conversations(monkeypatch):
    seen = []
    real = engine_run.simulate

    def spy(times, requests, config, measured=None, stop=None):
        seen.append(requests)
        return real(times, requests, config, measured, stop)

    monkeypatch.setattr(goodput, "simulate", spy)
    shape = ws.named_shapes()["voice-turn"]
    out = run("goodput", {"workload_shape": "voice-turn", "num_requests": 100, "request_rate_per_s": 2.0})
    assert out["capacity_requests_per_s"] > 0
    ts = ws.turns(shape)
    for requests in seen:
        followers = [r for r in requests if r.after >= 0]
        assert followers, "every run is of multi-turn sessions"
        firsts = [i for i, r in enumerate(requests) if r.after < 0 and not r.generated]
        i = firsts[0]  # one whole session: its turns in order, prompts growing by what each turn carries
        session = requests[i : i + shape.turns]
        assert [r.prompt_tokens for r in session] == [t.prompt for t in ts]
        assert all(r.output_tokens == shape.decoded_tokens for r in session)
        assert [r.after for r in session[1:]] == list(range(i, i + shape.turns - 1))
    # the waits are drawn with the shape's mean (so sessions do not fall into lockstep)
    waits = ws.Sessions(shape, goodput.Workload(validate(goodput.SCHEMA["inputs"], {}))).wait(4000)
    assert sum(waits) / len(waits) == pytest.approx(shape.wait_s, rel=0.05)


def test_goodput_counts_turns_measured():
    # num_requests turns are measured: the run at the reader's rate reports over that many turns
    out = run("goodput", {"workload_shape": "chat-turn", "num_requests": 120, "request_rate_per_s": 5.0})
    assert out["stable"] and out["dropped_requests"] == 0
    assert 0 <= out["slo_attainment"] <= 1 and out["max_rate_meeting_slo_requests_per_s"] > 0


def test_goodput_sessions_draws_in_session_order():
    v = validate(goodput.SCHEMA["inputs"], {"workload_shape": "chat-turn"})
    s = ws.Sessions(ws.named_shapes()["chat-turn"], goodput.Workload(v), 0)
    draws = s.first(5)
    assert [(a, b) for _, a, b in draws] == [(70, 215), (70 + 285, 215)] * 2 + [(70, 215)]
    assert draws[1][0] == 0.0 and draws[0][0] > 0  # a session's gap on its first turn only
    assert len(s.sample(300)) == 300 and len(s.sample(301)) == 302  # whole sessions
    reqs = s.requests(s.first(4), 2.0, offset=3)
    assert [r.after for r in reqs] == [-1, 3, -1, 5]  # after the 3 warm requests listed first


def test_bad_shape_inputs_are_named(monkeypatch):
    with pytest.raises(InputError) as e:
        run("cost", {"workload_shape": "a-shape-nobody-wrote"})
    assert e.value.field == "workload_shape"
    with pytest.raises(InputError) as e:
        run("latency", {"workload_shape": "chat-turn", "shape_turns": 501})
    assert e.value.field == "shape_turns" and "500" in e.value.message
    entry = {"id": "bad", "name": "Bad", "turns": 0, "shared_tokens": 0, "input_tokens": 1, "output_tokens": 1}
    monkeypatch.setattr(catalog, "shapes", lambda: {"bad": entry})
    ws.named_shapes.cache_clear()
    try:
        with pytest.raises(InputError) as e:
            ws.named_shapes()
        assert e.value.field == "shapes.toml[bad].turns"
        monkeypatch.setattr(catalog, "shapes", lambda: {"bad": {"id": "bad", "turns": 2}})
        with pytest.raises(InputError) as e:
            ws.named_shapes()
        assert e.value.field == "shapes.toml[bad].shared_tokens" and "required" in e.value.message
    finally:
        monkeypatch.undo()
        ws.named_shapes.cache_clear()


@pytest.mark.parametrize("entry", list(catalog.shapes().values()), ids=lambda e: e["id"])
def test_every_shape_says_where_its_figures_come_from(entry):
    # sourced figures name their source; the rest are marked illustrative, never passed off as measured
    source = entry["source"]
    assert source.strip() and ("Illustrative" in source or "illustrative" in source or "arXiv" in source)
    assert entry["name"].strip()

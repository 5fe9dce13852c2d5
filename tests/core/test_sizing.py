"""The sizing verdict against the calculators it is built from, computed directly: memory's fit, latency's
TPOT and TTFT, goodput's capacity and cost's price per million; its sentinels in words; monotone answers."""

from __future__ import annotations

import math

import pytest

from calculators.api import run
from calculators.page import present

# The issue's question: will Llama 3.1 70B serve 50 users at 32K on H100s, and on how many?
ISSUE = {
    "model": "llama-3.1-70b",
    "hardware": "h100-sxm",
    "context_tokens": 32768,
    "output_tokens": 1024,
    "target_users": 50,
    "tpot_slo_s": 0.05,
    "ttft_slo_s": 10.0,
}
COMMON = ("model", "hardware", "weight_dtype", "kv_dtype")


def _memory(v: dict, tp: int) -> dict:
    return run(
        "memory",
        {
            **{k: v[k] for k in ("model", "hardware")},
            "tensor_parallel": tp,
            "context_tokens": v["context_tokens"] + v["output_tokens"],
        },
    )


def _tpot(v: dict, tp: int, batch: int) -> float:
    return run(
        "latency",
        {
            "model": v["model"],
            "hardware": v["hardware"],
            "num_gpus": tp,
            "batch_size": batch,
            "input_tokens": v["context_tokens"],
            "output_tokens": v["output_tokens"],
        },
    )["tpot_s"]


def _users(v: dict, tp: int) -> int:
    """Users one replica of TP tp serves, from memory and latency directly (max_num_seqs 1,024 on H100)."""
    fit = _memory(v, tp)["max_concurrent_sequences"]
    users = 0
    while users < min(fit, 1024) and _tpot(v, tp, users + 1) <= v["tpot_slo_s"]:
        users += 1
    return users


def test_the_fit_is_memorys():
    r = run("sizing", ISSUE)
    tp = r["fit_tensor_parallel"]
    assert tp == _memory(ISSUE, 1)["min_tensor_parallel_to_fit"] == 2
    assert r["sequences_at_fit_tp"] == _memory(ISSUE, tp)["max_concurrent_sequences"]
    assert r["headline"].startswith(f"Fits on {tp}× NVIDIA H100")


def test_the_issues_question_tp_and_count_from_memory_and_latency():
    r = run("sizing", ISSUE)
    users = {tp: _users(ISSUE, tp) for tp in (2, 4, 8, 16, 32)}
    gpus = {tp: tp * math.ceil(50 / u) for tp, u in users.items() if u}
    best = min(gpus, key=lambda tp: (gpus[tp], tp))
    assert (r["best_tensor_parallel"], r["best_gpus"]) == (best, gpus[best])
    assert r["users_per_replica"] == users[best]
    slo = min(tp for tp, u in users.items() if u)
    assert r["replicas_at_slo_tp"] == math.ceil(50 / users[slo])
    # With each step's all-reduces priced, TP 16 and 32 span two and four servers and their steps slow on the
    # network: no single replica serves the 50 users within 50 ms (without communication TP 16 did).
    assert not any(u >= 50 for u in users.values()) and r["single_replica_tp"] == 0
    assert (
        f"50 users within TPOT 50 ms and TTFT 10 s need {r['best_replicas']} replicas of TP {best} "
        f"({gpus[best]} GPUs)" in r["headline"]
    )


def test_ttft_is_latencys_for_one_prompt_and_a_tight_target_rules_a_tp_out():
    r = run("sizing", ISSUE)
    lat = run(
        "latency",
        {
            "model": "llama-3.1-70b",
            "num_gpus": r["best_tensor_parallel"],
            "batch_size": 1,
            "input_tokens": 32768,
            "output_tokens": 1024,
        },
    )
    assert r["ttft_s"] == pytest.approx(lat["ttft_s"], rel=1e-12)
    tight = run("sizing", dict(ISSUE, ttft_slo_s=lat["ttft_s"] * 0.99))
    assert tight["best_tensor_parallel"] > r["best_tensor_parallel"] or tight["best_gpus"] == 0


def test_the_cost_is_costs_for_the_sized_deployment():
    r = run("sizing", ISSUE)
    n, tp = r["best_replicas"], r["best_tensor_parallel"]
    tpot = _tpot(ISSUE, tp, math.ceil(50 / n))
    assert r["tpot_s"] == pytest.approx(tpot, rel=1e-12)
    c = run(
        "cost", {"usd_per_gpu_hour": 2.0, "num_gpus": tp * n, "gpus_per_replica": tp, "output_tokens_per_s": 50 / tpot}
    )
    assert r["usd_per_million_output_tokens"] == pytest.approx(c["usd_per_million_output_tokens"], rel=1e-9)
    assert f"at ${r['usd_per_million_output_tokens']:.2f} per million output tokens" in r["headline"]


def test_a_rate_target_divides_by_goodputs_capacity():
    v = dict(
        ISSUE,
        model="llama-3.1-8b",
        context_tokens=2048,
        output_tokens=256,
        target_kind="rate",
        target_requests_per_s=20.0,
    )
    r = run("sizing", v)
    tp = r["best_tensor_parallel"]
    g = run(
        "goodput",
        {
            "model": "llama-3.1-8b",
            "num_gpus": tp,
            "input_distribution": "fixed",
            "output_distribution": "fixed",
            "input_tokens_mean": 2048,
            "output_tokens_mean": 256,
            "max_seqs_rule": "set",
            "max_batch_size": r["users_per_replica"],
            "num_requests": 50,
        },
    )
    assert r["capacity_requests_per_s"] == pytest.approx(g["capacity_requests_per_s"], rel=1e-9)
    assert r["best_replicas"] == math.ceil(20.0 / r["capacity_requests_per_s"])


def test_sentinels_read_in_words():
    shown = present("sizing", dict(ISSUE, tpot_slo_s=0.0001))
    text = {o["key"]: o["text"] for o in shown["outputs"]}
    assert text["best_gpus"] == "n/a: no TP meets the SLO"
    assert text["single_replica_tp"] == "none up to TP 1,024"
    assert "No TP up to 1,024 meets the SLO for 50 users" in shown["headline"]
    assert shown["notes"]
    huge = present("sizing", dict(ISSUE, context_tokens=10_000_000, output_tokens=1_000_000, hardware="l4"))
    assert huge["headline"].startswith("Does not fit on up to 1,024×")
    assert {o["key"]: o["text"] for o in huge["outputs"]}["fit_tensor_parallel"] == "none up to TP 1,024"


def test_no_targets_means_memory_alone_binds():
    r = run("sizing", dict(ISSUE, tpot_slo_s=0.0, ttft_slo_s=0.0))
    assert r["users_per_replica"] == min(1024, _memory(ISSUE, r["best_tensor_parallel"])["max_concurrent_sequences"])
    assert "within" not in r["headline"]


@pytest.mark.parametrize("key, values", [("target_users", (10, 50, 200, 1000)), ("tpot_slo_s", (0.2, 0.1, 0.05, 0.03))])
def test_a_harder_target_never_needs_fewer_gpus(key, values):
    gpus = [run("sizing", dict(ISSUE, **{key: x}))["best_gpus"] for x in values]
    assert gpus == sorted(gpus), gpus


@pytest.mark.parametrize("changes", [{}, {"target_kind": "rate"}, {"model": "llama-3.1-8b", "target_users": 300}])
def test_the_chain_into_cost_reproduces_the_verdicts_gpus_and_price(changes):
    shown = present("sizing", dict(ISSUE, **changes))
    (chain,) = shown["chain"]
    assert chain["to"] == "cost" and "chain" not in shown["result"]
    c = run("cost", chain["inputs"])
    assert c["gpus_needed"] == shown["result"]["best_gpus"]
    assert c["usd_per_million_output_tokens"] == pytest.approx(shown["result"]["usd_per_million_output_tokens"])


def test_nothing_to_chain_when_no_tp_meets_the_slo():
    assert present("sizing", dict(ISSUE, tpot_slo_s=0.0001))["chain"] == []


def test_memorys_kv_budget_chains_into_paging_as_the_replicas_pool():
    shown = present("memory", {"model": "llama-3.1-70b", "tensor_parallel": 4, "context_tokens": 8192})
    (chain,) = shown["chain"]
    assert chain["to"] == "paging" and chain["inputs"]["model"] == "llama-3.1-70b"
    paging = run("paging", chain["inputs"])
    tokens = chain["inputs"]["kv_budget_gib"] * 2**30 / paging["kv_bytes_per_token"]
    assert tokens == pytest.approx(shown["result"]["kv_tokens_capacity"], rel=1e-4)  # TP 4 ≤ 8 KV heads: no copies


def test_a_readers_own_model_chains_as_its_definition():
    from calculators.resolve import model_to_json, resolve_model

    mine = dict(model_to_json(resolve_model("llama-3.1-8b")), id="mine", name="Mine")
    (chain,) = present("memory", {"model": mine})["chain"]
    assert chain["inputs"]["model"]["name"] == "Mine"
    assert (
        run("paging", chain["inputs"])["kv_bytes_per_token"]
        == run("paging", {"model": "llama-3.1-8b"})["kv_bytes_per_token"]
    )


def test_a_target_one_replica_serves_names_its_tp_and_the_alternatives():
    # 20 of the issue's users: TP 8 serves them alone (42 users, from memory and latency); fewer GPUs in
    # replicas of TP 4 (14 users each)
    v = dict(ISSUE, target_users=20)
    r = run("sizing", v)
    users = {tp: _users(v, tp) for tp in (2, 4, 8)}
    alone = min(tp for tp, u in users.items() if u >= 20)
    assert r["single_replica_tp"] == alone == 8
    assert f"20 users within TPOT 50 ms and TTFT 10 s need TP {alone} (or 20 replicas of TP 2)" in r["headline"]
    assert f"fewest GPUs: 8 ({r['best_replicas']} replicas of TP {r['best_tensor_parallel']})" in r["headline"]


def test_a_sliding_window_model_serves_a_rate_where_one_sequence_fits():
    # Gemma 2's sliding-window layers hold less KV per sequence than per_token × length says: on one RTX 5090 one
    # 33K-token request fits, so TP 1 has a capacity and the plan asks for at least one replica (a hypothesis find:
    # the capacity was 0 and the plan divided by 0 replicas)
    from calculators.calcs import sizing
    from calculators.schema import validate

    inputs = {"model": "gemma-2-9b", "hardware": "rtx-5090", "target_kind": "rate"}
    v = validate(sizing.SCHEMA["inputs"], inputs)
    tp1 = sizing.options(v)[0]
    assert tp1.tp == 1 and tp1.sequences == 1 and tp1.capacity > 0 and tp1.replicas(v) >= 1
    r = run("sizing", inputs)
    assert r["best_replicas"] >= 1 and r["best_gpus"] >= 1

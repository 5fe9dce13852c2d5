"""The sharding_search and sharding_breakdown calculators: their defaults, their agreement with the
deployment model, and their errors."""

from __future__ import annotations

import pytest

from calculators.api import run
from calculators.errors import InputError


def test_search_default_ranks_and_names_losers():
    r = run("sharding_search", {})
    assert r["options_feasible"] >= 2 and r["options_tried"] > r["options_feasible"]
    assert r["best_tpot_s"] <= 0.05
    ranked = r["ranked"]
    assert ranked[0]["label"] == r["best_label"]
    assert all(a["tokens_per_s_per_gpu"] >= b["tokens_per_s_per_gpu"] for a, b in zip(ranked, ranked[1:]))
    gap = 1 - ranked[1]["tokens_per_s_per_gpu"] / ranked[0]["tokens_per_s_per_gpu"]
    assert r["runner_up_gap"] == pytest.approx(gap)
    assert any("does not fit" in n for n in r["notes"])


def test_search_with_nothing_feasible_says_so():
    r = run("sharding_search", {"nodes": 1, "gpus_per_node": 2})
    assert r["options_feasible"] == 0 and "No sharding" in r["headline"]


def test_breakdown_matches_search_at_the_same_choice():
    """The search's TPOT for its winner is what the breakdown computes for that choice at that batch."""
    s = run("sharding_search", {})
    b = run(
        "sharding_breakdown",
        {
            "tp": s["best_tp"],
            "pp": s["best_pp"],
            "dp": s["best_dp"],
            "ep": s["best_ep"],
            "dcp": s["best_dcp"],
            "batch_size": s["best_batch"],
        },
    )
    assert b["tpot_s"] == pytest.approx(s["best_tpot_s"], rel=1e-12)
    assert b["tokens_per_s_per_gpu"] == pytest.approx(s["best_tokens_per_s_per_gpu"], rel=1e-12)


def test_breakdown_dp_attention_holds_more_mla_sequences_than_tp():
    """DeepSeek-V3 on 16 H200: TP 16 keeps the whole latent on every GPU; DP attention 16 with EP keeps
    each sequence on one, so the same GPUs hold many times the sequences."""
    base = {"model": "deepseek-v3", "hardware": "h200", "weight_dtype": "fp8", "kv_dtype": "fp8", "pp": 1}
    tp = run("sharding_breakdown", {**base, "tp": 16})
    dp = run("sharding_breakdown", {**base, "tp": 1, "dp": 16, "ep": 16})
    assert dp["max_sequences"] > 5 * tp["max_sequences"]
    assert dp["tp_comm_s"] == 0 and dp["moe_comm_s"] > 0


def test_breakdown_stack_plots_pile_to_the_step():
    r = run("sharding_breakdown", {})
    plot = r["series"]["step_by_tp"]
    assert plot["kind"] == "stack"
    i = plot["x"]["values"].index(8)
    total = sum(y["values"][i] for y in plot["y"] if not y.get("marker"))
    assert total == pytest.approx(r["stage_step_s"] * 1e3)


@pytest.mark.parametrize(
    "inputs,field",
    [({"tp": 3}, "tp"), ({"ep": 4}, "ep"), ({"tp": 8, "pp": 4}, "tp"), ({"gpus_per_node": 16}, "gpus_per_node")],
)
def test_breakdown_errors_name_the_field(inputs, field):
    with pytest.raises(InputError) as e:
        run("sharding_breakdown", inputs)
    assert e.value.field == field


def test_a_group_crossing_servers_the_chips_link_could_hold_in_one_is_said():
    # read 43's P1: 16 Trainium2 chips sit in one trn2.48xlarge (a 4x4 torus), but GPUs per server defaults to 8 (an
    # HGX board), so TP 16 is priced as two servers over the network; the latency calculator says so, and the time
    # falls once GPUs per server is the instance's 16. On an HGX B200 (8 on NVLink) nothing is said.
    def latency(hardware, **extra):
        return run("latency", {"model": "llama-3.1-70b", "hardware": hardware, "num_gpus": 16, **extra})

    spans = latency("trainium2")
    assert any("scale-up link joins up to 16" in n and "set GPUs per server" in n for n in spans["notes"])
    one = latency("trainium2", gpus_per_node=16)
    assert not any("GPUs per server" in n for n in one["notes"]) and one["tpot_s"] < spans["tpot_s"]
    assert any("joins up to 72" in n for n in latency("gb200")["notes"])
    assert not any("GPUs per server" in n for n in latency("b200")["notes"])
    assert any("GPUs per server taken as 12" in n for n in latency("inferentia2", gpus_per_node=16)["notes"])
    # H100 PCIe cards are bridged in pairs: TP 4 in one server crosses PCIe, which is priced as the network link
    pcie = run("latency", {"model": "llama-3.1-70b", "hardware": "h100-pcie", "num_gpus": 4})["notes"]
    assert any("taken as 2" in n and "PCIe is not modelled" in n for n in pcie)

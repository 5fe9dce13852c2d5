"""All-reduce calculator: ring formula, NCCL-tests bus bandwidth, monotonicity, sourced presets."""
import json
import math

import pytest

from calculators import run, run_json
from calculators.calcs.allreduce import LINKS, SRAM_PARTS, bus_bandwidth, ring_allreduce_time
from calculators.errors import InputError
from calculators.presets import accelerator_presets

ACC = accelerator_presets()


def _run(**kw):
    return run("allreduce", kw)


def test_ring_formula_by_hand():
    # 8 ranks, 16 KiB, 450 GB/s per direction, 0.6 us per hop: 14 hops + 1.75 x M / B
    t = ring_allreduce_time(16384, 8, 450e9, 0.6e-6)
    assert t == pytest.approx(14 * 0.6e-6 + 2 * 7 / 8 * 16384 / 450e9, rel=1e-12)
    assert ring_allreduce_time(16384, 1, 450e9, 0.6e-6) == 0.0
    assert ring_allreduce_time(1e6, 4, 1e9, 0.0, base_latency_s=5e-6) == pytest.approx(5e-6 + 1.5e-3)


@pytest.mark.parametrize("n", [2, 4, 8, 16, 72])
def test_nccl_tests_bus_bandwidth_relation(n):
    """NCCL-tests doc/PERFORMANCE.md: busbw = algbw x 2(n-1)/n equals the link bandwidth B
    when latency is zero (t = S/B x 2(n-1)/n)."""
    size, link = 256 * 2**20, 450e9
    t = ring_allreduce_time(size, n, link, 0.0)
    algbw = size / t
    assert algbw == pytest.approx(link * n / (2 * (n - 1)))
    assert bus_bandwidth(size, n, t) == pytest.approx(link)


def test_ring_has_2n_minus_2_latency_steps():
    """NVIDIA's TRT-LLM MultiShot blog: a ring all-reduce repeats its step 2N-2 times."""
    for n in (2, 8, 72):
        assert ring_allreduce_time(0, n, 1e12, 1e-6) == pytest.approx((2 * n - 2) * 1e-6)


def test_llama_70b_tp8_defaults():
    r = _run(model="llama-3.1-70b", hardware="h100-sxm", num_gpus=8, batch_size=1)
    assert r["allreduces_per_step"] == 160                    # Megatron: 2 per layer, 80 layers
    assert r["allreduce_bytes_per_token_per_layer"] == 2 * 8192 * 2
    assert r["message_bytes"] == 8192 * 2
    assert r["link_bandwidth_bytes_per_s"] == 450e9           # NVLink 4, 900 GB/s total halved
    per = 14 * 0.6e-6 + 1.75 * 16384 / 450e9
    assert r["time_per_allreduce_s"] == pytest.approx(per)
    assert r["allreduce_time_per_step_s"] == pytest.approx(160 * per)
    assert r["bytes_sent_per_gpu_per_step"] == pytest.approx(160 * 1.75 * 16384)
    assert r["latency_fraction"] > 0.95                        # decode all-reduces are latency-bound
    assert 0 < r["allreduce_tax_fraction"] < 1
    assert r["step_time_with_allreduce_s"] == pytest.approx(
        r["decode_step_time_s_lower_bound"] + r["allreduce_time_per_step_s"])


def test_tp1_has_no_tax():
    r = _run(model="llama-3.1-8b", num_gpus=1)
    assert r["allreduce_time_per_step_s"] == 0 and r["allreduce_tax_fraction"] == 0
    assert r["bytes_sent_per_gpu_per_step"] == 0


def test_monotonic_in_tokens_degree_and_bandwidth():
    times = [_run(batch_size=b)["allreduce_time_per_step_s"] for b in (1, 64, 4096)]
    assert times == sorted(times) and times[0] < times[-1]
    per_token = [_run(batch_size=b)["allreduce_time_per_token_s"] for b in (1, 64, 4096)]
    assert per_token == sorted(per_token, reverse=True)       # latency amortised over the batch
    by_n = [_run(num_gpus=n)["time_per_allreduce_s"] for n in (2, 4, 8)]
    assert by_n == sorted(by_n)
    by_link = [_run(link=k, batch_size=2048)["allreduce_time_per_step_s"]
               for k in ("nvlink5", "nvlink4", "pcie5-x16", "ib-ndr-400")]
    assert by_link == sorted(by_link)
    slow = _run(link="custom", link_bandwidth_gb_per_s=10, batch_size=2048)["allreduce_time_per_step_s"]
    assert slow > by_link[-1]
    assert _run(link_efficiency=0.5, batch_size=2048)["allreduce_time_per_step_s"] > \
        _run(batch_size=2048)["allreduce_time_per_step_s"]


def test_base_latency_adds_per_call():
    a, b = _run(), _run(base_latency_us=6.6)
    assert b["allreduce_time_per_step_s"] - a["allreduce_time_per_step_s"] == pytest.approx(160 * 6.6e-6)


def test_link_presets_agree_with_accelerator_presets():
    assert LINKS["nvlink4"]["bandwidth_bytes_per_s"] == ACC["h100-sxm"].scale_up_bandwidth_bytes_per_s
    assert LINKS["nvlink5"]["bandwidth_bytes_per_s"] == ACC["gb200"].scale_up_bandwidth_bytes_per_s
    assert LINKS["ib-ndr-400"]["bandwidth_bytes_per_s"] == 400e9 / 8
    for e in LINKS.values():
        assert e["source"] and e["latency_per_hop_s"] > 0


def test_accelerator_without_scale_up_link_names_the_field():
    with pytest.raises(InputError) as exc:
        _run(hardware="l40s", num_gpus=2)
    assert exc.value.to_json()["field"] == "link"
    assert _run(hardware="l40s", num_gpus=2, link="pcie5-x16")["link_bandwidth_bytes_per_s"] == 64e9


def test_chips_to_hold_the_weights():
    r = _run(model="llama-3.1-70b", weight_dtype="bf16")
    w = r["weight_bytes"]
    assert r["min_gpus_for_weights"] == math.ceil(w / 80e9) == 2
    assert SRAM_PARTS["groq-lpu"]["sram_bytes"] == 220 * 2**20           # Groq ISCA 2022: 220 MiB
    assert r["sram_chips_for_weights"] == math.ceil(w / (220 * 2**20))
    wse = _run(model="llama-3.1-70b", sram_part="cerebras-wse3")["sram_chips_for_weights"]
    assert wse == math.ceil(w / 44e9) == 4
    assert _run(model="llama-3.1-70b", weight_dtype="fp8")["sram_chips_for_weights"] < r["sram_chips_for_weights"]


def test_json_round_trip_and_series():
    out = json.loads(run_json("allreduce", json.dumps({"batch_size": 512})))
    assert "error" not in out
    s = out["series"]["allreduce_vs_tp"]
    assert len(s["y"]) == len(LINKS) and all(len(y["values"]) == len(s["x"]["values"]) for y in s["y"])
    assert [d["label"] for d in out["derivation"]][0] == "Message per all-reduce"


def test_energy_per_token_is_power_times_step_over_tokens():
    """Energy per token = board power x GPUs x time per step / tokens per step."""
    for b in (1, 64):
        r = _run(model="llama-3.1-70b", hardware="h100-sxm", num_gpus=8, batch_size=b)
        assert r["joules_per_token_at_board_power"] == pytest.approx(700 * 8 * r["step_time_with_allreduce_s"] / b)
    assert _run(batch_size=64)["joules_per_token_at_board_power"] < _run(batch_size=1)["joules_per_token_at_board_power"]
    assert _run(hardware="tpu-v5e", num_gpus=8)["joules_per_token_at_board_power"] == 0   # power not published

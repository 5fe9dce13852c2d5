"""NCCL's protocol model, the algorithm choice, the link domains and the TP count.

Constants from NCCL v2.30.7-1 src/graph/tuning.cc (tag commit 73cf112), read from source; each
test names the review row (shared/reviews/parts-1-3.md) it reproduces."""

import pytest

from calculators import run
from calculators.calcs.ring import NCCL
from calculators.errors import InputError

MSG64 = 64 * 8192 * 2  # 70B, batch 64, BF16: 1 MiB


def _run(**kw):
    return run("allreduce", {"model": "llama-3.1-70b", "hardware": "h100-sxm", "num_gpus": 8, **kw})


def test_constants_match_tuning_cc():
    assert NCCL["release"] == "v2.30.7-1"
    assert NCCL["base_latency_s"] == {"ll": 6.6e-6, "ll128": 14.0e-6, "simple": 8.4e-6}
    assert NCCL["ring_latency_s"]["nvlink"] == {"ll": 0.6e-6, "ll128": 1.9e-6, "simple": 3.4e-6}
    assert NCCL["tree_net_latency_s"]["ll"] == 5.0e-6
    assert NCCL["ll_max_bw_bytes_per_s"] == {"ampere": 87.7e9, "hopper": 141.0e9, "blackwell": 282.0e9}


def test_ll_bandwidth_is_capped_at_llmaxbw():
    """Review row 10: ring LL busBw = min(llMaxBw, 0.5 busBw); Hopper 141 GB/s, so at batch 64 the
    bandwidth term is 1.75 x 1 MiB / 141 GB/s = 13 us, not 4 us at 450 GB/s."""
    r = _run(batch_size=64, protocol="ll")
    assert r["link_bandwidth_bytes_per_s"] == 141e9
    assert r["time_per_allreduce_s"] == pytest.approx(6.6e-6 + 14 * 0.6e-6 + 1.75 * MSG64 / 141e9)
    assert 1.75 * MSG64 / 141e9 == pytest.approx(13.0e-6, rel=0.01)
    assert _run(hardware="b200", batch_size=64, protocol="ll")["link_bandwidth_bytes_per_s"] == 282e9
    assert _run(batch_size=64, protocol="ll128")["link_bandwidth_bytes_per_s"] == pytest.approx(0.92 * 450e9)
    assert _run(batch_size=64, protocol="simple")["link_bandwidth_bytes_per_s"] == 450e9


@pytest.mark.parametrize(
    "proto, base, hop", [("ll", 6.6e-6, 0.6e-6), ("ll128", 14.0e-6, 1.9e-6), ("simple", 8.4e-6, 3.4e-6)]
)
def test_protocol_latencies(proto, base, hop):
    r = _run(batch_size=1, protocol=proto)
    assert r["time_per_allreduce_s"] - 1.75 * 16384 / r["link_bandwidth_bytes_per_s"] == pytest.approx(base + 14 * hop)


def test_auto_picks_ll_for_decode_and_a_bandwidth_protocol_for_prefill():
    """NCCL's tuner takes the protocol with the least predicted time: LL for small messages, LL128 or
    Simple once the bandwidth term dominates (review row 10, prefill)."""
    assert _run(batch_size=1)["protocol_chosen"] == "ll"
    big = _run(batch_size=2048)
    assert big["protocol_chosen"] in ("ll128", "simple")
    for p in ("ll", "ll128", "simple"):
        assert big["time_per_allreduce_s"] <= _run(batch_size=2048, protocol=p)["time_per_allreduce_s"]


def test_one_shot_two_shot_and_nvls():
    """Cost models in direct.py: one-shot 1 step and (n-1) M / B; two-shot 2 steps and the ring's
    volume; NVLS 25 us and M / (0.85 B) on Hopper (tuning.cc hwLat NVLS, nvlsEfficiency)."""
    m = 16384
    one = _run(batch_size=1, algorithm="one-shot")
    assert one["time_per_allreduce_s"] == pytest.approx(0.6e-6 + 7 * m / 450e9)
    two = _run(batch_size=1, algorithm="two-shot")
    assert two["time_per_allreduce_s"] == pytest.approx(2 * 0.6e-6 + 1.75 * m / 450e9)
    nvls = _run(batch_size=2048, algorithm="nvls")
    assert nvls["time_per_allreduce_s"] == pytest.approx(25e-6 + 2048 * m / (0.85 * 450e9))
    ring = _run(batch_size=1)
    assert one["time_per_allreduce_s"] < two["time_per_allreduce_s"] < ring["time_per_allreduce_s"]
    # big messages: one-shot moves (n - 1) M, so it loses to two-shot
    assert (
        _run(batch_size=4096, algorithm="one-shot")["time_per_allreduce_s"]
        > _run(batch_size=4096, algorithm="two-shot")["time_per_allreduce_s"]
    )


def test_nvls_needs_nvswitch_and_direct_algorithms_one_domain():
    for kw in (dict(hardware="a100-80gb"), dict(hardware="mi300x"), dict(link="pcie5-x16")):
        with pytest.raises(InputError) as exc:
            _run(algorithm="nvls", **kw)
        assert exc.value.to_json()["field"] == "algorithm"
    with pytest.raises(InputError) as exc:
        _run(num_gpus=16, link="ib-ndr-400", algorithm="two-shot")
    assert exc.value.to_json()["field"] == "algorithm"


def test_tp_beyond_the_links_domain_is_refused_and_clipped():
    """Review row 14: NVLink 4 on HGX H100 joins 8 GPUs; the plot leaves gaps past it."""
    with pytest.raises(InputError) as exc:
        _run(num_gpus=16, link="nvlink4")
    assert exc.value.to_json()["field"] == "num_gpus"
    s = _run()["series"]["allreduce_vs_tp"]
    xs = s["x"]["values"]
    ys = {y["name"]: y["values"] for y in s["y"]}
    nv4 = next(v for k, v in ys.items() if k.startswith("NVLink 4"))
    nv5 = next(v for k, v in ys.items() if k.startswith("NVLink 5"))
    assert all((v is None) == (x > 8) for x, v in zip(xs, nv4))
    assert all(v is not None for v in nv5)  # NVL72: up to 72
    ib = next(v for k, v in ys.items() if k.startswith("InfiniBand"))
    assert all(v is not None for v in ib)  # servers of 8 scale out


def test_count_is_2l_plus_1_and_a_logits_gather():
    """Review row 12: vLLM VocabParallelEmbedding.forward all-reduces once more, and the
    LogitsProcessor gathers the vocab-parallel logits."""
    r = _run(batch_size=1)
    assert r["allreduces_per_step"] == 2 * 80 + 1
    assert r["logits_gather_time_s"] > 0
    assert r["allreduce_time_per_step_s"] == pytest.approx(161 * r["time_per_allreduce_s"] + r["logits_gather_time_s"])
    # prefill computes logits for one row, decode for every sequence
    assert (
        _run(batch_size=2048, phase="prefill")["logits_gather_time_s"] < _run(batch_size=2048)["logits_gather_time_s"]
    )


def test_largest_tp_below_the_weight_sweep():
    """How far TP goes before communication per step exceeds each GPU's weight sweep W / (n BW)."""
    r = _run(batch_size=1, link="nvlink5", hardware="b200")
    n = r["largest_tp_with_allreduce_below_sweep"]
    assert 1 <= n <= 72
    at = _run(batch_size=1, link="nvlink5", hardware="b200", num_gpus=n)
    assert at["allreduce_time_per_step_s"] <= at["weight_sweep_time_per_gpu_s"]
    if n < 72:
        past = _run(batch_size=1, link="nvlink5", hardware="b200", num_gpus=n + 1)
        assert past["allreduce_time_per_step_s"] > past["weight_sweep_time_per_gpu_s"]


def test_energy_against_batch_is_the_estimate_at_each_batch():
    """Review row 9 / (c): the J/token-against-batch curve is TDP x modelled step / tokens at each batch."""
    s = _run()["series"]["energy_vs_batch"]
    ys = s["y"][0]["values"]
    for b, y in zip(s["x"]["values"], ys):
        if b in (1, 64):
            assert y == pytest.approx(_run(batch_size=b)["joules_per_token_at_board_power"])
    assert ys == sorted(ys, reverse=True)
    assert "estimate" in s["title"]
    tpu = run("allreduce", {"hardware": "tpu-v5e", "num_gpus": 8})["series"]["energy_vs_batch"]["y"][0]["values"]
    assert all(v is None for v in tpu)  # power not published: gaps, never zeros


def test_auto_never_picks_ll128_on_pcie():
    """tuning.cc enables LL128 by default only when the in-server path is NVLink (typeIntra <= PATH_NVB)."""
    for b in (1, 64, 512, 2048, 8192):
        assert _run(batch_size=b, link="pcie5-x16")["protocol_chosen"] != "ll128"

"""All-reduce calculator: ring formula, NCCL-tests bus bandwidth, monotonicity, sourced presets."""

import json
import math
from dataclasses import asdict

import pytest

from calculators import run, run_json
from calculators.calcs.ring import LINKS, bus_bandwidth, ring_allreduce_time
from calculators.calcs.sram import SRAM_PARTS
from calculators.errors import InputError
from calculators.model import PCIE_LINKS
from calculators.calcs.overhead import kernels_per_layer
from calculators.catalog import accelerator_presets, model_presets

ACC = accelerator_presets()


OLD = dict(latency_source="custom", protocol="simple")  # the pre-protocol model: t_base 0, 0.6 us, full B


def _run(**kw):
    return run("allreduce", kw)


def _old(**kw):
    """The ring as the guide first modelled it (no protocol derating, custom latencies)."""
    return run("allreduce", {**OLD, **kw})


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
    r = _old(model="llama-3.1-70b", hardware="h100-sxm", num_gpus=8, batch_size=1)
    assert r["allreduces_per_step"] == 161  # Megatron: 2 per layer, 80 layers; + the vocab-parallel embedding
    assert r["allreduce_bytes_per_token_per_layer"] == 2 * 8192 * 2
    assert r["message_bytes"] == 8192 * 2
    assert r["link_bandwidth_bytes_per_s"] == 450e9  # NVLink 4, 900 GB/s total halved
    per = 14 * 0.6e-6 + 1.75 * 16384 / 450e9
    assert r["time_per_allreduce_s"] == pytest.approx(per)
    assert r["allreduce_time_per_step_s"] == pytest.approx(161 * per + r["logits_gather_time_s"])
    assert r["bytes_sent_per_gpu_per_step"] == pytest.approx(161 * 1.75 * 16384)
    assert r["latency_fraction"] > 0.95  # decode all-reduces are latency-bound
    assert 0 < r["allreduce_tax_fraction"] < 1
    assert r["step_time_with_allreduce_s"] == pytest.approx(
        r["decode_step_time_s_lower_bound"] + r["allreduce_time_per_step_s"]
    )


def test_jamba_pays_an_x_proj_all_reduce_in_each_mamba_layer():
    """Jamba 1.5 Mini at TP 2: 2 × 32 + 1 hidden-wide all-reduces and, inside its 28 Mamba layers, the row-parallel
    x_proj's (vLLM v0.34.0 mamba_mixer.py), each of tokens × (dt_rank 256 + 2 × d_state 16) × 2 B."""
    r = _old(model="jamba-1.5-mini", hardware="h100-sxm", num_gpus=2, batch_size=8)
    assert r["allreduces_per_step"] == 65
    x_msg = 8 * (256 + 2 * 16) * 2
    x_time = 2 * 0.6e-6 + x_msg / 450e9  # two ring steps; 2(n − 1)/n × M ÷ B = M ÷ B at n = 2
    assert r["allreduce_time_per_step_s"] == pytest.approx(
        65 * r["time_per_allreduce_s"] + 28 * x_time + r["logits_gather_time_s"], rel=1e-12
    )
    assert r["bytes_sent_per_gpu_per_step"] == pytest.approx(65 * 8 * 4096 * 2 + 28 * x_msg)
    labels = [s["label"] for s in r["derivation"]]
    assert "Mamba x_proj all-reduce, inside each Mamba layer" in labels
    assert "Mamba x_proj all-reduce, inside each Mamba layer" not in [
        s["label"] for s in _old(model="nemotron-h-8b", num_gpus=2)["derivation"]
    ]


def test_minimax_pays_a_q_k_norm_all_reduce_in_each_attention_layer():
    """MiniMax-M2.5 at TP 8: 2 × 62 + 1 hidden-wide all-reduces and, inside each of its 62 attention layers, the q/k
    RMSNorm's over all heads (SGLang 0.5.8 minimax_m2.py MiniMaxM2RMSNormTP.forward_qk): two FP32 sums a token."""
    r = _old(model="minimax-m2.5", hardware="h100-sxm", num_gpus=8, batch_size=16)
    assert r["allreduces_per_step"] == 125
    qk_msg = 16 * 2 * 4
    qk_time = 2 * 7 * 0.6e-6 + 2 * 7 / 8 * qk_msg / 450e9  # 2(n − 1) ring steps
    assert r["allreduce_time_per_step_s"] == pytest.approx(
        125 * r["time_per_allreduce_s"] + 62 * qk_time + r["logits_gather_time_s"], rel=1e-12
    )
    labels = [s["label"] for s in r["derivation"]]
    assert "q/k norm all-reduce, inside each attention layer" in labels
    # one kernel more a layer in the eager count, at TP > 1 only
    minimax, qwen = (model_presets()[m] for m in ("minimax-m2.5", "qwen3-235b-a22b"))
    assert kernels_per_layer(minimax, 5, 8) - kernels_per_layer(minimax, 5, 1) == (
        kernels_per_layer(qwen, 5, 8) - kernels_per_layer(qwen, 5, 1) + 1
    )


def test_tp1_has_no_tax():
    r = _run(model="llama-3.1-8b", num_gpus=1)
    assert r["allreduce_time_per_step_s"] == 0 and r["allreduce_tax_fraction"] == 0
    assert r["bytes_sent_per_gpu_per_step"] == 0


def test_monotonic_in_tokens_degree_and_bandwidth():
    times = [_run(batch_size=b)["allreduce_time_per_step_s"] for b in (1, 64, 4096)]
    assert times == sorted(times) and times[0] < times[-1]
    per_token = [_run(batch_size=b)["allreduce_time_per_token_s"] for b in (1, 64, 4096)]
    assert per_token == sorted(per_token, reverse=True)  # latency amortised over the batch
    by_n = [_run(num_gpus=n)["time_per_allreduce_s"] for n in (2, 4, 8)]
    assert by_n == sorted(by_n)
    by_link = [
        _run(link=k, batch_size=2048, gpus_per_node=1, **kw)["allreduce_time_per_step_s"]
        for k, kw in (("nvlink5", {}), ("nvlink4", {}), ("ib-ndr-400", {}), ("pcie5-x16", {"host_cpu": "amd"}))
    ]  # IB: one GPU per server, 50 GB/s each; PCIe Gen5 over 8 GPUs on two AMD sockets: 16 GB/s between them
    assert by_link == sorted(by_link)
    slow = _run(link="custom", link_bandwidth_gb_per_s=10, batch_size=2048)["allreduce_time_per_step_s"]
    assert slow > by_link[-1]
    assert (
        _run(link_efficiency=0.5, batch_size=2048)["allreduce_time_per_step_s"]
        > _run(batch_size=2048)["allreduce_time_per_step_s"]
    )


def test_base_latency_adds_per_call():
    a, b = _old(), _old(base_latency_us=6.6)
    assert b["allreduce_time_per_step_s"] - a["allreduce_time_per_step_s"] == pytest.approx(162 * 6.6e-6)  # + gather


def test_link_presets_agree_with_accelerator_presets():
    assert LINKS["nvlink4"]["bandwidth_bytes_per_s"] == ACC["h100-sxm"].scale_up_bandwidth_bytes_per_s
    assert LINKS["nvlink5"]["bandwidth_bytes_per_s"] == ACC["gb200"].scale_up_bandwidth_bytes_per_s
    assert LINKS["ib-ndr-400"]["bandwidth_bytes_per_s"] == 400e9 / 8
    for e in LINKS.values():
        assert e["source"] and e["hw"] in ("nvlink", "pci", "net")


def test_every_chip_without_a_scale_up_link_names_its_pcie_but_geforce():
    # a chip with no scale-up link names the PCIe link its GPUs share (a PCI link of interconnects.toml), but GeForce
    # cards, which have no GPU peer-to-peer (NVIDIA/nccl issue #1309): their collectives go through host memory
    for k in PCIE_LINKS:
        assert LINKS[k]["hw"] == "pci" and LINKS[k]["kind"] == "scale-up"
        # NCCL's own model of the link: width x GT/s / 80 (src/graph/topo.cc), below the line rate
        assert LINKS[k]["ring_bandwidth_bytes_per_s"] == LINKS[k]["bandwidth_bytes_per_s"] * 0.75
    for acc in accelerator_presets().values():
        geforce = "GeForce" in acc.name
        assert bool(acc.scale_up_bandwidth_bytes_per_s) != bool(acc.pcie_link) or geforce, acc.id
        assert not (geforce and acc.pcie_link), acc.id


def test_accelerator_without_scale_up_link_rings_over_its_pcie_or_names_the_field():
    # the L40S lists PCIe 4.0 x16 (pcie_link): its own link is that, at NCCL's PCI latencies; a chip listing neither
    # a scale-up link nor PCIe is refused at the link field
    own, preset = _old(hardware="l40s", num_gpus=2), _old(hardware="l40s", num_gpus=2, link="pcie4-x16")
    assert own["link_bandwidth_bytes_per_s"] == preset["link_bandwidth_bytes_per_s"] == 24e9  # NCCL's model
    assert own["time_per_allreduce_s"] == preset["time_per_allreduce_s"]
    auto = _run(hardware="l40s", num_gpus=8, batch_size=1, protocol="ll")
    # LL's base 6.6 us and 14 steps of hwLat[PCI][Ring][LL] = 1.0 us (NVLink's would be 0.6 us), per hop
    assert auto["latency_per_hop_s"] == pytest.approx((6.6e-6 + 14 * 1.0e-6) / 14)
    bare = {k: v for k, v in asdict(accelerator_presets()["l40s"]).items() if k != "pcie_link"}
    with pytest.raises(InputError) as exc:
        _run(hardware=bare, num_gpus=2)
    assert exc.value.to_json()["field"] == "link"
    assert _old(hardware="l40s", num_gpus=2, link="pcie5-x16")["link_bandwidth_bytes_per_s"] == 48e9
    # one-shot and two-shot over PCIe: two GPUs at most (vLLM's custom all-reduce)
    assert _run(hardware="l40s", num_gpus=2, algorithm="one-shot")["time_per_allreduce_s"] > 0
    with pytest.raises(InputError) as exc:
        _run(hardware="l40s", num_gpus=4, algorithm="two-shot")
    assert exc.value.to_json()["field"] == "algorithm"


@pytest.mark.parametrize(("host", "gb_per_s"), [("intel-spr", 22), ("intel-emr", 40), ("amd", 16), ("intel-skl", 10)])
def test_a_pcie_ring_past_one_socket_moves_at_the_lesser_of_pcie_and_the_sockets_link(host, gb_per_s):
    """NCCL v2.30.7-1 src/graph/topo.h: SRP_QPI_BW 22, ERP_QPI_BW 40, AMD_BW 16, SKL_QPI_BW 10 GB/s between the
    sockets; a two-socket PCIe server holds 4 GPUs a socket (NVIDIA's 2-8-5 reference server), so rings of up to 4
    run at PCIe's 24 GB/s (Gen4) or 48 (Gen5) and rings of 5 to 8 at the lesser of that and the sockets' link."""
    for n in (2, 4):
        assert _old(hardware="l40s", num_gpus=n, host_cpu=host)["link_bandwidth_bytes_per_s"] == 24e9
    for n in (5, 8):
        wide = _old(hardware="l40s", num_gpus=n, host_cpu=host)
        assert wide["link_bandwidth_bytes_per_s"] == min(24, gb_per_s) * 1e9
        assert any("CPU sockets' link" in str(s.get("formula")) for s in wide["derivation"])
        gen5 = _old(hardware="l40s", num_gpus=n, host_cpu=host, link="pcie5-x16")
        assert gen5["link_bandwidth_bytes_per_s"] == min(48, gb_per_s) * 1e9
    # a ring across servers of 8 L40S runs NIC to NIC through each; NCCL alternates its channels' direction (crossNic)
    # except through AMD CPUs (search.cc lines 1203-1205), so the link carries half of them each way: min(PCIe, 2 × it)
    net = _old(hardware="l40s", num_gpus=16, link="ib-ndr-400", gpus_per_node=8, host_cpu=host)
    assert net["link_bandwidth_bytes_per_s"] == min(24, gb_per_s * (1 if host == "amd" else 2)) * 1e9
    # with one NIC a server NCCL does not alternate (search.cc lines 1080-1084): each channel crosses both ways
    one_nic = _old(hardware="l40s", num_gpus=16, link="ib-ndr-400", gpus_per_node=8, nics_per_node=1, host_cpu=host)
    assert one_nic["link_bandwidth_bytes_per_s"] == min(24, gb_per_s) * 1e9
    # every GPU behind one socket's switches: nothing to cross, on an Intel or an AMD host
    for one in ("one-socket", "one-socket-amd"):
        assert _old(hardware="l40s", num_gpus=8, host_cpu=one)["link_bandwidth_bytes_per_s"] == 24e9
    # a chip with a scale-up link never crosses the sockets for its own ring
    assert _old(hardware="h100-sxm", num_gpus=8, host_cpu=host)["link_bandwidth_bytes_per_s"] == 450e9


def test_chips_to_hold_the_weights():
    r = _run(model="llama-3.1-70b", weight_dtype="bf16")
    w = r["weight_bytes"]
    assert r["min_gpus_for_weights"] == math.ceil(w / 80e9) == 2
    assert SRAM_PARTS["groq-lpu"]["sram_bytes"] == 220 * 2**20  # Groq ISCA 2022: 220 MiB
    s = run("sram", {"model": "llama-3.1-70b", "weight_dtype": "bf16"})
    assert s["weight_bytes"] == w and s["sram_chips_for_weights"] == math.ceil(w / (220 * 2**20)) == 612
    wse = run("sram", {"model": "llama-3.1-70b", "sram_part": "cerebras-wse3"})["sram_chips_for_weights"]
    assert wse == math.ceil(w / 44e9) == 4
    assert run("sram", {"model": "llama-3.1-70b", "weight_dtype": "fp8"})["sram_chips_for_weights"] == 306


def test_json_round_trip_and_series():
    out = json.loads(run_json("allreduce", json.dumps({"batch_size": 512})))
    assert "error" not in out
    s = out["series"]["allreduce_vs_tp"]
    assert len(s["y"]) == len(LINKS) + 1 and all(len(y["values"]) == len(s["x"]["values"]) for y in s["y"])
    assert s["y"][-1]["marker"] and s["y"][-1]["name"] == "your link at 8 GPUs"  # reader walk #29
    assert [d["label"] for d in out["derivation"]][0] == "Message per all-reduce"


def test_energy_per_token_is_power_times_step_over_tokens():
    """Energy per token = board power x GPUs x time per step / tokens per step."""
    for b in (1, 64):
        r = _run(model="llama-3.1-70b", hardware="h100-sxm", num_gpus=8, batch_size=b)
        assert r["joules_per_token_at_board_power"] == pytest.approx(700 * 8 * r["step_time_with_allreduce_s"] / b)
    assert (
        _run(batch_size=64)["joules_per_token_at_board_power"] < _run(batch_size=1)["joules_per_token_at_board_power"]
    )
    assert _run(hardware="tpu-v5e", num_gpus=8)["joules_per_token_at_board_power"] == 0  # power not published


# --- Multi-server rings (NCCL's ring model, src/graph/tuning.cc) ------------------------------
B405 = dict(
    model="llama-3.1-405b",
    hardware="b200",
    num_gpus=16,
    batch_size=64,
    weight_dtype="fp8",
    compute_dtype="fp8",
    link="ib-ndr-400",
)


def test_two_b200_servers_follow_nccls_ring_model():
    """NCCL v2.30.7-1 tuning.cc: of 2(n-1) = 30 steps only 2(nNodes-1) = 2 cross servers
    (hwLat[NET][Ring][LL] 2.7 us); the other 28 pay max(0.6 us NVLink, getNetOverhead 1 us); rings
    cross through all 8 NICs of a server, 8 x 50 GB/s = 400 GB/s, at full bandwidth with custom
    latencies and Simple (the reviewer's ~10.9 ms per step, 252 all-reduces)."""
    r = _old(**B405, latency_per_hop_us=0.6)
    assert (r["servers_spanned"], r["network_steps"]) == (2, 2)
    assert r["link_bandwidth_bytes_per_s"] == 400e9
    msg = 64 * 16384 * 2  # BF16 activations
    # custom latencies keep NCCL's network constants for the protocol: Simple 14 us, overhead 3 x 1 us
    per = 2 * 14e-6 + 28 * 3.0e-6 + 2 * 15 / 16 * msg / 400e9
    assert r["time_per_allreduce_s"] == pytest.approx(per, rel=1e-12)
    ll = _run(**B405, protocol="ll", latency_source="custom", latency_per_hop_us=0.6)
    assert ll["time_per_allreduce_s"] == pytest.approx(2 * 2.7e-6 + 28 * 1.0e-6 + 2 * 15 / 16 * msg / 39e9)


def test_an_amd_host_pays_nccls_amd_network_overhead_and_ll_cap_across_servers():
    """NCCL v2.30.7-1 tuning.cc: getNetOverhead is 2 us on x86 AMD hosts (1 on Intel), and across servers llMaxBw
    is read from the CPU's row, AMD's 22.5 GB/s at 2 servers (Intel's 39): the 28 in-server steps pay 2 us each."""
    ll = _run(**B405, protocol="ll", latency_source="custom", latency_per_hop_us=0.6, host_cpu="amd")
    msg = 64 * 16384 * 2
    assert ll["time_per_allreduce_s"] == pytest.approx(2 * 2.7e-6 + 28 * 2.0e-6 + 2 * 15 / 16 * msg / 22.5e9)
    one_socket = _run(**B405, protocol="ll", latency_source="custom", latency_per_hop_us=0.6, host_cpu="one-socket-amd")
    assert one_socket["time_per_allreduce_s"] == ll["time_per_allreduce_s"]  # the vendor's figures, no socket
    simple = _old(**B405, latency_per_hop_us=0.6, host_cpu="amd")  # Simple pays 3 × the overhead
    (row,) = [s for s in simple["derivation"] if s["label"].startswith("Time per all-reduce")]
    assert "AMD host" in row["template"] and "3 × for Simple" in row["template"] and row["terms"][-1][0] == 6.0e-6
    assert simple["time_per_allreduce_s"] == pytest.approx(2 * 14e-6 + 28 * 6.0e-6 + 2 * 15 / 16 * msg / 400e9)
    # inside one server the host's vendor changes nothing on NVLink
    one = {k: v for k, v in B405.items() if k not in ("link", "gpus_per_node", "num_gpus")}
    amd, intel = _run(**one, num_gpus=8, host_cpu="amd"), _run(**one, num_gpus=8)
    assert {k: v for k, v in amd.items() if k != "series"} == {k: v for k, v in intel.items() if k != "series"}


def test_one_gpu_per_server_uses_the_tree_network_latency():
    """Review parts-1-3 row 11. NCCL tuning.cc: "With ppn=1 latencies are fully exposed, use the Tree
    network latency": hwLat[NET][Tree][LL] = 5.0 us per step, not the ring's 2.7 us. The old model
    (2.7 us, one NIC's 50 GB/s, no base) gave 40.2 ms for this step; at 5.0 us and the same bandwidth
    the reviewer gets about 57 ms."""
    r = _run(**B405, gpus_per_node=1, protocol="ll", latency_source="custom", base_latency_us=0)
    assert (r["servers_spanned"], r["network_steps"]) == (16, 30)
    assert r["latency_per_hop_s"] == pytest.approx(5.0e-6)
    msg = 64 * 16384 * 2
    bw = min(20.4e9, 0.5 * 50e9)  # LL across 3+ servers: llMaxBw (Intel host) 20.4 GB/s
    assert r["time_per_allreduce_s"] == pytest.approx(30 * 5.0e-6 + 2 * 15 / 16 * msg / bw, rel=1e-12)
    simple = _run(**B405, gpus_per_node=1, protocol="simple", latency_source="custom", base_latency_us=0)
    # the reviewer's ~57 ms: 252 x (30 x 5.0 us + 2(n-1)/n x M / 50 GB/s); Simple pays Tree 14 us instead
    assert simple["latency_per_hop_s"] == pytest.approx(14e-6)
    reviewer = 252 * (30 * 5.0e-6 + 2 * 15 / 16 * msg / 50e9)
    assert reviewer == pytest.approx(57.6e-3, rel=0.01)
    assert r["allreduce_time_per_step_s"] > reviewer  # the LL cap makes it slower still


@pytest.mark.parametrize("batch", [1, 64, 2048])
def test_monotonic_in_gpus_per_server(batch):
    """More GPUs per server: fewer network steps and more NICs to cross through, never slower (on GB200, whose
    NVLink joins 72, so that 16 can share one)."""
    nvl = {**B405, "hardware": "gb200", "batch_size": batch}
    t = [_old(**nvl, gpus_per_node=g)["allreduce_time_per_step_s"] for g in (1, 2, 4, 8, 16)]
    assert t == sorted(t, reverse=True) and t[0] > t[-1]
    # 16 per server: the ring fits in one server and is the plain NVLink 5 ring.
    assert t[-1] == pytest.approx(_old(**{**nvl, "link": "nvlink5"})["allreduce_time_per_step_s"])


def test_a_server_holds_at_most_the_gpus_its_link_joins():
    # an HGX B200's NVLink joins 8 and an L40S server's PCIe switches 8: 16 asked are priced as servers of 8, as the
    # serving calculators cut them; an H100 PCIe's NVLink bridge joins 2, so its 8-GPU servers are priced as pairs
    for hardware, joined in (("b200", 8), ("l40s", 8), ("h100-pcie", 2)):
        kw = {**B405, "hardware": hardware, "link": "ib-ndr-400"}
        asked = run("allreduce", {**kw, "gpus_per_node": 16})
        assert (
            asked["allreduce_time_per_step_s"]
            == run("allreduce", {**kw, "gpus_per_node": joined})["allreduce_time_per_step_s"]
        )
        assert f"servers of {joined} (cut from 16" in json.dumps(asked)


def test_nics_per_server():
    prefill = {**B405, "batch_size": 4096}
    one_per_gpu = _old(**prefill)["allreduce_time_per_step_s"]
    assert _old(**prefill, nics_per_node=8)["allreduce_time_per_step_s"] == one_per_gpu  # 0 = one per GPU
    fewer = [_old(**prefill, nics_per_node=k)["allreduce_time_per_step_s"] for k in (1, 2, 4, 8)]
    assert fewer == sorted(fewer, reverse=True)
    # Cross-server bandwidth cannot beat the in-server link: 32 NICs still give NVLink 5's 900 GB/s.
    assert _old(**prefill, nics_per_node=32)["link_bandwidth_bytes_per_s"] == 900e9


def test_network_link_inside_one_server_is_the_scale_up_ring():
    """A ring that fits in one server never touches the network: same as the accelerator's link."""
    for hw in ("h100-sxm", "b200"):
        a = _old(hardware=hw, link="accelerator", batch_size=512)
        b = _old(hardware=hw, link="ib-ndr-400", batch_size=512)
        assert b["allreduce_time_per_step_s"] == a["allreduce_time_per_step_s"] and b["network_steps"] == 0


@pytest.mark.parametrize("hw, bw", [("h100-sxm", 450e9), ("b200", 900e9)])
@pytest.mark.parametrize("batch", [1, 64, 2048])
def test_single_node_switched_results_unchanged(hw, bw, batch):
    """NVSwitch parts: the old formula, to the last bit, with the accelerator link."""
    r = _old(model="llama-3.1-70b", hardware=hw, num_gpus=8, batch_size=batch)
    per = ring_allreduce_time(batch * 8192 * 2, 8, bw, 0.6e-6)
    assert r["link_bandwidth_bytes_per_s"] == bw and r["time_per_allreduce_s"] == pytest.approx(per, rel=1e-11)
    assert r["latency_per_hop_s"] == pytest.approx(0.6e-6) and r["servers_spanned"] == 1


def test_network_link_without_scale_up_names_gpus_per_node():
    # a chip with neither a scale-up link nor PCIe cannot run the in-server steps; the L40S runs them over PCIe
    bare = {k: v for k, v in asdict(accelerator_presets()["l40s"]).items() if k != "pcie_link"}
    with pytest.raises(InputError) as exc:
        _old(hardware=bare, num_gpus=2, link="ib-ndr-400")
    assert exc.value.to_json()["field"] == "gpus_per_node"
    assert _old(hardware="l40s", num_gpus=16, link="ib-ndr-400", gpus_per_node=8)["servers_spanned"] == 2
    assert _old(hardware="l40s", num_gpus=2, link="ib-ndr-400", gpus_per_node=1)["link_bandwidth_bytes_per_s"] == 50e9


# --- Mesh and torus scale-up links -------------------------------------------------------------


def test_mi300x_mesh_rings_use_the_links_to_the_other_members():
    """AMD ROCm blog 'Understanding RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X'
    (2025-03-02): fully connected mesh, 64 GB/s per link per direction, 448 GB/s (7 x 64) per GPU;
    RCCL all_reduce_perf on 8 GPUs measures ~319 GB/s bus bandwidth at 16 GB. So at TP 8 rings use
    all 7 links (a one-link ring, 64 GB/s, would give ~148 ms for the example below and is
    contradicted by that measurement); at TP 2 only the one link between the pair is there."""
    ex = dict(model="llama-3.1-70b", hardware="mi300x", link="accelerator", batch_size=2048)
    bws = {n: _old(**ex, num_gpus=n)["link_bandwidth_bytes_per_s"] for n in (2, 4, 8)}
    assert bws == {2: 64e9, 4: 192e9, 8: 448e9}
    measured_busbw = 319e9
    assert 64e9 < measured_busbw <= bws[8]
    r8 = _old(**ex)
    assert r8["time_per_allreduce_s"] * 160 == pytest.approx(22.3e-3, rel=0.005)
    assert r8["time_per_allreduce_s"] == pytest.approx(
        ring_allreduce_time(2048 * 8192 * 2, 8, 448e9, 0.6e-6), rel=1e-12
    )
    r2 = _old(**ex, num_gpus=2)
    assert r2["time_per_allreduce_s"] == pytest.approx(ring_allreduce_time(2048 * 8192 * 2, 2, 64e9, 0.6e-6))
    assert any(d["label"] == "Ring bandwidth on the chip's links" for d in r2["derivation"])


def test_mi325x_and_mi355x_meshes_follow_amds_aggregate_peer_bandwidth():
    """AMD ROCm docs 'AMD Instinct MI300 Series / MI350 Series workload optimization' (docs-7.2.4), table
    'Architecture comparison': 'P2P ring aggregate BW' 896 GB/s for the MI300X and the MI325X, 1,075.2 GB/s for
    the MI350X and MI355X (bidirectional over the 7 peer links of a fully meshed 8-GPU board, AMD's
    system-acceptance docs). Per direction: 448 and 537.6 GB/s, 64 and 76.8 GB/s a link. RCCL all_reduce_perf on
    8 MI350X measured 361 GB/s bus bandwidth out of place at 8 GB (the acceptance docs' example), within the
    ring's bandwidth on the chip's links."""
    for chip, aggregate_bidirectional in (("mi325x", 896e9), ("mi355x", 1075.2e9)):
        acc = ACC[chip]
        assert 2 * acc.scale_up_bandwidth_bytes_per_s == pytest.approx(aggregate_bidirectional)
        assert acc.scale_up_bandwidth_bytes_per_s == pytest.approx(7 * acc.scale_up_link_bandwidth_bytes_per_s)
        ex = dict(model="llama-3.1-70b", hardware=chip, link="accelerator", batch_size=2048)
        bws = {n: _old(**ex, num_gpus=n)["link_bandwidth_bytes_per_s"] for n in (2, 8)}
        assert bws[2] == acc.scale_up_link_bandwidth_bytes_per_s and bws[8] == acc.scale_up_bandwidth_bytes_per_s
    assert ACC["mi355x"].scale_up_link_bandwidth_bytes_per_s < 361e9 <= ACC["mi355x"].scale_up_bandwidth_bytes_per_s
    assert ACC["mi325x"].scale_up_bandwidth_bytes_per_s == ACC["mi300x"].scale_up_bandwidth_bytes_per_s


def test_neuronlink_rings_take_awss_figures_as_both_directions_together():
    """AWS Neuron docs (aws-neuron/aws-neuron-sdk @ 81ce03a): Trainium2, 'Intra-instance NeuronLink-v3 bandwidth
    (GB/sec/chip)' 1,024 in a 4x4 2D torus of 16 chips, 4 neighbours a chip (trn2-arch, collectives); Inferentia2,
    'NeuronLink-v2 chip-to-chip (GiB/sec/chip)' 192, a ring of 12 drawn with 96 GiB/s links (inf2-arch). No
    direction is stated; the catalogue halves each figure (the conservative reading), so a ring along one torus
    dimension gets two links' worth: 256 GB/s on a Trainium2, 96 GiB/s (the chip's whole) on an Inferentia2; a ring of
    two, the one link between the pair."""
    trn2, inf2 = ACC["trainium2"], ACC["inferentia2"]
    assert 2 * trn2.scale_up_bandwidth_bytes_per_s == 1024e9
    assert 4 * trn2.scale_up_link_bandwidth_bytes_per_s == 1024e9 / 2
    assert trn2.scale_up_domain == 16 and trn2.scale_up_topology == "torus"
    assert 2 * inf2.scale_up_bandwidth_bytes_per_s == 192 * 2**30
    assert 2 * inf2.scale_up_link_bandwidth_bytes_per_s == 96 * 2**30
    assert inf2.scale_up_domain == 12 and inf2.scale_up_topology == "torus"
    ex = dict(model="llama-3.1-8b", link="accelerator", batch_size=2048)
    assert _old(**ex, hardware="trainium2", num_gpus=4)["link_bandwidth_bytes_per_s"] == 256e9
    assert _old(**ex, hardware="inferentia2", num_gpus=4)["link_bandwidth_bytes_per_s"] == 96 * 2**30
    assert _old(**ex, hardware="inferentia2", num_gpus=2)["link_bandwidth_bytes_per_s"] == 48 * 2**30
    assert _old(**ex, hardware="trainium2", num_gpus=2)["link_bandwidth_bytes_per_s"] == 128e9


def test_gaudi3_mesh_uses_its_21_scale_up_ports():
    """Intel Gaudi docs, 'Intel Gaudi Network Configuration': 21 scale-up ports, 3 to each of the 7
    peers, 525 GB/s per direction (the chip's 600 GB/s counts 3 scale-out ports); HCCL all-reduce on
    8 cards measures 513 GB/s ('Collectives Performance'), just under that peak."""
    assert ACC["gaudi3"].scale_up_link_bandwidth_bytes_per_s == 3 * 200e9 / 8
    bw = _old(hardware="gaudi3", num_gpus=8)["link_bandwidth_bytes_per_s"]
    assert bw == 525e9 and 513e9 <= bw
    assert _old(hardware="gaudi3", num_gpus=2)["link_bandwidth_bytes_per_s"] == 75e9


def test_torus_ring_uses_one_dimension():
    """A ring along one torus dimension uses that dimension's two links; where the per-link figure is
    not sourced (Cloud TPU docs give per-chip totals only) the chip total is used and said to be an upper bound."""
    r = _old(hardware="tpu-v5e", num_gpus=8)
    assert r["link_bandwidth_bytes_per_s"] == 200e9
    assert "upper bound" in next(d["formula"] for d in r["derivation"] if d["label"].startswith("Ring bandwidth"))
    mine = {
        "name": "Torus chip",
        "memory_bytes": 96e9,
        "memory_bandwidth_bytes_per_s": 2e12,
        "dense_flops_per_s": {"bf16": 400e12},
        "scale_up_bandwidth_bytes_per_s": 600e9,
        "scale_up_topology": "torus",
        "scale_up_link_bandwidth_bytes_per_s": 100e9,
    }
    assert _old(hardware=mine, num_gpus=8)["link_bandwidth_bytes_per_s"] == 200e9
    assert _old(hardware=mine, num_gpus=2)["link_bandwidth_bytes_per_s"] == 100e9  # the pair's one link
    assert _old(hardware={**mine, "scale_up_topology": "switched"}, num_gpus=8)["link_bandwidth_bytes_per_s"] == 600e9


def test_one_gpu_on_a_one_gpu_server_with_a_direct_algorithm_costs_nothing():
    """Found by tests/core/test_properties.py: one GPU per server has no intra-server bandwidth (None), and
    the direct algorithms' one-GPU case multiplied it."""
    from calculators.api import run

    r = run("allreduce", {"num_gpus": 1, "gpus_per_node": 1, "algorithm": "one-shot", "link": "ib-ndr-400"})
    assert r["time_per_allreduce_s"] == 0.0 and r["allreduce_time_per_step_s"] == 0.0

"""Issue #16: one multi-GPU deployment model behind StepModel's interface (calculators/sharded_steps.py), and the
memory, latency, goodput calculators and the engine simulator taking pipeline, attention-data and expert
parallelism through it. Exact agreement where two paths must be one model; published deployments where cited."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from calculators import run
from calculators.calcs import sharding_breakdown
from calculators.calcs.latency import SCHEMA as LATENCY
from calculators.calcs.memory import Footprint, budget
from calculators.calcs.sharding import deployment_model, sharded_steps
from calculators.calcs.steptime import StepModel, deployment
from calculators.catalog import accelerator_presets, model_presets
from calculators.engine.config import EngineConfig, Request
from calculators.engine.run import simulate
from calculators.engine.steps import StepTimes
from calculators.errors import InputError
from calculators.cluster import allgather_s, allreduce_s
from calculators.parallel import Parallelism, allowed
from calculators.parallel_search import candidates
from calculators.params import expert_params, total_params
from calculators.schema import validate
from calculators.sharded_steps import ShardedSteps

MODELS = model_presets()


def _dm(**inputs):
    return deployment_model(validate(sharding_breakdown.SCHEMA["inputs"], inputs))


def _steps(**inputs):
    v = validate(LATENCY["inputs"], inputs)
    return v, sharded_steps(v, deployment(v))


# ---- one model, two interfaces ------------------------------------------------------------------------------


@pytest.mark.parametrize("batch, context", [(1, 100), (32, 2000), (256, 8000)])
def test_one_gpu_is_the_step_model_exactly(batch, context):
    dm = _dm(model="llama-3.1-8b", nodes=1)
    one, plain = ShardedSteps(dm, Parallelism(1)), dm.step_model(1)
    assert one.decode(batch, context).time_s == plain.decode(batch, context).time_s
    prompts = [context] * min(batch, 4)
    assert one.prefill(prompts).time_s == plain.prefill(prompts).time_s
    flops, kv = plain.per_prompt(context)
    assert one.step_time(flops, context, kv, 1) == plain.step_time(flops, context, kv)


def test_a_decode_step_is_the_sharding_searchs_tpot():
    # every sharding of DeepSeek-V3 on four HGX H100 servers (TP, DP attention, EP, PP, DCP), at batches of at least
    # one sequence per attention rank and micro-batch: the adapter's step is parallel.Decode's TPOT
    dm = _dm(model="deepseek-v3", weight_dtype="fp8", compute_dtype="fp8", nodes=4)
    checked = 0
    for p in candidates(dm.model, dm.cluster):
        s = ShardedSteps(dm, p)
        for batch in (p.dp * p.m, 300, 1000):
            assert s.decode(batch, 3000).time_s == pytest.approx(dm.decode(p, batch, 3000).tpot_s, rel=1e-12)
            checked += 1
    assert checked > 300


def test_tp_adds_its_all_reduces_to_the_kernel_time():
    # Llama 3.1 8B on TP 8 in one HGX H100: a decode step = StepModel's TP-8 step + (2L + 1) all-reduces of the batch's
    # activations + the logits gather (NCCL's ring on NVLink), nothing else
    dm = _dm(model="llama-3.1-8b", nodes=1)
    s = ShardedSteps(dm, Parallelism(8))
    m, batch = dm.model, 64
    ar = allreduce_s(dm.cluster, batch * m.hidden_size * 2, 8)
    gather = allgather_s(dm.cluster, batch * m.vocab_size * 2, 8)
    cost = s.decode(batch, 2000)
    assert cost.comm_s == pytest.approx((2 * m.num_layers + 1) * ar + gather, rel=1e-12)
    assert cost.time_s == pytest.approx(dm.step_model(8).decode(batch, 2000).time_s + cost.comm_s, rel=1e-12)
    # a prefill samples one token per prompt: its gather is of one row, not of every prompt token
    pre = s.prefill([2000])
    assert pre.comm_s == pytest.approx(
        (2 * m.num_layers + 1) * allreduce_s(dm.cluster, 2000 * m.hidden_size * 2, 8)
        + allgather_s(dm.cluster, m.vocab_size * 2, 8),
        rel=1e-12,
    )


def test_one_prompt_on_a_dp_deployment_is_prefilled_by_one_rank():
    # DP attention: a prompt belongs to one rank, so one prompt alone costs one rank's prefill of all its tokens, and
    # eight prompts spread over eight ranks take about as long as one (their experts shared)
    _, s = _steps(model="deepseek-v3", weight_dtype="fp8", compute_dtype="fp8", num_gpus=1, dp=8, ep=8)
    one, eight = s.prefill([4096]).time_s, s.prefill([4096] * 8).time_s
    assert eight < 2 * one
    assert s.prefill([4096] * 16).time_s > 1.5 * eight


# ---- the engine simulator runs any deployment --------------------------------------------------------------


def test_the_simulator_decodes_at_the_deployments_tpot():
    # 512 sequences decoding on DeepSeek-V3 with DP 16 attention and EP 16 over two HGX H100 servers, no arrivals: the
    # simulated output rate is the deployment model's batch ÷ TPOT (the context grows by a token a step: within 1%)
    v, s = _steps(model="deepseek-v3", weight_dtype="fp8", compute_dtype="fp8", num_gpus=1, dp=16, ep=16)
    context, out = 2000, 64
    requests = [Request(0.0, context, out + 10, generated=10) for _ in range(512)]
    result = simulate(StepTimes(s), requests, EngineConfig(kv_blocks=10**7, max_num_seqs=4096))
    dm_rate = s.dm.decode(s.p, 512, context + 10 + out / 2).tokens_per_s
    # the engine's rate counts every output token of the finished requests, the 10 of the warm start too
    assert result.output_tokens_per_s * out / (out + 10) == pytest.approx(dm_rate, rel=0.01)
    tp16 = _steps(model="deepseek-v3", weight_dtype="fp8", compute_dtype="fp8", num_gpus=16)[1]
    # TP 16's all-reduces cross servers: DP attention serves about twice the tokens (1.9× with the fitted floor)
    assert dm_rate > 1.8 * 512 / tp16.decode(512, context + 10 + out / 2).time_s


# ---- memory -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MODELS))
def test_memorys_two_weight_rules_are_one_at_tp_alone(name):
    # budget() with a Parallelism of TP alone goes through parallel.gpu_memory; without, through params.weight_bytes
    model = MODELS[name]
    f = Footprint(model, "bf16", "bf16")
    for tp in (1, 2, 8):
        if not allowed(model, Parallelism(tp)):
            continue
        a, b = budget(f, 80e9, tp, 4096), budget(f, 80e9, tp, 4096, Parallelism(tp))
        assert b.weights == pytest.approx(a.weights, rel=1e-12)
        assert (b.per_token, b.per_seq, b.sequences) == (a.per_token, a.per_seq, a.sequences)


def test_llama_405b_fits_two_hgx_servers_with_pipeline_stages():
    # Llama 3.1 405B in BF16 (811 GB) does not fit one HGX H100 at TP 8; TP 8 × PP 2, the split vLLM's
    # distributed-serving docs give for a model larger than one node (docs/serving/parallelism_scaling.md, v0.33.0),
    # holds about half the weights per GPU
    base = {"model": "llama-3.1-405b", "hardware": "h100-sxm", "tensor_parallel": 8, "context_tokens": 8192}
    one, two = run("memory", base), run("memory", dict(base, pp=2))
    assert one["fits"] == 0 and two["fits"] == 1
    assert two["weight_bytes_per_gpu"] == pytest.approx(one["weight_bytes_per_gpu"] / 2, rel=0.02)
    assert two["weight_bytes_total"] == one["weight_bytes_total"]


def test_dp_attention_ranks_each_hold_their_own_sequences():
    # DeepSeek-V3 on 16 H100s, DP 16 attention with EP 16: each GPU holds the non-expert weights whole and 1/16 of the
    # experts, and the deployment's sequences are each rank's times 16
    r = run(
        "memory",
        {
            "model": "deepseek-v3",
            "hardware": "h100-sxm",
            "weight_dtype": "fp8",
            "tensor_parallel": 1,
            "dp": 16,
            "ep": 16,
            "context_tokens": 4096,
        },
    )
    per_rank = int(r["kv_budget_bytes_per_gpu"] // r["kv_bytes_per_sequence_per_gpu"])
    assert r["max_concurrent_sequences"] == 16 * per_rank > 0
    m = MODELS["deepseek-v3"]
    dense, experts = total_params(m) - expert_params(m), expert_params(m)  # FP8: a byte each
    assert r["weight_bytes_per_gpu"] == pytest.approx(dense + experts / 16, rel=1e-12)
    assert r["weight_bytes_total"] == pytest.approx(16 * dense + experts, rel=1e-12)


# ---- latency and goodput ------------------------------------------------------------------------------------


def test_goodput_per_gpu_and_the_cap_count_every_gpu():
    r = run("goodput", {"model": "llama-3.1-70b", "num_gpus": 4, "pp": 2, "num_requests": 200})
    assert r["max_rate_meeting_slo_requests_per_s_per_gpu"] == pytest.approx(
        r["max_rate_meeting_slo_requests_per_s"] / 8, rel=1e-9
    )
    dp = run("goodput", {"model": "qwen3-30b-a3b", "num_gpus": 1, "dp": 4, "ep": 4, "num_requests": 200})
    assert dp["max_running_sequences"] == 4 * 1024  # vLLM's max_num_seqs per DP rank on an H100


def test_latency_prices_pipeline_stages_slower_than_the_tp_group_they_split():
    # the same 8 GPUs: TP 4 × PP 2 decodes each token through two stages one after another (its TPOT is two stage
    # slots), so at batch 1 it is slower than TP 8, whose all-reduces are cheaper than a second stage's weights read
    tp8 = run("latency", {"model": "llama-3.1-70b", "num_gpus": 8, "batch_size": 1})
    pp2 = run("latency", {"model": "llama-3.1-70b", "num_gpus": 4, "pp": 2, "batch_size": 1})
    assert pp2["tpot_s"] > tp8["tpot_s"]
    assert pp2["decode_tokens_per_s_per_gpu"] == pytest.approx(1 / pp2["tpot_s"] / 8, rel=1e-9)


@pytest.mark.parametrize(
    "inputs, field",
    [
        ({"num_gpus": 3}, "num_gpus"),  # 32 heads
        ({"ep": 4}, "ep"),  # a dense model
        ({"model": "qwen3-30b-a3b", "num_gpus": 2, "dp": 2, "ep": 2}, "ep"),  # must be tp × dp = 4
    ],
)
def test_an_impossible_deployment_is_refused_at_its_field(inputs, field):
    for name in ("latency", "goodput"):
        with pytest.raises(InputError) as e:
            run(name, inputs)
        assert e.value.field == field


def test_pcie_only_gpus_price_their_all_reduces_over_pcie():
    """The L40S lists no scale-up link but PCIe 4.0 x16 (accelerators.toml pcie_link): TP prices NCCL's ring on it and
    says so; a chip listing neither keeps the unpriced step and says that instead."""
    inputs = {"hardware": "l40s", "num_gpus": 4, "model": "llama-3.1-8b", "batch_size": 8}
    r = run("latency", inputs)
    assert any("priced as NCCL models PCIe 4.0 x16" in n for n in r["notes"])
    v = validate(LATENCY["inputs"], inputs)
    steps = sharded_steps(v, deployment(v))
    step = steps.decode(8, 1024 + 128)
    ring = steps.dm.cluster
    assert ring.gpus_per_node == 4 and step.comm_s > 0
    assert step.time_s > StepModel(deployment(v)).decode(8, 1024 + 128).time_s
    # PP, DP and EP are priced on the same link now
    assert run("latency", {**inputs, "num_gpus": 2, "pp": 2})["tpot_s"] > 0
    bare = {k: val for k, val in asdict(accelerator_presets()["l40s"]).items() if k != "pcie_link"}
    r = run("latency", {**inputs, "hardware": bare, "num_gpus": 2})
    assert any("not priced" in n for n in r["notes"])
    v = validate(LATENCY["inputs"], {**inputs, "hardware": bare, "num_gpus": 2})
    assert r["tpot_s"] == pytest.approx(StepModel(deployment(v)).decode(8, 1024 + 128).time_s, rel=1e-12)
    with pytest.raises(InputError) as e:
        run("latency", {**inputs, "hardware": bare, "num_gpus": 2, "pp": 2})
    assert e.value.field == "pp"
    # GeForce cards have no GPU peer-to-peer (NVIDIA/nccl issue #1309): no pcie_link, the unpriced step and its note
    geforce = run("latency", {**inputs, "hardware": "rtx-4090", "num_gpus": 2})
    assert any("not priced" in n and "GeForce cards" in n for n in geforce["notes"])


def test_the_pcie_note_names_the_sockets_link_only_where_communication_crosses_it():
    """Eight L40S at TP 8 ring across both sockets (4 a socket, assumed) and the host changes the step; TP 4 with DP 2
    rings over 4 and the host changes nothing; TP 4 with PP 2 sends each stage's output from one socket's GPUs to the
    other's, over the sockets' link (TP 2 with PP 2 stays behind one socket)."""
    base = {"hardware": "l40s", "model": "llama-3.1-70b", "weight_dtype": "fp8"}

    def crosses(r):
        return any("link between the sockets" in n for n in r["notes"])

    tp8 = {h: run("latency", {**base, "num_gpus": 8, "host_cpu": h}) for h in ("intel-spr", "amd", "one-socket")}
    assert crosses(tp8["intel-spr"]) and crosses(tp8["amd"]) and not crosses(tp8["one-socket"])
    assert tp8["amd"]["tpot_s"] > tp8["intel-spr"]["tpot_s"] > tp8["one-socket"]["tpot_s"]
    spr, amd = (run("latency", {**base, "num_gpus": 4, "host_cpu": h, "dp": 2}) for h in ("intel-spr", "amd"))
    assert not crosses(spr) and spr["tpot_s"] == amd["tpot_s"]
    # the sharding breakdown says the same of its layout (read 55: it showed no PCIe note at all)
    split = {**base, "nodes": 1, "dp": 1}
    assert crosses(run("sharding_breakdown", {**split, "tp": 8, "pp": 1}))
    assert not crosses(run("sharding_breakdown", {**split, "tp": 2, "pp": 2}))
    assert crosses(run("sharding_breakdown", {**split, "tp": 4, "pp": 2}))
    pp = {h: run("latency", {**base, "num_gpus": 4, "pp": 2, "host_cpu": h}) for h in ("intel-spr", "one-socket")}
    assert crosses(pp["intel-spr"]) and not crosses(pp["one-socket"])
    assert pp["intel-spr"]["tpot_s"] > pp["one-socket"]["tpot_s"]
    assert run("sharding_breakdown", {**split, "hardware": "h100-sxm", "tp": 8, "pp": 1})["notes"] == []


def test_point_to_point_and_all_to_all_inside_a_pcie_server_pay_pcis_step_latency():
    # NCCL's LL step on PCI is 1.0 us where NVLink's is 0.6 us (interconnects.toml [nccl]); a chip without a scale-up
    # link sends over its PCIe (24 GB/s a direction on Gen4, NCCL's model), so its sends and exchanges pay PCI's
    from calculators.cluster import Cluster, alltoall_s, p2p_s

    l40s, h100 = Cluster(accelerator_presets()["l40s"], 1, 8), Cluster(accelerator_presets()["h100-sxm"], 1, 8)
    assert p2p_s(l40s, 24e3, False) == pytest.approx(1.0e-6 + 24e3 / 24e9)
    assert p2p_s(h100, 24e3, False) == pytest.approx(0.6e-6 + 24e3 / 450e9)
    assert alltoall_s(l40s, 8e3, 4) == pytest.approx(1.0e-6 + 8e3 * 3 / 4 / 24e9)
    # past one socket's 4 GPUs, what 4 GPUs send to the other 4 (each 8e3 ÷ 8 to each) shares the sockets' link,
    # NCCL's 22 GB/s on the default host (Sapphire or Granite Rapids), 16 on AMD: slower than each GPU's PCIe
    assert alltoall_s(l40s, 8e3, 8) == pytest.approx(1.0e-6 + 4 * 4 * 8e3 / 8 / 22e9)
    amd = Cluster(accelerator_presets()["l40s"], 1, 8, host_cpu="amd")
    assert alltoall_s(amd, 8e3, 8) == pytest.approx(1.0e-6 + 4 * 4 * 8e3 / 8 / 16e9)
    one_socket = Cluster(accelerator_presets()["l40s"], 1, 8, host_cpu="one-socket")
    assert alltoall_s(one_socket, 8e3, 8) == pytest.approx(1.0e-6 + 8e3 * 7 / 8 / 24e9)
    # a pipeline boundary's sends that go from one socket's GPUs to the other's share the sockets' link
    assert p2p_s(l40s, 24e3, False, 4) == pytest.approx(1.0e-6 + 4 * 24e3 / 22e9)
    assert p2p_s(l40s, 24e3, False, 1) == pytest.approx(1.0e-6 + 24e3 / 22e9)
    emr = Cluster(accelerator_presets()["l40s"], 1, 8, host_cpu="intel-emr")  # 40 GB/s: one send is PCIe's, two not
    assert p2p_s(emr, 24e3, False, 1) == pytest.approx(1.0e-6 + 24e3 / 24e9)
    assert p2p_s(emr, 24e3, False, 2) == pytest.approx(1.0e-6 + 2 * 24e3 / 40e9)
    assert p2p_s(one_socket, 24e3, False, 4) == pytest.approx(1.0e-6 + 24e3 / 24e9)


@pytest.mark.parametrize(
    "stage, pp, crossing",
    [(4, 2, 4), (2, 2, 0), (2, 4, 2), (1, 8, 1), (1, 4, 0), (8, 1, 0), (4, 4, 4), (2, 8, 2), (8, 2, 0), (16, 2, 0)],
)
def test_a_pipeline_boundary_crosses_the_sockets_once_per_send_that_changes_socket(stage, pp, crossing):
    # servers of eight L40S, four behind each socket: stage k holds GPUs k × stage to (k + 1) × stage − 1, GPU j sends
    # to GPU j of the next stage; the worst boundary inside a server counts (one between servers goes over the NIC)
    from calculators.cluster import pipeline_socket_crossings

    assert pipeline_socket_crossings(stage, pp, 8, 4) == crossing
    assert pipeline_socket_crossings(stage, pp, 8, 0) == 0  # a one-socket host


def test_a_pipeline_across_servers_still_pays_the_sockets_link_at_its_boundaries_inside_one():
    """TP 4 × PP 4 on two servers of eight L40S: the boundary between the servers goes over the NIC, the two inside
    a server cross its sockets; the slowest sets the send, and the note says so. TP 2 × PP 2 × DP 4 puts each stage in
    a server of its own: nothing crosses a socket, and the note says nothing of it."""
    from calculators.cluster import Cluster, pipeline_send_s, p2p_s

    c = Cluster(accelerator_presets()["l40s"], 2, 8)
    msg = 8192 * 8192 * 2 / 4
    assert pipeline_send_s(c, msg, 4, 4) == pytest.approx(max(p2p_s(c, msg, True), p2p_s(c, msg, False, 4)))
    assert p2p_s(c, msg, False, 4) > p2p_s(c, msg, True)
    base = {"hardware": "l40s", "model": "llama-3.1-70b", "weight_dtype": "fp8", "num_gpus": 4, "pp": 4}
    spr, one = (run("latency", {**base, "host_cpu": h}) for h in ("intel-spr", "one-socket"))
    assert spr["tpot_s"] > one["tpot_s"]
    assert any("link between the sockets" in n for n in spr["notes"])
    split = {"hardware": "l40s", "model": "llama-3.1-70b", "weight_dtype": "fp8", "nodes": 2, "tp": 2, "pp": 2, "dp": 4}
    assert not any("link between the sockets" in n for n in run("sharding_breakdown", split)["notes"])

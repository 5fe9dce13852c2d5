"""Goodput per GPU, co-located against disaggregated, for the reader's workload (simulated).

Both systems get the same requests (Workload: gamma arrival gaps, lognormal or other lengths, seeded).
Co-located: `colocated_replicas` copies of the engine, each prefilling and decoding with chunked prefill
(vLLM V1's scheduler: decodes first, prompt chunks fill the token budget). Disaggregated: prefill
replicas → KV transfer over the link → decode replicas (engine/disagg.py). Requests are dealt round
robin in arrival order. A request meets the SLO when its TTFT and its mean TPOT are both within target;
goodput per GPU = rate × share meeting ÷ GPUs (the per-run request goodput vLLM's benchmark prints,
divided by the GPUs). The runs start empty and measure every request, so a rate near a pool's capacity
reads better than the steady state would.
"""

from __future__ import annotations

import math

from ..engine.config import EngineConfig
from ..engine.disagg import KvArrivedTimes, Link, Pool, simulate_colocated, simulate_disaggregated
from ..engine.metrics import percentile
from ..engine.workload import Workload, open_loop
from ..schema import boolean, integer, number, output, series, step
from .deployment import deployment_fields
from .kv_transfer import link_bytes_per_s, link_fields, prompt_kv_bytes
from .lengths import length_fields
from .memory import engine_fields, kv_pool_tokens
from .steptime import deployment
from ..engine.steps import StepTimes
from .sharding import steps_for

NO_BUDGET = 10 ** 9  # a decode replica admits a landed request's whole prompt in one step (its KV is there)
PCTS = list(range(0, 101, 5))


def _inputs() -> list[dict]:
    return deployment_fields(0.8, 0.6, {"num_gpus": {"label": "GPUs per co-located replica (tensor parallel)"}}) + \
        engine_fields() + [
        integer("colocated_replicas", "Co-located replicas", 2, 1, 64, "replicas"),
        integer("prefill_gpus", "GPUs per prefill replica", 1, 1, 64, "GPUs"),
        integer("prefill_replicas", "Prefill replicas", 1, 1, 64, "replicas"),
        integer("decode_gpus", "GPUs per decode replica", 1, 1, 64, "GPUs"),
        integer("decode_replicas", "Decode replicas", 1, 1, 64, "replicas"),
        number("request_rate_per_s", "Request rate (the whole system)", 8.0, 0.01, 1e5, "requests/s"),
        number("burstiness", "Arrival burstiness (gamma shape)", 1.0, 0.05, 100.0, "",
               "1 is Poisson, as vllm bench serve --burstiness.", 0.05),
        integer("num_requests", "Requests simulated", 150, 20, 2000, "requests"),
        integer("seed", "Random seed", 0, 0, 2 ** 31 - 1),
        *length_fields(4096, 256, input_max=200_000),
        integer("max_num_batched_tokens", "Co-located token budget per step", 8192, 16, 1_048_576, "tokens",
                "vLLM V1 v0.33.0's default on an H100 API server: 8,192. Prefill replicas use it too."),
        integer("max_num_seqs", "Cap on running sequences per replica", 1024, 1, 4096, "sequences"),
        number("ttft_slo_s", "TTFT target", 1.0, 0.001, 3600.0, "s"),
        number("tpot_slo_s", "TPOT target (per-request mean)", 0.015, 0.0001, 60.0, "s"),
    ] + link_fields() + [
        boolean("overlap", "Layer-wise overlap of the transfer", False,
                "Off: the KV moves after the prefill, as vLLM v0.33.0's NixlConnector moves it."),
    ]


SCHEMA = {
    "name": "disagg_goodput",
    "title": "Goodput per GPU: co-located against prefill/decode disaggregation (simulated)",
    "description": ("The same seeded requests served two ways by the engine simulator. Co-located: replicas that "
                    "each prefill and decode, with chunked prefill (decodes first in every step, prompt chunks fill "
                    "the token budget, as vLLM V1). Disaggregated: prefill replicas compute each prompt's KV, it "
                    "crosses the link (KV bytes ÷ bandwidth, one transfer at a time per prefill replica, optional "
                    "layer-wise overlap), and decode replicas generate every token, the first included. Requests "
                    "are dealt round robin. TTFT counts queue, prefill, transfer and the first decode step; TPOT "
                    "is the mean gap after the first token. Goodput per GPU = rate × share of requests meeting both "
                    "targets ÷ GPUs. Step times from the roofline model with the efficiency factors and the "
                    "per-step overhead; runs start empty; no network besides the KV link, no router cost."),
    "inputs": _inputs(),
    "outputs": [
        output("colocated_goodput_per_gpu", "Co-located: goodput per GPU", "requests/s", "rate"),
        output("disagg_goodput_per_gpu", "Disaggregated: goodput per GPU", "requests/s", "rate"),
        output("gain", "Disaggregated ÷ co-located, per GPU", "", "number"),
        output("colocated_attainment", "Co-located: requests meeting both targets", "", "percent"),
        output("disagg_attainment", "Disaggregated: requests meeting both targets", "", "percent"),
        output("colocated_gpus", "Co-located GPUs", "GPUs", "integer"),
        output("disagg_gpus", "Disaggregated GPUs", "GPUs", "integer"),
        output("colocated_ttft_p50_s", "Co-located TTFT p50", "s", "seconds"),
        output("colocated_ttft_p90_s", "Co-located TTFT p90", "s", "seconds"),
        output("colocated_tpot_p50_s", "Co-located TPOT p50", "s", "seconds"),
        output("colocated_tpot_p90_s", "Co-located TPOT p90", "s", "seconds"),
        output("disagg_ttft_p50_s", "Disaggregated TTFT p50", "s", "seconds"),
        output("disagg_ttft_p90_s", "Disaggregated TTFT p90", "s", "seconds"),
        output("disagg_tpot_p50_s", "Disaggregated TPOT p50", "s", "seconds"),
        output("disagg_tpot_p90_s", "Disaggregated TPOT p90", "s", "seconds"),
        output("transfer_mean_s", "Mean KV transfer (after the prefill, link queue included)", "s", "seconds"),
        output("prefill_mean_s", "Mean time on the prefill replica, first scheduled to KV done", "s", "seconds"),
        output("kv_bytes_per_token", "KV per prompt token", "B", "bytes"),
        output("rejected", "Requests no replica could hold", "requests", "integer"),
    ],
}


def _replica(v: dict, gpus: int):
    w = dict(v, num_gpus=gpus)
    return steps_for(w), int(kv_pool_tokens(w))


def _config(kv_tokens: int, max_seqs: int, budget: int) -> EngineConfig:
    """A replica's engine: blocks of 16 tokens, KV for prompt + output reserved on admission (no
    preemption, as the goodput calculator's server), chunked prefill under the token budget."""
    return EngineConfig(kv_blocks=max(1, kv_tokens // 16), max_num_seqs=max_seqs, max_num_batched_tokens=budget,
                        reserve_full_length=True)


def _pools(v: dict):
    cap, budget = v["max_num_seqs"], v["max_num_batched_tokens"]
    model, kv = _replica(v, v["num_gpus"])
    co = Pool(StepTimes(model), _config(kv, cap, budget), v["colocated_replicas"], v["num_gpus"])
    model, kv = _replica(v, v["prefill_gpus"])
    pre = Pool(StepTimes(model), _config(kv, cap, budget), v["prefill_replicas"], v["prefill_gpus"])
    model, kv = _replica(v, v["decode_gpus"])
    dec = Pool(KvArrivedTimes(model), _config(kv, cap, NO_BUDGET), v["decode_replicas"], v["decode_gpus"])
    return co, pre, dec


def _stats(outcome, v: dict, n: int, prefix: str) -> dict:
    ttft = sorted(s.ttft_s for s in outcome.served)
    tpot = sorted(s.tpot_s for s in outcome.served)
    met = outcome.attainment(v["ttft_slo_s"], v["tpot_slo_s"], n)
    return {f"{prefix}_attainment": met, f"{prefix}_goodput_per_gpu": v["request_rate_per_s"] * met / outcome.gpus,
            f"{prefix}_gpus": outcome.gpus,
            f"{prefix}_ttft_p50_s": percentile(ttft, 50), f"{prefix}_ttft_p90_s": percentile(ttft, 90),
            f"{prefix}_tpot_p50_s": percentile(tpot, 50), f"{prefix}_tpot_p90_s": percentile(tpot, 90),
            "_ttft": ttft, "_tpot": tpot}


def compute(v: dict) -> dict:
    co, pre, dec = _pools(v)
    dep = deployment(dict(v, num_gpus=v["prefill_gpus"]))
    n = v["num_requests"]
    requests = open_loop(Workload(v).first(n), v["request_rate_per_s"])
    link = Link(link_bytes_per_s(v), dep.model.num_layers, v["overlap"])
    a = simulate_colocated(requests, co)
    b = simulate_disaggregated(requests, pre, dec, link, lambda tokens: prompt_kv_bytes(dep, tokens))
    sa, sb = _stats(a, v, n, "colocated"), _stats(b, v, n, "disagg")
    out = {k: x for k, x in {**sa, **sb}.items() if not k.startswith("_")}
    ga, gb = out["colocated_goodput_per_gpu"], out["disagg_goodput_per_gpu"]
    out["gain"] = gb / ga if ga > 0 else 0.0  # undefined when co-location meets nothing (said in a note)
    served = b.served or ()
    out["transfer_mean_s"] = math.fsum(s.transfer_s for s in served) / len(served) if served else 0.0
    out["prefill_mean_s"] = math.fsum(s.prefill_s for s in served) / len(served) if served else 0.0
    out["kv_bytes_per_token"] = prompt_kv_bytes(dep, 1)
    out["rejected"] = a.rejected + b.rejected
    out["notes"] = [
        "disaggregation wins per GPU here" if gb > ga else
        ("a tie per GPU here" if gb == ga else "co-located serving wins per GPU here"),
    ]
    if ga == 0:
        out["notes"].append("co-located serving meets no request here, so the ratio is undefined (shown as 0)")
    if a.rejected or b.rejected:
        out["notes"].append("some requests never fit a replica's KV pool and count as misses")
    out["derivation"] = [
        step("Co-located goodput per GPU", "rate × attainment ÷ GPUs", "{} × {} ÷ {}",
             [(v["request_rate_per_s"], "requests/s"), sa["colocated_attainment"], a.gpus], ga, "requests/s"),
        step("Disaggregated goodput per GPU", "rate × attainment ÷ GPUs", "{} × {} ÷ {}",
             [(v["request_rate_per_s"], "requests/s"), sb["disagg_attainment"], b.gpus], gb, "requests/s"),
    ]
    out["series"] = {
        "ttft": series("TTFT by percentile of requests", "Percentile", "%", PCTS,
                       [("Co-located", "s", [percentile(sa["_ttft"], max(p, 1)) for p in PCTS]),
                        ("Disaggregated", "s", [percentile(sb["_ttft"], max(p, 1)) for p in PCTS])]),
        "tpot": series("TPOT by percentile of requests", "Percentile", "%", PCTS,
                       [("Co-located", "s", [percentile(sa["_tpot"], max(p, 1)) for p in PCTS]),
                        ("Disaggregated", "s", [percentile(sb["_tpot"], max(p, 1)) for p in PCTS])]),
    }
    return out

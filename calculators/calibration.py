"""The calibration ledger (data/ledger.toml) against the core: every published measurement predicted
with the step model the latency and roofline calculators use, the error per kind of estimate, the bound
check, and the band a live estimate shows ("how far has the core been on the nearest measured rows").

One small function per metric maps a row's conditions to the core's inputs (`_PREDICT`), at the latency
calculator's default efficiencies for the estimate and at efficiencies 1.0 for the bound (`_BOUND`):
  tpot_s                decode step at the row's batch and mean context (latency: TPOT)
  e2e_latency_s         a static batch: every prompt prefilled, then T_out − 1 decode steps (latency: E2E)
  ttft_s                one prompt's prefill, no queueing (latency: first request's TTFT at batch 1)
  output_tokens_per_s   per GPU: batch × T_out ÷ E2E (prefill included), or batch ÷ TPOT for a decode-only
                        row (phase = "decode"); per GPU of the core's group, or per GPU itself under
                        data-parallel attention (attention = "dp": each GPU decodes its own `batch`)
  input_tokens_per_s    per GPU: prompts × T_in ÷ prefill time
  tokens_per_s_per_user 1 ÷ TPOT
Error = predicted speed ÷ measured speed − 1, speed being the rate, or 1 ÷ the time: +25% means the core
was 25% too fast (optimistic), −25% too slow, whatever the metric. Seven constants were fitted to the ledger
(data/fitted.toml: the kernel floor of the fitted step-overhead modes, the rate of the GEMM that dequantises 4-bit
float weights, the share of the BF16 rate kept by routed experts that tensor parallelism slices, the time per decode
sequence per layer on AMD's CDNA3 chips, the share of the attention rate Triton's kernel keeps where vLLM runs it for
attention sinks below Hopper, a served request's time outside the engine core, the time per kernel of SGLang's eager
prefill), each on named groups; fit_* recompute them and `held_out` marks the rows no fit has seen. In the fitted
mode each row is priced at its own engine's (row_mode: an SGLang row in the "sglang" mode up to 0.5.9, in
"sglang-piecewise" from 0.5.10).
A serving sweep's row (its group has a `client`) is predicted as its client measured it: engine/client.py runs the
benchmark's closed loop on the simulator with the sweep's server settings (`server`).
Bounds the other way: a time bound never above the measured time, a rate bound never below the measured
rate (tests/core/test_calibration.py). Where the row lacks a condition the bound takes the value that
makes the bound weakest (a prompt of 1 token; a serving benchmark's running batch of 1).
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import cache, lru_cache

from . import catalog
from .calcs.benchmark_loops import SCHEMA as LOOPS
from .calcs.goodput import SCHEMA as GOODPUT
from .calcs.memory import kv_pool_tokens
from .calcs import overhead
from .calcs.overhead import gpu_per_kernel_s
from .engine.client import Client, run_client
from .engine.config import EngineConfig
from .engine.steps import StepTimes
from .calcs.latency import SCHEMA as LATENCY
from .calcs.latency import batch_latency
from .calcs.sharding import steps_for
from .sharded_steps import ShardedSteps
from .calcs.steptime import (
    bound_deployment,
    compute_ceiling_tokens_per_s_per_gpu,
    dequant_factors,
    deployment,
    release_key,
    sliced_expert_factor,
    triton_attention_share,
)
from .calcs.overhead import DEFAULT_MODE, FITTED_MODE, FITTED_MODES, LEDGER_MODE_CHOICES, SGLANG_MODE
from .calcs.overhead import SGLANG_PIECEWISE_MODE
from .calcs.overhead import data as overhead_data
from .calcs.steptime import StepModel
from .errors import InputError
from .model import Model
from .params import active_params
from .resolve import model_to_json, resolve_model
from .schema import validate

LEDGER = "ledger.toml"
# metric: (label, unit, "time" | "rate"); the order the calibration page lists them in
KINDS = {
    "tpot_s": ("Time per output token", "s", "time"),
    "ttft_s": ("Time to first token", "s", "time"),
    "e2e_latency_s": ("End-to-end latency of a batch", "s", "time"),
    "output_tokens_per_s": ("Output tokens/s per GPU", "tokens/s", "rate"),
    "input_tokens_per_s": ("Prefill tokens/s per GPU", "tokens/s", "rate"),
    "tokens_per_s_per_user": ("Tokens/s per user", "tokens/s", "rate"),
}
RATE_PER = {"system": "num_gpus", "node": "gpus_per_node", "gpu": None}
WITHIN = 0.25  # the target band, ±25%
EFFICIENCY = {f["key"]: f["default"] for f in LATENCY["inputs"] if f["key"].endswith("_efficiency")}


# ---- the ledger as rows ----------------------------------------------------------------------


def ledger() -> dict:
    return catalog._load(LEDGER)


def sources() -> dict[str, dict]:
    return {s["id"]: s for s in ledger()["source"]}


def engine_family(engine: str) -> str:
    """An engine without its build note ("vLLM (AMD's ROCm build)" is vLLM): what an engine's rules (row_mode,
    parses_chat_template), the calibration calculator's filter and the rows pages go by."""
    return engine.split(" (")[0]


def parses_chat_template(row: dict) -> bool:
    """Whether the row's engine parsed each chat request's template on its API server's event loop
    (ledger.toml [chat_template_parse]: a chat client, that engine's release, a model it renders with Jinja)."""
    rule = ledger()["chat_template_parse"]
    return (
        row.get("endpoint") == "chat"
        and engine_family(row["engine"]) == rule["engine"]
        and release_key(row["engine_version"]) in {release_key(v) for v in rule["versions"]}
        and row["model"] not in rule["rendered_otherwise"]
    )


@cache
def _model_cached(model_id: str):
    return _model(model_id)


def _model(model_id: str):
    variants = {v["id"]: v for v in ledger().get("model_variant", [])}
    if model_id in variants:
        v = variants[model_id]
        base = model_to_json(resolve_model(v["base"]))
        changes = {k: val for k, val in v.items() if k not in ("base",)}
        return base | changes
    return model_id


def _row(group: dict, point: dict, metric: str) -> dict:
    row = {k: v for k, v in group.items() if k not in ("points", *KINDS)}
    row.update({k: v for k, v in point.items() if k not in KINDS})
    value = point[metric]
    row.update(group=group["id"], metric=metric, published_value=value, value=value)
    per = RATE_PER[row.get("per", "gpu")] if KINDS[metric][2] == "rate" and metric != "tokens_per_s_per_user" else None
    if per:
        row["value"] = value / row[per]
    row.setdefault("core_tp", row["num_gpus"])
    row.setdefault("attention", "tp")
    row.setdefault("batch_is", "static")
    row.setdefault("estimate", True)
    tag = "-".join(f"{k[:1]}{point[k]}" for k in ("num_gpus", "batch", "input_tokens", "output_tokens") if k in point)
    row["id"] = "-".join(x for x in (group["id"], point.get("scenario", "").lower(), tag, metric) if x)
    return row


@lru_cache(maxsize=1)
def _rows() -> tuple[dict, ...]:
    out = []
    for group in ledger()["group"]:
        for point in group["points"]:
            out += [_row(group, point, m) for m in KINDS if m in point]
    ids = [r["id"] for r in out]
    if len(ids) != len(set(ids)):
        raise ValueError(f"{LEDGER}: duplicate row ids {sorted({i for i in ids if ids.count(i) > 1})}")
    return tuple(out)


def rows() -> list[dict]:
    """Every measurement of the ledger, one dict each, with its group's conditions (copies)."""
    return [dict(r) for r in _rows()]


# ---- a row's conditions as the core's inputs ---------------------------------------------------


def core_inputs(row: dict, bound: bool = False, overhead: str = DEFAULT_MODE, comm: bool = True) -> dict:
    """The latency calculator's inputs for this row (efficiencies 1.0 for the bound; `overhead` is the
    latency calculator's step_overhead choice, its default unless asked). An estimate of a DP-attention row
    with communication is its deployment: TP 1, DP = EP = its GPUs; a row whose server ran expert parallelism beside
    tensor-parallel attention (`ep`) gets it; without communication, and for the bound, TP over them."""
    inputs = {
        "model": _model_cached(row["model"]),
        "hardware": row["hardware"],
        "num_gpus": row["core_tp"],
        "weight_dtype": row["weight_dtype"],
        "expert_weight_dtype": row.get("expert_weight_dtype") or "same",
        "kv_dtype": row["kv_dtype"],
        "compute_dtype": row["compute_dtype"],
        "batch_size": row.get("batch", 1),
        "input_tokens": row.get("input_tokens", 1),
        "output_tokens": max(1, round(row.get("output_tokens", 1))),
        "step_overhead": row_mode(row, overhead),
    }
    inputs.update({k: 1.0 for k in EFFICIENCY} if bound else EFFICIENCY)
    if row.get("attention") == "dp" and comm and not bound:  # the deployment: DP attention, EP over every GPU
        n = row["core_tp"]
        inputs.update(
            num_gpus=1, dp=n, ep=n, gpus_per_node=row.get("gpus_per_node", 8), batch_size=inputs["batch_size"] * n
        )
    elif row.get("ep") not in (None, "same", 1) and comm and not bound:  # TP attention, whole experts per GPU
        inputs.update(ep=row["ep"])
    if comm and not bound and row.get("attention") != "dp" and sglang_fused(row):
        inputs["algorithm"] = "fused"
    return inputs


def sglang_fused(row: dict) -> bool:
    """Whether the row's SGLang release ran its TP all-reduces fused with the norms after them, by its own default
    (overhead.sglang_fuses_allreduce: the model's class on that chip), a TP group of more than one GPU in one server.
    DP attention turns it off (the caller's check); no row here sets an all-to-all backend without it."""
    per_server = row.get("gpus_per_node", "same")
    per_server = 8 if per_server == "same" else per_server
    return (
        engine_family(row["engine"]) == "SGLang"
        and 1 < row["core_tp"] <= per_server
        and overhead.sglang_fuses_allreduce(
            release_key(row["engine_version"]), resolve_model(_model_cached(row["model"])).architecture, row["hardware"]
        )
    )


DEPLOYMENT_KEYS = (
    "model",
    "hardware",
    "core_tp",
    "weight_dtype",
    "expert_weight_dtype",
    "kv_dtype",
    "compute_dtype",
    "attention",
    "ep",
    "gpus_per_node",
    "overlap",
    "engine",
    "engine_version",
)


def ledger_mode(overhead: str) -> str:
    """The ledger's name for a step-overhead mode: every fitted mode is "fitted" (each row at its own engine's)."""
    return FITTED_MODE if overhead in FITTED_MODES else overhead


def row_mode(row: dict, overhead: str) -> str:
    """The mode a row is priced at: in a fitted mode, its own engine's, for an SGLang row by its release (up to 0.5.9
    no prefill graph by default, "sglang"; from 0.5.10 piecewise prefill graphs, "sglang-piecewise"); any other as
    asked."""
    if overhead not in FITTED_MODES:
        return overhead
    if engine_family(row["engine"]) != "SGLang":
        return FITTED_MODE
    piecewise = release_key(overhead_data()["sglang_piecewise"]["versions_from"])
    return SGLANG_PIECEWISE_MODE if release_key(row["engine_version"]) >= piecewise else SGLANG_MODE


def _deployment(row: dict, bound: bool, overhead: str = DEFAULT_MODE, comm: bool = True):
    return _deployment_for(tuple(row.get(k, "same") for k in DEPLOYMENT_KEYS), bound, overhead, comm)


@cache
def _deployment_for(key: tuple, bound: bool, overhead: str, comm: bool = True):
    """The step model of one distinct configuration (the ledger has a few dozen, its rows a few hundred): the
    latency calculator's for an estimate (sharding.steps_for: the deployment's communication on more than one
    GPU; comm False leaves it out, as the core did before issue #16), its all-to-all hidden under the kernels
    where the row's source states two-micro-batch overlap (overlap = "two-batch"); for a bound StepModel at
    efficiencies 1.0 without overhead or communication. A vLLM row's sparse-attention kernels are its release's
    (sparse_mla_kernel)."""
    row = dict(zip(DEPLOYMENT_KEYS, key))
    v = validate(LATENCY["inputs"], core_inputs(row, bound, overhead, comm))
    # the sparse-MLA kernels by release are the CUDA build's (attention_kernels.toml): ROCm builds keep the default
    dep = deployment(v, row["engine_version"] if row["engine"] == "vLLM" else None)
    if bound:
        return StepModel(bound_deployment(dep))
    if not comm:
        return StepModel(dep)
    return steps_for(v, dep, overlap=_overlap(row))


def _overlap(row: dict) -> str:
    """The row's all-to-all overlap (sharding.steps_for): its source's, or none."""
    return "none" if row.get("overlap", "same") == "same" else row["overlap"]


def _context(row: dict, bound: bool) -> float:
    """Mean KV length while decoding: stated, or T_in + T_out ÷ 2 (the latency calculator's rule)."""
    if "context_tokens" in row:
        return row["context_tokens"]
    prompt = row.get("input_tokens", 1) if not bound or "input_tokens" in row else 1
    return prompt + row.get("output_tokens", 1) / 2


def _batch(row: dict, bound: bool) -> int:
    # a serving benchmark's maximum concurrency is not its running batch: the bound takes 1
    return 1 if bound and row["batch_is"] == "max" else max(1, round(row.get("batch", 1)))


def _tpot(row, steps, bound):
    return steps.decode(_batch(row, bound) * _ranks(steps), _context(row, bound)).time_s


def _ranks(steps) -> int:
    """Attention ranks the steps spread a DP row's per-device batch over: its deployment's; 1 for TP (a bound
    prices a DP row as TP over its GPUs, which reads fewer bytes per GPU than the DP deployment)."""
    return steps.p.attention_ranks if isinstance(steps, ShardedSteps) else 1


def _static(row, steps, bound):
    prompt = row.get("input_tokens", 1)
    return batch_latency(steps, _batch(row, bound), prompt, max(1, round(row.get("output_tokens", 1))), 0.0)


def _e2e(row, steps, bound):
    return _static(row, steps, bound)["e2e_s"]


def _ttft(row, steps, bound):
    return steps.prefill([row.get("input_tokens", 1)]).time_s


def _per_gpu(row, sequences_per_s: float) -> float:
    """Per GPU: a DP row's batch is each GPU's own."""
    return sequences_per_s if row["attention"] == "dp" else sequences_per_s / row["core_tp"]


def _output_rate(row, steps, bound):
    if bound:
        return compute_ceiling_tokens_per_s_per_gpu(steps.dep)
    if row.get("phase") == "decode":
        return _per_gpu(row, _batch(row, bound) / _tpot(row, steps, bound))
    r = _static(row, steps, bound)
    return _batch(row, bound) * max(1, round(row.get("output_tokens", 1))) / r["e2e_s"] / row["core_tp"]


def _input_rate(row, steps, bound):
    prompts = [row.get("input_tokens", 1)] * _batch(row, False)
    step = steps.prefill(prompts)
    seconds = step.compute_time_s if bound else step.time_s  # the bound: compute alone, at peak
    return sum(prompts) / seconds / row["core_tp"]


def _user_rate(row, steps, bound):
    return 1.0 / _tpot(row, steps, bound)


# ---- a serving benchmark's rows: its client on the simulator ------------------------------------------------------

SERVED = ("tpot_s", "ttft_s", "e2e_latency_s", "output_tokens_per_s")
BLOCK = 16  # tokens per KV block, both engines' default page for these models


def _client(row: dict) -> Client:
    """The benchmark's client: its lengths are the row's, or, where the client names the random dataset's own
    (random_input_len, random_output_len), those, with the row's lengths the run's printed means to scale to."""
    c = row["client"]
    means = (row["input_tokens"], row["output_tokens"]) if "random_input_len" in c else None
    return Client(
        row["batch"],
        c.get("random_input_len", row["input_tokens"]),
        max(1, round(c.get("random_output_len", row["output_tokens"]))),
        c.get("range_ratio", 1.0),
        c.get("prompts_per_user", 10),
        means=means,
    )


def _earlier(row: dict) -> tuple[Client, ...]:
    """The runs the same server answered before this row's, in the ledger's order (a client with same_server: the
    group's points of one scenario, one after another, the prefix cache kept between them); none otherwise."""
    if not row["client"].get("same_server"):
        return ()
    runs = [
        r
        for r in _rows()
        if (r["group"], r.get("scenario"), r["metric"]) == (row["group"], row.get("scenario"), row["metric"])
    ]
    return tuple(_client(r) for r in runs[: [r["id"] for r in runs].index(row["id"])])


def _server(row: dict) -> EngineConfig:
    """The engine the sweep ran: its KV pool under the engine's memory rule, its token budget and running cap (the
    sweep's max_num_seqs, or the concurrency), whether a step mixes prefill with decodes (SGLang's default
    runs them apart: enable_mixed_chunk off), how often the scheduler reads new requests (a point's
    scheduler_recv_interval, SGLang's --scheduler-recv-interval; 1 when not set), whether it plans each step
    while the one before runs (schedule_ahead, as the row's server_note reads the engine; unset: the default
    of the engine the config models), whether it caches blocks (prefix_caching: a preempted request then finds
    its own computed blocks again) and whether a waiting request needs room for its whole prompt or its first
    chunk only (whole_prompt_must_fit, by the release: the ledger's header)."""
    s = row["server"]
    inputs = {k: v for k, v in core_inputs(row).items() if k not in ("batch_size", "input_tokens", "output_tokens")}
    inputs.update(engine_rule=s.get("engine_rule", "vllm"))
    inputs.update({k: s[k] for k in ("gpu_memory_utilization", "mem_fraction_static") if k in s})
    pool = kv_pool_tokens(validate(GOODPUT["inputs"], inputs))
    mixed = s.get("mixed_batches", True)
    return EngineConfig(
        kv_blocks=max(1, int(pool // BLOCK)),
        block_size_tokens=BLOCK,
        max_num_seqs=s.get("max_num_seqs", row["batch"]),
        max_num_batched_tokens=s["token_budget"],
        mixed_batches=mixed,  # chunked prefill on in every engine the ledger has (SGLang's chunks alone: EngineConfig)
        recv_interval_steps=row.get("scheduler_recv_interval", 1),
        schedule_ahead=s.get("schedule_ahead"),  # unset: the engine default the config models (EngineConfig)
        prefix_caching=s.get("prefix_caching", False),
        whole_prompt_must_fit=s.get("whole_prompt_must_fit", True),
    )


_SERVED: dict = {}  # (point, overhead mode, communication) -> the client's means


def _served(row: dict, overhead: str, comm: bool) -> float:
    """A serving row's estimate: the metric as the benchmark's client computes it (rates per GPU); one simulation
    per point, shared by its metrics."""
    key = (row["id"].removesuffix("-" + row["metric"]), overhead, comm)
    if key not in _SERVED:
        steps = _deployment(row, False, overhead, comm)
        _SERVED[key] = run_client(StepTimes(steps), _server(row), _client(row), front_end_s(overhead), _earlier(row))
    return _client_metric(row, _SERVED[key])


def _client_metric(row: dict, means: dict) -> float:
    """The row's metric from run_client's means: a rate per GPU of the core's group, a time as it is."""
    value = means[row["metric"]]
    return value / row["core_tp"] if row["metric"] == "output_tokens_per_s" else value


_PREDICT = {
    "tpot_s": _tpot,
    "ttft_s": _ttft,
    "e2e_latency_s": _e2e,
    "output_tokens_per_s": _output_rate,
    "input_tokens_per_s": _input_rate,
    "tokens_per_s_per_user": _user_rate,
}


def speed_error(metric: str, predicted: float, measured: float) -> float:
    """Predicted speed ÷ measured speed − 1 (+: the core is faster than the measurement)."""
    return predicted / measured - 1 if KINDS[metric][2] == "rate" else measured / predicted - 1


def predict(row: dict, overhead: str = DEFAULT_MODE, comm: bool = True) -> dict:
    """The row with the core's estimate (when the row allows one), its error and the bound (the bound has
    no overhead or communication whatever `overhead` and `comm` say: bound_deployment drops them)."""
    fn = _PREDICT[row["metric"]]
    bound = _bound(row)
    if not row["estimate"]:
        return _scored(row, bound, None)
    if "client" in row and row["metric"] in SERVED:
        return _scored(row, bound, _served(row, overhead, comm))
    return _scored(row, bound, fn(row, _deployment(row, False, overhead, comm), False))


def _bound(row: dict) -> float:
    return _PREDICT[row["metric"]](row, _deployment(row, True), True)


def _scored(row: dict, bound: float, predicted: float | None) -> dict:
    """The row with its bound and estimate, whether the bound holds and the estimate's error."""
    out = dict(row, bound=bound)
    kind = KINDS[row["metric"]][2]
    out["bound_holds"] = bound <= row["value"] * (1 + 1e-9) if kind == "time" else bound >= row["value"] * (1 - 1e-9)
    if predicted is not None:
        out["predicted"] = predicted
        out["error"] = speed_error(row["metric"], predicted, row["value"])
    return out


# The (mode, communication) pairs whose predictions the site's wheel carries: every one the calibration calculator and
# the bands offer, computed by CPython at build time (sitegen/predictions.py). In Pyodide a mode takes longer than the
# worker's call timeout to compute, and the snapshot would keep the step models behind it (tens of MB).
SHIPPED_MODES = tuple((mode, comm) for mode, _ in LEDGER_MODE_CHOICES for comm in (True, False))
SHIPPED = "predictions.json"  # in data/ of the wheel only (sitegen/wheel.py leaves any copy in the tree out)
LAUNCHES_ONLY = "graphs"  # the fitted mode without its kernel floor: the calibration page's comparison


def shipped_table(modes: tuple[tuple[str, bool], ...] = SHIPPED_MODES) -> dict:
    """The ledger's bounds and estimates in these modes (None: no estimate), as the wheel carries them: computed,
    never read from a table."""
    predicted = {_mode_key(m, c): [p.get("predicted") for p in _computed(m, c)] for m, c in modes}
    return {"ids": [r["id"] for r in _rows()], "bound": [_bound(r) for r in _rows()], "predicted": predicted}


def _mode_key(overhead: str, comm: bool) -> str:
    return f"{overhead}|{'priced' if comm else 'left out'}"


@cache
def _shipped() -> dict:
    """The wheel's table, or {} where there is none (CPython computes, as in the tests and the build)."""
    try:
        return catalog.json_data(SHIPPED)
    except FileNotFoundError:
        return {}


def from_table(table: dict, overhead: str, comm: bool) -> tuple[dict, ...] | None:
    """The predictions a shipped table holds for this mode; None if it holds none or is another ledger's."""
    predicted = table.get("predicted", {}).get(_mode_key(overhead, comm))
    if predicted is None or table["ids"] != [r["id"] for r in _rows()]:
        return None
    return tuple(_scored(r, b, p) for r, b, p in zip(_rows(), table["bound"], predicted, strict=True))


def _computed(overhead: str, comm: bool) -> tuple[dict, ...]:
    return tuple(predict(r, overhead, comm) for r in _rows())


@lru_cache(maxsize=2 * len(LEDGER_MODE_CHOICES))
def _predictions(overhead: str = DEFAULT_MODE, comm: bool = True) -> tuple[dict, ...]:
    shipped = from_table(_shipped(), overhead, comm)
    return _computed(overhead, comm) if shipped is None else shipped


def predictions(overhead: str = DEFAULT_MODE, comm: bool = True) -> list[dict]:
    """Every row predicted at this step-overhead mode, with or without communication (computed once per process
    and mode, or read from the wheel's table in SHIPPED_MODES). Either fitted mode prices each row at its engine's."""
    return [dict(p) for p in _predictions(ledger_mode(overhead), comm)]


# ---- the fitted constants (fitted.toml), recomputed from their training rows ---------------------------------------


def fitted_groups() -> dict[str, list[str]]:
    """Each fitted constant's training groups (fitted.toml fitted_on)."""
    return {name: list(entry["fitted_on"]) for name, entry in catalog.fitted().items()}


def held_out(row: dict) -> bool:
    """A row of no group any constant was fitted on."""
    return not any(row["group"] in groups for groups in fitted_groups().values())


def _training(name: str, metric: str) -> list[dict]:
    groups = fitted_groups()[name]
    return [r for r in _rows() if r["estimate"] and r["metric"] == metric and r["group"] in groups]


def front_end_s(overhead: str = FITTED_MODE) -> float:
    """A served request's time outside the engine core (fitted.toml [front_end]), in the fitted mode only."""
    return float(catalog.fitted()["front_end"]["per_request_s"]) if overhead in FITTED_MODES else 0.0


def fit_front_end_s(tolerance: float = 1e-4) -> float:
    """The front end's time from its training rows: where the median signed log error of the simulated mean TTFT,
    log(measured ÷ simulated), is zero (bisection; the simulated TTFT grows with it). Each training point is
    simulated as its benchmark client ran it, the front end's time in the client's TTFT and between a user's turns."""
    cases = []
    for row in _training("front_end", "ttft_s"):
        cases.append((row["value"], StepTimes(_deployment(row, False, FITTED_MODE)), _server(row), _client(row)))

    def median_log_error(f: float) -> float:
        errors = [math.log(m / run_client(times, server, client, f)["ttft_s"]) for m, times, server, client in cases]
        return _quantile(sorted(errors), 0.5)

    return _zero(median_log_error, 0.0, 0.1, tolerance, rising=False)  # measured slower: a longer front end


def fit_gpu_per_kernel_s() -> float:
    """t_g from its training rows: the median of (measured TPOT − decode step without the floor) ÷ kernels per step,
    the decode step at the row's concurrency and mean context (linear in t_g, so the current value is taken out)."""
    t_g, values = gpu_per_kernel_s(), []
    for row in _training("gpu_kernel_floor", "tpot_s"):
        steps = _deployment(row, False, FITTED_MODE)
        kernels = steps.overhead.eager_kernels
        without = _tpot(row, steps, False) - kernels * t_g
        values.append((row["value"] - without) / kernels)
    return _quantile(sorted(values), 0.5)


DEQUANT_FIELDS = ("dense_dequant_efficiency", "expert_dequant_efficiency")


def fit_dequant_rate(tolerance: float = 5e11) -> float:
    """The dequantising GEMM's rate in FLOP/s from its training rows: where the median signed log error of the
    simulated mean TTFT, log(measured ÷ simulated), is zero (bisection; the simulated TTFT falls as the rate grows).
    The rate is applied as the calculators apply it: to the dequantised weights' matmuls (steptime.dequant_factors)."""
    cases = []  # per training row, what no rate changes: its inputs, deployment, server and client
    for row in _training("dequant_matmul", "ttft_s"):
        v = validate(LATENCY["inputs"], core_inputs(row, overhead=FITTED_MODE))
        cases.append((row["value"], v, deployment(v), _server(row), _client(row)))

    def median_log_error(rate: float) -> float:
        errors = []
        for measured, v, dep, server, client in cases:
            steps = steps_for(v, replace(dep, **dict(zip(DEQUANT_FIELDS, dequant_factors(v, rate)))))
            errors.append(math.log(measured / run_client(StepTimes(steps), server, client, front_end_s())["ttft_s"]))
        return _quantile(sorted(errors), 0.5)

    return _zero(median_log_error, 1e13, 2e15, tolerance, rising=True)  # measured slower: a lower rate


def fit_sliced_expert_factor(tolerance: float = 0.005) -> float:
    """The sliced experts' share of the BF16 rate from its training group: where the median signed log error of the
    group's simulated metrics, log(predicted speed ÷ measured speed), is zero (bisection; the simulated speeds rise
    with the factor). Every training row is a point of one serving sweep, simulated once per factor."""
    points: dict = {}  # per training point, what no factor changes: its inputs, deployment, server, client, rows
    for row in (r for r in _rows() if r["estimate"] and r["group"] in fitted_groups()["sliced_experts"]):
        key = row["id"].removesuffix("-" + row["metric"])
        if key not in points:
            v = validate(LATENCY["inputs"], core_inputs(row, overhead=FITTED_MODE))
            points[key] = (v, deployment(v), _server(row), _client(row), [])
        points[key][4].append(row)

    def median_log_error(factor: float) -> float:
        errors = []
        for v, dep, server, client, rows in points.values():
            steps = steps_for(v, replace(dep, sliced_expert_efficiency=sliced_expert_factor(v, factor)))
            means = run_client(StepTimes(steps), server, client, front_end_s())
            for row in rows:
                errors.append(math.log(1 + speed_error(row["metric"], _client_metric(row, means), row["value"])))
        return _quantile(sorted(errors), 0.5)

    return _zero(median_log_error, 0.05, 1.0, tolerance, rising=True)  # measured slower: a smaller factor


def fit_triton_attention_share(tolerance: float = 0.005) -> float:
    """The Triton attention kernel's share of the attention rate from its training group: on the group's longest-
    prompt run, where the simulated mean TTFT equals the measured (bisection; the TTFT falls as the share grows)."""
    rows = _training("triton_attention", "ttft_s")
    row = max(rows, key=lambda r: r["input_tokens"])
    v = validate(LATENCY["inputs"], core_inputs(row, overhead=FITTED_MODE))
    dep, server, client = deployment(v, row["engine_version"]), _server(row), _client(row)

    def log_error(share: float) -> float:
        steps = steps_for(
            v, replace(dep, attention_kernel_efficiency=triton_attention_share(v["model"], v["hardware"], share))
        )
        return math.log(row["value"] / run_client(StepTimes(steps), server, client, front_end_s())["ttft_s"])

    return _zero(log_error, 0.02, 1.0, tolerance, rising=True)  # measured slower: a smaller share


def fit_sglang_prefill_s(tolerance: float = 1e-7) -> float:
    """t_s from its training rows: where the median signed log error of the simulated mean TTFT,
    log(measured ÷ simulated), is zero (bisection; the simulated TTFT grows with t_s). Each row is simulated as its
    client ran it, after the runs the same server answered first."""
    cases = []  # per training row, what no t_s changes: its inputs, deployment, server, client and earlier runs
    for row in _training("sglang_prefill", "ttft_s"):
        v = validate(LATENCY["inputs"], core_inputs(row, overhead=FITTED_MODE))
        cases.append((row["value"], v, deployment(v), _overlap(row), _server(row), _client(row), _earlier(row)))

    def median_log_error(t_s: float) -> float:
        errors = []
        for measured, v, dep, overlap, server, client, earlier in cases:
            dep = replace(dep, overhead=replace(dep.overhead, prefill_kernel_s=t_s))
            means = run_client(StepTimes(steps_for(v, dep, overlap=overlap)), server, client, front_end_s(), earlier)
            errors.append(math.log(measured / means["ttft_s"]))
        return _quantile(sorted(errors), 0.5)

    return _zero(median_log_error, 0.0, 5e-4, tolerance, rising=False)  # measured slower: a larger t_s


def fit_decode_row_s(tolerance: float = 1e-8) -> float:
    """t_r from its training rows: where the median signed log error of the estimated batch latency,
    log(measured ÷ estimated), is zero (bisection; the estimate grows with t_r, which is linear in it). Each
    row's latency is split into the part without t_r and the rows' count × layers it multiplies."""
    current = overhead.decode_row_floor()[0]
    cases = []
    for row in _training("decode_row_floor", "e2e_latency_s"):
        steps = _deployment(row, False, FITTED_MODE)
        with_current = _e2e(row, steps, False)
        rows_layers = _batch(row, False) * (max(1, round(row["output_tokens"])) - 1) * steps.dep.model.num_layers
        cases.append((row["value"], with_current - current * rows_layers, rows_layers))

    def median_log_error(t_r: float) -> float:
        return _quantile(sorted(math.log(m / (base + t_r * n)) for m, base, n in cases), 0.5)

    return _zero(median_log_error, 0.0, 1e-5, tolerance, rising=False)  # measured slower: a larger t_r


def _zero(fn, lo: float, hi: float, tolerance: float, rising: bool) -> float:
    """Bisection to `tolerance` for where fn, rising or falling with its argument, crosses zero in [lo, hi]."""
    while hi - lo > tolerance:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if (fn(mid) > 0) == rising else (mid, hi)  # the zero lies below mid, or above
    return (lo + hi) / 2


# ---- error statistics ---------------------------------------------------------------------------


def _quantile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default, 'linear')."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(errors: list[float]) -> dict:
    """n, median and 80th percentile of |error|, signed median, share within ±25%, extremes."""
    if not errors:
        return {"count": 0}
    absolute, signed = sorted(abs(e) for e in errors), sorted(errors)
    return {
        "count": len(errors),
        "median_abs_error": _quantile(absolute, 0.5),
        "p80_abs_error": _quantile(absolute, 0.8),
        "signed_median_error": _quantile(signed, 0.5),
        "within_share": sum(a <= WITHIN for a in absolute) / len(errors),
        "min_error": signed[0],
        "max_error": signed[-1],
    }


def summary(metric: str | None = None, overhead: str = DEFAULT_MODE, only_held_out: bool = False) -> dict:
    """Error statistics over the estimate rows of one metric (None: every metric); only_held_out keeps the rows of
    groups no constant was fitted on."""
    chosen = [
        p
        for p in _predictions(ledger_mode(overhead))
        if "error" in p and metric in (None, p["metric"]) and (held_out(p) or not only_held_out)
    ]
    return summarize([p["error"] for p in chosen])


def bound_violations() -> list[dict]:
    return [dict(p) for p in _predictions(DEFAULT_MODE, True) if not p["bound_holds"]]


# ---- the band beside a live estimate ------------------------------------------------------------

NEAR = 2.5  # the largest distance a row may be from the reader's inputs and still count as near
BAND_ROWS = 12


def precision(weight_dtype: str, expert_weight_dtype: str | None = None) -> str:
    """The weight format a row and an estimate are compared by: the weights', and the routed experts' where theirs
    differs ("fp8+nvfp4"): a mixture-of-experts model's weight bytes are mostly its experts'."""
    same = expert_weight_dtype in (None, "same", weight_dtype)
    return weight_dtype if same else f"{weight_dtype}+{expert_weight_dtype}"


def precision_words(p: str) -> str:
    """A precision() in words: "FP8", or "FP8 + NVFP4 experts"."""
    weights, _, experts = p.partition("+")
    return weights.upper() + (f" + {experts.upper()} experts" if experts else "")


def _features(model, accelerator, weight_dtype: str, gpus: int, batch: int, expert_weight_dtype=None) -> dict:
    m = model if isinstance(model, Model) else resolve_model(model)
    return {
        "hardware": accelerator.id if hasattr(accelerator, "id") else accelerator,
        "vendor": (accelerator.vendor if hasattr(accelerator, "vendor") else "").lower(),
        "precision": precision(weight_dtype, expert_weight_dtype if m.moe else None),  # a dense model has no experts
        "active": active_params(m),
        "moe": m.moe is not None,
        "gpus": gpus,
        "batch": batch,
    }


def row_features(row: dict) -> dict:
    """The features `distance` compares, for a ledger row (computed once per row)."""
    return _features_by_id()[row["id"]]


@lru_cache(maxsize=1)
def _features_by_id() -> dict[str, dict]:
    return {r["id"]: _row_features(r) for r in _rows()}


def _row_features(row: dict) -> dict:
    acc = catalog.accelerator_presets()[row["hardware"]]
    experts = row.get("expert_weight_dtype")
    features = _features(_model(row["model"]), acc, row["weight_dtype"], row["num_gpus"], _batch(row, False), experts)
    return {**features, "load": load(row)}


LOADS = ("bounded", "all_at_once")
LOAD_WORDS = {"bounded": "static batches or capped concurrency", "all_at_once": "every request sent at once"}


def load(row: dict) -> str:
    """How the measurement loaded the engine: "all_at_once" when its client sent every request at once (one request
    per user: a throughput run, whose running batch the engine's memory and token budget set), else "bounded" (a
    static batch, or a client that kept at most `batch` requests in flight)."""
    return "all_at_once" if row.get("client", {}).get("prompts_per_user") == 1 else "bounded"


def distance(a: dict, b: dict) -> float:
    """How far two configurations are apart: hardware (same chip 0, same vendor 1, else 3: another
    vendor's chip is never near), weight format (0 or 1), dense against MoE (0 or 1), model size (|log2|
    of the active-parameter ratio), GPU count and batch (each |log2| of the ratio, halved)."""
    hw = 0.0 if a["hardware"] == b["hardware"] else 1.0 if a["vendor"] and a["vendor"] == b["vendor"] else 3.0
    return (
        hw
        + (a["precision"] != b["precision"])
        + (a["moe"] != b["moe"])
        + abs(math.log2(a["active"] / b["active"]))
        + abs(math.log2(a["gpus"] / b["gpus"])) / 2
        + abs(math.log2(a["batch"] / b["batch"])) / 2
    )


@lru_cache(maxsize=len(LEDGER_MODE_CHOICES))
def _estimate_features(overhead: str = DEFAULT_MODE) -> tuple[tuple[dict, dict], ...]:
    return tuple((p, row_features(p)) for p in _predictions(overhead, True) if "error" in p)


def band(
    v: dict, metrics: tuple[str, ...] | None = None, loads: tuple[str, ...] = LOADS, batch: str = "batch_size"
) -> dict:
    """The estimate rows nearest to validated deployment inputs `v` among those measured under one of `loads`
    (the calculator's kind of load: a throughput run is no evidence for a static batch's latency), and the range
    of the core's error on them (predicted at the inputs' step-overhead mode); `outside` when no row is within
    NEAR. v[batch] is the calculator's running batch (the latency calculator's batch_size, a closed loop's users)."""
    here = _features(
        v["model"], v["hardware"], v["weight_dtype"], v["num_gpus"], v.get(batch, 1), v.get("expert_weight_dtype")
    )
    scored = sorted(
        (distance(here, f), p["id"], p, f)
        for p, f in _estimate_features(ledger_mode(v.get("step_overhead", DEFAULT_MODE)))
        if (metrics is None or p["metric"] in metrics) and f["load"] in loads
    )
    near = [(p, f) for d, _, p, f in scored if d <= NEAR][:BAND_ROWS]
    if not near:
        return {"outside": True, "count": 0, "nearest_distance": scored[0][0] if scored else math.inf}
    errors = sorted(p["error"] for p, _ in near)
    hardware = sorted({f["hardware"] for _, f in near})
    precisions = sorted({f["precision"] for _, f in near})  # as the distance compared them
    return {
        "outside": False,
        "count": len(near),
        "min_error": errors[0],
        "max_error": errors[-1],
        "median_error": _quantile(errors, 0.5),
        "hardware": hardware,
        "precisions": precisions,
        "ids": [p["id"] for p, _ in near],
    }


def _names(ids: list[str]) -> str:
    presets = catalog.accelerator_presets()
    return ", ".join(presets[i].name.replace("NVIDIA ", "").replace("AMD Instinct ", "") for i in ids)


def band_note(
    v: dict,
    metrics: tuple[str, ...] | None = None,
    what: str = "estimates",
    loads: tuple[str, ...] = LOADS,
    batch: str = "batch_size",
) -> str:
    """The band in words, for a calculator's notes."""
    b = band(v, metrics, loads, batch)
    under = " measured" + ("" if loads == LOADS else " with " + " or ".join(LOAD_WORDS[k] for k in loads))
    if b["outside"]:
        return (
            f"Calibration ({what}): outside the measured range. No row of the calibration ledger{under} is near "
            "this hardware, weight format, model size and batch, so how far this estimate is from a "
            "measurement is not known."
        )
    formats = " or ".join(precision_words(p) for p in b["precisions"])
    rows = ("the nearest row" if b["count"] == 1 else f"the {b['count']} nearest rows") + under
    spread = (
        f"{b['min_error']:+.0%}"
        if b["count"] == 1
        else f"{b['min_error']:+.0%} … {b['max_error']:+.0%} (median {b['median_error']:+.0%})"
    )
    own = any(v.get(k, d) != d for k, d in EFFICIENCY.items())
    caveat = " These rows were predicted at the default efficiencies; yours differ." if own else ""
    return (
        f"Calibration ({what}): on {rows} ({_names(b['hardware'])}; weights in {formats}) the core was "
        f"{spread} from the measurements; + means faster than measured.{caveat}"
    )


# The calculators whose blocks show the band: their inputs, the input that is their running batch, the loads
# their estimates model, and for which of their estimates (one note per entry). Both model a bounded batch: the
# latency calculator a static one, the closed loop N users with a request each in flight.
BANDS = {
    "latency": (
        LATENCY["inputs"],
        "batch_size",
        ("bounded",),
        (
            (("tpot_s", "e2e_latency_s", "output_tokens_per_s"), "TPOT, end-to-end and throughput"),
            (("ttft_s",), "TTFT"),
        ),
    ),
    "benchmark_loops": (
        LOOPS["inputs"],
        "users",
        ("bounded",),
        (
            (("e2e_latency_s", "output_tokens_per_s", "tpot_s"), "end-to-end, rate and TPOT"),
            (("ttft_s",), "TTFT"),
        ),
    ),
}


def notes_for(name: str, inputs: dict | None) -> list[str]:
    """The band notes a calculator block shows beside its results (page.present adds them)."""
    if name not in BANDS:
        return []
    spec, batch, loads, notes = BANDS[name]
    v = validate(spec, inputs)
    return [band_note(v, metrics, what, loads, batch) for metrics, what in notes]


def check() -> None:
    """Raise ValueError if a row names an unknown source, model, accelerator or metric condition."""
    known = sources()
    for r in _rows():
        if r["source"] not in known:
            raise ValueError(f"{LEDGER}: {r['id']} names unknown source {r['source']!r}")
        try:
            validate(LATENCY["inputs"], core_inputs(r))
        except InputError as exc:
            raise ValueError(f"{LEDGER}: {r['id']}: {exc}") from None

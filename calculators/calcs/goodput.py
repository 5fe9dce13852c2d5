"""Goodput: a seeded discrete-event simulation of continuous batching against TTFT/TPOT/ITL SLOs.

Goodput (DistServe, arXiv 2401.09670 §2): the highest request rate at which at least the target
share of requests meets both the TTFT and the TPOT SLO, found here by bisection on the rate
between 0 and the edge of steady state (ρ = STABLE_BELOW), whatever rate the reader typed. Rate ×
attainment at one rate is the per-run "request goodput" vLLM's `vllm bench serve --goodput` prints.
Step times come from steptime.StepModel.

Each run is the engine simulator (calculators/engine) set up as the server above (run_server); steady
state at a browser's cost (offered_load): utilisation ρ = rate × server time per request when
saturated; ρ ≥ 0.98 counts as overload (the capacity is an estimate good to a few percent, so no
steady state is claimed: attainment 0, latencies from one saturated schedule shared by every
overloaded rate); below it, a warm start at the implied batch, a settling stretch, then
num_requests measured. Common random numbers: every rate sees the same requests and arrival gaps.
Checked against 5,000-request runs in tests/core/test_goodput_steady.py.

With a workload shape (workload_shape.Sessions) the requests are the shape's turns: sessions start with the
gamma gaps at rate ÷ turns (the rate is in turns, each a request); each turn arrives a wait after the previous
one ends (drawn, exponential with the shape's mean) and re-reads the whole history (this server has no prefix
cache: every turn prefills its whole prompt, the shape's reuse is not used); the settling stretch and the tail
after the measured turns are as long as a session (_stretch); past the edge of steady state one run at the
rate stands in for the saturated schedule.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field, replace

from ..schema import choice, integer, mark, number, output, series, step
from ..engine import workload as requests_from
from ..engine.config import EngineConfig, Request
from ..engine.metrics import Gaps, percentile
from ..engine.run import simulate
from ..engine.steps import StepTimes
from ..engine.workload import Workload
from .offered_load import ANALYSIS_REQUESTS, SIZE_CAP, Load, offered_load, warm_start
from .engine_defaults import vllm_max_num_seqs
from .memory import engine_fields, kv_pool_tokens
from .deployment import deployment_fields, efficiency_steps
from .latency import TP_HELP
from .lengths import length_fields
from .parallel_fields import SCALE_OUT_KEYS, scale_out_fields
from .sharding import comm_notes, sharded_steps
from .steptime import StepModel, deployment
from .workload_shape import Sessions, shape_fields, shape_of

SEQ_RULES = [("vllm", "vLLM V1 default for this accelerator"), ("set", "The value below")]
OVERLOAD_PLOTTED = 1.1    # ρ of the one overloaded point on the plots
QUEUE_GRID, QUEUE_SAMPLE = (0.25, 0.5, 0.7, 0.8), 300   # extra utilisations for the queueing plot, and their sample
RESOLUTION = 0.01        # the goodput search stops when its bracket is narrower than this × capacity
FIRST_GUESS = 0.9        # ρ of the second probe, after the edge of steady state
NO_BUDGET = 10 ** 12     # tokens per step: the server modelled has no token budget


SCHEMA = {
    "name": "goodput",
    "title": "Goodput and SLO attainment (simulated)",
    "description": ("A seeded discrete-event simulation of one serving replica (the GPUs form one "
                    "tensor-parallel group, or under Advanced any pipeline, attention-data and expert-parallel "
                    "deployment, priced by Part 12's deployment model with its communication). Assumptions: "
                    "arrivals with gamma-distributed gaps (shape = "
                    "burstiness; 1 is Poisson), as vLLM's benchmark draws them; prompt and output lengths "
                    "drawn independently (fixed, uniform, or log-normal with the given mean and "
                    "coefficient of variation); first-come first-served; continuous batching that runs "
                    "a prefill of all newly admitted requests before the next decode step (decodes stall "
                    "meanwhile, no chunked prefill, no token budget); KV for prompt plus output reserved "
                    "on admission, no preemption; step times from the roofline model scaled by the "
                    "efficiency factors plus each step's overhead (by default CUDA graphs plus a fitted GPU "
                    "floor per kernel) and, on "
                    "more than one GPU, the communication on the critical path; no tokenisation or scheduler "
                    "overhead. A request meets "
                    "the SLO when its TTFT and its mean TPOT are both within target; a rate meets the "
                    "objectives when the target share of requests does and the pooled inter-token "
                    "latency p99 is within its target. Goodput follows DistServe (arXiv 2401.09670): the "
                    "highest rate that meets the objectives, found by bisection. Steady state: the offered "
                    "load is checked against the capacity of the same step-time model; below 98% of it "
                    "the run starts with the batch the load implies, and the requests measured arrive "
                    "after a settling stretch; from 98% of capacity up no steady state is claimed and "
                    "attainment is reported as 0. With a workload shape each turn is a request (the rate is "
                    "in turns per second) and, as this server has no prefix cache, every turn prefills its "
                    "whole prompt: the shape's reuse is not used."),
    "inputs": deployment_fields(0.8, 0.6, {"num_gpus": {"help": TP_HELP}}) + scale_out_fields() + engine_fields() + [
        number("request_rate_per_s", "Request rate", 10.0, 0.001, 1e6, "requests/s",
               "The rate the per-run figures describe; the goodput search does not depend on it."),
        number("burstiness", "Arrival burstiness (gamma shape)", 1.0, 0.05, 100.0, "",
               "As vLLM's vllm bench serve --burstiness: 1 is Poisson; below 1 burstier, above 1 more even. "
               "Squared coefficient of variation of the gaps = 1 ÷ burstiness.", 0.05),
        integer("num_requests", "Requests measured", 1000, 50, 5000, "requests",
                "Counted after a warm start at the steady-state batch and a settling stretch; later "
                "arrivals keep the server loaded while they finish."),
        integer("seed", "Random seed", 0, 0, 2 ** 31 - 1),
        *length_fields(512, 128, input_max=1_000_000, output_max=100_000),
        choice("max_seqs_rule", "Cap on running sequences", "vllm", SEQ_RULES,
               "vLLM V1 (vllm/engine/arg_utils.py, v0.33.0): max_num_seqs 1,024 on GPUs with at "
               "least 70 GiB other than A100, 256 otherwise."),
        integer("max_batch_size", "Max concurrent sequences (when set)", 256, 1, 100_000, "sequences"),
        number("ttft_slo_s", "TTFT target", 0.5, 0.001, 3600.0, "s",
               "DistServe's chatbot SLO for OPT-13B is 0.25 s TTFT, 0.1 s TPOT (arXiv v3, Table 1)."),
        number("tpot_slo_s", "TPOT target (per-request mean)", 0.1, 0.0001, 60.0, "s"),
        number("itl_p99_slo_s", "Inter-token latency p99 target (pooled gaps)", 60.0, 0.0001, 60.0, "s",
               "A stall bound for streaming: the p99 of every gap between tokens. 60 s (the most) leaves it "
               "out in effect."),
        number("slo_target_percent", "Share of requests that must meet TTFT and TPOT", 90.0, 1.0, 100.0, "%"),
    ] + shape_fields("A named task in place of the length distributions: sessions start at rate ÷ turns; each "
                     "turn arrives a wait (drawn, the shape's mean) after the previous one ends, its prompt the "
                     "whole history so far, and is one request."),
    "outputs": [
        output("max_rate_meeting_slo_requests_per_s", "Goodput (DistServe): highest rate meeting the objectives",
               "requests/s", "rate"),
        output("max_rate_meeting_slo_requests_per_s_per_gpu", "Goodput per GPU", "requests/s", "rate"),
        output("goodput_utilisation", "Goodput ÷ capacity", "", "percent"),
        output("slo_attainment", "At the chosen rate: requests meeting TTFT and TPOT", "", "percent"),
        output("goodput_requests_per_s", "At the chosen rate: rate × attainment (vLLM's per-run request goodput)",
               "requests/s", "rate"),
        output("ttft_p50_s", "TTFT p50", "s", "seconds"), output("ttft_p90_s", "TTFT p90", "s", "seconds"),
        output("ttft_p99_s", "TTFT p99", "s", "seconds"), output("tpot_p50_s", "TPOT p50", "s", "seconds"),
        output("tpot_p90_s", "TPOT p90", "s", "seconds"), output("tpot_p99_s", "TPOT p99", "s", "seconds"),
        output("itl_p50_s", "Inter-token latency p50 (pooled gaps)", "s", "seconds"),
        output("itl_p99_s", "Inter-token latency p99 (pooled gaps)", "s", "seconds"),
        output("itl_max_s", "Longest gap between two tokens", "s", "seconds"),
        output("simulated_wait_s", "Mean wait before prefill, simulated", "s", "seconds"),
        output("kingman_wait_s", "Mean wait in queue, Kingman's G/G/1 formula", "s", "seconds"),
        output("service_cv2", "Squared spread of server time per request (Cs²)", "", "number"),
        output("stable", "Steady state measured (below 98% of capacity)", "", "number"),
        output("utilisation", "Offered load ÷ capacity (ρ)", "", "percent"),
        output("capacity_requests_per_s", "Capacity: requests/s a saturated server completes", "requests/s", "rate"),
        output("max_running_sequences", "Cap on running sequences", "sequences", "integer"),
        output("steady_state_batch", "Sequences decoding in steady state (estimate)", "sequences", "integer"),
        output("dropped_requests", "Requests whose KV never fits", "requests", "integer"),
        output("kv_capacity_tokens", "KV pool", "tokens", "integer"),
    ],
}


def max_num_seqs(v: dict, accelerator) -> int:
    """The running-sequence cap: vLLM V1's default for the accelerator, or the reader's value; per attention DP
    rank, each of which schedules its own (vLLM v0.33.0 runs an engine core per DP rank)."""
    per_rank = v["max_batch_size"] if v["max_seqs_rule"] == "set" else vllm_max_num_seqs(accelerator)
    return per_rank * v.get("dp", 1)


def summarise(result, ttft_slo: float, tpot_slo: float, gaps: Gaps | None = None) -> dict:
    served = [r for r in result if r is not None]
    ttft, tpot, prefill = zip(*served) if served else ((), (), ())
    ttfts, tpots = sorted(ttft), sorted(tpot)
    met = sum(1 for a, b in zip(ttft, tpot) if a <= ttft_slo and b <= tpot_slo)
    out = {"attainment": met / len(result), "dropped": len(result) - len(served),
           "queue_wait": math.fsum(map(operator.sub, ttft, prefill)) / len(served) if served else 0.0}
    for p in (50, 90, 99):
        out[f"ttft_p{p}"], out[f"tpot_p{p}"] = percentile(ttfts, p), percentile(tpots, p)
    gaps = gaps or Gaps()
    out["itl_p50"], out["itl_p99"] = gaps.percentiles((50, 99))
    out["itl_max"] = gaps.longest()
    return out


SETTLE = 0.25   # arrivals let in after the warm start before measuring, × the steady-state batch
STABLE_BELOW = 0.98   # ρ at or above this counts as overloaded: the capacity is an estimate good to a few
                      # percent (test_capacity_estimate_matches_a_saturated_simulation allows 7%), and this
                      # close to capacity the queue settles far more slowly than a finite run can show
UNSTABLE = ("offered load is at or above 98% of the estimated capacity: no steady state is claimed (the "
            "estimate is good to a few percent, and past capacity queues grow without bound), so attainment "
            "and per-run goodput are reported as 0; the latencies shown are those of a saturated schedule, and "
            "TTFT grows with the length of the run")


class Kept:
    """What one server and workload give whatever the rate or the objectives, made on first use and kept
    between recomputes (see _kept): the saturated schedule, its gaps, and the queueing plot's grid; and,
    per objectives, the goodput search with its plotted sweep, which do not depend on the reader's rate."""
    __slots__ = ("saturated", "saturated_gaps", "grid", "searches")

    def __init__(self):
        self.saturated: list | None = None
        self.saturated_gaps: Gaps | None = None
        self.grid: list[dict] | None = None
        self.searches: dict = {}  # objectives -> (goodput, edge, runs by rate)


@dataclass(frozen=True)
class Simulation:
    """One recompute's setup, shared by the run at every rate it measures."""
    load: Load
    capacity: int         # the KV pool, in tokens
    workload: Workload | Sessions   # the length distributions, or a shape's sessions
    steps: StepModel
    times: StepTimes      # the engine's step times, kept with the step model
    max_seqs: int         # the cap on running sequences
    target: float         # share of requests that must meet TTFT and TPOT
    cs2: float            # squared spread of server time per request (Kingman's Cs²)
    kept: Kept
    runs: dict = field(default_factory=dict)   # this recompute's runs by rate (probes and full runs)
    itl: bool = True      # book inter-token gaps (the queueing grid needs only waits)


def _measure(v: dict, sim: Simulation, rate: float, probe: bool = False) -> dict:
    """One rate: start warm at the steady-state batch, let SETTLE × batch arrivals in, measure the next
    num_requests; later arrivals keep the server loaded until they finish. Overloaded: see _overloaded.
    A probe stops as soon as more requests have missed than the target allows ({"meets": False} only).
    Memoised by rate in sim.runs; inter-token gaps are booked unless sim.itl is False."""
    if rate in sim.runs and (probe or "attainment" in sim.runs[rate]):
        return sim.runs[rate]
    load, capacity, workload = sim.load, sim.capacity, sim.workload
    rho = load.utilisation(rate)
    sessions = sim.workload if isinstance(sim.workload, Sessions) else None
    if rho >= STABLE_BELOW and sessions is None:
        gaps = Gaps()
        out = dict(summarise(_overloaded(v, sim, rate, gaps), v["ttft_slo_s"], v["tpot_slo_s"], gaps),
                   attainment=0.0, utilisation=rho, stable=False, batch=min(SIZE_CAP, load.full_batch))
    else:
        batch, gaps = min(SIZE_CAP, load.batch(rate)), Gaps() if sim.itl else None
        (settle, tail), n = _stretch(sim, rate, batch), v["num_requests"]
        warm = warm_start(_sample(workload), batch, v["seed"], capacity, sim.steps)
        stop = (v["ttft_slo_s"], v["tpot_slo_s"], math.floor(n * (1 - sim.target) + 1e-9)) if probe else None
        result = run_server(sim.times, capacity, sim.max_seqs, workload.first(settle + n + tail), rate, warm,
                            (settle, settle + n), gaps, stop, sessions)
        if result is None:
            sim.runs[rate] = {"meets": False}
            return sim.runs[rate]
        out = dict(summarise(result, v["ttft_slo_s"], v["tpot_slo_s"], gaps), utilisation=rho, stable=True,
                   batch=batch)
        if rho >= STABLE_BELOW:  # sessions past the edge: one run at the rate, no steady state claimed
            out.update(attainment=0.0, stable=False)
    out["meets"] = out["attainment"] >= sim.target and out["itl_p99"] <= v["itl_p99_slo_s"]
    sim.runs[rate] = out
    return out


def _overloaded(v: dict, sim: Simulation, rate: float, gaps: Gaps) -> list:
    """Past capacity the batch stays full and the queue never empties, so the schedule does not depend
    on the rate: simulate it once with every request queued at t = 0 (warm start at the full batch),
    then TTFT at this rate = first token − arrival, or the prefill alone if it arrived later."""
    kept = sim.kept   # the schedule depends on neither rate nor objectives: kept between recomputes
    if kept.saturated is None:
        n, batch = v["num_requests"], min(SIZE_CAP, sim.load.full_batch)
        queued = [(0.0, a, b) for _, a, b in sim.workload.first(n + batch)]
        warm = warm_start(_sample(sim.workload), batch, v["seed"], sim.capacity, sim.steps)
        kept.saturated_gaps = Gaps()
        kept.saturated = run_server(sim.times, sim.capacity, sim.max_seqs, queued, 1.0, warm, (0, n),
                                    kept.saturated_gaps)
    gaps.values, gaps.weights = kept.saturated_gaps.values, kept.saturated_gaps.weights   # never mutated
    out, t = [], 0.0
    for r, (gap, _, _) in zip(kept.saturated, sim.workload.first(v["num_requests"])):
        t += gap / rate
        out.append(None if r is None else (max(r[0] - t, r[2]), r[1], r[2]))
    return out


def _sample(workload) -> list:
    """The draws the offered load, the warm start and Cs² average over: whole sessions of a shape."""
    return workload.sample(ANALYSIS_REQUESTS) if isinstance(workload, Sessions) else workload.first(ANALYSIS_REQUESTS)


def _stretch(sim: Simulation, rate: float, batch: int) -> tuple[int, int]:
    """(Arrivals let in before the measured ones, arrivals after them.) Sessions: both as many turns as
    arrive during one session (turns × a turn's time at this batch + the waits), so the measured turns meet
    sessions at every stage, as in steady state, and are not left to finish on a draining server; at most
    SIZE_CAP each."""
    if not isinstance(sim.workload, Sessions):
        return math.ceil(SETTLE * batch), batch
    load, shape = sim.load, sim.workload.shape
    turn_s = load.prefill_s + load.decode_steps * load.steps.decode_time(batch, load.context)
    span = min(SIZE_CAP, math.ceil(rate * (shape.turns * turn_s + shape.wait_s * (shape.turns - 1))))
    return span, span + batch


def _bisect(v: dict, sim: Simulation) -> tuple[float, float]:
    """DistServe goodput: the highest rate meeting the objectives, by bisection, to RESOLUTION × capacity.
    Bracketed from the analytical capacity: the edge (ρ = STABLE_BELOW; no rate above it is claimed),
    then ρ = FIRST_GUESS, so a goodput near capacity takes a few probes. Returns (goodput, edge)."""
    load = sim.load
    if not load.share:
        return 0.0, 0.0
    per_rho = 1 / (load.share * load.service_s())
    # A hair inside steady state: outputs are rounded to 12 significant digits, and a reported goodput
    # typed back in as the rate must still count as steady (one ulp inside did not survive the rounding).
    edge = STABLE_BELOW * per_rho * (1 - 1e-9)
    if _measure(v, sim, edge, True)["meets"]:
        return edge, edge
    guess = FIRST_GUESS * per_rho
    lo, hi = (guess, edge) if _measure(v, sim, guess, True)["meets"] else (0.0, guess)
    while hi - lo > RESOLUTION * per_rho:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _measure(v, sim, mid, True)["meets"] else (lo, mid)
    return lo, edge


def service_cv2(load, work) -> float:
    """Squared coefficient of variation of the server time per request, from the length mix:
    S_i = prefill × prompt_i ÷ mean prompt + (output_i − 1) × step(B) ÷ B, B the saturated batch."""
    step_s = load.steps.decode_time(load.full_batch, load.context) / load.full_batch
    mean_prompt = sum(a for _, a, _ in work) / len(work)
    times = [load.prefill_s * a / mean_prompt + (b - 1) * step_s for _, a, b in work]
    mean = math.fsum(times) / len(times)
    return math.fsum((t - mean) ** 2 for t in times) / len(times) / mean ** 2


def kingman_wait(rho: float, ca2: float, cs2: float, service_s: float) -> float:
    """Kingman's G/G/1 approximation of the mean wait in queue: ρ ÷ (1 − ρ) × (Ca² + Cs²) ÷ 2 × E[S]
    (Kingman 1961); for Poisson arrivals (Ca² = 1) it is the Pollaczek–Khinchine M/G/1 mean wait."""
    return rho / (1 - rho) * (ca2 + cs2) / 2 * service_s if rho < 1 else math.inf


WORKLOAD_KEYS = ("seed", "burstiness", "input_distribution", "input_tokens_mean", "input_tokens_cv",
                 "output_distribution", "output_tokens_mean", "output_tokens_cv")
OBJECTIVE_KEYS = ("ttft_slo_s", "tpot_slo_s", "itl_p99_slo_s", "slo_target_percent")
KEPT = 4   # workloads and step models kept between recomputes (a reader changes one input at a time)
_workloads: dict = {}
_step_models: dict = {}
_setups: dict = {}   # per server and workload: the saturated schedule and the queueing grid (no rate, no SLO)


def _kept(store: dict, key, make):
    """store[key], made on first use; the oldest entry goes past KEPT. Safe because what is kept is a
    pure function of its key (a Workload's prefix does not depend on how far it was drawn before, a
    StepModel only memoises), so a recompute gives the same result bit for bit, warm or cold."""
    if key not in store:
        if len(store) >= KEPT:
            del store[next(iter(store))]
        store[key] = make()
    return store[key]


SHAPE_KEYS = ("workload_shape", "shape_turns")   # absent where a calculator built on goodput's has no shape


def _work_key(v: dict) -> tuple:
    return tuple(v[k] for k in WORKLOAD_KEYS) + tuple(v.get(k) for k in SHAPE_KEYS)


def _workload(v: dict) -> Workload | Sessions:
    """The draws: the length distributions', or a shape's turns (arrival gaps from the same stream)."""
    def make():
        shape = shape_of(v)
        return Workload(v) if shape is None else Sessions(shape, Workload(v), v["seed"])

    return _kept(_workloads, _work_key(v), make)


def _step_model(v: dict, dep, key: str) -> tuple[StepModel, StepTimes]:
    """(the step model, the engine's StepTimes on it) for this deployment: StepModel on one GPU, the sharded
    deployment's with its communication on more (sharding.sharded_steps). The key is the deployment's repr
    (every field, exactly: floats repr round-trip; Accelerator holds a dict) and the degrees beyond TP."""

    def make():
        model = sharded_steps(v, dep) or StepModel(dep)
        return model, StepTimes(model)

    return _kept(_step_models, key, make)


def server(capacity: int, max_seqs: int) -> EngineConfig:
    """The engine set up as the server this calculator models: prefill-first steps (vLLM V0's default
    scheduler), KV for prompt + output reserved on admission in a pool of `capacity` tokens (no
    preemption), first come first served, no token budget."""
    return EngineConfig(kv_blocks=max(1, int(capacity)), block_size_tokens=1, max_num_seqs=max_seqs,
                        max_num_batched_tokens=NO_BUDGET, chunked_prefill=False, mixed_batches=False,
                        reserve_full_length=True)


def run_server(times: StepTimes, capacity: int, max_seqs: int, work, rate: float, warm=(), measured=(0, None),
               gaps: Gaps | None = None, stop=None, sessions: Sessions | None = None):
    """One engine run of server(capacity, max_seqs): `warm` sequences (prompt, output, steps left) decoding
    at t = 0, then `work`'s draws arriving at `rate`; work[lo:hi] measured. Returns (TTFT, mean TPOT,
    prefill time) per measured request (None for one whose KV never fits), or None once `stop` (TTFT
    target, TPOT target, misses allowed) says more have missed than allowed; the measured requests'
    inter-token gaps go to `gaps`. With `sessions`, work's draws are turns of a shape's sessions."""
    requests = [Request(0.0, a, b, generated=b - left) for a, b, left in warm]
    offset = len(requests)
    requests += requests_from.open_loop(work, rate) if sessions is None else sessions.requests(work, rate, offset)
    lo, hi = len(warm) + measured[0], len(warm) + (len(work) if measured[1] is None else measured[1])
    run = simulate(times, requests, server(capacity, max_seqs), (lo, hi), stop)
    if run.stopped:
        return None
    if gaps is not None:
        gaps.values.extend(run.gap_values_s)
        gaps.weights.extend(run.gap_weights)
    out = [None] * (hi - lo)
    for i, ttft, tpot, queue in zip(run.ids, run.ttft_s, run.tpot_s, run.queue_s):
        out[i - lo] = (ttft, tpot, ttft - queue)
    return out


def simulation(v: dict, dep) -> Simulation:
    """The setup every rate's run shares; the kept parts come from the stores above."""
    workload, key = _workload(v), (repr(dep), *(v[k] for k in SCALE_OUT_KEYS))
    (steps, times), cap = _step_model(v, dep, key), max_num_seqs(v, dep.accelerator)
    capacity = kv_pool_tokens(v)
    load = offered_load(steps, _sample(workload), cap, capacity)
    # Everything the saturated schedule and the queueing grid depend on (load, warm starts and batches
    # follow from these); the objectives and the rate typed are not among them.
    kept = _kept(_setups, (key, _work_key(v), cap, capacity, v["num_requests"]), Kept)
    return Simulation(load, capacity, workload, steps, times, cap, v["slo_target_percent"] / 100,
                      service_cv2(load, _sample(workload)), kept)


def _notes(v: dict, here: dict, best: float, capacity: int) -> list[str]:
    notes = [UNSTABLE] if not here["stable"] else []
    if here["dropped"]:
        notes.append(f"{here['dropped']} of {v['num_requests']} measured requests need more KV than the pool holds "
                     f"({capacity:,} tokens) and count as missing both SLOs")
    if best == 0.0:
        notes.append("no simulated rate meets the objectives: goodput is 0 to the resolution of the search")
    return notes


def _rate_outputs(v: dict, sim: Simulation, here: dict) -> dict:
    """What the run at the reader's rate measured."""
    return {
        "slo_attainment": here["attainment"],
        "goodput_requests_per_s": v["request_rate_per_s"] * here["attainment"],
        "stable": here["stable"],
        "utilisation": here["utilisation"],
        "steady_state_batch": here["batch"],
        **{f"{m}_p{p}_s": here[f"{m}_p{p}"] for m in ("ttft", "tpot") for p in (50, 90, 99)},
        "itl_p50_s": here["itl_p50"], "itl_p99_s": here["itl_p99"], "itl_max_s": here["itl_max"],
        "dropped_requests": here["dropped"],
        "kingman_wait_s": kingman_wait(min(here["utilisation"], STABLE_BELOW), 1 / v["burstiness"], sim.cs2,
                                       sim.load.service_s()),
        "simulated_wait_s": here["queue_wait"],
    }


def _plotted(runs: dict, best: float, edge: float) -> list[float]:
    """The rates the sweep plots: every full run, the goodput, and one point past capacity (the cliff)."""
    overload = OVERLOAD_PLOTTED * edge / STABLE_BELOW
    return sorted({r for r, s in runs.items() if "attainment" in s} | {best, overload} - {0.0})


def _search(v: dict, sim: Simulation) -> tuple[float, float, dict]:
    """(goodput, edge, the runs by rate) of the bisection and the sweep it plots, in their own memo: they
    depend on the server, the workload and the objectives but not on the rate typed, so a reader moving
    the rate reuses them (kept per objectives, as _kept keeps the rest; the runs are never mutated)."""
    def make():
        own = replace(sim, runs={})
        best, edge = _bisect(v, own)
        for r in _plotted(own.runs, best, edge):
            _measure(v, own, r)
        return best, edge, own.runs

    return _kept(sim.kept.searches, tuple(v[k] for k in OBJECTIVE_KEYS), make)


def compute(v: dict) -> dict:
    dep = deployment(v)
    sim = simulation(v, dep)
    here = _measure(v, sim, v["request_rate_per_s"])
    best, edge, runs = _search(v, sim)
    for r, s in runs.items():  # the reader's full run stays where the search only probed its rate
        sim.runs.setdefault(r, s)
    plotted = _plotted(sim.runs, best, edge)
    sweep = [_measure(v, sim, r) for r in plotted]
    cap_rate = sim.load.capacity()
    return {
        "max_rate_meeting_slo_requests_per_s": best,
        "max_rate_meeting_slo_requests_per_s_per_gpu": best / sim.steps.num_gpus,
        "goodput_utilisation": best / cap_rate if cap_rate else 0.0,
        **_rate_outputs(v, sim, here),
        "capacity_requests_per_s": cap_rate,
        "max_running_sequences": sim.max_seqs,
        "kv_capacity_tokens": sim.capacity,
        "notes": comm_notes(v, sim.steps) + _notes(v, here, best, sim.capacity),
        "derivation": efficiency_steps(dep) + _steps(v, sim, here, best, edge),
        "service_cv2": sim.cs2,
        "series": _marked(v, here, dict(_sweep_series(plotted, sweep),
                                        queueing_vs_utilisation=_queueing_series(v, sim, plotted, sweep))),
    }


def _marked(v: dict, here: dict, plots: dict) -> dict:
    """The reader's rate marked on the rate sweeps (it is always one of their rates), and its utilisation on the
    queueing plot when that run was steady (an overloaded one is not on it)."""
    rate = v["request_rate_per_s"]
    for sid in ("goodput_vs_rate", "goodput_requests_vs_rate", "latency_vs_rate"):
        if rate in plots[sid]["x"]["values"]:
            mark(plots[sid], "request_rate_per_s", rate, name=f"yours ({rate:,g} requests/s)")
    queueing, u = plots["queueing_vs_utilisation"], 100 * here["utilisation"]
    if here["stable"] and u in queueing["x"]["values"]:
        mark(queueing, None, u, name=f"yours (ρ = {u:.3g}%)")
    return plots


def _queueing_series(v: dict, sim: Simulation, rates: list[float], sweep: list[dict]) -> dict:
    """Mean wait before a request's own prefill, simulated, against Kingman's formula, by utilisation:
    the runs already made, plus QUEUE_GRID utilisations run with QUEUE_SAMPLE requests (a mean needs
    fewer than a tail)."""
    per_rho = 1 / (sim.load.share * sim.load.service_s()) if sim.load.share else 0.0
    if sim.kept.grid is None:   # depends on neither rate nor objectives: kept between recomputes
        light, small = replace(sim, runs={}, itl=False), dict(v, num_requests=QUEUE_SAMPLE)   # no gaps: waits only
        runs = [_measure(small, light, u * per_rho) for u in QUEUE_GRID] if per_rho else []
        sim.kept.grid = [{k: s[k] for k in ("utilisation", "queue_wait", "stable")} for s in runs]
    extra = sim.kept.grid
    pairs = sorted((s["utilisation"], s["queue_wait"]) for s in sweep + extra if s["stable"])
    service, ca2 = sim.load.service_s(), 1 / v["burstiness"]
    return series("Mean wait before prefill vs utilisation: simulated and Kingman's formula", "Utilisation ρ", "",
                  [100 * u for u, _ in pairs],
                  [("simulated", "s", [w for _, w in pairs]),
                   ("Kingman (G/G/1)", "s", [kingman_wait(u, ca2, sim.cs2, service) for u, _ in pairs])])


def _capacity_steps(v: dict, sim: Simulation) -> list[dict]:
    load, capacity, cap, service = sim.load, sim.capacity, sim.max_seqs, sim.load.service_s()
    return [
        step("Cap on running sequences", "vLLM V1 max_num_seqs default: 1,024 if memory ≥ 70 GiB and not A100, "
             "else 256" if v["max_seqs_rule"] == "vllm" else "set by you", "{}", [cap], cap, "sequences"),
        step("KV pool", "engine budget ÷ KV per token (all layers)", "{}", [(capacity, "tokens")], capacity, "tokens"),
        step("Batch when saturated", "min(max sequences, KV pool ÷ KV reserved per sequence)",
             "min({}, pool ÷ mean(prompt + output, windowed layers' share capped at the window, plus a hybrid's "
             "state), weighted by time decoding)", [cap], load.full_batch, "sequences"),
        step("Server time per request, saturated",
             "prefill (shared with prompts admitted alongside) + (output − 1) × decode step(B) ÷ B",
             "{} + {} × step({}, {}) ÷ {}",
             [(load.prefill_s, "s"), load.decode_steps, load.full_batch, load.context, load.full_batch], service, "s"),
        step("Capacity", "1 ÷ server time per request", "1 ÷ {}", [(service, "s")], load.capacity(), "requests/s"),
    ]


def _rate_steps(v: dict, sim: Simulation, here: dict) -> list[dict]:
    load, rate = sim.load, (v["request_rate_per_s"], "requests/s")
    overloaded = "" if here["stable"] else "; 0 as ρ ≥ {}"
    return [
        step("Utilisation ρ at the chosen rate", "rate × share of requests that fit × server time per request",
             "{} × {} × {}", [rate, load.share, (load.service_s(), "s")], here["utilisation"], "share"),
        step("SLO attainment at the chosen rate", "measured requests with TTFT ≤ target and TPOT ≤ target ÷ measured",
             "TTFT ≤ {}, TPOT ≤ {} over {} requests after a warm start at {} sequences" + overloaded,
             [(v["ttft_slo_s"], "s"), (v["tpot_slo_s"], "s"), v["num_requests"], here["batch"]]
             + ([] if here["stable"] else [STABLE_BELOW]), here["attainment"], "share"),
        step("Per-run request goodput (vLLM)", "rate × attainment", "{} × {}", [rate, here["attainment"]],
             v["request_rate_per_s"] * here["attainment"], "requests/s"),
    ]


def _search_steps(v: dict, sim: Simulation, best: float, edge: float) -> list[dict]:
    probes = sorted(r for r in sim.runs if r <= edge)
    return [
        step("Edge of steady state", f"{STABLE_BELOW} × capacity", "{} × {}",
             [STABLE_BELOW, (sim.load.capacity(), "requests/s")], edge, "requests/s"),
        step("Goodput (DistServe)", f"highest rate with attainment ≥ target and ITL p99 ≤ target; bisection from "
             f"[{FIRST_GUESS} × capacity, edge] or [0, {FIRST_GUESS} × capacity] to {RESOLUTION:.0%} of capacity",
             "attainment ≥ {}, ITL p99 ≤ {}; simulated at " + ", ".join("{}" for _ in probes),
             [(v["slo_target_percent"], "%"), (v["itl_p99_slo_s"], "s")] + probes, best, "requests/s"),
    ]


def _steps(v: dict, sim: Simulation, here: dict, best: float, edge: float) -> list[dict]:
    return _capacity_steps(v, sim) + _rate_steps(v, sim, here) + _search_steps(v, sim, best, edge)


def _sweep_series(rates: list[float], sweep: list[dict]) -> dict:
    """One plot per unit: attainment (%), goodput (requests/s), latencies (s)."""
    return {
        "goodput_vs_rate": series("SLO attainment vs request rate", "Request rate", "requests/s", rates,
                                  [("SLO attainment", "%", [100 * s["attainment"] for s in sweep])]),
        "goodput_requests_vs_rate": series(
            "Per-run goodput (rate × attainment) vs request rate", "Request rate", "requests/s", rates,
            [("rate × attainment", "requests/s", [r * s["attainment"] for r, s in zip(rates, sweep)]),
             ("offered rate", "requests/s", list(rates))]),
        "latency_vs_rate": series("p90 TTFT, p90 TPOT and p99 ITL vs request rate", "Request rate", "requests/s",
                                  rates,
                                  [("TTFT p90", "s", [s["ttft_p90"] for s in sweep]),
                                   ("TPOT p90", "s", [s["tpot_p90"] for s in sweep]),
                                   ("ITL p99", "s", [s["itl_p99"] for s in sweep])]),
    }

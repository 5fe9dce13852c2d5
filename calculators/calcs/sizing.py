"""Sizing: will a model serve a target (concurrent users or requests/s) within an SLO on an accelerator,
and on how many GPUs? A verdict in words, built from the other calculators' functions, not a model of
its own:

  memory  (memory.budget, the engine rule's usable memory): sequences of prompt + output that fit per
          replica at each power-of-two TP degree, KV reserved for the whole request;
  latency (sharding.steps_for, the roofline step times scaled by the efficiencies, with the TP all-reduces
          on more than one GPU): TPOT = the decode step at the batch and the mean context over generation
          (prompt + output ÷ 2), as latency.py; TTFT = the prefill of one prompt alone (no queueing: a lower
          bound); TP degrees that do not divide the attention heads are skipped (vLLM refuses them);
  goodput (offered_load, the capacity of goodput's prefill-first server): requests/s a saturated replica
          completes when its batch is held to what meets the TPOT target;
  cost    (cost.usd_per_million): the sized deployment's GPU-hours over the output tokens it delivers.

Per replica, the users it serves = min(sequences that fit, the largest batch whose decode step meets the
TPOT target, vLLM V1's max_num_seqs); a rate target divides by the replica's capacity instead. Prefill
stalls of decode steps and scheduling overheads are not counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..display import auto_seconds, usd
from ..schema import choice, integer, mark, number, output, series, step
from .cost import gpu_hour_field, usd_per_million
from .deployment import deployment_fields
from .engine_defaults import vllm_max_num_seqs
from .memory import budget, engine_fields, footprint, usable_bytes_per_gpu
from .offered_load import offered_load
from ..parallel import Parallelism, allowed
from .sharding import steps_for
from .steptime import StepModel

TPS = tuple(2**k for k in range(11))  # TP degrees tried: 1 to 1,024
TARGETS = [("users", "Concurrent users (sequences decoding at once)"), ("rate", "Requests per second")]


def _k(tokens: int) -> str:
    """32,768 tokens → "32K"; below 1,024, the count."""
    return f"{tokens / 1024:.3g}K" if tokens >= 1024 else f"{tokens:,}"


SCHEMA = {
    "name": "sizing",
    "title": "Sizing: will it serve the target, and on how many GPUs?",
    "description": (
        "A verdict in words from the memory, latency, goodput and cost calculators' own functions: the "
        "smallest tensor-parallel degree that holds the model and one sequence, how many users (or "
        "requests/s) one replica serves within the TPOT and TTFT targets at each degree, and the fewest "
        "GPUs that serve the target, at what cost per million output tokens. Every request reserves KV for "
        "its prompt and output; TTFT is the prefill of one prompt alone (no queueing); prefill stalls "
        "and scheduling overheads are not counted, so the GPU counts are lower bounds. On more than one GPU "
        "each step pays its tensor-parallel all-reduces (NCCL's ring over the GPUs' link)."
    ),
    "inputs": [
        f for f in deployment_fields(0.8, 0.6, {"model": {"default": "llama-3.1-70b"}}) if f["key"] != "num_gpus"
    ]
    + [
        integer("context_tokens", "Context (prompt) per request", 32768, 1, 10_000_000, "tokens"),
        integer("output_tokens", "Output per request", 1024, 1, 1_000_000, "tokens"),
        choice("target_kind", "Target", "users", TARGETS),
        integer("target_users", "Concurrent users (when the target is users)", 50, 1, 10_000_000, "users"),
        number(
            "target_requests_per_s", "Requests per second (when the target is a rate)", 1.0, 0.001, 1e7, "requests/s"
        ),
        number("tpot_slo_s", "TPOT target", 0.05, 0.0, 60.0, "s", "0 = no TPOT target. 0.05 s is 20 tokens/s a user."),
        number("ttft_slo_s", "TTFT target", 10.0, 0.0, 3600.0, "s", "0 = no TTFT target."),
        gpu_hour_field(),
    ]
    + engine_fields(),
    "outputs": [
        output(
            "fit_tensor_parallel",
            "Smallest TP that holds the model and one request",
            "GPUs",
            "integer",
            words={0: "none up to TP 1,024"},
        ),
        output("sequences_at_fit_tp", "Requests that fit at that TP", "sequences", "integer"),
        output(
            "single_replica_tp",
            "Smallest TP that serves the target alone",
            "GPUs",
            "integer",
            words={0: "none up to TP 1,024"},
        ),
        output(
            "slo_tensor_parallel", "Smallest TP that meets the SLO", "GPUs", "integer", words={0: "none up to TP 1,024"}
        ),
        output(
            "replicas_at_slo_tp",
            "Replicas of that TP for the target",
            "replicas",
            "integer",
            words={0: "n/a: no TP meets the SLO"},
        ),
        output(
            "best_tensor_parallel",
            "Fewest GPUs: TP per replica",
            "GPUs",
            "integer",
            words={0: "n/a: no TP meets the SLO"},
        ),
        output("best_replicas", "Fewest GPUs: replicas", "replicas", "integer", words={0: "n/a: no TP meets the SLO"}),
        output("best_gpus", "Fewest GPUs for the target", "GPUs", "integer", words={0: "n/a: no TP meets the SLO"}),
        output("users_per_replica", "Users one replica serves within the SLO (fewest GPUs)", "users", "integer"),
        output(
            "capacity_requests_per_s", "Requests/s one replica completes within the TPOT target", "requests/s", "rate"
        ),
        output("tpot_s", "TPOT at the sized deployment", "s", "seconds", words={0: "n/a: no TP meets the SLO"}),
        output(
            "ttft_s",
            "TTFT of one prompt alone, sized deployment",
            "s",
            "seconds",
            words={0: "n/a: no TP meets the SLO"},
        ),
        output(
            "usd_per_million_output_tokens",
            "Cost per million output tokens, sized deployment",
            "USD",
            "usd",
            words={0: "n/a: no TP meets the SLO"},
        ),
    ],
}


@dataclass(frozen=True)
class Option:
    """One TP degree: what memory holds, what the SLO allows, and what one replica serves."""

    tp: int
    sequences: int  # requests whose KV (prompt + output) fits
    tpot_batch: int  # largest batch whose decode step meets the TPOT target (0: not even one)
    cap: int  # vLLM V1's max_num_seqs
    ttft_s: float  # prefill of one prompt alone
    ttft_ok: bool
    capacity: float  # requests/s a saturated replica completes at the batch served (0: none)
    steps: StepModel

    @property
    def users(self) -> int:
        """Concurrent users one replica serves within the SLO (0: none)."""
        return min(self.sequences, self.tpot_batch, self.cap) if self.ttft_ok else 0

    def serves(self, v: dict) -> float:
        """What one replica serves, in the target's unit."""
        return self.users if v["target_kind"] == "users" else self.capacity if self.users else 0.0

    def replicas(self, v: dict) -> int:
        target = v["target_users"] if v["target_kind"] == "users" else v["target_requests_per_s"]
        served = self.serves(v)
        return math.ceil(target / served - 1e-9) if served else 0


def _mean_context(v: dict) -> float:
    return v["context_tokens"] + v["output_tokens"] / 2  # latency.py's decode context


def _tpot_batch(v: dict, steps: StepModel, most: int) -> int:
    """The largest batch up to `most` whose decode step is within the TPOT target (0: not even one)."""
    slo, context = v["tpot_slo_s"], _mean_context(v)
    if slo <= 0:
        return most
    if steps.decode_time(1, context) > slo:
        return 0
    lo, hi = 1, most  # the step time grows with the batch: bisect
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if steps.decode_time(mid, context) <= slo else (lo, mid - 1)
    return lo


def _as_is(tokens: float) -> float:
    """A sequence's pool tokens where the pool is counted in the request's own length (_option)."""
    return tokens


def _option(v: dict, tp: int, usable: float) -> Option:
    total = v["context_tokens"] + v["output_tokens"]
    b = budget(footprint(v), usable, tp, total)
    steps = steps_for(dict(v, num_gpus=tp))
    cap = vllm_max_num_seqs(v["hardware"])
    tpot_batch = _tpot_batch(v, steps, cap)  # the TPOT bound on its own, memory aside
    ttft = steps.prefill_time([v["context_tokens"]])
    ttft_ok = v["ttft_slo_s"] <= 0 or ttft <= v["ttft_slo_s"]
    served = min(b.sequences, tpot_batch, cap)
    work = [(1.0, v["context_tokens"], v["output_tokens"])]
    # the pool in tokens of this request's length: per_seq, not per_token × length, since sliding-window layers cap
    # a sequence's KV (Gemma 2 at 33K tokens holds a sequence where per_token × length says it cannot)
    pool_tokens = b.kv_budget / b.per_seq * total * b.ranks
    capacity = offered_load(steps, work, served, pool_tokens, _as_is).capacity() if served and ttft_ok else 0.0
    return Option(tp, b.sequences, tpot_batch, cap, ttft, ttft_ok, capacity, steps)


def options(v: dict) -> list[Option]:
    """Every power-of-two TP degree up to 1,024 that vLLM runs the model at (it divides the heads), each with
    what one replica holds and serves."""
    usable = usable_bytes_per_gpu(v)
    return [_option(v, tp, usable) for tp in TPS if allowed(v["model"], Parallelism(tp))]


def _delivered(v: dict, o: Option, replicas: int) -> tuple[float, float]:
    """(TPOT, output tokens/s) of `replicas` replicas of `o` carrying the target, shared evenly."""
    if v["target_kind"] == "users":
        batch = math.ceil(v["target_users"] / replicas)
        tpot = o.steps.decode_time(batch, _mean_context(v))
        return tpot, v["target_users"] / tpot
    load = offered_load(o.steps, [(1.0, v["context_tokens"], v["output_tokens"])], o.users, 1e18)
    batch = load.batch(v["target_requests_per_s"] / replicas)
    return o.steps.decode_time(batch, _mean_context(v)), v["target_requests_per_s"] * v["output_tokens"]


def plan(v: dict) -> dict:
    """The answers: smallest fitting TP, smallest single-replica TP, replicas of the smallest TP meeting the
    SLO, and the fewest GPUs (ties: the smaller TP), with its TPOT, TTFT and cost."""
    opts = options(v)
    fit = next((o for o in opts if o.sequences >= 1), None)
    serving = [o for o in opts if o.serves(v)]  # within the SLO and with a capacity (so replicas ≥ 1)
    slo = next(iter(serving), None)
    alone = next((o for o in serving if o.replicas(v) == 1), None)
    best = min(serving, key=lambda o: (o.tp * o.replicas(v), o.tp), default=None)
    out = {"options": opts, "fit": fit, "slo": slo, "alone": alone, "best": best}
    if best:
        n = best.replicas(v)
        tpot, rate = _delivered(v, best, n)
        out.update(replicas=n, tpot=tpot, usd=usd_per_million(v["usd_per_gpu_hour"], best.tp * n, rate), rate=rate)
    return out


def _target_text(v: dict) -> str:
    if v["target_kind"] == "users":
        return f"{v['target_users']:,} user" + ("s" if v["target_users"] != 1 else "")
    rate = v["target_requests_per_s"]
    return f"{rate:g} request{'s' if rate != 1 else ''}/s"


def _slo_text(v: dict) -> str:
    parts = [
        f"TPOT {auto_seconds(v['tpot_slo_s'])}" if v["tpot_slo_s"] > 0 else "",
        f"TTFT {auto_seconds(v['ttft_slo_s'])}" if v["ttft_slo_s"] > 0 else "",
    ]
    said = " and ".join(p for p in parts if p)
    return f" within {said}" if said else ""


def verdict(v: dict, p: dict) -> str:
    """The answer in words: what fits, what serves the target, the fewest GPUs and their cost."""
    chip, length = v["hardware"].name, _k(v["context_tokens"] + v["output_tokens"])
    fit = p["fit"]
    if fit is None:
        return f"Does not fit on up to 1,024× {chip}: the weights leave no room for one request of {length} tokens."
    n_seq = f"{fit.sequences:,} sequence" + ("s" if fit.sequences != 1 else "")
    head = f"Fits on {fit.tp}× {chip} at TP {fit.tp}: {n_seq} of {length}. "
    target = _target_text(v) + _slo_text(v)
    if p["best"] is None:
        return head + f"No TP up to 1,024 meets the SLO for {target}."
    verb = "needs" if v["target_kind"] == "users" and v["target_users"] == 1 else "need"
    slo, best, alone, reps = p["slo"], p["best"], p["alone"], p["replicas"]
    cost = f", at {usd(p['usd'])} per million output tokens" if v["usd_per_gpu_hour"] > 0 else ""
    replicas = f"{reps} replica{'s' if reps != 1 else ''} of TP {best.tp}"
    if alone is None:
        return head + f"{target[0].upper()}{target[1:]} {verb} {replicas} ({best.tp * reps:,} GPUs){cost}."
    more = f" (or {slo.replicas(v)} replicas of TP {slo.tp})" if slo is not alone else ""
    fewest = "; that is the fewest GPUs" if best is alone else f"; fewest GPUs: {best.tp * reps:,} ({replicas})"
    return head + f"{target[0].upper()}{target[1:]} {verb} TP {alone.tp}{more}{fewest}{cost}."


FIT = "first TP in 1, 2, 4 … 1,024 with KV room for one request (memory)"


def _fit_steps(v: dict, p: dict) -> list[dict]:
    fit, usable = p["fit"], usable_bytes_per_gpu(v)
    if fit is None:
        return [step("Smallest TP that fits", FIT, "{}", ["none up to TP 1,024"], 0, "GPUs")]
    b = budget(footprint(v), usable, fit.tp, v["context_tokens"] + v["output_tokens"])
    weights, kv = [(b.weights * fit.tp, "B"), fit.tp], [(usable, "B"), (b.weights, "B")]
    rows = [
        ("Smallest TP that fits", FIT, "TP {}", [fit.tp], fit.tp, "GPUs"),
        ("Weights per GPU at that TP", "params × b_w ÷ TP", "{} ÷ {}", weights, b.weights, "B"),
        ("KV budget per GPU", "usable memory − weights", "max(0, {} − {})", kv, b.kv_budget, "B"),
        (
            "Requests that fit",
            "⌊KV budget ÷ KV per request (prompt + output)⌋",
            "⌊{} ÷ {}⌋",
            [(b.kv_budget, "B"), (b.per_seq, "B")],
            fit.sequences,
            "sequences",
        ),
    ]
    return [step(*row) for row in rows]


def _option_step(v: dict, o: Option) -> dict:
    """Why one TP degree serves what it does: memory, the TPOT batch, the cap, and TTFT."""
    tpot = o.tpot_batch if v["tpot_slo_s"] > 0 else "no target"
    ttft = (o.ttft_s, "s") if o.ttft_ok else f"{auto_seconds(o.ttft_s)}, over the target: none"
    return step(
        f"Users one replica of TP {o.tp} serves",
        "min(requests that fit, largest batch with decode step ≤ "
        "TPOT target, max_num_seqs), if one prompt's prefill ≤ TTFT target",
        "min({}, {}, {}); TTFT {}",
        [o.sequences, tpot, o.cap, ttft],
        o.users,
        "users",
    )


CAPACITY = "1 ÷ server time per request at the batch served (goodput's offered-load capacity)"
PRICE = "(USD/GPU-h × GPUs) ÷ (output tokens/s × 3600) × 10^6 (cost)"
TPOT = "decode step at the per-replica batch and mean context"


def _plan_steps(v: dict, p: dict) -> list[dict]:
    best, n, users = p["best"], p["replicas"], v["target_kind"] == "users"
    served = (best.serves(v), "users" if users else "requests/s")
    target = v["target_users"] if users else (v["target_requests_per_s"], "requests/s")
    price = [(v["usd_per_gpu_hour"], "USD/GPU-h"), best.tp * n, (p["rate"], "tokens/s")]
    capacity = (f"Requests/s one replica of TP {best.tp} completes", CAPACITY, "batch {}", [best.users])
    rows = [] if users else [capacity + (best.capacity, "requests/s")]
    rows += [
        ("Replicas for the target", "⌈target ÷ what one replica serves⌉", "⌈{} ÷ {}⌉", [target, served], n, "replicas"),
        ("Fewest GPUs", "min over TP of TP × replicas", "{} × {}", [best.tp, n], best.tp * n, "GPUs"),
        ("TPOT, target shared evenly", TPOT, "step at {}", [(_mean_context(v), "tokens")], p["tpot"], "s"),
        ("Cost per million output tokens", PRICE, "({} × {}) ÷ ({} × 3600) × 10^6", price, p["usd"], "USD"),
    ]
    return [step(*row) for row in rows]


def _derivation(v: dict, p: dict) -> list[dict]:
    shown = [o for o in p["options"] if o.sequences >= 1][:5]  # the fitting degrees, smallest first
    return _fit_steps(v, p) + [_option_step(v, o) for o in shown] + (_plan_steps(v, p) if p["best"] else [])


def _series(v: dict, p: dict) -> dict:
    opts = [o for o in p["options"] if o.sequences >= 1][:6] or p["options"][:1]
    plot = series(
        "What one replica serves, by tensor-parallel degree",
        "Tensor-parallel GPUs",
        "GPUs",
        [o.tp for o in opts],
        [
            ("requests that fit (memory)", "users", [o.sequences for o in opts]),
            ("users within the SLO", "users", [o.users for o in opts]),
            ("GPUs for the target", "GPUs", [o.tp * o.replicas(v) for o in opts]),
        ],
        kind="bar",
    )
    best = p["best"]
    if best is not None and best.tp in plot["x"]["values"]:  # the verdict's degree: fewest GPUs for the target
        mark(plot, None, best.tp, on="GPUs for the target", name=f"the verdict (TP {best.tp})")
    return plot


def _outputs(v: dict, p: dict) -> dict:
    fit, slo, alone, best = p["fit"], p["slo"], p["alone"], p["best"]
    return {
        "fit_tensor_parallel": fit.tp if fit else 0,
        "sequences_at_fit_tp": fit.sequences if fit else 0,
        "single_replica_tp": alone.tp if alone else 0,
        "slo_tensor_parallel": slo.tp if slo else 0,
        "replicas_at_slo_tp": slo.replicas(v) if slo else 0,
        "best_tensor_parallel": best.tp if best else 0,
        "best_replicas": p.get("replicas", 0),
        "best_gpus": best.tp * p["replicas"] if best else 0,
        "users_per_replica": best.users if best else 0,
        "capacity_requests_per_s": best.capacity if best else 0.0,
        "tpot_s": p.get("tpot", 0.0),
        "ttft_s": best.ttft_s if best else 0.0,
        "usd_per_million_output_tokens": p.get("usd", 0.0),
    }


def compute(v: dict) -> dict:
    p = plan(v)
    notes = (
        []
        if p["best"]
        else ["no TP up to 1,024 meets the SLO: relax a target, or pick a faster accelerator or a smaller format"]
    )
    return dict(
        _outputs(v, p),
        headline=verdict(v, p),
        notes=notes,
        derivation=_derivation(v, p),
        series={"by_tensor_parallel": _series(v, p)},
        chain=_chain(v, p),
    )


def _chain(v: dict, p: dict) -> list[dict]:
    """The sized deployment into the cost calculator: its GPUs in replicas, the output rate it delivers at
    the target, the lengths, no headroom (so cost's GPU count is this one), measured under a latency bound."""
    best = p["best"]
    if best is None:
        return []
    gpus, rate = best.tp * p["replicas"], p["rate"]
    inputs = {
        "usd_per_gpu_hour": v["usd_per_gpu_hour"],
        "num_gpus": gpus,
        "gpus_per_replica": best.tp,
        "output_tokens_per_s": rate,
        "input_tokens_per_s": 0,
        "requests_per_s": rate / v["output_tokens"],
        "input_tokens_per_task": v["context_tokens"],
        "output_tokens_per_task": v["output_tokens"],
        "reasoning_tokens_per_task": 0,
        "headroom_fraction": 0,
        "rate_scenario": "latency-bounded",
    }
    return [{"to": "cost", "label": "Use this deployment and throughput in Cost", "inputs": inputs}]

"""The search over shardings: every valid parallelism whose GPUs divide a cluster's (candidates), each at the largest
batch that fits its KV and meets a TPOT limit (best_batch), ranked by tokens/s per GPU, each loser saying why (search).
The sharding search calculator (calcs/sharding_search.py) shows it; parallel.py prices each candidate.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .cluster import Cluster
from .display import auto_bytes
from .errors import InputError
from .model import Model
from .parallel import Decode, DeploymentModel, Parallelism, check_parallelism, max_sequences


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclass(frozen=True)
class Option:
    parallelism: Parallelism
    replicas: int
    fits: bool
    max_batch_memory: int  # sequences the KV holds
    batch: int  # the batch chosen: the largest that fits and meets the TPOT limit (≤ the cap)
    decode: Decode | None
    meets_tpot: bool
    why: str = ""
    rank: int = 0
    limit: str = ""  # what set the batch: "KV memory", "TPOT" or "the batch cap"

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.decode.tokens_per_s_per_gpu if self.decode and self.meets_tpot and self.fits else 0.0


@dataclass(frozen=True)
class Search:
    options: list = field(default_factory=list)  # feasible first, best first; then the infeasible

    @property
    def best(self) -> Option | None:
        return self.options[0] if self.options and self.options[0].tokens_per_s_per_gpu > 0 else None


def candidates(model: Model, cluster: Cluster, dcp: bool = True) -> list[Parallelism]:
    """Every valid (tp, dp, pp, ep, dcp) whose GPUs divide the cluster's (replicas fill it); cp = 1 (a
    decode search). dp > 1 only for MoE models (a dense model's DP ranks are replicas); EP on or off."""
    out = []
    for g in divisors(cluster.gpus):
        for tp in divisors(g):
            for dp in divisors(g // tp):
                pp = g // tp // dp
                if dp > 1 and model.moe is None:
                    continue
                eps = (1, tp * dp) if model.moe is not None and tp * dp > 1 else (1,)
                dcps = [d for d in divisors(tp) if dcp or d == 1]
                for ep in eps:
                    for d in dcps:
                        p = Parallelism(tp, pp, dp, ep, 1, d)
                        try:
                            check_parallelism(model, p)
                        except InputError:
                            continue
                        out.append(p)
    return out


def best_batch(dm: DeploymentModel, p: Parallelism, context: float, cap: int, tpot_s: float) -> tuple[int, Decode]:
    """The largest batch ≤ cap whose TPOT is within the limit (TPOT grows with the batch): bisection."""
    lo, hi = 1, cap
    first = dm.decode(p, lo, context)
    if first.tpot_s > tpot_s:
        return 0, first
    top = dm.decode(p, hi, context)
    if top.tpot_s <= tpot_s:
        return hi, top
    best = first
    while hi - lo > 1:
        mid = (lo + hi) // 2
        d = dm.decode(p, mid, context)
        if d.tpot_s <= tpot_s:
            lo, best = mid, d
        else:
            hi = mid
    return lo, best


def _option(dm: DeploymentModel, p: Parallelism, context: float, tpot_s: float, max_batch: int) -> Option:
    """One candidate at the largest batch that fits its KV and meets the TPOT limit, or why it cannot run."""
    mem = dm.memory(p, context)
    replicas = dm.cluster.gpus // p.gpus
    if not mem.fits_weights:
        why = f"does not fit: weights {auto_bytes(mem.weights)} per GPU"
        return Option(p, replicas, False, 0, 0, None, False, why)
    held = max_sequences(dm.model, p, mem)
    if held < 1:
        return Option(p, replicas, False, 0, 0, None, False, "does not fit: no room for one sequence")
    cap = min(max_batch * p.attention_ranks, held)  # each attention rank schedules up to max_batch
    batch, d = best_batch(dm, p, context, cap, tpot_s)
    if batch == 0:
        return Option(p, replicas, True, held, 0, d, False, f"misses TPOT: {d.tpot_s * 1e3:.1f} ms at batch 1")
    limit = "TPOT" if batch < cap else "KV memory" if cap == held else "the batch cap"
    return Option(p, replicas, True, held, batch, d, True, limit=limit)


def search(dm: DeploymentModel, context: float, tpot_s: float, max_batch: int, dcp: bool = True) -> Search:
    """Every candidate sharding, each at the largest batch that fits its KV and meets the TPOT limit (at most
    max_batch sequences per attention rank, as each DP rank's scheduler has its own max_num_seqs), ranked by
    tokens/s per GPU; each loser says why."""
    rows = [_option(dm, p, context, tpot_s, max_batch) for p in candidates(dm.model, dm.cluster, dcp)]
    good = sorted(
        (o for o in rows if o.tokens_per_s_per_gpu > 0), key=lambda o: (-o.tokens_per_s_per_gpu, o.parallelism.gpus)
    )
    bad = [o for o in rows if o.tokens_per_s_per_gpu <= 0]
    ranked = [replace(o, why="best" if i == 0 else _why_lower(o, good[0]), rank=i + 1) for i, o in enumerate(good)]
    return Search(ranked + bad)


def _why_lower(o: Option, best: Option) -> str:
    x = 1 - o.tokens_per_s_per_gpu / best.tokens_per_s_per_gpu
    return f"lower throughput by {x:.0%} (batch {o.batch}, set by {o.limit})"

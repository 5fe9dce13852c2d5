"""KV tiers: fetch a cached prefix from a slower tier, or recompute it.

  fetch(L)     = L × KV bytes per token per GPU ÷ (B_tier × η_tier) + t_setup
  recompute(L) = the prefill of L tokens, from steptime.StepModel.prefill (as the preemption
                 calculator prices it): 'compute' = FLOPs ÷ (N × peak × η), the marginal cost when the
                 prefill shares steps that read the weights anyway; 'standalone' = max(bytes ÷ BW, FLOPs
                 ÷ peak), a prefill run on its own.
Fetch grows linearly with L; recompute a little faster (causal attention), so past some L fetching wins
if it ever does: the break-even is the smallest L at which fetch(L) < recompute(L), found by the same
integer bisection as the preemption calculator's. A fetch that beats recompute at L = 1 wins
everywhere; one that never does below 10M tokens has no break-even (0). Closed form: no queueing, and
the fetch is assumed not to overlap compute (overlapped, it costs only its share of the step).
"""

from __future__ import annotations

from ..catalog import kv_tiers
from ..schema import choice, integer, mark, number, output, series, step
from .deployment import deployment_fields
from .kv_cache import kv_bytes_per_sequence, kv_fraction_per_gpu
from .preemption import MAX_SEARCH_TOKENS, break_even
from .steptime import deployment
from .sharding import steps_for

TIERS = kv_tiers()
PLOTTED = ("host-pcie5", "remote-3fs", "ssd-gen4-x4")  # the fastest, a remote and the slowest listed: a table that fits
PLOT_FROM, PLOT_TO = 2**6, 2**20


def _tier_outputs() -> list[dict]:
    out = []
    for tid, e in TIERS.items():
        key = tid.replace("-", "_")
        out += [
            output(f"fetch_{key}_s", f"Fetch from {e['name']}", "s", "seconds"),
            output(
                f"break_even_{key}_tokens",
                f"Break-even prefix, {e['name']} (1 = always fetch, 0 = never)",
                "tokens",
                "integer",
            ),
        ]
    return out


SCHEMA = {
    "name": "kv_tiers",
    "title": "KV tiers: fetch a cached prefix or recompute it",
    "description": (
        "Time to bring a cached prefix of L tokens into GPU memory from each tier (KV bytes ÷ the tier's "
        "bandwidth × an efficiency, plus a fixed setup time per fetch) against the time to recompute it "
        "with one prefill (the roofline model's prefill with a compute efficiency), and the prefix length "
        "above which fetching wins. Tier bandwidths are link ceilings or published peaks (calculators/data/"
        "kv_tiers.toml names each source), for one GPU fetching alone. A closed-form estimate: no queueing, "
        "no overlap of the fetch with compute, no contention between GPUs for a shared tier."
    ),
    "inputs": deployment_fields(
        1.0,
        0.5,
        {
            "compute_efficiency": {
                "label": "Prefill efficiency (fraction of dense peak)",
                "help": "An assumption: FlashAttention-3 reaches 0.75 of H100 peak in its attention kernel "
                "(arXiv 2407.08608); whole prefills usually do less.",
            }
        },
    )
    + [
        integer("prefix_tokens", "Cached prefix L", 8192, 1, MAX_SEARCH_TOKENS, "tokens"),
        number(
            "tier_efficiency",
            "Tier efficiency (all tiers)",
            1.0,
            0.01,
            1.0,
            "",
            "Fraction of each tier's bandwidth a fetch achieves; small blocks and protocol overhead achieve less.",
            0.01,
        ),
        number(
            "setup_ms",
            "Fixed setup time per fetch",
            0.0,
            0.0,
            1000.0,
            "ms",
            "Lookup, round trip and I/O submission, paid once per fetch; 0 leaves it out.",
        ),
        number(
            "custom_gb_per_s",
            "Your tier's bandwidth",
            2.0,
            0.001,
            10_000.0,
            "GB/s",
            "A tier of your own, shown beside the listed ones (for example an object store).",
        ),
        choice(
            "recompute_cost",
            "Recompute counted as",
            "compute",
            [
                ("compute", "FLOPs only (batched with other work)"),
                ("standalone", "A prefill on its own (max of memory and compute)"),
            ],
        ),
    ],
    "outputs": [
        output("kv_bytes_per_token_per_gpu", "KV per token each GPU fetches", "B", "bytes"),
        output("kv_bytes_prefix_per_gpu", "KV of the prefix, per GPU", "B", "bytes"),
        output("recompute_s", "Recompute the prefix (prefill)", "s", "seconds"),
        output("recompute_per_token_s", "Recompute per token at this length", "s", "seconds"),
        *_tier_outputs(),
        output("fetch_custom_s", "Fetch from your tier", "s", "seconds"),
        output(
            "break_even_custom_tokens",
            "Break-even prefix, your tier (1 = always fetch, 0 = never)",
            "tokens",
            "integer",
        ),
        output(
            "bandwidth_to_tie_gb_per_s", "Tier bandwidth at which fetch and recompute tie (this L)", "GB/s", "number"
        ),
    ],
}


class Tiers:
    """Fetch and recompute seconds at any prefix length, for one deployment."""

    def __init__(self, v: dict):
        self.dep = deployment(v)
        self.steps = steps_for(v, self.dep)
        self.share = kv_fraction_per_gpu(self.dep.model, self.dep.num_gpus)
        self.eff, self.setup = v["tier_efficiency"], v["setup_ms"] / 1e3
        self.standalone = v["recompute_cost"] == "standalone"
        self.bandwidths = {tid: e["bandwidth_bytes_per_s"] for tid, e in TIERS.items()}
        self.bandwidths["custom"] = v["custom_gb_per_s"] * 1e9

    def kv(self, tokens: int) -> float:
        return kv_bytes_per_sequence(self.dep.model, tokens, self.dep.kv_elem_bytes) * self.share

    def fetch(self, tier: str, tokens: int) -> float:
        return self.kv(tokens) / (self.bandwidths[tier] * self.eff) + self.setup

    def recompute(self, tokens: int) -> float:
        cost = self.steps.prefill([tokens])
        return cost.time_s if self.standalone else cost.compute_time_s

    def break_even(self, tier: str) -> int:
        """Smallest L with fetch(L) < recompute(L): 1 if fetching wins from the first token, 0 if never."""

        def gap(t):
            return self.recompute(t) - self.fetch(tier, t)

        if gap(1) > 0:
            return 1
        return break_even(None, gap=gap)


def _series(c: Tiers, length: int) -> dict:
    xs = sorted(
        {2**k for k in range(6, 21)} | {length} if PLOT_FROM <= length <= PLOT_TO else {2**k for k in range(6, 21)}
    )
    ys = [("recompute", "ms", [c.recompute(x) * 1e3 for x in xs])]
    ys += [(TIERS[t]["short"], "ms", [c.fetch(t, x) * 1e3 for x in xs]) for t in PLOTTED]
    ys.append(("your tier", "ms", [c.fetch("custom", x) * 1e3 for x in xs]))
    plot = series(
        "Fetch from each tier against recompute, by prefix length", "Prefix length L", "tokens", xs, ys, log_axes=True
    )
    return mark(plot, "prefix_tokens", length, on="your tier") if length in xs else plot


def _derivation(c: Tiers, length: int, rec: float) -> list[dict]:
    kv, first = c.kv(length), next(iter(TIERS))
    recompute = ("max(bytes ÷ (N × BW), FLOPs ÷ (N × peak × η × s_chip))" if c.standalone
                 else "FLOPs ÷ (N × peak × η_prefill × s_chip)")
    return [
        step("KV each GPU fetches", "KV(L) × ⌈H_kv/N⌉ ÷ H_kv", "KV({}) × {}", [(length, "tokens"), c.share], kv, "B"),
        step(f"Fetch from {TIERS[first]['name']}", "KV ÷ (B_tier × η) + t_setup", "{} ÷ ({} × {}) + {}",
             [(kv, "B"), (c.bandwidths[first], "B/s"), c.eff, (c.setup, "s")], c.fetch(first, length), "s"),
        step("Recompute", recompute, "prefill of {}", [(length, "tokens")], rec, "s"),
        step("Bandwidth at which they tie", "KV ÷ ((recompute − t_setup) × η)", "{} ÷ (({} − {}) × {})",
             [(kv, "B"), (rec, "s"), (c.setup, "s"), c.eff], _tie(c, length, rec), "B/s"),
        step("Recompute per token", "recompute ÷ L", "{} ÷ {}", [(rec, "s"), (length, "tokens")], rec / length, "s"),
    ]


def _tie(c: Tiers, length: int, rec: float) -> float:
    """Bandwidth at which fetch equals recompute at this L (0 when the setup time alone exceeds it)."""
    return c.kv(length) / ((rec - c.setup) * c.eff) if rec > c.setup else 0.0


def compute(v: dict) -> dict:
    c, length = Tiers(v), v["prefix_tokens"]
    rec = c.recompute(length)
    out = {
        "kv_bytes_per_token_per_gpu": c.kv(length) / length,
        "kv_bytes_prefix_per_gpu": c.kv(length),
        "recompute_s": rec,
        "recompute_per_token_s": rec / length,
    }
    for tid in [*TIERS, "custom"]:
        key = tid.replace("-", "_")
        out[f"fetch_{key}_s"] = c.fetch(tid, length)
        out[f"break_even_{key}_tokens"] = c.break_even(tid)
    out["bandwidth_to_tie_gb_per_s"] = _tie(c, length, rec) / 1e9
    faster = [TIERS[t]["name"] for t in TIERS if c.fetch(t, length) < rec]
    out["notes"] = [
        f"at L = {length:,} tokens fetching beats recomputing from: " + (", ".join(faster) if faster else "no tier")
    ]
    if c.dep.model.max_context_tokens and length > c.dep.model.max_context_tokens:
        out["notes"].append(f"L exceeds the model's maximum context of {c.dep.model.max_context_tokens:,} tokens")
    out["derivation"] = _derivation(c, length, rec)
    out["series"] = {"fetch_vs_recompute": _series(c, length)}
    return out

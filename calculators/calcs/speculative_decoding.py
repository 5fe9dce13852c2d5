"""Speculative decoding on a deployment: speedup and tokens/s per GPU against batch, and where it stops paying.

The physics is speculative.py's (Leviathan, Kalman and Matias, arXiv 2211.17192 §3: E[tokens] = (1 − α^(k+1)) ÷
(1 − α); a speculative step = k draft steps + one target verification of k + 1 tokens per sequence, priced on the
StepModel). This module puts it in a form and carries the result to the rest of the core:
  cost    USD per million output tokens from the speculative tokens/s per GPU, through cost.usd_per_million;
  memory  a draft model's weights and its KV per sequence charged against the target's KV budget
          (memory.budget under the engine rule), so fewer sequences fit;
  latency speculation_fields() and speculative_decode() are what latency.py's optional inputs use.
Drafters: a draft model from the catalogue (its own StepModel on the target's GPUs, same formats and
efficiencies); EAGLE-style heads priced as one decoder layer of the target plus its LM head (EAGLE-3, arXiv
2503.01840 §3.2: "a Transformer decoder layer"; §3.1: its output goes into the LM head), an assumption that
tests/core/test_speculative.py checks against EAGLE-3's Table 1; heads at a cost ratio c the reader gives (Medusa,
MTP); or n-gram lookup, free. A tree (EAGLE-2/3, Medusa) verifies its tokens + 1 per sequence after k draft levels.
Assumptions are speculative.py's: drafting and verification in series on the target's GPUs, no sampling or
scheduling overhead, per-step overhead as the deployment's step_overhead sets it (overhead.py: a verification step
above vLLM's largest CUDA-graph size runs eager), acceptance independent of the batch.
"""

from __future__ import annotations

from ..errors import InputError
from ..params import active_params, lm_head_params
from ..schema import choice, integer, model_field, number, output, series, step
from . import speculative as spec
from .cost import gpu_hour_field, usd_per_million
from .deployment import deployment_fields, efficiency_steps
from .memory import budget, draft_budget, engine_fields, footprint, usable_bytes_per_gpu
from .steptime import StepModel, deployment
from .sharding import steps_for

DRAFTERS = [
    ("eagle", "EAGLE-3-style head: one decoder layer + the LM head of the target"),
    ("draft_model", "A draft model (the model below)"),
    ("heads", "Heads at a cost ratio c (Medusa, MTP; the field below)"),
    ("ngram", "n-gram / prompt lookup (free)"),
]
ACCEPTANCE = [("alpha", "Acceptance rate α (i.i.d.)"), ("length", "Measured mean acceptance length")]
SPEC_METHODS = [
    ("off", "Off"),
    ("eagle", "EAGLE-3-style head (one layer + LM head)"),
    ("heads", "Heads at cost ratio c"),
    ("ngram", "n-gram / prompt lookup (free)"),
]
PLOT_BATCHES = tuple(2**i for i in range(15))  # 1 … 16,384
NEVER = 0  # break_even_batch when speculation still pays at MAX_BATCH


def eagle_cost_ratio(model) -> float:
    """One decoder layer's share of the active weights (excluding the input embedding) plus the LM head's: the
    weights an EAGLE-3 draft step reads, as a fraction of a plain target step's (both memory-bound)."""
    weights = active_params(model, include_embedding=False)
    head = lm_head_params(model)
    return min(1.0, ((weights - head) / model.num_layers + head) / weights)


# ---- the inputs latency.py borrows ------------------------------------------------------------


def speculation_fields() -> list[dict]:
    """Optional speculative-decoding inputs for a calculator that prices decode steps: off by default."""
    return [
        choice(
            "spec_method",
            "Speculative decoding",
            "off",
            SPEC_METHODS,
            "Off leaves every number as without speculation. Part 11's calculator prices draft models and "
            "trees as well.",
        ),
        number(
            "spec_acceptance_rate",
            "Speculation: acceptance rate α",
            0.7,
            0.0,
            1.0,
            "",
            "Probability the target keeps each drafted token, i.i.d. (Leviathan et al. §3.1).",
            0.01,
        ),
        integer("spec_draft_tokens", "Speculation: draft tokens per step k", 3, 1, spec.MAX_DRAFT_TOKENS, "tokens"),
        number(
            "spec_draft_cost_ratio",
            "Speculation: draft cost ratio c (heads)",
            0.05,
            0.0,
            1.0,
            "",
            "One draft token's time ÷ one plain target decode step.",
            0.005,
        ),
    ]


def speculative_decode(steps: StepModel, v: dict, batch: int, context: float):
    """The SpeculativeStep of latency-style inputs (speculation_fields), or None when speculation is off."""
    method = v.get("spec_method", "off")
    if method == "off":
        return None
    drafter = {
        "eagle": lambda: spec.draft_heads(eagle_cost_ratio(steps.dep.model)),
        "heads": lambda: spec.draft_heads(v["spec_draft_cost_ratio"]),
        "ngram": lambda: spec.NGRAM,
    }[method]()
    return spec.speculative_step(steps, drafter, batch, context, v["spec_acceptance_rate"], v["spec_draft_tokens"])


# ---- the calculator --------------------------------------------------------------------------


SCHEMA = {
    "name": "speculative_decoding",
    "title": "Speculative decoding: speedup against batch, and where it stops paying",
    "description": (
        "k tokens are drafted per sequence, then the target verifies all of them plus its own in one "
        "step and keeps the accepted prefix (Leviathan et al., arXiv 2211.17192). The step is priced "
        "on the deployment: the draft's k steps, then one target step of k + 1 tokens per sequence "
        "(or the tree's tokens + 1), each max(bytes ÷ bandwidth, FLOPs ÷ peak) with the efficiencies. "
        "Speedup = tokens per second per sequence against plain decoding at the same batch. "
        "Assumptions: acceptance i.i.d. and independent of the batch; drafting and verification one "
        "after the other on the target's GPUs; per-step overhead as the Per-step overhead field sets it (with "
        "CUDA graphs, a verification step above vLLM's largest captured size, 512 tokens on an H100, runs "
        "eager); no sampling or scheduling overhead; an EAGLE "
        "head costs one decoder layer plus the LM head; a draft model shares the target's formats, "
        "efficiencies and GPUs, and its weights and KV come out of the KV budget (heads' are not "
        "charged)."
    ),
    "inputs": deployment_fields(0.8, 0.6, {"model": {"default": "llama-3.1-70b"}, "num_gpus": {"default": 4}})
    + [
        choice("drafter", "Drafter", "eagle", DRAFTERS),
        model_field(
            "draft_model",
            "Draft model",
            "llama-3.1-8b",
            "Used when the drafter is a draft model; it must share the target's tokenizer.",
        ),
        dict(
            spec.DRAFT_COST_RATIO,
            default=0.05,
            label="Draft cost ratio c (heads)",
            help="Used when the drafter is heads at a cost ratio: one draft "
            "token's time ÷ one plain target decode step. DeepSeek-V3's MTP module is one layer of 61.",
        ),
        choice("acceptance_input", "Acceptance given as", "alpha", ACCEPTANCE),
        dict(spec.ACCEPTANCE_RATE, default=0.7),
        spec.acceptance_length_field(spec.MAX_TREE_TOKENS + 1)
        | {
            "default": 2.5,
            "help": (
                "Used when acceptance is measured: tokens each sequence keeps per verification step, the target's "
                "own included (EAGLE's τ, vLLM's mean acceptance length); at most k + 1."
            ),
        },
        spec.DRAFT_TOKENS,
        integer(
            "tree_tokens",
            "Draft tree size (0 = a chain of k)",
            0,
            0,
            spec.MAX_TREE_TOKENS,
            "tokens",
            "Tokens drafted per sequence as a tree of depth k (EAGLE-3 for LLaMA 3.1 8B: 60 at depth 8, "
            "arXiv 2503.01840 Appendix A); verification reads them all.",
        ),
        dict(spec.BATCH_SIZE, default=16),
        integer("context_tokens", "Context per sequence", 2048, 1, 10_000_000, "tokens"),
        gpu_hour_field("As in the cost calculator."),
    ]
    + engine_fields(),
    "outputs": [
        output("tokens_per_step", "Tokens kept per verification step E", "tokens", "number"),
        output("acceptance_rate_used", "Acceptance rate α (given, or implied by the measured length)", "", "number"),
        output(
            "draft_cost_ratio", "Draft cost ratio c at this batch (draft time per token ÷ plain step)", "", "number"
        ),
        output("leviathan_speedup", "Speedup if verification were free (Leviathan Theorem 3.8)", "", "number"),
        output("speedup", "Speedup at this batch (tokens/s against plain decoding)", "", "number"),
        output("verify_to_plain_ratio", "Verification step ÷ plain step", "", "number"),
        output("verify_compute_bound", "Verification compute-bound (1) or memory-bound (0)", "", "integer"),
        output("plain_tpot_s", "TPOT without speculation", "s", "seconds"),
        output("speculative_tpot_s", "TPOT with speculation (step ÷ E)", "s", "seconds"),
        output("plain_tokens_per_s_per_gpu", "Output tokens/s per GPU without speculation", "tokens/s", "rate"),
        output("speculative_tokens_per_s_per_gpu", "Output tokens/s per GPU with speculation", "tokens/s", "rate"),
        output(
            "plain_usd_per_million_output_tokens", "Cost per million output tokens without speculation", "USD", "usd"
        ),
        output(
            "speculative_usd_per_million_output_tokens", "Cost per million output tokens with speculation", "USD", "usd"
        ),
        output(
            "break_even_batch",
            "Batch at which speculation stops paying",
            "sequences",
            "integer",
            words={NEVER: f"still pays at {spec.MAX_BATCH:,}"},
        ),
        output(
            "paying_from_batch",
            "First batch at which it pays",
            "sequences",
            "integer",
            words={NEVER: "pays at no batch"},
        ),
        output("best_draft_tokens", "Best k at this batch (chain, the same α)", "tokens", "integer"),
        output("best_speedup", "Speedup at the best k", "", "number"),
        output("draft_weight_bytes_per_gpu", "Draft model weights per GPU", "B", "bytes"),
        output("max_sequences_plain", "Sequences that fit at this context, no draft model", "sequences", "integer"),
        output(
            "max_sequences_with_draft",
            "Sequences that fit with the draft model's weights and KV",
            "sequences",
            "integer",
        ),
    ],
}


def _drafter(v: dict, target: StepModel) -> spec.Drafter:
    kind = v["drafter"]
    if kind == "draft_model":
        return spec.draft_model(steps_for(dict(v, model=v["draft_model"])))
    if kind == "eagle":
        return spec.draft_heads(eagle_cost_ratio(target.dep.model))
    return spec.draft_heads(v["draft_cost_ratio"]) if kind == "heads" else spec.NGRAM


def _alpha(v: dict) -> float:
    if v["acceptance_input"] == "alpha":
        return v["acceptance_rate"]
    most = v["draft_tokens"] + 1
    return spec.acceptance_rate(
        spec._checked(spec.acceptance_length_field(most), v["accepted_tokens_per_step"]), v["draft_tokens"]
    )


def _step(target, drafter, v: dict, batch: int, alpha: float) -> spec.SpeculativeStep:
    k, context = v["draft_tokens"], v["context_tokens"]
    if v["tree_tokens"]:
        return spec.tree_step(
            target, drafter, batch, context, spec.expected_tokens_per_step(alpha, k), k, v["tree_tokens"]
        )
    return spec.speculative_step(target, drafter, batch, context, alpha, k)


def _memory(v: dict, target_dep) -> tuple[float, int, int]:
    """(draft weights per GPU, sequences that fit without and with the draft model): memory.draft_budget."""
    tp, context = v["num_gpus"], v["context_tokens"]
    plain = budget(footprint(v), usable_bytes_per_gpu(v), tp, context).sequences
    if v["drafter"] != "draft_model":
        return 0.0, plain, plain
    weights, with_draft = draft_budget(v, tp, context)
    return weights, plain, with_draft.sequences


def _curve(target, drafter, v: dict, alpha: float, break_even: int | None) -> dict:
    batches = sorted(set(PLOT_BATCHES) | {v["batch_size"]} | ({break_even} if break_even else set()))
    ups = [_step(target, drafter, v, b, alpha).speedup for b in batches]
    out = series(
        "Speedup against batch size",
        "Decode batch",
        "sequences",
        batches,
        [
            ("speedup", "×", ups),
            ("break-even (1×)", "×", [1.0] * len(batches)),
            (
                f"your batch ({v['batch_size']:,})",
                "×",
                [u if b == v["batch_size"] else None for b, u in zip(batches, ups)],
            ),
        ],
        log_axes=True,
    )
    return out


DERIVATION = (  # label, formula, template, unit: one row a step
    ("Tokens kept per step", "E = (1 − α^(k+1)) ÷ (1 − α)", "(1 − {}^({} + 1)) ÷ (1 − {})", "tokens"),
    ("Plain decode step", "max(memory, compute) + per-step overhead, batch B, 1 token each", "B = {}, context {}", "s"),
    ("Drafting", "k draft steps of c × plain step each", "{} × {} × {}", "s"),
    (
        "Verification",
        "max(memory, compute) + per-step overhead, B × tokens verified",
        "max({}, {}) + {}, {} tokens each",
        "s",
    ),
    ("Speedup", "E × plain step ÷ (drafting + verification)", "{} × {} ÷ ({} + {})", "×"),
    ("Tokens/s per GPU, speculative", "B × E ÷ step time ÷ N_gpu", "{} × {} ÷ {} ÷ {}", "tokens/s"),
    (
        "Cost per million output tokens, speculative",
        "(USD/GPU-h × N_gpu) ÷ (tokens/s × 3600) × 10^6",
        "({} × {}) ÷ ({} × 3600) × 10^6",
        "USD",
    ),
)


def _derivation(v, dep, s: spec.SpeculativeStep, alpha, c, out) -> list[dict]:
    k, n, batch = v["draft_tokens"], dep.num_gpus, v["batch_size"]
    verify, plain = s.verify, (s.plain.time_s, "s")
    terms = [
        ([alpha, k, alpha], s.tokens_per_step),
        ([batch, (v["context_tokens"], "tokens")], s.plain.time_s),
        ([k, c, plain], s.draft_time_s),
        (
            [
                (verify.memory_time_s, "s"),
                (verify.compute_time_s, "s"),
                (verify.overhead_s, "s"),
                (v["tree_tokens"] or k) + 1,
            ],
            verify.time_s,
        ),
        ([s.tokens_per_step, plain, (s.draft_time_s, "s"), (verify.time_s, "s")], s.speedup),
        ([batch, s.tokens_per_step, (s.time_s, "s"), n], s.tokens_per_s_per_gpu),
        (
            [(v["usd_per_gpu_hour"], "USD/GPU-h"), n, (s.tokens_per_s_per_gpu * n, "tokens/s")],
            out["speculative_usd_per_million_output_tokens"],
        ),
    ]
    rows = [step(label, f, t, ts, value, unit) for (label, f, t, unit), (ts, value) in zip(DERIVATION, terms)]
    return efficiency_steps(dep) + rows


def _paying(target, drafter, v: dict, alpha: float) -> tuple[tuple[int, int] | None, int | None]:
    """(the paying range, the break-even batch: 1 if it never pays, None if it still pays at MAX_BATCH)."""
    if v["tree_tokens"]:  # the tree's own edges, on the same grid-and-bisection search as the chain's
        paying = _tree_paying_range(target, drafter, v, alpha)
    else:
        paying = spec.paying_range(target, drafter, v["context_tokens"], alpha, v["draft_tokens"])
    return paying, 1 if paying is None else (None if paying[1] == spec.MAX_BATCH else paying[1] + 1)


def _outputs(v, dep, target, drafter, s: spec.SpeculativeStep, alpha: float) -> dict:
    batch, k, n, price = v["batch_size"], v["draft_tokens"], dep.num_gpus, v["usd_per_gpu_hour"]
    c = s.draft_time_s / k / s.plain.time_s
    paying, break_even = _paying(target, drafter, v, alpha)
    best = spec.best_draft_tokens(target, drafter, batch, v["context_tokens"], alpha)
    plain_rate = batch / s.plain.time_s / n
    draft_w, fit_plain, fit_draft = _memory(v, dep)
    return {
        "tokens_per_step": s.tokens_per_step,
        "acceptance_rate_used": alpha,
        "draft_cost_ratio": c,
        "leviathan_speedup": spec.improvement_factor(alpha, k, min(1.0, c)),
        "speedup": s.speedup,
        "verify_to_plain_ratio": s.verify.time_s / s.plain.time_s,
        "verify_compute_bound": int(s.verify.compute_bound),
        "plain_tpot_s": s.plain.time_s,
        "speculative_tpot_s": s.time_s / s.tokens_per_step,
        "plain_tokens_per_s_per_gpu": plain_rate,
        "speculative_tokens_per_s_per_gpu": s.tokens_per_s_per_gpu,
        "plain_usd_per_million_output_tokens": usd_per_million(price, n, plain_rate * n),
        "speculative_usd_per_million_output_tokens": usd_per_million(price, n, s.tokens_per_s_per_gpu * n),
        "break_even_batch": NEVER if break_even is None else break_even,
        "paying_from_batch": NEVER if paying is None else paying[0],
        "best_draft_tokens": best,
        "best_speedup": spec.speculative_step(target, drafter, batch, v["context_tokens"], alpha, best).speedup,
        "draft_weight_bytes_per_gpu": draft_w,
        "max_sequences_plain": fit_plain,
        "max_sequences_with_draft": fit_draft,
    }


def compute(v: dict) -> dict:
    if 0 < v["tree_tokens"] < v["draft_tokens"]:
        raise InputError(
            "tree_tokens",
            f"a tree of depth k = {v['draft_tokens']} holds at least {v['draft_tokens']} tokens (0 for a chain of k)",
        )
    dep = deployment(v)
    target = steps_for(v, dep)
    drafter, alpha = _drafter(v, target), _alpha(v)
    s = _step(target, drafter, v, v["batch_size"], alpha)
    out = _outputs(v, dep, target, drafter, s, alpha)
    notes = []
    if v["batch_size"] > out["max_sequences_with_draft"]:
        notes.append(
            f"batch {v['batch_size']:,} does not fit in memory at {v['context_tokens']:,} tokens: "
            f"{out['max_sequences_with_draft']:,} sequences fit"
        )
    if out["break_even_batch"] > out["max_sequences_with_draft"] or out["break_even_batch"] == NEVER:
        notes.append("speculation pays at every batch that fits in memory at this context")
    break_even = out["break_even_batch"] or None
    return dict(
        out,
        derivation=_derivation(v, dep, s, alpha, out["draft_cost_ratio"], out),
        series={"speedup_vs_batch": _curve(target, drafter, v, alpha, break_even)},
        notes=notes,
    )


def _tree_paying_range(target, drafter, v: dict, alpha: float) -> tuple[int, int] | None:
    """paying_range for a tree step (speculative.paying_range prices chains only), on the same doubling grid."""

    def pays(b: int) -> bool:
        return _step(target, drafter, v, b, alpha).pays

    top = spec.MAX_BATCH
    grid = sorted({min(2**i, top) for i in range(top.bit_length())} | {top})
    paying = [i for i, b in enumerate(grid) if pays(b)]
    if not paying:
        return None
    first, last = paying[0], paying[-1]
    low = grid[0] if first == 0 else spec._edge(lambda b: not pays(b), grid[first - 1], grid[first]) + 1
    high = grid[last] if grid[last] == top else spec._edge(pays, grid[last], grid[last + 1])
    return low, high

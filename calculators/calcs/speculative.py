"""Speculative decoding: tokens per verification step, the cost of a speculative step, and when it pays.

  E[tokens per step] = (1 − α^(k+1)) ÷ (1 − α), k + 1 at α = 1     (Leviathan, Kalman and Matias, arXiv
         2211.17192 §3.1 eq. 1: i.i.d. acceptance α, k drafted tokens; their γ is our k)
  Improvement = E[tokens] ÷ (k·c + 1)                              (same, Theorem 3.8; c = one draft run ÷ one
         target run, and the k + 1 verified tokens cost one target run, which holds only while memory-bound)
  Operations = (1 − α)(k·ĉ + k + 1) ÷ (1 − α^(k+1))                (same, Theorem 3.11; ĉ = draft FLOPs per token
         ÷ target FLOPs per token)
On a deployment the step is priced by the core's StepModel instead of assumed free: drafting (a draft model's own
k decode steps on its own StepModel, k × c × a plain target step for heads that draft from the target's states
such as EAGLE, Medusa or MTP, or nothing for n-gram / prompt lookup) plus one target verification step of k + 1
tokens per sequence, StepModel.decode(B, T, k + 1): each sequence's KV read once, weights once, FLOPs and the
experts touched growing with the tokens. While that step is memory-bound the extra tokens are nearly free; once it
is compute-bound they cost k + 1 times a plain step, and the speedup falls to E ÷ (k·c + k + 1) ≤ 1 (c here the
draft's time per token ÷ a plain target step; 1 only at α = 1 with a free draft). A tree draft (EAGLE-2/3, Medusa;
tree_step) is priced the same way: depth draft steps, one verification of the tree's tokens + 1 per sequence.
"Acceptance length" is E[tokens] with the target's own token counted, as EAGLE's τ and vLLM v0.33.0's "Mean
acceptance length" (v1/spec_decode/metrics.py: 1 + accepted ÷ drafts) count it. vLLM's "draft acceptance rate"
(accepted ÷ drafted) is (E − 1) ÷ k, not α.

Engines turn speculation down under load. vLLM v0.33.0 (vllm/config/speculative.py, SpeculativeConfig) has no
automatic batch-size threshold: V0's speculative_disable_by_batch_size is gone. It has
num_speculative_tokens_per_batch_size, an operator-written schedule of (first batch, last batch, k) ranges that must
start at batch 1 (v1/spec_decode/dynamic/utils.py: gaps carry the previous k, k = 0 allowed); each step the V1
scheduler reads k from the number of requests scheduled (v1/core/sched/scheduler.py), so k = 0 over a range turns
drafting off there. config/vllm.py drops the schedule under data parallelism and, on Model Runner V1, for methods
other than ngram, eagle, eagle3, mtp, draft_model and dflash. break_even_batch below is where such a range should
begin.
Assumptions: drafting and verification run one after the other on the target's GPUs; draft steps are priced at the
verification's batch and context; no sampling or scheduling overhead, and per-step overhead only where the StepModel's
deployment carries one (steptime.deployment's default; bound_deployment drops it, and the times are then lower bounds
at efficiencies 1.0); the draft model's weights and KV are not charged against memory here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..schema import integer, number, validate
from .steptime import StepCost, StepModel

MAX_DRAFT_TOKENS = 63  # k + 1 ≤ 64, the ceiling of roofline's accepted_tokens_per_step input
MAX_BATCH = 100_000  # roofline's batch_size ceiling
MAX_TREE_TOKENS = 1023  # tree + 1 ≤ 1,024 tokens verified per sequence, far above the trees in use (EAGLE-3: 60)

# Input specs a Part 11 calculator can put in its SCHEMA; the functions below check their arguments against them.
ACCEPTANCE_RATE = number(
    "acceptance_rate",
    "Acceptance rate α",
    0.8,
    0.0,
    1.0,
    "",
    "Probability that the target keeps each drafted token, i.i.d. (Leviathan et al. §3.1).",
    0.01,
)
DRAFT_TOKENS = integer(
    "draft_tokens",
    "Draft tokens per step k",
    3,
    1,
    MAX_DRAFT_TOKENS,
    "tokens",
    "Tokens drafted per sequence before each verification step (vLLM num_speculative_tokens).",
)
DRAFT_COST_RATIO = number(
    "draft_cost_ratio",
    "Draft cost ratio c",
    0.0,
    0.0,
    1.0,
    "",
    "One draft token's time ÷ one plain target decode step (0 for n-gram lookup). Above 1 "
    "speculation can never pay: E[tokens] ≤ k + 1 ≤ k·c + 1.",
    0.005,
)
BATCH_SIZE = integer("batch_size", "Decode batch", 32, 1, MAX_BATCH, "sequences")
DRAFT_DEPTH = integer(
    "draft_depth",
    "Draft tree depth",
    8,
    1,
    MAX_DRAFT_TOKENS,
    "levels",
    "Draft steps per verification for a tree (EAGLE-3: 8, arXiv 2503.01840 Appendix A).",
)


def acceptance_length_field(most: int) -> dict:
    """A measured mean acceptance length, between 1 and `most` tokens (k + 1 for a chain of k)."""
    return number(
        "accepted_tokens_per_step",
        "Mean acceptance length",
        1.0,
        1.0,
        float(most),
        "tokens",
        "Tokens each sequence keeps per verification step, the target's own included (EAGLE's τ, vLLM's "
        "mean acceptance length).",
        0.01,
    )


def _checked(spec: dict, value):
    """value checked against one input spec: InputError naming the field and its range."""
    return validate([spec], {spec["key"]: value})[spec["key"]]


def _tokens_per_step(alpha: float, k: int) -> float:
    """1 + α + α² + … + α^k, the closed form's sum: exact at α = 1 (k + 1) and free of its cancellation near 1."""
    total = 1.0
    for _ in range(k):
        total = 1.0 + alpha * total
    return total


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """Mean tokens a sequence keeps per verification step: (1 − α^(k+1)) ÷ (1 − α), between 1 and k + 1."""
    return _tokens_per_step(_checked(ACCEPTANCE_RATE, alpha), _checked(DRAFT_TOKENS, k))


def acceptance_rate(tokens_per_step: float, k: int) -> float:
    """The i.i.d. α that gives this mean acceptance length with k drafted tokens (the inverse of
    expected_tokens_per_step). E rises strictly with α, from 1 at α = 0 to k + 1 at α = 1, so bisection finds it."""
    k = _checked(DRAFT_TOKENS, k)
    target = _checked(acceptance_length_field(k + 1), tokens_per_step)
    lo, hi, mid = 0.0, 1.0, 0.5
    while lo < mid < hi:  # halve until the bracket cannot shrink (about 54 halvings in binary64)
        lo, hi = (mid, hi) if _tokens_per_step(mid, k) < target else (lo, mid)
        mid = (lo + hi) / 2
    return lo if target - _tokens_per_step(lo, k) <= _tokens_per_step(hi, k) - target else hi


def improvement_factor(alpha: float, k: int, cost_ratio: float) -> float:
    """Leviathan et al. Theorem 3.8: E[tokens] ÷ (k·c + 1), the speedup when verifying k + 1 tokens costs one
    target step (memory-bound) and each draft token costs c target steps."""
    c = _checked(DRAFT_COST_RATIO, cost_ratio)
    return expected_tokens_per_step(alpha, k) / (k * c + 1.0)


def operations_factor(alpha: float, k: int, flops_ratio: float) -> float:
    """Leviathan et al. Theorem 3.11: total arithmetic per kept token ÷ plain decoding's,
    (1 − α)(k·ĉ + k + 1) ÷ (1 − α^(k+1)) = (k·ĉ + k + 1) ÷ E[tokens]: the work rejected drafts waste."""
    c_hat = _checked(DRAFT_COST_RATIO, flops_ratio)
    return (k * c_hat + k + 1.0) / expected_tokens_per_step(alpha, k)


def _best_k(score, max_k: int) -> int:
    """The k in 1..max_k with the highest score(k); the smallest such k on a tie."""
    return max(range(1, max_k + 1), key=lambda k: (score(k), -k))


def optimal_draft_tokens(alpha: float, cost_ratio: float, max_k: int = MAX_DRAFT_TOKENS) -> int:
    """The k that maximises Theorem 3.8's improvement (their §3.5: "since γ is an integer, it can be easily
    found numerically"). With c = 0 and α > 0 every extra token helps, so the search stops at max_k."""
    alpha, c = _checked(ACCEPTANCE_RATE, alpha), _checked(DRAFT_COST_RATIO, cost_ratio)
    return _best_k(lambda k: _tokens_per_step(alpha, k) / (k * c + 1.0), _checked(DRAFT_TOKENS, max_k))


# ---- on a deployment ------------------------------------------------------------------


@dataclass(frozen=True)
class Drafter:
    """Where the k draft tokens come from: a draft model priced on its own StepModel, or a cost ratio c of one
    plain target step per draft token (heads on the target's states: EAGLE, Medusa, MTP), or, with neither,
    nothing at all (n-gram / prompt lookup)."""

    cost_ratio: float = 0.0
    model: StepModel | None = None


NGRAM = Drafter()


def draft_heads(cost_ratio: float) -> Drafter:
    return Drafter(cost_ratio=_checked(DRAFT_COST_RATIO, cost_ratio))


def draft_model(steps: StepModel) -> Drafter:
    return Drafter(model=steps)


@dataclass(frozen=True)
class SpeculativeStep:
    """One speculative step for a batch: k draft steps per sequence, then one verification of every drafted token
    plus the target's own (k + 1 for a chain, the tree's tokens + 1 for a tree)."""

    batch: int
    draft_steps: int  # k for a chain; the tree's depth for a tree
    tokens_per_step: float  # E[tokens kept per sequence]
    draft_time_s: float
    verify: StepCost  # the target's step of every drafted token + 1 per sequence
    plain: StepCost  # the target's step of 1 token per sequence, same batch and context
    num_gpus: int  # the target's GPUs, which the drafter shares

    @property
    def time_s(self) -> float:
        return self.draft_time_s + self.verify.time_s

    @property
    def tokens_per_s_per_sequence(self) -> float:
        return self.tokens_per_step / self.time_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.batch * self.tokens_per_s_per_sequence / self.num_gpus

    @property
    def speedup(self) -> float:
        """Against plain decoding at the same batch: tokens per second, either way."""
        return self.tokens_per_s_per_sequence * self.plain.time_s

    @property
    def pays(self) -> bool:
        return self.speedup > 1.0


def draft_time(drafter: Drafter, target: StepModel, batch: int, context_tokens: float, steps: int) -> float:
    """Seconds of `steps` draft steps for every sequence: a draft model's decode steps, or c plain target steps
    each (a tree's level is priced as one step: its few nodes per sequence ride on the same weight read)."""
    if drafter.model is not None:
        return steps * drafter.model.decode(batch, context_tokens).time_s
    return steps * drafter.cost_ratio * target.decode(batch, context_tokens).time_s


def _priced(
    target: StepModel,
    drafter: Drafter,
    batch: int,
    context_tokens: float,
    tokens_per_step: float,
    steps: int,
    verified: int,
) -> SpeculativeStep:
    return SpeculativeStep(
        batch,
        steps,
        tokens_per_step,
        draft_time(drafter, target, batch, context_tokens, steps),
        target.decode(batch, context_tokens, verified),
        target.decode(batch, context_tokens),
        target.num_gpus,
    )


def _step(
    target: StepModel, drafter: Drafter, batch: int, context_tokens: float, alpha: float, k: int
) -> SpeculativeStep:
    return _priced(target, drafter, batch, context_tokens, _tokens_per_step(alpha, k), k, k + 1)


def _checked_step_inputs(batch: int, alpha: float, k: int) -> tuple[int, float, int]:
    return _checked(BATCH_SIZE, batch), _checked(ACCEPTANCE_RATE, alpha), _checked(DRAFT_TOKENS, k)


def speculative_step(
    target: StepModel, drafter: Drafter, batch: int, context_tokens: float, alpha: float, k: int
) -> SpeculativeStep:
    """A speculative step of `batch` sequences at `context_tokens` of context on the target's deployment."""
    batch, alpha, k = _checked_step_inputs(batch, alpha, k)
    return _step(target, drafter, batch, context_tokens, alpha, k)


def tree_step(
    target: StepModel,
    drafter: Drafter,
    batch: int,
    context_tokens: float,
    tokens_per_step: float,
    depth: int,
    tree_tokens: int,
) -> SpeculativeStep:
    """A step that drafts a tree (EAGLE-2/3, Medusa): `depth` draft steps, then one verification of the tree's
    `tree_tokens` drafted tokens plus the target's own per sequence under tree attention, keeping a measured mean
    acceptance length `tokens_per_step` (at most depth + 1: one token per level, plus the target's)."""
    batch, depth = _checked(BATCH_SIZE, batch), _checked(DRAFT_DEPTH, depth)
    tree_tokens = _checked(
        integer("tree_tokens", "Draft tokens in the tree", depth, depth, MAX_TREE_TOKENS, "tokens"), tree_tokens
    )
    kept = _checked(acceptance_length_field(depth + 1), tokens_per_step)
    return _priced(target, drafter, batch, context_tokens, kept, depth, tree_tokens + 1)


def best_draft_tokens(
    target: StepModel, drafter: Drafter, batch: int, context_tokens: float, alpha: float, max_k: int = MAX_DRAFT_TOKENS
) -> int:
    """The k that maximises the speedup at this batch and context, verification priced by the StepModel."""
    batch, alpha, max_k = _checked_step_inputs(batch, alpha, max_k)
    return _best_k(lambda k: _step(target, drafter, batch, context_tokens, alpha, k).speedup, max_k)


def _edge(holds, inside: int, outside: int) -> int:
    """The batch next to the edge on the `inside` side: holds(inside) is true, holds(outside) false, by bisection."""
    while abs(outside - inside) > 1:
        mid = (inside + outside) // 2
        inside, outside = (mid, outside) if holds(mid) else (inside, mid)
    return inside


def paying_range(
    target: StepModel, drafter: Drafter, context_tokens: float, alpha: float, k: int, max_batch: int = MAX_BATCH
) -> tuple[int, int] | None:
    """(first, last): the batches at which speculation pays (speedup > 1), or None if it pays at none.

    A dense model pays from batch 1 until verification turns compute-bound. A MoE model may not pay at batch 1:
    k + 1 tokens per sequence touch up to k + 1 times the experts until the batch touches them all. Found on a
    doubling grid of batches, then by bisection at each edge; this assumes the paying batches form one range, as
    they do in this model (the tests check it against a scan of every batch)."""
    alpha, k = _checked(ACCEPTANCE_RATE, alpha), _checked(DRAFT_TOKENS, k)
    max_batch = _checked(BATCH_SIZE, max_batch)

    def pays(batch: int) -> bool:
        return _step(target, drafter, batch, context_tokens, alpha, k).pays

    grid = sorted({min(2**i, max_batch) for i in range(max_batch.bit_length())} | {max_batch})
    paying = [i for i, b in enumerate(grid) if pays(b)]
    if not paying:
        return None
    first, last = paying[0], paying[-1]
    low = grid[0] if first == 0 else _edge(lambda b: not pays(b), grid[first - 1], grid[first]) + 1
    high = grid[last] if grid[last] == max_batch else _edge(pays, grid[last], grid[last + 1])
    return low, high


def break_even_batch(
    target: StepModel, drafter: Drafter, context_tokens: float, alpha: float, k: int, max_batch: int = MAX_BATCH
) -> int | None:
    """The batch at which speculation stops paying: one above the last batch where it pays (1 if it never
    does), or None if it still pays at max_batch. In vLLM v0.33.0's terms, a num_speculative_tokens_per_batch_size
    range with k = 0 from here on (and, for a MoE model, below paying_range's first batch)."""
    found = paying_range(target, drafter, context_tokens, alpha, k, max_batch)
    if found is None:
        return 1
    return None if found[1] == _checked(BATCH_SIZE, max_batch) else found[1] + 1

"""The engine's KV pool for models with sliding-window layers: each sequence keeps only the window of those layers,
as vLLM V1's SlidingWindowManager frees the blocks behind it, so the pool holds what the memory calculator's
window-aware sequence count says, not what an all-layer price per token says. Hybrid models' linear layers add a
constant state per sequence to the same pool."""

from __future__ import annotations

import math

import pytest

from calculators.api import run
from calculators.calcs.capacity_plan import SCHEMA as PLAN
from calculators.calcs.goodput import SCHEMA as GOODPUT
from calculators.calcs.kv_cache import pool_tokens_held, windowed_layers
from calculators.calcs.memory import budget, footprint, kv_pool_tokens, sequence_pool_tokens, usable_bytes_per_gpu
from calculators.calcs.steptime import StepModel, deployment
from calculators.engine.config import EngineConfig, Request
from calculators.engine.core import Engine
from calculators.engine.steps import StepTimes
from calculators.resolve import resolve_model
from calculators.schema import validate

BLOCK = 16


def _times(model: str) -> StepTimes:
    inputs = {"model": model, "hardware": "h100-sxm"}
    if model.startswith("gpt-oss"):
        inputs.update(weight_dtype="bf16", expert_weight_dtype="mxfp4")
    return StepTimes(StepModel(deployment(validate(GOODPUT["inputs"], inputs))))


def _most_running(model: str, kv_blocks: int, prompt: int, output: int, n: int = 12) -> tuple[int, Engine]:
    """The most sequences running at once when n equal requests arrive together, and the engine after the run."""
    cfg = EngineConfig(kv_blocks=kv_blocks, block_size_tokens=BLOCK, max_num_seqs=1024, max_num_batched_tokens=8192)
    engine = Engine(_times(model), [Request(0.0, prompt, output) for _ in range(n)], cfg, (0, n))
    engine.run()
    return max(o[1] for o in engine.occupancy), engine


def test_the_window_charge_is_the_same_layers_as_the_memory_model():
    assert windowed_layers(resolve_model("llama-3.1-8b")) is None
    assert windowed_layers(resolve_model("gpt-oss-120b")) == (18, ((18, 128),))
    full, windowed = windowed_layers(resolve_model("gemma-3-27b"))
    assert (full, sum(n for n, _ in windowed)) == (10, 52)


@pytest.mark.parametrize(("model", "gpus"), [("nemotron-h-8b", 1), ("jamba-1.5-mini", 2), ("qwen3-next-80b-a3b", 4)])
def test_a_hybrid_sequence_holds_its_state_in_pool_tokens(model, gpus):
    """Pool tokens ÷ a sequence's pool tokens (its state included) is memory.Budget.sequences, at every length; the
    state alone is worth hundreds of tokens or more, so an attention-only price would overcount short sequences."""
    v = validate(GOODPUT["inputs"], {"model": model, "hardware": "h200", "num_gpus": gpus})
    pool = kv_pool_tokens(v)
    for tokens in (500, 2_000, 32_100):
        b = budget(footprint(v), usable_bytes_per_gpu(v), gpus, tokens)
        assert math.floor(pool / sequence_pool_tokens(v, tokens)) in (b.sequences, b.sequences + 1)
    state = sequence_pool_tokens(v, 0)
    assert state > 300
    assert StepModel(deployment(v)).state_pool_tokens == pytest.approx(state, rel=1e-12)


def test_the_simulator_charges_each_hybrid_sequence_its_state():
    """Nemotron-H 8B keeps 3,162 pool tokens of state per sequence (its 24 Mamba-2 layers at BF16): a pool with
    room for 8 sequences of 2,000 tokens at the attention layers' price runs ⌊1,000 ÷ (125 + 198)⌋ = 3 of them."""
    times = _times("nemotron-h-8b")
    assert math.ceil(times.model.state_pool_tokens / BLOCK) == 198
    cfg = EngineConfig(kv_blocks=1_000, block_size_tokens=BLOCK, max_num_seqs=1024, max_num_batched_tokens=8192)
    engine = Engine(times, [Request(0.0, 1_900, 100) for _ in range(8)], cfg, (0, 8))
    engine.run()
    assert max(o[1] for o in engine.occupancy) == 3
    assert engine.pool.free == engine.pool.total


@pytest.mark.parametrize("model", ["gpt-oss-120b", "gemma-3-27b"])
def test_a_windowed_pool_holds_about_what_the_memory_calculator_counts(model):
    """Sequences of 32,100 tokens: pool tokens ÷ pool_tokens_held equals the budget ÷ the window-aware bytes per
    sequence (memory.Budget.sequences), and far more than an all-layer price per token allows."""
    mxfp4 = {"weight_dtype": "bf16", "expert_weight_dtype": "mxfp4"} if model.startswith("gpt-oss") else {}
    v = validate(GOODPUT["inputs"], {"model": model, "hardware": "h200", **mxfp4})
    b = budget(footprint(v), usable_bytes_per_gpu(v), 1, 32_100)
    held = pool_tokens_held(v["model"], 32_100)
    assert math.floor(b.tokens / held) in (b.sequences, b.sequences + 1)
    assert b.tokens / held > 1.9 * (b.tokens / 32_100)


def test_the_simulator_holds_twice_the_gpt_oss_sequences_of_an_all_layer_pool():
    """kv_blocks counts all-layer blocks (the pool vLLM prints): room for 4 sequences of 32,100 tokens priced at
    every layer. gpt-oss keeps 9 blocks of its 128-token windows per sequence, so 8 run at once (2 × 4 × 2,007
    = 16,056 full-layer blocks, and 8 × (2,007 + 9) = 16,128 of them); Llama, with no window, runs 4."""
    blocks = 4 * math.ceil(32_100 / BLOCK)
    assert _most_running("llama-3.1-8b", blocks, 32_000, 100)[0] == 4
    most, engine = _most_running("gpt-oss-120b", blocks + 40, 32_000, 100)
    assert most == 8
    assert engine.pool.free == engine.pool.total  # every charge given back


def test_preemption_gives_the_window_charge_back():
    """A pool that cannot hold every sequence to the end preempts; when all have finished, nothing is held."""
    most, engine = _most_running("gpt-oss-120b", 1_000, 3_000, 3_000, n=8)
    assert sum(engine.preemptions) > 0
    assert engine.pool.free == engine.pool.total
    assert all(c == 0 for c in engine.pool.charged)


def test_a_short_sequence_is_charged_its_own_length_not_the_window():
    """Below the window a windowed layer holds the sequence's own blocks: 3 of them for 40 tokens."""
    _, engine = _most_running("gpt-oss-120b", 1_000, 30, 10, n=1)
    assert engine.pool.total == 2_000  # 1,000 all-layer blocks of 18 full + 18 sliding layers
    assert engine.pool.charge == [3]


def test_the_capacity_plan_fits_a_hybrid_models_sequences_with_their_state():
    """With a TPOT target loose enough that memory sets the batch, the capacity plan runs memory.Budget.sequences
    of Nemotron-H 8B at 20,400 tokens (156 on an H100), not the pool ÷ 20,400 its attention layers alone allow (180)."""
    inputs = {"model": "nemotron-h-8b", "tpot_slo_s": 10.0, "input_tokens": 20_000, "output_tokens": 400}
    v = validate(PLAN["inputs"], inputs)
    sequences = budget(footprint(v), usable_bytes_per_gpu(v), v["num_gpus"], 20_400).sequences
    r = run("capacity_plan", inputs)
    assert r["batch"] == sequences == 156
    assert r["kv_pool_tokens"] // 20_400 == 180

"""What the simulator is given: requests, and the engine's settings (named after vLLM's where one exists)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

BATCHING = ("continuous", "static")
POLICIES = ("fcfs", "priority", "sjf")
PREEMPTION = ("recompute", "swap")


class Request(NamedTuple):
    """One request (a named tuple: immutable, and cheap to make by the thousand for every run)."""

    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    priority: int = 0  # lower is served first under "priority", as vLLM's priority policy
    predicted_output_tokens: int = 0  # a length predictor's guess, for "sjf"; 0 means the true length
    prefix: tuple = ()  # ((stream, start, length), ...): shared pieces the prompt opens with
    output_stream: tuple | None = None  # (stream, start): the output continues a shared stream (a later turn)
    after: int = -1  # ≥ 0: arrives think_s after request `after` ends (its arrival_s unused)
    think_s: float = 0.0
    generated: int = 0  # > 0: a warm start, decoding at t = 0 with this many tokens out (arrival_s unused)
    tenant: str = ""  # who sent it: results can be split by tenant (the scheduler does not look at it yet)

    def pieces(self) -> list:
        """The whole sequence as pieces (stream, start, length); stream None = the request's own."""
        shared = sum(length for _, _, length in self.prefix)
        own = [(None, 0, self.prompt_tokens - shared)] if self.prompt_tokens > shared else []
        tail = [(*self.output_stream, self.output_tokens)] if self.output_stream else [(None, 0, self.output_tokens)]
        return [*self.prefix, *own, *tail]


@dataclass(frozen=True)
class EngineConfig:
    """One replica's scheduler and KV pool.

    kv_blocks × block_size_tokens is the KV pool in tokens (per replica, after the memory budget), each token
    priced at every layer, as engines print the pool (a model with sliding-window layers holds more: pool.py);
    max_num_batched_tokens is the token budget per step and max_num_seqs the running-sequence cap, as
    vLLM V1 names them; "static" batching admits a batch only when the engine is idle and runs it until
    its longest member finishes (the pre-Orca baseline). ageing_s is the starvation guard: a request
    that has waited ageing_s seconds ranks as one priority level (or one predicted token, under sjf)
    better. max_waiting > 0 sheds load: an arrival that finds that many requests waiting is rejected
    (an HTTP 429); max_predicted_ttft_s > 0 sheds an arrival whose predicted TTFT exceeds it (see
    core.Engine._predicted_ttft). A step's fixed overheads are the step times' (engine.steps.StepTimes).
    swap_bytes_per_s and kv_bytes_per_block price a swap preemption over the host link. prefix_caching
    reuses cached blocks of shared prefixes (see prefix.py); host_cache_blocks > 0 adds a host tier whose
    hits are copied back at host_cache_bytes_per_s. mixed_batches False: a step that prefills runs no decodes,
    which stall meanwhile. With chunked prefill off it is vLLM V0's default scheduler (v0.6.3,
    vllm/core/scheduler.py `_schedule_default`: "Don't schedule decodes if prefills are scheduled"); with it on,
    SGLang's default (0.5.23, managers/scheduler.py: get_next_batch_to_run runs a prefill batch first whenever
    there is one, :3992-3994; enable_mixed_chunk off, :1376-1377): each prefill step takes the prompt being
    chunked first (its next chunk, :4176-4184), then waiting prompts up to the token budget, the last cut to a
    chunk, and decode steps run only when no prompt can be prefilled. reserve_full_length reserves KV for
    prompt + output on admission, so nothing is ever preempted (the policy the goodput calculator models).
    whole_prompt_must_fit admits a waiting request only when the blocks for its whole sequence so far (its
    prompt, and any output it must recompute) are free, though its first chunk is all it takes: vLLM V1's
    scheduler_reserve_full_isl, on by default (v0.33.0, vllm/config/scheduler.py; KVCacheManager.allocate_slots,
    full_sequence_must_fit).
    recv_interval_steps > 1 is SGLang's --scheduler-recv-interval (managers/scheduler_recv_skipper.py at commit 70310f0,
    whose weights and handle() an earlier draft, 0cc650f, already had; the sweep the ledger has with it ran v0.5.6):
    the scheduler reads new requests only when a counter reaches the interval, the counter growing by 1 per
    decode step and by 1,000 (at once) after a step with prefill, and starting again from 0 at each read; an
    idle engine reads at once (its empty loop turns cost next to nothing). schedule_ahead plans each step while the
    one before it runs (vLLM's async scheduling, on by default from v0.14.0, PR #27614; SGLang's overlap scheduler,
    which "runs one batch ahead", on by default since PR #2067 of November 2024, --disable-overlap-schedule): a
    busy engine's step admits only the requests that had arrived when the step before it started. Unset (None), it
    follows the engine the config models (plans_ahead): on for continuous batching with mixed steps, as vLLM V1
    runs by default (v0.33.0: vllm/config/vllm.py, an unset async_scheduling becomes true unless the model is a
    pooling model or an option does not support it), off for V0's prefill-first steps and static batching (set it
    for SGLang, whose overlap scheduler plans ahead by default)."""

    kv_blocks: int
    block_size_tokens: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True
    batching: str = "continuous"
    policy: str = "fcfs"
    preemption: str = "recompute"
    swap_bytes_per_s: float = 0.0
    kv_bytes_per_block: float = 0.0
    ageing_s: float = 0.0
    max_waiting: int = 0
    max_predicted_ttft_s: float = 0.0
    trace_steps: int = 0
    prefix_caching: bool = False
    mixed_batches: bool = True
    reserve_full_length: bool = False
    whole_prompt_must_fit: bool = True
    host_cache_blocks: int = 0
    host_cache_bytes_per_s: float = 0.0
    recv_interval_steps: int = 1
    schedule_ahead: bool | None = None

    @property
    def plans_ahead(self) -> bool:
        """schedule_ahead, or where unset the engine's own default: on for continuous batching with mixed steps
        (vLLM V1's async scheduling), off for V0's prefill-first steps and static batching, which did not."""
        if self.schedule_ahead is None:
            return self.batching == "continuous" and self.mixed_batches
        return self.schedule_ahead

    def __post_init__(self):
        for name, allowed in (("batching", BATCHING), ("policy", POLICIES), ("preemption", PREEMPTION)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, not {getattr(self, name)!r}")
        if self.max_predicted_ttft_s < 0 or self.max_waiting < 0:
            raise ValueError("max_predicted_ttft_s and max_waiting must be ≥ 0 (0: no shedding)")
        sizes = (self.kv_blocks, self.block_size_tokens, self.max_num_seqs, self.max_num_batched_tokens)
        if min(*sizes, self.recv_interval_steps) < 1:
            raise ValueError(
                "kv_blocks, block_size_tokens, max_num_seqs, max_num_batched_tokens and recv_interval_steps must be ≥ 1"
            )
        if self.preemption == "swap" and not (self.swap_bytes_per_s > 0 and self.kv_bytes_per_block > 0):
            raise ValueError("swap preemption needs swap_bytes_per_s and kv_bytes_per_block")
        if self.prefix_caching and self.batching != "continuous":
            raise ValueError("prefix caching is modelled for continuous batching only")
        if self.host_cache_blocks and not (
            self.prefix_caching and self.host_cache_bytes_per_s > 0 and self.kv_bytes_per_block > 0
        ):
            raise ValueError("a host cache tier needs prefix_caching, host_cache_bytes_per_s and kv_bytes_per_block")

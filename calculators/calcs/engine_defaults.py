"""vLLM V1's batch defaults for an accelerator, as vllm/engine/arg_utils.py sets them.

Read at v0.33.0 (`EngineArgs.get_batch_defaults`; commit 99d7eb5d's `_set_default_args` had the
first two tiers only): on a device with at least 160 GiB, max_num_seqs is 1,024 and
max_num_batched_tokens 16,384 ("for GPUs like B200/B300"); with at least 70 GiB, a name that does not
contain "a100" (PR #17885: a larger token budget lowered A100 throughput) and not a GB10 (compute
capability 12.1, no preset here), 1,024 and 8,192 for the OpenAI API server (16,384 for the offline
LLM class); otherwise 256 and 2,048 (8,192 offline). TPU and CPU platforms have branches of their
own, not modelled here.
"""

from __future__ import annotations

GIB = 2**30


def large_device(accelerator) -> bool:
    return accelerator.memory_bytes >= 70 * GIB and "a100" not in accelerator.name.lower()


def largest_device(accelerator) -> bool:
    return accelerator.memory_bytes >= 160 * GIB


def vllm_max_num_seqs(accelerator) -> int:
    return 1024 if largest_device(accelerator) or large_device(accelerator) else 256


def vllm_max_num_batched_tokens(accelerator) -> int:
    """The API server's default token budget per engine step."""
    if largest_device(accelerator):
        return 16384
    return 8192 if large_device(accelerator) else 2048

"""vLLM V1's batch defaults for an accelerator, as vllm/engine/arg_utils.py sets them.

Read at v0.33.0 (`EngineArgs.get_batch_defaults`; commit 99d7eb5d's `_set_default_args` had the
first two tiers only): on a device with at least 160 GiB, max_num_seqs is 1,024 and
max_num_batched_tokens 16,384 ("for GPUs like B200/B300"); with at least 70 GiB, a name that does not
contain "a100" (PR #17885: a larger token budget lowered A100 throughput) and not a GB10 (compute
capability 12.1, no preset here), 1,024 and 8,192 for the OpenAI API server (16,384 for the offline
LLM class); otherwise 256 and 2,048 (8,192 offline). TPU and CPU platforms have branches of their
own, not modelled here: every chip takes the memory tiers.

The 160 GiB tier arrived in v0.28.0 (arg_utils.py:2582-2590 there; v0.27.0 has the 70 GiB check alone, :2544);
v0.19.0 (:2053-2071), v0.20.0 (:2208-2226) and v0.22.0 (:2311-2329) set the two lower tiers as above. The
engine-faithful mode passes each release's answer (largest_tier).
"""

from __future__ import annotations

from ..units import GIB

LARGEST_TIER_FROM = (0, 28, 0)  # the first vLLM release with the 160 GiB tier


def large_device(accelerator) -> bool:
    return accelerator.memory_bytes >= 70 * GIB and "a100" not in accelerator.name.lower()


def largest_device(accelerator) -> bool:
    return accelerator.memory_bytes >= 160 * GIB


def vllm_max_num_seqs(accelerator) -> int:
    return 1024 if largest_device(accelerator) or large_device(accelerator) else 256


def vllm_max_num_batched_tokens(accelerator, largest_tier: bool = True) -> int:
    """The API server's default token budget per engine step (largest_tier: the release has the 160 GiB tier)."""
    if largest_tier and largest_device(accelerator):
        return 16384
    return 8192 if large_device(accelerator) else 2048

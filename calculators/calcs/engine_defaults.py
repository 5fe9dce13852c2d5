"""vLLM V1's batch defaults for an accelerator, as vllm/engine/arg_utils.py sets them.

Read at commit 99d7eb5d (`EngineArgs._set_default_args`; later code moves the same table into
`EngineArgs.get_batch_defaults`): on a device with at
least 70 GiB whose name does not contain "a100" (PR #17885: a larger token budget lowered A100
throughput), max_num_seqs is 1,024 and max_num_batched_tokens 8,192 for the OpenAI API server
(16,384 for the offline LLM class); otherwise 256 and 2,048 (8,192 offline). TPU and CPU platforms
have branches of their own, not modelled here.
"""
from __future__ import annotations

GIB = 2 ** 30


def large_device(accelerator) -> bool:
    return accelerator.memory_bytes >= 70 * GIB and "a100" not in accelerator.name.lower()


def vllm_max_num_seqs(accelerator) -> int:
    return 1024 if large_device(accelerator) else 256


def vllm_max_num_batched_tokens(accelerator) -> int:
    """The API server's default token budget per engine step."""
    return 8192 if large_device(accelerator) else 2048

"""Paste your startup log: read a vLLM or SGLang startup log, re-derive its capacity lines with the core.

The log's own figures are taken as inputs where it prints them (the memory it reports, the weights as
loaded, the KV budget, non-torch and activation memory, TP, max_model_len, the KV-cache format) and the
lines that follow from them are re-derived with engine_capacity's rules for the log's engine version:
vLLM's "GPU KV cache size: N tokens" and "Maximum concurrency for L tokens per request: C×" (V0 logs:
"# GPU blocks: N"), SGLang's "KV Cache is allocated. #tokens: N" and max_total_num_tokens. A release that sizes
its cache after warmup (vLLM v0.34.0 on CUDA and ROCm) is re-derived from its "Memory after warmup" line. Each line is
shown beside the log's with the difference and its reason. A log with none of those lines, or without
what they follow from, is refused with a message naming the missing lines.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..errors import InputError
from ..model import vendor_in
from ..schema import accelerator_field, choice, dtype_field, integer, model_field, output, step, text
from ..units import GIB
from .engine_capacity import (
    TOKENS_RULE,
    aiter_cut_text,
    cite,
    default_batched_tokens,
    default_block_size,
    measured_kv_bytes,
    release,
    rules_for_release,
    version,
    versions,
    warmup_margin,
    vllm_versions,
    with_memory,
)
from .kv_pages import (
    layout,
    sglang_capacity,
    sglang_cell_bytes,
    vllm_capacity,
    vllm_max_len_estimate,
    vllm_request_bytes,
)
from .sglang_memory import default_fraction

MAX_CHARS = 200_000
# The default: a V0 startup log quoted in vLLM issue #10517 (kaspersiminski, 2024-12-02), Llama 3.1 8B on an
# RTX 3090 at max_model_len 20,000 (tests/fixtures/startup_logs/vllm-v0-llama31-8b-3090-20k.log).
DEFAULT_LOG = (
    "Loading model weights took 14.9888 GB\n"
    "Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.06GiB "
    "memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90\n"
    "GPU blocks: 1952, # CPU blocks: 2048\n"
    "Maximum concurrency for 20000 tokens per request: 1.56x\n"
)
KV_DTYPES = {
    "fp8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "fp8_ds_mla": "fp8",
    "float8_e4m3fn": "fp8",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
}

# (key, engine, pattern): the first match of each pattern wins; numbers may carry thousands commas.
N = r"([\d,]+(?:\.\d+)?)"
PATTERNS = [
    ("version", "vllm", r"vLLM API server version (\d+\.\d+\.\d+)"),
    ("platform", "vllm", r"Automatically detected platform (\w+)"),
    ("version", "vllm", r"version (\d+\.\d+\.\d+)"),
    ("version", "vllm", r"LLM engine \(v(\d+\.\d+\.\d+)"),
    ("tp", "any", r"tensor_parallel_size['\"]?[=:]\s*(\d+)"),
    ("tp", "any", r"--tensor[-_]parallel[-_]size[ =](\d+)"),
    ("tp", "sglang", r"\btp_size=(\d+)"),
    ("tp", "sglang", r"'tp_size': (\d+)"),  # v0.5.23 logs server_args as a dict
    ("tp", "sglang", r"--tp(?:-size)?[ =](\d+)"),
    ("kv_dtype", "any", r"kv_cache_dtype['\"]?[=:]\s*['\"]?(\w+)"),
    ("kv_dtype", "any", r"--kv-cache-dtype[ =](\w+)"),
    ("kv_dtype", "sglang", r"is allocated\. dtype: torch\.(\w+)"),
    ("kv_dtype", "sglang", r"Using KV cache dtype: torch\.(\w+)"),
    ("max_len", "vllm", r"Maximum concurrency for " + N + r" tokens per request"),
    ("max_len", "any", r"max_seq_len=(\d+)"),
    ("max_len", "any", r"max_model_len['\"]?[=:]\s*(\d+)"),
    ("max_len", "sglang", r"context_len=(\d+)"),
    ("max_len", "sglang", r"'context_length': (\d+)"),
    ("max_len", "sglang", r"\bcontext_length=(\d+)"),  # the launch's --context-length in ServerArgs
    ("max_len", "vllm", r"max seq len \((\d+)\)"),  # a failed start: "the model's max seq len (N)"
    ("dp_attention", "sglang", r"enable_dp_attention['\"]?[=:]\s*(True)"),
    ("block_size", "vllm", r"Setting kv cache block size to (\d+)"),  # the size vLLM chose for the backends
    ("block_size", "any", r"block_size['\"]?[=:]\s*(\d+)"),
    ("block_size", "sglang", r"\bpage_size=(\d+)"),
    ("block_size", "sglang", r"'page_size': (\d+)"),
    ("batched", "any", r"max_num_batched_tokens['\"]?[=:]\s*(\d+)"),
    ("weights", "vllm", r"Model loading took " + N + r" ?GiB"),
    ("weights", "vllm", r"Loading model weights took " + N + r" ?GB"),
    ("weights", "vllm", r"model weights take " + N + r" ?GiB"),
    ("total", "vllm", r"total_gpu_memory[ =]\(?" + N + r" ?GiB"),
    ("util", "vllm", r"gpu_memory_utilization[ =]\(?" + r"(\d\.\d+)"),
    ("util", "vllm", r"'gpu_memory_utilization': (\d\.\d+)"),
    ("non_torch", "vllm", r"non_torch_memory(?: takes |=)" + N + r" ?GiB"),
    ("activation", "vllm", r"PyTorch activation peak memory takes " + N + r" ?GiB"),
    ("available", "vllm", r"Available KV cache memory: (-?[\d.]+) GiB"),
    ("available", "vllm", r"kv_cache_size=(-?[\d.]+) ?GiB"),
    ("available", "vllm", r"reserved for KV Cache is (-?[\d.]+) ?GiB"),
    ("available", "vllm", r"Current kv cache memory in use is ([\d.]+) GiB"),
    ("available", "vllm", r"available KV cache memory \((-?[\d.]+) GiB\)"),  # a failed start's budget
    ("needed", "vllm", r"\(([\d.]+) GiB KV cache is needed"),
    ("estimate", "vllm", r"estimated maximum model length is (\d+)"),
    ("tokens", "vllm", r"GPU KV cache size: " + N + r" tokens"),
    # v0.34.0's sizing after warmup (v1/worker/extensible_kv_cache.py:693-707)
    ("warm_free", "vllm", r"Memory after warmup: " + N + r" GiB free"),
    ("warm_committed", "vllm", N + r" GiB committed to the KV cache"),
    ("warm_peak", "vllm", r"\(" + N + r" GiB allocated at peak"),
    ("warm_growth", "vllm", N + r" GiB of torch reservation growth"),
    ("warm_blocks", "vllm", r"; (\d+) KV cache blocks \("),  # not the DEBUG "Committed N of M KV cache blocks ("
    ("warm_requested", "vllm", r"fit within the requested " + N + r" GiB"),
    ("init_free", "vllm", r"Free memory on device \(" + N + r"/"),
    ("init_total", "vllm", r"Free memory on device \([\d.,]+/" + N + r" GiB\)"),
    ("blocks", "vllm", r"(?:GPU|cuda) blocks: (\d+)"),
    ("concurrency", "vllm", r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x"),
    ("pool_tokens", "sglang", r"KV Cache is allocated\.[^#]*#tokens: (\d+)"),
    ("k_size", "sglang", r"#tokens: \d+, K size: ([\d.]+) GB"),
    ("v_size", "sglang", r", V size: ([\d.]+) GB"),
    ("kv_size", "sglang", r"#tokens: \d+, KV size: ([\d.]+) GB"),
    ("max_total", "sglang", r"max_total_num_tokens=(\d+)"),
    ("before_load", "sglang", r"Load weight begin\. avail mem=([\d.]+) GB"),
    ("after_load", "sglang", r"Load weight end\..*?avail mem=([\d.]+) GB"),
    ("weights", "sglang", r"Load weight end\..*?mem usage=([\d.]+) GB"),
    ("mfs", "sglang", r"mem_fraction_static=(\d\.\d+)"),
    ("mfs", "sglang", r"'mem_fraction_static': (\d\.\d+)"),  # v0.5.23 logs server_args as a dict
    ("mfs", "sglang", r"--mem-fraction-static[ =](\d\.\d+)"),
]
MISSING = {-1: "not in the log"}
TEXT_KEYS = ("version", "kv_dtype", "platform", "dp_attention")  # read as text; every other key is a number
SGLANG_MARKS = ("KV Cache is allocated", "max_total_num_tokens", "Load weight end", "sglang")


def _number(s: str) -> float:
    return float(s.replace(",", ""))


def parse(log: str) -> dict:
    """What a startup log says, by key (numbers as floats, dtypes and versions as text), and its engine."""
    engine = "sglang" if any(m in log for m in SGLANG_MARKS) else "vllm"
    found: dict = {"engine": engine}
    for key, eng, pattern in PATTERNS:
        if key in found or eng not in ("any", engine):
            continue
        m = re.search(pattern, log, flags=re.S if ".*?" in pattern else 0)
        if m:
            found[key] = m.group(1) if key in TEXT_KEYS else _number(m.group(1))
    return found


VLLM_RESULTS = ("tokens", "blocks", "concurrency", "estimate")
SGLANG_RESULTS = ("pool_tokens", "max_total")
LINE_NAMES = {
    "tokens": "'GPU KV cache size: N tokens'",
    "blocks": "'# GPU blocks: N'",
    "concurrency": "'Maximum concurrency for L tokens per request: C x'",
    "estimate": "a failed start's '... the estimated maximum model length is N'",
    "pool_tokens": "'KV Cache is allocated. ... #tokens: N'",
    "max_total": "'max_total_num_tokens=N'",
    "available": "'Available KV cache memory: X GiB' (or V0's 'kv_cache_size=X GiB')",
    "max_len": "the max_model_len (from 'Maximum concurrency for L tokens' or max_model_len=/max_seq_len=)",
    "budget": "'K size: X GB, V size: Y GB' or 'Load weight end ... avail mem=X GB, mem usage=Y GB'",
    "mfs": "mem_fraction_static (server_args)",
}


def version_for(found: dict, chosen: str) -> tuple[dict, str]:
    """The engine version whose rules apply, and why (the log's version, or the reader's choice)."""
    if chosen != "auto":
        ver = version(chosen)
        if ver["engine"] != found["engine"]:
            raise InputError("engine_version", f"{ver['label']} does not match this {found['engine']} log")
        return ver, f"{ver['label']} (chosen)"
    if found["engine"] == "sglang":
        why = "the newest SGLang release modelled; the budget comes from the log's own lines"
        return version("sglang-0.5.23"), f"SGLang v0.5.23's rules ({why})"
    v, vllm = found.get("version"), vllm_versions()
    if v is not None:
        ver = rules_for_release(v)
        return ver, f"{ver['label']}'s rules for the log's v{v}" + _held(ver, v)
    if "blocks" in found and "tokens" not in found:
        return vllm[0], f"{vllm[0]['label']}'s rules (a V0 log: blocks × block size, the nearest modelled)"
    warm = [ver for ver in vllm if ver.get("kv_sizing") == "after_warmup"]
    if "warm_blocks" in found:
        return warm[-1], f"{warm[-1]['label']}'s rules (the log sizes its KV cache after warmup)"
    ver = [ver for ver in vllm if ver not in warm][-1]
    return ver, f"{ver['label']}'s rules (the log names no version: the newest modelled that sizes before warmup)"


def _held(ver: dict, v: str) -> str:
    """Why an entry's rules stand for a release other than its own."""
    own, log = release(ver["id"]), release(v)
    if log == own:
        return ""
    if log > own:
        return " (the nearest release modelled at or below it)"
    if release(ver["since"]) <= log:
        return f" (they hold from v{ver['since']})"
    return " (the oldest modelled, the nearest)"


SCHEMA = {
    "name": "startup_log",
    "title": "Paste your startup log",
    "description": (
        "Paste a vLLM or SGLang startup log. The core reads the figures the log prints (memory, weights, KV "
        "budget, TP, max_model_len, KV format), re-derives the capacity lines the engine printed from them "
        "with that version's rules, and shows each beside the log's with the difference and its reason. "
        "Pick the model the log is for."
    ),
    "inputs": [
        text(
            "log",
            "Startup log",
            DEFAULT_LOG,
            MAX_CHARS,
            "Paste the lines from start-up to 'Maximum concurrency' (vLLM) or 'max_total_num_tokens' (SGLang).",
        ),
        model_field(default="llama-3.1-8b", help="The model the log is for (the log's config names it)."),
        dtype_field("kv_dtype", "KV-cache format if the log does not say", "bf16"),
        choice(
            "engine_version",
            "Engine rules",
            "auto",
            [("auto", "From the log")] + [(vid, ver["label"]) for vid, ver in versions().items()],
        ),
        integer("tensor_parallel", "TP if the log does not say", 1, 1, 64, "GPUs"),
        integer(
            "max_num_batched_tokens",
            "max_num_batched_tokens if the log does not say (0 = the version's default for the chip)",
            0,
            0,
            1_000_000,
            "tokens",
            "Used only for sliding-window layers' blocks per request. vllm serve's default depends on the device "
            "memory, the log's where it prints it, else the accelerator's below (2,048 tokens below 70 GiB and on "
            "A100s, 8,192 from 70 GiB, 16,384 from 160 GiB from v0.28).",
        ),
        accelerator_field(
            help="Used where the log prints no memory figures, and by vLLM v0.34.0's rules: the margin after warmup "
            "(a 1 GiB floor on NVIDIA, 3 GiB on AMD) and, where the log does not say, the block size (16 where ROCm's "
            "ROCM_ATTN serves the model). For an SGLang log, the GPU whose memory SGLang's own mem_fraction_static "
            "rule is checked on."
        ),
    ],
    "outputs": [
        output("log_kv_tokens", "KV tokens, as the log says", "tokens", "integer", words=MISSING),
        output("core_kv_tokens", "KV tokens, as the core derives", "tokens", "integer"),
        output("kv_tokens_error", "KV tokens: core vs log", "", "percent"),
        output("log_concurrency", "Maximum concurrency, as the log says", "×", "number", words=MISSING),
        output("core_concurrency", "Maximum concurrency, as the core derives", "×", "number", words=MISSING),
        output("kv_bytes_per_token", "KV bytes per token per GPU (core)", "B", "integer"),
        output("log_kv_bytes_per_token", "KV budget ÷ the log's tokens", "B", "number", words=MISSING),
        output("kv_budget_bytes", "KV budget per GPU used", "B", "bytes"),
        output("inputs_from_log", "Figures read from the log", "", "integer"),
    ],
}


def _need(found: dict, keys: tuple, what: str) -> None:
    if not any(k in found for k in keys):
        names = " or ".join(LINE_NAMES[k] for k in keys)
        raise InputError("log", f"missing {names}: {what}")


def _pct(core: float, log: float | None) -> float | None:
    return None if not log else core / log - 1


@dataclass(frozen=True)
class VllmRun:
    """What a vLLM log fixes: its settings (from the log, else the reader's inputs) and the core's capacity."""

    L: int
    tp: int
    block: int
    batched: int
    kv: str
    available: float
    lay: object
    cap: object
    budget_from: str = "the log's Available KV cache memory"
    measured: float | None = None  # the after-warmup budget, where the log sized its cache so


def _max_len(v: dict, f: dict, notes: list) -> int:
    if "max_len" in f:
        return int(f["max_len"])
    if v["model"].max_context_tokens:
        L = v["model"].max_context_tokens
        notes.append(f"the log names no max_model_len: the model's context, {L:,} tokens, assumed (vLLM's default)")
        return L
    _need(f, ("max_len",), "needed to re-derive the concurrency")


WARM = ("warm_free", "warm_committed", "warm_peak", "warm_growth", "warm_requested")
WARM_NAMES = ("free", "committed", "allocated at peak", "torch reservation growth", "requested")
VENDORS = {"cuda": "NVIDIA", "rocm": "AMD"}


def log_vendor(f: dict, accelerator) -> str:
    """The GPUs' vendor: the platform vLLM says it detected, else the reader's accelerator's."""
    return VENDORS.get(str(f.get("platform", "")).lower(), accelerator.vendor)


def after_warmup_budget(f: dict, ver: dict, vendor: str) -> float | None:
    """The KV budget a release that sizes its cache after warmup derives from its 'Memory after warmup' line
    (v0.34.0, extensible_kv_cache.py:592-618): min(requested − memory in use but the cache, free + committed −
    margin) − the larger of the transient peak and torch's growth, margin = max(the platform's floor, 0.75 × the
    peak); the first term needs the startup line's free memory, else it is taken not to bind (the default
    utilization, 1.0, requests the whole device). None where the log has no such line or the release no such rule;
    a line missing some of its figures is refused, naming them."""
    if ver.get("kv_sizing") != "after_warmup" or not any(k in f for k in WARM + ("warm_blocks",)):
        return None
    missing = [name for k, name in zip(WARM, WARM_NAMES) if k not in f]
    if missing:
        raise InputError("log", f"the 'Memory after warmup' line lacks its {', '.join(missing)} figure(s)")
    free, committed, peak = (f[k] * GIB for k in ("warm_free", "warm_committed", "warm_peak"))
    margin, kept = warmup_margin(ver, vendor, peak), max(peak, f["warm_growth"] * GIB)
    if "init_free" not in f:  # no figure for what was free at start: the requested cap taken not to bind
        return max(0.0, measured_kv_bytes(math.inf, 0.0, free + committed, margin, kept))
    at_start = f["init_free"] * GIB
    requested = f["warm_requested"] * GIB
    return max(0.0, measured_kv_bytes(requested, at_start - free - committed, at_start, margin, kept))


def _budget(f: dict, ver: dict, vendor: str, notes: list) -> tuple[float, float | None, str]:
    """(the budget the capacity lines follow from, the after-warmup budget or None, where the budget comes from)."""
    measured = after_warmup_budget(f, ver, vendor)
    if measured is None:
        _need(f, ("available",), "the KV budget the capacity lines follow from")
        return f["available"] * GIB, None, "the log's Available KV cache memory"
    on = vendor if vendor_in(vendor, ver["warmup_margin_floor_gib"]) else "NVIDIA (CUDA's, taken for this chip)"
    floor = f"a {warmup_margin(ver, vendor, 0.0) / GIB:g} GiB floor on {on} GPUs"
    if "available" not in f:
        notes.append(
            f"{ver['label']} sized the cache after warmup: its 'Memory after warmup' line leaves "
            f"{measured / GIB:.2f} GiB (margin with {floor}); " + cite(ver, "after_warmup")
        )
        return measured, measured, "the budget the log's 'Memory after warmup' line leaves"
    estimate = f["available"] * GIB
    notes.append(
        f"{ver['label']} sized the cache after warmup: the budget is the smaller of its 'Available KV cache memory' "
        f"({estimate / GIB:.2f} GiB, the profiling estimate) and what its 'Memory after warmup' line leaves "
        f"({measured / GIB:.2f} GiB, margin with {floor}); " + cite(ver, "after_warmup")
    )
    after = "the smaller of the log's Available KV cache memory and the budget its 'Memory after warmup' line leaves"
    return min(estimate, measured), measured, after


def _vllm_run(v: dict, f: dict, ver: dict, notes: list) -> VllmRun:
    L = _max_len(v, f, notes)
    tp = int(f.get("tp", v["tensor_parallel"]))
    vendor = log_vendor(f, v["hardware"])
    block = int(f.get("block_size", default_block_size(ver, v["model"], vendor)))
    logged_device = with_memory(v["hardware"], f.get("init_total", f.get("total")))  # the log's memory, where printed
    batched = int(
        f.get("batched", v["max_num_batched_tokens"] or default_batched_tokens(ver, logged_device, f.get("version")))
    )
    kv = KV_DTYPES.get(str(f.get("kv_dtype", "auto")).lower(), v["kv_dtype"])
    available, measured, source = _budget(f, ver, vendor, notes)
    lay = layout(v["model"], kv, tp, block)
    cap = vllm_capacity(ver, lay, available, L, batched)
    return VllmRun(L, tp, block, batched, kv, available, lay, cap, source, measured)


def _vllm_context_notes(f: dict, ver: dict, r: VllmRun) -> list[str]:
    notes = []
    if "tokens" not in f and "blocks" in f:
        notes.append(f"V0 log: its '# GPU blocks: {int(f['blocks']):,}' × block size {r.block} is its KV-cache size.")
    if "kv_dtype" not in f:
        notes.append(f"the log does not declare its KV-cache format: {r.kv.upper()} assumed (the input)")
    if r.tp > 1:
        notes.append(
            "TP > 1: vLLM gives every rank the smallest rank's block count and logs one rank's budget (and, sized "
            "after warmup, every rank's 'Memory after warmup' line: the first is read), so the log's tokens can fall "
            "below this rank's figure; " + cite(ver, "min_over_ranks")
        )
    if len(r.lay.groups) > 1:
        notes.append(
            f"hybrid attention: {len(r.lay.groups)} KV-cache groups of {r.lay.group_size} layers "
            f"({r.lay.padding_layers} padding layers); one block holds a page of every group's layer"
        )
    if "batched" not in f and any(g.cap_tokens for g in r.lay.groups):
        notes.append(
            f"the log does not print max_num_batched_tokens: {r.batched:,} tokens taken (the input, or vllm serve's "
            "default for the device memory the log prints, else the accelerator's), which sets the tokens a "
            "sliding-window request holds in flight"
        )
    return notes


def _vllm_steps(ver: dict, r: VllmRun, log_tokens, log_conc) -> list[dict]:
    lay, cap, B = r.lay, r.cap, "B"
    per_block = "group size × block size × KV bytes per token per layer per GPU; " + cite(ver, "num_blocks")
    rows = [
        ("KV budget per GPU (from the log)", r.budget_from, "{}", [(r.available, B)]),
        ("Bytes per block", per_block, "{} × {} × {}", [lay.group_size, r.block, (lay.per_layer_token, B)]),
        ("KV blocks", "⌊budget ÷ bytes per block⌋", "⌊{} ÷ {}⌋", [(r.available, B), (lay.bytes_per_block, B)]),
    ]
    values = [(r.available, B), (lay.bytes_per_block, B), (cap.num_blocks, "blocks")]
    if log_tokens is not None:
        label = f"GPU KV cache size (log: {int(log_tokens):,} tokens)"
        rows.append((label, "the version's rule; " + cite(ver, "tokens"), "{} blocks", [cap.num_blocks]))
        values.append((cap.tokens, "tokens"))
    if log_conc is not None:
        label, rule = f"Maximum concurrency (log: {log_conc:.2f}×)", "blocks ÷ Σ groups' blocks per request; "
        rows.append((label, rule + cite(ver, "concurrency"), "{} ÷ {}", [cap.num_blocks, cap.blocks_per_request]))
        values.append((cap.concurrency, "×"))
    return [step(*row, value, unit) for row, (value, unit) in zip(rows, values)]


def _vllm(v: dict, f: dict, ver: dict) -> dict:
    _need(f, VLLM_RESULTS, "the log ends before vLLM sized its KV cache (truncated?)")
    notes: list[str] = []
    r = _vllm_run(v, f, ver, notes)
    log_tokens = f.get("tokens") or (f["blocks"] * r.block if "blocks" in f else None)
    if log_tokens is None and "estimate" in f:
        return _vllm_failed_start(f, ver, r, notes)
    log_conc = f.get("concurrency")
    notes += _vllm_context_notes(f, ver, r)
    if log_tokens is not None:
        notes.append(_diff_note("GPU KV cache size", r.cap.tokens, log_tokens, "tokens", _tokens_reason(ver)))
        notes += _other_versions(ver, r.lay, r.available, r.L, r.batched, r.cap.tokens)
    if log_conc is not None:
        notes.append(_diff_note("Maximum concurrency", r.cap.concurrency, log_conc, "×", "printed to 2 decimals"))
    if "warm_blocks" in f and r.measured is not None:  # the line prints the count at most the estimate's
        granule = (
            f"its figures printed to 0.01 GiB, blocks of {r.block} tokens (the log's, else this version's "
            "default); the pages' rounding to the allocation granule is not modelled"
        )
        notes.append(_diff_note("KV cache blocks after warmup", r.cap.num_blocks, f["warm_blocks"], "blocks", granule))
    return {
        "log_kv_tokens": log_tokens,
        "core_kv_tokens": r.cap.tokens,
        "kv_tokens_error": _pct(r.cap.tokens, log_tokens),
        "log_concurrency": log_conc,
        "core_concurrency": r.cap.concurrency,
        "kv_bytes_per_token": r.lay.bytes_per_token,
        "log_kv_bytes_per_token": r.available / log_tokens if log_tokens else None,
        "kv_budget_bytes": r.available,
        "notes": notes + _log_constants(f),
        "derivation": _vllm_steps(ver, r, log_tokens, log_conc),
    }


def _vllm_failed_start(f: dict, ver: dict, r: VllmRun, notes: list) -> dict:
    """A start that failed its KV check: the log prints the budget checked, the bytes one max_model_len
    request needs and the longest request the budget holds; the core re-derives the last two."""
    estimate = vllm_max_len_estimate(ver, r.lay, r.available, r.L, r.batched)
    needed = vllm_request_bytes(ver, r.lay, r.L, r.batched)
    rule = "the longest request whose blocks over every group fit the budget; " + cite(ver, "max_len_estimate")
    notes += _vllm_context_notes(f, ver, r)
    notes.append(
        f"a failed start: its 'estimated maximum model length' is the longest request the {r.available / GIB:.2f} "
        "GiB it checked holds, and the core derives that line in place of 'GPU KV cache size'"
    )
    notes.append(_diff_note("Estimated maximum model length", estimate, f["estimate"], "tokens", rule))
    if "needed" in f:
        notes.append(
            f"KV cache needed for one {r.L:,}-token request: log {f['needed']:.2f} GiB, core {needed / GIB:.2f} GiB "
            "(bytes per block × the request's blocks)"
        )
    steps = _failed_start_steps(ver, r, f["estimate"], estimate, needed, rule)
    return {
        "log_kv_tokens": f["estimate"],
        "core_kv_tokens": estimate,
        "kv_tokens_error": _pct(estimate, f["estimate"]),
        "log_concurrency": None,
        "core_concurrency": None,
        "kv_bytes_per_token": r.lay.bytes_per_token,
        "log_kv_bytes_per_token": r.available / f["estimate"] if f["estimate"] else None,
        "kv_budget_bytes": r.available,
        "notes": notes + _log_constants(f),
        "derivation": steps,
    }


def _failed_start_steps(ver: dict, r: VllmRun, log_estimate: float, estimate: int, needed: float, rule: str) -> list:
    """A failed start's derivation: the budget it checked, one request's claim, the estimate."""
    steps = [
        step(
            "KV budget checked (from the log)",
            "the failed start's available KV cache memory",
            "{}",
            [(r.available, "B")],
            r.available,
            "B",
        ),
        step(
            f"KV cache needed for {r.L:,} tokens",
            "bytes per block × Σ groups' blocks per request; " + cite(ver, "max_len_estimate"),
            "{}",
            [(needed, "B")],
            needed,
            "B",
        ),
        step(
            f"Estimated maximum model length (log: {int(log_estimate):,})", rule, "{}", [estimate], estimate, "tokens"
        ),
    ]
    return steps


def _other_versions(ver: dict, lay, available: float, L: int, batched: int, tokens: int) -> list[str]:
    """What the other modelled vLLM versions would print for the same budget, where it differs."""
    out = []
    for alt in versions().values():
        if alt["engine"] != "vllm" or alt["id"] == ver["id"]:
            continue
        alt_tokens = vllm_capacity(alt, lay, available, L, batched).tokens
        if alt_tokens != tokens:
            out.append(
                f"under {alt['label']}'s rules the same budget prints {alt_tokens:,} tokens "
                f"({TOKENS_RULE[alt['tokens_rule']]}): switch 'Engine rules' to compare"
            )
    return out


def _log_constants(f: dict) -> list[str]:
    """The figures the log measured that the engine-faithful mode otherwise takes from the catalogue or a fit."""
    labels = (
        ("total", "device memory as torch sees it", "Device memory as reported"),
        ("weights", "weights", "Weights per GPU as loaded"),
        ("non_torch", "non-torch memory", "Non-torch memory"),
        ("activation", "activation peak", "Activation peak"),
    )
    return [
        f"the log's {label}: {f[key]:.2f} GiB per GPU (enter it as '{field}' in the engine-faithful calculator "
        "to replace the fitted constant)"
        for key, label, field in labels
        if key in f
    ]


def _tokens_reason(ver: dict) -> str:
    if ver["tokens_rule"] == "concurrency_x_len":
        return "⌊concurrency × max_model_len⌋; the budget is printed to 0.01 GiB"
    return "blocks ÷ groups × block size; the budget is printed to 0.01 GiB"


def _diff_note(name: str, core: float, log: float, unit: str, reason: str) -> str:
    pct = (core / log - 1) * 100 if log else 0.0
    fmt = (lambda x: f"{x:,.2f}") if unit == "×" else (lambda x: f"{int(x):,}")
    return f"{name}: log {fmt(log)}{' ' + unit if unit != '×' else '×'}, core {fmt(core)} ({pct:+.2f}%): {reason}"


# SGLang up to v0.5.4 cut mem_fraction_static for aiter in model_runner.py, after its server_args line was printed
OLD_ROCM_LOGS = "A ROCm log before v0.5.4.post1 printed mem_fraction_static before SGLang's aiter cut"


def _sglang_budget(f: dict, ver: dict, vendor: str, notes: list) -> tuple[float, str]:
    """The KV budget an SGLang log fixes: its pool (K + V sizes), else its avail-mem lines and mem_fraction_static."""
    if "k_size" in f or "kv_size" in f:
        pool = (f.get("k_size", 0) + f.get("v_size", 0) + f.get("kv_size", 0)) * GIB
        return pool, "the log's K size + V size (its pool, printed to 0.01 GB of 2^30 bytes)"
    _need(f, ("mfs",), "with only 'avail mem' the budget needs mem_fraction_static")
    before = f.get("before_load", f["after_load"] + f["weights"])
    if "before_load" not in f:
        notes.append("no 'Load weight begin' line: memory before loading taken as avail mem + mem usage")
    budget = (f["after_load"] - before * (1 - f["mfs"])) * GIB
    rule = ver["default_fraction"]
    if vendor_in(vendor, rule["aiter_vendors"]):
        notes.append(
            f"{OLD_ROCM_LOGS}, {aiter_cut_text(rule)}: for such a log the budget taken from it is that much too large"
        )
    return budget, "avail mem after the weights − memory before loading × (1 − mem_fraction_static); " + cite(
        ver, "budget"
    )


def _sglang(v: dict, f: dict, ver: dict) -> dict:
    _need(f, SGLANG_RESULTS, "the log ends before SGLang sized its KV pool (truncated?)")
    _need(f, ("k_size", "kv_size", "after_load"), "the KV budget the pool size follows from")
    tp, page = int(f.get("tp", v["tensor_parallel"])), int(f.get("block_size", ver["block_size"]))
    kv = KV_DTYPES.get(str(f.get("kv_dtype", "auto")).lower(), v["kv_dtype"])
    cell = sglang_cell_bytes(v["model"], kv, tp)
    notes: list[str] = (
        [] if "kv_dtype" in f else [f"the log does not declare its KV-cache format: {kv.upper()} assumed"]
    )
    budget, how = _sglang_budget(f, ver, v["hardware"].vendor, notes)
    L = int(f.get("max_len", 0)) or 1
    cap = sglang_capacity(cell, budget, page, L)
    log_tokens = f.get("pool_tokens", f.get("max_total"))
    cell_rule = "KV heads per rank × head dim × 2 × layers × bytes; " + cite(ver, "cell_size")
    pool_rule = "⌊budget ÷ cell⌋ to a page multiple; " + cite(ver, "tokens")
    steps = [
        step("KV budget per GPU", how, "{}", [(budget, "B")], budget, "B"),
        step("KV bytes per token (cell_size)", cell_rule, "{}", [(cell, "B")], cell, "B"),
        step(
            f"max_total_num_tokens (log: {int(log_tokens):,})",
            pool_rule,
            "⌊{} ÷ {}⌋",
            [(budget, "B"), (cell, "B")],
            cap.tokens,
            "tokens",
        ),
    ]
    notes.append(
        _diff_note("max_total_num_tokens", cap.tokens, log_tokens, "tokens", "the budget is printed to 0.01 GB")
    )
    notes += _fraction_note(v, f, tp)
    return _sglang_result(f, cap, cell, budget, log_tokens, L) | {"notes": notes, "derivation": steps}


def _fraction_note(v: dict, f: dict, tp: int) -> list[str]:
    """The log's mem_fraction_static beside what each modelled SGLang release sets by itself on the chosen GPU at the
    log's TP and context: a match says the launch most likely gave none."""
    if "mfs" not in f:
        return []
    hardware, model = v["hardware"], v["model"]
    sglang = [ver for ver in versions().values() if ver["engine"] == "sglang"]
    if not any(vendor_in(hardware.vendor, ver["default_fraction"]["platforms"]) for ver in sglang):
        return [
            f"mem_fraction_static: the log's {f['mfs']}; SGLang reads no memory on {hardware.name}, so its own "
            "rule does not apply there: choose the GPU the log came from to check the value against it."
        ]
    if f.get("before_load", 0) * GIB > hardware.memory_bytes:
        return [
            f"mem_fraction_static: the log's {f['mfs']}; its GPU had {f['before_load']:g} GB (2^30 bytes) free before "
            f"loading, more than {hardware.name} holds: choose the GPU the log came from to check the value against "
            "SGLang's own rule."
        ]
    context = int(f.get("max_len", 0)) or model.max_context_tokens or 0
    whose = "" if "max_len" in f else " (the model's; the log names none)"
    own = {ver["label"]: default_fraction(ver, model, hardware, tp, context) for ver in sglang}
    rocm = any(vendor_in(hardware.vendor, ver["default_fraction"]["aiter_vendors"]) for ver in sglang)
    listed = "; ".join(
        f"{label} {d.fraction:g}" + (f" ({d.before_cut:g} before its aiter cut)" if d.aiter_scaled else "")
        for label, d in own.items()
    )
    return [
        f"mem_fraction_static: the log's {f['mfs']}; SGLang's own rule for {hardware.name} at TP {tp}, context "
        f"{context:,} tokens{whose}: {listed}. {_fraction_verdict(f['mfs'], own, 'dp_attention' in f, rocm)}"
    ]


def _computes(labels: list[str]) -> str:
    return "computes" if len(labels) == 1 else "compute"


def _fraction_verdict(mfs: float, own: dict, dp_attention: bool, rocm: bool) -> str:
    """Which release's own rule the log's value is, or why it may be none's; on ROCm, what an old log printed."""
    matched = [label for label, d in own.items() if abs(d.fraction - mfs) < 5e-4]
    uncut = [label for label, d in own.items() if d.aiter_scaled and abs(d.before_cut - mfs) < 5e-4]
    old_rocm = f" {OLD_ROCM_LOGS}." if rocm else ""
    also = [label for label in uncut if label not in matched]
    if matched:
        by = "itself" if len(matched) == 1 else "themselves"
        before = f" It is also what {' and '.join(also)} {_computes(also)} before the aiter cut." if also else ""
        return (
            f"The log's value is what {' and '.join(matched)} set by {by}: the launch most likely set none."
            + before
            + old_rocm
        )
    if uncut:
        return (
            f"The log's value is what {' and '.join(uncut)} {_computes(uncut)} before the aiter cut. {OLD_ROCM_LOGS}, "
            "and a launch on another attention backend takes no cut: most likely no fraction was given."
        )
    if dp_attention:
        return "The log ran DP attention, for which SGLang reserves more, not modelled." + old_rocm
    if any(d.multimodal for d in own.values()):
        return (
            "It matches neither: SGLang lowers a multimodal model's own value further by its vision tower, not "
            "modelled, or the launch gave one." + old_rocm
        )
    return (
        "It matches neither: the launch gave a value (--mem-fraction-static) or a setting the rule reads "
        "(--chunked-prefill-size, --cuda-graph-max-bs, on ROCm --attention-backend), or ran DP attention, pipeline "
        "parallelism, DeepEP or speculative decoding, or another release's rule applies, or the GPU has other "
        "memory than the one chosen." + old_rocm
    )


def _sglang_result(f: dict, cap, cell: float, budget: float, log_tokens, L: int) -> dict:
    pool_logged = "k_size" in f or "kv_size" in f
    return {
        "log_kv_tokens": log_tokens,
        "core_kv_tokens": cap.tokens,
        "kv_tokens_error": _pct(cap.tokens, log_tokens),
        "log_concurrency": log_tokens / L if "max_len" in f else None,
        "core_concurrency": cap.concurrency if "max_len" in f else None,
        "kv_bytes_per_token": cell,
        "log_kv_bytes_per_token": budget / log_tokens if pool_logged and log_tokens else None,
        "kv_budget_bytes": budget,
    }


def _shown(out: dict) -> dict:
    """Absent figures as -1 ("not in the log"); no percentage without a log figure to compare."""
    for key in ("log_kv_tokens", "log_concurrency", "core_concurrency", "log_kv_bytes_per_token"):
        if out[key] is None:
            out[key] = -1
    if out["kv_tokens_error"] is None:
        out["kv_tokens_error"] = 0.0
    return out


def compute(v: dict) -> dict:
    log = v["log"]
    if not log.strip():
        raise InputError("log", "paste a vLLM or SGLang startup log")
    found = parse(log)
    ver, why = version_for(found, v["engine_version"])
    out = _sglang(v, found, ver) if found["engine"] == "sglang" else _vllm(v, found, ver)
    out["inputs_from_log"] = len(found) - 1
    out["notes"] = [f"rules: {why}"] + out["notes"]
    return _shown(out)

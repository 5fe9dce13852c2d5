"""Derivations are numbers, and read like the results (review §4 item 3).

A step carries its formula, a template with one {} per term, its terms as (value, unit) pairs and its
result; page.present renders the substitution with display.by_unit, the rules every result follows.
"""

from __future__ import annotations

import re

import pytest

from calculators import calculator_names, run
from calculators.display import by_unit
from calculators.page import present
from parity_cases import SPECIFIC

BRANCHES = [  # inputs that take the derivations' other branches
    ("kv_cache", {"model": "qwen3-next-80b-a3b", "context_tokens": 40000}),  # linear-layer state
    ("kv_cache", {"model": "deepseek-v3.2", "kv_dtype": "fp8"}),  # block-scaled latent + indexer
    ("kv_cache", {"model": "deepseek-v3.2"}),
    ("roofline", {"model": "qwen3-30b-a3b", "accepted_tokens_per_step": 2.5}),  # MoE and speculation
    ("latency", {"prefill_budget_rule": "set", "max_num_batched_tokens": 2048}),
    ("preemption", {"recompute_cost": "standalone", "swap_schedule": "overlapped"}),
    ("allreduce", {"algorithm": "one-shot"}),
    ("allreduce", {"link": "ib-ndr-400", "num_gpus": 16}),
    ("sram", {"sram_part": "groq-lpu"}),  # no bandwidth in the data
    ("percentiles", {"slow_fraction": 0.05}),
    ("cost", {"input_tokens_per_s": 50000}),
]
CASES = [(n, {}) for n in calculator_names()] + [
    (n, i) for n, i in SPECIFIC + BRANCHES if n in calculator_names() and isinstance(i, dict)
]


def _succeeds(name: str, inputs: dict) -> bool:
    try:
        run(name, inputs)
    except ValueError:  # the error cases of parity_cases
        return False
    return True


VALID = [c for c in CASES if _succeeds(*c)]


def test_every_branch_case_runs():
    assert all(_succeeds(n, i) for n, i in BRANCHES)


@pytest.mark.parametrize("name,inputs", VALID, ids=[f"{n}-{i}" for i, (n, _) in enumerate(VALID)])
def test_every_step_is_numbers_with_one_placeholder_per_term(name, inputs):
    for st in run(name, inputs)["derivation"]:
        assert st["template"].count("{}") == len(st["terms"]), st["label"]
        assert all(len(t) == 2 and isinstance(t[1], str) for t in st["terms"]), st["label"]
        assert not re.search(r"\d[eE][+-]?\d", st["formula"]), st["label"]


@pytest.mark.parametrize("name,inputs", VALID, ids=[f"{n}-{i}" for i, (n, _) in enumerate(VALID)])
def test_substitutions_read_like_results(name, inputs):
    """No exponent notation, no ten-digit figure in a scaled unit, no "1.0" where the results say "1"."""
    for w in present(name, inputs)["work"]:
        text = w["substituted"]
        assert not re.search(r"\d[eE][+-]?\d", text), (w["label"], text)
        assert not re.search(r"\d{1,3}(,\d{3}){3,} (B|B/s|FLOP|FLOP/s)\b", text), (w["label"], text)
        assert not re.search(r"\b\d+\.0\b", text), (w["label"], text)


def test_a_term_reads_as_a_result_in_its_unit_would():
    assert by_unit(3.35e12, "B/s") == "3.35 TB/s"
    assert by_unit(9.894e14, "FLOP/s") == "989.4 TFLOP/s"
    assert by_unit(1.40555e14, "FLOP") == "140.6 TFLOP"
    assert by_unit(0.0147373, "s") == "14.74 ms"
    assert by_unit(0.0, "s") == "0 s"
    assert by_unit(8.55208e10, "B") == "79.65 GiB"
    assert by_unit(8192, "tokens") == "8,192 tokens"
    assert by_unit("never") == "never"


def test_memory_writes_one_unit_per_term():
    """The review's "0.9 × 8.55208e+10 B − 2.0 GiB": now every byte figure in one format."""
    work = present("memory", {"model": "llama-3.1-70b", "hardware": "h100-sxm"})["work"]
    usable = next(w for w in work if w["label"] == "Usable memory per GPU")
    assert usable["formula"] == "gpu_memory_utilization × memory − reserve"
    assert usable["substituted"] == "0.92 × 79.65 GiB − 2 GiB"
    sglang = present("memory", {"engine_rule": "sglang"})["work"]
    assert next(w for w in sglang if w["label"] == "Usable memory per GPU")["formula"] == "mem_fraction_static × memory"


def test_kv_sequence_formula_and_substitution_come_from_the_same_layer_groups():
    """No more replacing 'T' in a formula: a window cap or a 'TP' in a formula cannot be corrupted."""
    work = present("kv_cache", {"model": "gemma-3-27b", "context_tokens": 100000})["work"]
    seq = next(w for w in work if w["label"] == "Bytes per sequence")
    assert "min(T, 1024)" in seq["formula"] and "min(100,000, 1,024)" in seq["substituted"]

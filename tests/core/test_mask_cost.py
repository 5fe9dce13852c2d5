"""The constraint-tax model (calcs/mask_cost.py): hand-computable cases, and the published figures it uses or is
checked against (llguidance README and docs at commit c75b0d90; XGrammar's apply-kernel table at commit 53da3ff8)."""

from __future__ import annotations

import math

import pytest

from calculators import run
from calculators.calcs.mask_cost import PUBLISHED, apply_seconds, bitmask_bytes, mask_seconds
from calculators.catalog import accelerator_presets

H100 = accelerator_presets()["h100-sxm"].memory_bandwidth_bytes_per_s


def test_bitmask_is_one_bit_a_token_in_int32_words():
    assert bitmask_bytes(128_256) == 4008 * 4
    assert bitmask_bytes(32) == 4 and bitmask_bytes(33) == 8


def test_full_trie_walk_matches_llguidances_1_5_ms():
    # docs/optimizations.md: 2 × n_vocab nodes × 13 cycles at 2 GHz ≈ 1.5 ms for the 128k Llama 3 tokenizer
    assert mask_seconds("trie_walk", 128_000, 10e9) == pytest.approx(
        PUBLISHED["llguidance_full_mask_ms"]["value"] * 1e-3, rel=0.15
    )


def test_llguidance_batch_claim():
    # README: "with 16 cores and a 10ms forward pass, llguidance can handle batch sizes up to 3200"
    r = run("mask_cost", {"vocab_size": 128_000, "cpu_threads": 16, "step_ms": 10, "method": "measured"})
    assert r["max_hidden_batch"] == PUBLISHED["llguidance_batch_claim"]["value"]
    hidden = run("mask_cost", {"vocab_size": 128_000, "cpu_threads": 16, "step_ms": 10, "batch_size": 3200})
    assert hidden["exposed_s"] == pytest.approx(hidden["apply_s"])  # only the GPU apply is left on the path


@pytest.mark.parametrize("batch, masked, measured_us", PUBLISHED["xgrammar_apply_h100_us"]["rows"])
def test_apply_model_against_xgrammars_h100_kernel_table(batch, masked, measured_us):
    # a read and a write of B × V fp32 logits at HBM bandwidth plus a 5 µs floor: within a factor of 1.7
    model_us = apply_seconds(batch, 128_000, H100) * 1e6
    assert measured_us / 1.7 < model_us < measured_us * 1.7, (batch, masked, model_us)


def test_overlap_hides_cpu_work_until_it_exceeds_the_step():
    base = {"method": "measured", "vocab_size": 128_000, "cpu_threads": 1, "step_ms": 10}
    small = run("mask_cost", base | {"batch_size": 100})  # 100 × 50 µs = 5 ms < 10 ms
    big = run("mask_cost", base | {"batch_size": 400})  # 20 ms > 10 ms: 10 ms exposed
    assert small["exposed_s"] == pytest.approx(small["apply_s"])
    assert big["exposed_s"] == pytest.approx(0.010 + big["apply_s"])
    serial = run("mask_cost", base | {"batch_size": 100, "overlap": False})
    assert serial["exposed_s"] == pytest.approx(0.005 + serial["apply_s"])


def test_tax_grows_with_vocabulary_and_batch():
    shares = [run("mask_cost", {"vocab_size": v, "batch_size": 1024})["tax_share"] for v in (32_000, 128_000, 256_000)]
    assert shares == sorted(shares) and shares[0] < shares[-1]
    by_b = [run("mask_cost", {"batch_size": b})["tax_share"] for b in (1, 512, 4096)]
    assert by_b == sorted(by_b)


def test_precomputed_masks_are_cheapest():
    t = {m: mask_seconds(m, 151_936, 10e9) for m in ("precomputed", "measured", "trie_walk")}
    assert t["precomputed"] < t["measured"] < t["trie_walk"]
    assert t["precomputed"] == pytest.approx(math.ceil(151_936 / 32) * 4 / 10e9)


def test_every_published_figure_names_its_source():
    for key, fig in PUBLISHED.items():
        assert "commit" in fig["source"], key

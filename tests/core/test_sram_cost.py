"""The SRAM calculator (moved out of allreduce, review (c)) and the cost calculator's replicas (row 13)."""

import pytest

from calculators import run
from calculators.errors import InputError
from calculators.page import present


def test_kv_capacity_on_groq():
    """Review (c): 70B at 8k BF16 is 2.7 GB per sequence, about 12 more Groq chips per sequence."""
    r = run("sram", {"model": "llama-3.1-70b", "context_tokens": 8192, "sequences": 1})
    assert r["kv_bytes_per_sequence"] == 80 * 8 * 128 * 2 * 2 * 8192
    assert r["chips_per_sequence_of_kv"] == pytest.approx(11.64, rel=0.001)
    assert r["sram_chips_total"] == 624
    assert run("sram", {"model": "llama-3.1-70b", "sequences": 0})["sram_chips_total"] == 612


def test_gpus_needed_comes_in_whole_replicas():
    """Review row 13: a 70B BF16 replica needs at least 2 H100s; the old answer was 3 single GPUs."""
    base = {"num_gpus": 8, "output_tokens_per_s": 24524.9}
    assert run("cost", {**base, "gpus_per_replica": 2})["gpus_needed"] == 4
    assert run("cost", {**base, "gpus_per_replica": 8})["gpus_needed"] == 8
    assert run("cost", {**base, "gpus_per_replica": 1})["gpus_needed"] == 3  # the old, undeployable count
    with pytest.raises(InputError) as exc:
        run("cost", {**base, "gpus_per_replica": 16})
    assert exc.value.to_json()["field"] == "gpus_per_replica"
    steps = present("cost", base)["work"]
    assert "no latency bound" in next(s["substituted"] for s in steps if s["label"] == "GPUs for the demand")

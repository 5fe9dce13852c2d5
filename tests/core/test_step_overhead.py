"""The step_overhead calculator: launch overhead share of a decode step against batch, with and without CUDA graphs."""

import pytest

from calculators import run

T_K = 0.11 / (128 * 328)  # vLLM PR #10058's (1.10 − 0.99) s over 128 passes × 328 kernels (test_overhead.py)


def test_calculator_at_its_defaults_by_hand():
    """Llama 3.1 8B on one H100 SXM, batch 1: the eager share is 328 t_k over (kernels + 328 t_k), the kernels
    being the latency calculator's TPOT without overhead at the same context."""
    r = run("step_overhead", {})
    kernel = run(
        "roofline",
        dict(batch_size=1, context_tokens=2048, bandwidth_efficiency=0.8, compute_efficiency=0.6, step_overhead="none"),
    )["decode_step_time_s_estimate"]
    assert r["kernel_time_s"] == pytest.approx(kernel, rel=1e-12)
    assert r["eager_overhead_s"] == pytest.approx(328 * T_K)
    assert r["eager_overhead_share"] == pytest.approx(328 * T_K / (kernel + 328 * T_K))
    assert r["graphs_overhead_s"] == pytest.approx(T_K)
    assert r["graphs_speedup"] == pytest.approx((kernel + 328 * T_K) / (kernel + T_K))
    assert 1.1 < r["graphs_speedup"] < 1.2  # the measured V0 gain at batch 8 was 1.11 (PR #10058)
    assert r["largest_graph_tokens"] == 512 and r["graph_memory_bytes"] == 2**30


def test_calculator_series_shapes():
    r = run("step_overhead", {})
    plot = r["series"]["overhead_share_vs_batch"]
    xs, (eager, graphs) = plot["x"]["values"], [s["values"] for s in plot["y"] if not s.get("marker")]
    marks = [s["values"] for s in plot["y"] if s.get("marker")]  # the reader's batch on both (reader walk #29)
    assert marks == [[e if x == 1 else None for x, e in zip(xs, curve)] for curve in (eager, graphs)]
    assert all(a > b for a, b in zip(eager, eager[1:]))  # the fixed launch cost is diluted as the batch grows
    above = [g for x, g in zip(xs, graphs) if x > 512]
    assert above and all(g == e for x, g, e in zip(xs, graphs, eager) if x > 512)  # above the largest graph: eager
    assert all(g < 0.01 for x, g in zip(xs, graphs) if x <= 512)


def test_calculator_padding_and_eager_above_the_largest_graph():
    r = run("step_overhead", {"batch_size": 257})
    assert r["padded_batch"] == 272 and r["padding_fraction"] == pytest.approx(15 / 272)
    big = run("step_overhead", {"batch_size": 600})
    assert big["graphs_overhead_s"] == big["eager_overhead_s"] and big["notes"]

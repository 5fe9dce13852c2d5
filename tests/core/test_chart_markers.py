"""Reader walk #29 (issue #18): a chart whose x axis is an input of its calculator marks the reader's point.

A mark is a series of one value, at the x that is the input's current value. INPUT_AXES names the input behind
each such chart; OTHER_AXES the charts whose x axis is no input (an output, a category, a sweep the calculator
chooses). A new chart must be put in one or the other.
"""

from __future__ import annotations

import pytest

from calculators.api import calculator_names, run, schema

INPUT_AXES = {
    ("kv_cache", "kv_vs_context"): "context_tokens",
    ("memory", "by_tensor_parallel"): "tensor_parallel",
    ("percentiles", "task_tail"): "calls_per_task",
    ("percentiles", "slowest_call"): "calls_per_task",
    ("allreduce", "allreduce_vs_tp"): "num_gpus",
    ("allreduce", "energy_vs_batch"): "batch_size",
    ("paging", "token_share_vs_block_size"): "block_size_tokens",
    ("preemption", "swap_vs_recompute"): "context_tokens",
    ("attention_io", "traffic_vs_length"): "sequence_tokens",
    ("chunking", "ttft_itl_vs_budget"): "max_num_batched_tokens",
    ("kv_tiers", "fetch_vs_recompute"): "prefix_tokens",
    ("shedding", "shedding_vs_threshold"): "max_waiting",
    ("shedding", "served_ttft_vs_threshold"): "max_waiting",
    ("shedding", "predictor_error"): "predictor_error_cv",
    ("shedding", "predictor_queue"): "predictor_error_cv",
    ("shedding", "ttft_shedding_vs_threshold"): "max_predicted_ttft_s",
    ("speculative_decoding", "speedup_vs_batch"): "batch_size",
    ("step_overhead", "overhead_share_vs_batch"): "batch_size",
    ("long_context", "prefill_vs_context"): "context_tokens",
    ("long_context", "kv_vs_context"): "context_tokens",
    ("long_context", "cost_vs_context"): "context_tokens",
    ("sparse_attention", "kv_kept_vs_context"): "context_tokens",
    ("sparse_attention", "decode_read_vs_context"): "context_tokens",
    ("autoscale_ramp", "attainment_vs_headroom"): "headroom",
    ("kv_transfer", "transfer_vs_prompt"): "prompt_tokens",
    ("pd_pool_sizing", "replicas_vs_rate"): "request_rate_per_s",
    ("sharding_breakdown", "memory_by_tp"): "tp",
    ("sharding_breakdown", "step_by_tp"): "tp",
    ("expert_load", "imbalance_vs_skew"): "zipf_exponent",
    ("expert_load", "touched_vs_batch"): "tokens_per_gpu",
    ("moe_alltoall", "share_vs_ep"): "num_gpus",
    ("lora_capacity", "kv_vs_slots"): "max_loras",
    ("tool_wait", "by_wait"): "wait_s",
    ("mask_cost", "tax_vs_batch"): "batch_size",
    ("capacity_plan", "cost_vs_peak"): "peak_requests_per_s",
    ("price_decoder", "margin_vs_batch"): "batch_size",
}
OTHER_AXES = {
    ("roofline", "roofline"),  # arithmetic intensity, an output (it marks both points anyway)
    ("roofline", "tokens_per_user_vs_gpu"),  # tokens/s per GPU, an output; points labelled by batch
    ("latency", "throughput_latency"),  # tokens/s per GPU, an output; points labelled by batch
    ("decode_limits", "throughput_vs_batch"),  # batch up to the one that fits: no batch input
    ("batching", "timeline"),  # time
    ("batching", "step_time_vs_batch"),  # a fixed batch grid: no batch input
    ("calibration", "predicted_vs_measured"),  # measurements
    ("prefix_cache", "ttft_by_percentile"),  # fixed percentiles
    ("quantization", "speed_by_format"),  # formats, a category
    ("quantization", "memory_by_format"),
    ("quantization", "tokens_by_format"),
    ("quantization", "kv_formats"),
    ("radix_tree", "hits_by_prompt"),  # prompts, a category
    ("cold_start", "stages"),  # stages, a category
    ("cold_start", "timeline"),
    ("autoscale_ramp", "rate_vs_time"),  # time
    ("autoscale_ramp", "replicas_vs_time"),
    ("autoscale_ramp", "ttft_vs_time"),
    ("disagg_goodput", "ttft"),  # fixed percentiles
    ("disagg_goodput", "tpot"),
    ("sharding_search", "options"),  # the shardings the search ranked, a category
    ("expert_load", "gpu_load"),  # GPU index, a category
    ("task_cost", "per_turn"),  # turn number, 1 to the turns input: every turn, no reader's point
    ("task_cost", "gpu_time"),
    ("regex_mask", "allowed_per_state"),  # DFA states, a category
    ("benchmark_loops", "ttft_by_percentile"),  # fixed percentiles
}
# Charts whose x axis is derived from the inputs, marked at the reader's value of it (issue #18: "a marker at
# the current inputs on every chart"): the x the reader's inputs give, from the calculator's own outputs.
DERIVED_AXES = {
    ("goodput", "goodput_vs_rate"): lambda v, r: v["request_rate_per_s"],  # the rates the search visited
    ("goodput", "goodput_requests_vs_rate"): lambda v, r: v["request_rate_per_s"],
    ("goodput", "latency_vs_rate"): lambda v, r: v["request_rate_per_s"],
    ("goodput", "queueing_vs_utilisation"): lambda v, r: 100 * r["utilisation"],
    ("scheduling", "queue_vs_load"): lambda v, r: 100 * r["utilisation"],  # load ÷ capacity
    ("scheduling", "attainment_vs_load"): lambda v, r: 100 * r["utilisation"],
    ("scheduling", "ttft_p99_vs_load"): lambda v, r: 100 * r["utilisation"],
    ("sizing", "by_tensor_parallel"): lambda v, r: r["best_tensor_parallel"],  # the verdict's degree
}


def _charts():
    for name in calculator_names():
        r = run(name, {})
        for sid, plot in (r.get("series") or {}).items():
            yield name, sid, r, plot


def test_every_chart_is_classified():
    seen = {(name, sid) for name, sid, _, _ in _charts()}
    assert seen - set(INPUT_AXES) - set(DERIVED_AXES) - OTHER_AXES == set()
    assert (set(INPUT_AXES) | set(DERIVED_AXES)) - seen == set()


@pytest.mark.parametrize(("name", "sid"), sorted(INPUT_AXES))
def test_a_chart_on_an_input_marks_the_current_value(name, sid):
    key = INPUT_AXES[(name, sid)]
    r = run(name, {})
    x = next(i["default"] for i in schema(name)["inputs"] if i["key"] == key)
    plot = r["series"][sid]
    xs = plot["x"]["values"]
    marks = [y for y in plot["y"] if sum(v is not None for v in y["values"]) == 1]
    assert marks, f"{name}.{sid}: no series marks the reader's {key}"
    assert any(xs[next(i for i, v in enumerate(y["values"]) if v is not None)] == x for y in marks)


@pytest.mark.parametrize(("name", "sid"), sorted(DERIVED_AXES))
def test_a_chart_on_a_derived_axis_marks_the_readers_point_once(name, sid):
    defaults = {i["key"]: i["default"] for i in schema(name)["inputs"]}
    r = run(name, {})
    x = DERIVED_AXES[(name, sid)](defaults, r)
    plot = r["series"][sid]
    marks = [y for y in plot["y"] if y.get("marker")]
    assert len(marks) == 1, f"{name}.{sid}: {len(marks)} markers"
    (i,) = [j for j, v in enumerate(marks[0]["values"]) if v is not None]
    assert plot["x"]["values"][i] == pytest.approx(x)

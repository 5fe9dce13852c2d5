"""Step overhead: the share of a decode step that is launch overhead, against batch, with and without CUDA graphs.

kernel time(B)  = max(memory time, compute time) of a decode step of B sequences (steptime.StepModel)
eager overhead  = kernels per step × t_k                                  (overhead.py)
graphs overhead = one replay (B ≤ full-graph size), piecewise graphs (B ≤ largest size), else eager
share           = overhead ÷ (kernel time + overhead)
padding         = the captured size B is rounded up to; its extra rows compute and are thrown away
graph memory    = largest size × 2 MB (SGLang 0.5.23's reserve for decode graphs, applied to vLLM's sizes)
"""

from __future__ import annotations

from ..catalog import model_presets, step_overheads
from ..schema import integer, mark, output, series, step
from .deployment import deployment_fields, efficiency_steps
from .overhead import (
    capture_sizes,
    graph_memory_bytes,
    kernels_per_step,
    padded_tokens,
    per_kernel_s,
    step_overhead,
)
from .steptime import StepModel, deployment, without_overhead
from .sharding import steps_for

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 640, 768, 1024, 2048)

SCHEMA = {
    "name": "step_overhead",
    "title": "Per-step overhead: kernel launches and CUDA graphs",
    "description": (
        "The time a decode step spends launching kernels, beyond its kernels' roofline time, for your model "
        "and hardware: eager (every kernel launched from the CPU, about 2.6 µs each, from vLLM PR #10058's "
        "measurement) and with CUDA graphs as vLLM v0.33.0 runs them (one full-graph replay per decode step up "
        "to max_num_seqs tokens, piecewise graphs up to the largest captured size, 512 tokens or 1,024 on "
        "data-center Blackwell, eager above it). CPU scheduling, sampling and detokenisation are taken as "
        "overlapped with the GPU, as vLLM v0.33.0's async scheduling does."
    ),
    "inputs": deployment_fields(0.8, 0.6, overhead_field=False)
    + [
        integer("batch_size", "Decode batch", 1, 1, 100_000, "sequences"),
        integer("context_tokens", "Context per sequence", 2048, 1, 10_000_000, "tokens"),
    ],
    "outputs": [
        output("kernels_per_step", "Kernels per step (eager)", "kernels", "integer"),
        output("launch_s_per_kernel", "Launch cost per kernel (t_k)", "s", "seconds"),
        output("kernel_time_s", "Decode step, kernels only", "s", "seconds"),
        output("eager_overhead_s", "Overhead per step, eager", "s", "seconds"),
        output("graphs_overhead_s", "Overhead per step, CUDA graphs", "s", "seconds"),
        output("eager_overhead_share", "Overhead share of the step, eager", "", "percent"),
        output("graphs_overhead_share", "Overhead share of the step, CUDA graphs", "", "percent"),
        output("graphs_speedup", "Step speed-up from CUDA graphs", "×", "number"),
        output("full_graph_tokens", "Decode steps up to this size replay one full graph", "tokens", "integer"),
        output("largest_graph_tokens", "Largest captured size (above it: eager)", "tokens", "integer"),
        output("padded_batch", "Captured size the batch is padded to", "sequences", "integer"),
        output("padding_fraction", "Padded rows in that graph", "", "percent"),
        output("graph_memory_bytes", "GPU memory for the decode graphs (SGLang's 2 MB per batch size)", "B", "bytes"),
        output(
            "break_even_batch_eager",
            "Smallest batch where eager overhead is under 5 % of the step",
            "sequences",
            "integer",
            words={0: "none up to 2,048"},
        ),
    ],
}


def _series(sm: StepModel, graphs, eager_s: float, context: int, batch: int) -> dict:
    eager, with_graphs = [], []
    batches = sorted({*BATCHES, batch})
    for b in batches:
        kernel = sm.decode(b, context).time_s
        eager.append(eager_s / (kernel + eager_s))
        g = graphs.decode_s(b)
        with_graphs.append(g / (kernel + g))
    ys = [("eager", "", eager), ("CUDA graphs (vLLM v0.33.0)", "", with_graphs)]
    title = "Launch overhead share of a decode step vs batch"
    plot = series(title, "Batch", "sequences", batches, ys, log_axes=True)
    mark(plot, "batch_size", batch, name=f"eager at your batch ({batch:,})")
    return mark(plot, "batch_size", batch, on=ys[1][0], name=f"CUDA graphs at your batch ({batch:,})")


def _graph_outputs(graphs, b: int) -> dict:
    padded = padded_tokens(b, graphs.max_capture_tokens)
    return {
        "full_graph_tokens": graphs.full_graph_tokens,
        "largest_graph_tokens": graphs.max_capture_tokens,
        "padded_batch": padded,
        "padding_fraction": (padded - b) / padded,
        "graph_memory_bytes": graph_memory_bytes(graphs.max_capture_tokens),
        "capture_sizes": len(capture_sizes(graphs.max_capture_tokens)),
    }


def compute(v: dict) -> dict:
    dep = without_overhead(deployment(v))
    sm = steps_for(v, dep)
    model, b, ctx = dep.model, v["batch_size"], v["context_tokens"]
    graphs = step_overhead(model, dep.accelerator, dep.num_gpus, "graphs")
    kernels = kernels_per_step(model, dep.num_gpus)
    eager_s, graph_s, kernel = kernels * per_kernel_s(), graphs.decode_s(b), sm.decode(b, ctx).time_s
    below = next((x for x in range(1, 2049) if eager_s / (sm.decode(x, ctx).time_s + eager_s) < 0.05), 0)
    top = graphs.max_capture_tokens
    notes = [f"batch {b:,} is above the largest captured size ({top:,}): it runs eager"] if b > top else []
    out = {
        "kernels_per_step": kernels,
        "launch_s_per_kernel": per_kernel_s(),
        "kernel_time_s": kernel,
        "eager_overhead_s": eager_s,
        "graphs_overhead_s": graph_s,
        "eager_overhead_share": eager_s / (kernel + eager_s),
        "graphs_overhead_share": graph_s / (kernel + graph_s),
        "graphs_speedup": (kernel + eager_s) / (kernel + graph_s),
        "break_even_batch_eager": below,
        "notes": notes,
        "series": {"overhead_share_vs_batch": _series(sm, graphs, eager_s, ctx, b)},
    }
    out.update(_graph_outputs(graphs, b))
    out["derivation"] = efficiency_steps(dep) + _launch_steps(model.num_layers, kernels) + _share_steps(b, ctx, out)
    return out


def _launch_steps(layers: int, kernels: int) -> list[dict]:
    m, t_k = step_overheads()["measured"], per_kernel_s()
    measured = kernels_per_step(model_presets()[m["model"]], 1)
    per_kernel = [(m["eager_s"], "s"), (m["graphs_s"], "s"), m["output_tokens"], measured]
    rows = [
        ("Kernels per step", "Σ layers (norms + attention + MLP [+ TP all-reduces]) + head and tail", "{} layers",
         [layers], kernels, "kernels"),
        ("Launch cost per kernel", "(eager − graphs) ÷ (passes × kernels), vLLM PR #10058, Llama 3.1 8B",
         "({} − {}) ÷ ({} × {})", per_kernel, t_k, "s"),
        ("Eager overhead", "kernels × t_k", "{} × {}", [kernels, (t_k, "s")], kernels * t_k, "s"),
    ]  # fmt: skip
    return [step(*row) for row in rows]


def _share_steps(b: int, ctx: int, out: dict) -> list[dict]:
    kernel, eager_s, graph_s = out["kernel_time_s"], out["eager_overhead_s"], out["graphs_overhead_s"]
    if b <= out["full_graph_tokens"]:
        kind = "one full-graph replay"
    elif b <= out["largest_graph_tokens"]:
        kind = "piecewise graphs: a replay a mixer layer and one more, and 2 mixer kernels a mixer layer"
    else:
        kind = "eager (above the largest graph)"
    share = [(eager_s, "s"), (kernel, "s"), (eager_s, "s")]
    rows = [
        ("Decode step, kernels only", "max(memory time, compute time)", "B = {}, T = {}", [b, (ctx, "tokens")],
         kernel, "s"),
        ("CUDA-graph overhead", kind, "B = {}", [b], graph_s, "s"),
        ("Overhead share, eager", "overhead ÷ (kernels + overhead)", "{} ÷ ({} + {})", share,
         out["eager_overhead_share"], "share"),
        ("Padded batch", "next captured size ≥ B", "B = {}", [b], out["padded_batch"], "sequences"),
    ]  # fmt: skip
    return [step(*row) for row in rows]

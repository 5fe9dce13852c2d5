"""Cold start: the time from "a replica is wanted" to its first token, stage by stage, from sizes and bandwidths.

  node provision     the reader's figure (0: the pod lands on a node that is already up)
  image pull         image bytes ÷ registry bandwidth + image bytes ÷ decompression rate (layers are
                     fetched, then unpacked; an assumption: containerd overlaps some of this)
  engine start       process start, imports, CUDA initialisation: the reader's figure
  weight load        checkpoint bytes (the model at its weight format: params.weight_bytes) read once from
                     storage at its bandwidth, and each GPU's tensor-parallel shard copied host → GPU over its
                     own link (host_links.toml); a streaming loader (Run:ai Model Streamer) overlaps the two,
                     so the slower sets the time; otherwise they add
  torch.compile      the reader's figure (a cold compile cache costs far more than a warm one)
  CUDA-graph capture the reader's figure; the count of sizes vLLM v0.33.0 captures is shown beside it
                     (overhead.capture_sizes: 1, 2, 4, multiples of 8 below 256, of 16 up to the largest)
  other engine init  memory profiling, KV-cache allocation, warm-up: the reader's figure
  first request      one prefill of the first prompt on the step-time model (steptime.StepModel)

Defaults: Llama 3.1 8B in BF16 on one H100 SXM, read from S3 by the Run:ai Model Streamer at the speed its
benchmark measured (run-ai/runai-model-streamer docs/src/benchmarks.md, streamer 0.6.0: 3.51 GiB/s from
S3, 1.03 GiB/s from gp3, 1.96 GiB/s from io2); engine figures from the vLLM start-up log quoted in vLLM
issue #20264 (2025-06-30: torch.compile 7.51 s from a warm cache, graph capture 17 s, engine init 34.11 s
in all, about 59 s to the first response).
"""

from __future__ import annotations

from ..catalog import host_links, kv_tiers
from ..errors import InputError
from ..params import weight_bytes
from ..schema import boolean, choice, expert_dtype, integer, number, output, series, step
from .deployment import deployment_fields
from .overhead import capture_sizes, max_capture_tokens
from .steptime import deployment
from .sharding import steps_for
from ..units import GIB

HOST_LINKS = host_links()
TIERS = kv_tiers()
RUNAI = "run-ai/runai-model-streamer docs/src/benchmarks.md (streamer 0.6.0, Llama 3 8B BF16, g5.12xlarge)"
# id -> (label, bytes/s, source)
STORAGE = {
    "s3": ("Amazon S3, streamed (measured 3.51 GiB/s)", 3.51 * GIB, RUNAI),
    "io2": ("AWS EBS io2 (measured 1.96 GiB/s)", 1.96 * GIB, RUNAI),
    "gp3": ("AWS EBS gp3 (measured 1.03 GiB/s)", 1.03 * GIB, RUNAI),
    "weka": ("Network file system, Weka (measured 4.28 GiB/s)", 4.28 * GIB, RUNAI),
    "ssd-gen4-x4": (
        "Local NVMe, PCIe 4.0 x4 (8 GB/s link ceiling)",
        TIERS["ssd-gen4-x4"]["bandwidth_bytes_per_s"],
        TIERS["ssd-gen4-x4"]["source"],
    ),
    "ssd-gen5-x4": (
        "Local NVMe, PCIe 5.0 x4 (16 GB/s link ceiling)",
        TIERS["ssd-gen5-x4"]["bandwidth_bytes_per_s"],
        TIERS["ssd-gen5-x4"]["source"],
    ),
    "ethernet-100g": (
        "Network, 100 GbE line rate (12.5 GB/s)",
        TIERS["ethernet-100g"]["bandwidth_bytes_per_s"],
        TIERS["ethernet-100g"]["source"],
    ),
    "set": ("The bandwidth below", None, "the reader's figure"),
}
STAGES = ("node", "image", "engine_start", "weights", "compile", "graphs", "init", "first_request")
STAGE_KEY = (
    "Stage: 1 node provision, 2 image pull, 3 engine start, 4 weight load, 5 torch.compile, "
    "6 CUDA-graph capture, 7 other engine init, 8 first request"
)
STAGE_NAMES = (
    "node provision",
    "image pull",
    "engine start",
    "weight load",
    "torch.compile",
    "CUDA-graph capture",
    "other engine init",
    "first request",
)


FIELDS = deployment_fields(0.8, 0.6) + [
    number(
        "node_provision_s",
        "Node provision",
        0.0,
        0.0,
        3600.0,
        "s",
        "Time for a new GPU node to join the cluster; 0 when the pod lands on a node that is already up. "
        "Measure yours: it depends on the cloud, the instance and the node image.",
    ),
    number(
        "image_gb",
        "Container image (compressed)",
        10.0,
        0.0,
        200.0,
        "GB",
        "Bytes pulled from the registry; 0 when the image is already on the node. The default is an "
        "assumption for the example, not a measurement: read yours from the registry's manifest.",
    ),
    number("registry_gbps", "Registry pull bandwidth", 1.0, 0.001, 100.0, "GB/s"),
    number(
        "decompress_gbps",
        "Layer decompression rate",
        1.0,
        0.001,
        100.0,
        "GB/s",
        "Unpacking the pulled layers; taken as following the pull, not overlapping it.",
    ),
    number(
        "engine_start_s",
        "Engine start (process, imports, CUDA init)",
        24.0,
        0.0,
        3600.0,
        "s",
        "vLLM issue #20264: about 59 s to the first response against 34.11 s of logged engine init and "
        "0.90 s of model loading, about 24 s unaccounted for in the log.",
    ),
    choice(
        "storage",
        "Weights stored on",
        "s3",
        [(k, s[0]) for k, s in STORAGE.items()],
        "Measured rates are the Run:ai Model Streamer benchmark's (run-ai/runai-model-streamer, "
        "docs/src/benchmarks.md); link ceilings are upper bounds a drive or a protocol reads less than.",
    ),
    number("storage_gbps", "Storage bandwidth (when set)", 2.0, 0.001, 1000.0, "GB/s"),
    choice("host_link", "Host → GPU link", "pcie5-x16", [(k, v["name"]) for k, v in HOST_LINKS.items()]),
    boolean(
        "streamed",
        "Stream storage → GPU (overlap the read and the copy)",
        True,
        "A streaming loader (Run:ai Model Streamer, vLLM --load-format runai_streamer) copies tensors to "
        "the GPU while others are still being read: the slower stage sets the time. Off: read, then copy.",
    ),
    number(
        "compile_s",
        "torch.compile",
        7.51,
        0.0,
        7200.0,
        "s",
        "vLLM issue #20264: 7.51 s with a warm compile cache; a cold cache compiles the graphs afresh.",
    ),
    number(
        "graph_capture_s",
        "CUDA-graph capture",
        17.0,
        0.0,
        3600.0,
        "s",
        "vLLM issue #20264: 'Graph capturing finished in 17 secs'; 0 with enforce_eager.",
    ),
    number(
        "init_other_s",
        "Other engine init (profile, KV cache, warm-up)",
        9.6,
        0.0,
        3600.0,
        "s",
        "vLLM issue #20264: init engine 34.11 s, less its 7.51 s compile and 17 s capture.",
    ),
    integer("first_prompt_tokens", "First request's prompt", 512, 1, 1_000_000, "tokens"),
]


SCHEMA = {
    "name": "cold_start",
    "title": "Cold start: from zero to the first token",
    "description": (
        "The stages a new replica goes through before it answers, in order: node provision, image pull (bytes ÷ "
        "registry bandwidth, then ÷ decompression rate), engine start, weight load (the checkpoint read once "
        "from storage; each GPU's tensor-parallel shard copied over its own host link; streamed, the slower of "
        "the two; not streamed, their sum), torch.compile, CUDA-graph capture, the rest of engine init, and the "
        "first request's prefill on the step-time model. Stages run one after another. Node, engine and "
        "compile times are the reader's figures (defaults from one published vLLM log); the weight load is "
        "computed from the model, its format and the bandwidths."
    ),
    "inputs": FIELDS,
    "outputs": [
        output("total_s", "Time to first token from zero", "s", "seconds"),
        output("ready_s", "Replica ready (before the first request)", "s", "seconds"),
        output("node_s", "Node provision", "s", "seconds"),
        output("image_s", "Image pull and unpack", "s", "seconds"),
        output("engine_start_s", "Engine start", "s", "seconds"),
        output("weights_s", "Weight load", "s", "seconds"),
        output("storage_read_s", "Weights read from storage", "s", "seconds"),
        output("host_copy_s", "Host → GPU copy of one GPU's shard", "s", "seconds"),
        output("compile_s", "torch.compile", "s", "seconds"),
        output("graphs_s", "CUDA-graph capture", "s", "seconds"),
        output("init_s", "Other engine init", "s", "seconds"),
        output("first_request_s", "First request's prefill", "s", "seconds"),
        output("checkpoint_bytes", "Checkpoint (weights at their format)", "B", "bytes"),
        output("storage_bytes_per_s", "Storage bandwidth", "B/s", "rate"),
        output("host_link_bytes_per_s", "Host → GPU bandwidth per GPU", "B/s", "rate"),
        output("capture_sizes", "Batch sizes in vLLM v0.33.0's default capture list", "sizes", "integer"),
        output("largest_capture_size", "Largest captured size (tokens)", "tokens", "integer"),
        output("weights_share", "Weight load ÷ time to first token", "", "percent"),
        output("weights_bound", "Weight load limited by (1 storage, 0 host link)", "", "number"),
    ],
}


def storage_bandwidth(v: dict) -> float:
    bw = STORAGE[v["storage"]][1]
    return v["storage_gbps"] * 1e9 if bw is None else bw


def breakdown(v: dict) -> dict:
    """Each stage's seconds (STAGES order) and the quantities they come from."""
    dep = deployment(v)
    ckpt = weight_bytes(v["model"], v["weight_dtype"], "weight_dtype", expert_dtype(v))
    store = storage_bandwidth(v)
    link = HOST_LINKS[v["host_link"]]["bandwidth_bytes_per_s"]
    read_s, copy_s = ckpt / store, ckpt / v["num_gpus"] / link
    weights_s = max(read_s, copy_s) if v["streamed"] else read_s + copy_s
    gb = v["image_gb"] * 1e9
    image_s = gb / (v["registry_gbps"] * 1e9) + gb / (v["decompress_gbps"] * 1e9)
    first = steps_for(v, dep).prefill([v["first_prompt_tokens"]]).time_s
    stages = dict(
        zip(
            STAGES,
            (
                v["node_provision_s"],
                image_s,
                v["engine_start_s"],
                weights_s,
                v["compile_s"],
                v["graph_capture_s"],
                v["init_other_s"],
                first,
            ),
        )
    )
    largest = max_capture_tokens(dep.accelerator)
    return {
        "stages": stages,
        "checkpoint": ckpt,
        "storage": store,
        "link": link,
        "read_s": read_s,
        "copy_s": copy_s,
        "largest": largest,
        "sizes": len(capture_sizes(largest)),
    }


def total_s(v: dict) -> float:
    return sum(breakdown(v)["stages"].values())


def compute(v: dict) -> dict:
    if v["storage"] == "set" and v["storage_gbps"] <= 0:
        raise InputError("storage_gbps", "a bandwidth above 0 GB/s")
    b = breakdown(v)
    s = b["stages"]
    total = sum(s.values())
    derivation = _derivation(v, b, s, total)
    notes = [
        f"Storage: {STORAGE[v['storage']][2]}.",
        f"vLLM v0.33.0's default list has {b['sizes']} batch sizes up to {b['largest']} tokens on this "
        "accelerator (cudagraph_capture_sizes), captured in FULL_AND_PIECEWISE mode; the capture time is "
        "the reader's figure, not computed from the count.",
    ]
    notes += _fit_note(v, b)
    return {
        "total_s": total,
        "ready_s": total - s["first_request"],
        "node_s": s["node"],
        "image_s": s["image"],
        "engine_start_s": s["engine_start"],
        "weights_s": s["weights"],
        "storage_read_s": b["read_s"],
        "host_copy_s": b["copy_s"],
        "compile_s": s["compile"],
        "graphs_s": s["graphs"],
        "init_s": s["init"],
        "first_request_s": s["first_request"],
        "checkpoint_bytes": b["checkpoint"],
        "storage_bytes_per_s": b["storage"],
        "host_link_bytes_per_s": b["link"],
        "capture_sizes": b["sizes"],
        "largest_capture_size": b["largest"],
        "weights_share": s["weights"] / total if total else 0.0,
        "weights_bound": 1.0 if b["read_s"] >= b["copy_s"] else 0.0,
        "derivation": derivation,
        "series": _plots(s),
        "notes": notes,
    }


def _fit_note(v: dict, b: dict) -> list[str]:
    """A note when the weights alone exceed one GPU's memory: the times are computed, the replica never loads."""
    per_gpu, memory = b["checkpoint"] / v["num_gpus"], deployment(v).accelerator.memory_bytes
    if per_gpu <= memory:
        return []
    return [
        f"The weights alone, {per_gpu / 1e9:.1f} GB per GPU, exceed one GPU's {memory / 1e9:.1f} GB: this replica "
        "cannot load at all, whatever its cold start; give it more GPUs (num_gpus) or a smaller weight format."
    ]


def _derivation(v: dict, b: dict, s: dict, total: float) -> list[dict]:
    return _weight_steps(v, b, s) + [
        step(
            "Image pull",
            "image ÷ registry bandwidth + image ÷ decompression rate",
            "{} ÷ {} + {} ÷ {}",
            [
                (v["image_gb"] * 1e9, "B"),
                (v["registry_gbps"] * 1e9, "B/s"),
                (v["image_gb"] * 1e9, "B"),
                (v["decompress_gbps"] * 1e9, "B/s"),
            ],
            s["image"],
            "s",
        ),
        step(
            "First request",
            "one prefill of the first prompt (step-time model)",
            "prefill({})",
            [(v["first_prompt_tokens"], "tokens")],
            s["first_request"],
            "s",
        ),
        step(
            "Time to first token from zero",
            "sum of the stages, one after another",
            " + ".join("{}" for _ in STAGES),
            [(s[k], "s") for k in STAGES],
            total,
            "s",
        ),
    ]


def _plots(s: dict) -> dict:
    plot = series(
        "Cold start, stage by stage",
        STAGE_KEY,
        "",
        list(range(1, len(STAGES) + 1)),
        [("seconds", "s", [s[k] for k in STAGES])],
        kind="bar",
    )
    cumulative, t = [], 0.0
    for k in STAGES:
        t += s[k]
        cumulative.append(t)
    timeline = series(
        "Cold start: time elapsed at the end of each stage",
        STAGE_KEY,
        "",
        list(range(1, len(STAGES) + 1)),
        [("elapsed", "s", cumulative)],
        kind="bar",
    )
    return {"stages": plot, "timeline": timeline}


def _weight_steps(v: dict, b: dict, s: dict) -> list[dict]:
    mode = "max" if v["streamed"] else "+"
    return [
        step(
            "Checkpoint",
            "parameters × bytes per parameter at the weight format",
            "{}",
            [(b["checkpoint"], "B")],
            b["checkpoint"],
            "B",
        ),
        step(
            "Read from storage",
            "checkpoint ÷ storage bandwidth",
            "{} ÷ {}",
            [(b["checkpoint"], "B"), (b["storage"], "B/s")],
            b["read_s"],
            "s",
        ),
        step(
            "Host → GPU copy",
            "checkpoint ÷ GPUs ÷ link bandwidth (each GPU its own shard, in parallel)",
            "{} ÷ {} ÷ {}",
            [(b["checkpoint"], "B"), v["num_gpus"], (b["link"], "B/s")],
            b["copy_s"],
            "s",
        ),
        step(
            "Weight load",
            "max(read, copy) streamed; read + copy otherwise",
            f"{mode}({{}}, {{}})",
            [(b["read_s"], "s"), (b["copy_s"], "s")],
            s["weights"],
            "s",
        ),
    ]

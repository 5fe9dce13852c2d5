"""KV transfer between a prefill and a decode replica: one prompt's KV over the link, with and without
layer-wise overlap, against the prefill that made it.

Bytes per prompt = the KV the model stores for that many tokens (kv_cache.kv_bytes_per_sequence:
full-attention layers grow with the prompt, sliding-window layers stop at the window, MLA stores its
latent) at the KV format. Time = bytes ÷ (link bandwidth per direction × NICs used in parallel), the
link from interconnects.toml (or the reader's). Layer-wise overlap (engine/disagg.py
exposed_transfer_s): each layer's KV leaves as soon as that layer's prefill is done, so the exposed
part is one layer's share T ÷ L when the link keeps up with the prefill (T ≤ prefill time), and
T − prefill × (L − 1)/L when it does not. The prefill time is the step model's, one prompt alone.
No per-transfer setup latency, no protocol overhead: the bandwidth is the link's peak.
"""

from __future__ import annotations

from ..catalog import links
from ..engine.disagg import exposed_transfer_s, transfer_s
from ..errors import InputError
from ..schema import boolean, choice, integer, mark, number, output, series, step
from .deployment import deployment_fields
from .kv_cache import kv_bytes_per_sequence
from ..engine.steps import StepTimes
from .steptime import deployment
from .sharding import steps_for

GRID = [256 * 2 ** k for k in range(10)]  # 256 … 131,072 tokens


def link_choices() -> list[tuple[str, str]]:
    return [(k, row["name"]) for k, row in links().items()] + [("custom", "Custom: the bandwidth below")]


def link_fields(default: str = "ib-ndr-400") -> list[dict]:
    return [
        choice("link", "Link carrying the KV", default, link_choices(),
               "Per-direction bandwidths from the site's interconnect table. NVLink applies only when prefill and "
               "decode GPUs share one NVLink domain (an NVL72 rack); between servers it is the NIC."),
        number("custom_link_gbps", "Custom link bandwidth (when chosen)", 100.0, 0.1, 100_000.0, "Gb/s",
               "Per direction, in gigabits per second (100 GbE: 100; a 400G NIC: 400)."),
        integer("nics", "Links used in parallel", 1, 1, 64, "links",
                "In a server with one NIC per GPU, a replica on 8 GPUs whose ranks each send their own KV shard "
                "uses 8. Not for MLA under tensor parallelism: every rank holds the whole latent, so use 1."),
    ]


def link_bytes_per_s(v: dict) -> float:
    """The link's bandwidth per direction × links in parallel, in bytes/s."""
    per = v["custom_link_gbps"] * 1e9 / 8 if v["link"] == "custom" else links()[v["link"]]["bandwidth_bytes_per_s"]
    return per * v["nics"]


def prompt_kv_bytes(dep, tokens: int) -> float:
    """KV bytes one prompt of `tokens` tokens leaves behind (every layer, the whole model)."""
    return kv_bytes_per_sequence(dep.model, tokens, dep.kv_elem_bytes)


def prefill_alone_s(times: StepTimes, tokens: int) -> float:
    """One prompt prefilled alone in one step, as the engine simulator prices it (overhead included)."""
    return times.mixed(0, 0.0, [(0, tokens)])


SCHEMA = {
    "name": "kv_transfer",
    "title": "KV transfer: one prompt's KV from prefill to decode",
    "description": ("The time to move one prompt's KV cache from the prefill replica to the decode replica: "
                    "the KV bytes the model stores for the prompt, at the KV format, divided by the link's "
                    "per-direction bandwidth times the links used in parallel, with and without layer-wise overlap "
                    "(each layer's KV sent as soon as it is computed, so only the last layer's share is exposed "
                    "while the link keeps up with the prefill). Compared with the prefill itself, one prompt "
                    "alone on the prefill replica, from the roofline step model scaled by the efficiency factors. "
                    "Assumptions: the link's peak bandwidth, no setup latency or protocol overhead, no other "
                    "transfer sharing the link."),
    "inputs": deployment_fields(0.8, 0.6, {"num_gpus": {"label": "GPUs per prefill replica (tensor parallel)"}})
    + [integer("prompt_tokens", "Prompt length", 8192, 1, 1_000_000, "tokens")]
    + link_fields()
    + [boolean("overlap", "Layer-wise overlap", True,
               "Send each layer's KV while the next layer computes. vLLM v0.33.0's NixlConnector does not (its "
               "decode side reads the KV once the prefill is done).")],
    "outputs": [
        output("kv_bytes_per_prompt", "KV of the prompt", "B", "bytes"),
        output("kv_bytes_per_token", "KV per prompt token", "B", "bytes"),
        output("link_gb_per_s", "Link bandwidth used (per direction, all links)", "GB/s", "number"),
        output("transfer_s", "Transfer after the prefill (no overlap)", "s", "seconds"),
        output("exposed_overlap_s", "Exposed with layer-wise overlap", "s", "seconds"),
        output("exposed_s", "Exposed as set (overlap on or off)", "s", "seconds"),
        output("prefill_s", "The prefill, one prompt alone", "s", "seconds"),
        output("transfer_over_prefill", "Transfer ÷ prefill", "", "percent"),
        output("break_even_gbps", "Link at which the transfer takes as long as the prefill", "Gb/s", "number"),
    ],
}


def _curves(dep, model: StepTimes, v: dict, bw: float, grid: list[int]) -> dict:
    layers = dep.model.num_layers
    plain, hidden, prefill = [], [], []
    for n in grid:
        whole, busy = transfer_s(prompt_kv_bytes(dep, n), bw), prefill_alone_s(model, n)
        plain.append(whole)
        hidden.append(exposed_transfer_s(whole, busy, layers, True))
        prefill.append(busy)
    plot = series("KV transfer against prompt length", "Prompt length", "tokens", grid,
                  [("Transfer, no overlap", "s", plain), ("Exposed, layer-wise overlap", "s", hidden),
                   ("Prefill, one prompt", "s", prefill)], log_axes=True)
    return mark(plot, "prompt_tokens", v["prompt_tokens"])


def compute(v: dict) -> dict:
    dep = deployment(v)
    if dep.model.max_context_tokens and v["prompt_tokens"] > dep.model.max_context_tokens:
        raise InputError("prompt_tokens", f"at most the model's context, {dep.model.max_context_tokens:,} tokens")
    model, n, bw = StepTimes(steps_for(v, dep)), v["prompt_tokens"], link_bytes_per_s(v)
    layers = dep.model.num_layers
    kv = prompt_kv_bytes(dep, n)
    whole, busy = transfer_s(kv, bw), prefill_alone_s(model, n)
    hidden = exposed_transfer_s(whole, busy, layers, True)
    out = {
        "kv_bytes_per_prompt": kv,
        "kv_bytes_per_token": kv / n,
        "link_gb_per_s": bw / 1e9,
        "transfer_s": whole,
        "exposed_overlap_s": hidden,
        "exposed_s": hidden if v["overlap"] else whole,
        "prefill_s": busy,
        "transfer_over_prefill": whole / busy,
        "break_even_gbps": kv / busy * 8 / 1e9,
    }
    out["notes"] = [
        ("the link keeps up with the prefill: with overlap only the last layer's share is exposed" if whole <= busy
         else "the link is slower than the prefill: even with overlap the transfer adds more than one layer's share")
    ]
    out["derivation"] = [
        step("KV of the prompt", "kv(P) at the KV format", "kv({})", [(n, "tokens")], kv, "B"),
        step("Link bandwidth", "per-direction bandwidth × links", "{} × {}",
             [(bw / v["nics"], "B/s"), v["nics"]], bw, "B/s"),
        step("Transfer, no overlap", "T = kv ÷ bandwidth", "{} ÷ {}", [(kv, "B"), (bw, "B/s")], whole, "s"),
        step("Prefill, one prompt alone", "step model", "prefill({})", [(n, "tokens")], busy, "s"),
        step("Exposed with layer-wise overlap", "max(T ÷ L, T − prefill × (L − 1) ÷ L)",
             "max({} ÷ {}, {} − {} × ({} − 1) ÷ {})",
             [(whole, "s"), layers, (whole, "s"), (busy, "s"), layers, layers], hidden, "s"),
    ]
    grid = sorted(set(g for g in GRID if not dep.model.max_context_tokens or g <= dep.model.max_context_tokens) | {n})
    out["series"] = {"transfer_vs_prompt": _curves(dep, model, v, bw, grid)}
    return out

"""The ring all-reduce itself: how long one takes on a given link, wiring and server layout.

Physics only (the model and its sources are in allreduce.py's docstring); allreduce.py turns
it into a calculator with a schema, a derivation and plots.
"""
from __future__ import annotations

from ..errors import InputError
from ..presets import _load

LINKS = {e["id"]: e for e in _load("interconnects.toml")["link"]}
TOPOLOGY_RULE = {"switched": "switched: the chip's whole bandwidth", "mesh": "mesh: min(total, (n − 1) × one link)",
                 "torus": "torus: min(total, 2 × one link), one dimension"}


def ring_allreduce_time(message_bytes: float, n: int, link_bytes_per_s: float,
                        hop_latency_s: float, base_latency_s: float = 0.0) -> float:
    """Seconds for one ring all-reduce of `message_bytes` across n ranks (0 when n == 1)."""
    if n <= 1:
        return 0.0
    return base_latency_s + 2 * (n - 1) * hop_latency_s + 2 * (n - 1) / n * message_bytes / link_bytes_per_s


def ring_bandwidth(acc, n: int) -> float | None:
    """Per-direction bandwidth rings over n chips can use on the accelerator's scale-up links."""
    total, link = acc.scale_up_bandwidth_bytes_per_s, acc.scale_up_link_bandwidth_bytes_per_s
    if not total or not link:
        return total
    if acc.scale_up_topology == "mesh":
        return min(total, max(n - 1, 1) * link)
    if acc.scale_up_topology == "torus":
        return min(total, 2 * link)
    return total


def bus_bandwidth(message_bytes: float, n: int, time_s: float) -> float:
    """NCCL-tests bus bandwidth: algbw × 2(n − 1)/n, algbw = bytes ÷ time."""
    return message_bytes / time_s * 2 * (n - 1) / n if time_s > 0 else 0.0


def _scale_up(v: dict, n: int, field: str, why: str) -> float:
    acc = v["hardware"]
    bw = ring_bandwidth(acc, n)
    if not bw:
        raise InputError(field, f"{acc.name} lists no scale-up link bandwidth{why}")
    return bw


def scale_up_ring(v: dict, n: int) -> dict:
    """The ring: bandwidth (per direction, before efficiency), latency terms and names."""
    hop = v["latency_per_hop_us"] * 1e-6
    out = {"nodes": 1, "net_steps": 0, "net_hop": 0.0, "ovh": 0.0, "inter_bw": None, "rule": ""}
    if v["link"] == "accelerator":
        acc = v["hardware"]
        bw = _scale_up(v, n, "link", "; pick a link preset or custom")
        rule = TOPOLOGY_RULE[acc.scale_up_topology or "switched"]
        if not acc.scale_up_link_bandwidth_bytes_per_s and acc.scale_up_topology in ("mesh", "torus"):
            rule = f"{acc.scale_up_topology}: per-link figure not sourced, chip total used (upper bound)"
        return {**out, "intra_bw": bw, "hop": hop, "name": f"{acc.name} scale-up", "rule": rule}
    if v["link"] == "custom":
        return {**out, "intra_bw": v["link_bandwidth_gb_per_s"] * 1e9, "hop": hop, "name": "custom link"}
    e = LINKS[v["link"]]
    if e.get("kind") != "network":
        return {**out, "intra_bw": e["bandwidth_bytes_per_s"], "hop": e["latency_per_hop_s"], "name": e["name"]}
    g = v["gpus_per_node"]
    nodes = -(-n // g) if n > 1 else 1
    nics = v["nics_per_node"] or g
    intra = (_scale_up(v, n if nodes == 1 else g, "gpus_per_node",
                       " for the steps inside a server; set GPUs per server to 1") if g > 1 else None)
    return {"intra_bw": intra, "hop": hop, "nodes": nodes, "net_steps": 2 * (nodes - 1) if n > 1 else 0,
            "net_hop": e["latency_per_hop_s"], "ovh": e.get("net_overhead_per_step_s", 0.0),
            "inter_bw": nics * e["bandwidth_bytes_per_s"], "nics": nics,
            "name": f"{e['name']} between servers of {g}" if nodes > 1 else f"{v['hardware'].name} scale-up "
                                                                             f"(the ring fits in one server)",
            "rule": ""}


def ring_time(msg: float, n: int, r: dict, eff: float, base: float) -> tuple[float, float, float]:
    """(time, bandwidth used, total hop latency) for one all-reduce on ring r."""
    if n <= 1:
        return 0.0, (r["intra_bw"] or r["inter_bw"]) * eff, 0.0
    intra_steps = 2 * (n - 1) - r["net_steps"]
    if r["nodes"] == 1:
        bw, lat = r["intra_bw"] * eff, intra_steps * r["hop"]
    else:
        bw = r["inter_bw"] * eff if intra_steps == 0 else min(r["intra_bw"], r["inter_bw"]) * eff
        lat = r["net_steps"] * r["net_hop"] + intra_steps * max(r["hop"], r["ovh"])
    return base + lat + 2 * (n - 1) / n * msg / bw, bw, lat

"""One all-reduce: how long it takes on a given link, wiring, server layout, algorithm and protocol.

Physics only (the model and its sources are in allreduce.py's docstring); allreduce.py turns
it into a calculator with a schema, a derivation and plots. NCCL's constants are in
interconnects.toml's [nccl] table (NCCL v2.30.7-1, src/graph/tuning.cc).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..catalog import links, nccl, socket_link
from ..errors import InputError
from ..schema import choice

LINKS = links()
NCCL = nccl()
SOCKET_LINK = socket_link()
HOSTS = {h["id"]: h for h in SOCKET_LINK["hosts"]}
PROTOCOLS = ("ll", "ll128", "simple")
PROTOCOL_NAMES = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
TOPOLOGY_RULE = {
    "switched": "switched: the chip's whole bandwidth",
    "mesh": "mesh: min(total, (n − 1) × one link)",
    "torus": "torus: min(total, min(n − 1, 2) × one link), one dimension",
}


@dataclass(frozen=True)
class Ring:
    """The ring NCCL's cost model sees: the links its steps cross, and how many steps leave a server.
    Bandwidths are per direction per GPU, before the link efficiency."""

    name: str  # what the reader sees: "<chip> scale-up", "<link> between servers of 8"
    intra_bw: float | None  # the steps inside a server; None with one GPU per server
    domain: int | None = None  # most GPUs the link joins; None = no limit
    hw: str = "nvlink"  # NCCL's hardware class of the in-server steps: nvlink or pci
    arch: str | None = None  # NCCL's architecture for llMaxBw and NVLS; None = not modelled
    switched: bool = True  # through a switch (NVLS needs one)
    rule: str = ""  # how intra_bw follows from the chip's links (the accelerator's link only)
    nodes: int = 1  # servers the ring spans
    net_steps: int = 0  # steps that cross servers
    inter_bw: float | None = None  # across servers: NICs × one NIC's bandwidth
    ovh: float = 0.0  # the network's post overhead per step, s
    vendor: str = "intel"  # the host CPU's vendor: NCCL's LL cap across servers (and ovh) depend on it
    ppn1: bool = False  # one GPU per server: NCCL charges the Tree network latency
    socket_bw: float | None = None  # PCIe in a server past one CPU socket's GPUs: the link between the sockets
    socket_gpus: int = 0  # the GPUs behind each socket, where socket_bw is set


@dataclass(frozen=True)
class Transfer:
    """One collective on a ring (or a direct algorithm): its time and what it is made of."""

    time: float  # s
    bw: float  # B/s each GPU moves at, after efficiency and the protocol's derating
    latency: float  # s, base latency included
    volume: float  # bytes each GPU receives
    protocol: str = ""  # NCCL protocol; "" for the direct algorithms
    steps: int = 0  # synchronisation steps the latency is made of


def ring_allreduce_time(
    message_bytes: float, n: int, link_bytes_per_s: float, hop_latency_s: float, base_latency_s: float = 0.0
) -> float:
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
    if acc.scale_up_topology == "torus":  # a ring of two has the one link between the pair
        return min(total, min(max(n - 1, 1), 2) * link)
    return total


def bus_bandwidth(message_bytes: float, n: int, time_s: float) -> float:
    """NCCL-tests bus bandwidth: algbw × 2(n − 1)/n, algbw = bytes ÷ time."""
    return message_bytes / time_s * 2 * (n - 1) / n if time_s > 0 else 0.0


def _scale_up(v: dict, n: int, field: str, why: str) -> float:
    acc = v["hardware"]
    bw = ring_bandwidth(acc, n) or (_link_bandwidth(LINKS[acc.pcie_link]) if acc.pcie_link else None)
    if not bw:
        raise InputError(field, f"{acc.name} lists no scale-up link bandwidth{why}")
    return bw


def _check_domain(n: int, domain: int | None, name: str) -> None:
    if domain and n > domain:
        raise InputError(
            "num_gpus",
            f"must be at most {domain} on {name}, which joins at most {domain} GPUs; "
            "pick a network link (servers of GPUs) or a larger scale-up domain",
        )


def _topology_rule(acc, arch: str | None) -> str:
    rule = TOPOLOGY_RULE[acc.scale_up_topology or "switched"]
    if not acc.scale_up_link_bandwidth_bytes_per_s and acc.scale_up_topology in ("mesh", "torus"):
        rule = f"{acc.scale_up_topology}: per-link figure not sourced, chip total used (upper bound)"
    if not arch:
        rule += "; NCCL's NVLink latencies applied, no llMaxBw cap (this chip's own library is not modelled)"
    return rule


def _network_ring(v: dict, n: int, chip: Ring, e: dict) -> Ring:
    """Servers of gpus_per_node joined by a network link: in-server steps on the chip's own link, the server cut to the
    GPUs that link joins (its scale-up domain, as the serving calculators cut it, sharding.server_gpus: an H100 PCIe's
    bridged pairs are servers of 2, the PCIe between pairs not modelled). A PCIe ring crosses its servers' CPU sockets'
    link (_across_sockets): in one server once each way a channel; across servers it runs NIC to NIC through each,
    once a channel, and where NCCL alternates its channels' direction (crossNic: more than one NIC a server, assumed
    under both sockets; not through AMD CPUs) the link carries half of them each way, so twice its figure binds
    (interconnects.toml [socket_link]; NCCL's search read, not run)."""
    acc, asked, vendor = v["hardware"], v["gpus_per_node"], host_cpu(v)["vendor"]
    domain = scale_up_domain(acc)
    g = min(asked, domain) if domain else asked
    cut = f" (cut from {asked}: the GPUs {acc.name}'s {link_name(acc)} joins)" if g < asked else ""
    nodes = -(-n // g) if n > 1 else 1
    intra = (
        _scale_up(
            v, n if nodes == 1 else g, "gpus_per_node", " for the steps inside a server; set GPUs per server to 1"
        )
        if g > 1
        else None
    )
    name = (
        f"{e['name']} between servers of {g}{cut}"
        if nodes > 1
        else f"{v['hardware'].name} scale-up (the ring fits in one server)"
    )
    in_server = replace(chip, intra_bw=intra)
    if pcie_only(acc):  # NCCL alternates entry NICs only with more than one a server (search.cc lines 1080-1084)
        alternating = nodes > 1 and (v["nics_per_node"] or g) > 1
        in_server = _across_sockets(in_server, v, n if nodes == 1 else g, LINKS[acc.pcie_link], alternating)
    return replace(
        in_server,
        name=name,
        nodes=nodes,
        net_steps=2 * (nodes - 1) if n > 1 else 0,
        ppn1=g == 1,
        ovh=NCCL["net_overhead_s"][vendor],
        vendor=vendor,
        inter_bw=(v["nics_per_node"] or g) * e["bandwidth_bytes_per_s"],
    )


def scale_up_ring(v: dict, n: int) -> Ring:
    """The ring over n GPUs on the chosen link: the accelerator's own, a link preset, a custom
    bandwidth, or a network link between servers."""
    acc = v["hardware"]
    arch = NCCL["arch"].get(acc.id)
    chip = Ring(f"{acc.name} scale-up", None, arch=arch, switched=(acc.scale_up_topology or "switched") == "switched")
    if acc.pcie_link:  # its GPUs talk over PCIe, a reader's own bandwidth for it too: PCI's latencies
        chip = replace(chip, hw="pci", switched=False)  # in a network ring's server steps too
        if pcie_only(acc) and v["link"] == "accelerator":
            return _preset_ring(chip, LINKS[acc.pcie_link], v, n)
    if v["link"] == "accelerator":
        return replace(
            chip,
            intra_bw=_scale_up(v, n, "link", "; pick a link preset or custom"),
            rule=_topology_rule(acc, arch),
            domain=acc.scale_up_domain,
        )
    if v["link"] == "custom":
        return replace(chip, name="custom link", intra_bw=v["link_bandwidth_gb_per_s"] * 1e9)
    e = LINKS[v["link"]]
    if e.get("kind") == "network":
        return _network_ring(v, n, chip, e)
    return _preset_ring(chip, e, v, n)


def pcie_only(acc) -> bool:
    """Whether the chip's GPUs talk over PCIe: it lists no scale-up link and names the PCIe link (pcie_link)."""
    return not acc.scale_up_bandwidth_bytes_per_s and bool(acc.pcie_link)


def joins_gpus(acc) -> bool:
    """Whether the chip's GPUs reach each other over a link the core prices: a scale-up link, or PCIe peer to peer
    (GeForce cards have neither)."""
    return bool(acc.scale_up_bandwidth_bytes_per_s) or pcie_only(acc)


def own_link_bandwidth(acc) -> float:
    """The chip's own link per GPU, per direction: its scale-up total, or its PCIe link as NCCL models it; 0: none."""
    if pcie_only(acc):
        return _link_bandwidth(LINKS[acc.pcie_link])
    return acc.scale_up_bandwidth_bytes_per_s or 0.0


def scale_up_domain(acc) -> int | None:
    """The most GPUs the chip's own link joins: its scale-up domain, or its PCIe link's (a server's switches)."""
    if pcie_only(acc):
        return LINKS[acc.pcie_link].get("domain_gpus")
    return acc.scale_up_domain


def link_name(acc) -> str:
    """What joins the chip's GPUs in one server, for messages: its scale-up link, or PCIe where it has none."""
    if pcie_only(acc):
        return LINKS[acc.pcie_link]["name"].split(" (")[0]
    return "scale-up link"


def host_cpu_field() -> dict:
    """The input that picks the host CPU, which sets the socket link a PCIe server's collectives cross."""
    return choice(
        "host_cpu",
        "Host CPU",
        SOCKET_LINK["default"],
        [(h["id"], h["name"]) for h in SOCKET_LINK["hosts"]],
        "NCCL v2.30.7's figures that follow the host CPU. Across servers, its vendor's: each in-server step's network "
        "overhead (AMD 2 µs, Intel 1) and LL's bandwidth cap. On PCIe (a chip without a scale-up link, L40S or L4, or "
        "a PCIe link preset), in a server assumed two-socket with 4 GPUs behind each: past 4 GPUs a collective, "
        "and a pipeline stage's send from one socket's GPUs to the other's, cross the link between the sockets, at "
        "this figure in one server, at twice it in a ring across servers with several NICs on an Intel host (NCCL "
        "alternates its channels' direction), at most (NCCL's search may land a little lower). Pick a One socket host "
        "if all your GPUs sit behind one CPU's PCIe switches.",
    )


def host_cpu(v: dict) -> dict:
    """The server's host CPU ([socket_link] hosts): the reader's, or the default; one without a bandwidth holds every
    GPU behind one socket."""
    return HOSTS[v.get("host_cpu") or SOCKET_LINK["default"]]


def _across_sockets(r: Ring, v: dict, n: int, e: dict, across_servers: bool = False) -> Ring:
    """A ring through n GPUs of one server on PCIe link e: past one CPU socket's GPUs (interconnects.toml socket_gpus)
    it also crosses the link between the sockets, once each way, and moves at the lesser of the two: the most NCCL's
    search can give it (its ring takes a speed per channel from a ladder, so it may land a little lower; search.cc
    ncclTopoCompute). Across servers, where the host lets NCCL alternate its channels' direction, each way carries
    half of them: twice the link's figure binds (_network_ring)."""
    per_socket = e.get("socket_gpus")
    host = host_cpu(v)
    bw = host.get("bandwidth_bytes_per_s")
    if not per_socket or not bw or n <= per_socket or not r.intra_bw:
        return r
    cap = 2 * bw if across_servers and host.get("alternating_channels", True) else bw
    link = f"CPU sockets' link {bw / 1e9:g} GB/s"
    if cap > bw:
        link = f"2 × {link} (channels alternate direction)"
    rule = f"min(PCIe {r.intra_bw / 1e9:g} GB/s, {link}): {n} GPUs, past the {per_socket} behind one socket"
    return replace(r, intra_bw=min(r.intra_bw, cap), socket_bw=bw, socket_gpus=per_socket, rule=rule)


def _link_bandwidth(e: dict) -> float:
    """What a ring moves on a link preset, per direction: NCCL's model of it where that is below the line rate."""
    return e.get("ring_bandwidth_bytes_per_s", e["bandwidth_bytes_per_s"])


def _preset_ring(chip: Ring, e: dict, v: dict, n: int) -> Ring:
    """The ring of n GPUs on a scale-up link preset (interconnects.toml): its bandwidth, NCCL's latencies for its
    kind, and on PCIe the sockets' link past one socket's GPUs."""
    r = replace(
        chip,
        name=e["name"],
        intra_bw=_link_bandwidth(e),
        hw=e["hw"],
        domain=e.get("domain_gpus"),
        switched=e["hw"] == "nvlink",
    )
    return _across_sockets(r, v, n, e)


def ring_link_bandwidth(n: int, r: Ring, eff: float) -> float:
    """Per-direction bandwidth the ring moves at, before the protocol's derating."""
    if n <= 1 or r.nodes == 1:
        return (r.intra_bw or r.inter_bw) * eff
    intra_steps = 2 * (n - 1) - r.net_steps
    return r.inter_bw * eff if intra_steps == 0 else min(r.intra_bw, r.inter_bw) * eff


def protocol_bandwidth(bw: float, r: Ring, protocol: str) -> float:
    """NCCL's ring derating: LL min(llMaxBw, 0.5 × bw), LL128 0.92 × bw, Simple bw (tuning.cc)."""
    if protocol == "ll128":
        return bw * NCCL["ll128_bandwidth_factor"]
    if protocol == "simple":
        return bw
    cap = None
    if r.nodes > 1:
        cap = NCCL["ll_max_bw_net_bytes_per_s"][r.vendor]["two" if r.nodes == 2 else "more"]
    elif r.arch:
        cap = NCCL["ll_max_bw_bytes_per_s"][r.arch]
    half = bw * NCCL["ll_bandwidth_factor"]
    return min(cap, half) if cap else half


def ring_latency(n: int, r: Ring, protocol: str, lat: dict, passes: int = 2) -> float:
    """base + (in-server steps) × max(α, net overhead) + (cross-server steps) × α_net (tuning.cc).

    passes = 2 for an all-reduce (nsteps 2(n − 1), nInterSteps 2(nNodes − 1)), 1 for an all-gather."""
    if n <= 1:
        return 0.0
    base = lat["base"] if lat["base"] is not None else NCCL["base_latency_s"][protocol]
    hop = lat["hop"] if lat["hop"] is not None else NCCL["ring_latency_s"][r.hw][protocol]
    steps, net_steps = passes * (n - 1), passes * (r.nodes - 1)
    if r.nodes == 1:
        return base + steps * hop
    net = (NCCL["tree_net_latency_s"] if r.ppn1 else NCCL["ring_latency_s"]["net"])[protocol]
    ovh = r.ovh * (NCCL["simple_net_overhead_factor"] if protocol == "simple" else 1.0)
    return base + net_steps * net + (steps - net_steps) * max(hop, ovh)


def auto_protocols(r: Ring) -> tuple[str, ...]:
    """Protocols NCCL enables by default: LL128 only when the in-server path is NVLink (tuning.cc:
    `pEnable &= (graphs[a]->typeIntra <= PATH_NVB)`), so not on a PCIe-only ring."""
    return tuple(p for p in PROTOCOLS if not (p == "ll128" and r.hw == "pci"))


def ring_time(msg: float, n: int, r: Ring, eff: float, lat: dict, protocol: str = "ll", passes: int = 2) -> Transfer:
    """One ring all-reduce (passes 2) or all-gather of msg bytes in all (passes 1); protocol 'auto'
    takes the fastest of LL, LL128 and Simple, as NCCL's tuner picks the minimum predicted time."""
    if protocol == "auto":
        return min((ring_time(msg, n, r, eff, lat, p, passes) for p in auto_protocols(r)), key=lambda t: t.time)
    bw = protocol_bandwidth(ring_link_bandwidth(n, r, eff), r, protocol)
    latency = ring_latency(n, r, protocol, lat, passes)
    volume = passes * (n - 1) / n * msg if n > 1 else 0.0
    return Transfer(latency + volume / bw, bw, latency, volume, protocol, passes * (n - 1) if n > 1 else 0)

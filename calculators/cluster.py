"""A cluster, servers of GPUs on their scale-up link joined by a network, and the time of each transfer a multi-GPU
deployment runs on it (parallel.py puts them in its step): an all-reduce (ring.py's NCCL model, or direct.py's
algorithms inside one server), an all-gather, an all-to-all, a point-to-point send, and a pipeline boundary's sends.
On PCIe past one CPU socket's GPUs (a two-socket server, an assumption) the link between the sockets carries what
crosses it (ring.py's figure for the host CPU), and a transfer moves at the slower of that and each GPU's own link.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .calcs.allreduce import one_allreduce
from .calcs.ring import (
    LINKS,
    NCCL,
    Ring,
    joins_gpus,
    link_name,
    own_link_bandwidth,
    ring_time,
    scale_up_domain,
    scale_up_ring,
)
from .errors import InputError
from .model import Accelerator

NETWORK_LINKS = tuple(k for k, e in LINKS.items() if e.get("kind") == "network")


@dataclass(frozen=True)
class Cluster:
    """Servers of gpus_per_node accelerators on their scale-up link, joined by a network link."""

    accelerator: Accelerator
    nodes: int = 1
    gpus_per_node: int = 8
    network: str = "ib-ndr-400"  # interconnects.toml network link id
    nics_per_node: int = 0  # 0 = one per GPU
    link_efficiency: float = 1.0
    algorithm: str = "ring"  # all-reduce algorithm (allreduce.py / direct.py)
    protocol: str = "auto"
    host_cpu: str = ""  # interconnects.toml [socket_link] host id; "" = its default (NCCL's host-dependent figures)
    _memo: dict = field(default_factory=dict, compare=False, hash=False, repr=False)  # rings by size

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def settings(self, link: str) -> dict:
        """The inputs ring.py and allreduce.py read, for a ring on `link`."""
        return {
            "hardware": self.accelerator,
            "link": link,
            "gpus_per_node": self.gpus_per_node,
            "nics_per_node": self.nics_per_node,
            "link_bandwidth_gb_per_s": 0.0,
            "link_efficiency": self.link_efficiency,
            "algorithm": self.algorithm,
            "protocol": self.protocol,
            "latency_source": "nccl",
            "host_cpu": self.host_cpu,
        }

    @property
    def nic_bandwidth_per_gpu(self) -> float:
        """B/s per direction one GPU has to other servers: NICs × one NIC ÷ GPUs per server."""
        return (
            (self.nics_per_node or self.gpus_per_node)
            * LINKS[self.network]["bandwidth_bytes_per_s"]
            / self.gpus_per_node
        )


def check_cluster(c: Cluster) -> None:
    acc = c.accelerator
    if c.network not in NETWORK_LINKS:
        raise InputError("network", f"must be one of the network links {', '.join(NETWORK_LINKS)}")
    if c.gpus_per_node > 1 and not joins_gpus(acc):
        raise InputError("gpus_per_node", f"{acc.name} lists no scale-up link; set GPUs per server to 1")
    domain = scale_up_domain(acc)
    if domain and c.gpus_per_node > domain:
        raise InputError("gpus_per_node", f"must be at most {domain}: the GPUs {acc.name}'s {link_name(acc)} joins")


def ring(c: Cluster, n: int) -> Ring:
    """The ring over n consecutive GPUs: the scale-up link inside a server, the network across servers."""
    found = c._memo.get(n)
    if found is None:
        found = c._memo[n] = scale_up_ring(c.settings("accelerator" if n <= c.gpus_per_node else c.network), n)
    return found


def _allreduce_settings(c: Cluster, n: int) -> dict:
    key = ("settings", n <= c.gpus_per_node)
    found = c._memo.get(key)
    if found is None:
        found = c._memo[key] = c.settings("accelerator" if n <= c.gpus_per_node else c.network)
        if n > c.gpus_per_node:
            found["algorithm"] = "ring"  # one-shot, two-shot and NVLS run inside one scale-up domain only
    return found


def allreduce_s(c: Cluster, msg: float, n: int, algorithm: str | None = None) -> float:
    """One all-reduce of msg bytes over n GPUs, by the cluster's algorithm or `algorithm` (across servers: ring)."""
    if n <= 1 or msg <= 0:
        return 0.0
    settings = _allreduce_settings(c, n)
    if algorithm and settings["algorithm"] != "ring":
        settings = {**settings, "algorithm": algorithm}
    return one_allreduce(msg, n, ring(c, n), settings).time


def fused_allreduces(c: Cluster, tp: int) -> bool:
    """Whether a TP group's all-reduces run fused with the norms after them: the "fused" algorithm (FlashInfer's
    fusion, SGLang's and vLLM's), on more than one GPU inside one server."""
    return c.algorithm == "fused" and 1 < tp <= c.gpus_per_node


def allgather_s(c: Cluster, msg: float, n: int) -> float:
    """Ring all-gather of msg bytes in all over n GPUs (each receives (n − 1)/n × msg)."""
    if n <= 1 or msg <= 0:
        return 0.0
    return ring_time(msg, n, ring(c, n), c.link_efficiency, {"base": None, "hop": None}, c.protocol, 1).time


def alltoall_s(c: Cluster, bytes_out: float, n: int, imbalance: float = 1.0) -> float:
    """One all-to-all over n consecutive GPUs, each sending bytes_out spread evenly over all n (1/n stays):
    the in-server part over the scale-up link and the rest over the GPU's NIC share, in parallel, plus one
    step latency (NCCL's LL constant for the server's link, NVLink or PCI, or the network's: a floor). With
    `imbalance` (max ÷ mean), the hottest GPU's own link and NIC share carry that many times bytes_out."""
    if n <= 1 or bytes_out <= 0:
        return 0.0
    local = min(n, c.gpus_per_node)
    intra = bytes_out * (local - 1) / n
    inter = bytes_out * (n - local) / n
    t_intra = _in_server_alltoall_s(c, bytes_out, n, local, imbalance) if intra else 0.0
    t_inter = imbalance * inter / (c.nic_bandwidth_per_gpu * c.link_efficiency) if inter else 0.0
    hop = NCCL["ring_latency_s"]["net" if inter else ring(c, local).hw]["ll"]
    return hop + max(t_intra, t_inter)


def _in_server_alltoall_s(c: Cluster, bytes_out: float, n: int, local: int, imbalance: float = 1.0) -> float:
    """The in-server part of an all-to-all (each GPU sends bytes_out ÷ n to each of the other local − 1; the hottest
    imbalance × that): over the scale-up link; on PCIe past one CPU socket's GPUs, also across the sockets' link, which
    carries what the GPUs behind one socket send to those behind the other (socket_share), the slower of the two."""
    r = ring(c, local)
    own = own_link_bandwidth(c.accelerator) if r.socket_bw else r.intra_bw
    t = imbalance * bytes_out * (local - 1) / n / (own * c.link_efficiency)
    if not r.socket_bw:
        return t
    return max(t, socket_share(c, n, imbalance) * bytes_out / (r.socket_bw * c.link_efficiency))


def socket_share(c: Cluster, n: int, imbalance: float = 1.0) -> float:
    """What the link between a server's CPU sockets carries one way in an all-to-all over n GPUs, in units of one GPU's
    bytes (socket_load over the server's GPUs of the exchange); 0 where the exchange crosses no such link."""
    local = min(n, c.gpus_per_node)
    r = ring(c, local) if local > 1 else None  # one GPU a server: nothing of it stays in the server
    if not (r and r.socket_bw):
        return 0.0
    a = min(local, r.socket_gpus)
    return socket_load(a, local - a, n, imbalance)


def socket_load(a: int, b: int, n: int, imbalance: float = 1.0) -> float:
    """What the link between a server's sockets carries one way in an all-to-all over n GPUs, in units of one GPU's
    bytes: the a GPUs behind one socket send each GPU its share of their bytes, and the b behind the other receive,
    the hottest of them imbalance × the mean and the other n − 1 GPUs the rest evenly (a × b ÷ n without imbalance)."""
    others = max(0.0, n - imbalance) / (n - 1)
    return a * (imbalance + (b - 1) * others) / n


def p2p_s(c: Cluster, msg: float, across: bool, crossing: int = 0) -> float:
    """One point-to-point send of msg bytes by each sender at once: over one GPU's NIC share, or over the scale-up
    link; on PCIe, where `crossing` of those sends go from behind one CPU socket to behind the other, they share the
    link between the sockets too (NCCL sends them through host memory: the slower of the two paths)."""
    if msg <= 0:
        return 0.0
    if across:
        return NCCL["ring_latency_s"]["net"]["ll"] + msg / (c.nic_bandwidth_per_gpu * c.link_efficiency)
    r = ring(c, 2)  # the server's link: NVLink, or PCIe on a chip without a scale-up link
    t = msg / (r.intra_bw * c.link_efficiency)
    sockets = ring(c, c.gpus_per_node) if crossing else None
    if sockets and sockets.socket_bw:
        t = max(t, crossing * msg / (sockets.socket_bw * c.link_efficiency))
    return NCCL["ring_latency_s"][r.hw]["ll"] + t


def _boundaries(stage: int, pp: int) -> list[list[tuple[int, int]]]:
    """Each pipeline boundary's sends, (sender, receiver): stages take `stage` consecutive GPUs, GPU j of one stage
    sending to GPU j of the next."""
    return [[(k * stage + j, (k + 1) * stage + j) for j in range(stage)] for k in range(pp - 1)]


def _across_servers(sends: list[tuple[int, int]], per_server: int) -> bool:
    return any(a // per_server != b // per_server for a, b in sends)


def _sockets_crossed(sends: list[tuple[int, int]], per_server: int, per_socket: int) -> int:
    """Sends of one boundary inside a server that go from behind one CPU socket to behind the other (0 where no link
    between sockets is priced)."""
    if not per_socket:
        return 0
    return sum((a % per_server) // per_socket != (b % per_server) // per_socket for a, b in sends)


def pipeline_socket_crossings(stage: int, pp: int, per_server: int, per_socket: int) -> int:
    """The most sends a pipeline boundary inside one server puts across the link between its CPU sockets."""
    inside = (s for s in _boundaries(stage, pp) if not _across_servers(s, per_server))
    return max((_sockets_crossed(s, per_server, per_socket) for s in inside), default=0)


def pipeline_send_s(c: Cluster, msg: float, stage: int, pp: int) -> float:
    """The slowest pipeline boundary's send of msg bytes by each of its GPUs: across servers over the NIC share, inside
    one over the scale-up link, sharing the link between the CPU sockets where its sends cross it (p2p_s)."""
    node, per_socket = c.gpus_per_node, ring(c, c.gpus_per_node).socket_gpus
    worst = 0.0
    for sends in _boundaries(stage, pp):
        across = _across_servers(sends, node)
        worst = max(worst, p2p_s(c, msg, across, 0 if across else _sockets_crossed(sends, node, per_socket)))
    return worst

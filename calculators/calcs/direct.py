"""All-reduces that skip the ring, inside one scale-up domain: one-shot, two-shot and NVLS.

one-shot (vLLM/SGLang custom all-reduce `cross_device_reduce_1stage`; TensorRT-LLM ONESHOT):
    every GPU reads each peer's whole buffer and sums locally: 1 synchronisation step,
    each GPU receives (n − 1) × M bytes:            t = t0 + α + (n − 1) × M ÷ B
two-shot (`cross_device_reduce_2stage`; TensorRT-LLM TWOSHOT / MultiShot): reduce-scatter
    then all-gather through peer memory: 2 steps, the ring's volume:
                                                     t = t0 + 2α + 2(n − 1)/n × M ÷ B
fused (FlashInfer's all-reduce fused with the residual add and RMSNorm, TensorRT-LLM's kernel: SGLang's
    --enable-flashinfer-allreduce-fusion): one kernel in place of the all-reduce and the norm after it, its
    fixed time t_fused measured (interconnects.toml [fused_allreduce]), the bytes of two-shot (FlashInfer
    takes two-shot where bytes dominate; one-shot's are never fewer): t = t_fused + 2(n − 1)/n × M ÷ B
NVLS (NVLink SHARP, NCCL's NVLS algorithm): the NVSwitch sums and multicasts, so each GPU
    sends and receives its M bytes once: t = t_NVLS + M ÷ (η × B), with NCCL's constants
    t_NVLS = hwLat[NVLINK][NVLS][Simple] = 25 us and η = nvlsEfficiency (Hopper 0.85,
    Blackwell 0.74), NCCL v2.30.7-1 src/graph/tuning.cc. Needs NVSwitch multicast (Hopper+).
B is the per-direction bandwidth to the other members (ring.ring_bandwidth: all of it through
a switch, (n − 1) peer links on a mesh). The step latency α and fixed cost t0 of the custom
kernels are not in any source read here: with NCCL latencies they default to one NVLink LL
step (0.6 us) and t0 = 0, a floor; set custom latencies from a measurement.
"""

from __future__ import annotations

from ..catalog import fused_allreduce
from ..errors import InputError
from ..units import MIB
from .ring import NCCL, Ring, Transfer

ALGORITHMS = ("ring", "one-shot", "two-shot", "fused", "nvls")
FUSED = fused_allreduce()
SYNC_STEPS = {"one-shot": 1, "two-shot": 2}


def fused_max_tokens(engine: str, accelerator_id: str, tp: int, hidden_size: int, architecture: str = "") -> int:
    """The largest step whose TP all-reduces the fused kernel runs (0: none): SGLang's fixed cap in tokens; vLLM's
    bytes by chip and TP size, over a BF16 row of the hidden size; none for a model class of LayerNorm
    (interconnects.toml [fused_allreduce])."""
    if architecture in FUSED["layernorm_architectures"]:
        return 0
    if engine == "sglang":
        return FUSED["max_tokens"]
    by_tp = FUSED["vllm_max_mib"].get(str(FUSED["capability"].get(accelerator_id)), {})
    mib = by_tp.get(str(tp))
    return int(mib * MIB) // (hidden_size * 2) if mib else 0


def _check(r: Ring, algorithm: str, n: int) -> None:
    if r.nodes > 1:
        raise InputError(
            "algorithm", f"{algorithm} runs inside one scale-up domain; with a network link between servers pick ring"
        )
    if algorithm in SYNC_STEPS and r.hw == "pci" and n > 2:
        raise InputError(
            "algorithm",
            f"{algorithm} over PCIe runs on two GPUs at most (vLLM v0.34.0 turns its custom all-reduce off on more "
            "than two PCIe-only GPUs); pick ring",
        )
    if algorithm == "fused" and r.arch not in ("hopper", "blackwell"):
        raise InputError(
            "algorithm",
            "fused runs FlashInfer's kernel, priced here on data-centre GPUs of compute capability 9.0 and 10.x "
            "only: a Hopper or Blackwell NVIDIA GPU",
        )
    if algorithm == "nvls" and not (r.switched and r.hw == "nvlink" and r.arch in NCCL["nvls_efficiency"]):
        raise InputError(
            "algorithm",
            "nvls needs NVSwitch multicast: a Hopper or Blackwell NVIDIA GPU on its "
            "switched NVLink (accelerator link, NVLink 4 or NVLink 5)",
        )


def direct_time(msg: float, n: int, r: Ring, eff: float, lat: dict, algorithm: str) -> Transfer:
    """One all-reduce by a non-ring algorithm: time, bandwidth, latency, bytes each GPU receives."""
    _check(r, algorithm, n)
    if n <= 1:  # nothing crosses a link; a server of one GPU has no intra-server bandwidth (intra_bw None)
        return Transfer(0.0, (r.intra_bw or r.inter_bw) * eff, 0.0, 0.0)
    bw = r.intra_bw * eff
    if algorithm == "nvls":
        bw *= NCCL["nvls_efficiency"][r.arch]
        latency = (lat["base"] or 0.0) + lat["hop"] if lat["hop"] is not None else NCCL["nvls_latency_s"]
        volume, steps = msg, 1
    elif algorithm == "fused":  # the measured kernel's time holds its synchronisation; custom latencies replace it
        latency = FUSED["kernel_s"] if lat["hop"] is None else (lat["base"] or 0.0) + lat["hop"]
        volume, steps = 2 * (n - 1) / n * msg, 1
    else:
        steps = SYNC_STEPS[algorithm]
        hop = lat["hop"] if lat["hop"] is not None else NCCL["ring_latency_s"]["nvlink"]["ll"]
        latency = (lat["base"] or 0.0) + steps * hop
        volume = (n - 1) * msg if algorithm == "one-shot" else 2 * (n - 1) / n * msg
    return Transfer(latency + volume / bw, bw, latency, volume, "", steps)

"""A serving benchmark's client on the simulator: what `benchmark_serving.py --dataset-name random --request-rate inf
--max-concurrency N --ignore-eos` sends and how it scores the answers, so that a published sweep of that client
can be predicted as the client measured it (calibration.py's serving rows).

  lengths      input and output each uniform integers in [⌊L × ratio⌋, L] (np.random.randint(lower, upper + 1)),
               drawn here with the standard library from a fixed seed
  requests     N × prompts_per_user of them; the first N start together (the warm-up requests finished before
               the timer starts, so the timed run opens on an idle server), each later one as a slot frees:
               TURNAROUND_S after the last token of the answer before it, the HTTP round trip of one host, an
               assumed millisecond (not measured: any time longer than the engine's own turn between two steps
               and shorter than a step puts the request in the same step), so that it misses the step the engine
               starts as that answer ends
  TTFT         request sent → first streamed chunk, which carries the first token: vLLM streams every token, and
               SGLang's --stream-interval k sends a chunk when the output's length is 1 more than a multiple of
               k (tokens 1, k + 1, 2k + 1, ...; scheduler_output_processor_mixin.py stream_output_generation,
               `len(req.output_ids) % stream_interval == 1`), so the interval moves no metric scored here
  TPOT         (end-to-end − TTFT) ÷ (output − 1) per request, then the mean over requests
  throughput   every output token ÷ (last answer's end − start)
  front end    front_end_s: the request's time outside the engine core (the HTTP server, tokenisation, the
               hand-off to the engine and the first token's way back) as one time per request, added to TTFT and
               end-to-end time and to the gap between a user's turns; the calibration passes the fitted one
               (fitted.toml [front_end]). Not modelled: a front end that serialises requests (its time grows with
               the burst), network time beyond TURNAROUND_S.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from .config import EngineConfig
from .loops import closed_loop
from .run import simulate
from .steps import StepTimes


TURNAROUND_S = 1e-3


@dataclass(frozen=True)
class Client:
    concurrency: int
    input_tokens: int
    output_tokens: int
    range_ratio: float = 1.0  # --random-range-ratio
    prompts_per_user: int = 10  # --num-prompts ÷ --max-concurrency
    seed: int = 0


def draws(c: Client) -> list[tuple[float, int, int]]:
    """(gap, prompt, output) per request: the random dataset's lengths (gaps unused: a closed loop)."""
    rng, n = random.Random(c.seed), c.concurrency * c.prompts_per_user

    def length(top: int) -> int:
        return rng.randint(max(1, int(top * c.range_ratio)), top)

    return [(0.0, length(c.input_tokens), length(c.output_tokens)) for _ in range(n)]


def run_client(times: StepTimes, config: EngineConfig, c: Client, front_end_s: float = 0.0) -> dict:
    """The client's means (TTFT, TPOT, end-to-end, in s) and its output throughput (tokens/s, whole server).
    front_end_s: each request's time outside the engine core, on its way in and its answer's way out; the client
    counts it in TTFT and end-to-end time, and a user's next request reaches the engine that much later."""
    requests = draws(c)
    users = [r._replace(think_s=TURNAROUND_S + front_end_s) for r in closed_loop(requests, c.concurrency, 0.0)]
    result = simulate(times, users, config, (0, len(requests)))
    if not result.e2e_s:
        raise ValueError("no request finished: the KV pool holds none of them")
    end = max(a + e for a, e in zip(result.arrival_s, result.e2e_s))
    n = len(result.e2e_s)
    return {
        # fsum: correctly rounded, so CPython 3.11 and Pyodide's 3.14 (compensated sum()) agree bit for bit
        "ttft_s": math.fsum(result.ttft_s) / n + front_end_s,
        "tpot_s": math.fsum(result.tpot_s) / n,  # the engine's (finish − first token) ÷ (output − 1), as the client
        "e2e_latency_s": math.fsum(result.e2e_s) / n + front_end_s,
        "output_tokens_per_s": sum(requests[i][2] for i in result.ids) / (end + front_end_s),
        "completed": n,
    }

"""A serving benchmark's client on the simulator: what `benchmark_serving.py --dataset-name random --request-rate inf
--max-concurrency N --ignore-eos` sends and how it scores the answers, so that a published sweep of that client
can be predicted as the client measured it (calibration.py's serving rows).

  lengths      input and output each uniform integers in [⌊L × ratio⌋, L] (np.random.randint(lower, upper + 1)),
               drawn here with the standard library from a fixed seed; where the run printed its totals, `means`
               scales each side's draws to the run's mean (total ÷ requests), so that a few requests' draws, which
               are not the run's own, carry its amount of work and keep the spread that staggers the users
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
  earlier runs the runs the same server answered before this one, in order (`earlier`): a benchmark run again with
               the same seed on a server that keeps its prefix cache (SGLang's radix cache, on by default) sends
               the same prompts in the same order, so prompt k of this run opens with prompt k of each earlier run
               (the same dataset text, cut to its own length) and finds in the cache what is still there. Each run
               starts RUN_GAP_S after the last answer of the one before; the warm-up request before each (prompt
               0, at most 32 tokens out) is not sent
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

from .config import EngineConfig, Request
from .loops import closed_loop
from .run import simulate
from .steps import StepTimes


TURNAROUND_S = 1e-3
RUN_GAP_S = 1.0  # SGLang 0.5.6 bench_serving.py benchmark(): time.sleep(1.0) after the warm-up, before the timed run


@dataclass(frozen=True)
class Client:
    concurrency: int
    input_tokens: int
    output_tokens: int
    range_ratio: float = 1.0  # --random-range-ratio
    prompts_per_user: int = 10  # --num-prompts ÷ --max-concurrency
    seed: int = 0
    means: tuple[float, float] | None = None  # the run's mean input and output lengths, where printed


def draws(c: Client) -> list[tuple[float, int, int]]:
    """(gap, prompt, output) per request: the random dataset's lengths (gaps unused: a closed loop)."""
    rng, n = random.Random(c.seed), c.concurrency * c.prompts_per_user

    def length(top: int) -> int:
        return rng.randint(max(1, int(top * c.range_ratio)), top)

    pairs = [(length(c.input_tokens), length(c.output_tokens)) for _ in range(n)]
    if c.means:
        scale = [mean * n / sum(side) for mean, side in zip(c.means, zip(*pairs))]
        pairs = [(max(1, round(a * scale[0])), max(1, round(b * scale[1]))) for a, b in pairs]
    return [(0.0, a, b) for a, b in pairs]


def _users(c: Client, start_s: float, first: int, think_s: float, streams: bool) -> list[Request]:
    """c's closed loop from start_s, listed after `first` earlier requests; with streams, prompt k opens stream
    ("prompt", k), which the k-th prompt of every run on the server opens too."""
    out = []
    for k, r in enumerate(closed_loop(draws(c), c.concurrency, 0.0)):
        r = r._replace(arrival_s=r.arrival_s + start_s, think_s=think_s, after=r.after + first if r.after >= 0 else -1)
        out.append(r._replace(prefix=((("prompt", k), 0, r.prompt_tokens),)) if streams else r)
    return out


def _last_end(result) -> float:
    return max(a + e for a, e in zip(result.arrival_s, result.e2e_s))


def run_client(
    times: StepTimes, config: EngineConfig, c: Client, front_end_s: float = 0.0, earlier: tuple[Client, ...] = ()
) -> dict:
    """The client's means (TTFT, TPOT, end-to-end, in s) and its output throughput (tokens/s, whole server).
    front_end_s: each request's time outside the engine core, on its way in and its answer's way out; the client
    counts it in TTFT and end-to-end time, and a user's next request reaches the engine that much later. earlier:
    the runs the server answered before this one, in order, with the same seed (the module's docstring)."""
    think, requests, start = TURNAROUND_S + front_end_s, [], 0.0
    for run in earlier:  # each ran to its end before the next began: simulated so far to find that end
        requests += _users(run, start, len(requests), think, True)
        start = _last_end(simulate(times, requests, config)) + RUN_GAP_S
    first = len(requests)
    requests += _users(c, start, first, think, bool(earlier))
    result = simulate(times, requests, config, (first, len(requests)))
    if not result.e2e_s:
        raise ValueError("no request finished: the KV pool holds none of them")
    n = len(result.e2e_s)
    return {
        # fsum: correctly rounded, so CPython 3.11 and Pyodide's 3.14 (compensated sum()) agree bit for bit
        "ttft_s": math.fsum(result.ttft_s) / n + front_end_s,
        "tpot_s": math.fsum(result.tpot_s) / n,  # the engine's (finish − first token) ÷ (output − 1), as the client
        "e2e_latency_s": math.fsum(result.e2e_s) / n + front_end_s,
        "output_tokens_per_s": sum(requests[i].output_tokens for i in result.ids)
        / (_last_end(result) - start + front_end_s),
        "completed": n,
    }

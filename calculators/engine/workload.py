"""Requests for the simulator: open-loop arrivals at a rate, shared-prefix structures, pasted traces.

Draws come from Workload (gamma gaps at rate 1 with shape = burstiness, as vLLM's
`vllm bench serve --burstiness`; prompt and output lengths from the core's distributions), so every
calculator on the engine sees the same requests for the same seed.
"""

from __future__ import annotations

import math
import random

from ..calcs.lengths import lognormal_mu_sigma, uniform_half_width
from ..errors import InputError
from .config import Request

TRACE_FIELD = "trace"
TRACE_COLUMNS = "arrival_s, input_tokens, output_tokens[, prefix_id, prefix_tokens]"


def length_sampler(kind: str, mean: float, cv: float):
    """rng -> one length with the given mean and coefficient of variation (spread ÷ mean); the
    distribution's constants are worked out once, not per draw."""
    if kind == "fixed" or cv == 0:
        fixed = max(1, round(mean))
        return lambda rng: fixed
    if kind == "uniform":  # no wider than the mean: lengths stay positive
        half = uniform_half_width(mean, cv, 1.0)
        lo, hi = mean - half, mean + half
        return lambda rng: max(1, round(rng.uniform(lo, hi)))
    mu, sigma = lognormal_mu_sigma(mean, cv)
    return lambda rng: max(1, round(rng.lognormvariate(mu, sigma)))


class Workload:
    """(arrival gap at rate 1, input tokens, output tokens) per request, drawn on demand: every
    prefix is the same whatever length is asked for later. Gaps are gamma with shape k = burstiness
    and mean 1, as vLLM's `vllm bench serve --burstiness` draws them (k = 1: exponential, Poisson
    arrivals; k < 1 burstier, k > 1 more even; squared coefficient of variation 1 ÷ k). One draw per
    request at rate 1, scaled by 1 ÷ rate, so every rate sees the same requests (common random numbers);
    gaps come from a stream of their own, so the lengths do not depend on the burstiness."""

    def __init__(self, v: dict):
        self.rng, self.items = random.Random(v["seed"]), []
        self.gap_rng, self.shape = random.Random(f"arrivals {v['seed']}"), v.get("burstiness", 1.0)
        self.prompt = length_sampler(v["input_distribution"], v["input_tokens_mean"], v["input_tokens_cv"])
        self.output = length_sampler(v["output_distribution"], v["output_tokens_mean"], v["output_tokens_cv"])

    def first(self, n: int) -> list[tuple[float, int, int]]:
        rng, gap_rng = self.rng, self.gap_rng
        while len(self.items) < n:
            gap = gap_rng.gammavariate(self.shape, 1.0 / self.shape)  # shape 1: the same draw as expovariate(1)
            self.items.append((gap, self.prompt(rng), self.output(rng)))
        return self.items[:n]


def open_loop(draws, rate_per_s: float, prefix: tuple = ()) -> list[Request]:
    """Requests from (gap at rate 1, prompt, output) draws, arriving at `rate_per_s`, each opening with
    `prefix` (cut to its prompt)."""
    out, t = [], 0.0
    for gap, prompt, output in draws:
        t += gap / rate_per_s
        out.append(Request(t, prompt, output, prefix=_cut(prefix, prompt)))
    return out


def _cut(prefix: tuple, prompt: int) -> tuple:
    """The leading pieces of `prefix` that fit in a prompt of `prompt` tokens."""
    out, left = [], prompt
    for stream, start, length in prefix:
        if left <= 0:
            break
        out.append((stream, start, min(length, left)))
        left -= length
    return tuple(out)


def conversations(
    draws, rate_per_s: float, turns: int, think_s: float, system_tokens: int = 0, dropped_tokens: int = 0
) -> list[Request]:
    """Multi-turn chats: each draw starts a conversation of `turns` turns at the open-loop rate; turn t
    re-reads the system prompt, every earlier message and answer, then its own message (the draw's
    prompt length is the message), and arrives think_s after turn t − 1 ends. dropped_tokens > 0: that
    many of each answer's tokens are reasoning the chat template leaves out of later turns, so the next
    prompt holds only the rest of the answer, and its cached prefix ends where the previous prompt did
    (the answer is generated after the reasoning, at other positions, and must be prefilled again)."""
    out, t = [], 0.0
    for c, (gap, message, answer) in enumerate(draws):
        t += gap / rate_per_s
        system = (("system", 0, system_tokens),) if system_tokens else ()
        history = 0
        for turn in range(turns):
            prefix = (*system, (("chat", c), 0, history + message))
            after = len(out) - 1 if turn else -1
            out.append(
                Request(
                    t,
                    system_tokens + history + message,
                    answer,
                    prefix=prefix,
                    output_stream=None if dropped_tokens else (("chat", c), history + message),
                    after=after,
                    think_s=think_s,
                )
            )
            history += message + answer - min(dropped_tokens, answer)
    return out


def parse_trace(text: str, limit: int = 100_000) -> list[Request]:
    """A pasted trace, one request per line: arrival_s, input_tokens, output_tokens, and optionally a
    prefix id and how many leading tokens it names (requests with the same id share them). Lines
    starting with # and blank lines are skipped; arrivals must not go back in time."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(_trace_line(line, number, out[-1].arrival_s if out else 0.0))
            if len(out) > limit:
                raise InputError(TRACE_FIELD, f"at most {limit:,} requests")
    if not out:
        raise InputError(TRACE_FIELD, f"no requests: expected lines of {TRACE_COLUMNS}")
    return out


def _trace_line(line: str, number: int, previous_s: float) -> Request:
    cells = [c.strip() for c in line.split(",")]
    where = f"line {number}"
    if len(cells) not in (3, 5):
        raise InputError(TRACE_FIELD, f"{where}: expected {TRACE_COLUMNS}, got {len(cells)} values")
    try:
        arrival, prompt, output = float(cells[0]), int(cells[1]), int(cells[2])
        shared = int(cells[4]) if len(cells) == 5 else 0
    except ValueError:
        raise InputError(TRACE_FIELD, f"{where}: arrival_s is a number and token counts are whole numbers") from None
    if not (arrival >= previous_s and prompt >= 1 and output >= 1 and 0 <= shared <= prompt):
        raise InputError(
            TRACE_FIELD,
            f"{where}: arrivals in order, input and output tokens ≥ 1, prefix tokens between 0 and the input tokens",
        )
    prefix = ((("trace", cells[3]), 0, shared),) if shared else ()
    return Request(arrival, prompt, output, prefix=prefix)


def with_predictions(requests: list[Request], error_cv: float, seed: int = 0) -> list[Request]:
    """The same requests with a length predictor's guesses for shortest-job-first: predicted = true
    output × a log-normal factor of median 1 whose spread (std ÷ mean) is error_cv; 0 is a perfect
    predictor."""
    if error_cv <= 0:
        return [r._replace(predicted_output_tokens=r.output_tokens) for r in requests]
    rng, sigma = random.Random(f"predictor {seed}"), math.sqrt(math.log1p(error_cv * error_cv))
    return [
        r._replace(predicted_output_tokens=max(1, round(r.output_tokens * rng.lognormvariate(0.0, sigma))))
        for r in requests
    ]

"""Closed-loop clients on the simulator, and the open-loop run at the same mean rate to compare them with.

A closed-loop client is a user who sends a request, waits for the whole answer, thinks for think_s, then sends
the next (`vllm bench serve --max-concurrency N --request-rate inf` is N such users with no think time). The
engine's `after` field does exactly this: request i arrives think_s after request i − users ends. Requests are
listed turn by turn (every user's first, then every user's second, ...), so the first `users` are the warm-up
and the rest can be measured as one contiguous range.
"""

from __future__ import annotations

import math

from .config import EngineConfig, Request
from .run import simulate
from .steps import StepTimes
from .workload import open_loop


def closed_loop(draws, users: int, think_s: float) -> list[Request]:
    """Requests from (gap, prompt, output) draws for `users` closed-loop users: the first `users` start
    spread evenly over one think time (all at t = 0 when think_s is 0), each later one think_s after the
    same user's previous request ends. The gaps are not used: the server's pace sets the rate."""
    out = []
    for i, (_, prompt, output) in enumerate(draws):
        if i < users:
            out.append(Request(think_s * i / users, prompt, output))
        else:
            out.append(Request(0.0, prompt, output, after=i - users, think_s=think_s))
    return out


def measured_rate(result, users: int, think_s: float) -> float:
    """The closed loop's throughput while all its users are active, by the interactive response-time law
    X = N ÷ (R + Z) with R the measured mean end-to-end time: each user completes one request per R + Z on
    average. (Completed ÷ wall time would count the first turn's burst and the drain at the end, when users
    stop one by one: in a run of a few turns per user that is most of the run.)"""
    if not result.e2e_s:
        return 0.0
    return users / (math.fsum(result.e2e_s) / len(result.e2e_s) + think_s)  # fsum: CPython 3.11 and 3.12+ agree


def closed_and_open(times: StepTimes, config: EngineConfig, draws, users: int, think_s: float):
    """(closed-loop result, its measured rate, open-loop result at that rate) on the same draws, each
    measured after the first `users` requests (the closed loop's first turn)."""
    measured = (min(users, len(draws) - 1), len(draws))
    closed = simulate(times, closed_loop(draws, users, think_s), config, measured)
    rate = measured_rate(closed, users, think_s)
    opened = simulate(times, open_loop(draws, rate), config, measured) if rate > 0 else closed
    return closed, rate, opened

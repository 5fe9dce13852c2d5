"""The simulator's entry point."""

from __future__ import annotations

from .config import EngineConfig, Request
from .core import Engine
from .result import EngineResult, summarise
from .steps import StepTimes


def simulate(
    times: StepTimes,
    requests: list[Request],
    config: EngineConfig,
    measured: tuple[int, int] | None = None,
    stop: tuple[float, float, int] | None = None,
) -> EngineResult:
    """Run the engine over requests until requests[lo:hi] are done or rejected. A request with
    after = j arrives think_s after request j ends (closed-loop clients, agent turns); j must come first.
    A request with generated > 0 is decoding at t = 0 (a warm start). stop = (TTFT target, mean TPOT
    target, misses allowed) ends the run once more measured requests have missed than allowed (a
    rejected one misses both); the result then says stopped."""
    if any(not -1 <= r.after < i for i, r in enumerate(requests)):
        raise ValueError("a request can only follow one listed before it")
    if any(r.generated and (r.after >= 0 or r.generated >= r.output_tokens) for r in requests):
        raise ValueError("a warm-start request has fewer tokens out than its output, and follows nobody")
    engine = Engine(times, requests, config, measured or (0, len(requests)), stop)
    engine.run()
    return summarise(engine)

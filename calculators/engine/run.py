"""The simulator's entry point."""
from __future__ import annotations

from .config import EngineConfig, Request
from .core import Engine
from .result import EngineResult, summarise
from .steps import StepTimes


def simulate(times: StepTimes, requests: list[Request], config: EngineConfig,
             measured: tuple[int, int] | None = None) -> EngineResult:
    """Run the engine over requests (sorted by arrival) until requests[lo:hi] are done or rejected."""
    if any(b.arrival_s < a.arrival_s for a, b in zip(requests, requests[1:])):
        raise ValueError("requests must be sorted by arrival time")
    engine = Engine(times, requests, config, measured or (0, len(requests)))
    engine.run()
    return summarise(engine)

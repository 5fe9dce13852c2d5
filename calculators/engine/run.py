"""The simulator's entry point."""

from __future__ import annotations

from .config import EngineConfig, Request
from .core import Engine
from .result import EngineResult, summarise
from .steps import StepTimes


def simulate(
    times: StepTimes, requests: list[Request], config: EngineConfig, measured: tuple[int, int] | None = None
) -> EngineResult:
    """Run the engine over requests until requests[lo:hi] are done or rejected. A request with
    after = j arrives think_s after request j ends (closed-loop clients, agent turns); j must come first."""
    if any(not -1 <= r.after < i for i, r in enumerate(requests)):
        raise ValueError("a request can only follow one listed before it")
    engine = Engine(times, requests, config, measured or (0, len(requests)))
    engine.run()
    return summarise(engine)

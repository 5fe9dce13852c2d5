"""The one entry point: run(name, inputs) -> outputs, for tests, hooks, browser and CLI."""
from __future__ import annotations

import json

from .errors import InputError
from .numfmt import clean
from .schema import validate


def _registry() -> dict:
    # Imported here so that `import calculators` stays cheap and cycle-free.
    from .calcs import allreduce, cost, decode_limits, goodput, kv_cache, latency, memory, percentiles, roofline
    from .calcs import paging, preemption, sram
    return {m.SCHEMA["name"]: m for m in (kv_cache, memory, roofline, latency, goodput, cost, percentiles, decode_limits,
                                          allreduce, sram, paging, preemption)}


def calculator_names() -> list[str]:
    return list(_registry())


def _module(name):
    registry = _registry()
    if name not in registry:
        raise InputError("calculator", "unknown calculator; expected one of: " + ", ".join(registry))
    return registry[name]


def schema(name: str) -> dict:
    """The calculator's input and output specs (a deep copy, safe to mutate)."""
    return json.loads(json.dumps(_module(name).SCHEMA))


def run(name: str, inputs: dict | None = None) -> dict:
    """Validate inputs against the schema, compute, and return a JSON-safe result."""
    module = _module(name)
    values = validate(module.SCHEMA["inputs"], inputs)
    result = module.compute(values)
    missing = [o["key"] for o in module.SCHEMA["outputs"] if o["key"] not in result]
    if missing:
        raise RuntimeError(f"{name} did not produce outputs: {missing}")
    return clean(result)


def dumps(result) -> str:
    """Deterministic JSON, the same in CPython and Pyodide."""
    return json.dumps(result, sort_keys=True, ensure_ascii=False, allow_nan=False)


def run_json(name: str, inputs_json: str) -> str:
    """The browser's entry: JSON in, JSON out; errors come back as {"error": {...}}."""
    try:
        try:
            inputs = json.loads(inputs_json) if inputs_json not in (None, "") else {}
        except (TypeError, ValueError):
            raise InputError("inputs", "is not valid JSON") from None
        return dumps(run(name, inputs))
    except InputError as exc:
        return dumps({"error": exc.to_json()})
    except Exception as exc:  # never raise into the browser; say it is our bug
        return dumps({"error": {"field": None, "message": f"internal error: {type(exc).__name__}: {exc}"}})

"""The one entry point: run(name, inputs) -> outputs, for tests, hooks, browser and CLI.

A calculator is any module under calcs/ that defines SCHEMA (and compute); the registry finds them
all, so a new one cannot be left out by forgetting a list. Modules there without SCHEMA are helpers.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from functools import cache

from . import calcs
from .errors import InputError
from .numfmt import clean
from .schema import validate

# The order the workbench and the CLI list calculators in (the order they were added). A calculator
# not named here is still registered: it comes after these, alphabetically.
ORDER = (
    "kv_cache",
    "memory",
    "roofline",
    "latency",
    "goodput",
    "cost",
    "percentiles",
    "decode_limits",
    "allreduce",
    "sram",
    "paging",
    "preemption",
)


def _calculator_modules() -> list:
    """Every module under calcs/ that defines SCHEMA, imported."""
    names = (f"{calcs.__name__}.{m.name}" for m in pkgutil.iter_modules(calcs.__path__))
    return [module for module in map(importlib.import_module, names) if hasattr(module, "SCHEMA")]


@cache
def _registry() -> dict:
    """Calculator name -> module. Found on first use, so `import calculators` stays cheap; cached, so a
    memory snapshot taken after the first call (page.warm_up) answers without the package's files."""
    found = {}
    for module in _calculator_modules():
        name = module.SCHEMA["name"]
        if name in found:
            raise RuntimeError(f"{module.__name__} and {found[name].__name__} both define calculator {name!r}")
        found[name] = module
    rank = {name: i for i, name in enumerate(ORDER)}
    return {name: found[name] for name in sorted(found, key=lambda n: (rank.get(n, len(rank)), n))}


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


def decode(text: str | None, field: str = "inputs"):
    """The value a JSON text holds; empty text (None or "") holds none (None)."""
    if text in (None, ""):
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        raise InputError(field, "is not valid JSON") from None


def envelope(fn, *args, field: str = "inputs") -> str:
    """`fn(*args)` with its last argument decoded from JSON text (`decode`; bad JSON is an error on
    `field`), returned as JSON text. Never raises: an InputError comes back as {"error": {"field",
    "message"}}, anything else as {"error": {"field": null, "message": "internal error: …"}}."""
    *head, text = args
    try:
        return dumps(fn(*head, decode(text, field)))
    except InputError as exc:
        return dumps({"error": exc.to_json()})
    except Exception as exc:  # never raise into the browser; say it is our bug
        return dumps({"error": {"field": None, "message": f"internal error: {type(exc).__name__}: {exc}"}})


def run_json(name: str, inputs_json: str | None) -> str:
    """run() with JSON in and out, in the browser's envelope (for scripts and tests)."""
    return envelope(run, name, inputs_json)

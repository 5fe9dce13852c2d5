"""LLM serving calculators: pure Python, standard library only, same results in CPython and Pyodide.

The browser's API (docs/assets/calculators/worker.js): JSON text in, JSON text out, never raising;
errors come back as {"error": {"field": ..., "message": ...}}.
    present_json(name, inputs_json) -> str     what a calculator block shows for these inputs
    describe_json(kind, value_json) -> str     a reader's own model or accelerator, checked
For Python (tests, the build's hooks, the CLI):
    run(name, inputs) -> dict        schema(name) -> dict       calculator_names() -> list
    run_json(name, inputs_json) -> str (run() in the same envelope)
"""

from .api import calculator_names, run, run_json, schema
from .errors import InputError
from .page import describe_json, present_json

__all__ = ["present_json", "describe_json", "run", "run_json", "schema", "calculator_names", "InputError"]

"""LLM serving calculators: pure Python, standard library only, same results in CPython and Pyodide.

    run(name, inputs) -> dict        schema(name) -> dict       calculator_names() -> list
    run_json(name, inputs_json) -> str (the browser's entry; never raises for bad input)
"""
from .api import calculator_names, run, run_json, schema
from .errors import InputError

__all__ = ["run", "run_json", "schema", "calculator_names", "InputError"]

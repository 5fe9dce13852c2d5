"""One rounding rule for every number a calculator returns.

Rounding to 12 significant digits hides last-bit differences between libm builds
(CPython on Linux vs Pyodide's WebAssembly libm), so the browser and the tests
serialise byte-identical JSON.
"""

from __future__ import annotations

import math

SIGNIFICANT_DIGITS = 12


def round_sig(x: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    """Round a finite float to `digits` significant digits; -0.0 becomes 0.0."""
    if not math.isfinite(x):
        raise ValueError(f"non-finite number in output: {x!r}")
    if x == 0:
        return 0.0
    return float(f"{x:.{digits - 1}e}")


def clean(value):
    """Recursively make a result JSON-safe: round floats, tuples to lists, keys to str."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return round_sig(value)
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    raise TypeError(f"cannot serialise {type(value).__name__} in a calculator result")

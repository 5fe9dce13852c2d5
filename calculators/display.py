"""Every number a reader sees becomes text here: results, derivations, plot tables, inline values,
messages and the command line.

The page shows what `present()` returns, both when the site is built (CPython) and
after every recompute (Pyodide), so a number never changes its look on hydration.
Units are always spelled out: GiB = 2^30 B, GB = 10^9 B, TB/s = 10^12 B/s, FLOP/s dense.
Memory sizes read in binary units (GiB, as engines and nvidia-smi print them) unless the reader's setting asks
for decimal ones (GB, as datasheets state HBM): present() sets it for one call (memory_units); bandwidths are
decimal either way.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from contextvars import ContextVar

_BINARY = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
_DECIMAL = (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3))
_AS_DECIMAL = {
    "TiB": ("TB", 2**40 / 1e12),
    "GiB": ("GB", 2**30 / 1e9),
    "MiB": ("MB", 2**20 / 1e6),
    "KiB": ("KB", 2**10 / 1e3),
}
MEMORY_UNITS = ("binary", "decimal")
_memory_units: ContextVar[str] = ContextVar("memory_units", default="binary")


@contextmanager
def memory_units(units: str):
    """Memory sizes read in `units` (one of MEMORY_UNITS) inside the block."""
    if units not in MEMORY_UNITS:
        raise ValueError(f"memory units must be one of {MEMORY_UNITS}, not {units!r}")
    token = _memory_units.set(units)
    try:
        yield
    finally:
        _memory_units.reset(token)


def in_memory_units(value, unit: str):
    """(value, unit) with a binary memory unit (GiB…) restated in decimal (GB…) when the reader asked for it."""
    if unit in _AS_DECIMAL and _memory_units.get() == "decimal":
        name, factor = _AS_DECIMAL[unit]
        return value * factor, name
    return value, unit


_DECIMAL_BYTES = {
    "B": 1,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}
_FLOPS = (("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9))
_FLOP_COUNTS = (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6))
_BYTE_RATES = (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3))


def sig(x: float, digits: int = 4) -> str:
    """`digits` significant digits, thousands separators, no trailing zeros: 327,680 · 295.2 · 0.0123."""
    if x == 0 or not math.isfinite(x):
        return "0"
    if float(x).is_integer() and abs(x) < 1e9:  # counts read exactly: 327,680 B, not 327,700
        return f"{int(x):,}"
    magnitude = math.floor(math.log10(abs(x)))
    if magnitude >= digits - 1:
        return f"{round(x, -(magnitude - digits + 1)):,.0f}"
    if magnitude < -6:
        return f"{x:.{digits - 1}e}"
    text = f"{x:,.{digits - 1 - magnitude}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fixed(x: float, decimals: int) -> str:
    return f"{x:,.{decimals}f}"


def _scaled(x: float, unit: str, decimals: int | None) -> str:
    return f"{sig(x) if decimals is None else fixed(x, decimals)} {unit}"


def auto_bytes(x: float, decimals: int | None = None) -> str:
    for unit, size in _DECIMAL if _memory_units.get() == "decimal" else _BINARY:
        if abs(x) >= size:
            return _scaled(x / size, unit, decimals)
    return _scaled(x, "B", decimals if decimals is not None else 0)


def auto_seconds(x: float, decimals: int | None = None) -> str:
    if abs(x) >= 3600:
        return _scaled(x / 3600, "h", decimals)
    for unit, size in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(x) >= size:
            return _scaled(x / size, unit, decimals)
    return _scaled(x / 1e-9, "ns", decimals)


def _auto(x: float, scales, base: str, decimals: int | None) -> str:
    """x in the largest of `scales` (unit, size) it reaches, else in `base`."""
    for unit, size in scales:
        if abs(x) >= size:
            return _scaled(x / size, unit, decimals)
    return _scaled(x, base, decimals)


def auto_flops(x: float, decimals: int | None = None) -> str:
    return _auto(x, _FLOPS, "FLOP/s", decimals)


def auto_flop_count(x: float, decimals: int | None = None) -> str:
    return _auto(x, _FLOP_COUNTS, "FLOP", decimals)


def auto_byte_rate(x: float, decimals: int | None = None) -> str:
    """Bandwidth in decimal units, as vendors state it: 3.35 TB/s, 450 GB/s."""
    return _auto(x, _BYTE_RATES, "B/s", decimals)


def usd(x: float, decimals: int | None = None) -> str:
    if decimals is not None:
        return f"${x:,.{decimals}f}"
    if abs(x) >= 1000:
        return f"${x:,.0f}"
    return f"${x:,.2f}" if abs(x) >= 0.01 or x == 0 else f"${sig(x, 2)}"


def output_text(value, spec: dict) -> str:
    """Text for a calculator output by its schema spec: its words for a sentinel value, else by format."""
    words = spec.get("words", {})
    if not isinstance(value, bool) and isinstance(value, int | float) and float(value).is_integer():
        if str(int(value)) in words:
            return words[str(int(value))]
    return by_output_format(value, spec["format"], spec["unit"])


def by_output_format(value, fmt: str, unit: str = "") -> str:
    """Text for a calculator output, by its schema `format` and `unit`."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    value, unit = in_memory_units(value, unit)
    if fmt == "bytes":
        return auto_bytes(value)
    if fmt == "seconds":
        return auto_seconds(value)
    if fmt == "flops":
        return auto_flops(value)
    if fmt == "usd":
        return usd(value)
    if fmt == "percent":
        return f"{sig(value * 100, 3)}%"
    if unit in SCALED_UNITS:  # 450 GB/s, not 450,000,000,000 B/s
        return UNIT_FORMATS[unit](value)
    unit = SINGULAR.get(unit, unit) if value == 1 else unit  # "1 GPU", "1 sequence"
    if fmt == "integer":
        return f"{round(value):,}" + (f" {unit}" if unit else "")
    return sig(value) + (f" {unit}" if unit else "")


# Rates and counts of bytes and FLOPs read with a prefix, as in the derivations (UNIT_FORMATS).
SCALED_UNITS = ("B/s", "FLOP/s", "FLOP")
# Count units read in the singular for exactly one.
SINGULAR = {
    "GPUs": "GPU",
    "sequences": "sequence",
    "tokens": "token",
    "experts": "expert",
    "blocks": "block",
    "requests": "request",
    "layers": "layer",
    "replicas": "replica",
    "steps": "step",
    "chips": "chip",
    "users": "user",
    "stages": "stage",
    "ranks": "rank",
    "nodes": "node",
    "servers": "server",
    "adapters": "adapter",
    "turns": "turn",
    "tenants": "tenant",
    "states": "state",
    "groups": "group",
    "chunks": "chunk",
    "kernels": "kernel",
    "prompts": "prompt",
    "sessions": "session",
    "passes": "pass",
    "classes": "class",
    "characters": "character",
    "sizes": "size",
    "rows": "row",
    "params": "param",
}


# ---- derivations: a value or a term carries a unit, not an output format ------------------

# Units whose plain form would read as a wall of digits ("3,350,000,000,000 B/s") get scaled prefixes;
# every other unit reads as 4 significant digits and the unit.
UNIT_FORMATS = {
    "B": auto_bytes,
    "s": auto_seconds,
    "FLOP/s": auto_flops,
    "B/s": auto_byte_rate,
    "FLOP": auto_flop_count,
    "%": lambda x: f"{sig(x)}%",
    # a parameter count (reader walk #20: the count behind params × b_w), in millions or billions
    "params": lambda x: f"{sig(x / 1e9)} billion params" if x >= 1e9 else f"{sig(x / 1e6)} million params",
}
# Money and shares read as the results do (reader walk #20: "$4.66", not "4.656 USD"; "20.3%", not "0.203"),
# zero included ("$0.00", "0%").
EXACT_FORMATS = {
    "USD": usd,
    "USD/GPU-h": lambda x: f"{usd(x)}/GPU-h",
    "share": lambda x: f"{sig(x * 100, 3)}%",  # a fraction, as an output of format "percent" reads
}


def by_unit(value, unit: str = "") -> str:
    """Text for a number that carries a unit: a derivation's result or one of its terms. Text values (a
    name, "never") pass through unchanged."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    value, unit = in_memory_units(value, unit)
    if unit in EXACT_FORMATS:
        return EXACT_FORMATS[unit](value)
    if unit in UNIT_FORMATS and value != 0:  # a zero reads in the base unit: "0 s", not "0 ns"
        return UNIT_FORMATS[unit](value)
    unit = SINGULAR.get(unit, unit) if value == 1 else unit  # "1 sequence", as the results read
    return sig(value) + (f" {unit}" if unit else "")


# ---- the inline syntax's format names: {{ calc(...).key | GiB:2 }} --------------------


def _unit_formatter(divisor: float, unit: str):
    return lambda x, d: _scaled(x / divisor, unit, d)


INLINE_FORMATS = {
    "bytes": auto_bytes,
    "int": lambda x, d: f"{round(x):,}",
    "num": lambda x, d: fixed(x, 2 if d is None else d),
    "sig": lambda x, d: sig(x, 4 if d is None else d),
    "pct": lambda x, d: f"{sig(x * 100, 3) if d is None else fixed(x * 100, d)}%",
    "spct": lambda x, d: f"{x * 100:+,.{0 if d is None else d}f}%",  # a signed error: +17%, -7%
    "usd": usd,
    "x": lambda x, d: f"{sig(x, 3) if d is None else fixed(x, d)}×",
    "s": _unit_formatter(1, "s"),
    "ms": _unit_formatter(1e-3, "ms"),
    "us": _unit_formatter(1e-6, "µs"),
    "tflops": _unit_formatter(1e12, "TFLOP/s"),
    "pflops": _unit_formatter(1e15, "PFLOP/s"),
    "tbps": _unit_formatter(1e12, "TB/s"),
    "gbps": _unit_formatter(1e9, "GB/s"),
    "tokps": lambda x, d: f"{sig(x) if d is None else fixed(x, d)} tokens/s",
    **{unit: _unit_formatter(size, unit) for unit, size in _DECIMAL_BYTES.items()},
}


def inline(value, spec: str | None) -> str:
    """Format a number by an inline spec such as 'GiB:2', 'int' or 'usd'; no spec = 4 significant digits."""
    if spec is None:
        return sig(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
    name, _, digits = spec.partition(":")
    if name not in INLINE_FORMATS:
        raise ValueError(f"unknown format {name!r}; expected one of: {', '.join(sorted(INLINE_FORMATS))}")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ValueError(f"format {name!r} needs a number, got {value!r}")
    return INLINE_FORMATS[name](value, int(digits) if digits else None)


# ---- exact numbers: messages (input ranges) and the command line's raw values ------------


def plain(x) -> str:
    """A number as people read it in a message or a table of raw values: 10,000,000 · 2,684,354,560 ·
    0.01 · 0.000001; counts exactly (below 10^16), other numbers to 6 significant digits, and no exponent
    between a million and 10^15, where a rounded whole number reads better."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    if float(x).is_integer() and abs(x) < 1e16:
        return f"{int(x):,}"
    if 1e6 <= abs(x) < 1e15:
        return f"{x:,.0f}"
    if 1e-9 <= abs(x) < 1e-4:  # 0.000001, as the form's help says it (reader walk #21), not 1e-06
        return f"{float(f'{x:.6g}'):.15f}".rstrip("0")
    return f"{x:,.6g}" if abs(x) < 1e15 else f"{x:.6g}"

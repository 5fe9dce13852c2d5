"""Field specs for calculator inputs and outputs, and validation generated from them.

A calculator declares its inputs with the helpers below; the website builds its
forms from the same dicts, and `validate` checks every input against them, so a
range lives in exactly one place.
"""

from __future__ import annotations

import math
import re

from .errors import InputError
from .display import plain
from .model import Accelerator, Model
from .resolve import resolve_accelerator, resolve_model

OUTPUT_FORMATS = ("bytes", "number", "integer", "percent", "seconds", "usd", "flops", "rate")

# Numeric formats a reader can pick; bytes per element come from formats.py.
DTYPE_CHOICES = (
    ("fp32", "FP32"),
    ("bf16", "BF16"),
    ("fp16", "FP16"),
    ("fp8", "FP8"),
    ("int8", "INT8"),
    ("int4", "INT4"),
    ("int4-awq", "INT4 AWQ"),
    ("mxfp8", "MXFP8"),
    ("mxfp4", "MXFP4"),
    ("nvfp4", "NVFP4"),
)


def _field(key, label, type_, default, *, unit="", min=None, max=None, help="", step=None, choices=None):
    """One input's spec; the builders below name every optional part."""
    spec = {
        "key": key,
        "label": label,
        "type": type_,
        "unit": unit,
        "default": default,
        "min": min,
        "max": max,
        "help": help,
    }
    if step is not None:
        spec["step"] = step
    if choices is not None:
        spec["choices"] = [{"value": v, "label": lab} for v, lab in choices]
    return spec


def number(key, label, default, min, max, unit="", help="", step=None):
    return _field(key, label, "number", default, unit=unit, min=min, max=max, help=help, step=step)


def integer(key, label, default, min, max, unit="", help="", step=None):
    return _field(key, label, "integer", default, unit=unit, min=min, max=max, help=help, step=step)


def choice(key, label, default, choices, help=""):
    return _field(key, label, "choice", default, help=help, choices=choices)


def boolean(key, label, default, help=""):
    return _field(key, label, "boolean", default, help=help)


def text(key, label, default, max_length, help=""):
    """A line of text (the reader's prompts, a pasted list), at most max_length characters."""
    return _field(key, label, "text", default, max=max_length, help=help)


def dtype_field(key, label, default, help="", choices=DTYPE_CHOICES):
    return _field(key, label, "dtype", default, help=help, choices=choices)


def expert_dtype_field(key="expert_weight_dtype", label="Expert (MoE) weight format"):
    return _field(
        key,
        label,
        "dtype",
        "same",
        choices=(("same", "Same as weight format"),) + DTYPE_CHOICES,
        help="Format of a mixture-of-experts model's routed-expert weights; the weight format then "
        "applies to the rest (attention, router, shared experts, embeddings). gpt-oss ships "
        "experts in MXFP4 and the rest in BF16. No effect on dense models.",
    )


def expert_dtype(v: dict) -> str | None:
    """The expert weight format from validated inputs; None means the weight format applies to all."""
    chosen = v.get("expert_weight_dtype", "same")
    return None if chosen == "same" else chosen


def model_field(key="model", label="Model", default="llama-3.1-70b", help=""):
    return _field(
        key,
        label,
        "model",
        default,
        help=help or "A preset, or one of yours: “Define your own…” reads a Hugging Face config.json.",
    )


def accelerator_field(key="hardware", label="Accelerator", default="h100-sxm", help=""):
    return _field(
        key,
        label,
        "accelerator",
        default,
        help=help or "A preset, or one of yours: “Define your own…” sets memory, bandwidth and FLOP/s.",
    )


def output(key, label, unit, format, words=None, shown=True):
    """An output; `words` says a sentinel value in words ({0: "never"}): the raw value stays the number.
    `shown=False`: in the result (exports, inline numbers) but not a row of the results, where it would
    repeat another row's value in another unit (reader walk #19)."""
    assert format in OUTPUT_FORMATS, format
    spec = {"key": key, "label": label, "unit": unit, "format": format}
    if words:
        spec["words"] = {str(k): v for k, v in words.items()}
    if not shown:
        spec["shown"] = False
    return spec


# ---- validation ---------------------------------------------------------------------


# What a reader may type: a plain or scientific numeral, with commas between groups of three (10,000,000).
_NUMERAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_THOUSANDS = re.compile(r"(?<![0-9.,])[0-9]{1,3}(,[0-9]{3})+(?![0-9,])")


def _range_text(spec, kind):
    return f"must be {kind} between {plain(spec['min'])} and {plain(spec['max'])}"


def _as_float(spec, value, kind):
    """A finite float from a number or numeric string, else InputError with the range."""
    if isinstance(value, bool) or value is None:
        raise InputError(spec["key"], _range_text(spec, kind))
    if isinstance(value, str):
        text = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), value.strip())
        if not _NUMERAL.fullmatch(text):  # ASCII digits only: no 1_000, no full-width ١٢ (Python's float() takes both)
            raise InputError(spec["key"], _range_text(spec, kind))
        value = float(text)
    if not isinstance(value, (int, float)):
        raise InputError(spec["key"], _range_text(spec, kind))
    x = float(value) if not isinstance(value, int) else value
    if isinstance(x, float) and not math.isfinite(x):
        raise InputError(spec["key"], _range_text(spec, kind))
    if not spec["min"] <= x <= spec["max"]:
        raise InputError(spec["key"], _range_text(spec, kind))
    return x


def _check_number(spec, value):
    return float(_as_float(spec, value, "a number"))


def _check_integer(spec, value):
    x = _as_float(spec, value, "an integer")
    if isinstance(x, float) and not x.is_integer():
        raise InputError(spec["key"], _range_text(spec, "an integer"))
    return int(x)


def _check_choice(spec, value):
    allowed = [c["value"] for c in spec["choices"]]
    if isinstance(value, str) and value.strip().lower() in allowed:
        return value.strip().lower()
    if value in allowed and not isinstance(value, bool):
        return value
    raise InputError(spec["key"], "must be one of: " + ", ".join(str(a) for a in allowed))


def _check_boolean(spec, value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise InputError(spec["key"], "must be true or false")


def _check_text(spec, value):
    if not isinstance(value, str):
        raise InputError(spec["key"], "must be text")
    if len(value) > spec["max"]:
        raise InputError(spec["key"], f"must be at most {spec['max']:,} characters")
    return value


def _check_model(spec, value):
    return value if isinstance(value, Model) else _resolved(resolve_model, spec, value)


def _check_accelerator(spec, value):
    return value if isinstance(value, Accelerator) else _resolved(resolve_accelerator, spec, value)


def _resolved(resolver, spec, value):
    try:
        return resolver(value, field=spec["key"])
    except InputError:
        raise
    except (ValueError, TypeError, KeyError) as exc:  # a resolver bug must still name the field
        raise InputError(spec["key"], str(exc) or "not a valid definition") from None


CHECKS = {
    "number": _check_number,
    "integer": _check_integer,
    "choice": _check_choice,
    "dtype": _check_choice,
    "boolean": _check_boolean,
    "text": _check_text,
    "model": _check_model,
    "accelerator": _check_accelerator,
}


def validate(inputs_spec: list[dict], inputs) -> dict:
    """Inputs merged over defaults, each checked against its spec; unknown keys rejected."""
    if inputs is None:
        inputs = {}
    if not isinstance(inputs, dict):
        raise InputError("inputs", "must be an object mapping input keys to values")
    known = {s["key"] for s in inputs_spec}
    for key in inputs:
        if key not in known:
            raise InputError(str(key), "unknown input; expected one of: " + ", ".join(sorted(known)))
    return {s["key"]: CHECKS[s["type"]](s, inputs.get(s["key"], s["default"])) for s in inputs_spec}


# ---- result helpers: "show the work" steps and plot series ---------------------------


def step(label: str, formula: str, template: str, terms, value, unit: str = "") -> dict:
    """One line of a derivation, as numbers: the formula in symbols, then the same formula with the
    reader's numbers in it, whose `template` has one {} per term, filled in order from `terms`, each a
    (value, unit) pair or a bare value (no unit); the result is `value` in `unit`. Numbers become text
    only in display.by_unit, with the rules every result follows."""
    pairs = [list(t) if isinstance(t, tuple) else [t, ""] for t in terms]
    return {"label": label, "formula": formula, "template": template, "terms": pairs, "value": value, "unit": unit}


def series(title, x_label, x_unit, x_values, ys, kind="line", log_axes=False):
    """A plot: ys is a list of (name, unit, values); `log_axes` asks for log x and y."""
    out = {
        "title": title,
        "kind": kind,
        "x": {"label": x_label, "unit": x_unit, "values": list(x_values)},
        "y": [{"name": n, "unit": u, "values": list(v)} for n, u, v in ys],
    }
    if log_axes:
        out["log_axes"] = True
    return out


def mark(plot: dict, key: str | None, x, on: str | None = None, name: str | None = None, y=None) -> dict:
    """Marks the reader's point on `plot`: x, the current value of input `key`, on the curve named `on` (the first
    by default), as a series of one value that the page draws as a large marker (reader walk #29). The x values
    must hold x; `y` gives the value where the reader's own case is on no curve; a gap there marks nothing. The
    plot records which input its x axis is (x.input); key None: the axis is a value derived from the inputs (a
    load, a utilisation, a degree the calculator chose), and x is the reader's."""
    xs, ys = plot["x"]["values"], plot["y"]
    curve = next(y for y in ys if on is None or y["name"] == on)
    i = xs.index(x)
    y = curve["values"][i] if y is None else y
    label = name or f"yours ({x:,} {plot['x']['unit']})".replace(" )", ")")
    if key is not None:
        plot["x"]["input"] = key
    if y is not None:
        ys.append(
            {
                "name": label,
                "unit": curve["unit"],
                "values": [y if j == i else None for j in range(len(xs))],
                "marker": True,
            }
        )
    return plot

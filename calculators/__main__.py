"""Command line: `python -m calculators list` and `python -m calculators NAME --set key=value … [--json]`."""

from __future__ import annotations

import argparse
import json
import sys

from . import display
from .api import calculator_names, dumps, run, schema
from .catalog import accelerator_presets, model_presets
from .errors import InputError


def _parse_value(text: str):
    """JSON when it parses (numbers, true, objects), else the plain string (preset ids)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _parse_sets(pairs: list[str]) -> dict:
    inputs = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(pair, "expected key=value")
        inputs[key.strip()] = _parse_value(value)
    return inputs


def table(name: str, result: dict) -> str:
    """Each output as the page shows it (display.by_output_format), then its exact value and unit, the
    figure to check a derivation or an inline expression against."""
    rows = [
        (
            o["label"],
            display.output_text(result[o["key"]], o),
            display.plain(result[o["key"]]),
            o["unit"],
        )
        for o in schema(name)["outputs"]
    ]
    w0, w1, w2 = (max(len(r[i]) for r in rows) for i in range(3))
    lines = [f"{label:<{w0}}  {text:>{w1}}  {value:>{w2}}  {unit}".rstrip() for label, text, value, unit in rows]
    lines += [f"note: {n}" for n in result.get("notes", [])]
    return "\n".join(lines)


def listing() -> str:
    lines = ["Calculators:"] + [f"  {n:<16} {schema(n)['title']}" for n in calculator_names()]
    lines += ["", "Models:"] + [f"  {k:<20} {m.name}" for k, m in model_presets().items()]
    lines += ["", "Accelerators:"] + [f"  {k:<20} {a.name}" for k, a in accelerator_presets().items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m calculators", description=__doc__)
    parser.add_argument("name", help="'list', or a calculator name")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an input; the value is read as JSON when it parses, else as text",
    )
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    args = parser.parse_args(argv)
    if args.name == "list":
        print(listing())
        return 0
    try:
        result = run(args.name, _parse_sets(args.set))
    except InputError as exc:
        print(f"error: {exc.field}: {exc.message}", file=sys.stderr)
        return 2
    print(dumps(result) if args.json else table(args.name, result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

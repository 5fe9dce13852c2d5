"""The project's Markdown syntax for the numeric core: parsing only, no MkDocs.

Inline number, evaluated at build time:
    {{ kv_cache(model="llama-3.1-70b", context_tokens=4096).kv_bytes_per_token | GiB:2 }}
A preset's field (a factor of a formula, typed nowhere):
    {{ preset("llama-3.1-70b").attention.num_kv_heads }}
A named scenario from the page's front matter, as it is or with inputs changed:
    scenarios: {ll70: {memory: {model: llama-3.1-70b, hardware: h100-sxm, tensor_parallel: 4}}}
    {{ ll70.max_concurrent_sequences | int }} · {{ ll70(kv_dtype="fp8").max_concurrent_sequences | int }}
An input of a call or scenario, as it was used (given, or the schema's default):
    {{ ll70.inputs.tensor_parallel }}
Calculator block (a fenced block whose body is YAML):
    ```calculator
    name: kv_cache
    title: KV cache of Llama 3.1 70B at 32k context
    inputs: {model: llama-3.1-70b, context_tokens: 32768}
    plot: kv_vs_context
    ```
Code spans and other fenced blocks are left alone, so the syntax can be shown in docs.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

import yaml

INLINE = re.compile(r"\{\{(.+?)\}\}")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$")
CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")
BLOCK_KEYS = {"name", "title", "inputs", "plot", "id"}


class MarkupError(ValueError):
    """A malformed inline expression or calculator block; the message quotes it."""


PRESET = "preset"  # `preset("llama-3.1-70b").num_layers`: a field of a preset, not a calculator output
INPUTS = "inputs"  # `lat(...).inputs.batch_size`: an input of the call (given or default), not an output


@dataclass(frozen=True)
class InlineRef:
    calculator: str  # a calculator's name, or PRESET
    inputs: dict  # the calculator's inputs; for PRESET, {"id": the preset's id}
    path: tuple[str, ...]  # output key (dotted for nested values) or the preset's field path
    format: str | None


@dataclass
class CalculatorBlock:
    name: str
    title: str
    inputs: dict = field(default_factory=dict)
    plot: str | None = None
    id: str | None = None


def _literal(node: ast.expr, text: str):
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise MarkupError(f"inputs must be literals in {{{{{text}}}}}") from None


def _split_path(text: str) -> tuple[ast.expr, list[str], str | None]:
    """`head.a.b | fmt` -> (head node, ["a", "b"], "fmt"); a path of at least one name is required."""
    expr, _, fmt = text.partition("|")
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        raise MarkupError(f"cannot parse {{{{{text}}}}}") from None
    path = []
    while isinstance(node, ast.Attribute):
        path.insert(0, node.attr)
        node = node.value
    if not path:
        raise MarkupError(f"expected calc(key=value, ...).output in {{{{{text}}}}}")
    return node, path, fmt.strip() or None


def _from_scenario(name: str, overrides: dict, scenarios: dict, text: str) -> tuple[str, dict]:
    calculator, inputs = scenarios[name]
    if calculator == PRESET and overrides:
        raise MarkupError(f"scenario {name!r} names a preset: it takes no inputs, in {{{{{text}}}}}")
    return calculator, {**inputs, **overrides}


def parse_inline(text: str, scenarios: dict | None = None) -> InlineRef:
    """An inline expression -> InlineRef; literals only, nothing is executed.

    `calc(k=v, ...).output.path`, `preset("id").field.path`, or a front-matter scenario used as it is
    (`name.output`) or with inputs changed (`name(k=v).output`); then optionally `| format`.
    """
    scenarios = scenarios or {}
    node, path, fmt = _split_path(text)
    call = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    if call and node.func.id == PRESET and len(node.args) == 1 and not node.keywords:
        preset_id = _literal(node.args[0], text)
        if not isinstance(preset_id, str):
            raise MarkupError(f"preset() takes a preset id in quotes, in {{{{{text}}}}}")
        return InlineRef(PRESET, {"id": preset_id}, tuple(path), fmt)
    if isinstance(node, ast.Name):
        if node.id not in scenarios:
            known = ", ".join(sorted(scenarios)) or "none"
            raise MarkupError(f"no scenario {node.id!r} on this page (scenarios: {known}) in {{{{{text}}}}}")
        return InlineRef(*_from_scenario(node.id, {}, scenarios, text), tuple(path), fmt)
    if not (call and not node.args):
        raise MarkupError(f"expected calc(key=value, ...).output in {{{{{text}}}}}")
    inputs = {k.arg: _literal(k.value, text) for k in node.keywords}
    if node.func.id in scenarios:
        return InlineRef(*_from_scenario(node.func.id, inputs, scenarios, text), tuple(path), fmt)
    return InlineRef(node.func.id, inputs, tuple(path), fmt)


def parse_scenarios(data, reserved: frozenset[str] = frozenset()) -> dict[str, tuple[str, dict]]:
    """A page's front-matter `scenarios:` -> {name: (calculator or PRESET, inputs)}.

    Each entry names one calculator and its inputs (`ll70: {memory: {model: llama-3.1-70b, …}}`) or one
    preset (`ll70m: {preset: llama-3.1-70b}`). A name may not shadow a calculator (`reserved`).
    """
    if not isinstance(data, dict):
        raise MarkupError("front matter `scenarios:` must be a mapping of names to scenarios")
    out = {}
    for name, entry in data.items():
        if not (isinstance(name, str) and name.isidentifier()) or name in reserved or name == PRESET:
            raise MarkupError(f"scenario name {name!r} must be an identifier and not a calculator's name")
        if not (isinstance(entry, dict) and len(entry) == 1):
            raise MarkupError(f"scenario {name!r} must name one calculator (or `preset`) and its inputs")
        ((kind, value),) = entry.items()
        if kind == PRESET and isinstance(value, str):
            out[name] = (PRESET, {"id": value})
        elif kind != PRESET and isinstance(value, dict):
            out[name] = (str(kind), dict(value))
        else:
            raise MarkupError(f"scenario {name!r}: expected `preset: id` or `calculator: {{inputs}}`")
    return out


def parse_block(body: str) -> CalculatorBlock:
    try:
        data = yaml.safe_load(body) or {}
    except yaml.YAMLError as exc:
        raise MarkupError(f"calculator block is not valid YAML: {exc}") from None
    if not isinstance(data, dict) or "name" not in data:
        raise MarkupError("calculator block needs at least `name:`")
    unknown = set(data) - BLOCK_KEYS
    if unknown:
        raise MarkupError(f"calculator block has unknown keys {sorted(unknown)}; allowed: {sorted(BLOCK_KEYS)}")
    inputs = data.get("inputs") or {}
    if not isinstance(inputs, dict):
        raise MarkupError("calculator block `inputs:` must be a mapping")
    return CalculatorBlock(
        name=str(data["name"]),
        title=str(data.get("title") or ""),
        inputs=inputs,
        plot=data.get("plot"),
        id=data.get("id"),
    )


def _substitute(text: str, replace) -> str:
    """Inline expressions in text outside code; one that opens and does not close on its line is an
    error (it would be printed as it is, and the strict build would not notice)."""
    if "{{" in INLINE.sub("", text):
        raise MarkupError(f"an inline expression opens and does not close on its line: {text.strip()[:80]!r}")
    return INLINE.sub(lambda m: replace(m.group(1)), text)


def _replace_outside_code_spans(line: str, replace) -> str:
    out, last = [], 0
    for span in CODE_SPAN.finditer(line):
        out.append(_substitute(line[last : span.start()], replace))
        out.append(span.group(0))
        last = span.end()
    out.append(_substitute(line[last:], replace))
    return "".join(out)


def transform(markdown: str, on_inline, on_block, scenarios: dict | None = None) -> str:
    """Replace inline expressions (outside code) and calculator blocks, line by line.

    on_inline(InlineRef) -> str; on_block(CalculatorBlock, indent) -> str (raw HTML);
    scenarios: the page's, from `parse_scenarios`.
    """
    lines, out, i = markdown.split("\n"), [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            out.append(_replace_outside_code_spans(lines[i], lambda t: on_inline(parse_inline(t, scenarios))))
            i += 1
            continue
        end = _fence_end(lines, i, m.group("fence"))
        if m.group("info").strip() == "calculator":
            block = parse_block("\n".join(line[len(m.group("indent")) :] for line in lines[i + 1 : end]))
            out.append(on_block(block, m.group("indent")))
        else:
            out.extend(lines[i : end + 1])
        i = end + 1
    return "\n".join(out)


def _fence_end(lines: list[str], start: int, fence: str) -> int:
    for j in range(start + 1, len(lines)):
        m = FENCE.match(lines[j])
        if (
            m
            and m.group("fence").startswith(fence[0])
            and len(m.group("fence")) >= len(fence)
            and not m.group("info").strip()
        ):
            return j
    raise MarkupError(f"unclosed code fence opened at line {start + 1}")

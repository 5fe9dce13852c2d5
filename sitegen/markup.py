"""The project's Markdown syntax for the numeric core: parsing only, no MkDocs.

Inline number, evaluated at build time:
    {{ kv_cache(model="llama-3.1-70b", context_tokens=4096).kv_bytes_per_token | GiB:2 }}
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


@dataclass(frozen=True)
class InlineRef:
    calculator: str
    inputs: dict
    path: tuple[str, ...]
    format: str | None


@dataclass
class CalculatorBlock:
    name: str
    title: str
    inputs: dict = field(default_factory=dict)
    plot: str | None = None
    id: str | None = None


def parse_inline(text: str) -> InlineRef:
    """`calc(k=v, ...).output.path | format` -> InlineRef; literals only, nothing is executed."""
    expr, _, fmt = text.partition("|")
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        raise MarkupError(f"cannot parse {{{{{text}}}}}") from None
    path = []
    while isinstance(node, ast.Attribute):
        path.insert(0, node.attr)
        node = node.value
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args and path):
        raise MarkupError(f"expected calc(key=value, ...).output in {{{{{text}}}}}")
    try:
        inputs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
    except ValueError:
        raise MarkupError(f"inputs must be literals in {{{{{text}}}}}") from None
    return InlineRef(node.func.id, inputs, tuple(path), fmt.strip() or None)


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
    return CalculatorBlock(name=str(data["name"]), title=str(data.get("title") or ""),
                           inputs=inputs, plot=data.get("plot"), id=data.get("id"))


def _replace_outside_code_spans(line: str, replace) -> str:
    out, last = [], 0
    for span in CODE_SPAN.finditer(line):
        out.append(INLINE.sub(lambda m: replace(m.group(1)), line[last:span.start()]))
        out.append(span.group(0))
        last = span.end()
    out.append(INLINE.sub(lambda m: replace(m.group(1)), line[last:]))
    return "".join(out)


def transform(markdown: str, on_inline, on_block) -> str:
    """Replace inline expressions (outside code) and calculator blocks, line by line.

    on_inline(InlineRef) -> str; on_block(CalculatorBlock, indent) -> str (raw HTML).
    """
    lines, out, i = markdown.split("\n"), [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            out.append(_replace_outside_code_spans(lines[i], lambda t: on_inline(parse_inline(t))))
            i += 1
            continue
        end = _fence_end(lines, i, m.group("fence"))
        if m.group("info").strip() == "calculator":
            block = parse_block("\n".join(l[len(m.group("indent")):] for l in lines[i + 1:end]))
            out.append(on_block(block, m.group("indent")))
        else:
            out.extend(lines[i:end + 1])
        i = end + 1
    return "\n".join(out)


def _fence_end(lines: list[str], start: int, fence: str) -> int:
    for j in range(start + 1, len(lines)):
        m = FENCE.match(lines[j])
        if m and m.group("fence").startswith(fence[0]) and len(m.group("fence")) >= len(fence) \
                and not m.group("info").strip():
            return j
    raise MarkupError(f"unclosed code fence opened at line {start + 1}")

"""Every number the built site shows, collected without a browser: the golden record.

For each page under docs/: every inline expression and the text it renders to, and every calculator
block (the workbench's too) with its raw result and the text of each output; plus the glossary's
tables. Two files: `numbers.json` holds what must never change in a refactor (raw results, output and
inline texts, plot tables, notes); `texts.json` holds derivation wording and glossary tables, which a
change may mean to improve (the commit that changes them says what changed). Regenerate with
`UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/golden`.
"""

from __future__ import annotations

import json
from pathlib import Path

from mkdocs.utils.meta import get_data  # the front matter, split off as MkDocs does

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
HERE = Path(__file__).resolve().parent


def _present(name: str, inputs: dict) -> dict:
    from calculators import page

    return page.present(name, inputs)


def _block_record(name: str, inputs: dict) -> tuple[dict, list]:
    shown = _present(name, inputs)
    result = dict(shown["result"])
    work = result.pop("derivation", [])
    numbers = {
        "name": name,
        "inputs": inputs,
        "result": result,
        "outputs": {o["key"]: o["text"] for o in shown["outputs"]},
        "derivation_values": [[s["label"], s["value"], s.get("unit", "")] for s in work],
        "derivation_value_texts": [w["text"] for w in shown["work"]],
        "tables": shown["tables"],
    }
    texts = [[w["label"], w["formula"], w["substituted"]] for w in shown["work"]]
    return numbers, texts


def _page(markdown: str) -> tuple[dict, dict]:
    from sitegen import markup, pages

    numbers, texts = {"inline": [], "blocks": []}, {"blocks": []}

    def on_inline(ref):
        text = pages.inline_text(ref)
        numbers["inline"].append([ref.calculator, ref.inputs, list(ref.path), ref.format, text])
        return text

    def on_block(block, indent):
        n, t = _block_record(block.name, block.inputs)
        numbers["blocks"].append(n)
        texts["blocks"].append(t)
        return ""

    markdown, meta = get_data(markdown)
    markdown = pages.expand_workbench(markdown)
    markup.transform(markdown, on_inline, on_block, pages.scenarios(meta))
    return numbers, texts


def _glossary_tables() -> dict:
    from sitegen import glossary

    return {
        "accelerators": glossary.render_accelerators(),
        "models": glossary.render_models(),
        "formats": glossary.render_formats(),
        "engines": glossary.render_engines(),
        "prices": glossary.render_prices(),
    }


def collect() -> tuple[dict, dict]:
    numbers, texts = {}, {}
    for path in sorted(DOCS.rglob("*.md")):
        key = path.relative_to(DOCS).as_posix()
        numbers[key], texts[key] = _page(path.read_text(encoding="utf-8"))
    texts["glossary tables"] = _glossary_tables()
    return numbers, texts


def dump(data) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"

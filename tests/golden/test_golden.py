"""Every number in the built site is unchanged by a refactor: compared with the committed record.

An intended change regenerates the record (`UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/golden`)
in the same commit, whose message lists what changed and why.
"""

from __future__ import annotations

import difflib
import os

import pytest

from collect import HERE, collect, dump

UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="module")
def collected():
    return dict(zip(("numbers.json", "texts.json"), collect()))


@pytest.mark.parametrize("name", ["numbers.json", "texts.json"])
def test_every_number_and_text_matches_the_record(collected, name):
    path, now = HERE / name, dump(collected[name])
    if UPDATE:
        path.write_text(now, encoding="utf-8")
    before = path.read_text(encoding="utf-8")
    if before != now:
        diff = "".join(list(difflib.unified_diff(before.splitlines(True), now.splitlines(True), name, "now", n=2))[:80])
        pytest.fail(f"{name} differs from the record (first lines of the diff):\n{diff}")


def test_the_record_covers_every_page_and_calculator(collected):
    numbers = collected["numbers.json"]
    assert {"parts/01-decode-loop.md", "parts/05-paged-attention.md", "workbench.md", "index.md"} <= set(numbers)
    from calculators import calculator_names

    seen = {b["name"] for page in numbers.values() for b in page["blocks"]}
    assert seen == set(calculator_names())
    assert sum(len(p["inline"]) for p in numbers.values()) > 100

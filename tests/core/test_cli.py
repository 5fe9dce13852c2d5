"""python -m calculators: list, a readable table, --json, and exit 2 naming the field on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from calculators import run

ROOT = Path(__file__).resolve().parents[2]


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "calculators", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_list_shows_calculators_and_presets():
    out = cli("list")
    assert out.returncode == 0
    for word in ("kv_cache", "goodput", "KV-cache size", "llama-3.1-70b", "deepseek-v3", "h100-sxm", "tpu-v5e"):
        assert word in out.stdout


def test_table_is_aligned_with_units():
    out = cli("kv_cache", "--set", "model=opt-13b", "--set", "context_tokens=2048", "--set", "kv_dtype=fp16")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    row = next(line for line in lines if line.startswith("KV per additional token"))
    assert "819,200" in row and row.rstrip().endswith("B")
    assert "800 KiB" in row  # and as the page shows it, by display's rules
    byte_rows = [line for line in lines if line.endswith("  B")]
    assert len(byte_rows) > 3 and len({len(line) for line in byte_rows}) == 1  # values right-aligned


def test_json_matches_run():
    out = cli("cost", "--set", "output_tokens_per_s=14800", "--json")
    assert out.returncode == 0
    assert json.loads(out.stdout) == run("cost", {"output_tokens_per_s": 14800})


def test_values_parse_as_json_objects():
    acc = json.dumps(
        {
            "id": "mine",
            "name": "Mine",
            "memory_bytes": 1e11,
            "memory_bandwidth_bytes_per_s": 2e12,
            "dense_flops_per_s": {"bf16": 5e14},
        }
    )
    out = cli("roofline", "--set", f"hardware={acc}", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["ridge_point_flops_per_byte"] == 250


def test_bad_input_exits_2_naming_the_field():
    out = cli("kv_cache", "--set", "context_tokens=-3")
    assert out.returncode == 2 and out.stdout == ""
    assert "context_tokens: must be an integer between 1 and 10,000,000" in out.stderr
    out = cli("kv_cache", "--set", "bogus=1")
    assert out.returncode == 2 and "bogus" in out.stderr
    out = cli("kv_cache", "--set", "novalue")
    assert out.returncode == 2 and "novalue" in out.stderr
    out = cli("nope")
    assert out.returncode == 2 and "calculator" in out.stderr

"""The browser's answers equal CPython's, byte for byte: present_json and describe_json (what the
worker calls) in Pyodide 314 (Node) vs here, both from a plain start with the wheel and from the
memory snapshot the site ships.

Skips only when node_modules/pyodide is missing and CI is unset; in CI it always runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from calculators import describe_json, present_json
from sitegen.assets import npm_version
from sitegen.snapshot import snapshot_bytes
from sitegen.wheel import build_wheel

from parity_cases import cases  # tests/core is on sys.path (rootdir-relative imports)

ROOT = Path(__file__).resolve().parents[2]
PYODIDE = ROOT / "node_modules" / "pyodide"
SCRIPT = Path(__file__).with_name("pyodide_parity.mjs")


def _core(kind: str, out_dir: Path) -> Path:
    """The wheel, or the snapshot made from it (cached like the site build's)."""
    wheel = build_wheel(out_dir)
    if kind == "wheel":
        return wheel
    version = npm_version("pyodide")
    path = out_dir / "calculators.bin.gz"
    path.write_bytes(snapshot_bytes(wheel.read_bytes(), version))
    return path


@pytest.mark.skipif(
    not PYODIDE.exists() and not os.environ.get("CI"),
    reason="node_modules/pyodide is absent (run `npm ci`); required when CI is set",
)
@pytest.mark.parametrize("kind", ["wheel", "snapshot"])
def test_pyodide_matches_cpython_byte_for_byte(tmp_path, kind):
    node = shutil.which("node")
    assert node, "node is required for the Pyodide parity test"
    core = _core(kind, tmp_path)
    all_cases = cases()
    cases_file = tmp_path / "cases.json"
    cases_file.write_text(json.dumps(all_cases))
    proc = subprocess.run(
        [node, str(SCRIPT), str(core.resolve()), str(cases_file)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    browser = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(browser) == len(all_cases)
    entry = {"present": present_json, "describe": describe_json}
    for (op, name, text), got in zip(all_cases, browser):
        assert got == entry[op](name, text), f"{op} {name} {text[:200]}"
        assert "internal error" not in got, got

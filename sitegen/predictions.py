"""The calibration ledger's predictions the site's wheel carries (``calibration.SHIPPED``).

Pyodide would take about a minute to compute them while the worker's snapshot is made, and the snapshot would
then keep the step models behind them (tens of MB every reader downloads). CPython computes them once per version
of the core, in a fresh process from exactly the wheel's sources (a long-lived ``mkdocs serve`` never ships numbers
from code it imported before an edit), cached under ``build/predictions/`` by those sources' hash.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "predictions"
KEEP = 4  # tables kept for recent versions of the core, as for snapshots
# Run in the unpacked sources; refuses to run an installed copy of the core instead of them.
SCRIPT = """
import json, pathlib, sys
import calculators
from calculators.calibration import shipped_table
if pathlib.Path(calculators.__file__).parent != pathlib.Path("calculators").resolve():
    sys.exit(f"imported {calculators.__file__}, not the wheel's sources")
sys.stdout.write(json.dumps(shipped_table(), separators=(",", ":"), allow_nan=False))
"""


class PredictionsError(RuntimeError):
    pass


def cache_key(entries: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name, data in sorted(entries.items()):
        digest.update(hashlib.sha256(name.encode()).digest() + hashlib.sha256(data).digest())
    return digest.hexdigest()[:16]


def compute(entries: dict[str, bytes]) -> bytes:
    """The table as JSON bytes, computed by CPython from these package files (path → bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in entries.items():
            path = Path(tmp) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        env = dict(os.environ, PYTHONPATH=tmp, PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.run(
            [sys.executable, "-c", SCRIPT], cwd=tmp, env=env, capture_output=True, timeout=1200, check=False
        )
    if proc.returncode != 0:
        raise PredictionsError(f"computing the calibration predictions failed: {proc.stderr.decode()[-2000:]}")
    return proc.stdout


def shipped(entries: dict[str, bytes], cache: Path = CACHE) -> bytes:
    """The table for these package files, from the cache or computed now (and cached)."""
    path = cache / f"{cache_key(entries)}.json"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")  # concurrent builds never see half a file
        partial.write_bytes(compute(entries))
        partial.replace(path)
        for old in sorted(cache.glob("*.json"), key=lambda p: p.stat().st_mtime)[:-KEEP]:
            old.unlink(missing_ok=True)
    return path.read_bytes()

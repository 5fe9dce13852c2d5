"""The calibration ledger's predictions the site's wheel carries (``calibration.SHIPPED``), in every mode.

In Pyodide one mode takes longer than the worker's call timeout, and the snapshot would keep the step models behind
the predictions (tens of MB every reader downloads). CPython computes them once per version of the core, in fresh
processes from exactly the wheel's sources (so the wheel of a long-lived ``mkdocs serve`` never carries numbers from
code that process imported before an edit), one process per core over the modes (about a minute on two cores),
cached under ``build/predictions/`` by those sources, this script and the interpreter.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from . import buildcache

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "predictions"
KEEP = 4  # tables kept for recent versions of the core, as for snapshots
TIMEOUT_S = 1200
# Run in the unpacked sources as worker k of n (arguments): every n-th of their calibration.SHIPPED_MODES from the
# k-th; refuses to run an installed copy of the core instead of them.
SCRIPT = """
import json, pathlib, sys
import calculators
from calculators import calibration
if pathlib.Path(calculators.__file__).resolve().parent != pathlib.Path("calculators").resolve():
    sys.exit(f"imported {calculators.__file__}, not the wheel's sources")
k, n = (int(a) for a in sys.argv[1:])
modes = calibration.SHIPPED_MODES[k::n]
sys.stdout.write(json.dumps(calibration.shipped_table(modes), separators=(",", ":"), allow_nan=False))
"""


class PredictionsError(RuntimeError):
    pass


def cache_key(entries: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for part in (SCRIPT.encode(), sys.version.encode()):
        digest.update(hashlib.sha256(part).digest())
    for name, data in sorted(entries.items()):
        digest.update(hashlib.sha256(name.encode()).digest() + hashlib.sha256(data).digest())
    return digest.hexdigest()[:16]


def compute(entries: dict[str, bytes], workers: int | None = None) -> bytes:
    """The table as JSON bytes, computed by CPython from these package files (path → bytes), over `workers`
    processes (one per core; more than a few only share the same eight modes thinner)."""
    workers = max(1, min(workers or os.cpu_count() or 1, 4))
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in entries.items():
            path = Path(tmp) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        env = dict(os.environ, PYTHONPATH=tmp, PYTHONDONTWRITEBYTECODE="1")
        procs = [_start(k, workers, tmp, env) for k in range(workers)]
        parts = [_result(proc) for proc in procs]
    table = dict(parts[0], predicted={k: v for part in parts for k, v in part["predicted"].items()})
    if not table["predicted"]:
        raise PredictionsError("the calibration predictions have no mode")
    return json.dumps(table, separators=(",", ":"), allow_nan=False).encode()


def _start(k: int, n: int, cwd: str, env: dict) -> subprocess.Popen:
    cmd = [sys.executable, "-c", SCRIPT, str(k), str(n)]
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _result(proc: subprocess.Popen) -> dict:
    """One process's table, checked: a stray print in the core must fail the build, not be cached."""
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise PredictionsError(f"computing the calibration predictions took over {TIMEOUT_S} s") from None
    if proc.returncode != 0:
        raise PredictionsError(f"computing the calibration predictions failed: {err.decode(errors='replace')[-2000:]}")
    try:
        table = json.loads(out)
        assert len(table["ids"]) == len(table["bound"])
        assert all(len(v) == len(table["ids"]) for v in table["predicted"].values())
    except (ValueError, KeyError, TypeError, AssertionError):
        raise PredictionsError(f"the calibration predictions are not a table: {out[:200]!r}") from None
    return table


def shipped(entries: dict[str, bytes], cache: Path = CACHE) -> bytes:
    """The table for these package files, from the cache or computed now (and cached)."""
    return buildcache.cached(cache / f"{cache_key(entries)}.json", lambda: compute(entries), KEEP)

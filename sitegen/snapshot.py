"""The worker's start-up snapshot: Pyodide's memory with the core imported and warmed.

``snapshot.mjs`` makes it in Node from the same wheel the site ships. Making one takes
several seconds, so it is cached under ``build/snapshots/``, keyed by everything that
decides its content: the wheel's bytes, the Pyodide version and the script itself.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import buildcache

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve().parent / "node" / "snapshot.mjs"
CACHE = ROOT / "build" / "snapshots"
KEEP = 4  # snapshots kept for recent versions of the core (switching branches stays fast)


class SnapshotError(RuntimeError):
    pass


def cache_key(wheel: bytes, pyodide_version: str) -> str:
    digest = hashlib.sha256()
    for part in (wheel, pyodide_version.encode(), SCRIPT.read_bytes()):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:16]


def make(wheel: bytes, out: Path) -> None:
    """Run Node once: write the gzip-compressed snapshot for this wheel to ``out``."""
    node = shutil.which("node")
    if not node:
        raise SnapshotError("Node.js is needed to build the calculators' start-up snapshot")
    with tempfile.TemporaryDirectory() as tmp:
        wheel_path = Path(tmp) / "core.whl"
        wheel_path.write_bytes(wheel)
        proc = subprocess.run(
            [node, str(SCRIPT), str(wheel_path), str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300
        )
    if proc.returncode != 0:
        raise SnapshotError(f"snapshot.mjs failed: {proc.stderr.strip()[-2000:]}")


def snapshot_bytes(wheel: bytes, pyodide_version: str, cache: Path = CACHE) -> bytes:
    """The snapshot for this wheel, from the cache or made now (and cached)."""
    path = cache / f"{cache_key(wheel, pyodide_version)}.gz"
    return buildcache.cached(path, lambda: _made(wheel), KEEP)


def _made(wheel: bytes) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "snapshot.gz"
        make(wheel, out)
        return out.read_bytes()

"""Files the build makes slowly and keeps under ``build/`` by a key of everything that decides them
(the worker's snapshot, the calibration predictions): made once, written atomically, the newest few kept."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def cached(path: Path, make: Callable[[], bytes], keep: int) -> bytes:
    """The bytes at ``path``, made now (and kept) if it is missing; older files of its kind beyond ``keep`` go."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # concurrent builds never see half a file
        partial.write_bytes(make())
        partial.replace(path)
        _prune(path.parent, path.suffix, keep)
    return path.read_bytes()


def _prune(folder: Path, suffix: str, keep: int) -> None:
    dated = []
    for p in folder.glob(f"*{suffix}"):
        try:
            dated.append((p.stat().st_mtime, p))
        except FileNotFoundError:  # another build pruned it meanwhile
            pass
    for _, old in sorted(dated)[:-keep]:
        old.unlink(missing_ok=True)

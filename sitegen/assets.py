"""Every runtime asset of the site, from pinned local sources, and where pages find it.

Nothing is fetched at build or run time. Pyodide and Plotly come from ``node_modules`` (pinned by
package-lock.json) under versioned paths, so a host may cache them forever; the core's wheel is
built from ``calculators/`` and versioned by its content hash, and so is the memory snapshot the
worker starts from (see snapshot.py). `site_files` says what to add to the site and
`runtime_targets` where each piece lives: both read the same `core_files`, so whichever caller
runs first, the URLs in the pages and the files in the site agree.
"""

from __future__ import annotations

import json
from functools import lru_cache, cache
from pathlib import Path
from collections.abc import Callable

from . import predictions, snapshot, wheel

ROOT = Path(__file__).resolve().parent.parent
NODE = ROOT / "node_modules"
PLOTLY = "plotly.js-cartesian-dist-min"
WORKER = "assets/calculators/worker.js"


class AssetError(RuntimeError):
    """A vendored file is missing or the snapshot could not be made; the message says what to run."""


@cache  # read once per process, not once per calculator block
def npm_version(package: str, node_modules: Path = NODE) -> str:
    manifest = node_modules / package / "package.json"
    if not manifest.exists():
        raise AssetError(f"{manifest} is missing: run `npm ci` (or `make build`) first")
    return json.loads(manifest.read_text())["version"]


def pyodide_dir(node_modules: Path = NODE) -> str:
    """The site folder of the Python runtime, versioned so a host may cache it forever."""
    return f"assets/vendor/pyodide/{npm_version('pyodide', node_modules)}/"


def plotly_path(node_modules: Path = NODE) -> str:
    return f"assets/vendor/plotly/{npm_version(PLOTLY, node_modules)}/plotly-cartesian.min.js"


def pyodide_files(node_modules: Path = NODE) -> dict[str, Path]:
    """The runtime under .js names: a server that doesn't know .mjs can't break it."""
    src = node_modules / "pyodide"
    base = pyodide_dir(node_modules)
    names = {
        "pyodide-loader.js": "pyodide.mjs",
        "pyodide-asm.js": "pyodide.asm.mjs",
        "pyodide.asm.wasm": "pyodide.asm.wasm",
        "python_stdlib.zip": "python_stdlib.zip",
        "pyodide-lock.json": "pyodide-lock.json",
    }
    return {base + dest: src / name for dest, name in names.items()}


def plotly_files(node_modules: Path = NODE) -> dict[str, Path]:
    return {plotly_path(node_modules): node_modules / PLOTLY / "plotly-cartesian.min.js"}


def vendored_files(node_modules: Path = NODE) -> dict[str, Path]:
    """Site path -> source file, for every vendored asset."""
    files: dict[str, Path] = {}
    for part in (pyodide_files, plotly_files):
        files.update(part(node_modules))
    missing = [str(p) for p in files.values() if not p.exists()]
    if missing:
        raise AssetError(f"vendored files missing (run `npm ci`): {', '.join(missing)}")
    return files


@lru_cache(maxsize=4)  # keyed by the wheel's bytes: a changed core (mkdocs serve) gets new files
def _core_files(wheel_data: bytes) -> dict[str, bytes]:
    try:
        snap = snapshot.snapshot_bytes(wheel_data, npm_version("pyodide"))
    except snapshot.SnapshotError as exc:
        raise AssetError(str(exc)) from None
    # gzip inside, but not named .gz: a server may add "Content-Encoding: gzip" for that suffix,
    # the browser would then inflate it and the worker would find no gzip left to inflate.
    return {
        "wheel": (f"assets/wheels/{wheel.content_hash(wheel_data)}/{wheel.wheel_name()}", wheel_data),
        "snapshot": (f"assets/snapshots/{wheel.content_hash(snap)}/calculators.snapshot", snap),
    }


def core_files() -> dict[str, tuple[str, bytes]]:
    """{"wheel" | "snapshot": (site path, bytes)} for the core as it is now."""
    try:
        data = wheel.wheel_bytes()
    except predictions.PredictionsError as exc:
        raise AssetError(str(exc)) from None
    return _core_files(data)


def runtime_targets() -> dict[str, str]:
    """Site paths of what the browser loads: the worker, Python, the core (wheel, snapshot), Plotly."""
    core = core_files()
    return {
        "worker": WORKER,
        "pyodide": pyodide_dir(),
        "wheel": core["wheel"][0],
        "snapshot": core["snapshot"][0],
        "plotly": plotly_path(),
    }


def runtime_urls(page_url: str, relative: Callable[[str, str], str]) -> dict[str, str]:
    """The runtime targets as URLs from one page; `relative(target, page_url)` is the generator's own."""
    targets = runtime_targets()
    urls = {k: relative(v, page_url) for k, v in targets.items()}
    return {k: u + "/" if targets[k].endswith("/") and not u.endswith("/") else u for k, u in urls.items()}

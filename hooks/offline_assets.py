"""MkDocs hook: put every runtime asset into the site, from pinned local sources.

Nothing is fetched at build or run time. Pyodide and Plotly come from
``node_modules`` (pinned by package-lock.json) under versioned paths, so a host
may cache them forever; the core's wheel is built from ``calculators/`` and
versioned by its content hash, and so is the memory snapshot the worker starts from
(see snapshot.py). Files are added with ``File.generated`` so the
privacy plugin audits them like any other page asset.
"""
from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

sys.path.insert(0, str(Path(__file__).resolve().parent))
import snapshot  # noqa: E402  (sibling modules, not a package)
import wheel  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NODE = ROOT / "node_modules"
PLOTLY = "plotly.js-cartesian-dist-min"


@lru_cache(maxsize=None)   # read once per process, not once per calculator block
def npm_version(package: str, node_modules: Path = NODE) -> str:
    manifest = node_modules / package / "package.json"
    if not manifest.exists():
        raise PluginError(f"{manifest} is missing: run `npm ci` (or `make build`) first")
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
        raise PluginError(f"vendored files missing (run `npm ci`): {', '.join(missing)}")
    return files


def on_files(files, *, config):
    for uri, src in vendored_files().items():
        files.append(File.generated(config, uri, abs_src_path=str(src)))
    data = wheel.wheel_bytes()
    uri = f"assets/wheels/{wheel.content_hash(data)}/{wheel.wheel_name()}"
    files.append(File.generated(config, uri, content=data))
    config["extra"]["calculators_wheel"] = uri  # the page runtime reads these two from here
    try:
        snap = snapshot.snapshot_bytes(data, npm_version("pyodide"))
    except snapshot.SnapshotError as exc:
        raise PluginError(str(exc)) from None
    # gzip inside, but not named .gz: a server may add "Content-Encoding: gzip" for that suffix,
    # the browser would then inflate it and the worker would find no gzip left to inflate.
    snap_uri = f"assets/snapshots/{wheel.content_hash(snap)}/calculators.snapshot"
    files.append(File.generated(config, snap_uri, content=snap))
    config["extra"]["calculators_snapshot"] = snap_uri
    return files

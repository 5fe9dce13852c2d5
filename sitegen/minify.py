"""The site's own scripts and style sheets, minified in the built site by esbuild (pinned in package.json), and
every page's indentation dropped (`drop_indentation`).

The sources in docs/assets stay readable; site/ gets each file minified on its own (no bundling:
imports between the modules stay as they are), about half the bytes of the scripts and a third of
the styles, which every page counts against its 600 KB budget before interaction. Vendored packages
are minified by their publishers already.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .assets import NODE, AssetError

OWN_FILES = ("assets/*.js", "assets/calculators/*.js", "assets/*.css", "assets/calculators/*.css")


def own_files(site_dir: Path) -> list[Path]:
    return sorted(p for pattern in OWN_FILES for p in site_dir.glob(pattern))


def minify(site_dir: Path, esbuild: Path = NODE / ".bin" / "esbuild") -> list[Path]:
    """Minify every own script (as an ES module) and style sheet under site_dir in place; returns the files."""
    if not esbuild.exists():
        raise AssetError(f"{esbuild} is missing: run `make setup` (npm ci installs esbuild)")
    files = own_files(site_dir)
    for path in files:
        module = ["--format=esm"] if path.suffix == ".js" else []
        done = subprocess.run(
            [
                str(esbuild),
                str(path),
                "--minify",
                *module,
                "--log-level=error",
                f"--outfile={path}",
                "--allow-overwrite",
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise AssetError(f"esbuild could not minify {path.name}: {done.stderr.strip()}")
    return files


# An element whose text keeps its whitespace (preformatted text, form text, code whose strings may span lines), or
# the indentation that opens a line anywhere else.
_KEPT_OR_INDENT = re.compile(r"(<(pre|textarea|script|style)\b.*?</\2\s*>)|\n[ \t]+", re.S | re.I)


def drop_indentation(html: str) -> str:
    """The page without the spaces and tabs that open its lines, outside <pre>, <textarea>, <script> and <style>.
    A line break is kept, so the text renders as before (HTML collapses the run of white space to one space);
    about 5% of a page (11.5 kB of the engine workbench's 235 kB) is the templates' indentation."""
    return _KEPT_OR_INDENT.sub(lambda m: m.group(1) or "\n", html)

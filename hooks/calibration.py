"""MkDocs hook: the calibration pages' tables from the ledger (`sitegen.calibration`).

When it runs: on_page_markdown, on docs/calibration.md and the two rows pages (sitegen.calibration.PAGES) only,
before Markdown becomes HTML. The `<!-- calibration:NAME -->` markers become the error summary, the sources and
every ledger row with the core's estimate; an unknown marker fails the build.
"""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from sitegen.calibration import PAGES, render_calibration


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri not in PAGES:
        return markdown
    try:
        return render_calibration(markdown, page.file.src_uri)
    except ValueError as exc:
        raise PluginError(str(exc)) from None

"""MkDocs hook: the numeric core's results written into each page (`sitegen.pages`).

When it runs: on_page_markdown, every page, before Markdown becomes HTML. A bad expression or
input fails the build, naming the page.
"""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

import calculators
from calculators.page import CHAIN_TARGETS
from sitegen import assets, markup, pages, workbench


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    def runtime() -> dict:
        return assets.runtime_urls(page.url, get_relative_url)

    def homes() -> dict:
        homes = workbench.homes()
        return {name: f"{get_relative_url(homes[name][0], page.url)}#{homes[name][1]}" for name in CHAIN_TARGETS}

    try:
        return pages.render_page(markdown, runtime, page.meta, homes)
    except (markup.MarkupError, calculators.InputError, assets.AssetError) as exc:
        raise PluginError(f"{page.file.src_uri}: {exc}") from None

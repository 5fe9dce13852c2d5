"""MkDocs hook: the series (twenty parts) from sitegen/data/series.toml (`sitegen.series`, `sitegen.hub`).

When it runs:
- on_config, once per build: `nav` from the data (Home, the written parts, the glossary, the
  workbench if present, then any other entries mkdocs.yml already lists).
- on_page_markdown, every page: on the home page, the hub's markers become the diagram, the part
  list and the routes; on a part page, the "Part N of 20" label and previous/next links are added.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

from sitegen import hub
from sitegen.series import HOME, build_nav, load_series, part_for_src, written_parts


def _href_factory(page: Page, files: Files) -> hub.Href:
    def href(src: str, anchor: str) -> str:
        target = files.get_file_from_path(src)
        if target is None:
            raise KeyError(f"series: no page {src} in the site")
        url = "" if target.src_uri == page.file.src_uri else get_relative_url(target.url, page.file.url)
        return url + (f"#{anchor}" if anchor else "") if (url or anchor) else "./"

    return href


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    series = load_series()
    config.nav = build_nav(series, written_parts(series, Path(config.docs_dir)), Path(config.docs_dir), config.nav)
    return config


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    series = load_series()
    written = written_parts(series, Path(config.docs_dir))
    if page.file.src_uri == HOME:
        return hub.render_home(markdown, series, written, _href_factory(page, files))
    part = part_for_src(series, page.file.src_uri)
    if part is None:
        return markdown
    footer = hub.part_footer(series, part, written, _href_factory(page, files))
    return hub.part_header(series, part, written) + markdown + footer

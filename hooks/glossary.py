"""MkDocs hook: abbreviation tooltips on every page, and the glossary page's tables (`sitegen.glossary`).

When it runs: on_page_markdown, every page, before Markdown becomes HTML. Every page gets one
`*[ABBR]: expansion` line per abbreviation in sitegen/data/terms.toml; on docs/glossary.md the
`<!-- glossary:NAME -->` markers become the term, abbreviation and numbers tables. on_page_content keeps each
abbreviation's tooltip on its first use in the page only (sitegen.terms.first_tooltips).
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from sitegen.glossary import GLOSSARY, render_glossary
from sitegen.series import load_series, written_parts
from sitegen.terms import abbreviations, first_tooltips, load_terms


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    terms = load_terms()
    if page.file.src_uri == GLOSSARY:
        series = load_series()
        try:
            markdown = render_glossary(markdown, terms, series, written_parts(series, Path(config.docs_dir)))
        except ValueError as exc:
            raise PluginError(str(exc)) from None
    return markdown + "\n\n" + abbreviations(terms) + "\n"


def on_page_content(html: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    return first_tooltips(html)

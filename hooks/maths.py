"""MkDocs hook: every formula rendered at build time with KaTeX (`sitegen.katex`).

When it runs: on_page_content, every page with maths, after Markdown became HTML; on_post_build,
once, to stop the Node process. A TeX error fails the build, naming the page.
"""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from sitegen.katex import KaTeX, render_maths

_katex = KaTeX()


def on_page_content(html: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    if "arithmatex" not in html:
        return html
    try:
        return render_maths(html, _katex.render)
    except ValueError as exc:
        raise PluginError(f"{page.file.src_uri}: maths error: {exc}") from None


def on_post_build(*, config: MkDocsConfig) -> None:
    _katex.close()

"""MkDocs hook: every runtime asset into the site (`sitegen.assets`), from pinned local sources.

When it runs: on_files, once per build, before any page is read (files are added with
``File.generated`` so the privacy plugin audits them like any other page asset); on_post_build,
once the site is written, to minify the site's own scripts (`sitegen.minify`); on_post_page, every page, to drop
the templates' indentation from its HTML (`sitegen.minify.drop_indentation`).
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from sitegen import assets, minify


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    try:
        vendored, core = assets.vendored_files(), assets.core_files()
    except assets.AssetError as exc:
        raise PluginError(str(exc)) from None
    for uri, src in vendored.items():
        files.append(File.generated(config, uri, abs_src_path=str(src)))
    for uri, data in core.values():
        files.append(File.generated(config, uri, content=data))
    return files


def on_post_page(output: str, **kwargs) -> str:
    return minify.drop_indentation(output)


def on_post_build(*, config: MkDocsConfig) -> None:
    try:
        minify.minify(Path(config["site_dir"]))
    except assets.AssetError as exc:
        raise PluginError(str(exc)) from None

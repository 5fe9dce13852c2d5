"""MkDocs hook: the KV conformance vectors (`sitegen.conformance`) into the site as data/kv-conformance.json.

When it runs: on_files, once per build, so the file is part of the site like any page asset and a page
can link to it (the glossary's "KV conformance vectors" section does).
"""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from sitegen import conformance


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, conformance.URI, content=conformance.dumps()))
    return files

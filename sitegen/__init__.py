"""Pure build-time functions of the site: markup, calculator HTML, charts, assets, series, glossary.

Nothing here imports MkDocs: the hooks in hooks/ call these functions from MkDocs events, the tests
call them directly, and a later move to another site generator (or a plain pre-build script) only
needs new callers. Every number still comes from the numeric core, `calculators`.
"""

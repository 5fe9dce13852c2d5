"""The DOM contract: the data-* attributes the calculator HTML carries and the browser scripts read.

Declared once, here. `blocks` writes them; the page config (`#calc-page-config`) carries this
mapping under "dom" so the scripts can take their selectors from it instead of repeating them.
Key: the attribute without its `data-` prefix.
"""

from __future__ import annotations

NAMES = (
    "calc",  # the block's root: the calculator's name
    "inputs",  # on the root: the inputs the worked example sets (the rest are the defaults), as JSON
    "field",  # one input's wrapper: the input key
    "out",  # one result row: the output key
    "calc-results",  # the results table's body
    "calc-notes",  # the notes list
    "calc-work",  # the derivation list ("Show the work")
    "calc-status",  # the status line (built, computing, error)
    "plot",  # the figure: the series id
    "plot-table",  # the figure's data table
    "error",  # an input's error message (made by the script)
    "kind",  # a preset select: "model" or "accelerator"
    "define",  # the "Define your own…" button: the kind it defines
    "action",  # an export or share button: link, csv, json, png
    "search-exclude",  # kept out of the search index (Material)
)
DOM = {name: f"data-{name}" for name in NAMES}

"""The calibration page's tables (sitegen/calibration.py): every ledger row appears once, the summary has a
line per kind, and a misspelt marker fails the build instead of printing as text."""

from __future__ import annotations

import pytest

from calculators import calibration
from sitegen.calibration import render_calibration


def _body_lines(markdown: str) -> list[str]:
    """A rendered table's data lines (the head and the |---| line dropped)."""
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    return lines[2:]


def test_every_row_and_kind_is_on_the_page():
    assert len(_body_lines(render_calibration("<!-- calibration:summary -->"))) == len(calibration.KINDS) + 1
    sources = calibration.ledger()["source"]
    page = render_calibration("<!-- calibration:sources -->")
    assert len(_body_lines(page)) == len(sources) and all(s["url"] in page for s in sources)
    assert len(_body_lines(render_calibration("<!-- calibration:rows -->"))) == len(calibration.rows())


def test_unknown_marker_fails():
    with pytest.raises(ValueError, match="unknown markers"):
        render_calibration("<!-- calibration:summry -->")

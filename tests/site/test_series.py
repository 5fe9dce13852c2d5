"""The series hub in a browser: keyboard order and layout at two widths, in both schemes."""
from __future__ import annotations

from pathlib import Path

import pytest

from sitegen import series as S


@pytest.fixture(scope="module")
def series():
    return S.load_series()


# ---- in the browser ------------------------------------------------------------------

def _focus_sequence(page, steps=160) -> list[str]:
    seen = []
    for _ in range(steps):
        page.keyboard.press("Tab")
        sid = page.evaluate("() => document.activeElement && document.activeElement.dataset.stage || null")
        if sid and seen and sid == seen[0] and len(seen) > 1:
            break                      # wrapped round the page
        if sid and (not seen or seen[-1] != sid):
            seen.append(sid)
    return seen


def test_tab_reaches_every_stage_in_reading_order(open_page, series):
    page, log = open_page("/")
    assert _focus_sequence(page) == [s.id for s in series.stages]
    assert log.errors == []


SHOTS = Path("/tmp/hub-shots")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [390, 1280])
def test_hub_layout_and_screenshots(open_page, series, scheme, width):
    page, log = open_page("/", scheme=scheme, viewport={"width": width, "height": 900})
    page.evaluate("s => document.body.setAttribute('data-md-color-scheme', s)",
                  "slate" if scheme == "dark" else "default")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width, "horizontal scroll"
    boxes = {sid: page.locator(f'[data-stage="{sid}"]').first.bounding_box() for sid in ("scheduler", "prefill", "decode")}
    if width < 720:   # lane A stacks: one stage under the other
        assert boxes["scheduler"]["y"] < boxes["prefill"]["y"] < boxes["decode"]["y"]
    else:             # one row, left to right
        assert boxes["scheduler"]["x"] < boxes["prefill"]["x"] < boxes["decode"]["x"]
        assert abs(boxes["prefill"]["y"] - boxes["decode"]["y"]) < 40
    SHOTS.mkdir(exist_ok=True)
    page.locator(".hub-diagram").screenshot(path=str(SHOTS / f"hub-{width}-{scheme}.png"), animations="disabled")
    assert log.errors == []

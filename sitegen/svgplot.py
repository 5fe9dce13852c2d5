"""A static SVG chart of a calculator's series, for readers without JavaScript.

It draws what the live Plotly chart draws (docs/assets/calculators/plots.js): a series of kind
"line" as a line, "bar" as grouped bars, "stack" as bars piled up per x value, "scatter" as markers, and,
as plots.js does, a line
series with three values or fewer (an operating point) as markers. Colours come from CSS classes
and the theme's series variables; each series also has its own dash pattern or marker shape and a
label, so nothing is told by colour alone. The live page swaps in Plotly.
"""

from __future__ import annotations

import math
from html import escape

from calculators.display import sig

W, H = 640, 320
LEFT, RIGHT, TOP, BOTTOM = 64, 120, 16, 44
DASHES = ("", "6 3", "2 3", "8 3 2 3", "12 4", "1 2")
MARKER_R = 5
LEGEND_LINE = 13


def _scale(values: list[float], log: bool):
    vals = [math.log10(v) for v in values if v > 0] if log else values
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
    if not log:
        lo = min(lo, 0.0)
    if hi == lo:
        hi = lo + 1.0
    return lo, hi


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        return [10**e for e in range(math.ceil(lo), math.floor(hi) + 1)]
    step = 10 ** math.floor(math.log10((hi - lo) / 4))
    step *= next(m for m in (1, 2, 5, 10) if (hi - lo) / (step * m) <= 5)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def _mapper(lo: float, hi: float, log: bool, a: float, b: float):
    def f(v: float) -> float:
        x = math.log10(v) if log else v
        return a + (x - lo) / (hi - lo) * (b - a)

    return f


def shared_unit(plot: dict) -> str:
    """The y unit when every series shares it; else "" (each label then names its own)."""
    units = {y["unit"] for y in plot["y"]}
    return units.pop() if len(units) == 1 else ""


def series_label(plot: dict, y: dict) -> str:
    return y["name"] if shared_unit(plot) or not y["unit"] else f"{y['name']} ({y['unit']})"


def _outline(i: int, x: float, y: float) -> str:
    """One point as path data, in the shape Plotly gives series i (circle, square, diamond, triangle, cross, x):
    the first corner placed, the others as steps from it."""
    r, shape = MARKER_R, i % 6
    if shape == 0:
        return f"M{x - r:.1f} {y:.1f}a{r} {r} 0 1 0 {2 * r} 0 {r} {r} 0 1 0 {-2 * r} 0z"
    corners = {
        1: ((-r, -r), (r, -r), (r, r), (-r, r)),
        2: ((0, -r), (r, 0), (0, r), (-r, 0)),
        3: ((0, -r), (r, r), (-r, r)),
        4: ((-r, -1), (-1, -1), (-1, -r), (1, -r), (1, -1), (r, -1), (r, 1), (1, 1), (1, r), (-1, r), (-1, 1), (-r, 1)),
        5: ((-r, -r), (0, -2), (r, -r), (2, 0), (r, r), (0, 2), (-r, r), (-2, 0)),
    }[shape]
    steps = " ".join(f"{bx - ax} {by - ay}" for (ax, ay), (bx, by) in zip(corners, corners[1:]))
    return f"M{x + corners[0][0]:.1f} {y + corners[0][1]:.1f}l{steps}z"


def _marks(i: int, points: list[tuple[float, float]]) -> str:
    """Series i's points as one path: a few dozen bytes a point (the calibration page draws hundreds)."""
    path = "".join(_outline(i, x, y) for x, y in points).replace(" -", "-")  # a minus separates numbers too
    return f'<path class="s{i % 6} mark" d="{path}"/>'


def _marker(i: int, x: float, y: float) -> str:
    return _marks(i, [(x, y)])


def _axes(plot: dict, fx, fy, x_ticks, y_ticks) -> list[str]:
    parts = [
        f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{fy(t):.1f}" y2="{fy(t):.1f}"/>'
        f'<text class="tick" x="{LEFT - 6}" y="{fy(t) + 4:.1f}" text-anchor="end">{sig(t, 3)}</text>'
        for t in y_ticks
    ]
    parts += [
        f'<text class="tick" x="{fx(t):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{escape(label)}</text>'
        for t, label in x_ticks
    ]
    x_title = plot["x"]["label"] + (f" ({plot['x']['unit']})" if plot["x"]["unit"] else "")
    parts.append(
        f'<text class="axis" x="{(LEFT + W - RIGHT) / 2}" y="{H - 6}" text-anchor="middle">'
        f'{escape(x_title)}</text><text class="axis" x="12" y="{TOP + 4}">{escape(shared_unit(plot))}</text>'
    )
    return parts


def _wrap(text: str, width: int = 17) -> list[str]:
    """Words in lines of about `width` characters: a legend label fits the right margin."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def legend_rows(plot: dict) -> list[float]:
    """The y of each series' legend row, one under another, each as tall as its wrapped label."""
    rows, y = [], TOP + 8.0
    for s in plot["y"]:
        rows.append(y)
        y += LEGEND_LINE * len(_wrap(series_label(plot, s))) + 6
    return rows


def _legend(plot: dict, i: int, row_y: float, swatch: str) -> str:
    """A legend row in the right margin: the series' marker or swatch, then its (wrapped) name."""
    lines = _wrap(series_label(plot, plot["y"][i]))
    spans = "".join(
        f'<tspan x="{W - RIGHT + 18}" dy="{0 if k == 0 else LEGEND_LINE}">{escape(t)}</tspan>'
        for k, t in enumerate(lines)
    )
    return f'{swatch}<text class="label s{i % 6}" y="{row_y + 4:.1f}">{spans}</text>'


def _bar_legend(plot: dict, i: int) -> str:
    """A bar or stack chart's legend row: a square of the series' colour, or its marker for a series of points."""
    row = legend_rows(plot)[i]
    if plot["y"][i].get("marker"):
        return _legend(plot, i, row, _marker(i, W - RIGHT + 10, row))
    return _legend(
        plot, i, row, f'<rect class="s{i % 6} bar" x="{W - RIGHT + 5}" y="{row - 5:.1f}" width="10" height="10"/>'
    )


def _points(xs, values, log: bool):
    return [(x, v) for x, v in zip(xs, values) if v is not None and (not log or (x > 0 and v > 0))]


def _line_series(plot: dict, i: int, y: dict, fx, fy, log: bool) -> str:
    pts = _points(plot["x"]["values"], y["values"], log)
    if plot["kind"] == "scatter" or len(pts) <= 3:  # operating points, as plots.js draws them
        marks = _marks(i, [(fx(x), fy(v)) for x, v in pts])
        row = legend_rows(plot)[i]
        return marks + _legend(plot, i, row, _marker(i, W - RIGHT + 10, row))
    dash = DASHES[i % len(DASHES)]
    coords = " ".join(f"{fx(x):.1f},{fy(v):.1f}" for x, v in pts)
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    out = f'<polyline class="s{i % 6}" points="{coords}" fill="none"{dashed}/>'
    # The name in the right-margin legend, wrapped and one row under another: labels at the lines' ends
    # overlapped where lines end close together (NVLink 4 and 5) and ran past the chart's right edge.
    row = legend_rows(plot)[i]
    swatch = f'<line class="s{i % 6}" x1="{W - RIGHT + 2}" x2="{W - RIGHT + 16}" y1="{row}" y2="{row}"{dashed}/>'
    return out + _legend(plot, i, row, swatch)


def _xy_chart(plot: dict) -> list[str]:
    log = bool(plot.get("log_axes"))
    xs = plot["x"]["values"]
    (xlo, xhi), (ylo, yhi) = _scale(xs, log), _scale(_all_y(plot), log)
    fx, fy = _mapper(xlo, xhi, log, LEFT, W - RIGHT), _mapper(ylo, yhi, log, H - BOTTOM, TOP)
    parts = _axes(plot, fx, fy, [(t, sig(t, 3)) for t in _ticks(xlo, xhi, log)], _ticks(ylo, yhi, log))
    return parts + [_line_series(plot, i, y, fx, fy, log) for i, y in enumerate(plot["y"])]


def _bar_chart(plot: dict) -> list[str]:
    """Grouped bars: one band per x value, one bar per series in legend order, from zero."""
    xs, n = plot["x"]["values"], sum(not y.get("marker") for y in plot["y"])  # a mark is a point, not a bar
    ylo, yhi = _scale(_all_y(plot), False)
    band = (W - RIGHT - LEFT) / max(len(xs), 1)
    bar = band * 0.8 / max(n, 1)
    fy = _mapper(ylo, yhi, False, H - BOTTOM, TOP)

    def centre(k: int) -> float:
        return LEFT + band * (k + 0.5)

    parts = _axes(plot, centre, fy, [(k, sig(x, 3)) for k, x in enumerate(xs)], _ticks(ylo, yhi, False))
    for i, y in enumerate(plot["y"]):
        for k, v in enumerate(y["values"]):
            if v is not None and y.get("marker"):  # the reader's point (reader walk #29), over its band
                parts.append(_marker(i, centre(k), fy(v)))
            elif v is not None:
                left, top = centre(k) - band * 0.4 + i * bar, min(fy(v), fy(0))
                parts.append(
                    f'<rect class="s{i % 6} bar" x="{left:.1f}" y="{top:.1f}" '
                    f'width="{bar:.1f}" height="{abs(fy(0) - fy(v)):.1f}"/>'
                )
        parts.append(_bar_legend(plot, i))
    return parts


def _stack_chart(plot: dict) -> list[str]:
    """Stacked bars: one bar per x value, the series piled from zero in legend order (values ≥ 0)."""
    xs = plot["x"]["values"]
    piles = [sum(y["values"][k] or 0.0 for y in plot["y"] if not y.get("marker")) for k in range(len(xs))]
    marks = [v for y in plot["y"] if y.get("marker") for v in y["values"] if v is not None]
    ylo, yhi = _scale(piles + marks, False)
    band = (W - RIGHT - LEFT) / max(len(xs), 1)
    fy = _mapper(ylo, yhi, False, H - BOTTOM, TOP)

    def centre(k: int) -> float:
        return LEFT + band * (k + 0.5)

    parts = _axes(plot, centre, fy, [(k, sig(x, 3)) for k, x in enumerate(xs)], _ticks(ylo, yhi, False))
    base = [0.0] * len(xs)
    for i, y in enumerate(plot["y"]):
        for k, v in enumerate(y["values"]):
            if v is not None and y.get("marker"):
                parts.append(_marker(i, centre(k), fy(v)))
            elif v:
                top, bottom = fy(base[k] + v), fy(base[k])
                parts.append(
                    f'<rect class="s{i % 6} bar" x="{centre(k) - band * 0.3:.1f}" y="{top:.1f}" '
                    f'width="{band * 0.6:.1f}" height="{abs(bottom - top):.1f}"/>'
                )
                base[k] += v
        parts.append(_bar_legend(plot, i))
    return parts


def _all_y(plot: dict) -> list[float]:
    return [v for y in plot["y"] for v in y["values"] if v is not None]


def svg_chart(plot: dict) -> str:
    """The chart for one series dict of a calculator result (`calculators.schema.series`)."""
    kind = plot.get("kind")
    body = _bar_chart(plot) if kind == "bar" else _stack_chart(plot) if kind == "stack" else _xy_chart(plot)
    return (
        f'<svg viewBox="0 0 {W} {H}" class="calc__svg" aria-hidden="true" focusable="false">' + "".join(body) + "</svg>"
    )

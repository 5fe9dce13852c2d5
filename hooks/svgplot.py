"""A static SVG line chart of a calculator's series, for readers without JavaScript.

Colours come from CSS classes (theme-aware); each line also has its own dash pattern
and an end label, so nothing is told by colour alone. The live page swaps in Plotly.
"""
from __future__ import annotations

import math
from html import escape

from calculators.display import sig

W, H = 640, 320
LEFT, RIGHT, TOP, BOTTOM = 64, 120, 16, 44
DASHES = ("", "6 3", "2 3", "8 3 2 3", "12 4", "1 2")


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
        return [10 ** e for e in range(math.ceil(lo), math.floor(hi) + 1)]
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
    return y["name"] if shared_unit(plot) or not y["unit"] else f'{y["name"]} ({y["unit"]})'


def svg_chart(plot: dict) -> str:
    log = bool(plot.get("log_axes"))
    xs = plot["x"]["values"]
    ys_all = [v for y in plot["y"] for v in y["values"] if v is not None]
    (xlo, xhi), (ylo, yhi) = _scale(xs, log), _scale(ys_all, log)
    fx = _mapper(xlo, xhi, log, LEFT, W - RIGHT)
    fy = _mapper(ylo, yhi, log, H - BOTTOM, TOP)
    parts = [f'<svg viewBox="0 0 {W} {H}" class="calc__svg" aria-hidden="true" focusable="false">']
    for t in _ticks(ylo, yhi, log):
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{fy(t):.1f}" y2="{fy(t):.1f}"/>'
                     f'<text class="tick" x="{LEFT - 6}" y="{fy(t) + 4:.1f}" text-anchor="end">{sig(t, 3)}</text>')
    for t in _ticks(xlo, xhi, log):
        parts.append(f'<text class="tick" x="{fx(t):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{sig(t, 3)}</text>')
    for i, y in enumerate(plot["y"]):
        pts = " ".join(f"{fx(x):.1f},{fy(v):.1f}" for x, v in zip(xs, y["values"])
                       if v is not None and (not log or (x > 0 and v > 0)))
        dash = f' stroke-dasharray="{DASHES[i % len(DASHES)]}"' if DASHES[i % len(DASHES)] else ""
        parts.append(f'<polyline class="s{i % 6}" points="{pts}" fill="none"{dash}/>')
        last = pts.split(" ")[-1].split(",") if pts else None
        if last:
            parts.append(f'<text class="label s{i % 6}" x="{float(last[0]) + 4:.1f}" y="{float(last[1]) + 4:.1f}">'
                         f'{escape(series_label(plot, y))}</text>')
    x_title = plot["x"]["label"] + (f' ({plot["x"]["unit"]})' if plot["x"]["unit"] else "")
    y_unit = shared_unit(plot)
    parts.append(f'<text class="axis" x="{(LEFT + W - RIGHT) / 2}" y="{H - 6}" text-anchor="middle">{escape(x_title)}</text>'
                 f'<text class="axis" x="12" y="{TOP + 4}">{escape(y_unit)}</text></svg>')
    return "".join(parts)

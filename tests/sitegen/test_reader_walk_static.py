"""Issue #18's reader walk, the rows the build's static HTML shows. Row 15: the static charts' series
names neither overlap nor run past the chart's right edge (the all-reduce chart's "NVLink 4" and
"NVLink 5" end labels were drawn on top of each other, and the InfiniBand and PCIe ones were clipped)."""

import re

from calculators.api import run
from sitegen.svgplot import RIGHT, W, svg_chart

CHAR_PX = 6  # the labels are 11 px text (calculators.css): about 0.55 em a character


def _labels(svg: str) -> list[tuple[float, list[str]]]:
    found = []
    for text in re.findall(r'<text class="label[^"]*" ([^>]*)>(.*?)</text>', svg):
        y = float(re.search(r'y="([\d.]+)"', text[0]).group(1))
        found.append((y, re.findall(r"<tspan[^>]*>([^<]*)</tspan>", text[1]) or [text[1]]))
    return found


def test_allreduce_static_labels_are_stacked_and_inside_the_chart():
    plot = next(iter(run("allreduce", {})["series"].values()))
    svg = svg_chart(plot)
    labels = _labels(svg)
    assert len(labels) == len(plot["y"])
    tops = sorted(y for y, _ in labels)
    for (y0, lines0), y1 in zip(sorted(labels), tops[1:]):
        assert y1 - y0 >= 13 * len(lines0), (y0, y1, lines0)  # the next one starts below this one's lines
    xs = [float(x) for x in re.findall(r'<tspan x="([\d.]+)"', svg)]
    for x, line in zip(xs, [line for _, lines in labels for line in lines]):
        assert x + CHAR_PX * len(line) <= W + 2, (x, line)
    assert all(x >= W - RIGHT for x in xs)


def test_a_unit_the_label_names_is_not_repeated():
    """Reader walk row 19: "Concurrent sequences (sequences)", "GPUs (tensor parallel) (GPUs)"."""
    from calculators.api import schema
    from sitegen.blocks import _field

    spec = next(i for i in schema("kv_cache")["inputs"] if i["key"] == "batch_size")
    assert spec["label"] == "Concurrent sequences" and spec["unit"] == "sequences"
    assert "calc__unit" not in _field(spec, spec["default"], "kv", {})
    context = next(i for i in schema("kv_cache")["inputs"] if i["key"] == "context_tokens")
    assert "(tokens)" in _field(context, context["default"], "kv", {})

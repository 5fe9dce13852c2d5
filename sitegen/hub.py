"""The series hub and part pages as HTML: the request diagram, the part list, the routes, the pager.

On the home page the markers `<!-- series:diagram -->`, `<!-- series:parts -->` and
`<!-- series:routes -->` become generated HTML; a part page gets its "Part N of 20" label and
previous/next links. Parts not yet written are listed and marked, never linked. Every function
takes the series, the set of written parts and an `href(src_path, anchor)` callable (the site
generator's URLs), so tests need no MkDocs.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from .series import GLOSSARY, HOME, Lane, Part, Series, Stage

MARKERS = ("diagram", "parts", "routes")

Href = Callable[[str, str], str]  # (src_path relative to docs/, anchor) -> URL from the current page


# ---- HTML helpers ------------------------------------------------------------------------


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)


def _parts_label(numbers) -> str:
    numbers = list(numbers)
    return ("Part " if len(numbers) == 1 else "Parts ") + ", ".join(str(n) for n in numbers)


def stage_target(series: Series, stage: Stage, written: frozenset[int], href: Href) -> tuple[str, bool]:
    """(URL, written?) for a stage: its first written part, else that part's entry on the hub."""
    for n in stage.parts:
        if n in written:
            return href(series.part(n).src, ""), True
    return href(HOME, series.part(stage.parts[0]).hub_anchor), False


ARROW = (
    '<svg class="hub-arrow" viewBox="0 0 24 24" aria-hidden="true" focusable="false">'
    '<path d="M3 12h16M13 6l6 6-6 6"/></svg>'
)
DOUBLE_ARROW = (
    '<svg class="hub-arrow hub-arrow--kv" viewBox="0 0 24 24" aria-hidden="true" focusable="false">'
    '<path d="M3 9h16M15 5l4 4-4 4"/><path class="hub-dash" d="M3 15h16M15 11l4 4-4 4"/></svg>'
)
LOOP = (
    '<svg class="hub-loop" viewBox="0 0 200 24" preserveAspectRatio="none" aria-hidden="true" '
    'focusable="false"><path vector-effect="non-scaling-stroke" d="M196 2v10H4"/>'
    '<path vector-effect="non-scaling-stroke" d="M12 6l-8 6 8 6"/></svg>'
)


def _stage_box(series: Series, stage: Stage, written: frozenset[int], href: Href) -> str:
    url, is_written = stage_target(series, stage, written, href)
    status = "" if is_written else '<span class="hub-stage__status">not yet written</span>'
    title = f' title="Source: {_e(stage.fact_source)}"' if stage.fact_source else ""
    cls = (
        "hub-stage"
        + ("" if is_written else " hub-stage--unwritten")
        + (" hub-stage--link" if stage.kind == "link" else "")
    )
    return (
        f'<a class="{cls}" href="{_e(url)}" data-stage="{_e(stage.id)}"{title}>'
        f'<span class="hub-stage__name">{_e(stage.name)}</span>'
        f'<span class="hub-stage__parts">{_parts_label(stage.parts)}</span>'
        f'<span class="hub-stage__fact">{_e(stage.fact)}</span>{status}</a>'
    )


def _flow_lane(series: Series, lane: Lane, written, href) -> str:
    """Lane A: stages left to right with arrows; connectors (kind=link) sit between them,
    and a trailing connector becomes the loop back under the row."""
    stages = series.lane_stages(lane.id)
    loop = stages[-1] if stages and stages[-1].kind == "link" else None
    row = stages[:-1] if loop else stages
    items = []
    for i, s in enumerate(row):
        if s.kind == "link":
            items.append(f'<li class="hub-flow__connector">{DOUBLE_ARROW}{_stage_box(series, s, written, href)}</li>')
            continue
        if i and row[i - 1].kind != "link":
            items.append(f'<li class="hub-flow__arrow" aria-hidden="true">{ARROW}</li>')
        items.append(f'<li class="hub-flow__item">{_stage_box(series, s, written, href)}</li>')
    out = f'<ol class="hub-flow">{"".join(items)}</ol>'
    if loop:
        out += f'<div class="hub-flow__loop">{LOOP}{_stage_box(series, loop, written, href)}</div>'
    return out


def _grid_lane(series: Series, lane: Lane, written, href) -> str:
    cells = "".join(f"<li>{_stage_box(series, s, written, href)}</li>" for s in series.lane_stages(lane.id))
    return f'<ul class="hub-grid">{cells}</ul>'


def _text_alternative(series: Series, written, href) -> str:
    lanes = []
    for lane in series.lanes:
        items = []
        for s in series.lane_stages(lane.id):
            url, is_written = stage_target(series, s, written, href)
            note = "" if is_written else " (not yet written)"
            source = f" Source: {_e(s.fact_source)}." if s.fact_source else ""
            items.append(
                f'<li><a href="{_e(url)}">{_e(s.name)}</a>: {_parts_label(s.parts)}{note}. '
                f"{_e(s.fact[:1].upper() + s.fact[1:])}.{source}</li>"
            )
        lanes.append(f"<li>{_e(lane.label)}: {_e(lane.summary)}<ul>{''.join(items)}</ul></li>")
    return f'<details class="hub-alt"><summary>The diagram as a list</summary><ul>{"".join(lanes)}</ul></details>'


def render_diagram(series: Series, written: frozenset[int], href: Href) -> str:
    """The life of a request: one section per lane, HTML boxes joined by inline SVG connectors."""
    lanes = []
    for lane in series.lanes:
        body = _flow_lane(series, lane, written, href) if lane.flow else _grid_lane(series, lane, written, href)
        lanes.append(
            f'<section class="hub-lane hub-lane--{_e(lane.id)}" aria-labelledby="hub-lane-{_e(lane.id)}">'
            f'<h3 class="hub-lane__title" id="hub-lane-{_e(lane.id)}">{_e(lane.label)}</h3>'
            f'<p class="hub-lane__summary">{_e(lane.summary)}</p>{body}</section>'
        )
    return (
        f'<div class="hub-diagram" role="group" aria-label="The life of a request">{"".join(lanes)}</div>\n'
        + _text_alternative(series, written, href)
    )


def written_so_far(series: Series, written: frozenset[int]) -> str:
    """How much of the series exists (reader walk #36: "Part 4 of 20" promised parts the site did not have)."""
    return f"{len(written)} of the {series.total} parts are written so far"


def render_part_list(series: Series, written: frozenset[int], href: Href) -> str:
    items = []
    for p in series.parts:
        if p.number in written:
            title = f'<a href="{_e(href(p.src, ""))}">{_e(p.title)}</a>'
            status = ""
        else:
            title = _e(p.title)
            status = '<span class="hub-part__status">not yet written</span>'
        items.append(
            f'<li class="hub-part" id="{p.hub_anchor}">'
            f'<span class="hub-part__number">Part {p.number} of {series.total}</span>'
            f'<span class="hub-part__title">{title}</span>{status}'
            f'<span class="hub-part__promise">{_e(p.promise)}</span></li>'
        )
    items.append(
        '<li class="hub-part hub-part--reference"><span class="hub-part__number">Reference</span>'
        f'<span class="hub-part__title"><a href="{_e(href(GLOSSARY, ""))}">Glossary &amp; numbers to know</a>'
        '</span><span class="hub-part__promise">Every term in the series linked back to where it is '
        "introduced, plus the accelerator, model, number-format, engine and price tables.</span></li>"
    )
    so_far = (
        f'<p class="hub-parts__written">{written_so_far(series, written)}; the others say what they will cover.</p>'
    )
    return f'{so_far}<ol class="hub-parts">{"".join(items)}</ol>'


def _route_target(series: Series, n: int, written, href) -> str:
    p = series.part(n)
    label = f"Part {n} — {_e(p.short)}"
    if n in written:
        return f'<a href="{_e(href(p.src, ""))}">{label}</a>'
    return f'<a href="{_e(href(HOME, p.hub_anchor))}">{label}</a> <span class="hub-part__status">not yet written</span>'


def render_routes(series: Series, written: frozenset[int], href: Href) -> str:
    rows = []
    for r in series.routes:
        targets = [_route_target(series, n, written, href) for n in r.to]
        if len(targets) == 1:
            cell = targets[0]
        elif r.then:
            cell = targets[0] + ", then " + " and ".join(targets[1:])
        else:
            cell = " and ".join(targets)
        rows.append(f"<tr><td>{_e(r.condition)}</td><td>{cell}</td></tr>")
    return (
        '<table class="hub-routes"><thead><tr><th scope="col">If you…</th><th scope="col">Start at</th>'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def render_home(markdown: str, series: Series, written: frozenset[int], href: Href) -> str:
    renderers = {"diagram": render_diagram, "parts": render_part_list, "routes": render_routes}
    for name in MARKERS:
        marker = f"<!-- series:{name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, "\n" + renderers[name](series, written, href) + "\n")
    return markdown


# ---- part pages --------------------------------------------------------------------------


def _pager_link(series: Series, n: int, rel: str, written, href) -> str:
    p = series.part(n)
    arrow_label = "Previous" if rel == "prev" else "Next"
    label = f'<span class="series-pager__dir">{arrow_label}: Part {n}</span> {_e(p.title)}'
    if n in written:
        return f'<a class="series-pager__{rel}" rel="{rel}" href="{_e(href(p.src, ""))}">{label}</a>'
    return (
        f'<span class="series-pager__{rel} series-pager--unwritten">{label} '
        '<span class="hub-part__status">not yet written</span></span>'
    )


def part_header(series: Series, part: Part, written: frozenset[int] | None = None) -> str:
    so_far = f' <span class="series-part-label__written">({written_so_far(series, written)})</span>' if written else ""
    return f'<p class="series-part-label">Part {part.number} of {series.total}{so_far}</p>\n\n'


def part_footer(series: Series, part: Part, written: frozenset[int], href: Href) -> str:
    links = []
    if part.number > 1:
        links.append(_pager_link(series, part.number - 1, "prev", written, href))
    if part.number < series.total:
        links.append(_pager_link(series, part.number + 1, "next", written, href))
    links.append(f'<a class="series-pager__home" href="{_e(href(HOME, "all-twenty-parts"))}">All parts</a>')
    return f'\n\n<nav class="series-pager" aria-label="Previous and next parts">{"".join(links)}</nav>\n'

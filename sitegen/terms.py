"""The series' terms from sitegen/data/terms.toml: the glossary's term tables and the tooltips.

Every page gets one `*[ABBR]: expansion` line per abbreviation (the Markdown `abbr` extension turns
them into hover tooltips); the glossary page gets the term and abbreviation tables. A part is named
by its number; its file comes from the series (sitegen/data/series.toml), so a slug lives once.
"""

from __future__ import annotations

import re

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from markdown.extensions.toc import slugify as toc_slugify

from .series import Series, load_series

TERMS = Path(__file__).resolve().parent / "data" / "terms.toml"


def slugify(text: str) -> str:
    """The id Markdown's toc extension gives a heading (markdown.extensions.toc.slugify)."""
    return toc_slugify(text, "-")


@dataclass(frozen=True)
class Term:
    term: str
    definition: str
    part: int
    anchor: str
    abbr: str = ""
    id: str = ""
    expansion: str = ""  # what the abbreviation stands for, when the term's name is not it


@dataclass(frozen=True)
class Terms:
    terms: tuple[Term, ...]
    headings: dict  # part number -> {id: heading text}; inline anchors map to their id
    ignore: frozenset[str]
    expansions: tuple = ()  # (abbreviation, meaning) pairs: tooltips without a glossary entry


def _headings(parts: list[dict], known: frozenset[int]) -> dict:
    headings = {}
    for p in parts:
        if p["number"] not in known:
            raise ValueError(f"terms.toml: part {p['number']} is not a part of the series")
        headings[p["number"]] = {h["id"]: h["text"] for h in p["headings"]}
        # Inline anchors: ids pinned on a defining phrase, `**term**{#id}` (attr_list).
        headings[p["number"]].update({a: a for a in p.get("anchors", ())})
        for h in p["headings"]:
            if "{#" not in h["text"] and slugify(h["text"]) != h["id"]:
                raise ValueError(
                    f"terms.toml: part {p['number']} heading {h['text']!r} slugifies to "
                    f"{slugify(h['text'])!r}, not {h['id']!r}"
                )
    return headings


def _term(t: dict, headings: dict) -> Term:
    term = Term(
        t["term"],
        t["definition"],
        t["part"],
        t["anchor"],
        t.get("abbr", ""),
        t.get("id") or slugify(t["term"]),
        t.get("expansion", ""),
    )
    if term.anchor not in headings.get(term.part, {}):
        raise ValueError(f"terms.toml: {term.term!r} names anchor {term.anchor!r}, not a heading of part {term.part}")
    return term


def parse_terms(data: dict, known_parts: frozenset[int]) -> Terms:
    """The terms from parsed TOML, checked against the series' part numbers (raises ValueError)."""
    headings = _headings(list(data.get("part", ())), known_parts)
    terms = [_term(t, headings) for t in data["term"]]
    ids = [t.id for t in terms]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise ValueError(f"terms.toml: duplicate term ids {sorted(dupes)}")
    expansions = tuple(data.get("abbreviations", {}).items())
    clash = {a for a, _ in expansions} & {t.abbr for t in terms if t.abbr}
    if clash:
        raise ValueError(f"terms.toml: {sorted(clash)} both a term's abbr and in [abbreviations]")
    return Terms(tuple(terms), headings, frozenset(data.get("ignore", {}).get("words", ())), expansions)


@cache
def load_terms(path: Path = TERMS) -> Terms:
    known = frozenset(p.number for p in load_series().parts)
    return parse_terms(tomllib.loads(Path(path).read_text(encoding="utf-8")), known)


_ABBR = re.compile(r'<abbr title="[^"]*">([^<]*)</abbr>')


def first_tooltips(html: str) -> str:
    """Each abbreviation's tooltip on its first use in a page only; later uses are plain text. The expansion is given
    once, as style guides ask, and the page does not carry it 75 times (KV in Part 5); a bare <abbr> would keep the
    theme's dotted underline and help cursor with no tooltip behind them, and cost 13 bytes a use (1,363 uses on the
    ledger's rows page)."""
    seen: set[str] = set()

    def one(m: re.Match) -> str:
        if m.group(1) in seen:
            return m.group(1)
        seen.add(m.group(1))
        return m.group(0)

    return _ABBR.sub(one, html)


def abbreviations(terms: Terms) -> str:
    """`*[ABBR]: expansion` lines for the abbr extension, one per abbreviation.

    A tooltip spells the abbreviation out; the definition lives once, in the glossary.
    (Repeating definitions on every use cost Part 1 some 30 KB of page weight.)
    """
    lines = []
    for t in terms.terms:
        if t.abbr:
            text = (t.expansion or t.term).replace("[", "(").replace("]", ")")
            lines.append(f"*[{t.abbr}]: {text}")
    for abbr, meaning in terms.expansions:
        lines.append(f"*[{abbr}]: " + meaning.replace("[", "(").replace("]", ")"))
    return "\n".join(lines)


def cell(text) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def wrap(caption: str, table: str, note: str = "") -> str:
    """A table inside the wrapper docs/assets/tables.js enhances (sorting, a filter)."""
    note = f"\n{note}\n" if note else ""
    return f'\n<div class="data-table" data-table data-caption="{caption}" markdown>\n\n{table}\n\n</div>\n{note}'


def render_terms(terms: Terms, series: Series, written: frozenset[int]) -> str:
    rows = ["| Term | Meaning | Introduced in |", "|---|---|---|"]
    for t in sorted(terms.terms, key=lambda t: t.term.lower()):
        name = f'<dfn id="{t.id}">{cell(t.term)}</dfn>' + (f" ({cell(t.abbr)})" if t.abbr else "")
        if t.part in written:
            where = f"[Part {t.part}]({series.part(t.part).src}#{t.anchor})"
        else:
            where = f"Part {t.part} (not yet written)"
        rows.append(f"| {name} | {cell(t.definition)} | {where} |")
    return wrap("Terms", "\n".join(rows))


def render_abbreviations(terms: Terms) -> str:
    """Every abbreviation with a tooltip: a term's links to its row above, the rest are spelt out."""
    rows = ["| Abbreviation | Meaning |", "|---|---|"]
    entries = [(t.abbr, f"[{cell(t.term)}](#{t.id})") for t in terms.terms if t.abbr]
    entries += [(a, cell(m)) for a, m in terms.expansions]
    for abbr, meaning in sorted(entries, key=lambda e: e[0].lower()):
        rows.append(f"| {cell(abbr)} | {meaning} |")
    return wrap("Abbreviations", "\n".join(rows))

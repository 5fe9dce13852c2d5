"""The workbench: every calculator, one page per family, from sitegen/data/workbench.toml.

A family page carries the marker <!-- workbench:SLUG -->, which becomes a heading and a calculator block
per calculator of that family (at its defaults, plotted where it can); the index page's marker
<!-- workbench:index --> becomes the list of families with a link to each calculator.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "workbench.toml"
INDEX = "workbench.md"
MARKER = re.compile(r"<!-- workbench:([a-z0-9-]+) -->")


@dataclass(frozen=True)
class Family:
    slug: str
    title: str
    intro: str
    calculators: tuple[str, ...]

    @property
    def src(self) -> str:
        return f"workbench/{self.slug}.md"


@cache
def families(path: Path = DATA) -> tuple[Family, ...]:
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    return tuple(Family(f["slug"], f["title"], f["intro"], tuple(f["calculators"])) for f in data["family"])


def anchor(name: str) -> str:
    """A calculator's heading id on its family page; its block's id is "workbench-" + this."""
    return name.replace("_", "-")


def homes() -> dict[str, tuple[str, str]]:
    """Each calculator's (page path, block id) on the first workbench family page that holds it."""
    out: dict[str, tuple[str, str]] = {}
    for family in families():
        for name in family.calculators:
            out.setdefault(name, (f"workbench/{family.slug}/", f"workbench-{anchor(name)}"))
    return out


def family_markdown(family: Family, schema: Callable[[str], dict], plots: Callable[[str], list]) -> str:
    """A heading and a calculator block for each calculator of the family, at its defaults."""
    out = []
    for name in family.calculators:
        title, series = schema(name)["title"], plots(name)
        plot = f"plot: {series[0]}\n" if series else ""
        out.append(
            f"## {title} {{#{anchor(name)}}}\n\n```calculator\nname: {name}\n"
            f"title: {json.dumps(title + ', at its defaults')}\nid: workbench-{anchor(name)}\n{plot}```\n"
        )
    return "\n".join(out)


def index_markdown(schema: Callable[[str], dict]) -> str:
    """Each family: its title linked to its page, its line, and a link to each of its calculators."""
    out = []
    for family in families():
        links = ", ".join(f"[{schema(n)['title']}]({family.src}#{anchor(n)})" for n in family.calculators)
        out.append(f"## [{family.title}]({family.src})\n\n{family.intro}\n\n{links}.\n")
    return "\n".join(out)


def expand(markdown: str, schema: Callable[[str], dict], plots: Callable[[str], list]) -> str:
    """The page's workbench marker, if any, written out."""
    by_slug = {f.slug: f for f in families()}

    def one(match: re.Match) -> str:
        slug = match.group(1)
        if slug == "index":
            return index_markdown(schema)
        if slug not in by_slug:
            raise KeyError(f"workbench: no family {slug!r} in {DATA.name}; families: {sorted(by_slug)}")
        return family_markdown(by_slug[slug], schema, plots)

    return MARKER.sub(one, markdown)

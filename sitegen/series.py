"""The series (twenty parts) from one data file, sitegen/data/series.toml: data and navigation.

A part is written when docs/parts/<slug>.md exists. Parts that are not written are listed and
marked as such, never linked (see `hub`). Everything here is a plain function of the data and the
set of written parts, so tests need no MkDocs.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from .workbench import families

DATA = Path(__file__).resolve().parent / "data" / "series.toml"
HOME = "index.md"
GLOSSARY = "glossary.md"
WORKBENCH = "workbench.md"


# ---- data --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Part:
    number: int
    slug: str
    title: str
    short: str
    promise: str
    stages: tuple[str, ...] = ()

    @property
    def src(self) -> str:
        return f"parts/{self.slug}.md"

    @property
    def hub_anchor(self) -> str:
        return f"part-{self.number}"


@dataclass(frozen=True)
class Stage:
    id: str
    lane: str
    name: str
    parts: tuple[int, ...]
    fact: str
    fact_source: str = ""
    kind: str = "stage"      # "stage" or "link" (a connector in lane A)


@dataclass(frozen=True)
class Lane:
    id: str
    label: str
    summary: str
    flow: bool = False


@dataclass(frozen=True)
class Route:
    condition: str
    to: tuple[int, ...]
    then: bool = False


@dataclass(frozen=True)
class Series:
    total: int
    parts: tuple[Part, ...]
    lanes: tuple[Lane, ...]
    stages: tuple[Stage, ...]
    routes: tuple[Route, ...]
    by_number: dict = field(default_factory=dict, compare=False, repr=False)

    def part(self, number: int) -> Part:
        return self.by_number[number]

    def lane_stages(self, lane_id: str) -> list[Stage]:
        return [s for s in self.stages if s.lane == lane_id]


def parse_series(data: dict) -> Series:
    """The series from parsed TOML, checked: numbers 1..total, known stages and parts."""
    parts = tuple(Part(p["number"], p["slug"], p["title"], p.get("short", p["title"]), p["promise"],
                       tuple(p.get("stages", ()))) for p in data["part"])
    total = data.get("total", len(parts))
    numbers = [p.number for p in parts]
    if numbers != list(range(1, total + 1)):
        raise ValueError(f"series.toml: parts must be numbered 1..{total} in order, got {numbers}")
    for p in parts:
        if not p.slug.startswith(f"{p.number:02d}-"):
            raise ValueError(f"series.toml: part {p.number} slug {p.slug!r} must start with {p.number:02d}-")
    lanes = tuple(Lane(d["id"], d["label"], d.get("summary", ""), d.get("flow", False)) for d in data["lane"])
    lane_ids = {lane.id for lane in lanes}
    stages = tuple(Stage(s["id"], s["lane"], s["name"], tuple(s["parts"]), s["fact"],
                         s.get("fact_source", ""), s.get("kind", "stage")) for s in data["stage"])
    stage_ids = {s.id for s in stages}
    for s in stages:
        if s.lane not in lane_ids:
            raise ValueError(f"series.toml: stage {s.id} names unknown lane {s.lane!r}")
        if not s.parts or any(n not in numbers for n in s.parts):
            raise ValueError(f"series.toml: stage {s.id} names unknown parts {s.parts}")
    for p in parts:
        unknown = set(p.stages) - stage_ids
        if unknown:
            raise ValueError(f"series.toml: part {p.number} names unknown stages {sorted(unknown)}")
    routes = tuple(Route(r["if"], tuple(r["to"]), r.get("then", False)) for r in data.get("route", ()))
    for r in routes:
        if any(n not in numbers for n in r.to):
            raise ValueError(f"series.toml: route {r.condition!r} names unknown parts {r.to}")
    return Series(total, parts, lanes, stages, routes, {p.number: p for p in parts})


@cache
def load_series(path: Path = DATA) -> Series:
    return parse_series(tomllib.loads(Path(path).read_text(encoding="utf-8")))


def part_for_src(series: Series, src: str) -> Part | None:
    for p in series.parts:
        if p.src == src:
            return p
    return None


def written_parts(series: Series, docs_dir: Path) -> frozenset[int]:
    """Numbers of the parts whose Markdown file exists."""
    return frozenset(p.number for p in series.parts if (Path(docs_dir) / p.src).is_file())


# ---- navigation --------------------------------------------------------------------------

def _nav_srcs(entry) -> list[str]:
    """Every Markdown path an mkdocs nav entry points at."""
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, dict):
        return [s for v in entry.values() for s in _nav_srcs(v)]
    if isinstance(entry, list):
        return [s for v in entry for s in _nav_srcs(v)]
    return []


def build_nav(series: Series, written: frozenset[int], docs_dir: Path, existing=None) -> list:
    """Home, the written parts, the glossary, the workbench; then what else mkdocs.yml listed."""
    docs_dir = Path(docs_dir)
    nav: list = [{"Home": HOME}]
    parts = [{f"{p.number} · {p.short}": p.src} for p in series.parts if p.number in written]
    if parts:
        nav.append({"Parts": parts})
    if (docs_dir / GLOSSARY).is_file():
        nav.append({"Glossary & numbers": GLOSSARY})
    if (docs_dir / WORKBENCH).is_file():
        pages = [{f.title: f.src} for f in families() if (docs_dir / f.src).is_file()]
        nav.append({"Workbench": [{"All calculators": WORKBENCH}, *pages]} if pages else {"Workbench": WORKBENCH})
    ours = set(_nav_srcs(nav)) | {p.src for p in series.parts}
    for entry in existing or []:
        srcs = _nav_srcs(entry)
        if srcs and not set(srcs) & ours:
            nav.append(entry)
    return nav

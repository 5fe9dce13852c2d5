"""A post-build checker for the links MkDocs does not validate (raw HTML included).

Every local href/src must name a file in the site, and every #fragment an id in the
target page. Assets on another host are reported too: only plain <a> links may
point elsewhere, since following them is the reader's choice.
"""
from __future__ import annotations

import re
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

_EXTERNAL = re.compile(r"^(https?:)?//", re.I)
_SKIP = ("mailto:", "data:", "blob:", "tel:")


# <link> elements a browser never fetches: they only name the page's address.
_NOT_FETCHED = {"canonical", "alternate"}


def _kind(tag: str, attrs: dict) -> str:
    """'a' for anything only followed on a click, else the tag name."""
    if tag == "link" and _NOT_FETCHED & set((attrs.get("rel") or "").split()):
        return "a"
    return tag


class _Links(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.refs: list[tuple[str, str, str]] = []  # (tag, attribute, url)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if a.get(key):
                self.ids.add(a[key])
        for attr in ("href", "src"):
            if a.get(attr) is not None:
                self.refs.append((_kind(tag, a), attr, a[attr]))


@lru_cache(maxsize=None)
def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def _target_file(site: Path, url_path: str) -> Path:
    path = site / unquote(url_path).lstrip("/")
    return path / "index.html" if url_path.endswith("/") or path.is_dir() else path


def check_page(site: Path, page: Path) -> list[str]:
    """Problems in one built page, as readable strings."""
    page_url = "/" + page.relative_to(site).as_posix()
    problems = []
    for tag, attr, ref in _parse(page).refs:
        if not ref or ref.startswith(_SKIP):
            continue
        if ref.lower().startswith("javascript:"):
            problems.append(f"{page_url}: <{tag} {attr}> uses javascript: {ref}")
        elif _EXTERNAL.match(ref):
            if not (tag == "a" and attr == "href"):
                problems.append(f"{page_url}: <{tag} {attr}> loads from another host: {ref}")
        else:
            problems.extend(_check_local(site, page_url, tag, attr, ref))
    return problems


def _check_local(site: Path, page_url: str, tag: str, attr: str, ref: str) -> list[str]:
    url = urlparse(urljoin("http://site" + page_url, ref))
    target = _target_file(site, url.path)
    if not target.is_file():
        return [f"{page_url}: <{tag} {attr}> points at a missing file: {ref}"]
    if url.fragment and target.suffix == ".html" and unquote(url.fragment) not in _parse(target).ids:
        return [f"{page_url}: <{tag} {attr}> points at a missing anchor: {ref}"]
    return []


def check_site(site: Path) -> list[str]:
    _parse.cache_clear()
    problems = []
    for page in sorted(site.rglob("*.html")):
        problems.extend(check_page(site, page))
    return problems

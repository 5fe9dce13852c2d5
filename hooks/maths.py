"""MkDocs hook: render every formula at build time with KaTeX, so pages need no maths script.

Arithmatex (generic mode) marks formulas as <span|div class="arithmatex">\\(…\\)</span>;
this hook swaps each for KaTeX's MathML, which every current browser draws natively
(MathML Core) and screen readers read. MathML alone, rather than KaTeX's HTML+MathML,
keeps a maths-heavy part under its page-weight budget: no KaTeX CSS, fonts or the
verbose HTML rendering (some 175 KB on Part 1). A TeX error fails the build, naming
the page. One Node process serves the whole build.
"""
from __future__ import annotations

import atexit
import json
import re
import subprocess
from html import unescape
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parent.parent
MATH = re.compile(r'<(span|div) class="arithmatex">\s*\\[(\[](.*?)\\[)\]]\s*</\1>', re.S)


class KaTeX:
    """A long-lived `node katex_server.mjs`; render(tex, display) -> HTML."""

    def __init__(self):
        self.proc = None

    def render(self, tex: str, display: bool) -> str:
        if self.proc is None:
            self.proc = subprocess.Popen(["node", str(ROOT / "hooks" / "katex_server.mjs")], cwd=ROOT,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            atexit.register(self.close)
        self.proc.stdin.write(json.dumps({"tex": tex, "display": display}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        if "error" in reply:
            raise ValueError(reply["error"])
        return reply["html"]

    def close(self):
        if self.proc:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
            self.proc = None


def render_maths(html: str, render) -> str:
    """Replace Arithmatex's markers with rendered maths; render(tex, display) -> HTML."""
    def swap(m):
        display = m.group(1) == "div"
        rendered = render(unescape(m.group(2)).strip(), display)
        return f'<div class="maths">{rendered}</div>' if display else rendered
    return MATH.sub(swap, html)


_katex = KaTeX()


def on_page_content(html, *, page, config, files):
    if "arithmatex" not in html:
        return html
    try:
        return render_maths(html, _katex.render)
    except ValueError as exc:
        raise PluginError(f"{page.file.src_uri}: maths error: {exc}") from None


def on_post_build(*, config):
    _katex.close()

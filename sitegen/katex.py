"""Every formula rendered at build time with KaTeX, so pages need no maths script.

Arithmatex (generic mode) marks formulas as <span|div class="arithmatex">\\(…\\)</span>;
`render_maths` swaps each for KaTeX's MathML, which every current browser draws natively
(MathML Core) and screen readers read. MathML alone, rather than KaTeX's HTML+MathML,
keeps a maths-heavy part under its page-weight budget: no KaTeX CSS, fonts or the
verbose HTML rendering (some 175 KB on Part 1). One Node process serves a whole build.
"""

from __future__ import annotations

import atexit
import json
import re
import subprocess
from html import unescape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = Path(__file__).resolve().parent / "node" / "katex_server.mjs"
MATH = re.compile(r'<(span|div) class="arithmatex">\s*\\[(\[](.*?)\\[)\]]\s*</\1>', re.S)
# KaTeX wraps its MathML in <semantics> with the TeX source as an <annotation>, and names the namespace the HTML
# parser gives <math> anyway: neither is drawn nor read aloud, and on a maths-heavy part they are 10-20 kB of HTML
XMLNS = ' xmlns="http://www.w3.org/1998/Math/MathML"'
TEX_SOURCE = re.compile(
    r'<semantics>(.*)<annotation encoding="application/x-tex">[^<]*</annotation></semantics>(?=</math>)', re.S
)


class KaTeX:
    """A long-lived `node katex_server.mjs`; render(tex, display) -> HTML; a TeX error is a ValueError."""

    def __init__(self):
        self.proc = None

    def render(self, tex: str, display: bool) -> str:
        if self.proc is None:
            self.proc = subprocess.Popen(
                ["node", str(SERVER)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
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


def compact_mathml(mathml: str) -> str:
    """KaTeX's MathML without the TeX annotation, its <semantics> wrapper and the implied namespace."""
    return TEX_SOURCE.sub(r"\1", mathml.replace(XMLNS, "", 1))


def render_maths(html: str, render) -> str:
    """Replace Arithmatex's markers with rendered maths; render(tex, display) -> HTML."""

    def swap(m):
        display = m.group(1) == "div"
        rendered = compact_mathml(render(unescape(m.group(2)).strip(), display))
        return f'<div class="maths">{rendered}</div>' if display else rendered

    return MATH.sub(swap, html)

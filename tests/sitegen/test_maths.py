"""Formulas rendered at build time (sitegen.katex): KaTeX's real MathML, minus what nothing draws or reads."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from sitegen.katex import KaTeX, render_maths


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def katex():
    k = KaTeX()
    yield k
    k.close()


def parsed(html: str) -> Tags:
    p = Tags()
    p.feed(html)
    return p


def test_inline_and_display_maths_keep_their_mathml_and_drop_the_tex_source(katex):
    html = (
        '<p>Ridge <span class="arithmatex">\\(I^* = P / B\\)</span> and</p>'
        '<div class="arithmatex">\\[t \\ge \\frac{W}{B}, \\quad a &lt; b\\]</div>'
    )
    out = parsed(render_maths(html, katex.render))
    names = [t for t, _ in out.tags]
    assert names.count("math") == 2
    assert {"mi", "mo", "mfrac", "msup"} <= set(names)
    assert "annotation" not in names and "semantics" not in names
    assert all("xmlns" not in attrs for t, attrs in out.tags if t == "math")
    display = [attrs for t, attrs in out.tags if t == "math" and attrs.get("display") == "block"]
    assert len(display) == 1
    assert ("div", {"class": "maths"}) in out.tags
    text = "".join(out.text)
    assert "<" in text and "\\frac" not in text and "I^*" not in text  # the rendered symbols, no TeX left


def test_a_tex_error_names_itself(katex):
    with pytest.raises(ValueError, match="frac"):
        render_maths('<span class="arithmatex">\\(\\frac{1}\\)</span>', katex.render)

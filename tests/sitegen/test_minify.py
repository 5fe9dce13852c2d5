"""The site's own scripts and styles are minified into site/ and keep working (the browser suite runs them)."""

from __future__ import annotations

import shutil

import pytest

from sitegen import minify
from sitegen.assets import ROOT


def test_every_own_script_and_style_is_minified_to_well_under_its_source(tmp_path):
    shutil.copytree(ROOT / "docs" / "assets", tmp_path / "assets")
    before = {p.relative_to(tmp_path): p.stat().st_size for p in minify.own_files(tmp_path)}
    assert len([p for p in before if p.suffix == ".js"]) >= 6 and len([p for p in before if p.suffix == ".css"]) >= 4
    minify.minify(tmp_path)
    after = {p.relative_to(tmp_path): p.stat().st_size for p in minify.own_files(tmp_path)}
    assert after.keys() == before.keys()
    for path, size in after.items():
        assert size < 0.8 * before[path], path
        assert "/*" not in (tmp_path / path).read_text(encoding="utf-8")  # comments gone
    # the module graph is kept: calculators.js still imports its siblings by the same names
    assert 'from"./figures.js"' in (tmp_path / "assets/calculators/calculators.js").read_text(encoding="utf-8")


def test_a_script_esbuild_cannot_parse_fails_the_build_naming_it(tmp_path):
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "broken.js").write_text("export const = ;", encoding="utf-8")
    try:
        minify.minify(tmp_path)
    except minify.AssetError as exc:
        assert "broken.js" in str(exc)
    else:
        raise AssertionError("a broken script was minified silently")


def test_indentation_goes_but_preformatted_text_and_scripts_keep_theirs():
    page = (
        "<div>\n    <p>a\n      b</p>\n<pre><code>\n  x\n    y</code></pre>\n"
        "  <script>\nconst s = `\n  q`;\n</script>\n"
        '\t<textarea rows="2">\n  t</textarea>\n  <style>\n  a { color: red; }\n</style>\n  end'
    )
    assert minify.drop_indentation(page) == (
        "<div>\n<p>a\nb</p>\n<pre><code>\n  x\n    y</code></pre>\n"
        "<script>\nconst s = `\n  q`;\n</script>\n"
        '<textarea rows="2">\n  t</textarea>\n<style>\n  a { color: red; }\n</style>\nend'
    )


def test_the_built_pages_carry_no_indentation_outside_preformatted_text():
    pages = sorted((ROOT / "site").glob("**/index.html"))
    if not pages:
        pytest.skip("site/ not built")
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert minify.drop_indentation(html) == html, page

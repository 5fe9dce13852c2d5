"""Every link and anchor in the built site resolves; nothing loads from another host."""
from linkcheck import check_site


def test_built_site_has_no_broken_links(built_site):
    assert check_site(built_site) == []


def test_checker_catches_what_it_should(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<h2 id="here">x</h2>')
    (tmp_path / "index.html").write_text(
        '<a href="a/#here">ok</a> <a href="a/#gone">bad anchor</a> <a href="missing/">bad file</a>'
        '<script src="https://cdn.example.com/x.js"></script> <a href="https://example.org/">fine</a>'
        '<img src="//cdn.example.com/i.png"><link rel="canonical" href="https://example.org/">')
    problems = check_site(tmp_path)
    assert len(problems) == 4, problems
    assert any("#gone" in p for p in problems)
    assert any("missing/" in p for p in problems)
    assert sum("another host" in p for p in problems) == 2

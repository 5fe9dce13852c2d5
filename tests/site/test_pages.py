"""Every page in the sitemap, in light and dark: loads cleanly, stays local, passes axe."""
import pytest

from conftest import run_axe
from harness import sitemap_paths, SITE


def pytest_generate_tests(metafunc):
    if "page_path" in metafunc.fixturenames:
        metafunc.parametrize("page_path", sitemap_paths(SITE))


def set_scheme(page, scheme):
    """Puts Material's scheme on <body> directly; independent of any settings UI."""
    page.evaluate("s => document.body.setAttribute('data-md-color-scheme', s)",
                  "slate" if scheme == "dark" else "default")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_page_is_clean(open_page, page_path, scheme):
    page, log = open_page(page_path, scheme=scheme)
    page.wait_for_load_state("networkidle")
    set_scheme(page, scheme)
    assert log.foreign() == [], "requests to other hosts"
    assert log.failed == [], "failed requests"
    assert log.errors == [], "console errors"
    assert run_axe(page) == []

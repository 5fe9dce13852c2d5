"""Every page in the sitemap, in light and dark: loads cleanly, stays local, passes axe."""
import pytest

from conftest import BODY_SCHEME, run_axe
from harness import sitemap_paths, SITE


def pytest_generate_tests(metafunc):
    if "page_path" in metafunc.fixturenames:
        metafunc.parametrize("page_path", sitemap_paths(SITE))


def set_scheme(page, scheme):
    """Checks the scheme the site itself chose (open_page emulates the OS scheme and the reader
    settings follow it); sets nothing, so dark runs test what a dark-mode reader gets."""
    assert page.evaluate("document.body.getAttribute('data-md-color-scheme')") == BODY_SCHEME[scheme]
    assert page.evaluate("document.documentElement.dataset.rsScheme") == scheme


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_page_is_clean(open_page, page_path, scheme):
    page, log = open_page(page_path, scheme=scheme)
    page.wait_for_load_state("networkidle")
    set_scheme(page, scheme)
    assert log.foreign() == [], "requests to other hosts"
    assert log.failed == [], "failed requests"
    assert log.errors == [], "console errors"
    assert run_axe(page) == []

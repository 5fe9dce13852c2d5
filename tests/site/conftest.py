"""Fixtures for the browser suite: one server and one Chromium per session."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

from harness import AXE, CHROMIUM_ARGS, ROOT, SITE, SiteServer, chromium_path, is_local


@pytest.fixture(scope="session")
def built_site():
    """The built site; `make test` builds it strictly first, a lone pytest run builds it here."""
    if not (SITE / "sitemap.xml").exists():
        subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict"], cwd=ROOT, check=True)
    return SITE


@pytest.fixture(scope="session")
def server(built_site):
    with SiteServer(built_site) as srv:
        yield srv


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield b
        b.close()


@dataclass
class PageLog:
    """What one page did: every request, failure and console error."""
    origin: str
    requests: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    errors: list = field(default_factory=list)

    def foreign(self):
        return [u for u in self.requests if not is_local(u, self.origin)]


def watch(context, page, origin) -> PageLog:
    log = PageLog(origin)
    context.on("request", lambda r: log.requests.append(r.url))
    page.on("requestfailed", lambda r: log.failed.append(f"{r.url} ({r.failure})"))
    page.on("console", lambda m: m.type == "error" and log.errors.append(m.text))
    page.on("pageerror", lambda e: log.errors.append(str(e)))
    return log


# Material's scheme attribute on <body> for each reader-facing scheme.
BODY_SCHEME = {"light": "default", "dark": "slate"}
READER_SETTINGS_KEY = "/.reader-settings:v1"   # scoped by site path, as Material scopes its keys


@pytest.fixture
def open_page(browser, server):
    """open_page(path, scheme="light", **context_options) -> (page, log).

    `scheme` is the real mechanism, not a patched attribute: the context emulates the OS colour
    scheme and the reader settings' appearance is "system" by default, so the site's own pre-paint
    script picks it. Unless `storage` sets the reader settings, the page must show that scheme.
    """
    contexts = []

    def _open(path, scheme="light", storage=None, **options):
        context = browser.new_context(color_scheme=scheme, **options)
        contexts.append(context)
        if storage:
            context.add_init_script(
                "for (const [k, v] of Object.entries(%s)) localStorage.setItem(k, v);" % json.dumps(storage))
        page = context.new_page()
        log = watch(context, page, server.origin)
        page.goto(server.origin + path, wait_until="load")
        if scheme in BODY_SCHEME and READER_SETTINGS_KEY not in (storage or {}):
            shown = page.evaluate("document.body.getAttribute('data-md-color-scheme')")
            assert shown == BODY_SCHEME[scheme], f"{path}: {scheme} OS scheme shows body scheme {shown!r}"
        return page, log

    yield _open
    for c in contexts:
        c.close()


def run_axe(page) -> list[dict]:
    """Serious and critical WCAG 2.x A/AA violations on the page, as {id, targets}."""
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("""async () => {
        const r = await axe.run(document, {runOnly: {type: "tag",
            values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]}});
        return r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
            .map(v => ({id: v.id, help: v.help, targets: v.nodes.map(n => n.target.join(" "))}));
    }""")
    return result

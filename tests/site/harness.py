"""Plain helpers for the browser suite: serve site/, find its pages, launch Chromium.

Kept free of pytest so the benchmark command can reuse them.
"""
from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
# SITE_DIR lets a run test another build (e.g. a private one while site/ is being rebuilt).
SITE = Path(os.environ.get("SITE_DIR", ROOT / "site"))
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"

# Every hostname but the local ones fails DNS inside the browser: pages, workers and all.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1, EXCLUDE localhost",
]


def chromium_path() -> str:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise RuntimeError("Chromium not found: install Debian's `chromium` package (make test does, as root)")


def sitemap_paths(site: Path = SITE) -> list[str]:
    """URL paths of every page in the built sitemap, e.g. ['/', '/parts/01-decode-loop/']."""
    ns = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}
    tree = ET.parse(site / "sitemap.xml")
    return sorted(urlparse(loc.text.strip()).path for loc in tree.findall("s:url/s:loc", ns))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".mjs": "text/javascript", ".js": "text/javascript"}

    def log_message(self, *args):  # the server's request list is the log
        pass

    def do_GET(self):
        self.server.requests.append(self.path)
        super().do_GET()


class SiteServer:
    """Serves a directory on a free loopback port and records every path asked for."""

    def __init__(self, directory: Path = SITE):
        handler = functools.partial(_QuietHandler, directory=str(directory))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.requests = []
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def requests(self) -> list[str]:
        return self.httpd.requests

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def is_local(url: str, origin: str) -> bool:
    return url.startswith(origin + "/") or url == origin or url.startswith(("data:", "blob:", "about:"))


def calculator_worker(page):
    """The page's Python worker (not Material's search worker); None before one has started."""
    return next((w for w in page.workers if w.url.endswith("/calculators/worker.js")), None)

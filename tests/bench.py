"""`make bench`: the site's performance figures on this machine, printed as JSON.

Medians over several runs of: build time; bytes each page transfers before any
interaction, by kind; navigation to the first live calculator result, cold (new
profile) and warm (same profile), with how Python started (snapshot or wheel); time
per recompute (p50, p95) inside the page, in steady state and in the first pass after
Python starts; the worker's WebAssembly heap. Timing never decides a test: this only reports.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "site"))
from harness import CHROMIUM_ARGS, ROOT, SITE, SiteServer, calculator_worker, chromium_path, sitemap_paths  # noqa: E402
from sitegen.workbench import families  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
BUDGET_BYTES = 600_000  # per page, before interaction, excluding the kinds below
# the worker's start-up snapshot (gzip, fetched once a visit by the first calculator): 41.6 MB before the ledger's
# predictions were computed at build time instead of in it (sitegen/predictions.py)
SNAPSHOT_BUDGET_BYTES = 12_000_000
EXCLUDED = ("search index", "pyodide", "plotly", "vocabulary")
CALC_PAGE = "/workbench/memory/"  # where the first live result is timed
CALC_PAGES = [f"/workbench/{f.slug}/" for f in families()]  # recompute: every calculator, a family a page


def kind(path: str) -> str:
    if "/vendor/pyodide/" in path or "/wheels/" in path or "/snapshots/" in path:
        return "pyodide"
    if "/vendor/plotly/" in path:
        return "plotly"
    if "/assets/vocab/" in path:  # fetched by the worker when the regex_mask calculator first runs (Part 16)
        return "vocabulary"
    if path.endswith("search_index.json"):
        return "search index"
    if path.endswith("/") or path.endswith(".html"):
        return "html"
    for suffix, name in ((".css", "css"), (".js", "javascript"), (".mjs", "javascript")):
        if path.split("?")[0].endswith(suffix):
            return name
    return "other"


def size(path: str) -> int:
    local = SITE / path.split("?")[0].lstrip("/")
    if local.is_dir():
        local = local / "index.html"
    return local.stat().st_size if local.is_file() else 0


def build_seconds() -> float:
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "-q"],
            cwd=ROOT,
            check=True,
            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        )
        times.append(time.perf_counter() - t)
    return round(statistics.median(times), 2)


def page_bytes(browser, server) -> dict:
    out = {}
    for path in sitemap_paths(SITE):
        context = browser.new_context()
        server.requests.clear()
        page = context.new_page()
        page.goto(server.origin + path, wait_until="load")
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(500)
        by_kind: dict[str, int] = {}
        for req in list(server.requests):
            by_kind[kind(req)] = by_kind.get(kind(req), 0) + size(req)
        counted = sum(v for k, v in by_kind.items() if k not in EXCLUDED)
        out[path] = {"by_kind_bytes": by_kind, "budgeted_bytes": counted, "within_budget": counted <= BUDGET_BYTES}
        context.close()
    return out


LIVE = "() => [...document.querySelectorAll('[data-calc-status]')].some(s => s.textContent.startsWith('Live'))"


def first_live(pw, server, profile: str) -> tuple[float, dict]:
    """Seconds from navigation to the first live result, and the worker's boot marks."""
    context = pw.chromium.launch_persistent_context(profile, executable_path=chromium_path(), args=CHROMIUM_ARGS)
    page = context.new_page()
    t = time.perf_counter()
    page.goto(server.origin + CALC_PAGE, wait_until="commit")
    page.wait_for_function(LIVE, timeout=120_000, polling=20)
    elapsed = time.perf_counter() - t
    marks = calculator_worker(page).evaluate("() => self.llmsi.bootMarks()")
    context.close()
    return elapsed, marks


def live_times(pw, server) -> dict:
    runs = {"cold": [], "warm": []}
    for _ in range(RUNS):
        with tempfile.TemporaryDirectory() as profile:
            for kind in runs:  # a new profile, then the same one again
                runs[kind].append(first_live(pw, server, profile))
    out = {f"{kind}_s": round(statistics.median(t for t, _ in r), 2) for kind, r in runs.items()}
    out.update({f"{kind}_runs_s": [round(t, 2) for t, _ in r] for kind, r in runs.items()})
    out["python_started_from"] = sorted({m.get("via") for r in runs.values() for _, m in r})
    return out


# `changed`: each call sets the calculator's first decimal input (an efficiency, a utilisation…) to a
# value not used before (0.1% lower each time), so nothing a calculator keeps between calls is reused.
RECOMPUTE = """async ([n, changed]) => {
  const rt = window.llmsi.runtime; await rt.start();
  const out = {};
  for (const c of window.llmsi.calcs) {
    const times = [];
    const base = c.inputs();
    const key = Object.keys(base).find((k) => /^[0-9]*[.][0-9]+$/.test(String(base[k])));
    for (let i = 0; i < n; i++) {
      const inputs = {...base};
      if (changed && key) inputs[key] = String(Number(base[key]) * (1 - 0.001 * i));
      const t = performance.now();
      await rt.call({op: 'present', name: c.name, inputs});
      times.push(performance.now() - t);
    }
    out[c.name] = times;
  }
  return out;
}"""


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _summary(samples: dict) -> dict:
    every = [t for ts in samples.values() for t in ts]
    return {
        "p50": percentile(every, 50),
        "p95": percentile(every, 95),
        "by_calculator": {n: {"p50_ms": percentile(t, 50), "p95_ms": percentile(t, 95)} for n, t in samples.items()},
    }


def _median_summary(runs: list[dict]) -> dict:
    def med(values):
        return round(statistics.median(values), 1)

    return {
        "p50": med(r["p50"] for r in runs),
        "p95": med(r["p95"] for r in runs),
        "by_calculator": {
            n: {k: med(r["by_calculator"][n][k] for r in runs) for k in ("p50_ms", "p95_ms")}
            for n in runs[0]["by_calculator"]
        },
    }


def _passes(browser, server, path: str) -> tuple[list[dict], float]:
    """One fresh page: the first pass, the steady one, the input-changed one; and the worker's heap."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(server.origin + path)
    page.wait_for_function("() => window.llmsi && window.llmsi.runtime")
    samples = [page.evaluate(RECOMPUTE, [20, changed]) for changed in (False, False, True)]
    heap = calculator_worker(page).evaluate("() => self.llmsi.wasmHeapBytes()")
    context.close()
    return samples, heap


def recompute_and_memory(browser, server) -> dict:
    """Per fresh page of each workbench family: a first pass right after Python starts (V8 is still
    optimising the interpreter's WebAssembly), then the steady state a reader's later changes see, then
    every call with an input changed; medians over RUNS rounds of every family page."""
    first, steady, changed, heaps = [], [], [], []
    for _ in range(RUNS):
        merged = [{}, {}, {}]
        for path in CALC_PAGES:
            samples, heap = _passes(browser, server, path)
            for into, got in zip(merged, samples):
                into.update(got)
            heaps.append(heap)
        for into, got in zip((first, steady, changed), merged):
            into.append(_summary(got))
    return {
        "recompute_ms": _median_summary(steady),
        "recompute_ms_first_pass_after_start": _median_summary(first),
        "recompute_ms_input_changed_each_call": _median_summary(changed),
        "worker_wasm_heap_mb": round(max(heaps) / 2**20, 1),
    }


def snapshot_bytes() -> int:
    """The built site's snapshot, as a reader downloads it (already gzip data)."""
    (path,) = SITE.glob("assets/snapshots/*/calculators.snapshot")
    return path.stat().st_size


def main():
    from playwright.sync_api import sync_playwright

    report = {"runs": RUNS, "build_s": build_seconds()}
    with SiteServer(SITE) as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        report["pages"] = page_bytes(browser, server)
        report["first_live_result"] = live_times(pw, server)
        report.update(recompute_and_memory(browser, server))
        browser.close()
    pages = report["pages"].values()
    snapshot = snapshot_bytes()
    report["summary"] = {
        "max_budgeted_page_bytes": max(p["budgeted_bytes"] for p in pages),
        "all_pages_within_600_kb": all(p["within_budget"] for p in pages),
        "snapshot_gzip_bytes": snapshot,
        "snapshot_within_budget": snapshot <= SNAPSHOT_BUDGET_BYTES,
        "pages_loading_pyodide_before_interaction": [
            k for k, p in report["pages"].items() if "pyodide" in p["by_kind_bytes"]
        ],
        "pages_loading_plotly_before_interaction": [
            k for k, p in report["pages"].items() if "plotly" in p["by_kind_bytes"]
        ],
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

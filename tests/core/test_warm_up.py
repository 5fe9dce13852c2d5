"""warm_up() leaves nothing for later: the browser's snapshot has no files to fall back on.

The worker restores a memory snapshot taken after warm_up() (hooks/snapshot.mjs) and the
core's files are not on its file system, so every module must already be imported and every
data file already read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import calculators
from calculators import catalog, page
from calculators.resolve import accelerator_to_json

PACKAGE_DIR = Path(calculators.__file__).parent


def _modules_on_disk() -> set[str]:
    names = set()
    for path in PACKAGE_DIR.rglob("*.py"):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_module_is_imported():
    imported = set(page.warm_up()) | {"calculators"}
    assert imported == _modules_on_disk()
    assert all(name in sys.modules for name in imported)


def test_every_data_file_is_read():
    on_disk = sorted(p.name for p in (PACKAGE_DIR / "data").glob("*.toml"))
    assert catalog.load_every_data_file() == on_disk


def test_after_warm_up_no_calculator_reads_a_file(monkeypatch):
    page.warm_up()
    other_model = page.present_json("kv_cache", '{"model": "llama-3.1-70b"}')
    mine = json.dumps(accelerator_to_json(next(iter(catalog.accelerator_presets().values()))))
    described = page.describe_json("accelerator", mine)

    def no_files(*args, **kwargs):
        raise AssertionError("a file was read after warm_up")

    monkeypatch.setattr(catalog.resources, "files", no_files)
    for name in calculators.calculator_names():
        assert '"error"' not in page.present_json(name, "{}"), name
    assert page.present_json("kv_cache", '{"model": "llama-3.1-70b"}') == other_model
    assert page.describe_json("accelerator", mine) == described  # the "define your own" dialog's check
    assert '"error"' not in described

"""The site's wheel carries the calibration ledger's predictions (sitegen/predictions.py), so the worker's
snapshot holds numbers and not the step models behind them; the source tree never has the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from io import BytesIO
from pathlib import Path

from calculators import calibration
from sitegen import predictions, wheel

ROOT = Path(__file__).resolve().parents[2]
ENTRY = f"calculators/data/{calibration.SHIPPED}"


def test_the_wheel_carries_the_predictions_of_this_ledger():
    with zipfile.ZipFile(BytesIO(wheel.wheel_bytes())) as zf:
        table = json.loads(zf.read(ENTRY))
    assert table["ids"] == [r["id"] for r in calibration.rows()]
    assert len(table["bound"]) == len(table["ids"])
    for overhead, comm in calibration.SHIPPED_MODES:
        assert calibration.from_table(table, overhead, comm) is not None, (overhead, comm)


def test_the_source_tree_has_no_predictions_file():
    assert not (ROOT / ENTRY).exists()
    assert all(p.name != calibration.SHIPPED for p in wheel.package_files())


def test_the_cache_key_follows_every_byte_and_name():
    entries = {"calculators/a.py": b"x = 1\n", "calculators/data/b.toml": b"y = 2\n"}
    key = predictions.cache_key(entries)
    assert predictions.cache_key(dict(entries, **{"calculators/a.py": b"x = 2\n"})) != key
    assert predictions.cache_key({"calculators/c.py": b"x = 1\n", "calculators/data/b.toml": b"y = 2\n"}) != key
    assert predictions.cache_key(dict(reversed(entries.items()))) == key


def test_a_failing_computation_names_its_error(tmp_path):
    broken = {"calculators/__init__.py": b"raise ImportError('no core here')\n"}
    try:
        predictions.shipped(broken, cache=tmp_path)
    except predictions.PredictionsError as exc:
        assert "no core here" in str(exc)
    else:
        raise AssertionError("a broken core gave a table")
    assert not list(tmp_path.glob("*.json"))


def test_the_core_unpacked_from_the_wheel_reads_them_and_computes_none(tmp_path):
    """As the worker's snapshot is made: the shipped modes come from the table, not the step model."""
    with zipfile.ZipFile(BytesIO(wheel.wheel_bytes())) as zf:
        zf.extractall(tmp_path)
    script = (
        "import calculators, pathlib, sys\n"
        "from calculators import calibration\n"
        f"assert pathlib.Path(calculators.__file__).parent == pathlib.Path({str(tmp_path)!r}) / 'calculators'\n"
        "calibration.predict = None  # computing any row now fails\n"
        "for mode in calibration.SHIPPED_MODES:\n"
        "    assert len(calibration.predictions(*mode)) == len(calibration.rows())\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]

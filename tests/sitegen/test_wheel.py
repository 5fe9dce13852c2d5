"""The site's wheel carries the calibration ledger's predictions in every mode (sitegen/predictions.py), so the
worker's snapshot holds numbers and not the step models behind them; a copy in the source tree is never shipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from io import BytesIO

import pytest

from calculators import calibration
from sitegen import predictions, wheel

ENTRY = f"calculators/data/{calibration.SHIPPED}"


def _table() -> dict:
    with zipfile.ZipFile(BytesIO(wheel.wheel_bytes())) as zf:
        return json.loads(zf.read(ENTRY))


def test_the_wheel_carries_what_cpython_computes_in_every_mode():
    table = _table()
    assert set(table["predicted"]) == {calibration._mode_key(m, c) for m, c in calibration.SHIPPED_MODES}
    # the default mode, which the rest of the suite computes anyway, field for field
    mode = (calibration.DEFAULT_MODE, True)
    assert calibration.from_table(table, *mode) == calibration._predictions(*mode)


def test_a_copy_in_the_tree_is_left_out(tmp_path):
    """A stray table in the sources would be shipped unchecked: the wheel takes the built one only."""
    data = tmp_path / "calculators" / "data"
    data.mkdir(parents=True)
    for name in ("models.toml", calibration.SHIPPED, "vectors.json"):
        (data / name).write_text("{}")
    assert [p.name for p in wheel.package_files(tmp_path)] == ["models.toml", "vectors.json"]


def test_the_core_unpacked_from_the_wheel_reads_them_and_computes_none(tmp_path):
    """As the worker's snapshot is made: every mode comes from the table, not the step model."""
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


def test_the_cache_key_follows_every_byte_and_name():
    entries = {"calculators/a.py": b"x = 1\n", "calculators/data/b.toml": b"y = 2\n"}
    key = predictions.cache_key(entries)
    assert predictions.cache_key(dict(entries, **{"calculators/a.py": b"x = 2\n"})) != key
    assert predictions.cache_key({"calculators/c.py": b"x = 1\n", "calculators/data/b.toml": b"y = 2\n"}) != key
    assert predictions.cache_key(dict(reversed(entries.items()))) == key


def _core(calibration_py: str) -> dict[str, bytes]:
    return {"calculators/__init__.py": b"", "calculators/calibration.py": calibration_py.encode()}


@pytest.mark.parametrize(
    "source, message",
    [
        ("raise ImportError('no core here')", "no core here"),
        # a stray print in the core would otherwise be cached as the table
        ("SHIPPED_MODES = (('fitted', True),)\ndef shipped_table(m):\n    print('hi')\n    return {}", "not a table"),
    ],
)
def test_a_failing_computation_is_named_and_not_cached(tmp_path, source, message):
    with pytest.raises(predictions.PredictionsError, match=message):
        predictions.shipped(_core(source), cache=tmp_path)
    assert not list(tmp_path.iterdir())


def test_an_installed_core_is_not_taken_for_the_wheels_sources():
    # with no sources to import, the editable install's core would answer: refused
    with pytest.raises(predictions.PredictionsError, match="not the wheel's sources"):
        predictions.compute({}, workers=1)


def test_each_worker_takes_its_share_and_the_table_is_whole(tmp_path):
    source = (
        "SHIPPED_MODES = tuple(('m%d' % i, True) for i in range(5))\n"
        "def shipped_table(modes):\n"
        "    return {'ids': ['a'], 'bound': [1.0], 'predicted': {m: [float(len(m))] for m, _ in modes}}\n"
    )
    table = json.loads(predictions.compute(_core(source), workers=2))
    assert sorted(table["predicted"]) == ["m0", "m1", "m2", "m3", "m4"]
    assert table["ids"] == ["a"] and table["bound"] == [1.0]


def test_old_tables_are_pruned(tmp_path):
    for k in range(predictions.KEEP + 2):
        (tmp_path / f"old{k}.json").write_text("{}")
        os.utime(tmp_path / f"old{k}.json", (k, k))
    source = (
        "SHIPPED_MODES = (('x', True),)\n"
        "def shipped_table(m):\n    return {'ids': [], 'bound': [], 'predicted': {'x': []}}"
    )
    predictions.shipped(_core(source), cache=tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == predictions.KEEP
    assert not list(tmp_path.glob("*.tmp"))

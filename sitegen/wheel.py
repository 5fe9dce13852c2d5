"""Build the numeric core as a pure-Python wheel, with no build backend.

The site ships this wheel to Pyodide (``loadPackage(url)``) and the parity test
loads the same bytes under Node. The package's entries are sorted, the metadata
follows, all time-stamped at a fixed date, so the same sources always give the
same bytes, and the content hash can version the URL. One entry is built, not
taken from the tree: the calibration predictions (predictions.py, about a minute
of CPython when the core has changed, then cached).
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from pathlib import Path

from calculators.calibration import SHIPPED

from . import predictions

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "calculators"
DIST = "llm_serving_calculators"
VERSION = "0.1.0"
_EPOCH = (1980, 1, 1, 0, 0, 0)
_SHIPPED = {".py", ".toml", ".json"}


def wheel_name() -> str:
    return f"{DIST}-{VERSION}-py3-none-any.whl"


def package_files(root: Path = ROOT) -> list[Path]:
    """Every file the wheel carries, sorted, caches excluded."""
    src = root / PACKAGE
    built = src / "data" / SHIPPED  # made for the wheel (predictions.py), never taken from the tree
    files = (p for p in src.rglob("*") if p.is_file() and p.suffix in _SHIPPED and "__pycache__" not in p.parts)
    return sorted(p for p in files if p != built)


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _dist_info() -> dict[str, bytes]:
    info = f"{DIST}-{VERSION}.dist-info"
    return {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {VERSION}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: sitegen/wheel.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/top_level.txt": f"{PACKAGE}\n".encode(),
    }


def wheel_entries(root: Path = ROOT) -> dict[str, bytes]:
    entries = {p.relative_to(root).as_posix(): p.read_bytes() for p in package_files(root)}
    # built, not kept in the tree: the ledger's predictions in every mode the browser offers
    entries[f"{PACKAGE}/data/{SHIPPED}"] = predictions.shipped(entries)
    entries = dict(sorted(entries.items()))
    entries.update(_dist_info())
    record_name = f"{DIST}-{VERSION}.dist-info/RECORD"
    lines = [_record_line(name, data) for name, data in entries.items()] + [f"{record_name},,"]
    entries[record_name] = ("\n".join(lines) + "\n").encode()
    return entries


def wheel_bytes(root: Path = ROOT) -> bytes:
    """The wheel as bytes: a zip with the package's entries sorted and fixed time stamps."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in wheel_entries(root).items():
            info = zipfile.ZipInfo(name, _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return buf.getvalue()


def build_wheel(out_dir: Path, root: Path = ROOT) -> Path:
    """Write the wheel into ``out_dir`` and return its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / wheel_name()
    path.write_bytes(wheel_bytes(root))
    return path


def content_hash(data: bytes) -> str:
    """A short hash of the wheel's bytes, for a cache-safe URL."""
    return hashlib.sha256(data).hexdigest()[:12]

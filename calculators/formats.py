"""Number formats: how many bits one stored element really costs, by the format's name.

The table lives in ``data/formats.toml`` and is read by ``catalog.formats()``; a Format's
effective width (block scales included) is ``model.Format.effective_bits``.
"""

from __future__ import annotations

from .catalog import format_index, format_key
from .errors import InputError
from .model import Format


def get_format(dtype_id: str, field: str = "dtype") -> Format:
    """The Format for an id or alias (case and '_'/'-' insensitive)."""
    if not isinstance(dtype_id, str):
        raise InputError(field, f"must be a format name, got {type(dtype_id).__name__}")
    index = format_index()
    found = index.get(format_key(dtype_id))
    if found is None:
        allowed = ", ".join(sorted(index))
        raise InputError(field, f"unknown format {dtype_id!r}; allowed: {allowed}")
    return found


def bytes_per_element(dtype_id: str, field: str = "dtype") -> float:
    """Bytes per stored element, block scales included (MXFP4: 0.53125)."""
    return get_format(dtype_id, field).bytes_per_element

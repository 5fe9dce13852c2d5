"""Number formats: how many bits one stored element really costs.

Block-scaled formats (MXFP4, NVFP4, group-wise INT4) store one scale per block, so
the effective width is ``bits + scale_bits / block_size``. The table itself lives in
``data/formats.toml`` and is loaded by ``presets.formats()``.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import InputError


@dataclass(frozen=True)
class Format:
    id: str
    name: str
    bits_per_element: int
    block_size: int = 0        # elements sharing one scale; 0 = no per-block scale
    scale_bits: int = 0        # width of that shared scale
    flops_key: str = ""        # key into Accelerator.dense_flops_per_s; "" = no native matmul rate
    aliases: tuple[str, ...] = ()
    notes: str = ""
    source: str = ""
    as_of: str = ""

    @property
    def effective_bits(self) -> float:
        if self.block_size:
            return self.bits_per_element + self.scale_bits / self.block_size
        return float(self.bits_per_element)

    @property
    def bytes_per_element(self) -> float:
        return self.effective_bits / 8


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def get_format(dtype_id: str, field: str = "dtype") -> Format:
    """The Format for an id or alias (case and '_'/'-' insensitive)."""
    from .presets import format_index  # late import: presets imports this module

    if not isinstance(dtype_id, str):
        raise InputError(field, f"must be a format name, got {type(dtype_id).__name__}")
    index = format_index()
    found = index.get(_normalise(dtype_id))
    if found is None:
        allowed = ", ".join(sorted(index))
        raise InputError(field, f"unknown format {dtype_id!r}; allowed: {allowed}")
    return found


def bytes_per_element(dtype_id: str, field: str = "dtype") -> float:
    """Bytes per stored element, block scales included (MXFP4: 0.53125)."""
    return get_format(dtype_id, field).bytes_per_element

"""Preset models, accelerators and number formats, loaded from the TOML data files.

The only module in the core that reads files. Data lives in ``calculators/data`` and
is read through importlib.resources, so it works from a source tree, a wheel or Pyodide.
"""
from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import resources

from .formats import Format, _normalise
from .model import Accelerator, Model

# Keys a models.toml entry may carry beyond the Model fields: facts about the
# published parameter counts, kept for tests and tables (see model_info()), and `hidden`
# (a model the prose needs but no select offers: a counterfactual or a historical reference).
MODEL_INFO_KEYS = (
    "params_source", "params_note", "params_loose", "official_extra_params",
    "official_extra_params_source", "official_active_excludes_embedding", "hidden",
)


@lru_cache(maxsize=None)
def _load(filename: str) -> dict:
    text = (resources.files(__package__) / "data" / filename).read_text(encoding="utf-8")
    return tomllib.loads(text)


def load_every_data_file() -> list[str]:
    """Read and cache every data file now (for a memory snapshot that must not need files)."""
    names = sorted(f.name for f in (resources.files(__package__) / "data").iterdir() if f.name.endswith(".toml"))
    for name in names:
        _load(name)
    return names


def _model_entries() -> list[dict]:
    return _load("models.toml")["model"]


@lru_cache(maxsize=None)
def model_presets() -> dict[str, Model]:
    """Every preset model by id, validated like user input."""
    from .resolve import model_from_dict  # late import: resolve imports presets

    out = {}
    for entry in _model_entries():
        fields = {k: v for k, v in entry.items() if k not in MODEL_INFO_KEYS}
        out[entry["id"]] = model_from_dict(fields, field=f"models.toml[{entry['id']}]")
    return out


@lru_cache(maxsize=None)
def model_info(model_id: str) -> dict:
    """The extra facts about a preset's published parameter counts (may be empty)."""
    for entry in _model_entries():
        if entry["id"] == model_id:
            return {k: entry[k] for k in MODEL_INFO_KEYS if k in entry}
    raise KeyError(model_id)


@lru_cache(maxsize=None)
def accelerator_presets() -> dict[str, Accelerator]:
    """Every preset accelerator by id, validated like user input."""
    from .resolve import accelerator_from_dict

    out = {}
    for entry in _load("accelerators.toml")["accelerator"]:
        out[entry["id"]] = accelerator_from_dict(entry, field=f"accelerators.toml[{entry['id']}]")
    return out


@lru_cache(maxsize=None)
def formats() -> dict[str, Format]:
    """Every number format by canonical id."""
    out = {}
    for entry in _load("formats.toml")["format"]:
        entry = dict(entry, aliases=tuple(entry.get("aliases", ())))
        out[entry["id"]] = Format(**entry)
    return out


@lru_cache(maxsize=None)
def format_index() -> dict[str, Format]:
    """Canonical ids and aliases, normalised, to their Format."""
    index = {}
    for fmt in formats().values():
        for name in (fmt.id, *fmt.aliases):
            index[_normalise(name)] = fmt
    return index


def listing() -> dict[str, list[dict]]:
    """Short rows for a CLI or a table: what each preset is and where it comes from."""
    from .params import active_params, total_params

    models = [
        {"id": m.id, "name": m.name, "total_params": total_params(m),
         "active_params": active_params(m), "source": m.source}
        for m in model_presets().values()
    ]
    accs = [
        {"id": a.id, "name": a.name, "memory_bytes": a.memory_bytes,
         "memory_bandwidth_bytes_per_s": a.memory_bandwidth_bytes_per_s,
         "dense_flops_per_s": dict(a.dense_flops_per_s), "source": a.source}
        for a in accelerator_presets().values()
    ]
    fmts = [
        {"id": f.id, "name": f.name, "effective_bits": f.effective_bits,
         "aliases": list(f.aliases), "source": f.source}
        for f in formats().values()
    ]
    return {"models": models, "accelerators": accs, "formats": fmts}

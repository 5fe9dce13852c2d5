"""Every data file, read once and checked: preset models, accelerators, number formats and the tables
the calculators and the glossary use (links, host links, SRAM parts, NCCL's constants, engines, prices).

The only module in the core that reads files. Data lives in ``calculators/data`` and
is read through importlib.resources, so it works from a source tree, a wheel or Pyodide.
Models and accelerators are checked like a reader's input (`checks`), so an error in a
data file names the file, the entry and the field.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, fields
from functools import cache
from importlib import resources

from .checks import accelerator_from_dict, flag, model_from_dict
from .model import Accelerator, Format, Model


@dataclass(frozen=True)
class PublishedParams:
    """What a models.toml entry says about its publisher's parameter counts beyond the Model's
    official_total_params / official_active_params, for the tests that compare them with ours."""

    params_source: str = ""  # where the official counts come from
    params_note: str = ""  # why our count differs, where it does
    params_loose: tuple[str, ...] = ()  # "total", "active": published too roughly for a 1 % check
    official_extra_params: float = 0  # in the official total, not in this text decoder (a vision tower)
    official_extra_params_source: str = ""
    official_active_excludes_embedding: bool = False  # the official active count leaves the embedding out


# Keys a models.toml entry may carry beyond the Model fields (see model_info()).
MODEL_INFO_KEYS = tuple(f.name for f in fields(PublishedParams))
# `hidden = true` marks a real model the prose needs that readers should not be offered in a select.
HIDDEN_KEY = "hidden"


@cache
def _load(filename: str) -> dict:
    text = (resources.files(__package__) / "data" / filename).read_text(encoding="utf-8")
    return tomllib.loads(text)


@cache
def json_data(filename: str) -> dict:
    """A JSON file the build writes into data/ of the site's wheel (FileNotFoundError where this tree has none)."""
    return json.loads((resources.files(__package__) / "data" / filename).read_text(encoding="utf-8"))


def load_every_data_file() -> list[str]:
    """Read and cache every data file now (for a memory snapshot that must not need files)."""
    names = sorted(f.name for f in (resources.files(__package__) / "data").iterdir() if f.name.endswith(".toml"))
    for name in names:
        _load(name)
    return names


def entries(filename: str, table: str) -> list[dict]:
    """One array of tables of a data file, as written (for provenance checks); do not mutate."""
    return _load(filename)[table]


def _by_id(filename: str, table: str) -> dict[str, dict]:
    return {e["id"]: e for e in entries(filename, table)}


def models_from_entries(rows: list[dict], include_hidden: bool = True) -> dict[str, Model]:
    """Checked Models by id from models.toml rows; hidden ones only if asked for."""
    out = {}
    for entry in rows:
        field = f"models.toml[{entry['id']}]"
        hidden = flag(entry, HIDDEN_KEY, field, False)
        if include_hidden or not hidden:
            fields = {k: v for k, v in entry.items() if k not in MODEL_INFO_KEYS and k != HIDDEN_KEY}
            out[entry["id"]] = model_from_dict(fields, field=field)
    return out


@cache
def model_presets(include_hidden: bool = True) -> dict[str, Model]:
    """Every preset model by id, validated like user input; include_hidden=False leaves out the
    models marked hidden (the ones a select should not offer)."""
    return models_from_entries(entries("models.toml", "model"), include_hidden)


@cache
def model_info(model_id: str) -> PublishedParams:
    """The extra facts about a preset's published parameter counts (defaults where the entry has none)."""
    for entry in entries("models.toml", "model"):
        if entry["id"] == model_id:
            facts = {k: entry[k] for k in MODEL_INFO_KEYS if k in entry}
            return PublishedParams(**dict(facts, params_loose=tuple(facts.get("params_loose", ()))))
    raise KeyError(model_id)


@cache
def accelerator_presets() -> dict[str, Accelerator]:
    """Every preset accelerator by id, validated like user input."""
    return {
        e["id"]: accelerator_from_dict(e, field=f"accelerators.toml[{e['id']}]")
        for e in entries("accelerators.toml", "accelerator")
    }


@cache
def formats() -> dict[str, Format]:
    """Every number format by canonical id."""
    return {e["id"]: Format(**dict(e, aliases=tuple(e.get("aliases", ())))) for e in entries("formats.toml", "format")}


def format_key(name: str) -> str:
    """How a format's id or alias is looked up: case and '_'/'-' insensitive."""
    return name.strip().lower().replace("_", "-")


@cache
def format_index() -> dict[str, Format]:
    """Canonical ids and aliases, normalised by format_key, to their Format."""
    return {format_key(name): fmt for fmt in formats().values() for name in (fmt.id, *fmt.aliases)}


def links() -> dict[str, dict]:
    """Scale-up and scale-out links by id (interconnects.toml [[link]]; bandwidths per direction)."""
    return _by_id("interconnects.toml", "link")


def nccl() -> dict:
    """NCCL's cost-model constants (interconnects.toml [nccl])."""
    return _load("interconnects.toml")["nccl"]


def socket_link() -> dict:
    """The link between a two-socket server's CPUs, by host CPU (interconnects.toml [socket_link])."""
    return _load("interconnects.toml")["socket_link"]


def fused_allreduce() -> dict:
    """FlashInfer's all-reduce fused with the residual add and RMSNorm (interconnects.toml [fused_allreduce])."""
    return _load("interconnects.toml")["fused_allreduce"]


def sram_parts() -> dict[str, dict]:
    """SRAM-only parts by id (interconnects.toml [[sram_part]])."""
    return _by_id("interconnects.toml", "sram_part")


def host_links() -> dict[str, dict]:
    """GPU to host-memory links by id (host_links.toml)."""
    return _by_id("host_links.toml", "host_link")


def kv_tiers() -> dict[str, dict]:
    """Tiers a cached prefix's KV is fetched from, by id (kv_tiers.toml)."""
    return _by_id("kv_tiers.toml", "tier")


def engine_versions() -> dict[str, dict]:
    """Each engine release's startup-accounting rules, by id (engine_versions.toml, as written)."""
    return _by_id("engine_versions.toml", "version")


def engines() -> dict[str, dict]:
    """Serving engines by id and the features each documents (engines.toml)."""
    return _by_id("engines.toml", "engine")


def step_overheads() -> dict:
    """The per-step overhead figures and counts (calcs/overhead.py), as written."""
    return _load("step_overheads.toml")


def attention_kernels() -> dict:
    """How attention kernels' shapes add work beyond the model's FLOPs (attention_kernels.toml), as written."""
    return _load("attention_kernels.toml")


def achievable_matmul() -> dict:
    """The measured matmul rates' source and the chip the compute efficiency is stated for (accelerators.toml
    [achievable_matmul])."""
    return _load("accelerators.toml")["achievable_matmul"]


def weight_layouts() -> dict:
    """How engines' kernels lay weights out where it takes more room than the checkpoint (weight_layouts.toml)."""
    return _load("weight_layouts.toml")


def fitted() -> dict:
    """The constants fitted to the calibration ledger, each with the groups it was fitted on (fitted.toml)."""
    return _load("fitted.toml")


def shapes() -> dict[str, dict]:
    """Named workload shapes by id, as written (shapes.toml; workload_shape.named_shapes checks them)."""
    return _by_id("shapes.toml", "shape")


def prices() -> list[dict]:
    """Dated, sourced prices, in the file's order (prices.toml; rows have no id)."""
    return entries("prices.toml", "price")


def site_asset_text(asset: str) -> str | None:
    """A static file of the site, docs/assets/<asset>, beside the package as in a checkout (build, tests); None
    where it is absent (an installed wheel, the browser's worker, which fetches it from the site instead)."""
    path = resources.files(__package__).joinpath("..", "docs", "assets", *asset.split("/"))
    return path.read_text(encoding="utf-8") if path.is_file() else None

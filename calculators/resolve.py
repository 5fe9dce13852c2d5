"""Turn whatever the reader gives us into a checked Model or Accelerator, and back into JSON.

A model may be a preset id, a dict in this project's own shape (the Model fields as
JSON, attention and moe nested), a Hugging Face config.json dict, or a Model; the
numbers are checked by `checks`, whichever way it came in.
"""

from __future__ import annotations

from dataclasses import asdict

from .catalog import accelerator_presets, model_presets
from .checks import accelerator_from_dict, model_from_dict
from .errors import InputError
from .hf_import import model_from_hf_config
from .model import Accelerator, Model

HF_MARKERS = ("model_type", "architectures", "num_hidden_layers", "text_config")


def _lookup(value: str, presets: dict, field: str, what: str):
    found = presets.get(value.strip().lower())
    if found is None:
        raise InputError(field, f"unknown {what} {value!r}; presets: {', '.join(sorted(presets))}")
    return found


def resolve_model(value, field: str = "model") -> Model:
    """A Model from a preset id, a project-shape dict, a Hugging Face config dict or a Model."""
    if isinstance(value, Model):
        return model_from_dict(model_to_json(value), field)
    if isinstance(value, str):
        return _lookup(value, model_presets(), field, "model")
    if isinstance(value, dict):
        if "attention" not in value and any(k in value for k in HF_MARKERS):
            return model_from_hf_config(value, field=field)
        return model_from_dict(value, field)
    raise InputError(field, "must be a preset id, a model object or a Hugging Face config.json")


def resolve_accelerator(value, field: str = "hardware") -> Accelerator:
    """An Accelerator from a preset id, a dict of its fields or an Accelerator."""
    if isinstance(value, Accelerator):
        return accelerator_from_dict(accelerator_to_json(value), field)
    if isinstance(value, str):
        return _lookup(value, accelerator_presets(), field, "accelerator")
    if isinstance(value, dict):
        return accelerator_from_dict(value, field)
    raise InputError(field, "must be a preset id or an accelerator object")


def model_to_json(model: Model) -> dict:
    """The project's JSON shape; resolve_model() reads it back to an equal Model."""
    out = asdict(model)
    out["layer_kinds"] = list(model.layer_kinds)
    return out


def accelerator_to_json(acc: Accelerator) -> dict:
    out = asdict(acc)
    out["dense_flops_per_s"] = dict(acc.dense_flops_per_s)
    return out


def as_input(value: Model | Accelerator):
    """What a form's model or accelerator select takes for this one: its preset id, or its definition
    (a reader's own), so that one calculator's result can set another's input (a chained pair)."""
    if isinstance(value, Model):
        return value.id if model_presets().get(value.id) == value else model_to_json(value)
    return value.id if accelerator_presets().get(value.id) == value else accelerator_to_json(value)

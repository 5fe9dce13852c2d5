"""The presets listed: short rows for a CLI or a table, with what each preset is and where it comes from.

Above the catalog (which reads and checks the data) and the parameter counts (which the model rows show).
"""

from __future__ import annotations

from .catalog import accelerator_presets, formats, model_presets
from .params import active_params, total_params


def listing() -> dict[str, list[dict]]:
    """Every model (hidden ones flagged), accelerator and format, as JSON-ready rows."""
    offered = model_presets(include_hidden=False)
    models = [
        {
            "id": m.id,
            "name": m.name,
            "total_params": total_params(m),
            "active_params": active_params(m),
            "source": m.source,
            "hidden": m.id not in offered,
        }
        for m in model_presets().values()
    ]
    accs = [
        {
            "id": a.id,
            "name": a.name,
            "memory_bytes": a.memory_bytes,
            "memory_bandwidth_bytes_per_s": a.memory_bandwidth_bytes_per_s,
            "dense_flops_per_s": dict(a.dense_flops_per_s),
            "source": a.source,
        }
        for a in accelerator_presets().values()
    ]
    fmts = [
        {"id": f.id, "name": f.name, "effective_bits": f.effective_bits, "aliases": list(f.aliases), "source": f.source}
        for f in formats().values()
    ]
    return {"models": models, "accelerators": accs, "formats": fmts}

"""MkDocs hook: the glossary and numbers-to-know page, and abbreviation tooltips everywhere.

When it runs:
- on_page_markdown, every page: appends one `*[ABBR]: definition` line per abbreviation in
  hooks/terms.toml, from the terms and from its tooltip-only [abbreviations] table (the Markdown
  `abbr` extension turns them into hover tooltips).
- on_page_markdown, docs/glossary.md: replaces `<!-- glossary:NAME -->` markers with tables:
  terms (from terms.toml) and accelerators, models, number formats (from the numeric core,
  `calculators`), serving engines and prices (calculators/data/engines.toml, prices.toml).

Every number in the tables comes from the core: preset fields, `calculators.params`,
and `calculators.run(...)` for derived figures (KV bytes per token, ridge points). The
tables are plain Markdown inside `<div class="data-table" markdown>` wrappers, so they read
fine without JavaScript; docs/assets/tables.js adds sorting and a filter.
"""
from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TERMS = HERE / "terms.toml"
CORE_DATA = ROOT / "calculators" / "data"
GLOSSARY = "glossary.md"

# The numeric core is imported from this checkout. Put it first on the path now, at hook
# load time, before anything imports `calculators` through an editable install's finder
# (which can resolve it as a namespace package without its data files).
if str(ROOT) not in sys.path[:1]:
    sys.path.insert(0, str(ROOT))

FEATURES = (
    ("paged_kv", "Paged KV"), ("prefix_caching", "Prefix caching"), ("chunked_prefill", "Chunked prefill"),
    ("speculative_decoding", "Speculative decoding"), ("disaggregation", "P/D disaggregation"),
    ("expert_parallelism", "Expert parallelism"), ("structured_output", "Structured output"),
    ("multi_lora", "Multi-LoRA"),
)
FEATURE_VALUES = ("yes", "via engine", "not verified")
FLOPS_KEYS = ("bf16", "fp16", "fp8", "int8", "fp4")


# ---- terms ---------------------------------------------------------------------------------

def slugify(text: str) -> str:
    """The id Markdown's toc extension gives a heading (markdown.extensions.toc.slugify)."""
    from markdown.extensions.toc import slugify as toc_slugify
    return toc_slugify(text, "-")


@dataclass(frozen=True)
class Term:
    term: str
    definition: str
    part: int
    anchor: str
    abbr: str = ""
    id: str = ""
    expansion: str = ""     # what the abbreviation stands for, when the term's name is not it


@dataclass(frozen=True)
class Terms:
    terms: tuple[Term, ...]
    headings: dict          # part number -> {id: heading text}; inline anchors map to their id
    slugs: dict             # part number -> slug
    ignore: frozenset[str]
    expansions: tuple = ()  # (abbreviation, meaning) pairs: tooltips without a glossary entry


def parse_terms(data: dict) -> Terms:
    headings, slugs = {}, {}
    for p in data.get("part", ()):
        slugs[p["number"]] = p["slug"]
        headings[p["number"]] = {h["id"]: h["text"] for h in p["headings"]}
        # Inline anchors: ids pinned on a defining phrase, `**term**{#id}` (attr_list).
        headings[p["number"]].update({a: a for a in p.get("anchors", ())})
        for h in p["headings"]:
            if "{#" not in h["text"] and slugify(h["text"]) != h["id"]:
                raise ValueError(f"terms.toml: part {p['number']} heading {h['text']!r} slugifies to "
                                 f"{slugify(h['text'])!r}, not {h['id']!r}")
    terms = []
    for t in data["term"]:
        term = Term(t["term"], t["definition"], t["part"], t["anchor"], t.get("abbr", ""),
                    t.get("id") or slugify(t["term"]), t.get("expansion", ""))
        if term.anchor not in headings.get(term.part, {}):
            raise ValueError(f"terms.toml: {term.term!r} names anchor {term.anchor!r}, "
                             f"not a heading of part {term.part}")
        terms.append(term)
    ids = [t.id for t in terms]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise ValueError(f"terms.toml: duplicate term ids {sorted(dupes)}")
    expansions = tuple(data.get("abbreviations", {}).items())
    clash = {a for a, _ in expansions} & {t.abbr for t in terms if t.abbr}
    if clash:
        raise ValueError(f"terms.toml: {sorted(clash)} both a term's abbr and in [abbreviations]")
    return Terms(tuple(terms), headings, slugs, frozenset(data.get("ignore", {}).get("words", ())), expansions)


@lru_cache(maxsize=None)
def load_terms(path: Path = TERMS) -> Terms:
    return parse_terms(tomllib.loads(Path(path).read_text(encoding="utf-8")))


def abbreviations(terms: Terms) -> str:
    """`*[ABBR]: expansion` lines for the abbr extension, one per abbreviation.

    A tooltip spells the abbreviation out; the definition lives once, in the glossary.
    (Repeating definitions on every use cost Part 1 some 30 KB of page weight.)
    """
    lines = []
    for t in terms.terms:
        if t.abbr:
            text = (t.expansion or t.term).replace("[", "(").replace("]", ")")
            lines.append(f"*[{t.abbr}]: {text}")
    for abbr, meaning in terms.expansions:
        lines.append(f"*[{abbr}]: " + meaning.replace("[", "(").replace("]", ")"))
    return "\n".join(lines)


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def part_src(terms: Terms, number: int) -> str:
    return f"parts/{terms.slugs[number]}.md"


def render_terms(terms: Terms, written: frozenset[int]) -> str:
    rows = ["| Term | Meaning | Introduced in |", "|---|---|---|"]
    for t in sorted(terms.terms, key=lambda t: t.term.lower()):
        name = f'<dfn id="{t.id}">{_cell(t.term)}</dfn>' + (f" ({_cell(t.abbr)})" if t.abbr else "")
        if t.part in written:
            where = f"[Part {t.part}]({part_src(terms, t.part)}#{t.anchor})"
        else:
            where = f"Part {t.part} (not yet written)"
        rows.append(f"| {name} | {_cell(t.definition)} | {where} |")
    return _wrap("Terms", "\n".join(rows))


def render_abbreviations(terms: Terms) -> str:
    """Every abbreviation with a tooltip: a term's links to its row above, the rest are spelt out."""
    rows = ["| Abbreviation | Meaning |", "|---|---|"]
    entries = [(t.abbr, f"[{_cell(t.term)}](#{t.id})") for t in terms.terms if t.abbr]
    entries += [(a, _cell(m)) for a, m in terms.expansions]
    for abbr, meaning in sorted(entries, key=lambda e: e[0].lower()):
        rows.append(f"| {_cell(abbr)} | {meaning} |")
    return _wrap("Abbreviations", "\n".join(rows))


def _wrap(caption: str, table: str, note: str = "") -> str:
    note = f"\n{note}\n" if note else ""
    return (f'\n<div class="data-table" data-table data-caption="{caption}" markdown>\n\n'
            f"{table}\n\n</div>\n{note}")


# ---- numbers from the core -----------------------------------------------------------------

def _core():
    import calculators
    from calculators import catalog, params
    return calculators, catalog, params


def num(x, digits: int = 4) -> str:
    """A figure as people read it: 3.35, 989.4, 70,272; '—' when absent."""
    if x is None:
        return "—"
    x = float(x)
    if x == 0:
        return "0"
    if abs(x) >= 10 ** digits:
        return f"{round(x):,}"
    text = f"{x:.{digits}g}"
    if "e" in text:
        return f"{round(x):,}"
    if "." not in text and abs(x) >= 1000:
        return f"{int(text):,}"
    return text


def _source(text: str, as_of: str = "") -> str:
    return _cell(text + (f" (as of {as_of})" if as_of else ""))


def ridge_point(calculators, acc_id: str, dtype: str) -> float | None:
    """Ridge point at one precision, from the core's roofline calculator."""
    from calculators.errors import InputError
    try:
        return calculators.run("roofline", {"hardware": acc_id, "compute_dtype": dtype})["ridge_point_flops_per_byte"]
    except InputError:
        return None


def _linked_source(text: str, as_of: str, url: str) -> str:
    """A Source cell: the source text, its date, and a link to the page when there is one."""
    return _source(text, as_of) + (f" ([link]({url}))" if url else "")


def memory_basis(acc) -> str:
    """'reported' (the driver's total) or 'vendor' (the vendor's figure in its own unit)."""
    return acc.memory_note.split(":", 1)[0].strip() or "—"


def render_accelerators() -> str:
    calculators, presets, _ = _core()
    accs = list(presets.accelerator_presets().values())
    keys = [k for k in FLOPS_KEYS if any(k in a.dense_flops_per_s for a in accs)]
    head = (["Accelerator", "Memory (GB)", "Memory (GiB)", "Memory basis", "Bandwidth (TB/s)"]
            + [f"{k.upper()} dense (TFLOP/s)" for k in keys]
            + ["Ridge, BF16 (FLOP/B)", "Ridge, FP8 (FLOP/B)", "Scale-up per direction (GB/s)",
               "Scale-up domain (chips)", "Power (W)", "Source"])
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for a in accs:
        flops = [num(a.dense_flops_per_s[k] / 1e12) if k in a.dense_flops_per_s else "—" for k in keys]
        bf16 = ridge_point(calculators, a.id, "bf16") if "bf16" in a.dense_flops_per_s else None
        fp8 = ridge_point(calculators, a.id, "fp8") if "fp8" in a.dense_flops_per_s else None
        scale_up = a.scale_up_bandwidth_bytes_per_s / 1e9 if a.scale_up_bandwidth_bytes_per_s else None
        cells = ([_cell(a.name), num(a.memory_bytes / 1e9), num(a.memory_bytes / 2**30), memory_basis(a),
                  num(a.memory_bandwidth_bytes_per_s / 1e12)] + flops
                 + [num(bf16, 3), num(fp8, 3), num(scale_up), num(a.scale_up_domain), num(a.power_watts),
                    _linked_source(a.source, a.as_of, a.url)])
        rows.append("| " + " | ".join(cells) + " |")
    note = ("One unit policy for memory. **reported**: the total the driver reports (nvidia-smi, in MiB), "
            "where a public reading exists; that is why an “80GB” H100 shows 85.52 GB (81,559 MiB) and a "
            "B200 more than the 180 GB NVIDIA states. **vendor**: otherwise the vendor's own figure in the "
            "vendor's own unit, converted exactly: AMD states GiB (ROCm gpu-specs “VRAM (GiB)”), Google's "
            "TPU7x comparison table states GiB for v5p, v6e and TPU7x. GB = 10^9 B, GiB = 2^30 B. "
            "Bandwidth is the vendor's headline peak for every row (an upper bound; TB/s = 10^12 B/s). "
            "FLOP/s are dense (vendor 2:4-sparse headlines halved). Ridge point = dense FLOP/s ÷ memory "
            "bandwidth, from the core's `roofline` calculator. Each row's memory note and caveats are in "
            "`calculators/data/accelerators.toml`.")
    return _wrap("Accelerators", "\n".join(rows), note)


def _experts(model) -> str:
    moe = model.moe
    if moe is None:
        return "dense"
    shared = f" + {moe.num_shared_experts} shared" if moe.num_shared_experts else ""
    return f"{moe.experts_per_token} of {moe.num_experts}{shared}"


def _attention(model) -> str:
    kind = model.attention.kind.upper()
    extra = []
    kinds = model.layer_kinds
    if "sliding" in kinds:
        extra.append(f"{kinds.count('sliding')} of {len(kinds)} layers window {model.sliding_window_tokens:,}")
    if "chunked" in kinds:
        extra.append(f"{kinds.count('chunked')} of {len(kinds)} layers chunk {model.attention_chunk_tokens:,}")
    return kind + (f" ({'; '.join(extra)})" if extra else "")


def kv_per_token(calculators, model_id: str) -> tuple[float, float]:
    """(all layers, full-attention layers only) KV bytes per token in BF16, from the kv_cache calculator."""
    r = calculators.run("kv_cache", {"model": model_id, "kv_dtype": "bf16"})
    return r["kv_bytes_per_token_all_layers"], r["kv_bytes_per_token"]


def published_params(published: float | None) -> str:
    """The publisher's figure in billions, or '—' when the data file has none."""
    return num(published / 1e9) if published else "—"


def render_models() -> str:
    calculators, presets, params = _core()
    head = ["Model", "Layers", "Q heads", "KV heads", "Head dim", "Attention", "Experts per token",
            "Total params, core (B)", "Total params, publisher (B)",
            "Active params, core (B)", "Active params, publisher (B)",
            "KV per token below every window, BF16 (B)", "KV per token beyond every window, BF16 (B)",
            "Source"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in presets.model_presets().values():
        a = m.attention
        kv_heads = "latent" if a.kind == "mla" else num(a.num_kv_heads)
        kv_all, kv_full = kv_per_token(calculators, m.id)
        cells = [_cell(m.name), num(m.num_layers), num(a.num_heads), kv_heads, num(a.head_dim), _cell(_attention(m)),
                 _cell(_experts(m)),
                 num(params.total_params(m) / 1e9), published_params(m.official_total_params),
                 num(params.active_params(m) / 1e9), published_params(m.official_active_params),
                 num(kv_all, 6), num(kv_full, 6), _source(m.source, m.as_of)]
        rows.append("| " + " | ".join(cells) + " |")
    note = ("Core parameter counts are computed from each architecture (`calculators.params`) and count "
            "every matrix a token multiplies, the embedding and the unembedding (output) matrix included. "
            "Publishers' figures come from each model card or report (the source is in "
            "`calculators/data/models.toml`) and often leave one of those matrices out of the active count: "
            "gpt-oss's card leaves out one vocabulary matrix, DeepSeek-V3's 36.7B leaves out the input "
            "table; others round to two digits, and multimodal models' published totals (Llama 4, Gemma 3) "
            "include a vision encoder this text-decoder description leaves out. "
            "KV per token: “below every window” counts every layer (the cost while a sequence is shorter "
            "than its sliding windows or chunks, the figure Part 4 teaches); “beyond every window” counts "
            "only the full-attention layers, the marginal cost of each token once the windowed layers have "
            "stopped growing. The two are equal for models without windows. MLA caches a latent, not "
            "per-head keys and values.")
    return _wrap("Models", "\n".join(rows), note)


def render_formats() -> str:
    _, presets, _ = _core()
    head = ["Format", "Bits per element", "Block size", "Scale bits", "Effective bits", "Source"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for f in presets.formats().values():
        cells = [_cell(f.name), num(f.bits_per_element), num(f.block_size) if f.block_size else "—",
                 num(f.scale_bits) if f.block_size else "—", num(f.effective_bits), _source(f.source, f.as_of)]
        rows.append("| " + " | ".join(cells) + " |")
    note = "Effective bits = bits per element + scale bits ÷ block size, from the core's format table."
    return _wrap("Number formats", "\n".join(rows), note)


@lru_cache(maxsize=None)
def load_data(name: str) -> dict:
    return tomllib.loads((CORE_DATA / name).read_text(encoding="utf-8"))


def render_engines(data: dict | None = None) -> str:
    data = data if data is not None else load_data("engines.toml")
    head = ["Engine"] + [label for _, label in FEATURES] + ["Version read", "Source"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in data["engine"]:
        cells = [_cell(e["name"])]
        for key, _ in FEATURES:
            value = e["features"][key]
            if value not in FEATURE_VALUES:
                raise ValueError(f"engines.toml: {e['id']}.{key} = {value!r}; allowed {FEATURE_VALUES}")
            note = e.get("notes", {}).get(key)
            cells.append(_cell(value + (f" ({note})" if note else "")))
        status = f" **Status:** {e['status']}" if e.get("status") else ""
        cells += [_cell(f"{e['version']}, read {e['as_of']}.{status}"), f"[{_cell(e['name'])} docs]({e['url']})"]
        rows.append("| " + " | ".join(cells) + " |")
    note = ("“not verified” means we did not find the feature in the sources we read: it is not a “no”. "
            "“via engine” marks an orchestration layer that relies on the engine it runs.")
    return _wrap("Serving engines", "\n".join(rows), note)


def render_prices(data: dict | None = None) -> str:
    data = data if data is not None else load_data("prices.toml")
    head = ["Item", "Price (USD)", "Unit", "As of", "Source"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in data["price"]:
        source = _linked_source(p["source"], "", p.get("url", ""))
        rows.append(f"| {_cell(p['item'])} | {p['usd']:.2f} | {_cell(p['unit'])} | {_cell(p['as_of'])} | {source} |")
    note = ("Prices are indicative and change often; check the source before you quote one. The AWS rows are "
            "Capacity Blocks, reserved in advance, not on-demand rates. No current on-demand rate is listed: "
            "none could be dated to the day and sourced to a page a reader can open.")
    return _wrap("Prices", "\n".join(rows), note)


# ---- the page --------------------------------------------------------------------------------

def render_glossary(markdown: str, terms: Terms, written: frozenset[int]) -> str:
    renderers = {
        "terms": lambda: render_terms(terms, written),
        "abbreviations": lambda: render_abbreviations(terms),
        "accelerators": render_accelerators,
        "models": render_models,
        "formats": render_formats,
        "engines": render_engines,
        "prices": render_prices,
    }
    for name, render in renderers.items():
        marker = f"<!-- glossary:{name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    leftover = re.findall(r"<!-- glossary:([\w-]+) -->", markdown)
    if leftover:
        raise ValueError(f"glossary.md: unknown markers {leftover}")
    return markdown


def written_parts(terms: Terms, docs_dir: Path) -> frozenset[int]:
    return frozenset(n for n in terms.slugs if (Path(docs_dir) / part_src(terms, n)).is_file())


def on_page_markdown(markdown, *, page, config, files):
    terms = load_terms()
    if page.file.src_uri == GLOSSARY:
        markdown = render_glossary(markdown, terms, written_parts(terms, Path(config.docs_dir)))
    return markdown + "\n\n" + abbreviations(terms) + "\n"

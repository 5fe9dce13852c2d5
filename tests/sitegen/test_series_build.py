"""The series hub: data, generated HTML, navigation, part headers (no browser; tests/site/test_series.py has those)."""

from __future__ import annotations

import re

import pytest

from sitegen import hub as H
from sitegen import series as S

SEED_STAGES = {  # lane -> stage names, as the seed draws them
    "a": [
        "Client / API gateway",
        "KV-aware load balancer",
        "Queue + scheduler",
        "Prefill worker",
        "KV transfer over RDMA",
        "Decode worker",
        "Next step / preemption",
    ],
    "b": [
        "Paged KV cache",
        "Prefix cache / radix tree",
        "Attention & sampling",
        "Quantized weights",
        "Draft model",
        "TP · PP · EP shards",
    ],
    "c": [
        "GPU + HBM bandwidth",
        "MoE experts & all-to-all",
        "K8s autoscaling / cold start",
        "SLOs, goodput, $/M tokens",
    ],
    "w": ["Long context", "Structured output", "Agents & multimodal", "Reasoning"],
}
SEED_PARTS = {
    "gateway": (17, 19),
    "load-balancer": (8, 19),
    "scheduler": (6, 7),
    "prefill": (1, 6, 12),
    "decode": (1, 6, 12),
    "kv-transfer": (13,),
    "preemption-loop": (7,),
    "paged-kv": (4, 5),
    "prefix-cache": (8,),
    "attention": (9,),
    "quantized-weights": (10,),
    "draft-model": (11,),
    "shards": (12,),
    "gpu": (2,),
    "moe": (14,),
    "autoscaling": (19,),
    "slo": (3, 20),
    "long-context": (15,),
    "structured-output": (16,),
    "agents": (18,),
    "reasoning": (18, 20),
}


def fake_href(src: str, anchor: str) -> str:
    return ("/" + src if src != S.HOME else "/") + (f"#{anchor}" if anchor else "")


@pytest.fixture(scope="module")
def series():
    return S.load_series()


def test_twenty_parts_with_titles_and_promises(series):
    assert series.total == 20 and [p.number for p in series.parts] == list(range(1, 21))
    assert all(p.title and p.promise.endswith(".") for p in series.parts)
    assert len({p.slug for p in series.parts}) == 20


def test_diagram_has_every_seed_stage_with_its_parts(series):
    for lane, names in SEED_STAGES.items():
        assert [s.name for s in series.lane_stages(lane)] == names
    assert {s.id: s.parts for s in series.stages} == SEED_PARTS


def test_bad_data_is_refused():
    data = {"part": [{"number": 2, "slug": "02-x", "title": "t", "promise": "p."}], "lane": [], "stage": []}
    with pytest.raises(ValueError, match="numbered"):
        S.parse_series(data)


def test_nothing_written_links_every_stage_to_its_hub_entry(series):
    html = H.render_diagram(series, frozenset(), fake_href)
    links = re.findall(r'<a class="hub-stage[^"]*" href="([^"]+)" data-stage="([^"]+)"', html)
    assert [sid for _, sid in links] == [s.id for s in series.stages]
    for href, sid in links:
        stage = next(s for s in series.stages if s.id == sid)
        assert href == f"/#part-{stage.parts[0]}"
    assert html.count("not yet written") >= len(series.stages)
    assert "<svg" in html and 'aria-hidden="true"' in html
    assert "The diagram as a list" in html


def test_every_stage_fact_has_a_public_source(series):
    # Review parts-4-5-glossary (b): 7 of 20 stages had no source, and several cited the project's
    # internal research notes, which readers cannot open.
    for s in series.stages:
        assert s.fact_source.strip(), s.id
        assert "numbers" + ".md" not in s.fact_source, s.id


def test_paged_kv_stage_lists_part_4_and_states_current_block_sizes(series):
    # Issue text: the KV cache had no entry point on the hub; vLLM forces 64/128 for MLA backends
    # (vllm/platforms/cuda.py check_and_update_config).
    stage = next(s for s in series.stages if s.id == "paged-kv")
    assert stage.parts == (4, 5) and "paged-kv" in series.part(4).stages
    assert "16" in stage.fact and "64" in stage.fact and "128" in stage.fact and "cuda.py" in stage.fact_source


def test_written_parts_are_linked_and_lose_their_mark(series):
    written = frozenset({1, 5})
    html = H.render_diagram(series, written, fake_href)
    assert 'href="/parts/01-decode-loop.md" data-stage="prefill"' in html
    assert 'href="/parts/05-paged-attention.md" data-stage="paged-kv"' in html
    parts = H.render_part_list(series, written, fake_href)
    assert '<a href="/parts/01-decode-loop.md">The decode loop and the memory wall</a>' in parts
    assert parts.count("not yet written") == 18
    routes = H.render_routes(series, written, fake_href)
    assert '<a href="/parts/01-decode-loop.md">Part 1 — The decode loop</a>' in routes
    assert routes.count("<tr>") == 1 + len(series.routes)


def test_nav_lists_written_parts_and_keeps_other_entries(series, tmp_path):
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "02-the-machine.md").write_text("# x")
    (tmp_path / "glossary.md").write_text("# g")
    (tmp_path / "workbench.md").write_text("# w")
    written = S.written_parts(series, tmp_path)
    assert written == {2}
    nav = S.build_nav(series, written, tmp_path, [{"Home": "index.md"}, {"Other": "other.md"}])
    assert nav == [
        {"Home": "index.md"},
        {"Parts": [{"2 · The machine": "parts/02-the-machine.md"}]},
        {"Glossary & numbers": "glossary.md"},
        {"Workbench": "workbench.md"},
        {"Other": "other.md"},
    ]


def test_part_header_and_pager(series):
    part = series.part(2)
    assert "Part 2 of 20" in H.part_header(series, part)
    footer = H.part_footer(series, part, frozenset({1, 2}), fake_href)
    assert 'rel="prev" href="/parts/01-decode-loop.md"' in footer
    assert "Part 3</span> TTFT, TPOT and goodput" in footer and "not yet written" in footer
    assert 'rel="next"' not in footer


def test_36_the_list_and_each_part_say_how_many_parts_are_written(series):
    """Reader walk #36: "Part 4 of 20" and "All twenty parts" promised twenty; say how many exist."""
    written = frozenset({1, 2, 4})
    assert "3 of the 20 parts are written so far" in H.render_part_list(series, written, fake_href)
    header = H.part_header(series, series.part(2), written)
    assert "Part 2 of 20" in header and "(3 of the 20 parts are written so far)" in header

"""attention_io: HBM traffic of standard versus tiled attention (FlashAttention, arXiv 2205.14135)."""

import math

import pytest

import calculators
from calculators.calcs.attention_io import Tiling
from calculators.catalog import accelerator_presets
from calculators.errors import InputError


def run(**kw):
    return calculators.run("attention_io", kw)


def _algorithm1_by_loops(n: int, d: int, m: int) -> int:
    """Algorithm 1 of arXiv 2205.14135 walked loop by loop, counting every element read or written in HBM.

    Checked against the paper's text (arXiv v2, §3.1): line 1 sets Bc = ⌈M/4d⌉, Br = min(⌈M/4d⌉, d); line 2
    initialises O, ℓ, m in HBM; line 6 loads K_j, V_j; line 8 loads Q_i, O_i, ℓ_i, m_i; lines 12-13 write
    O_i, ℓ_i, m_i back."""
    bc = math.ceil(m / (4 * d))
    br = min(bc, d)
    count = n * d + 2 * n  # step 2: initialise O, l, m in HBM
    for j0 in range(0, n, bc):  # outer loop over K_j, V_j
        cols = min(bc, n - j0)
        count += 2 * cols * d  # load K_j, V_j
        for i0 in range(0, n, br):  # inner loop over Q_i
            rows = min(br, n - i0)
            count += 2 * rows * d + 2 * rows  # load Q_i, O_i, l_i, m_i
            count += rows * d + 2 * rows  # write O_i, l_i, m_i
    return count


@pytest.mark.parametrize("n,d,m", [(16, 4, 64), (100, 8, 300), (1000, 64, 98304), (4097, 128, 116736)])
def test_closed_form_matches_algorithm1_loop_by_loop(n, d, m):
    assert Tiling(d, d, m).tiled(n) == _algorithm1_by_loops(n, d, m)


def test_hand_computed_small_case():
    # N = 16, d = 4, M = 64 elements: Bc = ⌈64/16⌉ = 4, Br = min(4, 4) = 4, Tc = 4.
    t = Tiling(4, 4, 64)
    assert (t.bc, t.br, t.passes(16)) == (4, 4, 4)
    # standard: 2·16·4 + 2·16·4 + 4·256 = 128 + 128 + 1024 = 1280
    assert t.naive(16) == 1280
    # tiled: init 16·4 + 32 = 96; K, V 128; each pass 16·4 + 2·16·4 + 64 = 256, four passes 1024 → 1248
    assert t.tiled(16) == 1248
    # FlashAttention-2 order: Q 64 + Tr·(K+V) = 4·128 + O 64 + L 16 = 656; floor 4·64 = 256
    assert t.tiled_fa2(16) == 656
    assert t.floor(16) == 256


def test_theorem2_scalings():
    """Θ(Nd + N²) for standard, Θ(N²d²/M) for tiled (arXiv 2205.14135 Theorem 2)."""
    d, m = 64, 1 << 16
    t = Tiling(d, d, m)
    n = 1 << 20
    assert t.naive(2 * n) / t.naive(n) == pytest.approx(4, rel=1e-3)  # quadratic in N
    assert t.tiled(2 * n) / t.tiled(n) == pytest.approx(4, rel=1e-3)
    # the quadratic term of the tiled count is Tc·(3Nd + 4N) ≈ (3d + 4)·N²/Bc = 4(3d + 4)·N²d/M:
    # halve M and it doubles
    quad = [Tiling(d, d, mm).tiled(n) - Tiling(d, d, mm).floor(n) for mm in (m, m // 2)]
    assert quad[1] / quad[0] == pytest.approx(2, rel=1e-2)
    assert quad[0] / (n * n * d * d / m) == pytest.approx(4 * (3 * d + 4) / d, rel=1e-3)
    # and grows as d² at fixed M (the ℓ, m term as d, hence just under 4× from d = 64 to 128)
    quad_d = [Tiling(dd, dd, m).tiled(n) - Tiling(dd, dd, m).floor(n) for dd in (64, 128)]
    assert quad_d[1] / quad_d[0] == pytest.approx(388 * 128 / (196 * 64), rel=1e-3)


def test_tiles_fit_in_sram():
    for acc in accelerator_presets().values():
        if not acc.shared_memory_per_sm_bytes:
            continue
        r = calculators.run("attention_io", {"hardware": acc.id})
        # four tiles of width d in M: 4·Bc·d may pass M by less than 4d (Bc is rounded up)
        assert r["tile_bytes"] <= r["sram_bytes"] + 4 * 128 * 2


def test_worked_example_llama_8b_h100():
    r = run()  # Llama 3.1 8B, H100 SXM, BF16, N = 8192
    assert r["sram_bytes"] == 228 * 1024
    assert (r["tile_cols_bc"], r["tile_rows_br"], r["kv_passes"]) == (228, 128, 36)
    # one layer's score matrix: 32 heads × 8192² × 2 B = 4 GiB
    assert r["score_matrix_bytes"] == 32 * 8192**2 * 2
    assert r["naive_bytes"] > r["tiled_bytes"] > r["floor_bytes"]
    # attention FLOPs 4N²d per head: 4 × 8192² × 128 × 32 heads × 32 layers
    assert r["attention_flops"] == 4 * 8192**2 * 128 * 32 * 32


def test_fa3_utilisation_needs_the_cache():
    """FlashAttention-3 reaches 740 TFLOP/s in FP16 on H100, 75% of peak (arXiv 2407.08608, abstract).

    The preset's dense BF16 peak must agree with that 75%, and a kernel at that rate is faster than
    Algorithm 1's traffic at HBM bandwidth allows for d = 128 at 8K tokens: its re-reads of K and V must
    come from the cache, so its real traffic sits near the floor (which does allow it)."""
    peak = accelerator_presets()["h100-sxm"].dense_flops_per_s["bf16"]
    assert 740e12 / peak == pytest.approx(0.75, abs=0.005)
    r = run()
    fa3_time = r["attention_flops"] / 740e12
    assert r["tiled_time_s"] > fa3_time > r["floor_time_s"]


def test_larger_sram_fewer_passes_and_less_traffic():
    small, large = run(sram_kib=100), run(sram_kib=228)
    assert small["kv_passes"] > large["kv_passes"]
    assert small["tiled_bytes"] > large["tiled_bytes"]
    assert small["naive_bytes"] == large["naive_bytes"]


def test_traffic_scales_with_batch_heads_and_format():
    one, four = run(batch_size=1), run(batch_size=4)
    assert four["naive_bytes"] == pytest.approx(4 * one["naive_bytes"])
    fp8 = run(dtype="fp8", sram_kib=228)
    # FP8 halves the bytes per element and doubles M in elements: Bc doubles
    assert fp8["tile_cols_bc"] == 456
    assert fp8["naive_bytes"] == pytest.approx(one["naive_bytes"] / 2)


def test_series_marks_the_readers_length():
    r = run(sequence_tokens=3000)
    s = r["series"]["traffic_vs_length"]
    xs = s["x"]["values"]
    assert 3000 in xs
    marks = [y for y in s["y"] if y["name"].endswith("at your N")]
    assert len(marks) == 2
    for y in marks:
        assert [x for x, v in zip(xs, y["values"]) if v is not None] == [3000]


def test_chip_without_sram_figure_asks_for_one():
    with pytest.raises(InputError, match="sram_kib"):
        run(hardware="mi300x")
    assert run(hardware="mi300x", sram_kib=64)["sram_bytes"] == 64 * 1024


def test_sram_too_small_for_four_tiles():
    with pytest.raises(InputError, match="sram_kib"):
        run(sram_kib=0.5)


@pytest.mark.parametrize("bad", [{"sequence_tokens": 8}, {"sequence_tokens": 2_000_000}, {"batch_size": 0}])
def test_out_of_range(bad):
    with pytest.raises(InputError):
        run(**bad)

"""The Markdown syntax for numbers and calculators: parsing and substitution (no browser)."""
import pytest

from calculators import display
from sitegen import pages
from sitegen.markup import MarkupError, parse_inline, transform


def test_inline_parses_calls_paths_and_formats():
    ref = parse_inline(' kv_cache(model="llama-3.1-70b", context_tokens=4096).kv_bytes_per_token | GiB:2 ')
    assert (ref.calculator, ref.inputs, ref.path, ref.format) == (
        "kv_cache", {"model": "llama-3.1-70b", "context_tokens": 4096}, ("kv_bytes_per_token",), "GiB:2")


@pytest.mark.parametrize("text", ["kv_cache()", "open('x').read", "kv_cache(x=__import__('os')).y", "1 +"])
def test_inline_rejects_anything_but_literal_calls(text):
    with pytest.raises(MarkupError):
        parse_inline(text)


def test_published_figure_through_the_inline_syntax():
    # Llama 3.1 70B: 2 x 80 layers x 8 KV heads x 128 x 2 B = 327,680 B per token (Llama 3.1 70B config.json).
    md = '{{ kv_cache(model="llama-3.1-70b").kv_bytes_per_token | int }} B'
    assert transform(md, pages.inline_text, None) == "327,680 B"


def test_code_is_left_alone():
    md = "`{{ a().b }}`\n```\n{{ a().b }}\n```\n"
    assert transform(md, lambda r: "X", None) == md


def test_unknown_output_names_the_alternatives():
    with pytest.raises(MarkupError, match="kv_bytes_per_token"):
        transform('{{ kv_cache().nope }}', pages.inline_text, None)


@pytest.mark.parametrize("value, spec, text", [
    (2 * 2 ** 30, "GiB:2", "2.00 GiB"), (327680, "int", "327,680"), (0.2999, "usd", "$0.30"),
    (0.4512, "pct", "45.1%"), (3.35e12, "tbps:2", "3.35 TB/s"), (989.4e12, "tflops:1", "989.4 TFLOP/s"),
    (0.0123, "ms:1", "12.3 ms"), (295.24, None, "295.2"),
])
def test_formats(value, spec, text):
    assert display.inline(value, spec) == text


def test_unknown_format_is_an_error():
    with pytest.raises(ValueError, match="unknown format"):
        display.inline(1.0, "furlongs")

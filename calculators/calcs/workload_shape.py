"""Workload shape: what one task (a chat, an agent run, a voice session) asks of the server.

A shape is turns × (new input, visible output, thinking), a shared context every turn re-reads, images
and audio per turn turned into tokens by each model's published rule, the wait between turns (a tool
call, a user), and how much of the re-read context the prefix cache serves. From it:

  turn t reads   prompt_t  = context_t + new_t          context_0 = shared context (system prompt, tools)
                 cached_t  = ⌊reuse × cacheable_t⌋      (the prefix cache's hits; reuse 1 = every re-read hits;
                                                        cacheable_t = context_t, or the previous prompt when
                                                        the template drops the reasoning)
                 prefill_t = prompt_t − cached_t        decode_t = output + thinking
  then           context_{t+1} = prompt_t + output (+ thinking, when the chat template keeps it)

The per-task totals (tokens read, cached, prefilled, decoded) are what the cost and latency calculators
price; `requests` turns a shape into the engine simulator's Request list through
engine.workload.conversations, so the simulator's prefix cache decides the hits there.

Image tokens (placeholder tokens in the language model's sequence; the start/end markers a template adds
are left out):
  Qwen2.5-VL  14-px patches, 2×2 patches merged into one token: one token per 28 × 28 px after the
              image is resized to multiples of 28 inside [min_pixels, max_pixels] (vLLM v0.33.0
              model_executor/models/qwen2_vl.py: smart_resize(factor = patch_size × merge_size), tokens =
              patches ÷ merge_size²; the processor's defaults min_pixels 3,136 and max_pixels 12,845,056).
  Gemma 3     256 tokens per image: every image is resized to 896 × 896 (pan-and-scan off; Gemma 3
              technical report, arXiv 2503.19786 §2.1; vLLM gemma3_mm.py reads mm_tokens_per_image).
  GPT-4o      high detail: fit in 2048 × 2048, shortest side scaled to 768 px, then 170 tokens per
              512-px tile + 85; low detail 85 (OpenAI API docs, "Images and vision", calculating costs).
Audio tokens per second of audio:
  Whisper encoder  100 mel frames/s, a stride-2 convolution: 50/s, 1,500 per 30-s window (arXiv 2212.04356 §2.2)
  Qwen2-Audio      the Whisper encoder then a stride-2 pooling: 25/s (vLLM qwen2_audio.py
                   _get_feat_extract_output_lengths: 3,000 frames → 1,500 → 750)
  Moshi (Mimi)     12.5 frames/s (arXiv 2410.00037 §3.3), each frame a stack of codebook tokens
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import NamedTuple

from functools import cache

from .. import catalog
from ..engine.config import Request
from ..engine.workload import conversations
from ..errors import InputError
from ..schema import boolean, choice, integer, number, validate

QWEN_FACTOR = 28  # px per token side: 14-px patch × 2×2 merge
QWEN_MIN_PIXELS, QWEN_MAX_PIXELS = 3136, 12_845_056  # Qwen2.5-VL processor defaults (56², 14² × 4 × 16,384)
GEMMA3_TOKENS = 256  # per 896 × 896 image
GPT4O_BASE, GPT4O_TILE, GPT4O_TILE_PX, GPT4O_FIT, GPT4O_SHORT = 85, 170, 512, 2048, 768

IMAGE_RULES = {
    "qwen2.5-vl": "Qwen2.5-VL (one token per 28 × 28 px)",
    "gemma-3": "Gemma 3 (256 per image)",
    "gpt-4o": "GPT-4o, high detail (85 + 170 per 512-px tile)",
    "gpt-4o-low": "GPT-4o, low detail (85)",
}
AUDIO_RULES = {
    "whisper": ("Whisper encoder (50 per second)", 50.0),
    "qwen2-audio": ("Qwen2-Audio (25 per second)", 25.0),
    "moshi": ("Moshi / Mimi (12.5 frames per second)", 12.5),
}


def qwen_vl_resize(
    height: int,
    width: int,
    min_pixels: int = QWEN_MIN_PIXELS,
    max_pixels: int = QWEN_MAX_PIXELS,
    factor: int = QWEN_FACTOR,
) -> tuple[int, int]:
    """The size Qwen2-VL's processor resizes an image to: each side rounded to a multiple of `factor`,
    then scaled (aspect kept) into [min_pixels, max_pixels] (transformers' smart_resize, which vLLM calls)."""
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar, w_bar = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return max(h_bar, factor), max(w_bar, factor)


def gpt4o_tiles(width: int, height: int) -> int:
    """512-px tiles of a high-detail image: fit in 2048 × 2048, shortest side down to 768 px."""
    w, h = float(width), float(height)
    if max(w, h) > GPT4O_FIT:
        s = GPT4O_FIT / max(w, h)
        w, h = w * s, h * s
    if min(w, h) > GPT4O_SHORT:
        s = GPT4O_SHORT / min(w, h)
        w, h = w * s, h * s
    return math.ceil(w / GPT4O_TILE_PX - 1e-9) * math.ceil(h / GPT4O_TILE_PX - 1e-9)


def image_tokens(rule: str, width: int, height: int) -> int:
    """Tokens one image of width × height px adds to the sequence under a model's rule."""
    if rule == "qwen2.5-vl":
        h, w = qwen_vl_resize(height, width)
        return (h // QWEN_FACTOR) * (w // QWEN_FACTOR)
    if rule == "gemma-3":
        return GEMMA3_TOKENS
    if rule == "gpt-4o":
        return GPT4O_BASE + GPT4O_TILE * gpt4o_tiles(width, height)
    if rule == "gpt-4o-low":
        return GPT4O_BASE
    raise KeyError(rule)


def audio_tokens(rule: str, seconds: float) -> int:
    """Tokens `seconds` of audio adds. Qwen2-Audio follows its two stride-2 reductions of the 100-per-second
    mel frames exactly; the others are their rate × seconds, rounded up."""
    if seconds <= 0:
        return 0
    if rule == "qwen2-audio":
        frames = math.ceil(seconds * 100)
        return ((frames - 1) // 2 + 1 - 2) // 2 + 1
    return math.ceil(seconds * AUDIO_RULES[rule][1] - 1e-9)


@dataclass(frozen=True)
class Shape:
    """One task. Token counts are per turn; images and audio are already in tokens (image_tokens,
    audio_tokens)."""

    turns: int
    shared_tokens: int  # context every turn re-reads from the start: system prompt, tool schemas, a repository
    input_tokens: int  # new text per turn: the user's message or the tool's result
    output_tokens: int  # visible output per turn (the answer, the tool call)
    thinking_tokens: int = 0  # reasoning tokens per turn, generated before the visible output
    keep_thinking: bool = False  # the chat template carries earlier turns' reasoning into the next prompt
    images_per_turn: int = 0
    tokens_per_image: int = 0
    audio_tokens_per_turn: int = 0
    wait_s: float = 0.0  # between a turn's end and the next turn's arrival (tool call, user)
    reuse: float = 1.0  # fraction of each turn's re-read context the prefix cache serves

    @property
    def new_tokens(self) -> int:
        return self.input_tokens + self.images_per_turn * self.tokens_per_image + self.audio_tokens_per_turn

    @property
    def decoded_tokens(self) -> int:
        return self.output_tokens + self.thinking_tokens

    @property
    def carried_tokens(self) -> int:
        """What one turn adds to the history the next turn re-reads."""
        return self.new_tokens + self.output_tokens + (self.thinking_tokens if self.keep_thinking else 0)


class Turn(NamedTuple):
    context: int  # tokens before this turn's new input (shared context + history)
    new: int
    prompt: int
    cached: int
    prefilled: int
    decoded: int


class Totals(NamedTuple):
    prompt: int  # input tokens read over the task (what an API bills as input, cached or not)
    cached: int
    prefilled: int
    decoded: int
    thinking: int
    final_context: int
    wait_s: float


def turns(shape: Shape) -> list[Turn]:
    """Each turn's tokens. The cacheable part of a turn's context is all of it, unless the template drops
    the reasoning: then the previous visible output sits at new positions and only the previous prompt is
    cached (the engine's block hashes break where the reasoning was)."""
    out, context, cacheable = [], shape.shared_tokens, shape.shared_tokens
    breaks = shape.thinking_tokens > 0 and not shape.keep_thinking
    for _ in range(shape.turns):
        prompt = context + shape.new_tokens
        cached = math.floor(shape.reuse * cacheable)
        out.append(Turn(context, shape.new_tokens, prompt, cached, prompt - cached, shape.decoded_tokens))
        context += shape.carried_tokens
        cacheable = prompt if breaks else context
    return out


def totals(shape: Shape) -> Totals:
    ts = turns(shape)
    last = ts[-1] if ts else Turn(shape.shared_tokens, 0, 0, 0, 0, 0)
    return Totals(
        sum(t.prompt for t in ts),
        sum(t.cached for t in ts),
        sum(t.prefilled for t in ts),
        sum(t.decoded for t in ts),
        shape.thinking_tokens * shape.turns,
        last.prompt + last.decoded,
        shape.wait_s * max(0, shape.turns - 1),
    )


def requests(shape: Shape, sessions: int, rate_per_s: float, gap: float = 1.0) -> list[Request]:
    """The engine's requests for `sessions` tasks of this shape starting `gap` ÷ rate apart: each turn
    waits wait_s after the previous one ends (Request.after/think_s), re-reads the shared context (one
    stream for every session, so it is shared across tasks) and its own history; the simulator's prefix
    cache decides the hits (shape.reuse is not used). Reasoning the template drops breaks the prefix after
    the previous prompt, as it does in an engine."""
    draws = [(gap, shape.new_tokens, shape.decoded_tokens)] * sessions
    dropped = 0 if shape.keep_thinking else shape.thinking_tokens
    return conversations(draws, rate_per_s, shape.turns, shape.wait_s, shape.shared_tokens, dropped_tokens=dropped)


class Sessions:
    """Tasks of one shape as the goodput calculator's draws and requests. Draw c·T + t is session c's
    turn t: (gap, prompt_t, decoded), the gap (at a rate of 1 session per unit) from `workload`'s arrival
    stream on a session's first turn and 0 on the others. A rate is in turns (requests) per second, so
    sessions start at rate ÷ T; the requests are engine.workload.conversations' (each turn waits wait_s
    after the previous one ends and re-reads the history); shape.reuse is not used (the server decides).
    Each wait is drawn, exponential with the shape's mean (seeded, by turn): with fixed lengths a fixed wait
    would bring every session's turns back at the same instant once one big prefill has lined them up."""

    def __init__(self, shape: Shape, workload, seed: int = 0):
        self.shape, self.workload, self.turns = shape, workload, turns(shape)
        self.rng, self.waits = random.Random(f"waits {seed}"), []

    def wait(self, n: int) -> list[float]:
        """The first n waits (the same whatever is asked later)."""
        mean = self.shape.wait_s
        while len(self.waits) < n:
            self.waits.append(self.rng.expovariate(1 / mean) if mean > 0 else 0.0)
        return self.waits[:n]

    def first(self, n: int) -> list[tuple[float, int, int]]:
        count = len(self.turns)
        gaps = [g for g, _, _ in self.workload.first(-(-n // count))]
        draws = [(g if t == 0 else 0.0, turn.prompt, turn.decoded) for g in gaps for t, turn in enumerate(self.turns)]
        return draws[:n]

    def sample(self, at_least: int) -> list[tuple[float, int, int]]:
        """Whole sessions, at least `at_least` turns: every turn weighs the same in an average over them."""
        count = len(self.turns)
        return self.first(count * -(-at_least // count))

    def requests(self, work, rate: float, offset: int = 0) -> list[Request]:
        """The engine's requests for draws `work` (a prefix of first()) at `rate` turns/s, listed after
        `offset` others (each turn's `after` points past them)."""
        shape, count = self.shape, len(self.turns)
        draws = [(g, shape.new_tokens, shape.decoded_tokens) for g, _, _ in work[::count]]
        dropped = 0 if shape.keep_thinking else shape.thinking_tokens
        made = conversations(draws, rate / count, count, shape.wait_s, shape.shared_tokens, dropped_tokens=dropped)
        made = made[: len(work)]
        waits = self.wait(len(made))
        return [r._replace(after=r.after + offset, think_s=w) if r.after >= 0 else r for r, w in zip(made, waits)]


# ---- the inputs of a shape, and named shapes ---------------------------------------------------------

WORKED = {"turns": 20, "shared": 30_000, "input": 1_500, "output": 300, "thinking": 1_000, "wait": 5.0}


# The inputs that describe a workload shape (shared with other calculators that take one).
SHAPE_FIELDS = [
    integer(
        "turns",
        "Turns per task",
        WORKED["turns"],
        1,
        500,
        "turns",
        "Model calls in one task: an agent's steps, a chat's exchanges.",
    ),
    integer(
        "shared_tokens",
        "Shared context (read by every turn)",
        WORKED["shared"],
        0,
        1_000_000,
        "tokens",
        "System prompt, tool schemas, the files an agent loaded: the first turn's context.",
    ),
    integer("input_tokens", "New input per turn (message or tool result)", WORKED["input"], 0, 1_000_000, "tokens"),
    integer("output_tokens", "Visible output per turn", WORKED["output"], 1, 1_000_000, "tokens"),
    integer(
        "thinking_tokens",
        "Thinking tokens per turn",
        WORKED["thinking"],
        0,
        1_000_000,
        "tokens",
        "Reasoning generated before the visible output: decoded and billed like output.",
    ),
    boolean(
        "keep_thinking",
        "Later turns re-read the thinking",
        True,
        "On in an agent loop: Qwen3's template keeps the reasoning of assistant turns after the last user "
        "message. Off for chat turns: DeepSeek-R1's template drops every earlier turn's reasoning, and "
        "the cached prefix then ends where the previous prompt did.",
    ),
    integer("images_per_turn", "Images per turn", 0, 0, 100, "images"),
    choice(
        "image_rule",
        "Image tokens by",
        "qwen2.5-vl",
        list(IMAGE_RULES.items()),
        "Each model's published rule (see the part's table).",
    ),
    integer("image_width", "Image width", 1280, 1, 16_384, "px"),
    integer("image_height", "Image height", 720, 1, 16_384, "px"),
    number("audio_seconds_per_turn", "Audio per turn", 0.0, 0.0, 3600.0, "s"),
    choice("audio_rule", "Audio tokens by", "qwen2-audio", [(k, e[0]) for k, e in AUDIO_RULES.items()]),
    number("wait_s", "Wait between turns (tool call, user)", WORKED["wait"], 0.0, 86_400.0, "s"),
    number(
        "reuse",
        "Prefix reuse (share of re-read context cached)",
        1.0,
        0.0,
        1.0,
        "",
        "1: the prefix cache serves every token an earlier turn already computed; 0: no cache.",
        0.05,
    ),
]


def shape_from(v: dict) -> Shape:
    return Shape(
        turns=v["turns"],
        shared_tokens=v["shared_tokens"],
        input_tokens=v["input_tokens"],
        output_tokens=v["output_tokens"],
        thinking_tokens=v["thinking_tokens"],
        keep_thinking=v["keep_thinking"],
        images_per_turn=v["images_per_turn"],
        tokens_per_image=image_tokens(v["image_rule"], v["image_width"], v["image_height"]),
        audio_tokens_per_turn=audio_tokens(v["audio_rule"], v["audio_seconds_per_turn"]),
        wait_s=v["wait_s"],
        reuse=v["reuse"],
    )


# ---- named shapes: the field group other calculators take ---------------------------------------------

NO_SHAPE = "none"
REQUIRED = ("turns", "shared_tokens", "input_tokens", "output_tokens")
# What a named shape means by a key it leaves out: none of it.
NEUTRAL = {
    "thinking_tokens": 0,
    "keep_thinking": False,
    "images_per_turn": 0,
    "audio_seconds_per_turn": 0.0,
    "wait_s": 0.0,
    "reuse": 1.0,
}
NOT_INPUTS = ("id", "name", "source")


@cache
def named_shapes() -> dict[str, Shape]:
    """shapes.toml's shapes by id, each checked like task_cost's inputs (errors name shapes.toml[id].field)."""
    out = {}
    for sid, entry in catalog.shapes().items():
        where = f"shapes.toml[{sid}]"
        for key in REQUIRED:
            if key not in entry:
                raise InputError(f"{where}.{key}", "is required")
        given = {k: v for k, v in entry.items() if k not in NOT_INPUTS}
        try:
            out[sid] = shape_from(validate(SHAPE_FIELDS, {**NEUTRAL, **given}))
        except InputError as e:
            raise InputError(f"{where}.{e.field}", e.message) from None
    return out


def shape_fields(help_text: str) -> list[dict]:
    """The field group for "the workload is a task of this shape": a named shape (or none: the calculator's
    own lengths) and how many turns it runs (0: the shape's own). `help_text` says what a shape does there."""
    names = [(NO_SHAPE, "None: the lengths above")] + [(k, e["name"]) for k, e in catalog.shapes().items()]
    return [
        choice("workload_shape", "Workload shape", NO_SHAPE, names, help_text + " Shapes: Part 18, shapes.toml."),
        integer("shape_turns", "Turns per task (0: the shape's)", 0, 0, 500, "turns"),
    ]


def shape_of(v: dict) -> Shape | None:
    """The reader's shape (with its turns overridden when shape_turns > 0), or None: no shape chosen (or
    a calculator that does not offer one)."""
    sid = v.get("workload_shape", NO_SHAPE)
    if sid == NO_SHAPE:
        return None
    shape = named_shapes()[sid]
    turns_ = v.get("shape_turns", 0)
    return replace(shape, turns=turns_) if turns_ else shape

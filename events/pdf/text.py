"""Text in every script on a PDF page: font per word, bidirectional order, shaping, fitting.

Invariants:
- each word (a run between spaces) is drawn in the first font of the chain that covers all of
  it, so a word is never split between fonts (an Arabic word keeps its joined letters); a word
  no single font covers falls back to a font per character; spaces and words without letters
  (digits, punctuation) stay in the font of the word before them when it has them;
- the Unicode bidirectional algorithm (python-bidi) orders the runs: an Arabic name reads
  right to left, digits inside it left to right; HarfBuzz (reportlab's shaping through
  uharfbuzz) gives each run its joined forms and required ligatures. Discretionary ligatures
  are off, and so are Latin `liga` ones, so the PDF's text layer holds the letters typed;
- `fit` never overflows its box and never cuts: it lowers the size, then wraps (at spaces, and
  between Chinese and Japanese characters), and below the smallest size it keeps shrinking;
  `Fitted.shrunk_below` tells a caller that it did (logged by the badge and ticket builders);
- bidirectional formatting characters are dropped before drawing (invisible, and the
  algorithm used here does not read isolates); a character no font covers is drawn with the
  first font's "missing glyph" box and reported in `Shaped.missing`.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from bidi import algorithm as bidi_algorithm
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import ShapedStr, shapeFragWord
from reportlab.pdfgen.canvas import Canvas

from events.pdf import fonts

# Right-to-left classes: a text without any is one left-to-right run (no bidi pass).
_RTL_CLASSES = frozenset({"R", "AL", "RLE", "RLO", "RLI"})
# Explicit formatting characters: invisible; dropped (the algorithm here reads no isolates).
_FORMATTING = frozenset({"RLE", "LRE", "RLO", "LRO", "PDF", "RLI", "LRI", "FSI", "PDI", "BN"})
# Kerning on; no discretionary ligatures (DejaVu's "st"), no Latin ligatures (the text layer
# then holds the letters typed). Right-to-left runs keep HarfBuzz's defaults, where some fonts
# put lam-alef.
_LTR_FEATURES = {"kern": True, "liga": False, "dlig": False}
_RTL_FEATURES = {"kern": True, "dlig": False}
LEADING = 1.18  # line height, as a factor of the size
SHRINK = 0.92  # each step of `fit` lowers the size by this factor


@dataclass(frozen=True)
class Piece:
    """One run of a line, in visual order: its font and glyph string (reportlab's shaped
    text when shaping changed anything), and its width at size 1."""

    font: str
    glyphs: str
    advance: float


@dataclass(frozen=True)
class Shaped:
    text: str
    pieces: tuple[Piece, ...]
    missing: tuple[str, ...] = ()

    @property
    def advance(self) -> float:
        return sum(piece.advance for piece in self.pieces)

    def width(self, size: float) -> float:
        return self.advance * size


def _is_wordless(text: str) -> bool:
    """No letter nor mark: spaces, digits, punctuation (they may take any font that has them)."""
    return not any(unicodedata.category(ch)[0] in "LM" for ch in text)


def _visible(text: str) -> str:
    return "".join(ch for ch in text if unicodedata.bidirectional(ch) not in _FORMATTING)


def _levels(text: str) -> list[int]:
    """The embedding level of each character (even: left to right, odd: right to left)."""
    if not any(unicodedata.bidirectional(ch) in _RTL_CLASSES for ch in text):
        return [0] * len(text)
    storage = bidi_algorithm.get_empty_storage()
    base = bidi_algorithm.get_base_level(text)
    storage["base_level"] = base
    storage["base_dir"] = ("L", "R")[base]
    bidi_algorithm.get_embedding_levels(text, storage)
    bidi_algorithm.explicit_embed_and_overrides(storage)
    bidi_algorithm.resolve_weak_types(storage)
    bidi_algorithm.resolve_neutral_types(storage, False)
    bidi_algorithm.resolve_implicit_levels(storage, False)
    return [char["level"] for char in storage["chars"]]


def _words(text: str) -> list[str]:
    """The text cut before and after each run of spaces (the spaces are runs of their own)."""
    words: list[str] = []
    for ch in text:
        if words and (ch.isspace() == words[-1][-1].isspace()):
            words[-1] += ch
        else:
            words.append(ch)
    return words


def _font_per_char(text: str, chain: fonts.Chain) -> list[fonts.Face | None]:
    """A face for every character of `text` (None: no font of the chain covers it)."""
    faces: list[fonts.Face | None] = []
    for word in _words(text):
        face = chain.face_for(word)
        if face is not None:
            faces.extend([face] * len(word))
            continue
        previous: fonts.Face | None = None
        for ch in word:
            # A combining mark stays with its base letter's font when it can.
            if unicodedata.category(ch)[0] == "M" and previous and previous.covers(ch):
                faces.append(previous)
                continue
            previous = chain.face_for(ch)
            faces.append(previous)
    # Spaces and wordless runs follow the font before them when it has their glyphs.
    start = 0
    for word in _words(text):
        end = start + len(word)
        if _is_wordless(word) and start > 0:
            before = faces[start - 1]
            if before is not None and before.covers(word):
                faces[start:end] = [before] * len(word)
        start = end
    return faces


def _shape_run(text: str, face: fonts.Face, rtl: bool) -> Piece:
    features = _RTL_FEATURES if rtl else _LTR_FEATURES
    # reportlab's shaper takes a "frag word": [width, (fragment, text)].
    word = [pdfmetrics.stringWidth(text, face.name, 1), (_Frag(face.name), text)]
    with fonts.SHAPING:
        shaped = shapeFragWord(word, features=features)
    glyphs = shaped[1][1]
    if isinstance(glyphs, ShapedStr):
        advance = sum(data.x_advance for data in glyphs.__shapeData__) / 1000
    else:
        advance = pdfmetrics.stringWidth(glyphs, face.name, 1)
    return Piece(font=face.name, glyphs=glyphs, advance=advance)


class _Frag:
    """What reportlab's shaper reads of a text fragment: its font and size."""

    def __init__(self, font_name: str) -> None:
        self.fontName = font_name
        self.fontSize = 10  # shaped advances come in thousandths of the size: any size will do


def shape(text: str, chain: fonts.Chain) -> Shaped:
    """One line of `text`, shaped and in visual order (no wrapping)."""
    return _shape_cached(text, chain)


@lru_cache(maxsize=1024)
def _shape_cached(text: str, chain: fonts.Chain) -> Shaped:
    text = _visible(text)
    if not text:
        return Shaped(text="", pieces=())
    faces = _font_per_char(text, chain)
    missing = tuple(ch for ch, face in zip(text, faces, strict=True) if face is None)
    drawn = [face if face is not None else chain.primary for face in faces]
    levels = _levels(text)
    # Runs of one font and one level, in logical order.
    runs: list[tuple[int, fonts.Face, str]] = []
    for ch, face, level in zip(text, drawn, levels, strict=True):
        if runs and runs[-1][0] == level and runs[-1][1] is face:
            runs[-1] = (level, face, runs[-1][2] + ch)
        else:
            runs.append((level, face, ch))
    # Visual order (UAX #9 rule L2): from the highest level down to the lowest odd one, reverse
    # every sequence of runs at that level or above. Each right-to-left run is then shaped
    # right to left, which gives its glyphs in visual order.
    highest = max(level for level, _, _ in runs)
    lowest_odd = min((level for level, _, _ in runs if level % 2), default=highest + 1)
    for floor in range(highest, lowest_odd - 1, -1):
        i = 0
        while i < len(runs):
            if runs[i][0] < floor:
                i += 1
                continue
            j = i
            while j < len(runs) and runs[j][0] >= floor:
                j += 1
            runs[i:j] = reversed(runs[i:j])
            i = j
    pieces = tuple(_shape_run(run, face, bool(level % 2)) for level, face, run in runs)
    return Shaped(text=text, pieces=pieces, missing=missing)


# --- fitting into a box --------------------------------------------------------------------


@dataclass(frozen=True)
class Fitted:
    lines: tuple[Shaped, ...]
    size: float
    shrunk_below: bool = False  # smaller than the box's smallest size: the text was that long

    @property
    def height(self) -> float:
        return len(self.lines) * self.size * LEADING

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(ch for line in self.lines for ch in line.missing)


def _is_breakable_char(ch: str) -> bool:
    """Chinese and Japanese may break between any two characters."""
    code = ord(ch)
    return (
        0x3040 <= code <= 0x30FF  # kana
        or 0x3400 <= code <= 0x4DBF  # Han extension A
        or 0x4E00 <= code <= 0x9FFF  # Han
        or 0xF900 <= code <= 0xFAFF  # Han compatibility
        or 0x20000 <= code <= 0x3FFFF  # Han extensions B…
    )


def _tokens(text: str) -> list[tuple[str, bool]]:
    """Units a line may break between: (text, preceded by a space)."""
    tokens: list[tuple[str, bool]] = []
    for word in text.split():
        first = True
        current = ""
        for ch in word:
            if _is_breakable_char(ch):
                if current:
                    tokens.append((current, first))
                    first = False
                    current = ""
                tokens.append((ch, first))
                first = False
            else:
                current += ch
        if current:
            tokens.append((current, first))
    if tokens:
        tokens[0] = (tokens[0][0], False)
    return tokens


def _clusters(token: str) -> list[str]:
    """A token cut between characters, each combining mark kept with the letter before it."""
    clusters: list[str] = []
    for ch in token:
        if clusters and unicodedata.category(ch)[0] == "M":
            clusters[-1] += ch
        else:
            clusters.append(ch)
    return clusters


def _wrap(tokens: list[tuple[str, bool, float]], space: float, limit: float) -> list[str] | None:
    """Greedy lines of tokens (text, preceded by a space, width at size 1) that stay within
    `limit`; None when a single token is wider."""
    lines: list[str] = []
    current, current_width = "", 0.0
    for token, spaced, width in tokens:
        if width > limit:
            return None
        gap = space if spaced and current else 0.0
        if current and current_width + gap + width > limit:
            lines.append(current)
            current, current_width = token, width
        else:
            current += (" " if gap else "") + token
            current_width += gap + width
    if current:
        lines.append(current)
    return lines


def fit(
    text: str,
    chain: fonts.Chain,
    *,
    width: float,
    height: float,
    size: float,
    min_size: float,
    max_lines: int = 1,
    one_line_down_to: float | None = None,
) -> Fitted:
    """`text` in a box of `width` × `height` points: the largest size from `size` down at which
    it fits on at most `max_lines` lines (and the box's height). Past `min_size` it may use as
    many lines as the box holds, and break a word too long for a line between its letters:
    shrinking then always ends with all of the text inside the box. With `one_line_down_to`
    (a name), one line is tried first, down to that size, before wrapping."""
    text = " ".join(_visible(text).split())
    if not text:
        return Fitted(lines=(), size=size)
    tokens = [(token, spaced, shape(token, chain).advance) for token, spaced in _tokens(text)]
    space = shape(" ", chain).advance
    if one_line_down_to is not None and max_lines > 1:
        whole = shape(text, chain).advance
        fits = min(size, width / whole, height / LEADING) if whole else size
        if fits >= max(one_line_down_to, min_size):
            return Fitted(lines=(shape(text, chain),), size=fits)
    current = size
    while current > 0.05:
        holds = max(1, int(height // (current * LEADING) + 1e-9))
        limit = width / current
        candidates = tokens
        allowed = min(max_lines, holds)
        if current < min_size:
            allowed = holds
            candidates = []
            for token, spaced, advance in tokens:
                if advance <= limit:
                    candidates.append((token, spaced, advance))
                    continue
                for index, cluster in enumerate(_clusters(token)):
                    candidates.append(
                        (cluster, spaced and index == 0, shape(cluster, chain).advance)
                    )
        lines = _wrap(candidates, space, limit)
        if lines is not None and len(lines) <= allowed:
            shaped = tuple(shape(line, chain) for line in lines)
            # A whole line may differ from its words by kerning across a space: never wider
            # than the box.
            widest = max(line.advance for line in shaped)
            final = min(current, width / widest) if widest else current
            return Fitted(lines=shaped, size=final, shrunk_below=final < min_size)
        current *= SHRINK
    raise ValueError(f"{len(text)} characters cannot fit a box of {width:.0f} x {height:.0f} pt")


def draw_line(canvas: Canvas, line: Shaped, *, x: float, y: float, size: float, align: str) -> None:
    """Draw one shaped line with its baseline at `y`; `x` is its left edge, centre or right
    edge for `align` left, centre or right."""
    width = line.width(size)
    if align == "centre":
        x -= width / 2
    elif align == "right":
        x -= width
    for piece in line.pieces:
        canvas.setFont(piece.font, size)
        canvas.drawString(x, y, piece.glyphs)
        x += piece.advance * size


def draw_fitted(
    canvas: Canvas, fitted: Fitted, *, x: float, top: float, align: str = "left"
) -> float:
    """Draw fitted lines from `top` down; returns the y below the last line."""
    y = top
    for line in fitted.lines:
        y -= fitted.size * LEADING
        draw_line(
            canvas,
            line,
            x=x,
            y=y + fitted.size * (LEADING - 1) / 2 + fitted.size * 0.22,
            size=fitted.size,
            align=align,
        )
    return y

"""The font chain of the PDF tickets and badges (`EVENT_PDF_FONTS`).

Invariants:
- a text is drawn only with fonts of the chain, each word in the first font that has a glyph
  for every one of its characters (events.pdf.text); the chain must cover every script of
  REQUIRED_SCRIPTS, or the system check events.E005 stops start-up: a missing font is told
  at start, never printed as empty boxes on a badge;
- only TrueType outlines (a .ttf, or a .ttc's first font): reportlab embeds a subset of them
  (what a PDF holds is the glyphs it draws); PostScript-flavoured OpenType (.otf, CFF) is
  refused by the check, naming the file;
- each file is parsed once per process and registered with reportlab under a name derived
  from its path; shaping mutates reportlab's per-font glyph tables, so it runs under `SHAPING`
  (gunicorn serves requests from several threads of one process).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont

KNOB = "EVENT_PDF_FONTS"
CHECK_ID = "events.E005"

# A few letters of each script attendees' names are written in: the chain must have a glyph for
# every one of them (Latin with diacritics, Greek, Cyrillic, Arabic, Chinese, Japanese, Korean).
REQUIRED_SCRIPTS: dict[str, str] = {
    "Latin": "AZaz0189ÀÉÇÑØßŁőžİıĂȘȚ",
    "Greek": "ΑΩαωάΐΰ",
    "Cyrillic": "АЯаяЁЖЩЫіїє",
    "Arabic": "ءآأؤإئابةتثجحخدذرزسشصضطظعغفقكلمنهوىيپچژگ",
    "Chinese (Han)": "中文漢字山田龍",
    "Japanese (kana)": "あいうアイウ",
    "Korean (Hangul)": "한국어김민준",
}

SHAPING = threading.Lock()


class FontProblem(Exception):
    """The chain cannot draw what it must (the message names the knob, the file or the script)."""


@dataclass(frozen=True)
class Face:
    name: str  # reportlab's registered name
    path: str
    glyphs: frozenset[int]  # the code points the font has a glyph for

    def covers(self, text: str) -> bool:
        glyphs = self.glyphs
        return all(ord(ch) in glyphs for ch in text)


@dataclass(frozen=True)
class Chain:
    faces: tuple[Face, ...]

    @property
    def primary(self) -> Face:
        return self.faces[0]

    def face_for(self, text: str) -> Face | None:
        """The first face with a glyph for every character of `text`, None when none has."""
        for face in self.faces:
            if face.covers(text):
                return face
        return None

    def uncovered(self, text: str) -> list[str]:
        return [ch for ch in dict.fromkeys(text) if self.face_for(ch) is None]


def _registered_name(path: str) -> str:
    return "EventPdf-" + hashlib.sha256(path.encode()).hexdigest()[:12]


@lru_cache(maxsize=16)
def _face(path: str) -> Face:
    """Parse and register one font file (once per process); FontProblem if it cannot be used."""
    if not Path(path).is_file():
        raise FontProblem(f"{path} is not a file")
    name = _registered_name(path)
    try:
        font = TTFont(name, path, subfontIndex=0, shapable=True)
    except Exception as exc:  # reportlab raises TTFError, struct.error, OSError …
        raise FontProblem(f"{path} cannot be used: {exc}") from exc
    pdfmetrics.registerFont(font)
    glyphs = frozenset(code for code in font.face.charToGlyph if code < 0xE000 or code > 0xF8FF)
    return Face(name=name, path=path, glyphs=glyphs)


@lru_cache(maxsize=8)
def load(paths: tuple[str, ...]) -> Chain:
    """The chain of these files, in order; FontProblem naming every file that cannot be used."""
    faces, problems = [], []
    for position, path in enumerate(paths, start=1):
        try:
            faces.append(_face(path))
        except FontProblem as exc:
            problems.append(f"{KNOB} entry {position}: {exc}")
    if problems:
        raise FontProblem("; ".join(problems))
    if not faces:
        raise FontProblem(f"{KNOB} lists no font")
    return Chain(tuple(faces))


def chain() -> Chain:
    """The configured chain (settings.EVENT_PDF_FONTS)."""
    return load(tuple(settings.EVENT_PDF_FONTS))


def problems(paths: tuple[str, ...] | None = None) -> list[str]:
    """What stops the chain from drawing every required script (empty: nothing)."""
    try:
        loaded = load(tuple(settings.EVENT_PDF_FONTS) if paths is None else paths)
    except FontProblem as exc:
        return [str(exc)]
    found = []
    for script, sample in REQUIRED_SCRIPTS.items():
        missing = loaded.uncovered(sample)
        if missing:
            shown = ", ".join(f"{ch} U+{ord(ch):04X}" for ch in missing[:3])
            found.append(
                f"No font of {KNOB} covers {script} (no glyph for {shown}): tickets and badges "
                "would print empty boxes for names in it."
            )
    return found

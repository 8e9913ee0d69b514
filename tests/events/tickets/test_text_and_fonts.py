"""The font chain (EVENT_PDF_FONTS) and its system check, and text in every script: a font per
word, Arabic shaped and right to left, and fitting that shrinks or wraps but never overflows
or cuts."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from events.pdf import fonts, text
from tests.events.tickets.pdfs import NAMES

DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
ARABIC = "/usr/share/fonts/truetype/noto/NotoSansArabic-Regular.ttf"
CJK = "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"


def font_errors() -> list:
    return [m for m in run_checks() if m.id == fonts.CHECK_ID]


def test_the_default_chain_covers_every_required_script():
    assert fonts.problems() == []
    assert font_errors() == []
    chain = fonts.chain()
    for script, sample in fonts.REQUIRED_SCRIPTS.items():
        assert chain.uncovered(sample) == [], script


@pytest.mark.parametrize(
    ("paths", "uncovered"),
    [
        ((DEJAVU,), ["Chinese (Han)", "Japanese (kana)", "Korean (Hangul)"]),
        ((CJK,), ["Latin", "Arabic"]),  # no Ș nor Ț in WenQuanYi
        (
            (ARABIC,),
            ["Latin", "Greek", "Cyrillic", "Chinese (Han)", "Japanese (kana)", "Korean (Hangul)"],
        ),
    ],
)
def test_a_chain_missing_a_script_stops_start_up_naming_it(settings, paths, uncovered):
    settings.EVENT_PDF_FONTS = list(paths)

    errors = font_errors()

    assert [e.msg.split(" covers ")[1].split(" (no glyph")[0] for e in errors] == uncovered
    assert all(e.level >= 40 and "EVENT_PDF_FONTS" in e.msg for e in errors)
    assert "fonts-noto-core" in errors[0].hint
    with pytest.raises(SystemCheckError, match="events.E005"):
        call_command("check")


def test_a_missing_or_unusable_font_file_is_named_by_its_position(settings, tmp_path):
    not_a_font = tmp_path / "notes.ttf"
    not_a_font.write_bytes(b"not a font at all")
    settings.EVENT_PDF_FONTS = [DEJAVU, str(tmp_path / "gone.ttf"), str(not_a_font), CJK]

    (error,) = font_errors()

    assert "EVENT_PDF_FONTS entry 2:" in error.msg and "gone.ttf is not a file" in error.msg
    assert "EVENT_PDF_FONTS entry 3:" in error.msg and "notes.ttf cannot be used" in error.msg


def test_each_word_takes_the_first_font_that_covers_all_of_it():
    chain = fonts.chain()
    dejavu, arabic, cjk = (face.name for face in chain.faces)

    shaped = text.shape("Zoë 山田 Иванов 42", chain)

    assert [piece.font for piece in shaped.pieces] == [dejavu, cjk, dejavu]
    assert shaped.missing == ()
    # A word the first font lacks a letter of goes whole to a font that has them all (never
    # split between fonts, which would break the joined Arabic letters).
    wasla = "ٱلسلام"  # ALEF WASLA (U+0671) is not in DejaVu Sans
    assert [piece.font for piece in text.shape(wasla, chain).pieces] == [arabic]


def test_arabic_is_shaped_and_ordered_right_to_left():
    chain = fonts.chain()

    shaped = text.shape(NAMES["arabic"], chain)  # محمد عبد الله

    glyphs = "".join(piece.glyphs for piece in shaped.pieces)
    # Joined forms (Arabic Presentation Forms-B), not the isolated letters typed …
    assert all(0xFE70 <= ord(ch) <= 0xFEFF or ch == " " or ch == "ا" for ch in glyphs)
    assert "\ufee3" in glyphs  # MEEM INITIAL FORM, the start of محمد
    # … in visual order: the last word (الله, ending in HEH FINAL FORM) is drawn leftmost and
    # the first word (محمد, starting with MEEM INITIAL) rightmost.
    assert glyphs[0] == "\ufeea"
    assert glyphs.rstrip()[-1] == "\ufee3"


def test_digits_inside_arabic_stay_left_to_right():
    chain = fonts.chain()

    shaped = text.shape("غرفة 12", chain)

    glyphs = "".join(piece.glyphs for piece in shaped.pieces)
    assert glyphs.startswith("12")  # the number, to the left of the word, reads 1 then 2


@pytest.mark.parametrize("script", sorted(NAMES))
def test_a_name_in_every_script_fits_its_box_on_one_line(script):
    chain = fonts.chain()

    fitted = text.fit(NAMES[script], chain, width=200, height=40, size=24, min_size=6)

    assert len(fitted.lines) == 1
    assert fitted.lines[0].text == NAMES[script]
    assert fitted.lines[0].width(fitted.size) <= 200
    assert fitted.missing == ()


def test_a_long_name_shrinks_then_wraps_and_never_overflows_nor_is_cut():
    chain = fonts.chain()
    name = "Maximiliane Alexandra von Hohenzollern-Sigmaringen y Borbón-Dos Sicilias"

    fitted = text.fit(name, chain, width=120, height=60, size=24, min_size=6, max_lines=3)

    assert 1 < len(fitted.lines) <= 3
    assert fitted.size < 24 and not fitted.shrunk_below
    assert all(line.width(fitted.size) <= 120 + 1e-6 for line in fitted.lines)
    assert fitted.height <= 60
    assert " ".join(line.text for line in fitted.lines) == name  # every word is there


def test_a_name_too_long_for_the_smallest_size_still_fits_whole_and_says_so():
    chain = fonts.chain()
    name = "W" * 255  # the longest a name may be, one word

    fitted = text.fit(name, chain, width=90, height=40, size=20, min_size=6, max_lines=2)

    assert fitted.shrunk_below
    assert "".join(line.text for line in fitted.lines) == name
    assert all(line.width(fitted.size) <= 90 + 1e-6 for line in fitted.lines)
    assert fitted.height <= 40


def test_chinese_wraps_between_characters():
    chain = fonts.chain()
    name = "欧阳娜娜欧阳娜娜欧阳娜娜欧阳娜娜"

    fitted = text.fit(name, chain, width=100, height=60, size=20, min_size=10, max_lines=3)

    assert len(fitted.lines) > 1 and not fitted.shrunk_below
    assert "".join(line.text for line in fitted.lines) == name


def test_bidi_controls_are_dropped_and_uncovered_characters_reported():
    chain = fonts.chain()

    shaped = text.shape("\u202bAda\u202c \U0001f9a9", chain)  # embedding marks, a flamingo

    assert shaped.text == "Ada \U0001f9a9"
    assert shaped.missing == ("\U0001f9a9",)

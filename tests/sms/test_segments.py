"""SMS length and segment count (sms.segments): GSM-7 160/153, UCS-2 70/67, extension
characters counting 2 and never split across segments."""

from __future__ import annotations

import pytest

from sms.segments import GSM7, UCS2, measure


@pytest.mark.parametrize(
    ("body", "encoding", "units", "segments"),
    [
        ("", GSM7, 0, 0),
        ("a" * 160, GSM7, 160, 1),
        ("a" * 161, GSM7, 161, 2),
        ("a" * 306, GSM7, 306, 2),
        ("a" * 307, GSM7, 307, 3),
        ("Café à 9h, Ñoño ¿sì? £5 §1 Øre", GSM7, 30, 1),  # accents of the basic set
        ("Ñandú", UCS2, 5, 1),  # ú is not in the basic set
        ("€" * 80, GSM7, 160, 1),  # extension: 2 septets each
        ("€" + "a" * 159, GSM7, 161, 2),
        ("[x]", GSM7, 5, 1),
        ("a" * 70, GSM7, 70, 1),
        ("ç" + "a" * 69, UCS2, 70, 1),  # lower-case ç is not GSM-7 (only Ç is)
        ("ç" + "a" * 70, UCS2, 71, 2),
        ("ç" + "a" * 133, UCS2, 134, 2),
        ("ç" + "a" * 134, UCS2, 135, 3),
        ("Zürich – Genève", UCS2, 15, 1),  # the en dash is not GSM-7
        ("🎉" * 35, UCS2, 70, 1),  # outside the BMP: a surrogate pair, 2 units each
        ("🎉" * 36, UCS2, 72, 2),
    ],
)
def test_measure(body, encoding, units, segments):
    length = measure(body)
    assert (length.encoding, length.units, length.segments) == (encoding, units, segments)
    assert length.characters == len(body)


def test_a_two_septet_character_is_never_split_across_segments():
    # 152 septets then "€" (2): it does not fit the first 153-septet segment, it opens the next.
    body = "a" * 152 + "€" + "a" * 152
    assert measure(body).units == 306  # would fit 2 segments if the escape could be split
    assert measure(body).segments == 3


def test_a_surrogate_pair_is_never_split_across_segments():
    body = "ç" + "a" * 65 + "🎉" + "a" * 66
    assert measure(body).units == 134
    assert measure(body).segments == 3


def test_the_summary_reads_plainly():
    assert str(measure("€ 5")) == "3 characters, GSM-7 (4 septets): 1 segment"
    assert str(measure("ç" * 71)) == "71 characters, UCS-2 (71 UTF-16 units): 2 segments"

"""How an SMS body is encoded and how many segments it costs (GSM 03.38 / 3GPP TS 23.038).

- GSM-7 when every character is in the basic set or its extension table: 160 septets in one
  message, 153 per segment of a concatenated one; an extension character (`^{}[]~|€\\` and form
  feed) is an escape plus a septet, so it counts 2 and is never split across two segments.
- Otherwise UCS-2 (UTF-16): 70 code units in one message, 67 per segment; a character outside
  the Basic Multilingual Plane (most emoji) is a surrogate pair, counts 2 and is never split.
"""

from __future__ import annotations

from dataclasses import dataclass

GSM7_BASIC = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
GSM7_EXTENSION = frozenset("\f^{}\\[~]|€")

GSM7 = "GSM-7"
UCS2 = "UCS-2"
# (units in a single message, units per segment of a concatenated message)
LIMITS = {GSM7: (160, 153), UCS2: (70, 67)}


@dataclass(frozen=True)
class SmsLength:
    encoding: str  # GSM-7 | UCS-2
    characters: int  # as the reader counts them
    units: int  # septets (GSM-7) or UTF-16 code units (UCS-2)
    segments: int

    def __str__(self) -> str:
        unit = "septets" if self.encoding == GSM7 else "UTF-16 units"
        plural = "" if self.segments == 1 else "s"
        return (
            f"{self.characters} characters, {self.encoding} ({self.units} {unit}): "
            f"{self.segments} segment{plural}"
        )


def _cost(char: str, encoding: str) -> int:
    if encoding == GSM7:
        return 2 if char in GSM7_EXTENSION else 1
    return 2 if ord(char) > 0xFFFF else 1


def measure(body: str) -> SmsLength:
    """The encoding, length and segment count of `body` (0 segments when it is empty)."""
    encoding = GSM7 if all(c in GSM7_BASIC or c in GSM7_EXTENSION for c in body) else UCS2
    costs = [_cost(c, encoding) for c in body]
    units = sum(costs)
    single, per_segment = LIMITS[encoding]
    if units == 0:
        segments = 0
    elif units <= single:
        segments = 1
    else:
        # Greedy packing: a 2-unit character that does not fit opens the next segment.
        segments, used = 1, 0
        for cost in costs:
            if used + cost > per_segment:
                segments, used = segments + 1, 0
            used += cost
    return SmsLength(encoding=encoding, characters=len(body), units=units, segments=segments)

"""The organiser's logo of an event, printed on its PDF tickets and name badges.

Invariants:
- what is stored is a PNG this verb re-encoded from the upload (PNG, JPEG, GIF or WebP, at
  most MAX_UPLOAD bytes), at most MAX_SIDE pixels on its longer side: no metadata of the
  uploaded file (camera, place, software) reaches a PDF, and a ticket never carries a large
  image;
- set or removed under the Event row lock, with one audit row (`event.logo_set`,
  `event.logo_removed`) in the same transaction; setting the same image again, or removing
  no logo, writes nothing;
- a file that is not such an image is refused (`invalid_value`, field `logo`), nothing written.
"""

from __future__ import annotations

import hashlib
from io import BytesIO
from typing import Any

from django.db import transaction

from events.db import locks
from events.errors import Code, ValidationFailed
from events.models import Event, EventLogo
from events.services import audit

MAX_UPLOAD = 2 * 1024 * 1024
MAX_SIDE = 800
FORMATS = {"PNG", "JPEG", "GIF", "WEBP"}


def _refused(message: str) -> ValidationFailed:
    return ValidationFailed(message, code=Code.INVALID_VALUE, field="logo")


def normalised(content: bytes) -> tuple[bytes, int, int]:
    """The upload as the PNG that is stored, with its size in pixels."""
    # Pillow is imported by an upload, not by every process that loads the admin.
    from PIL import Image, UnidentifiedImageError

    if len(content) > MAX_UPLOAD:
        raise _refused(f"A logo is at most {MAX_UPLOAD // (1024 * 1024)} MB.")
    try:
        with Image.open(BytesIO(content)) as image:
            if image.format not in FORMATS:
                raise _refused("A logo is a PNG, JPEG, GIF or WebP image.")
            # Bounded before decoding: a small file may claim a huge canvas.
            if image.width * image.height > 40_000_000:
                raise _refused("The logo's image is too large.")
            image.seek(0)
            frame = image.convert("RGBA")
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise _refused("The file is not an image that can be read.") from exc
    frame.thumbnail((MAX_SIDE, MAX_SIDE))
    out = BytesIO()
    frame.save(out, format="PNG", optimize=True)
    return out.getvalue(), frame.width, frame.height


def set_logo(*, event: Event, content: bytes | None, actor: Any) -> EventLogo | None:
    """Set the event's logo from an uploaded image (`content`), or remove it (None)."""
    png = width = height = None
    if content is not None:
        png, width, height = normalised(content)
    with transaction.atomic():
        event = locks.lock_event(event.pk)
        current = EventLogo.objects.filter(event_id=event.pk).first()
        if png is None:
            if current is None:
                return None
            current.delete()
            audit.record(actor=actor, verb="event.logo_removed", event=event, data={})
            return None
        if current is not None and bytes(current.content) == png:
            return current
        logo, _ = EventLogo.objects.update_or_create(
            event_id=event.pk, defaults={"content": png, "width": width, "height": height}
        )
        audit.record(
            actor=actor,
            verb="event.logo_set",
            event=event,
            data={
                "width": width,
                "height": height,
                "bytes": len(png),
                "sha256": hashlib.sha256(png).hexdigest(),
            },
        )
    return logo

"""The attendee's language (docs/spec.md "Languages").

- Interface strings are gettext messages (locale/<lang>/LC_MESSAGES/django.po).
- Event content entered by staff is stored once in the event's default language (`Event.lang`)
  in its own columns, which every staff screen, export, seam and webhook reads as before; the
  other languages live beside it in the row's `translations` JSON ({"fr": {"name": "…"}, …}).
  `localized(obj, field, lang)` reads the attendee's language and falls back to the column.
- A registration (and a waiting-list entry) keeps the language it was made in (`lang`); every
  message to that attendee is rendered under `translation.override(that language)`, whatever
  language the process runs in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.utils import translation
from django.utils.translation import pgettext

LANGUAGE_CODES: tuple[str, ...] = tuple(code for code, _name in settings.LANGUAGES)

# The fields of each model that staff may enter per language ({model label: fields}).
TRANSLATED_FIELDS: dict[str, tuple[str, ...]] = {
    "events.event": ("name", "description", "ticket_instructions", "venue"),
    "events.ticket": ("name", "description"),
    "events.question": ("title",),
    "events.questionchoice": ("name",),
    "events.messagetemplate": ("subject", "body"),
}


def supported(value: object) -> str | None:
    """`value` when it is one of the product's language codes (settings.LANGUAGES), else None."""
    return value if isinstance(value, str) and value in LANGUAGE_CODES else None


def event_language(event: Any) -> str:
    """The event's default language (`Event.lang`), or LANGUAGE_CODE when it names none."""
    return supported(getattr(event, "lang", None)) or settings.LANGUAGE_CODE


def choose(*candidates: object, event: Any) -> str:
    """The first candidate that is a product language, else the event's default language."""
    for candidate in candidates:
        found = supported(candidate)
        if found is not None:
            return found
    return event_language(event)


def localized(obj: Any, field: str, lang: str | None = None) -> Any:
    """`obj.<field>` in `lang` (the active language when None): its translation when staff
    entered one, else the column (written in the event's default language)."""
    translations = getattr(obj, "translations", None)
    if translations:
        text = translations.get(lang or translation.get_language() or "", {}).get(field)
        if text:
            return text
    return getattr(obj, field)


def date_format(style: str = "long") -> str:
    """A date format (Django's `date` letters) in the active language's order: "long" (Monday 3
    March 2025, 14:00), "short" (Mon 3 Mar 2025, 14:00), "day" (Mon 3 Mar, 14:00)."""
    if style == "short":
        return pgettext("date format", "D j M Y, H:i")
    if style == "day":
        return pgettext("date format", "D j M, H:i")
    return pgettext("date format", "l j F Y, H:i")


def clean_translations(
    value: Any, *, fields: Iterable[str], label: str = "translations"
) -> dict[str, dict[str, str]]:
    """`value` as a translations document: {language: {field: text}} with product languages,
    the model's translated fields and non-empty text only. Raises ValueError naming what is
    wrong."""
    if value in (None, ""):
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{label} must be an object of languages.")
    allowed = set(fields)
    cleaned: dict[str, dict[str, str]] = {}
    for lang, texts in value.items():
        if supported(lang) is None:
            raise ValueError(f"{label}: {lang!r} is not one of {', '.join(LANGUAGE_CODES)}.")
        if not isinstance(texts, Mapping):
            raise ValueError(f"{label}.{lang} must be an object of fields.")
        for field, text in texts.items():
            if field not in allowed:
                raise ValueError(f"{label}.{lang}: {field!r} cannot be translated.")
            if not isinstance(text, str):
                raise ValueError(f"{label}.{lang}.{field} must be text.")
            if text.strip():
                cleaned.setdefault(lang, {})[field] = text
    return cleaned

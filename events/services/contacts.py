"""Contact field normalisation shared by intake, the seam and staff entry."""

from __future__ import annotations

import phonenumbers
from django.core.exceptions import ValidationError
from django.core.validators import validate_email


def is_valid_email(value: str) -> bool:
    try:
        validate_email(value)
    except ValidationError:
        return False
    return True


def normalise_phone(value: str, *, country: str = "") -> str:
    """E.164 when the number parses (the event's country as default region), else as typed."""
    value = (value or "").strip()
    if not value:
        return ""
    try:
        parsed = phonenumbers.parse(value, (country or "").upper() or None)
    except phonenumbers.NumberParseException:
        return value
    if not phonenumbers.is_possible_number(parsed):
        return value
    return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)


def usable_phone(value: str, *, country: str = "") -> str | None:
    """An E.164 number an SMS can go to, or None."""
    value = (value or "").strip()
    if not value:
        return None
    try:
        parsed = phonenumbers.parse(value, (country or "").upper() or None)
    except phonenumbers.NumberParseException:
        return None
    if not phonenumbers.is_valid_number(parsed):
        return None
    return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)

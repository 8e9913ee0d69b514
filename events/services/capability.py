"""Capability tokens (spec.md §7.1): read one thing without an account.

Invariants:
- signed with EVENT_CAPABILITY_SECRET (never SECRET_KEY), one salt per purpose, so a token of
  one purpose never opens another; signatures are compared in constant time by Django's Signer;
- a `tickets`/`ics` token carries the registration's `token_version`: bumping it revokes them;
- fail-closed: with the secret missing or shorter than 32 characters, mint and verify raise
  `SecretMissing`; every bad token raises the one `CapabilityRefused`.
"""

from __future__ import annotations

from django.conf import settings
from django.core import signing

from events.errors import CapabilityRefused, SecretMissing
from events.models import Registration

PURPOSES = ("tickets", "order", "ics")
MIN_SECRET_LENGTH = 32


def _signer(purpose: str) -> signing.Signer:
    secret = getattr(settings, "EVENT_CAPABILITY_SECRET", "") or ""
    if len(secret) < MIN_SECRET_LENGTH:
        raise SecretMissing("The capability secret is not configured.")
    if purpose not in PURPOSES:
        raise CapabilityRefused("Unknown purpose.", reason="purpose")
    return signing.Signer(key=secret, salt=f"events.capability.{purpose}")


def mint(*, purpose: str, subject: Registration | int | str) -> str:
    """A token for a registration (tickets, ics) or an order ref (order)."""
    signer = _signer(purpose)
    if purpose == "order":
        return signer.sign_object({"s": str(subject), "v": 1})
    registration = (
        subject
        if isinstance(subject, Registration)
        else Registration.objects.only("pk", "token_version").get(pk=int(subject))
    )
    return signer.sign_object({"s": registration.pk, "v": registration.token_version})


def verify(*, purpose: str, token: str) -> int | str:
    """The subject (registration id, or order ref) of a valid, current token.

    Raises CapabilityRefused (with a `reason` for the log, never shown to the client) for a
    malformed or forged token, a token of another purpose, a stale version, or an unknown or
    archived registration.
    """
    signer = _signer(purpose)
    try:
        payload = signer.unsign_object(token)
    except (signing.BadSignature, ValueError, TypeError) as exc:
        raise CapabilityRefused("Invalid link.", reason="signature") from exc
    if not isinstance(payload, dict) or "s" not in payload or "v" not in payload:
        raise CapabilityRefused("Invalid link.", reason="malformed")
    if purpose == "order":
        return str(payload["s"])
    row = (
        Registration.objects.filter(pk=payload["s"], active=True)
        .values_list("token_version", flat=True)
        .first()
    )
    if row is None:
        raise CapabilityRefused("Invalid link.", reason="unknown_registration")
    if row != payload["v"]:
        raise CapabilityRefused("Invalid link.", reason="stale_version")
    return int(payload["s"])

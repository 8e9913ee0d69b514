"""The configured secrets, parsed by one rule each: the start-up checks (events.checks, run by
every `manage.py` command and by config/wsgi.py before the server takes a request) and the code
that uses a secret call the same function here, so a secret the server would fail on at runtime
stops start-up instead.

Invariants:
- a refusal (`SecretProblem`) names the knob and, for a list, the entry by its position
  ("entry 2 of 3"), never the value or any part of it: the message goes to logs and terminals;
- pure: no database, no Django settings read except in `problems()`.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

SEAM_KNOB = "EVENT_SEAM_SECRET"
CAPABILITY_KNOB = "EVENT_CAPABILITY_SECRET"
GATEWAY_TOKEN_KNOB = "EVENT_SMS_GATEWAY_TOKEN"  # noqa: S105 — a knob's name, not a secret
WHSEC_PREFIX = "whsec_"
MIN_CAPABILITY_LENGTH = 32
# The system check ids (events.checks), one per rule.
CAPABILITY_CHECK = "events.E001"
SEAM_EMPTY_CHECK = "events.E002"
SEAM_ENTRY_CHECK = "events.E003"
GATEWAY_TOKEN_CHECK = "events.E004"  # noqa: S105 — a check id
# Standard Webhooks writes the key in standard base64; the padding may be left out. A URL-safe
# "-" or "_" is refused: the signing library's decoder would drop it silently and sign with
# another key than the host's.
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
# RFC 6750 b64token: what an `Authorization: Bearer` header can carry as it is.
_BEARER = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


class SecretProblem(ValueError):
    """Why a configured secret cannot be used; `check_id` is its system check's id."""

    def __init__(
        self,
        knob: str,
        reason: str,
        check_id: str,
        *,
        entry: int | None = None,
        entries: int | None = None,
    ) -> None:
        self.knob, self.reason, self.check_id = knob, reason, check_id
        self.entry, self.entries = entry, entries
        where = knob if entry is None else f"{knob} entry {entry} of {entries}"
        super().__init__(f"{where} {reason}")


def _utf8(value: str) -> bytes | None:
    """The UTF-8 bytes of a value read from the environment, or None: an undecodable byte
    arrives as a lone surrogate (os.environ's surrogateescape) that no signer can encode."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        return None


def _base64(text: str) -> bytes | None:
    if _BASE64.fullmatch(text) is None:
        return None
    digits = text.rstrip("=")
    if len(digits) % 4 == 1:  # no byte sequence encodes to this many digits
        return None
    try:
        return base64.b64decode(digits + "=" * (-len(digits) % 4), validate=True)
    except binascii.Error:
        return None


def seam_keys(value: str) -> tuple[bytes, ...]:
    """The HMAC keys of EVENT_SEAM_SECRET: space-separated entries, each `whsec_<base64>` (the
    decoded bytes) or, without the prefix, the entry's UTF-8 bytes (spec-overlay.md §1.1)."""
    entries = value.split()
    if not entries:
        raise SecretProblem(
            SEAM_KNOB, "is empty: the sale seam would refuse every message.", SEAM_EMPTY_CHECK
        )
    keys = []
    for position, entry in enumerate(entries, start=1):
        where: dict[str, Any] = {"entry": position, "entries": len(entries)}
        if entry.startswith(WHSEC_PREFIX):
            key = _base64(entry.removeprefix(WHSEC_PREFIX))
            if key is None:
                raise SecretProblem(
                    SEAM_KNOB, "is not valid base64 after whsec_.", SEAM_ENTRY_CHECK, **where
                )
            if not key:
                raise SecretProblem(SEAM_KNOB, "is empty after whsec_.", SEAM_ENTRY_CHECK, **where)
        else:
            key = _utf8(entry)
            if key is None:
                raise SecretProblem(SEAM_KNOB, "is not UTF-8 text.", SEAM_ENTRY_CHECK, **where)
        keys.append(key)
    return tuple(keys)


def capability_secret(value: str | None) -> str:
    """EVENT_CAPABILITY_SECRET as the signer uses it: 32 characters at least, UTF-8 text."""
    secret = value or ""
    if len(secret) < MIN_CAPABILITY_LENGTH:
        raise SecretProblem(
            CAPABILITY_KNOB, "is missing or shorter than 32 characters.", CAPABILITY_CHECK
        )
    if _utf8(secret) is None:
        raise SecretProblem(CAPABILITY_KNOB, "is not UTF-8 text.", CAPABILITY_CHECK)
    return secret


def gateway_token(value: str | None, *, required: bool) -> str:
    """EVENT_SMS_GATEWAY_TOKEN as the `Authorization: Bearer` header carries it (RFC 6750
    b64token: letters, digits and `-._~+/`, then `=`). Empty is refused only when the wired SMS
    adapter posts to the gateway (`required`)."""
    token = value or ""
    if not token:
        if required:
            raise SecretProblem(
                GATEWAY_TOKEN_KNOB,
                "is empty, but the SMS adapter posts every SMS to the gateway with it.",
                GATEWAY_TOKEN_CHECK,
            )
        return token
    if _BEARER.fullmatch(token) is None:
        raise SecretProblem(
            GATEWAY_TOKEN_KNOB,
            "holds a character a bearer token cannot carry (allowed: letters, digits, "
            "- . _ ~ + / and trailing =).",
            GATEWAY_TOKEN_CHECK,
        )
    return token


def _needs_gateway(adapter_path: str) -> bool:
    from django.utils.module_loading import import_string

    try:
        adapter: Any = import_string(adapter_path)
    except ImportError:
        return False  # a broken dotted path is ports_check's to report
    return bool(getattr(adapter, "needs_gateway_url", False))


def problems() -> list[SecretProblem]:
    """Every configured secret that cannot be used, one problem per knob."""
    from django.conf import settings

    found = []
    readers = (
        lambda: capability_secret(getattr(settings, CAPABILITY_KNOB, "")),
        lambda: seam_keys(getattr(settings, SEAM_KNOB, "") or ""),
        lambda: gateway_token(
            getattr(settings, GATEWAY_TOKEN_KNOB, ""),
            required=_needs_gateway(getattr(settings, "EVENT_SMS_QUEUE", "") or ""),
        ),
    )
    for read in readers:
        try:
            read()
        except SecretProblem as problem:
            found.append(problem)
    return found

"""The desk's offline mode, server side: the signed snapshot a door decides from while the
network is down, and the conflicts its replayed scans may reveal (docs/spec.md "Offline mode").

Invariants:
- the snapshot lists no barcode: each entry is keyed by HMAC-SHA256(barcode) under a random key
  made for that snapshot, which the snapshot carries (the page hashes what it scans with it);
- its `signature` is a Django signature (SECRET_KEY, salt `desk.snapshot`) over the event, the
  generation time and a digest of the entries; a replayed offline scan carries it back, and
  the server refuses one it did not sign for that event, or older than SIGNATURE_MAX_AGE;
- the server decides every replayed scan again on its own rows: the snapshot only tells what
  the door saw; an offline admission the server does not confirm is one `OfflineConflict`
  (unique per registration, replaying desk and real scan time: a retried replay adds none).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core import signing

from desk import selectors
from desk.models import OfflineConflict
from events import rules as core_rules
from events.models import Event, EventAuditLog, Registration
from events.services.audit import Actor

SALT = "desk.snapshot"
# A door keeps deciding from its last list for a whole day at most; its scans come back within
# SCAN_MAX_AGE of being made, so a signature older than both is no list of this session's.
SCAN_MAX_AGE = timedelta(hours=24)
SIGNATURE_MAX_AGE = timedelta(hours=48)
# A door's clock may run a little ahead of the server's.
SCAN_MAX_SKEW = timedelta(minutes=2)
ADMITTED = "confirmed_registration"
ADMISSION_VERBS = ("registration.scanned", "registration.attendance_confirmed")


@dataclass(frozen=True)
class Replay:
    """A scan sent after it was made: its real time, whether the door was offline, what the
    door showed then, and when the list it decided from was made (offline only)."""

    scanned_at: datetime
    offline: bool = False
    offline_status: str | None = None
    snapshot_at: datetime | None = None


def barcode_key(barcode: str, key: bytes) -> str:
    return hmac.new(key, barcode.encode("utf-8"), hashlib.sha256).hexdigest()


def new_hash_key() -> bytes:
    return secrets.token_bytes(32)


def sign_snapshot(*, event_id: int, generated_at: datetime, body: Any) -> str:
    digest = hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode()
    ).hexdigest()
    return signing.dumps(
        {"e": event_id, "t": generated_at.isoformat(), "d": digest}, salt=SALT, compress=False
    )


def snapshot_time(*, signature: str, event_id: int | None) -> datetime | None:
    """When the snapshot signed by `signature` was made, or None when the signature is not
    ours, is too old, or names another event than `event_id`."""
    try:
        payload = signing.loads(signature, salt=SALT, max_age=SIGNATURE_MAX_AGE)
    except (signing.BadSignature, ValueError):
        # ValueError: a lone surrogate in the text (JSON carries one as an escape) fails the
        # signature's comparison, which encodes it as UTF-8 (UnicodeEncodeError), not as a bad
        # signature; and anything else a text no one signed may make the decoding raise.
        return None
    if not isinstance(payload, dict) or event_id is None or payload.get("e") != event_id:
        return None
    try:
        return datetime.fromisoformat(payload["t"])
    except (KeyError, TypeError, ValueError):
        return None


def audit_data(replay: Replay | None) -> dict[str, Any]:
    """What the scan's audit row adds for a replay: the real scan time beside the row's own
    server time, and the offline facts."""
    if replay is None:
        return {}
    data: dict[str, Any] = {"scanned_at": replay.scanned_at.isoformat()}
    if replay.offline:
        data["offline"] = True
        data["offline_status"] = replay.offline_status
        if replay.snapshot_at is not None:
            data["snapshot_at"] = replay.snapshot_at.isoformat()
    return data


def is_conflict(replay: Replay | None, status: str) -> bool:
    """The door admitted offline, the server does not (already attended, cancelled, …)."""
    return (
        replay is not None
        and replay.offline
        and replay.offline_status == ADMITTED
        and status != ADMITTED
    )


def record_conflict(
    *, registration: Registration, replay: Replay | None, status: str, who: Actor
) -> None:
    """One conflict row (none more for the same scan: the unique constraint, ON CONFLICT DO
    NOTHING), naming the admission the server kept when a desk made it. Called inside the
    transaction of the scan's audit row."""
    assert replay is not None  # noqa: S101 - is_conflict said so
    kept = (
        EventAuditLog.objects.filter(
            registration_id=registration.pk,
            verb__in=ADMISSION_VERBS,
            data__status=ADMITTED,
        )
        .order_by("at", "id")
        .values_list("actor_id", "actor_label", "at", "data")
        .first()
    )
    kept_id, kept_label, kept_at = "", "", registration.date_closed
    if kept is not None:
        kept_id, kept_label, at, data = kept
        kept_at = _parsed(data.get("scanned_at")) or at
    OfflineConflict.objects.bulk_create(
        [
            OfflineConflict(
                event_id=registration.event_id,
                registration_id=registration.pk,
                server_status=status,
                kept_actor_id=kept_id,
                kept_actor_label=kept_label,
                kept_at=kept_at,
                offline_actor_id=who.id,
                offline_actor_label=who.label[:255],
                offline_scanned_at=replay.scanned_at,
                snapshot_at=replay.snapshot_at,
            )
        ],
        ignore_conflicts=True,
    )


def _parsed(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def snapshot(*, event: Event, now: datetime) -> dict[str, Any]:
    """What a door needs to decide while offline (the event's rules of §5.1 and, per
    registration, its state, name, ticket and slot), signed. `event.stage` loaded by the
    caller; two queries whatever the number of registrations (the event, its registrations)."""
    key = new_hash_key()
    rows = [
        {
            "key": barcode_key(reg.barcode, key),
            "id": reg.pk,
            "state": reg.state,
            "name": reg.name,
            "ticket_name": reg.ticket.name if reg.ticket is not None else None,
            "slot_id": reg.slot_id,
            "slot_name": str(reg.slot) if reg.slot is not None else None,
            "has_to_pay": core_rules.has_to_pay(reg),
            "date_closed": reg.date_closed.isoformat() if reg.date_closed else None,
        }
        for reg in selectors.snapshot_registrations(event=event)
    ]
    body = {
        "event": {
            "id": event.pk,
            "name": event.name,
            "closed": core_rules.is_closed(event, now=now),
            "date_end": event.date_end.isoformat(),
        },
        "generated_at": now.isoformat(),
        "barcode_key": key.hex(),
        "registrations": rows,
    }
    body["signature"] = sign_snapshot(event_id=event.pk, generated_at=now, body=body)
    return body

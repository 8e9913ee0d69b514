"""`receive`: one signed host message in, one answer out (spec-overlay.md §1.1–§1.5).

Invariants:
- refusals before the inbox (secret, signature, timestamp, size, schema) store nothing;
- the inbox insert and the effect are one transaction: the row is inserted first with
  `INSERT … ON CONFLICT (source, message_id) DO NOTHING`, so of N copies of one message (in
  sequence or at the same instant) exactly one applies; the others wait on the unique index
  and answer `duplicate`;
- a business refusal of the effect (any DomainError) rolls the effect back (savepoint) and
  keeps the message `parked` with its error; anything else propagates: the whole transaction
  rolls back, nothing is stored, and the host's retry delivers the message again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from events import inputs
from events.errors import Code, DomainError
from events.models import ActorType
from events.services import audit, registrations
from seams.errors import MalformedMessage
from seams.messages import Message, parse
from seams.models import InboxStatus, SeamInbox
from seams.services import signature
from seams.services.apply import apply

SOURCE = "sale"
MAX_BODY = 256 * 1024
MAX_MESSAGE_ID = 255
PARKED_HTTP_STATUS = 409


@dataclass(frozen=True)
class SeamResult:
    status: str  # applied | duplicate | stale | parked
    http_status: int
    payload: dict[str, Any] = field(default_factory=dict)
    inbox_id: int | None = None


class PayloadTooLarge(DomainError):
    code = Code.PAYLOAD_TOO_LARGE


def seam_actor(message_id: str) -> audit.Actor:
    return audit.Actor(ActorType.SEAM, id=message_id[:64], label=f"sale seam {message_id}")


def decode(body: bytes) -> tuple[Any, Message]:
    """The body as (JSON document, Message), or MalformedMessage naming the failing path."""
    try:
        document = inputs.load_json(body)
    except ValueError:  # not JSON, not UTF-8, or nested deeper than inputs.MAX_JSON_DEPTH
        raise MalformedMessage("The body is not JSON.", path="$") from None
    return document, parse(document)


def _check_message_id(message_id: str) -> None:
    if len(message_id) > MAX_MESSAGE_ID or any(ord(c) < 32 or c == "\x7f" for c in message_id):
        raise MalformedMessage(
            f"webhook-id must be 1 to {MAX_MESSAGE_ID} printable characters.",
            path="webhook-id",
        )


def receive(*, headers: Mapping[str, str], body: bytes) -> SeamResult:
    """Verify, validate, record and apply one message; see the module invariants."""
    message_id, _ = signature.verify(headers=headers, body=body)
    if len(body) > MAX_BODY:
        raise PayloadTooLarge(f"The body is over {MAX_BODY // 1024} KiB.", limit=MAX_BODY)
    _check_message_id(message_id)
    document, message = decode(body)
    return record_and_apply(message_id=message_id, document=document, message=message)


def record_and_apply(*, message_id: str, document: Any, message: Message) -> SeamResult:
    """Record the message and apply it, one transaction. A connection dropped since the last
    request (a failover, a restart) is Django's to replace: with CONN_HEALTH_CHECKS (on in
    config/settings.py) the request's first atomic block tests the kept connection first. A
    registration barcode drawn twice (the booking inside runs without a savepoint of its own:
    `register(savepoint=False)`) rolls the whole transaction back; it is run again, with new
    barcodes, as `register` retries its own."""
    for attempt in range(registrations.BARCODE_ATTEMPTS):
        try:
            return _record_and_apply(message_id=message_id, document=document, message=message)
        except IntegrityError as exc:
            if (
                not registrations.is_barcode_collision(exc)
                or connection.in_atomic_block  # a caller's transaction: only it can roll back
                or attempt == registrations.BARCODE_ATTEMPTS - 1
            ):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _record_and_apply(*, message_id: str, document: Any, message: Message) -> SeamResult:
    with transaction.atomic():
        inbox_id = _insert(message_id=message_id, document=document, message=message)
        if inbox_id is None:
            return SeamResult(InboxStatus.DUPLICATE, 200, {"status": InboxStatus.DUPLICATE})
        return apply_recorded(inbox_id, message, seam_actor(message_id), recorded_as_applied=True)


def apply_recorded(
    inbox_id: int, message: Message, actor: Any, *, recorded_as_applied: bool = False
) -> SeamResult:
    """Apply the message of an inbox row the caller holds; record the outcome on the row."""
    try:
        with transaction.atomic():
            outcome = apply(message=message, actor=actor)
    except DomainError as error:
        _park(inbox_id, message, error, actor)
        return SeamResult(
            InboxStatus.PARKED,
            PARKED_HTTP_STATUS,
            {"status": InboxStatus.PARKED, **error.as_dict()},
            inbox_id,
        )
    if outcome.status != InboxStatus.APPLIED:
        SeamInbox.objects.filter(pk=inbox_id).update(
            status=outcome.status, applied_at=None, error_code="", error_detail=""
        )
    elif not recorded_as_applied:
        SeamInbox.objects.filter(pk=inbox_id).update(
            status=InboxStatus.APPLIED, applied_at=timezone.now(), error_code="", error_detail=""
        )
    return SeamResult(outcome.status, 200, {"status": outcome.status, **outcome.summary}, inbox_id)


# One fixed statement: the ORM has no INSERT … ON CONFLICT DO NOTHING that answers whether it
# inserted (bulk_create's ignore_conflicts returns no id). Built from constants: the table name
# from model meta; values are parameters.
_INBOX_INSERT = f"""
    INSERT INTO {SeamInbox._meta.db_table}
           (source, message_id, type, order_ref, body, received_at, status,
            error_code, error_detail, applied_at)
    VALUES (%s, %s, %s, %s, %s::jsonb, now(), %s, '', '', now())
    ON CONFLICT ON CONSTRAINT seam_inbox_message DO NOTHING
    RETURNING id
"""  # noqa: S608


def _insert(*, message_id: str, document: Any, message: Message) -> int | None:
    """The inbox row (status `applied` until decided otherwise in this same transaction), or
    None when this message id is already there: a copy inserting at the same instant waits on
    the unique index for the first one's transaction, then inserts nothing."""
    params = [
        SOURCE,
        message_id,
        message.type,
        message.order_ref,
        json.dumps(document),
        InboxStatus.APPLIED,
    ]
    with connection.cursor() as cursor:
        cursor.execute(_INBOX_INSERT, params)
        row = cursor.fetchone()
    return row[0] if row else None


def _park(inbox_id: int, message: Message, error: DomainError, actor: Any) -> None:
    detail = json.dumps({"message": error.message, **error.details}, default=str)
    SeamInbox.objects.filter(pk=inbox_id).update(
        status=InboxStatus.PARKED, error_code=str(error.code), error_detail=detail, applied_at=None
    )
    audit.record(
        actor=actor,
        verb="seam_message.parked",
        data={
            "inbox": inbox_id,
            "type": message.type,
            "order": message.order_ref,
            "code": str(error.code),
        },
    )

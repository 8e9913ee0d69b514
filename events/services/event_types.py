"""Event type verbs: the type itself and its scheduler lines (`TypeMail`) (spec.md §2.3, §6).

Invariants:
- a type is a template: editing it, or its lines, never changes an event already created from
  it (template-apply happens once, in `events.create_event`);
- every write locks the EventType row first (the type's tickets, questions and lines are
  changed under that one lock, by this module and by `tickets` / `questions`), then writes,
  then writes exactly one audit row (`event_type.*`, `type_mail.*`) in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from events.errors import ValidationFailed
from events.models import EventType, Tag, TypeMail
from events.services import audit
from events.services.events import check_cancel_deadline_hours
from events.services.reference import apply_fields, check_fields, jsonable

EVENT_TYPE_FIELDS = frozenset(
    {
        "name",
        "sequence",
        "note",
        "ticket_instructions",
        "default_timezone",
        "has_seats_limitation",
        "seats_max",
        "cancel_deadline_hours",
    }
)
TYPE_MAIL_FIELDS = frozenset(
    {
        "sequence",
        "interval_nbr",
        "interval_unit",
        "interval_type",
        "template_ref",
        "notification_type",
    }
)


def lock_event_type(event_type_id: int) -> EventType:
    return EventType.objects.select_for_update().get(pk=event_type_id)


def _check_tz(fields: dict[str, Any]) -> None:
    import zoneinfo

    name = fields.get("default_timezone")
    if name is None:
        return
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValidationFailed(f"{name!r} is not a time zone.", field="default_timezone") from None


def create_event_type(*, actor: Any, tags: Iterable[Tag] = (), **fields: Any) -> EventType:
    check_fields(fields, EVENT_TYPE_FIELDS)
    _check_tz(fields)
    check_cancel_deadline_hours(fields.get("cancel_deadline_hours"))
    tags = list(tags)
    with transaction.atomic():
        event_type = EventType(**fields)
        event_type.save(force_insert=True)
        if tags:
            event_type.tags.set(tags)
        audit.record(
            actor=actor,
            verb="event_type.created",
            data={
                "id": event_type.pk,
                **{k: jsonable(v) for k, v in fields.items()},
                "tags": sorted(t.pk for t in tags),
            },
        )
    return event_type


def update_event_type(
    *, event_type: EventType, actor: Any, tags: Iterable[Tag] | None = None, **fields: Any
) -> EventType:
    """Change the type's fields and (when given) its tags; one audit row naming both."""
    check_fields(fields, EVENT_TYPE_FIELDS)
    _check_tz(fields)
    check_cancel_deadline_hours(fields.get("cancel_deadline_hours"))
    with transaction.atomic():
        locked = lock_event_type(event_type.pk)
        changes = apply_fields(locked, fields)
        if changes:
            locked.save(update_fields=list(changes))
        if tags is not None:
            before = sorted(locked.tags.values_list("pk", flat=True))
            after = sorted({t.pk for t in tags})
            if before != after:
                locked.tags.set(after)
                changes["tags"] = [before, after]
        if changes:
            audit.record(actor=actor, verb="event_type.updated", data={"id": locked.pk, **changes})
    return locked


def delete_event_type(*, event_type: EventType, actor: Any) -> None:
    """Its tickets, questions and lines go with it; events made from it keep their copies
    (Event.event_type is SET_NULL)."""
    with transaction.atomic():
        locked = lock_event_type(event_type.pk)
        audit.record(
            actor=actor,
            verb="event_type.deleted",
            data={"id": locked.pk, "name": locked.name},
        )
        locked.delete()


# --- scheduler lines of a type (copied to each new event by create_event) -------------------


def _check_template_ref(fields: dict[str, Any]) -> None:
    if "template_ref" in fields and not (fields["template_ref"] or "").strip():
        raise ValidationFailed("A scheduler line needs a template.", field="template_ref")


def create_type_mail(*, event_type: EventType, actor: Any, **fields: Any) -> TypeMail:
    check_fields(fields, TYPE_MAIL_FIELDS)
    _check_template_ref({"template_ref": "", **fields})
    with transaction.atomic():
        lock_event_type(event_type.pk)
        line = TypeMail(event_type_id=event_type.pk, **fields)
        line.save(force_insert=True)
        audit.record(
            actor=actor,
            verb="type_mail.created",
            data={
                "id": line.pk,
                "event_type": event_type.pk,
                **{k: jsonable(v) for k, v in fields.items()},
            },
        )
    return line


def update_type_mail(*, line: TypeMail, actor: Any, **fields: Any) -> TypeMail:
    check_fields(fields, TYPE_MAIL_FIELDS)
    _check_template_ref(fields)
    with transaction.atomic():
        lock_event_type(line.event_type_id)
        locked = TypeMail.objects.select_for_update().get(pk=line.pk)
        changes = apply_fields(locked, fields)
        if not changes:
            return locked
        locked.save(update_fields=list(changes))
        audit.record(
            actor=actor,
            verb="type_mail.updated",
            data={"id": locked.pk, "event_type": locked.event_type_id, **changes},
        )
    return locked


def delete_type_mail(*, line: TypeMail, actor: Any) -> None:
    with transaction.atomic():
        lock_event_type(line.event_type_id)
        locked = TypeMail.objects.select_for_update().get(pk=line.pk)
        audit.record(
            actor=actor,
            verb="type_mail.deleted",
            data={
                "id": locked.pk,
                "event_type": locked.event_type_id,
                "template_ref": locked.template_ref,
            },
        )
        locked.delete()

"""Reads of the attendance desk (spec-overlay.md §5); each one a fixed number of queries.

Whether an event admits anyone (§5.1 step 4) is core's one decision of "closed"
(`events.rules.closed_reason` / `closed_events`: cancelled by kanban or by a cancelled
stage, in another ending stage, or finished), on the stage the lookup already joined.
Counters come from the one seat module: attended = `used`, expected = `reserved + used` (the
attendees holding a seat; a waiting-list offer holds one too, but nobody comes to the door
with it), per slot when the desk admits for one slot.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import OuterRef
from django.db.models.expressions import RawSQL

from events import rules as core_rules
from events.models import Event, Registration, RegistrationAnswer, Slot, Stage, Ticket
from events.read import statements
from events.read.statements import orm_sql
from events.services import registrations, seats

UPCOMING_LIMIT = 50

# The scan's reads are written by the ORM once per process and kept
# (`events.read.statements.orm_sql`), then run prepared (`statements.rows`): compiling a query
# costs more CPU than PostgreSQL spends running it, and planning it more than running it too
# (measured: the lookup's five-model join 0.4 ms to plan, 0.08 ms to run; the permission read
# 1.2 ms and 0.17 ms). Their text never changes.

# The lookup's models, each with its path from the registration, in select order.
_JOINED: tuple[tuple[type[Any], str], ...] = (
    (Registration, ""),
    (Event, "event__"),
    (Stage, "event__stage__"),
    (Ticket, "ticket__"),
    (Slot, "slot__"),
)
_NAMES = {model: tuple(f.attname for f in model._meta.concrete_fields) for model, _ in _JOINED}


def _answers_of(registration: Any) -> ArraySubquery:
    """The choice answers of `registration` (an OuterRef or an id) as "Question: Choice", in
    question order (answers without a choice, free text, are not shown)."""
    return ArraySubquery(
        RegistrationAnswer.objects.filter(registration_id=registration, choice__isnull=False)
        .order_by("question__sequence", "question_id")
        .annotate(shown=statements.joined_text("question__title", "choice__name", ": "))
        .values("shown")
    )


@cache
def _lookup_sql(key: str) -> str:
    """The registration with its event, the event's stage, its ticket and slot (outer-joined:
    either may be unset), found by `key` (`barcode`, `pk`), and its choice answers last."""
    names = [path + name for model, path in _JOINED for name in _NAMES[model]]
    probe = {"barcode": "", "pk": 0}[key]
    query = (
        Registration.objects.filter(**{key: probe})
        .order_by()
        .annotate(
            desk_answers=_answers_of(OuterRef("pk")),
            # The row versions the scan decides on (an admission is written only while both
            # rows are still these: registrations.Seen). S611: table names from model meta.
            event_version=RawSQL(registrations.row_version(Event._meta.db_table), ()),  # noqa: S611
            registration_version=RawSQL(  # noqa: S611
                registrations.row_version(Registration._meta.db_table), ()
            ),
        )
        .values_list(*names, "desk_answers", "event_version", "registration_version")
    )
    return orm_sql(query, [probe])


class Found(NamedTuple):
    """A registration found at the desk: with its event (and the event's stage), ticket and
    slot set on it (no query when read), its choice answers ("Question: Choice", as
    `choice_answers`) and the versions of its row and its event's row the scan decides on."""

    registration: Registration
    answers: list[str]
    seen: registrations.Seen


def _lookup(key: str, value: Any) -> Found | None:
    """One prepared statement: the row of `_lookup_sql`, as instances (`Model.from_db`)."""
    found_rows = statements.rows(_lookup_sql(key), [value])
    if not found_rows:
        return None
    row = found_rows[0]
    found = []
    start = 0
    for model, _ in _JOINED:
        names = _NAMES[model]
        values = row[start : start + len(names)]
        start += len(names)
        pk = values[names.index(model._meta.pk.attname)]
        found.append(None if pk is None else statements.instance(model, names, values))
    reg, event, stage, ticket, slot = found
    event.stage = stage
    reg.event, reg.ticket, reg.slot = event, ticket, slot
    seen = registrations.Seen(event=row[start + 1], registration=row[start + 2])
    return Found(reg, list(row[start]), seen)


def scanned_registration(*, barcode: str) -> Found | None:
    """The registration whose barcode is exactly `barcode` (the unique index: no case folding,
    no prefix), as `Found`: one query."""
    return _lookup("barcode", barcode)


def desk_registration(*, registration_id: int) -> Found | None:
    """One registration for the manual confirmation, joined like `scanned_registration`."""
    return _lookup("pk", registration_id)


def is_not_ongoing(event: Event, *, now: datetime) -> bool:
    """§5.1 step 4: the event is closed (core's one decision; `event.stage` loaded by the
    caller). Not started yet is fine (early entrance)."""
    return core_rules.is_closed(event, now=now)


def slot_event_id(*, slot_id: int) -> int | None:
    """The event of a slot, or None when no slot has this id."""
    return Slot.objects.filter(pk=slot_id).values_list("event_id", flat=True).first()


def desk_slots(*, event: Event) -> list[Slot]:
    """The slots a multi-slot event's desk chooses from, in time order (none otherwise)."""
    if not event.is_multi_slots:
        return []
    return list(Slot.objects.filter(event=event).order_by("start_datetime", "id"))


def choice_answers(*, registration_id: int) -> list[str]:
    """The registration's choice answers as "Question: Choice", in question order (one query;
    answers without a choice, free text, are not shown). The scan's lookup reads the same in
    its own statement (`Found.answers`)."""
    query = Registration.objects.filter(pk=registration_id).values_list(_answers_of(OuterRef("pk")))
    found = query.first()
    return list(found[0]) if found is not None else []


def counters(*, event: Event, slot_id: int | None = None) -> dict[str, int]:
    """attended (seats `used`) / expected (`reserved + used`: open + done registrations), from
    the seat ledger: the event's, or one slot's."""
    if slot_id is not None:
        summary = seats.slot_summary(event=event, slot_id=slot_id)
    else:
        summary = seats.event_summary(event=event)
    return {"attended": summary.used, "expected": summary.reserved + summary.used}


def snapshot_registrations(*, event: Event) -> list[Registration]:
    """Every registration of the event, whatever its state, with only what the door's offline
    decision and answer need (the ticket's name, the slot's label): one query."""
    return list(
        Registration.objects.filter(event=event)
        .select_related("ticket", "slot")
        .only(
            "barcode",
            "state",
            "name",
            "sale_status",
            "is_paid",
            "date_closed",
            "event_id",
            "ticket__name",
            "slot__date",
            "slot__start_hour",
            "slot__end_hour",
        )
        .order_by("pk")
    )


def desk_event(*, event_id: int) -> Event | None:
    return Event.objects.select_related("stage").filter(pk=event_id, active=True).first()


def desk_events(*, now: datetime) -> list[dict]:
    """Ongoing and upcoming events to pick at the desk (not closed: core's `closed_events`),
    soonest first, each with its counters: three queries whatever the number of events."""
    events = list(
        Event.objects.filter(active=True)
        .exclude(core_rules.closed_events(now=now))
        .select_related("stage")
        .order_by("date_begin", "id")[:UPCOMING_LIMIT]
    )
    totals = seats.summaries(events)
    return [
        {
            "event": event,
            "ongoing": core_rules.is_ongoing(event, now=now),
            "attended": totals[event.pk].used,
            "expected": totals[event.pk].reserved + totals[event.pk].used,
        }
        for event in events
    ]

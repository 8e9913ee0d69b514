"""Event lifecycle (spec.md §2.3, §5): template-apply once, update, mark_done, done_sweep."""

from __future__ import annotations

import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.utils import timezone

from events import hooks
from events.errors import DomainError
from events.models import (
    Event,
    EventAuditLog,
    KanbanState,
    Mail,
    Question,
    QuestionType,
    Stage,
    Ticket,
)
from events.services import audit
from events.services import events as event_services
from tests.events import factories

TICKET_FIELDS = (
    "name",
    "description",
    "sequence",
    "seats_max",
    "price",
    "product_ref",
    "limit_max_per_order",
)


@pytest.fixture
def template():
    event_type = factories.EventTypeFactory(
        name="Conference",
        has_seats_limitation=True,
        seats_max=40,
        default_timezone="Europe/Brussels",
        note="internal note",
        ticket_instructions="bring your badge",
    )
    event_type.tags.set([factories.TagFactory(), factories.TagFactory()])
    factories.TypeTicketFactory(
        event_type=event_type,
        name="Standard",
        description="the usual",
        sequence=2,
        seats_max=30,
        price=Decimal("0"),
        product_ref="PROD-STD",
        limit_max_per_order=4,
    )
    factories.TypeTicketFactory(
        event_type=event_type,
        name="VIP",
        description="front row",
        sequence=1,
        seats_max=10,
        price=Decimal("99.50"),
        product_ref="PROD-VIP",
        limit_max_per_order=2,
    )
    menu = factories.QuestionFactory(
        event=None,
        event_type=event_type,
        title="Menu",
        question_type=QuestionType.SIMPLE_CHOICE,
        is_mandatory_answer=True,
        sequence=1,
    )
    factories.QuestionChoiceFactory(question=menu, name="Meat", sequence=1)
    factories.QuestionChoiceFactory(question=menu, name="Veggie", sequence=2)
    factories.QuestionFactory(
        event=None,
        event_type=event_type,
        title="Company size",
        question_type=QuestionType.TEXT_BOX,
        once_per_order=True,
        sequence=2,
    )
    factories.TypeMailFactory(
        event_type=event_type,
        interval_nbr=2,
        interval_unit="days",
        interval_type="before_event",
        template_ref="reminder",
        sequence=1,
    )
    factories.TypeMailFactory(
        event_type=event_type,
        interval_nbr=0,
        interval_unit="now",
        interval_type="after_sub",
        template_ref="welcome",
        sequence=2,
    )
    factories.TypeMailFactory(
        event_type=event_type,
        interval_nbr=1,
        interval_unit="hours",
        interval_type="after_event",
        template_ref="thanks",
        notification_type="sms",
        sequence=3,
    )
    return event_type


def tickets_of(**owner) -> list[tuple]:
    return list(Ticket.objects.filter(**owner).order_by("sequence").values_list(*TICKET_FIELDS))


def questions_of(**owner) -> list[tuple]:
    return [
        (
            q.title,
            q.question_type,
            q.is_mandatory_answer,
            q.once_per_order,
            q.sequence,
            q.active,
            [(c.name, c.sequence) for c in q.choices.all()],
        )
        for q in Question.objects.filter(**owner).order_by("sequence").prefetch_related("choices")
    ]


def mails_of(event) -> list[tuple]:
    return list(
        Mail.objects.filter(event=event)
        .order_by("sequence")
        .values_list(
            "interval_nbr", "interval_unit", "interval_type", "template_ref", "notification_type"
        )
    )


@pytest.mark.django_db
def test_a_new_event_gets_every_listed_item_of_its_type_once(template, actor):
    begin = timezone.now() + timedelta(days=30)
    calls = []

    def booth_hook(event, event_type, who):
        calls.append((event.pk, event_type.pk, who, Ticket.objects.filter(event=event).count()))

    hooks.event_created_from_type.append(booth_hook)
    try:
        event = event_services.create_event(
            name="Summit",
            date_begin=begin,
            date_end=begin + timedelta(hours=8),
            event_type=template,
            actor=actor,
        )
    finally:
        hooks.event_created_from_type.remove(booth_hook)

    event = Event.objects.get(pk=event.pk)
    assert (
        event.seats_limited,
        event.seats_max,
        event.date_tz,
        event.note,
        event.ticket_instructions,
        event.event_type_id,
    ) == (True, 40, "Europe/Brussels", "internal note", "bring your badge", template.pk)
    assert set(event.tags.all()) == set(template.tags.all())
    assert tickets_of(event=event) == tickets_of(event_type=template)
    assert tickets_of(event=event) == [
        ("VIP", "front row", 1, 10, Decimal("99.50"), "PROD-VIP", 2),
        ("Standard", "the usual", 2, 30, Decimal("0.00"), "PROD-STD", 4),
    ]
    assert questions_of(event=event) == questions_of(event_type=template)
    assert questions_of(event=event)[0][-1] == [("Meat", 1), ("Veggie", 2)]
    assert mails_of(event) == [
        (2, "days", "before_event", "reminder", "mail"),
        (0, "now", "after_sub", "welcome", "mail"),
        (1, "hours", "after_event", "thanks", "sms"),
    ]
    dates = {m.template_ref: m for m in Mail.objects.filter(event=event)}
    assert dates["reminder"].scheduled_date == begin - timedelta(days=2)
    assert dates["thanks"].scheduled_date == begin + timedelta(hours=9)
    assert dates["welcome"].scheduled_date == dates["welcome"].created_at
    assert calls == [(event.pk, template.pk, actor, 2)]  # after the template lines exist
    assert list(EventAuditLog.objects.filter(event=event).values_list("verb", "data")) == [
        ("event.created", {"event_type": template.pk})
    ]
    # the template's own lines are untouched
    assert Ticket.objects.filter(event_type=template, event=None).count() == 2


@pytest.mark.django_db
def test_explicit_fields_win_over_the_template(template, actor):
    begin = timezone.now() + timedelta(days=30)

    event = event_services.create_event(
        name="Small",
        date_begin=begin,
        date_end=begin + timedelta(hours=2),
        date_tz="America/New_York",
        event_type=template,
        seats_max=12,
        actor=actor,
    )

    assert (event.date_tz, event.seats_limited, event.seats_max) == ("America/New_York", True, 12)


@pytest.mark.django_db
def test_template_edits_and_type_changes_later_change_nothing_but_are_audited(template, actor):
    begin = timezone.now() + timedelta(days=30)
    event = event_services.create_event(
        name="Summit",
        date_begin=begin,
        date_end=begin + timedelta(hours=8),
        event_type=template,
        actor=actor,
    )
    applied = (
        tickets_of(event=event),
        questions_of(event=event),
        mails_of(event),
        set(event.tags.values_list("pk", flat=True)),
    )

    # later edits of the type
    template.seats_max = 999
    template.note = "changed"
    template.save()
    factories.TypeTicketFactory(event_type=template, name="Late ticket")
    factories.TypeMailFactory(event_type=template, template_ref="late")
    template.tags.add(factories.TagFactory())
    # and a change of the event's type
    other = factories.EventTypeFactory(has_seats_limitation=False, note="other note")
    factories.TypeTicketFactory(event_type=other, name="Other ticket")
    event_services.update_event(event=event, event_type=other, actor=actor)

    event = Event.objects.get(pk=event.pk)
    assert (event.event_type_id, event.seats_limited, event.seats_max, event.note) == (
        other.pk,
        True,
        40,
        "internal note",
    )
    assert (
        tickets_of(event=event),
        questions_of(event=event),
        mails_of(event),
        set(event.tags.values_list("pk", flat=True)),
    ) == applied
    assert list(
        EventAuditLog.objects.filter(event=event).order_by("pk").values_list("verb", "data")
    ) == [
        ("event.created", {"event_type": template.pk}),
        ("event.updated", {"event_type": [template.pk, other.pk]}),
    ]


@pytest.mark.django_db
def test_create_event_without_type_starts_in_the_first_stage(actor):
    begin = timezone.now() + timedelta(days=3)

    event = event_services.create_event(
        name="Plain", date_begin=begin, date_end=begin + timedelta(hours=1), actor=actor
    )

    assert (event.stage.name, event.date_tz, event.seats_limited) == ("New", "UTC", False)
    assert Ticket.objects.filter(event=event).count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"date_end_offset": 0}, "date_end"),
        ({"date_tz": "Mars/Olympus"}, "date_tz"),
        ({"name": "  "}, "name"),
    ],
)
def test_create_event_refusals_write_nothing(fields, field, actor):
    begin = timezone.now() + timedelta(days=3)
    kwargs = {"name": "Fine", "date_begin": begin, "date_end": begin + timedelta(hours=1)}
    if "date_end_offset" in fields:
        kwargs["date_end"] = begin
    else:
        kwargs.update(fields)

    with pytest.raises(DomainError) as caught:
        event_services.create_event(actor=actor, **kwargs)

    assert caught.value.code == "invalid_value"
    assert (Event.objects.count(), EventAuditLog.objects.count()) == (0, 0)


# --- update_event, cancel, publish -------------------------------------------------------------


@pytest.mark.django_db
def test_update_event_audits_changes_and_bumps_the_calendar_sequence(actor):
    event = factories.EventFactory(name="Before")
    new_begin = event.date_begin + timedelta(days=1)

    event_services.update_event(
        event=event,
        name="After",
        date_begin=new_begin,
        date_end=new_begin + timedelta(hours=2),
        actor=actor,
    )
    event_services.update_event(event=event, name="After", actor=actor)  # no change

    event.refresh_from_db()
    assert (event.name, event.ics_sequence) == ("After", 1)
    rows = list(EventAuditLog.objects.filter(event=event).values_list("verb", "data"))
    assert len(rows) == 1
    assert rows[0][0] == "event.updated"
    assert rows[0][1]["name"] == ["Before", "After"]
    assert set(rows[0][1]) == {"name", "date_begin", "date_end"}


@pytest.mark.django_db
def test_kanban_cancel_is_sticky_across_stage_changes(actor):
    event = factories.EventFactory(kanban_state=KanbanState.BLOCKED)
    booked = Stage.objects.get(name="Booked")
    announced = Stage.objects.get(name="Announced")

    event_services.update_event(event=event, stage=booked, actor=actor)
    event.refresh_from_db()
    assert event.kanban_state == KanbanState.NORMAL

    event_services.cancel_event(event=event, actor=actor)
    event_services.update_event(event=event, stage=announced, actor=actor)
    event_services.mark_done(event=event, actor=actor)

    event.refresh_from_db()
    assert (event.stage.name, event.kanban_state) == ("Ended", KanbanState.CANCEL)


@pytest.mark.django_db
def test_slots_cannot_be_switched_once_the_event_has_registrations(actor):
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    factories.RegistrationFactory(event=event, state="draft")
    audit_rows = EventAuditLog.objects.count()

    with pytest.raises(DomainError) as caught:
        event_services.update_event(event=event, is_multi_slots=True, actor=actor)

    assert caught.value.code == "invalid_value"
    event.refresh_from_db()
    assert event.is_multi_slots is False
    assert EventAuditLog.objects.count() == audit_rows
    empty = factories.EventFactory()
    assert event_services.update_event(event=empty, is_multi_slots=True, actor=actor).is_multi_slots


@pytest.mark.django_db
def test_publish_and_unpublish_are_audited_once(actor):
    event = factories.EventFactory(is_published=False)

    event_services.publish(event=event, actor=actor)
    event_services.publish(event=event, actor=actor)
    event_services.unpublish(event=event, actor=actor)

    event.refresh_from_db()
    assert event.is_published is False
    assert list(
        EventAuditLog.objects.filter(event=event).order_by("pk").values_list("verb", "data")
    ) == [
        ("event.published", {"is_published": [False, True]}),
        ("event.unpublished", {"is_published": [True, False]}),
    ]


# --- mark_done and done_sweep ------------------------------------------------------------------


@pytest.mark.django_db
def test_mark_done_moves_to_the_first_pipe_end_stage_by_sequence(actor):
    factories.StageFactory(name="Wrapped up", sequence=4, pipe_end=True)
    event = factories.EventFactory(kanban_state=KanbanState.DONE)

    event_services.mark_done(event=event, actor=actor)

    event.refresh_from_db()
    assert (event.stage.name, event.kanban_state) == ("Wrapped up", KanbanState.NORMAL)
    assert list(EventAuditLog.objects.filter(event=event).values_list("verb", flat=True)) == [
        "event.done"
    ]


@pytest.mark.django_db
def test_mark_done_without_a_pipe_end_stage_does_nothing(actor):
    event = factories.EventFactory()
    Stage.objects.update(pipe_end=False, is_cancelled=False)  # a cancelled stage ends

    event_services.mark_done(event=event, actor=actor)

    event.refresh_from_db()
    assert event.stage.name == "New"
    assert EventAuditLog.objects.count() == 0
    assert event_services.done_sweep(now=event.date_end + timedelta(days=1)) == 0


@pytest.mark.django_db
def test_done_sweep_marks_only_finished_active_events_outside_pipe_end_stages(now):
    past = {"date_begin": now - timedelta(days=2), "date_end": now - timedelta(days=1)}
    finished = factories.EventFactory(name="finished", **past)
    blocked = factories.EventFactory(name="blocked", kanban_state=KanbanState.BLOCKED, **past)
    cancelled = factories.EventFactory(name="cancelled", kanban_state=KanbanState.CANCEL, **past)
    factories.EventFactory(name="archived", active=False, **past)
    factories.EventFactory(name="ended already", stage=Stage.objects.get(name="Ended"), **past)
    factories.EventFactory(
        name="in Cancelled stage", stage=Stage.objects.get(name="Cancelled"), **past
    )
    factories.EventFactory(name="ends now", date_begin=now - timedelta(hours=1), date_end=now)
    factories.EventFactory(
        name="ongoing", date_begin=now - timedelta(hours=1), date_end=now + timedelta(hours=1)
    )
    factories.EventFactory(
        name="future", date_begin=now + timedelta(days=1), date_end=now + timedelta(days=2)
    )
    before = dict(Event.objects.values_list("name", "stage__name"))

    assert event_services.done_sweep(now=now) == 3
    assert event_services.done_sweep(now=now) == 0

    after = dict(Event.objects.values_list("name", "stage__name"))
    moved = {name for name in after if after[name] != before[name]}
    assert moved == {"finished", "blocked", "cancelled"}
    assert {after[name] for name in moved} == {"Ended"}
    assert dict(
        Event.objects.filter(pk__in=[finished.pk, blocked.pk, cancelled.pk]).values_list(
            "name", "kanban_state"
        )
    ) == {"finished": "normal", "blocked": "normal", "cancelled": "cancel"}
    rows = EventAuditLog.objects.filter(verb="event.done")
    assert sorted(rows.values_list("event_id", flat=True)) == sorted(
        [finished.pk, blocked.pk, cancelled.pk]
    )
    assert set(rows.values_list("actor_type", "actor_label")) == {
        (audit.SYSTEM.type, audit.SYSTEM.label)
    }


@pytest.mark.django_db
def test_manage_py_done_sweep():
    now = timezone.now()
    factories.EventFactory(date_begin=now - timedelta(days=2), date_end=now - timedelta(days=1))
    factories.EventFactory()
    first, second = io.StringIO(), io.StringIO()

    call_command("done_sweep", stdout=first)
    call_command("done_sweep", stdout=second)

    assert first.getvalue().strip() == "1 event(s) marked done"
    assert second.getvalue().strip() == "0 event(s) marked done"


# --- slots follow the event's dates and time zone (spec.md §2.4, §5) -------------------------


def _multi_slot_event(actor, tz="Europe/Brussels"):
    from datetime import UTC, datetime

    begin = datetime(2027, 6, 1, 6, 0, tzinfo=UTC)
    event = event_services.create_event(
        name="Workshops",
        date_begin=begin,
        date_end=begin + timedelta(days=2),
        date_tz=tz,
        is_multi_slots=True,
        actor=actor,
    )
    slot = event_services.add_slot(
        event=event, date=begin.date(), start_hour=9.0, end_hour=12.0, actor=actor
    )
    return event, slot


@pytest.mark.django_db
def test_dates_that_would_leave_a_slot_outside_the_event_are_refused(actor):
    from events.models import EventAuditLog

    event, slot = _multi_slot_event(actor)
    audit_rows = EventAuditLog.objects.count()

    with pytest.raises(DomainError) as caught:
        event_services.update_event(
            event=event, date_begin=event.date_begin + timedelta(days=1), actor=actor
        )

    assert caught.value.code == "invalid_value"
    assert caught.value.details["slots"] == [slot.pk]
    fresh = type(event).objects.get(pk=event.pk)
    assert (fresh.date_begin, fresh.ics_sequence) == (event.date_begin, event.ics_sequence)
    assert EventAuditLog.objects.count() == audit_rows


@pytest.mark.django_db
def test_a_new_time_zone_moves_the_slots_and_their_reminders(actor):
    from events.models import EventAuditLog, Mail, MessageTemplate, Slot

    MessageTemplate.objects.create(ref="remind", name="Reminder", body="Hi")
    event, slot = _multi_slot_event(actor, tz="Europe/Brussels")
    assert slot.start_datetime.hour == 7  # 09:00 in Brussels (CEST) is 07:00 UTC
    from events.services import scheduler

    mail = scheduler.add_scheduler(
        event=event,
        interval_nbr=1,
        interval_unit="hours",
        interval_type="before_event",
        template_ref="remind",
        actor=actor,
    )
    sequence = type(event).objects.get(pk=event.pk).ics_sequence

    event_services.update_event(event=event, date_tz="UTC", actor=actor)

    slot = Slot.objects.get(pk=slot.pk)
    assert (slot.start_datetime.hour, slot.end_datetime.hour) == (9, 12)
    assert type(event).objects.get(pk=event.pk).ics_sequence == sequence + 1
    assert Mail.objects.get(pk=mail.pk).scheduled_date == slot.start_datetime - timedelta(hours=1)
    row = EventAuditLog.objects.filter(event=event, verb="event.updated").latest("id")
    assert row.data["slots_moved"] == [slot.pk]


@pytest.mark.django_db
def test_add_slot_on_a_single_slot_event_is_refused_and_writes_nothing(actor):
    from events.models import EventAuditLog, Slot
    from tests.helpers import snapshot

    begin = timezone.now() + timedelta(days=10)
    event = event_services.create_event(
        name="Talk", date_begin=begin, date_end=begin + timedelta(hours=8), actor=actor
    )
    before = (snapshot(event), EventAuditLog.objects.count())

    with pytest.raises(DomainError) as caught:
        event_services.add_slot(
            event=event, date=begin.date(), start_hour=9.0, end_hour=10.0, actor=actor
        )

    assert (caught.value.code, caught.value.details["field"]) == ("invalid_value", "is_multi_slots")
    assert not Slot.objects.filter(event=event).exists()
    assert (snapshot(event), EventAuditLog.objects.count()) == before


@pytest.mark.django_db
def test_a_new_slot_outside_the_event_is_refused_with_the_same_rule_as_moved_dates(actor):
    event, _slot = _multi_slot_event(actor)
    day_after = (event.date_end + timedelta(days=1)).date()

    with pytest.raises(DomainError) as new_slot:
        event_services.add_slot(
            event=event, date=day_after, start_hour=9.0, end_hour=10.0, actor=actor
        )
    with pytest.raises(DomainError) as moved:
        event_services.update_event(
            event=event, date_begin=event.date_begin + timedelta(days=1), actor=actor
        )

    assert new_slot.value.message == moved.value.message
    assert (new_slot.value.details["field"], moved.value.details["field"]) == ("date", "date_begin")


@pytest.mark.django_db
def test_a_type_line_and_add_scheduler_date_a_multi_slot_event_alike(template, actor):
    """One owner of scheduled dates: the copy of a type's line and `add_scheduler` agree (an
    end-relative line on a multi-slot event without slots is gated at its lower bound)."""
    from events.models import Mail
    from events.services import scheduler

    factories.MessageTemplateFactory(ref="thanks-mail", subject="Thanks", body="<p>Thanks</p>")
    factories.TypeMailFactory(
        event_type=template,
        interval_nbr=1,
        interval_unit="hours",
        interval_type="before_event_end",
        template_ref="thanks-mail",
        sequence=4,
    )
    begin = timezone.now() + timedelta(days=10)
    event = event_services.create_event(
        name="Workshops",
        date_begin=begin,
        date_end=begin + timedelta(days=2),
        event_type=template,
        is_multi_slots=True,
        actor=actor,
    )
    copied = Mail.objects.get(event=event, template_ref="thanks-mail")
    added = scheduler.add_scheduler(
        event=event,
        interval_nbr=1,
        interval_unit="hours",
        interval_type="before_event_end",
        template_ref="thanks-mail",
        actor=actor,
    )

    assert copied.scheduled_date == added.scheduled_date == begin - timedelta(hours=1)

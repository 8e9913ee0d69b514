"""Config verbs (tickets, questions, choices, templates, event types and their lines, tags,
tag categories, stages): each write is a service under the right lock with one audit row, and
the guards refuse with a typed error and nothing written."""

from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection

from events.errors import DomainError
from events.models import EventAuditLog, Registration, SeatLedger, Ticket
from events.services import (
    event_types,
    questions,
    reference,
    registrations,
    seats,
    templates,
    tickets,
)
from tests.events import factories
from tests.helpers import snapshot


def audit_verbs() -> list[str]:
    return list(EventAuditLog.objects.order_by("pk").values_list("verb", flat=True))


# --- tickets ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_ticket_verbs_write_and_audit_once_each(actor):
    event = factories.EventFactory()

    ticket = tickets.create_ticket(event=event, actor=actor, name="Early", seats_max=5)
    tickets.update_ticket(ticket=ticket, actor=actor, price=Decimal("12.50"), seats_max=5)
    tickets.update_ticket(ticket=ticket, actor=actor, price=Decimal("12.50"))  # no change
    tickets.delete_ticket(ticket=ticket, actor=actor)

    assert audit_verbs() == ["ticket.created", "ticket.updated", "ticket.deleted"]
    updated = EventAuditLog.objects.get(verb="ticket.updated")
    assert updated.event_id == event.pk
    assert updated.data == {"ticket": ticket.pk, "event_type": None, "price": ["0.00", "12.50"]}
    assert not Ticket.objects.filter(pk=ticket.pk).exists()


@pytest.mark.django_db
def test_a_ticket_limit_below_the_seats_taken_is_refused_with_nothing_written(actor):
    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event, seats_max=5)
    factories.RegistrationFactory.create_batch(3, event=event, ticket=ticket)
    before = snapshot(event)

    with pytest.raises(DomainError) as caught:
        tickets.update_ticket(ticket=ticket, actor=actor, seats_max=2, name="Renamed")

    assert caught.value.code == "invalid_value"
    assert caught.value.details["field"] == "seats_max"
    assert caught.value.details["taken"] == 3
    assert snapshot(event) == before
    assert Ticket.objects.values_list("seats_max", "name").get(pk=ticket.pk) == (5, ticket.name)
    # Down to exactly the seats taken, or to 0 (= unlimited), is allowed.
    tickets.update_ticket(ticket=ticket, actor=actor, seats_max=3)
    tickets.update_ticket(ticket=ticket, actor=actor, seats_max=0)
    assert Ticket.objects.get(pk=ticket.pk).seats_max == 0


@pytest.mark.django_db
def test_the_ticket_limit_check_is_per_slot_on_a_multi_slot_event(actor):
    event = factories.EventFactory(is_multi_slots=True)
    morning = factories.SlotFactory(event=event)
    afternoon = factories.SlotFactory(event=event, start_hour=13.0, end_hour=15.0)
    ticket = factories.TicketFactory(event=event, seats_max=5)
    factories.RegistrationFactory.create_batch(2, event=event, ticket=ticket, slot=morning)
    factories.RegistrationFactory.create_batch(2, event=event, ticket=ticket, slot=afternoon)

    assert seats.ticket_taken(event=event, ticket=ticket) == 2  # 4 in all, 2 per slot
    tickets.update_ticket(ticket=ticket, actor=actor, seats_max=2)
    with pytest.raises(DomainError) as caught:
        tickets.update_ticket(ticket=ticket, actor=actor, seats_max=1)
    assert caught.value.details["field"] == "seats_max"


@pytest.mark.django_db
def test_a_ticket_with_registrations_is_not_deleted(actor):
    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event)
    factories.RegistrationFactory(event=event, ticket=ticket, state="cancel", active=False)
    before = snapshot(event)

    with pytest.raises(DomainError) as caught:
        tickets.delete_ticket(ticket=ticket, actor=actor)

    assert caught.value.code == "invalid_value"
    assert snapshot(event) == before
    assert Ticket.objects.filter(pk=ticket.pk).exists()


@pytest.mark.django_db
def test_a_type_ticket_is_written_under_its_type(actor):
    event_type = factories.EventTypeFactory()
    ticket = tickets.create_ticket(event_type=event_type, actor=actor, name="Std", seats_max=1)
    tickets.update_ticket(ticket=ticket, actor=actor, seats_max=0)

    assert (ticket.event_id, ticket.event_type_id) == (None, event_type.pk)
    assert audit_verbs() == ["ticket.created", "ticket.updated"]
    with pytest.raises(DomainError):
        tickets.create_ticket(actor=actor, name="Orphan")


# --- questions and choices ------------------------------------------------------------------


@pytest.mark.django_db
def test_an_answered_question_keeps_its_type_and_is_not_deleted(actor):
    registration = factories.RegistrationFactory()
    question = factories.QuestionFactory(event=registration.event, question_type="text_box")
    factories.RegistrationAnswerFactory(
        registration=registration, question=question, text_value="x"
    )
    before = snapshot(registration.event)

    with pytest.raises(DomainError) as retype:
        questions.update_question(question=question, actor=actor, question_type="email")
    with pytest.raises(DomainError) as delete:
        questions.delete_question(question=question, actor=actor)

    assert retype.value.details["field"] == "question_type"
    assert delete.value.code == "invalid_value"
    assert snapshot(registration.event) == before
    questions.update_question(question=question, actor=actor, title="Still editable")
    assert audit_verbs()[-1] == "question.updated"


@pytest.mark.django_db
def test_a_chosen_choice_is_not_deleted(actor):
    choice = factories.QuestionChoiceFactory()
    question = choice.question
    registration = factories.RegistrationFactory(event=question.event)
    factories.RegistrationAnswerFactory(
        registration=registration, question=question, choice=choice, text_value=None
    )
    spare = questions.create_choice(question=question, actor=actor, name="Spare")
    before = snapshot(question.event)

    with pytest.raises(DomainError) as caught:
        questions.delete_choice(choice=choice, actor=actor)

    assert caught.value.details["field"] == "choice"
    assert snapshot(question.event) == before
    questions.delete_choice(choice=spare, actor=actor)
    assert audit_verbs() == ["choice.created", "choice.deleted"]


# --- templates, types, reference data -------------------------------------------------------


@pytest.mark.django_db
def test_a_template_in_use_keeps_its_ref(actor):
    template = templates.create_template(
        actor=actor, ref="welcome", name="Welcome", channel="mail", subject="Hi", body="Hello"
    )
    factories.TypeMailFactory(template_ref="welcome")

    with pytest.raises(DomainError) as caught:
        templates.update_template(template=template, actor=actor, ref="hello")
    templates.update_template(template=template, actor=actor, body="Hello again")

    assert caught.value.details["field"] == "ref"
    assert audit_verbs() == ["template.created", "template.updated"]
    assert EventAuditLog.objects.get(verb="template.updated").data["body"] == [
        5,
        11,
    ]  # sizes, not the text


@pytest.mark.django_db
def test_a_template_that_does_not_compile_is_refused(actor):
    with pytest.raises(DomainError) as caught:
        templates.create_template(actor=actor, ref="bad", name="Bad", body="{% if %}")
    assert caught.value.details["field"] == "body"
    assert audit_verbs() == []


@pytest.mark.django_db
def test_event_type_and_line_verbs_audit_once_each(actor):
    tag = factories.TagFactory()
    event_type = event_types.create_event_type(actor=actor, name="Talk", tags=[tag])
    event_types.update_event_type(event_type=event_type, actor=actor, seats_max=5, tags=[])
    line = event_types.create_type_mail(
        event_type=event_type, actor=actor, template_ref="event-reminder", interval_nbr=2
    )
    event_types.update_type_mail(line=line, actor=actor, interval_nbr=3)
    event_types.delete_type_mail(line=line, actor=actor)

    assert audit_verbs() == [
        "event_type.created",
        "event_type.updated",
        "type_mail.created",
        "type_mail.updated",
        "type_mail.deleted",
    ]
    assert EventAuditLog.objects.get(verb="event_type.updated").data["tags"] == [[tag.pk], []]


@pytest.mark.django_db
def test_a_stage_with_events_and_a_category_with_tags_are_not_deleted(actor):
    event = factories.EventFactory()
    tag = factories.TagFactory()

    with pytest.raises(DomainError):
        reference.delete_stage(stage=event.stage, actor=actor)
    with pytest.raises(DomainError):
        reference.delete_tag_category(category=tag.category, actor=actor)

    assert audit_verbs() == []
    reference.delete_tag(tag=tag, actor=actor)
    reference.delete_tag_category(category=tag.category, actor=actor)
    assert audit_verbs() == ["tag.deleted", "tag_category.deleted"]


# --- the admin seat summary counts every limit ----------------------------------------------


@pytest.mark.django_db
def test_capacity_counts_ticket_limits_per_slot():
    only_tickets = factories.EventFactory()
    a = factories.TicketFactory(event=only_tickets, seats_max=3)
    factories.TicketFactory(event=only_tickets, seats_max=2)
    factories.RegistrationFactory.create_batch(3, event=only_tickets, ticket=a)  # a is full
    slotted = factories.EventFactory(is_multi_slots=True, seats_limited=True, seats_max=4)
    s1 = factories.SlotFactory(event=slotted)
    factories.SlotFactory(event=slotted, start_hour=13.0, end_hour=15.0)
    t = factories.TicketFactory(event=slotted, seats_max=3)
    factories.RegistrationFactory(event=slotted, ticket=t, slot=s1)
    unlimited_ticket = factories.EventFactory(seats_limited=True, seats_max=4)
    factories.TicketFactory(event=unlimited_ticket, seats_max=0)
    free = factories.EventFactory()
    factories.TicketFactory(event=free, seats_max=0)

    result = seats.capacities([only_tickets, slotted, unlimited_ticket, free])

    assert result[only_tickets.pk] == seats.Capacity(max=5, available=2)
    # per slot min(event 4, ticket 3): 3 + 3, minus the one seat taken in slot 1
    assert result[slotted.pk] == seats.Capacity(max=6, available=5)
    assert result[unlimited_ticket.pk] == seats.Capacity(max=4, available=4)
    assert result[free.pk] == seats.Capacity(max=None, available=None)
    assert seats.event_capacity(event=only_tickets) == result[only_tickets.pk]


# --- concurrency: a limit edit racing bookings ----------------------------------------------


@pytest.mark.django_db
def test_a_booking_holding_a_ticket_loaded_before_a_cut_obeys_the_new_limit(actor):
    """The deterministic core of the race below: the booking's Ticket was read before the cut
    committed; the limit it is checked against must be the one under the Event lock."""
    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event, seats_max=10)
    factories.RegistrationFactory.create_batch(4, event=event, ticket=ticket)
    stale = Ticket.objects.get(pk=ticket.pk)

    tickets.update_ticket(ticket=ticket, actor=actor, seats_max=4)
    before = snapshot(event)
    with pytest.raises(DomainError) as caught:
        registrations.register(event=event, ticket=stale, attendees=[{"name": "A"}], actor=actor)

    assert caught.value.code == "sold_out"
    assert snapshot(event) == before


def _run_threads(targets, timeout: float = 30.0) -> list[BaseException]:
    barrier = threading.Barrier(len(targets))
    errors: list[BaseException] = []
    outcomes: list = []

    def wrap(target):
        try:
            barrier.wait(timeout=timeout)
            outcomes.append(target())
        except DomainError as exc:
            outcomes.append(exc)
        except BaseException as exc:  # collected and re-raised by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=wrap, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish"
    assert not errors, errors
    return outcomes


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(3))
def test_a_limit_edit_racing_bookings_never_leaves_taken_above_max(round_, actor):
    """Five bookings and a cut of the limit from 10 to 6, released together, with 4 seats
    already taken: whatever order the Event lock gives them, the ticket's seats never end
    above its limit, and a refused cut wrote nothing."""
    event = factories.EventFactory(date_begin=factories.BASE + timedelta(days=30))
    ticket = factories.TicketFactory(event=event, seats_max=10)
    factories.RegistrationFactory.create_batch(4, event=event, ticket=ticket)
    audit_before = EventAuditLog.objects.count()

    def book():
        # Loaded before the race, as a page or the intake would have it.
        stale = Ticket.objects.get(pk=ticket.pk)
        return lambda: registrations.register(
            event=event, ticket=stale, attendees=[{"name": "A"}], actor=actor
        )

    def cut():
        return tickets.update_ticket(ticket=ticket, actor=actor, seats_max=6)

    outcomes = _run_threads([book() for _ in range(5)] + [cut])

    final = Ticket.objects.get(pk=ticket.pk)
    taken = seats.ticket_taken(event=event, ticket=final)
    booked = Registration.objects.filter(event=event, ticket=ticket, state="open").count()
    assert taken == booked  # the ledger agrees with the rows
    assert taken <= final.seats_max
    cut_refused = any(
        isinstance(o, DomainError) and o.details.get("field") == "seats_max" for o in outcomes
    )
    if cut_refused:
        assert final.seats_max == 10
        assert not EventAuditLog.objects.filter(verb="ticket.updated").exists()
    else:
        assert final.seats_max == 6
        assert EventAuditLog.objects.filter(verb="ticket.updated").count() == 1
    assert EventAuditLog.objects.count() == audit_before + booked - 4 + (0 if cut_refused else 1)
    assert seats.audit(event=event) == []
    assert SeatLedger.objects.filter(event=event, ticket=ticket).exists()

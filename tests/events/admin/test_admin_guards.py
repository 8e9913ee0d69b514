"""Rows that history points at stay put: slots, answered questions, registered tickets and
scheduler rows are changed only through services (or not at all)."""

from datetime import date

import pytest
from django.db import IntegrityError, transaction

from events.models import EventAuditLog, MailRegistration, Question, Slot, Ticket
from tests.events import factories


@pytest.fixture
def staff_client(client):
    client.force_login(factories.UserFactory(username="root", is_superuser=True))
    return client


def multi_slot_event():
    from datetime import UTC, datetime, timedelta

    begin = datetime(2027, 6, 1, 6, 0, tzinfo=UTC)
    return factories.EventFactory(
        is_multi_slots=True,
        date_tz="Europe/Brussels",
        date_begin=begin,
        date_end=begin + timedelta(days=2),
    )


@pytest.mark.django_db
def test_adding_a_slot_in_the_admin_goes_through_add_slot(staff_client):
    event = multi_slot_event()
    response = staff_client.post(
        "/admin/events/slot/add/",
        {"event": event.pk, "date": "2027-06-01", "start_hour": "9", "end_hour": "12.5"},
    )
    assert response.status_code == 302
    slot = Slot.objects.get(event=event)
    assert (slot.start_datetime.hour, slot.end_datetime.hour, slot.end_datetime.minute) == (
        7,
        10,
        30,
    )  # 09:00–12:30 in Brussels (CEST)
    assert EventAuditLog.objects.filter(event=event, verb="slot.created").count() == 1


@pytest.mark.django_db
def test_a_slot_is_read_only_once_created(staff_client, actor):
    from events.services import events as event_services

    event = multi_slot_event()
    slot = event_services.add_slot(
        event=event, date=date(2027, 6, 1), start_hour=9, end_hour=12, actor=actor
    )
    staff_client.post(
        f"/admin/events/slot/{slot.pk}/change/",
        {"event": event.pk, "date": "2027-06-02", "start_hour": "14", "end_hour": "16"},
    )
    fresh = Slot.objects.get(pk=slot.pk)
    assert (fresh.date, fresh.start_hour, fresh.start_datetime) == (
        slot.date,
        slot.start_hour,
        slot.start_datetime,
    )


@pytest.mark.django_db
def test_deleting_a_slot_with_registrations_is_refused_with_its_code(staff_client, actor):
    from events.services import events as event_services

    event = multi_slot_event()
    slot = event_services.add_slot(
        event=event, date=date(2027, 6, 1), start_hour=9, end_hour=12, actor=actor
    )
    factories.RegistrationFactory(event=event, slot=slot)

    response = staff_client.post(
        f"/admin/events/slot/{slot.pk}/delete/", {"post": "yes"}, follow=True
    )

    assert response.status_code == 200
    assert Slot.objects.filter(pk=slot.pk).exists()
    assert not EventAuditLog.objects.filter(verb="slot.deleted").exists()


@pytest.mark.django_db
def test_deleting_an_empty_slot_is_audited(actor):
    from events.services import events as event_services

    event = multi_slot_event()
    slot = event_services.add_slot(
        event=event, date=date(2027, 6, 1), start_hour=9, end_hour=12, actor=actor
    )
    event_services.delete_slot(slot=slot, actor=actor)
    assert not Slot.objects.filter(pk=slot.pk).exists()
    assert EventAuditLog.objects.filter(event=event, verb="slot.deleted").count() == 1


@pytest.mark.django_db
def test_the_database_refuses_to_retype_an_answered_question():
    answer = factories.RegistrationAnswerFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        Question.objects.filter(pk=answer.question_id).update(question_type="simple_choice")
    other = factories.EventFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        Question.objects.filter(pk=answer.question_id).update(event=other)
    unanswered = factories.QuestionFactory()
    Question.objects.filter(pk=unanswered.pk).update(question_type="email")  # allowed
    assert Question.objects.get(pk=unanswered.pk).question_type == "email"


@pytest.mark.django_db
def test_the_database_refuses_to_move_a_registered_ticket():
    ticket = factories.TicketFactory()
    factories.RegistrationFactory(event=ticket.event, ticket=ticket)
    with pytest.raises(IntegrityError), transaction.atomic():
        Ticket.objects.filter(pk=ticket.pk).update(event=factories.EventFactory())
    Ticket.objects.filter(pk=ticket.pk).update(name="Renamed")  # other fields stay editable
    assert Ticket.objects.get(pk=ticket.pk).name == "Renamed"


@pytest.mark.django_db
def test_the_admin_shows_an_answered_questions_type_read_only(staff_client):
    answer = factories.RegistrationAnswerFactory()
    response = staff_client.get(f"/admin/events/question/{answer.question_id}/change/")
    assert response.status_code == 200
    assert "question_type" not in response.context["adminform"].form.fields
    fresh = factories.QuestionFactory()
    response = staff_client.get(f"/admin/events/question/{fresh.pk}/change/")
    assert "question_type" in response.context["adminform"].form.fields


@pytest.mark.django_db
def test_scheduler_rows_cannot_be_edited_in_the_admin(staff_client):
    row = factories.MailRegistrationFactory()
    response = staff_client.post(
        f"/admin/events/mailregistration/{row.pk}/change/", {"mail_sent": "on"}
    )
    assert response.status_code == 403
    assert MailRegistration.objects.get(pk=row.pk).mail_sent is False

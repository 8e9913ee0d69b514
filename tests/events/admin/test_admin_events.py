"""The staff admin for events and registrations (spec.md §9): seat columns from the seat
module, bounded queries, actions that call the services and turn typed errors into messages."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from events.models import EventAuditLog, KanbanState, Registration, RegistrationState
from events.services import seats
from tests.events import factories

S = RegistrationState
CHANGELIST = "/admin/events/event/"
REG_CHANGELIST = "/admin/events/registration/"


def cells(html: str, field: str) -> list[str]:
    return re.findall(rf'<td class="field-{field}">([^<]*)</td>', html)


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


@pytest.mark.django_db
def test_event_changelist_shows_seat_columns_from_the_seat_module(admin_client):
    event = factories.EventFactory(name="Limited", seats_limited=True, seats_max=5)
    factories.RegistrationFactory.create_batch(2, event=event)
    factories.RegistrationFactory(event=event, state=S.DONE)
    factories.RegistrationFactory(event=event, state=S.DRAFT)
    full = factories.EventFactory(name="Overfull", seats_limited=True, seats_max=1)
    factories.RegistrationFactory.create_batch(2, event=full)
    factories.EventFactory(name="Open bar")

    response = admin_client.get(CHANGELIST, {"o": "1"})  # by name

    assert response.status_code == 200
    html = response.content.decode()
    assert cells(html, "seats_reserved") == ["2", "0", "2"]
    assert cells(html, "seats_used") == ["1", "0", "0"]
    assert cells(html, "seats_available") == ["2", "∞", "-1 (sold out)"]
    assert seats.event_summary(event=event).available == 2


@pytest.mark.django_db
def test_event_changelist_queries_do_not_grow_with_the_number_of_events(
    admin_client, django_assert_max_num_queries
):
    def one_event(i: int):
        event = factories.EventFactory(seats_limited=True, seats_max=10, is_multi_slots=i % 2 == 0)
        factories.RegistrationFactory(
            event=event, slot=factories.SlotFactory(event=event) if event.is_multi_slots else None
        )

    one_event(0)
    with CaptureQueriesContext(connection) as one:
        assert admin_client.get(CHANGELIST).status_code == 200
    for i in range(1, 30):
        one_event(i)

    with django_assert_max_num_queries(len(one.captured_queries)):
        response = admin_client.get(CHANGELIST)

    assert len(cells(response.content.decode(), "seats_reserved")) == 30


@pytest.mark.django_db
def test_event_change_page_shows_the_seat_summary(admin_client):
    event = factories.EventFactory(seats_limited=True, seats_max=4)
    factories.RegistrationFactory(event=event)

    response = admin_client.get(f"{CHANGELIST}{event.pk}/change/")

    assert response.status_code == 200
    assert "reserved 1 · used 0 · taken 1 · max 4 · available 3" in response.content.decode()


@pytest.mark.django_db
def test_confirm_on_a_cancelled_event_is_a_message_naming_the_code(admin_client):
    event = factories.EventFactory(kanban_state=KanbanState.CANCEL)
    draft = factories.RegistrationFactory(event=event, state=S.DRAFT)
    audit_rows = EventAuditLog.objects.count()

    response = admin_client.post(
        REG_CHANGELIST, {"action": "confirm", "_selected_action": [draft.pk]}, follow=True
    )

    assert response.status_code == 200
    assert response.redirect_chain == [(REG_CHANGELIST, 302)]
    (message,) = messages_of(response)
    assert "registrations_closed" in message
    draft.refresh_from_db()
    assert draft.state == S.DRAFT
    assert EventAuditLog.objects.count() == audit_rows


@pytest.mark.django_db
def test_mark_attended_on_a_draft_is_a_message_naming_the_code(admin_client):
    event = factories.EventFactory()
    draft = factories.RegistrationFactory(event=event, state=S.DRAFT)
    fine = factories.RegistrationFactory(event=event)

    response = admin_client.post(
        REG_CHANGELIST,
        {"action": "mark_attended", "_selected_action": [draft.pk, fine.pk]},
        follow=True,
    )

    assert response.status_code == 200
    assert sorted(messages_of(response)) == sorted(
        [
            f"{draft}: invalid_transition — A registration cannot go from draft to done by "
            "mark_attended.",
            "Marked attended: 1.",
        ]
    )
    assert dict(Registration.objects.values_list("pk", "state")) == {
        draft.pk: S.DRAFT,
        fine.pk: S.DONE,
    }


@pytest.mark.django_db
def test_archive_of_an_open_registration_is_refused_in_the_admin(admin_client):
    registration = factories.RegistrationFactory()

    response = admin_client.post(
        REG_CHANGELIST, {"action": "archive", "_selected_action": [registration.pk]}, follow=True
    )

    assert response.status_code == 200
    assert any("archive_refused" in m for m in messages_of(response))
    registration.refresh_from_db()
    assert registration.active is True


@pytest.mark.django_db
def test_event_actions_call_the_services(admin_client):
    event = factories.EventFactory(is_published=False)

    admin_client.post(CHANGELIST, {"action": "publish", "_selected_action": [event.pk]})
    admin_client.post(CHANGELIST, {"action": "cancel_event", "_selected_action": [event.pk]})

    event.refresh_from_db()
    assert (event.is_published, event.kanban_state) == (True, KanbanState.CANCEL)
    assert list(
        EventAuditLog.objects.filter(event=event).order_by("pk").values_list("verb", flat=True)
    ) == ["event.published", "event.cancelled"]


@pytest.mark.django_db
def test_registration_state_is_read_only_in_the_admin(admin_client):
    registration = factories.RegistrationFactory(name="Fixed")
    url = f"{REG_CHANGELIST}{registration.pk}/change/"

    page = admin_client.get(url)
    management = {
        f"{formset.formset.prefix}-{key}": "0"
        for formset in page.context["inline_admin_formsets"]
        for key in ("TOTAL_FORMS", "INITIAL_FORMS")
    }
    response = admin_client.post(url, {"state": "cancel", "name": "Changed", **management})

    assert page.status_code == 200
    assert "state" in page.context["adminform"].readonly_fields
    assert "state" not in page.context["adminform"].form.fields
    assert response.status_code == 302
    registration.refresh_from_db()
    assert (registration.state, registration.name) == (S.OPEN, "Fixed")
    assert seats.audit(event=registration.event) == []

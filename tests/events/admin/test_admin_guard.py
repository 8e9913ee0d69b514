"""config.admin_guard: malformed admin requests answer 400, never 500, and write nothing."""

from __future__ import annotations

import pytest

from events.models import Event, Registration
from tests.events import factories

pytestmark = pytest.mark.django_db

AUDIT = "/admin/events/eventauditlog/"
INBOX = "/admin/seams/seaminbox/"


@pytest.mark.parametrize(
    "query",
    [
        f"{INBOX}?type=a%00b",
        f"{INBOX}?status__exact=a%00b",
        f"{AUDIT}?verb=a%00b",
        "/admin/events/registration/?state__exact=%00",
        "/admin/events/event/?q=%00",
    ],
)
def test_a_nul_in_an_admin_query_answers_400(admin_client, query):
    response = admin_client.get(query)
    assert response.status_code == 400
    assert b"NUL" in response.content


def test_other_routes_keep_their_own_answer_to_a_nul(client):
    assert client.get("/healthz?x=%00").status_code == 200


@pytest.mark.parametrize(
    "selected", ["abc", "\x00", "1\x00", "", "1.5", "\u0661", "\u00b2", "9" * 40, "-1"]
)
@pytest.mark.parametrize(
    "url", ["/admin/events/event/", "/admin/events/mailoutbox/", "/admin/seams/seaminbox/"]
)
def test_a_selected_row_that_is_no_key_answers_400_and_deletes_nothing(admin_client, url, selected):
    registration = factories.RegistrationFactory()
    response = admin_client.post(
        url, {"action": "delete_selected", "_selected_action": [selected], "index": "0"}
    )
    assert response.status_code == 400
    assert Event.objects.filter(pk=registration.event_id).exists()
    assert Registration.objects.filter(pk=registration.pk).exists()


def test_selected_keys_still_reach_the_action(admin_client):
    event = factories.EventFactory()
    response = admin_client.post(
        "/admin/events/event/",
        {"action": "delete_selected", "_selected_action": [str(event.pk)], "index": "0"},
    )
    assert response.status_code == 200  # the action's confirmation page
    assert "Are you sure" in response.content.decode()


@pytest.mark.parametrize("value", ["\u0661", "9" * 40, "abc", "-1"])
def test_the_outbox_event_filter_reads_no_rows_for_a_value_that_is_no_id(admin_client, value):
    event = factories.EventFactory()
    factories.MailOutboxFactory(registration=factories.RegistrationFactory(event=event))
    response = admin_client.get("/admin/events/mailoutbox/", {"event": value})
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == []

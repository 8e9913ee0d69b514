"""The inbox admin: list filters (status / type / order), read only, and the replay action
reporting each outcome as a message."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages

from seams.models import SeamInbox
from tests.events import factories as ev
from tests.seams.host import order_message, ticket_line

pytestmark = pytest.mark.django_db
CHANGELIST = "/admin/seams/seaminbox/"


@pytest.fixture
def parked_and_applied(host):
    ticket = ev.TicketFactory(seats_max=1)
    host.post(order_message(ref="SO-P", lines=[ticket_line(ticket, 2, ref="SO-P/1")]))
    other = ev.TicketFactory()
    host.post(order_message(ref="SO-A", lines=[ticket_line(other, 1, ref="SO-A/1")]))
    return ticket, SeamInbox.objects.get(order_ref="SO-P"), SeamInbox.objects.get(order_ref="SO-A")


def test_changelist_filters_by_status_type_and_order(admin_client, parked_and_applied):
    _, parked, applied = parked_and_applied
    for query, shown, hidden in (
        ("?status=parked", parked, applied),
        ("?status=applied", applied, parked),
        ("?order_ref=SO-A", applied, parked),
    ):
        page = admin_client.get(CHANGELIST + query)
        assert page.status_code == 200
        assert shown.message_id in page.content.decode()
        assert hidden.message_id not in page.content.decode()
    assert admin_client.get(f"{CHANGELIST}{parked.pk}/change/").status_code == 200
    assert admin_client.get(CHANGELIST + "add/").status_code == 403


def test_changelist_filters_by_type(admin_client, host, parked_and_applied):
    _, parked, applied = parked_and_applied
    partner = {"ref": "P7", "name": "Pat Renamed", "email": "pat@example.org"}
    host.post({"type": "partner.updated", "data": {"partner": partner}}, msg_id="msg_partner")
    for query, shown, hidden in (
        ("?type=partner.updated", ["msg_partner"], [parked.message_id, applied.message_id]),
        ("?type=order.confirmed", [parked.message_id, applied.message_id], ["msg_partner"]),
    ):
        page = admin_client.get(CHANGELIST + query)
        assert page.status_code == 200
        listed = [row.message_id for row in page.context["cl"].result_list]
        assert sorted(listed) == sorted(shown), query
        assert not set(hidden) & set(listed)


def test_replay_action_reports_each_outcome(admin_client, parked_and_applied):
    ticket, parked, applied = parked_and_applied
    data = {"action": "replay_messages", "_selected_action": [parked.pk, applied.pk]}
    response = admin_client.post(CHANGELIST, data)
    texts = [str(m) for m in get_messages(response.wsgi_request)]
    assert f"#{parked.pk}: still parked — sold_out: Not enough seats: 1 missing." in texts
    assert f"#{applied.pk}: not parked (applied); nothing to replay." in texts

    ticket.seats_max = 2
    ticket.save(update_fields=["seats_max"])
    response = admin_client.post(CHANGELIST, {**data, "_selected_action": [parked.pk]})
    texts = [str(m) for m in get_messages(response.wsgi_request)]
    assert f"#{parked.pk}: applied." in texts
    parked.refresh_from_db()
    assert parked.status == "applied"

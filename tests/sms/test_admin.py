"""The SMS outbox in the admin (read-only rows, a "retry" action through the service) and the
sms line of the message template preview (length, GSM-7 / UCS-2, segments)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from events.models import EventAuditLog, MessageTemplate
from sms.models import SmsOutbox
from tests.events import factories as event_factories
from tests.sms.factories import SmsOutboxFactory

pytestmark = pytest.mark.django_db

OUTBOX = "/admin/sms/smsoutbox/"


def staff_client(client, group_name: str):
    user = event_factories.UserFactory(username=group_name.lower().replace(" ", "-"))
    user.groups.add(Group.objects.get(name=group_name))
    client.force_login(user)
    return client


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def action_names(response) -> set[str]:
    form = response.context["action_form"]
    return set() if form is None else {name for name, _ in form.fields["action"].choices if name}


def test_the_outbox_lists_state_attempts_and_last_error_read_only(client):
    SmsOutboxFactory(to="+32470123456", state="failed", attempts=3, last_error="HTTP 400: nope")
    row = SmsOutboxFactory(to="+32470999999")
    page = staff_client(client, "Event user").get(OUTBOX)
    assert page.status_code == 200
    text = page.content.decode()
    assert "+32470123456" in text and "HTTP 400: nope" in text and "Failed" in text
    assert "retry" not in action_names(page)  # users look, managers retry
    change = client.get(f"{OUTBOX}{row.pk}/change/")
    assert change.status_code == 200
    assert b'name="_save"' not in change.content  # no save button: nothing edited by hand
    assert client.get(f"{OUTBOX}add/").status_code == 403


def test_a_manager_retries_a_failed_sms_and_a_sent_one_is_refused_with_nothing_written(client):
    failed = SmsOutboxFactory(state="failed", attempts=1, last_error="HTTP 400: nope")
    sent = SmsOutboxFactory(state="sent", attempts=1, sent_at=failed.next_attempt_at)
    manager = staff_client(client, "Event manager")
    assert "retry" in action_names(manager.get(OUTBOX))
    response = manager.post(
        OUTBOX,
        {"action": "retry", "_selected_action": [failed.pk, sent.pk]},
        follow=True,
    )
    texts = messages_of(response)
    assert any("invalid_transition" in t for t in texts), texts
    assert "SMS re-queued: 1." in texts
    assert SmsOutbox.objects.get(pk=failed.pk).state == "queued"
    assert SmsOutbox.objects.get(pk=sent.pk).state == "sent"
    assert EventAuditLog.objects.filter(verb="sms_message.requeued").count() == 1


def test_the_template_preview_shows_the_sms_length_and_segments(client):
    root = event_factories.UserFactory(username="root", is_superuser=True)
    client.force_login(root)
    sms = MessageTemplate.objects.create(
        ref="sms-long", name="Long SMS", channel="sms", subject="", body="€" * 81
    )
    mail = MessageTemplate.objects.create(ref="mail", name="Mail", channel="mail", body="<p>x</p>")
    # No attendee yet: the source is measured.
    page = client.get(f"/admin/events/messagetemplate/{sms.pk}/change/").content.decode()
    assert (
        "SMS (template source, not rendered): 81 characters, GSM-7 (162 septets): 2 segments"
        in (page)
    )
    event_factories.RegistrationFactory(name="Ada")
    sms.body = "Hi {{ registration.name }} ✓"
    sms.save()
    page = client.get(f"/admin/events/messagetemplate/{sms.pk}/change/").content.decode()
    assert "SMS as rendered: 8 characters, UCS-2 (8 UTF-16 units): 1 segment" in page
    page = client.get(f"/admin/events/messagetemplate/{mail.pk}/change/").content.decode()
    assert "segment" not in page

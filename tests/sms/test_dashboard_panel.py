"""The SMS panel of the event dashboard counts the event's rows (how it reads them:
tests/events/mail/test_outbox_of_event.py)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from sms.dashboard import sms_panel
from sms.models import SmsState
from tests.events import factories
from tests.sms.factories import SmsOutboxFactory

pytestmark = pytest.mark.django_db


def row(registration, scheduler, state):
    sent_at = timezone.now() if state == SmsState.SENT else None
    return SmsOutboxFactory(
        registration=registration, scheduler=scheduler, state=state, sent_at=sent_at
    )


def figures(event) -> dict[str, int]:
    return {f.label: f.value for f in sms_panel(event).figures}


def test_the_panel_counts_each_row_of_the_event_once_by_state():
    event, other = factories.EventFactory(), factories.EventFactory()
    mine, theirs = factories.MailFactory(event=event), factories.MailFactory(event=other)
    attendee = factories.RegistrationFactory(event=event)
    stranger = factories.RegistrationFactory(event=other)
    row(attendee, mine, SmsState.SENT)  # both keys
    row(attendee, None, SmsState.QUEUED)
    row(None, mine, SmsState.FAILED)
    row(stranger, mine, SmsState.SENT)  # my scheduler
    row(stranger, theirs, SmsState.SENT)  # not mine
    row(None, None, SmsState.FAILED)  # nobody's

    assert figures(event) == {"SMS queued": 1, "SMS sent": 2, "SMS failed": 1}
    assert figures(other) == {"SMS queued": 0, "SMS sent": 2, "SMS failed": 0}
    assert [a.count for a in sms_panel(event).alerts] == [1]

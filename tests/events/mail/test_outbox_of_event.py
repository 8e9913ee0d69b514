"""events.read.selectors.outbox_of_event: an event's outbox rows (mail and SMS), read through the
keys' indexes, never the whole outbox (the dashboard, its panels and the admin's event
filter)."""

from __future__ import annotations

import pytest
from django.db import connection

from events.models import MailOutbox
from events.read.selectors import outbox_of_event
from sms.models import SmsOutbox
from tests.events import factories
from tests.sms.factories import SmsOutboxFactory

pytestmark = pytest.mark.django_db

OUTBOXES = {"mail": (MailOutbox, factories.MailOutboxFactory), "sms": (SmsOutbox, SmsOutboxFactory)}


@pytest.mark.parametrize("outbox", list(OUTBOXES))
def test_the_rows_of_the_events_registrations_and_schedulers_once_each(outbox):
    model, factory = OUTBOXES[outbox]
    event, other = factories.EventFactory(), factories.EventFactory()
    mine, theirs = factories.MailFactory(event=event), factories.MailFactory(event=other)
    attendee = factories.RegistrationFactory(event=event)
    stranger = factories.RegistrationFactory(event=other)
    both = factory(registration=attendee, scheduler=mine)
    by_attendee = factory(registration=attendee, scheduler=None)
    by_scheduler = factory(registration=None, scheduler=mine)
    stranger_by_my_scheduler = factory(registration=stranger, scheduler=mine)
    theirs_only = factory(registration=stranger, scheduler=theirs)
    factory(registration=None, scheduler=None)

    found = outbox_of_event(model.objects.all(), event.pk)
    assert sorted(found.values_list("pk", flat=True)) == sorted(
        r.pk for r in (both, by_attendee, by_scheduler, stranger_by_my_scheduler)
    )
    assert found.count() == 4  # each row once
    assert list(outbox_of_event(model.objects.all(), other.pk)) == [
        stranger_by_my_scheduler,
        theirs_only,
    ]


def _outbox_scans(node: dict, table: str):
    if node.get("Relation Name") == table:
        yield node
    for child in node.get("Plans", ()):
        yield from _outbox_scans(child, table)


@pytest.mark.parametrize("outbox", list(OUTBOXES))
def test_the_outbox_is_read_through_its_keys_not_whole(outbox):
    model, factory = OUTBOXES[outbox]
    event = factories.EventFactory()
    factory(registration=factories.RegistrationFactory(event=event))
    sql, params = outbox_of_event(model.objects.all(), event.pk).query.sql_with_params()
    with connection.cursor() as cursor:
        # Where an index can serve, the planner must use it (a table this small would be read
        # whole otherwise); every scan of the outbox must then be bounded by a key's index
        # condition. An OR across the two joins has none: it reads every event's rows.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        (plan,) = cursor.fetchone()[0]
    scans = list(_outbox_scans(plan["Plan"], model._meta.db_table))
    assert scans, plan
    assert all("Index Cond" in node or "Recheck Cond" in node for node in scans), scans

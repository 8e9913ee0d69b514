"""rows.insert_statement: the values it writes are the ones the ORM's own INSERT would write."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.db import connection

from events.db import rows
from events.models import EventAuditLog, Registration
from events.services import audit
from tests.events.factories import EventFactory


def insert(instances) -> None:
    with connection.cursor() as cursor:
        cursor.execute(*rows.insert_statement(instances))


@pytest.mark.django_db
def test_auto_now_fields_take_one_aware_now_per_statement_and_are_written():
    event = EventFactory()
    before = datetime.now().astimezone()
    stale = datetime(2000, 1, 1).astimezone()
    regs = [
        Registration(event=event, state="draft", barcode=f"rows-{n}", name=f"R{n}")
        for n in range(3)
    ]
    regs[0].created_at = regs[0].updated_at = stale  # auto_now(_add) overrides what was set
    insert(regs)

    stamps = {(r.created_at, r.updated_at) for r in regs}
    assert len(stamps) == 1  # one value for the whole statement
    ((created, updated),) = stamps
    assert created == updated and created.tzinfo is not None and created >= before
    stored = set(Registration.objects.filter(event=event).values_list("created_at", "updated_at"))
    assert stored == {(created, updated)}
    assert all(not r._state.adding and r._state.db == "default" for r in regs)


@pytest.mark.django_db
def test_values_needing_their_fields_conversion_still_get_it():
    # A JSON field has no plain type: its value goes through get_db_prep_save.
    event = EventFactory()
    row = audit.entry(actor=audit.SYSTEM, verb="rows.test", event=event, data={"k": [1, "é"]})
    insert([row])
    stored = EventAuditLog.objects.get(verb="rows.test")
    assert stored.data == {"k": [1, "é"]} and stored.event_id == event.pk

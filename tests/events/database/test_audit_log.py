"""The audit table is append-only in the database itself (spec.md §8): a trigger created by
migration 0002 refuses UPDATE and DELETE, whatever the path (ORM or raw SQL); INSERT works.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from events.models import EventAuditLog
from events.services import audit
from tests.events import factories

pytestmark = pytest.mark.django_db

REFUSED_SQLSTATE = "42501"  # insufficient_privilege, raised by events_audit_append_only()


def refused(fn, operation: str) -> None:
    with pytest.raises(DatabaseError) as info:
        with transaction.atomic():
            fn()
    cause = info.value.__cause__
    assert cause.sqlstate == REFUSED_SQLSTATE
    assert f"events_eventauditlog is append-only ({operation} refused)" in str(info.value)


@pytest.fixture
def row(actor):
    event = factories.EventFactory()
    return audit.record(actor=actor, verb="event.published", event=event, data={"a": 1})


def test_insert_works_through_the_helper_bulk_and_raw_sql(actor):
    event = factories.EventFactory()
    first = audit.record(actor=actor, verb="event.published", event=event, data={"x": [1]})
    audit.record_many(
        [audit.entry(actor="desk:gate 1", verb="desk.scan", event=event) for _ in range(2)]
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO events_eventauditlog (at, actor_type, actor_id, actor_label, verb, data)"
            " VALUES (now(), 'system', '', 'raw', 'raw.insert', '{}'::jsonb)"
        )
    rows = list(EventAuditLog.objects.order_by("id").values_list("verb", "actor_type", "data"))
    assert rows == [
        ("event.published", "system", {"x": [1]}),
        ("desk.scan", "desk", {}),
        ("desk.scan", "desk", {}),
        ("raw.insert", "system", {}),
    ]
    assert EventAuditLog.objects.get(pk=first.pk).event_id == event.pk


def test_orm_update_is_refused(row):
    refused(lambda: EventAuditLog.objects.filter(pk=row.pk).update(verb="forged"), "UPDATE")
    row.verb = "forged"
    refused(lambda: row.save(update_fields=["verb"]), "UPDATE")
    assert EventAuditLog.objects.get(pk=row.pk).verb == "event.published"


def test_orm_delete_is_refused(row):
    refused(lambda: EventAuditLog.objects.filter(pk=row.pk).delete(), "DELETE")
    refused(lambda: EventAuditLog.objects.all().delete(), "DELETE")
    assert EventAuditLog.objects.filter(pk=row.pk).count() == 1


def test_raw_sql_update_and_delete_are_refused(row):
    def raw(sql):
        def run():
            with connection.cursor() as cursor:
                cursor.execute(sql, [row.pk])

        return run

    refused(raw("UPDATE events_eventauditlog SET data = '{}'::jsonb WHERE id = %s"), "UPDATE")
    refused(raw("DELETE FROM events_eventauditlog WHERE id = %s"), "DELETE")
    assert EventAuditLog.objects.get(pk=row.pk).data == {"a": 1}


def test_the_trigger_is_installed_for_update_and_delete():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger"
            " WHERE tgrelid = 'events_eventauditlog'::regclass AND NOT tgisinternal"
            " AND tgtype & 16 + 8 > 0"  # UPDATE or DELETE: the seams overlay's trigger is INSERT
        )
        triggers = cursor.fetchall()
    assert triggers == [
        (
            "events_audit_append_only",
            "CREATE TRIGGER events_audit_append_only BEFORE DELETE OR UPDATE ON"
            " public.events_eventauditlog FOR EACH ROW EXECUTE FUNCTION"
            " events_audit_append_only()",
        )
    ]

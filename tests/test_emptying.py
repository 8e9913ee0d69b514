"""The end of a transactional test (tests/emptying.py): every table emptied but the derived
ones, the append-only audit trail included, and Django's flush when triggers may not be
turned off."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import ProgrammingError, connection
from django.test import TransactionTestCase

from events import reference_data
from events.models import EventAuditLog, Registration, Stage
from tests import emptying

pytestmark = pytest.mark.django_db(transaction=True)

NO_SUPERUSER = "backbone_events_test_no_superuser"
GROUP_PERMISSIONS = Group.permissions.through._meta.db_table


def _counts() -> dict[str, int]:
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        return {
            table: cursor.execute(f"SELECT count(*) FROM {quote(table)}").fetchone()[0]  # noqa: S608
            for table in connection.introspection.django_table_names(only_existing=True)
        }


def _seeded() -> dict[str, int]:
    reference_data.ensure()
    call_command("seed_demo", stdout=StringIO())
    assert Registration.objects.exists() and EventAuditLog.objects.exists()
    return _counts()


def test_the_teardown_of_a_transactional_test_is_the_emptying():
    assert TransactionTestCase._fixture_teardown is emptying._fixture_teardown


def test_every_table_is_emptied_but_the_derived_ones():
    before = _seeded()
    kept = {table: before[table] for table in emptying.KEPT if table in before}
    assert all(kept.values()), kept  # there was something to keep

    for _ in range(2):  # the run's first call copies the reference data, later ones restore it
        assert emptying.empty_tables("default") is True

        after = _counts()
        reference = {Stage._meta.db_table, Group._meta.db_table, GROUP_PERMISSIONS}
        assert {t: n for t, n in after.items() if t not in emptying.KEPT | reference and n} == {}
        assert {t: after[t] for t in kept} == kept
        # the reference data, as reference_data.ensure() makes it on empty tables
        assert sorted(Stage.objects.values_list("name", "sequence", "fold", "pipe_end")) == sorted(
            reference_data.STAGES
        )
        assert sorted(Group.objects.values_list("name", flat=True)) == sorted(reference_data.GROUPS)
        assert all(group.permissions.exists() for group in Group.objects.all())
        assert after[GROUP_PERMISSIONS] == before[GROUP_PERMISSIONS]
    # a DELETE of the trail outside the emptying is still refused by its trigger
    reference_data.ensure()
    call_command("seed_demo", stdout=StringIO())
    with pytest.raises(ProgrammingError, match="append-only"):
        EventAuditLog.objects.all().delete()


def test_without_a_superuser_nothing_is_deleted_and_the_call_says_so():
    # A role of the cluster with no login and no privilege, left in place for the next run.
    before = _seeded()
    with connection.cursor() as cursor:
        cursor.execute(
            f"DO $$ BEGIN CREATE ROLE {NO_SUPERUSER}; EXCEPTION WHEN duplicate_object THEN END $$"
        )
        cursor.execute(f"SET ROLE {NO_SUPERUSER}")
    try:
        assert emptying.empty_tables("default") is False
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")
    assert _counts() == before


def test_a_teardown_the_emptying_cannot_do_is_left_to_flush(monkeypatch):
    calls = []
    monkeypatch.setattr(emptying, "empty_tables", lambda alias: False)
    monkeypatch.setattr(emptying, "call_command", lambda *args, **kwargs: calls.append(args))
    emptying._fixture_teardown(TransactionTestCase())
    assert calls == [("flush",)]

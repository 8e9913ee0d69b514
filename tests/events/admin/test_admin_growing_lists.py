"""Admin lists of tables that only grow (the audit trail, the seam inbox): no load reads every
row for a date hierarchy or a choice list, the rows are counted once, and the fixed filters
filter."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from events.models import EventAuditLog
from events.read import selectors
from seams.models import InboxStatus, SeamInbox
from tests.events import factories
from tests.seams.factories import SeamInboxFactory

pytestmark = pytest.mark.django_db

AUDIT = "/admin/events/eventauditlog/"
INBOX = "/admin/seams/seaminbox/"


def _statements(client, url: str) -> tuple[object, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return response, [q["sql"] for q in captured.captured_queries]


@pytest.mark.parametrize("url", [AUDIT, INBOX])
def test_a_load_neither_lists_every_day_nor_counts_twice(admin_client, url):
    factories.EventAuditLogFactory.create_batch(3)
    SeamInboxFactory.create_batch(3)
    response, sql = _statements(admin_client, url)
    assert not any("DATE_TRUNC" in s for s in sql)  # no date hierarchy over every row
    assert len([s for s in sql if "COUNT(" in s]) == 1  # the filtered rows only
    assert not any("DISTINCT" in s for s in sql)  # no choice list read from every row
    assert "_facets" not in response.content.decode()  # no "Show counts": a count per choice


def test_the_inbox_filters_by_type_and_date_without_reading_it(admin_client):
    paid = SeamInboxFactory(type="order.paid")
    confirmed = SeamInboxFactory(type="order.confirmed", status=InboxStatus.PARKED)
    old = SeamInboxFactory(type="order.paid")
    SeamInbox.objects.filter(pk=old.pk).update(received_at=timezone.now() - timedelta(days=40))

    response, _ = _statements(admin_client, f"{INBOX}?type=order.paid")
    assert set(response.context["cl"].result_list) == {paid, old}
    page = response.content.decode()
    for kind in ("order.confirmed", "order.cancelled", "partner.updated"):
        assert f"?type={kind}" in page  # every type is offered, also one no row has

    since = urlencode({"received_at__gte": _since(7)})
    response, _ = _statements(admin_client, f"{INBOX}?{since}")
    assert set(response.context["cl"].result_list) == {paid, confirmed}


def _since(days: int) -> str:
    """A lower bound as the date filter's own links write it (an aware midnight)."""
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    return str(midnight - timedelta(days=days))


def test_the_audit_trail_filters_by_date(admin_client):
    entry = factories.EventAuditLogFactory()  # the trail is append-only: no older row to make
    page = admin_client.get(AUDIT).content.decode()
    assert "By time" in page and "Past 7 days" in page  # the fixed ranges, not a hierarchy
    for days, expected in ((7, [entry]), (-1, [])):
        response, _ = _statements(admin_client, f"{AUDIT}?{urlencode({'at__gte': _since(days)})}")
        assert list(response.context["cl"].result_list) == expected


def test_the_audit_trail_offers_its_verbs_and_filters_by_one(admin_client):
    event = factories.EventFactory()
    created = factories.EventAuditLogFactory.create_batch(2, verb="registration.created")
    cancelled = factories.EventAuditLogFactory(verb="registration.cancelled", event=event)
    verbs = selectors.audit_verbs()
    assert verbs == list(
        EventAuditLog.objects.order_by("verb").values_list("verb", flat=True).distinct()
    )
    assert {"registration.created", "registration.cancelled"} <= set(verbs)

    page = admin_client.get(AUDIT).content.decode()
    for verb in verbs:
        assert f"?verb={verb}" in page
    response, _ = _statements(admin_client, f"{AUDIT}?verb=registration.created")
    assert set(response.context["cl"].result_list) == set(created)
    response, _ = _statements(admin_client, f"{AUDIT}?verb=registration.cancelled")
    assert list(response.context["cl"].result_list) == [cancelled]
    response, _ = _statements(admin_client, f"{AUDIT}?verb=no.such.verb")
    assert list(response.context["cl"].result_list) == []


def _scans(node: dict, table: str):
    if node.get("Relation Name") == table:
        yield node
    for child in node.get("Plans", ()):
        yield from _scans(child, table)


def test_the_verbs_are_read_by_index_probes_not_a_scan_of_the_trail():
    factories.EventAuditLogFactory.create_batch(3, verb="registration.created")
    factories.EventAuditLogFactory(verb="registration.cancelled")
    with connection.cursor() as cursor:
        # Where an index can serve, the planner must use it (a table this small would be read
        # whole otherwise); every read of the trail must then be a bounded index probe.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {selectors._audit_verbs_sql()}")
        (plan,) = cursor.fetchone()[0]
    scans = list(_scans(plan["Plan"], EventAuditLog._meta.db_table))
    assert len(scans) == 2, plan  # the first verb, then the next one after each
    assert all(node["Node Type"] == "Index Only Scan" for node in scans), scans
    assert any("Index Cond" in node for node in scans), scans  # verb > the last one found


@pytest.mark.parametrize(
    "value",
    ["x" * 10_000, "%ED%A0%80", "%F0%9F%98%80" * 30, "%D9%A1%D9%A2", "' OR 1=1 --"],
    ids=["long", "lone-surrogate-bytes", "emoji", "arabic-digits", "quote"],
)
def test_a_hostile_verb_lists_nothing_and_breaks_nothing(admin_client, value):
    factories.EventAuditLogFactory(verb="registration.created")
    response = admin_client.get(f"{AUDIT}?verb={value}")
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == []


def test_an_empty_verb_is_a_verb_like_any_other(admin_client):
    # As with Django's field filter: `?verb=` lists the rows whose verb is empty, not all.
    factories.EventAuditLogFactory(verb="registration.created")
    blank = factories.EventAuditLogFactory(verb="")
    assert selectors.audit_verbs()[0] == ""
    response, _ = _statements(admin_client, f"{AUDIT}?verb=")
    assert list(response.context["cl"].result_list) == [blank]

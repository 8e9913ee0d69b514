"""The lead sink's idempotency key (events.ports.EventLeadSink): every call for one lead —
(rule, event, group) — carries the same `idempotency_key`, across passes and when a walker
whose lease expired sent the batch the next holder sends again; different rules, events and
groups never share one. A host adapter upserts by it."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test import override_settings

from events.services import registrations as registration_services
from leads import services
from leads.adapters import LocalLeadSink
from leads.models import LeadProvenance, LeadRequest
from tests.events import factories

WAIT = 30  # seconds: a stuck thread fails the test instead of hanging it


class RecordingSink(LocalLeadSink):
    """The local sink, keeping every (lead_ref, values) it was sent, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, dict]] = []
        self.lock = threading.Lock()

    def upsert_leads(self, *, items):
        with self.lock:
            self.calls += [(ref, dict(values)) for ref, values in items]
        return super().upsert_leads(items=items)


def rule(actor, *, basis: str, event=None, name: str | None = None):
    return services.create_rule(
        name=name or basis,
        lead_creation_basis=basis,
        lead_creation_trigger="create",
        lead_type="lead",
        event=event,
        actor=actor,
    )


def register(event, actor, name, *, order=None, partner=None):
    return registration_services.register(
        event=event,
        attendees=[{"name": name, "email": f"{name.lower()}@example.org"}],
        sale_order_ref=order,
        partner_ref=partner,
        actor=actor,
    )


def keys_of(calls) -> list[str]:
    return [values["idempotency_key"] for _, values in calls]


@pytest.mark.django_db
def test_one_lead_keeps_its_key_across_passes(actor):
    event = factories.EventFactory()
    by_order = rule(actor, basis="order", event=event)
    register(event, actor, "Ada", order="SO1")
    sink = RecordingSink()
    services.run_pass(sink=sink)
    ((created_ref, created),) = sink.calls
    assert created_ref is None
    expected = f"rule:{by_order.pk}:event:{event.pk}:order:SO1"
    assert (created["idempotency_key"], created["group_key"]) == (expected, "order:SO1")

    register(event, actor, "Bea", order="SO1")  # a later registration of the same order
    services.run_pass(sink=sink)

    (_, (updated_ref, updated)) = sink.calls
    assert updated_ref == LeadProvenance.objects.get().lead_ref  # an update of that lead
    assert updated["idempotency_key"] == expected
    assert len(updated["registration_ids"]) == 2


@pytest.mark.django_db
def test_different_rules_events_and_groups_have_different_keys(actor):
    summit, fair = factories.EventFactory(), factories.EventFactory()
    per_order = rule(actor, basis="order", name="per order, every event")
    per_attendee = rule(actor, basis="attendee", event=summit)
    (ada,) = register(summit, actor, "Ada", order="SO1")
    (bea,) = register(summit, actor, "Bea", order="SO2")
    (cy,) = register(summit, actor, "Cy", partner="P7")
    (dee,) = register(summit, actor, "Dee")
    (eve,) = register(fair, actor, "Eve", order="SO1")  # the same order, another event
    sink = RecordingSink()

    services.run_pass(sink=sink)

    keys = keys_of(sink.calls)
    assert sorted(keys) == sorted(
        [
            f"rule:{per_order.pk}:event:{summit.pk}:order:SO1",
            f"rule:{per_order.pk}:event:{summit.pk}:order:SO2",
            f"rule:{per_order.pk}:event:{summit.pk}:partner:P7",
            f"rule:{per_order.pk}:event:{summit.pk}:registration:{dee.pk}",
            f"rule:{per_order.pk}:event:{fair.pk}:order:SO1",
            *(
                f"rule:{per_attendee.pk}:event:{summit.pk}:registration:{reg.pk}"
                for reg in (ada, bea, cy, dee)
            ),
        ]
    )
    assert len(set(keys)) == len(keys) == LeadProvenance.objects.count() == 9
    (fair_lead,) = [v for _, v in sink.calls if v["event_id"] == fair.pk]
    assert fair_lead["registration_ids"] == [eve.pk]


class HeldSink(RecordingSink):
    """Blocks inside its first batch (after the walker read it, before it writes) until the
    test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = threading.Event()
        self.go = threading.Event()

    def upsert_leads(self, *, items):
        if not self.holding.is_set():
            self.holding.set()
            assert self.go.wait(WAIT), "the test never released the held walker"
        return super().upsert_leads(items=items)


@pytest.mark.django_db(transaction=True)
def test_a_batch_redone_after_a_lost_lease_carries_the_same_keys(actor):
    event = factories.EventFactory()
    rule(actor, basis="attendee", event=event)
    rule(actor, basis="order", event=event)
    for index in range(4):
        register(event, actor, f"Guest{index}", order=f"SO{index // 2}")
    held, next_holder = HeldSink(), RecordingSink()
    result: dict = {}

    def walk():
        try:
            result["report"] = services.run_pass(sink=held)
        finally:
            connection.close()

    with override_settings(EVENT_LEAD_BATCH=50):  # one batch: the held one
        thread = threading.Thread(target=walk, daemon=True)
        thread.start()
        assert held.holding.wait(WAIT), "the walker never reached its batch"
        with connection.cursor() as cursor:  # the database clock passes the walker's lease
            cursor.execute(
                f"UPDATE {LeadRequest._meta.db_table} "  # noqa: S608 — a model's table name
                "SET lease_until = clock_timestamp() - interval '1 second'"
            )
        taken = services.run_pass(sink=next_holder)
        held.go.set()
        thread.join(WAIT)

    assert not thread.is_alive()
    assert result["report"].fenced == 1 and taken.fenced == 0
    # the lost walker did call its sink (an outside CRM would have kept those leads), with no
    # lead_ref, and the next holder sent the same leads again under the same keys
    assert [ref for ref, _ in held.calls] == [None] * 6  # 4 attendee leads + 2 order leads
    assert sorted(keys_of(held.calls)) == sorted(keys_of(next_holder.calls))
    assert len(set(keys_of(next_holder.calls))) == 6

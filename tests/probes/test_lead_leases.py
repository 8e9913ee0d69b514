"""Probes of the lead pass under concurrency: two passes at the
same instant make every lead exactly once; a walker whose lease expired while it held a batch
cannot write (its transaction is refused by the fencing check) and the batch is redone by the
new holder without duplicates. Real threads, one connection each, released by a barrier."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection
from django.test import override_settings

from events.services import registrations as registration_services
from leads import services
from leads.adapters import LocalLeadSink
from leads.models import Lead, LeadProvenance, LeadProvenanceRegistration, LeadRequest
from tests.events import factories
from tests.helpers import run_concurrently

WAIT = 30  # seconds: a stuck thread fails the test instead of hanging it

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("local_sink"),
]


@pytest.fixture
def local_sink():
    with override_settings(EVENT_LEAD_SINK="leads.adapters.LocalLeadSink"):
        yield


def _rules(actor, event=None):
    return [
        services.create_rule(
            name=f"{basis} {trigger}",
            lead_creation_basis=basis,
            lead_creation_trigger=trigger,
            lead_type="lead",
            event=event,
            actor=actor,
        )
        for basis, trigger in (("attendee", "create"), ("attendee", "confirm"), ("order", "create"))
    ]


def _register(event, actor, n, order_every=3):
    regs = []
    for i in range(n):
        regs += registration_services.register(
            event=event,
            attendees=[{"name": f"Guest {event.pk}-{i}", "email": f"g{event.pk}x{i}@example.org"}],
            sale_order_ref=f"SO-{event.pk}-{i // order_every}",
            actor=actor,
        )
    return regs


def _pairs() -> Counter:
    return Counter(LeadProvenanceRegistration.objects.values_list("rule_id", "registration_id"))


def test_two_concurrent_passes_make_every_lead_exactly_once(actor):
    events = [factories.EventFactory() for _ in range(3)]
    rules = _rules(actor)
    regs = [r for event in events for r in _register(event, actor, 12)]
    expected_pairs = {(rule.pk, reg.pk) for rule in rules for reg in regs}
    expected_leads = 2 * len(regs) + len(regs) // 3  # two attendee rules + one per order

    with override_settings(EVENT_LEAD_BATCH=4, EVENT_LEAD_CRON_LIMIT=10_000):
        reports = run_concurrently([services.run_pass, services.run_pass])

    assert set(_pairs()) == expected_pairs
    assert set(_pairs().values()) == {1}
    assert Lead.objects.count() == expected_leads
    assert LeadProvenance.objects.count() == expected_leads
    assert sum(r.parked for r in reports) == 0
    assert sum(r.requests_claimed for r in reports) >= len(events)  # one walker per event
    assert sum(r.registrations_walked for r in reports) >= len(regs)
    assert LeadRequest.objects.count() == 0

    # and again, concurrently, after "generate leads" re-queued every event: nothing new
    for event in events:
        services.generate_leads(event=event, actor=actor)
    with override_settings(EVENT_LEAD_BATCH=4, EVENT_LEAD_CRON_LIMIT=10_000):
        reports = run_concurrently([services.run_pass, services.run_pass])
    assert sum(r.leads_created + r.leads_updated for r in reports) == 0
    assert set(_pairs().values()) == {1}
    assert Lead.objects.count() == expected_leads


class HeldSink(LocalLeadSink):
    """Blocks inside the batch (after reading, before writing) until the test lets it go."""

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.go = threading.Event()

    def upsert_leads(self, *, items):
        if not self.holding.is_set():  # only the first batch is held
            self.holding.set()
            assert self.go.wait(WAIT), "the test never released the held walker"
        return super().upsert_leads(items=items)


def _expire_lease() -> None:
    """Database time moves past lease_until: the lease is over by the database clock."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {LeadRequest._meta.db_table} "  # noqa: S608 — a model's table name
            "SET lease_until = clock_timestamp() - interval '1 second'"
        )
        assert cursor.rowcount == 1


def _held_walker(sink: HeldSink):
    result = {}

    def walk():
        try:
            result["report"] = services.run_pass(sink=sink)
        except BaseException as exc:  # noqa: BLE001 — asserted by the test
            result["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=walk, daemon=True)
    thread.start()
    assert sink.holding.wait(WAIT), "the walker never reached its batch"
    return thread, result


def test_a_walker_whose_lease_expired_cannot_write_and_the_new_holder_redoes_the_batch(actor):
    event = factories.EventFactory()
    rules = _rules(actor, event=event)
    regs = _register(event, actor, 5)
    sink = HeldSink()
    thread, held = _held_walker(sink)

    _expire_lease()
    token = LeadRequest.objects.get().fencing_token
    assert token == 1  # the held walker's claim
    taken = services.run_pass()  # the new holder: claims the expired lease, does the work
    assert taken.requests_claimed == 1 and taken.fenced == 0
    leads_after_new_holder = Lead.objects.count()

    sink.go.set()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert "error" not in held, held
    report = held["report"]
    assert report.fenced == 1
    assert (report.leads_created, report.registrations_walked) == (0, 0)

    assert Lead.objects.count() == leads_after_new_holder == 2 * 5 + 2  # orders of 3 and 2
    assert set(_pairs()) == {(rule.pk, reg.pk) for rule in rules for reg in regs}
    assert set(_pairs().values()) == {1}
    assert LeadRequest.objects.count() == 0


def test_an_expired_lease_refuses_the_write_even_when_no_one_took_it_over(actor):
    event = factories.EventFactory()
    rules = _rules(actor, event=event)
    regs = _register(event, actor, 4)
    request = LeadRequest.objects.get()
    sink = HeldSink()
    thread, held = _held_walker(sink)

    _expire_lease()
    sink.go.set()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert held["report"].fenced == 1
    assert Lead.objects.count() == 0 and LeadProvenance.objects.count() == 0
    assert LeadRequest.objects.get().cursor == request.cursor  # nothing advanced

    report = services.run_pass()  # the next holder redoes the batch
    assert report.fenced == 0
    assert set(_pairs()) == {(rule.pk, reg.pk) for rule in rules for reg in regs}
    assert Lead.objects.count() == 2 * 4 + 2


def test_a_registration_confirmed_while_its_batch_is_held_is_walked_again(actor):
    """The hook's "lower the cursor" cannot lower it below a batch in flight: the walker's
    fencing UPDATE sees the request was touched (its row version) and keeps the cursor, so the
    confirmation committed during the batch is not skipped."""
    event = factories.EventFactory()
    on_create, on_confirm = (
        services.create_rule(
            name=trigger,
            lead_creation_basis="attendee",
            lead_creation_trigger=trigger,
            lead_type="lead",
            event=event,
            actor=actor,
        )
        for trigger in ("create", "confirm")
    )
    (draft,) = registration_services.register(
        event=event, attendees=[{"name": "Ada"}], state="draft", actor=actor
    )
    sink = HeldSink()
    thread, held = _held_walker(sink)  # holds the batch that read `draft` as a draft

    registration_services.confirm(registration=draft, actor=actor)  # commits meanwhile
    sink.go.set()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert "error" not in held, held
    assert held["report"].fenced == 0
    assert set(_pairs()) == {(on_create.pk, draft.pk), (on_confirm.pk, draft.pk)}
    assert LeadRequest.objects.count() == 0

"""Order edits converge (spec-overlay.md §1.4 "Shrink"), as a property and under a race.

Property: whatever sequence of versions (lines added, dropped, their quantities raised or
lowered, a line's ticket changed) interleaved with staff actions (attend, cancel, reset to
draft), every confirmed or paid message leaves each (line, ticket) with exactly what an
independent count predicts from the rows before it: the surplus cancelled from draft/open
ones, attended ones kept and reported, the shortfall minted; the answer names those rows; the
seat ledger matches a recount.

Race: a shrink and a desk marking attended the registration it would cancel, released by one
barrier: the message is always applied (never parked, never a 500) and the registration is
either cancelled by the order (the desk refused) or attended, and then the older one is the
surplus.
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import count

import pytest
from django.test import Client, override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.errors import DomainError
from events.models import Registration
from events.services import registrations as reg_services
from events.services import seats
from events.services.audit import Actor
from tests.events import factories as ev
from tests.helpers import run_concurrently
from tests.seams.host import URL, new_secret, order_message, signed_headers, ticket_line

SECRET = new_secret()
STAFF = Actor("user", label="staff")
PROPERTY = settings(
    max_examples=40,
    database=None,  # no .hypothesis/ example store in the checkout
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
LINE_REFS = ("L1", "L2", "L3")
_orders = count(1)

line_s = st.tuples(st.integers(min_value=0, max_value=1), st.integers(min_value=0, max_value=3))
message_s = st.tuples(
    st.just("message"),
    st.sampled_from(["order.confirmed", "order.paid"]),
    st.dictionaries(st.sampled_from(LINE_REFS), line_s, max_size=3),
)
staff_s = st.tuples(
    st.just("staff"),
    st.sampled_from(["mark_attended", "cancel", "reset_to_draft"]),
    st.integers(min_value=0, max_value=20),
)
steps_s = st.lists(st.one_of(message_s, message_s, staff_s), min_size=1, max_size=7)


def post(document: dict) -> dict:
    body = json.dumps(document).encode()
    response = Client(raise_request_exception=False).post(
        URL, data=body, content_type="application/json", headers=signed_headers(body, secret=SECRET)
    )
    assert response.status_code == 200, response.content
    return response.json()


def held(order_ref: str) -> dict[tuple[str, int], Counter]:
    """Per (line ref, ticket id): the states of the rows that count (all but order-cancelled)."""
    rows = Registration.objects.filter(sale_order_ref=order_ref).exclude(cancel_source="order")
    found: dict[tuple[str, int], Counter] = {}
    for line_ref, ticket_id, state in rows.values_list("sale_order_line_ref", "ticket_id", "state"):
        found.setdefault((line_ref, ticket_id), Counter())[state] += 1
    return found


def staff_acts(order_ref: str, verb: str, pick: int) -> None:
    regs = list(Registration.objects.filter(sale_order_ref=order_ref).order_by("pk"))
    if regs:
        try:
            getattr(reg_services, verb)(registration=regs[pick % len(regs)], actor=STAFF)
        except DomainError as refusal:
            assert refusal.code == "invalid_transition"  # a verb the row's state refuses


@pytest.mark.django_db
@override_settings(EVENT_SEAM_SECRET=SECRET)
@PROPERTY
@given(steps=steps_s)
def test_every_version_leaves_each_line_with_what_an_independent_count_predicts(steps):
    event = ev.EventFactory(seats_limited=False)
    tickets = ev.TicketFactory.create_batch(2, event=event)
    order_ref = f"SO-PROP-{next(_orders)}"
    version = 0
    for step in steps:
        if step[0] == "staff":
            staff_acts(order_ref, step[1], step[2])
            continue
        _, kind, spec = step
        targets = {(ref, tickets[t].pk): q for ref, (t, q) in spec.items()}
        before = held(order_ref)
        expected: dict[str, Counter] = {}
        after_open: dict[tuple[str, int], int] = {}
        for key in set(before) | set(targets):
            states = before.get(key, Counter())
            live, workable = sum(states.values()), states["draft"] + states["open"]
            quantity = targets.get(key, 0)
            cancel = min(max(0, live - quantity), workable)
            kept = min(max(0, live - quantity) - cancel, states["done"])
            mint = max(0, quantity - live)
            expected.setdefault(key[0], Counter()).update(
                cancelled=cancel, kept_attended=kept, minted=mint
            )
            after_open[key] = workable - cancel + mint
        version += 1
        lines = [ticket_line(tickets[t], q, ref=ref) for ref, (t, q) in sorted(spec.items())]
        answer = post(order_message(kind, ref=order_ref, version=version, lines=lines))

        assert answer["status"] == "applied"
        reported = {
            ref: Counter({name: len(found) for name, found in changes.items()})
            for ref, changes in answer["lines"].items()
        }
        assert reported == {ref: +c for ref, c in expected.items() if +c}, (spec, before)
        now = held(order_ref)
        for key, workable in after_open.items():
            states = now.get(key, Counter())
            assert states["draft"] + states["open"] == workable, (key, spec, before, now)
        for changes in answer["lines"].values():
            assert set(
                Registration.objects.filter(pk__in=changes.get("cancelled", [])).values_list(
                    "state", "cancel_source"
                )
            ) <= {("cancel", "order")}
            assert set(
                Registration.objects.filter(pk__in=changes.get("minted", [])).values_list(
                    "state", flat=True
                )
            ) <= {"open"}
        if kind == "order.paid":
            unpaid = Registration.objects.filter(sale_order_ref=order_ref, is_paid=False)
            assert not unpaid.exclude(cancel_source="order").exists()
        assert seats.audit(event=event) == []


@pytest.mark.django_db(transaction=True)
@override_settings(EVENT_SEAM_SECRET=SECRET)
def test_a_shrink_and_the_desk_at_the_same_instant_never_park_the_message():
    event = ev.EventFactory(seats_limited=True, seats_max=50)
    ticket = ev.TicketFactory(event=event)
    outcomes = Counter()
    for round_ in range(8):
        order_ref = f"SO-RACE-{round_}"
        post(order_message(ref=order_ref, lines=[ticket_line(ticket, 2, ref="L1")]))
        older, newest = Registration.objects.filter(sale_order_ref=order_ref).order_by("pk")

        def shrink(order_ref=order_ref):
            return post(
                order_message(ref=order_ref, version=2, lines=[ticket_line(ticket, 1, ref="L1")])
            )

        def desk(newest=newest):
            try:
                reg_services.mark_attended(registration=newest, actor=STAFF)
            except DomainError as refusal:  # the order cancelled it first
                return refusal.code
            return "attended"

        answer, desk_said = run_concurrently([shrink, desk])

        assert answer["status"] == "applied"
        newest.refresh_from_db()
        if desk_said == "attended":  # the desk first: the order's surplus is the older one
            assert newest.state == "done"
            assert answer["lines"]["L1"] == {"cancelled": [older.pk]}
        else:
            assert desk_said == "invalid_transition"
            assert (newest.state, newest.cancel_source) == ("cancel", "order")
            assert answer["lines"]["L1"] == {"cancelled": [newest.pk]}
        outcomes[desk_said] += 1
    assert seats.audit(event=event) == []
    assert sum(outcomes.values()) == 8

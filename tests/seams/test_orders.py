"""The core's order verbs (events.services.orders) and the registration's cancel source."""

from __future__ import annotations

import pytest

from events.errors import ValidationFailed
from events.models import CancelSource, EventAuditLog, Registration
from events.services import orders, registrations
from tests.events import factories as ev
from tests.helpers import snapshot

pytestmark = pytest.mark.django_db


def order_regs(actor, n=2, ref="SO1"):
    ticket = ev.TicketFactory()
    return registrations.register(
        event=ticket.event,
        ticket=ticket,
        attendees=[{"name": f"A{i}"} for i in range(n)],
        sale_order_ref=ref,
        sale_order_line_ref=f"{ref}/1",
        actor=actor,
    )


def test_cancel_records_its_source_and_reset_clears_it(actor):
    staff, order = order_regs(actor)
    registrations.cancel(registration=staff, actor=actor)
    registrations.cancel(registration=order, actor=actor, source=CancelSource.ORDER)
    staff.refresh_from_db()
    order.refresh_from_db()
    assert (staff.cancel_source, order.cancel_source) == ("staff", "order")
    registrations.reset_to_draft(registration=order, actor=actor)
    order.refresh_from_db()
    assert (order.state, order.cancel_source) == ("draft", "")
    assert orders.live_counts(order_ref="SO1") == {"SO1/1": 2}


def test_an_unknown_cancel_source_is_refused_and_writes_nothing(actor):
    reg = order_regs(actor, n=1)[0]
    before = snapshot(reg.event)
    with pytest.raises(ValidationFailed) as refused:
        registrations.cancel(registration=reg, actor=actor, source="robot")
    assert refused.value.code == "invalid_value"
    assert snapshot(reg.event) == before


def test_set_paid_marks_the_order_once_and_audits(actor):
    regs = order_regs(actor, n=2)
    order_regs(actor, n=1, ref="OTHER")
    assert orders.set_paid(order_ref="SO1", actor=actor) == 2
    assert orders.set_paid(order_ref="SO1", actor=actor) == 0
    assert set(Registration.objects.filter(is_paid=True).values_list("pk", flat=True)) == {
        r.pk for r in regs
    }
    assert EventAuditLog.objects.filter(verb="registration.paid").count() == 2


def test_cancel_order_keeps_attended_and_audits_it(actor):
    first, second = order_regs(actor, n=2)
    registrations.mark_attended(registration=first, actor=actor)
    assert orders.cancel_order(order_ref="SO1", actor=actor) == 1
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.state, second.state, second.cancel_source) == ("done", "cancel", "order")
    assert first.audit_rows.filter(verb="registration.kept").count() == 1

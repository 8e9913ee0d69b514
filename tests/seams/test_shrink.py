"""A later version of an order is its whole truth (spec-overlay.md §1.4 "Shrink"): fewer
tickets on a line, a line gone, a ticket changed under the same line ref, a booth dropped —
each converges in the message's one transaction, and the 200 answer lists what changed."""

from __future__ import annotations

import pytest

from booths.models import BookingState, BoothBooking
from booths.services import confirm_booking, request_booking
from events.models import CancelSource, EventAuditLog, Registration
from events.services import registrations as reg_services
from events.services import seats
from events.services.audit import Actor
from seams.models import InboxStatus, SeamInbox, SeamOrder
from seams.services import replay
from tests.booths import factories as booth_factories
from tests.booths.helpers import booths_snapshot
from tests.events import factories as ev
from tests.helpers import snapshot
from tests.seams.host import order_message, ticket_line

pytestmark = pytest.mark.django_db
STAFF = Actor("user", label="staff")


def regs(**filters):
    return Registration.objects.filter(**filters).order_by("pk")


def ids(**filters) -> list[int]:
    return list(regs(**filters).values_list("pk", flat=True))


def untouched(event) -> dict:
    """`snapshot(event)` with booths and bookings, and the audit rows but the seam's own (a
    parked message is audited `seam_message.parked`): equal before and after = no effect."""
    state = snapshot(event)
    state["audit"] = list(
        EventAuditLog.objects.exclude(verb__startswith="seam_message.")
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    state.update({k: v for k, v in booths_snapshot().items() if k != "audit"})
    return state


def booth_line(ref: str, *booths) -> dict:
    return {"ref": ref, "kind": "booth", "booth_ids": [b.pk for b in booths], "price_total": "500"}


def confirmed(booth) -> list[str]:
    return list(
        BoothBooking.objects.filter(booth=booth, state=BookingState.CONFIRMED).values_list(
            "order_ref", flat=True
        )
    )


def test_a_lower_quantity_cancels_the_newest_surplus_and_frees_the_seats_at_once(host):
    ticket = ev.TicketFactory(seats_max=3)
    assert host.post(order_message(lines=[ticket_line(ticket, 3)])).json()["minted"] == 3
    oldest, middle, newest = regs(ticket=ticket)
    assert seats.availability(event=ticket.event, ticket=ticket) == 0

    answer = host.post(order_message(version=2, lines=[ticket_line(ticket, 1)])).json()

    assert answer == {
        "status": "applied",
        "minted": 0,
        "cancelled": 2,
        "kept_attended": 0,
        "lines": {"SO042/1": {"cancelled": [newest.pk, middle.pk]}},
    }
    states = {r.pk: (r.state, r.cancel_source) for r in regs(ticket=ticket)}
    assert states == {
        oldest.pk: ("open", ""),
        middle.pk: ("cancel", CancelSource.ORDER),
        newest.pk: ("cancel", CancelSource.ORDER),
    }
    assert seats.availability(event=ticket.event, ticket=ticket) == 2
    assert seats.audit(event=ticket.event) == []
    other = order_message(ref="SO-OTHER", lines=[ticket_line(ticket, 2, ref="SO-OTHER/1")])
    assert host.post(other).json()["minted"] == 2  # the freed seats are sold again

    # the same truth again changes nothing
    again = host.post(order_message(version=3, lines=[ticket_line(ticket, 1)])).json()
    assert (again["minted"], again["cancelled"], again["lines"]) == (0, 0, {})


def test_a_missing_line_is_cancelled_and_its_attended_registrations_are_kept_and_reported(host):
    first, second = ev.TicketFactory.create_batch(2, event=ev.EventFactory(seats_limited=False))
    lines = [ticket_line(first, 2, ref="L1"), ticket_line(second, 2, ref="L2")]
    host.post(order_message(lines=lines))
    gone_open, gone_attended = regs(ticket=second)
    reg_services.mark_attended(registration=gone_attended, actor=STAFF)

    answer = host.post(order_message(version=2, lines=[ticket_line(first, 2, ref="L1")])).json()

    assert answer["lines"] == {
        "L2": {"cancelled": [gone_open.pk], "kept_attended": [gone_attended.pk]}
    }
    assert (answer["cancelled"], answer["kept_attended"], answer["minted"]) == (1, 1, 0)
    assert regs(ticket=second, state="done").get() == gone_attended
    assert regs(ticket=second, state="cancel", cancel_source=CancelSource.ORDER).get() == gone_open
    assert regs(ticket=first, state="open").count() == 2
    kept = EventAuditLog.objects.get(registration=gone_attended, verb="registration.kept")
    assert kept.data == {"state": "done", "order": "SO042", "line": "L2", "reason": "attended"}


def test_attended_ones_beyond_the_new_quantity_stay_after_the_open_ones_are_cancelled(host, ticket):
    host.post(order_message(lines=[ticket_line(ticket, 3)]))
    still_open, attended_a, attended_b = regs(ticket=ticket)
    for reg in (attended_a, attended_b):
        reg_services.mark_attended(registration=reg, actor=STAFF)

    answer = host.post(order_message(version=2, lines=[ticket_line(ticket, 1)])).json()

    # surplus 2: the one open registration goes, then the newest attended one is reported
    assert answer["lines"] == {
        "SO042/1": {"cancelled": [still_open.pk], "kept_attended": [attended_b.pk]}
    }
    assert ids(ticket=ticket, state="done") == [attended_a.pk, attended_b.pk]


def test_a_ticket_changed_under_the_same_line_ref_cancels_the_old_and_mints_the_new(host):
    event = ev.EventFactory(seats_limited=False)
    standard, vip = ev.TicketFactory.create_batch(2, event=event)
    host.post(order_message(lines=[ticket_line(standard, 2)]))
    old = ids(ticket=standard)

    answer = host.post(order_message(version=2, lines=[ticket_line(vip, 2)])).json()

    new = ids(ticket=vip, state="open")
    assert answer["lines"] == {"SO042/1": {"minted": new, "cancelled": old[::-1]}}
    assert len(new) == 2
    assert ids(ticket=standard, state="cancel", cancel_source=CancelSource.ORDER) == old
    assert set(regs(ticket=vip).values_list("sale_order_line_ref", flat=True)) == {"SO042/1"}


def test_a_quantity_raised_again_mints_again(host, ticket):
    host.post(order_message(lines=[ticket_line(ticket, 3)]))
    host.post(order_message(version=2, lines=[ticket_line(ticket, 1)]))
    answer = host.post(order_message(version=3, lines=[ticket_line(ticket, 3)])).json()
    # the two the order cancelled are not live: two new ones
    assert (answer["minted"], answer["cancelled"]) == (2, 0)
    assert regs(ticket=ticket, state="open").count() == 3
    assert regs(ticket=ticket).count() == 5


def test_a_staff_cancellation_counts_as_existing_in_a_shrink(host, ticket):
    host.post(order_message(lines=[ticket_line(ticket, 3)]))
    staff_cancelled, older_open, newer_open = regs(ticket=ticket)
    reg_services.cancel(registration=staff_cancelled, actor=STAFF)

    answer = host.post(order_message(version=2, lines=[ticket_line(ticket, 2)])).json()

    # live = 3 (the staff cancellation counts), quantity 2: one open registration goes
    assert answer["lines"] == {"SO042/1": {"cancelled": [newer_open.pk]}}
    assert ids(ticket=ticket, state="open") == [older_open.pk]
    staff_cancelled.refresh_from_db()
    assert staff_cancelled.cancel_source == CancelSource.STAFF
    again = host.post(order_message(version=3, lines=[ticket_line(ticket, 2)])).json()
    assert (again["minted"], again["cancelled"]) == (0, 0)


def test_order_paid_with_a_shrink_cancels_first_and_pays_only_what_remains(host, ticket):
    host.post(order_message(lines=[ticket_line(ticket, 3)]))
    kept, *dropped = ids(ticket=ticket)

    answer = host.post(order_message("order.paid", version=2, lines=[ticket_line(ticket, 1)]))

    assert answer.json()["lines"] == {"SO042/1": {"cancelled": dropped[::-1]}}
    assert answer.json()["paid"] == 1
    assert ids(ticket=ticket, is_paid=True) == [kept]
    assert ids(ticket=ticket, state="cancel", is_paid=False) == dropped


def test_seats_a_shrink_frees_serve_the_line_that_grows_in_the_same_message(host):
    event = ev.EventFactory(seats_limited=True, seats_max=3)
    standard, vip = ev.TicketFactory.create_batch(2, event=event)
    host.post(order_message(lines=[ticket_line(standard, 3, ref="L1")]))

    shifted = [ticket_line(standard, 1, ref="L1"), ticket_line(vip, 2, ref="L2")]
    answer = host.post(order_message(version=2, lines=shifted))

    assert answer.status_code == 200, answer.content
    assert (answer.json()["cancelled"], answer.json()["minted"]) == (2, 2)
    assert seats.availability(event=event) == 0
    assert seats.audit(event=event) == []


def test_a_parked_shrink_writes_nothing_and_its_replay_converges_once(host):
    event = ev.EventFactory(seats_limited=True, seats_max=3)
    standard, vip = ev.TicketFactory.create_batch(2, event=event)
    host.post(order_message(lines=[ticket_line(standard, 2, ref="L1")]))
    before = untouched(event)

    grown = [ticket_line(standard, 1, ref="L1"), ticket_line(vip, 3, ref="L2")]  # 4 > 3 seats
    response = host.post(order_message(version=2, lines=grown), msg_id="msg_v2")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "sold_out"
    assert untouched(event) == before  # nothing cancelled
    assert SeamOrder.objects.get().version == 1
    parked = SeamInbox.objects.get(message_id="msg_v2")
    event.seats_max = 4
    event.save(update_fields=["seats_max"])

    result = replay(inbox_id=parked.pk, actor=STAFF)

    assert result.status == InboxStatus.APPLIED
    assert (result.payload["cancelled"], result.payload["minted"]) == (1, 3)
    assert regs(ticket=standard, state="open").count() == 1
    assert regs(ticket=vip, state="open").count() == 3
    assert replay(inbox_id=parked.pk, actor=STAFF).payload["replayed"] is False
    assert regs(event=event).count() == 5


def test_a_shrink_that_meets_a_taken_booth_cancels_nothing(host, ticket):
    booth = booth_factories.BoothFactory(event=ticket.event)
    host.post(order_message(lines=[ticket_line(ticket, 3)]))
    rival = order_message(ref="SO-RIVAL", lines=[booth_line("SO-RIVAL/1", booth)])
    assert host.post(rival).json()["status"] == "applied"
    before = untouched(ticket.event)

    edit = [ticket_line(ticket, 1), booth_line("SO042/2", booth)]
    response = host.post(order_message(version=2, lines=edit))

    assert response.json()["error"]["code"] == "booth_unavailable"
    assert untouched(ticket.event) == before
    assert regs(ticket=ticket, state="open").count() == 3

    # the rival lets the booth go: the replay shrinks and books, once
    host.post(order_message("order.cancelled", ref="SO-RIVAL", version=2))
    parked = SeamInbox.objects.get(status=InboxStatus.PARKED)
    result = replay(inbox_id=parked.pk, actor=STAFF)
    assert (result.status, result.payload["cancelled"]) == (InboxStatus.APPLIED, 2)
    assert result.payload["booths"]["confirmed"] == [booth.pk]
    assert regs(ticket=ticket, state="open").count() == 1


def test_a_dropped_booth_line_releases_its_booth_for_another_order(host, ticket):
    kept, dropped = booth_factories.BoothFactory.create_batch(2, event=ticket.event)
    first = [ticket_line(ticket, 1), booth_line("SO042/2", kept), booth_line("SO042/3", dropped)]
    answer = host.post(order_message(lines=first)).json()
    assert answer["booths"] == {
        "confirmed": [kept.pk, dropped.pk],
        "released": [],
        "cancelled_order_refs": [],
    }

    later = [ticket_line(ticket, 1), booth_line("SO042/2", kept)]
    answer = host.post(order_message(version=2, lines=later)).json()

    assert answer["booths"] == {
        "confirmed": [],
        "released": [dropped.pk],
        "cancelled_order_refs": [],
    }
    assert confirmed(kept) == ["SO042"] and confirmed(dropped) == []
    dropped.refresh_from_db()
    assert (dropped.state, dropped.order_ref, dropped.partner_ref) == ("available", "", "")
    other = order_message(ref="SO-B", lines=[booth_line("SO-B/1", dropped)])
    assert host.post(other).json()["booths"]["confirmed"] == [dropped.pk]

    # the order without any booth line: its last booth goes too
    answer = host.post(order_message(version=3, lines=[ticket_line(ticket, 1)])).json()
    assert answer["booths"] == {"confirmed": [], "released": [kept.pk], "cancelled_order_refs": []}
    assert confirmed(kept) == []


def test_a_booth_removed_from_a_lines_ids_is_released(host, ticket):
    a, b = booth_factories.BoothFactory.create_batch(2, event=ticket.event)
    host.post(order_message(lines=[booth_line("SO042/1", a, b)]))
    answer = host.post(order_message(version=2, lines=[booth_line("SO042/1", a)])).json()
    assert answer["booths"]["released"] == [b.pk]
    assert confirmed(a) == ["SO042"] and confirmed(b) == []


def test_a_first_version_releases_nothing_and_a_ticket_only_order_reports_no_booths(host, ticket):
    """Only a later version replaces an earlier one: a first message leaves booths the order
    holds by other means (staff confirmed its request) as they are."""
    booth = booth_factories.BoothFactory(event=ticket.event)
    booking = request_booking(
        booth=booth, order_ref="SO042", order_line_ref="", partner_ref="P7", contact={}, actor=STAFF
    )
    confirm_booking(booking=booking, actor=STAFF)
    before = booths_snapshot()
    answer = host.post(order_message(lines=[ticket_line(ticket, 1)])).json()
    assert answer["minted"] == 1 and "booths" not in answer
    assert {k: v for k, v in booths_snapshot().items() if k != "audit"} == {
        k: v for k, v in before.items() if k != "audit"
    }


def test_the_pending_requests_a_booth_line_cancels_are_named_in_the_answer(host, ticket):
    booth = booth_factories.BoothFactory(event=ticket.event)
    for ref in ("SO-Q1", "SO-Q2"):
        request_booking(
            booth=booth,
            order_ref=ref,
            order_line_ref=f"{ref}/1",
            partner_ref="",
            contact={},
            actor=STAFF,
        )
    answer = host.post(order_message(lines=[booth_line("SO042/1", booth)])).json()
    assert answer["booths"] == {
        "confirmed": [booth.pk],
        "released": [],
        "cancelled_order_refs": ["SO-Q1", "SO-Q2"],
    }
    assert set(
        BoothBooking.objects.filter(state=BookingState.CANCELLED).values_list(
            "order_ref", flat=True
        )
    ) == {"SO-Q1", "SO-Q2"}

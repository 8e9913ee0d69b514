"""The seam's effects: exactly once, out of order, mint counts, contacts, parking and replay, and
an unexpected error storing nothing."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from events.models import CancelSource, ContactSource, Registration, RegistrationAnswer
from events.services import events as event_services
from events.services import registrations as reg_services
from events.services import seats
from events.services.audit import Actor
from seams.models import InboxStatus, SeamInbox, SeamOrder
from seams.services import replay
from tests.events import factories as ev
from tests.helpers import snapshot
from tests.seams.host import order_message, ticket_line

pytestmark = pytest.mark.django_db
STAFF = Actor("user", label="staff")


def regs(**filters):
    return Registration.objects.filter(**filters).order_by("pk")


# --- 2. exactly once (in sequence; the concurrent copy is a probe) -----------------------


def test_the_same_message_five_times_has_one_effect(host, ticket):
    document = order_message(lines=[ticket_line(ticket, 2)])
    answers = [host.post(document, msg_id="msg_same").json()["status"] for _ in range(5)]
    assert answers == ["applied", "duplicate", "duplicate", "duplicate", "duplicate"]
    assert regs(ticket=ticket).count() == 2
    assert SeamInbox.objects.get().status == InboxStatus.APPLIED


def test_a_new_id_with_the_same_version_is_stale(host, ticket):
    document = order_message(lines=[ticket_line(ticket, 2)])
    assert host.post(document).json() == {
        "status": "applied",
        "minted": 2,
        "cancelled": 0,
        "kept_attended": 0,
        "lines": {"SO042/1": {"minted": [r.pk for r in regs(ticket=ticket)]}},
    }
    assert host.post(document).json() == {"status": "stale", "version": 1}
    assert regs(ticket=ticket).count() == 2
    assert list(SeamInbox.objects.order_by("pk").values_list("status", flat=True)) == [
        "applied",
        "stale",
    ]


# --- 3. out of order ------------------------------------------------------------------------


def test_cancelled_then_late_confirmed_mints_nothing(host, ticket):
    line = ticket_line(ticket, 2)
    assert host.post(order_message("order.cancelled", version=3, lines=[line])).status_code == 200
    response = host.post(order_message("order.confirmed", version=2, lines=[line]))
    assert response.json()["status"] == "stale"
    assert not regs(ticket=ticket).exists()
    assert SeamInbox.objects.get(type="order.confirmed").status == InboxStatus.STALE
    assert SeamOrder.objects.get().state == "cancelled"


def test_paid_before_confirmed_mints_once_and_sets_is_paid(host, ticket):
    line = ticket_line(ticket, 2)
    answer = host.post(order_message("order.paid", version=2, lines=[line])).json()
    assert answer == {
        "status": "applied",
        "minted": 2,
        "cancelled": 0,
        "kept_attended": 0,
        "lines": {"SO042/1": {"minted": [r.pk for r in regs(ticket=ticket)]}},
        "paid": 2,
    }
    assert host.post(order_message("order.confirmed", version=1, lines=[line])).json()[
        "status"
    ] == ("stale")
    rows = list(regs(ticket=ticket))
    assert len(rows) == 2
    assert all(r.is_paid and r.state == "open" for r in rows)


def test_paid_after_confirmed_heals_a_grown_quantity_and_sets_is_paid(host, ticket):
    host.post(order_message(version=1, lines=[ticket_line(ticket, 1)]))
    assert not regs(ticket=ticket).get().is_paid
    host.post(order_message("order.paid", version=2, lines=[ticket_line(ticket, 3)]))
    assert regs(ticket=ticket).count() == 3
    assert regs(ticket=ticket, is_paid=True).count() == 3


# --- 4. mint counts -------------------------------------------------------------------------


def test_mint_heal_staff_cancel_order_cancel_and_reconfirm(host, ticket):
    host.post(order_message(version=1, lines=[ticket_line(ticket, 3)]))
    assert regs(ticket=ticket, state="open").count() == 3

    host.post(order_message(version=2, lines=[ticket_line(ticket, 5)]))
    assert regs(ticket=ticket, state="open").count() == 5

    staff_cancelled = regs(ticket=ticket).first()
    reg_services.cancel(registration=staff_cancelled, actor=STAFF)
    host.post(order_message("order.paid", version=3, lines=[ticket_line(ticket, 5)]))
    assert regs(ticket=ticket).count() == 5  # staff decided: not replaced
    assert regs(ticket=ticket, cancel_source=CancelSource.STAFF).count() == 1

    attended = regs(ticket=ticket, state="open").first()
    reg_services.mark_attended(registration=attended, actor=STAFF)
    response = host.post(order_message("order.cancelled", version=4, lines=[]))
    assert response.json() == {"status": "applied", "cancelled": 3}
    assert regs(ticket=ticket, state="cancel", cancel_source=CancelSource.ORDER).count() == 3
    assert regs(ticket=ticket, state="done").get() == attended
    assert staff_cancelled.audit_rows.filter(verb="registration.cancelled").count() == 1
    assert attended.audit_rows.filter(verb="registration.kept").count() == 1

    host.post(order_message(version=5, lines=[ticket_line(ticket, 5)]))
    # live = 1 staff-cancelled + 1 attended; 3 order-cancelled are replaced
    assert regs(ticket=ticket, state="open").count() == 3
    assert regs(ticket=ticket).count() == 8


def test_order_cancel_cancels_draft_and_open_rows_and_keeps_attended_ones(host, ticket):
    host.post(order_message(version=1, lines=[ticket_line(ticket, 3)]))
    draft, still_open, attended = regs(ticket=ticket)
    reg_services.reset_to_draft(registration=draft, actor=STAFF)
    reg_services.mark_attended(registration=attended, actor=STAFF)
    response = host.post(order_message("order.cancelled", version=2))
    assert response.json() == {"status": "applied", "cancelled": 2}
    states = {r.pk: (r.state, r.cancel_source) for r in regs(ticket=ticket)}
    assert states == {
        draft.pk: ("cancel", CancelSource.ORDER),
        still_open.pk: ("cancel", CancelSource.ORDER),
        attended.pk: ("done", ""),
    }


def test_seats_free_at_once_on_order_cancel(host):
    ticket = ev.TicketFactory(seats_max=2)
    host.post(order_message(ref="A", lines=[ticket_line(ticket, 2, ref="A/1")]))
    host.post(order_message("order.cancelled", ref="A", version=2))
    response = host.post(order_message(ref="B", lines=[ticket_line(ticket, 2, ref="B/1")]))
    assert response.json()["status"] == "applied"


# --- 5. sale status, contacts, partner sync ---------------------------------------------------


def test_sale_status_follows_amount_total(host, ticket):
    host.post(
        order_message(ref="F", amount_total="0.00", lines=[ticket_line(ticket, 1, ref="F/1")])
    )
    host.post(order_message(ref="S", amount_total="10", lines=[ticket_line(ticket, 1, ref="S/1")]))
    assert regs(sale_order_ref="F").get().sale_status == "free"
    assert regs(sale_order_ref="S").get().sale_status == "sold"


def test_attendee_details_then_partner_details_and_refs(host, ticket):
    partner = {
        "ref": "P7",
        "name": "Pat Partner",
        "email": "pat@example.org",
        "phone": "+32 2 555 01 01",
        "company_name": "Pat Inc",
    }
    line = ticket_line(ticket, 3, attendees=[{"name": "Ann Attendee", "email": "ann@example.org"}])
    host.post(order_message(partner=partner, lines=[line], utm={"source": "shop", "campaign": "x"}))
    first, second, third = regs(ticket=ticket)
    assert (first.name, first.email, first.contact_source) == (
        "Ann Attendee",
        "ann@example.org",
        ContactSource.ATTENDEE,
    )
    for row in (second, third):
        assert (row.name, row.email, row.company_name, row.contact_source) == (
            "Pat Partner",
            "pat@example.org",
            "Pat Inc",
            ContactSource.PARTNER,
        )
        assert row.phone == "+3225550101"
    for row in (first, second, third):
        assert (row.partner_ref, row.sale_order_ref, row.sale_order_line_ref) == (
            "P7",
            "SO042",
            "SO042/1",
        )
        assert (row.utm_source, row.utm_medium, row.utm_campaign) == ("shop", "", "x")


def test_partner_updated_syncs_only_partner_sourced_draft_open_rows(host, ticket):
    line = ticket_line(ticket, 3, attendees=[{"name": "Ann Attendee", "email": "ann@example.org"}])
    host.post(order_message(lines=[line]))
    typed, partner_open, partner_done = regs(ticket=ticket)
    reg_services.mark_attended(registration=partner_done, actor=STAFF)
    response = host.post(
        {
            "type": "partner.updated",
            "data": {"partner": {"ref": "P7", "name": "Pat Renamed", "email": "new@example.org"}},
        }
    )
    assert response.json() == {"status": "applied", "synced": 1}
    typed.refresh_from_db()
    partner_open.refresh_from_db()
    partner_done.refresh_from_db()
    assert (partner_open.name, partner_open.email) == ("Pat Renamed", "new@example.org")
    assert typed.name == "Ann Attendee"
    assert partner_done.name == "Pat Partner"


def test_once_per_order_answers_are_copied_across_lines(host):
    event = ev.EventFactory()
    first, second = ev.TicketFactory(event=event), ev.TicketFactory(event=event)
    once = ev.QuestionFactory(event=event, once_per_order=True)
    each = ev.QuestionFactory(event=event)
    lines = [
        ticket_line(
            first,
            1,
            ref="SO042/1",
            attendees=[{"name": "A", "answers": {str(once.pk): "ACME PO-7", str(each.pk): "a"}}],
        ),
        ticket_line(second, 2, ref="SO042/2", attendees=[{"name": "B"}]),
    ]
    assert host.post(order_message(lines=lines)).json()["minted"] == 3
    copied = RegistrationAnswer.objects.filter(question=once)
    assert sorted(copied.values_list("text_value", flat=True)) == ["ACME PO-7"] * 3
    assert RegistrationAnswer.objects.filter(question=each).count() == 1


# --- refusals of the effect: parked -----------------------------------------------------------


def test_unknown_ticket_slot_and_booth_lines_are_parked_unknown_reference(host, ticket):
    other_slot = ev.SlotFactory()
    cases = [
        [{**ticket_line(ticket, 1), "ticket_id": ticket.pk + 10_000}],
        [ticket_line(ticket, 1, slot=other_slot)],
        [
            ticket_line(ticket, 1),
            {"ref": "SO042/2", "kind": "booth", "booth_ids": [3], "price_total": "9"},
        ],
    ]
    before = snapshot(ticket.event)
    for version, lines in enumerate(cases, start=1):
        response = host.post(order_message(version=version, lines=lines))
        assert response.status_code == 409, response.content
        assert response.json()["status"] == "parked"
        assert response.json()["error"]["code"] == "unknown_reference"
    assert not regs().exists()
    assert snapshot(ticket.event)["ledger"] == before["ledger"]
    assert list(SeamInbox.objects.order_by().values_list("status", "error_code").distinct()) == [
        ("parked", "unknown_reference")
    ]
    assert not SeamOrder.objects.exists()  # a parked message does not move the version


def test_a_line_kind_with_no_handler_is_parked_unknown_reference(host, ticket, monkeypatch):
    """Without an overlay registered for booth lines (`hooks.sale_order_lines`), a booth line
    refuses the whole message, tickets included."""
    from events import hooks

    monkeypatch.delitem(hooks.sale_order_lines, "booth", raising=False)
    booth_line = {"ref": "SO042/2", "kind": "booth", "booth_ids": [1], "price_total": "9"}
    response = host.post(order_message(lines=[ticket_line(ticket, 1), booth_line]))
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert (error["code"], error["path"]) == ("unknown_reference", "data.order.lines[1].kind")
    assert not regs().exists()
    assert SeamInbox.objects.get().status == InboxStatus.PARKED


def test_a_cancelled_event_parks_registrations_closed(host, ticket):
    event_services.cancel_event(event=ticket.event, actor=STAFF)
    response = host.post(order_message(lines=[ticket_line(ticket, 1)]))
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "registrations_closed"
    assert SeamInbox.objects.get().status == InboxStatus.PARKED
    assert not regs().exists() and not SeamOrder.objects.exists()


# --- 6. sold out, parked, replay after staff raised the limit -----------------------------


def test_sold_out_parks_then_replay_applies_once(host):
    ticket = ev.TicketFactory(seats_max=2)
    before = snapshot(ticket.event)
    response = host.post(order_message(lines=[ticket_line(ticket, 3)]))
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "sold_out"
    row = SeamInbox.objects.get()
    assert (row.status, row.error_code, row.applied_at) == ("parked", "sold_out", None)
    after = snapshot(ticket.event)
    assert after["registrations"] == before["registrations"] == []
    assert after["ledger"] == before["ledger"]

    ticket.seats_max = 5
    ticket.save(update_fields=["seats_max"])
    first = replay(inbox_id=row.pk, actor=STAFF)
    assert (first.status, first.payload["minted"]) == ("applied", 3)
    row.refresh_from_db()
    assert (row.status, row.error_code) == ("applied", "")
    assert row.applied_at is not None
    second = replay(inbox_id=row.pk, actor=STAFF)
    assert second.status == "applied"
    assert second.payload["replayed"] is False
    assert regs(ticket=ticket).count() == 3


def test_replay_that_fails_again_stays_parked_with_the_new_error(host):
    ticket = ev.TicketFactory(seats_max=1)
    host.post(order_message(lines=[ticket_line(ticket, 2)]))
    row = SeamInbox.objects.get()
    result = replay(inbox_id=row.pk, actor=STAFF)
    assert result.status == "parked"
    assert result.payload["error"]["code"] == "sold_out"
    assert not regs(ticket=ticket).exists()


def test_the_command_lists_and_replays(host, capsys):
    ticket = ev.TicketFactory(seats_max=1)
    host.post(order_message(lines=[ticket_line(ticket, 2)], ref="SO-P"), msg_id="msg_parked")
    host.post(order_message(lines=[ticket_line(ticket, 1, ref="X/1")], ref="X"), msg_id="msg_ok")
    call_command("seam_inbox", "--list", "--status", "parked")
    out = capsys.readouterr().out
    assert "msg_parked" in out and "sold_out" in out and "msg_ok" not in out
    parked = SeamInbox.objects.get(message_id="msg_parked")
    with pytest.raises(Exception, match="still parked — sold_out"):
        call_command("seam_inbox", "--replay", str(parked.pk))
    reg_services.cancel(registration=regs(sale_order_ref="X").get(), actor=STAFF)
    ticket.seats_max = 2
    ticket.save(update_fields=["seats_max"])
    call_command("seam_inbox", "--replay", str(parked.pk))
    assert capsys.readouterr().out.strip() == f"#{parked.pk}: applied"
    assert regs(sale_order_ref="SO-P", state="open").count() == 2


# --- 7. an unexpected error stores nothing --------------------------------------------------


def test_an_unexpected_error_answers_500_and_stores_nothing(host, ticket, monkeypatch):
    from events.services import orders

    def boom(**kwargs):
        raise RuntimeError("injected")

    monkeypatch.setattr(orders, "set_paid", boom)
    before = snapshot(ticket.event)
    response = host.post(order_message("order.paid", lines=[ticket_line(ticket, 2)]), msg_id="m1")
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "server_error"
    assert snapshot(ticket.event) == before
    assert not SeamInbox.objects.exists() and not SeamOrder.objects.exists()
    monkeypatch.undo()
    retry = host.post(order_message("order.paid", lines=[ticket_line(ticket, 2)]), msg_id="m1")
    assert retry.json()["status"] == "applied"
    assert regs(ticket=ticket, is_paid=True).count() == 2


def test_heal_leaves_a_staff_draft_as_it_is(host, ticket):
    host.post(order_message(version=1, lines=[ticket_line(ticket, 2)]))
    draft = regs(ticket=ticket).first()
    reg_services.reset_to_draft(registration=draft, actor=STAFF)
    response = host.post(order_message("order.paid", version=2, lines=[ticket_line(ticket, 2)]))
    assert response.json() == {
        "status": "applied",
        "minted": 0,
        "cancelled": 0,
        "kept_attended": 0,
        "lines": {},
        "paid": 2,
    }
    draft.refresh_from_db()
    assert draft.state == "draft"
    assert regs(ticket=ticket).count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_barcode_drawn_twice_reruns_the_message_once_with_new_barcodes(monkeypatch):
    """The booking runs without a savepoint of its own inside the message's transaction: a
    barcode collision rolls the whole transaction back, and the message is recorded and applied
    again with new barcodes (as register retries its own)."""
    import secrets

    from seams.messages import parse
    from seams.services.receive import record_and_apply

    ticket = ev.TicketFactory(event=ev.EventFactory(seats_limited=True, seats_max=5))
    existing = ev.RegistrationFactory(event=ticket.event)
    handed: list[str] = []

    def barcode() -> str:
        handed.append(existing.barcode if not handed else str(secrets.randbits(64)))
        return handed[-1]

    monkeypatch.setattr(reg_services.booking, "new_barcode", barcode)
    document = order_message(ref="SO-BC", lines=[ticket_line(ticket, 2, ref="SO-BC/1")])
    result = record_and_apply(message_id="msg_bc", document=document, message=parse(document))

    assert result.status == "applied"
    assert handed[0] == existing.barcode and len(handed) == 4  # two drawn twice
    rows = Registration.objects.filter(sale_order_ref="SO-BC")
    assert sorted(r.barcode for r in rows) == sorted(handed[2:])
    assert SeamInbox.objects.filter(message_id="msg_bc").count() == 1
    assert seats.audit(event=ticket.event) == []  # the first attempt's seats rolled back

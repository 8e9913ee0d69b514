"""The effects of a sale-seam message (spec-overlay.md §1.3–§1.4), inside the caller's
transaction.

Invariants:
- per order the seam keeps the highest applied `version` in `SeamOrder`; the row is locked
  first (so the messages of one order are applied one at a time) and a message at or below it
  is `stale` with no effect — out-of-order delivery converges;
- every reference is resolved before anything is written: an unknown ticket, slot or an
  unwired line kind raises `UnknownReference`; the effect then succeeds or fails whole;
- ticket effects go through `events.services.orders` (the registration service and the seat
  engine); other line kinds through `events.hooks.sale_order_lines` (booths);
- a confirmed or paid message of a later version than one already applied is the order's
  whole truth: what its lines no longer hold (fewer tickets, a line gone, a booth dropped) is
  cancelled or released in the same transaction, and the answer lists every change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction

from events import hooks
from events.models import Ticket
from events.services import orders, registrations
from seams import selectors
from seams.errors import UnknownReference
from seams.messages import LineData, Message, OrderData
from seams.models import InboxStatus, SeamOrder

STATE_OF = {
    "order.confirmed": "confirmed",
    "order.paid": "paid",
    "order.cancelled": "cancelled",
}


@dataclass
class Outcome:
    status: str  # applied | stale
    summary: dict[str, Any] = field(default_factory=dict)


def apply(*, message: Message, actor: Any) -> Outcome:
    """Apply one parsed message. Raises the effect's DomainError (the caller parks it).

    No savepoint of its own: `receive` and `replay` wrap it in the one that parking rolls
    back to."""
    with transaction.atomic(savepoint=False):
        if message.partner is not None:
            synced = registrations.sync_from_partner(
                partner_ref=message.partner.ref,
                name=message.partner.name,
                email=message.partner.email,
                phone=message.partner.phone,
                company_name=message.partner.company_name,
                actor=actor,
            )
            return Outcome(InboxStatus.APPLIED, {"synced": synced})
        order = message.order
        assert order is not None  # parse() gives an order or a partner
        minting = message.type != "order.cancelled"
        seam_order, tickets = _lock_order(order, read_tickets=minting)
        if order.version <= seam_order.version:
            return Outcome(InboxStatus.STALE, {"version": seam_order.version})
        # A version applied before: this one replaces it, so what it no longer names goes.
        later = seam_order.version > 0
        if not minting:
            summary = _cancel(order, actor)
        else:
            summary = _mint(order, tickets, actor, later=later)
            if message.type == "order.paid":
                summary["paid"] = orders.set_paid(order_ref=order.ref, actor=actor)
                _other_kinds("paid", order, actor, summary)
        seam_order.version = order.version
        seam_order.state = STATE_OF[message.type]
        _save_order(seam_order)
    return Outcome(InboxStatus.APPLIED, summary)


def _lock_order(order: OrderData, *, read_tickets: bool) -> tuple[SeamOrder, dict[int, Ticket]]:
    """The order's version row, created at version 0 if new, locked — in one statement; with
    `read_tickets`, then the tickets its lines name (with their events), read after the lock.

    `INSERT … ON CONFLICT DO UPDATE` behind the unique order_ref takes the row lock whether it
    inserts or finds the row: two first messages of one order never both create it, and the
    second waits for the first to commit, then reads the version the first wrote.
    """
    ticket_ids = [
        line.ticket_id
        for line in order.lines
        if line.kind == "ticket" and line.ticket_id is not None
    ]
    tickets: dict[int, Ticket] = {}
    with connection.cursor() as cursor:
        cursor.execute(_ORDER_SQL["lock"], [order.ref])
        pk, version, state = cursor.fetchone()
        if read_tickets and ticket_ids:
            cursor.execute(*selectors.tickets_statement(ticket_ids))
            tickets = selectors.tickets_found(cursor.fetchall())
    return SeamOrder(pk=pk, order_ref=order.ref, version=version, state=state), tickets


def _save_order(seam_order: SeamOrder) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_ORDER_SQL["save"], [seam_order.version, seam_order.state, seam_order.pk])


# Fixed statements. Built from constants: the table name from model meta; values are parameters.
_ORDER_SQL = {
    "lock": f"INSERT INTO {SeamOrder._meta.db_table} AS o (order_ref, version, state) "  # noqa: S608
    "VALUES (%s, 0, 'new') ON CONFLICT (order_ref) DO UPDATE SET order_ref = o.order_ref "
    "RETURNING o.id, o.version, o.state",
    "save": f"UPDATE {SeamOrder._meta.db_table} SET version = %s, state = %s WHERE id = %s",  # noqa: S608
}


def _ticket_lines(order: OrderData, tickets: dict[int, Ticket]) -> list[orders.TicketLine]:
    """Resolve every ticket line's references (`tickets`: those the lines name, as read), or
    refuse the whole message."""
    ticket_lines = [line for line in order.lines if line.kind == "ticket"]
    slots = selectors.slots_by_id(line.slot_id for line in ticket_lines)
    resolved = []
    for index, line in enumerate(order.lines):
        if line.kind != "ticket":
            continue
        ticket = tickets.get(line.ticket_id or 0)
        if ticket is None:
            raise UnknownReference(
                f"Line {line.ref}: there is no ticket {line.ticket_id}.",
                path=f"data.order.lines[{index}].ticket_id",
                line=line.ref,
            )
        slot = None
        if line.slot_id is not None:
            slot = slots.get(line.slot_id)
            if slot is None or slot.event_id != ticket.event_id:
                raise UnknownReference(
                    f"Line {line.ref}: there is no slot {line.slot_id} for this ticket's event.",
                    path=f"data.order.lines[{index}].slot_id",
                    line=line.ref,
                )
        resolved.append(
            orders.TicketLine(
                ref=line.ref,
                ticket=ticket,
                quantity=line.quantity,
                slot=slot,
                attendees=line.attendees,
            )
        )
    return resolved


def _check_kinds(order: OrderData) -> None:
    for index, line in enumerate(order.lines):
        if line.kind != "ticket" and line.kind not in hooks.sale_order_lines:
            raise UnknownReference(
                f"Line {line.ref}: {line.kind} lines are not handled by this installation.",
                path=f"data.order.lines[{index}].kind",
                line=line.ref,
            )


def _lines_of(order: OrderData, kind: str) -> list[LineData]:
    return [line for line in order.lines if line.kind == kind]


def _other_kinds(
    effect: str, order: OrderData, actor: Any, summary: dict[str, Any], *, later: bool = False
) -> None:
    """Call each registered line kind's handler; what it reports joins the answer (a mapping
    per key, merged across the effects of one message)."""
    for kind, handler in hooks.sale_order_lines.items():
        reported = handler(
            effect=effect, order=order, lines=_lines_of(order, kind), actor=actor, later=later
        )
        for key, value in (reported or {}).items():
            if isinstance(value, dict) and isinstance(summary.get(key), dict):
                summary[key].update(value)
            else:
                summary[key] = value


def _mint(
    order: OrderData, tickets: dict[int, Ticket], actor: Any, *, later: bool
) -> dict[str, Any]:
    _check_kinds(order)
    lines = _ticket_lines(order, tickets)
    changes = orders.mint(
        order_ref=order.ref,
        partner=orders.Partner(
            ref=order.partner.ref,
            name=order.partner.name,
            email=order.partner.email,
            phone=order.partner.phone,
            company_name=order.partner.company_name,
        ),
        lines=lines,
        amount_total=order.amount_total,
        utm=order.utm,
        lang=order.lang,
        actor=actor,
    )
    summary = changes.summary()
    _other_kinds("confirm", order, actor, summary, later=later)
    return summary


def _cancel(order: OrderData, actor: Any) -> dict[str, Any]:
    summary: dict[str, Any] = {"cancelled": orders.cancel_order(order_ref=order.ref, actor=actor)}
    _other_kinds("cancel", order, actor, summary)
    return summary

"""Host sale orders acting on registrations (spec-overlay.md §1.4): mint, mark paid, cancel.

Invariants:
- an order's registrations are found by `sale_order_ref` / `sale_order_line_ref`; a line holds
  `quantity` live registrations after `mint`, where *live* excludes those cancelled by an order
  cancellation (`cancel_source = order`) but counts those cancelled by staff (staff decided);
- every seat change goes through `registrations` (lock-first seat engine); `mint` is one
  transaction over all lines, taken in ascending event order, so it succeeds or fails whole;
- `set_paid` and `cancel_order` write their audit rows in the same transaction.
The caller (the seams overlay) serialises the verbs of one order; these verbs take the row
locks the seat engine needs and nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from typing import Any

from django.db import transaction

from events.models import (
    CancelSource,
    ContactSource,
    Question,
    Registration,
    RegistrationState,
    SaleStatus,
    Slot,
    Ticket,
)
from events.services import audit, registrations
from events.services import rows as sql_rows


@dataclass(frozen=True)
class Partner:
    ref: str
    name: str = ""
    email: str = ""
    phone: str = ""
    company_name: str = ""

    def as_attendee(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "email": self.email,
            "phone": self.phone,
            "company_name": self.company_name,
            "answers": {},
        }


@dataclass(frozen=True)
class TicketLine:
    """One ticket line of a host order; `attendees` are mappings like `register`'s."""

    ref: str
    ticket: Ticket  # with `.event` loaded
    quantity: int
    slot: Slot | None = None
    attendees: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


@cache
def _live_counts_sql() -> str:
    # S608: built from constants (the table name from model meta); values are params.
    return f"""
        SELECT sale_order_line_ref, count(*)
          FROM {Registration._meta.db_table}
         WHERE sale_order_ref = %s AND cancel_source <> %s
         GROUP BY sale_order_line_ref
    """  # noqa: S608


def live_counts(*, order_ref: str) -> dict[str, int]:
    """Per line ref: registrations that count as existing (all but order-cancelled ones); one
    fixed statement, prepared (rows.fetch)."""
    return dict(sql_rows.fetch(_live_counts_sql(), [order_ref, CancelSource.ORDER]))


def mint(
    *,
    order_ref: str,
    partner: Partner,
    lines: Sequence[TicketLine],
    amount_total: Decimal,
    utm: Mapping[str, str] | None = None,
    actor: Any,
) -> list[Registration]:
    """Create the missing registrations of every ticket line (`quantity − live`), all or none.

    Attendee entries are used from the first missing index on; the rest take the partner's
    details (`contact_source = partner`). A once-per-order answer given on any line is copied to
    every new registration of the same event in the order.
    """
    sale_status = SaleStatus.FREE if amount_total == 0 else SaleStatus.SOLD
    # No savepoint: a failure must leave the caller's enclosing block anyway (all or none).
    with transaction.atomic(savepoint=False):
        # The live registrations and the once-per-order questions: one round trip.
        events = sorted({ln.ticket.event_id for ln in lines if ln.ticket.event_id is not None})
        live_rows, once_rows = sql_rows.fetch_many(
            [
                (_live_counts_sql(), [order_ref, CancelSource.ORDER]),
                (_once_per_order_sql(), [events]),
            ]
        )
        live: dict[str, int] = dict(live_rows)
        plan: list[tuple[TicketLine, list[dict[str, Any]], list[str]]] = []
        for line in sorted(lines, key=lambda ln: (ln.ticket.event_id, ln.ref)):
            start = live.get(line.ref, 0)
            attendees: list[dict[str, Any]] = []
            sources: list[str] = []
            for index in range(start, line.quantity):
                if index < len(line.attendees):
                    given = line.attendees[index]
                    attendees.append(
                        {
                            "name": given.get("name") or "",
                            "email": given.get("email") or "",
                            "phone": given.get("phone") or "",
                            "company_name": given.get("company_name") or "",
                            "answers": dict(given.get("answers") or {}),
                        }
                    )
                    sources.append(ContactSource.ATTENDEE)
                else:
                    attendees.append(partner.as_attendee())
                    sources.append(ContactSource.PARTNER)
            if attendees:
                plan.append((line, attendees, sources))
        _spread_once_per_order(
            lines, [(line, attendees) for line, attendees, _ in plan], once=dict(once_rows)
        )
        minted: list[Registration] = []
        for line, attendees, sources in plan:
            event = line.ticket.event
            assert event is not None  # an event's ticket (the caller resolved it)
            minted += registrations.register(
                event=event,
                attendees=attendees,
                ticket=line.ticket,
                slot=line.slot,
                state=RegistrationState.OPEN,
                partner_ref=partner.ref,
                sale_order_ref=order_ref,
                sale_order_line_ref=line.ref,
                sale_status=sale_status,
                utm=utm,
                contact_sources=sources,
                actor=actor,
                savepoint=False,  # all or none with the caller's block, as this one
            )
    return minted


@cache
def _once_per_order_sql() -> str:
    # S608: built from constants (the table name from model meta); values are params.
    return f"""
        SELECT id, event_id FROM {Question._meta.db_table}
         WHERE event_id = ANY(%s) AND once_per_order AND active
    """  # noqa: S608


def _spread_once_per_order(
    lines: Sequence[TicketLine],
    plan: Sequence[tuple[TicketLine, list[dict[str, Any]]]],
    *,
    once: dict[int, int],
) -> None:
    """A once-per-order answer given anywhere in the order (on any line, for an existing or a
    new attendee) applies to every new attendee of the same event. `register` copies within
    one call; this copies across the calls of one order. `once`: question id → event id of the
    events' active once-per-order questions."""
    if not once:
        return
    given: dict[int, Any] = {}  # question id → the first answer given in the order
    for line in lines:
        for attendee in line.attendees:
            for key, value in (attendee.get("answers") or {}).items():
                qid = _question_id(key)
                if qid is None or once.get(qid) != line.ticket.event_id:
                    continue
                if value not in (None, ""):
                    given.setdefault(qid, value)
    for line, attendees in plan:
        for attendee in attendees:
            present = {_question_id(k) for k in attendee["answers"]}
            for qid, value in given.items():
                if once[qid] == line.ticket.event_id and qid not in present:
                    attendee["answers"][str(qid)] = value


def _question_id(key: Any) -> int | None:
    try:
        return int(key)
    except (TypeError, ValueError):
        return None


def set_paid(*, order_ref: str, actor: Any) -> int:
    """Set `is_paid` on the order's registrations; returns how many changed (audited)."""
    with transaction.atomic():
        regs = list(
            Registration.objects.select_for_update(of=("self",))
            .filter(sale_order_ref=order_ref, is_paid=False)
            .order_by("pk")
        )
        if not regs:
            return 0
        Registration.objects.filter(pk__in=[r.pk for r in regs]).update(is_paid=True)
        audit.record_many(
            [
                audit.entry(
                    actor=actor,
                    verb="registration.paid",
                    registration=reg,
                    data={"is_paid": [False, True], "order": order_ref},
                )
                for reg in regs
            ]
        )
    return len(regs)


def cancel_order(*, order_ref: str, actor: Any) -> int:
    """Cancel every draft/open registration of the order (`cancel_source = order`); attended
    ones stay `done` (an audit row says so). Returns how many were cancelled."""
    with transaction.atomic():
        regs = list(
            Registration.objects.filter(
                sale_order_ref=order_ref,
                state__in=(
                    RegistrationState.DRAFT,
                    RegistrationState.OPEN,
                    RegistrationState.DONE,
                ),
            ).order_by("event_id", "pk")
        )
        kept = []
        cancelled = 0
        for reg in regs:
            if reg.state == RegistrationState.DONE:
                kept.append(
                    audit.entry(
                        actor=actor,
                        verb="registration.kept",
                        registration=reg,
                        data={"state": reg.state, "order": order_ref, "reason": "attended"},
                    )
                )
                continue
            registrations.cancel(registration=reg, actor=actor, source=CancelSource.ORDER)
            cancelled += 1
        audit.record_many(kept)
    return cancelled

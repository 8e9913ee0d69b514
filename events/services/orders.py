"""Host sale orders acting on registrations (spec-overlay.md §1.4): make them what an order's
lines say (`mint`: shrink, then create what is missing), mark paid, cancel.

Invariants:
- an order's registrations are found by `sale_order_ref` / `sale_order_line_ref`; after
  `mint` each (line, ticket, slot) of the order holds `quantity` live registrations, where
  *live* excludes those cancelled by the order (`cancel_source = order`) but counts those
  cancelled by staff (staff decided) — more only when attended ones (kept `done`) exceed it;
- every seat change goes through `registrations` (lock-first seat engine); `mint` is one
  transaction over all lines, events locked in ascending order, so it succeeds or fails whole;
- `mint`, `set_paid` and `cancel_order` write their audit rows in the same transaction.
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

from events.db import locks
from events.db import rows as sql_rows
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


# A line's registrations are counted per (line ref, ticket id, slot id): a line whose ticket or
# slot changed under the same ref holds none of the new kind yet, and its old ones are surplus.
Key = tuple[str, int | None, int | None]
CANCELLABLE = (RegistrationState.DRAFT, RegistrationState.OPEN)


@cache
def _held_sql() -> str:
    # S608: built from constants (the table name from model meta); values are params.
    return f"""
        SELECT sale_order_line_ref, ticket_id, slot_id, event_id, state, count(*)
          FROM {Registration._meta.db_table}
         WHERE sale_order_ref = %s AND cancel_source <> %s
         GROUP BY 1, 2, 3, 4, 5
    """  # noqa: S608


@dataclass
class LineChanges:
    """What `mint` did to one order line's registrations (their ids)."""

    minted: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    kept_attended: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[int]]:
        return {
            name: ids
            for name, ids in (
                ("minted", self.minted),
                ("cancelled", self.cancelled),
                ("kept_attended", self.kept_attended),
            )
            if ids
        }


@dataclass
class OrderChanges:
    """What `mint` did: the registrations it minted and, per line ref, every change."""

    minted: list[Registration] = field(default_factory=list)
    lines: dict[str, LineChanges] = field(default_factory=dict)

    def line(self, ref: str) -> LineChanges:
        return self.lines.setdefault(ref, LineChanges())

    def summary(self) -> dict[str, Any]:
        """The counts and the lines that changed, as the seam answers them."""
        return {
            "minted": len(self.minted),
            "cancelled": sum(len(c.cancelled) for c in self.lines.values()),
            "kept_attended": sum(len(c.kept_attended) for c in self.lines.values()),
            "lines": {ref: c.as_dict() for ref, c in sorted(self.lines.items()) if c.as_dict()},
        }


def _key(line: TicketLine) -> Key:
    return (line.ref, line.ticket.pk, line.slot.pk if line.slot is not None else None)


def _needs_shrink(held: Mapping[Key, Mapping[str, int]], targets: Mapping[Key, int]) -> bool:
    """Whether some key holds more live registrations than its target while some of them are
    not cancelled (to cancel now, or to report as attended)."""
    for key, states in held.items():
        acting = sum(n for state, n in states.items() if state != RegistrationState.CANCEL)
        if acting and sum(states.values()) > targets.get(key, 0):
            return True
    return False


def mint(
    *,
    order_ref: str,
    partner: Partner,
    lines: Sequence[TicketLine],
    amount_total: Decimal,
    utm: Mapping[str, str] | None = None,
    lang: str | None = None,
    actor: Any,
) -> OrderChanges:
    """Make the order's registrations what its ticket `lines` say, all or none: the lines are
    the order's whole truth.

    Shrink first, so the seats it frees serve the lines that grow: per (line, ticket, slot),
    live registrations beyond `quantity` — every one of a line missing from `lines` or whose
    ticket or slot changed — are cancelled with `cancel_source = order`, draft/open ones newest
    first; attended ones stay `done`, reported and audited (`registration.kept`). Then mint
    `quantity − live` per line. Attendee entries are used from the first missing index on; the
    rest take the partner's details (`contact_source = partner`). A once-per-order answer given
    on any line is copied to every new registration of the same event in the order. Returns
    what changed (`OrderChanges.summary()` is the seam's answer). New registrations are made in
    `lang` (the order message's), else their event's default language.
    """
    sale_status = SaleStatus.FREE if amount_total == 0 else SaleStatus.SOLD
    changes = OrderChanges()
    # No savepoint: a failure must leave the caller's enclosing block anyway (all or none).
    with transaction.atomic(savepoint=False):
        # What the order holds and the once-per-order questions: one round trip.
        events = sorted({ln.ticket.event_id for ln in lines if ln.ticket.event_id is not None})
        held_rows, once_rows = sql_rows.fetch_many(
            [
                (_held_sql(), [order_ref, CancelSource.ORDER]),
                (_once_per_order_sql(), [events]),
            ]
        )
        held: dict[Key, dict[str, int]] = {}
        for line_ref, ticket_id, slot_id, event_id, state, count in held_rows:
            held.setdefault((line_ref, ticket_id, slot_id), {})[state] = count
            events.append(event_id)
        targets = {_key(line): line.quantity for line in lines}
        if _needs_shrink(held, targets):
            held = _shrink(order_ref, targets, events, changes, actor)
        live = {key: sum(states.values()) for key, states in held.items()}
        plan: list[tuple[TicketLine, list[dict[str, Any]], list[str]]] = []
        for line in sorted(lines, key=lambda ln: (ln.ticket.event_id, ln.ref)):
            start = live.get(_key(line), 0)
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
        for line, attendees, sources in plan:
            event = line.ticket.event
            assert event is not None  # an event's ticket (the caller resolved it)
            minted = registrations.register(
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
                lang=lang,
                contact_sources=sources,
                actor=actor,
                savepoint=False,  # all or none with the caller's block, as this one
            )
            changes.minted += minted
            changes.line(line.ref).minted += [reg.pk for reg in minted]
    return changes


def _shrink(
    order_ref: str,
    targets: Mapping[Key, int],
    event_ids: Sequence[int],
    changes: OrderChanges,
    actor: Any,
) -> dict[Key, dict[str, int]]:
    """Cancel each key's surplus. The order's registrations are read again under the locks of
    every event the order touches, taken at once in ascending order (the cancellations and the
    bookings that follow then take no Event lock out of order). Returns what each key holds
    after."""
    locks.lock_events(event_ids)
    found = list(
        Registration.objects.filter(sale_order_ref=order_ref)
        .exclude(cancel_source=CancelSource.ORDER)
        .order_by("-pk")  # newest first
    )
    by_key: dict[Key, list[Registration]] = {}
    for reg in found:
        by_key.setdefault((reg.sale_order_line_ref, reg.ticket_id, reg.slot_id), []).append(reg)
    kept = []
    cancelled: set[int] = set()
    for key in sorted(by_key, key=lambda k: (k[0], k[1] or 0, k[2] or 0)):
        regs = by_key[key]
        surplus = len(regs) - targets.get(key, 0)
        if surplus <= 0:
            continue
        line = changes.line(key[0])
        for reg in [r for r in regs if r.state in CANCELLABLE][:surplus]:
            registrations.cancel(registration=reg, actor=actor, source=CancelSource.ORDER)
            cancelled.add(reg.pk)
            line.cancelled.append(reg.pk)
            surplus -= 1
        for reg in [r for r in regs if r.state == RegistrationState.DONE][:surplus]:
            line.kept_attended.append(reg.pk)
            kept.append(
                audit.entry(
                    actor=actor,
                    verb="registration.kept",
                    registration=reg,
                    data={
                        "state": reg.state,
                        "order": order_ref,
                        "line": key[0],
                        "reason": "attended",
                    },
                )
            )
    audit.record_many(kept)
    held: dict[Key, dict[str, int]] = {}
    for key, regs in by_key.items():
        for reg in regs:
            if reg.pk not in cancelled:
                states = held.setdefault(key, {})
                states[reg.state] = states.get(reg.state, 0) + 1
    return held


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
    """Set `is_paid` on the order's registrations, except those the order itself cancelled
    (dropped from it, or the order cancelled): they are no part of what was paid. Returns how
    many changed (audited)."""
    with transaction.atomic():
        regs = list(
            Registration.objects.select_for_update(of=("self",))
            .filter(sale_order_ref=order_ref, is_paid=False)
            .exclude(cancel_source=CancelSource.ORDER)
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

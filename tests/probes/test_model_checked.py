"""Model-checked state: a hypothesis state machine drives the real services
— registrations and their transitions, the seat engine and staff changes of seat limits,
signed sale-seam messages through `seams.services.receive` (duplicates, out-of-order versions,
replays, a forged signature), booth bookings (staff verbs and orders' booth lines) and desk
scans — and after every step compares the database with a plain-Python model of the contract
(spec.md §3–§5, spec-overlay §1, §2, §5).

Checked after every step:
- the registrations (state, cancel source, paid, order line, check-in time) equal the model's;
- taken ≤ max for every limit (event, ticket, slot, slot × ticket), in the ledger and in a
  recount of the registrations table made here; the ledger equals that recount and the
  model's (and holds no seat: nothing here offers one), and `seats.event_summary` agrees;
  `seats.audit` (the service's own recount) is clean at the end of every example;
- every seam message id has at most one effect: the audit rows written under each message's
  actors (the seam's, and a replay's) are exactly the effect the model predicts, once — a
  duplicate, a stale version or a replay of an applied message adds nothing;
- a booth has at most one confirmed booking and is `unavailable` exactly when it has one;
- a registration is attended at most once: its `date_closed` is set once and never changes,
  attended − undone audit rows is 1 exactly when it is `done`, each desk answer is audited once.

A refusal (a typed DomainError the model predicted, with its code) must write nothing: every
table a verb can touch is compared before and after. Answers that are not refusals but must
write nothing (a duplicate, a scan that admits no one) are compared the same way, allowing only
the rows they are meant to write.

Each example runs inside its own savepoint of the test's transaction, rolled back when the
example ends, so every example starts from an empty world. Bounded: 15 examples of at most 25
steps (about 25 s of CPU). A failure is shrunk to a short sequence of steps, which can
take Hypothesis several minutes (it stops shrinking after five).
"""

from __future__ import annotations

import copy
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from itertools import count
from typing import Any

import hypothesis
import pytest
from django.db import transaction
from django.db.models import Count, Max
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from booths import services as booth_services
from booths.models import BookingState, Booth, BoothBooking, BoothState
from desk import services as desk
from events.errors import DomainError
from events.models import (
    Event,
    EventAuditLog,
    KanbanState,
    MailRegistration,
    Registration,
    RegistrationAnswer,
    SeatLedger,
    Slot,
    Ticket,
)
from events.services import events as event_verbs
from events.services import registrations, seats
from events.services.audit import Actor
from events.services.tickets import update_ticket
from leads.models import LeadRequest
from seams import services as seam
from seams.models import SeamInbox, SeamOrder
from tests.booths.factories import BoothFactory
from tests.events import factories as ev
from tests.helpers import CANCEL, DONE, DRAFT, HOLDING, OPEN
from tests.helpers import SPEC_TARGET as TARGET
from tests.helpers import SPEC_TRANSITIONS as TRANSITIONS
from tests.seams.host import new_secret, order_message, signed_headers, ticket_line

pytestmark = pytest.mark.django_db

SECRET = new_secret()
FORGER = new_secret()
STAFF = Actor("user", id="staff", label="model staff")
DESK = Actor("desk", id="desk", label="model desk")
MACHINE_SETTINGS = settings(
    max_examples=15,
    stateful_step_count=25,
    deadline=None,
    database=None,  # no example store in the checkout
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

ORDERS = ("SO-A", "SO-B", "SO-C")
KINDS = ("order.confirmed", "order.confirmed", "order.paid", "order.cancelled")
ORDER_STATE = {"order.confirmed": "confirmed", "order.paid": "paid", "order.cancelled": "cancelled"}

# (event, ticket, slot) by name; the first list is valid, the second is refused by the pair rule.
VALID_PAIRS = [
    ("E1", "T1a", None),
    ("E1", "T1b", None),
    ("E2", "T2a", "S1"),
    ("E2", "T2a", "S2"),
    ("E2", "T2b", "S1"),
    ("E2", "T2b", "S2"),
    ("E3", None, None),
]
BAD_PAIRS = [
    ("E1", None, None),  # ticket_required
    ("E1", "T2a", None),  # invalid_ticket
    ("E1", "T1a", "S1"),  # invalid_slot (single-slot event)
    ("E2", "T2a", None),  # slot_required
    ("E3", "T1a", None),  # invalid_ticket (an event without tickets)
]
# Ticket lines of host orders: (ticket, slot); the last one misses its slot (parked).
SEAM_PAIRS = [("T1a", None), ("T1b", None), ("T2a", "S1"), ("T2b", "S2")]
SEAM_BAD_PAIRS = [("T2a", None)]


class ModelRefusal(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class MReg:
    event: int
    ticket: int | None
    slot: int | None
    state: str
    order: str = ""
    line: str = ""
    cancel_source: str = ""
    is_paid: bool = False
    attended: bool = False  # entered `done` at least once: date_closed is set
    barcode: str = ""
    date_closed: Any = None  # as first read from the row


@dataclass
class MBooking:
    booth: int
    order: str
    line: str
    state: str


@dataclass
class MBooth:
    holder: int | None = None  # the confirmed booking
    is_paid: bool = False


@dataclass
class MMessage:
    mid: str
    body: bytes
    order: str
    version: int
    kind: str
    ticket_lines: list  # (event, ticket, slot, ref, quantity)
    booth_ids: list
    booth_ref: str
    status: str = ""
    code: str = ""
    inbox_id: int | None = None


@dataclass
class Model:
    regs: dict[int, MReg] = field(default_factory=dict)
    bookings: dict[int, MBooking] = field(default_factory=dict)
    booths: dict[int, MBooth] = field(default_factory=dict)
    orders: dict[str, tuple[int, str]] = field(default_factory=dict)
    cancelled_events: set[int] = field(default_factory=set)
    # message id → Counter of the audit verbs written under its actors (seam, replay)
    effects: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    scans: Counter = field(default_factory=Counter)  # (registration, verb, status)
    temp: int = 0

    def new_key(self) -> int:
        """A temporary (negative) key for a row the system is about to create."""
        self.temp -= 1
        return self.temp


def snapshot() -> dict:
    """Every table the verbs under test can write."""
    return {
        "registrations": list(
            Registration.objects.order_by("pk").values_list(
                "pk",
                "state",
                "active",
                "cancel_source",
                "is_paid",
                "confirmed_at",
                "date_closed",
                "updated_at",
            )
        ),
        "answers": RegistrationAnswer.objects.count(),
        "audit": EventAuditLog.objects.aggregate(n=Count("id"), top=Max("id")),
        "ledger": sorted(
            SeatLedger.objects.values_list("event_id", "slot_id", "ticket_id", "reserved", "used"),
            key=str,
        ),
        "inbox": list(SeamInbox.objects.order_by("pk").values_list("pk", "status", "error_code")),
        "orders": sorted(SeamOrder.objects.values_list("order_ref", "version", "state")),
        "booths": list(
            Booth.objects.order_by("pk").values_list(
                "pk", "state", "order_ref", "partner_ref", "is_paid"
            )
        ),
        "bookings": list(
            BoothBooking.objects.order_by("pk").values_list("pk", "state", "decided_at")
        ),
        "events": list(
            Event.objects.order_by("pk").values_list("pk", "kanban_state", "updated_at")
        ),
        "lead_requests": list(
            LeadRequest.objects.order_by("pk").values_list("pk", "event_id", "cursor")
        ),
        "mail_rows": MailRegistration.objects.count(),
    }


def assert_wrote_only(before: dict, *, audit=(), changed=()) -> None:
    """Nothing written since `before` but the audit rows `audit` (verbs) and the parts
    `changed`."""
    after = snapshot()
    for part in before:
        if part not in changed and part != "audit":
            assert after[part] == before[part], f"{part} changed"
    new = sorted(
        EventAuditLog.objects.filter(pk__gt=before["audit"]["top"] or 0).values_list(
            "verb", flat=True
        )
    )
    assert new == sorted(audit), new


class SystemMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._atomic = transaction.atomic()
        self._atomic.__enter__()
        self.m = Model()
        self.messages: list[MMessage] = []
        self.ids = count(1)
        self.steps = 0
        self.ready = False

    def teardown(self) -> None:
        try:
            if self.ready:
                # The service's own audit, once per example: every step already compared the
                # ledger with a recount made here (check_seats), which implies it is clean.
                for obj in Event.objects.in_bulk(list(self.event_obj)).values():
                    assert seats.audit(event=obj) == [], obj.name
        finally:
            transaction.set_rollback(True)
            self._atomic.__exit__(None, None, None)

    # --- the world ----------------------------------------------------------------------

    @initialize(
        m1=st.integers(1, 4),
        t1=st.tuples(st.integers(0, 2), st.integers(0, 3)),
        m2=st.integers(1, 3),
        t2=st.tuples(st.integers(0, 2), st.integers(0, 1)),
        m3=st.integers(0, 2),
        opening=st.lists(st.sampled_from(VALID_PAIRS), min_size=2, max_size=12),
    )
    def world(self, m1, t1, m2, t2, m3, opening):
        """Three events (single-slot with two tickets; two slots with two tickets; no
        tickets), three booths, and a first few bookings through the service."""
        e1 = ev.EventFactory(name="E1", seats_limited=True, seats_max=m1)
        e2 = ev.EventFactory(name="E2", seats_limited=True, seats_max=m2, is_multi_slots=True)
        e3 = ev.EventFactory(name="E3", seats_limited=True, seats_max=m3)  # 0 = unlimited
        begin = e2.date_begin
        s1 = ev.SlotFactory(event=e2)
        s2 = ev.SlotFactory(
            event=e2,
            start_hour=13.0,
            end_hour=16.0,
            start_datetime=begin + timedelta(hours=4),
            end_datetime=begin + timedelta(hours=7),
        )
        tickets = {
            "T1a": ev.TicketFactory(event=e1, seats_max=t1[0]),
            "T1b": ev.TicketFactory(event=e1, seats_max=t1[1]),
            "T2a": ev.TicketFactory(event=e2, seats_max=t2[0]),
            "T2b": ev.TicketFactory(event=e2, seats_max=t2[1]),
        }
        self.events = {"E1": e1, "E2": e2, "E3": e3}
        self.ev = {name: e.pk for name, e in self.events.items()}
        self.tk = {name: t.pk for name, t in tickets.items()}
        self.sl = {"S1": s1.pk, "S2": s2.pk}
        self.event_obj = {e.pk: e for e in self.events.values()}
        self.multi = {e.pk: e.is_multi_slots for e in self.events.values()}
        self.event_max = {e.pk: (e.seats_max or None) for e in self.events.values()}
        self.ticket_max = {t.pk: t.seats_max for t in tickets.values()}
        self.ticket_event = {t.pk: t.event_id for t in tickets.values()}
        self.slot_event = {s1.pk: e2.pk, s2.pk: e2.pk}
        self.slots_of = {e1.pk: [], e2.pk: [s1.pk, s2.pk], e3.pk: []}
        self.tickets_of = {
            e.pk: [t.pk for t in tickets.values() if t.event_id == e.pk] for e in (e1, e2, e3)
        }
        self.booth_pks = [BoothFactory(event=e1).pk for _ in range(3)]
        self.m.booths = {pk: MBooth() for pk in self.booth_pks}
        self.ready = True
        for names in opening:
            self.register(names, 1, OPEN)

    def pair(self, names) -> tuple[int, int | None, int | None]:
        event, ticket, slot = names
        return (
            self.ev[event],
            self.tk[ticket] if ticket else None,
            self.sl[slot] if slot else None,
        )

    # --- the model's rules (spec.md §3, §4; spec-overlay §1, §2, §5) ------------------------

    def limits(self, event: int, slot: int | None, ticket: int | None) -> list:
        scope = slot if self.multi[event] else None
        out = []
        if self.event_max[event]:
            out.append(((scope, None), self.event_max[event]))
        if ticket is not None and self.ticket_max[ticket]:
            out.append(((scope, ticket), self.ticket_max[ticket]))
        return out

    def every_limit(self, event: int) -> list:
        out = []
        for slot in self.slots_of[event] or [None]:
            for ticket in self.tickets_of[event] or [None]:
                out += [lim for lim in self.limits(event, slot, ticket) if lim not in out]
        return out

    def ledger_keys(self, event: int, slot: int | None, ticket: int | None) -> list:
        keys = [(None, None)]
        if ticket is not None:
            keys.append((None, ticket))
        if self.multi[event] and slot is not None:
            keys.append((slot, None))
            if ticket is not None:
                keys.append((slot, ticket))
        return keys

    def recount_model(self, m: Model, event: int) -> dict:
        counts: dict = defaultdict(lambda: [0, 0])
        for reg in m.regs.values():
            if reg.event == event and reg.state in HOLDING:
                for key in self.ledger_keys(event, reg.slot, reg.ticket):
                    counts[key][0 if reg.state == OPEN else 1] += 1
        return {key: tuple(v) for key, v in counts.items()}

    def room(self, m: Model, event, slot, ticket, n: int) -> bool:
        held = self.recount_model(m, event)
        return all(
            sum(held.get(key, (0, 0))) + n <= maximum
            for key, maximum in self.limits(event, slot, ticket)
        )

    def register_refusal(self, m: Model, event, ticket, slot, n, state) -> str | None:
        if state == OPEN and event in m.cancelled_events:
            return "registrations_closed"
        if ticket is None and self.tickets_of[event]:
            return "ticket_required"
        if ticket is not None and self.ticket_event[ticket] != event:
            return "invalid_ticket"
        if not self.multi[event]:
            if slot is not None:
                return "invalid_slot"
        elif slot is None:
            return "slot_required"
        elif self.slot_event[slot] != event:
            return "invalid_slot"
        if state == OPEN and not self.room(m, event, slot, ticket, n):
            return "sold_out"
        return None

    def transition_refusal(self, m: Model, reg: MReg, verb: str) -> str | None:
        to = TARGET[verb]
        if TRANSITIONS.get((reg.state, to)) != verb:
            return "invalid_transition"
        if to in HOLDING and reg.event in m.cancelled_events:
            return "registrations_closed"
        if (
            reg.state == DRAFT
            and to == OPEN
            and not self.room(m, reg.event, reg.slot, reg.ticket, 1)
        ):
            return "sold_out"
        return None

    @staticmethod
    def move(reg: MReg, verb: str, source: str = "staff") -> None:
        to = TARGET[verb]
        reg.state = to
        reg.cancel_source = source if to == CANCEL else ""
        if to == DONE:
            reg.attended = True

    @staticmethod
    def holder(m: Model, booth: int) -> MBooking | None:
        key = m.booths[booth].holder
        return m.bookings[key] if key is not None else None

    def confirm_model_booking(self, m: Model, booth: int, key: int, effects: Counter) -> None:
        booking = m.bookings[key]
        booking.state = BookingState.CONFIRMED
        for other_key, other in m.bookings.items():
            if other_key != key and other.booth == booth and other.state == BookingState.PENDING:
                other.state = BookingState.CANCELLED
        m.booths[booth] = MBooth(holder=key, is_paid=False)
        effects["booth.booked" if booking.order else "booth.blocked"] += 1

    def release_model_booth(self, m: Model, booth: int, effects: Counter) -> None:
        m.bookings[m.booths[booth].holder].state = BookingState.CANCELLED
        m.booths[booth] = MBooth()
        effects["booth.released"] += 1

    # the seam's effect -------------------------------------------------------------------

    def seam_effect(self, msg: MMessage) -> tuple[str, str, Counter]:
        """(status, error code, audit verbs) of applying `msg` now; the model follows when it
        applies. A parked message changes nothing but its own inbox row."""
        version, _ = self.m.orders.get(msg.order, (0, "new"))
        if msg.version <= version:
            return "stale", "", Counter()
        trial = copy.deepcopy(self.m)
        effects: Counter = Counter()
        try:
            if msg.kind == "order.cancelled":
                self.cancel_order(trial, msg.order, effects)
            else:
                # a later version is the order's whole truth (spec-overlay §1.4 "Shrink")
                self.mint(trial, msg, effects)
                self.confirm_order_booths(trial, msg, effects, later=version > 0)
                if msg.kind == "order.paid":
                    self.pay(trial, msg.order, effects)
        except ModelRefusal as refusal:
            return "parked", refusal.code, Counter({"seam_message.parked": 1})
        trial.orders[msg.order] = (msg.version, ORDER_STATE[msg.kind])
        self.m = trial
        return "applied", "", effects

    def mint(self, m: Model, msg: MMessage, effects: Counter) -> None:
        """Per (line, ticket, slot): the live registrations beyond the quantity (0 for what the
        lines no longer name) cancelled, draft/open newest first, attended ones beyond it kept;
        then the shortfall minted."""
        targets = {(ref, t, s): quantity for _, t, s, ref, quantity in msg.ticket_lines}
        held: dict = defaultdict(list)
        for key in sorted(m.regs, reverse=True):  # newest first
            reg = m.regs[key]
            if reg.order == msg.order and reg.cancel_source != "order":
                held[(reg.line, reg.ticket, reg.slot)].append(reg)
        for sig, regs in held.items():
            surplus = len(regs) - targets.get(sig, 0)
            for reg in [r for r in regs if r.state in (DRAFT, OPEN)][: max(surplus, 0)]:
                self.move(reg, "cancel", source="order")
                effects["registration.cancelled"] += 1
                surplus -= 1
            effects["registration.kept"] += len([r for r in regs if r.state == DONE][:surplus])
        live = Counter(
            (r.line, r.ticket, r.slot)
            for r in m.regs.values()
            if r.order == msg.order and r.cancel_source != "order"
        )
        for event, ticket, slot, ref, quantity in sorted(
            msg.ticket_lines, key=lambda ln: (ln[0], ln[3])
        ):
            missing = quantity - live[(ref, ticket, slot)]
            if missing <= 0:
                continue
            code = self.register_refusal(m, event, ticket, slot, missing, OPEN)
            if code is not None:
                raise ModelRefusal(code)
            for _ in range(missing):
                m.regs[m.new_key()] = MReg(event, ticket, slot, OPEN, order=msg.order, line=ref)
            effects["registration.created"] += missing

    def confirm_order_booths(
        self, m: Model, msg: MMessage, effects: Counter, *, later: bool
    ) -> None:
        if any(
            (h := self.holder(m, b)) is not None and h.order != msg.order for b in msg.booth_ids
        ):
            raise ModelRefusal("booth_unavailable")
        if later:  # the booths the order holds but no longer names are released
            for booth in sorted(m.booths):
                held = self.holder(m, booth)
                if booth not in msg.booth_ids and held is not None and held.order == msg.order:
                    self.release_model_booth(m, booth, effects)
        for booth in sorted(msg.booth_ids):
            if m.booths[booth].holder is not None:
                continue  # this order's already
            mine = [
                k
                for k in sorted(m.bookings)
                if m.bookings[k].booth == booth and m.bookings[k].state == BookingState.PENDING
            ]
            key = next(
                (
                    k
                    for k in mine
                    if (m.bookings[k].order, m.bookings[k].line) == (msg.order, msg.booth_ref)
                ),
                None,
            )
            if key is None:
                key = next((k for k in mine if m.bookings[k].order == msg.order), None)
            if key is None:
                key = m.new_key()
                m.bookings[key] = MBooking(booth, msg.order, msg.booth_ref, BookingState.PENDING)
            self.confirm_model_booking(m, booth, key, effects)

    def pay(self, m: Model, order: str, effects: Counter) -> None:
        for reg in m.regs.values():
            if reg.order == order and not reg.is_paid and reg.cancel_source != "order":
                reg.is_paid = True
                effects["registration.paid"] += 1
        for booth in m.booths.values():
            if (
                booth.holder is not None
                and m.bookings[booth.holder].order == order
                and not booth.is_paid
            ):
                booth.is_paid = True
                effects["booth.paid"] += 1

    def cancel_order(self, m: Model, order: str, effects: Counter) -> None:
        for reg in m.regs.values():
            if reg.order != order:
                continue
            if reg.state == DONE:
                effects["registration.kept"] += 1
            elif reg.state in (DRAFT, OPEN):
                self.move(reg, "cancel", source="order")
                effects["registration.cancelled"] += 1
        for booking in m.bookings.values():
            if booking.order != order:
                continue
            if booking.state == BookingState.CONFIRMED:
                self.release_model_booth(m, booking.booth, effects)
            elif booking.state == BookingState.PENDING:
                booking.state = BookingState.CANCELLED
                effects["booth_booking.cancelled"] += 1

    # --- calling the system --------------------------------------------------------------

    def refused(self, code: str, call) -> None:
        """`call` must raise the DomainError `code` and write nothing."""
        before = snapshot()
        with pytest.raises(DomainError) as caught:
            call()
        assert str(caught.value.code) == code, (code, caught.value.code, caught.value)
        hypothesis.event(f"refused {code}")
        assert_wrote_only(before)

    @staticmethod
    def succeeds(call):
        try:
            return call()
        except DomainError as error:
            raise AssertionError(
                f"the model expected success, the system refused: {error.code} {error}"
            ) from error

    def pick(self, keys, i: int):
        keys = sorted(keys)
        return keys[i % len(keys)]

    # --- rules: registrations ------------------------------------------------------------

    @precondition(lambda self: self.ready)
    @rule(
        names=st.one_of(
            st.sampled_from(VALID_PAIRS), st.sampled_from(VALID_PAIRS), st.sampled_from(BAD_PAIRS)
        ),
        n=st.integers(1, 3),
        state=st.sampled_from([OPEN, OPEN, DRAFT]),
    )
    def register(self, names, n, state):
        event, ticket, slot = self.pair(names)
        attendees = [{"name": f"Attendee {i}", "email": f"a{i}@example.org"} for i in range(n)]

        def call():
            return registrations.register(
                event=Event.objects.get(pk=event),
                attendees=attendees,
                ticket=self.ticket(ticket),
                slot=self.slot(slot),
                state=state,
                actor=STAFF,
            )

        code = self.register_refusal(self.m, event, ticket, slot, n, state)
        if code is not None:
            self.refused(code, call)
            return
        rows = self.succeeds(call)
        assert len(rows) == n
        for _ in range(n):
            self.m.regs[self.m.new_key()] = MReg(event, ticket, slot, state)

    @staticmethod
    def ticket(pk):
        return Ticket.objects.get(pk=pk) if pk is not None else None

    @staticmethod
    def slot(pk):
        return Slot.objects.get(pk=pk) if pk is not None else None

    @precondition(lambda self: self.m.regs)
    @rule(i=st.integers(0, 10**6), j=st.integers(0, 10**6), allowed=st.booleans())
    def transition(self, i, j, allowed):
        """A verb on a registration: one the table allows from its state, or any verb."""
        pk = self.pick(self.m.regs, i)
        reg = self.m.regs[pk]
        verbs = sorted({v for (source, _), v in TRANSITIONS.items() if source == reg.state})
        verb = verbs[j % len(verbs)] if allowed else sorted(TARGET)[j % len(TARGET)]
        call = partial(
            getattr(registrations, verb), registration=Registration.objects.get(pk=pk), actor=STAFF
        )
        code = self.transition_refusal(self.m, reg, verb)
        if code is not None:
            self.refused(code, call)
            return
        self.succeeds(call)
        self.move(reg, verb)

    @precondition(lambda self: self.ready and self.steps >= 15)
    @rule(name=st.sampled_from(["E1", "E2", "E3"]))
    def cancel_event(self, name):
        pk = self.ev[name]
        before = snapshot()
        self.succeeds(lambda: event_verbs.cancel_event(event=Event.objects.get(pk=pk), actor=STAFF))
        if pk in self.m.cancelled_events:
            assert_wrote_only(before)  # already cancelled: nothing to do
        self.m.cancelled_events.add(pk)

    def taken_under(self, event: int, ticket: int | None) -> int:
        """The most seats one limit of the event (ticket None) or of the ticket has to cover:
        per slot on a multi-slot event."""
        held = self.recount_model(self.m, event)
        scopes = self.slots_of[event] if self.multi[event] else [None]
        return max(sum(held.get((scope, ticket), (0, 0))) for scope in scopes)

    @precondition(lambda self: self.ready)
    @rule(
        name=st.sampled_from(["E1", "E2", "E3", "T1a", "T1b", "T2a", "T2b"]),
        delta=st.sampled_from([-2, -1, -1, 0, 1]),
        unlimited=st.integers(0, 5),
    )
    def change_limit(self, name, delta, unlimited):
        """Staff change an event's or a ticket's seat limit (0 = unlimited); a limit below the
        seats it already covers is refused (spec §3: availability is negative only when data
        was forced in by hand; the ticket verb's own fence). The new value is drawn around
        the seats taken (sometimes 0: unlimited)."""
        if name.startswith("E"):
            pk = self.ev[name]
            event, ticket = pk, None
            value = 0 if not unlimited else max(1, self.taken_under(event, ticket) + delta)
            current = self.event_max[pk] or 0
            call = partial(
                event_verbs.update_event,
                event=Event.objects.get(pk=pk),
                actor=STAFF,
                seats_max=value,
            )
        else:
            pk = self.tk[name]
            event, ticket = self.ticket_event[pk], pk
            value = 0 if not unlimited else max(1, self.taken_under(event, ticket) + delta)
            current = self.ticket_max[pk]
            call = partial(
                update_ticket, ticket=Ticket.objects.get(pk=pk), actor=STAFF, seats_max=value
            )
        if value == current:
            before = snapshot()
            self.succeeds(call)
            assert_wrote_only(before)
            return
        if value and self.taken_under(event, ticket) > value:
            self.refused("invalid_value", call)
            return
        self.succeeds(call)
        if ticket is None:
            self.event_max[pk] = value or None
        else:
            self.ticket_max[pk] = value

    # --- rules: the sale seam ------------------------------------------------------------

    def post(
        self,
        msg: MMessage,
        *,
        secret: str = SECRET,
        mid: str | None = None,
        body: bytes | None = None,
    ):
        body = msg.body if body is None else body
        headers = signed_headers(body, secret=secret, msg_id=mid or msg.mid)
        return seam.receive(headers=headers, body=body)

    @precondition(lambda self: self.ready)
    @rule(
        order=st.sampled_from(ORDERS),
        kind=st.sampled_from(KINDS),
        version=st.integers(1, 6),
        lines=st.lists(
            st.tuples(
                st.one_of(
                    st.sampled_from(SEAM_PAIRS),
                    st.sampled_from(SEAM_PAIRS),
                    st.sampled_from(SEAM_BAD_PAIRS),
                ),
                st.integers(0, 3),
            ),
            max_size=2,
            unique_by=lambda t: t[0],
        ),
        booths=st.lists(st.integers(0, 2), max_size=2, unique=True),
    )
    def seam_message(self, order, kind, version, lines, booths):
        ticket_lines, doc_lines = [], []
        for (ticket_name, slot_name), quantity in lines:
            ticket, slot = self.tk[ticket_name], self.sl[slot_name] if slot_name else None
            ref = f"{order}/{ticket_name}-{slot_name or 'none'}"
            ticket_lines.append((self.ticket_event[ticket], ticket, slot, ref, quantity))
            doc_lines.append(
                ticket_line(self.ticket(ticket), quantity, ref=ref, slot=self.slot(slot))
            )
        booth_ids = [self.booth_pks[i] for i in booths]
        booth_ref = f"{order}/booth"
        if booth_ids:
            doc_lines.append(
                {"ref": booth_ref, "kind": "booth", "booth_ids": booth_ids, "price_total": "500.00"}
            )
        body = json.dumps(order_message(kind, ref=order, version=version, lines=doc_lines)).encode()
        msg = MMessage(
            f"m{next(self.ids)}", body, order, version, kind, ticket_lines, booth_ids, booth_ref
        )

        before = snapshot()
        status, code, effects = self.seam_effect(msg)
        result = self.post(msg)
        assert (result.status, result.payload.get("error", {}).get("code", "")) == (status, code), (
            result.payload
        )
        msg.status, msg.code, msg.inbox_id = status, code, result.inbox_id
        hypothesis.event(f"seam {status} {code}".strip())
        self.messages.append(msg)
        self.m.effects[msg.mid] += effects
        if status == "stale":
            assert_wrote_only(before, changed=("inbox",))
        elif status == "parked":
            assert_wrote_only(before, audit=["seam_message.parked"], changed=("inbox",))

    @precondition(lambda self: self.messages)
    @rule(i=st.integers(0, 10**6), how=st.sampled_from(["retry", "retry", "other body", "forged"]))
    def seam_again(self, i, how):
        """The host sends a message id again (a retry; or, wrongly, with another body), or
        someone posts a body signed with a secret the seam does not hold."""
        msg = self.messages[i % len(self.messages)]
        if how == "forged":
            forged = partial(self.post, msg, secret=FORGER, mid=f"forged{next(self.ids)}")
            self.refused("invalid_signature", forged)
            return
        other = self.messages[(i + 1) % len(self.messages)]
        before = snapshot()
        result = self.post(msg, body=msg.body if how == "retry" else other.body)
        assert (result.status, result.http_status) == ("duplicate", 200)
        hypothesis.event("seam duplicate")
        assert_wrote_only(before)

    @precondition(lambda self: self.messages)
    @rule(i=st.integers(0, 10**6))
    def seam_replay(self, i):
        msg = self.messages[i % len(self.messages)]
        actor = Actor("user", id=f"replay-{msg.mid}", label="staff replay")
        before = snapshot()
        if msg.status != "parked":
            result = self.succeeds(lambda: seam.replay(inbox_id=msg.inbox_id, actor=actor))
            assert result.payload == {"status": msg.status, "replayed": False}
            assert_wrote_only(before)
            return
        status, code, effects = self.seam_effect(msg)
        result = self.succeeds(lambda: seam.replay(inbox_id=msg.inbox_id, actor=actor))
        assert (result.status, result.payload.get("error", {}).get("code", "")) == (status, code), (
            result.payload
        )
        msg.status, msg.code = status, code
        effects["seam_message.replayed"] += 1
        self.m.effects[msg.mid] += effects

    # --- rules: booths -------------------------------------------------------------------

    @precondition(lambda self: self.ready)
    @rule(b=st.integers(0, 2), block=st.booleans())
    def staff_booth(self, b, block):
        """Staff block a booth by hand, or release whatever booking holds it."""
        booth = self.booth_pks[b]
        held = self.m.booths[booth].holder is not None
        verb = booth_services.block_booth if block else booth_services.release_booth
        call = partial(verb, booth=Booth.objects.get(pk=booth), actor=STAFF)
        if block and held:
            self.refused("booth_unavailable", call)
        elif not block and not held:
            self.refused("invalid_transition", call)
        elif block:
            self.succeeds(call)
            key = self.m.new_key()
            self.m.bookings[key] = MBooking(booth, "", "", BookingState.PENDING)
            self.confirm_model_booking(self.m, booth, key, Counter())
        else:
            self.succeeds(call)
            self.release_model_booth(self.m, booth, Counter())

    @precondition(lambda self: self.ready)
    @rule(
        b=st.integers(0, 2), order=st.sampled_from(ORDERS), line=st.sampled_from(["booth", "quote"])
    )
    def request_booth(self, b, order, line):
        booth, line_ref = self.booth_pks[b], f"{order}/{line}"

        def call():
            return booth_services.request_booking(
                booth=Booth.objects.get(pk=booth),
                order_ref=order,
                order_line_ref=line_ref,
                partner_ref="P7",
                contact={"name": "Pat", "email": "pat@example.org", "phone": ""},
                actor=STAFF,
            )

        if self.m.booths[booth].holder is not None:
            self.refused("booth_unavailable", call)
            return
        existing = [
            k
            for k, bk in self.m.bookings.items()
            if (bk.booth, bk.order, bk.line, bk.state)
            == (booth, order, line_ref, BookingState.PENDING)
        ]
        before = snapshot()
        booking = self.succeeds(call)
        if existing:
            assert booking.pk == existing[0]
            assert_wrote_only(before)  # the same line asking again gets its booking back
            return
        self.m.bookings[self.m.new_key()] = MBooking(booth, order, line_ref, BookingState.PENDING)

    @precondition(lambda self: self.m.bookings)
    @rule(i=st.integers(0, 10**6), confirm=st.booleans())
    def decide_booking(self, i, confirm):
        """Staff confirm a booking, or cancel a pending request."""
        if confirm:
            self.confirm_booking(self.pick(self.m.bookings, i))
        else:
            self.cancel_booking(self.pick(self.m.bookings, i))

    def confirm_booking(self, key):
        booking = self.m.bookings[key]
        call = partial(
            booth_services.confirm_booking, booking=BoothBooking.objects.get(pk=key), actor=STAFF
        )
        holder = self.m.booths[booking.booth].holder
        if holder == key:
            before = snapshot()
            assert self.succeeds(call) == []
            assert_wrote_only(before)
        elif holder is not None:
            self.refused("booth_unavailable", call)
        elif booking.state != BookingState.PENDING:
            self.refused("invalid_transition", call)
        else:
            self.succeeds(call)
            self.confirm_model_booking(self.m, booking.booth, key, Counter())

    def cancel_booking(self, key):
        call = partial(
            booth_services.cancel_booking, booking=BoothBooking.objects.get(pk=key), actor=STAFF
        )
        if self.m.bookings[key].state != BookingState.PENDING:
            self.refused("invalid_transition", call)
            return
        self.succeeds(call)
        self.m.bookings[key].state = BookingState.CANCELLED

    # --- rules: the desk -----------------------------------------------------------------

    def desk_status(self, reg: MReg, *, other_event: bool) -> str:
        """spec-overlay §5.1, steps 2–6 in their frozen order."""
        if reg.state == CANCEL:
            return "canceled_registration"
        if reg.state == DRAFT:
            return "unconfirmed_registration"
        if reg.event in self.m.cancelled_events:
            return "not_ongoing_event"
        if reg.state == OPEN:
            return "need_manual_confirmation" if other_event else "confirmed_registration"
        return "already_registered"

    def scanned(self, pk: int, verb: str, call, *, other_event: bool) -> None:
        reg = self.m.regs[pk]
        status = self.desk_status(reg, other_event=other_event)
        before = snapshot()
        answer = self.succeeds(call)
        assert answer["status"] == status, (answer, status)
        hypothesis.event(f"desk {status}")
        self.m.scans[(pk, verb, status)] += 1
        if status == "confirmed_registration":
            assert answer["date_closed"] is not None
            self.move(reg, "mark_attended")
        else:
            assert_wrote_only(before, audit=[verb])

    @precondition(lambda self: self.m.regs)
    @rule(
        i=st.integers(0, 10**6),
        where=st.sampled_from(["own", "own", "other", "any", "manual", "unknown"]),
        seat_holders=st.booleans(),
    )
    def desk_scan(self, i, where, seat_holders):
        """A scan at the event's own desk, another event's desk or any desk; the manual
        confirmation; an unknown code. Half the time among tickets that hold a seat."""
        if where == "unknown":
            before = snapshot()
            answer = self.succeeds(
                partial(desk.register_attendee, barcode="not-a-ticket\n", event_id=None, actor=DESK)
            )
            assert answer == {"status": "invalid_ticket"}
            self.m.scans[(None, "registration.scanned", "invalid_ticket")] += 1
            assert_wrote_only(before, audit=["registration.scanned"])
            return
        holders = [pk for pk, r in self.m.regs.items() if r.state in HOLDING]
        pk = self.pick(holders if seat_holders and holders else self.m.regs, i)
        reg = self.m.regs[pk]
        if where == "manual":
            call = partial(desk.confirm_attendance, registration_id=pk, actor=DESK)
            self.scanned(pk, "registration.attendance_confirmed", call, other_event=False)
            return
        events = sorted(self.event_obj)
        desk_event = {
            "own": reg.event,
            "other": events[(events.index(reg.event) + 1) % len(events)],
            "any": None,
        }[where]
        call = partial(
            desk.register_attendee, barcode=f" {reg.barcode}\r\n", event_id=desk_event, actor=DESK
        )
        self.scanned(
            pk,
            "registration.scanned",
            call,
            other_event=desk_event is not None and desk_event != reg.event,
        )

    # --- after every step: the database against the model ---------------------------------

    def adopt_new_rows(self) -> None:
        """Give the model's new rows (temporary keys) the ids the system gave them; the new
        rows must be exactly the ones the model expects."""
        temps = {k: r for k, r in self.m.regs.items() if k < 0}
        rows = list(
            Registration.objects.exclude(pk__in=[k for k in self.m.regs if k > 0])
            .order_by("pk")
            .values(
                "pk",
                "event_id",
                "ticket_id",
                "slot_id",
                "state",
                "sale_order_ref",
                "sale_order_line_ref",
                "barcode",
            )
        )
        want: dict = defaultdict(list)
        for k, r in temps.items():
            want[(r.event, r.ticket, r.slot, r.state, r.order, r.line)].append(k)
        got = Counter(
            (
                r["event_id"],
                r["ticket_id"],
                r["slot_id"],
                r["state"],
                r["sale_order_ref"],
                r["sale_order_line_ref"],
            )
            for r in rows
        )
        assert got == Counter({sig: len(keys) for sig, keys in want.items()}), "new registrations"
        for row in rows:
            sig = (
                row["event_id"],
                row["ticket_id"],
                row["slot_id"],
                row["state"],
                row["sale_order_ref"],
                row["sale_order_line_ref"],
            )
            reg = self.m.regs.pop(want[sig].pop())
            reg.barcode = row["barcode"]
            self.m.regs[row["pk"]] = reg

        temps_b = {k: b for k, b in self.m.bookings.items() if k < 0}
        rows = list(
            BoothBooking.objects.exclude(pk__in=[k for k in self.m.bookings if k > 0])
            .order_by("pk")
            .values("pk", "booth_id", "order_ref", "order_line_ref", "state")
        )
        want = defaultdict(list)
        for k, b in temps_b.items():
            want[(b.booth, b.order, b.line, b.state)].append(k)
        got = Counter(
            (r["booth_id"], r["order_ref"], r["order_line_ref"], r["state"]) for r in rows
        )
        assert got == Counter({sig: len(keys) for sig, keys in want.items()}), "new bookings"
        renamed = {}
        for row in rows:
            temp = want[
                (row["booth_id"], row["order_ref"], row["order_line_ref"], row["state"])
            ].pop()
            self.m.bookings[row["pk"]] = self.m.bookings.pop(temp)
            renamed[temp] = row["pk"]
        for booth in self.m.booths.values():
            booth.holder = renamed.get(booth.holder, booth.holder)
        self.m.temp = 0

    @invariant()
    def the_database_follows_the_model(self):
        if not self.ready:
            return
        self.steps += 1
        self.adopt_new_rows()
        self.check_registrations()
        self.check_seats()
        self.check_seam()
        self.check_booths()
        self.check_attendance()

    def check_registrations(self) -> None:
        rows = {
            r["pk"]: r
            for r in Registration.objects.values(
                "pk",
                "event_id",
                "ticket_id",
                "slot_id",
                "state",
                "active",
                "cancel_source",
                "is_paid",
                "sale_order_ref",
                "sale_order_line_ref",
                "date_closed",
            )
        }
        assert set(rows) == set(self.m.regs)
        for pk, reg in self.m.regs.items():
            row = rows[pk]
            have = (
                row["event_id"],
                row["ticket_id"],
                row["slot_id"],
                row["state"],
                row["active"],
                row["cancel_source"],
                row["is_paid"],
                row["sale_order_ref"],
                row["sale_order_line_ref"],
            )
            want = (
                reg.event,
                reg.ticket,
                reg.slot,
                reg.state,
                True,
                reg.cancel_source,
                reg.is_paid,
                reg.order,
                reg.line,
            )
            assert have == want, (pk, have, want)
            # date_closed: set by the first attendance, never cleared, never moved
            assert (row["date_closed"] is not None) == reg.attended, (pk, row["date_closed"])
            if reg.date_closed is None:
                reg.date_closed = row["date_closed"]
            assert row["date_closed"] == reg.date_closed, (pk, row["date_closed"], reg.date_closed)
        kanban = dict(
            Event.objects.filter(pk__in=list(self.event_obj)).values_list("pk", "kanban_state")
        )
        assert {
            pk for pk, k in kanban.items() if k == KanbanState.CANCEL
        } == self.m.cancelled_events

    def check_seats(self) -> None:
        ledger: dict = defaultdict(dict)
        for event, slot, ticket, reserved, used, held in SeatLedger.objects.values_list(
            "event_id", "slot_id", "ticket_id", "reserved", "used", "held"
        ):
            assert held == 0, ("held seats with no waiting list", event, slot, ticket, held)
            if (reserved, used) != (0, 0):
                ledger[event][(slot, ticket)] = (reserved, used)
        table: dict = defaultdict(Counter)  # a recount of the registrations table, made here
        for event, slot, ticket, state, n in (
            Registration.objects.filter(active=True, state__in=HOLDING)
            .values_list("event_id", "slot_id", "ticket_id", "state")
            .annotate(n=Count("id"))
        ):
            for key in self.ledger_keys(event, slot, ticket):
                table[event][(key, state)] += n
        fresh = Event.objects.in_bulk(list(self.event_obj))
        for event, obj in sorted(fresh.items()):
            recount = {
                key: (table[event][(key, OPEN)], table[event][(key, DONE)])
                for key in {k for k, _ in table[event]}
            }
            assert ledger[event] == recount, ("ledger ≠ recount", obj.name, ledger[event], recount)
            assert recount == self.recount_model(self.m, event), ("recount ≠ model", obj.name)
            for key, maximum in self.every_limit(event):
                taken = sum(ledger[event].get(key, (0, 0)))
                assert taken <= maximum, (f"oversold {obj.name} {key}", taken, maximum)
            summary = seats.event_summary(event=obj)
            total = sum(recount.get((None, None), (0, 0)))
            assert summary.taken == total
            if summary.max is not None:
                assert summary.available == summary.max - total >= 0

    def check_seam(self) -> None:
        inbox = {
            mid: (status, code)
            for mid, status, code in SeamInbox.objects.values_list(
                "message_id", "status", "error_code"
            )
        }
        assert inbox == {m.mid: (m.status, m.code) for m in self.messages}
        orders = {
            ref: (version, state)
            for ref, version, state in SeamOrder.objects.values_list(
                "order_ref", "version", "state"
            )
        }
        assert orders == self.m.orders
        actors = {m.mid: m.mid for m in self.messages} | {
            f"replay-{m.mid}": m.mid for m in self.messages
        }
        have: dict = defaultdict(Counter)
        for actor_id, verb, n in (
            EventAuditLog.objects.filter(actor_id__in=list(actors))
            .values_list("actor_id", "verb")
            .annotate(n=Count("id"))
        ):
            have[actors[actor_id]][verb] += n
        want = {mid: +c for mid, c in self.m.effects.items() if +c}
        assert dict(have) == want, ("effects per message id", dict(have), want)

    def check_booths(self) -> None:
        bookings = {
            pk: (booth, order, line, state)
            for pk, booth, order, line, state in BoothBooking.objects.values_list(
                "pk", "booth_id", "order_ref", "order_line_ref", "state"
            )
        }
        assert bookings == {
            k: (b.booth, b.order, b.line, b.state) for k, b in self.m.bookings.items()
        }
        confirmed = Counter(
            booth for booth, _, _, state in bookings.values() if state == BookingState.CONFIRMED
        )
        assert all(n <= 1 for n in confirmed.values()), ("two confirmed bookings", confirmed)
        for pk, state, order_ref, is_paid in Booth.objects.values_list(
            "pk", "state", "order_ref", "is_paid"
        ):
            model = self.m.booths[pk]
            holder = self.m.bookings[model.holder] if model.holder is not None else None
            assert (state == BoothState.UNAVAILABLE) == (confirmed[pk] == 1) == (holder is not None)
            assert (order_ref, is_paid) == ((holder.order if holder else ""), model.is_paid), pk

    def check_attendance(self) -> None:
        marks: dict = defaultdict(Counter)
        for pk, verb, n in (
            EventAuditLog.objects.filter(
                verb__in=("registration.attended", "registration.attendance_undone"),
                registration__isnull=False,
            )
            .values_list("registration_id", "verb")
            .annotate(n=Count("id"))
        ):
            marks[pk][verb] += n
        for pk, reg in self.m.regs.items():
            attended, undone = (
                marks[pk]["registration.attended"],
                marks[pk]["registration.attendance_undone"],
            )
            assert attended - undone == (1 if reg.state == DONE else 0), (
                pk,
                attended,
                undone,
                reg.state,
            )
            assert (attended > 0) == reg.attended
        scans = Counter(
            {
                (pk, verb, status): n
                for pk, verb, status, n in EventAuditLog.objects.filter(
                    verb__in=("registration.scanned", "registration.attendance_confirmed")
                )
                .values_list("registration_id", "verb", "data__status")
                .annotate(n=Count("id"))
            }
        )
        assert scans == self.m.scans
        admitted = Counter()
        for (pk, _, status), n in scans.items():
            if status == "confirmed_registration":
                admitted[pk] += n
        for pk, n in admitted.items():
            assert n <= marks[pk]["registration.attended"], (
                "admitted more often than attended",
                pk,
            )


def test_the_system_follows_the_model(settings):
    settings.EVENT_SEAM_SECRET = SECRET
    run_state_machine_as_test(SystemMachine, settings=MACHINE_SETTINGS)


def test_an_event_limit_below_the_seats_taken_is_refused_and_writes_nothing():
    """What the machine found: `update_event` let staff lower an event's limit (or switch a
    limit on) below the seats already taken — per slot on a multi-slot event — leaving a
    negative availability that spec §3 allows only for data forced in by hand. The ticket verb
    had that fence; the event verb now has it too."""
    single = ev.EventFactory(seats_limited=True, seats_max=5)
    registrations.register(event=single, attendees=[{"name": "A"}] * 3, actor=STAFF)
    multi = ev.EventFactory(seats_limited=False, seats_max=0, is_multi_slots=True)
    morning, afternoon = ev.SlotFactory(event=multi), ev.SlotFactory(event=multi)
    registrations.register(event=multi, attendees=[{"name": "A"}] * 2, slot=morning, actor=STAFF)
    registrations.register(event=multi, attendees=[{"name": "B"}], slot=afternoon, actor=STAFF)
    for event, fields in [
        (single, {"seats_max": 2}),
        (multi, {"seats_limited": True, "seats_max": 1}),  # 2 seats taken in the morning
    ]:
        before = snapshot()
        with pytest.raises(DomainError) as caught:
            event_verbs.update_event(event=event, actor=STAFF, **fields)
        assert (caught.value.code, caught.value.details["field"]) == ("invalid_value", "seats_max")
        assert_wrote_only(before)
    # down to the seats taken, and 0 (= unlimited), are fine
    assert event_verbs.update_event(event=single, actor=STAFF, seats_max=3).seats_max == 3
    assert event_verbs.update_event(event=single, actor=STAFF, seats_max=0).seats_max == 0
    changed = event_verbs.update_event(event=multi, actor=STAFF, seats_limited=True, seats_max=2)
    assert seats.availability(event=changed, slot=morning) == 0

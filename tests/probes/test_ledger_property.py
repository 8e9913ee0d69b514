"""Ledger property (the seat ledger is never oversold and always equals a recount): random
sequences of register / confirm / cancel /
reset_to_draft (and mark_attended / undo_attendance, which move seats between reserved and
used) on events with random limits — the event's (per slot on a multi-slot event), each
ticket's (per (slot, ticket) on a multi-slot event) — built through the public verbs.

After every step (sequential) or every run (8 threads released by one barrier):
- no limit is ever exceeded: every (slot, ticket) key with a limit, in the SeatLedger rows and
  in a recount of the Registration rows made here, has taken ≤ max;
- the SeatLedger rows equal that recount, and `seats.audit` (the ledger against
  `seats.recount`) is empty;
- a refusal writes nothing: sequentially, every table a verb can touch is the same before and
  after, and the refusal is the one spec.md §2.6/§3/§4 predicts (`sold_out` exactly when a
  limit would be exceeded); under threads, every registration's audit trail is an unbroken
  chain of allowed transitions ending in its state, with one row per transition a thread saw
  succeed and none for a refusal.
While the threads run, a ninth connection samples the committed state in REPEATABLE READ
snapshots and checks the same invariants on each. A mutation (the seat engine told that no
limit applies) must make both runs fail with an oversell, so the property is not vacuous.

The checks use only the public verbs, `seats.audit` and the SeatLedger model, so the seat
engine's internals can change underneath; only the mutation patches a private name
(`seats._limits`, see its test). About 10 s of test time on two cores (15 examples in
sequence, 5 threaded runs).
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from events.errors import DomainError
from events.models import Event, EventAuditLog, Registration, SeatLedger, Slot, Ticket
from events.services import events as event_verbs
from events.services import registrations, seats
from events.services.audit import Actor
from events.services.tickets import create_ticket
from tests.helpers import DRAFT, HOLDING, OPEN, run_concurrently, snapshot
from tests.helpers import SPEC_TARGET as TARGET
from tests.helpers import SPEC_TRANSITIONS as TRANSITIONS

STAFF = Actor("user", id="ledger-property", label="ledger property")
BEGIN = datetime(2030, 1, 7, 8, 0, tzinfo=UTC)
THREADS = 8

AUDIT_VERB = {
    "confirm": "registration.confirmed",
    "mark_attended": "registration.attended",
    "undo_attendance": "registration.attendance_undone",
    "cancel": "registration.cancelled",
    "reset_to_draft": "registration.reset_to_draft",
}
VERB_OF_AUDIT = {v: k for k, v in AUDIT_VERB.items()}
PAIR_CODES = {"ticket_required", "invalid_ticket", "invalid_slot", "slot_required"}

Key = tuple[int | None, int | None]  # (slot_id, ticket_id); None = all

COMMON = {
    "deadline": None,
    "database": None,  # no example store in the checkout
    "derandomize": True,  # the same examples on every run
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
}
SEQUENTIAL = settings(max_examples=15, **COMMON)
THREADED = settings(max_examples=5, **COMMON)
# Under the mutation the first failure is enough: no shrinking (it could take minutes).
MUTATED = settings(max_examples=50, phases=[Phase.generate], report_multiple_bugs=False, **COMMON)


# --- the world --------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventSpec:
    multi: bool
    limited: bool
    seats_max: int
    tickets: tuple[int, ...]  # each ticket's seats_max (0 = unlimited)
    slots: int


def event_specs(multi: bool) -> st.SearchStrategy[EventSpec]:
    return st.builds(
        EventSpec,
        multi=st.just(multi),
        limited=st.booleans(),
        seats_max=st.integers(0, 4),
        tickets=st.lists(st.integers(0, 3), max_size=2).map(tuple),
        slots=st.integers(1, 2) if multi else st.just(0),
    )


WORLDS = st.tuples(event_specs(False), event_specs(True))

# ("register", pair index, attendees, state, any pair (also the ones check_pair refuses))
REGISTER = st.tuples(
    st.just("register"),
    st.integers(0, 50),
    st.integers(1, 3),
    st.sampled_from([OPEN, OPEN, DRAFT]),
    st.integers(0, 5).map(lambda k: k == 0),
)
# (verb, registration index): any verb on any registration, so many are invalid transitions.
TRANSITION = st.tuples(
    st.sampled_from(
        ["confirm", "confirm", "cancel", "reset_to_draft", "mark_attended", "undo_attendance"]
    ),
    st.integers(0, 50),
)
STEP = st.one_of(REGISTER, TRANSITION)

Pair = tuple[Event, Ticket | None, Slot | None]


@dataclass
class World:
    events: list[Event]
    valid: list[Pair]  # pairs check_pair accepts
    every: list[Pair]  # also the ones it refuses (wrong event, missing ticket or slot)
    limits: dict[int, list[tuple[Key, int]]]  # event → every limited key and its max
    slots: dict[int, list[int]]
    tickets: dict[int, list[Ticket]]
    ids: list[int] = field(default_factory=list)


def build_world(specs: tuple[EventSpec, ...], tag: str = "") -> World:
    """The events, their slots and tickets, through the public verbs (committed when the caller
    is not in a transaction)."""
    events, slots, tickets = [], {}, {}
    for index, spec in enumerate(specs):
        event = event_verbs.create_event(
            name=f"Ledger property {tag}{index}",
            date_begin=BEGIN,
            date_end=BEGIN + timedelta(hours=10),
            actor=STAFF,
            seats_limited=spec.limited,
            seats_max=spec.seats_max,
            is_multi_slots=spec.multi,
        )
        slots[event.pk] = [
            event_verbs.add_slot(
                event=event,
                date=BEGIN.date(),
                start_hour=9.0 + 3 * k,
                end_hour=11.0 + 3 * k,
                actor=STAFF,
            ).pk
            for k in range(spec.slots)
        ]
        tickets[event.pk] = [
            create_ticket(actor=STAFF, event=event, name=f"T{k}", seats_max=maximum)
            for k, maximum in enumerate(spec.tickets)
        ]
        events.append(event)
    all_slots = [Slot.objects.get(pk=pk) for e in events for pk in slots[e.pk]]
    all_tickets = [t for e in events for t in tickets[e.pk]]
    valid: list[Pair] = []
    every: list[Pair] = []
    limits = {}
    for event in events:
        own_slots = [s for s in all_slots if s.event_id == event.pk]
        valid += [(event, t, s) for t in tickets[event.pk] or [None] for s in own_slots or [None]]
        every += [(event, t, s) for t in [None, *all_tickets] for s in [None, *all_slots]]
        limits[event.pk] = every_limit(event, slots[event.pk], tickets[event.pk])
    return World(events, valid, every, limits, slots, tickets, [e.pk for e in events])


# --- the rules, from the spec (not from the seat module) ---------------------------------------


def keys_of(event: Event, slot_id: int | None, ticket_id: int | None) -> list[Key]:
    """The SeatLedger rows one holding registration counts in (NULL = "all")."""
    keys: list[Key] = [(None, None)]
    if ticket_id is not None:
        keys.append((None, ticket_id))
    if event.is_multi_slots and slot_id is not None:
        keys.append((slot_id, None))
        if ticket_id is not None:
            keys.append((slot_id, ticket_id))
    return keys


def limits_of(event: Event, slot_id: int | None, ticket: Ticket | None) -> list[tuple[Key, int]]:
    """spec.md §3: the event limit (seats_limited and seats_max > 0; per slot on multi-slot),
    the ticket limit (seats_max > 0; per (slot, ticket) on multi-slot)."""
    scope = slot_id if event.is_multi_slots else None
    limits = []
    if event.seats_limited and event.seats_max > 0:
        limits.append(((scope, None), event.seats_max))
    if ticket is not None and ticket.seats_max > 0:
        limits.append(((scope, ticket.pk), ticket.seats_max))
    return limits


def every_limit(event: Event, slot_ids: list[int], tickets: list[Ticket]) -> list:
    out: list[tuple[Key, int]] = []
    for slot_id in slot_ids if event.is_multi_slots else [None]:
        for ticket in tickets or [None]:
            out += [lim for lim in limits_of(event, slot_id, ticket) if lim not in out]
    return out


def own_recount(world: World) -> dict[int, dict[Key, tuple[int, int]]]:
    """Every event's ledger as the Registration rows say it should be, counted here."""
    counts: dict[int, dict[Key, list[int]]] = {pk: defaultdict(lambda: [0, 0]) for pk in world.ids}
    events = {e.pk: e for e in world.events}
    for event_id, slot_id, ticket_id, state in Registration.objects.filter(
        event_id__in=world.ids, active=True, state__in=HOLDING
    ).values_list("event_id", "slot_id", "ticket_id", "state"):
        for key in keys_of(events[event_id], slot_id, ticket_id):
            counts[event_id][key][0 if state == OPEN else 1] += 1
    return {pk: {k: (r, u) for k, (r, u) in c.items()} for pk, c in counts.items()}


def ledger_rows(world: World) -> dict[int, dict[Key, tuple[int, int]]]:
    ledger: dict[int, dict[Key, tuple[int, int]]] = {pk: {} for pk in world.ids}
    for event_id, slot_id, ticket_id, reserved, used in SeatLedger.objects.filter(
        event_id__in=world.ids
    ).values_list("event_id", "slot_id", "ticket_id", "reserved", "used"):
        if (reserved, used) != (0, 0):
            ledger[event_id][(slot_id, ticket_id)] = (reserved, used)
    return ledger


def check_invariants(world: World, where: str, seen: Counter | None = None) -> None:
    """No limit exceeded (checked first, so an oversell is named as such), the ledger equals a
    recount made here, and `seats.audit` (the ledger against `seats.recount`) is clean."""
    mine, ledger = own_recount(world), ledger_rows(world)
    for event in world.events:
        for key, maximum in world.limits[event.pk]:
            taken, counted = (
                sum(ledger[event.pk].get(key, (0, 0))),
                sum(mine[event.pk].get(key, (0, 0))),
            )
            assert taken <= maximum and counted <= maximum, (
                f"oversold {where}: event {event.pk} key {key}: ledger {taken}, "
                f"registrations {counted}, max {maximum}"
            )
            if seen is not None and counted == maximum:
                seen["limit reached"] += 1
        assert ledger[event.pk] == mine[event.pk], (
            f"ledger ≠ recount {where}",
            ledger[event.pk],
            mine[event.pk],
        )
        # seats.audit compares the ledger with seats.recount: clean, that recount equals ours.
        assert seats.audit(event=event) == [], where


# --- one step ---------------------------------------------------------------------------------


def attendees(n: int, tag: str) -> list[dict[str, str]]:
    return [{"name": f"Attendee {tag}-{i}", "email": f"a{i}@example.org"} for i in range(n)]


def pair_refusal(event: Event, ticket: Ticket | None, slot: Slot | None, world: World):
    """spec.md §2.6: a ticket of the event when it has tickets; a slot of it exactly when it is
    multi-slot (in check_pair's order)."""
    if ticket is None and world.tickets[event.pk]:
        return "ticket_required"
    if ticket is not None and ticket.event_id != event.pk:
        return "invalid_ticket"
    if not event.is_multi_slots:
        return "invalid_slot" if slot is not None else None
    if slot is None:
        return "slot_required"
    return "invalid_slot" if slot.event_id != event.pk else None


def room(world: World, event: Event, slot_id, ticket, n: int) -> bool:
    held = own_recount(world)[event.pk]
    return all(
        sum(held.get(key, (0, 0))) + n <= maximum
        for key, maximum in limits_of(event, slot_id, ticket)
    )


@dataclass
class Planned:
    call: Callable[[], Any]
    kind: str  # "register" or a transition verb
    expected: str | None  # the refusal code the spec predicts (sequential runs only)
    pk: int | None = None  # the registration a transition acts on
    n: int = 0
    state: str = ""


def plan(world: World, step: tuple, tag: str, *, predict: bool) -> Planned | None:
    """The call a step makes, and (when `predict`) the refusal the spec says it gets."""
    if step[0] == "register":
        _, index, n, state, odd = step
        pairs = world.every if odd else world.valid
        event, ticket, slot = pairs[index % len(pairs)]
        call = partial(
            registrations.register,
            event=event,
            attendees=attendees(n, tag),
            ticket=ticket,
            slot=slot,
            state=state,
            actor=STAFF,
        )
        expected = None
        if predict:
            expected = pair_refusal(event, ticket, slot, world)
            slot_id = slot.pk if slot is not None else None
            if expected is None and state == OPEN and not room(world, event, slot_id, ticket, n):
                expected = "sold_out"
        return Planned(call, "register", expected, n=n, state=state)
    verb, index = step
    rows = list(
        Registration.objects.filter(event_id__in=world.ids)
        .order_by("pk")
        .values_list("pk", "state")
    )
    if not rows:
        return None
    pk, state = rows[index % len(rows)]
    call = partial(
        getattr(registrations, verb), registration=Registration.objects.get(pk=pk), actor=STAFF
    )
    expected = None
    if predict:
        if TRANSITIONS.get((state, TARGET[verb])) != verb:
            expected = "invalid_transition"
        elif (state, verb) == (DRAFT, "confirm"):
            reg = Registration.objects.select_related("event", "ticket").get(pk=pk)
            if not room(world, reg.event, reg.slot_id, reg.ticket, 1):
                expected = "sold_out"
    return Planned(call, verb, expected, pk=pk)


def attempt(planned: Planned) -> tuple[Any, str | None]:
    try:
        return planned.call(), None
    except DomainError as error:
        return None, str(error.code)


def world_snapshot(world: World) -> list[dict]:
    return [snapshot(event) for event in world.events]


# --- sequential -------------------------------------------------------------------------------


@contextmanager
def rolled_back() -> Iterator[None]:
    """One example in a transaction (a savepoint inside a test's own) that is rolled back."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


def run_sequential(specs: tuple[EventSpec, ...], steps: list[tuple], seen: Counter) -> None:
    world = build_world(specs)
    check_invariants(world, "after setup")
    for number, step in enumerate(steps):
        planned = plan(world, step, f"s{number}", predict=True)
        if planned is None:
            continue
        where = f"after step {number} {step}"
        before = world_snapshot(world) if planned.expected is not None else None
        count = Registration.objects.filter(event_id__in=world.ids).count()
        result, code = attempt(planned)
        check_invariants(world, where, seen)
        seen[f"{planned.kind} {code or 'ok'}"] += 1
        assert code == planned.expected, f"{where}: the spec says {planned.expected}, got {code}"
        if code is not None:
            assert world_snapshot(world) == before, f"{where}: the refusal {code} wrote"
        elif planned.kind == "register":
            assert [r.state for r in result] == [planned.state] * planned.n
            assert Registration.objects.filter(event_id__in=world.ids).count() == count + planned.n
        else:
            assert Registration.objects.get(pk=planned.pk).state == TARGET[planned.kind]


def assert_exercised(seen: Counter, *, sequential: bool) -> None:
    """The run met every case the property is about (else it proves little)."""
    wanted = [
        "register ok",
        "register sold_out",
        "confirm ok",
        "confirm sold_out",
        "cancel ok",
        "reset_to_draft ok",
        "mark_attended ok",
        "limit reached",
    ]
    if sequential:
        wanted.append("cancel invalid_transition")
    missing = [case for case in wanted if not seen[case]]
    if not any(seen[f"register {code}"] for code in PAIR_CODES):
        missing.append("register refused by the pair rule")
    assert not missing, (missing, seen)


@pytest.mark.django_db
def test_random_steps_keep_the_ledger_equal_to_a_recount_and_within_every_limit():
    seen: Counter = Counter()

    @SEQUENTIAL
    @given(specs=WORLDS, steps=st.lists(STEP, min_size=10, max_size=25))
    def prop(specs, steps):
        with rolled_back():
            run_sequential(specs, steps, seen)

    prop()

    assert_exercised(seen, sequential=True)


# --- eight threads ----------------------------------------------------------------------------


def perform(world: World, steps: list[tuple], thread: int) -> list[tuple]:
    """One thread's steps; what each got: (kind, registration pk or created pks, code)."""
    outcomes = []
    for number, step in enumerate(steps):
        planned = plan(world, step, f"t{thread}.{number}", predict=False)
        if planned is None:
            continue
        result, code = attempt(planned)
        if planned.kind == "register":
            created = [r.pk for r in result] if code is None else []
            outcomes.append(("register", step, created, code))
        else:
            outcomes.append((planned.kind, step, planned.pk, code))
    return outcomes


def sample(world: World) -> None:
    """The invariants on one committed snapshot of the ledger and the registrations together
    (a booking commits both at once; REPEATABLE READ reads them at one instant)."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        check_invariants(world, "in a snapshot taken during the run")


def run_threaded(specs: tuple[EventSpec, ...], plans: list[list[tuple]], seen: Counter) -> None:
    world = build_world(specs)
    left, lock, done = [THREADS], threading.Lock(), threading.Event()

    def worker(thread: int) -> list[tuple]:
        try:
            return perform(world, plans[thread], thread)
        finally:
            with lock:
                left[0] -= 1
                if not left[0]:
                    done.set()

    def sampler() -> int:
        samples = 0
        while True:
            finished = done.is_set()
            sample(world)
            samples += 1
            if finished:
                return samples
            done.wait(0.02)  # a pause between samples, not a synchronisation

    *outcomes, samples = run_concurrently([partial(worker, i) for i in range(THREADS)] + [sampler])

    assert samples >= 1
    check_invariants(world, "after the threads", seen)
    created: dict[int, str] = {}  # pk → the state it was created in
    succeeded: Counter = Counter()  # (pk, verb) of every transition a thread saw succeed
    for kind, step, target, code in (o for thread in outcomes for o in thread):
        seen[f"{kind} {code or 'ok'}"] += 1
        if kind == "register":
            _, index, n, state, odd = step
            allowed = (
                {None} | (PAIR_CODES if odd else set()) | ({"sold_out"} if state == OPEN else set())
            )
            assert code in allowed, (step, code)
            assert len(target) == (n if code is None else 0)
            created.update(dict.fromkeys(target, state))
        else:
            allowed = {None, "invalid_transition"} | ({"sold_out"} if kind == "confirm" else set())
            assert code in allowed, (kind, code)
            if code is None:
                succeeded[(target, kind)] += 1
    states = dict(Registration.objects.filter(event_id__in=world.ids).values_list("pk", "state"))
    assert set(states) == set(created), "registrations no successful register() returned"
    # A refusal writes no audit row and moves no state: each registration's audit trail is its
    # creation then one allowed transition per success a thread saw, ending in its state.
    trail: dict[int, list[tuple[str, Any]]] = defaultdict(list)
    for pk, verb, data in (
        EventAuditLog.objects.filter(registration_id__in=list(states))
        .order_by("pk")
        .values_list("registration_id", "verb", "data")
    ):
        trail[pk].append((verb, data))
    assert set(trail) == set(states), "registrations without an audit trail"
    audited: Counter = Counter()
    for pk, rows in trail.items():
        (verb, data), *moves = rows
        assert (verb, data["state"]) == ("registration.created", created[pk]), (pk, rows)
        state = created[pk]
        for verb, data in moves:
            source, to = data["state"]
            assert source == state and TRANSITIONS.get((source, to)) == VERB_OF_AUDIT[verb], (
                pk,
                rows,
            )
            audited[(pk, VERB_OF_AUDIT[verb])] += 1
            state = to
        assert state == states[pk], (pk, rows, states[pk])
    assert audited == succeeded


@pytest.mark.django_db(transaction=True)
def test_eight_threads_of_random_steps_keep_the_ledger_equal_to_a_recount():
    seen: Counter = Counter()

    @THREADED
    @given(
        specs=WORLDS,
        plans=st.lists(st.lists(STEP, min_size=5, max_size=12), min_size=THREADS, max_size=THREADS),
    )
    def prop(specs, plans):
        run_threaded(specs, plans, seen)

    prop()

    assert_exercised(seen, sequential=False)


# --- the mutation -----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_seat_engine_that_ignores_the_limits_is_caught_as_an_oversell(monkeypatch):
    """The mutation: `seats._limits` — the one list of the limits that apply to a (slot,
    ticket) pair, which every seat check reads (register()'s pipelined check and the other
    verbs' `reserve`) — answers "no limit". Both the sequential and the threaded property runs
    must then fail, naming an oversell. Should a rewrite drop `_limits`, the patch itself fails
    (monkeypatch raises); should the check stop reading it, this test fails: never a silent
    pass."""
    monkeypatch.setattr(seats, "_limits", lambda *args, **kwargs: [])

    @MUTATED
    @given(specs=WORLDS, steps=st.lists(STEP, min_size=10, max_size=30))
    def sequential(specs, steps):
        with rolled_back():
            run_sequential(specs, steps, Counter())

    with pytest.raises(AssertionError, match="oversold"):
        sequential()

    tight = (
        EventSpec(multi=False, limited=True, seats_max=2, tickets=(), slots=0),
        EventSpec(multi=True, limited=False, seats_max=0, tickets=(1,), slots=1),
    )
    rush = [("register", pair, 1, OPEN, False) for pair in range(3)]  # both events
    with pytest.raises(AssertionError, match="oversold"):
        run_threaded(tight, [rush] * THREADS, Counter())

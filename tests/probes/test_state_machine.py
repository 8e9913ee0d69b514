"""State-machine fences (spec.md §4, §14 item 2): every verb of the registration service run
from every state, its outcome compared with the spec's table.

The table below is copied from spec.md §4 (not imported from the service), and each case calls
the real verb of `events.services.registrations` on a real row: a verb that moves a state it
should not, or refuses one it should allow, fails its case. Refusals write nothing
(tests/helpers.snapshot before == after).
"""

from __future__ import annotations

import pytest

from events.errors import DomainError
from events.models import EventAuditLog, SeatLedger
from events.services import registrations, seats
from tests.events import factories
from tests.helpers import snapshot

# spec.md §4, "Allowed transitions": (from, verb) → to. Every other (from, verb) is refused with
# `invalid_transition`.
SPEC_TABLE = {
    ("draft", "confirm"): "open",
    ("open", "mark_attended"): "done",
    ("done", "undo_attendance"): "open",
    ("draft", "cancel"): "cancel",
    ("open", "cancel"): "cancel",
    ("open", "reset_to_draft"): "draft",
    ("cancel", "reset_to_draft"): "draft",
}
# spec.md §4, "(new) → open | register", "(new) → draft | register(state="draft")".
REGISTER_INTO = {"open", "draft"}
# spec.md §4, fences: archive only for draft and cancel (`archive_refused` otherwise); unarchive
# restores. Archiving what is archived, or unarchiving what is active, changes nothing.
ARCHIVABLE = {"draft", "cancel"}

STATES = ("draft", "open", "done", "cancel")
TRANSITION_VERBS = ("confirm", "mark_attended", "undo_attendance", "cancel", "reset_to_draft")
VERBS = (*TRANSITION_VERBS, "archive", "unarchive")
AUDIT_VERBS = {
    "confirm": "registration.confirmed",
    "mark_attended": "registration.attended",
    "undo_attendance": "registration.attendance_undone",
    "cancel": "registration.cancelled",
    "reset_to_draft": "registration.reset_to_draft",
    "archive": "registration.archived",
    "unarchive": "registration.unarchived",
}
HELD = {"open": (1, 0), "done": (0, 1)}  # (reserved, used) one registration holds


def ledger_total(event) -> tuple[int, int]:
    row = SeatLedger.objects.filter(event=event, slot=None, ticket=None).first()
    return (row.reserved, row.used) if row else (0, 0)


def plus(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return (a[0] + b[0], a[1] + b[1])


def expected(state: str, active: bool, verb: str) -> tuple[str, str, bool] | str:
    """What spec.md §4 says `verb` does to a registration in (`state`, `active`):
    ("moves", new state, new active), ("same", …) for a no-op, or the refusal code."""
    if verb == "archive":
        if not active:
            return ("same", state, active)
        return ("moves", state, False) if state in ARCHIVABLE else "archive_refused"
    if verb == "unarchive":
        return ("moves", state, True) if not active else ("same", state, active)
    target = SPEC_TABLE.get((state, verb))
    if target is None:
        return "invalid_transition"
    if not active and target == "open":
        # An archived registration holds no seat and is out of the seat count: it cannot take
        # one (docs/spec.md §4 notes, "archived drafts").
        return "invalid_transition"
    return ("moves", target, active)


CASES = [
    (state, active, verb)
    for state in STATES
    for active in (True, False)
    if active or state in ARCHIVABLE  # only draft and cancel registrations can be archived
    for verb in VERBS
]


def case_id(case) -> str:
    state, active, verb = case
    outcome = expected(state, active, verb)
    shown = outcome if isinstance(outcome, str) else f"{outcome[0]}-{outcome[1]}"
    return f"{state}{'' if active else '(archived)'}-{verb}->{shown}"


@pytest.mark.django_db
@pytest.mark.parametrize(("state", "active", "verb"), CASES, ids=[case_id(c) for c in CASES])
def test_every_verb_from_every_state(state, active, verb, actor, now):
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    factories.RegistrationFactory(event=event)  # another holder: 1 reserved
    registration = factories.RegistrationFactory(
        event=event, state=state, active=active, confirmed_at=None if state == "draft" else now
    )
    other = (1, 0)
    mine = HELD.get(state, (0, 0)) if active else (0, 0)
    assert ledger_total(event) == plus(other, mine)
    before = snapshot(event)
    outcome = expected(state, active, verb)

    if isinstance(outcome, str):
        with pytest.raises(DomainError) as caught:
            getattr(registrations, verb)(registration=registration, actor=actor)

        assert caught.value.code == outcome
        assert snapshot(event) == before
        return

    kind, new_state, new_active = outcome
    result = getattr(registrations, verb)(registration=registration, actor=actor)

    registration.refresh_from_db()
    assert (result.state, result.active) == (registration.state, registration.active)
    assert (registration.state, registration.active) == (new_state, new_active)
    if kind == "same":
        assert snapshot(event) == before
        return
    held = HELD.get(new_state, (0, 0)) if new_active else (0, 0)
    assert ledger_total(event) == plus(other, held)
    assert seats.audit(event=event) == []
    rows = list(
        EventAuditLog.objects.exclude(pk__in=before["audit"]).values_list(
            "verb", "registration_id", "data"
        )
    )
    change = {"active": [active, new_active]} if verb.endswith("archive") else None
    assert len(rows) == 1
    audit_verb, audit_registration, data = rows[0]
    assert audit_verb == AUDIT_VERBS[verb]  # noun.past_tense (docs/overlay-blueprint.md)
    assert audit_registration == registration.pk
    assert data == (change or {"state": [state, new_state]})
    if new_state == "open":
        assert registration.confirmed_at is not None
    if new_state == "done":
        assert registration.date_closed is not None


# spec.md §4 fence: nothing enters open/done on a cancelled event (attendance included).
INTO_SEATS = [
    (state, verb) for (state, verb), target in SPEC_TABLE.items() if target in ("open", "done")
]


@pytest.mark.django_db
@pytest.mark.parametrize(("state", "verb"), INTO_SEATS, ids=[f"{s}-{v}" for s, v in INTO_SEATS])
def test_nothing_enters_open_or_done_on_a_cancelled_event(state, verb, actor, now):
    event = factories.EventFactory(kanban_state="cancel")
    registration = factories.RegistrationFactory(
        event=event, state=state, confirmed_at=None if state == "draft" else now
    )
    before = snapshot(event)

    with pytest.raises(DomainError) as caught:
        getattr(registrations, verb)(registration=registration, actor=actor)

    assert caught.value.code == "registrations_closed"
    assert snapshot(event) == before


@pytest.mark.django_db
@pytest.mark.parametrize("state", STATES)
def test_register_creates_only_the_states_of_the_table(state, actor):
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    before = snapshot(event)

    if state not in REGISTER_INTO:
        with pytest.raises(DomainError) as caught:
            registrations.register(event=event, attendees=[{"name": "A"}], state=state, actor=actor)

        assert caught.value.code == "invalid_transition"
        assert snapshot(event) == before
        return

    (created,) = registrations.register(
        event=event, attendees=[{"name": "A"}], state=state, actor=actor
    )

    created.refresh_from_db()
    assert created.state == state
    assert ledger_total(event) == HELD.get(state, (0, 0))
    assert seats.audit(event=event) == []


@pytest.mark.django_db
def test_attended_date_is_set_once_and_never_cleared(actor):
    event = factories.EventFactory()
    registration = factories.RegistrationFactory(event=event)

    registrations.mark_attended(registration=registration, actor=actor)
    registration.refresh_from_db()
    first = registration.date_closed
    registrations.undo_attendance(registration=registration, actor=actor)
    registrations.mark_attended(registration=registration, actor=actor)

    registration.refresh_from_db()
    assert first is not None
    assert registration.date_closed == first


@pytest.mark.django_db
def test_confirmed_at_is_set_when_first_entering_open(actor, now):
    event = factories.EventFactory()
    registration = factories.RegistrationFactory(event=event, state="draft", confirmed_at=None)

    registrations.confirm(registration=registration, actor=actor)
    registration.refresh_from_db()
    first = registration.confirmed_at
    registrations.reset_to_draft(registration=registration, actor=actor)
    registrations.confirm(registration=registration, actor=actor)

    registration.refresh_from_db()
    assert first is not None
    assert registration.confirmed_at == first

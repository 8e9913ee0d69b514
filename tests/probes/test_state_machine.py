"""State-machine fences (spec.md §4, §14 item 2): every (from state, verb) pair.

The allowed transitions are written out here from the spec's table (not imported from the
service), so a change of the service's table fails this probe.
"""

from __future__ import annotations

import pytest

from events.errors import DomainError
from events.models import EventAuditLog, SeatLedger
from events.services import registrations, seats
from tests.events import factories
from tests.helpers import snapshot

STATES = ("draft", "open", "done", "cancel")
VERBS = {  # verb → the state it moves to
    "confirm": "open",
    "mark_attended": "done",
    "undo_attendance": "open",
    "cancel": "cancel",
    "reset_to_draft": "draft",
}
# spec.md §4: (from, to) → the one verb that does it
ALLOWED = {
    ("draft", "open"): "confirm",
    ("open", "done"): "mark_attended",
    ("done", "open"): "undo_attendance",
    ("draft", "cancel"): "cancel",
    ("open", "cancel"): "cancel",
    ("open", "draft"): "reset_to_draft",
    ("cancel", "draft"): "reset_to_draft",
}
HELD = {"open": (1, 0), "done": (0, 1)}  # (reserved, used) one registration holds


def ledger_total(event) -> tuple[int, int]:
    row = SeatLedger.objects.filter(event=event, slot=None, ticket=None).first()
    return (row.reserved, row.used) if row else (0, 0)


CASES = [(source, verb) for source in STATES for verb in VERBS]


def test_the_table_has_every_pair_of_states():
    """16 (from, to) pairs: the 7 of the table are reachable by exactly one verb each."""
    pairs = [(a, b) for a in STATES for b in STATES]
    reachable = {(a, VERBS[v]) for a, v in CASES if ALLOWED.get((a, VERBS[v])) == v}
    assert len(pairs) == 16
    assert reachable == set(ALLOWED)
    assert all((a, a) not in reachable for a in STATES)


@pytest.mark.django_db
@pytest.mark.parametrize(("source", "verb"), CASES, ids=[f"{s}-{v}->{VERBS[v]}" for s, v in CASES])
def test_every_verb_from_every_state(source, verb, actor, now):
    target = VERBS[verb]
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    factories.RegistrationFactory(event=event)  # another holder: 1 reserved
    registration = factories.RegistrationFactory(
        event=event, state=source, confirmed_at=None if source == "draft" else now
    )
    before = snapshot(event)
    other = (1, 0)
    mine = HELD.get(source, (0, 0))
    assert ledger_total(event) == (other[0] + mine[0], other[1] + mine[1])

    if ALLOWED.get((source, target)) == verb:
        result = getattr(registrations, verb)(registration=registration, actor=actor)

        registration.refresh_from_db()
        assert result.state == registration.state == target
        after = HELD.get(target, (0, 0))
        assert ledger_total(event) == (other[0] + after[0], other[1] + after[1])
        assert seats.audit(event=event) == []
        rows = EventAuditLog.objects.exclude(pk__in=before["audit"])
        assert list(rows.values_list("verb", "registration_id", "data")) == [
            (f"registration.{verb}", registration.pk, {"state": [source, target]})
        ]
        if target == "open":
            assert registration.confirmed_at is not None
        if target == "done":
            assert registration.date_closed is not None
    else:
        with pytest.raises(DomainError) as caught:
            getattr(registrations, verb)(registration=registration, actor=actor)

        assert caught.value.code == "invalid_transition"
        assert snapshot(event) == before


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


@pytest.mark.django_db
def test_an_archived_draft_cannot_be_confirmed(actor):
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    registration = factories.RegistrationFactory(event=event, state="draft", active=False)
    before = snapshot(event)

    with pytest.raises(DomainError) as caught:
        registrations.confirm(registration=registration, actor=actor)

    assert caught.value.code == "invalid_transition"
    assert snapshot(event) == before


@pytest.mark.django_db
@pytest.mark.parametrize("state", ["done", "cancel"])
def test_register_cannot_create_in_other_states(state, actor):
    event = factories.EventFactory()
    before = snapshot(event)

    with pytest.raises(DomainError) as caught:
        registrations.register(event=event, attendees=[{"name": "A"}], state=state, actor=actor)

    assert caught.value.code == "invalid_transition"
    assert snapshot(event) == before

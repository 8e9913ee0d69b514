"""Template-apply once (spec.md §2.3): a new event gets one Booth per TypeBooth of its type;
later edits of the type, or a change of the event's type, reach no event."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from booths.models import Booth
from booths.services import config
from events.models import EventAuditLog
from events.services import events as event_services
from tests.booths import factories
from tests.events import factories as event_factories

pytestmark = pytest.mark.django_db


def new_event(event_type, actor, name="Fair"):
    begin = timezone.now() + timedelta(days=30)
    return event_services.create_event(
        name=name,
        date_begin=begin,
        date_end=begin + timedelta(hours=8),
        event_type=event_type,
        actor=actor,
    )


def booths_of(event) -> list[tuple[str, int, str]]:
    return list(
        Booth.objects.filter(event=event)
        .order_by("name")
        .values_list("name", "booth_category_id", "state")
    )


def test_a_new_event_gets_the_booths_of_its_type_and_later_edits_do_not_propagate(actor):
    event_type = event_factories.EventTypeFactory()
    standard, premium = factories.BoothCategoryFactory.create_batch(2)
    first = factories.TypeBoothFactory(event_type=event_type, booth_category=standard, name="A1")
    factories.TypeBoothFactory(event_type=event_type, booth_category=premium, name="A2")

    event = new_event(event_type, actor)

    assert booths_of(event) == [("A1", standard.pk, "available"), ("A2", premium.pk, "available")]
    entry = EventAuditLog.objects.get(verb="booth.created", event=event)
    assert entry.data["event_type"] == event_type.pk and len(entry.data["booths"]) == 2

    # later edits of the type: rename, re-categorise, add and delete lines
    config.update_type_booth(line=first, actor=actor, name="A1 (bigger)", booth_category=premium)
    config.create_type_booth(event_type=event_type, actor=actor, name="A3", booth_category=standard)
    config.delete_type_booth(line=first, actor=actor)

    assert booths_of(event) == [("A1", standard.pk, "available"), ("A2", premium.pk, "available")]
    # a newer event gets the type as it is now
    later = new_event(event_type, actor, name="Fair 2")
    assert [name for name, _, _ in booths_of(later)] == ["A2", "A3"]


def test_changing_the_events_type_afterwards_applies_nothing(actor):
    event = new_event(None, actor)
    other = event_factories.EventTypeFactory()
    factories.TypeBoothFactory(event_type=other)
    event_services.update_event(event=event, event_type=other, actor=actor)
    assert Booth.objects.filter(event=event).count() == 0


def test_a_type_without_booth_lines_adds_no_booth_and_no_audit_row(actor):
    event = new_event(event_factories.EventTypeFactory(), actor)
    assert Booth.objects.filter(event=event).count() == 0
    assert not EventAuditLog.objects.filter(verb="booth.created").exists()

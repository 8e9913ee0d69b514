"""One decision of "closed" (events.rules.closed_reason / closed_events): a cancelled stage
is known by its flag (`Stage.is_cancelled`, on the "Cancelled" stage of the migrations), never
by its name; a cancelled stage is an ending one; every caller answers by the same selector."""

from __future__ import annotations

import json
from datetime import timedelta
from itertools import product

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.utils import timezone

from events import rules
from events.errors import ValidationFailed
from events.models import Event, EventAuditLog, KanbanState, Registration, Stage
from events.services import events as event_services
from events.services import reference
from tests.events import factories

pytestmark = pytest.mark.django_db

ACTOR = "tests"


def renamed_cancelled_stage(name: str = "Called off") -> Stage:
    stage = factories.stage("Cancelled")
    reference.update_stage(stage=stage, actor=ACTOR, name=name)
    stage.refresh_from_db()
    return stage


def test_the_migrations_flag_the_cancelled_stage_and_only_it():
    flags = dict(Stage.objects.values_list("name", "is_cancelled"))
    assert flags == {
        "New": False,
        "Booked": False,
        "Announced": False,
        "Ended": False,
        "Cancelled": True,
    }
    assert Stage.objects.get(name="Cancelled").pipe_end


def test_closed_reason_reads_the_stage_s_flag_not_its_name(now):
    event = factories.EventFactory(date_begin=now, date_end=now + timedelta(hours=4))
    assert rules.closed_reason(event, now=now) is None

    event.stage = renamed_cancelled_stage()
    assert rules.closed_reason(event, now=now) == "cancelled"
    assert rules.is_closed(event, now=now)

    # a stage that is merely called "Cancelled" closes nothing
    event.stage = factories.StageFactory(name="Cancelled")
    assert rules.closed_reason(event, now=now) is None

    flagged = factories.StageFactory(name="Postponed for good", pipe_end=True, is_cancelled=True)
    event.stage = flagged
    assert rules.closed_reason(event, now=now) == "cancelled"
    event.stage = factories.stage("Ended")
    assert rules.closed_reason(event, now=now) == "over"


def test_the_queryset_filter_agrees_with_the_selector_on_every_combination(now):
    """`closed_events` (lists: the desk's event picker) and `closed_reason` (one event) are
    the same decision."""
    stages = [
        factories.stage("New"),
        factories.stage("Ended"),
        renamed_cancelled_stage(),
        factories.StageFactory(name="Cancelled"),  # the name alone means nothing
    ]
    events = []
    for stage, kanban, finished in product(stages, KanbanState.values, [False, True]):
        begin = now - timedelta(days=2) if finished else now - timedelta(hours=1)
        events.append(
            factories.EventFactory(
                stage=stage,
                kanban_state=kanban,
                date_begin=begin,
                date_end=begin + timedelta(hours=8),
            )
        )
    by_filter = set(Event.objects.filter(rules.closed_events(now=now)).values_list("pk", flat=True))
    by_selector = {e.pk for e in events if rules.is_closed(e, now=now)}
    assert by_filter == by_selector
    assert 0 < len(by_selector) < len(events)


def test_the_intake_refuses_an_event_in_a_renamed_cancelled_stage_and_writes_nothing(client):
    cache.clear()
    event = factories.EventFactory(stage=renamed_cancelled_stage())
    before = (Registration.objects.count(), EventAuditLog.objects.count())
    response = client.post(
        f"/api/v1/events/{event.pk}/registrations",
        json.dumps({"attendees": [{"name": "Ada", "email": "ada@example.org"}]}),
        content_type="application/json",
        REMOTE_ADDR="10.9.0.1",
    )
    assert response.status_code == 409
    error = response.json()["error"]
    assert (error["code"], error["reason"]) == ("registrations_closed", "cancelled")
    assert (Registration.objects.count(), EventAuditLog.objects.count()) == before


def test_the_event_page_says_cancelled_for_a_renamed_cancelled_stage(client):
    event = factories.EventFactory(stage=renamed_cancelled_stage())
    page = client.get(f"/events/{event.pk}/")
    assert page.status_code == 200
    assert page.context["form"]["closed"] == "cancelled"
    assert "this event is cancelled" in page.content.decode()


# --- the flag is edited through the stage verbs (and so the admin) -------------------------


def test_a_cancelled_stage_must_be_an_ending_stage_and_a_refusal_writes_nothing():
    before = (Stage.objects.count(), EventAuditLog.objects.count())
    with pytest.raises(ValidationFailed) as created:
        reference.create_stage(actor=ACTOR, name="Scrapped", is_cancelled=True)
    assert (created.value.code, created.value.details["field"]) == ("invalid_value", "is_cancelled")
    stage = factories.stage("Cancelled")
    with pytest.raises(ValidationFailed):
        reference.update_stage(stage=stage, actor=ACTOR, pipe_end=False)
    ended = factories.stage("Ended")
    with pytest.raises(ValidationFailed):
        reference.update_stage(stage=factories.stage("New"), actor=ACTOR, is_cancelled=True)
    assert (Stage.objects.count(), EventAuditLog.objects.count()) == before
    assert Stage.objects.get(pk=stage.pk).pipe_end
    # allowed: another ending stage flagged cancelled (audited)
    reference.update_stage(stage=ended, actor=ACTOR, is_cancelled=True)
    assert Stage.objects.get(pk=ended.pk).is_cancelled
    row = EventAuditLog.objects.get(verb="stage.updated")
    assert row.data == {"id": ended.pk, "is_cancelled": [False, True]}


def test_the_stage_admin_edits_the_flag_and_refuses_it_without_pipe_end(client):
    manager = factories.UserFactory(username="stage-manager")
    manager.groups.add(Group.objects.get(name="Event manager"))
    client.force_login(manager)
    stage = factories.StageFactory(name="Abandoned", pipe_end=True, fold=True)
    url = f"/admin/events/stage/{stage.pk}/change/"
    form = client.get(url)
    assert 'name="is_cancelled"' in form.content.decode()
    data = {"name": "Abandoned", "sequence": str(stage.sequence), "fold": "on"}

    before = EventAuditLog.objects.count()
    refused = client.post(url, {**data, "is_cancelled": "on"})  # no pipe_end
    assert refused.status_code == 200  # the form again, with the error
    assert "A cancelled stage must be an ending stage" in refused.content.decode()
    assert not Stage.objects.get(pk=stage.pk).is_cancelled
    assert EventAuditLog.objects.count() == before

    saved = client.post(url, {**data, "pipe_end": "on", "is_cancelled": "on"})
    assert saved.status_code == 302
    assert Stage.objects.get(pk=stage.pk).is_cancelled


def test_mark_done_never_moves_an_event_to_a_cancelled_stage():
    """Done is the first ending stage by sequence that is not a cancelled stage, even when a
    cancelled stage sorts first."""
    cancelled = factories.stage("Cancelled")
    reference.update_stage(stage=cancelled, actor=ACTOR, sequence=4)  # before Ended (5)
    event = factories.EventFactory(
        date_begin=timezone.now() - timedelta(days=2),
        date_end=timezone.now() - timedelta(days=1),
    )
    done = event_services.mark_done(event=event, actor=ACTOR)
    assert done.stage.name == "Ended"

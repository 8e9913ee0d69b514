"""tests/<app>/factories.py: every factory saves a row, every model has one, and factory-made
registrations keep the seat ledger consistent with the rows (`seats_audit`)."""

from __future__ import annotations

import inspect
from io import StringIO

import factory
import pytest
from django.apps import apps
from django.core.management import call_command

from events.models import Event, Registration
from events.services import seats
from tests.booths import factories as booth_factories
from tests.desk import factories as desk_factories
from tests.events import factories
from tests.leads import factories as lead_factories
from tests.seams import factories as seam_factories
from tests.sms import factories as sms_factories

pytestmark = pytest.mark.django_db

FACTORIES = sorted(
    (
        obj
        for module in (
            factories,
            booth_factories,
            lead_factories,
            seam_factories,
            sms_factories,
            desk_factories,
        )
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and obj.__module__ == module.__name__
        and issubclass(obj, factory.django.DjangoModelFactory)
        and obj is not factory.django.DjangoModelFactory
    ),
    key=lambda f: f.__name__,
)


@pytest.mark.parametrize("model_factory", FACTORIES, ids=lambda f: f.__name__)
def test_each_factory_saves_a_row(model_factory):
    obj = model_factory()
    model = model_factory._meta.model
    assert obj.pk is not None
    assert model._default_manager.filter(pk=obj.pk).count() == 1


def test_every_schema_model_has_a_factory():
    covered = {f._meta.model for f in FACTORIES}
    models = {
        m
        for label in ("events", "booths", "leads", "seams", "sms", "desk")
        for m in apps.get_app_config(label).get_models()
        if m._meta.managed
    }
    assert sorted(m._meta.label for m in models - covered) == []


def test_the_ledger_matches_factory_registrations():
    event = factories.EventFactory(seats_limited=True, seats_max=50)
    ticket = factories.TicketFactory(event=event, seats_max=20)
    for state in ("draft", "open", "open", "done", "cancel"):
        factories.RegistrationFactory(event=event, ticket=ticket, state=state)
    factories.RegistrationFactory(event=event, ticket=ticket, state="open", active=False)

    multi = factories.EventFactory(is_multi_slots=True, seats_limited=True, seats_max=5)
    slot_a = factories.SlotFactory(event=multi)
    slot_b = factories.SlotFactory(event=multi, start_hour=13.0, end_hour=15.0)
    for slot, state in ((slot_a, "open"), (slot_a, "done"), (slot_b, "open"), (slot_b, "draft")):
        factories.RegistrationFactory(event=multi, slot=slot, state=state)

    summary = seats.event_summary(event=Event.objects.get(pk=event.pk))
    assert (summary.reserved, summary.used, summary.taken) == (2, 1, 3)
    assert seats.availability(event=event, ticket=ticket) == 17
    assert seats.availability(event=multi, slot=slot_a) == 3
    assert seats.availability(event=multi, slot=slot_b) == 4
    assert seats.audit(event=event) == []
    assert seats.audit(event=multi) == []
    out = StringIO()
    call_command("seats_audit", stdout=out)
    assert out.getvalue().strip() == "seats_audit: 2 event(s) consistent"


def test_seats_audit_notices_a_row_written_around_the_ledger():
    """Control: the audit does fail when a seat-holding row bypasses the seat module."""
    event = factories.EventFactory()
    factories.RegistrationFactory(event=event, state="open")
    Registration.objects.create(event=event, state="open", barcode="777")
    assert seats.audit(event=event) != []
    with pytest.raises(SystemExit) as exit_info:
        call_command("seats_audit", stdout=StringIO(), stderr=StringIO())
    assert exit_info.value.code == 1

"""factory-boy factories for the booths overlay's models (rows of a given shape; behaviour goes
through services)."""

from __future__ import annotations

from decimal import Decimal

import factory

from booths import models as booths
from tests.events.factories import EventFactory, EventTypeFactory


class BoothCategoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = booths.BoothCategory

    name = factory.Sequence(lambda n: f"Booth category {n}")
    price = Decimal("500.00")


class TypeBoothFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = booths.TypeBooth

    event_type = factory.SubFactory(EventTypeFactory)
    booth_category = factory.SubFactory(BoothCategoryFactory)
    name = factory.Sequence(lambda n: f"Stand {n}")


class BoothFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = booths.Booth

    event = factory.SubFactory(EventFactory)
    booth_category = factory.SubFactory(BoothCategoryFactory)
    name = factory.Sequence(lambda n: f"Stand {n}")


class BoothBookingFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = booths.BoothBooking

    booth = factory.SubFactory(BoothFactory)
    order_ref = factory.Sequence(lambda n: f"SO{n:04d}")
    partner_ref = "P1"

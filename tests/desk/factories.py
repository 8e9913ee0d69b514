"""factory-boy factories for the desk's models (rows of a given shape; behaviour goes through
services)."""

from __future__ import annotations

import factory
from django.utils import timezone

from desk import models as desk
from desk.models import ScanNonce
from tests.events import factories
from tests.events.factories import UserFactory


class ScanNonceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ScanNonce

    user = factory.SubFactory(UserFactory)
    nonce = factory.Sequence(lambda n: f"nonce-{n}")
    fingerprint = "0" * 64
    answer = '{"status": "invalid_ticket"}'


class OfflineConflictFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = desk.OfflineConflict

    registration = factory.SubFactory(factories.RegistrationFactory, state="done")
    event = factory.SelfAttribute("registration.event")
    server_status = "already_registered"
    kept_actor_label = "north door"
    kept_at = factory.LazyFunction(timezone.now)
    offline_actor_id = factory.Sequence(str)
    offline_actor_label = "south door"
    offline_scanned_at = factory.LazyFunction(timezone.now)

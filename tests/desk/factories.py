"""factory_boy factories of the desk's models."""

from __future__ import annotations

import factory

from desk.models import ScanNonce
from tests.events.factories import UserFactory


class ScanNonceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ScanNonce

    user = factory.SubFactory(UserFactory)
    nonce = factory.Sequence(lambda n: f"nonce-{n}")
    fingerprint = "0" * 64
    answer = '{"status": "invalid_ticket"}'

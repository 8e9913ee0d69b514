"""factory-boy factories for the seams overlay's models (rows of a given shape; behaviour goes
through services)."""

from __future__ import annotations

import factory

from seams import models as seams


class SeamInboxFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = seams.SeamInbox

    message_id = factory.Sequence(lambda n: f"msg_{n}")
    type = "order.confirmed"
    body = factory.LazyFunction(dict)
    status = seams.InboxStatus.APPLIED


class SeamOrderFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = seams.SeamOrder

    order_ref = factory.Sequence(lambda n: f"SO{n:04d}")
    version = 1
    state = "confirmed"

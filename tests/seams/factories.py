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


class WebhookEndpointFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = seams.WebhookEndpoint

    name = factory.Sequence(lambda n: f"Host {n}")
    url = factory.Sequence(lambda n: f"https://host{n}.example.org/hooks")
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


class WebhookMessageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = seams.WebhookMessage

    msg_id = factory.Sequence(lambda n: f"msg_factory{n}")
    type = "event.cancelled"
    subject = factory.Sequence(lambda n: f"event:{n + 1}")
    version = 1
    payload = factory.LazyAttribute(lambda m: {"type": m.type, "data": {}})


class WebhookDeliveryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = seams.WebhookDelivery

    message = factory.SubFactory(WebhookMessageFactory)
    endpoint = factory.SubFactory(WebhookEndpointFactory)
    subject = factory.SelfAttribute("message.subject")
    version = factory.SelfAttribute("message.version")


class WebhookAttemptFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = seams.WebhookAttempt

    delivery = factory.SubFactory(WebhookDeliveryFactory)
    status = 200

"""factory-boy factories for the sms overlay's models (rows of a given shape; behaviour goes
through services)."""

from __future__ import annotations

import factory
from django.utils import timezone

from sms import models as sms


class SmsOutboxFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = sms.SmsOutbox

    reference = factory.Sequence(lambda n: f"ref-{n}")
    to = factory.Sequence(lambda n: f"+3247{n:07d}")
    body = "See you tomorrow."
    next_attempt_at = factory.LazyFunction(timezone.now)

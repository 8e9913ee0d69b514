"""The sms overlay's service verbs: delivery of the outbox and its staff re-queue."""

from sms.services.delivery import deliver_outbox, retry

__all__ = ["deliver_outbox", "retry"]

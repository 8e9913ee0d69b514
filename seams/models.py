"""Sale seam schema (spec-overlay.md §1.3): the inbox and the per-order version."""

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone


class InboxStatus(models.TextChoices):
    APPLIED = "applied", "Applied"
    DUPLICATE = "duplicate", "Duplicate"
    STALE = "stale", "Stale"
    PARKED = "parked", "Parked"


class SeamInbox(models.Model):
    source = models.CharField(max_length=64, default="sale")
    message_id = models.CharField(max_length=255)
    type = models.CharField(max_length=64)
    order_ref = models.CharField(max_length=128, blank=True, db_index=True)
    body = models.JSONField()
    received_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(max_length=10, choices=InboxStatus.choices)
    error_code = models.CharField(max_length=64, blank=True)
    error_detail = models.TextField(blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-received_at", "-id")
        verbose_name = "inbox message"
        verbose_name_plural = "inbox messages"
        constraints = [
            models.UniqueConstraint(fields=["source", "message_id"], name="seam_inbox_message"),
        ]
        indexes = [
            # Parked messages, counted on every event dashboard and listed for replay: a few
            # rows of an inbox that keeps every message the host ever sent.
            models.Index(
                fields=["id"], name="seam_inbox_parked", condition=models.Q(status="parked")
            ),
            # The admin's list, newest first: its first page without sorting the whole inbox.
            models.Index(fields=["-received_at", "-id"], name="seam_inbox_newest"),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.message_id} ({self.status})"


class SeamOrder(models.Model):
    order_ref = models.CharField(max_length=128, unique=True)
    version = models.PositiveIntegerField()
    state = models.CharField(max_length=16)

    class Meta:
        ordering = ("order_ref",)
        verbose_name = "host order version"
        verbose_name_plural = "host order versions"

    def __str__(self) -> str:
        return f"{self.order_ref} v{self.version} ({self.state})"


# --- outbound webhooks (docs/spec.md "Outbound webhooks") -------------------------------------

# The message types a host can subscribe to, each the audit verb it is made from (the
# `event.updated` rows that moved the event's dates are `event.postponed`).
WEBHOOK_TYPES = (
    "registration.created",
    "registration.cancelled",
    "registration.attended",
    "waitlist.offered",
    "waitlist.expired",
    "event.cancelled",
    "event.postponed",
)


def _all_types() -> list[str]:
    return list(WEBHOOK_TYPES)


class WebhookEndpoint(models.Model):
    """A URL of the host that receives signed messages (Standard Webhooks): for one event, or
    for every event when `event` is empty, of the `event_types` it names.

    `secret` signs every message; after a rotation `previous_secret` signs too (a second
    signature in the same header) until `previous_secret_until`, so the host can switch
    without losing a message. An endpoint failing without a success for
    EVENT_WEBHOOK_DISABLE_HOURS is disabled: its messages keep queueing and wait (nothing is
    lost) until staff enable it again."""

    name = models.CharField(max_length=120)
    url = models.URLField(max_length=2000)
    event = models.ForeignKey(
        "events.Event",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="webhook_endpoints",
        help_text="Empty: every event.",
    )
    event_types = ArrayField(
        models.CharField(max_length=40, choices=[(t, t) for t in WEBHOOK_TYPES]),
        default=_all_types,
        help_text="The message types this endpoint receives.",
    )
    secret = models.CharField(max_length=128, editable=False)
    previous_secret = models.CharField(max_length=128, blank=True, editable=False)
    previous_secret_until = models.DateTimeField(null=True, blank=True, editable=False)
    enabled = models.BooleanField(default=True)
    disabled_at = models.DateTimeField(null=True, blank=True, editable=False)
    disabled_reason = models.CharField(max_length=255, blank=True, editable=False)
    failing_since = models.DateTimeField(null=True, blank=True, editable=False)
    consecutive_failures = models.PositiveIntegerField(default=0, editable=False)
    last_success_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name", "id")
        verbose_name = "webhook endpoint"
        verbose_name_plural = "webhook endpoints"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(event_types__contained_by=list(WEBHOOK_TYPES)),
                name="webhook_endpoint_known_types",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class WebhookMessage(models.Model):
    """One change the host may hear about: written by the database trigger on the audit log
    (seams/sql/webhooks.sql) in the transaction of the change, only when an endpoint wants it.

    `subject` is what changed (`registration:<id>`, `waitlist:<id>`, `event:<id>`) and
    `version` counts its messages from 1, so a receiver orders a subject's messages by it."""

    msg_id = models.CharField(max_length=40, unique=True)
    type = models.CharField(max_length=40)
    event = models.ForeignKey(
        "events.Event",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    subject = models.CharField(max_length=40)
    version = models.PositiveIntegerField()
    audit_id = models.BigIntegerField(null=True, blank=True)
    payload = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("-id",)
        verbose_name = "webhook message"
        verbose_name_plural = "webhook messages"
        constraints = [
            models.UniqueConstraint(fields=["subject", "version"], name="webhook_subject_version")
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.subject} v{self.version}"


class DeliveryState(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"


class WebhookDelivery(models.Model):
    """One message to one endpoint. `pending` until a 2xx (`delivered`) or a refusal that
    retrying cannot change, a 4xx other than 408/425/429 (`failed`; staff may send it again).
    A pending delivery waits while an earlier version of its subject is pending for the same
    endpoint, so each endpoint receives a subject's messages in version order."""

    message = models.ForeignKey(WebhookMessage, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    # The message's, copied for the order rule's index.
    subject = models.CharField(max_length=40)
    version = models.PositiveIntegerField()
    state = models.CharField(
        max_length=10, choices=DeliveryState.choices, default=DeliveryState.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("-id",)
        verbose_name = "webhook delivery"
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(fields=["message", "endpoint"], name="webhook_delivery_once"),
            models.CheckConstraint(
                condition=models.Q(state__in=["pending", "delivered", "failed"]),
                name="webhook_delivery_state_valid",
            ),
            models.CheckConstraint(
                condition=~models.Q(state="delivered") | models.Q(delivered_at__isnull=False),
                name="webhook_delivered_has_time",
            ),
        ]
        indexes = [
            # The claim: pending deliveries by due time (delivered ones are nearly all rows).
            models.Index(
                fields=["next_attempt_at", "id"],
                name="webhook_delivery_due",
                condition=models.Q(state="pending"),
            ),
            # The order rule: an earlier pending version of the subject for the endpoint.
            models.Index(
                fields=["endpoint", "subject", "version"],
                name="webhook_delivery_order",
                condition=models.Q(state="pending"),
            ),
            models.Index(fields=["endpoint", "-id"], name="webhook_delivery_endpoint"),
            # The dashboard's count of refused deliveries (a few rows among all delivered).
            models.Index(
                fields=["endpoint"],
                name="webhook_delivery_failed",
                condition=models.Q(state="failed"),
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.subject} v{self.version} ({self.state})"


class WebhookAttempt(models.Model):
    """One POST of a delivery: its answer (`status`, an excerpt of the body) or the transport
    error, and how long it took."""

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="tries")
    at = models.DateTimeField(default=timezone.now)
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    response = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ("-id",)
        verbose_name = "webhook attempt"
        verbose_name_plural = "webhook attempts"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.status or self.error[:40]}"

"""The SMS outbox of the built-in gateway adapter (spec.md §11, spec-overlay.md §4).

Invariants held by the database:
- `reference` is unique: one row per message (scheduler, registration, scheduled date / slot),
  so a message queued twice is one row (`ON CONFLICT DO NOTHING`) and the gateway receives one
  stable reference to de-duplicate a crash re-send;
- a row is `queued` (due at `next_attempt_at`), `sent` (with `sent_at`) or `failed` (a
  permanent refusal, `last_error` says why); only the delivery service changes it.
"""

from django.db import models

from events.models import Mail, Registration


class SmsState(models.TextChoices):
    QUEUED = "queued", "Queued"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class SmsOutbox(models.Model):
    """A rendered SMS written in the pass transaction; the `sms.deliver_outbox` task POSTs it."""

    reference = models.CharField(max_length=128, unique=True)
    scheduler = models.ForeignKey(
        Mail, null=True, blank=True, on_delete=models.SET_NULL, related_name="sms_outbox_rows"
    )
    registration = models.ForeignKey(
        Registration,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="sms_outbox_rows",
    )
    to = models.CharField(max_length=32, help_text="E.164")
    body = models.TextField()
    state = models.CharField(max_length=8, choices=SmsState.choices, default=SmsState.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("id",)
        verbose_name = "outgoing SMS"
        verbose_name_plural = "SMS outbox"
        indexes = [
            # The delivery claim: queued rows by due time (a partial index: sent rows are most).
            models.Index(
                fields=["next_attempt_at"],
                name="sms_outbox_due",
                condition=models.Q(state="queued"),
            )
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=["queued", "sent", "failed"]),
                name="sms_outbox_state_valid",
            ),
            models.CheckConstraint(
                condition=~models.Q(state="sent") | models.Q(sent_at__isnull=False),
                name="sms_outbox_sent_has_sent_at",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.to}: {self.reference}"

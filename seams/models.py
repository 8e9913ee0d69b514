"""Sale seam schema (spec-overlay.md §1.3): the inbox and the per-order version."""

from django.db import models


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

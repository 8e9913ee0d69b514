"""The desk's own rows (spec-overlay.md §5): the first answer to a scan sent with a nonce, and
the conflicts between an offline admission and the server's record.

A conflict is written once per replayed offline scan (unique on the registration, the replaying
desk's actor and the scan's real time), in the transaction of that scan's audit row; nothing
updates it afterwards: staff read it and act (docs/runbook.md).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from events.models import Event, Registration

NONCE_MAX = 64


class ScanNonce(models.Model):
    """The first answer to a desk scan or confirmation sent with a `nonce`, replayed for the same
    (desk user, nonce). The answer is kept as the JSON text that was sent (jsonb would reorder
    its keys), so a replay is the same bytes. Swept after `desk.services.nonces.RETENTION`."""

    # No index of its own: the unique (user, nonce) index serves lookups by user (one index
    # fewer to write on every scan).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    nonce = models.CharField(max_length=NONCE_MAX)
    # sha256 of the request's fields: the same nonce with another request is refused.
    fingerprint = models.CharField(max_length=64)
    answer = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "desk scan nonce"
        verbose_name_plural = "desk scan nonces"
        constraints = [
            models.UniqueConstraint(fields=["user", "nonce"], name="desk_scan_nonce"),
        ]
        indexes = [models.Index(fields=["created_at"], name="desk_scan_nonce_created")]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.nonce}"


class OfflineConflict(models.Model):
    """A door admitted a ticket while offline; when the scan reached the server, the server's
    record had already decided otherwise (another desk admitted it first, or it was cancelled,
    or the event closed)."""

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="desk_conflicts")
    registration = models.ForeignKey(
        Registration, on_delete=models.CASCADE, related_name="desk_conflicts"
    )
    server_status = models.CharField(
        max_length=32, help_text="What the server answered the replayed scan."
    )
    # The admission the server kept (empty when it was not made at a desk).
    kept_actor_id = models.CharField(max_length=64, blank=True)
    kept_actor_label = models.CharField("kept by", max_length=255, blank=True)
    kept_at = models.DateTimeField("kept admission at", null=True, blank=True)
    # The offline admission the server turned away.
    offline_actor_id = models.CharField(max_length=64, blank=True)
    offline_actor_label = models.CharField("admitted offline by", max_length=255)
    offline_scanned_at = models.DateTimeField("admitted offline at")
    snapshot_at = models.DateTimeField("door's list generated at", null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ("-created_at", "-id")
        verbose_name = "offline conflict"
        verbose_name_plural = "offline conflicts"
        constraints = [
            models.UniqueConstraint(
                fields=("registration", "offline_actor_id", "offline_scanned_at"),
                name="desk_conflict_once_per_scan",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.registration_id}: offline {self.offline_actor_label}, {self.server_status}"

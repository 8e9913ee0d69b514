"""The desk's own rows: the first answer to a scan sent with a nonce (spec-overlay.md §5)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

NONCE_MAX = 64


class ScanNonce(models.Model):
    """The first answer to a desk scan or confirmation sent with a `nonce`, replayed for the same
    (desk user, nonce). The answer is kept as the JSON text that was sent (jsonb would reorder
    its keys), so a replay is the same bytes. Swept after `desk.services.nonces.RETENTION`."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
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

"""The retention of the desk's nonces: a stored first answer is kept RETENTION, then deleted.

A desk retries a scan within seconds (a lost answer) or, offline, within the hours of a day's
door; a nonce older than RETENTION is never sent again, and its row only grows the table.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from desk.models import ScanNonce

RETENTION = timedelta(days=7)
SWEEP_TASK = "desk.sweep_nonces"


def sweep_nonces(*, now=None) -> int:
    """Delete the nonces stored more than RETENTION ago (one statement, the created_at index);
    answers how many. Idempotent."""
    cutoff = (now or timezone.now()) - RETENTION
    deleted, _ = ScanNonce.objects.filter(created_at__lt=cutoff).delete()
    return deleted

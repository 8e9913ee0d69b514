"""The append-only audit log, the attendee exports built in the background, and the catalog
view the host reads."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from events.models.choices import ActorType
from events.models.events import Event, Ticket
from events.models.registrations import Registration

# --- audit (spec.md §8) ------------------------------------------------------------------------


class EventAuditLog(models.Model):
    """Append-only: a trigger (migration 0002) refuses UPDATE and DELETE on this table.

    The foreign keys carry no database constraint so that rows outlive what they describe.
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor_type = models.CharField(max_length=8, choices=ActorType.choices)
    actor_id = models.CharField(max_length=64, blank=True)
    actor_label = models.CharField(max_length=255, blank=True)
    event = models.ForeignKey(
        Event,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="audit_rows",
    )
    registration = models.ForeignKey(
        Registration,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="audit_rows",
    )
    verb = models.CharField(max_length=64)  # indexed: Meta.indexes (exact matches only)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ("-at", "-id")
        indexes = [models.Index(fields=["verb"], name="eventauditlog_verb")]
        verbose_name = "audit log entry"
        verbose_name_plural = "audit log"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.verb}"


# --- attendee exports built in the background (docs/spec.md "Staff experience") ----------


class ExportState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Being built"
    DONE = "done", "Ready"
    FAILED = "failed", "Failed"


class ExportFormat(models.TextChoices):
    CSV = "csv", "CSV"
    XLSX = "xlsx", "XLSX"
    PDF = "pdf", "PDF (name badges)"


class AttendeeExport(models.Model):
    """An attendee export too large to build during a request (events.read.exports): the
    worker builds it, its requester watches the progress and downloads the file, kept in the
    row until it expires."""

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    event_ids = models.JSONField()
    file_format = models.CharField(max_length=4, choices=ExportFormat.choices)
    filename = models.CharField(max_length=255)
    # What a badge sheet (file_format pdf) holds: its label layout and registration filters
    # (events.read.badges.Options); empty for attendee lists.
    options = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=8, choices=ExportState.choices, default=ExportState.QUEUED)
    rows_total = models.PositiveIntegerField(default=0)
    rows_done = models.PositiveIntegerField(default=0)
    attempts = models.PositiveSmallIntegerField(default=0)
    content = models.BinaryField(null=True, editable=False)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "attendee export"
        verbose_name_plural = "attendee exports"
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=["state", "created_at"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(file_format__in=ExportFormat.values), name="export_format_known"
            ),
            models.CheckConstraint(
                condition=Q(state__in=ExportState.values), name="export_state_known"
            ),
            models.CheckConstraint(
                condition=~Q(state=ExportState.DONE) | Q(content__isnull=False),
                name="export_done_has_content",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.filename} ({self.state})"


# --- catalog read (spec-overlay.md §6) ------------------------------------------------------


class LinkedProduct(models.Model):
    """Read model over the SQL view `event_linked_products` (created by a migration)."""

    id = models.BigIntegerField(primary_key=True)
    event = models.ForeignKey(Event, on_delete=models.DO_NOTHING, related_name="+")
    event_name = models.CharField(max_length=255)
    is_published = models.BooleanField()
    ticket = models.ForeignKey(Ticket, on_delete=models.DO_NOTHING, related_name="+")
    ticket_name = models.CharField(max_length=255)
    product_ref = models.CharField(max_length=128)
    price = models.DecimalField(max_digits=12, decimal_places=2)
    currency = models.CharField(max_length=3)
    start_sale_datetime = models.DateTimeField(null=True)
    end_sale_datetime = models.DateTimeField(null=True)

    class Meta:
        verbose_name = "linked product"
        verbose_name_plural = "linked products"
        managed = False
        db_table = "event_linked_products"
        ordering = ("event_id", "ticket_id")

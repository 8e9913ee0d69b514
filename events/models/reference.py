"""Reference data: stages, tags and their categories, event types (the templates of events)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

# --- reference data -------------------------------------------------------------------------


class Stage(models.Model):
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True)
    sequence = models.IntegerField(default=1)
    fold = models.BooleanField(default=False)
    pipe_end = models.BooleanField(default=False, help_text="Events in this stage are over.")
    # Names are for people and may be edited: what closes an event is a flag. A cancelled
    # stage is an ending one (the check below), so every reader of `pipe_end` — the booking's
    # inputs included — already closes its events; the flag tells "cancelled" from "ended".
    is_cancelled = models.BooleanField(
        default=False,
        help_text="Events in this stage are cancelled: the desk admits nobody and registrations "
        "are closed. Only an ending stage (pipe_end) can be a cancelled stage.",
    )

    class Meta:
        verbose_name = "stage"
        verbose_name_plural = "stages"
        ordering = ("sequence", "id")
        constraints = [
            models.CheckConstraint(
                condition=Q(is_cancelled=False) | Q(pipe_end=True),
                name="stage_cancelled_is_pipe_end",
                violation_error_message="A cancelled stage must be an ending stage (pipe_end).",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class TagCategory(models.Model):
    name = models.CharField(max_length=128)
    sequence = models.IntegerField(default=10)

    class Meta:
        verbose_name = "tag category"
        ordering = ("sequence", "name")
        verbose_name_plural = "tag categories"

    def __str__(self) -> str:
        return self.name


class Tag(models.Model):
    name = models.CharField(max_length=128)
    category = models.ForeignKey(TagCategory, on_delete=models.PROTECT, related_name="tags")
    sequence = models.IntegerField(default=10)
    color = models.PositiveSmallIntegerField(default=0, help_text="0 = internal, hidden publicly.")

    class Meta:
        verbose_name = "tag"
        verbose_name_plural = "tags"
        ordering = ("category__sequence", "sequence", "name")
        constraints = [
            models.CheckConstraint(condition=Q(color__gte=0, color__lte=11), name="tag_color_0_11"),
        ]

    def __str__(self) -> str:
        return f"{self.category.name}: {self.name}" if self.category_id else self.name


CANCEL_DEADLINE_HELP = (
    "Attendees may cancel a free registration themselves (from their tickets page) until this "
    "many hours before the start; empty = until the start."
)
CANCEL_DEADLINE_MAX = 8760  # a year: the deadline stays a date (start − hours never overflows)


def cancel_deadline_bounded(prefix: str) -> models.CheckConstraint:
    return models.CheckConstraint(
        condition=Q(cancel_deadline_hours__isnull=True)
        | Q(cancel_deadline_hours__lte=CANCEL_DEADLINE_MAX),
        name=f"{prefix}_cancel_deadline_max",
        violation_error_message=f"At most {CANCEL_DEADLINE_MAX} hours (a year).",
    )


class EventType(models.Model):
    name = models.CharField(max_length=255)
    sequence = models.IntegerField(default=10)
    note = models.TextField(blank=True)
    ticket_instructions = models.TextField(blank=True)
    default_timezone = models.CharField(max_length=64, default="UTC")
    has_seats_limitation = models.BooleanField(default=False)
    seats_max = models.PositiveIntegerField(default=0, help_text="0 = unlimited.")
    cancel_deadline_hours = models.PositiveIntegerField(
        null=True, blank=True, help_text=CANCEL_DEADLINE_HELP
    )
    tags = models.ManyToManyField(Tag, blank=True, related_name="event_types")

    class Meta:
        verbose_name = "event template"
        verbose_name_plural = "event templates"
        ordering = ("sequence", "name")
        constraints = [cancel_deadline_bounded("event_type")]

    def __str__(self) -> str:
        return self.name

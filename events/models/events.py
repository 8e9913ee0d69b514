"""An event and what it sells and asks: slots, tickets, questions and their choices."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from events.models.choices import KanbanState, QuestionType
from events.models.reference import (
    CANCEL_DEADLINE_HELP,
    EventType,
    Stage,
    Tag,
    cancel_deadline_bounded,
)

# What staff enter per language beside the columns (events.i18n, docs/spec.md "Languages").
TRANSLATIONS_HELP = (
    "Texts in other languages, entered in the admin: the columns hold the event's default "
    "language, which an attendee reads when their language has no text here."
)


def translations_field() -> models.JSONField:
    return models.JSONField(default=dict, blank=True, help_text=TRANSLATIONS_HELP)


# --- events -----------------------------------------------------------------------------------


class TicketPdf(models.TextChoices):
    """What the confirmation mail carries of the ticket."""

    ATTACH = "attach", "Attach the PDF ticket to the confirmation mail"
    LINK = "link", "Link only (the PDF is on the attendee's tickets page)"


class Event(models.Model):
    # Not columns: flags a raw read adds to the row it returns (for the type checker; absent
    # on other instances): the booking's inputs (`events.db.booking.read_inputs`) and the
    # intake's stage read.
    has_tickets: bool
    stage_pipe_end: bool
    stage_is_cancelled: bool  # the intake's read only (rules.in_cancelled_stage)

    name = models.CharField(max_length=255)
    event_type = models.ForeignKey(
        EventType, null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    stage = models.ForeignKey(Stage, on_delete=models.PROTECT, related_name="events")
    kanban_state = models.CharField(
        max_length=16, choices=KanbanState.choices, default=KanbanState.NORMAL
    )
    tags = models.ManyToManyField(Tag, blank=True, related_name="events")
    date_begin = models.DateTimeField()
    date_end = models.DateTimeField()
    date_tz = models.CharField(max_length=64, default="UTC")
    seats_limited = models.BooleanField(default=False)
    seats_max = models.PositiveIntegerField(
        default=0,
        help_text="Seats per event (per slot on a multi-slot event); 0 = unlimited, even when "
        "seats are limited.",
    )
    is_multi_slots = models.BooleanField(default=False)
    cancel_deadline_hours = models.PositiveIntegerField(
        null=True, blank=True, help_text=CANCEL_DEADLINE_HELP
    )
    is_published = models.BooleanField(default=False)
    active = models.BooleanField(default=True)
    organizer = models.CharField(max_length=255, blank=True)
    venue = models.CharField(max_length=255, blank=True)
    address = models.TextField(blank=True)
    country = models.CharField(max_length=2, blank=True, help_text="ISO 3166 code (phones).")
    description = models.TextField(blank=True)
    note = models.TextField(blank=True)
    ticket_instructions = models.TextField(blank=True)
    lang = models.CharField(
        max_length=16,
        choices=settings.LANGUAGES,
        default=settings.LANGUAGE_CODE,
        help_text="The event's default language: its texts are written in it, and an attendee "
        "whose language has no translation reads it.",
    )
    translations = translations_field()
    currency = models.CharField(max_length=3, default="EUR")
    ics_sequence = models.PositiveIntegerField(default=0)
    ticket_pdf = models.CharField(
        "PDF ticket",
        max_length=8,
        choices=TicketPdf.choices,
        default=TicketPdf.ATTACH,
        help_text="Every attendee can download the PDF ticket from their tickets page.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "event"
        verbose_name_plural = "events"
        ordering = ("date_begin", "id")
        constraints = [
            models.CheckConstraint(condition=Q(date_end__gt=F("date_begin")), name="event_dates"),
            cancel_deadline_bounded("event"),
            models.CheckConstraint(
                condition=Q(ticket_pdf__in=TicketPdf.values), name="event_ticket_pdf_known"
            ),
        ]
        indexes = [models.Index(fields=["is_published", "active", "date_end"])]

    def __str__(self) -> str:
        return self.name


class EventLogo(models.Model):
    """The organiser's logo printed on the event's PDF tickets and badges: a PNG the logo verb
    re-encoded (events.services.events.set_logo). A table of its own, so that loading an
    event never loads the image."""

    event = models.OneToOneField(
        Event, primary_key=True, on_delete=models.CASCADE, related_name="logo"
    )
    content = models.BinaryField()
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "event logo"
        verbose_name_plural = "event logos"

    def __str__(self) -> str:
        return f"logo of event {self.event_id} ({self.width}×{self.height})"


class Slot(models.Model):
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="slots")
    date = models.DateField()
    start_hour = models.FloatField(help_text="Hour in the event's timezone, 0 ≤ h < 24.")
    end_hour = models.FloatField()
    start_datetime = models.DateTimeField()
    end_datetime = models.DateTimeField()

    class Meta:
        verbose_name = "slot"
        verbose_name_plural = "slots"
        ordering = ("start_datetime", "id")
        constraints = [
            models.CheckConstraint(
                condition=Q(start_hour__gte=0, start_hour__lt=24, end_hour__gte=0, end_hour__lt=24)
                & Q(end_hour__gt=F("start_hour")),
                name="slot_hours",
            ),
            models.CheckConstraint(
                condition=Q(end_datetime__gt=F("start_datetime")), name="slot_datetimes"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.date:%Y-%m-%d} {_hour(self.start_hour)}–{_hour(self.end_hour)}"


def _hour(value: float) -> str:
    minutes = round(value * 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


class Ticket(models.Model):
    event = models.ForeignKey(
        Event, null=True, blank=True, on_delete=models.CASCADE, related_name="tickets"
    )
    event_type = models.ForeignKey(
        EventType, null=True, blank=True, on_delete=models.CASCADE, related_name="tickets"
    )
    name = models.CharField(max_length=255)
    description = models.TextField(blank=True)
    sequence = models.IntegerField(default=10)
    seats_max = models.PositiveIntegerField(default=0, help_text="0 = unlimited.")
    start_sale_datetime = models.DateTimeField(null=True, blank=True)
    end_sale_datetime = models.DateTimeField(null=True, blank=True)
    price = models.DecimalField(max_digits=12, decimal_places=2, default=0)
    product_ref = models.CharField(max_length=128, blank=True)
    limit_max_per_order = models.PositiveSmallIntegerField(default=0, help_text="0 = no own limit.")
    translations = translations_field()

    class Meta:
        verbose_name = "ticket"
        verbose_name_plural = "tickets"
        ordering = ("sequence", "id")
        constraints = [
            models.CheckConstraint(
                condition=(Q(event__isnull=False) & Q(event_type__isnull=True))
                | (Q(event__isnull=True) & Q(event_type__isnull=False)),
                name="ticket_owner_exactly_one",
            ),
            models.CheckConstraint(
                condition=Q(start_sale_datetime__isnull=True)
                | Q(end_sale_datetime__isnull=True)
                | Q(end_sale_datetime__gte=F("start_sale_datetime")),
                name="ticket_sale_dates",
            ),
            models.CheckConstraint(condition=Q(price__gte=0), name="ticket_price_positive"),
            models.CheckConstraint(
                condition=Q(limit_max_per_order__lte=30)
                & (Q(seats_max=0) | Q(limit_max_per_order__lte=F("seats_max"))),
                name="ticket_limit_per_order",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Question(models.Model):
    event = models.ForeignKey(
        Event, null=True, blank=True, on_delete=models.CASCADE, related_name="questions"
    )
    event_type = models.ForeignKey(
        EventType, null=True, blank=True, on_delete=models.CASCADE, related_name="questions"
    )
    title = models.CharField(max_length=255)
    question_type = models.CharField(
        max_length=16, choices=QuestionType.choices, default=QuestionType.SIMPLE_CHOICE
    )
    is_mandatory_answer = models.BooleanField(default=False)
    once_per_order = models.BooleanField(default=False)
    sequence = models.IntegerField(default=10)
    active = models.BooleanField(default=True)
    translations = translations_field()

    class Meta:
        verbose_name = "question"
        verbose_name_plural = "questions"
        ordering = ("sequence", "id")
        constraints = [
            models.CheckConstraint(
                condition=(Q(event__isnull=False) & Q(event_type__isnull=True))
                | (Q(event__isnull=True) & Q(event_type__isnull=False)),
                name="question_owner_exactly_one",
            ),
        ]

    def __str__(self) -> str:
        return self.title


class QuestionChoice(models.Model):
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="choices")
    name = models.CharField(max_length=255)
    sequence = models.IntegerField(default=10)
    translations = translations_field()

    class Meta:
        verbose_name = "answer choice"
        verbose_name_plural = "answer choices"
        ordering = ("sequence", "id")
        constraints = [
            # Target of the composite FK (answer.choice, answer.question) added by migration.
            models.UniqueConstraint(fields=["id", "question"], name="choice_id_question"),
        ]

    def __str__(self) -> str:
        return self.name

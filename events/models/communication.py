"""Communication: the schedulers of an event or type, their per-registration and per-slot rows,
the message templates, the mail outbox, and the intake's idempotency keys."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from events.models.choices import (
    IntervalType,
    IntervalUnit,
    KanbanState,
    MailOutcome,
    NotificationType,
)
from events.models.events import Event, Slot, translations_field
from events.models.reference import EventType
from events.models.registrations import Registration

# --- communication schedulers (spec.md §6) ---------------------------------------------------


class TypeMail(models.Model):
    event_type = models.ForeignKey(EventType, on_delete=models.CASCADE, related_name="mails")
    sequence = models.IntegerField(default=10)
    interval_nbr = models.IntegerField(default=1)
    interval_unit = models.CharField(
        max_length=8, choices=IntervalUnit.choices, default=IntervalUnit.HOURS
    )
    interval_type = models.CharField(
        max_length=20, choices=IntervalType.choices, default=IntervalType.BEFORE_EVENT
    )
    template_ref = models.CharField(max_length=128)
    notification_type = models.CharField(
        max_length=8, choices=NotificationType.choices, default=NotificationType.MAIL
    )

    class Meta:
        verbose_name_plural = "template schedulers"
        ordering = ("sequence", "id")
        verbose_name = "template scheduler"

    def __str__(self) -> str:
        return f"{self.template_ref} ({self.interval_type})"


class Mail(models.Model):
    """A communication scheduler of one event."""

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="mails")
    sequence = models.IntegerField(default=10)
    interval_nbr = models.IntegerField(default=1)
    interval_unit = models.CharField(
        max_length=8, choices=IntervalUnit.choices, default=IntervalUnit.HOURS
    )
    interval_type = models.CharField(
        max_length=20, choices=IntervalType.choices, default=IntervalType.BEFORE_EVENT
    )
    template_ref = models.CharField(max_length=128)
    notification_type = models.CharField(
        max_length=8, choices=NotificationType.choices, default=NotificationType.MAIL
    )
    scheduled_date = models.DateTimeField(null=True, blank=True)
    mail_done = models.BooleanField(default=False)
    mail_count_done = models.PositiveIntegerField(default=0)
    last_registration_id = models.BigIntegerField(default=0)
    error_datetime = models.DateTimeField(null=True, blank=True)
    error_message = models.TextField(blank=True)
    skipped_reason = models.TextField(blank=True)
    include_existing = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name_plural = "schedulers"
        ordering = ("sequence", "id")
        verbose_name = "scheduler"
        indexes = [models.Index(fields=["mail_done", "scheduled_date"])]

    def __str__(self) -> str:
        return f"{self.template_ref} ({self.interval_type})"

    @property
    def mail_state(self) -> str:
        if self.error_datetime:
            return "error"
        if self.event.kanban_state == KanbanState.CANCEL and not self.mail_done:
            return "cancelled"
        if self.skipped_reason:
            return "skipped"
        if self.interval_type == IntervalType.AFTER_SUB:
            return "running"
        if self.mail_done:
            return "sent"
        return "scheduled"


class MailRegistration(models.Model):
    scheduler = models.ForeignKey(Mail, on_delete=models.CASCADE, related_name="registration_rows")
    registration = models.ForeignKey(
        Registration, on_delete=models.CASCADE, related_name="mail_rows"
    )
    scheduled_date = models.DateTimeField(null=True, blank=True)
    mail_sent = models.BooleanField(default=False)
    sent_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=20, choices=MailOutcome.choices, blank=True)

    class Meta:
        verbose_name = "scheduler attendee row"
        verbose_name_plural = "scheduler attendee rows"
        constraints = [
            models.UniqueConstraint(
                fields=["scheduler", "registration"], name="mail_registration_unique"
            ),
        ]
        indexes = [models.Index(fields=["scheduler", "mail_sent", "scheduled_date"])]

    def __str__(self) -> str:
        return f"{self.scheduler_id}/{self.registration_id}"


class MailSlot(models.Model):
    scheduler = models.ForeignKey(Mail, on_delete=models.CASCADE, related_name="slot_rows")
    slot = models.ForeignKey(Slot, on_delete=models.CASCADE, related_name="mail_rows")
    scheduled_date = models.DateTimeField(null=True, blank=True)
    last_registration_id = models.BigIntegerField(default=0)
    mail_count_done = models.PositiveIntegerField(default=0)
    mail_done = models.BooleanField(default=False)

    class Meta:
        verbose_name = "scheduler slot row"
        verbose_name_plural = "scheduler slot rows"
        constraints = [
            models.UniqueConstraint(fields=["scheduler", "slot"], name="mail_slot_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.scheduler_id}/slot {self.slot_id}"


# --- built-in adapters: template store and mail outbox (spec.md §11) -------------------------


class MessageTemplate(models.Model):
    """The built-in template store: Django template language, autoescaped HTML for mail."""

    ref = models.SlugField(
        max_length=128, unique=True, help_text="The template_ref schedulers use."
    )
    name = models.CharField(max_length=255)
    channel = models.CharField(
        max_length=8, choices=NotificationType.choices, default=NotificationType.MAIL
    )
    subject = models.CharField(max_length=255, blank=True)
    body = models.TextField()
    # The subject and body in other languages; a registration in a language without them
    # gets the columns.
    translations = translations_field()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "message template"
        verbose_name_plural = "message templates"
        ordering = ("name",)

    def __str__(self) -> str:
        return f"{self.name} ({self.ref})"


class OutboxState(models.TextChoices):
    QUEUED = "queued", "Queued"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class MailOutbox(models.Model):
    """A rendered mail written in the pass transaction; a Celery task delivers it."""

    idempotency_key = models.CharField(max_length=128, unique=True)
    message_id = models.CharField(max_length=255, unique=True)
    scheduler = models.ForeignKey(
        Mail, null=True, blank=True, on_delete=models.SET_NULL, related_name="outbox_rows"
    )
    registration = models.ForeignKey(
        Registration, null=True, blank=True, on_delete=models.SET_NULL, related_name="outbox_rows"
    )
    recipient = models.CharField(max_length=254)
    subject = models.CharField(max_length=255)
    body_text = models.TextField()
    body_html = models.TextField(blank=True)
    state = models.CharField(max_length=8, choices=OutboxState.choices, default=OutboxState.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "mail outbox"
        ordering = ("id",)
        verbose_name = "outgoing mail"
        indexes = [models.Index(fields=["state", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"{self.recipient}: {self.subject}"


class IntakeIdempotency(models.Model):
    """The first answer to a public intake POST, replayed for the same Idempotency-Key."""

    key = models.CharField(max_length=255)
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="+")
    fingerprint = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    response = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "intake idempotency key"
        verbose_name_plural = "intake idempotency keys"
        constraints = [
            models.UniqueConstraint(fields=["event", "key"], name="intake_idempotency_key"),
        ]

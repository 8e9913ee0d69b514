"""Core schema (spec.md §2, §3, §6, §8).

Models hold data and the invariants PostgreSQL can enforce; every write goes through
`events.services`. Datetimes are aware UTC; host objects are opaque `*_ref` strings.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone


class KanbanState(models.TextChoices):
    NORMAL = "normal", "In progress"
    DONE = "done", "Ready for next stage"
    BLOCKED = "blocked", "Blocked"
    CANCEL = "cancel", "Cancelled"


class RegistrationState(models.TextChoices):
    DRAFT = "draft", "Unconfirmed"
    OPEN = "open", "Registered"
    DONE = "done", "Attended"
    CANCEL = "cancel", "Cancelled"


class ContactSource(models.TextChoices):
    ATTENDEE = "attendee", "Typed for the attendee"
    PARTNER = "partner", "From the partner"


class CancelSource(models.TextChoices):
    """Who cancelled a registration: the seam's mint count (spec-overlay.md §1.4) keeps staff
    cancellations as existing and replaces order cancellations."""

    STAFF = "staff", "Staff"
    ORDER = "order", "Order cancellation"


class SaleStatus(models.TextChoices):
    FREE = "free", "Free"
    SOLD = "sold", "Sold"
    TO_PAY = "to_pay", "Not sold"


class QuestionType(models.TextChoices):
    SIMPLE_CHOICE = "simple_choice", "Selection"
    TEXT_BOX = "text_box", "Text input"
    NAME = "name", "Name"
    EMAIL = "email", "Email"
    PHONE = "phone", "Phone"
    COMPANY_NAME = "company_name", "Company"


class IntervalUnit(models.TextChoices):
    NOW = "now", "Immediately"
    HOURS = "hours", "Hours"
    DAYS = "days", "Days"
    WEEKS = "weeks", "Weeks"
    MONTHS = "months", "Months"


class IntervalType(models.TextChoices):
    AFTER_SUB = "after_sub", "After each registration"
    BEFORE_EVENT = "before_event", "Before the event"
    AFTER_EVENT_START = "after_event_start", "After the event started"
    AFTER_EVENT = "after_event", "After the event"
    BEFORE_EVENT_END = "before_event_end", "Before the event ends"


class NotificationType(models.TextChoices):
    MAIL = "mail", "Mail"
    SMS = "sms", "SMS"


class MailOutcome(models.TextChoices):
    SENT = "sent", "Sent"
    SKIPPED_NO_PHONE = "skipped_no_phone", "Skipped: no phone"
    SKIPPED_NO_EMAIL = "skipped_no_email", "Skipped: no email"


class ActorType(models.TextChoices):
    USER = "user", "Staff user"
    SYSTEM = "system", "System"
    SEAM = "seam", "Host seam"
    PUBLIC = "public", "Public"
    DESK = "desk", "Desk"
    ATTENDEE = "attendee", "Attendee"


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


# --- events -----------------------------------------------------------------------------------


class Event(models.Model):
    # Not columns: flags a raw lock statement adds to the row it returns (for the type
    # checker; absent on other instances): the booking's inputs (`locks.booking_inputs`) and
    # the intake's locked stage read.
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
    lang = models.CharField(max_length=16, default="en")
    currency = models.CharField(max_length=3, default="EUR")
    ics_sequence = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "event"
        verbose_name_plural = "events"
        ordering = ("date_begin", "id")
        constraints = [
            models.CheckConstraint(condition=Q(date_end__gt=F("date_begin")), name="event_dates"),
            cancel_deadline_bounded("event"),
        ]
        indexes = [models.Index(fields=["is_published", "active", "date_end"])]

    def __str__(self) -> str:
        return self.name


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


class Registration(models.Model):
    # No index of its own: the (event, state, id) index leads with it.
    event = models.ForeignKey(
        Event, on_delete=models.PROTECT, related_name="registrations", db_index=False
    )
    ticket = models.ForeignKey(
        Ticket,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="registrations",
        db_index=False,  # Meta.indexes: rows without one stay out
    )
    slot = models.ForeignKey(
        Slot,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="registrations",
        db_index=False,  # Meta.indexes: rows without one stay out
    )
    state = models.CharField(
        max_length=8, choices=RegistrationState.choices, default=RegistrationState.DRAFT
    )
    active = models.BooleanField(default=True)
    barcode = models.CharField(max_length=20)  # unique: Meta.constraints
    partner_ref = models.CharField(max_length=128, blank=True)
    name = models.CharField(max_length=255, blank=True)
    email = models.CharField(max_length=254, blank=True)
    phone = models.CharField(max_length=32, blank=True)
    company_name = models.CharField(max_length=255, blank=True)
    contact_source = models.CharField(
        max_length=8, choices=ContactSource.choices, default=ContactSource.ATTENDEE
    )
    sale_order_ref = models.CharField(max_length=128, blank=True)
    sale_order_line_ref = models.CharField(max_length=128, blank=True)
    sale_status = models.CharField(
        max_length=8, choices=SaleStatus.choices, default=SaleStatus.FREE
    )
    is_paid = models.BooleanField(default=False)
    cancel_source = models.CharField(
        max_length=8, choices=CancelSource.choices, blank=True, default=""
    )
    utm_source = models.CharField(max_length=128, blank=True)
    utm_medium = models.CharField(max_length=128, blank=True)
    utm_campaign = models.CharField(max_length=128, blank=True)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    date_closed = models.DateTimeField(null=True, blank=True)
    token_version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "registration"
        verbose_name_plural = "registrations"
        ordering = ("id",)
        # Every booking writes each of these: only the indexes something reads. The barcode is
        # matched exactly (no LIKE index); a ticket, slot, partner or order ref is looked up
        # only by a value, and many registrations have none (partial indexes: the NULL and ''
        # rows stay out; `x = value` implies the condition, so the planner uses them). Not
        # served by an index any more: `ticket__isnull=True` (the admin's "empty" filter,
        # beside the event's own index), `startswith` on barcode or refs, a ref compared with
        # a generic prepared plan (`= $1`): nothing in the code reads them that way.
        indexes = [
            models.Index(fields=["event", "state", "id"]),
            models.Index(
                fields=["ticket"],
                name="registration_ticket",
                condition=models.Q(ticket__isnull=False),
            ),
            models.Index(
                fields=["slot"], name="registration_slot", condition=models.Q(slot__isnull=False)
            ),
            models.Index(
                fields=["partner_ref"],
                name="registration_partner_ref",
                condition=~models.Q(partner_ref=""),
            ),
            models.Index(
                fields=["sale_order_ref"],
                name="registration_sale_order_ref",
                condition=~models.Q(sale_order_ref=""),
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["barcode"], name="events_registration_barcode_key")
        ]
        permissions = [
            ("checkin_registration", "Can check attendees in at the desk"),
            ("export_registrations", "Can export attendees with their contact details"),
        ]

    def __str__(self) -> str:
        return self.name or f"Registration #{self.pk}"


class RegistrationAnswer(models.Model):
    registration = models.ForeignKey(Registration, on_delete=models.CASCADE, related_name="answers")
    question = models.ForeignKey(Question, on_delete=models.PROTECT, related_name="answers")
    choice = models.ForeignKey(
        QuestionChoice, null=True, blank=True, on_delete=models.PROTECT, related_name="answers"
    )
    text_value = models.TextField(null=True, blank=True)

    class Meta:
        verbose_name = "answer"
        verbose_name_plural = "answers"
        ordering = ("question__sequence", "id")
        constraints = [
            models.CheckConstraint(
                condition=(Q(choice__isnull=False) & Q(text_value__isnull=True))
                | (Q(choice__isnull=True) & Q(text_value__isnull=False)),
                name="answer_exactly_one",
            ),
        ]

    def __str__(self) -> str:
        return self.text_value if self.text_value is not None else str(self.choice)


# --- the seat ledger (spec.md §3, design-notes) ----------------------------------------------


class SeatLedger(models.Model):
    """Counters of seats held, per (event, slot, ticket); NULL slot/ticket = "all".

    Rows are created lazily and changed only inside the booking transaction, under the Event row
    lock, by `events.services.seats`. `manage.py seats_audit` recounts them.
    """

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="seat_ledger")
    slot = models.ForeignKey(Slot, null=True, blank=True, on_delete=models.CASCADE)
    ticket = models.ForeignKey(Ticket, null=True, blank=True, on_delete=models.CASCADE)
    reserved = models.IntegerField(default=0)
    used = models.IntegerField(default=0)
    # Seats held for waiting-list offers not yet accepted (events.services.waitlist): taken for
    # everyone else, turned into `reserved` when the offer is accepted.
    held = models.IntegerField(default=0)

    class Meta:
        verbose_name = "seat ledger row"
        verbose_name_plural = "seat ledger"
        constraints = [
            models.UniqueConstraint(
                fields=["event", "slot", "ticket"],
                name="seat_ledger_key",
                nulls_distinct=False,
            ),
            models.CheckConstraint(
                condition=Q(reserved__gte=0, used__gte=0, held__gte=0),
                name="seat_ledger_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"ledger e{self.event_id} s{self.slot_id} t{self.ticket_id}"


# --- the waiting list (docs/spec.md "Waiting list") ------------------------------------------


class WaitlistState(models.TextChoices):
    WAITING = "waiting", "Waiting"
    OFFERED = "offered", "Offered"  # a seat is held for the entry until expires_at
    ACCEPTED = "accepted", "Accepted"  # the offer became `registration`
    EXPIRED = "expired", "Expired"  # the offer ran out; its seat went to the next entry
    REMOVED = "removed", "Removed"  # taken off the list by staff


class WaitlistEntry(models.Model):
    """One person waiting for a seat of an event (of a ticket / slot when the event has them).

    Entries are offered in joining order (`id`). An `offered` entry holds one seat in the seat
    ledger (`SeatLedger.held`) until it is accepted or expires; `offer_version` is the version
    its offer link carries (a new offer or a removal revokes older links)."""

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="waitlist")
    ticket = models.ForeignKey(
        Ticket, null=True, blank=True, on_delete=models.PROTECT, related_name="waitlist"
    )
    slot = models.ForeignKey(
        Slot, null=True, blank=True, on_delete=models.PROTECT, related_name="waitlist"
    )
    name = models.CharField(max_length=255)
    email = models.CharField(max_length=254)
    state = models.CharField(
        max_length=16, choices=WaitlistState.choices, default=WaitlistState.WAITING
    )
    offered_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    offer_version = models.PositiveIntegerField(default=0)
    registration = models.ForeignKey(
        Registration, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "waiting list entry"
        verbose_name_plural = "waiting list"
        ordering = ("event", "id")
        indexes = [models.Index(fields=["event", "state", "id"])]
        constraints = [
            # One live entry per person and (event, ticket, slot).
            models.UniqueConstraint(
                fields=["event", "ticket", "slot", "email"],
                condition=Q(state__in=("waiting", "offered")),
                name="waitlist_one_live_entry",
                nulls_distinct=False,
            ),
            models.CheckConstraint(
                condition=~Q(state="offered")
                | Q(offered_at__isnull=False, expires_at__isnull=False),
                name="waitlist_offer_has_window",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} <{self.email}> ({self.state})"


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

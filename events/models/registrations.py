"""Registrations, their answers, the seat ledger they count in and the waiting list."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from events.models.choices import CancelSource, ContactSource, RegistrationState, SaleStatus
from events.models.events import Event, Question, QuestionChoice, Slot, Ticket


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
    # The language the registration was made in: every message to the attendee uses it.
    lang = models.CharField(
        max_length=8, choices=settings.LANGUAGES, default=settings.LANGUAGE_CODE
    )
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


# --- the waiting list (docs/spec.md "Waiting list") ----------------------------------------------


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
    # The language the entry was made in: its offer mail uses it, and so does the registration
    # an accepted offer becomes.
    lang = models.CharField(
        max_length=8, choices=settings.LANGUAGES, default=settings.LANGUAGE_CODE
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

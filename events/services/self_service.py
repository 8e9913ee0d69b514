"""Self-service cancellation: an attendee cancels a registration from their tickets link
(docs/spec.md "Self-service cancellation").

Invariants:
- one owner of the attendee's cancel policy, `refusal()` (pure, no query): the tickets page
  asks it which button to show, and `cancel_by_attendee` decides with it on the locked rows;
- lock first — the Event row, then the registration (the fixed order of `locks`) — then check
  the link and the policy on the locked rows, then write: `registrations.cancel` frees the seat
  and writes the audit row (actor type `attendee`), and the cancellation mail is put on the
  outbox, all in one transaction; any refusal writes nothing;
- one mail per cancellation: its outbox key counts the registration's cancellations (audit rows,
  read under the lock), and a repeated request finds the registration cancelled and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from events import i18n, inputs, ports, rules
from events.adapters import format_begin, html_to_text
from events.db import locks
from events.errors import (
    CancellationRefused,
    CapabilityRefused,
    Code,
    DomainError,
    InvalidTransition,
)
from events.models import (
    ActorType,
    EventAuditLog,
    NotificationType,
    Registration,
    RegistrationState,
    SaleStatus,
)
from events.services import capability, links, registrations
from events.services.audit import Actor
from events.services.contacts import is_valid_email

# The mail kind: a message template of this ref, when the template store has one, else the
# built-in MAIL_TEMPLATE / MAIL_SUBJECT files.
TEMPLATE_REF = "registration-cancelled"
MAIL_TEMPLATE = "events/mail/registration_cancelled.html"
MAIL_SUBJECT = "events/mail/registration_cancelled_subject.txt"
PURPOSES = ("tickets", "order")
CANCELLABLE = (RegistrationState.DRAFT, RegistrationState.OPEN)
SOLD_MESSAGE = gettext_lazy(
    "This ticket was bought through an order: to cancel it, please contact the organiser."
)


@dataclass(frozen=True)
class Cancelled:
    registration: Registration
    mail_key: str | None  # the outbox idempotency key; None: the registration has no usable email


# --- the policy --------------------------------------------------------------------------------


def start_of(registration: Registration) -> datetime:
    """When the attendee's registration starts: its slot's start on a multi-slot event."""
    event = registration.event
    slot = registration.slot if event.is_multi_slots else None
    return slot.start_datetime if slot is not None else event.date_begin


def deadline(registration: Registration) -> datetime:
    """The last moment (excluded) an attendee may cancel: the start, less the event's
    `cancel_deadline_hours` when set."""
    hours = registration.event.cancel_deadline_hours or 0
    return start_of(registration) - timedelta(hours=hours)


def refusal(registration: Registration, *, now: datetime) -> DomainError | None:
    """Why the attendee may not cancel `registration` themselves now, or None when they may.

    Reads the registration, its event and (multi-slot) its slot, loaded by the caller."""
    state = registration.state
    if state == RegistrationState.CANCEL:
        return CancellationRefused(
            _("This registration is already cancelled."), code=Code.ALREADY_CANCELLED
        )
    if state not in CANCELLABLE:
        return InvalidTransition(
            _("An attended registration cannot be cancelled."), state=state, to="cancel"
        )
    if rules.is_cancelled(registration.event):
        return CancellationRefused(
            _("The event is cancelled: there is nothing left to cancel."),
            code=Code.EVENT_CANCELLED,
        )
    if now >= start_of(registration):
        return CancellationRefused(
            _("The event has started: a registration can no longer be cancelled."),
            code=Code.EVENT_STARTED,
        )
    if registration.sale_status != SaleStatus.FREE:
        return CancellationRefused(
            str(SOLD_MESSAGE),
            code=Code.REGISTRATION_SOLD,
        )
    closes = deadline(registration)
    if now >= closes:
        hours = registration.event.cancel_deadline_hours or 0
        return CancellationRefused(
            ngettext(
                "Cancellations closed %(hours)s hour before the start: please contact the "
                "organiser.",
                "Cancellations closed %(hours)s hours before the start: please contact the "
                "organiser.",
                hours,
            )
            % {"hours": hours},
            code=Code.CANCEL_DEADLINE_PASSED,
            deadline=closes.isoformat(),
        )
    return None


# --- the verb ------------------------------------------------------------------------------------


def cancel_by_attendee(
    *, token: str, registration_id: int | str, now: datetime | None = None
) -> Cancelled:
    """Cancel one registration named by a `tickets` link (its own) or an `order` link (one of
    the order's registrations), for the attendee holding the link.

    Raises CapabilityRefused (the uniform 404) for a bad, revoked or foreign link,
    SecretMissing when the capability secret is not configured, and the policy's refusal
    (`refusal()`); each writes nothing."""
    now = now or timezone.now()
    claim = capability.read_any(purposes=PURPOSES, token=token)  # signature only, no query
    reg_id = inputs.as_id(registration_id)
    if reg_id is None:
        raise CapabilityRefused(_("Invalid link."), reason="unknown_registration")
    if claim.purpose == "tickets" and claim.subject != reg_id:
        raise CapabilityRefused(_("Invalid link."), reason="other_registration")
    with transaction.atomic():
        # The registration's event never changes: read it unlocked to know which Event row to
        # lock first.
        event_id = Registration.objects.filter(pk=reg_id).values_list("event_id", flat=True).first()
        if event_id is None:
            raise CapabilityRefused(_("Invalid link."), reason="unknown_registration")
        event, reg = locks.lock_event_and_registration(event_id, reg_id)
        reg.event = event
        _check_link(claim, reg)
        refused = refusal(reg, now=now)
        if refused is not None:
            raise refused
        actor = Actor(ActorType.ATTENDEE, id=str(reg.pk), label=f"{claim.purpose} link")
        cancelled = registrations.cancel(registration=reg, actor=actor)
        cancelled.event = event
        return Cancelled(registration=cancelled, mail_key=_queue_mail(cancelled))


def _check_link(claim: capability.Claim, registration: Registration) -> None:
    """The link still opens this registration (checked on the locked row: a concurrent
    `revoke_links` takes the same locks)."""
    if claim.purpose == "tickets":
        capability.current(claim=claim, registration=registration)
        return
    if registration.sale_order_ref != claim.subject:
        raise CapabilityRefused(_("Invalid link."), reason="other_order")
    if not registration.active:
        raise CapabilityRefused(_("Invalid link."), reason="archived_registration")
    capability.current_order(claim=claim)


# --- the cancellation mail -----------------------------------------------------------------------


def _queue_mail(registration: Registration) -> str | None:
    recipient = registration.email.strip()
    if not recipient or not is_valid_email(recipient):
        return None
    # This cancellation's number among the registration's cancellations (its own audit row
    # included): a later cancel after a staff reset gets a key of its own.
    number = EventAuditLog.objects.filter(
        registration_id=registration.pk, verb=registrations.AUDIT_VERBS["cancel"]
    ).count()
    key = f"self-cancel-r{registration.pk}-{number}"
    rendered = _render(registration)
    ports.mail_queue().enqueue(
        message=ports.OutgoingMail(
            idempotency_key=key,
            recipient=recipient,
            subject=rendered.subject,
            body_text=rendered.body_text,
            body_html=rendered.body_html,
            registration_id=registration.pk,
        )
    )
    return key


def _render(registration: Registration) -> ports.RenderedMessage:
    renderer = ports.template_renderer()
    if (
        renderer.exists(template_ref=TEMPLATE_REF)
        and renderer.channel(template_ref=TEMPLATE_REF) == NotificationType.MAIL
    ):
        return renderer.render(template_ref=TEMPLATE_REF, registration=registration)
    event = registration.event
    # In the registration's language, whatever language this process runs in.
    lang = i18n.choose(registration.lang, event=event)
    with translation.override(lang):
        context = {
            "name": registration.name,
            "event_name": i18n.localized(event, "name", lang),
            "event_begin": format_begin(start_of(registration), event.date_tz),
            "venue": i18n.localized(event, "venue", lang),
            "organizer": event.organizer,
            "tickets_url": links.tickets_url(registration),
        }
        subject = " ".join(render_to_string(MAIL_SUBJECT, context).split())
        markup = render_to_string(MAIL_TEMPLATE, context)
    return ports.RenderedMessage(
        channel=NotificationType.MAIL,
        subject=subject,
        body_text=html_to_text(markup),
        body_html=markup,
    )

"""Re-sending a registration's confirmation mail (staff: "resend confirmation").

Invariants:
- the confirmation is the event's first per-attendee (`after_sub`) mail scheduler; it is
  rendered again and handed to the mail queue port (the outbox), never sent from here;
- lock then decide then write: the registration row is locked, so two clicks at once give two
  distinct outbox rows in order, each with its own idempotency key (`s<mail>-r<reg>-resend<n>`,
  n counted from the audit log under that lock) and its own audit row
  `registration.confirmation_resent`, all in one transaction; the outbox delivery is nudged
  after commit by the queue adapter;
- only an active registration that holds a seat (registered or attended) with a usable email
  is mailed; anything else is a typed refusal that writes nothing.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from events import ports
from events.errors import Code, InvalidTransition, NotFound, ValidationFailed
from events.models import (
    EventAuditLog,
    IntervalType,
    Mail,
    NotificationType,
    Registration,
    RegistrationState,
)
from events.services import audit
from events.services.contacts import is_valid_email

VERB = "registration.confirmation_resent"


def resend_confirmation(*, registration: Registration, actor: Any) -> str:
    """Queue the confirmation mail again; returns the outbox idempotency key."""
    with transaction.atomic():
        reg = (
            Registration.objects.select_for_update(of=("self",))
            .select_related("event", "ticket", "slot")
            .get(pk=registration.pk)
        )
        if not reg.active or reg.state not in (RegistrationState.OPEN, RegistrationState.DONE):
            raise InvalidTransition(
                "Only a registered or attended registration gets its confirmation.",
                state=reg.state,
            )
        mail = (
            Mail.objects.filter(
                event_id=reg.event_id,
                interval_type=IntervalType.AFTER_SUB,
                notification_type=NotificationType.MAIL,
            )
            .order_by("sequence", "pk")
            .first()
        )
        if mail is None:
            raise NotFound("This event has no confirmation mail scheduler.", what="scheduler")
        recipient = reg.email.strip()
        if not recipient or not is_valid_email(recipient):
            raise ValidationFailed(
                "The registration has no usable email.", code=Code.INVALID_VALUE, field="email"
            )
        earlier = EventAuditLog.objects.filter(registration_id=reg.pk, verb=VERB).count()
        key = f"s{mail.pk}-r{reg.pk}-resend{earlier + 1}"
        rendered = ports.template_renderer().render(
            template_ref=mail.template_ref, registration=reg
        )
        ports.mail_queue().enqueue_many(
            messages=[
                ports.OutgoingMail(
                    idempotency_key=key,
                    recipient=recipient,
                    subject=rendered.subject,
                    body_text=rendered.body_text,
                    body_html=rendered.body_html,
                    scheduler_id=mail.pk,
                    registration_id=reg.pk,
                )
            ]
        )
        audit.record(
            actor=actor,
            verb=VERB,
            registration=reg,
            data={"scheduler": mail.pk, "idempotency_key": key},
        )
    return key

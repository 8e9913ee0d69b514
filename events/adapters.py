"""Built-in adapters of the core ports (spec.md §11): the database template store and the outbox
mail queue. Wired by `.env.example` so the product works alone.

- `DatabaseTemplateRenderer`: `MessageTemplate` rows in the Django template language; mail
  bodies are autoescaped HTML (with a derived plain-text part), sms bodies and subjects are
  plain text. Context (plain values, never model instances: a template cannot reach other rows
  through the ORM): registration, event, ticket, slot as dicts of the fields named below,
  event_begin (formatted in the event's time zone), tickets_url, ics_url (computed only when a
  template uses them).
- `OutboxMailQueue`: one `MailOutbox` row per mail, written in the caller's transaction (the
  pass batch), with a stable Message-ID; delivery is nudged after commit. A mail whose
  idempotency key is already in the outbox counts as queued (`ON CONFLICT DO NOTHING`): the
  same (scheduler, registration, date) is never queued twice.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Sequence
from urllib.parse import urlsplit

from django.conf import settings
from django.template import Context, Template
from django.utils import dateformat, timezone

from events import i18n, template_plans
from events.db import outbox_sql
from events.errors import TemplateMissing
from events.models import (
    Event,
    MailOutbox,
    MessageTemplate,
    NotificationType,
    Registration,
    Slot,
    Ticket,
)
from events.ports import EventMailQueue, EventTemplateRenderer, OutgoingMail, RenderedMessage
from events.services import links, nudge
from events.template_plans import html_to_text


def format_begin(moment, tz_name: str) -> str:
    """The moment in the event's time zone, in the active language's words."""
    local = moment.astimezone(zoneinfo.ZoneInfo(tz_name))
    return f"{dateformat.format(local, i18n.date_format())} ({tz_name})"


# The fields a message template may use, per object of its context (copied into plain dicts).
REGISTRATION_FIELDS = ("name", "email", "phone", "company_name", "barcode", "state")
EVENT_FIELDS = (
    "name",
    "organizer",
    "venue",
    "address",
    "description",
    "ticket_instructions",
    "date_begin",
    "date_end",
    "date_tz",
    "lang",
)
TICKET_FIELDS = ("name", "description", "price")
SLOT_FIELDS = ("date", "start_datetime", "end_datetime")


def _plain(obj, fields: tuple[str, ...]) -> dict[str, object] | None:
    return None if obj is None else {field: getattr(obj, field) for field in fields}


def _shared(event: Event, ticket: Ticket | None, slot: Slot | None) -> dict[str, object]:
    """The part of a template's context that is the same for every registration of a batch."""
    begin = slot.start_datetime if slot is not None else event.date_begin
    return {
        "event": _plain(event, EVENT_FIELDS),
        "ticket": _plain(ticket, TICKET_FIELDS),
        "slot": _plain(slot, SLOT_FIELDS),
        "event_begin": format_begin(begin, event.date_tz),
    }


class DatabaseTemplateRenderer(EventTemplateRenderer):
    """Templates from the `MessageTemplate` table; compiled once per instance (one pass).

    `render_many` (the pass's batch call) renders through compiled plans where the template
    allows (events.template_plans): the same text as `render`, without running the template
    language per message."""

    def __init__(self) -> None:
        self._compiled: dict[str, tuple[str, Template, Template]] = {}
        self._plans = template_plans.Plans(
            registration_fields=REGISTRATION_FIELDS,
            link_getters={"tickets_url": links.tickets_url, "ics_url": links.ics_url},
            html_to_text=html_to_text,
        )

    def _load(self, template_ref: str) -> tuple[str, Template, Template]:
        if template_ref not in self._compiled:
            row = (
                MessageTemplate.objects.filter(ref=template_ref)
                .only("channel", "subject", "body")
                .first()
            )
            if row is None:
                raise TemplateMissing(
                    f"Template {template_ref!r} does not exist.", template_ref=template_ref
                )
            self._compiled[template_ref] = (row.channel, Template(row.subject), Template(row.body))
        return self._compiled[template_ref]

    def exists(self, *, template_ref: str) -> bool:
        if template_ref in self._compiled:
            return True
        return MessageTemplate.objects.filter(ref=template_ref).exists()

    def channel(self, *, template_ref: str) -> str:
        return self._load(template_ref)[0]

    def render(
        self, *, template_ref: str, registration: Registration, slot: Slot | None = None
    ) -> RenderedMessage:
        channel, subject, body = self._load(template_ref)
        slot = slot if slot is not None else registration.slot
        # A plain context (spec.md §12): dicts of this registration's own fields, never
        # model instances, so a template cannot walk the ORM to other attendees' data
        # ({{ event.registrations.all }} renders nothing).
        values = {
            "registration": _plain(registration, REGISTRATION_FIELDS),
            **_shared(registration.event, registration.ticket, slot),
            # Callables: the template language calls them only when a template uses them.
            "tickets_url": lambda: links.tickets_url(registration),
            "ics_url": lambda: links.ics_url(registration),
        }
        subject_text = " ".join(subject.render(Context(values, autoescape=False)).split())
        if channel == NotificationType.SMS:
            text = body.render(Context(values, autoescape=False)).strip()
            return RenderedMessage(channel=channel, subject=subject_text, body_text=text)
        markup = body.render(Context(values, autoescape=True))
        return RenderedMessage(
            channel=channel,
            subject=subject_text,
            body_text=html_to_text(markup),
            body_html=markup,
        )

    def render_many(
        self,
        *,
        template_ref: str,
        registrations: Sequence[Registration],
        slot: Slot | None = None,
    ) -> list[RenderedMessage]:
        """`render` for each registration, in order, through the template's compiled plans."""
        channel, subject, body = self._load(template_ref)
        if self._plans.keys(template_ref, subject, body) is None:
            return [
                self.render(template_ref=template_ref, registration=reg, slot=slot)
                for reg in registrations
            ]
        # The shared context is built once per (event, ticket, slot) object of this call.
        plans: dict[tuple[int, int, int], template_plans.Plan | None] = {}
        rendered = []
        for reg in registrations:
            event, ticket = reg.event, reg.ticket
            own_slot = slot if slot is not None else reg.slot
            ident = (id(event), id(ticket), id(own_slot))
            if ident not in plans:
                plans[ident] = self._plans.plan(
                    template_ref=template_ref,
                    channel=channel,
                    subject=subject,
                    body=body,
                    shared=_shared(event, ticket, own_slot),
                )
            plan = plans[ident]
            message = plan.render(reg) if plan is not None else None
            if message is None:
                message = self.render(template_ref=template_ref, registration=reg, slot=slot)
            rendered.append(message)
        return rendered


def _message_host() -> str:
    return urlsplit(settings.EVENT_PUBLIC_URL).hostname or "backbone-events"


def message_id(idempotency_key: str, *, host: str | None = None) -> str:
    return f"<{idempotency_key}@{host or _message_host()}>"


class OutboxMailQueue(EventMailQueue):
    """Writes `MailOutbox` rows in the caller's transaction; a Celery task delivers them.

    The idempotency key names what a mail is for (scheduler, registration, scheduled date); a
    key already present means that mail was queued before (a reminder whose event moved away
    and back to the same date), so the insert skips it instead of failing the whole batch.
    """

    def enqueue(self, *, message: OutgoingMail) -> None:
        self.enqueue_many(messages=[message])

    def enqueue_many(self, *, messages: Sequence[OutgoingMail]) -> None:
        if not messages:
            return
        now, host = timezone.now(), _message_host()
        # One INSERT … SELECT FROM unnest per batch (events.db.outbox_sql), not bulk_create.
        outbox_sql.insert_batch(
            model=MailOutbox,
            columns=OUTBOX_COLUMNS,
            rows=[
                (
                    m.idempotency_key,
                    message_id(m.idempotency_key, host=host),
                    m.scheduler_id,
                    m.registration_id,
                    m.recipient,
                    m.subject[:255],
                    m.body_text,
                    m.body_html,
                )
                for m in messages
            ],
            constants={"next_attempt_at": now},
            now=now,
        )
        nudge.outbox_delivery()


OUTBOX_COLUMNS = (
    ("idempotency_key", "text"),
    ("message_id", "text"),
    ("scheduler_id", "bigint"),
    ("registration_id", "bigint"),
    ("recipient", "text"),
    ("subject", "text"),
    ("body_text", "text"),
    ("body_html", "text"),
)

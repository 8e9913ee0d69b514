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
from django.utils import dateformat, timezone, translation

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


def _plain(obj, fields: tuple[str, ...], lang: str) -> dict[str, object] | None:
    """The fields as a dict, the texts staff entered per language in `lang`."""
    return None if obj is None else {field: i18n.localized(obj, field, lang) for field in fields}


def _shared(event: Event, ticket: Ticket | None, slot: Slot | None, lang: str) -> dict[str, object]:
    """The part of a template's context that is the same for every registration of a batch
    (rendered under `translation.override(lang)`: the date in the language's words)."""
    begin = slot.start_datetime if slot is not None else event.date_begin
    return {
        "event": _plain(event, EVENT_FIELDS, lang),
        "ticket": _plain(ticket, TICKET_FIELDS, lang),
        "slot": _plain(slot, SLOT_FIELDS, lang),
        "event_begin": format_begin(begin, event.date_tz),
    }


def language_of(registration: Registration) -> str:
    """The language every message to the attendee is rendered in: the registration's."""
    return i18n.choose(registration.lang, event=registration.event)


class DatabaseTemplateRenderer(EventTemplateRenderer):
    """Templates from the `MessageTemplate` table; compiled once per instance (one pass) and
    language. Each message is rendered in its registration's language (`language_of`): the
    template's subject and body in that language when staff entered them, else its columns;
    the event's texts likewise; Django's own words (dates) under `translation.override`,
    whatever language the process runs in.

    `render_many` (the pass's batch call) renders through compiled plans where the template
    allows (events.template_plans): the same text as `render`, without running the template
    language per message."""

    def __init__(self) -> None:
        self._rows: dict[str, MessageTemplate] = {}
        self._compiled: dict[tuple[str, str], tuple[str, Template, Template]] = {}
        self._plans = template_plans.Plans(
            registration_fields=REGISTRATION_FIELDS,
            link_getters={"tickets_url": links.tickets_url, "ics_url": links.ics_url},
            html_to_text=html_to_text,
        )

    def _row(self, template_ref: str) -> MessageTemplate:
        if template_ref not in self._rows:
            row = (
                MessageTemplate.objects.filter(ref=template_ref)
                .only("channel", "subject", "body", "translations")
                .first()
            )
            if row is None:
                raise TemplateMissing(
                    f"Template {template_ref!r} does not exist.", template_ref=template_ref
                )
            self._rows[template_ref] = row
        return self._rows[template_ref]

    def _load(self, template_ref: str, lang: str) -> tuple[str, Template, Template]:
        key = (template_ref, lang)
        if key not in self._compiled:
            row = self._row(template_ref)
            subject = i18n.localized(row, "subject", lang)
            body = i18n.localized(row, "body", lang)
            self._compiled[key] = (row.channel, Template(subject), Template(body))
        return self._compiled[key]

    def exists(self, *, template_ref: str) -> bool:
        if template_ref in self._rows:
            return True
        return MessageTemplate.objects.filter(ref=template_ref).exists()

    def channel(self, *, template_ref: str) -> str:
        return self._row(template_ref).channel

    def render(
        self, *, template_ref: str, registration: Registration, slot: Slot | None = None
    ) -> RenderedMessage:
        lang = language_of(registration)
        with translation.override(lang):
            return self._render(template_ref, registration, slot, lang)

    def _render(
        self, template_ref: str, registration: Registration, slot: Slot | None, lang: str
    ) -> RenderedMessage:
        channel, subject, body = self._load(template_ref, lang)
        slot = slot if slot is not None else registration.slot
        # A plain context (spec.md §12): dicts of this registration's own fields, never
        # model instances, so a template cannot walk the ORM to other attendees' data
        # ({{ event.registrations.all }} renders nothing).
        values = {
            "registration": _plain(registration, REGISTRATION_FIELDS, lang),
            **_shared(registration.event, registration.ticket, slot, lang),
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
        """`render` for each registration, in order, through the template's compiled plans (one
        per language and shared context)."""
        # The shared context is built once per (language, event, ticket, slot) of this call.
        plans: dict[tuple[str, int, int, int], template_plans.Plan | None] = {}
        rendered = []
        for reg in registrations:
            event, ticket = reg.event, reg.ticket
            own_slot = slot if slot is not None else reg.slot
            lang = language_of(reg)
            ident = (lang, id(event), id(ticket), id(own_slot))
            if ident not in plans:
                channel, subject, body = self._load(template_ref, lang)
                with translation.override(lang):
                    plans[ident] = self._plans.plan(
                        # the template's text in this language: its own plans
                        template_ref=f"{template_ref}@{lang}",
                        channel=channel,
                        subject=subject,
                        body=body,
                        shared=_shared(event, ticket, own_slot, lang),
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

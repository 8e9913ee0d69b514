"""The four host ports (spec.md §11): small typed interfaces chosen by a dotted path in settings.

Each port ships a refusing default that raises `PortNotWired` (code `port_not_wired`, naming
the port): an unwired host is a typed failure that parks the work loudly, never a silent skip.
The built-in adapters live in `events.adapters` (template store, outbox mail queue) and in the
overlays (`sms`, `leads`). A dotted path that cannot be imported is an `ImproperlyConfigured`
naming the setting.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from events.errors import PortNotWired
from events.models import Registration, Slot

# --- messages crossing the ports -------------------------------------------------------------


@dataclass(frozen=True)
class RenderedMessage:
    """A template rendered for one registration. `body_html` is empty for sms."""

    channel: str
    subject: str
    body_text: str
    body_html: str = ""


@dataclass(frozen=True)
class OutgoingMail:
    """A rendered mail handed to the mail queue. `idempotency_key` is unique per message."""

    idempotency_key: str
    recipient: str
    subject: str
    body_text: str
    body_html: str
    scheduler_id: int | None = None
    registration_id: int | None = None


@dataclass(frozen=True)
class OutgoingSms:
    """A rendered SMS handed to the SMS queue; `recipient` is an E.164 number."""

    idempotency_key: str
    recipient: str
    body: str
    scheduler_id: int | None = None
    registration_id: int | None = None


# --- the interfaces ----------------------------------------------------------------------------


class EventTemplateRenderer(ABC):
    """Renders a `template_ref` for a registration, tells its channel, says whether it exists.

    `channel` and `render` raise `TemplateMissing` when the template does not exist. One
    instance serves one pass, so an implementation may cache compiled templates on itself.
    """

    port_name = "EventTemplateRenderer"

    @abstractmethod
    def exists(self, *, template_ref: str) -> bool: ...

    @abstractmethod
    def channel(self, *, template_ref: str) -> str: ...

    @abstractmethod
    def render(
        self, *, template_ref: str, registration: Registration, slot: Slot | None = None
    ) -> RenderedMessage: ...


class EventMailQueue(ABC):
    """Accepts rendered mails, inside the caller's transaction (a rollback must undo it).

    Both queue ports take the same shape: `enqueue(*, message)` and
    `enqueue_many(*, messages)`; an adapter overrides `enqueue` (and `enqueue_many` when it
    can write a batch at once)."""

    port_name = "EventMailQueue"

    @abstractmethod
    def enqueue(self, *, message: OutgoingMail) -> None: ...

    def enqueue_many(self, *, messages: Sequence[OutgoingMail]) -> None:
        for message in messages:
            self.enqueue(message=message)


class EventSmsQueue(ABC):
    """Accepts rendered SMS, inside the caller's transaction (a rollback must undo it); the
    same shape as `EventMailQueue`."""

    port_name = "EventSmsQueue"

    @abstractmethod
    def enqueue(self, *, message: OutgoingSms) -> None: ...

    def enqueue_many(self, *, messages: Sequence[OutgoingSms]) -> None:
        for message in messages:
            self.enqueue(message=message)


class EventLeadSink(ABC):
    """Creates a lead (`lead_ref=None`) or updates one; returns the lead's `lead_ref`.

    `values` carries the lead's fields (name, type, team, user, tags, contact, utm,
    description, `event_id`, `rule_id`, `group_key`, `registration_ids`, …) and
    `idempotency_key`, the lead's stable identity (`rule:<rule id>:event:<event id>:<group
    key>`): every call for the same lead carries the same key, whichever pass or walker makes
    it. A call may come again with `lead_ref=None` for a lead the sink already made — the pass
    crashed after the sink's write, or its lease expired and the next holder redoes the batch —
    so an adapter that upserts by the key (a unique external id in the CRM) never makes two."""

    port_name = "EventLeadSink"

    @abstractmethod
    def upsert_lead(self, *, lead_ref: str | None, values: Mapping[str, Any]) -> str: ...


# --- refusing defaults ------------------------------------------------------------------------


def _refuse(port: str, setting: str) -> PortNotWired:
    return PortNotWired(
        f"The {port} port is not wired: set {setting} to an adapter.", port=port, setting=setting
    )


class RefusingTemplateRenderer(EventTemplateRenderer):
    refusing = True

    def exists(self, *, template_ref: str) -> bool:
        raise _refuse(self.port_name, "EVENT_TEMPLATE_RENDERER")

    def channel(self, *, template_ref: str) -> str:
        raise _refuse(self.port_name, "EVENT_TEMPLATE_RENDERER")

    def render(self, *, template_ref, registration, slot=None) -> RenderedMessage:
        raise _refuse(self.port_name, "EVENT_TEMPLATE_RENDERER")


class RefusingMailQueue(EventMailQueue):
    refusing = True

    def enqueue(self, *, message: OutgoingMail) -> None:
        raise _refuse(self.port_name, "EVENT_MAIL_QUEUE")

    def enqueue_many(self, *, messages: Sequence[OutgoingMail]) -> None:
        raise _refuse(self.port_name, "EVENT_MAIL_QUEUE")


class RefusingSmsQueue(EventSmsQueue):
    refusing = True

    def enqueue(self, *, message: OutgoingSms) -> None:
        raise _refuse(self.port_name, "EVENT_SMS_QUEUE")

    def enqueue_many(self, *, messages: Sequence[OutgoingSms]) -> None:
        raise _refuse(self.port_name, "EVENT_SMS_QUEUE")


class RefusingLeadSink(EventLeadSink):
    refusing = True

    def upsert_lead(self, *, lead_ref: str | None, values: Mapping[str, Any]) -> str:
        raise _refuse(self.port_name, "EVENT_LEAD_SINK")


# --- resolution -------------------------------------------------------------------------------

# setting → (interface, refusing default)
PORTS: dict[str, tuple[type, type]] = {
    "EVENT_TEMPLATE_RENDERER": (EventTemplateRenderer, RefusingTemplateRenderer),
    "EVENT_MAIL_QUEUE": (EventMailQueue, RefusingMailQueue),
    "EVENT_SMS_QUEUE": (EventSmsQueue, RefusingSmsQueue),
    "EVENT_LEAD_SINK": (EventLeadSink, RefusingLeadSink),
}


def adapter_class(setting: str) -> type:
    """The adapter class named by `settings.<setting>`; a clear error naming the setting."""
    interface, _ = PORTS[setting]
    path = getattr(settings, setting)
    try:
        cls = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"{setting}={path!r} cannot be imported: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, interface)):
        raise ImproperlyConfigured(
            f"{setting}={path!r} is not an implementation of {interface.__name__}."
        )
    return cls


def _instance(setting: str) -> Any:
    return adapter_class(setting)()


def template_renderer() -> EventTemplateRenderer:
    return _instance("EVENT_TEMPLATE_RENDERER")


def mail_queue() -> EventMailQueue:
    return _instance("EVENT_MAIL_QUEUE")


def sms_queue() -> EventSmsQueue:
    return _instance("EVENT_SMS_QUEUE")


def lead_sink() -> EventLeadSink:
    return _instance("EVENT_LEAD_SINK")


@dataclass(frozen=True)
class Wiring:
    setting: str
    port: str
    path: str
    status: str  # wired | refusing | broken
    detail: str = ""


def wiring() -> list[Wiring]:
    """What each port is wired to (for `manage.py ports_check`)."""
    result = []
    for setting, (interface, _) in PORTS.items():
        path = getattr(settings, setting)
        try:
            cls = adapter_class(setting)
        except ImproperlyConfigured as exc:
            result.append(Wiring(setting, interface.__name__, path, "broken", str(exc)))
            continue
        status = "refusing" if getattr(cls, "refusing", False) else "wired"
        result.append(Wiring(setting, interface.__name__, path, status))
    return result

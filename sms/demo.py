"""The sms overlay's part of `manage.py seed_demo` (hook `events.hooks.seed_demo`): an sms
confirmation template and an after-registration SMS scheduler on the demo summit (existing
attendees included), so `make run` delivers SMS to the local gateway sink within a minute. The
core demo already gives the summit an sms reminder two hours before it starts. Once only."""

from __future__ import annotations

from typing import Any

from events.models import Mail, MessageTemplate
from events.services import scheduler
from events.services import templates as template_services
from events.services.audit import Actor

ACTOR = Actor("system", label="seed_demo")
TEMPLATE_REF = "registration-confirmation-sms"


def seed_demo(*, summit, stdout=None, **_: Any) -> None:
    if not MessageTemplate.objects.filter(ref=TEMPLATE_REF).exists():
        template_services.create_template(
            ref=TEMPLATE_REF,
            name="Registration confirmation by SMS",
            channel="sms",
            subject="",
            body="Hi {{ registration.name }}, you're in for {{ event.name }} ({{ event_begin }}). "
            "Tickets: {{ tickets_url }}",
            translations={
                "fr": {
                    "body": "Bonjour {{ registration.name }}, vous êtes inscrit à {{ event.name }} "
                    "({{ event_begin }}). Billets : {{ tickets_url }}"
                },
                "nl": {
                    "body": "Beste {{ registration.name }}, u bent ingeschreven voor "
                    "{{ event.name }} ({{ event_begin }}). Tickets: {{ tickets_url }}"
                },
                "de": {
                    "body": "Guten Tag {{ registration.name }}, Sie sind für {{ event.name }} "
                    "angemeldet ({{ event_begin }}). Tickets: {{ tickets_url }}"
                },
            },
            actor=ACTOR,
        )
    if Mail.objects.filter(event=summit, template_ref=TEMPLATE_REF).exists():
        return
    scheduler.add_scheduler(
        event=summit,
        interval_nbr=0,
        interval_unit="now",
        interval_type="after_sub",
        template_ref=TEMPLATE_REF,
        notification_type="sms",
        include_existing=True,
        actor=ACTOR,
        sequence=5,
    )
    if stdout is not None:
        stdout.write(
            f"sms: confirmation SMS scheduler on '{summit.name}' (delivered to "
            "EVENT_SMS_GATEWAY_URL: `make run` starts a local sink, var/log/sms-gateway.log)"
        )

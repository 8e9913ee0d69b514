"""Mail templates render from a plain context (staff write templates, so a template must not
reach data through the ORM): a template reaches this registration's own fields, never other
rows."""

from __future__ import annotations

import pytest

from events.adapters import DatabaseTemplateRenderer
from tests.events import factories


def render(body: str, registration, *, subject: str = "s"):
    ref = f"ctx-{registration.pk}-{abs(hash(body))}"
    factories.MessageTemplateFactory(ref=ref, subject=subject, body=body)
    return DatabaseTemplateRenderer().render(template_ref=ref, registration=registration)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "traversal",
    [
        "{{ registration.event.registrations.all }}",
        "{% for r in event.registrations.all %}{{ r.email }}{% endfor %}",
        "{{ event.registrations.all.0.email }}",
        "{{ ticket.registrations.all }}",
        "{{ registration.answers.all }}",
        "{{ event.event_type.events.all }}",
        "{{ registration.event.organizer }}",
    ],
)
def test_a_template_cannot_walk_the_orm_to_other_attendees(traversal):
    event = factories.EventFactory(organizer="Org")
    ticket = factories.TicketFactory(event=event)
    mine = factories.RegistrationFactory(event=event, ticket=ticket, email="mine@example.org")
    factories.RegistrationFactory(event=event, ticket=ticket, email="other@example.org")

    rendered = render(f"<p>[{traversal}]</p>", mine)

    assert rendered.body_html == "<p>[]</p>"
    assert "other@example.org" not in rendered.body_text


@pytest.mark.django_db
def test_the_plain_context_still_renders_the_fields_templates_use():
    event = factories.EventFactory(name="Summit", venue="Hall 1", ticket_instructions="Bring ID")
    ticket = factories.TicketFactory(event=event, name="Community")
    reg = factories.RegistrationFactory(event=event, ticket=ticket, name="Ada")
    rendered = render(
        "<p>{{ registration.name }} {{ event.name }} {{ event.venue }} {{ ticket.name }} "
        "{{ event.ticket_instructions }} {{ event.date_begin|date:'Y' }}</p>",
        reg,
        subject="You're registered: {{ event.name }}",
    )
    year = event.date_begin.year
    assert rendered.body_html == f"<p>Ada Summit Hall 1 Community Bring ID {year}</p>"
    assert rendered.subject == "You're registered: Summit"


@pytest.mark.django_db
def test_the_demo_templates_render(actor):
    from django.core.management import call_command

    from events.models import MessageTemplate

    call_command("seed_demo", verbosity=0)
    reg = factories.RegistrationFactory()
    refs = list(MessageTemplate.objects.values_list("ref", flat=True))
    assert refs
    renderer = DatabaseTemplateRenderer()
    for ref in refs:
        rendered = renderer.render(template_ref=ref, registration=reg)
        assert rendered.body_text and "None" not in rendered.body_text, ref
        assert rendered.subject or rendered.channel == "sms", ref

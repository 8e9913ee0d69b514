"""Event content per language (docs/spec.md "Languages"): staff enter the event's, a ticket's, a
question's and a choice's texts and a message template's subject and body per language in the
admin, through the service verbs; an attendee reads their language, and the event's default
language (the columns) where no text was entered."""

from __future__ import annotations

import pytest

from events.adapters import DatabaseTemplateRenderer
from events.errors import ValidationFailed
from events.models import Event, EventAuditLog, MessageTemplate, Ticket
from events.services import events as event_services
from tests.events import factories
from tests.events.admin.test_admin_config import change_form_data, url
from tests.helpers import snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def root_client(client):
    client.force_login(factories.UserFactory(username="root", is_superuser=True))
    return client


@pytest.fixture
def event():
    event = factories.EventFactory(name="Code night", description="An evening of code.")
    factories.TicketFactory(event=event, name="Entry")
    question = factories.QuestionFactory(event=event, title="Diet", question_type="simple_choice")
    factories.QuestionChoiceFactory(question=question, name="Vegetarian")
    return event


def test_staff_enter_the_events_texts_per_language_in_the_admin(root_client, event):
    page = root_client.get(url(event))
    data = change_form_data(page)
    data.update({"name__fr": "Nuit du code", "description__fr": "Une soirée de code."})
    ticket_row = next(k for k in data if k.endswith("-name__fr") and "ticket" in k)
    data[ticket_row] = "Entrée"
    before = EventAuditLog.objects.count()

    response = root_client.post(url(event), data)

    assert response.status_code == 302, response.context and response.context["adminform"].errors
    event.refresh_from_db()
    assert event.translations == {
        "fr": {"name": "Nuit du code", "description": "Une soirée de code."}
    }
    assert event.name == "Code night"  # the column keeps the default language
    assert Ticket.objects.get(event=event).translations == {"fr": {"name": "Entrée"}}
    verbs = list(
        EventAuditLog.objects.filter(pk__gt=before).order_by("pk").values_list("verb", flat=True)
    )
    assert verbs == ["event.updated", "ticket.updated"]


def test_an_emptied_text_is_removed_and_the_column_is_read_again(root_client, event):
    event_services.update_event(
        event=event, actor="system", translations={"fr": {"name": "Nuit du code"}}
    )
    data = change_form_data(root_client.get(url(event)))
    assert data["name__fr"] == "Nuit du code"
    data["name__fr"] = ""

    assert root_client.post(url(event), data).status_code == 302
    event.refresh_from_db()
    assert event.translations == {}


def test_the_attendee_reads_their_language_and_the_default_where_none_was_entered(client, event):
    event_services.update_event(
        event=event,
        actor="system",
        translations={"fr": {"name": "Nuit du code", "description": "Une soirée de code."}},
    )
    ticket = event.tickets.get()
    ticket.translations = {"fr": {"name": "Entrée"}}
    ticket.save(update_fields=["translations"])
    question = event.questions.get()
    question.translations = {"fr": {"title": "Régime"}}
    question.save(update_fields=["translations"])
    choice = question.choices.get()
    choice.translations = {"fr": {"name": "Végétarien"}}
    choice.save(update_fields=["translations"])

    french = client.get(f"/events/{event.pk}/?lang=fr").content.decode()
    dutch = client.get(f"/events/{event.pk}/?lang=nl").content.decode()

    assert '<html lang="fr">' in french
    for text in ("Nuit du code", "Une soirée de code.", "Entrée", "Régime", "Végétarien"):
        assert text in french
    assert "S&#x27;inscrire" in french or "S'inscrire" in french
    assert '<html lang="nl">' in dutch
    for text in ("Code night", "An evening of code.", "Entry", "Diet", "Vegetarian"):
        assert text in dutch  # no Dutch text entered: the event's default language
    assert "Inschrijven" in dutch
    assert "Nuit du code" not in dutch


def test_a_template_in_the_registrations_language_or_its_columns(event):
    template = factories.MessageTemplateFactory(
        ref="hello",
        subject="Hello {{ event.name }}",
        body="<p>See you</p>",
        translations={"de": {"subject": "Hallo {{ event.name }}", "body": "<p>Bis bald</p>"}},
    )
    event.translations = {"de": {"name": "Codenacht"}}
    event.save(update_fields=["translations"])
    german = factories.RegistrationFactory(event=event, lang="de")
    dutch = factories.RegistrationFactory(event=event, lang="nl")

    renderer = DatabaseTemplateRenderer()
    rendered = renderer.render_many(template_ref=template.ref, registrations=[german, dutch])

    assert [(m.subject, m.body_text) for m in rendered] == [
        ("Hallo Codenacht", "Bis bald"),
        ("Hello Code night", "See you"),
    ]


@pytest.mark.parametrize(
    "translations",
    [
        {"es": {"name": "Noche"}},
        {"fr": {"note": "interne"}},
        {"fr": {"name": 3}},
        ["fr"],
    ],
)
def test_the_verbs_refuse_texts_that_are_not_a_translations_document(event, translations):
    before = (snapshot(event), Event.objects.get(pk=event.pk).translations)
    with pytest.raises(ValidationFailed) as refused:
        event_services.update_event(event=event, actor="system", translations=translations)
    assert (refused.value.code, refused.value.details["field"]) == ("invalid_value", "translations")
    assert (snapshot(event), Event.objects.get(pk=event.pk).translations) == before


def test_a_template_translation_that_does_not_compile_is_refused(root_client):
    template = factories.MessageTemplateFactory(ref="t1", body="<p>x</p>")
    data = change_form_data(root_client.get(url(template)))
    data["body__fr"] = "{% if %}"

    response = root_client.post(url(template), data, follow=True)

    assert "translations.fr.body" in response.content.decode()
    assert MessageTemplate.objects.get(pk=template.pk).translations == {}

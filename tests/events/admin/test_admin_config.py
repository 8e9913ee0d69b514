"""Config models edited through the admin (as a superuser, with the test client): each edit —
of the model's own page or of an inline row — goes through its service verb and writes exactly
one audit row; a refusal is an error message with nothing written."""

from __future__ import annotations

import pytest
from django.forms import MultiWidget

from events.models import EventAuditLog, QuestionChoice, Tag, Ticket
from tests.events import factories
from tests.helpers import snapshot


@pytest.fixture
def root_client(client):
    client.force_login(factories.UserFactory(username="root", is_superuser=True))
    return client


def _form_values(form) -> dict:
    """What a browser would post for `form` as rendered (its initial values)."""
    data: dict = {}
    for name, field in form.fields.items():
        if field.disabled:
            continue
        key = form.add_prefix(name)
        value = form[name].value()
        if isinstance(field.widget, MultiWidget):
            for i, part in enumerate(field.widget.decompress(value)):
                data[f"{key}_{i}"] = "" if part is None else part
        elif isinstance(value, bool):
            if value:
                data[key] = "on"
        elif isinstance(value, list | tuple):
            data[key] = [str(v) for v in value]
        else:
            data[key] = "" if value is None else value
    return data


def change_form_data(response) -> dict:
    """The change page's form and inline formsets, as posted unchanged."""
    data = _form_values(response.context["adminform"].form)
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        management = formset.management_form
        for name in management.fields:
            data[management.add_prefix(name)] = management[name].value()
        for form in formset.initial_forms:
            data.update(_form_values(form))
        data[management.add_prefix("TOTAL_FORMS")] = len(formset.initial_forms)
    return data


def url(obj, action: str = "change") -> str:
    meta = obj._meta
    return f"/admin/{meta.app_label}/{meta.model_name}/{obj.pk}/{action}/"


def new_audit_verbs(since: int) -> list[str]:
    return list(
        EventAuditLog.objects.filter(pk__gt=since).order_by("pk").values_list("verb", flat=True)
    )


def last_audit_pk() -> int:
    return EventAuditLog.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


CASES = {
    "ticket": (lambda: factories.TicketFactory(), "name", "Renamed", "ticket.updated"),
    "type_ticket": (lambda: factories.TypeTicketFactory(), "price", "9.50", "ticket.updated"),
    "question": (lambda: factories.QuestionFactory(), "title", "Why?", "question.updated"),
    "choice": (lambda: factories.QuestionChoiceFactory(), "name", "Yes", "choice.updated"),
    "template": (
        lambda: factories.MessageTemplateFactory(),
        "subject",
        "New subject",
        "template.updated",
    ),
    "type_mail": (lambda: factories.TypeMailFactory(), "interval_nbr", "4", "type_mail.updated"),
    "event_type": (lambda: factories.EventTypeFactory(), "name", "Talk", "event_type.updated"),
    "tag": (lambda: factories.TagFactory(), "name", "Blue", "tag.updated"),
    "tag_category": (
        lambda: factories.TagCategoryFactory(),
        "name",
        "Colours",
        "tag_category.updated",
    ),
    "stage": (lambda: factories.StageFactory(), "name", "Planning", "stage.updated"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(CASES))
def test_an_admin_edit_of_a_config_model_writes_one_audit_row(case, root_client):
    make, field, value, verb = CASES[case]
    obj = make()
    page = root_client.get(url(obj))
    assert page.status_code == 200
    data = change_form_data(page)
    assert field in data, sorted(data)
    data[field] = value
    since = last_audit_pk()

    response = root_client.post(url(obj), data)

    assert response.status_code == 302, response.context and response.context["errors"]
    assert new_audit_verbs(since) == [verb]
    obj.refresh_from_db()
    assert str(getattr(obj, field)) == value


@pytest.mark.django_db
@pytest.mark.parametrize("case", ["tag", "stage", "ticket", "choice"])
def test_an_admin_delete_of_a_config_model_writes_one_audit_row(case, root_client):
    make, _, _, verb = CASES[case]
    obj = make()
    since = last_audit_pk()

    response = root_client.post(url(obj, "delete"), {"post": "yes"})

    assert response.status_code == 302
    assert new_audit_verbs(since) == [verb.replace("updated", "deleted")]
    assert not type(obj).objects.filter(pk=obj.pk).exists()


@pytest.mark.django_db
def test_an_inline_row_edit_goes_through_its_verb(root_client):
    """Event page: one ticket row changed, one added, one deleted — three verbs, three rows."""
    event = factories.EventFactory()
    kept = factories.TicketFactory(event=event, name="Kept", seats_max=5)
    dropped = factories.TicketFactory(event=event, name="Dropped")
    page = root_client.get(url(event))
    data = change_form_data(page)
    forms = {data[f"tickets-{i}-id"]: i for i in range(2)}
    data[f"tickets-{forms[kept.pk]}-seats_max"] = "7"
    data[f"tickets-{forms[dropped.pk]}-DELETE"] = "on"
    data["tickets-TOTAL_FORMS"] = 3
    data.update({"tickets-2-name": "New", "tickets-2-sequence": "10", "tickets-2-price": "0"})
    data.update({"tickets-2-seats_max": "0", "tickets-2-limit_max_per_order": "0"})
    since = last_audit_pk()

    response = root_client.post(url(event), data)

    assert response.status_code == 302, response.context and response.context["errors"]
    assert sorted(new_audit_verbs(since)) == ["ticket.created", "ticket.deleted", "ticket.updated"]
    assert sorted(Ticket.objects.filter(event=event).values_list("name", "seats_max")) == [
        ("Kept", 7),
        ("New", 0),
    ]


@pytest.mark.django_db
def test_tag_and_choice_inlines_go_through_their_verbs(root_client):
    tag = factories.TagFactory()
    data = change_form_data(root_client.get(url(tag.category)))
    data["tags-0-name"] = "Renamed"
    since = last_audit_pk()
    assert root_client.post(url(tag.category), data).status_code == 302
    assert new_audit_verbs(since) == ["tag.updated"]
    assert Tag.objects.get(pk=tag.pk).name == "Renamed"

    choice = factories.QuestionChoiceFactory()
    data = change_form_data(root_client.get(url(choice.question)))
    data["choices-0-DELETE"] = "on"
    since = last_audit_pk()
    assert root_client.post(url(choice.question), data).status_code == 302
    assert new_audit_verbs(since) == ["choice.deleted"]
    assert not QuestionChoice.objects.filter(pk=choice.pk).exists()


@pytest.mark.django_db
def test_lowering_a_ticket_below_its_seats_in_the_admin_is_an_error_message(root_client):
    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event, seats_max=5)
    factories.RegistrationFactory.create_batch(3, event=event, ticket=ticket)
    data = change_form_data(root_client.get(url(ticket)))
    data["seats_max"] = "2"
    before = snapshot(event)

    response = root_client.post(url(ticket), data, follow=True)

    messages = [str(m) for m in response.context["messages"]]
    assert any("invalid_value" in m and "seats_max" in m for m in messages), messages
    assert snapshot(event) == before
    assert Ticket.objects.get(pk=ticket.pk).seats_max == 5


@pytest.mark.django_db
def test_the_event_page_inline_refusal_keeps_the_whole_form_unwritten(root_client):
    """An inline row refused by its verb rolls back the event's own change too."""
    event = factories.EventFactory(name="Before")
    ticket = factories.TicketFactory(event=event, seats_max=5)
    factories.RegistrationFactory.create_batch(3, event=event, ticket=ticket)
    data = change_form_data(root_client.get(url(event)))
    data["name"] = "After"
    data["tickets-0-seats_max"] = "1"
    before = snapshot(event)

    response = root_client.post(url(event), data, follow=True)

    assert any("seats_max" in str(m) for m in response.context["messages"])
    assert snapshot(event) == before
    event.refresh_from_db()
    assert event.name == "Before"


@pytest.mark.django_db
def test_staff_revoke_an_attendees_links_from_the_admin(root_client):
    registration = factories.RegistrationFactory()
    since = last_audit_pk()

    response = root_client.post(
        "/admin/events/registration/",
        {"action": "revoke_links", "_selected_action": [registration.pk]},
        follow=True,
    )

    assert response.status_code == 200
    registration.refresh_from_db()
    assert registration.token_version == 2
    assert len(new_audit_verbs(since)) == 1


@pytest.mark.django_db
def test_a_ticket_with_registrations_is_not_deleted_from_the_admin(root_client):
    """The admin's own PROTECT check answers first (delete_ticket refuses it too, tested in
    test_config_services); either way nothing is written."""
    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event)
    factories.RegistrationFactory(event=event, ticket=ticket)
    before = snapshot(event)

    page = root_client.post(url(ticket, "delete"), {"post": "yes"}, follow=True)
    bulk = root_client.post(
        "/admin/events/ticket/",
        {"action": "delete_selected", "_selected_action": [ticket.pk], "post": "yes"},
        follow=True,
    )

    for response in (page, bulk):
        assert response.status_code == 200
        assert "Cannot delete" in response.content.decode()
    assert snapshot(event) == before
    assert Ticket.objects.filter(pk=ticket.pk).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "data", "verb"),
    [
        ("stage", {"name": "Review", "sequence": "5"}, "stage.created"),
        (
            "tagcategory",
            {
                "name": "Themes",
                "sequence": "1",
                **{
                    f"tags-{k}": v
                    for k, v in {
                        "TOTAL_FORMS": "1",
                        "INITIAL_FORMS": "0",
                        "0-name": "AI",
                        "0-sequence": "1",
                        "0-color": "2",
                    }.items()
                },
            },
            "tag_category.created",
        ),
        (
            "messagetemplate",
            {"ref": "thanks", "name": "Thanks", "channel": "mail", "subject": "Hi", "body": "Yo"},
            "template.created",
        ),
    ],
)
def test_an_admin_add_goes_through_the_create_verb(path, data, verb, root_client):
    since = last_audit_pk()

    response = root_client.post(f"/admin/events/{path}/add/", data)

    assert response.status_code == 302, response.context and response.context["errors"]
    verbs = new_audit_verbs(since)
    assert verbs[0] == verb
    if path == "tagcategory":  # the inline's new tag through create_tag, one row more
        assert verbs == [verb, "tag.created"]
        assert Tag.objects.get(name="AI").category.name == "Themes"
    else:
        assert verbs == [verb]

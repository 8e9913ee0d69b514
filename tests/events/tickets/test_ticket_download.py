"""GET /my-tickets/<token>/<registration_id>/ticket.pdf: the PDF ticket of a registration the
link shows, gated like the tickets page (the uniform 404 for everything else), a read that
writes nothing; its content in every script, its QR code decoding to the barcode, no link."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.cache import cache
from django.urls import reverse

from events.models import EventAuditLog, KanbanState, Registration, RegistrationState, TicketPdf
from events.services import capability, logos
from tests.events import factories
from tests.events.tickets import pdfs


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    cache.clear()


def pdf_path(token: str, registration_id: int) -> str:
    return reverse("my-tickets-pdf", kwargs={"token": token, "registration_id": registration_id})


def _event(**fields):
    values = {
        "name": "Rencontres du logiciel libre",
        "date_begin": datetime(2030, 3, 14, 8, 0, tzinfo=UTC),
        "date_end": datetime(2030, 3, 14, 16, 0, tzinfo=UTC),
        "date_tz": "Europe/Brussels",
        "venue": "Palais des Congrès",
        "address": "Place du Congrès 1, 1000 Bruxelles",
        "organizer": "Backbone Events asbl",
        "ticket_instructions": "Doors open at 8:30.",
    }
    values.update(fields)
    return factories.EventFactory(**values)


def _not_found_body(client) -> bytes:
    return client.get(reverse("my-tickets", kwargs={"token": "nonsense"})).content


@pytest.mark.django_db
@pytest.mark.parametrize("script", sorted(pdfs.NAMES))
def test_the_ticket_holds_event_place_time_name_ticket_and_a_qr_of_the_barcode(client, script):
    event = _event()
    ticket = factories.TicketFactory(event=event, name="Full pass")
    name = pdfs.NAMES[script]
    reg = factories.RegistrationFactory(
        event=event, ticket=ticket, name=name, email="a@example.org", company_name="ACME"
    )
    token = capability.mint(purpose="tickets", subject=reg)

    response = client.get(pdf_path(token, reg.pk))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Cache-Control"] == "private, no-store"
    assert response["Referrer-Policy"] == "no-referrer"
    assert response["Content-Disposition"] == (
        f'inline; filename="ticket-rencontres-du-logiciel-libre-{reg.pk}.pdf"'
    )
    content = response.content
    assert pdfs.pages(content) == 1
    page = pdfs.text(content)
    assert name in page
    for expected in (
        "Rencontres du logiciel libre",
        # 08:00 UTC is 09:00 in Brussels
        "Thursday 14 March 2030, 09:00 – 17:00 (Europe/Brussels)",
        "Palais des Congrès, Place du Congrès 1, 1000 Bruxelles",
        "Full pass",
        "ACME",
        reg.barcode,
        "Organised by Backbone Events asbl",
        "Doors open at 8:30.",
    ):
        assert expected in page
    assert pdfs.qr_codes(content) == [reg.barcode]


@pytest.mark.django_db
def test_the_ticket_is_drawn_in_the_registrations_language_with_the_event_s_texts_in_it(client):
    """A registration made in French gets its ticket in French, whatever the request's language:
    the words of the page and the texts staff entered in French (name, venue, instructions,
    ticket name); a text left untranslated falls back to the column."""
    event = _event(
        translations={
            "fr": {
                "name": "Rencontres libres",
                "venue": "Palais des Congrès (salle Europe)",
                "ticket_instructions": "Ouverture des portes à 8 h 30.",
            }
        }
    )
    ticket = factories.TicketFactory(
        event=event, name="Full pass", translations={"fr": {"name": "Pass complet"}}
    )
    reg = factories.RegistrationFactory(event=event, ticket=ticket, name="Zoé", lang="fr")
    token = capability.mint(purpose="tickets", subject=reg)

    page = pdfs.text(client.get(pdf_path(token, reg.pk), HTTP_ACCEPT_LANGUAGE="de").content)

    for expected in (
        "Rencontres libres",
        "Palais des Congrès (salle Europe)",
        "Ouverture des portes à 8 h 30.",
        "Pass complet",
        "Organisé par Backbone Events asbl",
        "Billet",
    ):
        assert expected in page, expected
    assert "Rencontres du logiciel libre" not in page and "Full pass" not in page
    english = factories.RegistrationFactory(event=event, ticket=ticket, name="Ann", lang="en")
    token = capability.mint(purpose="tickets", subject=english)
    page = pdfs.text(client.get(pdf_path(token, english.pk)).content)
    assert "Rencontres du logiciel libre" in page and "Full pass" in page


@pytest.mark.django_db
def test_the_ticket_holds_no_link_nor_token(client, actor):
    event = _event()
    reg = factories.RegistrationFactory(event=event, name="Ada Lovelace", sale_order_ref="SO-1")
    logos.set_logo(event=event, content=_png(), actor=actor)
    tokens = [
        capability.mint(purpose="tickets", subject=reg),
        capability.mint(purpose="ics", subject=reg),
        capability.mint(purpose="order", subject="SO-1"),
    ]

    content = client.get(pdf_path(tokens[0], reg.pk)).content

    assert b"/URI" not in content and b"/Link" not in content and b"http" not in content
    for token in tokens:
        assert token.encode() not in content
        assert token.split(":")[-1].encode() not in content  # not even the signature
    assert "Ada Lovelace" in pdfs.text(content)


@pytest.mark.django_db
def test_the_organisers_logo_is_on_the_ticket(client, actor):
    event = _event()
    reg = factories.RegistrationFactory(event=event, name="Ada Lovelace")
    token = capability.mint(purpose="tickets", subject=reg)
    without = client.get(pdf_path(token, reg.pk)).content
    logos.set_logo(event=event, content=_png(colour=(200, 20, 20)), actor=actor)

    with_logo = client.get(pdf_path(token, reg.pk)).content

    assert b"/Subtype /Image" not in without
    assert with_logo.count(b"/Subtype /Image") == 2  # the logo and its transparency mask
    # The logo is drawn where the page's top left corner is: red there, not before.
    pixel = pdfs.image(with_logo, scale=1).getpixel((60, 60))
    assert pixel[0] > 150 and pixel[1] < 100
    assert pdfs.image(without, scale=1).getpixel((60, 60))[:3] == (255, 255, 255)


@pytest.mark.django_db
def test_an_order_link_serves_each_of_its_registrations_tickets_and_no_other(client):
    event = _event()
    mine = [
        factories.RegistrationFactory(event=event, name=f"Guest {i}", sale_order_ref="SO-7")
        for i in range(2)
    ]
    other = factories.RegistrationFactory(event=event, name="Stranger", sale_order_ref="SO-8")
    token = capability.mint(purpose="order", subject="SO-7")

    for reg in mine:
        response = client.get(pdf_path(token, reg.pk))
        assert response.status_code == 200
        assert pdfs.qr_codes(response.content) == [reg.barcode]
    refused = client.get(pdf_path(token, other.pk))
    assert refused.status_code == 404
    assert refused.content == _not_found_body(client)


def _png(colour=(20, 60, 200)) -> bytes:
    from io import BytesIO

    from PIL import Image

    out = BytesIO()
    Image.new("RGB", (300, 120), colour).save(out, format="PNG")
    return out.getvalue()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "case",
    [
        "another_registration",
        "cancelled_registration",
        "cancelled_event",
        "draft",
        "archived",
        "revoked_link",
        "ics_token",
        "forged",
        "unknown_id",
    ],
)
def test_every_refusal_is_the_uniform_404_and_nothing_is_written(client, actor, case):
    event = _event()
    reg = factories.RegistrationFactory(event=event, name="Ada")
    other = factories.RegistrationFactory(event=event, name="Bob")
    token = capability.mint(purpose="tickets", subject=reg)
    wanted = reg.pk
    if case == "another_registration":
        wanted = other.pk
    elif case == "cancelled_registration":
        Registration.objects.filter(pk=reg.pk).update(state=RegistrationState.CANCEL)
    elif case == "cancelled_event":
        type(event).objects.filter(pk=event.pk).update(kanban_state=KanbanState.CANCEL)
    elif case == "draft":
        Registration.objects.filter(pk=reg.pk).update(state=RegistrationState.DRAFT)
    elif case == "archived":
        Registration.objects.filter(pk=reg.pk).update(state=RegistrationState.CANCEL, active=False)
    elif case == "revoked_link":
        capability.revoke_links(registration=reg, actor=actor)
    elif case == "ics_token":
        token = capability.mint(purpose="ics", subject=reg)
    elif case == "forged":
        token = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    elif case == "unknown_id":
        wanted = other.pk + 1000
    audit_rows = EventAuditLog.objects.count()
    rows = list(Registration.objects.order_by("pk").values())

    response = client.get(pdf_path(token, wanted))

    assert response.status_code == 404
    assert response.content == _not_found_body(client)
    assert response["Cache-Control"] == "private, no-store"
    assert EventAuditLog.objects.count() == audit_rows
    assert list(Registration.objects.order_by("pk").values()) == rows


@pytest.mark.django_db
def test_serving_a_ticket_writes_nothing(client, django_assert_max_num_queries):
    event = _event()
    reg = factories.RegistrationFactory(event=event, name="Ada")
    token = capability.mint(purpose="tickets", subject=reg)
    audit_rows = EventAuditLog.objects.count()
    before = Registration.objects.values().get(pk=reg.pk)

    with django_assert_max_num_queries(2):  # the registration (event, ticket, slot), the logo
        assert client.get(pdf_path(token, reg.pk)).status_code == 200

    assert EventAuditLog.objects.count() == audit_rows
    assert Registration.objects.values().get(pk=reg.pk) == before


@pytest.mark.django_db
def test_the_tickets_page_links_the_pdf_of_live_registrations_only(client):
    event = _event(ticket_pdf=TicketPdf.LINK)
    live = factories.RegistrationFactory(event=event, name="Live", sale_order_ref="SO-3")
    gone = factories.RegistrationFactory(
        event=event, name="Gone", sale_order_ref="SO-3", state=RegistrationState.CANCEL
    )
    token = capability.mint(purpose="order", subject="SO-3")

    html = client.get(reverse("my-tickets", kwargs={"token": token})).content.decode()

    assert f'href="{pdf_path(token, live.pk)}"' in html
    assert pdf_path(token, gone.pk) not in html
    assert "Download the ticket (PDF)" in html


@pytest.mark.django_db
def test_the_token_gates_come_first_a_missing_secret_then_the_rate_limit(client, settings):
    reg = factories.RegistrationFactory(event=_event(), name="Ada")
    token = capability.mint(purpose="tickets", subject=reg)

    settings.EVENT_CAPABILITY_SECRET = "too short"
    missing = client.get(pdf_path(token, reg.pk))
    settings.EVENT_CAPABILITY_SECRET = "s" * 40  # another secret: the token no longer opens
    settings.EVENT_RATE_LIMITS = {**settings.EVENT_RATE_LIMITS, "token": (2, 60)}
    answers = [client.get(pdf_path(token, reg.pk)).status_code for _ in range(3)]

    assert missing.status_code == 503
    assert missing["Cache-Control"] == "private, no-store"
    assert answers == [404, 404, 429]

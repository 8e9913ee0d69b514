"""Server-rendered attendee pages: /events/, /events/<id>/ (form and POST), /my-tickets/, and
query counts that do not grow with the number of registrations (spec.md §7.3, §7.4)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from events.models import QuestionType, Registration, RegistrationAnswer, Stage
from events.services import capability, events, registrations
from tests.events import factories


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    cache.clear()


def page(event) -> str:
    return reverse("event-detail", kwargs={"event_id": event.pk})


def tickets_page(token: str) -> str:
    return reverse("my-tickets", kwargs={"token": token})


# --- /events/ ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_event_list_shows_published_unfinished_events_with_public_tags_only(client):
    shown = factories.EventFactory(name="Shown event")
    shown.tags.add(factories.TagFactory(name="Workshop", color=5))
    shown.tags.add(factories.TagFactory(name="Secret internal tag", color=0))
    factories.EventFactory(name="Draft event", is_published=False)
    factories.EventFactory(name="Archived event", active=False)
    past = timezone.now() - timedelta(days=3)
    factories.EventFactory(
        name="Finished event", date_begin=past, date_end=past + timedelta(hours=1)
    )
    response = client.get(reverse("event-list"))
    html = response.content.decode()
    assert response.status_code == 200
    assert re.findall(r"<h2><a [^>]*>([^<]+)</a></h2>", html) == ["Shown event"]
    assert "Workshop" in html
    assert "Secret internal tag" not in html
    assert f'href="{page(shown)}"' in html


# --- /events/<id>/ ----------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("visible", [{"is_published": False}, {"active": False}])
def test_unpublished_or_archived_event_page_is_404(client, visible):
    event = factories.EventFactory(**visible)
    assert client.get(page(event)).status_code == 404
    assert client.post(page(event), {"a0-name": "x"}).status_code == 404
    assert Registration.objects.count() == 0


@pytest.mark.django_db
def test_event_page_renders_the_form_with_tickets_slots_and_questions(client, actor):
    event = factories.EventFactory(
        is_multi_slots=True,
        seats_limited=True,
        seats_max=5,
        date_begin=datetime(2030, 6, 3, 6, 0, tzinfo=UTC),
        date_end=datetime(2030, 6, 4, 20, 0, tzinfo=UTC),
    )
    slot = events.add_slot(
        event=event, date=datetime(2030, 6, 3).date(), start_hour=9, end_hour=12, actor=actor
    )
    free = factories.TicketFactory(event=event, name="Free pass", seats_max=3)
    factories.TicketFactory(event=event, name="VIP", price="99.00")
    factories.TicketFactory(
        event=event, name="Late", start_sale_datetime=timezone.now() + timedelta(days=1)
    )
    factories.QuestionFactory(
        event=event,
        title="Dietary needs",
        question_type=QuestionType.TEXT_BOX,
        is_mandatory_answer=True,
    )
    shirt = factories.QuestionFactory(event=event, title="Shirt", question_type="simple_choice")
    factories.QuestionChoiceFactory(question=shirt, name="XL")
    factories.QuestionFactory(event=event, title="Your e-mail", question_type=QuestionType.EMAIL)
    factories.QuestionFactory(
        event=event,
        title="Invoice company",
        question_type=QuestionType.TEXT_BOX,
        once_per_order=True,
    )
    registrations.register(
        event=event, attendees=[{"name": "A"}], ticket=free, slot=slot, actor=actor
    )

    html = client.get(page(event) + "?quantity=2").content.decode()
    # Tickets with availability from the seat module, disabled when not sellable here.
    assert "Free · 2 seats left" in html
    assert "99.00 EUR · Sold through our shop" in html
    assert "Free · On sale soon" in html
    assert len(re.findall(r'name="ticket" value="\d+"[^>]*disabled', html)) == 2
    # Slots in the event's time zone with their availability.
    assert "Mon 3 Jun 2030, 09:00–12:00" in html and "4 seats left" in html
    # One block per attendee; questions by type; a contact question labels the contact field.
    assert html.count("<legend>Attendee ") == 2
    assert '<label for="f-a1-email">Your e-mail' in html
    assert 'id="f-a0-q' in html and 'name="a1-q' in html
    assert 'type="radio" name="a0-q' in html
    assert html.count("Invoice company") == 1  # once per order: asked once
    assert 'name="quantity" value="2"' in html


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("setup", "text"),
    [
        (lambda e: events.cancel_event(event=e, actor="system"), "this event is cancelled"),
        (
            lambda e: events.update_event(
                event=e, stage=Stage.objects.get(name="Ended"), actor="system"
            ),
            "this event is over",
        ),
        (lambda e: factories.RegistrationFactory(event=e), "This event is sold out."),
    ],
)
def test_a_closed_event_shows_why_and_no_form(client, setup, text):
    event = factories.EventFactory(seats_limited=True, seats_max=1)
    setup(event)
    html = client.get(page(event)).content.decode()
    assert text in html
    assert 'id="registration-form"' not in html


@pytest.mark.django_db
def test_posting_the_form_registers_and_redirects_to_my_tickets(client):
    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event)
    diet = factories.QuestionFactory(event=event, is_mandatory_answer=True)
    response = client.post(
        page(event),
        {
            "idempotency_key": "form-1",
            "quantity": "1",
            "ticket": str(ticket.pk),
            "a0-name": "Ann Page",
            "a0-email": "ann@example.org",
            f"a0-q{diet.pk}": "vegan",
            "utm_source": "poster",
        },
    )
    reg = Registration.objects.get()
    assert response.status_code == 303
    assert response["Location"].startswith("/my-tickets/")
    assert capability.verify(purpose="tickets", token=response["Location"].split("/")[2]) == reg.pk
    assert (reg.name, reg.email, reg.ticket_id, reg.utm_source) == (
        "Ann Page",
        "ann@example.org",
        ticket.pk,
        "poster",
    )
    assert RegistrationAnswer.objects.get(registration=reg).text_value == "vegan"
    assert client.get(response["Location"]).status_code == 200


@pytest.mark.django_db
def test_posting_several_attendees_lists_each_attendees_links(client):
    event = factories.EventFactory()
    company = factories.QuestionFactory(
        event=event, title="Company", once_per_order=True, is_mandatory_answer=True
    )
    data = {
        "idempotency_key": "form-2",
        "quantity": "2",
        "a0-name": "Ann",
        "a1-name": "Bob",
        f"order-q{company.pk}": "ACME",
    }
    response = client.post(page(event), data)
    assert response.status_code == 200
    assert response["Cache-Control"] == "private, no-store"
    assert response["Referrer-Policy"] == "no-referrer"
    html = response.content.decode()
    rows = list(Registration.objects.order_by("pk"))
    assert [r.name for r in rows] == ["Ann", "Bob"]
    assert [a.text_value for a in RegistrationAnswer.objects.order_by("pk")] == ["ACME", "ACME"]
    hrefs = re.findall(r'href="(/my-tickets/[^"]+)"', html)
    assert len(hrefs) == 2
    for href, row in zip(hrefs, rows, strict=True):
        assert capability.verify(purpose="tickets", token=href.split("/")[2]) == row.pk
    # Submitting the same form again (a refresh) replays: nobody is registered twice.
    again = client.post(page(event), data)
    assert re.findall(r'href="(/my-tickets/[^"]+)"', again.content.decode()) == hrefs
    assert Registration.objects.count() == 2


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("data", "field", "code_text"),
    [
        ({"a0-name": "Ann"}, "f-ticket", "Choose a ticket."),
        ({"a0-name": "", "ticket": "T"}, "f-a0-name", "Each attendee needs a name."),
        ({"a0-name": "Ann", "a0-email": "bad", "ticket": "T"}, "f-a0-email", "is not an email"),
        ({"a0-name": "Ann", "ticket": "T"}, "f-a0-qQ", "Please answer"),
    ],
)
def test_a_refusal_is_shown_next_to_its_field(client, data, field, code_text):
    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event)
    question = factories.QuestionFactory(event=event, title="Diet", is_mandatory_answer=True)
    data = {k: (str(ticket.pk) if v == "T" else v) for k, v in data.items()}
    field = field.replace("qQ", f"q{question.pk}")
    response = client.post(page(event), {"quantity": "1", "idempotency_key": "x", **data})
    html = response.content.decode()
    assert response.status_code == 400
    assert f'aria-describedby="{field}-error"' in html
    assert re.search(rf'<p class="error" id="{field}-error">[^<]*{re.escape(code_text)}', html)
    assert 'role="alert"' in html
    assert Registration.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize("quantity", [31, 1000, 0, -2])
def test_a_posted_quantity_outside_1_to_30_is_refused_by_the_service(client, quantity):
    """The form passes the posted number on: the intake service answers invalid_quantity
    (a quantity above 30 is not cut down to 30 registrations)."""
    event = factories.EventFactory()
    names = {f"a{index}-name": f"Guest {index}" for index in range(40)}
    data = {"quantity": str(quantity), "idempotency_key": "q", **names}

    response = client.post(page(event), data)

    html = response.content.decode()
    assert response.status_code == 400
    assert re.search(
        r'<p class="error" id="f-quantity-error">Register between 1 and 30 attendees', html
    )
    assert 'href="#quantity-select"' in html
    assert Registration.objects.count() == 0


# --- /my-tickets/ -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_my_tickets_shows_the_registration_with_qr_barcode_and_local_times(client, actor):
    event = factories.EventFactory(
        name="Summer Camp",
        is_multi_slots=True,
        date_begin=datetime(2030, 7, 1, 6, 0, tzinfo=UTC),
        date_end=datetime(2030, 7, 2, 18, 0, tzinfo=UTC),
        date_tz="America/New_York",
        ticket_instructions="Gate B.",
    )
    slot = events.add_slot(
        event=event, date=datetime(2030, 7, 1).date(), start_hour=9.5, end_hour=11, actor=actor
    )
    ticket = factories.TicketFactory(event=event, name="Camper")
    (reg,) = registrations.register(
        event=event, attendees=[{"name": "Cleo"}], ticket=ticket, slot=slot, actor=actor
    )
    response = client.get(tickets_page(capability.mint(purpose="tickets", subject=reg)))
    html = response.content.decode()
    assert response.status_code == 200
    assert response["Cache-Control"] == "private, no-store"
    assert response["Referrer-Policy"] == "no-referrer"
    assert "<svg" in html and 'class="qr"' in html
    assert (
        f'<figcaption class="barcode" aria-label="Ticket number">{reg.barcode}</figcaption>' in html
    )
    text = re.sub(r"<[^>]+>", "", html)
    assert "Monday 1 July 2030, 09:30 – 11:00 (America/New_York)" in text
    assert '<time datetime="2030-07-01T09:30:00-04:00">' in html
    assert "<dd>Camper</dd>" in html and "Mon 1 Jul, 09:30–11:00" in html
    assert "Registered" in html and "Gate B." in html
    assert re.search(r'href="/ics/[^"]+\.ics"', html)


@pytest.mark.django_db
@pytest.mark.parametrize("cancel", ["registration", "event"])
def test_a_cancelled_ticket_is_shown_cancelled_without_qr(client, actor, cancel):
    reg = factories.RegistrationFactory()
    token = capability.mint(purpose="tickets", subject=reg)
    if cancel == "registration":
        registrations.cancel(registration=reg, actor=actor)
    else:
        events.cancel_event(event=reg.event, actor=actor)
    html = client.get(tickets_page(token)).content.decode()
    assert "Cancelled" in html
    assert "<svg" not in html
    assert reg.barcode not in html


@pytest.mark.django_db
def test_an_order_link_shows_every_registration_of_the_order(client, actor):
    event = factories.EventFactory()
    mine = [factories.RegistrationFactory(event=event, sale_order_ref="SO77") for _ in range(3)]
    registrations.cancel(registration=mine[2], actor=actor)
    draft = factories.RegistrationFactory(event=event, sale_order_ref="SO77", state="draft")
    other = factories.RegistrationFactory(event=event, sale_order_ref="SO78")
    html = client.get(
        tickets_page(capability.mint(purpose="order", subject="SO77"))
    ).content.decode()
    assert html.count("<article") == 3
    assert mine[0].barcode in html and mine[1].barcode in html
    assert mine[2].barcode not in html and html.count("<svg") == 2
    assert draft.barcode not in html and other.barcode not in html


@pytest.mark.django_db
@pytest.mark.parametrize("state", ["draft"])
def test_a_draft_registration_has_no_tickets_page(client, state):
    reg = factories.RegistrationFactory(state=state)
    token = capability.mint(purpose="tickets", subject=reg)
    response = client.get(tickets_page(token))
    assert response.status_code == 404
    assert response.content == client.get(tickets_page("garbage")).content


# --- query counts do not grow with registrations ------------------------------------------------


def _count(client, path) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
    assert response.status_code == 200
    return len(queries)


def _event_with(n: int, actor):
    event = factories.EventFactory(seats_limited=True, seats_max=500)
    ticket = factories.TicketFactory(event=event)
    factories.QuestionFactory(event=event)
    event.tags.add(factories.TagFactory())
    regs = [
        factories.RegistrationFactory(event=event, ticket=ticket, sale_order_ref=f"SO-{n}")
        for _ in range(n)
    ]
    return event, regs


@pytest.mark.django_db
def test_query_counts_are_constant_in_the_number_of_registrations(client, actor):
    counts = {}
    for n in (1, 50):
        event, regs = _event_with(n, actor)
        counts[n] = {
            "event page": _count(client, page(event)),
            "event list": _count(client, reverse("event-list")),
            "my-tickets": _count(
                client, tickets_page(capability.mint(purpose="tickets", subject=regs[-1]))
            ),
            "my-tickets (order)": _count(
                client, tickets_page(capability.mint(purpose="order", subject=f"SO-{n}"))
            ),
            "ics": _count(
                client,
                reverse("ics", kwargs={"token": capability.mint(purpose="ics", subject=regs[-1])}),
            ),
        }
    assert counts[1] == counts[50]
    assert counts[1] == {
        "event page": 7,
        "event list": 2,
        "my-tickets": 1,
        "my-tickets (order)": 2,
        "ics": 1,  # one statement: registration + event + slot (selectors.calendar_registration)
    }

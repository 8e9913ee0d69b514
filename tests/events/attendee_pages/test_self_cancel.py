"""Self-service cancellation (docs/spec.md "Self-service cancellation"): an attendee
cancels from their tickets link, through a confirm step; each refusal writes nothing; a cancel
frees the seat at once and queues exactly one mail on the outbox, in the same transaction."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core import mail
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from events import ports, ratelimit
from events.errors import Code, DomainError, PortNotWired, ValidationFailed
from events.models import (
    ActorType,
    Event,
    EventAuditLog,
    MailOutbox,
    OutboxState,
    Registration,
)
from events.services import (
    capability,
    delivery,
    event_types,
    events,
    registrations,
    seats,
    self_service,
)
from tests.events import factories
from tests.helpers import run_concurrently, snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    cache.clear()


def tickets_page(token: str) -> str:
    return reverse("my-tickets", kwargs={"token": token})


def cancel_page(token: str) -> str:
    return reverse("my-tickets-cancel", kwargs={"token": token})


def book(actor, *, event=None, name="Ada Lovelace", email="ada@example.org", **extra):
    """One open registration booked through the seat engine (the ledger holds its seat)."""
    event = event or factories.EventFactory(seats_limited=True, seats_max=10)
    (reg,) = registrations.register(
        event=event, attendees=[{"name": name, "email": email}], actor=actor, **extra
    )
    return reg


def written(event) -> dict:
    """Everything a cancel could write: the event's registrations, answers, audit rows, seat
    ledger, scheduler rows (tests.helpers.snapshot), and the mail outbox."""
    return {
        **snapshot(event),
        "cancel_source": list(
            Registration.objects.filter(event=event).order_by("pk").values_list("cancel_source")
        ),
        "outbox": list(MailOutbox.objects.order_by("pk").values_list("pk", "idempotency_key")),
    }


def text_of(response) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", response.content.decode()).split())


# --- a cancel ------------------------------------------------------------------------------------


def test_the_confirm_step_then_the_post_cancels_frees_the_seat_and_queues_one_mail(client, actor):
    # given an open, free registration two seats into a limited event
    reg = book(actor)
    other = book(actor, event=reg.event, name="Grace Hopper", email="grace@example.org")
    event = reg.event
    token = capability.mint(purpose="tickets", subject=reg)
    taken = seats.event_summary(event=event).taken
    assert taken == 2

    # the tickets page offers the cancel, the confirm step shows what and a form
    page = client.get(tickets_page(token))
    assert f'href="{cancel_page(token)}?registration={reg.pk}"' in page.content.decode()
    confirm = client.get(f"{cancel_page(token)}?registration={reg.pk}")
    assert confirm.status_code == 200
    assert confirm["Cache-Control"] == "private, no-store"
    assert confirm["Referrer-Policy"] == "same-origin"
    html = confirm.content.decode()
    assert f'<form method="post" action="{cancel_page(token)}">' in html
    assert f'name="registration" value="{reg.pk}"' in html
    assert event.name in html and "Ada Lovelace" in html
    assert Registration.objects.get(pk=reg.pk).state == "open"  # a GET writes nothing

    # when the attendee confirms
    response = client.post(cancel_page(token), {"registration": reg.pk})

    # then the registration is cancelled, its seat free at once, one mail queued
    assert response.status_code == 303
    assert response["Location"] == f"{tickets_page(token)}?cancelled={reg.pk}"
    assert Registration.objects.get(pk=reg.pk).state == "cancel"
    assert Registration.objects.get(pk=other.pk).state == "open"
    assert seats.audit(event=event) == []
    assert seats.event_summary(event=event).taken == taken - 1
    (row,) = MailOutbox.objects.all()
    assert (row.recipient, row.registration_id, row.scheduler_id, row.state) == (
        "ada@example.org",
        reg.pk,
        None,
        OutboxState.QUEUED,
    )
    assert row.idempotency_key == f"self-cancel-r{reg.pk}-1"
    assert row.subject == f"Cancelled: {event.name}"
    assert "is cancelled, as you asked" in row.body_text
    assert "/my-tickets/" in row.body_text
    (entry,) = EventAuditLog.objects.filter(registration_id=reg.pk, verb="registration.cancelled")
    assert (entry.actor_type, entry.actor_id, entry.data) == (
        ActorType.ATTENDEE,
        str(reg.pk),
        {"state": ["open", "cancel"]},
    )

    # and the page shows it cancelled, without a cancel button
    after = client.get(response["Location"])
    assert after.status_code == 200
    body = after.content.decode()
    assert 'id="cancelled-notice"' in body and "Cancelled" in body
    assert "Cancel my registration" not in body and reg.barcode not in body


def test_a_repeated_post_is_refused_and_queues_no_second_mail(client, actor):
    reg = book(actor)
    token = capability.mint(purpose="tickets", subject=reg)
    assert client.post(cancel_page(token), {"registration": reg.pk}).status_code == 303
    before = written(reg.event)

    again = client.post(cancel_page(token), {"registration": reg.pk})

    assert again.status_code == 409
    assert "This registration is already cancelled." in text_of(again)
    assert written(reg.event) == before
    assert MailOutbox.objects.count() == 1


def test_the_outbox_delivery_sends_the_mail_after_commit(client, actor, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    reg = book(actor)
    token = capability.mint(purpose="tickets", subject=reg)
    client.post(cancel_page(token), {"registration": reg.pk})
    assert mail.outbox == []  # queued, not sent, by the request

    report = delivery.deliver_outbox()

    assert report.sent == 1
    (message,) = mail.outbox
    assert message.to == ["ada@example.org"]
    assert message.subject == f"Cancelled: {reg.event.name}"
    assert MailOutbox.objects.get().state == OutboxState.SENT


def test_the_mail_is_queued_in_the_cancels_transaction(client, actor, monkeypatch):
    """A mail queue that refuses rolls the cancel back: no cancel without its mail."""
    reg = book(actor)
    token = capability.mint(purpose="tickets", subject=reg)
    before = written(reg.event)

    class Refusing(ports.EventMailQueue):
        def enqueue(self, *, message):
            raise PortNotWired("not wired", port="EventMailQueue")

    monkeypatch.setattr(ports, "mail_queue", Refusing)
    response = client.post(cancel_page(token), {"registration": reg.pk})

    assert response.status_code == 503
    assert "could not be cancelled just now" in text_of(response)
    assert "EventMailQueue" not in response.content.decode()  # no internals on the page
    assert written(reg.event) == before


def test_the_template_stores_registration_cancelled_template_is_used_when_present(actor):
    factories.MessageTemplateFactory(
        ref=self_service.TEMPLATE_REF,
        subject="Sorry to see you go, {{ registration.name }}",
        body="<p>{{ event.name }}: cancelled.</p>",
    )
    reg = book(actor)
    token = capability.mint(purpose="tickets", subject=reg)

    result = self_service.cancel_by_attendee(token=token, registration_id=reg.pk)

    row = MailOutbox.objects.get(idempotency_key=result.mail_key)
    assert row.subject == "Sorry to see you go, Ada Lovelace"
    assert row.body_html == f"<p>{reg.event.name}: cancelled.</p>"


def test_a_registration_without_email_is_cancelled_without_a_mail(actor):
    reg = book(actor, email="")
    token = capability.mint(purpose="tickets", subject=reg)

    result = self_service.cancel_by_attendee(token=token, registration_id=reg.pk)

    assert result.mail_key is None
    assert result.registration.state == "cancel"
    assert MailOutbox.objects.count() == 0
    assert seats.audit(event=reg.event) == []


def test_a_later_cancellation_after_a_staff_reset_gets_its_own_mail(actor):
    reg = book(actor)
    token = capability.mint(purpose="tickets", subject=reg)
    first = self_service.cancel_by_attendee(token=token, registration_id=reg.pk)
    registrations.reset_to_draft(registration=reg, actor=actor)
    registrations.confirm(registration=reg, actor=actor)

    second = self_service.cancel_by_attendee(token=token, registration_id=reg.pk)

    assert (first.mail_key, second.mail_key) == (
        f"self-cancel-r{reg.pk}-1",
        f"self-cancel-r{reg.pk}-2",
    )
    assert MailOutbox.objects.count() == 2


# --- refusals: a clear message, nothing written -------------------------------------------------


def _sold(actor, now):
    return book(actor, sale_order_ref="SO-1", sale_status="sold")


def _started(actor, now):
    event = factories.EventFactory(
        seats_limited=True,
        seats_max=10,
        date_begin=now - timedelta(hours=1),
        date_end=now + timedelta(hours=5),
    )
    return book(actor, event=event)


def _past_deadline(actor, now):
    event = factories.EventFactory(
        seats_limited=True,
        seats_max=10,
        date_begin=now + timedelta(hours=24),
        date_end=now + timedelta(hours=30),
        cancel_deadline_hours=48,
    )
    return book(actor, event=event)


def _cancelled_event(actor, now):
    reg = book(actor)
    events.cancel_event(event=reg.event, actor=actor)
    return reg


def _already_cancelled(actor, now):
    reg = book(actor)
    registrations.cancel(registration=reg, actor=actor)
    return reg


def _attended(actor, now):
    reg = book(actor)
    registrations.mark_attended(registration=reg, actor=actor)
    return reg


REFUSALS = {
    "sold registration": (_sold, Code.REGISTRATION_SOLD, "please contact the organiser"),
    "started event": (_started, Code.EVENT_STARTED, "The event has started"),
    "past the deadline": (_past_deadline, Code.CANCEL_DEADLINE_PASSED, "48 hours before"),
    "cancelled event": (_cancelled_event, Code.EVENT_CANCELLED, "The event is cancelled"),
    "already cancelled": (_already_cancelled, Code.ALREADY_CANCELLED, "already cancelled"),
    "attended": (_attended, Code.INVALID_TRANSITION, "attended registration"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_each_refusal_answers_a_clear_message_and_writes_nothing(client, actor, case):
    make, code, message = REFUSALS[case]
    now = timezone.now()
    reg = make(actor, now)
    token = capability.mint(purpose="tickets", subject=reg)
    state = Registration.objects.get(pk=reg.pk).state
    before = written(reg.event)

    # the service refuses with its code
    with pytest.raises(DomainError) as refused:
        self_service.cancel_by_attendee(token=token, registration_id=reg.pk)
    assert refused.value.code == code

    # the page offers no cancel; the POST answers the message (409), nothing written
    page = client.get(tickets_page(token))
    assert page.status_code == 200
    assert "Cancel my registration" not in page.content.decode()
    response = client.post(cancel_page(token), {"registration": reg.pk})
    assert response.status_code == 409
    assert message in text_of(response)
    assert 'role="alert"' in response.content.decode()
    assert "<form" not in response.content.decode()
    assert written(reg.event) == before
    assert Registration.objects.get(pk=reg.pk).state == state


def test_a_sold_registrations_page_says_to_contact_the_organiser(client, actor):
    reg = book(actor, sale_order_ref="SO-1", sale_status="sold")
    Event.objects.filter(pk=reg.event_id).update(organizer="PyCon Belgium")

    html = text_of(client.get(tickets_page(capability.mint(purpose="tickets", subject=reg))))

    assert "bought through an order: to cancel it, please contact the organiser." in html
    assert "Organiser: PyCon Belgium." in html


def test_the_deadline_is_the_start_less_the_hours_and_closes_on_the_dot(actor):
    begin = timezone.now() + timedelta(days=5)
    event = factories.EventFactory(
        seats_limited=True,
        seats_max=10,
        date_begin=begin,
        date_end=begin + timedelta(hours=3),
        cancel_deadline_hours=24,
    )
    reg = book(actor, event=event)
    token = capability.mint(purpose="tickets", subject=reg)
    closes = begin - timedelta(hours=24)
    assert self_service.deadline(Registration.objects.get(pk=reg.pk)) == closes

    with pytest.raises(DomainError) as refused:
        self_service.cancel_by_attendee(token=token, registration_id=reg.pk, now=closes)
    assert refused.value.code == Code.CANCEL_DEADLINE_PASSED
    assert refused.value.details == {"deadline": closes.isoformat()}

    result = self_service.cancel_by_attendee(
        token=token, registration_id=reg.pk, now=closes - timedelta(seconds=1)
    )
    assert result.registration.state == "cancel"


def test_without_a_deadline_a_cancel_is_allowed_until_the_start(actor):
    begin = timezone.now() + timedelta(days=1)
    event = factories.EventFactory(
        seats_limited=True, seats_max=10, date_begin=begin, date_end=begin + timedelta(hours=3)
    )
    reg = book(actor, event=event)
    token = capability.mint(purpose="tickets", subject=reg)

    with pytest.raises(DomainError) as refused:
        self_service.cancel_by_attendee(token=token, registration_id=reg.pk, now=begin)
    assert refused.value.code == Code.EVENT_STARTED
    result = self_service.cancel_by_attendee(
        token=token, registration_id=reg.pk, now=begin - timedelta(minutes=1)
    )
    assert result.registration.state == "cancel"


def test_on_a_multi_slot_event_the_registrations_own_slot_is_its_start(actor):
    now = timezone.now()
    event = factories.EventFactory(
        is_multi_slots=True,
        seats_limited=True,
        seats_max=10,
        date_begin=now - timedelta(hours=2),
        date_end=now + timedelta(days=3),
    )
    begun = factories.SlotFactory(
        event=event, start_datetime=now - timedelta(hours=2), end_datetime=now + timedelta(hours=1)
    )
    later = factories.SlotFactory(
        event=event,
        date=(now + timedelta(days=2)).date(),
        start_datetime=now + timedelta(days=2),
        end_datetime=now + timedelta(days=2, hours=3),
    )
    early = book(actor, event=event, slot=begun)
    late = book(actor, event=event, slot=later, name="Grace", email="grace@example.org")

    with pytest.raises(DomainError) as refused:
        self_service.cancel_by_attendee(
            token=capability.mint(purpose="tickets", subject=early), registration_id=early.pk
        )
    assert refused.value.code == Code.EVENT_STARTED
    result = self_service.cancel_by_attendee(
        token=capability.mint(purpose="tickets", subject=late), registration_id=late.pk
    )
    assert result.registration.state == "cancel"
    assert seats.audit(event=event) == []


def test_a_draft_registration_is_cancellable_by_the_service(actor):
    """The policy allows draft or open; the tickets page never shows a draft (§7.2 gate), so
    only the service path reaches one."""
    (reg,) = registrations.register(
        event=factories.EventFactory(), attendees=[{"name": "Ada"}], state="draft", actor=actor
    )
    token = capability.mint(purpose="tickets", subject=reg)

    result = self_service.cancel_by_attendee(token=token, registration_id=reg.pk)

    assert result.registration.state == "cancel"
    assert seats.audit(event=reg.event) == []


def test_the_cancel_step_shows_no_draft_behind_a_tickets_link_like_the_tickets_page(client, actor):
    reg = book(actor)
    registrations.reset_to_draft(registration=reg, actor=actor)
    token = capability.mint(purpose="tickets", subject=reg)
    uniform = client.get(tickets_page("not-a-token")).content
    before = written(reg.event)

    assert client.get(tickets_page(token)).status_code == 404
    for response in (
        client.get(f"{cancel_page(token)}?registration={reg.pk}"),
        client.post(cancel_page(token), {"registration": reg.pk}),
    ):
        assert (response.status_code, response.content) == (404, uniform)
    assert written(reg.event) == before


# --- links: a wrong or revoked one is the uniform 404 ----------------------------------------


def _garbage(actor, reg, other):
    return "not-a-token", reg.pk


def _forged(actor, reg, other):
    token = capability.mint(purpose="tickets", subject=reg)
    return token[:-2] + ("AA" if not token.endswith("AA") else "BB"), reg.pk


def _revoked(actor, reg, other):
    token = capability.mint(purpose="tickets", subject=reg)
    capability.revoke_links(registration=reg, actor=actor)
    return token, reg.pk


def _ics_purpose(actor, reg, other):
    return capability.mint(purpose="ics", subject=reg), reg.pk


def _another_registrations_link(actor, reg, other):
    return capability.mint(purpose="tickets", subject=other), reg.pk


def _another_order(actor, reg, other):
    return capability.mint(purpose="order", subject="SO-OTHER"), reg.pk


def _archived(actor, reg, other):
    token = capability.mint(purpose="tickets", subject=reg)
    Registration.objects.filter(pk=reg.pk).update(active=False)
    return token, reg.pk


LINKS = {
    "garbage": _garbage,
    "forged": _forged,
    "revoked": _revoked,
    "ics purpose": _ics_purpose,
    "another registration's link": _another_registrations_link,
    "another order's link": _another_order,
    "archived registration": _archived,
}


@pytest.mark.parametrize("case", sorted(LINKS))
def test_a_wrong_or_revoked_link_answers_the_uniform_404_and_writes_nothing(client, actor, case):
    reg = book(actor)
    other = book(
        actor,
        event=reg.event,
        name="Grace",
        email="grace@example.org",
        sale_order_ref="SO-OTHER",
    )
    token, registration_id = LINKS[case](actor, reg, other)
    uniform = client.get(tickets_page("not-a-token"))
    before = written(reg.event)

    with pytest.raises(DomainError) as refused:
        self_service.cancel_by_attendee(token=token, registration_id=registration_id)
    assert refused.value.code == Code.CAPABILITY_REFUSED
    for response in (
        client.get(f"{cancel_page(token)}?registration={registration_id}"),
        client.post(cancel_page(token), {"registration": registration_id}),
    ):
        assert response.status_code == 404
        assert response.content == uniform.content
        assert response["Cache-Control"] == "private, no-store"
    assert written(reg.event) == before


def test_a_post_without_csrf_token_is_refused_and_writes_nothing(actor):
    reg = book(actor)
    token = capability.mint(purpose="tickets", subject=reg)
    browser = Client(enforce_csrf_checks=True)
    before = written(reg.event)

    refused = browser.post(cancel_page(token), {"registration": reg.pk})

    assert refused.status_code == 403
    assert refused["Cache-Control"] == "private, no-store"
    assert written(reg.event) == before
    # the same client, with the token the confirm step hands out, is let through
    confirm = browser.get(f"{cancel_page(token)}?registration={reg.pk}")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', confirm.content.decode())
    assert csrf is not None
    ok = browser.post(
        cancel_page(token), {"registration": reg.pk, "csrfmiddlewaretoken": csrf.group(1)}
    )
    assert ok.status_code == 303
    assert Registration.objects.get(pk=reg.pk).state == "cancel"


def test_the_post_is_rate_limited_like_the_other_token_routes(client, actor, settings, monkeypatch):
    settings.EVENT_RATE_LIMITS = {**settings.EVENT_RATE_LIMITS, "token": (2, 60)}
    # One fixed window of this test's own (a window rolling over mid-test resets the count).
    monkeypatch.setattr(ratelimit, "clock", lambda: 1_801_234_567.0)
    reg = book(actor)
    token = capability.mint(purpose="tickets", subject=reg)
    client.get(tickets_page(token))
    client.get(f"{cancel_page(token)}?registration={reg.pk}")
    before = written(reg.event)

    response = client.post(cancel_page(token), {"registration": reg.pk})

    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    assert written(reg.event) == before


@pytest.mark.parametrize("posted", [{}, {"registration": ["1", "2"]}])
def test_a_post_naming_no_or_several_registrations_is_refused(client, actor, posted):
    reg = book(actor)
    token = capability.mint(purpose="tickets", subject=reg)
    before = written(reg.event)

    response = client.post(cancel_page(token), posted)

    assert response.status_code == 400
    assert "Choose one registration to cancel." in text_of(response)
    assert written(reg.event) == before


# --- an order link: one button per registration ------------------------------------------------


def test_an_order_link_cancels_each_registration_separately(client, actor):
    event = factories.EventFactory(seats_limited=True, seats_max=10)
    first, second = registrations.register(
        event=event,
        attendees=[
            {"name": "Ada", "email": "ada@example.org"},
            {"name": "Grace", "email": "grace@example.org"},
        ],
        sale_order_ref="SO-9",
        sale_status="free",
        actor=actor,
    )
    token = capability.mint(purpose="order", subject="SO-9")

    page = client.get(tickets_page(token)).content.decode()
    assert page.count(">Cancel my registration</a>") == 2
    assert f"{cancel_page(token)}?registration={first.pk}" in page
    assert f"{cancel_page(token)}?registration={second.pk}" in page
    confirm = client.get(f"{cancel_page(token)}?registration={second.pk}").content.decode()
    assert confirm.count("<form") == 1 and f'value="{second.pk}"' in confirm

    response = client.post(cancel_page(token), {"registration": second.pk})

    assert response.status_code == 303
    states = dict(Registration.objects.values_list("pk", "state"))
    assert states == {first.pk: "open", second.pk: "cancel"}
    assert list(MailOutbox.objects.values_list("recipient", flat=True)) == ["grace@example.org"]
    assert seats.event_summary(event=event).taken == 1
    page = client.get(tickets_page(token)).content.decode()
    assert page.count(">Cancel my registration</a>") == 1

    client.post(cancel_page(token), {"registration": first.pk})
    assert set(Registration.objects.values_list("state", flat=True)) == {"cancel"}
    assert MailOutbox.objects.count() == 2
    assert seats.audit(event=event) == []


# --- concurrency: many confirms at once cancel once, queue one mail --------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_confirms_cancel_once_and_queue_one_mail(actor):
    reg = book(actor)
    other = book(actor, event=reg.event, name="Grace", email="grace@example.org")
    token = capability.mint(purpose="tickets", subject=reg)

    def confirm():
        try:
            return self_service.cancel_by_attendee(token=token, registration_id=reg.pk).mail_key
        except DomainError as error:
            return error.code

    results = run_concurrently([confirm] * 6)

    assert sorted(map(str, results)) == sorted(
        [f"self-cancel-r{reg.pk}-1"] + [Code.ALREADY_CANCELLED.value] * 5
    )
    assert MailOutbox.objects.count() == 1
    assert EventAuditLog.objects.filter(verb="registration.cancelled").count() == 1
    assert seats.event_summary(event=reg.event).taken == 1
    assert seats.audit(event=reg.event) == []
    assert Registration.objects.get(pk=other.pk).state == "open"


# --- the field: on the event, on its type, copied on create -------------------------------------


def test_the_deadline_is_copied_from_the_event_type_once(actor):
    conference = event_types.create_event_type(name="Conference", actor=actor)
    conference = event_types.update_event_type(
        event_type=conference, actor=actor, cancel_deadline_hours=48
    )
    begin = timezone.now() + timedelta(days=30)

    copied = events.create_event(
        name="Summit",
        date_begin=begin,
        date_end=begin + timedelta(hours=8),
        event_type=conference,
        actor=actor,
    )
    own = events.create_event(
        name="Meetup",
        date_begin=begin,
        date_end=begin + timedelta(hours=8),
        event_type=conference,
        actor=actor,
        cancel_deadline_hours=2,
    )
    event_types.update_event_type(event_type=conference, actor=actor, cancel_deadline_hours=1)

    assert Event.objects.get(pk=copied.pk).cancel_deadline_hours == 48
    assert Event.objects.get(pk=own.pk).cancel_deadline_hours == 2


@pytest.mark.parametrize("hours", [-1, 8761, "12", True])
def test_a_deadline_outside_0_to_a_year_of_hours_is_refused(actor, hours):
    event = factories.EventFactory()
    conference = factories.EventTypeFactory()

    with pytest.raises(ValidationFailed) as refused:
        events.update_event(event=event, actor=actor, cancel_deadline_hours=hours)
    assert (refused.value.code, refused.value.details["field"]) == (
        "invalid_value",
        "cancel_deadline_hours",
    )
    with pytest.raises(ValidationFailed):
        event_types.update_event_type(
            event_type=conference, actor=actor, cancel_deadline_hours=hours
        )
    assert Event.objects.get(pk=event.pk).cancel_deadline_hours is None


def test_the_admin_forms_edit_the_deadline(admin_client):
    event = factories.EventFactory()
    conference = factories.EventTypeFactory()
    for url in (
        reverse("admin:events_event_change", args=[event.pk]),
        reverse("admin:events_eventtype_change", args=[conference.pk]),
        reverse("admin:events_eventtype_add"),
    ):
        assert 'name="cancel_deadline_hours"' in admin_client.get(url).content.decode()


def test_the_demo_has_a_cancellable_registration_and_a_sold_one():
    from io import StringIO

    from django.core.management import call_command

    call_command("seed_demo", stdout=StringIO())
    now = timezone.now()
    summit = Event.objects.get(name="Open Source Summit")
    assert summit.cancel_deadline_hours == 48
    regs = Registration.objects.filter(event=summit).select_related("event", "slot")
    katherine = regs.get(name="Katherine Johnson")
    assert self_service.refusal(katherine, now=now) is None
    refused = self_service.refusal(regs.get(sale_order_ref="SO-2041"), now=now)
    assert refused is not None and refused.code == Code.REGISTRATION_SOLD

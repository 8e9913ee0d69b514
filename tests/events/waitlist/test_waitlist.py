"""The waiting list (docs/spec.md "Waiting list"): joining a sold-out event, offers that hold
their seat and queue their mail in one transaction, accepting on the held seat, expiry, the
staff verbs and the pages. Every refusal writes nothing. The races (freed seats, accepts) and
the killed worker are in tests/probes/test_waitlist_races.py."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from decimal import Decimal
from io import StringIO
from unittest import mock

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from config.celery import app as celery_app
from events import access_log, ports, ratelimit
from events.errors import Code, DomainError
from events.models import (
    ActorType,
    EventAuditLog,
    MailOutbox,
    Registration,
    SeatLedger,
    WaitlistEntry,
    WaitlistState,
)
from events.read import dashboard
from events.services import (
    capability,
    intake,
    nudge,
    registrations,
    seats,
    tickets,
    waitlist,
    waitlist_nudge,
)
from events.services import events as event_services
from tests.events import factories
from tests.events.config.test_config import knob_values, manage  # noqa: F401 — a fixture, by name
from tests.helpers import snapshot

pytestmark = pytest.mark.django_db

W = WaitlistState


LIFTED = {"intake": (10_000, 60), "token": (10_000, 60)}


@pytest.fixture(autouse=True)
def _fresh_rate_limits(settings):
    """Limits lifted (the rate-limit test sets its own): every test client is 127.0.0.1."""
    cache.clear()
    settings.EVENT_RATE_LIMITS = LIFTED


@pytest.fixture(autouse=True)
def _no_celery():
    """No nudge leaves a test (tests that count them patch `nudge.publish` themselves)."""
    with mock.patch.object(nudge, "publish"):
        yield


# --- helpers -----------------------------------------------------------------------------------


def sold_out(actor, seats_max: int = 2, **fields):
    """A published event whose `seats_max` seats are booked through the seat engine."""
    event = factories.EventFactory(seats_limited=True, seats_max=seats_max, **fields)
    regs = [
        registrations.register(
            event=event,
            attendees=[{"name": f"Holder {i}", "email": f"holder{i}@example.org"}],
            actor=actor,
        )[0]
        for i in range(seats_max)
    ]
    return event, regs


def join(event, n: int, **kwargs) -> waitlist.Joined:
    return waitlist.join(
        event=event, name=f"Person {n}", email=f"person{n}@example.org", actor="public", **kwargs
    )


def offer_nudges(publish) -> list:
    """The args of each offer-pass nudge published (other tasks' nudges left out)."""
    return [c.args[1] for c in publish.call_args_list if c.args[0] == waitlist_nudge.OFFER_TASK]


def held(event) -> int:
    row = SeatLedger.objects.filter(event=event, slot=None, ticket=None).first()
    return row.held if row else 0


def written(event) -> dict:
    """Everything a waitlist verb could write: tests.helpers.snapshot (registrations, answers,
    audit, ledger, scheduler rows) plus held seats, the waiting list and the outbox."""
    return {
        **snapshot(event),
        "held": sorted(
            SeatLedger.objects.filter(event=event).values_list("slot_id", "ticket_id", "held"),
            key=str,
        ),
        "waitlist": list(
            WaitlistEntry.objects.order_by("pk").values_list(
                "pk", "state", "offer_version", "offered_at", "expires_at", "registration_id"
            )
        ),
        "outbox": list(MailOutbox.objects.order_by("pk").values_list("pk", "idempotency_key")),
    }


def offer_token(entry: WaitlistEntry) -> str:
    entry.refresh_from_db()
    return capability.mint(purpose="offer", subject=entry)


def offer_page(token: str) -> str:
    return reverse("waitlist-offer", kwargs={"token": token})


def text_of(response) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", response.content.decode()).split())


def refused(call) -> DomainError:
    with pytest.raises(DomainError) as caught:
        call()
    return caught.value


def sold_out_intake(event) -> str:
    """What the public intake answers for one more attendee (its error code)."""
    with pytest.raises(DomainError) as caught:
        intake.submit(
            event_id=event.pk,
            payload={"attendees": [{"name": "Late Comer", "email": "late@example.org"}]},
            client="198.51.100.7",
        )
    return caught.value.code


# --- join --------------------------------------------------------------------------------------


def test_joining_a_sold_out_event_queues_people_in_order(actor):
    event, _ = sold_out(actor)

    first = join(event, 1)
    second = waitlist.join(
        event=event, name="  Grace Hopper ", email="Grace@Example.ORG", actor="public"
    )

    assert (first.created, first.position, second.created, second.position) == (True, 1, True, 2)
    entry = WaitlistEntry.objects.get(pk=second.entry.pk)
    assert (entry.name, entry.email, entry.state, entry.offer_version) == (
        "Grace Hopper",
        "grace@example.org",
        W.WAITING,
        0,
    )
    (row,) = EventAuditLog.objects.filter(verb="waitlist.joined", data__entry=entry.pk)
    assert (row.event_id, row.actor_type, row.data) == (
        event.pk,
        ActorType.PUBLIC,
        {"entry": entry.pk, "ticket": None, "slot": None},
    )
    assert held(event) == 0  # joining holds nothing


def test_joining_twice_answers_the_first_entry_and_writes_nothing(actor):
    event, _ = sold_out(actor)
    first = join(event, 1)
    before = written(event)

    again = waitlist.join(
        event=event, name="Someone Else", email="PERSON1@example.org", actor="public"
    )

    assert (again.created, again.entry.pk, again.position) == (False, first.entry.pk, 1)
    assert written(event) == before


def _open_event(actor, now):
    return factories.EventFactory(seats_limited=True, seats_max=5), {}


def _unpublished(actor, now):
    event, _ = sold_out(actor)
    event_services.unpublish(event=event, actor=actor)
    return event, {}


def _cancelled(actor, now):
    event, _ = sold_out(actor)
    event_services.cancel_event(event=event, actor=actor)
    return event, {}


def _ended(actor, now):
    event, _ = sold_out(actor)
    type(event).objects.filter(pk=event.pk).update(
        date_begin=now - timedelta(days=2), date_end=now - timedelta(days=1)
    )
    return event, {}


def _priced(actor, now):
    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event, seats_max=1, price=Decimal("10"))
    factories.RegistrationFactory(event=event, ticket=ticket)
    return event, {"ticket": ticket}


def _sale_ended(actor, now):
    event = factories.EventFactory()
    ticket = factories.TicketFactory(
        event=event, seats_max=1, end_sale_datetime=now - timedelta(hours=1)
    )
    factories.RegistrationFactory(event=event, ticket=ticket)
    return event, {"ticket": ticket}


def _no_ticket(actor, now):
    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event, seats_max=1)
    factories.RegistrationFactory(event=event, ticket=ticket)
    return event, {}


def _other_events_ticket(actor, now):
    event, _ = sold_out(actor)
    return event, {"ticket": factories.TicketFactory(seats_max=1)}


def _no_slot(actor, now):
    event = factories.EventFactory(is_multi_slots=True, seats_limited=True, seats_max=1)
    slot = factories.SlotFactory(event=event)
    factories.RegistrationFactory(event=event, slot=slot)
    return event, {}


def _no_email(actor, now):
    event, _ = sold_out(actor)
    return event, {"email": ""}


def _bad_email(actor, now):
    event, _ = sold_out(actor)
    return event, {"email": "not-an-address"}


def _no_name(actor, now):
    event, _ = sold_out(actor)
    return event, {"name": "  "}


def _long_name(actor, now):
    event, _ = sold_out(actor)
    return event, {"name": "x" * 256}


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (_open_event, Code.SEATS_AVAILABLE),
        (_unpublished, Code.NOT_FOUND),
        (_cancelled, Code.REGISTRATIONS_CLOSED),
        (_ended, Code.REGISTRATIONS_CLOSED),
        (_priced, Code.PRICED_TICKET),
        (_sale_ended, Code.SALE_ENDED),
        (_no_ticket, Code.TICKET_REQUIRED),
        (_other_events_ticket, Code.INVALID_TICKET),
        (_no_slot, Code.SLOT_REQUIRED),
        (_no_email, Code.INVALID_ATTENDEE),
        (_bad_email, Code.INVALID_ATTENDEE),
        (_no_name, Code.INVALID_ATTENDEE),
        (_long_name, Code.INVALID_ATTENDEE),
    ],
)
def test_each_refused_join_answers_its_code_and_writes_nothing(make, code, actor):
    now = timezone.now()
    event, extra = make(actor, now)
    person = {"name": "Ada Lovelace", "email": "ada@example.org"}
    person.update({k: extra.pop(k) for k in ("name", "email") if k in extra})
    before = written(event)

    error = refused(lambda: waitlist.join(event=event, actor="public", **person, **extra))

    assert error.code == code
    assert written(event) == before


def test_a_ticket_has_its_own_waiting_list(actor):
    event = factories.EventFactory()
    full = factories.TicketFactory(event=event, seats_max=1, name="Workshop")
    free = factories.TicketFactory(event=event, seats_max=5, name="Talks")
    registrations.register(
        event=event, ticket=full, attendees=[{"name": "Ada", "email": "a@example.org"}], actor=actor
    )

    joined = join(event, 1, ticket=full)
    error = refused(lambda: join(event, 2, ticket=free))

    assert (joined.entry.ticket_id, joined.position) == (full.pk, 1)
    assert error.code == Code.SEATS_AVAILABLE


def test_a_ticket_with_a_waiting_list_is_not_deleted(actor):
    """A ticket sold out by the event limit (the other ticket's seats) has a waiting list and no
    registration of its own: deleting it is refused like one with registrations."""
    event = factories.EventFactory(seats_limited=True, seats_max=1)
    sold = factories.TicketFactory(event=event)
    waited = factories.TicketFactory(event=event)
    registrations.register(event=event, ticket=sold, attendees=[{"name": "x"}], actor=actor)
    join(event, 1, ticket=waited)
    before = written(event)

    error = refused(lambda: tickets.delete_ticket(ticket=waited, actor=actor))

    assert (error.code, error.details["field"]) == (Code.INVALID_VALUE, "ticket")
    assert written(event) == before


# --- the nudge ---------------------------------------------------------------------------------


def test_a_cancellation_nudges_an_offer_pass_after_commit_when_someone_waits(
    actor, django_capture_on_commit_callbacks
):
    event, regs = sold_out(actor)
    quiet, quiet_regs = sold_out(actor)
    join(event, 1)

    with mock.patch.object(nudge, "publish") as publish:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            registrations.cancel(registration=regs[0], actor=actor)
        assert not publish.called  # nothing inside the transaction
        for callback in callbacks:
            callback()
        with django_capture_on_commit_callbacks(execute=True):
            registrations.cancel(registration=quiet_regs[0], actor=actor)  # nobody waits there

    assert offer_nudges(publish) == [(event.pk,)]
    assert WaitlistEntry.objects.get().state == W.WAITING  # a nudge only: the pass offers


@pytest.mark.parametrize(
    "change",
    [
        lambda event, actor: event_services.update_event(event=event, actor=actor, seats_max=3),
        lambda event, actor: tickets.update_ticket(
            ticket=event.tickets.get(), actor=actor, seats_max=3
        ),
        lambda event, actor: registrations.reset_to_draft(
            registration=event.registrations.first(), actor=actor
        ),
    ],
    ids=["event_limit_raised", "ticket_limit_raised", "reset_to_draft"],
)
def test_a_raised_limit_or_a_freed_seat_nudges_the_pass(
    change, actor, django_capture_on_commit_callbacks
):
    event = factories.EventFactory(seats_limited=True, seats_max=2)
    ticket = factories.TicketFactory(event=event, seats_max=2)
    for i in range(2):
        registrations.register(
            event=event, ticket=ticket, attendees=[{"name": f"H{i}"}], actor=actor
        )
    join(event, 1, ticket=ticket)

    with mock.patch.object(nudge, "publish") as publish:
        with django_capture_on_commit_callbacks(execute=True):
            change(event, actor)

    assert offer_nudges(publish) == [(event.pk,)]


def test_the_tasks_are_registered_by_name_and_beat_runs_the_pass_every_minute():
    schedule = {e["task"]: e["schedule"] for e in celery_app.conf.beat_schedule.values()}
    assert schedule[waitlist.PASS_TASK] == 60.0
    from events import tasks

    assert tasks.waitlist_offer_task.name == waitlist_nudge.OFFER_TASK
    assert tasks.waitlist_pass_task.name == waitlist.PASS_TASK
    assert {waitlist_nudge.OFFER_TASK, waitlist.PASS_TASK} <= set(celery_app.tasks)


# --- offers ------------------------------------------------------------------------------------


def test_a_freed_seat_is_offered_to_the_first_entry_held_and_mailed_in_one_go(actor, settings):
    settings.EVENT_WAITLIST_OFFER_HOURS = 6
    event, regs = sold_out(actor)
    first, second = join(event, 1).entry, join(event, 2).entry
    registrations.cancel(registration=regs[0], actor=actor)
    now = timezone.now()

    offered = waitlist.offer_freed_seats(event=event, now=now)

    assert [e.pk for e in offered] == [first.pk]
    first.refresh_from_db()
    assert (first.state, first.offered_at, first.expires_at, first.offer_version) == (
        W.OFFERED,
        now,
        now + timedelta(hours=6),
        1,
    )
    assert WaitlistEntry.objects.get(pk=second.pk).state == W.WAITING
    # the seat is held: taken for everyone else, and the ledger equals a recount
    assert held(event) == 1
    assert seats.audit(event=event) == []
    assert seats.event_summary(event=event).available == 0
    assert sold_out_intake(event) == Code.SOLD_OUT
    # one mail with the offer link, on the outbox
    (mail,) = MailOutbox.objects.all()
    assert (mail.idempotency_key, mail.recipient, mail.registration_id) == (
        f"waitlist-offer-w{first.pk}-v1",
        "person1@example.org",
        None,
    )
    assert mail.subject == f"A seat is free for you: {event.name}"
    assert "/waitlist/offer/" in mail.body_text and "6 hours" in mail.body_text
    token = re.search(r"/waitlist/offer/([^/\s\"]+)/", mail.body_text).group(1)
    assert capability.verify(purpose="offer", token=token) == first.pk
    (row,) = EventAuditLog.objects.filter(verb="waitlist.offered")
    assert row.data == {
        "entry": first.pk,
        "ticket": None,
        "slot": None,
        "offer_version": 1,
        "expires_at": (now + timedelta(hours=6)).isoformat(),
    }
    # a second pass finds no free seat: nothing more
    before = written(event)
    assert waitlist.offer_freed_seats(event=event) == []
    assert written(event) == before


def test_offers_follow_joining_order_across_tickets_that_share_the_event_limit(actor):
    event = factories.EventFactory(seats_limited=True, seats_max=2)
    a = factories.TicketFactory(event=event, name="A")
    b = factories.TicketFactory(event=event, name="B")
    regs = [
        registrations.register(event=event, ticket=t, attendees=[{"name": n}], actor=actor)[0]
        for t, n in ((a, "x"), (b, "y"))
    ]
    on_b = join(event, 1, ticket=b).entry
    on_a = join(event, 2, ticket=a).entry
    registrations.cancel(registration=regs[0], actor=actor)  # an A seat frees the event limit

    offered = waitlist.offer_freed_seats(event=event)

    assert [e.pk for e in offered] == [on_b.pk]  # the earlier entry, whatever its ticket
    assert WaitlistEntry.objects.get(pk=on_a.pk).state == W.WAITING
    assert seats.audit(event=event) == []


def test_a_ticket_limit_offers_only_that_tickets_entries(actor):
    event = factories.EventFactory()
    a = factories.TicketFactory(event=event, seats_max=1)
    b = factories.TicketFactory(event=event, seats_max=1)
    (reg_a,) = registrations.register(event=event, ticket=a, attendees=[{"name": "x"}], actor=actor)
    registrations.register(event=event, ticket=b, attendees=[{"name": "y"}], actor=actor)
    on_b = join(event, 1, ticket=b).entry
    on_a = join(event, 2, ticket=a).entry
    registrations.cancel(registration=reg_a, actor=actor)

    offered = waitlist.offer_freed_seats(event=event)

    assert [e.pk for e in offered] == [on_a.pk]
    assert WaitlistEntry.objects.get(pk=on_b.pk).state == W.WAITING


def test_a_slot_has_its_own_waiting_list_and_its_offer_registers_in_that_slot(actor):
    event = factories.EventFactory(is_multi_slots=True, seats_limited=True, seats_max=1)
    morning = factories.SlotFactory(event=event)
    afternoon = factories.SlotFactory(event=event, start_hour=13.0, end_hour=15.0)
    booked = {
        slot.pk: registrations.register(
            event=event, slot=slot, attendees=[{"name": f"In {slot.pk}"}], actor=actor
        )[0]
        for slot in (morning, afternoon)
    }
    on_morning = join(event, 1, slot=morning).entry
    on_afternoon = join(event, 2, slot=afternoon).entry
    registrations.cancel(registration=booked[afternoon.pk], actor=actor)

    (offered,) = waitlist.offer_freed_seats(event=event)
    accepted = waitlist.accept(token=offer_token(offered))

    assert offered.pk == on_afternoon.pk
    assert WaitlistEntry.objects.get(pk=on_morning.pk).state == W.WAITING
    assert (accepted.registration.slot_id, accepted.registration.state) == (afternoon.pk, "open")
    assert seats.audit(event=event) == []
    assert seats.availability(event=event, slot=afternoon) == 0


def test_a_raised_limit_offers_as_many_seats_as_it_adds(actor):
    event, _ = sold_out(actor)
    entries = [join(event, i).entry for i in range(4)]
    event_services.update_event(event=event, actor=actor, seats_max=5)

    offered = waitlist.offer_freed_seats(event=event)

    assert [e.pk for e in offered] == [e.pk for e in entries[:3]]
    assert held(event) == 3
    assert seats.audit(event=event) == []
    assert MailOutbox.objects.count() == 3


def test_no_offer_on_a_cancelled_event(actor):
    event, regs = sold_out(actor)
    join(event, 1)
    registrations.cancel(registration=regs[0], actor=actor)
    event_services.cancel_event(event=event, actor=actor)
    before = written(event)

    assert waitlist.offer_freed_seats(event=event) == []
    assert written(event) == before


def test_a_crash_between_the_hold_and_the_mail_rolls_both_back_and_the_next_pass_offers_once(
    actor, monkeypatch
):
    """A pass dying mid-offer, deterministically: it fails after holding the seat and before
    its mail is queued (the queue raises, as a worker dying there would leave it): the
    transaction rolls the hold back with everything else; the next pass offers and mails
    exactly once. (A real SIGKILLed worker: tests/probes/test_waitlist_races.py.)"""
    event, regs = sold_out(actor)
    first = join(event, 1).entry
    join(event, 2)
    registrations.cancel(registration=regs[0], actor=actor)
    before = written(event)
    holds = []
    real_reserve = seats.reserve

    def reserve(**kwargs):
        real_reserve(**kwargs)
        holds.append(held(event))  # the seat was held (inside the pass's transaction)

    class Dying(ports.EventMailQueue):
        def enqueue(self, *, message):
            raise SystemExit("worker killed between the hold and the mail")

    with monkeypatch.context() as patch:
        patch.setattr(seats, "reserve", reserve)
        patch.setattr(ports, "mail_queue", Dying)
        with pytest.raises(SystemExit):
            waitlist.offer_freed_seats(event=event)

    assert holds == [1]
    assert written(event) == before  # no hold, no offer, no mail, no audit row

    offered = waitlist.offer_freed_seats(event=event)
    again = waitlist.offer_freed_seats(event=event)

    assert [e.pk for e in offered] == [first.pk] and again == []
    assert held(event) == 1 and seats.audit(event=event) == []
    assert list(MailOutbox.objects.values_list("idempotency_key", flat=True)) == [
        f"waitlist-offer-w{first.pk}-v1"
    ]
    assert EventAuditLog.objects.filter(verb="waitlist.offered").count() == 1


# --- accept ------------------------------------------------------------------------------------


def offered_entry(actor, **fields):
    event, regs = sold_out(actor, **fields)
    entry = join(event, 1).entry
    join(event, 2)
    registrations.cancel(registration=regs[0], actor=actor)
    waitlist.offer_freed_seats(event=event)
    entry.refresh_from_db()
    assert entry.state == W.OFFERED
    return event, entry


def test_the_offer_page_then_the_confirm_registers_on_the_held_seat(client, actor):
    event, entry = offered_entry(actor)
    token = offer_token(entry)
    taken = seats.event_summary(event=event).taken

    page = client.get(offer_page(token))

    assert page.status_code == 200
    assert page["Cache-Control"] == "private, no-store"
    assert page["Referrer-Policy"] == "same-origin"
    html = page.content.decode()
    assert event.name in html and "Person 1" in html and 'id="offer-expires"' in html
    assert f'<form method="post" action="{offer_page(token)}">' in html
    assert WaitlistEntry.objects.get(pk=entry.pk).state == W.OFFERED  # a GET writes nothing

    response = client.post(offer_page(token))

    assert response.status_code == 303
    entry.refresh_from_db()
    reg = entry.registration
    assert (entry.state, reg.state, reg.name, reg.email) == (
        W.ACCEPTED,
        "open",
        "Person 1",
        "person1@example.org",
    )
    assert response["Location"] == reverse(
        "my-tickets", kwargs={"token": capability.mint(purpose="tickets", subject=reg)}
    )
    # the held seat became the registration's: nothing taken twice
    assert held(event) == 0
    assert seats.event_summary(event=event).taken == taken
    assert seats.audit(event=event) == []
    (row,) = EventAuditLog.objects.filter(verb="waitlist.accepted")
    assert (row.registration_id, row.actor_type, row.actor_id) == (
        reg.pk,
        ActorType.ATTENDEE,
        str(entry.pk),
    )
    created = EventAuditLog.objects.get(verb="registration.created", registration_id=reg.pk)
    assert created.actor_type == ActorType.ATTENDEE
    assert client.get(response["Location"]).status_code == 200

    # the spent link: its page is gone, a repeated confirm lands on the same tickets
    before = written(event)
    assert client.get(offer_page(token)).status_code == 404
    again = client.post(offer_page(token))
    assert (again.status_code, again["Location"]) == (303, response["Location"])
    assert written(event) == before


def test_an_expired_offer_is_dead_and_its_seat_goes_to_the_next_entry(client, actor):
    event, entry = offered_entry(actor)
    token = offer_token(entry)
    second = WaitlistEntry.objects.exclude(pk=entry.pk).get()
    later = entry.expires_at + timedelta(seconds=1)

    # after its window and before beat ran, the link is already dead
    with mock.patch.object(timezone, "now", return_value=later):
        before = written(event)
        assert client.get(offer_page(token)).status_code == 404
        assert client.post(offer_page(token)).status_code == 404
        assert written(event) == before
        assert refused(lambda: waitlist.accept(token=token)).code == Code.CAPABILITY_REFUSED

    expired = waitlist.expire_offers(now=later)

    assert expired == 1
    entry.refresh_from_db()
    second.refresh_from_db()
    assert (entry.state, second.state, second.offer_version) == (W.EXPIRED, W.OFFERED, 1)
    assert held(event) == 1  # released and held again for the next, in one transaction
    assert seats.audit(event=event) == []
    assert sold_out_intake(event) == Code.SOLD_OUT
    verbs = list(
        EventAuditLog.objects.filter(verb__startswith="waitlist.")
        .order_by("pk")
        .values_list("verb", "data__entry")
    )
    assert verbs[-2:] == [("waitlist.expired", entry.pk), ("waitlist.offered", second.pk)]
    assert MailOutbox.objects.filter(idempotency_key=f"waitlist-offer-w{second.pk}-v1").exists()
    assert client.get(offer_page(token)).status_code == 404
    assert client.get(offer_page(offer_token(second))).status_code == 200
    # beat again: nothing left to expire
    assert waitlist.expire_offers(now=later) == 0


def test_an_expired_offer_with_nobody_waiting_frees_its_seat_for_everyone(actor):
    event, regs = sold_out(actor)
    entry = join(event, 1).entry
    registrations.cancel(registration=regs[0], actor=actor)
    waitlist.offer_freed_seats(event=event)
    entry.refresh_from_db()

    assert waitlist.expire_offers(now=entry.expires_at) == 1

    assert held(event) == 0
    assert seats.event_summary(event=event).available == 1
    assert seats.audit(event=event) == []


def test_accepting_after_the_limit_was_forced_below_the_seats_taken_is_refused_cleanly(
    client, actor
):
    event, entry = offered_entry(actor)
    token = offer_token(entry)
    # update_event refuses it (the held seat counts as taken) ...
    error = refused(lambda: event_services.update_event(event=event, actor=actor, seats_max=1))
    assert (error.code, error.details["taken"]) == (Code.INVALID_VALUE, 2)
    # ... so force it in by hand
    type(event).objects.filter(pk=event.pk).update(seats_max=1)
    before = written(event)

    response = client.post(offer_page(token))

    assert response.status_code == 409
    assert "can no longer be honoured" in text_of(response)
    assert written(event) == before
    assert refused(lambda: waitlist.accept(token=token)).code == Code.SOLD_OUT
    assert written(event) == before


def test_accepting_on_a_cancelled_event_is_refused_cleanly(client, actor):
    event, entry = offered_entry(actor)
    token = offer_token(entry)
    event_services.cancel_event(event=event, actor=actor)
    before = written(event)

    response = client.post(offer_page(token))

    assert response.status_code == 409
    assert "Registrations for this event are closed." in text_of(response)
    assert written(event) == before


@pytest.mark.parametrize(
    "token_of",
    [
        lambda entry: "garbage",
        lambda entry: capability.mint(purpose="offer", subject=entry)[:-2] + "xx",
        lambda entry: capability.mint(purpose="tickets", subject=Registration.objects.first()),
        lambda entry: capability.mint(
            purpose="offer", subject=WaitlistEntry.objects.exclude(pk=entry.pk).get()
        ),
    ],
    ids=["garbage", "forged", "tickets_purpose", "a_waiting_entrys"],
)
def test_a_wrong_offer_link_answers_the_uniform_404_and_writes_nothing(token_of, client, actor):
    event, entry = offered_entry(actor)
    token = token_of(entry)
    before = written(event)

    for response in (client.get(offer_page(token)), client.post(offer_page(token))):
        assert response.status_code == 404
        assert "This link is not valid" in text_of(response)
        assert response["Cache-Control"] == "private, no-store"
    assert written(event) == before


def test_a_post_without_csrf_is_refused(actor):
    event, entry = offered_entry(actor)
    strict = Client(enforce_csrf_checks=True)
    token = offer_token(entry)
    before = written(event)

    assert strict.post(offer_page(token)).status_code == 403
    assert written(event) == before


def test_the_offer_path_is_masked_in_logs():
    assert access_log.mask("GET /waitlist/offer/AbC:dEf/ HTTP/1.1") == (
        "GET /waitlist/offer/***/ HTTP/1.1"
    )


# --- staff verbs -------------------------------------------------------------------------------


def test_removing_an_offered_entry_kills_its_link_and_offers_the_seat_to_the_next(client, actor):
    staff = factories.UserFactory(is_superuser=True)
    event, entry = offered_entry(actor)
    token = offer_token(entry)
    second = WaitlistEntry.objects.exclude(pk=entry.pk).get()

    waitlist.remove(entry=entry, actor=staff)

    entry.refresh_from_db()
    second.refresh_from_db()
    assert (entry.state, entry.offer_version, second.state) == (W.REMOVED, 2, W.OFFERED)
    assert held(event) == 1 and seats.audit(event=event) == []
    assert client.get(offer_page(token)).status_code == 404
    (row,) = EventAuditLog.objects.filter(verb="waitlist.removed")
    assert (row.actor_type, row.data) == (
        ActorType.USER,
        {"entry": entry.pk, "state": ["offered", "removed"]},
    )
    before = written(event)
    assert refused(lambda: waitlist.remove(entry=entry, actor=staff)).code == (
        Code.INVALID_TRANSITION
    )
    assert written(event) == before


def test_offer_now_jumps_the_queue_only_onto_a_free_seat(actor):
    staff = factories.UserFactory(is_superuser=True)
    event, regs = sold_out(actor)
    first, second = join(event, 1).entry, join(event, 2).entry
    before = written(event)
    assert refused(lambda: waitlist.offer_now(entry=second, actor=staff)).code == Code.SOLD_OUT
    assert written(event) == before

    registrations.cancel(registration=regs[0], actor=actor)
    offered = waitlist.offer_now(entry=second, actor=staff)

    assert offered.pk == second.pk and offered.state == W.OFFERED
    assert WaitlistEntry.objects.get(pk=first.pk).state == W.WAITING
    assert held(event) == 1 and seats.audit(event=event) == []
    row = EventAuditLog.objects.get(verb="waitlist.offered")
    assert (row.actor_type, row.data["entry"]) == (ActorType.USER, second.pk)
    before = written(event)
    assert refused(lambda: waitlist.offer_now(entry=second, actor=staff)).code == (
        Code.INVALID_TRANSITION
    )
    assert written(event) == before


def test_the_admin_lists_the_waiting_list_and_its_actions_call_the_services(client, actor):
    manager = factories.UserFactory(username="manager")
    manager.groups.add(Group.objects.get(name="Event manager"))
    event, regs = sold_out(actor)
    entries = [join(event, i).entry for i in range(3)]
    registrations.cancel(registration=regs[0], actor=actor)
    client.force_login(manager)
    url = reverse("admin:events_waitlistentry_changelist") + f"?event__id__exact={event.pk}"

    page = client.get(url)

    assert page.status_code == 200
    rows = {row.pk: row for row in page.context["cl"].result_list}
    assert [rows[e.pk]._place for e in entries] == [1, 2, 3]

    response = client.post(
        url, {"action": "offer_now", "_selected_action": [entries[2].pk]}, follow=True
    )
    assert "Offers sent: 1." in response.content.decode()
    assert WaitlistEntry.objects.get(pk=entries[2].pk).state == W.OFFERED
    response = client.post(
        url, {"action": "remove", "_selected_action": [entries[0].pk]}, follow=True
    )
    assert "Removed: 1." in response.content.decode()
    assert WaitlistEntry.objects.get(pk=entries[0].pk).state == W.REMOVED
    page = client.get(url)
    rows = {row.pk: row for row in page.context["cl"].result_list}
    assert rows[entries[1].pk]._place == 1
    assert seats.audit(event=event) == []

    # the dashboard counts the list and the open offers, and links to it
    dash = client.get(reverse("admin:events_event_dashboard", args=[event.pk]))
    html = dash.content.decode()
    assert dash.context["waitlist"] == dashboard.WaitlistFigures(waiting=1, offered=1)
    assert 'data-figure="waitlist-waiting">1<' in html
    assert 'data-figure="waitlist-offered">1<' in html
    assert url.replace("&", "&amp;") in html or url in html


def test_the_desk_sees_the_waiting_list_but_runs_no_action(client, actor):
    desk = factories.UserFactory(username="door")
    desk.groups.add(Group.objects.get(name="Event desk"))
    event, _ = sold_out(actor)
    entry = join(event, 1).entry
    client.force_login(desk)
    url = reverse("admin:events_waitlistentry_changelist")

    assert client.get(url).status_code == 200
    response = client.post(url, {"action": "remove", "_selected_action": [entry.pk]})
    assert response.status_code in (200, 302)
    assert WaitlistEntry.objects.get(pk=entry.pk).state == W.WAITING
    assert (
        client.get(reverse("admin:events_waitlistentry_change", args=[entry.pk])).status_code == 200
    )


def test_the_admin_changelist_query_count_does_not_grow_with_the_list(client, actor):
    root = factories.UserFactory(username="root", is_superuser=True)
    event, _ = sold_out(actor)
    client.force_login(root)
    url = reverse("admin:events_waitlistentry_changelist")
    counts = []
    for first, last in ((0, 2), (2, 30)):
        for i in range(first, last):
            join(event, 100 + i)
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


# --- the public side ---------------------------------------------------------------------------


def test_the_sold_out_event_page_offers_the_waiting_list_and_an_open_one_does_not(client, actor):
    event, _ = sold_out(actor)
    open_event = factories.EventFactory(seats_limited=True, seats_max=5)

    page = client.get(reverse("event-detail", args=[event.pk])).content.decode()
    other = client.get(reverse("event-detail", args=[open_event.pk])).content.decode()

    assert "Join the waiting list" in page
    assert f'action="{reverse("waitlist-join", args=[event.pk])}"' in page
    assert "Join the waiting list" not in other


def test_the_form_joins_and_says_where_the_offer_will_be_sent(client, actor):
    event, _ = sold_out(actor)
    join(event, 1)
    url = reverse("waitlist-join", args=[event.pk])

    response = client.post(url, {"name": "Ada Lovelace", "email": "Ada@Example.org"})

    assert response.status_code == 200
    assert "You are on the waiting list" in text_of(response)
    assert "we email ada@example.org a link to take it" in text_of(response)
    entry = WaitlistEntry.objects.get(email="ada@example.org")
    assert (entry.state, entry.event_id) == (W.WAITING, event.pk)


def test_a_refused_form_says_why_next_to_the_field_and_writes_nothing(client, actor):
    event, _ = sold_out(actor)
    before = written(event)

    response = client.post(
        reverse("waitlist-join", args=[event.pk]), {"name": "Ada", "email": "nope"}
    )

    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="w-email-error"' in html and "is not an email address" in html
    assert 'value="Ada"' in html
    assert written(event) == before


def test_the_form_on_an_event_with_seats_sends_people_to_register(client, actor):
    event = factories.EventFactory(seats_limited=True, seats_max=3)

    response = client.post(
        reverse("waitlist-join", args=[event.pk]), {"name": "Ada", "email": "a@example.org"}
    )

    assert response.status_code == 409
    assert "Seats are available" in text_of(response) and "Register now" in text_of(response)
    assert not WaitlistEntry.objects.exists()


def api(client, event, payload, **headers):
    return client.post(
        reverse("api-waitlist", args=[event.pk]),
        data=payload if isinstance(payload, str | bytes) else json.dumps(payload),
        content_type=headers.pop("content_type", "application/json"),
        **headers,
    )


def test_the_json_api_joins_with_201_received(client, actor):
    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event, seats_max=1)
    factories.RegistrationFactory(event=event, ticket=ticket)
    payload = {"ticket_id": ticket.pk, "name": "Ada", "email": "Ada@example.org"}

    created = api(client, event, payload)

    assert WaitlistEntry.objects.get().email == "ada@example.org"
    assert (created.status_code, created.json()) == (
        201,
        {
            "status": "received",
            "event_id": event.pk,
            "ticket_id": ticket.pk,
            "slot_id": None,
            "email": "ada@example.org",
        },
    )
    assert created["Cache-Control"] == "private, no-store"


# --- a repeated join tells nothing of who is listed ---------------------------------------------


def listed_and_new(client, event, listed: str, newcomer: str):
    """The answers to a join with an address already listed and with a new one, the repeat's
    writes (none) checked around it."""
    before = written(event)
    repeat = api(client, event, {"name": "Anyone", "email": listed})
    assert written(event) == before
    new = api(client, event, {"name": "Someone New", "email": newcomer})
    return repeat, new


def without_email(response) -> dict:
    return {key: value for key, value in response.json().items() if key != "email"}


@pytest.mark.parametrize("state", ["waiting, not first", "offered"])
def test_a_join_with_a_listed_address_answers_as_a_new_one_and_writes_nothing(client, actor, state):
    event, regs = sold_out(actor)
    if state == "offered":
        listed = join(event, 2).entry
        join(event, 1)
        registrations.cancel(registration=regs[0], actor=actor)
        (offered,) = waitlist.offer_freed_seats(event=event)  # the seat is held: still sold out
        assert offered.pk == listed.pk
    else:
        join(event, 1)
        listed = join(event, 2).entry

    repeat, new = listed_and_new(client, event, "Person2@example.org", "new@example.org")

    assert (repeat.status_code, new.status_code) == (201, 201)
    assert set(repeat.json()) == {"status", "event_id", "ticket_id", "slot_id", "email"}
    assert without_email(repeat) == without_email(new)
    assert repeat.json()["email"] == "person2@example.org"  # the address as typed, normalised


def test_a_listed_address_meets_the_refusal_a_newcomer_meets(client, actor):
    """A freed seat makes the pair bookable: both are sent to register (409), so the answer to a
    listed address is not told apart by it either."""
    event, regs = sold_out(actor, seats_max=3)
    join(event, 1)
    registrations.cancel(registration=regs[0], actor=actor)
    # the offer pass has not run yet: a seat is free, person 1 still waits
    before = written(event)

    repeat = api(client, event, {"name": "Anyone", "email": "person1@example.org"})
    new = api(client, event, {"name": "Someone New", "email": "new@example.org"})

    assert repeat.status_code == new.status_code == 409
    assert repeat.json() == new.json()
    assert written(event) == before


def test_the_page_after_a_join_is_the_same_for_a_listed_address(client, actor):
    event, _ = sold_out(actor)
    for n in range(1, 4):
        join(event, n)
    url = reverse("waitlist-join", args=[event.pk])
    before = written(event)

    repeat = client.post(url, {"name": "Anyone", "email": "person3@example.org"})
    assert written(event) == before
    new = client.post(url, {"name": "New", "email": "new@example.org"})

    assert repeat.status_code == new.status_code == 200
    card = re.compile(r'<div class="card" role="status" id="waitlist-joined">.*?</div>', re.S)
    assert card.search(repeat.content.decode()).group(0).replace(
        "person3@example.org", "new@example.org"
    ) == card.search(new.content.decode()).group(0)
    assert "place" not in text_of(repeat).replace("keeps its place", "")


def test_the_json_api_refuses_in_the_pinned_error_shape(client, actor):
    event, _ = sold_out(actor)
    open_event = factories.EventFactory(seats_limited=True, seats_max=3)
    hidden = factories.EventFactory(is_published=False)

    seats_left = api(client, open_event, {"name": "A", "email": "a@example.org"})
    assert seats_left.status_code == 409
    assert seats_left.json()["error"]["code"] == "seats_available"
    bad = api(client, event, {"name": "A", "email": "x"})
    assert (bad.status_code, bad.json()["error"]["code"], bad.json()["error"]["field"]) == (
        400,
        "invalid_attendee",
        "email",
    )
    assert api(client, hidden, {"name": "A"}).json()["error"]["code"] == "not_found"
    assert api(client, event, "[1, 2]").json()["error"]["code"] == "invalid_value"
    assert api(client, event, "{not json").json()["error"]["code"] == "invalid_value"
    form = api(client, event, "name=A", content_type="application/x-www-form-urlencoded")
    assert (form.status_code, form.json()["error"]["code"]) == (415, "unsupported_media_type")
    get = client.get(reverse("api-waitlist", args=[event.pk]))
    assert (get.status_code, get["Allow"]) == (405, "POST")
    assert not WaitlistEntry.objects.exists()


def test_the_api_and_the_form_share_the_intakes_rate_limit(client, actor, settings, monkeypatch):
    settings.EVENT_RATE_LIMITS = {**LIFTED, "intake": (2, 60)}
    # One fixed window of this test's own (a window rolling over mid-test resets the count).
    monkeypatch.setattr(ratelimit, "clock", lambda: 1_801_234_567.0)
    event, _ = sold_out(actor)
    client.post(
        reverse("event-detail", args=[event.pk]),
        {"a0-name": "Late", "quantity": "1"},
    )  # a registration attempt counts too
    assert api(client, event, {"name": "A", "email": "a@example.org"}).status_code == 201
    before = written(event)

    limited = api(client, event, {"name": "B", "email": "b@example.org"})
    form = client.post(
        reverse("waitlist-join", args=[event.pk]), {"name": "C", "email": "c@example.org"}
    )

    assert (limited.status_code, limited.json()["error"]["code"]) == (429, "rate_limited")
    assert int(limited["Retry-After"]) >= 1
    assert form.status_code == 429
    assert written(event) == before


# --- configuration, demo -----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-3", "abc", "1.5", "8761"])
def test_a_bad_offer_window_stops_start_up(value, knob_values):  # noqa: F811
    result = manage("check", values={**knob_values, "EVENT_WAITLIST_OFFER_HOURS": value})
    assert result.returncode != 0
    assert "ImproperlyConfigured: EVENT_WAITLIST_OFFER_HOURS must be a whole number" in (
        result.stderr
    )


def test_the_offer_window_defaults_to_24_hours(knob_values):  # noqa: F811
    values = {k: v for k, v in knob_values.items() if k != "EVENT_WAITLIST_OFFER_HOURS"}
    result = manage(
        "shell",
        "-c",
        "from django.conf import settings; print(settings.EVENT_WAITLIST_OFFER_HOURS)",
        values=values,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "24"
    assert knob_values["EVENT_WAITLIST_OFFER_HOURS"] == "24"  # .env.example declares it


def test_the_demo_has_a_sold_out_event_with_a_waiting_list():
    call_command("seed_demo", stdout=StringIO())
    entries = WaitlistEntry.objects.select_related("event")
    (event,) = {e.event for e in entries}
    assert seats.event_capacity(event=event).sold_out
    states = sorted(entries.values_list("state", flat=True))
    assert states.count(W.OFFERED) == 1 and states.count(W.WAITING) >= 2
    assert held(event) == 1 and seats.audit(event=event) == []
    offered = entries.get(state=W.OFFERED)
    assert MailOutbox.objects.filter(idempotency_key=waitlist.mail_key(offered)).exists()


# --- control characters --------------------------------------------------------------------------


@pytest.mark.parametrize("control", ["\x01", "\t", "\n", "\x7f", "\u2028"], ids=repr)
def test_a_control_character_in_the_name_is_refused_on_the_api_and_the_form(client, actor, control):
    event, _ = sold_out(actor)
    before = written(event)

    response = api(client, event, {"name": f"Ada{control}Lovelace", "email": "ada@example.org"})
    form = client.post(
        reverse("waitlist-join", args=[event.pk]),
        {"name": f"Ada{control}Lovelace", "email": "ada@example.org"},
    )

    error = response.json()["error"]
    assert (response.status_code, error["code"], error["field"]) == (
        400,
        "invalid_attendee",
        "name",
    )
    assert form.status_code == 400
    assert 'id="w-name-error"' in form.content.decode()
    assert written(event) == before

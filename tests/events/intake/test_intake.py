"""The public intake (spec.md §7.4): every refusal in the contract's order with its status and
code and nothing written; success 201 with the pinned fields; answers; Idempotency-Key."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.core.cache import cache
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from events.models import (
    Event,
    EventAuditLog,
    IntakeIdempotency,
    MailRegistration,
    QuestionType,
    Registration,
    RegistrationAnswer,
    SeatLedger,
    Stage,
    Ticket,
)
from events.services import events, seats
from tests.events import factories


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    cache.clear()


def url(event_id: int) -> str:
    return reverse("api-intake", kwargs={"event_id": event_id})


def post(client, event_id, payload, *, key=None, remote="10.1.0.1", raw=None, **headers):
    if key is not None:
        headers["HTTP_IDEMPOTENCY_KEY"] = key
    return client.post(
        url(event_id),
        data=raw if raw is not None else json.dumps(payload),
        content_type="application/json",
        REMOTE_ADDR=remote,
        **headers,
    )


def written() -> dict:
    """Everything an intake could write."""
    return {
        "registrations": Registration.objects.count(),
        "answers": RegistrationAnswer.objects.count(),
        "audit": EventAuditLog.objects.count(),
        "idempotency": IntakeIdempotency.objects.count(),
        "mail_rows": MailRegistration.objects.count(),
        "ledger": sorted(
            (e, s or 0, t or 0, r, u)
            for e, s, t, r, u in SeatLedger.objects.values_list(
                "event_id", "slot_id", "ticket_id", "reserved", "used"
            )
        ),
    }


@pytest.fixture
def w(db):
    event = factories.EventFactory(seats_limited=True, seats_max=10)
    ticket = factories.TicketFactory(event=event, limit_max_per_order=5)
    diet = factories.QuestionFactory(
        event=event, title="Diet", question_type=QuestionType.TEXT_BOX, is_mandatory_answer=True
    )
    shirt = factories.QuestionFactory(
        event=event, title="T-shirt", question_type=QuestionType.SIMPLE_CHOICE
    )
    small = factories.QuestionChoiceFactory(question=shirt, name="S")
    other_event = factories.EventFactory()
    return SimpleNamespace(
        event=event,
        ticket=ticket,
        diet=diet,
        shirt=shirt,
        small=small,
        other_ticket=factories.TicketFactory(event=other_event),
        other_slot=factories.SlotFactory(event=factories.EventFactory(is_multi_slots=True)),
    )


def valid_payload(w, n: int = 1) -> dict:
    return {
        "ticket_id": w.ticket.pk,
        "slot_id": None,
        "attendees": [
            {
                "name": f"Attendee {i}",
                "email": f"attendee{i}@example.org",
                "answers": {str(w.diet.pk): "vegan"},
            }
            for i in range(n)
        ],
    }


# --- breakers: each makes exactly one check of §7.4 fail -------------------------------------


def unknown_event(w, p, settings):
    Event.objects.filter(pk=w.event.pk).update(is_published=False)


def rate_limited(w, p, settings):
    settings.EVENT_RATE_LIMITS = {"intake": (0, 60), "token": (120, 60)}


def cancelled(w, p, settings):
    events.cancel_event(event=w.event, actor="system")


def pipe_end(w, p, settings):
    Event.objects.filter(pk=w.event.pk).update(stage=Stage.objects.get(name="Ended"))


def ended(w, p, settings):
    past = timezone.now() - timedelta(days=2)
    Event.objects.filter(pk=w.event.pk).update(date_begin=past, date_end=past + timedelta(hours=1))


def no_ticket(w, p, settings):
    p["ticket_id"] = None


def foreign_ticket(w, p, settings):
    p["ticket_id"] = w.other_ticket.pk


def no_slot(w, p, settings):
    Event.objects.filter(pk=w.event.pk).update(is_multi_slots=True)
    factories.SlotFactory(event=w.event)


def foreign_slot(w, p, settings):
    no_slot(w, p, settings)
    p["slot_id"] = w.other_slot.pk


def sale_not_started(w, p, settings):
    Ticket.objects.filter(pk=w.ticket.pk).update(
        start_sale_datetime=timezone.now() + timedelta(days=1)
    )


def sale_ended(w, p, settings):
    Ticket.objects.filter(pk=w.ticket.pk).update(
        end_sale_datetime=timezone.now() - timedelta(minutes=1)
    )


def priced(w, p, settings):
    Ticket.objects.filter(pk=w.ticket.pk).update(price="12.50")


def too_many(w, p, settings):
    p["attendees"] = valid_payload(w, 6)["attendees"]


def nameless(w, p, settings):
    p["attendees"][0]["name"] = "  "


def question_unanswered(w, p, settings):
    p["attendees"][0]["answers"] = {}


def bad_choice(w, p, settings):
    p["attendees"][0]["answers"][str(w.shirt.pk)] = w.small.pk + 1000


def full(w, p, settings):
    Event.objects.filter(pk=w.event.pk).update(seats_max=1)
    p["attendees"].append(valid_payload(w, 1)["attendees"][0])


ORDER = [
    # (breakers, status, code): alone, then with the next check also failing (earlier wins)
    ([unknown_event], 404, "not_found"),
    ([unknown_event, rate_limited], 404, "not_found"),
    ([rate_limited], 429, "rate_limited"),
    ([rate_limited, cancelled], 429, "rate_limited"),
    ([cancelled], 409, "registrations_closed"),
    ([pipe_end], 409, "registrations_closed"),
    ([ended], 409, "registrations_closed"),
    ([cancelled, no_ticket], 409, "registrations_closed"),
    ([no_ticket], 400, "ticket_required"),
    ([no_ticket, no_slot], 400, "ticket_required"),
    ([foreign_ticket], 400, "invalid_ticket"),
    ([foreign_ticket, foreign_slot], 400, "invalid_ticket"),
    ([no_slot], 400, "slot_required"),
    ([foreign_slot], 400, "invalid_slot"),
    ([foreign_slot, sale_ended], 400, "invalid_slot"),
    ([sale_not_started], 409, "sale_not_started"),
    ([sale_ended], 409, "sale_ended"),
    ([sale_not_started, priced], 409, "sale_not_started"),
    ([priced], 409, "priced_ticket"),
    ([priced, too_many], 409, "priced_ticket"),
    ([too_many], 400, "invalid_quantity"),
    ([too_many, nameless], 400, "invalid_quantity"),
    ([nameless], 400, "invalid_attendee"),
    ([nameless, question_unanswered], 400, "invalid_attendee"),
    ([question_unanswered], 400, "question_required"),
    ([question_unanswered, full], 400, "question_required"),
    ([bad_choice], 400, "invalid_answer"),
    ([bad_choice, full], 400, "invalid_answer"),
    ([full], 409, "sold_out"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("breakers", "status", "code"),
    ORDER,
    ids=["+".join(b.__name__ for b in case[0]) for case in ORDER],
)
def test_each_refusal_in_order_answers_its_code_and_writes_nothing(
    client, w, settings, breakers, status, code
):
    payload = valid_payload(w)
    for breaker in breakers:
        breaker(w, payload, settings)
    before = written()
    response = post(client, w.event.pk, payload, key="k-1")
    assert response.status_code == status, response.content
    body = response.json()
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert written() == before


@pytest.mark.django_db
def test_the_baseline_of_the_order_table_registers(client, w):
    response = post(client, w.event.pk, valid_payload(w))
    assert response.status_code == 201


@pytest.mark.django_db
def test_the_ladder_every_check_answers_in_the_contract_order(client, w, settings):
    """Start with every check failing; fix one at a time; the answer walks down §7.4."""
    payload = valid_payload(w)
    for breaker in (
        unknown_event,
        rate_limited,
        pipe_end,
        no_ticket,
        no_slot,
        sale_not_started,
        priced,
        too_many,
        nameless,
        question_unanswered,
        full,
    ):
        breaker(w, payload, settings)
    payload["attendees"] = [{"name": "", "answers": {}}] + valid_payload(w, 5)["attendees"]
    slot = w.event.slots.get()
    fixes = [
        (404, "not_found", lambda: Event.objects.filter(pk=w.event.pk).update(is_published=True)),
        (
            429,
            "rate_limited",
            lambda: setattr(settings, "EVENT_RATE_LIMITS", {"intake": (99, 60), "token": (9, 60)}),
        ),
        (
            409,
            "registrations_closed",
            lambda: Event.objects.filter(pk=w.event.pk).update(stage=Stage.objects.get(name="New")),
        ),
        (400, "ticket_required", lambda: payload.update(ticket_id=w.other_ticket.pk)),
        (400, "invalid_ticket", lambda: payload.update(ticket_id=w.ticket.pk)),
        (400, "slot_required", lambda: payload.update(slot_id=w.other_slot.pk)),
        (400, "invalid_slot", lambda: payload.update(slot_id=slot.pk)),
        (
            409,
            "sale_not_started",
            lambda: Ticket.objects.filter(pk=w.ticket.pk).update(
                start_sale_datetime=None, end_sale_datetime=timezone.now() - timedelta(hours=1)
            ),
        ),
        (
            409,
            "sale_ended",
            lambda: Ticket.objects.filter(pk=w.ticket.pk).update(end_sale_datetime=None),
        ),
        (409, "priced_ticket", lambda: Ticket.objects.filter(pk=w.ticket.pk).update(price=0)),
        (400, "invalid_quantity", lambda: payload.update(attendees=payload["attendees"][:2])),
        (
            400,
            "invalid_attendee",
            lambda: payload["attendees"].__setitem__(0, {"name": "Ann", "email": "not-an-email"}),
        ),
        (
            400,
            "invalid_attendee",
            lambda: payload["attendees"].__setitem__(0, {"name": "Ann", "answers": {}}),
        ),
        (
            400,
            "question_required",
            lambda: payload["attendees"][0].update(
                answers={str(w.diet.pk): "x", str(w.shirt.pk): "nope"}
            ),
        ),
        (400, "invalid_answer", lambda: payload["attendees"][0]["answers"].pop(str(w.shirt.pk))),
        (409, "sold_out", lambda: Event.objects.filter(pk=w.event.pk).update(seats_max=2)),
    ]
    seen = []
    for _, _, fix in fixes:
        before = written()
        response = post(client, w.event.pk, payload)
        seen.append((response.status_code, response.json()["error"]["code"]))
        assert written() == before
        fix()
    assert seen == [(status, code) for status, code, _ in fixes]
    assert post(client, w.event.pk, payload).status_code == 201


@pytest.mark.django_db
def test_sold_out_names_the_missing_count(client, w):
    Event.objects.filter(pk=w.event.pk).update(seats_max=3)
    assert post(client, w.event.pk, valid_payload(w, 1)).status_code == 201
    response = post(client, w.event.pk, valid_payload(w, 5))
    assert response.status_code == 409
    assert response.json()["error"]["missing"] == [
        {"slot_id": None, "ticket_id": w.ticket.pk, "missing": 3}
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{not json", "invalid_value"),
        (b"[1, 2]", "invalid_value"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_refused(client, w, raw, code):
    before = written()
    response = post(client, w.event.pk, None, raw=raw)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert written() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("mutate", "code", "details"),
    [
        (lambda p: p.update(attendees=[]), "invalid_quantity", {"quantity": 0, "max": 5}),
        (lambda p: p.update(attendees="many"), "invalid_quantity", {"quantity": 0, "max": 5}),
        (lambda p: p.update(ticket_id="abc"), "invalid_ticket", {"field": "ticket"}),
        (lambda p: p.update(slot_id=1), "invalid_slot", {"field": "slot"}),
        (lambda p: p["attendees"].__setitem__(0, "Ann"), "invalid_attendee", {"attendee": 0}),
        (
            lambda p: p["attendees"][0].update(email="nope"),
            "invalid_attendee",
            {"attendee": 0, "field": "email"},
        ),
        (
            lambda p: p["attendees"][0].update(name=7),
            "invalid_attendee",
            {"attendee": 0, "field": "name"},
        ),
        (
            lambda p: p["attendees"][0]["answers"].update({"999999": "x"}),
            "invalid_answer",
            {"attendee": 0, "question": "999999"},
        ),
    ],
)
def test_refusal_details_point_at_the_field(client, w, mutate, code, details):
    payload = valid_payload(w)
    mutate(payload)
    before = written()
    response = post(client, w.event.pk, payload)
    error = response.json()["error"]
    assert error["code"] == code
    assert {k: error[k] for k in details} == details
    assert written() == before


@pytest.mark.django_db
def test_without_an_own_limit_the_quantity_is_capped_at_30(client, w):
    Ticket.objects.filter(pk=w.ticket.pk).update(limit_max_per_order=0)
    Event.objects.filter(pk=w.event.pk).update(seats_max=100)
    response = post(client, w.event.pk, valid_payload(w, 31))
    assert response.json()["error"] == {
        "code": "invalid_quantity",
        "message": "Register between 1 and 30 attendees at once.",
        "field": "quantity",
        "quantity": 31,
        "max": 30,
    }
    assert post(client, w.event.pk, valid_payload(w, 30)).status_code == 201


# --- success ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_success_answers_201_with_the_pinned_fields_and_working_links(client, w):
    response = post(client, w.event.pk, valid_payload(w, 2))
    assert response.status_code == 201
    body = response.json()
    rows = list(Registration.objects.filter(event=w.event).order_by("pk"))
    assert body["event_id"] == w.event.pk
    assert [set(r) for r in body["registrations"]] == [
        {"id", "state", "barcode", "tickets_url", "ics_url"}
    ] * 2
    assert [(r["id"], r["state"], r["barcode"]) for r in body["registrations"]] == [
        (row.pk, "open", row.barcode) for row in rows
    ]
    for item in body["registrations"]:
        assert item["tickets_url"].startswith(f"{_public_url()}/my-tickets/")
        assert item["ics_url"].startswith(f"{_public_url()}/ics/")
        path = item["tickets_url"][len(_public_url()) :]
        page = client.get(path)
        assert page.status_code == 200 and item["barcode"] in page.content.decode()
        assert client.get(item["ics_url"][len(_public_url()) :]).status_code == 200
    assert [(r.name, r.email, r.state, r.ticket_id) for r in rows] == [
        ("Attendee 0", "attendee0@example.org", "open", w.ticket.pk),
        ("Attendee 1", "attendee1@example.org", "open", w.ticket.pk),
    ]
    assert seats.availability(event=Event.objects.get(pk=w.event.pk), ticket=w.ticket) == 8
    assert (
        EventAuditLog.objects.filter(
            event=w.event, verb="registration.created", actor_type="public"
        ).count()
        == 2
    )


def _public_url() -> str:
    from django.conf import settings

    return settings.EVENT_PUBLIC_URL.rstrip("/")


@pytest.mark.django_db
def test_answers_are_stored_and_utm_kept(client, w):
    payload = valid_payload(w)
    payload["attendees"][0]["answers"][str(w.shirt.pk)] = w.small.pk
    payload["utm"] = {"source": "newsletter", "medium": "mail", "campaign": 5}
    assert post(client, w.event.pk, payload).status_code == 201
    reg = Registration.objects.get(event=w.event)
    answers = {(a.question_id, a.choice_id, a.text_value) for a in reg.answers.all()}
    assert answers == {(w.diet.pk, None, "vegan"), (w.shirt.pk, w.small.pk, None)}
    assert (reg.utm_source, reg.utm_medium, reg.utm_campaign) == ("newsletter", "mail", "")


@pytest.mark.django_db
def test_once_per_order_answers_are_copied_to_every_attendee(client, w):
    company = factories.QuestionFactory(
        event=w.event,
        title="Who pays?",
        question_type=QuestionType.TEXT_BOX,
        once_per_order=True,
        is_mandatory_answer=True,
    )
    payload = valid_payload(w, 3)
    payload["attendees"][1]["answers"][str(company.pk)] = "ACME"
    assert post(client, w.event.pk, payload).status_code == 201
    assert sorted(
        RegistrationAnswer.objects.filter(question=company).values_list("text_value", flat=True)
    ) == ["ACME", "ACME", "ACME"]


@pytest.mark.django_db
def test_name_and_email_questions_fill_the_fields(client, w):
    name_q = factories.QuestionFactory(
        event=w.event, question_type=QuestionType.NAME, is_mandatory_answer=True
    )
    email_q = factories.QuestionFactory(event=w.event, question_type=QuestionType.EMAIL)
    phone_q = factories.QuestionFactory(event=w.event, question_type=QuestionType.PHONE)
    payload = valid_payload(w)
    payload["attendees"][0] = {
        "answers": {
            str(w.diet.pk): "none",
            str(name_q.pk): "Bea From Question",
            str(email_q.pk): "bea@example.org",
            str(phone_q.pk): "0470 12 34 56",
        }
    }
    assert post(client, w.event.pk, payload).status_code == 201
    reg = Registration.objects.get(event=w.event)
    assert (reg.name, reg.email, reg.phone) == (
        "Bea From Question",
        "bea@example.org",
        "+32470123456",
    )


@pytest.mark.django_db
def test_a_mandatory_contact_question_is_answered_by_the_typed_field(client, w):
    email_q = factories.QuestionFactory(
        event=w.event, question_type=QuestionType.EMAIL, is_mandatory_answer=True
    )
    payload = valid_payload(w)
    payload["attendees"][0]["email"] = ""
    response = post(client, w.event.pk, payload)
    assert response.json()["error"] | {"message": ""} == {
        "code": "question_required",
        "message": "",
        "attendee": 0,
        "question": email_q.pk,
    }
    payload["attendees"][0]["email"] = "typed@example.org"
    assert post(client, w.event.pk, payload).status_code == 201
    reg = Registration.objects.get(event=w.event)
    assert reg.answers.get(question=email_q).text_value == "typed@example.org"


# --- Idempotency-Key ----------------------------------------------------------------------


@pytest.mark.django_db
def test_the_same_idempotency_key_returns_the_first_answer_without_registering_twice(client, w):
    first = post(client, w.event.pk, valid_payload(w, 2), key="retry-me")
    after_first = written()
    second = post(client, w.event.pk, valid_payload(w, 2), key="retry-me")
    assert first.status_code == second.status_code == 201
    assert second.content == first.content
    assert second["Idempotent-Replayed"] == "true"
    assert written() == after_first
    assert Registration.objects.filter(event=w.event).count() == 2
    # Even once the event is sold out, the replay still answers the first response.
    Event.objects.filter(pk=w.event.pk).update(seats_max=2)
    assert post(client, w.event.pk, valid_payload(w, 2), key="retry-me").content == first.content
    # Another key registers again (and here finds the event full).
    assert post(client, w.event.pk, valid_payload(w, 2), key="other").status_code == 409


@pytest.mark.django_db
def test_an_idempotency_key_reused_for_another_request_is_refused(client, w):
    assert post(client, w.event.pk, valid_payload(w, 1), key="k").status_code == 201
    before = written()
    response = post(client, w.event.pk, valid_payload(w, 2), key="k")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_value"
    assert response.json()["error"]["field"] == "Idempotency-Key"
    assert written() == before


@pytest.mark.django_db
def test_a_refusal_is_not_stored_under_the_key(client, w):
    payload = valid_payload(w)
    Ticket.objects.filter(pk=w.ticket.pk).update(price=5)
    assert post(client, w.event.pk, payload, key="k").status_code == 409
    Ticket.objects.filter(pk=w.ticket.pk).update(price=0)
    assert post(client, w.event.pk, payload, key="k").status_code == 201


@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicates_with_one_key_register_once():
    from django.test import Client

    event = factories.EventFactory(seats_limited=True, seats_max=100)
    payload = {"ticket_id": None, "attendees": [{"name": "Ann", "email": "ann@example.org"}]}
    barrier = threading.Barrier(6)
    answers: list = []

    def worker(index: int) -> None:
        try:
            client = Client()
            barrier.wait()
            answers.append(post(client, event.pk, payload, key="same", remote=f"10.9.0.{index}"))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [a.status_code for a in answers] == [201] * 6
    assert len({a.content for a in answers}) == 1
    assert Registration.objects.filter(event=event).count() == 1
    assert IntakeIdempotency.objects.filter(event=event, key="same").count() == 1
    assert sum(a.has_header("Idempotent-Replayed") for a in answers) == 5
    assert seats.audit(event=event) == []


@pytest.mark.django_db
@pytest.mark.parametrize("seats_left", [5, 0])
def test_a_duplicate_that_lost_the_race_answers_the_winners_response(
    client, w, monkeypatch, seats_left
):
    """The lookup ran before the winner committed: this attempt then loses on the unique
    (event, key) index — or on the seats the winner took — rolls back, and replays."""
    from events.services import intake

    first = post(client, w.event.pk, valid_payload(w), key="raced")
    Event.objects.filter(pk=w.event.pk).update(seats_max=1 + seats_left)
    before = written()
    real_replay = intake._replay
    calls = []

    def late_replay(event, key, payload):
        calls.append(key)
        return None if len(calls) == 1 else real_replay(event, key, payload)

    monkeypatch.setattr(intake, "_replay", late_replay)
    again = post(client, w.event.pk, valid_payload(w), key="raced")
    assert calls == ["raced", "raced"]
    assert again.status_code == 201
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true"
    assert written() == before

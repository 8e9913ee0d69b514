"""The desk surface (spec-overlay.md §5.2): who may use it, CSRF, the JSON shapes, the pages."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.contrib.staticfiles import finders
from django.test import Client
from django.utils import timezone

from events.models import EventAuditLog, Registration
from tests.events import factories
from tests.helpers import snapshot

pytestmark = pytest.mark.django_db

SCAN, CONFIRM = "/desk/api/scan", "/desk/api/confirm"


def ongoing_event(**kw):
    begin = timezone.now() - timedelta(hours=1)
    return factories.EventFactory(date_begin=begin, date_end=begin + timedelta(hours=8), **kw)


def user_in(group: str | None, **kw):
    user = factories.UserFactory(**kw)
    if group:
        user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def desk_user():
    return user_in("Event desk", username="door")


def csrf_client(user) -> tuple[Client, str]:
    """A client that enforces CSRF, logged in, holding the token the scanner page gave it."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    event = ongoing_event()
    page = client.get(f"/desk/{event.pk}/")
    assert page.status_code == 200
    return client, page.cookies["csrftoken"].value


def post(client, url, body, token=None, **extra):
    headers = {"HTTP_X_CSRFTOKEN": token} if token else {}
    return client.post(url, json.dumps(body), content_type="application/json", **headers, **extra)


# --- who ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/desk/", "/desk/{event}/"])
def test_anonymous_pages_redirect_to_the_login(client, path):
    event = ongoing_event()
    url = path.format(event=event.pk)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"/admin/login/?next={url}"


@pytest.mark.parametrize("url", [SCAN, CONFIRM])
def test_anonymous_api_is_403_json_and_writes_nothing(client, url):
    reg = factories.RegistrationFactory(event=ongoing_event())
    before = snapshot(reg.event)
    response = post(client, url, {"barcode": reg.barcode, "registration_id": reg.pk})
    assert response.status_code == 403
    assert response.json()["error"]["code"] in {"forbidden", "csrf_failed"}
    assert snapshot(reg.event) == before


@pytest.mark.parametrize("group", [None, "Event user"])
def test_staff_without_the_desk_permission_gets_403(client, group):
    user = user_in(None, username="plainstaff")
    client.force_login(user)
    event = ongoing_event()
    reg = factories.RegistrationFactory(event=event)
    before = snapshot(event)
    assert client.get("/desk/").status_code == 403
    assert client.get(f"/desk/{event.pk}/").status_code == 403
    response = post(client, SCAN, {"barcode": reg.barcode})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert snapshot(event) == before
    if group:  # control: the same user, given a group that checks in, may scan
        user.groups.add(Group.objects.get(name=group))
        client.force_login(user)
        assert post(client, SCAN, {"barcode": reg.barcode}).status_code == 200


@pytest.mark.parametrize(
    "grant",
    ["nothing", "desk group", "other group", "direct", "other direct", "superuser", "inactive"],
)
def test_the_desk_permission_is_django_s_has_perm_read_with_the_user(
    grant, django_assert_num_queries
):
    """desk.views.can_use_desk answers what `is_active and is_staff and has_perm(PERMISSION)`
    answers through Django's model backend, for every way a permission can be held or not. The
    user as a request reads it (config.auth.ModelBackend.get_user: one statement, its grants
    and its groups' included) answers with no query more; a user read by Django's backend asks
    PostgreSQL as Django does."""
    from django.contrib.auth.models import Permission

    from config.auth import ModelBackend
    from desk.views import PERMISSION, can_use_desk

    readers, _ = Group.objects.get_or_create(name="Readers only")
    readers.permissions.add(Permission.objects.get(codename="view_registration"))
    user = user_in(
        {"desk group": "Event desk", "other group": "Readers only"}.get(grant),
        username=f"who-{grant.replace(' ', '-')}",
        is_superuser=grant == "superuser",
        is_active=grant != "inactive",
    )
    if grant in ("direct", "inactive"):
        user.user_permissions.add(Permission.objects.get(codename="checkin_registration"))
    if grant == "other direct":
        user.user_permissions.add(Permission.objects.get(codename="view_registration"))
    fresh = type(user).objects.get(pk=user.pk)  # no permission cache from the set-up
    expected = fresh.is_active and fresh.is_staff and fresh.has_perm(PERMISSION)
    assert expected == (grant in ("desk group", "direct", "superuser"))
    with django_assert_num_queries(1):
        signed_in = ModelBackend().get_user(user.pk)
    if grant == "inactive":
        assert signed_in is None  # Django's answer too: an inactive user is not signed in
        return
    with django_assert_num_queries(0):
        assert can_use_desk(signed_in) == expected
    assert signed_in.get_all_permissions() == fresh.get_all_permissions()
    # Control: a user read without its grants costs Django's queries (the superuser none).
    read_by_django = type(user).objects.get(pk=user.pk)
    with django_assert_num_queries(0 if grant == "superuser" else 2):
        assert can_use_desk(read_by_django) == expected


def test_a_grant_revoked_holds_from_the_next_request(client):
    from django.contrib.auth.models import Permission

    user = user_in(None, username="directly")
    grant = Permission.objects.get(codename="checkin_registration")
    user.user_permissions.add(grant)
    client.force_login(user)
    event = ongoing_event()
    assert client.get(f"/desk/{event.pk}/").status_code == 200
    user.user_permissions.remove(grant)
    assert client.get(f"/desk/{event.pk}/").status_code == 403


def test_a_non_staff_user_with_the_group_gets_403(client):
    user = user_in("Event desk", username="notstaff", is_staff=False)
    client.force_login(user)
    assert client.get("/desk/").status_code == 403


def test_missing_or_wrong_csrf_is_403_json_and_writes_nothing(desk_user):
    client, token = csrf_client(desk_user)
    reg = factories.RegistrationFactory(event=ongoing_event())
    before = snapshot(reg.event)
    for sent in (None, "x" * 32):
        response = post(client, SCAN, {"barcode": reg.barcode}, token=sent)
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "csrf_failed"
        assert set(response.json()["error"]) >= {"code", "message"}
    assert post(client, CONFIRM, {"registration_id": reg.pk}).status_code == 403
    assert snapshot(reg.event) == before
    # control: with the page's token the same scan goes through
    response = post(client, SCAN, {"barcode": reg.barcode, "event_id": reg.event_id}, token=token)
    assert response.status_code == 200
    assert response.json()["status"] == "confirmed_registration"


# --- the JSON verbs ----------------------------------------------------------------------


def test_a_desk_user_scans_and_the_answer_is_one_flat_object_audited_as_desk(desk_user):
    client, token = csrf_client(desk_user)
    event = ongoing_event()
    reg = factories.RegistrationFactory(event=event, name="Grace Hopper")
    response = post(client, SCAN, {"barcode": reg.barcode + "\n", "event_id": event.pk}, token)
    assert response.status_code == 200
    assert response["Cache-Control"] == "private, no-store"
    body = response.json()
    assert body["status"] == "confirmed_registration"
    assert (body["id"], body["name"], body["event_id"]) == (reg.pk, "Grace Hopper", event.pk)
    assert not any(isinstance(v, dict) for v in body.values())
    rows = EventAuditLog.objects.filter(registration=reg).values_list(
        "verb", "actor_type", "actor_id", "actor_label"
    )
    assert set(rows) == {
        ("registration.attended", "desk", str(desk_user.pk), "door"),
        ("registration.scanned", "desk", str(desk_user.pk), "door"),
    }

    again = post(client, SCAN, {"barcode": reg.barcode, "event_id": event.pk}, token)
    assert again.json()["status"] == "already_registered"
    unknown = post(client, SCAN, {"barcode": "nope", "event_id": event.pk}, token)
    assert (unknown.status_code, unknown.json()) == (200, {"status": "invalid_ticket"})


def test_the_manual_confirmation_route(desk_user):
    client, token = csrf_client(desk_user)
    event, desk_event = ongoing_event(), ongoing_event()
    reg = factories.RegistrationFactory(event=event)
    asked = post(client, SCAN, {"barcode": reg.barcode, "event_id": desk_event.pk}, token).json()
    assert asked["status"] == "need_manual_confirmation"
    answer = post(client, CONFIRM, {"registration_id": asked["id"]}, token)
    assert (answer.status_code, answer.json()["status"]) == (200, "confirmed_registration")
    assert Registration.objects.get(pk=reg.pk).state == "done"
    missing = post(client, CONFIRM, {"registration_id": 99999999}, token)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("url", "body"),
    [
        (SCAN, "not json"),
        (SCAN, [1, 2]),
        (SCAN, {"barcode": 123}),
        (SCAN, {"barcode": "1", "event_id": "5"}),
        (SCAN, {"barcode": "1", "event_id": True}),
        (CONFIRM, {}),
        (CONFIRM, {"registration_id": -1}),
        # beyond a bigint primary key: refused before it reaches the database (not a 500)
        (SCAN, {"barcode": "1", "event_id": 2**63}),
        (SCAN, {"barcode": "1", "event_id": 10**20}),
        (CONFIRM, {"registration_id": 2**63}),
    ],
)
def test_malformed_bodies_are_400_invalid_value(desk_user, url, body):
    client, token = csrf_client(desk_user)
    data = body if isinstance(body, str) else json.dumps(body)
    response = client.post(url, data, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_value"
    assert not EventAuditLog.objects.filter(verb="registration.scanned").exists()


@pytest.mark.parametrize("barcode", ["\\ud800", "12\\udfff34", "\\u0661\\u0662"])
def test_a_lone_surrogate_or_other_digits_over_http_is_invalid_ticket_not_500(
    desk_user, client, barcode
):
    """JSON may carry a lone surrogate escape; it must answer like any unknown code."""
    client.force_login(desk_user)
    body = '{"barcode": "' + barcode + '"}'
    response = client.post(SCAN, body, content_type="application/json")
    assert (response.status_code, response.json()) == (200, {"status": "invalid_ticket"})
    assert EventAuditLog.objects.filter(verb="registration.scanned").count() == 1


def test_get_on_a_verb_is_405_json(desk_user, client):
    client.force_login(desk_user)
    response = client.get(SCAN)
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_the_counters_route_reads_the_seat_module(desk_user, client):
    client.force_login(desk_user)
    event = ongoing_event()
    factories.RegistrationFactory(event=event, state="done")
    factories.RegistrationFactory(event=event, state="open")
    factories.RegistrationFactory(event=event, state="draft")
    response = client.get(f"/desk/api/events/{event.pk}/counters")
    assert response.json() == {"event_id": event.pk, "attended": 1, "expected": 2}
    assert client.get("/desk/api/events/99999999/counters").status_code == 404


# --- pages -------------------------------------------------------------------------------


def test_the_index_lists_ongoing_and_upcoming_events_only(desk_user, client):
    client.force_login(desk_user)
    ongoing = ongoing_event(name="Ongoing one")
    upcoming = factories.EventFactory(name="Upcoming one")
    past = factories.EventFactory(
        name="Past one",
        date_begin=timezone.now() - timedelta(days=2),
        date_end=timezone.now() - timedelta(days=1),
    )
    ongoing_event(name="Cancelled one", kanban_state="cancel")
    ongoing_event(name="Cancelled stage", stage=factories.stage("Cancelled"))
    response = client.get("/desk/")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.index("Ongoing one") < html.index("Upcoming one")
    assert f'href="/desk/{ongoing.pk}/"' in html and f'href="/desk/{upcoming.pk}/"' in html
    assert "Ongoing now" in html
    for absent in ("Past one", "Cancelled one", "Cancelled stage"):
        assert absent not in html
    assert past.pk


def test_the_scanner_page_is_built_for_a_keyboard_wedge(desk_user, client):
    client.force_login(desk_user)
    event = ongoing_event(name="Summit")
    factories.RegistrationFactory(event=event, state="done")
    response = client.get(f"/desk/{event.pk}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert '<input id="barcode" name="barcode" type="text" autofocus' in html
    assert 'aria-live="assertive"' in html
    assert 'id="count-attended">1<' in html and 'id="count-expected">1<' in html
    assert "/static/desk/desk.js" in html and "/static/desk/desk.css" in html
    assert 'name="csrfmiddlewaretoken"' in html
    assert client.get("/desk/99999999/").status_code == 404


def test_the_static_files_ship_with_the_app():
    for name in ("desk/desk.js", "desk/desk.css"):
        assert finders.find(name), name
    js = open(finders.find("desk/desk.js"), encoding="utf-8").read()
    assert "AbortController" in js and "not_recorded" in js
    assert "http" not in js.replace("http://www.w3.org/2000/svg", "")  # nothing fetched abroad


def test_the_pages_read_a_fixed_number_of_queries(desk_user, client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(desk_user)
    counts = []
    for extra in (1, 6):
        for _ in range(extra):
            event = factories.EventFactory()
            factories.RegistrationFactory(event=event)
        with CaptureQueriesContext(connection) as index:
            assert client.get("/desk/").status_code == 200
        with CaptureQueriesContext(connection) as page:
            assert client.get(f"/desk/{event.pk}/").status_code == 200
        counts.append((len(index), len(page)))
    assert counts[0] == counts[1]


# --- the payment flag and the slot over HTTP -----------------------------------------------


def test_the_answer_says_whether_the_ticket_is_paid_and_has_to_pay(desk_user):
    client, token = csrf_client(desk_user)
    event = ongoing_event()
    unpaid = factories.RegistrationFactory(event=event, sale_status="sold", sale_order_ref="SO-1")
    paid = factories.RegistrationFactory(event=event, sale_status="sold", is_paid=True)
    free = factories.RegistrationFactory(event=event)
    got = {
        reg.pk: post(client, SCAN, {"barcode": reg.barcode, "event_id": event.pk}, token).json()
        for reg in (unpaid, paid, free)
    }
    assert {pk: (a["status"], a["is_paid"], a["has_to_pay"]) for pk, a in got.items()} == {
        unpaid.pk: ("confirmed_registration", False, True),
        paid.pk: ("confirmed_registration", True, False),
        free.pk: ("confirmed_registration", False, False),
    }


def slotted_event():
    event = ongoing_event(is_multi_slots=True)
    morning = factories.SlotFactory(event=event)
    afternoon = factories.SlotFactory(event=event, start_hour=13.0, end_hour=15.0)
    return event, morning, afternoon


def test_a_scan_for_a_slot_admits_its_tickets_and_asks_for_another_slot_s(desk_user):
    client, token = csrf_client(desk_user)
    event, morning, afternoon = slotted_event()
    mine = factories.RegistrationFactory(event=event, slot=morning)
    other = factories.RegistrationFactory(event=event, slot=afternoon)
    body = {"event_id": event.pk, "slot_id": morning.pk}
    assert post(client, SCAN, {**body, "barcode": mine.barcode}, token).json()["status"] == (
        "confirmed_registration"
    )
    before = snapshot(event)
    asked = post(client, SCAN, {**body, "barcode": other.barcode}, token).json()
    assert (asked["status"], asked["slot_name"]) == ("need_manual_confirmation", str(afternoon))
    assert snapshot(event)["registrations"] == before["registrations"]


@pytest.mark.parametrize(
    ("slot_id", "code"),
    [("other event", "invalid_slot"), (987654321, "invalid_slot"), ("7", "invalid_value")],
)
def test_a_slot_id_that_is_not_the_desk_event_s_is_400_and_writes_nothing(desk_user, slot_id, code):
    client, token = csrf_client(desk_user)
    event, morning, _ = slotted_event()
    reg = factories.RegistrationFactory(event=event, slot=morning)
    if slot_id == "other event":
        slot_id = factories.SlotFactory().pk
    before = snapshot(event)
    response = post(
        client, SCAN, {"barcode": reg.barcode, "event_id": event.pk, "slot_id": slot_id}, token
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert snapshot(event) == before


def test_the_counters_route_counts_one_slot_when_asked(desk_user, client):
    client.force_login(desk_user)
    event, morning, afternoon = slotted_event()
    factories.RegistrationFactory(event=event, slot=morning, state="done")
    factories.RegistrationFactory(event=event, slot=afternoon, state="open")
    url = f"/desk/api/events/{event.pk}/counters"
    assert client.get(url).json() == {"event_id": event.pk, "attended": 1, "expected": 2}
    assert client.get(f"{url}?slot_id={afternoon.pk}").json() == {
        "event_id": event.pk,
        "slot_id": afternoon.pk,
        "attended": 0,
        "expected": 1,
    }
    foreign = factories.SlotFactory()
    for bad in (foreign.pk, "x"):
        refused = client.get(f"{url}?slot_id={bad}")
        assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid_slot")


def test_the_scanner_page_of_a_multi_slot_event_chooses_its_slot(desk_user, client):
    client.force_login(desk_user)
    event, morning, afternoon = slotted_event()
    factories.RegistrationFactory(event=event, slot=morning, state="done")
    factories.RegistrationFactory(event=event, slot=afternoon, state="open")
    page = client.get(f"/desk/{event.pk}/").content.decode()
    assert '<select id="slot" name="slot">' in page
    assert f'<option value="{afternoon.pk}">{afternoon}</option>' in page
    assert "data-slot-id" not in page
    assert 'id="count-attended">1<' in page and 'id="count-expected">2<' in page

    chosen = client.get(f"/desk/{event.pk}/?slot={afternoon.pk}").content.decode()
    assert f'data-slot-id="{afternoon.pk}"' in chosen
    assert f'<option value="{afternoon.pk}" selected>' in chosen
    assert 'id="count-attended">0<' in chosen and 'id="count-expected">1<' in chosen
    assert 'id="desk-texts" type="application/json"' in chosen

    foreign = factories.SlotFactory()
    assert client.get(f"/desk/{event.pk}/?slot={foreign.pk}").status_code == 404
    assert client.get(f"/desk/{event.pk}/?slot=abc").status_code == 404
    single = client.get(f"/desk/{ongoing_event().pk}/").content.decode()
    assert 'id="slot"' not in single


def test_the_index_leaves_out_every_closed_event_whatever_its_stage_is_called(desk_user, client):
    from events.services import reference

    client.force_login(desk_user)
    cancelled = factories.stage("Cancelled")
    reference.update_stage(stage=cancelled, actor="tests", name="Called off")
    ongoing_event(name="Renamed cancelled stage", stage=cancelled)
    ongoing_event(name="Ended early", stage=factories.stage("Ended"))
    ongoing_event(name="Still on")
    html = client.get("/desk/").content.decode()
    assert "Still on" in html
    assert "Renamed cancelled stage" not in html and "Ended early" not in html


# --- every answer of /desk/api/ is JSON --------------------------------------------------


def assert_json_error(response, status: int, code: str) -> None:
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code and error["message"]


@pytest.mark.parametrize("content_type", ["application/json", "application/x-www-form-urlencoded"])
def test_an_oversized_body_is_413_json_and_writes_nothing(desk_user, settings, content_type):
    client, token = csrf_client(desk_user)
    reg = factories.RegistrationFactory(event=ongoing_event())
    before = snapshot(reg.event)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000
    body = json.dumps({"barcode": reg.barcode, "padding": "x" * 2_000})
    if content_type != "application/json":
        body = f"barcode={reg.barcode}&padding={'x' * 2_000}"
    response = client.post(SCAN, body, content_type=content_type, HTTP_X_CSRFTOKEN=token)
    assert_json_error(response, 413, "payload_too_large")
    assert snapshot(reg.event) == before


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_a_body_not_declared_json_is_415_json_and_writes_nothing(desk_user, content_type):
    client, token = csrf_client(desk_user)
    reg = factories.RegistrationFactory(event=ongoing_event())
    before = snapshot(reg.event)
    body = json.dumps({"barcode": reg.barcode})  # JSON inside, but not declared so
    response = client.post(SCAN, body, content_type=content_type, HTTP_X_CSRFTOKEN=token)
    assert_json_error(response, 415, "unsupported_media_type")
    assert snapshot(reg.event) == before


@pytest.mark.parametrize("signed_in", [True, False])
@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize(
    "path", ["/desk/api/", "/desk/api/nope", "/desk/api/scan/", "/desk/api/events/x/counters"]
)
def test_an_unknown_api_path_is_404_json_signed_in_or_not(desk_user, signed_in, method, path):
    client = Client(enforce_csrf_checks=True)
    if signed_in:
        client.force_login(desk_user)
    assert_json_error(getattr(client, method)(path), 404, "not_found")


def test_an_unexpected_error_is_500_json(desk_user, monkeypatch):
    from desk import views

    def broken(**kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(views, "register_attendee", broken)
    client, token = csrf_client(desk_user)
    response = post(client, SCAN, {"barcode": "1"}, token)
    assert_json_error(response, 500, "server_error")
    assert "a bug" not in response.content.decode()


def test_the_other_refusals_answer_json_too(desk_user):
    """Not JSON, no CSRF token, nobody signed in: each in the pinned error shape."""
    client, token = csrf_client(desk_user)
    response = client.post(
        SCAN, "{not json", content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert_json_error(response, 400, "invalid_value")
    assert_json_error(post(client, SCAN, {"barcode": "1"}), 403, "csrf_failed")
    assert_json_error(post(Client(), SCAN, {"barcode": "1"}), 403, "forbidden")
    assert_json_error(
        Client().get(f"/desk/api/events/{ongoing_event().pk}/counters"), 403, "forbidden"
    )

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
def test_the_one_query_permission_check_answers_as_django_s_has_perm(grant):
    """desk.views.can_use_desk asks one fixed statement; it must answer what
    `is_active and is_staff and has_perm(PERMISSION)` answers through Django's model backend,
    for every way a permission can be held or not."""
    from django.contrib.auth.models import Permission

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
    assert can_use_desk(type(user).objects.get(pk=user.pk)) == expected
    assert expected == (grant in ("desk group", "direct", "superuser"))


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

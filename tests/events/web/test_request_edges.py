"""Requests at the edge of what the framework parses: JSON nesting (events.inputs),
session cookies Django could not have issued (config.sessions), form bodies in another charset
(config/urls.py's error pages). Each once answered 500 (tests/probes/test_route_fuzz.py)."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.test import Client

from events import inputs
from tests.events import factories


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- JSON nesting ------------------------------------------------------------------------------


def test_load_json_keeps_documents_up_to_the_depth_limit():
    assert inputs.load_json(nested(inputs.MAX_JSON_DEPTH)) == json.loads(
        nested(inputs.MAX_JSON_DEPTH)
    )
    deep_object = '{"a": ' * inputs.MAX_JSON_DEPTH + "1" + "}" * inputs.MAX_JSON_DEPTH
    assert inputs.load_json(deep_object.encode())["a"]["a"]["a"] is not None
    assert inputs.load_json(b'"text"') == "text" and inputs.load_json(b"7") == 7


@pytest.mark.parametrize(
    "body",
    [
        nested(inputs.MAX_JSON_DEPTH + 1),
        '{"a": ' * (inputs.MAX_JSON_DEPTH + 1) + "1" + "}" * (inputs.MAX_JSON_DEPTH + 1),
        '{"ok": [1, {"x": ' + nested(inputs.MAX_JSON_DEPTH) + "}]}",  # deep in a side branch
        nested(100_000),  # past the parser's own recursion limit
    ],
    ids=["list", "object", "side branch", "100,000"],
)
def test_load_json_refuses_deeper_nesting_as_not_json(body):
    with pytest.raises(ValueError, match="nested too deeply"):
        inputs.load_json(body.encode())


def test_load_json_refuses_bytes_that_are_not_utf8():
    with pytest.raises(ValueError):
        inputs.load_json(b'{"name": "\xff"}')


@pytest.mark.django_db
def test_the_desk_api_refuses_a_deep_body_as_invalid_value(client):
    user = factories.UserFactory(username="deep-door")
    user.groups.add(Group.objects.get(name="Event desk"))
    client.force_login(user)
    response = client.post("/desk/api/scan", nested(5_000), content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_value"


# --- session keys ------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "cookie", ['"abcdefgh\\000ijkl"', '"ABCDEFGHIJKL"', '"ab\\377\\376cdefgh"', '"x;y=1"']
)
def test_a_session_key_django_could_not_have_made_is_no_session(cookie):
    client = Client()
    response = client.get("/desk/", headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"})
    assert response.status_code == 302  # to the login: an anonymous visitor, no 500
    assert "/login" in response["Location"]


@pytest.mark.django_db
def test_a_session_made_by_django_still_logs_in():
    user = factories.UserFactory(username="still-door")
    user.groups.add(Group.objects.get(name="Event desk"))
    client = Client()
    client.force_login(user)  # a session row keyed as Django makes keys
    assert settings.SESSION_ENGINE == "config.sessions"
    assert client.get("/desk/").status_code == 200


# --- form bodies in another charset ------------------------------------------------------------

FORM_LATIN1 = "application/x-www-form-urlencoded; charset=latin-1"


@pytest.mark.django_db
def test_a_form_in_another_charset_answers_400_where_csrf_is_checked():
    event = factories.EventFactory(is_published=True)
    client = Client(enforce_csrf_checks=True)
    client.cookies["csrftoken"] = "a" * 32
    response = client.post(f"/events/{event.pk}/", b"name=Ada", content_type=FORM_LATIN1)
    assert response.status_code == 400
    assert b"Bad Request (400)" in response.content


@pytest.mark.django_db
def test_the_desk_api_answers_a_form_in_another_charset_with_json():
    client = Client(enforce_csrf_checks=True)
    user = factories.UserFactory(username="charset-door")
    user.groups.add(Group.objects.get(name="Event desk"))
    client.force_login(user)
    client.cookies["csrftoken"] = "a" * 32
    response = client.post(
        "/desk/api/scan",
        b"barcode=1",
        content_type=FORM_LATIN1,
        headers={"X-CSRFToken": "a" * 32},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_value"


@pytest.mark.django_db
def test_the_error_pages_still_render(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert b"Not Found" in response.content

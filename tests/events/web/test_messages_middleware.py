"""config.messages.LazyMessageMiddleware: Django's message middleware with the storage built on
first use. A request that never touches messages builds none and changes nothing; one that
does behaves as with Django's own middleware."""

from __future__ import annotations

from unittest import mock

import pytest
from django.conf import settings
from django.contrib import messages
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpResponse
from django.test import RequestFactory

from config import messages as lazy_messages

pytestmark = pytest.mark.django_db


def _request(cookies: dict[str, str] | None = None):
    request = RequestFactory().get("/")
    request.COOKIES.update(cookies or {})
    SessionMiddleware(lambda r: HttpResponse()).process_request(request)
    return request


def _run(middleware_class, request, view) -> HttpResponse:
    middleware = middleware_class(lambda r: HttpResponse())
    middleware.process_request(request)
    response = view(request) or HttpResponse()
    return middleware.process_response(request, response)


def test_it_is_the_configured_message_middleware():
    assert "config.messages.LazyMessageMiddleware" in settings.MIDDLEWARE
    assert "django.contrib.messages.middleware.MessageMiddleware" not in settings.MIDDLEWARE


def test_a_request_that_never_uses_messages_builds_no_storage_and_sets_no_cookie():
    with mock.patch.object(
        lazy_messages, "default_storage", wraps=lazy_messages.default_storage
    ) as built:
        response = _run(lazy_messages.LazyMessageMiddleware, _request(), lambda r: None)
    assert built.call_count == 0
    assert "messages" not in response.cookies


@pytest.mark.parametrize(
    "middleware_class", [MessageMiddleware, lazy_messages.LazyMessageMiddleware]
)
def test_messages_are_stored_shown_once_and_kept_until_read(middleware_class):
    def add(request):
        messages.add_message(request, messages.INFO, "Saved.")

    stored = _run(middleware_class, _request(), add)
    cookie = stored.cookies["messages"].value
    assert cookie

    # A page that does not read them leaves them for a later one.
    untouched = _run(middleware_class, _request({"messages": cookie}), lambda r: None)
    assert "messages" not in untouched.cookies

    shown: list[str] = []

    def read(request):
        shown.extend(str(m) for m in messages.get_messages(request))

    cleared = _run(middleware_class, _request({"messages": cookie}), read)
    assert shown == ["Saved."]
    assert cleared.cookies["messages"]["max-age"] == 0  # read once: the cookie goes

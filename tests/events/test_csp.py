"""Content-Security-Policy (django-csp, issue 9 finding 6) on public pages and the admin: scripts
only from this origin, nothing may frame the site."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.events import factories


def policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    directives = [part.strip().split() for part in header.split(";") if part.strip()]
    return {name: values for name, *values in directives}


def assert_strict(response) -> None:
    directives = policy(response)
    assert directives["script-src"] == ["'self'"]  # no inline or eval'd script
    assert directives["default-src"] == ["'self'"]
    assert directives["object-src"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'none'"]


@pytest.mark.django_db
def test_public_pages_carry_the_policy(client):
    event = factories.EventFactory(is_published=True)
    for path in (
        reverse("event-list"),
        reverse("event-detail", kwargs={"event_id": event.pk}),
        "/my-tickets/not-a-token/",
        "/healthz",
    ):
        response = client.get(path)
        assert response.status_code < 500, path
        assert_strict(response)


@pytest.mark.django_db
def test_admin_pages_carry_the_policy_and_still_render(client):
    assert_strict(client.get("/admin/login/"))
    client.force_login(factories.UserFactory(username="csp-admin", is_superuser=True))
    for path in ("/admin/", "/admin/events/event/", "/admin/events/registration/add/"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert_strict(response)
        # The admin's scripts are static files of this origin, never inline code.
        body = response.content.decode()
        assert "<script>" not in body and "javascript:" not in body, path

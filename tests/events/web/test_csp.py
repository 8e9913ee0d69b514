"""Content-Security-Policy (django-csp) on public pages and the admin: scripts
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


# --- config.csp: the kept policy text sets the headers exactly as django-csp does ---------------


def _headers(middleware_class, request_factory, path, make_response, nonce=False):
    from django.http import HttpResponse

    middleware = middleware_class(lambda request: HttpResponse())
    request = request_factory.get(path)
    middleware.process_request(request)
    if nonce:
        str(request.csp_nonce)  # a template asking for the nonce
    response = middleware.process_response(request, make_response())
    return {
        name: response.get(name)
        for name in ("Content-Security-Policy", "Content-Security-Policy-Report-Only")
    }


def _responses():
    from csp.decorators import csp_exempt, csp_replace, csp_update
    from django.http import HttpResponse, HttpResponseNotFound

    def decorated(decorator):
        return lambda: decorator(lambda request: HttpResponse())(None)

    return {
        "plain": HttpResponse,
        "not found": HttpResponseNotFound,
        "header already set": lambda: HttpResponse(
            headers={"Content-Security-Policy": "default-src 'none'"}
        ),
        "exempt": decorated(csp_exempt()),
        "exempt report-only": decorated(csp_exempt(REPORT_ONLY=True)),
        "updated": decorated(csp_update({"img-src": ["https://cdn.example.org"]})),
        "replaced": decorated(csp_replace({"script-src": ["'none'"]})),
    }


REPORT_ONLY = {"DIRECTIVES": {"default-src": ["'self'"], "report-uri": "/csp-report"}}
EXCLUDED = {
    "EXCLUDE_URL_PREFIXES": ["/skip/"],
    "DIRECTIVES": {"default-src": ["'self'"], "script-src": ["'self'"]},
}


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("nonce", [False, True])
@pytest.mark.parametrize("path", ["/ics/x.ics", "/skip/page"])
@pytest.mark.parametrize(
    "policies",
    [
        {},
        {"CONTENT_SECURITY_POLICY_REPORT_ONLY": REPORT_ONLY},
        {"CONTENT_SECURITY_POLICY": EXCLUDED},
    ],
    ids=["project", "with report-only", "excluded prefix"],
)
def test_the_kept_policy_sets_the_headers_as_django_csp(rf, settings, policies, path, nonce, debug):
    from csp.middleware import CSPMiddleware as Library

    from config.csp import CSPMiddleware as Kept

    settings.DEBUG = debug
    for name, value in policies.items():
        setattr(settings, name, value)
    for label, make_response in _responses().items():
        expected = _headers(Library, rf, path, make_response, nonce)
        # Twice: the first response builds the text, the second uses the kept one.
        for _ in range(2):
            assert _headers(Kept, rf, path, make_response, nonce) == expected, label


def test_a_changed_policy_setting_is_used_at_once(rf, settings):
    from django.http import HttpResponse

    from config.csp import CSPMiddleware

    before = _headers(CSPMiddleware, rf, "/", HttpResponse)["Content-Security-Policy"]
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"default-src": ["'none'"]}}
    after = _headers(CSPMiddleware, rf, "/", HttpResponse)["Content-Security-Policy"]
    assert "script-src 'self'" in before
    assert after == "default-src 'none'"


def test_a_nonce_asked_for_after_the_header_is_refused(rf):
    from csp.exceptions import CSPNonceError
    from django.http import HttpResponse

    from config.csp import CSPMiddleware

    middleware = CSPMiddleware(lambda request: HttpResponse())
    request = rf.get("/")
    middleware.process_request(request)
    middleware.process_response(request, HttpResponse())
    with pytest.raises(CSPNonceError):
        str(request.csp_nonce)

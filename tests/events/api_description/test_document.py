"""The API description (events.openapi): a valid OpenAPI 3.1 document, served and cacheable; every
public JSON route declared and every declaration routed; each request schema naming exactly the
fields its view reads; the `webhooks` map other apps fill.

The field check records what a view reads: the JSON body's objects (every JSON route parses
with `events.inputs.load_json`, replaced here by a reader that hands out recording mappings) and
the query string (a recording QueryDict), on requests that go through the view's whole parsing
(a valid registration, a signed order with both line kinds, …). A view that reads a new field
without its declaration, or a declaration naming a field no view reads, fails
`test_each_request_schema_names_exactly_the_fields_its_view_reads`.
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.http import JsonResponse, QueryDict
from django.test import RequestFactory
from django.urls import path, resolve
from openapi_spec_validator import OpenAPIV31SpecValidator

from events import inputs, openapi
from events.openapi import api
from tests.booths import factories as booth_factories
from tests.events import factories
from tests.seams.host import new_secret, signed_headers

# Routes that answer no JSON (pages, files, forms), by URL name: what they answer instead.
NOT_JSON = {
    "event-list": "the public event list (HTML)",
    "event-detail": "the event page and its registration form (HTML)",
    "waitlist-join": "the event page's waiting-list form (HTML)",
    "my-tickets": "the tickets page (HTML)",
    "my-tickets-cancel": "the self-service cancellation step (HTML)",
    "my-tickets-pdf": "a registration's PDF ticket (application/pdf)",
    "ics": "the calendar file (text/calendar)",
    "waitlist-offer": "the waiting-list offer page (HTML)",
    "api-docs": "this description's viewer (HTML)",
    "desk:index": "the desk's event choice (HTML)",
    "desk:scanner": "the scanner page (HTML)",
}
# JSON answers that are no operation of their own.
NO_OPERATION = {
    "desk:api-index": "the desk API's JSON 404 for a path that names no route",
    "desk:api-unknown": "the desk API's JSON 404 for a path that names no route",
}


def _admin(route: openapi.Route) -> bool:
    return route.name.startswith("admin:") or (route.path or "").startswith("/admin/")


def undeclared_json_routes(urlconf: Any = None) -> list[str]:
    """The routes that are neither declared nor known to answer something else than an
    operation's JSON (the admin aside)."""
    return sorted(
        route.name or str(route.path)
        for route in openapi.routes(urlconf)
        if not route.operations
        and not _admin(route)
        and route.name not in NOT_JSON
        and route.name not in NO_OPERATION
    )


def unrouted_declarations(urlconf: Any = None) -> list[str]:
    """The declared operations whose view no route of `urlconf` serves."""
    routed = {id(op) for route in openapi.routes(urlconf) for op in route.operations}
    return sorted(op.operation_id for op in api.operations if id(op) not in routed)


@pytest.fixture
def restored_registry():
    """Whatever a test declares or registers is gone after it."""
    kept = (
        list(api.operations),
        dict(api.schemas),
        dict(api.webhooks),
        dict(api.tags),
        dict(api.security_schemes),
    )
    yield api
    api.operations[:] = kept[0]
    for into, before in zip(
        (api.schemas, api.webhooks, api.tags, api.security_schemes), kept[1:], strict=True
    ):
        into.clear()
        into.update(before)
    openapi.document_bytes.cache_clear()


# --- the document ------------------------------------------------------------------------------


def test_the_document_is_valid_openapi_3_1():
    document = openapi.document()
    OpenAPIV31SpecValidator(document).validate()
    assert document["openapi"] == "3.1.0"
    assert set(document["paths"]) == {
        "/api/v1/events/{event_id}/registrations",
        "/api/v1/events/{event_id}/waitlist",
        "/api/v1/catalog/linked-products",
        "/api/v1/catalog/booths",
        "/seams/v1/sale",
        "/desk/api/scan",
        "/desk/api/confirm",
        "/desk/api/events/{event_id}/counters",
        "/desk/api/events/{event_id}/snapshot",
        "/healthz",
        "/api/v1/openapi.json",
    }


def test_error_statuses_come_from_the_codes():
    intake = openapi.document()["paths"]["/api/v1/events/{event_id}/registrations"]["post"]
    responses = intake["responses"]
    assert set(responses) == {"201", "400", "404", "408", "409", "413", "415", "429", "500", "503"}
    codes_409 = responses["409"]["content"]["application/json"]["schema"]["allOf"][1]
    assert set(codes_409["properties"]["error"]["properties"]["code"]["enum"]) == {
        "registrations_closed",
        "sale_not_started",
        "sale_ended",
        "priced_ticket",
        "sold_out",
    }
    assert responses["429"]["headers"]["Retry-After"]["required"] is True
    assert intake["parameters"][0]["name"] == "Idempotency-Key"
    path_item = openapi.document()["paths"]["/api/v1/events/{event_id}/registrations"]
    assert path_item["parameters"][0]["name"] == "event_id"


def test_an_unknown_error_code_is_refused(restored_registry):
    @api.operation("get", operation_id="throwaway", summary="x", errors=("no_such_code",))
    def view(request):
        raise AssertionError("never called")

    with pytest.raises(ValueError, match="no_such_code"):
        view.openapi_operations[0].as_dict()


@pytest.mark.django_db
def test_the_document_is_served_cacheable(client):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "public, max-age=300"
    assert json.loads(response.content) == openapi.document()
    again = client.get("/api/v1/openapi.json", HTTP_IF_NONE_MATCH=response["ETag"])
    assert again.status_code == 304
    refused = client.post("/api/v1/openapi.json")
    assert (refused.status_code, refused["Allow"]) == (405, "GET")
    assert refused.json()["error"]["code"] == "method_not_allowed"


# --- webhooks ----------------------------------------------------------------------------------

THROWAWAY_WEBHOOK = {
    "post": {
        "summary": "A throwaway message",
        "requestBody": {
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "required": ["type"],
                        "properties": {"type": {"const": "throwaway.sent"}},
                    }
                }
            }
        },
        "responses": {"200": {"description": "Received."}},
    }
}


def test_an_empty_or_filled_webhooks_map_validates(restored_registry):
    api.webhooks.clear()
    empty = openapi.document()
    assert empty["webhooks"] == {}
    OpenAPIV31SpecValidator(empty).validate()

    openapi.register_schema("ThrowawayMessage", {"type": "object"})
    openapi.register_webhook("throwaway.sent", THROWAWAY_WEBHOOK)
    filled = openapi.document()
    OpenAPIV31SpecValidator(filled).validate()
    assert filled["webhooks"] == {"throwaway.sent": THROWAWAY_WEBHOOK}
    assert "ThrowawayMessage" in filled["components"]["schemas"]
    assert b"throwaway.sent" in openapi.document_bytes()  # the served bytes are rebuilt


def test_a_name_is_registered_once(restored_registry):
    openapi.register_webhook("throwaway.sent", THROWAWAY_WEBHOOK)
    openapi.register_webhook("throwaway.sent", THROWAWAY_WEBHOOK)  # the same again: a no-op
    with pytest.raises(ValueError, match="registered already"):
        openapi.register_webhook("throwaway.sent", {"post": {"responses": {}}})
    with pytest.raises(ValueError, match="path item"):
        openapi.register_webhook("throwaway.other", {})


def test_the_registry_is_left_as_found():
    assert "throwaway.sent" not in api.webhooks
    assert "ThrowawayMessage" not in api.schemas
    assert not [op for op in api.operations if op.operation_id.startswith("throwaway")]


# --- routes and declarations ------------------------------------------------------------------


def test_every_public_json_route_is_declared_and_every_declaration_routed():
    assert undeclared_json_routes() == []
    assert unrouted_declarations() == []
    known = {route.name for route in openapi.routes()}
    assert set(NOT_JSON) | set(NO_OPERATION) <= known  # no stale entry


def _json_view(request):
    return JsonResponse({"ok": True})


def test_an_undeclared_json_route_fails_the_check():
    import config.urls

    throwaway = types.ModuleType("throwaway_urls")
    throwaway.urlpatterns = [
        *config.urls.urlpatterns,
        path("api/v1/throwaway", _json_view, name="throwaway"),
    ]
    assert undeclared_json_routes(throwaway) == ["throwaway"]


def test_a_declaration_no_route_serves_fails_the_check(restored_registry):
    @api.operation("get", operation_id="throwawayUnrouted", summary="Not routed")
    def unrouted(request):
        return JsonResponse({})

    assert unrouted_declarations() == ["throwawayUnrouted"]


def _sample_path(route: openapi.Route) -> str:
    assert route.path is not None
    filled = route.path
    for name, converter in route.converters.items():
        filled = filled.replace("{" + name + "}", "1" if "Int" in type(converter).__name__ else "x")
    return filled


@pytest.mark.django_db
def test_the_routes_listed_as_not_json_answer_no_json(client, settings):
    settings.EVENT_RATE_LIMITS = {"intake": (10**9, 60), "token": (10**9, 60)}
    factories.EventFactory(pk=1)
    for route in openapi.routes():
        if route.name not in NOT_JSON:
            continue
        for method in ("get", "post"):
            response = getattr(client, method)(_sample_path(route))
            kind = response.get("Content-Type", "")
            assert not kind.startswith("application/json"), (route.name, method, kind)


# --- the fields each view reads ----------------------------------------------------------------


class Reads:
    """The fields read, as paths (`attendees[].name`), through the recording containers."""

    def __init__(self) -> None:
        self.paths: set[str] = set()

    def wrap(self, value: Any, at: str) -> Any:
        if isinstance(value, dict):
            return ReadDict(self, at, {k: self.wrap(v, _join(at, k)) for k, v in value.items()})
        if isinstance(value, list):
            return [self.wrap(item, f"{at}[]") for item in value]
        return value


def _join(at: str, key: str) -> str:
    return f"{at}.{key}" if at else str(key)


class ReadDict(dict):
    """A dict that records each key asked for by name (iteration records nothing: a free map,
    such as the answers, is read that way)."""

    def __init__(self, reads: Reads, at: str, items: dict) -> None:
        super().__init__(items)
        self._reads, self._at = reads, at

    def _read(self, key: Any) -> None:
        self._reads.paths.add(_join(self._at, key))

    def __getitem__(self, key):
        self._read(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._read(key)
        return super().get(key, default)

    def __contains__(self, key) -> bool:
        self._read(key)
        return super().__contains__(key)


class ReadQuery(QueryDict):
    reads: Reads

    def get(self, key, default=None):
        self.reads.paths.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.reads.paths.add(key)
        return super().__getitem__(key)


def declared_fields(operation: dict[str, Any], components: dict[str, Any]) -> set[str]:
    """The body's property paths (through $ref, allOf/anyOf/oneOf, arrays) and the query
    parameters' names of one operation of the document."""
    fields = {p["name"] for p in operation.get("parameters", ()) if p["in"] == "query"}
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body is not None:
        fields |= set(_properties(body["schema"], "", components, set()))
    return fields


def _properties(schema: Any, at: str, components: dict, seen: set[str]) -> Iterator[str]:
    if not isinstance(schema, dict):
        return
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if (name, at) in seen:
            return
        yield from _properties(components["schemas"][name], at, components, seen | {(name, at)})
        return
    for keyword in ("allOf", "anyOf", "oneOf"):
        for branch in schema.get(keyword, ()):
            yield from _properties(branch, at, components, seen)
    for name, inner in schema.get("properties", {}).items():
        here = _join(at, name)
        yield here
        yield from _properties(inner, here, components, seen)
    if "items" in schema:
        yield from _properties(schema["items"], f"{at}[]", components, seen)


@pytest.fixture
def world(db, settings):
    settings.EVENT_RATE_LIMITS = {"intake": (10**9, 60), "token": (10**9, 60)}
    secret = new_secret()
    settings.EVENT_SEAM_SECRET = secret
    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event)
    question = factories.QuestionFactory(event=event)
    full = factories.EventFactory(seats_limited=True, seats_max=1)
    full_ticket = factories.TicketFactory(event=full)
    factories.RegistrationFactory(event=full, ticket=full_ticket)
    registration = factories.RegistrationFactory(event=event, ticket=ticket)
    booth = booth_factories.BoothFactory(event=event)
    user = factories.UserFactory(username="fields-door")
    user.groups.add(Group.objects.get(name="Event desk"))
    return types.SimpleNamespace(**locals())


def _requests(w) -> dict[str, list[tuple[str, str, Any, dict[str, str]]]]:
    """operationId → the requests (method, path, JSON body or query, headers) that go through the
    view's whole parsing."""
    attendee = {
        "name": "Ann",
        "email": "ann@example.org",
        "phone": "+32 2 555 01 01",
        "company_name": "ACME",
        "answers": {str(w.question.pk): "veggie"},
    }
    order = {
        "ref": "SO1",
        "version": 1,
        "amount_total": "10.00",
        "currency": "EUR",
        "partner": {"ref": "P1", "name": "Pat", "email": "pat@example.org", "phone": "1"},
        "utm": {"source": "shop", "medium": "mail", "campaign": "spring"},
        "lines": [
            {
                "ref": "SO1/1",
                "kind": "ticket",
                "ticket_id": w.ticket.pk,
                "slot_id": None,
                "quantity": 1,
                "price_total": "10.00",
                "attendees": [attendee],
            },
            {"ref": "SO1/2", "kind": "booth", "booth_ids": [w.booth.pk], "price_total": "5"},
        ],
    }
    partner = {"type": "partner.updated", "data": {"partner": order["partner"]}}
    event = w.event.pk
    return {
        "registerAttendees": [
            (
                "post",
                f"/api/v1/events/{event}/registrations",
                {
                    "ticket_id": w.ticket.pk,
                    "slot_id": None,
                    "attendees": [attendee],
                    "utm": {"source": "a", "medium": "b", "campaign": "c"},
                },
                {},
            )
        ],
        "joinWaitingList": [
            (
                "post",
                f"/api/v1/events/{w.full.pk}/waitlist",
                {"name": "Ann", "email": "ann@example.org", "ticket_id": w.full_ticket.pk},
                {},
            )
        ],
        "receiveSaleMessage": [
            ("post", "/seams/v1/sale", {"type": "order.confirmed", "data": {"order": order}}, {}),
            ("post", "/seams/v1/sale", partner, {}),
        ],
        "catalogLinkedProducts": [("get", "/api/v1/catalog/linked-products", {"event": event}, {})],
        "catalogBooths": [("get", "/api/v1/catalog/booths", {"event": event}, {})],
        "deskScan": [
            (
                "post",
                "/desk/api/scan",
                {"barcode": w.registration.barcode, "event_id": event, "slot_id": None},
                {},
            )
        ],
        "deskConfirm": [("post", "/desk/api/confirm", {"registration_id": w.registration.pk}, {})],
        "deskCounters": [("get", f"/desk/api/events/{event}/counters", {"slot_id": ""}, {})],
        "deskSnapshot": [("get", f"/desk/api/events/{event}/snapshot", {}, {})],
        "health": [("get", "/healthz", {}, {})],
        "openapiDocument": [("get", "/api/v1/openapi.json", {}, {})],
    }


def _read_by_view(w, monkeypatch, method: str, url: str, data: Any) -> tuple[set[str], int]:
    reads = Reads()
    loads = inputs.load_json
    monkeypatch.setattr(inputs, "load_json", lambda body: reads.wrap(loads(body), ""))
    factory = RequestFactory()
    if method == "get":
        request = factory.get(url)
        query = ReadQuery(mutable=True)
        query.reads = reads
        for key, value in data.items():
            query[key] = str(value)
        request.GET = query
    else:
        body = json.dumps(data).encode()
        headers = signed_headers(body, secret=w.secret) if url == "/seams/v1/sale" else {}
        request = factory.post(url, data=body, content_type="application/json", headers=headers)
    request.user = w.user
    request._dont_enforce_csrf_checks = True
    match = resolve(url)
    response = match.func(request, *match.args, **match.kwargs)
    return reads.paths, response.status_code


def test_each_request_schema_names_exactly_the_fields_its_view_reads(world, monkeypatch):
    document = openapi.document()
    operations = {
        op["operationId"]: op
        for item in document["paths"].values()
        for method, op in item.items()
        if method in openapi.METHODS
    }
    recipes = _requests(world)
    assert set(recipes) == set(operations)  # a new operation needs its requests here
    answers = {}
    for operation_id, requests in recipes.items():
        read: set[str] = set()
        for method, url, data, _ in requests:
            paths, status = _read_by_view(world, monkeypatch, method, url, data)
            read |= paths
            answers[(operation_id, url, len(answers))] = status
        declared = declared_fields(operations[operation_id], document["components"])
        assert read == declared, operation_id
    # Each request went through the view's parsing to a success (the reads are complete).
    assert all(status in (200, 201) for status in answers.values()), answers


def test_the_field_check_sees_a_field_read_without_its_declaration(world, monkeypatch):
    """A throwaway read of an undeclared field, as a view edited without its description."""
    from desk import views as desk_views

    body = desk_views._body

    def reads_more(request):
        parsed = body(request)
        parsed.get("lane")
        return parsed

    monkeypatch.setattr(desk_views, "_body", reads_more)
    document = openapi.document()
    scan = document["paths"]["/desk/api/scan"]["post"]
    read, _ = _read_by_view(
        world, monkeypatch, "post", "/desk/api/scan", {"barcode": "1", "event_id": None}
    )
    assert read - declared_fields(scan, document["components"]) == {"lane"}

"""Hostile input over every route of the project (hypothesis): breadth, not depth.

The routes are read from the URL conf itself (`get_resolver()`, walked recursively; Django's
admin and static files left out), so a new route is fuzzed without anyone listing it here. For
each route and each visitor (anonymous, and a staff user holding the desk's check-in
permission; each with and without CSRF enforcement) hypothesis builds requests from hostile
parts:

- path parameters: real ids and real capability tokens, huge / zero / non-ASCII "numbers", text
  with NUL and lone surrogates (percent-encoded as UTF-8, as they arrive on the wire), valid
  tokens truncated, extended or with one character changed, tokens of another purpose, and
  well-signed tokens whose claims have the wrong shape;
- query strings and form bodies with the routes' own field names and hostile values;
- JSON bodies: route-shaped objects with hostile values (NUL, `\\ud800` escapes, Arabic-Indic
  digits, bigint overflow, wrong types), lists / null / strings instead of objects, nesting
  1,000 to 100,000 levels deep, bodies past DATA_UPLOAD_MAX_MEMORY_SIZE, invalid UTF-8;
- odd headers (Idempotency-Key with NUL / a lone surrogate / 5,000 characters, bad and
  contradictory Content-Types, X-CSRFToken, Origin, X-Forwarded-For behind a trusted proxy,
  cookies), and every method.

Properties: no answer is a 5xx and no exception escapes the view (the test client re-raises
it); the JSON APIs that promise JSON answer JSON, errors in the pinned shape; a GET of a token
route is never cacheable; an anonymous visitor never gets a 2xx from the desk. The deep paths
are reached (a valid token answers 200, a real barcode scans, a valid registration is taken:
`test_the_valid_requests_reach_the_deep_paths`), so the fuzz is not only the 404 path.

The seam (tests/probes/test_seam_fuzz.py), the intake
(tests/events/intake/test_intake_properties.py) and the waiting list / self-cancel
(tests/events/attendee_pages/test_self_service_hostile.py) have their own in-depth fuzzers; this
file goes wide over every route instead.

Defects this file found, each fixed and kept here by its own deterministic test:
  D1  the desk's JSON verbs answered a 500 to a body nested deeper than the JSON parser's
      recursion limit; every JSON route now parses through `inputs.load_json`, which refuses
      nesting deeper than `inputs.MAX_JSON_DEPTH` as "not JSON";
  D2  the intake API answered a 500 to a valid registration with an Idempotency-Key whose body
      nested, in a field nobody reads, just under the parser's limit (`intake.fingerprint`'s
      json.dumps ran out of stack after the booking): the same depth limit refuses it first;
  D3  a session cookie holding an escaped NUL (`sessionid="abcdefgh\\000x"`, printable ASCII on
      the wire, unescaped by Django's cookie parser) made the database session lookup raise
      DataError, a 500 on every route that reads `request.user`: the session engine
      (config.sessions) treats a key Django could not have made as no key;
  D4  a POST declaring `application/x-www-form-urlencoded; charset=<not utf-8>` with a CSRF
      cookie, to any route that checks CSRF: Django's request.POST raises BadRequest without
      marking the parse as failed, and its 400 and 500 pages (`requires_csrf_token`) read it
      again and raised again, out of Django's handler: config/urls.py sets those pages without
      that decorator, and the desk API answers its JSON 400 `invalid_value`.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from datetime import timedelta
from itertools import count
from typing import Any
from unittest import mock
from urllib.parse import quote

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Group
from django.db import transaction
from django.test import Client
from django.urls import Resolver404, URLResolver, get_resolver, resolve
from django.urls.resolvers import RoutePattern
from django.utils import timezone
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from events import inputs, ratelimit
from events.models import WaitlistEntry
from events.services import capability, registrations, waitlist
from tests.events import factories
from tests.seams.host import new_secret, signed_headers

pytestmark = pytest.mark.django_db

SEAM_SECRET = new_secret()
FUZZ = settings(
    max_examples=15,
    deadline=None,
    database=None,  # no .hypothesis/ example store in the checkout
    # No shrinking: a failure is reported with the request as drawn (each defect found so far
    # has a minimal deterministic test below), and the file keeps to its time budget.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
_keys = count(1)

# --- the routes, from the URL conf ---------------------------------------------------------------

SKIPPED_PREFIXES = ("admin/", django_settings.STATIC_URL.lstrip("/"))
PARAMETER = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")


@dataclass(frozen=True)
class Route:
    name: str  # namespaced: "desk:api-scan"
    template: str  # the full route: "desk/api/events/<int:event_id>/counters"

    def __str__(self) -> str:
        return self.name


def _walk(patterns, prefix: str = "", namespace: str = ""):
    for entry in patterns:
        # Only path() routes: a regex route would need its own path builder here.
        assert isinstance(entry.pattern, RoutePattern), f"not a path() route: {entry.pattern!r}"
        route = prefix + str(entry.pattern)
        if route.startswith(SKIPPED_PREFIXES):
            continue
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _walk(entry.url_patterns, route, inner)
        else:
            yield Route(f"{namespace}{entry.name or ''}", route)


ROUTES = sorted(_walk(get_resolver().url_patterns), key=lambda r: r.name)
BY_NAME = {route.name: route for route in ROUTES}

# Routes whose every answer is JSON (their modules say so): the intake and waiting-list APIs
# (events.views_api.json_post) and the desk's JSON verbs (desk.views.desk_api).
JSON_ROUTES = {
    "api-intake",
    "api-waitlist",
    "desk:api-scan",
    "desk:api-confirm",
    "desk:api-counters",
}
# The capability-token routes, and the purpose of the token each one opens.
TOKEN_ROUTES = {
    "my-tickets": "tickets",
    "my-tickets-cancel": "tickets",
    "my-tickets-pdf": "tickets",
    "ics": "ics",
    "waitlist-offer": "offer",
}
KNOWN = {
    "healthz",
    "event-list",
    "event-detail",
    "waitlist-join",
    "catalog-linked-products",
    "seam-sale",
    "desk:index",
    "desk:scanner",
    *JSON_ROUTES,
    *TOKEN_ROUTES,
}


def test_the_enumeration_finds_every_known_public_route_and_no_admin():
    names = {route.name for route in ROUTES}
    assert names >= KNOWN, sorted(KNOWN - names)
    assert all(route.name for route in ROUTES), [r.template for r in ROUTES if not r.name]
    assert len(names) == len(ROUTES)  # no two routes under one name
    assert not any(route.template.startswith(SKIPPED_PREFIXES) for route in ROUTES)
    # each template builds a path that resolves back to its own route
    for route in ROUTES:
        path = "/" + PARAMETER.sub(
            lambda m: "7" if m["converter"] == "int" else "abc", route.template
        )
        assert resolve(path).view_name == route.name, (route, path)


# --- hostile values ------------------------------------------------------------------------------

NASTY = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "\udfff",
    "x\udc80y",
    "٣",  # Arabic-Indic three
    "١٢",
    "１２",  # fullwidth
    "²",
    "𝟏",
    "\u2028",
    "\ufeff1",
    "-1",
    "0",
    " 7 ",
    "1e3",
    "1.0",
    "0x10",
    "1_000",
    "9" * 30,
    str(2**63 - 1),
    str(2**63),
    "9" * 5_000,  # past Python's int-from-string digit limit
    "true",
    "null",
    "[]",
    "{}",
    "%00",
    "%",
    "%ZZ",
    "../..",
    "<script>alert(1)</script>",
    "'; SELECT 1; --",
    "a" * 5_000,
    "ada@exam\x00ple.org",
    "x" * 250 + "@example.org",
]
ANY_CHAR = st.characters(exclude_categories=())  # surrogates and controls included
HOSTILE_TEXT = st.one_of(st.text(ANY_CHAR, max_size=12), st.sampled_from(NASTY))
# Header values as a WSGI server hands them over: latin-1 text (the client's bytes, one each).
LATIN1_TEXT = st.one_of(
    st.text(st.characters(max_codepoint=0xFF), max_size=20),
    st.sampled_from(["\x00", "\xed\xa0\x80", "a" * 5_000, "1.2.3.4, 5.6.7.8", "::1", ""]),
)
# Cookie headers: what a browser could hold, and what Django's cookie parser unescapes
# (`"\\000"` in a quoted value becomes a NUL).
COOKIES = st.one_of(
    st.tuples(st.sampled_from(["sessionid", "csrftoken"]), LATIN1_TEXT).map(
        lambda t: f"{t[0]}={t[1]}"
    ),
    st.sampled_from(
        [
            'sessionid="abcdefgh\\000ijkl"',
            'sessionid="abcdefgh\\355\\240\\200"',
            'csrftoken="\\000"',
            "sessionid=" + "a" * 5_000,
            "sessionid=abcdefgh; sessionid=ijklmnop",
        ]
    ),
)
SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 2**63 - 1, 2**63, -(2**63) - 1]),
    st.floats(),  # NaN and the infinities included (Python's json writes and reads them)
    HOSTILE_TEXT,
)
JUNK = st.recursive(
    SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(ANY_CHAR, max_size=6), inner, max_size=3),
    ),
    max_leaves=8,
)
# Every field name some route reads from a body or a query string.
FIELDS = [
    "name",
    "email",
    "phone",
    "company_name",
    "ticket_id",
    "slot_id",
    "ticket",
    "slot",
    "attendees",
    "answers",
    "utm",
    "quantity",
    "barcode",
    "event_id",
    "registration_id",
    "registration",
    "cancelled",
    "event",
    "next",
    "idempotency_key",
    "csrfmiddlewaretoken",
    "a0-name",
    "a0-email",
    "a0-q1",
    "order-q1",
    "utm_source",
    "type",
    "data",
]


def wire(text: str) -> str:
    """Text percent-encoded as UTF-8 (a lone surrogate as its raw bytes), as it arrives."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def deep(depth: int, *, kind: str = "[") -> str:
    if kind == "[":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


# --- the world: real rows, so the deep paths run -----------------------------------------------


@dataclass
class World:
    event: Any  # published, a ticket, a question, registrations (one in a sale order)
    ticket: Any
    holder: Any
    full: Any  # sold out, its freed seat offered to a waiting entry
    entry: Any
    desk_event: Any  # ongoing, with a ticket to scan
    scanned: Any
    tokens: dict[str, str]  # purpose → a valid token
    clients: dict[str, Client]

    def ids(self) -> list[int]:
        return [
            self.event.pk,
            self.ticket.pk,
            self.holder.pk,
            self.full.pk,
            self.entry.pk,
            self.desk_event.pk,
            self.scanned.pk,
        ]


@pytest.fixture
def world(settings, actor) -> World:
    # Lifted limits: every request of the test client comes from one address.
    settings.EVENT_RATE_LIMITS = {scope: (10**9, 60) for scope in ratelimit.SCOPES}
    settings.EVENT_SEAM_SECRET = SEAM_SECRET
    # The test client's REMOTE_ADDR is the trusted proxy: X-Forwarded-For names the client (the
    # rate limiter's key), so hostile values of that header reach the limiter.
    settings.EVENT_TRUSTED_PROXY = "127.0.0.1"
    event = factories.EventFactory(seats_limited=True, seats_max=500)
    ticket = factories.TicketFactory(event=event)
    factories.QuestionFactory(event=event)
    (holder,) = registrations.register(
        event=event,
        ticket=ticket,
        attendees=[{"name": "Holder", "email": "holder@example.org"}],
        actor=actor,
    )
    factories.RegistrationFactory(event=event, ticket=ticket, sale_order_ref="SO-FUZZ-1")
    # a waiting-list offer: a sold-out event, one person waiting, a seat freed and offered
    full = factories.EventFactory(seats_limited=True, seats_max=1)
    (seat,) = registrations.register(
        event=full, attendees=[{"name": "Seat", "email": "seat@example.org"}], actor=actor
    )
    joined = waitlist.join(event=full, name="Waiting", email="wait@example.org", actor="public")
    registrations.cancel(registration=seat, actor=actor)
    waitlist.offer_freed_seats(event=full)
    entry = WaitlistEntry.objects.get(pk=joined.entry.pk)
    assert entry.state == "offered"
    # an ongoing event at the desk, with a ticket to scan
    begin = timezone.now() - timedelta(hours=1)
    desk_event = factories.EventFactory(date_begin=begin, date_end=begin + timedelta(hours=8))
    scanned = factories.RegistrationFactory(event=desk_event, barcode="4000000000042")

    desk_user = factories.UserFactory(username="fuzz-desk")
    desk_user.groups.add(Group.objects.get(name="Event desk"))
    clients = {"anonymous": Client(), "anonymous-csrf": Client(enforce_csrf_checks=True)}
    for key, client in (
        ("desk", Client()),
        ("desk-csrf", Client(enforce_csrf_checks=True)),
        ("desk-quiet", Client(raise_request_exception=False)),  # an exception: a 500 answer
    ):
        client.force_login(desk_user)
        clients[key] = client
    tokens = {
        "tickets": capability.mint(purpose="tickets", subject=holder),
        "ics": capability.mint(purpose="ics", subject=holder),
        "order": capability.mint(purpose="order", subject="SO-FUZZ-1"),
        "offer": capability.mint(purpose="offer", subject=entry),
    }
    return World(event, ticket, holder, full, entry, desk_event, scanned, tokens, clients)


@pytest.fixture(autouse=True)
def _no_celery():
    """No task leaves a test (a registration, a cancel or an offer nudges a pass)."""
    with mock.patch("events.services.nudge.publish"):
        yield


def real_path(route: Route, world: World) -> str:
    """The route's path with real parameters: the route's own valid token, a real event."""
    event = world.desk_event if route.name.startswith("desk:") else world.event

    def value(match: re.Match) -> str:
        if match["converter"] == "int":
            return str(event.pk)
        return world.tokens[TOKEN_ROUTES.get(route.name, "tickets")]

    return "/" + PARAMETER.sub(value, route.template)


# --- strategies that know the world --------------------------------------------------------------


def signed_claims() -> st.SearchStrategy[str]:
    """Tokens signed with the real secret whose claims have the wrong shape: only a holder of
    the secret makes them, but an old format or a bug in `mint` would. Text subjects are text
    the database holds (`mint` reads them from it; the seam refuses NUL and lone surrogates in
    an order ref): an `order` claim naming "a\\x00b" is a 500 (the ORM lookup raises DataError),
    but no one without the secret can make one."""
    storable = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(),
        st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00")),
        st.sampled_from([text for text in NASTY if inputs.storable(text)]),
    )
    claim = st.fixed_dictionaries(
        {},
        optional={
            "f": st.sampled_from([1, 2, 0, "1", None, True]),
            "s": storable | st.lists(st.integers(), max_size=2),
            "v": st.sampled_from([0, 1, -1, 2**70, "1", None, 1.5, True]),
        },
    )
    purpose = st.sampled_from(capability.PURPOSES)
    return st.tuples(purpose, claim | st.lists(storable, max_size=3)).map(
        lambda pair: capability._signer(pair[0]).sign_object(pair[1])
    )


def tokens(world: World) -> st.SearchStrategy[str]:
    valid = st.sampled_from(sorted(world.tokens.values()))

    @st.composite
    def mutated(draw) -> str:
        token = draw(valid)
        how = draw(st.sampled_from(["cut", "add", "swap", "case", "sep", "parts", "prefix"]))
        if how == "cut":
            return token[: draw(st.integers(0, len(token) - 1))]
        if how == "add":
            return token + draw(HOSTILE_TEXT | st.sampled_from(["=", ":", "a", ".ics"]))
        if how == "swap":
            at = draw(st.integers(0, len(token) - 1))
            return token[:at] + draw(ANY_CHAR) + token[at + 1 :]
        if how == "case":
            return token.swapcase()
        if how == "sep":
            return token.replace(":", draw(st.sampled_from(["::", "", ";", ":\x00"])), 1)
        if how == "parts":
            return ":".join(reversed(token.split(":")))
        return draw(HOSTILE_TEXT) + token

    return st.one_of(valid, mutated(), mutated(), signed_claims(), HOSTILE_TEXT.filter(bool))


def segment(converter: str, world: World) -> st.SearchStrategy[str]:
    """One path segment for a parameter of this converter, already on the wire."""
    if converter == "int":
        return st.one_of(
            st.sampled_from(world.ids()).map(str),
            st.sampled_from(["0", "00", "1", str(2**31), str(2**63 - 1), str(2**63), "9" * 40]),
            st.just("9" * 5_000),
            st.integers(0, 2**80).map(str),
            HOSTILE_TEXT.map(wire),  # no match for [0-9]+: the resolver's 404
        )
    return tokens(world).map(wire)


def json_values(world: World) -> st.SearchStrategy[Any]:
    real = st.sampled_from(
        [*world.ids(), *(str(i) for i in world.ids()), world.scanned.barcode, " 4000000000042\n"]
    )
    value = st.one_of(real, JUNK, JUNK)
    attendee = st.fixed_dictionaries(
        {}, optional={f: value for f in ("name", "email", "phone", "company_name", "answers")}
    )
    shaped = st.fixed_dictionaries(
        {},
        optional={
            **{f: value for f in FIELDS},
            "attendees": st.lists(attendee | JUNK, max_size=3) | JUNK,
        },
    )
    return st.one_of(shaped, shaped, JUNK)


def full_body(route_name: str, world: World, nested: str) -> bytes:
    """A request body the route takes (or refuses only late), with `nested` (raw JSON) in a
    field nobody reads."""
    document: dict[str, Any] = {
        "ticket_id": world.ticket.pk,
        "attendees": [{"name": "Deep", "email": "deep@example.org"}],
        "name": "Deep",
        "email": "deep@example.org",
        "barcode": world.scanned.barcode,
        "event_id": world.desk_event.pk,
        "registration_id": world.scanned.pk,
    }
    if route_name == "api-waitlist":
        document["ticket_id"] = None  # the sold-out event has no ticket
    if route_name == "seam-sale":
        partner = {"ref": "P-FUZZ", "name": "Pat", "email": "pat@example.org"}
        document = {"type": "partner.updated", "data": {"partner": partner}}
    document["x"] = "__NESTED__"
    return json.dumps(document).replace('"__NESTED__"', nested).encode()


def json_body(route: Route, world: World) -> st.SearchStrategy[bytes]:
    plain = json_values(world).map(lambda v: json.dumps(v, ensure_ascii=True).encode())
    nested = st.tuples(
        st.sampled_from([1_000, 5_000, 100_000]),
        st.sampled_from(["[", "{"]),
        st.sampled_from(["", "barcode", "attendees", "name", "utm"]),
    ).map(lambda t: f'{{"{t[2]}": {deep(t[0], kind=t[1])}}}' if t[2] else deep(t[0], kind=t[1]))
    # Near the parser's recursion limit (hypothesis raises it while a test runs; where exactly
    # the parser stops depends on the stack), in a field nobody reads: parsed, then carried on.
    # test_nesting_just_under_the_parser_limit_is_not_a_500 aims at the limit exactly.
    near_limit = st.integers(-700, 0).map(
        lambda k: full_body(route.name, world, deep(sys.getrecursionlimit() + k))
    )
    return st.one_of(plain, plain, plain, nested.map(str.encode), near_limit)


def form_body(world: World) -> st.SearchStrategy[bytes]:
    key = st.sampled_from(FIELDS) | HOSTILE_TEXT
    value = HOSTILE_TEXT | st.sampled_from([str(i) for i in world.ids()])
    pairs = st.lists(st.tuples(key, value), max_size=6)
    return pairs.map(lambda ps: "&".join(f"{wire(k)}={wire(v)}" for k, v in ps).encode())


OVERSIZED = b'{"name": "' + b"x" * (django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1) + b'"}'
RAW = st.one_of(
    st.binary(max_size=64),
    st.sampled_from(
        [
            b"\xff\xfe\x00\x00",
            b'{"name": "\xed\xa0\x80"}',  # a surrogate as raw UTF-8 bytes (invalid UTF-8)
            b'{"name": "\xc3"}',
            b"\x00" * 16,
            b'"\\ud800"',
            b'{"barcode": "\\ud800", "event_id": "\\u0663"}',
            b'{"registration_id": 1e400, "barcode": "\\u0000"}',
            b"NaN",
            b"[1, 2",
            OVERSIZED,
        ]
    ),
)
CONTENT_TYPES = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/json; charset=utf-16",
        "application/json; charset=bogus",
        "application/x-www-form-urlencoded",
        "application/x-www-form-urlencoded; charset=utf-16",
        "multipart/form-data",  # no boundary
        "multipart/form-data; boundary=xyz",
        "text/plain",
        "",
        "application/json\x00",
        "application/\ud800",
        "*/*",
    ]
)
METHODS = st.sampled_from(["GET", "GET", "POST", "POST", "POST", "PUT", "DELETE", "PATCH", "HEAD"])


@st.composite
def requests(draw, route: Route, world: World) -> dict[str, Any]:
    path = "/" + PARAMETER.sub(
        lambda m: draw(segment(m["converter"] or "str", world)), route.template
    )
    if draw(st.booleans()):
        key = st.sampled_from(FIELDS) | HOSTILE_TEXT
        value = HOSTILE_TEXT | st.sampled_from([str(i) for i in world.ids()])
        pairs = draw(st.lists(st.tuples(key, value), min_size=1, max_size=4))
        path += "?" + "&".join(f"{wire(k)}={wire(v)}" for k, v in pairs)
    kind = draw(st.sampled_from(["none", "json", "json", "form", "raw"]))
    body = {
        "none": st.just(b""),
        "json": json_body(route, world),
        "form": form_body(world),
        "raw": RAW,
    }[kind]
    data = draw(body)
    default_type = {
        "json": "application/json",
        "form": "application/x-www-form-urlencoded",
    }.get(kind, "application/octet-stream")
    content_type = draw(st.just(default_type) | CONTENT_TYPES)
    headers: dict[str, str] = {}
    if draw(st.booleans()):
        # The one header a service reads itself: the test client also passes a lone surrogate,
        # which no HTTP server would (it hands over latin-1).
        headers["Idempotency-Key"] = draw(
            HOSTILE_TEXT | LATIN1_TEXT | st.sampled_from(["k" * 5_000, "key-1", "key-1"])
        )
    for name in ("X-CSRFToken", "X-Forwarded-For", "Origin", "Accept"):
        if draw(st.integers(0, 3)) == 0:
            headers[name] = draw(LATIN1_TEXT)
    if draw(st.integers(0, 5)) == 0:
        headers["Cookie"] = draw(COOKIES)  # replaces the client's own cookies (its session)
    # The host signs text: a body that is not UTF-8 goes unsigned.
    if route.name == "seam-sale" and _is_utf8(data) and draw(st.booleans()):
        headers.update(signed_headers(data, secret=SEAM_SECRET))
    return {
        "method": draw(METHODS),
        "path": path,
        "data": data,
        "content_type": content_type,
        "headers": headers,
    }


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# --- the assertions -------------------------------------------------------------------------------


def resolved_name(path: str) -> str | None:
    try:
        return resolve(path).view_name
    except Resolver404:
        return None


def check(route: Route, who: str, method: str, response) -> None:
    """The properties every answer keeps (an exception escaping the view already failed)."""
    status = response.status_code
    where = f"{method} {response.wsgi_request.get_full_path()[:300]!r} as {who}"
    assert status < 500, (where, status, response.content[:500])
    if resolved_name(response.wsgi_request.path_info) != route.name:
        return  # the path did not reach the route (the resolver's 404)
    if route.name in JSON_ROUTES and method != "HEAD":
        assert response["Content-Type"].startswith("application/json"), (where, status)
        body = json.loads(response.content)
        if status >= 400:
            assert isinstance(body["error"]["code"], str), (where, body)
    if route.name in TOKEN_ROUTES and method == "GET":
        assert "no-store" in response.get("Cache-Control", ""), (where, status)
    if route.name.startswith("desk:") and not who.startswith("desk"):
        assert not 200 <= status < 300, (where, status)


def send(client: Client, method: str, path: str, **kwargs):
    """One request in its own savepoint: a database error in one request (the test client
    re-raises it) must not leave the test's transaction aborted for the next ones."""
    # An exception that escaped Django's handler entirely (an error view failing too) stays on
    # the client and would be raised by its next request: forget it, each request is its own.
    client.exc_info = None
    with transaction.atomic():
        return client.generic(method, path, **kwargs)


def survey(cases) -> list[str]:
    """Send each (route, who, client, method, path, kwargs) and check the answer; the failures
    (a broken property, or the exception that escaped), one line each."""
    failures = []
    for route, who, client, method, path, kwargs in cases:
        try:
            check(route, who, method, send(client, method, path, **kwargs))
        except Exception as error:
            failures.append(f"{method} {route} as {who}: {type(error).__name__}: {error}"[:400])
    return failures


# --- the fuzz -------------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["anonymous", "desk"])
@pytest.mark.parametrize("route", ROUTES, ids=str)
@FUZZ
@given(data=st.data())
def test_every_route_answers_hostile_requests_without_a_server_error(world, route, who, data):
    request = data.draw(requests(route, world))
    csrf = data.draw(st.integers(0, 3)) == 0  # mostly without: the view itself runs more often
    response = send(
        world.clients[who + ("-csrf" if csrf else "")],
        request["method"],
        request["path"],
        data=request["data"],
        content_type=request["content_type"],
        headers=request["headers"],
    )
    check(route, who, request["method"], response)


def test_the_valid_requests_reach_the_deep_paths(world):
    """The baseline the fuzz mutates: the real tokens open their pages, the real barcode scans,
    a well-formed registration is taken (else the fuzz would only ever see 404s)."""
    anonymous, desk = world.clients["anonymous"], world.clients["desk"]
    for purpose in ("tickets", "order"):
        page = anonymous.get(f"/my-tickets/{world.tokens[purpose]}/")
        assert page.status_code == 200, purpose
        assert anonymous.get(f"/my-tickets/{world.tokens[purpose]}/cancel").status_code == 200
    assert anonymous.get(f"/ics/{world.tokens['ics']}.ics").status_code == 200
    assert anonymous.get(f"/waitlist/offer/{world.tokens['offer']}/").status_code == 200
    scan = desk.post(
        "/desk/api/scan",
        {"barcode": world.scanned.barcode, "event_id": world.desk_event.pk},
        content_type="application/json",
    )
    assert scan.status_code == 200 and scan.json()["status"] == "confirmed_registration"
    intake = anonymous.post(
        f"/api/v1/events/{world.event.pk}/registrations",
        {"ticket_id": world.ticket.pk, "attendees": [{"name": "Ada", "email": "a@example.org"}]},
        content_type="application/json",
        headers={"Idempotency-Key": "fuzz-baseline"},
    )
    assert intake.status_code == 201, intake.content
    joined = anonymous.post(
        f"/api/v1/events/{world.full.pk}/waitlist",
        {"name": "Bea", "email": "bea@example.org"},
        content_type="application/json",
    )
    assert joined.status_code == 201, joined.content
    counters = desk.get(f"/desk/api/events/{world.desk_event.pk}/counters")
    assert counters.json()["attended"] == 1


# --- deterministic probes: the cases a small fuzz budget may miss ---------------------------------
# Each one sends its requests route after route in one test (one world: the budget) and lists
# every failing route at once.


def test_deeply_nested_json_is_refused_not_a_500(world):
    """Every route, both visitors, a JSON body 1,000 and 100,000 levels deep (D1: the desk's
    verbs answered 500)."""
    cases = [
        (
            route,
            who,
            world.clients[who],
            "POST",
            real_path(route, world),
            {"data": deep(depth).encode(), "content_type": "application/json"},
        )
        for route in ROUTES
        for who in ("anonymous", "desk")
        for depth in (1_000, 100_000)
    ]
    failures = survey(cases)
    assert not failures, "\n".join(failures)


PARSE_REFUSALS = {"The body must be a JSON object.", "The body is not JSON."}
NESTED_ROUTES = ("api-intake", "api-waitlist", "desk:api-scan", "desk:api-confirm", "seam-sale")


def _post_nested(route: Route, world: World, depth: int):
    """A valid request of the route (a fresh Idempotency-Key; signed for the seam) carrying
    `depth` levels of nesting in a field nobody reads; as the desk user, whose client answers
    an escaped exception as a 500."""
    body = full_body(route.name, world, deep(depth))
    headers = {"Idempotency-Key": f"fuzz-deep-{next(_keys)}"}
    if route.name == "seam-sale":
        headers.update(signed_headers(body, secret=SEAM_SECRET))
    path = real_path(route, world)
    if route.name == "api-waitlist":
        path = path.replace(str(world.event.pk), str(world.full.pk))
    return send(
        world.clients["desk-quiet"],
        "POST",
        path,
        data=body,
        content_type="application/json",
        headers=headers,
    )


def _answered(response) -> bool:
    """Neither a 5xx nor the route's "not JSON" refusal: the body was parsed and the request
    went on (a later refusal is fine)."""
    if response.status_code >= 500:
        return False
    try:
        error = json.loads(response.content).get("error") or {}
    except ValueError:
        return True
    return error.get("message") not in PARSE_REFUSALS


def test_nesting_just_under_the_parser_limit_is_not_a_500(world):
    """How deep a body each JSON route still parses depends on the stack it parses on: the
    deepest nesting answered normally is found by bisection, then valid requests carrying about
    that much nesting in an unread field (and an Idempotency-Key) must not answer a 5xx (D2:
    the intake's fingerprint ran out of stack after the booking; D1 for the desk verbs)."""
    failures = []
    for name in NESTED_ROUTES:
        route = BY_NAME[name]
        low, high = 1, sys.getrecursionlimit() + 100  # answered at `low`, not at `high`
        assert _answered(_post_nested(route, world, low)), name
        assert not _answered(_post_nested(route, world, high)), name
        while high - low > 1:
            middle = (low + high) // 2
            if _answered(_post_nested(route, world, middle)):
                low = middle
            else:
                high = middle
        for depth in range(low - 8, low + 5):
            response = _post_nested(route, world, depth)
            if response.status_code >= 500:
                failures.append(
                    f"{name}: depth {depth} (deepest normal answer: {low}): "
                    f"{response.status_code} {response.content[:120]!r}"
                )
    assert not failures, "\n".join(failures)


def test_an_escaped_control_character_in_a_cookie_is_not_a_500(world):
    """Every route, GET and POST, anonymous, with cookies an HTTP server passes on (printable
    ASCII) that Django's cookie parser unescapes: `\\000` becomes a NUL (D3: the session
    lookup raised DataError on every route reading `request.user`)."""
    cookies = [
        'sessionid="abcdefgh\\000ijkl"',
        'csrftoken="\\000"',
        'sessionid="ab\\377\\376cdefgh"',
    ]
    cases = [
        (
            route,
            "anonymous",
            Client(),
            method,
            real_path(route, world),
            {"data": b"{}", "content_type": "application/json", "headers": {"Cookie": cookie}},
        )
        for route in ROUTES
        for cookie in cookies
        for method in ("GET", "POST")
    ]
    failures = survey(cases)
    assert not failures, "\n".join(failures)


def test_a_form_post_declaring_another_charset_is_not_a_500(world):
    """Every route: a form body declared in another charset, with a well-formed CSRF cookie (the
    CSRF check only reads the body when a cookie is there). A browser never sends it; anyone can.

    D4: every route that checks CSRF (the global middleware, the token routes' own
    `csrf_protect`, the desk API's check) answered 500: Django's `_load_post_and_files` raises
    BadRequest without marking the parse as failed, and its error pages read request.POST again
    through `requires_csrf_token`. A 400 now (JSON `invalid_value` from the desk API)."""
    client = Client(enforce_csrf_checks=True)  # as in production: the CSRF check runs
    client.cookies["csrftoken"] = "a" * 32
    cases = [
        (
            route,
            "anonymous",
            client,
            "POST",
            real_path(route, world),
            {
                "data": b"name=Ada",
                "content_type": "application/x-www-form-urlencoded; charset=latin-1",
                "headers": {"X-CSRFToken": "a" * 32},
            },
        )
        for route in ROUTES
    ]
    failures = survey(cases)
    assert not failures, "\n".join(failures)

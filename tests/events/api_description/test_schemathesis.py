"""Schemathesis against the served stack: every operation of GET /api/v1/openapi.json, with
Schemathesis' default checks (server errors, status codes, content types, response schemas and
headers, positive and negative data, missing headers, unsupported methods, …), on a real
gunicorn (tests/stack.py `Web`: the Procfile's server on the test database, per-client limits
lifted) with data the ids can name.

So that the fuzzing reaches past the first refusals, the test steers part of the generated
cases, deterministically from the generated values: a path `event_id` and the catalog's `event`
often name a seeded event, an intake or waiting-list body often names the event's ticket, a
scan often names a real barcode; the desk operations carry a signed-in staff session and its
CSRF token, and the seam's messages a valid Standard Webhooks signature over the generated body
(when the generated headers are valid ones: a negative header case goes out as generated).

One check is configured, not switched off: `positive_data_acceptance` also expects 400 on the
operations whose pinned 400 answers cover what no request schema can state
(`BEYOND_THE_SCHEMA`): stored data (a ticket of another event `invalid_ticket`, an answer to a
question the event does not have `invalid_answer`, a slot of another event `invalid_slot`) and
rules across fields (a seam line with more attendees than its quantity, two lines with one
ref).

The number of cases per operation is asserted (at least MIN_CASES) and written to
test-output/schemathesis-cases.txt, which the terminal summary prints (tests/conftest.py).
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
import schemathesis
from django.contrib.auth.models import Group
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client
from django.utils import timezone
from schemathesis.config import SchemathesisConfig
from schemathesis.core.parameters import ParameterLocation
from standardwebhooks.webhooks import Webhook

from tests.booths import factories as booth_factories
from tests.events import factories
from tests.seams.host import new_secret
from tests.stack import Web

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
CASES_FILE = ROOT / "test-output" / "schemathesis-cases.txt"
MAX_EXAMPLES = (
    20  # the fuzzing phase's, per operation (the examples and coverage phases add theirs)
)
MIN_CASES = 30
# See the module docstring: operation → why a schema-valid request may get a 400.
BEYOND_THE_SCHEMA = {
    "registerAttendees": "the event's tickets, slots, questions and per-order limit",
    "joinWaitingList": "the event's tickets and slots",
    "deskScan": "the slots of the desk's event; a scan's time within the last day, the "
    "snapshot's signature",
    "deskCounters": "the slots of the event",
    "receiveSaleMessage": "attendees at most `quantity`, line refs unique in an order",
}
SEAM = "/seams/v1/sale"
CASES: Counter[str] = Counter()  # generated cases per operation, over this module's run
STATUSES: dict[str, Counter[int]] = {}  # the answers' statuses per operation
CODES: dict[str, Counter[str]] = defaultdict(Counter)  # the 400 answers' codes per operation
# Answers the steering must reach (the fuzzing is not only the refusals).
DEEP = {
    "POST /api/v1/events/{event_id}/registrations": 201,
    "POST /api/v1/events/{event_id}/waitlist": 201,
    "POST /desk/api/scan": 200,
    "POST /desk/api/confirm": 200,
    "GET /desk/api/events/{event_id}/counters": 200,
    "GET /desk/api/events/{event_id}/snapshot": 200,
    "GET /api/v1/catalog/linked-products": 200,
    "GET /api/v1/catalog/booths": 200,
    "POST /seams/v1/sale": 200,
}


def config() -> SchemathesisConfig:
    return SchemathesisConfig.from_dict(
        {
            "seed": 20_260_101,
            "generation": {"max-examples": MAX_EXAMPLES},
            "request-timeout": 30,
            "operations": [
                {
                    "include-operation-id": operation_id,
                    "checks": {
                        "positive_data_acceptance": {
                            "expected-statuses": [
                                "2xx",
                                "3xx",
                                "400",
                                "401",
                                "403",
                                "404",
                                "409",
                                "429",
                                "5xx",
                            ]
                        }
                    },
                }
                for operation_id in BEYOND_THE_SCHEMA
            ],
        }
    )


class Served:
    """The served stack and the seeded rows the steering names."""

    def __init__(self, web: Web, secret: str, seeded: dict) -> None:
        self.web = web
        self.base_url = f"http://127.0.0.1:{web.port}"
        self.secret = secret
        self.seeded = seeded
        self.session = requests.Session()

    def event_for(self, path: str) -> int:
        if path.endswith("/waitlist"):
            return self.seeded["waitlist_event"]
        if path.startswith("/desk/"):
            return self.seeded["desk_event"]
        return self.seeded["event"]


def _pick(value, choices: list) -> object:
    """A seeded value for most generated values (3 in 4), the generated one otherwise."""
    key = value if isinstance(value, int) else len(json.dumps(value, default=str))
    return value if key % 4 == 0 else choices[key % len(choices)]


@pytest.fixture
def served(transactional_db, tmp_path, monkeypatch):
    from django.db import connections

    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    now = timezone.now()
    event = factories.EventFactory(name="Fuzzed summit", seats_limited=True, seats_max=100_000)
    ticket = factories.TicketFactory(event=event, name="Community")
    factories.QuestionFactory(event=event, title="Diet")
    sold_out = factories.EventFactory(name="Sold out", seats_limited=True, seats_max=1)
    sold_out_ticket = factories.TicketFactory(event=sold_out, name="Last seat")
    factories.RegistrationFactory(event=sold_out, ticket=sold_out_ticket)
    ongoing = factories.EventFactory(
        name="At the door", date_begin=now - timedelta(hours=1), date_end=now + timedelta(hours=8)
    )
    at_door = factories.TicketFactory(event=ongoing, name="Door")
    registrations = [
        factories.RegistrationFactory(event=ongoing, ticket=at_door, barcode=f"77000000000{i}")
        for i in range(40)
    ]
    booth_factories.BoothFactory(event=event, name="Stand 1")
    user = factories.UserFactory(username="fuzz-door", password="fuzz-door-pw-for-tests")
    user.groups.add(Group.objects.get(name="Event desk"))
    client = Client()
    client.force_login(user)
    secret = new_secret()
    seeded = {
        "event": event.pk,
        "ticket": ticket.pk,
        "waitlist_event": sold_out.pk,
        "waitlist_ticket": sold_out_ticket.pk,
        "desk_event": ongoing.pk,
        "barcodes": [r.barcode for r in registrations],
        "registrations": [r.pk for r in registrations],
        "events": [event.pk, sold_out.pk, ongoing.pk],
        "session": client.cookies["sessionid"].value,
        "csrf": _get_new_csrf_string(),
    }
    web = Web(tmp_path, "web", {"EVENT_SEAM_SECRET": secret})
    try:
        web.wait_ready(time.monotonic() + 60)
        yield Served(web, secret, seeded)
    finally:
        web.stop()


@pytest.fixture
def api_schema(served):
    """The served document, loaded as data: loaded from its URL, Schemathesis would leave out
    the operation that serves it (GET /api/v1/openapi.json), which is fuzzed with the rest."""
    document = requests.get(f"{served.base_url}/api/v1/openapi.json", timeout=30).json()
    schema = schemathesis.openapi.from_dict(document, config=config())
    schema.config.update(base_url=served.base_url)
    return schema


schema = schemathesis.pytest.from_fixture("api_schema")


def steer(case, served: Served) -> None:
    """Point part of the generated values at seeded rows (see the module docstring)."""
    meta = case.meta
    seeded = served.seeded
    negative_path = meta is not None and meta.is_negative_at(ParameterLocation.PATH)
    if case.path_parameters and "event_id" in case.path_parameters and not negative_path:
        value = case.path_parameters["event_id"]
        if _pick(value, [0, 1, 2]) != value:
            case.path_parameters["event_id"] = served.event_for(case.operation.path)
    negative_query = meta is not None and meta.is_negative_at(ParameterLocation.QUERY)
    if case.query and "event" in case.query and not negative_query:
        value = case.query["event"]
        if _pick(value, [0, 1, 2]) != value:
            case.query["event"] = str(seeded["events"][len(str(value)) % 3])
    negative_body = meta is not None and meta.is_negative_at(ParameterLocation.BODY)
    body = case.body
    if negative_body or not isinstance(body, dict):
        return
    label = case.operation.path
    if label.endswith("/registrations") and _pick(body.get("ticket_id"), [0]) == 0:
        body.update(ticket_id=seeded["ticket"], slot_id=None)
        for attendee in body.get("attendees") or []:
            if isinstance(attendee, dict):
                attendee.pop("answers", None)
    elif label.endswith("/waitlist") and _pick(body.get("ticket_id"), [0]) == 0:
        body.update(ticket_id=seeded["waitlist_ticket"], slot_id=None)
    elif label == "/desk/api/scan" and isinstance(body.get("barcode"), str):
        body["barcode"] = _pick(body["barcode"], seeded["barcodes"])
    elif label == "/desk/api/confirm" and isinstance(body.get("registration_id"), int):
        body["registration_id"] = _pick(body["registration_id"], seeded["registrations"])


def sign(case, served: Served) -> None:
    """A valid signature over the generated body, when the generated headers are valid."""
    meta = case.meta
    if meta is not None and meta.is_negative_at(ParameterLocation.HEADER):
        return
    headers = case.headers or {}
    if not {"webhook-id", "webhook-timestamp", "webhook-signature"} <= set(headers):
        return
    if case.media_type not in (None, "application/json") or not isinstance(
        case.body, dict | list | str | int | float | bool | None
    ):
        return  # another encoding, or no body at all
    # As requests serialises `json=` (schemathesis' JSON transport).
    body = json.dumps(case.body, allow_nan=False)
    at = datetime.now(tz=UTC)
    headers["webhook-timestamp"] = str(int(at.timestamp()))
    headers["webhook-signature"] = Webhook(served.secret).sign(
        msg_id=headers["webhook-id"], timestamp=at, data=body
    )


@schema.parametrize()
def test_every_operation_against_the_served_stack(case, served):
    run(case, served)


def run(case, served: Served) -> None:
    CASES[case.operation.label] += 1
    steer(case, served)
    if case.operation.path == SEAM:
        sign(case, served)
    cookies = {}
    headers = {}
    if case.operation.path.startswith("/desk/api/"):
        # The session only where the case carries one (a case without it tests the refusal).
        negative_cookie = case.meta is not None and case.meta.is_negative_at(
            ParameterLocation.COOKIE
        )
        if case.cookies and "sessionid" in case.cookies and not negative_cookie:
            case.cookies["sessionid"] = served.seeded["session"]
        cookies = {"csrftoken": served.seeded["csrf"]}
        headers = {"X-CSRFToken": served.seeded["csrf"]}
    response = case.call(
        base_url=served.base_url, session=served.session, headers=headers, cookies=cookies
    )
    STATUSES.setdefault(case.operation.label, Counter())[response.status_code] += 1
    if response.status_code == 400:
        CODES[case.operation.label][response.json()["error"]["code"]] += 1
    case.validate_response(response, headers=headers, transport_kwargs={"cookies": cookies})


def test_every_operation_got_enough_cases():
    """After the runs above: each operation of the document got its cases, at least MIN_CASES
    for an operation with inputs (one without, /healthz and the document, has a handful of
    distinct requests to make)."""
    lines = [
        f"{count:5d}  {label}  (answers: "
        + ", ".join(f"{status}×{n}" for status, n in sorted(STATUSES.get(label, {}).items()))
        + ")"
        for label, count in sorted(CASES.items())
    ]
    report = "Schemathesis cases per operation\n" + "\n".join(lines) + "\n"
    report += "400 answers by code: " + json.dumps(CODES, sort_keys=True) + "\n"
    CASES_FILE.parent.mkdir(exist_ok=True)
    CASES_FILE.write_text(report)
    without_inputs = {"GET /healthz", "GET /api/v1/openapi.json"}
    assert len(CASES) == 11, report
    assert all(CASES[label] >= 1 for label in without_inputs), report
    assert all(n >= MIN_CASES for label, n in CASES.items() if label not in without_inputs), report
    assert all(STATUSES[label][status] > 0 for label, status in DEEP.items()), report
